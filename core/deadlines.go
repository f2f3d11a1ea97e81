package core

import (
	"container/heap"
	"time"
)

// deadlines is a min-heap of (key, deadline) with at most one entry per key.
// Setting the deadline of a present key re-keys its entry in place (no
// duplicates), like etcd's lease queue. Not safe for concurrent use.
type deadlines[K comparable] struct {
	items []deadline[K]
	index map[K]int
}

type deadline[K comparable] struct {
	key K
	at  time.Time
}

func newDeadlines[K comparable]() *deadlines[K] {
	return &deadlines[K]{index: make(map[K]int)}
}

// Set inserts key with deadline at, or moves its existing entry.
func (d *deadlines[K]) Set(key K, at time.Time) {
	if i, ok := d.index[key]; ok {
		d.items[i].at = at
		heap.Fix((*deadlineHeap[K])(d), i)
		return
	}
	heap.Push((*deadlineHeap[K])(d), deadline[K]{key: key, at: at})
}

// Remove drops key if present.
func (d *deadlines[K]) Remove(key K) {
	if i, ok := d.index[key]; ok {
		heap.Remove((*deadlineHeap[K])(d), i)
	}
}

// PopDue removes and returns the earliest key whose deadline is at or before
// now; ok is false when none is due.
func (d *deadlines[K]) PopDue(now time.Time) (key K, ok bool) {
	if len(d.items) == 0 || d.items[0].at.After(now) {
		return key, false
	}
	e := heap.Pop((*deadlineHeap[K])(d)).(deadline[K])
	return e.key, true
}

// Len is the number of entries.
func (d *deadlines[K]) Len() int { return len(d.items) }

// deadlineHeap adapts deadlines to container/heap.
type deadlineHeap[K comparable] deadlines[K]

func (h *deadlineHeap[K]) Len() int           { return len(h.items) }
func (h *deadlineHeap[K]) Less(i, j int) bool { return h.items[i].at.Before(h.items[j].at) }
func (h *deadlineHeap[K]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.index[h.items[i].key] = i
	h.index[h.items[j].key] = j
}
func (h *deadlineHeap[K]) Push(x any) {
	e := x.(deadline[K])
	h.index[e.key] = len(h.items)
	h.items = append(h.items, e)
}
func (h *deadlineHeap[K]) Pop() any {
	n := len(h.items) - 1
	e := h.items[n]
	h.items = h.items[:n]
	delete(h.index, e.key)
	return e
}
