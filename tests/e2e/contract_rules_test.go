package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The contract's rules as the real server applies them: each request is
// refused with the documented status and code, and a detail that says what
// is wrong; nothing is created by a refused request.
func TestContractRules(t *testing.T) {
	b := MustStartBroker(t)
	seg128, seg129 := strings.Repeat("a", 128), strings.Repeat("a", 129)
	tests := []struct {
		name   string
		req    Request
		status int
		code   string
		detail string // a part of the detail
	}{
		// Fleet roots: one rule everywhere (segments of 1..128), 400 when illegal.
		{"RootSegment128", Request{Method: "POST", Path: "/v1/fleets/" + seg128 + "/specs", Body: `{"kind":"k","spec":1}`}, 201, "", ""},
		{"RootSegment129", Request{Method: "POST", Path: "/v1/fleets/" + seg129 + "/specs", Body: `{"kind":"k","spec":1}`}, 400, "invalid_request", "longer than 128 bytes"},
		{"NestedRootSegment129", Request{Method: "GET", Path: "/v1/fleets/x%2F" + seg129 + "/specs"}, 400, "invalid_request", "longer than 128 bytes"},
		{"RootSegment200Gap", Request{Method: "GET", Path: "/v1/fleets/" + strings.Repeat("b", 200) + "/gap?live=lease://a/b/*"}, 400, "invalid_request", "longer than 128 bytes"},
		{"NestedRootOK", Request{Method: "GET", Path: "/v1/fleets/x%2F" + seg128 + "/specs"}, 200, "", ""},
		// One JSON value, whatever the case of the media type.
		{"TrailingGarbageMixedCase", Request{Method: "POST", Path: "/v1/sessions", ContentType: "Application/JSON", Body: `{"owner_id":"w","ttl_ms":1000} {}`}, 400, "invalid_request", "data after its JSON value"},
		{"TrailingGarbageCharset", Request{Method: "POST", Path: "/v1/sessions", ContentType: "application/json; charset=UTF-8", Body: `{"owner_id":"w","ttl_ms":1000}x`}, 400, "invalid_request", "data after its JSON value"},
		{"DuplicateKey", Request{Method: "POST", Path: "/v1/sessions", Body: `{"owner_id":"w","owner_id":"v","ttl_ms":1000}`}, 400, "invalid_request", "duplicate member name"},
		// owner_id (like every body string) must be valid UTF-8, never replaced.
		{"OwnerInvalidUTF8", Request{Method: "POST", Path: "/v1/sessions", Body: "{\"owner_id\":\"w\xff\",\"ttl_ms\":1000}"}, 400, "invalid_request", "not valid UTF-8"},
		{"OwnerLoneSurrogate", Request{Method: "POST", Path: "/v1/sessions", Body: `{"owner_id":"w\ud800","ttl_ms":1000}`}, 400, "invalid_request", "lone surrogate"},
		// Unknown fields are named.
		{"UnknownFieldNamed", Request{Method: "POST", Path: "/v1/sessions", Body: `{"owner_id":"w","ttl":1000,"ttl_ms":1000}`}, 400, "invalid_request", `field "/ttl" is unknown`},
		{"UnknownFieldInAcquire", Request{Method: "POST", Path: "/v1/leases/a/b/c/acquire", Body: `{"session_id":"` + someSession + `","ttl_ms":1000,"wait":5}`}, 400, "invalid_request", `field "/wait" is unknown`},
		// A spec is any JSON value but null, on both sides.
		{"SpecNull", Request{Method: "POST", Path: "/v1/fleets/m/specs", Body: `{"kind":"k","spec":null}`}, 400, "invalid_request", `"/spec" must not be null`},
		{"SpecFalse", Request{Method: "POST", Path: "/v1/fleets/m/specs", Body: `{"kind":"k","spec":false}`}, 201, "", ""},
		// Selectors, segments, names and cursors as the schema states them.
		{"SelectorScheme", Request{Method: "GET", Path: "/v1/leases?selector=acme/b/c"}, 400, "invalid_selector", "must start with lease://"},
		{"SelectorSchemeCase", Request{Method: "GET", Path: "/v1/leases?selector=LEASE://acme/b/c"}, 400, "invalid_selector", "must start with lease://"},
		{"SegmentControl", Request{Method: "POST", Path: "/v1/leases/a%01/b/c/acquire", Body: `{"session_id":"` + someSession + `","ttl_ms":1000}`}, 400, "invalid_route", "control character"},
		{"SegmentC1Control", Request{Method: "GET", Path: "/v1/leases/a/b/c%C2%85"}, 400, "invalid_route", "control character"},
		{"SegmentStar", Request{Method: "GET", Path: "/v1/leases/a/b*/c"}, 400, "invalid_route", "wildcards are not allowed"},
		{"SegmentTooLong", Request{Method: "GET", Path: "/v1/leases/a/b/" + seg129}, 400, "invalid_route", "longer than 128 bytes"},
		{"SpecNameTooLong", Request{Method: "GET", Path: "/v1/fleets/m/specs/" + strings.Repeat("n", 85)}, 400, "invalid_name", "at most 84 bytes"},
		{"SpecNameUpper", Request{Method: "DELETE", Path: "/v1/fleets/m/specs/Repo-1"}, 400, "invalid_name", "a name is one segment"},
		{"KindUpper", Request{Method: "POST", Path: "/v1/fleets/m/specs", Body: `{"kind":"Repo","spec":1}`}, 400, "invalid_request", `"/kind"`},
		{"CursorAlphabet", Request{Method: "GET", Path: "/v1/leases?selector=lease://a/*/*&cursor=abc%2Bdef"}, 400, "invalid_cursor", "cursor"},
		{"CursorTooLong", Request{Method: "GET", Path: "/v1/leases?selector=lease://a/*/*&cursor=" + strings.Repeat("A", 1025)}, 400, "invalid_cursor", "cursor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.Do(t, tc.req)
			if resp.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.Status, tc.status, resp.Body)
			}
			if tc.status < 300 {
				return
			}
			code, detail := resp.Problem(t)
			if code != tc.code || !strings.Contains(detail, tc.detail) {
				t.Fatalf("%s %q, want %s with %q", code, detail, tc.code, tc.detail)
			}
		})
	}
	if !strings.Contains(string(b.Do(t, Request{Method: "GET", Path: "/metrics"}).Body), "\nmuster_sessions_created_total 0\n") {
		t.Fatal("a refused request created a session")
	}
}

