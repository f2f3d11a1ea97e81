package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// grant is one acquisition the broker acknowledged (200).
type grant struct {
	epoch, route string
	token        int64
	sent, recv   time.Time
}

// ledger is what the workload saw, checked after every round.
type ledger struct {
	mu         sync.Mutex
	grants     []grant
	acked      map[string]bool // spec names answered 201
	forgotten  map[string]bool // answered 204 to a forget
	unsure     map[string]bool // a forget whose answer was lost
	violations []string
	probes     [2][]time.Duration // latencies of the prober, this round: [0] hostile idle, [1] hostile active
	ops        map[string]int
	hostile    hostileLog
}

type hostileLog struct {
	sweeps, slow, sessions, streams int
	sweepMax, slowMax               time.Duration
	sessionScope, streamScope       string
}

func newLedger() *ledger {
	return &ledger{acked: map[string]bool{}, forgotten: map[string]bool{}, unsure: map[string]bool{}, ops: map[string]int{}}
}

func (l *ledger) violate(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.violations) < 20 {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

func (l *ledger) count(op string) {
	l.mu.Lock()
	l.ops[op]++
	l.mu.Unlock()
}

// workload runs the mixed workload until ctx ends.
type workload struct {
	b       *broker
	l       *ledger
	hostile bool
	// start and window, when window is set, switch the hostile requests on
	// and off every window, so that the prober's latency with and without
	// them is measured under the same background load.
	start  time.Time
	window time.Duration
}

// on reports whether the hostile requests run now.
func (w *workload) on() bool {
	return w.hostile && (w.window == 0 || (time.Since(w.start)/w.window)%2 == 1)
}

func (w *workload) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() { w.worker(ctx, i) })
	}
	wg.Go(func() { w.registrar(ctx) })
	wg.Go(func() { w.lister(ctx) })
	wg.Go(func() { w.gapper(ctx) })
	wg.Go(func() { w.vanisher(ctx) })
	wg.Go(func() { w.prober(ctx) })
	for range 3 {
		wg.Go(func() { w.stalledReader(ctx) })
	}
	if w.hostile {
		wg.Go(func() { w.hostileSweeps(ctx) })
		wg.Go(func() { w.slowBodies(ctx) })
		wg.Go(func() { w.sessionFlood(ctx) })
		wg.Go(func() { w.streamFlood(ctx) })
	}
	wg.Wait()
}

var client = &http.Client{Timeout: 10 * time.Second}

func (w *workload) worker(ctx context.Context, i int) {
	sess := ""
	for ctx.Err() == nil {
		if sess == "" {
			st, body, _ := do(ctx, client, "POST", w.b.url()+"/v1/sessions", workTok.Secret, fmt.Sprintf(`{"owner_id":"w%d","ttl_ms":5000}`, i))
			if st == 429 {
				w.l.violate("worker %d: a work session was refused while another family flooded: %s", i, body)
			}
			var s struct {
				ID string `json:"session_id"`
			}
			if st != 201 || json.Unmarshal(body, &s) != nil {
				sleep(ctx, 50*time.Millisecond)
				continue
			}
			sess = s.ID
		}
		route := fmt.Sprintf("lease://work/pool/r%d", rand.IntN(4))
		path := w.b.url() + "/v1/leases/" + strings.TrimPrefix(route, "lease://")
		sent := time.Now()
		st, body, epoch := do(ctx, client, "POST", path+"/acquire", workTok.Secret, fmt.Sprintf(`{"session_id":%q,"ttl_ms":2000,"wait_ms":300}`, sess))
		recv := time.Now()
		switch st {
		case 200:
			var g struct {
				Token int64 `json:"fencing_token"`
			}
			_ = json.Unmarshal(body, &g)
			w.l.mu.Lock()
			w.l.grants = append(w.l.grants, grant{epoch: epoch, route: route, token: g.Token, sent: sent, recv: recv})
			w.l.ops["acquire"]++
			w.l.mu.Unlock()
			do(ctx, client, "POST", path+"/extend", workTok.Secret, fmt.Sprintf(`{"session_id":%q,"fencing_token":%d,"ttl_ms":2000}`, sess, g.Token))
			sleep(ctx, time.Duration(rand.IntN(20))*time.Millisecond)
			if st, _, _ := do(ctx, client, "POST", path+"/release", workTok.Secret, fmt.Sprintf(`{"session_id":%q,"fencing_token":%d}`, sess, g.Token)); st == 204 {
				w.l.count("release")
			}
		case 404:
			sess = "" // the session ended (a restart): start over
		case 0:
			sleep(ctx, 20*time.Millisecond) // the broker is down
		}
	}
}

