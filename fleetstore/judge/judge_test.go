package judge

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/tests/hostile"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

func self(tb testing.TB) string {
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return exe
}

func mustStart(tb testing.TB, ctx context.Context, schema string, lim Limits) *Worker {
	tb.Helper()
	w, err := Start(ctx, self(tb), []byte(schema), lim)
	if err != nil {
		tb.Fatalf("start: %v", err)
	}
	tb.Cleanup(func() { w.Close() })
	return w
}

func TestVerdicts(t *testing.T) {
	w := mustStart(t, t.Context(), `{"type":"object","required":["topic"]}`, Limits{})
	for _, tc := range []struct {
		spec string
		want bool
	}{{`{"topic":"a"}`, true}, {`{"x":1}`, false}, {`[1]`, false}, {`not json`, false}, {`{"topic":2}`, true}} {
		got, err := w.Judge([]byte(tc.spec))
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.spec, got, err, tc.want)
		}
	}
	if u := w.Close(); u.MaxRSS <= 0 {
		t.Errorf("usage not read: %+v", u)
	}
}

func TestSchemaRefusedTyped(t *testing.T) {
	_, err := Start(t.Context(), self(t), []byte(hostile.Schema(25)), Limits{})
	if muster.ErrorCode(err) != muster.CodeInvalidRequest || !strings.Contains(err.Error(), "$ref expansion") {
		t.Fatalf("got %v", err)
	}
}

// The abuse report's bypass: failing enum checks were never counted, and
// comparing numbers is exact. The CPU limit ends it, typed.
func TestCPULimit(t *testing.T) {
	schema, spec := enumBurn()
	w := mustStart(t, t.Context(), schema, Limits{CPU: time.Second})
	start := time.Now()
	_, err := w.Judge([]byte(spec))
	took := time.Since(start)
	if muster.ErrorCode(err) != muster.CodeInvalidRequest || !strings.Contains(err.Error(), "(limit: sweep CPU)") {
		t.Fatalf("got %v after %v", err, took)
	}
	u := w.Close()
	t.Logf("refused after %v, worker CPU %v, peak RSS %d MiB", took, u.CPU, u.MaxRSS>>20)
	if _, err := w.Judge([]byte(`1`)); muster.ErrorCode(err) != muster.CodeInvalidRequest {
		t.Fatalf("a call after the refusal: %v", err)
	}
}

// enumBurn is a schema and a spec within every static limit whose one
// validation takes seconds: each of 6,000 numbers fails 2,000 exact
// comparisons.
func enumBurn() (schema, spec string) {
	var enum strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&enum, "%d,", i)
	}
	return `{"properties":{"n":{"items":{"enum":[` + enum.String() + `1e999]}}}}`,
		`{"n":[` + strings.Repeat("1.5e-999,", 6000) + `1]}`
}

// A recursive anyOf over a deep array keeps a validation error per failed
// branch: the memory limit ends it, typed, where it once took gigabytes.
func TestMemoryLimit(t *testing.T) {
	schema := `{"$defs":{"a":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/a"}},{"type":"array","items":{"$ref":"#/$defs/a"}}]}},"$ref":"#/$defs/a"}`
	spec := strings.Repeat("[", 60) + "1" + strings.Repeat("]", 60)
	w := mustStart(t, t.Context(), schema, Limits{Memory: 32 << 20})
	_, err := w.Judge([]byte(spec))
	u := w.Close()
	t.Logf("%v; worker CPU %v, peak RSS %d MiB", err, u.CPU, u.MaxRSS>>20)
	if f, ok := err.(*Failure); ok {
		t.Logf("stderr: %.600s", f.Stderr)
	}
	if muster.ErrorCode(err) != muster.CodeInvalidRequest {
		t.Fatalf("got %v", err)
	}
}

// Cancelling the sweep kills the worker at once.
func TestCancelKills(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	schema, spec := enumBurn()
	w := mustStart(t, ctx, schema, Limits{CPU: 30 * time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := w.Judge([]byte(spec))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cancel()
	err := <-done
	if took := time.Since(start); took > 100*time.Millisecond || err != context.Canceled {
		t.Fatalf("after cancel: %v in %v", err, took)
	}
}
