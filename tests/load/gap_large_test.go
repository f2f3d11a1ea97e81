package load

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/tests/pgtest"
)

// BenchmarkHTTPGapPaged100k pages GET /v1/fleets/{root}/gap over 100,000
// desired specs against 100,000 held leases (half overlapping: 50,000
// missing, 50,000 orphans), on PostgreSQL (the desired set is bulk-loaded
// with COPY). It reports the pages per gap, the time per page, and the
// bytes allocated per page (broker and client together, one process) and
// the peak heap growth while a whole gap is paged (which includes garbage
// the collector has not yet reclaimed): bounded by the page (10,000 names
// a side), not by the fleet. Needs MUSTER_TEST_PG_URL.
func BenchmarkHTTPGapPaged100k(b *testing.B) {
	if os.Getenv(pgtest.EnvURL) == "" || os.Getenv(pgtest.EnvSwitch) == "off" {
		b.Skip("MUSTER_TEST_PG_URL is not set")
	}
	const n = 100_000
	store := pgtest.Schema(b, "load")
	m := startBroker(b, tokenConfig+"limits:\n  family: {fleet_specs_per_root: 200000}\n", store)
	bulkDesired(b, store, "monitors", n)
	holdRange(b, m.Broker(), "monitors", n/2+1, n/2+n)
	c := Client(1)
	base := m.URL() + "/v1/fleets/monitors/gap?" + url.Values{"live": {"lease://load/monitors/*"}}.Encode()

	var peak atomic.Uint64
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	})
	pages := 0
	for b.Loop() {
		missing, orphans, cursor := 0, 0, ""
		for {
			target := base
			if cursor != "" {
				target += "&cursor=" + url.QueryEscape(cursor)
			}
			req, _ := http.NewRequest("GET", target, nil)
			req.Header.Set("Authorization", "Bearer load-token")
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var g struct {
				Missing, Orphans []string
				Next             *string `json:"next_cursor"`
			}
			err = json.NewDecoder(resp.Body).Decode(&g)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("gap page: %d %v", resp.StatusCode, err)
			}
			pages++
			missing, orphans = missing+len(g.Missing), orphans+len(g.Orphans)
			if g.Next == nil {
				break
			}
			cursor = *g.Next
		}
		if missing != n/2 || orphans != n/2 {
			b.Fatalf("missing %d orphans %d, want %d each", missing, orphans, n/2)
		}
	}
	close(stop)
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(pages)/(1<<20), "alloc-MiB/page")
	b.ReportMetric(float64(pages)/float64(b.N), "pages/op")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(pages), "ms/page")
	b.ReportMetric(float64(int64(peak.Load())-int64(before.HeapInuse))/(1<<20), "peak-heap-growth-MiB")
}

// bulkDesired loads repo-1 … repo-n under root with COPY, and sets the
// root's counter past them, as n registers would have.
func bulkDesired(b *testing.B, storeURL, root string, n int) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storeURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{"load", root, fmt.Sprintf("repo-%d", i+1), []byte(`{"topic":"releases","schedule":"@hourly"}`)}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"muster_fleet_specs"}, []string{"family", "root", "name", "spec"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO muster_fleet_counters (family, root, next_id) VALUES ('load', $1, $2)`, root, n+1); err != nil {
		b.Fatal(err)
	}
}
