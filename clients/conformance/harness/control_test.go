package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const twoActors = `{"name": "t", "proves": "harness self-test", "actors": [
  {"name": "a", "token": "a", "owner_id": "worker-a", "session_ttl_ms": 10000},
  {"name": "b", "token": "a", "owner_id": "worker-b", "session_ttl_ms": 10000}], "steps": []}`

// list is GET /list as token a.
func (p *proc) list(tb testing.TB, selector string) map[string]any {
	tb.Helper()
	q := url.Values{"selector": {selector}, "token": {"a"}}
	return p.mustCall(tb, http.StatusOK, "GET", "/list?"+q.Encode(), "")
}

func items(out map[string]any) []any {
	it, _ := out["items"].([]any)
	return it
}

func TestControlAPI(t *testing.T) {
	p := mustStartHarness(t)

	t.Run("tokens", func(t *testing.T) {
		out := p.mustCall(t, http.StatusOK, "GET", "/tokens", "")
		want := map[string]any{"a": "secret-a", "b": "secret-b", "narrow": "secret-narrow"}
		if fmt.Sprint(out) != fmt.Sprint(want) {
			t.Fatalf("got %v, want %v", out, want)
		}
	})

	t.Run("InvalidScenario", func(t *testing.T) {
		for _, body := range []string{
			`{"name": "x", "proves": "p", "actors": [], "steps": [], "typo": 1}`,
			`{"name": "x", "proves": "", "actors": [], "steps": []}`,
			`{"name": "x", "proves": "p", "actors": [{"name": "a", "token": "nope"}], "steps": []}`,
			`{"name": "x", "proves": "p", "actors": [], "steps": [{"op": "acquire", "rout": "x"}]}`,
			`{"name": "x", "proves": "p", "actors": [], "steps": [{"op": "aquire"}]}`,
			`{"name": "x", "proves": "p", "placement": {"brokers": 1}, "actors": [], "steps": []}`,
			`{"name": "x", "proves": "p", "placement": {"brokers": 2, "pinned": {"fam-z": "b2"}}, "actors": [], "steps": []}`,
			`{"name": "x", "proves": "p", "placement": {"brokers": 2, "pinned": {"fam-a": "b3"}}, "actors": [], "steps": []}`,
		} {
			if out := p.mustCall(t, http.StatusBadRequest, "POST", "/scenario", body); out["code"] != "invalid_scenario" {
				t.Errorf("%s: %v", body, out)
			}
		}
	})

	t.Run("EveryScenarioFileLoads", func(t *testing.T) {
		files, err := filepath.Glob("../*.json")
		if err != nil || len(files) == 0 {
			t.Fatalf("no scenario files: %v", err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if got, out := p.call(t, "POST", "/scenario", string(data)); got != http.StatusNoContent && (out["code"] != "scenario_skipped" || os.Getenv("MUSTER_TEST_PG") != "off") {
				t.Fatalf("%s: %d %v", f, got, out)
			}
		}
	})

	p.mustCall(t, http.StatusNoContent, "POST", "/scenario", twoActors)

	t.Run("EveryHarnessOpRuns", func(t *testing.T) {
		for op := range harnessOps {
			if op == "restart_broker" || op == "end_session" || op == "abandon_session" || op == "new_session" {
				continue // they change the actors the next subtests use; RestartKeepsAddress runs one
			}
			if got, out := p.call(t, "POST", "/step", `{"op": "`+op+`", "timeout_ms": 0}`); got == http.StatusBadRequest {
				t.Errorf("%s: %v", op, out)
			}
		}
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "unhold", "gate": "list_page"}`)
	})

	t.Run("UnknownOps", func(t *testing.T) {
		for _, op := range []string{"observe", "expect_view", "close_observer", "no_such_op"} {
			out := p.mustCall(t, http.StatusBadRequest, "POST", "/step", `{"op": "`+op+`"}`)
			if out["code"] != "unknown_op" || out["op"] != op {
				t.Errorf("%s: %v", op, out)
			}
		}
		if out := p.mustCall(t, http.StatusBadRequest, "POST", "/step", `{"op": "sleep", "typo": 1}`); out["code"] != "invalid_step" {
			t.Errorf("unknown field: %v", out)
		}
	})

	t.Run("StepFailed", func(t *testing.T) {
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire", "actor": "a", "route": "lease://acme/r/doc-1", "ttl_ms": 60000}`)
		for body, detail := range map[string]string{
			`{"op": "acquire", "actor": "b", "route": "lease://acme/r/doc-1", "ttl_ms": 60000}`:                               "lease_held",
			`{"op": "acquire", "actor": "b", "route": "lease://acme/r/doc-2", "ttl_ms": 60000, "expect_error": "lease_held"}`: "succeeded, want error lease_held",
			`{"op": "release", "actor": "b", "route": "lease://acme/r/doc-1"}`:                                                "holds no handle",
			`{"op": "foreign_release", "actor": "b", "route": "lease://acme/r/doc-1", "holder": "a"}`:                         "not_owner",
			`{"op": "acquire", "actor": "zed", "route": "lease://acme/r/doc-1", "ttl_ms": 60000}`:                             `no actor "zed"`,
			`{"op": "wait_held", "gate": "list_page", "timeout_ms": 50}`:                                                      "nothing arrived",
			`{"op": "hold", "gate": "nope"}`:                                     "no gate",
			`{"op": "expect_proxy", "watch_opens_at_least": 1, "timeout_ms": 0}`: "0 watch opens",
		} {
			out := p.mustCall(t, http.StatusUnprocessableEntity, "POST", "/step", body)
			if out["code"] != "step_failed" || !strings.Contains(fmt.Sprint(out["detail"]), detail) {
				t.Errorf("%s: %v, want detail with %q", body, out, detail)
			}
		}
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "foreign_release", "actor": "b", "route": "lease://acme/r/doc-1", "holder": "a", "expect_error": "not_owner"}`)
	})

	t.Run("HolderAndList", func(t *testing.T) {
		p.mustCall(t, http.StatusNotFound, "GET", "/holder/zed", "")
		h := p.mustCall(t, http.StatusOK, "GET", "/holder/a", "")["holder_incarnation"]
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire_many", "actor": "a", "route": "lease://acme/many/doc-{i}", "from": 0, "count": 620, "ttl_ms": 60000}`)
		out := p.list(t, "lease://acme/many/*")
		if len(items(out)) != 620 || out["epoch"] == "" || out["revision"] == nil {
			t.Fatalf("list: %d items, epoch %v, revision %v; want 620 items over two pages", len(items(out)), out["epoch"], out["revision"])
		}
		first := items(out)[0].(map[string]any)
		if first["holder_incarnation"] != h || first["owner_id"] != "worker-a" {
			t.Fatalf("item %v, want holder %v", first, h)
		}
		q := url.Values{"selector": {"lease://acme/*/*"}, "token": {"narrow"}}
		if out := p.mustCall(t, http.StatusForbidden, "GET", "/list?"+q.Encode(), ""); out["code"] != "forbidden" {
			t.Fatalf("forbidden list: %v", out)
		}
		p.mustCall(t, http.StatusBadRequest, "GET", "/list?selector=lease://acme/*/*&token=nope", "")
	})

	t.Run("Background", func(t *testing.T) {
		// doc-1 is held by a: b's queued acquisition times out after 300 ms,
		// which is not the error it expects.
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire", "actor": "b", "route": "lease://acme/r/doc-1", "ttl_ms": 60000, "wait_ms": 300, "background": true, "expect_error": "lease_held"}`)
		out := p.mustCall(t, http.StatusUnprocessableEntity, "POST", "/step", `{"op": "wait_background"}`)
		if !strings.Contains(fmt.Sprint(out["detail"]), "wait_timeout") {
			t.Fatalf("background failure: %v", out)
		}
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "wait_background"}`) // reported once
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire", "actor": "b", "route": "lease://acme/r/doc-1", "ttl_ms": 60000, "wait_ms": 200, "background": true, "expect_error": "wait_timeout"}`)
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "wait_background"}`)
	})

	t.Run("Watches", func(t *testing.T) {
		step := func(want int, body string) map[string]any {
			return p.mustCall(t, want, "POST", "/step", body)
		}
		step(http.StatusOK, `{"op": "actor_watch", "actor": "a", "name": "w1", "selector": "lease://acme/w/*"}`)
		step(http.StatusOK, `{"op": "expect_watch_open", "name": "w1"}`)
		step(http.StatusUnprocessableEntity, `{"op": "expect_watch_end", "name": "w1", "event": "superseded", "timeout_ms": 100}`)
		step(http.StatusOK, `{"op": "actor_watch", "actor": "a", "name": "w2", "selector": "lease://acme/w/*"}`)
		if out := step(http.StatusUnprocessableEntity, `{"op": "expect_watch_end", "name": "w1", "event": "overflow"}`); !strings.Contains(fmt.Sprint(out["detail"]), "superseded") {
			t.Errorf("wrong event: %v", out)
		}
		step(http.StatusOK, `{"op": "expect_watch_end", "name": "w1", "event": "superseded"}`)
		step(http.StatusUnprocessableEntity, `{"op": "expect_watch_open", "name": "w1"}`)
		step(http.StatusUnprocessableEntity, `{"op": "expect_watch_open", "name": "nope"}`)
		step(http.StatusUnprocessableEntity, `{"op": "actor_watch", "actor": "b", "name": "w3", "selector": "lease://acme/w/*", "expect_error": "subscription_limit"}`)
		step(http.StatusUnprocessableEntity, `{"op": "actor_watch", "actor": "b", "name": "w4", "selector": "lease://acme/w/*/x"}`)
		step(http.StatusOK, `{"op": "actor_watch", "actor": "b", "name": "w5", "selector": "lease://acme/w/*/x", "expect_error": "invalid_selector"}`)
		// 70 registrations: three streams (32, 32, 6).
		step(http.StatusOK, `{"op": "actor_watch", "actor": "b", "name": "many", "selector": "lease://acme/m-{i}/*", "from": 0, "count": 70}`)
		step(http.StatusOK, `{"op": "expect_watch_open", "name": "many"}`)
	})

	t.Run("Reset", func(t *testing.T) {
		before := p.list(t, "lease://acme/**")
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "hold", "gate": "list_page"}`)
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "drop_changes", "on": true}`)
		start := time.Now()
		p.mustCall(t, http.StatusNoContent, "POST", "/reset", "")
		t.Logf("reset took %v", time.Since(start))
		after := p.list(t, "lease://acme/**")
		if len(items(before)) == 0 || len(items(after)) != 0 || before["epoch"] == after["epoch"] {
			t.Fatalf("reset: %d items in epoch %v, then %d in %v; want none in a new epoch",
				len(items(before)), before["epoch"], len(items(after)), after["epoch"])
		}
		p.mustCall(t, http.StatusNotFound, "GET", "/holder/a", "")
		// The gates are open again: a paged LIST through the proxy passes.
		p.mustCall(t, http.StatusNoContent, "POST", "/scenario", twoActors)
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire_many", "actor": "a", "route": "lease://acme/p/doc-{i}", "from": 0, "count": 3, "ttl_ms": 60000}`)
		get := func(q string) map[string]any {
			req, _ := http.NewRequest("GET", p.line.Proxy+"/v1/leases?"+q, nil)
			req.Header.Set("Authorization", "Bearer secret-a")
			c := &http.Client{Timeout: 5 * time.Second} // a held gate would time out
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("LIST through the proxy: %v", err)
			}
			defer resp.Body.Close()
			var out map[string]any
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
				t.Fatalf("LIST through the proxy: %s", resp.Status)
			}
			return out
		}
		first := get(url.Values{"selector": {"lease://acme/p/*"}, "limit": {"1"}}.Encode())
		cursor, _ := first["next_cursor"].(string)
		if cursor == "" {
			t.Fatalf("no cursor: %v", first)
		}
		get(url.Values{"selector": {"lease://acme/p/*"}, "limit": {"1"}, "cursor": {cursor}}.Encode())
	})

	t.Run("PlacementOpsNeedPlacement", func(t *testing.T) {
		for _, body := range []string{`{"op": "kill_broker", "broker": "b2"}`, `{"op": "wait_owner", "token": "a", "broker": "b1", "timeout_ms": 0}`,
			`{"op": "move", "token": "a", "broker": "b1", "timeout_ms": 0}`} {
			if out := p.mustCall(t, http.StatusUnprocessableEntity, "POST", "/step", body); !strings.Contains(fmt.Sprint(out["detail"]), "placement") {
				t.Errorf("%s: %v", body, out)
			}
		}
	})

	t.Run("RestartKeepsAddress", func(t *testing.T) {
		before := p.list(t, "lease://acme/**")
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "restart_broker"}`)
		after := p.list(t, "lease://acme/**")
		if before["epoch"] == after["epoch"] || len(items(after)) != 0 {
			t.Fatalf("restart: epoch %v then %v, %d items", before["epoch"], after["epoch"], len(items(after)))
		}
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "new_session", "actor": "a"}`)
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire", "actor": "a", "route": "lease://acme/p/doc-0", "ttl_ms": 60000}`)
	})
}

