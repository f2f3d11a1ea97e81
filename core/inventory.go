package core

import (
	"container/list"
	"strings"
	"time"

	"github.com/tidwall/btree"

	"github.com/musterhq/muster"
)

// Inventory limits (design §6).
const (
	DefaultPageLimit       = 100
	MaxPageLimit           = 500
	DefaultPageBytes       = 256 << 10
	DefaultExaminedBudget  = 10_000
	DefaultSnapshotIdle    = 120 * time.Second
	DefaultMaxSnapshots    = 1024
	DefaultCallerSnapshots = 64
)

// Snapshot is an immutable view of one family's held leases at one
// revision: an O(1) copy-on-write clone of the family's B-tree. It is safe
// to read from any goroutine while the actor goes on changing the family.
type Snapshot struct {
	ID       SnapshotID
	Family   Family
	Revision Revision
	tree     *btree.BTreeG[*Item]

	caller   string
	lastUsed time.Time
	elem     *list.Element
}

// snapshots is the registry of open snapshots: an LRU list, caps per broker
// and per caller, and an idle timeout.
type snapshots struct {
	byID     map[SnapshotID]*Snapshot
	lru      *list.List // front: most recently used
	perCall  map[string]int
	perFam   map[Family]int
	next     SnapshotID
	max      int
	perLimit int
	idle     time.Duration
}

func newSnapshots(max, perCaller int, idle time.Duration) *snapshots {
	return &snapshots{byID: map[SnapshotID]*Snapshot{}, lru: list.New(), perCall: map[string]int{}, perFam: map[Family]int{}, max: max, perLimit: perCaller, idle: idle}
}

// OpenSnapshot clones the family's held set at the current revision after
// processing due expiry, and registers it for later pages. When the caps
// are reached, the least recently used snapshot (of the caller first, then
// of the family when it holds its quota, then of anyone) is evicted. caller
// names who owns the snapshot for the per-caller cap.
func (s *State) OpenSnapshot(now time.Time, fam Family, caller string) *Snapshot {
	s.expireDue(now)
	return s.openSnapshot(now, fam, caller, s.famRevOf(fam), s.cloneHeld(fam))
}

// openSnapshot registers tree, the family's held set at rev, under the caps.
func (s *State) openSnapshot(now time.Time, fam Family, caller string, rev Revision, tree *btree.BTreeG[*Item]) *Snapshot {
	r := s.snaps
	r.expireIdle(now, &s.stats)
	if r.perCall[caller] >= r.perLimit {
		r.evictOldest(func(sn *Snapshot) bool { return sn.caller == caller }, &s.stats)
	}
	u := s.use(fam)
	if q := s.quota(fam).Snapshots; q > 0 && r.perFam[fam] >= q {
		r.evictOldest(func(sn *Snapshot) bool { return sn.Family == fam }, &s.stats)
		u.SnapshotsEvicted++
	}
	if len(r.byID) >= r.max {
		r.evictOldest(func(*Snapshot) bool { return true }, &s.stats)
	}
	r.next++
	sn := &Snapshot{ID: r.next, Family: fam, Revision: rev, caller: caller, lastUsed: now, tree: tree}
	sn.elem = r.lru.PushFront(sn)
	r.byID[sn.ID] = sn
	r.perCall[caller]++
	r.perFam[fam]++
	s.stats.SnapshotsTaken++
	return sn
}

// cloneHeld is an O(1) copy-on-write clone of the family's held Items.
func (s *State) cloneHeld(fam Family) *btree.BTreeG[*Item] {
	if f := s.families[fam]; f != nil {
		f.applyStale()
		return f.held.Copy()
	}
	return btree.NewBTreeGOptions(itemLess, btree.Options{NoLocks: true})
}

var errCursorExpired = muster.Errorf(muster.CodeCursorExpired, "the snapshot behind this cursor is gone (idle timeout or eviction): start again from the first page")

// ResumeSnapshot finds the open snapshot id of the family and marks it
// used; a snapshot that is gone, or of another family, is cursor_expired.
func (s *State) ResumeSnapshot(now time.Time, fam Family, id SnapshotID) (*Snapshot, error) {
	r := s.snaps
	r.expireIdle(now, &s.stats)
	sn := r.byID[id]
	if sn == nil || sn.Family != fam {
		return nil, errCursorExpired
	}
	sn.lastUsed = now
	r.lru.MoveToFront(sn.elem)
	return sn, nil
}

func (r *snapshots) drop(sn *Snapshot) {
	delete(r.byID, sn.ID)
	r.lru.Remove(sn.elem)
	if r.perCall[sn.caller]--; r.perCall[sn.caller] == 0 {
		delete(r.perCall, sn.caller)
	}
	if r.perFam[sn.Family]--; r.perFam[sn.Family] == 0 {
		delete(r.perFam, sn.Family)
	}
}

