package load

import (
	"bufio"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// ServerBuckets scrapes the broker's cumulative latency histogram of one
// route pattern from base/metrics: bucket upper bound (seconds; +Inf as
// math.Inf(1)) → count. It fails the test when the route has none.
func ServerBuckets(tb testing.TB, base, route string) map[float64]float64 {
	tb.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "muster_http_request_duration_seconds_bucket{") || !strings.Contains(l, `route="`+route+`"`) {
			continue
		}
		i := strings.Index(l, `le="`) + len(`le="`)
		le := l[i : i+strings.IndexByte(l[i:], '"')]
		v, err1 := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		bound, err2 := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		if err1 != nil || err2 != nil {
			tb.Fatalf("metrics line %q", l)
		}
		out[bound] = v
	}
	if len(out) == 0 {
		tb.Fatalf("no histogram of %s in %s/metrics", route, base)
	}
	return out
}

// ServerQuantile is the smallest bucket bound under which q of the
// requests between two scrapes fell, in µs: an upper bound on the
// broker's own q-quantile latency.
func ServerQuantile(before, after map[float64]float64, q float64) float64 {
	total := after[math.Inf(1)] - before[math.Inf(1)]
	best := math.Inf(1)
	for bound, v := range after {
		if v-before[bound] >= q*total && bound < best {
			best = bound
		}
	}
	return best * 1e6
}