// registrar registers specs, forgets some and sweeps with a schema every
// spec satisfies: an acknowledged spec must never be lost.
func (w *workload) registrar(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		st, body, _ := do(ctx, client, "POST", w.b.url()+"/v1/fleets/camp/specs", workTok.Secret, fmt.Sprintf(`{"kind":"u","spec":{"i":%d}}`, i))
		if st == 201 {
			var r struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(body, &r)
			w.l.mu.Lock()
			if w.l.acked[r.Name] {
				w.l.violations = append(w.l.violations, "name reused: "+r.Name)
			}
			w.l.acked[r.Name] = true
			w.l.ops["register"]++
			w.l.mu.Unlock()
		} else if st == 0 {
			sleep(ctx, 20*time.Millisecond)
		}
		if i%5 == 4 {
			w.forgetOne(ctx)
		}
		if i%25 == 24 {
			st, body, _ := do(ctx, client, "POST", w.b.url()+"/v1/fleets/camp/sweep", workTok.Secret, everySpecSchema)
			if v := sweepViolation(st, body); v != "" {
				w.l.violate("%s", v)
			}
			switch st {
			case 200:
				w.l.count("sweep")
			case 0:
				w.l.count("sweep_unanswered") // no complete answer: nothing to judge
			}
		}
	}
}

// everySpecSchema is the registrar's sweep: every spec it and the vanisher
// register satisfies it.
const everySpecSchema = `{"schema":{"type":"object","required":["i"]}}`

