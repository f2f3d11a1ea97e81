package load

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// serverBuckets scrapes the broker's cumulative latency histogram of one
// route pattern: bucket upper bound (seconds) → count.
func serverBuckets(b *testing.B, base, route string) map[float64]float64 {
	b.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
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
		i := strings.Index(l, `le="`)
		j := strings.Index(l[i+4:], `"`)
		le := l[i+4 : i+4+j]
		v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if le == "+Inf" {
			out[1e9] = v
			continue
		}
		bound, _ := strconv.ParseFloat(le, 64)
		out[bound] = v
	}
	return out
}

// serverQuantile is the smallest bucket bound below which q of the
// requests between two scrapes fell, in microseconds: an upper bound on
// the broker's own q-quantile latency.
func serverQuantile(before, after map[float64]float64, q float64) float64 {
	total := after[1e9] - before[1e9]
	best := 1e9
	for bound, v := range after {
		if (v-before[bound]) >= q*total && bound < best {
			best = bound
		}
	}
	return best * 1e6
}