const placed = `{"name": "t", "proves": "harness self-test", "placement": {"brokers": 3, "pinned": {"fam-a": "b2", "fam-b": "b2"}},
  "actors": [{"name": "a", "token": "a", "owner_id": "worker-a", "session_ttl_ms": 10000}], "steps": []}`

// With MUSTER_TEST_PG=off a placed scenario is refused with 409
// scenario_skipped, saying why (runners skip it), and nothing is reset: the
// single broker keeps serving. Without the opt-out a PostgreSQL the harness
// cannot reach or start is a failure, not a skip.
func TestPlacedScenarioWithoutPostgreSQL(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		p := startHarnessWith(t, map[string]string{"MUSTER_TEST_PG": "off"}, "--pg-scripts", "../../../tests/pg")
		p.mustCall(t, http.StatusNoContent, "POST", "/scenario", twoActors)
		p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire", "actor": "a", "route": "lease://acme/r/doc-0", "ttl_ms": 60000}`)
		out := p.mustCall(t, http.StatusConflict, "POST", "/scenario", placed)
		if out["code"] != "scenario_skipped" || !strings.Contains(fmt.Sprint(out["detail"]), "MUSTER_TEST_PG=off") {
			t.Fatalf("got %v, want scenario_skipped naming MUSTER_TEST_PG=off", out)
		}
		if got := p.list(t, "lease://acme/r/*"); len(items(got)) != 1 {
			t.Fatalf("the refusal reset the single broker: %v", got)
		}
	})
	t.Run("missing", func(t *testing.T) {
		p := startHarnessWith(t, map[string]string{"MUSTER_TEST_PG": "", "MUSTER_TEST_PG_URL": ""})
		if out := p.mustCall(t, http.StatusInternalServerError, "POST", "/scenario", placed); out["code"] != "reset_failed" {
			t.Fatalf("got %v, want reset_failed", out)
		}
	})
}