// sweepViolation judges a complete answer (see do) to a sweep with
// everySpecSchema: a 200 must be a sweep result that dropped nothing.
func sweepViolation(st int, body []byte) string {
	if st != 200 {
		return ""
	}
	var res struct {
		Kept    *[]json.RawMessage `json:"kept"`
		Dropped *[]string          `json:"dropped"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Kept == nil || res.Dropped == nil {
		return fmt.Sprintf("a sweep answered 200 with %d bytes that are not a sweep result: %.200s", len(body), body)
	}
	if len(*res.Dropped) > 0 {
		return fmt.Sprintf("a sweep every spec satisfies dropped some: %q", *res.Dropped)
	}
	return ""
}

func (w *workload) forgetOne(ctx context.Context) {
	w.l.mu.Lock()
	var name string
	for n := range w.l.acked {
		if !w.l.forgotten[n] && !w.l.unsure[n] {
			name = n
			break
		}
	}
	if name != "" {
		w.l.unsure[name] = true // until the answer says otherwise
	}
	w.l.mu.Unlock()
	if name == "" {
		return
	}
	st, _, _ := do(ctx, client, "DELETE", w.b.url()+"/v1/fleets/camp/specs/"+name, workTok.Secret, "")
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	switch st {
	case 204:
		w.l.forgotten[name] = true
		w.l.ops["forget"]++
		delete(w.l.unsure, name)
	case 0:
		// unknown: it may or may not be gone
	default:
		delete(w.l.unsure, name) // refused: still there
	}
}

// lister pages LIST two items at a time, following cursors.
func (w *workload) lister(ctx context.Context) {
	for ctx.Err() == nil {
		cursor := ""
		for page := 0; page < 50 && ctx.Err() == nil; page++ {
			q := url.Values{"selector": {"lease://work/**"}, "limit": {"2"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			st, body, _ := do(ctx, client, "GET", w.b.url()+"/v1/leases?"+q.Encode(), obsTok.Secret, "")
			if st != 200 {
				break
			}
			w.l.count("list_page")
			var p struct {
				Next *string `json:"next_cursor"`
			}
			_ = json.Unmarshal(body, &p)
			if p.Next == nil {
				break
			}
			cursor = *p.Next
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// gapper pages the camp root's gap against the workers' leases, 50 names a
// side per page, following cursors (a restart ends them: epoch_changed).
func (w *workload) gapper(ctx context.Context) {
	for ctx.Err() == nil {
		cursor := ""
		for page := 0; page < 1000 && ctx.Err() == nil; page++ {
			q := url.Values{"live": {"lease://work/**"}, "limit": {"50"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			st, body, _ := do(ctx, client, "GET", w.b.url()+"/v1/fleets/camp/gap?"+q.Encode(), obsTok.Secret, "")
			if st != 200 {
				if st != 0 && st != 410 && st != 503 {
					w.l.violate("gap page answered %d: %.200s", st, body)
				}
				break
			}
			w.l.count("gap_page")
			var p struct {
				Missing, Orphans []string
				Next             *string `json:"next_cursor"`
			}
			_ = json.Unmarshal(body, &p)
			if len(p.Missing) > 50 || len(p.Orphans) > 50 {
				w.l.violate("a gap page of limit 50 held %d missing and %d orphans", len(p.Missing), len(p.Orphans))
			}
			if p.Next == nil {
				break
			}
			cursor = *p.Next
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// vanisher leaves in the middle of requests: a waiting acquire and a
// register, each cancelled after a few milliseconds.
func (w *workload) vanisher(ctx context.Context) {
	for ctx.Err() == nil {
		st, body, _ := do(ctx, client, "POST", w.b.url()+"/v1/sessions", workTok.Secret, `{"owner_id":"vanisher","ttl_ms":3000}`)
		var s struct {
			ID string `json:"session_id"`
		}
		if st != 201 || json.Unmarshal(body, &s) != nil {
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		for range 5 {
			c, cancel := context.WithTimeout(ctx, time.Duration(5+rand.IntN(60))*time.Millisecond)
			do(c, client, "POST", w.b.url()+"/v1/leases/work/pool/r0/acquire", workTok.Secret, fmt.Sprintf(`{"session_id":%q,"ttl_ms":1000,"wait_ms":5000}`, s.ID))
			cancel()
			c, cancel = context.WithTimeout(ctx, time.Duration(1+rand.IntN(5))*time.Millisecond)
			do(c, client, "POST", w.b.url()+"/v1/fleets/camp/specs", workTok.Secret, `{"kind":"v","spec":{"i":-1}}`)
			cancel()
			w.l.count("vanished")
		}
	}
}

// prober measures the latency other families see: a lease query every 10 ms.
func (w *workload) prober(ctx context.Context) {
	for ctx.Err() == nil {
		start, on := time.Now(), 0
		if w.on() {
			on = 1
		}
		st, _, _ := do(ctx, client, "GET", w.b.url()+"/v1/leases/work/pool/r1", obsTok.Secret, "")
		if st == 200 {
			w.l.mu.Lock()
			w.l.probes[on] = append(w.l.probes[on], time.Since(start))
			w.l.mu.Unlock()
		}
		sleep(ctx, 10*time.Millisecond)
	}
}

// stalledReader opens a watch stream and never reads it.
func (w *workload) stalledReader(ctx context.Context) {
	c, err := net.Dial("tcp", w.b.addr)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET /v1/leases/watch?selector=%s HTTP/1.1\r\nHost: muster\r\nAuthorization: Bearer %s\r\n\r\n", url.QueryEscape("lease://work/**"), obsTok.Secret)
	<-ctx.Done()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func p99(ds []time.Duration) time.Duration { return quantile(ds, 99) }

func p50(ds []time.Duration) time.Duration { return quantile(ds, 50) }

func quantile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*q)/100]
}