// TestMethodsAllowAndHead: a 405 lists the route's methods in Allow, and
// every GET route answers HEAD like GET without a body (RFC 9110) — the
// watch stream included, which opens nothing for a HEAD.
func TestMethodsAllowAndHead(t *testing.T) {
	b := MustStartBroker(t)
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/leases?selector=lease://a/*/*", "GET, HEAD"},
		{"GET", "/v1/sessions", "POST"},
		{"PUT", "/v1/fleets/m/specs/repo-1", "GET, HEAD, DELETE"},
		{"GET", "/v1/leases/a/b/c/acquire", "POST"},
		{"POST", "/healthz", "GET, HEAD"},
	} {
		resp := b.Do(t, Request{Method: tc.method, Path: tc.path})
		if resp.Status != 405 || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", tc.method, tc.path, resp.Status, resp.Header.Get("Allow"), tc.allow)
		}
		if code, _ := resp.Problem(t); code != "method_not_allowed" {
			t.Errorf("%s %s: code %s", tc.method, tc.path, code)
		}
	}
	for _, tc := range []struct {
		path   string
		status int
		ctype  string
	}{
		{"/healthz", 200, "application/json"},
		{"/readyz", 200, "application/json"},
		{"/openapi.yaml", 200, "application/yaml"},
		{"/metrics", 200, "text/plain"},
		{"/v1/leases?selector=lease://a/*/*", 200, "application/json"},
		{"/v1/leases/a/b/c", 200, "application/json"},
		{"/v1/fleets/m/specs", 200, "application/json"},
		{"/v1/leases/watch?selector=lease://a/*/*", 200, "text/event-stream"},
		{"/v1/leases?selector=nope", 400, "application/problem+json"},
		{"/v1/leases/watch?selector=nope", 400, "application/problem+json"},
	} {
		req, _ := http.NewRequest("HEAD", b.URL()+tc.path, nil)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("HEAD %s: %v", tc.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) || len(body) != 0 {
			t.Errorf("HEAD %s: %d %q, %d body bytes; want %d %s and no body", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), tc.status, tc.ctype)
		}
	}
	// The HEAD of the watch opened no stream.
	if m := string(b.Do(t, Request{Method: "GET", Path: "/metrics"}).Body); !strings.Contains(m, "\nmuster_streams 0\n") && !strings.Contains(m, "\nmuster_watch_streams 0\n") {
		t.Errorf("a HEAD left a stream open:\n%s", grepLines(m, "stream"))
	}
}

func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
