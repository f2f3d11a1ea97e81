package handlers

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/sse"
)

// Metrics are the broker's Prometheus instruments on a private registry.
// HTTP metrics are labelled with the route PATTERN, never a concrete path,
// so a label never carries a route, a session id or a token.
type Metrics struct {
	Registry *prometheus.Registry
	// access, when set (Options.AccessLog), hears of every request once
	// answered: its method label, route pattern, status and duration.
	access   func(method, route string, status int, took time.Duration)
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// series are the HTTP instruments by route pattern and method, looked
	// up once (httpSeriesOf); copy on write, read without a lock.
	series   atomic.Pointer[map[seriesKey]*httpSeries]
	seriesMu sync.Mutex

	listPages      prometheus.Counter
	listItems      prometheus.Counter
	listExamined   prometheus.Counter
	listExhausted  prometheus.Counter
	cursorResumes  prometheus.Counter
	cursorRejected *prometheus.CounterVec

	streams    prometheus.Gauge
	delivered  prometheus.Counter
	supersedes prometheus.Counter
	// writers is the stream writers' pool of the server using these
	// metrics (set by New), read at scrape time.
	writers atomic.Pointer[sse.Pool]

	sweepsRunning prometheus.Gauge
	sweepsWaiting prometheus.Gauge
	sweepCPU      prometheus.Histogram
	sweepMemory   prometheus.Histogram
	sweeps        *prometheus.CounterVec
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
			Buckets: []float64{.0001, .00025, .0005, .001, .0015, .002, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
	}
	m.series.Store(&map[seriesKey]*httpSeries{})
	m.listPages = prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_list_pages_total", Help: "LIST pages served."})
	m.listItems = prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_list_items_returned_total", Help: "Items returned by LIST."})
	m.listExamined = prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_list_entries_examined_total", Help: "Inventory entries examined by LIST (seeks included)."})
	m.listExhausted = prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_list_budget_exhausted_total", Help: "LIST pages ended by the examined-entries budget."})
	m.cursorResumes = prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_list_cursor_resumes_total", Help: "LIST pages resumed from a cursor."})
	m.cursorRejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_list_cursor_rejected_total", Help: "Cursors refused, by code."}, []string{"reason"})
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_watch_streams", Help: "Open watch streams."})
	m.delivered = prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_watch_events_delivered_total", Help: "Change events queued to watch streams."})
	m.supersedes = prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_watch_supersedes_total", Help: "Streams ended because the same session opened the same selector again."})
	overtaken := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "muster_watch_writer_turns_overtaken_total",
		Help: "Turns of the watch stream writers' pool that took longer than 2 ms (a write blocked on a slow client, or no processor for that long), so another worker started in their place."},
		func() float64 {
			if g := m.writers.Load(); g != nil {
				return float64(g.Overtaken())
			}
			return 0
		})
	reg.MustRegister(m.streams, m.delivered, m.supersedes, overtaken)
	m.sweepsRunning = prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_fleet_sweeps_running", Help: "Sweeps validating specs now."})
	m.sweeps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_fleet_sweeps_total", Help: "Sweeps by outcome: ok, refused (a limit or budget), abandoned (the client left), failed (the store)."}, []string{"outcome"})
	m.sweepsWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_fleet_sweeps_waiting", Help: "Sweeps waiting for their family's or a broker slot."})
	m.sweepCPU = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "muster_fleet_sweep_worker_cpu_seconds", Help: "CPU time of each sweep's worker process.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10}})
	m.sweepMemory = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "muster_fleet_sweep_worker_peak_bytes", Help: "Peak resident memory of each sweep's worker process.",
		Buckets: prometheus.ExponentialBuckets(8<<20, 2, 8)})
	reg.MustRegister(m.sweepsRunning, m.sweepsWaiting, m.sweeps, m.sweepCPU, m.sweepMemory)
	b := muster.BuildInfo()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "muster_build_info",
		Help: "Always 1: the version, commit and Go version of the running broker, as labels."}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(b.Version, b.Commit, b.GoVersion).Set(1)
	reg.MustRegister(build)
	reg.MustRegister(m.listPages, m.listItems, m.listExamined, m.listExhausted, m.cursorResumes, m.cursorRejected)
	reg.MustRegister(m.requests, m.duration,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&coreCollector{broker: broker})
	return m
}

