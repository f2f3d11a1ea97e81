package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/musterhq/muster/handlers"
)

// Reloading (SIGHUP): the configuration file is read again and its tokens,
// grants, CORS origins, limits, log level and TLS files are put in force in
// place.
// Sessions, leases, waiters, watch streams and the epoch stay: nothing that
// exists is ended by a reload, and only new requests see the new file (a
// removed token is refused from then on; its family's sessions and leases
// live until their TTL, reachable by any token of the family that remains).
//
// A file that does not load, or that changes what cannot change in place
// (see fixed), changes nothing: the broker keeps the configuration it has
// and logs why, with the messages a start would give.

// ReloadTimeout bounds the wait for the core to take the new limits.
const ReloadTimeout = 5 * time.Second

// reloadMetrics count the reloads.
type reloadMetrics struct {
	total       *prometheus.CounterVec
	ok, failed  prometheus.Counter
	lastSuccess prometheus.Gauge
}

func newReloadMetrics() *reloadMetrics {
	r := &reloadMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_config_reloads_total",
			Help: "Configuration reloads (SIGHUP) by result: ok (in force), failed (the file did not load or changed what needs a restart; nothing changed)."},
			[]string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "muster_config_last_reload_success_timestamp_seconds",
			Help: "Unix time at which the configuration in force was loaded (at start, or by the last reload that succeeded)."}),
	}
	r.ok, r.failed = r.total.WithLabelValues("ok"), r.total.WithLabelValues("failed")
	r.lastSuccess.SetToCurrentTime()
	return r
}

// Reload reads the configuration file again and applies it in place; on
// any error nothing changes. It logs its outcome and counts it, and returns
// the error that refused the file.
func (m *Main) Reload() error {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	if err := m.reload(); err != nil {
		m.reloads.failed.Inc()
		m.Logger.Error("config reload failed; the configuration in force is kept", "err", err.Error())
		return err
	}
	m.reloads.ok.Inc()
	m.reloads.lastSuccess.SetToCurrentTime()
	m.Logger.Info("config reloaded", "tokens", len(m.cfg.Tokens), "cors_origins", len(m.cfg.CORS.AllowedOrigins))
	return nil
}

func (m *Main) reload() error {
	cfg, err := LoadConfig(m.ConfigPath)
	if err != nil {
		return err
	}
	tokens, err := cfg.AuthTokens()
	if err != nil {
		return err
	}
	limits, err := cfg.Limits.resolve(tokenFamilies(tokens))
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := fixed(m.cfg, cfg, *m.limits.Load(), limits); err != nil {
		return fmt.Errorf("config %s: %w", m.ConfigPath, err)
	}
	var tc *tls.Config
	if cfg.TLS != nil {
		if tc, err = cfg.TLS.load(); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	// The core first: it is the only step that can fail (the broker is
	// stopping), and then nothing has changed.
	ctx, cancel := context.WithTimeout(context.Background(), ReloadTimeout)
	defer cancel()
	if err := m.broker.SetLimits(ctx, limits.Core); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	m.limits.Store(&limits) // fleet_specs_per_root
	m.conns.setCaps(m.connectionCaps(limits))
	if err := m.handler.SetCORSOrigins(cfg.CORS.AllowedOrigins); err != nil {
		return err // checked by LoadConfig: not reached
	}
	m.auth.Replace(tokens)
	if tc != nil {
		m.tls.current.Store(tc) // new handshakes only
	}
	m.logLevel.Set(cfg.Log.SlogLevel())
	m.cfg = cfg
	return nil
}

// fixed refuses the changes a reload cannot make in place: they need a
// restart (a new epoch).
func fixed(old, cfg *FileConfig, oldLim, lim Limits) error {
	restart := func(what string) error {
		return fmt.Errorf("%s: a change needs a restart; the reload changed nothing", what)
	}
	switch {
	case old.DevMode != cfg.DevMode || (len(old.Tokens) == 0) != (len(cfg.Tokens) == 0):
		return restart("dev_mode (tokens on or off)")
	case (old.TLS == nil) != (cfg.TLS == nil):
		return restart("tls (HTTPS on or off)")
	case !reflect.DeepEqual(old.Placement, cfg.Placement):
		return restart("placement")
	case old.Placement != nil && !slices.Equal(sortedFamilies(old), sortedFamilies(cfg)):
		return restart("the families of the tokens, with placement on,")
	case old.Log.Access != cfg.Log.Access:
		return restart("log.access")
	case oldLim.BodyReadTimeout != lim.BodyReadTimeout:
		return restart("limits.body_read_timeout")
	case oldLim.SweepsRunning != lim.SweepsRunning:
		return restart("limits.broker.sweeps")
	}
	return nil
}

// tokenFamilies are the families of tokens, or the dev family without any.
func tokenFamilies(tokens []handlers.Token) []string {
	if len(tokens) == 0 {
		return []string{handlers.DevFamily}
	}
	out := make([]string, 0, len(tokens))
	for _, t := range tokens {
		out = append(out, string(t.Family))
	}
	return out
}

// sortedFamilies are the distinct families of c's tokens, sorted.
func sortedFamilies(c *FileConfig) []string {
	out := make([]string, 0, len(c.Tokens))
	for _, t := range c.Tokens {
		out = append(out, t.Family)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
