package sse

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkFanOut offers one event to each of 1,000 streams, each served
// over its own loopback HTTP/1.1 connection, and waits until every client
// has read it: an op is one change reaching 1,000 watchers, each stream
// written by its own goroutine or by a Pool. The clients run in the same process, so ns/op includes
// their reading.
func BenchmarkFanOut(b *testing.B) {
	const n = 1000
	for _, pooled := range []bool{false, true} {
		b.Run(fmt.Sprintf("pool=%v", pooled), func(b *testing.B) {
			var opt Options
			if pooled {
				opt.Pool = NewPool(runtime.GOMAXPROCS(0), 0)
			}
			streams := make(chan *Stream, n)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s := NewStream(DefaultCapacity)
				s.Offer(ev("snapshot", ""))
				streams <- s
				_ = Serve(w, r, s, opt)
			}))
			defer srv.Close()
			var got atomic.Int64
			all := make(chan struct{}, 1)
			var wg sync.WaitGroup
			conns := make([]net.Conn, n)
			list := make([]*Stream, n)
			for i := range n {
				c, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				conns[i] = c
				fmt.Fprintf(c, "GET /watch HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
				list[i] = <-streams
				wg.Go(func() {
					lines := bufio.NewReader(c)
					for {
						line, err := lines.ReadSlice('\n')
						if err != nil {
							return
						}
						if bytes.HasPrefix(line, []byte("id: ")) && got.Add(1)%n == 0 {
							all <- struct{}{}
						}
					}
				})
			}
			b.ResetTimer()
			for range b.N {
				for _, s := range list {
					s.Offer(changeEvent)
				}
				<-all
			}
			b.StopTimer()
			for _, s := range list {
				s.End(shutdownEvent)
			}
			for _, c := range conns {
				c.Close()
			}
			wg.Wait()
		})
	}
}
