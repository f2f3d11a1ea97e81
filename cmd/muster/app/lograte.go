package app

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Connection-level noise (a client sending garbage, a flood of connections
// past the caps) must not cost a log line each: thousands a second would
// fill the disk and drown every other line. Such lines go through a
// lineBudget; the metrics count every event, logged or not.

// Budget of the connection-level log lines: per source, at most
// logLinesPerWindow lines a window, then one line counting the rest.
const (
	logLinesPerWindow = 10
	logWindow         = time.Second
)

// lineBudget passes at most perWindow lines a window and drops the rest.
// After the first drop of a window it schedules one line, at the end of
// that window, saying how many lines of its source were dropped since the
// last such line. Whatever the rate of events, a source writes at most
// perWindow+1 lines a window. Safe for concurrent use.
type lineBudget struct {
	logger     *slog.Logger
	source     string
	perWindow  int
	window     time.Duration
	suppressed prometheus.Counter

	mu      sync.Mutex
	start   time.Time // of the current window
	passed  int       // lines passed in the current window
	dropped int       // lines dropped since the last report
	timer   *time.Timer
}

func newLineBudget(logger *slog.Logger, source string, suppressed *prometheus.CounterVec) *lineBudget {
	return &lineBudget{logger: logger, source: source, perWindow: logLinesPerWindow, window: logWindow,
		suppressed: suppressed.WithLabelValues(source)}
}

// allow reports whether a line may be written now; false counts it dropped.
func (b *lineBudget) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if now.Sub(b.start) >= b.window {
		b.start, b.passed = now, 0
	}
	if b.passed < b.perWindow {
		b.passed++
		return true
	}
	b.suppressed.Inc()
	if b.dropped++; b.dropped == 1 {
		b.timer = time.AfterFunc(b.start.Add(b.window).Sub(now), b.report)
	}
	return false
}

// report writes the count of the lines dropped since the last report.
func (b *lineBudget) report() {
	b.mu.Lock()
	n := b.dropped
	b.dropped = 0
	b.mu.Unlock()
	if n > 0 {
		b.logger.Warn("log lines suppressed", "source", b.source, "lines", n, "window", b.window.String())
	}
}

// flush reports the lines dropped so far at once (at shutdown).
func (b *lineBudget) flush() {
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	b.report()
}

// httpErrorLog is the http.Server's ErrorLog writer: net/http writes one
// line for each error it handles by itself (a malformed HTTP/2 connection,
// an accept error, a bad TLS handshake), with no request and no token in
// sight. Every line counts in total; lines within the budget are logged
// as warnings, the line as the message.
type httpErrorLog struct {
	logger *slog.Logger
	budget *lineBudget
	total  prometheus.Counter
}

// Write takes one line of the log.Logger net/http writes to.
func (h *httpErrorLog) Write(p []byte) (int, error) {
	h.total.Inc()
	if h.budget.allow() {
		h.logger.Warn(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// newSuppressedLines counts the lines budgets dropped, by source.
func newSuppressedLines() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_log_lines_suppressed_total",
		Help: "Log lines not written by the connection-level log budget (10 a second per source), by source: http (net/http's error log), connections (refusals at the caps)."},
		[]string{"source"})
}

// newHTTPErrorLog returns the ErrorLog writer for an http.Server, with its
// source "http" in suppressed.
func newHTTPErrorLog(logger *slog.Logger, suppressed *prometheus.CounterVec) *httpErrorLog {
	return &httpErrorLog{
		logger: logger,
		budget: newLineBudget(logger, "http", suppressed),
		total: prometheus.NewCounter(prometheus.CounterOpts{Name: "muster_http_errors_total",
			Help: "Errors net/http handled on its own and reported in its error log (malformed HTTP/2 connections, accept errors, …), logged or not."}),
	}
}