func (m *Metrics) listPage(examined, items int, exhausted bool) {
	m.listPages.Inc()
	m.listItems.Add(float64(items))
	m.listExamined.Add(float64(examined))
	if exhausted {
		m.listExhausted.Inc()
	}
}

func (m *Metrics) cursorMismatch(reason string) { m.cursorRejected.WithLabelValues(reason).Inc() }

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
		route, method, took := routePattern(r), methodLabel(r.Method), time.Since(start)
		hs := m.httpSeriesOf(route, method)
		hs.requests(m, sw.status).Inc()
		hs.duration.Observe(took.Seconds())
		if m.access != nil {
			m.access(method, route, sw.status, took)
		}
	})
}

// methodLabel is the method label of a request: the method when it is one
// of HTTP's registered ones, "other" for anything else. net/http accepts any
// token as a method, so labelling by the raw method would let a client mint
// a new series per request and grow the registry without bound.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// seriesKey names the HTTP series of a route pattern and method.
type seriesKey struct{ route, method string }

// httpSeries are the instruments of one route pattern and method:
// WithLabelValues hashes and checks its label values on every call, so
// each series is looked up once and kept. Series are still created on
// first use only, as WithLabelValues creates them.
type httpSeries struct {
	key      seriesKey
	duration prometheus.Observer
	codes    [len(cachedCodes)]atomic.Pointer[prometheus.Counter] // by codeSlot
}

// maxCachedSeries bounds the cache as a second guard: the keys are route
// patterns (plus "unmatched") times methodLabel's ten values. Past the
// bound a series is looked up on every request.
const maxCachedSeries = 512

// cachedCodes are the status codes whose request counters are kept per
// series; any other code is looked up on every request.
var cachedCodes = [...]int{200, 201, 204, 304, 400, 401, 403, 404, 405, 409, 410, 412, 413, 415, 422, 429, 500, 503}

// codeSlot is 1 + the index of a code in cachedCodes, 0 for the others.
var codeSlot = func() (t [600]uint8) {
	for i, c := range cachedCodes {
		t[c] = uint8(i + 1)
	}
	return t
}()

