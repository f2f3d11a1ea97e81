package handlers

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/musterhq/muster/core"
)

// TestHTTPSeriesAreTheLabelledOnes: the kept series are the very
// instruments WithLabelValues names, for cached and other codes, and past
// the cache's bound.
func TestHTTPSeriesAreTheLabelledOnes(t *testing.T) {
	broker := core.NewBroker(core.Config{Epoch: "e", IncarnationKey: []byte("0123456789abcdef0123456789abcdef")}, nil, nil)
	defer broker.Close()
	m := NewMetrics(broker)
	for range 3 {
		for _, code := range []int{200, 204, 418, 503, 999} {
			hs := m.httpSeriesOf("/v1/x", "POST")
			hs.requests(m, code).Inc()
			hs.duration.Observe(0.001)
		}
	}
	for _, code := range []int{200, 204, 418, 503, 999} {
		if got := count(t, m.requests.WithLabelValues("/v1/x", "POST", strconv.Itoa(code))); got != 3 {
			t.Errorf("code %d: %v requests, want 3", code, got)
		}
	}
	if a, b := m.httpSeriesOf("/v1/x", "POST"), m.httpSeriesOf("/v1/x", "POST"); a != b {
		t.Error("the series was not kept")
	}
	for i := range maxCachedSeries + 10 {
		m.httpSeriesOf("/v1/x", "M"+strconv.Itoa(i)).requests(m, 200).Inc()
	}
	if n := len(*m.series.Load()); n != maxCachedSeries {
		t.Errorf("%d series kept, want the bound %d", n, maxCachedSeries)
	}
	last := "M" + strconv.Itoa(maxCachedSeries+9)
	m.httpSeriesOf("/v1/x", last).requests(m, 200).Inc()
	if got := count(t, m.requests.WithLabelValues("/v1/x", last, "200")); got != 2 {
		t.Errorf("an uncached series counted %v, want 2", got)
	}
}

func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestMethodLabelIsBounded: a client can send any token as the method; the
// series it creates must not grow with the number of distinct tokens.
func TestMethodLabelIsBounded(t *testing.T) {
	broker := core.NewBroker(core.Config{Epoch: "e", IncarnationKey: []byte("0123456789abcdef0123456789abcdef")}, nil, nil)
	defer broker.Close()
	m := NewMetrics(broker)
	h := m.middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusMethodNotAllowed)
	}))
	for i := range 200 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("X"+strconv.Itoa(i), "/v1/x", nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/x", nil))
	if n := seriesCount(m.requests); n != 2 {
		t.Errorf("%d request series after 200 distinct unknown methods and one GET, want 2 (other, GET)", n)
	}
	if got := count(t, m.requests.WithLabelValues("unmatched", "other", "405")); got != 200 {
		t.Errorf("method other counted %v requests, want 200", got)
	}
}

// seriesCount is the number of series a collector holds.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}
