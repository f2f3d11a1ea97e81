package core

import (
	"github.com/tidwall/btree"

	"github.com/musterhq/muster"
)

// family is one tenant's lease universe inside the broker. Leases, queues
// and the inventory index of two families never meet.
type family struct {
	name   Family
	leases map[string]*lease // held leases by route key
	queues map[string]*queue // non-empty wait queues by route key
	// held orders the current Items by key. Copy is O(1) copy-on-write:
	// an inventory snapshot is a copy, unaffected by later changes. It is
	// brought up to date before it is read (applyStale): grants, renewals
	// and removals are noted in stale, in order, and applied then.
	held  *btree.BTreeG[*Item]
	stale []*lease
	// place is the family's serving state in a placed core.
	place placement
	// salts counts the pending sessions by handover salt (handover.go).
	salts map[[SaltLen]byte]int
}

func (s *State) family(name Family) *family {
	f := s.families[name]
	if f == nil {
		f = &family{
			name:   name,
			leases: make(map[string]*lease),
			queues: make(map[string]*queue),
			held:   btree.NewBTreeGOptions(itemLess, btree.Options{NoLocks: true}),
		}
		s.families[name] = f
	}
	return f
}

// lookup finds the held lease of r without allocating its key: the key is
// assembled in a stack buffer, and indexing a map with string(bytes) does
// not copy.
func (f *family) lookup(r Route) *lease {
	var buf [3*muster.MaxSegmentLen + 2]byte
	b := append(buf[:0], r.Realm...)
	b = append(b, '/')
	b = append(b, r.Area...)
	b = append(b, '/')
	b = append(b, r.Resource...)
	return f.leases[string(b)]
}

// maxStale bounds a family's list of changes to its held index, holes
// included. At the bound the holes go, and when half of it is still
// waiting, the older half of the waiting changes is applied: the step that
// reads the tree applies at most maxStale changes (about a millisecond).
// A family whose leases live shorter than maxStale/2 changes of its own
// (the batch benchmark's 32 clients hold at most 2,048) keeps them all
// out of the tree.
const maxStale = 4096

// The held index is maintained lazily. Every read of f.held (cloneHeld,
// the only one) applies the noted changes first, so a snapshot is the
// held set at its revision exactly as if each change had been applied at
// once. A lease is noted (staleIdx > 0) when it is granted, renewed or
// imported, and when it ends with its key in the tree; a lease that ends
// before its grant reached the tree leaves a hole on the list and never
// enters the tree. The list keeps no ended lease that is not in the tree.

// noteHeld notes that l, a held lease, has a new Item (a grant, a
// renewal, an import) to put in the tree.
func (f *family) noteHeld(l *lease) {
	if l.staleIdx != 0 {
		return
	}
	if len(f.stale) >= maxStale {
		f.trimStale()
	}
	f.stale = append(f.stale, l)
	l.staleIdx = int32(len(f.stale))
}

// noteGone notes that l ended: its key leaves the tree, if it is there.
// l must be out of f.leases already; a later grant of the same key is
// noted after it, so the removal is applied first.
func (f *family) noteGone(l *lease) {
	l.fam = nil // ended
	switch {
	case l.inTree:
		f.noteHeld(l)
	case l.staleIdx != 0:
		f.stale[l.staleIdx-1] = nil
		l.staleIdx = 0
	}
}

// applyStale applies every noted change, in order.
func (f *family) applyStale() { f.applyFirst(len(f.stale)) }

// applyFirst applies the first n entries of the list, in order (a lease
// still held puts its current Item in the tree, one that ended takes its
// key out), and keeps the rest.
func (f *family) applyFirst(n int) {
	for _, l := range f.stale[:n] {
		if l == nil {
			continue
		}
		l.staleIdx = 0
		if l.fam != nil {
			f.held.Set(l.item)
			l.inTree = true
		} else {
			f.held.Delete(l.item)
			l.inTree = false
		}
	}
	f.stale = f.compactStale(f.stale[n:])
}

// trimStale makes room on a full list: the holes go, and the older half
// of what is left is applied when more than half of maxStale waits.
func (f *family) trimStale() {
	f.stale = f.compactStale(f.stale)
	if len(f.stale) > maxStale/2 {
		f.applyFirst(len(f.stale) / 2)
	}
}

// compactStale moves the entries of rest, without holes, to the front of
// f.stale and returns them.
func (f *family) compactStale(rest []*lease) []*lease {
	out := f.stale[:0]
	for _, l := range rest {
		if l != nil {
			out = append(out, l)
			l.staleIdx = int32(len(out))
		}
	}
	clear(f.stale[len(out):cap(f.stale)])
	return out
}
