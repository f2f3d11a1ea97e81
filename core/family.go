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

// maxStale bounds the changes a family's held index waits with: at most
// that many tree updates in the step that reads it, and that many leases
// (with their Items) kept by the list after they end.
const maxStale = 1024

// The held index is maintained lazily. Every read of f.held (cloneHeld,
// the only one) applies the noted changes first, so a snapshot is the
// held set at its revision exactly as if each change had been applied at
// once. A lease that ends before the next read, or before maxStale other
// changes, never enters the tree: a lease's key is in the tree (inTree)
// or the lease is on the list (stale), or both while a change waits.

// noteHeld notes that l, a held lease, has a new Item (a grant, a
// renewal, an import) to put in the tree.
func (f *family) noteHeld(l *lease) {
	if !l.stale {
		l.stale = true
		f.stale = append(f.stale, l)
		if len(f.stale) >= maxStale {
			f.applyStale()
		}
	}
}

// noteGone notes that l ended: its key leaves the tree, if it is there.
// l must be out of f.leases already; a later grant of the same key is
// noted after it, so the removal is applied first.
func (f *family) noteGone(l *lease) {
	if l.inTree {
		f.noteHeld(l)
	}
}

// applyStale applies the noted changes in order: a lease that is still
// f's holder of its key puts its current Item in the tree, one that ended
// takes its key out.
func (f *family) applyStale() {
	for i, l := range f.stale {
		f.stale[i] = nil
		l.stale = false
		switch {
		case f.leases[l.item.key] == l:
			f.held.Set(l.item)
			l.inTree = true
		case l.inTree:
			f.held.Delete(l.item)
			l.inTree = false
		}
	}
	f.stale = f.stale[:0]
}