func (r *snapshots) evictOldest(match func(*Snapshot) bool, st *Stats) {
	for e := r.lru.Back(); e != nil; e = e.Prev() {
		if sn := e.Value.(*Snapshot); match(sn) {
			r.drop(sn)
			st.SnapshotsEvicted++
			return
		}
	}
}

// expireIdle drops snapshots unused for longer than the idle timeout.
func (r *snapshots) expireIdle(now time.Time, st *Stats) {
	for e := r.lru.Back(); e != nil; {
		sn := e.Value.(*Snapshot)
		if now.Sub(sn.lastUsed) <= r.idle {
			return
		}
		e = e.Prev()
		r.drop(sn)
		st.SnapshotsExpired++
	}
}

// LookupResult is the answer of an exact-selector read: the route's Item,
// nil when the route is not held, and the family's revision it was read at
// (mvcc's RangeResult carries its revision the same way).
type LookupResult struct {
	Item     *Item
	Revision Revision
}

// Lookup is the exact-selector read: zero or one Item, after processing due
// expiry, whatever the inventory size.
func (s *State) Lookup(now time.Time, fam Family, r Route) LookupResult {
	s.expireDue(now)
	res := LookupResult{Revision: s.famRevOf(fam)}
	if f := s.families[fam]; f != nil {
		if l := f.lookup(r); l != nil {
			res.Item = l.item
		}
	}
	return res
}

// Budget bounds the work of one page.
type Budget struct {
	Limit    int // items
	Bytes    int // estimated encoded bytes of the items
	Examined int // entries looked at, seeks included
}

// PageResult is one page of a snapshot.
type PageResult struct {
	Items     []*Item
	After     string // position to resume from; "" with Done
	Done      bool
	Examined  int
	Exhausted bool // the examined budget ended the page
}

// itemSize estimates the JSON size of an item.
func itemSize(it *Item) int { return 190 + 2*len(it.key) + len(it.ownerID) + len(it.incarnation) }

// Page reads the next page of sel's matches strictly after the key after.
// It seeks to the selector's literal prefix and never scans what cannot
// match: with one depth-3 form it skips whole realms or areas whose literal
// segment differs. Every seek and every entry looked at counts against the
// examined budget; a page that spends it without a match returns zero items
// and a position, so paging always advances. Page only reads the immutable
// snapshot and may run on any goroutine.
func (sn *Snapshot) Page(sel Selector, after string, b Budget) PageResult {
	prefix := sel.Prefix()
	forms := sel.forms // read-only here: no copy per page
	var res PageResult
	var size int
	iter := sn.tree.Iter()
	defer iter.Release()
	pivot := &Item{key: max(after, prefix)}
	ok := iter.Seek(pivot)
	res.Examined++
	for ok {
		it := iter.Item()
		key := it.key
		if !strings.HasPrefix(key, prefix) {
			res.Done = true
			return res
		}
		if key == after {
			ok = iter.Next()
			continue
		}
		res.Examined++
		if sel.MatchesKey(key) {
			if len(res.Items) == b.Limit || (len(res.Items) > 0 && size+itemSize(it) > b.Bytes) {
				return res // res.After is the last key taken
			}
			res.Items = append(res.Items, it)
			size += itemSize(it)
			res.After = key
		} else {
			res.After = key
			if len(forms) == 1 {
				if next, skip := skipTo(forms[0], key); skip {
					if res.Examined >= b.Examined {
						res.Exhausted = true
						return res
					}
					res.Examined++
					ok = iter.Seek(&Item{key: next})
					continue
				}
			}
		}
		if res.Examined >= b.Examined {
			res.Exhausted = true
			return res
		}
		ok = iter.Next()
	}
	res.Done = true
	return res
}

// skipTo returns the smallest key after k that can match form, when it is
// beyond k's immediate successor: the skip-scan of a wildcard realm or area
// followed by a literal segment. Comparisons are in KEY order (segment plus
// "/"), which differs from segment order: "a-b/" sorts before "a/".
func skipTo(form [3]string, key string) (string, bool) {
	r := routeFromKey(key)
	segs := [3]string{r.Realm, r.Area, r.Resource}
	for i := 0; i < 3; i++ {
		lit := form[i]
		if lit == "*" || segs[i] == lit {
			continue
		}
		if i == 0 {
			return "", false // the prefix seek already bounds literal realms
		}
		parents := strings.Join(segs[:i], "/")
		seg, want := segs[i], lit
		if i < 2 {
			seg, want = seg+"/", want+"/"
		}
		if seg < want {
			return parents + "/" + want, true // forward to the literal under the same parents
		}
		return parents + string(rune('/'+1)), true // past it: skip the rest of these parents
	}
	return "", false
}
