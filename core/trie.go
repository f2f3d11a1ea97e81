package core

// trieNode is one node of the wildcard subscription index: a segment trie
// with literal, `*` (one segment) and `**` (zero or more segments) edges.
// Matching a route walks only the edges the route's segments can take, so
// the cost of one change grows with the registrations it matches (and the
// distinct patterns along its path), not with all registrations.
type trieNode struct {
	lit   map[string]*trieNode
	star  *trieNode
	dstar *trieNode
	regs  []*registration
}

func (n *trieNode) child(seg string, create bool) *trieNode {
	var c **trieNode
	switch seg {
	case "*":
		c = &n.star
	case "**":
		c = &n.dstar
	default:
		if n.lit == nil {
			if !create {
				return nil
			}
			n.lit = map[string]*trieNode{}
		}
		if m := n.lit[seg]; m != nil || !create {
			return m
		}
		m := &trieNode{}
		n.lit[seg] = m
		return m
	}
	if *c == nil && create {
		*c = &trieNode{}
	}
	return *c
}

func (n *trieNode) insert(segs []string, r *registration) {
	for _, s := range segs {
		n = n.child(s, true)
	}
	n.regs = append(n.regs, r)
}

// remove deletes r and prunes nodes left empty; it reports whether n itself
// is now empty.
func (n *trieNode) remove(segs []string, r *registration) bool {
	if len(segs) == 0 {
		for i, x := range n.regs {
			if x == r {
				last := len(n.regs) - 1
				n.regs[i] = n.regs[last]
				n.regs[last] = nil
				n.regs = n.regs[:last]
				break
			}
		}
	} else if c := n.child(segs[0], false); c != nil && c.remove(segs[1:], r) {
		switch segs[0] {
		case "*":
			n.star = nil
		case "**":
			n.dstar = nil
		default:
			delete(n.lit, segs[0])
		}
	}
	return len(n.regs) == 0 && len(n.lit) == 0 && n.star == nil && n.dstar == nil
}

// match calls fn for every registration whose pattern matches segs[i:].
// A registration reachable along several `**` splits is reported once per
// call: stamp is unique per call and marks what was reported.
func (n *trieNode) match(segs []string, i int, stamp uint64, fn func(*registration)) {
	if i == len(segs) {
		for _, r := range n.regs {
			if r.stamp != stamp {
				r.stamp = stamp
				fn(r)
			}
		}
	} else {
		if c := n.lit[segs[i]]; c != nil {
			c.match(segs, i+1, stamp, fn)
		}
		if n.star != nil {
			n.star.match(segs, i+1, stamp, fn)
		}
	}
	if n.dstar != nil {
		for j := i; j <= len(segs); j++ {
			n.dstar.match(segs, j, stamp, fn)
		}
	}
}
