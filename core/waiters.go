package core

import (
	"time"

	"github.com/musterhq/muster"
)

// waiter is one queued acquisition.
type waiter struct {
	ticket   Ticket
	sess     *session
	fam      *family
	key      string
	ttl      time.Duration
	queued   time.Time // when the acquisition arrived
	deadline time.Time
	next     *waiter // FIFO link
	removed  bool
}

// queue is the FIFO of waiters of one route. Removal from the middle is
// lazy: a removed waiter is skipped when it reaches the front.
type queue struct {
	head, tail *waiter
	len        int
}

// enqueue adds ss to the route's FIFO queue and returns its ticket.
func (s *State) enqueue(now time.Time, f *family, key string, ss *session, ttl, wait time.Duration) (Ticket, error) {
	q := f.queues[key]
	if q == nil {
		q = &queue{}
		f.queues[key] = q
	}
	for w := q.head; w != nil; w = w.next {
		if !w.removed && w.sess == ss {
			s.stats.AcquireAlreadyQueued++
			return 0, muster.Errorf(muster.CodeAlreadyQueued, "the session is already waiting for this lease")
		}
	}
	if q.len >= MaxWaitersPerKey {
		s.stats.AcquireQueueFull++
		return 0, muster.LimitErrorf(muster.CodeQueueFull, muster.ScopeRoute, "the wait queue of this lease is full (%d)", MaxWaitersPerKey)
	}
	u := s.use(ss.Family)
	if quota := s.quota(ss.Family).Waiters; over(u.Waiters, 1, quota) {
		s.stats.AcquireQueueFull++
		u.WaitersRefused++
		return 0, muster.LimitErrorf(muster.CodeQueueFull, muster.ScopeFamily, "the family holds its quota of %d waiting acquisitions", quota)
	}
	if len(s.waiters) >= s.cfg.MaxWaiters {
		s.stats.AcquireQueueFull++
		return 0, muster.LimitErrorf(muster.CodeQueueFull, muster.ScopeBroker, "the broker holds its maximum of %d waiting acquisitions", s.cfg.MaxWaiters)
	}
	s.nextTicket++
	w := &waiter{ticket: s.nextTicket, sess: ss, fam: f, key: key, ttl: ttl, queued: now, deadline: now.Add(wait)}
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
	q.len++
	s.waiters[w.ticket] = w
	u.Waiters++
	s.waitDue.Set(w.ticket, w.deadline)
	ss.waiters[w.ticket] = w
	s.stats.AcquireQueued++
	return w.ticket, nil
}

// dropWaiter takes w out of the wait structures (lazily out of its queue)
// and reports err to it unless err is nil (the requester left).
func (s *State) dropWaiter(w *waiter, err error) {
	if w.removed {
		return
	}
	w.removed = true
	delete(s.waiters, w.ticket)
	s.use(w.sess.Family).Waiters--
	delete(w.sess.waiters, w.ticket)
	s.waitDue.Remove(w.ticket)
	q := w.fam.queues[w.key]
	q.len--
	s.trimQueue(w.fam, w.key, q)
	if err != nil {
		s.results = append(s.results, WaitResult{Ticket: w.ticket, Err: err})
	}
}

// trimQueue pops removed waiters off the front and drops an empty queue.
func (s *State) trimQueue(f *family, key string, q *queue) {
	for q.head != nil && q.head.removed {
		q.head = q.head.next
	}
	if q.head == nil {
		q.tail = nil
		delete(f.queues, key)
	}
}

// grantNext grants the free route key to the first waiter whose session is
// live and whose wait has not ended.
func (s *State) grantNext(now time.Time, f *family, key string) {
	q := f.queues[key]
	for q != nil && q.head != nil {
		w := q.head
		switch {
		case now.After(w.sess.ExpiresAt):
			s.dropWaiter(w, muster.Errorf(muster.CodeSessionNotFound, "the session ended while waiting"))
		case now.After(w.deadline):
			s.stats.AcquireWaitTimeout++
			s.dropWaiter(w, muster.Errorf(muster.CodeWaitTimeout, "the lease was not granted within wait_ms"))
		default:
			s.dropWaiter(w, nil)
			g := s.grant(now, f, key, w.sess, w.ttl)
			g.ExpiresAfterRequest = now.Sub(w.queued) + w.ttl
			s.stats.AcquireGrantedAfterWait++
			s.results = append(s.results, WaitResult{Ticket: w.ticket, Grant: g})
			return
		}
		q = f.queues[key]
	}
}

// CancelWait removes a queued acquisition whose requester left. It reports
// false when the ticket is no longer queued: its result (possibly a grant
// the caller must roll back) has already been produced.
func (s *State) CancelWait(ticket Ticket) bool {
	w := s.waiters[ticket]
	if w == nil {
		return false
	}
	s.dropWaiter(w, nil)
	s.stats.WaitCancelled++
	return true
}

// timeoutWaiters ends every wait whose deadline is strictly before now.
func (s *State) timeoutWaiters(now time.Time) {
	for {
		t, ok := s.waitDue.PopDue(now.Add(-time.Nanosecond))
		if !ok {
			return
		}
		if w := s.waiters[t]; w != nil {
			s.stats.AcquireWaitTimeout++
			s.dropWaiter(w, muster.Errorf(muster.CodeWaitTimeout, "the lease was not granted within wait_ms"))
		}
	}
}