func (m *Metrics) httpSeriesOf(route, method string) *httpSeries {
	k := seriesKey{route, method}
	if hs := (*m.series.Load())[k]; hs != nil {
		return hs
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	old := *m.series.Load()
	if hs := old[k]; hs != nil {
		return hs
	}
	hs := &httpSeries{key: k, duration: m.duration.WithLabelValues(route, method)}
	if len(old) < maxCachedSeries {
		next := maps.Clone(old)
		next[k] = hs
		m.series.Store(&next)
	}
	return hs
}

// requests is the request counter of the series with status code.
func (hs *httpSeries) requests(m *Metrics, code int) prometheus.Counter {
	slot := 0
	if code >= 0 && code < len(codeSlot) {
		slot = int(codeSlot[code])
	}
	if slot == 0 {
		return m.requests.WithLabelValues(hs.key.route, hs.key.method, strconv.Itoa(code))
	}
	if c := hs.codes[slot-1].Load(); c != nil {
		return *c
	}
	c := m.requests.WithLabelValues(hs.key.route, hs.key.method, strconv.Itoa(code))
	hs.codes[slot-1].Store(&c) // a racing store keeps the same counter
	return c
}

// statusWriter records the status code and stamps the Date header
// (stampDate) when the answer starts; Unwrap keeps http.ResponseController
// (flush, write deadlines) working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
		stampDate(w.ResponseWriter.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		stampDate(w.ResponseWriter.Header())
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// coreCollector reads core.Stats through the actor at scrape time.
type coreCollector struct{ broker *core.Broker }

// statMetric is one metric read off core.Stats.
type statMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	label string
	value func(*core.Stats) float64
}

func gauge(name, help string, v func(*core.Stats) float64) statMetric {
	return statMetric{desc: prometheus.NewDesc(name, help, nil, nil), kind: prometheus.GaugeValue, value: v}
}

func counter(name, help string, v func(*core.Stats) float64) statMetric {
	return statMetric{desc: prometheus.NewDesc(name, help, nil, nil), kind: prometheus.CounterValue, value: v}
}

// labelled builds one counter per label value of a single-label family.
func labelled(name, help, label string, values map[string]func(*core.Stats) float64) []statMetric {
	d := prometheus.NewDesc(name, help, []string{label}, nil)
	out := make([]statMetric, 0, len(values))
	for v, f := range values {
		out = append(out, statMetric{desc: d, kind: prometheus.CounterValue, label: v, value: f})
	}
	return out
}

func u(v uint64) float64 { return float64(v) }

var statMetrics = slices.Concat(
	[]statMetric{
		gauge("muster_sessions", "Live sessions.", func(s *core.Stats) float64 { return float64(s.Sessions) }),
		counter("muster_sessions_created_total", "Sessions created.", func(s *core.Stats) float64 { return u(s.SessionsCreated) }),
		gauge("muster_revision", "The broker revision.", func(s *core.Stats) float64 { return u(s.Revision) }),
		gauge("muster_leases_active", "Held leases, all families.", func(s *core.Stats) float64 { return float64(s.Leases) }),
		gauge("muster_lease_waiters", "Queued acquisitions.", func(s *core.Stats) float64 { return float64(s.Waiters) }),
		counter("muster_lease_renewals_total", "Successful extends.", func(s *core.Stats) float64 { return u(s.Renewals) }),
		counter("muster_lease_releases_total", "Explicit releases.", func(s *core.Stats) float64 { return u(s.Releases) }),
		counter("muster_lease_expiries_total", "Leases that expired.", func(s *core.Stats) float64 { return u(s.Expiries) }),
		counter("muster_lease_fenced_rejects_total", "Extends and releases refused as fenced or not_owner.", func(s *core.Stats) float64 { return u(s.Rejected) }),
		counter("muster_lease_rollbacks_total", "Grants rolled back because the requester had left.", func(s *core.Stats) float64 { return u(s.Rollbacks) }),
		counter("muster_lease_wait_cancelled_total", "Waiters whose requester left the queue.", func(s *core.Stats) float64 { return u(s.WaitCancelled) }),
		gauge("muster_watch_registrations_exact", "Active exact watch registrations.", func(s *core.Stats) float64 { return float64(s.ExactRegistrations) }),
		gauge("muster_watch_registrations_wildcard", "Active wildcard watch registrations.", func(s *core.Stats) float64 { return float64(s.WildcardRegistrations) }),
		counter("muster_watch_changes_total", "Held-set changes fanned out.", func(s *core.Stats) float64 { return u(s.Changes) }),
		counter("muster_watch_fanout_total", "Deliveries of changes to matching registrations (fan-out; divide by changes for the mean).", func(s *core.Stats) float64 { return u(s.Deliveries) }),
		counter("muster_watch_overflows_total", "Streams dropped because they refused a change: their bounded queue was full (slow consumer), or they were already ending.", func(s *core.Stats) float64 { return u(s.Overflows) }),
		counter("muster_watch_subscription_limit_total", "Stream opens refused by the registration caps.", func(s *core.Stats) float64 { return u(s.SubscriptionLimit) }),
		gauge("muster_list_snapshots_open", "Open inventory snapshots.", func(s *core.Stats) float64 { return float64(s.Snapshots) }),
		counter("muster_list_snapshots_taken_total", "Inventory snapshots taken.", func(s *core.Stats) float64 { return u(s.SnapshotsTaken) }),
	},
	labelled("muster_list_snapshots_dropped_total", "Inventory snapshots dropped, by reason.", "reason", map[string]func(*core.Stats) float64{
		"evicted":      func(s *core.Stats) float64 { return u(s.SnapshotsEvicted) },
		"idle_timeout": func(s *core.Stats) float64 { return u(s.SnapshotsExpired) },
	}),
	labelled("muster_sessions_ended_total", "Sessions ended, by reason.", "reason", map[string]func(*core.Stats) float64{
		"expired": func(s *core.Stats) float64 { return u(s.SessionsExpired) },
		"deleted": func(s *core.Stats) float64 { return u(s.SessionsDeleted) },
	}),
	labelled("muster_lease_acquire_total", "Acquisition outcomes.", "outcome", map[string]func(*core.Stats) float64{
		"acquired":           func(s *core.Stats) float64 { return u(s.AcquireGranted) },
		"granted_after_wait": func(s *core.Stats) float64 { return u(s.AcquireGrantedAfterWait) },
		"already_held":       func(s *core.Stats) float64 { return u(s.AcquireAlreadyHeld) },
		"lease_held":         func(s *core.Stats) float64 { return u(s.AcquireHeld) },
		"queued":             func(s *core.Stats) float64 { return u(s.AcquireQueued) },
		"already_queued":     func(s *core.Stats) float64 { return u(s.AcquireAlreadyQueued) },
		"queue_full":         func(s *core.Stats) float64 { return u(s.AcquireQueueFull) },
		"wait_timeout":       func(s *core.Stats) float64 { return u(s.AcquireWaitTimeout) },
	}),
)

// familyMetric is one per-family metric read off core.FamilyStats. The
// family label comes from the configuration (a bounded set), never from a
// request.
type familyMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*core.FamilyStats) float64
	label string // the value of the "limit" label, if any
}

