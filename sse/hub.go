package sse

import (
	"context"
	"net/http"
	"sync"
)

// Hub tracks the streams being served so that a server shutting down can end
// them all with one terminal event and wait, within a bound, for their
// writers to finish. http.Server.Shutdown waits for active connections, and
// an open stream stays active until it is ended, so call EndAll from
// http.Server.RegisterOnShutdown:
//
//	srv.RegisterOnShutdown(func() {
//		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
//		defer cancel()
//		hub.EndAll(ctx, sse.Event{Name: "shutdown", Data: []byte(`{}`)})
//	})
//
// The zero Hub is ready to use. Its methods are safe from any goroutine.
type Hub struct {
	mu      sync.Mutex
	streams map[*Stream]struct{}
	ended   bool
	final   Event
}

// Serve is Serve for a stream tracked by h while it is being served. Once
// EndAll has been called, the stream is ended with EndAll's event at once:
// it delivers what is queued, then that event.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, s *Stream, opt Options) error {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		s.End(h.final)
		return Serve(w, r, s, opt)
	}
	if h.streams == nil {
		h.streams = make(map[*Stream]struct{})
	}
	h.streams[s] = struct{}{}
	h.mu.Unlock()

	defer func() {
		h.mu.Lock()
		delete(h.streams, s)
		h.mu.Unlock()
	}()
	return Serve(w, r, s, opt)
}

// Len reports how many streams are being served through h.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.streams)
}

// EndAll ends every stream served through h with final, and every stream
// served through h from now on, then waits until the writers of the streams
// it ended have returned or ctx is done, whichever comes first; it returns
// ctx.Err() in the second case. A writer stuck on a client that does not
// read returns at its write deadline at the latest. Only the first EndAll
// sets the event; a later call ends nothing new but waits the same way.
func (h *Hub) EndAll(ctx context.Context, final Event) error {
	h.mu.Lock()
	if !h.ended {
		h.ended = true
		h.final = final
	}
	final = h.final
	live := make([]*Stream, 0, len(h.streams))
	for s := range h.streams {
		live = append(live, s)
	}
	h.mu.Unlock()

	for _, s := range live {
		s.End(final)
	}
	for _, s := range live {
		select {
		case <-s.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
