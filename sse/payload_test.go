package sse

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// dataPayload appends fixed data, as a Payload.
type dataPayload []byte

func (p dataPayload) AppendData(b []byte) []byte { return append(b, p...) }

// A Payload is framed exactly like the same bytes given as Data, line
// breaks included.
func TestAppendEventPayload(t *testing.T) {
	for _, data := range []string{`{"a":1}`, "", "x", "a\nb", "a\r\nb", "a\rb", "a\n\rb", "a\n", "\n", " a"} {
		t.Run(fmt.Sprintf("%q", data), func(t *testing.T) {
			want := string(AppendEvent([]byte("prefix|"), Event{Name: "change", ID: "7", Data: []byte(data)}))
			got := string(AppendEvent([]byte("prefix|"), Event{Name: "change", ID: "7", Payload: dataPayload(data)}))
			if got != want {
				t.Errorf("payload: got %q, want %q (as Data)", got, want)
			}
		})
	}
}

// sharedPayload encodes once, however many writers ask for it at once.
type sharedPayload struct {
	once    sync.Once
	encodes atomic.Int32
	data    []byte
}

func (p *sharedPayload) AppendData(b []byte) []byte {
	p.once.Do(func() {
		p.encodes.Add(1)
		p.data = []byte(`{"shared":true}`)
	})
	return append(b, p.data...)
}

// One Payload offered to many streams is encoded by their writers, not by
// the producer, once, and every stream writes the same bytes. Run with
// -race: the writers call it concurrently.
func TestPayloadSharedByStreams(t *testing.T) {
	const n = 8
	for _, p := range protos[:2] {
		t.Run(p.name, func(t *testing.T) {
			shared := &sharedPayload{}
			streams := make([]*Stream, n)
			for i := range streams {
				streams[i] = NewStream(DefaultCapacity)
				streams[i].Offer(Event{Name: "snapshot", Data: []byte("{}")})
				streams[i].Offer(Event{Name: "change", ID: "1", Payload: shared})
				streams[i].End(Event{Name: "shutdown", Data: []byte("{}")})
			}
			if shared.encodes.Load() != 0 {
				t.Fatal("the payload was encoded when offered")
			}
			// Open every stream first, then let all writers run at once.
			decs := make([]*Decoder, n)
			errcs := make([]<-chan error, n)
			for i, s := range streams {
				url, client, errc := mustServe(t, p, s, Options{})
				decs[i], errcs[i] = NewDecoder(mustOpen(t, context.Background(), client, url).Body), errc
			}
			want := []Event{{Name: "snapshot", Data: []byte("{}")}, {Name: "change", ID: "1", Data: []byte(`{"shared":true}`)}, {Name: "shutdown", Data: []byte("{}")}}
			var wg sync.WaitGroup
			for _, dec := range decs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var got []Event
					for {
						ev, err := dec.Next()
						if err != nil {
							break
						}
						got = append(got, ev)
					}
					if !equalEvents(got, want) {
						t.Errorf("events:\n got %s\nwant %s", formatEvents(got), formatEvents(want))
					}
				}()
			}
			wg.Wait()
			for _, errc := range errcs {
				if err := wait(t, errc, "Serve"); err != nil {
					t.Errorf("Serve = %v", err)
				}
			}
			if got := shared.encodes.Load(); got != 1 {
				t.Errorf("encoded %d times for %d streams, want once", got, n)
			}
		})
	}
}

// countingPayload counts its calls.
type countingPayload struct{ calls atomic.Int32 }

func (p *countingPayload) AppendData(b []byte) []byte {
	p.calls.Add(1)
	return append(b, "{}"...)
}

// An event that is never written (its stream overflowed or died before)
// is never encoded: the lazy encoding costs nothing for it.
func TestPayloadNotEncodedWhenDropped(t *testing.T) {
	p := &countingPayload{}
	s := NewStream(1)
	s.Offer(Event{Name: "change", Payload: p})
	s.Offer(Event{Name: "change", Payload: p}) // overflows
	s.close()
	if got := p.calls.Load(); got != 0 {
		t.Errorf("a dropped payload was encoded %d times", got)
	}
}
