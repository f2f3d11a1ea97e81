package muster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
)

// contractCodes reads the ErrorCode enum of openapi.yaml.
func contractCodes(tb testing.TB) []Code {
	tb.Helper()
	data, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	i := slices.Index(lines, "    ErrorCode:")
	if i < 0 {
		tb.Fatal("no ErrorCode schema in openapi.yaml")
	}
	for ; !strings.Contains(lines[i], "enum:"); i++ {
	}
	var out []Code
	for i++; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "- "); i++ {
		out = append(out, Code(strings.TrimPrefix(strings.TrimSpace(lines[i]), "- ")))
	}
	return out
}

func TestEveryContractCodeHasASentinel(t *testing.T) {
	want := contractCodes(t)
	if len(want) < 20 {
		t.Fatalf("read only %d codes from openapi.yaml", len(want))
	}
	if got := Codes(); !slices.Equal(got, want) {
		t.Fatalf("SDK codes %v\ncontract codes %v", got, want)
	}
	for _, row := range codeTable {
		err := fmt.Errorf("wrapped: %w", &Error{Code: row.err.Code, Status: 409, Detail: "x"})
		if !errors.Is(err, row.err) {
			t.Errorf("%s: errors.Is does not match its sentinel", row.err.Code)
		}
		for _, other := range codeTable {
			if other.err != row.err && errors.Is(err, other.err) {
				t.Errorf("%s matches %s", row.err.Code, other.err.Code)
			}
		}
		if Advice(err) != row.advice {
			t.Errorf("%s: advice %v, want %v", row.err.Code, Advice(err), row.advice)
		}
	}
}

func TestAdvice(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Retry
	}{
		{"Nil", nil, RetryNo},
		{"Fenced", ErrFenced, RetryRestart},
		{"UnknownCode5xx", &Error{Code: "brand_new", Status: 503}, RetryBackoff},
		{"UnknownCode4xx", &Error{Code: "brand_new", Status: 400}, RetryNo},
		{"LeaseLost", fmt.Errorf("%w: %w", ErrLeaseLost, ErrNotOwner), RetryRestart},
		{"Overflow", ErrOverflow, RetryRestart},
		{"Closed", ErrClosed, RetryNo},
		{"Released", ErrReleased, RetryNo},
		{"SessionLostAtItsDeadline", fmt.Errorf("%w: no keepalive got through within the TTL", ErrSessionLost), RetryRestart},
		{"Canceled", context.Canceled, RetryNo},
		{"Transport", errors.New("connection refused"), RetryBackoff},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Advice(tc.err); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProblemErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("selector") {
		case "lease://gateway/*/*":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusGone)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":"Gone","status":410,"code":"cursor_expired","detail":"the snapshot behind this cursor is gone"}`))
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, "")
	_, err := c.ListPage(context.Background(), "lease://acme/*/*", ListOptions{Cursor: "x"})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrCursorExpired) || e.Status != 410 || e.Detail == "" {
		t.Fatalf("problem: %#v", err)
	}
	_, err = c.ListPage(context.Background(), "lease://gateway/*/*", ListOptions{})
	if !errors.Is(err, ErrUnavailable) || Advice(err) != RetryBackoff {
		t.Fatalf("gateway: %v", err)
	}
}
