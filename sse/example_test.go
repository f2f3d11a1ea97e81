package sse_test

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/musterhq/muster/sse"
)

// The watch handler's shape: the actor registers the stream and queues the
// snapshot marker in one step, then the handler goroutine becomes the
// stream's writer. Shutdown ends every stream with a shutdown event.
func Example() {
	var hub sse.Hub
	register := func(s *sse.Stream) { // stands in for one actor step
		s.Offer(sse.Event{Name: "snapshot", Data: []byte(`{"revision":41}`)})
	}
	watch := func(w http.ResponseWriter, r *http.Request) {
		s := sse.NewStream(sse.DefaultCapacity)
		register(s)
		err := hub.Serve(w, r, s, sse.Options{
			OnOverflow: func() { slog.Warn("watch stream overflowed") },
		})
		if err != nil {
			slog.Debug("watch stream ended", "err", err)
		}
		// Tell the actor to drop the stream's registrations here.
	}

	srv := &http.Server{Addr: "127.0.0.1:7420", Handler: http.HandlerFunc(watch)}
	srv.RegisterOnShutdown(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hub.EndAll(ctx, sse.Event{Name: "shutdown", Data: []byte(`{}`)})
	})
	_ = srv // srv.ListenAndServe(), and srv.Shutdown(ctx) on SIGTERM
}
