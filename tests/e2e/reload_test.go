package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// reloadCall is one request of the reload tests: status, epoch and JSON body.
type reloadCall struct {
	status int
	epoch  string
	body   map[string]any
}

func callBroker(t *testing.T, p *process, method, path, secret, body string) reloadCall {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := reloadCall{status: resp.StatusCode, epoch: resp.Header.Get("Muster-Epoch")}
	_ = json.NewDecoder(resp.Body).Decode(&out.body)
	return out
}

// writeConfig writes a configuration file of tokens and extra sections.
func writeConfig(t *testing.T, path, extra string, tokens ...musterbin.Token) {
	t.Helper()
	if err := os.WriteFile(path, []byte(musterbin.TokensConfig(tokens...)+extra), 0o600); err != nil {
		t.Fatal(err)
	}
}

// hangUp sends the broker SIGHUP and waits for the log line that says how
// the reload went ("config reloaded" or "config reload failed; …").
func hangUp(t *testing.T, p *process) map[string]any {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatal("muster exited on SIGHUP")
			}
			if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "config reload") {
				return l
			}
		case <-timeout:
			t.Fatal("no reload line within 10 s of SIGHUP")
		}
	}
}

func acmeToken(secret string) musterbin.Token {
	return musterbin.Token{Secret: secret, Family: "acme", Grants: []string{"lease://acme/**#*"}}
}

// TestReloadRotatesTokenInPlace: SIGHUP with the token's secret rotated
// keeps the epoch, the session, its lease and an open watch stream; the new
// secret works on them, the old one is refused.
func TestReloadRotatesTokenInPlace(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "muster.yaml")
	writeConfig(t, cfg, "", acmeToken("old-secret"))
	p := startProcess(t, "--addr", "127.0.0.1:0", "--config", cfg)

	sess := callBroker(t, p, "POST", "/v1/sessions", "old-secret", `{"owner_id":"w","ttl_ms":60000}`)
	if sess.status != 201 {
		t.Fatalf("create session: %d %v", sess.status, sess.body)
	}
	sid := sess.body["session_id"].(string)
	lease := callBroker(t, p, "POST", "/v1/leases/acme/jobs/one/acquire", "old-secret", `{"session_id":"`+sid+`","ttl_ms":60000}`)
	if lease.status != 200 {
		t.Fatalf("acquire: %d %v", lease.status, lease.body)
	}
	token := lease.body["fencing_token"]

	// A watch stream opened with the old secret.
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/v1/leases/watch?selector=lease://acme/**", nil)
	req.Header.Set("Authorization", "Bearer old-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch: %v %v", err, resp)
	}
	defer resp.Body.Close()
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- ev
			}
		}
	}()
	if ev := nextEvent(t, events); ev != "snapshot" {
		t.Fatalf("first event %q", ev)
	}

	writeConfig(t, cfg, "", acmeToken("new-secret"))
	if l := hangUp(t, p); l["msg"] != "config reloaded" {
		t.Fatalf("reload: %v", l)
	}

	if got := callBroker(t, p, "POST", "/v1/sessions/"+sid+"/keepalive", "old-secret", "").status; got != 401 {
		t.Errorf("keepalive with the old secret: %d, want 401", got)
	}
	ka := callBroker(t, p, "POST", "/v1/sessions/"+sid+"/keepalive", "new-secret", "")
	if ka.status != 200 || ka.epoch != sess.epoch {
		t.Errorf("keepalive with the new secret: %d, epoch %q (was %q)", ka.status, ka.epoch, sess.epoch)
	}
	ext := callBroker(t, p, "POST", "/v1/leases/acme/jobs/one/extend", "new-secret",
		`{"session_id":"`+sid+`","fencing_token":`+jsonText(t, token)+`,"ttl_ms":60000}`)
	if ext.status != 200 || ext.body["fencing_token"] != token {
		t.Errorf("extend with the new secret: %d %v", ext.status, ext.body)
	}
	// The stream opened before the reload still delivers.
	if got := callBroker(t, p, "POST", "/v1/leases/acme/jobs/two/acquire", "new-secret", `{"session_id":"`+sid+`","ttl_ms":60000}`).status; got != 200 {
		t.Fatalf("acquire after the reload: %d", got)
	}
	if ev := nextEvent(t, events); ev != "change" {
		t.Errorf("watch stream after the reload: event %q, want change", ev)
	}
	base := "http://" + p.addr
	if got := musterbin.Metric(base, `muster_config_reloads_total{result="ok"}`); got != 1 {
		t.Errorf("reloads ok: %v, want 1", got)
	}
	if got := musterbin.Metric(base, "muster_config_last_reload_success_timestamp_seconds"); got < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last reload success timestamp %v", got)
	}
}