// A placed scenario runs on three brokers of one PostgreSQL: b1 on the
// harness's broker address sends token a's family to its pinned broker b2;
// actors and GET /list are served there; wait_owner fails while another
// broker serves the family and passes once the pinned broker's kill moved
// it; a following reset returns to the single broker.
func TestPlacedScenario(t *testing.T) {
	if os.Getenv("MUSTER_TEST_PG") == "off" {
		t.Skip("MUSTER_TEST_PG=off: PostgreSQL tests skipped on request")
	}
	p := mustStartHarness(t)
	p.mustCall(t, http.StatusNoContent, "POST", "/scenario", placed)
	q := url.Values{"selector": {"lease://acme/r/*"}, "limit": {"1"}}
	req, _ := http.NewRequest("GET", p.line.Broker+"/v1/leases?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer secret-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	owner, _ := body["owner"].(string)
	if resp.StatusCode != http.StatusMisdirectedRequest || body["code"] != "wrong_broker" || owner == "" || owner == p.line.Broker {
		t.Fatalf("b1 answered %d %v, want 421 wrong_broker naming b2", resp.StatusCode, body)
	}
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire", "actor": "a", "route": "lease://acme/r/doc-0", "ttl_ms": 60000}`)
	if out := p.list(t, "lease://acme/r/*"); len(items(out)) != 1 {
		t.Fatalf("list through b1: %v", out)
	}
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "wait_owner", "token": "a", "broker": "b2", "timeout_ms": 0}`)
	p.mustCall(t, http.StatusUnprocessableEntity, "POST", "/step", `{"op": "wait_owner", "token": "a", "broker": "b3", "timeout_ms": 0}`)
	p.mustCall(t, http.StatusUnprocessableEntity, "POST", "/step", `{"op": "kill_broker", "broker": "b4"}`)
	start := time.Now()
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "kill_broker", "broker": "b2"}`)
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "wait_owner", "token": "a", "broker": "b3", "timeout_ms": 10000}`)
	t.Logf("b3 serves fam-a %v after b2's kill", time.Since(start))
	if out := p.list(t, "lease://acme/r/*"); len(items(out)) != 0 {
		t.Fatalf("the lease survived its broker's kill: %v", out)
	}
	p.mustCall(t, http.StatusNoContent, "POST", "/scenario", twoActors)
	p.mustCall(t, http.StatusUnprocessableEntity, "POST", "/step", `{"op": "wait_owner", "token": "a", "broker": "b1", "timeout_ms": 0}`)
	if out := p.list(t, "lease://acme/**"); len(items(out)) != 0 {
		t.Fatalf("after the reset: %v", out)
	}
}

// move pins a family to another broker at run time: its lease moves with
// it (the same holder at the new owner); restart_broker with broker and
// graceful stops that broker with SIGTERM (the family handed over to b2,
// its lease kept) and starts it again on its address, a new epoch, where
// the pin brings the family back. A move to no broker fails.
func TestPlacedMove(t *testing.T) {
	if os.Getenv("MUSTER_TEST_PG") == "off" {
		t.Skip("MUSTER_TEST_PG=off: PostgreSQL tests skipped on request")
	}
	p := mustStartHarness(t)
	p.mustCall(t, http.StatusNoContent, "POST", "/scenario", placed)
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "acquire", "actor": "a", "route": "lease://acme/r/doc-0", "ttl_ms": 60000}`)
	holder := p.mustCall(t, http.StatusOK, "GET", "/holder/a", "")["holder_incarnation"]
	held := func(when string) string {
		out := p.list(t, "lease://acme/r/*")
		if it := items(out); len(it) != 1 || it[0].(map[string]any)["holder_incarnation"] != holder {
			t.Fatalf("%s: %v, want doc-0 held by a's session", when, out)
		}
		return fmt.Sprint(out["epoch"])
	}
	epochB2 := held("at b2")
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "move", "token": "a", "broker": "b3", "timeout_ms": 15000}`)
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "wait_owner", "token": "a", "broker": "b3", "timeout_ms": 0}`)
	epochB3 := held("moved to b3")
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "restart_broker", "broker": "b3", "graceful": true}`)
	p.mustCall(t, http.StatusOK, "POST", "/step", `{"op": "wait_owner", "token": "a", "broker": "b3", "timeout_ms": 15000}`)
	if again := held("b3 restarted"); again == epochB3 || again == epochB2 {
		t.Fatalf("epochs: b2 %s, b3 %s, b3 restarted %s: want a new one", epochB2, epochB3, again)
	}
	if out := p.mustCall(t, http.StatusUnprocessableEntity, "POST", "/step", `{"op": "move", "token": "a", "broker": "b4"}`); !strings.Contains(fmt.Sprint(out["detail"]), "b4") {
		t.Fatalf("move to b4: %v", out)
	}
	if out := p.mustCall(t, http.StatusUnprocessableEntity, "POST", "/step", `{"op": "move", "token": "narrow", "broker": "b1", "timeout_ms": 300}`); !strings.Contains(fmt.Sprint(out["detail"]), "403") {
		t.Fatalf("move with a read-only token: %v", out)
	}
}
