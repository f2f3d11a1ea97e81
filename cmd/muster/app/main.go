// Package app is the muster command's wiring: flags, configuration, the
// broker, the HTTP server and graceful shutdown. main is a thin shell over
// Main so that tests run the same code on port 0 with a temp dir.
package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore"
	"github.com/musterhq/muster/handlers"
)

// Defaults of `muster serve`.
const (
	DefaultAddr    = "127.0.0.1:7420"
	DefaultDataDir = "./muster-data"
)

// Timeouts of every connection (docs/operations.md, Limits).
const (
	// ReadHeaderTimeout bounds the wait for a request's headers, the first
	// request of a new connection included: a connection that sends nothing
	// is closed after it.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection idle between requests.
	IdleTimeout = 2 * time.Minute
)

// Main is one broker process.
type Main struct {
	Addr        string
	DataDir     string
	ConfigPath  string
	InsecureDev bool
	// StoreURL selects the fleet store: "" is the bbolt file in DataDir,
	// postgres://… a PostgreSQL database (several brokers may share it).
	// StoreFile, or $MUSTER_STORE, gives it without a command-line
	// argument (see resolveStoreURL).
	StoreURL  string
	StoreFile string

	// Clock drives the core; nil is the wall clock. Tests inject one.
	Clock    core.Clock
	Logger   *slog.Logger
	logLevel slog.LevelVar // of the default Logger: the configuration's log.level
	// EventLog, if set, observes every committed change of the held set on
	// the actor goroutine (it must not block). Tests record ground truth
	// with it.
	EventLog func([]core.Event)

	broker   *core.Broker
	fleet    *fleetstore.Fleet
	server   *http.Server
	listener net.Listener
	served   chan error
	unlock   func()
	placer   *placer // nil unless the configuration has a placement section
	httpLog  *httpErrorLog
	conns    *connLimit

	// In force, replaced by Reload (reload.go) under reloadMu.
	cfg      *FileConfig
	limits   atomic.Pointer[Limits]
	auth     *handlers.Authenticator
	handler  *handlers.Server
	reloads  *reloadMetrics
	reloadMu sync.Mutex
	tls      *tlsFiles // nil unless the configuration has a tls section
	admin    *admin    // nil when the admin socket could not be opened
}

// NewMain returns a Main with the defaults.
func NewMain() *Main {
	return &Main{Addr: DefaultAddr, DataDir: DefaultDataDir}
}

// RegisterFlags defines the flags of `muster serve` on fs, bound to m.
func (m *Main) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.Addr, "addr", m.Addr, "listen address `HOST:PORT`")
	fs.StringVar(&m.DataDir, "data-dir", m.DataDir, "`DIR` for durable data (the fleet store, the cursor key); one broker per directory")
	fs.StringVar(&m.ConfigPath, "config", m.ConfigPath, "YAML configuration `FILE` (tokens and grants); none = dev mode")
	fs.StringVar(&m.StoreURL, "store", m.StoreURL, "fleet store `URL`: empty = the bbolt file in the data dir, or postgres://… (its password shows in ps: prefer --store-file or $"+EnvStore+")")
	fs.StringVar(&m.StoreFile, "store-file", m.StoreFile, "read the fleet store URL from the first line of `FILE`")
	fs.BoolVar(&m.InsecureDev, "insecure-dev", m.InsecureDev, "allow dev mode (no tokens) on a non-loopback address")
}

// Open loads the configuration, starts the core and begins serving. It
// returns once the listener is bound.
func (m *Main) Open() error { return m.OpenContext(context.Background()) }

