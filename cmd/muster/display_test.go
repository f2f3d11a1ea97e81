package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"
)

// hostile is what a broker (an older one, or one that is not Muster) could
// put in a value the CLI prints: a screen clear, a NUL, a forged table row
// after a newline, a C1 escape, DEL and a right-to-left override.
const hostile = "w\x1b[2J\x00\nforged-row 9 9\r\u009b31m\x7f\u202eevil"

// fakeBroker answers the lease reads of the CLI with hostile values: GET of
// a route, a LIST page, a watch stream of a marker and one change (then
// forbidden for the next stream), and a problem whose detail is hostile
// too.
func fakeBroker(t *testing.T) string {
	t.Helper()
	item := map[string]any{
		"route": "lease://acme/r/" + hostile, "owner_id": hostile, "holder_incarnation": "inc",
		"acquired_at": "2026-11-30T10:00:00Z", "expires_at": "2026-11-30T10:01:00Z", "remaining_ms": 60000, "renewals": 0,
	}
	reply := func(w http.ResponseWriter, status int, ct string, v any) {
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Muster-Epoch", "e1")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/leases/acme/r/doc", func(w http.ResponseWriter, r *http.Request) {
		st := map[string]any{"route": "lease://acme/r/doc", "held": true, "waiters": 0}
		for k, v := range item {
			if k != "route" {
				st[k] = v
			}
		}
		reply(w, 200, "application/json", st)
	})
	mux.HandleFunc("GET /v1/leases/acme/r/bad", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 400, "application/problem+json", map[string]any{"type": "about:blank", "title": "Bad Request", "status": 400, "code": "invalid_route", "detail": hostile})
	})
	mux.HandleFunc("GET /v1/leases", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, "application/json", map[string]any{"items": []any{item}, "snapshot": map[string]any{"epoch": "e1", "revision": 1}})
	})
	var streams atomic.Int32
	mux.HandleFunc("GET /v1/leases/watch", func(w http.ResponseWriter, r *http.Request) {
		if streams.Add(1)%2 == 0 {
			// watch opens a new stream after one ends: every second one
			// is refused, which no new stream repairs, and watch ends.
			reply(w, 403, "application/problem+json", map[string]any{"type": "about:blank", "title": "Forbidden", "status": 403, "code": "forbidden", "detail": hostile})
			return
		}
		marker, _ := json.Marshal(map[string]any{"epoch": "e1", "revision": 1,
			"subscriptions": []any{map[string]any{"id": "s1", "selector": "lease://acme/**", "items": []any{item}}}})
		change, _ := json.Marshal(map[string]any{"subscription_id": "s1", "route": item["route"], "kind": "acquired", "revision": 2, "item": item})
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Muster-Epoch", "e1")
		fmt.Fprintf(w, "event: snapshot\ndata: %s\n\nevent: change\nid: 2\ndata: %s\n\n", marker, change)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// unprintable reports the first rune of s a terminal would act on or hide
// (anything strconv.IsPrint refuses but the line breaks of the output
// itself), or "".
func unprintable(s string) string {
	for _, line := range strings.Split(s, "\n") {
		for i, r := range line {
			if r == utf8.RuneError || !strconv.IsPrint(r) {
				return fmt.Sprintf("%+q at %d of %q", r, i, line)
			}
		}
	}
	return ""
}

// TestLeaseReadsEscapeWhatTheBrokerSends: `lease get`, `lease list` and
// `lease watch` print what a broker sends with its unprintable characters
// escaped, in tables and in JSON alike, so a holder's owner_id or route can
// neither rewrite the operator's terminal nor forge a row; printable text
// (non-ASCII included) is left alone.
func TestLeaseReadsEscapeWhatTheBrokerSends(t *testing.T) {
	addr := fakeBroker(t)
	tests := []struct {
		name     string
		args     []string
		rows     int // lines of a table, header included
		wantCode int
	}{
		{"GetTable", []string{"get", "acme/r/doc"}, 7, 0},
		{"ListTable", []string{"list", "lease://acme/**"}, 2, 0},
		{"WatchTable", []string{"watch", "lease://acme/**"}, 4, 1}, // header, held, snapshot, change; then forbidden: exit 1
		{"GetJSON", []string{"get", "acme/r/doc", "-o", "json"}, 1, 0},
		{"ListJSON", []string{"list", "lease://acme/**", "-o", "json"}, 1, 0},
		{"WatchJSON", []string{"watch", "lease://acme/**", "-o", "json"}, 3, 1},
		{"Problem", []string{"get", "acme/r/bad"}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := leaseCommand()(append(tc.args, "--addr", addr), &out, &errOut)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %q\nstderr: %q", code, tc.wantCode, out.String(), errOut.String())
			}
			for name, s := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
				if bad := unprintable(s); bad != "" {
					t.Errorf("%s prints %s", name, bad)
				}
			}
			if got := strings.Count(out.String(), "\n"); got != tc.rows {
				t.Errorf("%d lines, want %d:\n%s", got, tc.rows, out.String())
			}
			if strings.HasSuffix(tc.name, "JSON") {
				// JSON escapes them as \u sequences: the values are intact.
				line := strings.SplitN(out.String(), "\n", 2)[0]
				var v any
				if err := json.Unmarshal([]byte(line), &v); err != nil {
					t.Fatalf("not JSON: %v: %q", err, line)
				}
				if !strings.Contains(fmt.Sprint(v), hostile) {
					t.Errorf("the JSON lost the value: %v", v)
				}
			}
		})
	}
}

func TestDisplay(t *testing.T) {
	tests := []struct{ in, want string }{
		{"worker-1", "worker-1"},
		{"wörker 日本 ١٢٣ 🚀", "wörker 日本 ١٢٣ 🚀"},
		{`a "quoted" \ value`, `a "quoted" \ value`},
		{"", ""},
		{"w\x1b[2J", `"w\x1b[2J"`},
		{"a\nb", `"a\nb"`},
		{"a\tb", `"a\tb"`},
		{"nul\x00", `"nul\x00"`},
		{"del\x7f", `"del\x7f"`},
		{"c1\u009b", `"c1\u009b"`},
		{"rlo\u202eevil", `"rlo\u202eevil"`},
		{"nbsp\u00a0", `"nbsp\u00a0"`},
		{"bad\xff", `"bad\xff"`},
	}
	for _, tt := range tests {
		if got := display(tt.in); got != tt.want {
			t.Errorf("display(%+q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestEscapeJSON(t *testing.T) {
	for _, v := range []string{"plain", "wörker 日本", hostile, "emoji 🚀", "fmt\u200d\U000e0001", "sep\u2028\u2029"} {
		var b bytes.Buffer
		if err := printJSON(&b, map[string]string{"v": v}); err != nil {
			t.Fatal(err)
		}
		if bad := unprintable(b.String()); bad != "" {
			t.Errorf("printJSON(%+q) prints %s", v, bad)
		}
		var back map[string]string
		if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["v"] != v {
			t.Errorf("printJSON(%+q) = %s, which reads back as %+q (%v)", v, b.String(), back["v"], err)
		}
	}
}
