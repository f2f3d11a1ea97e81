// Package handlers serves Muster's HTTP contract: it implements the server
// interface generated from openapi.yaml, authenticates callers, answers every
// failure as RFC 9457 problem+json with a stable code, and translates HTTP
// into core commands. It holds no lease state of its own.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore"
	"github.com/musterhq/muster/fleetstore/judge"
	"github.com/musterhq/muster/handlers/swaggerui"
	"github.com/musterhq/muster/handlers/ui"
	"github.com/musterhq/muster/sse"
)

// Options wire a Server.
type Options struct {
	Broker  *core.Broker
	Auth    *Authenticator
	Metrics *Metrics
	Logger  *slog.Logger
	// Clock is the core's clock (remaining_ms is computed against it).
	Clock core.Clock
	// CursorMaster is the secret the per-epoch cursor keys derive from.
	CursorMaster []byte
	// Ready reports whether dependencies beyond the actor are reachable.
	// It is called with the request's context.
	Ready func(context.Context) error
	// Fleet is the desired set behind the /v1/fleets operations.
	Fleet *fleetstore.Fleet
	// BodyReadTimeout bounds the reading of a request body (see
	// bodyDeadline); zero is DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// SweepsRunning bounds the sweeps that validate at once (one per
	// family in any case); zero is DefaultSweepsRunning.
	SweepsRunning int
	// SweepWorker is the executable a sweep validates in (package judge:
	// the program calls judge.Main first thing); empty is this process's
	// own executable. SweepLimits bound each sweep's worker.
	SweepWorker string
	SweepLimits judge.Limits
	// CORSAllowedOrigins are the exact origins (scheme://host[:port]) whose
	// pages may call the API from a browser; empty turns CORS off. See cors.
	CORSAllowedOrigins []string
	// Directory names the owners of families this broker does not serve
	// (multi-broker mode, docs/placement.md); nil in a single broker.
	Directory Directory
	// BrokerName, when set (multi-broker mode), is sent as the Muster-Broker
	// header of every answer.
	BrokerName string
	// AccessLog logs one line per request at level info: method, route
	// pattern (never a path: no session id, route or token), status and
	// duration.
	AccessLog bool
}

// Server is the HTTP face of one broker.
type Server struct {
	brokerName string // Muster-Broker, "" when not placed
	broker     *core.Broker
	auth       *Authenticator
	metrics    *Metrics
	log        *slog.Logger
	ready      func(context.Context) error
	clock      core.Clock
	cursors    *core.CursorCodec
	hub        sse.Hub
	// writers writes the watch streams (sse.Pool).
	writers *sse.Pool
	cors    corsGate
	router  http.Handler
	// contract is the middleware behind router (tests switch its fast path).
	contract *contract
	docs     http.Handler
	fleet    *fleetstore.Fleet
	sweeps   *sweepGate
	// sweepWorker and sweepLimits start each sweep's worker process.
	sweepWorker string
	sweepLimits judge.Limits
	// batchRules are the batch body's rules, compiled from the contract.
	batchRules *batchRules

	// directory names the owners of families this broker does not serve
	// (multi-broker mode); nil in a single broker.
	directory Directory
}

