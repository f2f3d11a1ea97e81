package e2e

import (
	"fmt"
	"testing"
	"time"
)

// wantScope checks a 429 problem's code and scope.
func wantScope(tb testing.TB, resp *Response, code, scope string) {
	tb.Helper()
	wantProblem(tb, resp, 429, code)
	var p struct {
		Scope string `json:"scope"`
	}
	resp.JSON(tb, &p)
	if p.Scope != scope {
		tb.Fatalf("scope %q, want %q: %s", p.Scope, scope, resp.Body)
	}
}

// The abuse report's tokens: one whose only grant is a fleet read took every
// session; one read-only lease token took every watch stream. With quotas,
// each stops at its family's share and the other families are untouched.
func TestFamilyQuotas(t *testing.T) {
	hog := TokenSpec{Secret: "hog-secret", Family: "acme", Grants: []string{"fleet://acme#read", "lease://acme/renderers/*#read"}}
	other := TokenSpec{Secret: "other-secret", Family: "beta", Grants: []string{"lease://beta/**#*"}}
	third := TokenSpec{Secret: "third-secret", Family: "gamma", Grants: []string{"lease://gamma/**#*"}}
	// Family quota: a quarter of each cap (8 sessions, 3 streams); beta and
	// gamma have larger quotas of their own.
	b := MustStartConfiguredBroker(t, `limits:
  broker: {sessions: 32, watch_streams: 12}
  families:
    beta: {sessions: 12, watch_streams: 6}
    gamma: {watch_streams: 5}
`, hog, other, third)
	session := func(tok TokenSpec, i int) *Response {
		return b.Do(t, Request{Method: "POST", Path: "/v1/sessions", Token: tok.Secret, Body: map[string]any{"owner_id": fmt.Sprint("w", i), "ttl_ms": 60000}})
	}
	for i := range 8 {
		if r := session(hog, i); r.Status != 201 {
			t.Fatalf("hog session %d: %d %s", i, r.Status, r.Body)
		}
	}
	wantScope(t, session(hog, 8), "session_limit", "family")
	for i := range 12 {
		if r := session(other, i); r.Status != 201 {
			t.Fatalf("family beta, session %d, while acme is at its quota: %d %s", i, r.Status, r.Body)
		}
	}
	wantScope(t, session(other, 12), "session_limit", "family")

	var streams []*watchStream
	defer func() {
		for _, ws := range streams {
			ws.close()
		}
	}()
	for i := range 3 {
		ws, resp := b.tryWatch(t, watchOpts{token: hog.Secret}, "lease://acme/renderers/*")
		if ws == nil {
			t.Fatalf("hog stream %d: %d %s", i, resp.Status, resp.Body)
		}
		streams = append(streams, ws)
	}
	_, resp := b.tryWatch(t, watchOpts{token: hog.Secret}, "lease://acme/renderers/*")
	wantScope(t, resp, "subscription_limit", "family")
	for i := range 6 {
		ws, resp := b.tryWatch(t, watchOpts{token: other.Secret}, "lease://beta/**")
		if ws == nil {
			t.Fatalf("family beta, stream %d, while acme is at its quota: %d %s", i, resp.Status, resp.Body)
		}
		ws.marker(t)
		streams = append(streams, ws)
	}
	// A third family fills the broker-wide cap (3 + 6 + 3 = 12) below its
	// own quota (5): the broker's 429.
	for i := range 3 {
		ws, resp := b.tryWatch(t, watchOpts{token: third.Secret}, "lease://gamma/**")
		if ws == nil {
			t.Fatalf("family gamma, stream %d: %d %s", i, resp.Status, resp.Body)
		}
		streams = append(streams, ws)
	}
	_, resp = b.tryWatch(t, watchOpts{token: third.Secret}, "lease://gamma/**")
	wantScope(t, resp, "subscription_limit", "broker")
	if got := b.metric(t, "muster_family_sessions", `family="acme"`); got != 8 {
		t.Errorf("muster_family_sessions{family=acme} = %v", got)
	}
	if got := b.metric(t, "muster_family_sessions", `family="beta"`); got != 12 {
		t.Errorf("muster_family_sessions{family=beta} = %v", got)
	}
	if got := b.metric(t, "muster_family_watch_streams", `family="acme"`); got != 3 {
		t.Errorf("muster_family_watch_streams{family=acme} = %v", got)
	}
	if got := b.metric(t, "muster_family_quota_refusals_total", `family="acme"`, `limit="sessions"`); got != 1 {
		t.Errorf("refusals{acme,sessions} = %v", got)
	}
	if got := b.metric(t, "muster_family_quota_refusals_total", `family="acme"`, `limit="watch_streams"`); got != 1 {
		t.Errorf("refusals{acme,watch_streams} = %v", got)
	}
	if got := b.metric(t, "muster_family_quota_refusals_total", `family="gamma"`); got != 0 {
		t.Errorf("refusals{gamma} = %v (the broker's cap is not the family's quota)", got)
	}
	// The hog's stream ending frees its family's slot (and a broker slot).
	streams[0].close()
	streams = streams[1:]
	for i := 0; ; i++ {
		ws, resp := b.tryWatch(t, watchOpts{token: hog.Secret}, "lease://acme/renderers/*")
		if ws != nil {
			streams = append(streams, ws)
			break
		}
		if i == 200 {
			t.Fatalf("the hog's freed slot never came back: %s", resp.Body)
		}
		time.Sleep(5 * time.Millisecond) // the broker sees the close
	}
}

// A root at its family's spec quota answers 429 spec_limit (scope root);
// other roots and families go on registering.
func TestFleetSpecQuota(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		acme := TokenSpec{Secret: "acme-secret", Family: "acme", Grants: []string{"fleet://acme/**#*"}}
		beta := TokenSpec{Secret: "beta-secret", Family: "beta", Grants: []string{"fleet://beta/**#*"}}
		b := startBroker(t, brokerOptions{tokens: []TokenSpec{acme, beta}, storeURL: store, config: `limits:
  family: {fleet_specs_per_root: 100}
  families:
    acme: {fleet_specs_per_root: 3}
`})
		for range 3 {
			b.mustRegister(t, acme.Secret, "acme/m", "k", `{}`)
		}
		wantScope(t, b.register(t, acme.Secret, "acme/m", "k", `{}`), "spec_limit", "root")
		if n := len(b.specs(t, acme.Secret, "acme/m", 0)); n != 3 {
			t.Fatalf("the root holds %d specs", n)
		}
		b.mustRegister(t, acme.Secret, "acme/other", "k", `{}`)
		for range 5 {
			b.mustRegister(t, beta.Secret, "beta/m", "k", `{}`)
		}
	})
}
