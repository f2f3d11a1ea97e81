package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// reloadConfig is a configuration of one token of family acme with secret,
// and extra sections.
func reloadConfig(secret, extra string) string {
	sum := sha256.Sum256([]byte(secret))
	return fmt.Sprintf("tokens:\n  - name: w\n    sha256: %s\n    family: acme\n    grants: [\"lease://acme/**#*\"]\n%s", hex.EncodeToString(sum[:]), extra)
}

// mustOpenReloadMain runs a broker on port 0 over the configuration file
// it returns the path of.
func mustOpenReloadMain(t *testing.T, config string) (*Main, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "muster.yaml")
	writeFile(t, path, config)
	m := NewMain()
	m.Addr, m.DataDir, m.ConfigPath = "127.0.0.1:0", t.TempDir(), path
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m, path
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// newSession answers the status of POST /v1/sessions with secret.
func newSession(t *testing.T, m *Main, secret string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", m.URL()+"/v1/sessions", strings.NewReader(`{"owner_id":"w","ttl_ms":60000}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestReloadSwaps: Reload puts new tokens, CORS origins and quotas in force
// and keeps the epoch; a file that does not load, or changes what needs a
// restart, changes nothing; every outcome is counted.
func TestReloadSwaps(t *testing.T) {
	m, path := mustOpenReloadMain(t, reloadConfig("s-old", ""))
	epoch := m.Epoch()
	const origin = "https://dash.example.com"

	writeFile(t, path, reloadConfig("s-new", "cors: {allowed_origins: [\""+origin+"\"]}\nlimits: {family: {sessions: 1}}\n"))
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := newSession(t, m, "s-old", nil).StatusCode; got != 401 {
		t.Errorf("old secret after the reload: %d, want 401", got)
	}
	resp := newSession(t, m, "s-new", map[string]string{"Origin": origin})
	if resp.StatusCode != 201 || resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get("Muster-Epoch") != epoch {
		t.Errorf("new secret after the reload: %d, CORS %q, epoch %q (was %q)", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Muster-Epoch"), epoch)
	}
	if got := newSession(t, m, "s-new", nil).StatusCode; got != 429 {
		t.Errorf("a second session under a reloaded quota of 1: %d, want 429", got)
	}

	for _, tt := range []struct{ name, file, want string }{
		{"Unparsable", "tokens: [", "config"},
		{"NoTokens", "limits: {}\n", "no tokens"},
		{"Placement", reloadConfig("s-new", "placement: {broker: a, advertise: \"http://127.0.0.1:1\"}\n"), "placement: a change needs a restart"},
		{"DevMode", "dev_mode: true\n", "dev_mode"},
		{"BodyTimeout", reloadConfig("s-new", "limits: {body_read_timeout: 7s}\n"), "limits.body_read_timeout: a change needs a restart"},
		{"Sweeps", reloadConfig("s-new", "limits: {broker: {sweeps: 3}}\n"), "limits.broker.sweeps"},
		{"AccessLog", reloadConfig("s-new", "log: {access: true}\n"), "log.access"},
		{"TLSOn", reloadConfig("s-new", "tls: {cert_file: a.crt, key_file: a.key}\n"), "tls (HTTPS on or off): a change needs a restart"},
		{"QuotaOverCap", reloadConfig("s-other", "limits: {broker: {sessions: 10}, family: {sessions: 20}}\n"), "is more than the broker-wide"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			writeFile(t, path, tt.file)
			err := m.Reload()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Reload: %v, want an error naming %q", err, tt.want)
			}
			if got := newSession(t, m, "s-new", nil).StatusCode; got != 429 {
				t.Errorf("after a refused reload the token in force answers %d, want 429 (its quota)", got)
			}
		})
	}
	if ok, failed := counterValue(m.reloads.ok), counterValue(m.reloads.failed); ok != 1 || failed != 9 {
		t.Errorf("reloads ok %v, failed %v; want 1 and 9", ok, failed)
	}
	if m.Epoch() != epoch {
		t.Errorf("epoch %q after reloads, was %q", m.Epoch(), epoch)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var d dto.Metric
	_ = c.Write(&d)
	return d.GetCounter().GetValue()
}
