package e2e

import (
	"net/url"
	"testing"
)

// Dot segments: a proxy that normalises paths (RFC 3986 §5.2.4, with %2e
// decoded first as the unreserved '.') would send a request naming `..` or
// `.` to another route, so no route, selector or fleet root may have such a
// segment, however the request spells it. Segments that merely contain dots
// are ordinary text.
func TestDotSegmentsAreRefused(t *testing.T) {
	b := MustStartBroker(t)
	sess := createSession(t, b, "", "w", 60000)
	acquire := func(path string) Request {
		return Request{Method: "POST", Path: path + "/acquire", Body: map[string]any{"session_id": sess, "ttl_ms": 5000}}
	}
	get := func(path string) Request { return Request{Method: "GET", Path: path} }
	batch := func(route string) Request {
		return Request{Method: "POST", Path: "/v1/leases/batch", Body: map[string]any{"session_id": sess,
			"ops": []map[string]any{{"op": "acquire", "route": route, "ttl_ms": 5000}}}}
	}
	q := url.QueryEscape
	tests := []struct {
		name string
		req  Request
		code string
	}{
		{"AcquireDotDot", acquire("/v1/leases/acme/../doc"), "invalid_route"},
		{"AcquireEncodedDotDot", acquire("/v1/leases/acme/%2e%2e/doc"), "invalid_route"},
		{"AcquireMixedDotDot", acquire("/v1/leases/acme/.%2E/doc"), "invalid_route"},
		{"AcquireEncodedDot", acquire("/v1/leases/%2e/renderers/doc"), "invalid_route"},
		{"GetDotDot", get("/v1/leases/acme/renderers/.."), "invalid_route"},
		{"GetEncodedDotDot", get("/v1/leases/%2E%2E/renderers/doc"), "invalid_route"},
		{"BatchDotDot", batch("lease://acme/../doc"), "invalid_route"},
		{"BatchDot", batch("lease://./renderers/doc"), "invalid_route"},
		{"ListDotDot", get("/v1/leases?selector=" + q("lease://acme/../*")), "invalid_selector"},
		{"ListEncodedDotDot", get("/v1/leases?selector=lease://acme/%2e%2e/*"), "invalid_selector"},
		{"ListDotInDoubleStar", get("/v1/leases?selector=" + q("lease://**/.")), "invalid_selector"},
		{"WatchDotDot", Request{Method: "GET", Path: "/v1/leases/watch?selector=" + q("lease://../**"), Header: map[string]string{"Accept": "text/event-stream"}}, "invalid_selector"},
		{"GapLiveDotDot", get("/v1/fleets/monitors/gap?live=" + q("lease://acme/../*")), "invalid_selector"},
		{"UnsubscribeDotDot", Request{Method: "DELETE", Path: "/v1/sessions/" + sess + "/subscriptions?selector=" + q("lease://acme/../*")}, "invalid_selector"},
		{"FleetRootDotDot", get("/v1/fleets/../specs"), "invalid_request"},
		{"FleetRootEncodedDotDot", get("/v1/fleets/%2e%2e/specs"), "invalid_request"},
		{"FleetRootNestedDotDot", get("/v1/fleets/monitors%2F%2e%2e/specs"), "invalid_request"},
		{"FleetRootNestedDot", get("/v1/fleets/monitors%2F./specs"), "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, b.Do(t, tc.req), 400, tc.code)
		})
	}
	if n := b.metric(t, "muster_lease_acquire_total", `outcome="acquired"`); n != 0 {
		t.Fatalf("a refused acquisition was counted: %v", n)
	}
	// Dots inside a segment are text.
	for _, route := range []string{"lease://acme/.../doc", "lease://acme/.hidden/doc", "lease://acme/..x/doc", "lease://acme/renderers/doc.pdf"} {
		b.mustAcquire(t, sess, route)
		if st := b.query(t, route); !st.Held || st.Route != route {
			t.Fatalf("%s: %+v", route, st)
		}
	}
}
