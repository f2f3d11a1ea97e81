package muster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A family at its quota gets ErrSessionLimit with Scope "family" from the
// real broker; another family still gets sessions.
func TestQuotaScope(t *testing.T) {
	b := mustStartBrokerWith(t, "limits:\n  families:\n    fam-b: {sessions: 2}\n")
	ctx := context.Background()
	cb := newClient(t, b.url(), "b")
	for range 2 {
		s, err := cb.NewSession(ctx, "w", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
	}
	_, err := cb.NewSession(ctx, "w", 30*time.Second)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrSessionLimit) || e.Scope != "family" || e.Status != 429 {
		t.Fatalf("third session of fam-b: %#v", err)
	}
	if Advice(err) != RetryBackoff {
		t.Errorf("advice %v", Advice(err))
	}
	s, err := newClient(t, b.url(), "a").NewSession(ctx, "w", 30*time.Second)
	if err != nil {
		t.Fatalf("fam-a while fam-b is at its quota: %v", err)
	}
	_ = s.Close(ctx)
}
