package handlers

import (
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
