package e2e

import (
	"fmt"
	"net/url"
	"strings"
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

// escapedLeasePath is the single-route path of route, each segment
// percent-encoded as every SDK encodes it (url.PathEscape).
func escapedLeasePath(route string) string {
	segs := strings.Split(strings.TrimPrefix(route, "lease://"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/v1/leases/" + strings.Join(segs, "/")
}

// fullyEscapedLeasePath is the single-route path of route with every byte
// of every segment percent-encoded: legal, though not how an SDK spells it
// (the broker then routes on the path as sent).
func fullyEscapedLeasePath(route string) string {
	segs := strings.Split(strings.TrimPrefix(route, "lease://"), "/")
	for i, s := range segs {
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			fmt.Fprintf(&b, "%%%02X", s[j])
		}
		segs[i] = b.String()
	}
	return "/v1/leases/" + strings.Join(segs, "/")
}

// Every route a batch can hold can be read, extended and released by the
// single-route endpoints, whatever its segments hold ('%' included, with or
// without hex digits after it), and a route acquired there is the one a
// batch or LIST names: a path segment is decoded exactly once.
func TestEveryHeldRouteIsAddressable(t *testing.T) {
	b := MustStartBroker(t)
	sess := createSession(t, b, "", "w", 600000)
	routes := []string{
		"lease://acme/r/100%zz", "lease://acme/r/a%41", "lease://acme/r/%2F", "lease://acme/r/%25",
		"lease://acme/r/%", "lease://acme/r/50%", "lease://acme/r/%2e%2e", "lease://acme/%2e/x",
		"lease://acme/r/a b?c#d", "lease://acme/r/é日本", "lease://acme/r/a+b&c=d;e",
	}
	var ops []batchOp
	for _, r := range routes {
		ops = append(ops, batchOp{Op: "acquire", Route: r, TTLMs: 60000})
	}
	out := b.mustBatch(t, "", sess, ops)
	for i, r := range routes {
		t.Run(r, func(t *testing.T) {
			res := out.Results[i]
			if !res.OK {
				t.Fatalf("batch acquire: %+v", res)
			}
			path := escapedLeasePath(r)
			for _, p := range []string{path, fullyEscapedLeasePath(r)} {
				resp := b.Do(t, Request{Method: "GET", Path: p})
				var st statusBody
				if resp.Status == 200 {
					resp.JSON(t, &st)
				}
				if resp.Status != 200 || !st.Held || st.Route != r {
					t.Fatalf("GET %s: %d %s", p, resp.Status, resp.Body)
				}
			}
			resp := b.Do(t, Request{Method: "POST", Path: path + "/extend", Body: map[string]any{"session_id": sess, "fencing_token": res.Lease.FencingToken, "ttl_ms": 30000}})
			if resp.Status != 200 {
				t.Fatalf("extend %s: %d %s", path, resp.Status, resp.Body)
			}
			resp = b.Do(t, Request{Method: "POST", Path: path + "/release", Body: map[string]any{"session_id": sess, "fencing_token": res.Lease.FencingToken}})
			if resp.Status != 204 {
				t.Fatalf("release %s: %d %s", path, resp.Status, resp.Body)
			}
			if resp := b.Do(t, Request{Method: "GET", Path: path}); resp.Status != 200 || strings.Contains(string(resp.Body), `"held":true`) {
				t.Fatalf("after release: %d %s", resp.Status, resp.Body)
			}
			// And the other way round: acquired by its path, listed by its text.
			resp = b.Do(t, Request{Method: "POST", Path: path + "/acquire", Body: map[string]any{"session_id": sess, "ttl_ms": 30000}})
			var l leaseBody
			if resp.Status == 200 {
				resp.JSON(t, &l)
			}
			if resp.Status != 200 || l.Route != r {
				t.Fatalf("acquire %s: %d %s", path, resp.Status, resp.Body)
			}
			if items, _ := b.listAll(t, "", r, 0); len(items) != 1 || items[0].Route != r {
				t.Fatalf("LIST %s: %+v", r, items)
			}
		})
	}
}