// New builds the router: chi, the generated routes behind the contract
// middleware (authentication, body bounds, kin-openapi request validation),
// and the operations endpoints.
func New(opt Options) (*Server, error) {
	if opt.Broker == nil || opt.Auth == nil || opt.Metrics == nil || opt.Fleet == nil || len(opt.CursorMaster) == 0 {
		return nil, errors.New("handlers: Broker, Auth, Metrics, Fleet and CursorMaster are required")
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Clock == nil {
		opt.Clock = core.SystemClock{}
	}
	s := &Server{broker: opt.Broker, auth: opt.Auth, metrics: opt.Metrics, log: opt.Logger, ready: opt.Ready, clock: opt.Clock,
		cursors: core.NewCursorCodec(opt.CursorMaster, opt.Broker.Epoch()), fleet: opt.Fleet,
		sweeps: newSweepGate(opt.SweepsRunning), sweepWorker: opt.SweepWorker, sweepLimits: opt.SweepLimits, directory: opt.Directory,
		brokerName: opt.BrokerName, writers: newWriterPool()}
	opt.Metrics.writers.Store(s.writers)
	if opt.AccessLog {
		// Written whatever the log level: asked for by itself.
		log := slog.New(alwaysEnabled{opt.Logger.Handler()})
		opt.Metrics.access = func(method, route string, status int, took time.Duration) {
			log.Info("request", "method", method, "route", route, "status", status, "ms", float64(took.Microseconds())/1000)
		}
	}
	if s.sweepWorker == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("handlers: the sweep worker's executable: %w", err)
		}
		s.sweepWorker = exe
	}
	spec, err := api.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("handlers: embedded spec: %w", err)
	}
	if s.batchRules, err = loadBatchRules(spec); err != nil {
		return nil, err
	}
	// Relative to /docs/, so that the page works under a prefix a reverse
	// proxy strips (docs/operations.md, Behind a reverse proxy).
	s.docs = swaggerui.Handler("../openapi.yaml")
	if opt.BodyReadTimeout <= 0 {
		opt.BodyReadTimeout = DefaultBodyReadTimeout
	}
	c, err := newContract(spec, opt.Auth, opt.Logger, opt.BodyReadTimeout)
	if err != nil {
		return nil, err
	}
	c.batch = s.batchRules
	s.contract = c

	if err := s.SetCORSOrigins(opt.CORSAllowedOrigins); err != nil {
		return nil, err
	}

	r := chi.NewRouter()
	r.Use(closeAfterChunked) // first: every answer, the CORS preflight's included
	r.Use(s.cors.middleware) // a preflight is answered before anything else runs
	// HEAD is served by every GET route (RFC 9110 §9.3.2): chi routes it to
	// the GET handler, and net/http drops the body.
	r.Use(bodyDeadline(opt.BodyReadTimeout), s.epochHeader, s.metrics.middleware, s.recoverer, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, muster.CodeNotFound, "no such route")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 lists the methods the route takes.
		w.Header().Set("Allow", strings.Join(allowed(r, req.URL.Path), ", "))
		writeProblem(w, muster.CodeMethodNotAllowed, "the route does not take this method")
	})
	r.Handle("/docs/*", s.docs)
	dashboard := ui.Handler()
	r.Handle(ui.MountPath, dashboard)
	r.Handle(ui.MountPath+"/*", dashboard)
	s.router = r
	r.Group(func(r chi.Router) {
		r.Use(c.middleware)
		strict := api.NewStrictHandlerWithOptions(s, nil, api.StrictHTTPServerOptions{
			RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, _ error) {
				writeProblem(w, muster.CodeInvalidRequest, "the request body does not match its schema")
			},
			ResponseErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
				s.writeError(w, r, err)
			},
		})
		api.HandlerWithOptions(routes{ServerInterface: strict, s: s}, api.ChiServerOptions{
			BaseRouter: r,
			ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, _ error) {
				writeProblem(w, muster.CodeInvalidRequest, "a parameter is missing or invalid")
			},
		})
	})
	return s, nil
}

// allowedMethods are the methods a route may take, in the order Allow lists
// them.
var allowedMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed lists the methods the router serves on path; HEAD comes with GET.
func allowed(r chi.Routes, path string) []string {
	var out []string
	get := r.Match(chi.NewRouteContext(), http.MethodGet, path)
	for _, m := range allowedMethods {
		if m == http.MethodHead && get || m != http.MethodHead && r.Match(chi.NewRouteContext(), m, path) {
			out = append(out, m)
		}
	}
	return out
}

// ServeHTTP serves the router.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// EndStreams sends `event: shutdown` to every watch stream and waits
// (bounded by ctx) for them to close. Register it with
// http.Server.RegisterOnShutdown: Shutdown does not wait for streams.
func (s *Server) EndStreams(ctx context.Context) error {
	return s.hub.EndAll(ctx, endEvent("shutdown", nil))
}

// routes overrides the generated operations that are not JSON: they need
// the response writer itself.
type routes struct {
	api.ServerInterface
	s *Server
}

func (rt routes) Docs(w http.ResponseWriter, r *http.Request) { rt.s.docs.ServeHTTP(w, r) }

func (rt routes) Metrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(rt.s.metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

func (rt routes) OpenapiSpec(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(api.SpecYAML)
}

func (rt routes) BatchLeases(w http.ResponseWriter, r *http.Request) { rt.s.batchHTTP(w, r) }

func (rt routes) WatchLeases(w http.ResponseWriter, r *http.Request, params api.WatchLeasesParams) {
	rt.s.watch(w, r, params)
}

func (s *Server) epochHeader(next http.Handler) http.Handler {
	// One value slice for every answer: net/http copies it when it sends
	// the header, and Set or Add replace it rather than write into it.
	epoch := []string{s.broker.Epoch()}
	if s.brokerName == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Muster-Epoch"] = epoch
			next.ServeHTTP(w, r)
		})
	}
	name := []string{s.brokerName}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Muster-Epoch"] = epoch
		w.Header()["Muster-Broker"] = name
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a logged `internal` problem.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic", "route", routePattern(r), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			writeProblem(w, muster.CodeInternal, "internal error")
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) now() time.Time { return s.clock.Now() }

var errNotImplemented = muster.Errorf(muster.CodeNotImplemented, "this operation is not implemented yet")

// alwaysEnabled is a handler that writes every record, whatever the level
// its handler was configured with (the access log's).
type alwaysEnabled struct{ slog.Handler }

func (alwaysEnabled) Enabled(context.Context, slog.Level) bool { return true }
