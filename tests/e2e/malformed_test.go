package e2e

import (
	"strings"
	"testing"
)

// Malformed input always gets a 4xx problem with its documented code,
// never a 5xx, and the detail never echoes what was sent.
func TestMalformedBodies(t *testing.T) {
	b := MustStartBroker(t)
	const marker = "SUBMITTED-VALUE-7731"
	longOwner := strings.Repeat("x", 513)
	tests := []struct {
		name   string
		req    Request
		status int
		code   string
	}{
		{"InvalidJSON", Request{Body: `{"owner_id":`}, 400, "invalid_request"},
		{"NotAnObject", Request{Body: `["` + marker + `"]`}, 400, "invalid_request"},
		{"Null", Request{Body: `null`}, 400, "invalid_request"},
		{"Empty", Request{Body: ``}, 400, "invalid_request"},
		{"WrongTypeTTL", Request{Body: `{"owner_id":"w","ttl_ms":"` + marker + `"}`}, 400, "invalid_request"},
		{"WrongTypeOwner", Request{Body: `{"owner_id":7731,"ttl_ms":1000}`}, 400, "invalid_request"},
		{"MissingOwner", Request{Body: `{"ttl_ms":1000}`}, 400, "invalid_request"},
		{"MissingTTL", Request{Body: `{"owner_id":"` + marker + `"}`}, 400, "invalid_request"},
		// An unknown field is named only when it is a plain identifier.
		{"UnknownField", Request{Body: `{"owner_id":"w","ttl_ms":1000,"` + marker + ` &":1}`}, 400, "invalid_request"},
		{"TTLTooSmall", Request{Body: `{"owner_id":"w","ttl_ms":999}`}, 400, "invalid_request"},
		{"TTLTooLarge", Request{Body: `{"owner_id":"w","ttl_ms":600001}`}, 400, "invalid_request"},
		{"TTLFraction", Request{Body: `{"owner_id":"w","ttl_ms":1000.5}`}, 400, "invalid_request"},
		{"OwnerEmpty", Request{Body: `{"owner_id":"","ttl_ms":1000}`}, 400, "invalid_request"},
		{"OwnerTooLong", Request{Body: `{"owner_id":"` + longOwner + `","ttl_ms":1000}`}, 400, "invalid_request"},
		{"WrongContentType", Request{Body: `{"owner_id":"w","ttl_ms":1000}`, ContentType: "text/plain"}, 400, "invalid_request"},
		{"Oversized", Request{Body: `{"owner_id":"` + strings.Repeat("y", 20<<10) + `","ttl_ms":1000}`}, 413, "payload_too_large"},
		{"TrailingGarbage", Request{Body: `{"owner_id":"w","ttl_ms":1000} ` + marker}, 400, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Method, tc.req.Path = "POST", "/v1/sessions"
			if tc.req.Body == "" {
				tc.req.Body = []byte{}
				tc.req.ContentType = "application/json"
			}
			resp := b.Do(t, tc.req)
			if resp.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.Status, tc.status, resp.Body)
			}
			code, detail := resp.Problem(t)
			if code != tc.code {
				t.Fatalf("code %q, want %q (%s)", code, tc.code, detail)
			}
			if strings.Contains(string(resp.Body), marker) || strings.Contains(detail, "yyyy") {
				t.Fatalf("the problem echoes the submitted value: %s", resp.Body)
			}
			if strings.Contains(detail, "schema") && strings.Contains(detail, "{") {
				t.Fatalf("the problem exposes schema internals: %s", detail)
			}
		})
	}
	// Nothing was created by any of them.
	if !strings.Contains(string(b.Do(t, Request{Method: "GET", Path: "/metrics"}).Body), "\nmuster_sessions_created_total 0\n") {
		t.Fatal("a refused request created a session")
	}
}

