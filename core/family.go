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
	// an inventory snapshot is a copy, unaffected by later changes.
	held *btree.BTreeG[*Item]
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
