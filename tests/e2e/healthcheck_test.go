package e2e

import (
	"bytes"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestCLIHealthcheck: `muster healthcheck` (the container image's health
// check) exits 0 with /healthz's body when the broker answers, 1 when
// nothing listens, 2 on a usage error.
func TestCLIHealthcheck(t *testing.T) {
	b := MustStartBroker(t)
	run := func(args ...string) (string, int) {
		var out bytes.Buffer
		cmd := exec.Command(musterBinary(t), append([]string{"healthcheck"}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), 0
	}
	addr := strings.TrimPrefix(b.URL(), "http://")
	for _, a := range []string{addr, b.URL()} {
		if out, code := run("--addr", a); code != 0 || !strings.Contains(out, `"status":"ok"`) {
			t.Errorf("healthcheck --addr %s: exit %d\n%s", a, code, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if out, code := run("--addr", closed, "--timeout", "2s"); code != 1 || !strings.Contains(out, "connection refused") {
		t.Errorf("healthcheck of a closed port: exit %d (want 1)\n%s", code, out)
	}
	if out, code := run("extra"); code != 2 || !strings.Contains(out, "usage:") {
		t.Errorf("healthcheck extra: exit %d (want 2)\n%s", code, out)
	}
	if out, code := run("--help"); code != 0 || !strings.Contains(out, "usage:") {
		t.Errorf("healthcheck --help: exit %d\n%s", code, out)
	}
}