func TestMalformedParameters(t *testing.T) {
	b := MustStartBroker(t)
	tests := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"SessionIDNotHex", "POST", "/v1/sessions/XYZ/keepalive", nil, 400, "invalid_request"},
		{"SessionIDInBodyNotHex", "POST", "/v1/leases/a/b/c/acquire", map[string]any{"session_id": "nothex", "ttl_ms": 1000}, 400, "invalid_request"},
		{"LeaseTTLTooLarge", "POST", "/v1/leases/a/b/c/acquire", map[string]any{"session_id": someSession, "ttl_ms": 600001}, 400, "invalid_request"},
		{"WaitTooLong", "POST", "/v1/leases/a/b/c/acquire", map[string]any{"session_id": someSession, "ttl_ms": 1000, "wait_ms": 30001}, 400, "invalid_request"},
		{"NegativeToken", "POST", "/v1/leases/a/b/c/release", map[string]any{"session_id": someSession, "fencing_token": -1}, 400, "invalid_request"},
		{"SelectorMissing", "GET", "/v1/leases", nil, 400, "invalid_selector"},
		{"SelectorTooLong", "GET", "/v1/leases?selector=lease://" + strings.Repeat("a", 600), nil, 400, "invalid_selector"},
		{"SelectorPartialWildcard", "GET", "/v1/leases?selector=lease://acme/renderers/doc*", nil, 400, "invalid_selector"},
		{"LimitTooLarge", "GET", "/v1/leases?selector=lease://a/b/*&limit=501", nil, 400, "invalid_request"},
		{"LimitNotANumber", "GET", "/v1/leases?selector=lease://a/b/*&limit=x", nil, 400, "invalid_request"},
		{"CursorTooLong", "GET", "/v1/leases?selector=lease://a/b/*&cursor=" + strings.Repeat("c", 1100), nil, 400, "invalid_cursor"},
		{"SegmentTooLong", "GET", "/v1/leases/" + strings.Repeat("r", 129) + "/b/c", nil, 400, "invalid_route"},
		{"ControlCharacter", "GET", "/v1/leases/a%01/b/c", nil, 400, "invalid_route"},
		{"PlanTooManyItems", "POST", "/v1/fleets/plan", map[string]any{"desired": make([]string, 10001), "live": []string{}}, 400, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.Do(t, Request{Method: tc.method, Path: tc.path, Body: tc.body})
			if resp.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.Status, tc.status, resp.Body)
			}
			if code, detail := resp.Problem(t); code != tc.code {
				t.Fatalf("code %q, want %q (%s)", code, tc.code, detail)
			}
		})
	}
}

// An owner_id is shown to operators (LIST, GET, watch events, the CLI and
// the dashboard): control characters and bidirectional overrides in it
// could clear a terminal or forge table rows, so they are refused, with the
// field named. Other text, non-ASCII included, is the application's.
func TestOwnerIDRefusesControlsAndBidi(t *testing.T) {
	b := MustStartBroker(t)
	session := func(owner string) *Response {
		return b.Do(t, Request{Method: "POST", Path: "/v1/sessions", Body: map[string]any{"owner_id": owner, "ttl_ms": 60000}})
	}
	for _, owner := range []string{"worker-1", "wörker 日本 ١٢٣", "a.b:c#d?e=f", "tab-less\u00a0nbsp", "emoji 🚀", "x\ufffd"} {
		if resp := session(owner); resp.Status != 201 {
			t.Errorf("owner_id %+q: %d %s", owner, resp.Status, resp.Body)
		}
	}
	for _, owner := range []string{
		"\x1b[2Jcleared", "nul\x00", "line\nbreak", "cr\r", "tab\t", "del\x7f", "c1\u0085", "c1\u009b31m",
		"rlo\u202egnp.exe", "lre\u202a", "pdf\u202c", "lri\u2066", "pdi\u2069", "lrm\u200e", "rlm\u200f", "alm\u061c",
	} {
		resp := session(owner)
		if resp.Status != 400 {
			t.Errorf("owner_id %+q: %d, want 400: %s", owner, resp.Status, resp.Body)
			continue
		}
		code, detail := resp.Problem(t)
		if code != "invalid_request" || !strings.Contains(detail, "owner_id") {
			t.Errorf("owner_id %+q: %s %q, want invalid_request naming owner_id", owner, code, detail)
		}
	}
}
