package core

import (
	"strconv"
	"testing"
)

// subscribeN registers n read-only streams, one selector each.
func subscribeN(b *testing.B, n int, selector func(i int) string) *State {
	b.Helper()
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k")})
	for i := 0; i < n; i++ {
		sel, err := ParseSelector(selector(i))
		if err != nil {
			b.Fatal(err)
		}
		var anon SessionID
		anon[0], anon[1], anon[2] = byte(i), byte(i>>8), byte(i>>16)
		if _, err := s.Subscribe(t0, StreamID(i+1), SubscribeRequest{Family: "acme", Anon: anon, Selectors: []Selector{sel}, Caller: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkMatchSparse: the cost of matching one change when wildcard
// registrations are spread over distinct realms (the change matches one),
// at 100 and at 10,000 registrations.
func BenchmarkMatchSparse(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run("registrations="+strconv.Itoa(n), func(b *testing.B) {
			s := subscribeN(b, n, func(i int) string { return "lease://realm-" + strconv.Itoa(i) + "/*/*" })
			e := Event{Family: "acme", Key: "realm-7/area-3/res-1"}
			var out []Delivery
			for b.Loop() {
				out = s.Deliveries(&e, out[:0])
			}
			if len(out) != 1 {
				b.Fatalf("%d deliveries", len(out))
			}
		})
	}
}

// BenchmarkMatchDense: 10,000 registrations that all match the change;
// reports ns per delivered event.
func BenchmarkMatchDense(b *testing.B) {
	const n = 10_000
	s := subscribeN(b, n, func(int) string { return "lease://acme/**" })
	e := Event{Family: "acme", Key: "acme/renderers/doc-1"}
	out := make([]Delivery, 0, n)
	for b.Loop() {
		out = s.Deliveries(&e, out[:0])
	}
	if len(out) != n {
		b.Fatalf("%d deliveries", len(out))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/delivery")
}
