package core

// leaseHeap is an intrusive min-heap of leases by expiry: each lease stores
// its own index, so re-keying on renewal is O(log n) with no side map. Each
// entry carries its lease's expiry, so sifting compares within the heap's
// own array instead of loading every lease and its Item.
type leaseHeap []heapEntry

type heapEntry struct {
	at int64 // l.item.expiresAt when the entry was last placed
	l  *lease
}

func (h *leaseHeap) push(l *lease) {
	i := len(*h)
	l.heapIdx = int32(i)
	*h = append(*h, heapEntry{at: l.item.expiresAt, l: l})
	h.up(i)
}

func (h *leaseHeap) remove(l *lease) {
	i := int(l.heapIdx)
	n := len(*h) - 1
	if i != n {
		h.swap(i, n)
	}
	(*h)[n] = heapEntry{}
	*h = (*h)[:n]
	l.heapIdx = -1
	if i != n {
		h.fix(i)
	}
}

// moved re-keys l after its expiry changed (a renewal).
func (h leaseHeap) moved(l *lease) {
	i := int(l.heapIdx)
	h[i].at = l.item.expiresAt
	h.fix(i)
}

func (h leaseHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// peek returns the lease that expires first, or nil.
func (h leaseHeap) peek() *lease {
	if len(h) == 0 {
		return nil
	}
	return h[0].l
}

func (h leaseHeap) less(i, j int) bool { return h[i].at < h[j].at }

func (h leaseHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].l.heapIdx = int32(i)
	h[j].l.heapIdx = int32(j)
}

func (h leaseHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			return
		}
		h.swap(i, j)
		j = i
	}
}

func (h leaseHeap) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			break
		}
		if r := j + 1; r < n && h.less(r, j) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
