package app

import (
	"bytes"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value reads a counter or a gauge.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// logLines decodes the JSON lines of a slog.JSONHandler.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// A flood through net/http's error log: every line is counted, 10 a
// second are written, and one line a second counts the rest.
func TestHTTPErrorLogBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&syncWriter{w: &buf}, nil))
		suppressed := newSuppressedLines()
		h := newHTTPErrorLog(logger, suppressed)
		errLog := log.New(h, "", 0) // as http.Server uses it
		for second := range 3 {
			for i := range 1000 {
				errLog.Printf("http2: server connection error from 127.0.0.1:%d: connection error: PROTOCOL_ERROR", second*1000+i)
				time.Sleep(time.Millisecond)
			}
		}
		time.Sleep(time.Second) // the last window's count
		synctest.Wait()

		lines := logLines(t, &buf)
		var passed, reports int
		var dropped float64
		for _, l := range lines {
			switch msg := l["msg"].(string); {
			case msg == "log lines suppressed":
				reports++
				dropped += l["lines"].(float64)
				if l["source"] != "http" || l["level"] != "WARN" {
					t.Errorf("report %v", l)
				}
			case strings.HasPrefix(msg, "http2: server connection error from 127.0.0.1:"):
				passed++
				if l["level"] != "WARN" {
					t.Errorf("line %v", l)
				}
			default:
				t.Errorf("unexpected line %v", l)
			}
		}
		if passed != 30 || reports != 3 || passed+int(dropped) != 3000 {
			t.Errorf("3,000 errors in 3 s: %d lines written, %d reports of %v dropped; want 30, 3 of 2,970", passed, reports, dropped)
		}
		if got := value(t, h.total); got != 3000 {
			t.Errorf("muster_http_errors_total = %v", got)
		}
		if got := value(t, suppressed.WithLabelValues("http")); got != 2970 {
			t.Errorf("muster_log_lines_suppressed_total{source=http} = %v", got)
		}
	})
}

// A quiet source writes every line and no report; flush reports what a
// window dropped before its end.
func TestLineBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&syncWriter{w: &buf}, nil))
		b := newLineBudget(logger, "connections", prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"source"}))
		for range 20 {
			if !b.allow() {
				t.Fatal("a line a 100 ms refused")
			}
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		if n := len(logLines(t, &buf)); n != 0 {
			t.Fatalf("%d lines written by allow alone", n)
		}
		got := 0
		for range 25 {
			if b.allow() {
				got++
			}
		}
		if got != 10 {
			t.Fatalf("%d of 25 lines at once allowed, want 10", got)
		}
		b.flush()
		lines := logLines(t, &buf)
		if len(lines) != 1 || lines[0]["lines"] != 15.0 || lines[0]["source"] != "connections" {
			t.Fatalf("flush wrote %v", lines)
		}
		time.Sleep(2 * time.Second) // the stopped timer writes nothing
		if n := len(logLines(t, &buf)); n != 1 {
			t.Fatalf("%d lines after flush", n)
		}
	})
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
