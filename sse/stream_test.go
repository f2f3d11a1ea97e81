package sse

import (
	"strconv"
	"sync"
	"testing"
)

func ev(name, id string) Event { return Event{Name: name, ID: id, Data: []byte("{}")} }

func TestStreamEnd(t *testing.T) {
	s := NewStream(8)
	for i := range 3 {
		if !s.Offer(ev("change", strconv.Itoa(i))) {
			t.Fatalf("Offer %d refused", i)
		}
	}
	s.End(ev("unsubscribed", ""))
	s.End(ev("shutdown", "")) // the first terminal wins
	if s.Offer(ev("change", "late")) {
		t.Error("Offer after End accepted")
	}
	b := s.take(nil)
	if got := len(b.events); got != 3 {
		t.Errorf("queued %d events, want 3", got)
	}
	if !b.ending || b.overflow || b.final.Name != "unsubscribed" {
		t.Errorf("batch = ending %v, overflow %v, final %q; want the unsubscribed terminal", b.ending, b.overflow, b.final.Name)
	}
}

func TestStreamOverflow(t *testing.T) {
	s := NewStream(3)
	for i := range 3 {
		if !s.Offer(ev("change", strconv.Itoa(i))) {
			t.Fatalf("Offer %d refused", i)
		}
	}
	if s.Offer(ev("change", "3")) {
		t.Fatal("Offer into a full queue accepted")
	}
	s.End(ev("shutdown", "")) // overflow came first
	if s.Offer(ev("change", "4")) {
		t.Error("Offer after overflow accepted")
	}
	b := s.take(nil)
	if len(b.events) != 3 || !b.ending || !b.overflow {
		t.Errorf("batch = %d events, ending %v, overflow %v; want 3, overflow", len(b.events), b.ending, b.overflow)
	}
}

func TestStreamTakeRefills(t *testing.T) {
	// The writer's batch does not count against the capacity: after a take
	// the queue accepts capacity events again.
	s := NewStream(2)
	s.Offer(ev("a", ""))
	s.Offer(ev("b", ""))
	b := s.take(nil)
	if !s.Offer(ev("c", "")) || !s.Offer(ev("d", "")) {
		t.Fatal("queue not refilled after take")
	}
	if len(b.events) != 2 || b.events[0].Name != "a" || b.events[1].Name != "b" {
		t.Errorf("batch %s", formatEvents(b.events))
	}
	if b2 := s.take(b.events); len(b2.events) != 2 || b2.events[0].Name != "c" {
		t.Errorf("second batch %s", formatEvents(b2.events))
	}
}

func TestStreamClosed(t *testing.T) {
	s := NewStream(2)
	s.Offer(ev("a", ""))
	s.close()
	<-s.Done()
	if s.Offer(ev("b", "")) {
		t.Error("Offer after close accepted")
	}
	s.End(ev("shutdown", "")) // must not panic or block
	if b := s.take(nil); len(b.events) != 0 || b.ending {
		t.Errorf("closed stream still holds %d events, ending %v", len(b.events), b.ending)
	}
}

func TestStreamWake(t *testing.T) {
	s := NewStream(4)
	s.Offer(ev("a", ""))
	s.Offer(ev("b", "")) // does not need a second signal
	<-s.wake
	s.take(nil)
	s.Offer(ev("c", "")) // the queue became non-empty again: signal
	select {
	case <-s.wake:
	default:
		t.Fatal("no wake-up after the queue became non-empty")
	}
	s.End(ev("shutdown", ""))
	select {
	case <-s.wake:
	default:
		t.Fatal("no wake-up after End")
	}
}

// TestStreamConcurrentOffers checks with the race detector that offers from
// many goroutines keep each goroutine's order and lose nothing until the
// stream is drained.
func TestStreamConcurrentOffers(t *testing.T) {
	const producers, each = 8, 500
	s := NewStream(producers * each)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if !s.Offer(Event{Name: strconv.Itoa(p), ID: strconv.Itoa(i)}) {
					t.Errorf("producer %d: offer %d refused", p, i)
					return
				}
			}
		})
	}
	var got []Event
	var spare []Event
	for len(got) < producers*each {
		b := s.take(spare)
		got = append(got, b.events...)
		spare = b.events[:0]
		if t.Failed() {
			break
		}
	}
	wg.Wait()
	next := make([]int, producers)
	for _, e := range got {
		p, _ := strconv.Atoi(e.Name)
		if i, _ := strconv.Atoi(e.ID); i != next[p] {
			t.Fatalf("producer %d: got event %d, want %d", p, i, next[p])
		}
		next[p]++
	}
}
