package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// runGrace is how long `lease run` waits after SIGTERM before it kills a
// command whose lease is lost (or that it was asked to stop).
const runGrace = 10 * time.Second

// runWithLease is `muster lease run ROUTE -- COMMAND…`: a session of its own
// (kept alive by the SDK), the lease acquired (waiting up to wait), the
// command run with MUSTER_LEASE_ROUTE and MUSTER_FENCING_TOKEN in its
// environment while the lease is extended every ttl/3. If the lease is lost
// the command gets SIGTERM (SIGKILL after runGrace) and the exit status is
// the command's, or 1 if it exited 0: work done without the lease is not
// done. SIGINT or SIGTERM to muster are passed on to the command. The lease
// is released and the session ended when the command exits; the exit
// status is the command's (128+N when it died of signal N).
func runWithLease(ctx context.Context, c *muster.Client, route string, argv []string, ttl, wait time.Duration, owner string) error {
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return usageErr{"no command to run: muster lease run ROUTE -- COMMAND [ARG…]"}
	}
	if owner == "" {
		owner = argv[0]
	}
	sessTTL := min(max(ttl, time.Second), 10*time.Minute)
	s, err := c.NewSession(ctx, owner, sessTTL)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.Close(cctx)
	}()
	var opts []muster.AcquireOption
	if wait > 0 {
		opts = append(opts, muster.Wait(wait))
	}
	code := 0
	err = s.WithLease(ctx, route, ttl, func(lctx context.Context, l *muster.Lease) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.Env = append(os.Environ(), "MUSTER_LEASE_ROUTE="+l.Route(), "MUSTER_FENCING_TOKEN="+strconv.FormatInt(l.FencingToken(), 10))
		if err := cmd.Start(); err != nil {
			code = 127
			return exitErr{code: 127, msg: err.Error()}
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var werr error
		select {
		case werr = <-done:
		case <-lctx.Done():
			sig := syscall.SIGTERM
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "muster lease run: %s: the lease is lost (%s); sending SIGTERM to the command\n", display(route), displayf(context.Cause(lctx)))
			}
			_ = cmd.Process.Signal(sig)
			select {
			case werr = <-done:
			case <-time.After(runGrace):
				_ = cmd.Process.Kill()
				werr = <-done
			}
		}
		code = exitCode(cmd.ProcessState, werr)
		if code != 0 {
			return exitErr{code: code}
		}
		return nil
	}, opts...)
	var ee exitErr
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return ee
	case errors.Is(err, muster.ErrLeaseLost) || errors.Is(err, muster.ErrSessionLost):
		// The command exited 0, but not while holding the lease throughout.
		return exitErr{code: 1, msg: fmt.Sprintf("%s: the lease was lost while the command ran: %v", route, err)}
	case ctx.Err() != nil && code == 0:
		return errInterrupted
	}
	return err
}

// exitCode is a finished command's exit status in the shell's terms.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return 1
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
