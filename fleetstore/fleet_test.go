package fleetstore

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

// spyStore records what reaches the backend and stores nothing.
type spyStore struct {
	calls  []string
	limits []int
}

func (s *spyStore) Register(_ context.Context, _, _, kind string, _ []byte, _ int) (string, error) {
	s.calls = append(s.calls, "Register")
	return kind + "-1", nil
}

func (s *spyStore) Get(_ context.Context, _, _, name string) (Row, error) {
	s.calls = append(s.calls, "Get")
	return Row{Name: name}, nil
}

func (s *spyStore) Forget(context.Context, string, string, ...string) error {
	s.calls = append(s.calls, "Forget")
	return nil
}

func (s *spyStore) Drop(context.Context, string, string, []Row) ([]string, error) {
	s.calls = append(s.calls, "Drop")
	return []string{}, nil
}

func (s *spyStore) Desired(_ context.Context, _, _, _ string, limit int) ([]Row, bool, error) {
	s.calls = append(s.calls, "Desired")
	s.limits = append(s.limits, limit)
	return []Row{}, false, nil
}

func (s *spyStore) Roots(context.Context, string, string, int) ([]RootCounter, bool, error) {
	s.calls = append(s.calls, "Roots")
	return []RootCounter{}, false, nil
}

func (s *spyStore) Restore(_ context.Context, _, _ string, rows []Row, _ uint64) ([]Outcome, error) {
	s.calls = append(s.calls, "Restore")
	return make([]Outcome, len(rows)), nil
}

func (s *spyStore) Close() error { return nil }

// TestRefusedBeforeTheStore: what the rules refuse never reaches the backend,
// so an illegal name cannot delete anything, whatever the backend would do.
func TestRefusedBeforeTheStore(t *testing.T) {
	spy := &spyStore{}
	f := New(spy)
	for _, name := range illegalNames {
		wantCode(t, f.Forget(ctx, fam, root, name), muster.CodeInvalidName)
		_, err := f.Get(ctx, fam, root, name)
		wantCode(t, err, muster.CodeInvalidName)
	}
	_, err := f.Register(ctx, fam, "Bad", "repo", []byte(`{}`))
	wantCode(t, err, muster.CodeInvalidRequest)
	_, err = f.Register(ctx, fam, root, "repo", make([]byte, MaxSpecBytes+1))
	wantCode(t, err, muster.CodePayloadTooLarge)
	_, err = f.Sweep(ctx, fam, root, []byte(`{"type": 1}`))
	wantCode(t, err, muster.CodeInvalidRequest)
	_, err = f.Sweep(ctx, fam, "a//b", []byte(`true`))
	wantCode(t, err, muster.CodeInvalidRequest)
	_, err = f.Names(ctx, "", root)
	wantCode(t, err, muster.CodeInvalidRequest)
	_, err = f.Restore(ctx, fam, root, []Row{{Name: "ok-1", Spec: []byte(`1`)}, {Name: "Repo-1", Spec: []byte(`1`)}}, 0)
	wantCode(t, err, muster.CodeInvalidName)
	_, err = f.Restore(ctx, fam, root, []Row{{Name: "ok-1", Spec: []byte(`{`)}}, 0)
	wantCode(t, err, muster.CodeInvalidRequest)
	if len(spy.calls) != 0 {
		t.Fatalf("refused calls reached the store: %v", spy.calls)
	}
}

func TestDesiredLimit(t *testing.T) {
	tests := []struct{ ask, want int }{
		{0, DefaultPageSize}, {1, 1}, {MaxPageSize, MaxPageSize}, {MaxPageSize + 1, MaxPageSize}, {1 << 30, MaxPageSize},
	}
	for _, tt := range tests {
		spy := &spyStore{}
		if _, _, err := New(spy).Desired(ctx, fam, root, "", tt.ask); err != nil {
			t.Fatal(err)
		}
		if len(spy.limits) != 1 || spy.limits[0] != tt.want {
			t.Errorf("Desired(limit %d) asked the store for %v, want %d", tt.ask, spy.limits, tt.want)
		}
	}
}

func TestBackendError(t *testing.T) {
	tests := []struct {
		name  string
		cause error
		trans bool
		want  muster.Code
	}{
		{"Internal", io.ErrShortWrite, false, muster.CodeInternal},
		{"Transient", io.ErrShortWrite, true, muster.CodeUnavailable},
		{"Cancelled", context.Canceled, false, muster.CodeUnavailable},
		{"Deadline", context.DeadlineExceeded, false, muster.CodeUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := backendErr("register", tt.cause, tt.trans)
			if got := muster.ErrorCode(err); got != tt.want {
				t.Errorf("code = %s, want %s", got, tt.want)
			}
			if !errors.Is(err, tt.cause) {
				t.Errorf("errors.Is(%v, cause) = false", err)
			}
			var be *BackendError
			if !errors.As(err, &be) || strings.Contains(be.Public.Message, tt.cause.Error()) {
				t.Errorf("public message %q should name the operation, not the cause", be.Public.Message)
			}
		})
	}
	t.Run("DomainErrorPassesThrough", func(t *testing.T) {
		nf := errSpecNotFound()
		if err := backendErr("read", nf, false); err != nf {
			t.Errorf("backendErr rewrapped a *muster.Error: %v", err)
		}
	})
	t.Run("Nil", func(t *testing.T) {
		if err := backendErr("read", nil, true); err != nil {
			t.Errorf("backendErr(nil) = %v", err)
		}
	})
}

func TestCompileSchema(t *testing.T) {
	tests := []struct {
		name, schema, spec string
		valid              bool
	}{
		{"TrueAcceptsAll", `true`, `{"x":1}`, true},
		{"FalseRejectsAll", `false`, `{}`, false},
		{"LocalRef", `{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s"}`, `"x"`, true},
		{"LocalRefFails", `{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s"}`, `1`, false},
		{"Draft7", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"integer"}`, `3`, true},
		{"BigNumber", `{"type":"integer","minimum":100000000000000000000}`, `100000000000000000001`, true},
		{"FormatIsAnnotation", `{"type":"string","format":"email"}`, `"not an email"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := CompileSchema([]byte(tt.schema))
			must(t, err)
			got, err := s.Judge(ctx, []byte(tt.spec))
			must(t, err)
			if got != tt.valid {
				t.Errorf("Valid(%s) = %v, want %v", tt.spec, got, tt.valid)
			}
		})
	}
}
