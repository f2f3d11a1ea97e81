package handlers

import (
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore"
)

// benchServer is the whole HTTP face of a real broker (chi, epoch header,
// metrics, recoverer, contract, generated routes, handlers, actor) with one
// bearer token among four, served in-process without sockets.
func benchServer(tb testing.TB) *Server {
	tb.Helper()
	var tokens []Token
	for _, secret := range []string{"t1", "t2", "t3", "bench-token"} {
		g, err := core.ParseGrants([]string{"lease://**#*", "fleet://**#*"})
		if err != nil {
			tb.Fatal(err)
		}
		tokens = append(tokens, Token{Name: secret, Hash: sha256.Sum256([]byte(secret)), Family: "acme", Grants: g})
	}
	store, err := fleetstore.OpenBolt(filepath.Join(tb.TempDir(), "fleet.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = store.Close() })
	broker := core.NewBroker(core.Config{Epoch: "bench-epoch", IncarnationKey: []byte("0123456789abcdef0123456789abcdef")}, nil, nil)
	tb.Cleanup(broker.Close)
	s, err := New(Options{
		Broker: broker, Auth: NewAuthenticator(tokens), Metrics: NewMetrics(broker),
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		CursorMaster: []byte("bench-cursor-master"), Fleet: fleetstore.New(store),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// serve sends one request through s and returns the recorded answer.
func serve(s http.Handler, method, target, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer bench-token")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w
}

// newSession opens a session through s and returns its id.
func newSession(tb testing.TB, s http.Handler) string {
	tb.Helper()
	w := serve(s, "POST", "/v1/sessions", `{"owner_id":"bench","ttl_ms":600000}`)
	var out struct {
		SessionID string `json:"session_id"`
	}
	if w.Code != 201 || json.Unmarshal(w.Body.Bytes(), &out) != nil {
		tb.Fatalf("create session: %d %s", w.Code, w.Body)
	}
	return out.SessionID
}

// BenchmarkServerLeasePair is the broker's own cost of what the load
// driver's peak does (BenchmarkHTTPLeases/peak): an acquire and a release
// of a free route through the whole server, without the sockets and the
// HTTP/1 parsing that the ceiling shares. ns/op and allocs/op are per pair.
// hot: the lease mutations' fast path; general: the same requests through
// kin-openapi and the generated decoder and encoder, as before it.
func BenchmarkServerLeasePair(b *testing.B) {
	b.Run("hot", func(b *testing.B) { benchServerLeasePair(b, false) })
	b.Run("general", func(b *testing.B) { benchServerLeasePair(b, true) })
}

func benchServerLeasePair(b *testing.B, generalOnly bool) {
	s := benchServer(b)
	s.contract.generalOnly = generalOnly
	session := newSession(b, s)
	b.ReportAllocs()
	i := 0
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		i++
		path := "/v1/leases/load/w1/r" + strconv.Itoa(i%1024)
		w := serve(s, "POST", path+"/acquire", `{"session_id":"`+session+`","ttl_ms":60000}`)
		if w.Code != 200 {
			b.Fatalf("acquire: %d %s", w.Code, w.Body)
		}
		var l struct {
			FencingToken int64 `json:"fencing_token"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
			b.Fatal(err)
		}
		w = serve(s, "POST", path+"/release", `{"session_id":"`+session+`","fencing_token":`+strconv.FormatInt(l.FencingToken, 10)+`}`)
		if w.Code != 204 {
			b.Fatalf("release: %d %s", w.Code, w.Body)
		}
	}
}

// cpuTime is the CPU time (user and system, all threads: GC included) the
// process has used. Per-operation CPU time is steadier than wall time on a
// shared machine, where other processes take the cores for a while.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op, counted from start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
