package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore"
)

// BenchmarkBatchHandler measures batches of 64 through the whole server
// (contract middleware, handler, actor, encoding), in process: the
// per-request cost behind tests/load's BenchmarkHTTPLeaseBatches.
//   - extend: 64 renewals of held leases per request;
//   - acquire-release: 64 acquires, then 64 releases, alternately.
func BenchmarkBatchHandler(b *testing.B) {
	broker := core.NewBroker(core.Config{Epoch: "e", IncarnationKey: []byte("k")}, nil, nil)
	defer broker.Close()
	store, err := fleetstore.OpenBolt(filepath.Join(b.TempDir(), "f.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	s, err := New(Options{Broker: broker, Auth: NewAuthenticator(nil), Metrics: NewMetrics(broker), Fleet: fleetstore.New(store),
		CursorMaster: []byte("m"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	id := core.SessionID{1}
	broker.CreateSession(ctx, core.SessionRequest{Family: DevFamily, ID: id, OwnerID: "w", TTL: 10 * time.Minute})
	post := func(body string) string {
		req := httptest.NewRequest("POST", "/v1/leases/batch", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"ok":false`) {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
		return w.Body.String()
	}
	batch := func(op string, tokens []uint64) string {
		ops := make([]string, 64)
		for i := range ops {
			switch op {
			case "acquire":
				ops[i] = fmt.Sprintf(`{"op":"acquire","route":"lease://load/w/r%d","ttl_ms":60000}`, i)
			case "extend":
				ops[i] = fmt.Sprintf(`{"op":"extend","route":"lease://load/w/r%d","fencing_token":%d,"ttl_ms":60000}`, i, tokens[i])
			default:
				ops[i] = fmt.Sprintf(`{"op":"release","route":"lease://load/w/r%d","fencing_token":%d}`, i, tokens[i])
			}
		}
		return fmt.Sprintf(`{"session_id":%q,"ops":[%s]}`, id.String(), strings.Join(ops, ","))
	}
	tokensOf := func(answer string) []uint64 {
		var out struct {
			Results []struct {
				Lease struct {
					FencingToken uint64 `json:"fencing_token"`
				}
			} `json:"results"`
		}
		json.Unmarshal([]byte(answer), &out)
		t := make([]uint64, len(out.Results))
		for i, r := range out.Results {
			t[i] = r.Lease.FencingToken
		}
		return t
	}
	acquire := batch("acquire", nil)
	tokens := tokensOf(post(acquire))
	b.Run("extend", func(b *testing.B) {
		body := batch("extend", tokens)
		b.ReportAllocs()
		for b.Loop() {
			post(body)
		}
	})
	post(batch("release", tokens))
	b.Run("acquire-release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			post(batch("release", tokensOf(post(acquire))))
		}
	})
}

// BenchmarkBatchEdge: the broker's own per-request work on a batch of 64
// acquires outside net/http and the actor: the fast decode, the core
// operations (route parsing, grants) and the answer's encoding, on results
// of the same shape as the real ones. ns/op is per batch.
func BenchmarkBatchEdge(b *testing.B) {
	s := benchServer(b)
	id := core.SessionID{1}
	ops := make([]string, 64)
	for i := range ops {
		ops[i] = fmt.Sprintf(`{"op":"acquire","route":"lease://peers/w12/b%d","ttl_ms":60000}`, i)
	}
	body := []byte(fmt.Sprintf(`{"session_id":%q,"ops":[%s]}`, id.String(), strings.Join(ops, ",")))
	st := core.NewState(core.Config{Epoch: "e", IncarnationKey: []byte("k")})
	now := time.Now()
	st.CreateSession(now, core.SessionRequest{Family: "f", ID: id, OwnerID: "w", TTL: time.Minute})
	req, ok := fastBatch(body, s.contract.batch)
	if !ok {
		b.Fatal("not on the fast path")
	}
	cops, err := batchOps(req.Ops, core.AllGrants())
	if err != nil {
		b.Fatal(err)
	}
	ans, err := st.Batch(now, core.BatchRequest{Family: "f", Session: id, Ops: cops})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			req, _ := fastBatch(body, s.contract.batch)
			recycleWireOps(&req.Ops)
		}
	})
	b.Run("ops", func(b *testing.B) {
		sc := &batchScratch{}
		for b.Loop() {
			sc.ops, _ = appendBatchOps(sc.ops[:0], req.Ops, core.AllGrants())
		}
	})
	b.Run("answer", func(b *testing.B) {
		buf := make([]byte, 0, 32<<10)
		for b.Loop() {
			buf = appendBatchAnswer(buf[:0], req.Ops, ans.Results, ans.Revision)
		}
	})
}