// OpenContext is Open whose wait for the fleet store (see openStore) ends
// early when ctx ends: a SIGTERM during start-up stops the broker at once.
func (m *Main) OpenContext(ctx context.Context) (err error) {
	if m.Logger == nil {
		m.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: &m.logLevel}))
	}
	if err := m.resolveStoreURL(); err != nil {
		return err
	}
	cfg, err := LoadConfig(m.ConfigPath)
	if err != nil {
		return err
	}
	m.logLevel.Set(cfg.Log.SlogLevel())
	tokens, err := cfg.AuthTokens()
	if err != nil {
		return err
	}
	auth := handlers.NewAuthenticator(tokens)
	families := tokenFamilies(tokens)
	limits, err := cfg.Limits.resolve(families)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.load()
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		m.tls = &tlsFiles{}
		m.tls.current.Store(tc)
	}
	if auth.DevMode() && !m.InsecureDev && !loopback(m.Addr) {
		return fmt.Errorf("refusing to serve without tokens on non-loopback address %s: configure tokens or pass --insecure-dev", m.Addr)
	}
	if err := os.MkdirAll(m.DataDir, 0o750); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if m.unlock, err = lockDataDir(m.DataDir); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			m.unlock()
		}
	}()
	secret, err := loadSecret(m.DataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := m.openStore(ctx); err != nil {
		return err
	}
	m.cfg, m.auth = cfg, auth
	m.limits.Store(&limits)
	m.fleet.SpecsPerRoot = func(family string) int { return m.limits.Load().specsPerRoot(family) }

	var placement *placementSettings
	if cfg.Placement != nil {
		if placement, err = cfg.Placement.resolve(families, m.StoreURL); err != nil {
			_ = m.closeStore()
			return fmt.Errorf("config: %w", err)
		}
	}
	coreCfg := limits.Core
	coreCfg.Epoch, coreCfg.IncarnationKey = randomText(12), randomBytes(32)
	coreCfg.Placed = placement != nil
	m.broker = core.NewBroker(coreCfg, m.Clock, m.sink)
	var directory handlers.Directory
	if placement != nil {
		if err := m.openPlacer(placement); err != nil {
			m.broker.Close()
			_ = m.closeStore()
			return err
		}
		directory = m.placer
	}
	metrics := handlers.NewMetrics(m.broker)
	m.reloads = newReloadMetrics()
	metrics.Registry.MustRegister(m.reloads.total, m.reloads.lastSuccess)
	if m.placer != nil {
		if err := m.placer.metrics.register(metrics.Registry); err != nil {
			m.closePlacer()
			m.broker.Close()
			_ = m.closeStore()
			return err
		}
	}
	h, err := handlers.New(handlers.Options{
		Broker:       m.broker,
		Auth:         auth,
		Metrics:      metrics,
		Logger:       m.Logger,
		Clock:        m.Clock,
		CursorMaster: secret,
		Fleet:        m.fleet,
		Ready:        m.storeReady,

		BodyReadTimeout: limits.BodyReadTimeout,
		SweepsRunning:   limits.SweepsRunning,
		Directory:       directory,
		BrokerName:      m.brokerName(),

		CORSAllowedOrigins: cfg.CORS.AllowedOrigins,
		AccessLog:          cfg.Log.Access,
	})
	if err != nil {
		m.closePlacer()
		m.broker.Close()
		_ = m.closeStore()
		return err
	}
	m.handler = h
	ln, err := net.Listen("tcp", m.Addr)
	if err != nil {
		m.closePlacer()
		m.broker.Close()
		_ = m.closeStore()
		return err
	}
	suppressed := newSuppressedLines()
	m.httpLog = newHTTPErrorLog(m.Logger, suppressed)
	m.conns = m.limitConnections(ln, limits, suppressed)
	m.listener = m.conns
	metrics.Registry.MustRegister(suppressed, m.httpLog.total)
	metrics.Registry.MustRegister(m.conns.collectors()...)
	m.server = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(m.httpLog, "", 0),
	}
	// HTTP/1.1 and HTTP/2, over TLS (ALPN) or cleartext (h2c), both serve
	// watch streams.
	m.server.Protocols = new(http.Protocols)
	m.server.Protocols.SetHTTP1(true)
	if m.tls != nil {
		m.server.Protocols.SetHTTP2(true)
		m.server.TLSConfig = m.tls.serverConfig()
	} else {
		m.server.Protocols.SetUnencryptedHTTP2(true)
	}
	// Shutdown does not wait for streams: end them with `event: shutdown`.
	m.server.RegisterOnShutdown(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.EndStreams(ctx)
	})
	m.openAdmin()
	m.served = make(chan error, 1)
	go func() {
		if m.tls != nil {
			m.served <- m.server.ServeTLS(m.listener, "", "")
			return
		}
		m.served <- m.server.Serve(m.listener)
	}()
	if m.placer != nil {
		m.placer.start()
	}
	if auth.DevMode() {
		m.Logger.Warn("dev mode: no tokens configured; every request is family \"default\" with all grants")
	}
	m.Logger.Info("muster serving", "addr", ln.Addr().String(), "tls", m.tls != nil, "epoch", m.broker.Epoch(), "data_dir", m.DataDir)
	return nil
}

// sink receives the events of every actor step.
func (m *Main) sink(ev []core.Event) {
	if m.EventLog != nil {
		m.EventLog(ev)
	}
}

// URL is the base URL the broker serves on.
func (m *Main) URL() string {
	if m.tls != nil {
		return "https://" + m.listener.Addr().String()
	}
	return "http://" + m.listener.Addr().String()
}

// Broker is the running core (for tools, tests and benchmarks).
func (m *Main) Broker() *core.Broker { return m.broker }

// Epoch is this broker lifetime's id.
func (m *Main) Epoch() string { return m.broker.Epoch() }

// Wait blocks until the server stops on its own (or fails).
func (m *Main) Wait() error {
	err := <-m.served
	m.served <- err
	return err
}

// Close shuts down gracefully. In a multi-broker deployment every served
// family is given up first (a planned move: its waiters are answered, its
// streams end, its claim is released for another broker to take at once)
// while the server still answers; then: stop accepting, let in-flight
// requests end (bounded by ctx), stop the core.
func (m *Main) Close(ctx context.Context) error {
	var err error
	m.closePlacer()
	if m.server != nil {
		err = m.server.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = m.server.Close()
		}
		if serveErr := m.Wait(); serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
			err = errors.Join(err, serveErr)
		}
	}
	if m.broker != nil {
		m.broker.Close()
	}
	m.closeAdmin()
	err = errors.Join(err, m.closeStore())
	if m.unlock != nil {
		m.unlock()
	}
	if m.httpLog != nil {
		m.httpLog.budget.flush()
		m.conns.budget.flush()
	}
	m.Logger.Info("muster stopped")
	return err
}

// loopback reports whether addr's host is a loopback address or name.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randomText(n int) string { return base64.RawURLEncoding.EncodeToString(randomBytes(n)) }

// brokerName is this broker's placement name, "" when not placed.
func (m *Main) brokerName() string {
	if m.placer == nil {
		return ""
	}
	return m.placer.self
}
