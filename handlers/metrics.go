package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/musterhq/muster/core"
)

// Metrics are the broker's Prometheus instruments on a private registry.
// HTTP metrics are labelled with the route PATTERN, never a concrete path,
// so a label never carries a route, a session id or a token.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the HTTP instruments and a collector that reads the
// core's counters at scrape time.
func NewMetrics(broker *core.Broker) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "muster_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "muster_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and method (streams: until the stream ends).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.duration,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&coreCollector{broker: broker})
	return m
}

// routePattern is the chi pattern of the matched route, or "unmatched".
func routePattern(r *http.Request) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

func (m *Metrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := routePattern(r)
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Inc()
		m.duration.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
	})
}

// statusWriter records the status code; Unwrap keeps http.ResponseController
// (flush, write deadlines) working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// coreCollector reads core.Stats through the actor at scrape time.
type coreCollector struct{ broker *core.Broker }

var (
	descSessions        = prometheus.NewDesc("muster_sessions", "Live sessions.", nil, nil)
	descSessionsCreated = prometheus.NewDesc("muster_sessions_created_total", "Sessions created.", nil, nil)
	descSessionsEnded   = prometheus.NewDesc("muster_sessions_ended_total", "Sessions ended, by reason.", []string{"reason"}, nil)
	descRevision        = prometheus.NewDesc("muster_revision", "The broker revision.", nil, nil)
)

func (c *coreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSessions
	ch <- descSessionsCreated
	ch <- descSessionsEnded
	ch <- descRevision
}

func (c *coreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.broker.Stats(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(st.Sessions))
	ch <- prometheus.MustNewConstMetric(descSessionsCreated, prometheus.CounterValue, float64(st.SessionsCreated))
	ch <- prometheus.MustNewConstMetric(descSessionsEnded, prometheus.CounterValue, float64(st.SessionsExpired), "expired")
	ch <- prometheus.MustNewConstMetric(descSessionsEnded, prometheus.CounterValue, float64(st.SessionsDeleted), "deleted")
	ch <- prometheus.MustNewConstMetric(descRevision, prometheus.GaugeValue, float64(st.Revision))
}
