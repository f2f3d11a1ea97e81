package core

import "github.com/tidwall/btree"

// family is one tenant's lease universe inside the broker. Leases, queues
// and the inventory index of two families never meet.
type family struct {
	name   string
	leases map[string]*lease // held leases by route key
	queues map[string]*queue // non-empty wait queues by route key
	// held orders the current Items by key. Copy is O(1) copy-on-write:
	// an inventory snapshot is a copy, unaffected by later changes.
	held *btree.BTreeG[*Item]
}

func (s *State) family(name string) *family {
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
