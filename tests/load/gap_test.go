package load

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/musterhq/muster/cmd/muster/app"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/tests/pgtest"
)

// BenchmarkHTTPGap times GET /v1/fleets/{root}/gap over loopback HTTP with
// 10,000 desired specs against 10,000 held leases matching the live
// selector, half of them overlapping (5,000 missing, 5,000 orphans): one
// inventory clone and walk, the whole desired set read from the store, the
// plan and the JSON. Target: ≤ 100 ms per call. The postgres case runs when
// MUSTER_TEST_PG_URL is set (tests/pg/start.sh).
func BenchmarkHTTPGap(b *testing.B) {
	stores := []struct{ name, url string }{{"bolt", ""}}
	if u := os.Getenv(pgtest.EnvURL); u != "" && os.Getenv(pgtest.EnvSwitch) != "off" {
		stores = append(stores, struct{ name, url string }{"postgres", u})
	} else {
		b.Log("MUSTER_TEST_PG_URL is not set: the postgres case is not run")
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			storeURL := st.url
			if storeURL != "" {
				storeURL = pgtest.Schema(b, "load")
			}
			m := startBroker(b, tokenConfig, storeURL)
			const n = 10_000
			fillDesired(b, m, "monitors", n)
			holdRange(b, m.Broker(), "monitors", n/2+1, n/2+n)
			c := Client(1)
			target := m.URL() + "/v1/fleets/monitors/gap?" + url.Values{"live": {"lease://load/monitors/*"}}.Encode()
			for b.Loop() {
				req, _ := http.NewRequest("GET", target, nil)
				req.Header.Set("Authorization", "Bearer load-token")
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var g struct{ Missing, Orphans []string }
				err = json.NewDecoder(resp.Body).Decode(&g)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || len(g.Missing) != n/2 || len(g.Orphans) != n/2 {
					b.Fatalf("gap: %d %v missing %d orphans %d", resp.StatusCode, err, len(g.Missing), len(g.Orphans))
				}
			}
		})
	}
}

// fillDesired registers repo-1 … repo-n under root in family "load", through
// the store directly (an HTTP round trip each would only slow the set-up).
func fillDesired(b *testing.B, m *app.Main, root string, n int) {
	b.Helper()
	var (
		wg   sync.WaitGroup
		next = make(chan struct{}, n)
		errs = make(chan error, 8)
	)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range 8 {
		wg.Go(func() {
			for range next {
				if _, err := m.Fleet().Register(context.Background(), "load", root, "repo", []byte(`{"topic":"releases","schedule":"@hourly"}`)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// holdRange holds lease://load/<area>/repo-<i> for i in [from, to].
func holdRange(b *testing.B, br *core.Broker, area string, from, to int) {
	b.Helper()
	hold(b, br, 2, "gap-holder", func(yield func(core.Route) bool) {
		for i := from; i <= to; i++ {
			if !yield(core.Route{Realm: "load", Area: area, Resource: "repo-" + strconv.Itoa(i)}) {
				return
			}
		}
	})
}
