package muster

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Code
	}{
		{"Nil", nil, CodeInternal},
		{"Plain", errors.New("disk on fire"), CodeInternal},
		{"Error", Errorf(CodeFenced, "token %d", 7), CodeFenced},
		{"Wrapped", fmt.Errorf("extend: %w", Errorf(CodeNotOwner, "x")), CodeNotOwner},
		{"Limit", LimitErrorf(CodeQueueFull, ScopeRoute, "full"), CodeQueueFull},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ErrorCode(tc.err); got != tc.want {
				t.Fatalf("ErrorCode = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestErrorfAndLimitErrorf(t *testing.T) {
	e := Errorf(CodeInvalidRequest, "limit must be 1..%d", 500)
	if got, want := e.Error(), "invalid_request: limit must be 1..500"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if e.Scope != "" {
		t.Errorf("Errorf set scope %q", e.Scope)
	}
	l := LimitErrorf(CodeSpecLimit, ScopeRoot, "the root holds its quota of %d specs", 3)
	if l.Code != CodeSpecLimit || l.Scope != ScopeRoot || l.Message != "the root holds its quota of 3 specs" {
		t.Errorf("LimitErrorf = %+v", *l)
	}
}
