package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

type sessionBody struct {
	SessionID         string    `json:"session_id"`
	HolderIncarnation string    `json:"holder_incarnation"`
	OwnerID           string    `json:"owner_id"`
	TTLMs             int64     `json:"ttl_ms"`
	ExpiresAt         time.Time `json:"expires_at"`
	Epoch             string    `json:"epoch"`
}

func createSession(tb testing.TB, b *Broker, token, owner string, ttlMs int) string {
	tb.Helper()
	resp := b.Do(tb, Request{Method: "POST", Path: "/v1/sessions", Token: token, Body: map[string]any{"owner_id": owner, "ttl_ms": ttlMs}})
	if resp.Status != 201 {
		tb.Fatalf("create session: %d %s", resp.Status, resp.Body)
	}
	var s sessionBody
	resp.JSON(tb, &s)
	return s.SessionID
}

func TestSessionLifecycle(t *testing.T) {
	b := MustStartBroker(t)
	start := b.Clock.Now()
	resp := b.Do(t, Request{Method: "POST", Path: "/v1/sessions", Body: map[string]any{"owner_id": "worker-1", "ttl_ms": 5000}})
	if resp.Status != 201 {
		t.Fatalf("create: %d %s", resp.Status, resp.Body)
	}
	var s sessionBody
	resp.JSON(t, &s)
	if s.OwnerID != "worker-1" || s.TTLMs != 5000 || s.Epoch != b.Epoch() || !s.ExpiresAt.Equal(start.Add(5*time.Second)) || s.HolderIncarnation == "" {
		t.Fatalf("created session = %+v", s)
	}
	keepalive := Request{Method: "POST", Path: "/v1/sessions/" + s.SessionID + "/keepalive"}

	b.Clock.Advance(4 * time.Second)
	resp = b.Do(t, keepalive)
	var k struct {
		ExpiresAt time.Time `json:"expires_at"`
		TTLMs     int64     `json:"ttl_ms"`
	}
	resp.JSON(t, &k)
	if resp.Status != 200 || !k.ExpiresAt.Equal(start.Add(9*time.Second)) {
		t.Fatalf("keepalive: %d %+v", resp.Status, k)
	}

	// Exactly at the expiry instant the session lives; a millisecond later
	// it is gone, whether or not a tick ran.
	b.Clock.Advance(5 * time.Second)
	if resp = b.Do(t, keepalive); resp.Status != 200 {
		t.Fatalf("keepalive at the expiry instant: %d", resp.Status)
	}
	b.Clock.Advance(5*time.Second + time.Millisecond)
	resp = b.Do(t, keepalive)
	if code, _ := resp.Problem(t); resp.Status != 404 || code != "session_not_found" {
		t.Fatalf("keepalive after ttl: %d %s", resp.Status, code)
	}
	if strings.Contains(b.Logs.String(), s.SessionID) {
		t.Fatal("a session id reached the log")
	}
}

func TestSessionDelete(t *testing.T) {
	b := MustStartBroker(t)
	id := createSession(t, b, "", "w", 60000)
	if resp := b.Do(t, Request{Method: "DELETE", Path: "/v1/sessions/" + id}); resp.Status != 204 {
		t.Fatalf("delete: %d %s", resp.Status, resp.Body)
	}
	for _, req := range []Request{
		{Method: "DELETE", Path: "/v1/sessions/" + id},
		{Method: "POST", Path: "/v1/sessions/" + id + "/keepalive"},
	} {
		resp := b.Do(t, req)
		code, detail := resp.Problem(t)
		if resp.Status != 404 || code != "session_not_found" {
			t.Fatalf("%s after delete: %d %s", req.Method, resp.Status, code)
		}
		if strings.Contains(detail, id) {
			t.Fatal("an error body echoed the session id")
		}
	}
}

// The actor's own tick ends sessions nobody asks about.
func TestSessionExpiresOnTick(t *testing.T) {
	b := MustStartBroker(t)
	createSession(t, b, "", "w", 1000)
	if !strings.Contains(string(b.Do(t, Request{Method: "GET", Path: "/metrics"}).Body), "\nmuster_sessions 1\n") {
		t.Fatal("the session is not counted")
	}
	b.Clock.Advance(time.Second + time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		body := string(b.Do(t, Request{Method: "GET", Path: "/metrics"}).Body)
		if strings.Contains(body, "\nmuster_sessions 0\n") && strings.Contains(body, `muster_sessions_ended_total{reason="expired"} 1`) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the tick did not expire the session")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Distinct sessions of one owner get distinct incarnations; a restarted
// broker gives new ones.
func TestHolderIncarnation(t *testing.T) {
	b := MustStartBroker(t)
	get := func(b *Broker) string {
		var s sessionBody
		b.Do(t, Request{Method: "POST", Path: "/v1/sessions", Body: map[string]any{"owner_id": "same", "ttl_ms": 60000}}).JSON(t, &s)
		return s.HolderIncarnation
	}
	x, y := get(b), get(b)
	if x == y {
		t.Fatal("two sessions of one owner share an incarnation")
	}
	b2 := MustStartBroker(t)
	if b2.Epoch() == b.Epoch() {
		t.Fatal("two broker lifetimes share an epoch")
	}
}
