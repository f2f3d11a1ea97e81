package e2e

import (
	"net/http"
	"testing"
)

var (
	writerTok = TokenSpec{Secret: "writer-secret", Family: "acme", Grants: []string{"lease://acme/**#*", "fleet://**#*"}}
	readerTok = TokenSpec{Secret: "reader-secret", Family: "acme", Grants: []string{"lease://acme/**#read", "fleet://**#read"}}
	writeOnly = TokenSpec{Secret: "writeonly-secret", Family: "acme", Grants: []string{"lease://acme/**#write"}}
	otherTok  = TokenSpec{Secret: "other-secret", Family: "other", Grants: []string{"lease://**#*", "fleet://**#*"}}
)

const someSession = "0123456789abcdef0123456789abcdef"

func TestAuthMatrix(t *testing.T) {
	b := MustStartBroker(t, writerTok, readerTok, writeOnly, otherTok)
	acquireBody := map[string]any{"session_id": someSession, "ttl_ms": 1000}
	tests := []struct {
		name   string
		req    Request
		status int
		code   string // "" when the request passed authorization
	}{
		{"NoToken", Request{Method: "POST", Path: "/v1/sessions", Body: map[string]any{"owner_id": "w", "ttl_ms": 1000}}, 401, "unauthenticated"},
		{"BadToken", Request{Method: "POST", Path: "/v1/sessions", Token: "nope", Body: map[string]any{"owner_id": "w", "ttl_ms": 1000}}, 401, "unauthenticated"},
		{"BadTokenBeforeValidation", Request{Method: "POST", Path: "/v1/sessions", Token: "nope", Body: "{"}, 401, "unauthenticated"},
		{"QueryTokenRefusedOutsideWatch", Request{Method: "GET", Path: "/v1/leases/acme/r/x?access_token=reader-secret"}, 401, "unauthenticated"},
		{"ReadOnlyOnWriteRoute", Request{Method: "POST", Path: "/v1/leases/acme/r/x/acquire", Token: readerTok.Secret, Body: acquireBody}, 403, "forbidden"},
		{"WriteDoesNotImplyRead", Request{Method: "GET", Path: "/v1/leases/acme/r/x", Token: writeOnly.Secret}, 403, "forbidden"},
		{"RouteOutsideGrant", Request{Method: "POST", Path: "/v1/leases/beta/r/x/acquire", Token: writerTok.Secret, Body: acquireBody}, 403, "forbidden"},
		{"SelectorWiderThanGrant", Request{Method: "GET", Path: "/v1/leases?selector=lease://**", Token: readerTok.Secret}, 403, "forbidden"},
		{"PartialGrantsNeverAddUp", Request{Method: "GET", Path: "/v1/leases?selector=lease://*/r/*", Token: readerTok.Secret}, 403, "forbidden"},
		{"ReadOnlyFleetWrite", Request{Method: "POST", Path: "/v1/fleets/monitors/specs", Token: readerTok.Secret, Body: map[string]any{"kind": "repo", "spec": 1}}, 403, "forbidden"},
		{"WatchQueryTokenBad", Request{Method: "GET", Path: "/v1/leases/watch?selector=lease://acme/**&access_token=nope"}, 401, "unauthenticated"},
		{"WildcardInExactRoute", Request{Method: "POST", Path: "/v1/leases/acme/*/x/acquire", Token: writerTok.Secret, Body: acquireBody}, 400, "invalid_route"},
		{"BadSelector", Request{Method: "GET", Path: "/v1/leases?selector=notice://acme/r/*", Token: readerTok.Secret}, 400, "invalid_selector"},
		{"ReadOnlyReads", Request{Method: "GET", Path: "/v1/leases/acme/r/x", Token: readerTok.Secret}, 200, ""},
		{"ReadOnlyListsCovered", Request{Method: "GET", Path: "/v1/leases?selector=lease://acme/**", Token: readerTok.Secret}, 200, ""},
		{"WriterPassesToSessionCheck", Request{Method: "POST", Path: "/v1/leases/acme/r/x/acquire", Token: writerTok.Secret, Body: acquireBody}, 404, "session_not_found"},
		{"PublicHealth", Request{Method: "GET", Path: "/healthz"}, 200, ""},
		{"PlacementNeedsALeaseRead", Request{Method: "GET", Path: "/v1/placement", Token: writeOnly.Secret}, 403, "forbidden"},
		{"PlacementForAReader", Request{Method: "GET", Path: "/v1/placement", Token: readerTok.Secret}, 200, ""},
		{"PlacementNeedsAToken", Request{Method: "GET", Path: "/v1/placement"}, 401, "unauthenticated"},
		{"MoveNeedsWriteOnEveryLease", Request{Method: "POST", Path: "/v1/placement/move", Token: writerTok.Secret, Body: map[string]any{"to": "b"}}, 403, "forbidden"},
		{"MoveOnOneBroker", Request{Method: "POST", Path: "/v1/placement/move", Token: otherTok.Secret, Body: map[string]any{"to": "b"}}, 501, "not_implemented"},
		{"MoveNeedsTo", Request{Method: "POST", Path: "/v1/placement/move", Token: otherTok.Secret, Body: map[string]any{}}, 400, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := b.Do(t, tc.req)
			if resp.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.Status, tc.status, resp.Body)
			}
			if tc.code == "" {
				return
			}
			if code, _ := resp.Problem(t); code != tc.code {
				t.Fatalf("code %q, want %q", code, tc.code)
			}
			if tc.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

// A session belongs to its token's family; another family cannot see,
// keep alive or end it.
func TestSessionFamilyIsolation(t *testing.T) {
	b := MustStartBroker(t, writerTok, otherTok)
	id := createSession(t, b, writerTok.Secret, "w", 60000)
	for _, req := range []Request{
		{Method: "POST", Path: "/v1/sessions/" + id + "/keepalive", Token: otherTok.Secret},
		{Method: "DELETE", Path: "/v1/sessions/" + id, Token: otherTok.Secret},
	} {
		resp := b.Do(t, req)
		if code, _ := resp.Problem(t); resp.Status != http.StatusNotFound || code != "session_not_found" {
			t.Fatalf("%s from another family: %d %s", req.Method, resp.Status, code)
		}
	}
	if resp := b.Do(t, Request{Method: "POST", Path: "/v1/sessions/" + id + "/keepalive", Token: writerTok.Secret}); resp.Status != 200 {
		t.Fatalf("the owner's keepalive after foreign attempts: %d", resp.Status)
	}
}