// TestReloadBadFileChangesNothing: a file that does not load is refused
// with a reason; the token in force still works and the failure is counted.
func TestReloadBadFileChangesNothing(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "muster.yaml")
	writeConfig(t, cfg, "", acmeToken("kept-secret"))
	p := startProcess(t, "--addr", "127.0.0.1:0", "--config", cfg)
	epoch := callBroker(t, p, "GET", "/v1/leases?selector=lease://acme/**", "kept-secret", "").epoch

	writeConfig(t, cfg, "limitz: {}\n", acmeToken("other-secret"))
	l := hangUp(t, p)
	if msg, _ := l["msg"].(string); !strings.HasPrefix(msg, "config reload failed") || !strings.Contains(l["err"].(string), `unknown key "limitz"`) {
		t.Fatalf("reload of a bad file: %v", l)
	}
	got := callBroker(t, p, "POST", "/v1/sessions", "kept-secret", `{"owner_id":"w","ttl_ms":60000}`)
	if got.status != 201 || got.epoch != epoch {
		t.Errorf("the token in force after a failed reload: %d, epoch %q (was %q)", got.status, got.epoch, epoch)
	}
	if got := callBroker(t, p, "POST", "/v1/sessions", "other-secret", `{"owner_id":"w","ttl_ms":60000}`).status; got != 401 {
		t.Errorf("the bad file's token: %d, want 401", got)
	}
	// A change that needs a restart is refused the same way.
	writeConfig(t, cfg, "limits: {body_read_timeout: 9s}\n", acmeToken("kept-secret"))
	if l := hangUp(t, p); !strings.Contains(l["err"].(string), "limits.body_read_timeout: a change needs a restart") {
		t.Fatalf("reload of a fixed change: %v", l)
	}
	base := "http://" + p.addr
	if got := musterbin.Metric(base, `muster_config_reloads_total{result="failed"}`); got != 2 {
		t.Errorf("reloads failed: %v, want 2", got)
	}
	if got := musterbin.Metric(base, `muster_config_reloads_total{result="ok"}`); got != 0 {
		t.Errorf("reloads ok: %v, want 0", got)
	}
}

// TestReloadLowersQuota: a lowered session quota refuses a new session;
// the sessions over it keep working.
func TestReloadLowersQuota(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "muster.yaml")
	writeConfig(t, cfg, "limits: {family: {sessions: 3}}\n", acmeToken("q-secret"))
	p := startProcess(t, "--addr", "127.0.0.1:0", "--config", cfg)
	var ids []string
	for range 2 {
		s := callBroker(t, p, "POST", "/v1/sessions", "q-secret", `{"owner_id":"w","ttl_ms":60000}`)
		if s.status != 201 {
			t.Fatalf("create session: %d", s.status)
		}
		ids = append(ids, s.body["session_id"].(string))
	}
	writeConfig(t, cfg, "limits: {family: {sessions: 1}}\n", acmeToken("q-secret"))
	if l := hangUp(t, p); l["msg"] != "config reloaded" {
		t.Fatalf("reload: %v", l)
	}
	refused := callBroker(t, p, "POST", "/v1/sessions", "q-secret", `{"owner_id":"w","ttl_ms":60000}`)
	if refused.status != 429 || refused.body["code"] != "session_limit" || refused.body["scope"] != "family" {
		t.Errorf("a session over the lowered quota: %d %v", refused.status, refused.body)
	}
	for _, id := range ids {
		if got := callBroker(t, p, "POST", "/v1/sessions/"+id+"/keepalive", "q-secret", "").status; got != 200 {
			t.Errorf("keepalive of a session kept over the quota: %d", got)
		}
	}
}

func nextEvent(t *testing.T, events <-chan string) string {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the watch stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event within 5 s")
	}
	return ""
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCLIReload: `muster reload` does what SIGHUP does through the admin
// socket of the broker's data directory, and says whether it took: exit 0
// with the new token in force, exit 1 with the reason for a file the broker
// refused (the token in force stays), exit 1 when no broker serves there.
func TestCLIReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "muster.yaml")
	writeConfig(t, cfg, "", acmeToken("old-secret"))
	p := startProcessIn(t, dir, "--addr", "127.0.0.1:0", "--config", cfg)
	reload := func() (string, int) {
		out, err := exec.Command(musterBinary(t), "reload", "--data-dir", dir).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}

	writeConfig(t, cfg, "", acmeToken("new-secret"))
	if out, code := reload(); code != 0 || !strings.Contains(out, "reloaded") {
		t.Fatalf("muster reload: exit %d: %s", code, out)
	}
	if got := callBroker(t, p, "POST", "/v1/sessions", "new-secret", `{"owner_id":"w","ttl_ms":60000}`).status; got != 201 {
		t.Fatalf("the reloaded token: %d, want 201", got)
	}
	if got := callBroker(t, p, "POST", "/v1/sessions", "old-secret", `{"owner_id":"w","ttl_ms":60000}`).status; got != 401 {
		t.Fatalf("the removed token: %d, want 401", got)
	}

	writeConfig(t, cfg, "limitz: {}\n", acmeToken("bad-secret"))
	if out, code := reload(); code != 1 || !strings.Contains(out, `unknown key "limitz"`) || !strings.Contains(out, "kept its configuration") {
		t.Fatalf("muster reload of a bad file: exit %d: %s", code, out)
	}
	if got := callBroker(t, p, "POST", "/v1/sessions", "new-secret", `{"owner_id":"w","ttl_ms":60000}`).status; got != 201 {
		t.Fatalf("the token in force after a refused reload: %d, want 201", got)
	}

	out, err := exec.Command(musterBinary(t), "reload", "--data-dir", t.TempDir()).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "is the broker running") {
		t.Fatalf("muster reload with no broker: %v: %s", err, out)
	}
}