func familyGauge(name, help string, v func(*core.FamilyStats) float64) familyMetric {
	return familyMetric{desc: prometheus.NewDesc(name, help, []string{"family"}, nil), kind: prometheus.GaugeValue, value: v}
}

var refusedDesc = prometheus.NewDesc("muster_family_quota_refusals_total",
	"Requests refused by the family's own quota, by limit.", []string{"family", "limit"}, nil)

var familyMetrics = []familyMetric{
	familyGauge("muster_family_sessions", "Live sessions of the family.", func(f *core.FamilyStats) float64 { return float64(f.Sessions) }),
	familyGauge("muster_family_watch_streams", "Open watch streams of the family.", func(f *core.FamilyStats) float64 { return float64(f.Streams) }),
	familyGauge("muster_family_watch_registrations", "Watch registrations of the family, exact and wildcard.", func(f *core.FamilyStats) float64 { return float64(f.Registrations) }),
	familyGauge("muster_family_snapshots", "Retained inventory snapshots of the family.", func(f *core.FamilyStats) float64 { return float64(f.Snapshots) }),
	familyGauge("muster_family_lease_waiters", "Queued acquisitions of the family.", func(f *core.FamilyStats) float64 { return float64(f.Waiters) }),
	{desc: prometheus.NewDesc("muster_family_snapshots_evicted_total", "Snapshots of the family evicted to keep it within its quota.", []string{"family"}, nil),
		kind: prometheus.CounterValue, value: func(f *core.FamilyStats) float64 { return u(f.SnapshotsEvicted) }},
	{desc: refusedDesc, kind: prometheus.CounterValue, label: "sessions", value: func(f *core.FamilyStats) float64 { return u(f.SessionsRefused) }},
	{desc: refusedDesc, kind: prometheus.CounterValue, label: "watch_streams", value: func(f *core.FamilyStats) float64 { return u(f.StreamsRefused) }},
	{desc: refusedDesc, kind: prometheus.CounterValue, label: "registrations", value: func(f *core.FamilyStats) float64 { return u(f.RegistrationsRefused) }},
	{desc: refusedDesc, kind: prometheus.CounterValue, label: "waiters", value: func(f *core.FamilyStats) float64 { return u(f.WaitersRefused) }},
}

func (c *coreCollector) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, m := range familyMetrics {
		if !seen[m.desc] {
			seen[m.desc] = true
			ch <- m.desc
		}
	}
	for _, m := range statMetrics {
		if !seen[m.desc] {
			seen[m.desc] = true
			ch <- m.desc
		}
	}
}

func (c *coreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.broker.Stats(ctx)
	if err != nil {
		return
	}
	for _, m := range statMetrics {
		var labels []string
		if m.label != "" {
			labels = []string{m.label}
		}
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&st), labels...)
	}
	for fam, fs := range st.Families {
		for _, m := range familyMetrics {
			labels := []string{fam}
			if m.label != "" {
				labels = append(labels, m.label)
			}
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&fs), labels...)
		}
	}
}
