package app

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// placementMetrics are the placement loop's instruments
// (docs/operations.md, Metrics).
type placementMetrics struct {
	held        atomic.Int64
	renew       prometheus.Histogram
	renewFailed prometheus.Counter
	takeovers   prometheus.Counter
	releases    prometheus.Counter
	fenced      prometheus.Counter
	lost        prometheus.Counter
	moves       *prometheus.CounterVec
	// handoverFailed: planned moves whose sessions were lost after all.
	handoverFailed prometheus.Counter
}

// The causes of muster_placement_moves_total: a family acquired after its
// last owner released it (handover) or let it expire (failover), or
// never claimed before (initial); given up because another live broker is
// its desired owner (rebalance) or because this broker stops (shutdown).
var moveCauses = []string{"initial", "handover", "failover", "rebalance", "shutdown"}

func newPlacementMetrics() *placementMetrics {
	return &placementMetrics{
		renew: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "muster_placement_renew_seconds",
			Help:    "Latency of the renewal statements that succeeded (one a round, renewing every claim held).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		renewFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_placement_renew_failures_total",
			Help: "Renewal statements (one a round, every claim held) that failed or did not answer in time (the claims stand until their deadlines)."}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_placement_takeovers_total",
			Help: "Families this broker acquired (a start, a planned move or a failover)."}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_placement_releases_total",
			Help: "Families this broker gave up (planned moves, shutdown)."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_placement_fenced_total",
			Help: "Families this broker stopped serving at their deadline because no renewal came in time."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_placement_lost_total",
			Help: "Claims found taken or expired at renewal."}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_placement_moves_total",
			Help: "Families this broker took or gave up, by cause: initial, handover (released by its last owner), failover (expired), rebalance (another broker is its desired owner), shutdown."},
			[]string{"cause"}),
		handoverFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_placement_handover_failures_total",
			Help: "Planned moves whose family state was lost: the handover could not be written (given up), or could not be loaded (taken)."}),
	}
}

// register adds the instruments to reg.
func (m *placementMetrics) register(reg prometheus.Registerer) error {
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_placement_claims",
		Help: "Families whose claim this broker holds."}, func() float64 { return float64(m.held.Load()) })
	for _, c := range moveCauses {
		m.moves.WithLabelValues(c) // every cause exported from the start, at 0
	}
	for _, c := range []prometheus.Collector{held, m.renew, m.renewFailed, m.takeovers, m.releases, m.fenced, m.lost, m.moves, m.handoverFailed} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
