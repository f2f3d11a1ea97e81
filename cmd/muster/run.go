package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	muster "github.com/musterhq/muster/clients/go"
	"github.com/musterhq/muster/core"
)

// runGrace is how long `lease run` gives the command to exit after passing
// it a SIGTERM or SIGINT muster received, before it kills it. The lease is
// renewed all that time.
const runGrace = 10 * time.Second

// The exit statuses of `lease run` that are its own; any other status is
// the command's (128+N when it died of signal N, 127 when it could not be
// started). Documented in docs/operations.md ("muster lease run").
const (
	exitUsage       = 2  // a bad flag or argument, as for every muster command
	exitUnavailable = 69 // the broker could not be reached, or answered unavailable
	exitHeld        = 75 // another session holds the lease (no --wait, or the wait ran out)
	exitLost        = 76 // the lease was lost while the command ran, whatever its status
)

// runWithLease is `muster lease run ROUTE -- COMMAND…`: a session of its own
// (kept alive by the SDK), the lease acquired (waiting up to wait, across
// as many of the broker's 30 s waits as that takes), then the command run
// with MUSTER_LEASE_ROUTE and MUSTER_FENCING_TOKEN in its environment while
// the lease is extended every ttl/3.
//
// The lease is held until the command has exited, so no other holder's
// command can overlap this one:
//   - SIGINT or SIGTERM to muster sends the command SIGTERM, and the lease
//     is renewed while the command winds down (up to runGrace, then
//     SIGKILL); it is released once the command has exited.
//   - If extensions fail until less than runLead(ttl) is left before the
//     local deadline, the command is sent SIGTERM then, so that it can stop
//     before the lease may be lost (the grace period shortened to what the
//     lease has left); the exit status is exitLost whatever follows.
//   - If the lease is lost (another session may hold it from then on), the
//     command is sent SIGKILL at once: the broker's expiry is already
//     behind the local deadline that declared the loss, so there is no
//     grace left to give. The exit status is then exitLost.
func runWithLease(ctx context.Context, c *muster.Client, route string, argv []string, ttl, wait time.Duration, owner string) error {
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return usageErr{"no command to run: muster lease run ROUTE -- COMMAND [ARG…]"}
	}
	if err := inSpan("ttl", ttl, core.MinLeaseTTL, core.MaxLeaseTTL); err != nil {
		return err
	}
	if wait < 0 {
		return usageErr{fmt.Sprintf("--wait %v is negative", wait)}
	}
	if owner == "" {
		owner = argv[0]
	}
	sessTTL := min(max(ttl, core.MinSessionTTL), core.MaxSessionTTL)
	s, err := c.NewSession(ctx, owner, sessTTL)
	if err != nil {
		return runErr(route, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.Close(cctx)
	}()
	if err := acquireWaiting(ctx, s, route, ttl, wait); err != nil {
		return runErr(route, err)
	}
	// From here on, muster's own signals go to the command: the lease is
	// renewed and released on the command's schedule, not on muster's (ctx
	// still ends with them, so nothing below depends on it).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	code, atRisk := 0, false
	err = s.WithLease(context.WithoutCancel(ctx), route, ttl, func(lctx context.Context, l *muster.Lease) error {
		code, atRisk = runCommand(lctx, l, argv, sigs, ttl)
		return nil
	})
	switch {
	case errors.Is(err, muster.ErrLeaseLost) || errors.Is(err, muster.ErrSessionLost):
		return exitErr{code: exitLost, msg: fmt.Sprintf("%s: the lease was lost while the command ran (its status: %d): %v", route, code, err)}
	case atRisk:
		return exitErr{code: exitLost, msg: fmt.Sprintf("%s: the lease could not be extended and the command was told to stop (its status: %d)", route, code)}
	case err != nil:
		return runErr(route, err)
	case code != 0:
		return exitErr{code: code}
	}
	return nil
}

// runLead is how long before the local deadline of a lease of ttl whose
// extensions fail `lease run` sends the command SIGTERM: a third of the TTL
// (two extensions in a row have failed then), at most runGrace.
func runLead(ttl time.Duration) time.Duration { return min(ttl/3, runGrace) }

// runCommand runs argv while l (of ttl) is held and returns its exit
// status, and whether the lease was at risk: it sends the command SIGTERM
// on each of sigs (then SIGKILL after runGrace) and when extensions failed
// until runLead(ttl) before the local deadline, and kills it at once when
// lctx ends (the lease is lost).
func runCommand(lctx context.Context, l *muster.Lease, argv []string, sigs <-chan os.Signal, ttl time.Duration) (int, bool) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "MUSTER_LEASE_ROUTE="+l.Route(), "MUSTER_FENCING_TOKEN="+strconv.FormatInt(l.FencingToken(), 10))
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "muster lease run: %s\n", display(err.Error()))
		return 127, false
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var grace <-chan time.Time
	// The local deadline is the last successful extension's (measured
	// here, after the SDK's: so a little late) plus ttl.
	lead := runLead(ttl)
	renewed, renewals, atRisk := time.Now(), l.Renewals(), false
	tick := time.NewTicker(max(lead/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return exitCode(cmd.ProcessState, err), atRisk
		case <-tick.C:
			if n := l.Renewals(); n != renewals {
				renewed, renewals = time.Now(), n
			}
			if left := time.Until(renewed.Add(ttl)); !atRisk && left <= lead {
				atRisk = true
				fmt.Fprintf(os.Stderr, "muster lease run: %s: the lease could not be extended and may be lost in %v; sending SIGTERM to the command\n",
					display(l.Route()), left.Round(time.Millisecond))
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
		case <-sigs:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if grace == nil {
				grace = time.After(runGrace)
			}
		case <-grace:
			fmt.Fprintf(os.Stderr, "muster lease run: the command did not exit within %v; sending SIGKILL\n", runGrace)
			_ = cmd.Process.Kill()
		case <-lctx.Done():
			fmt.Fprintf(os.Stderr, "muster lease run: %s: the lease is lost (%s); sending SIGKILL to the command\n",
				display(l.Route()), displayf(context.Cause(lctx)))
			_ = cmd.Process.Kill()
			return exitCode(cmd.ProcessState, <-done), atRisk
		}
	}
}

// acquireWaiting acquires route, waiting up to wait in its queue: one
// acquire per core.MaxWait (the broker's bound on one request), queued
// again when one runs out, until the lease is granted or wait is over
// (ErrWaitTimeout then; ErrLeaseHeld when wait is 0).
func acquireWaiting(ctx context.Context, s *muster.Session, route string, ttl, wait time.Duration) error {
	end := time.Now().Add(wait)
	for {
		var opts []muster.AcquireOption
		if left := time.Until(end); left >= time.Millisecond {
			opts = append(opts, muster.Wait(min(left, core.MaxWait)))
		}
		l, err := s.Acquire(ctx, route, ttl, opts...)
		if err == nil {
			// Kept by WithLease, which finds it held (already_held: the
			// same handle).
			_ = l
			return nil
		}
		if !errors.Is(err, muster.ErrWaitTimeout) || time.Until(end) < time.Millisecond {
			return err
		}
	}
}

// runErr is the exit of `lease run` for an error before or around the
// command: exitHeld, exitUnavailable, or 1 for anything else.
func runErr(route string, err error) error {
	switch {
	case errors.Is(err, muster.ErrLeaseHeld) || errors.Is(err, muster.ErrWaitTimeout):
		return exitErr{code: exitHeld, msg: fmt.Sprintf("%s: held by another session: %v", route, err)}
	case errors.Is(err, context.Canceled):
		return errInterrupted
	case muster.Advice(err) == muster.RetryBackoff:
		return exitErr{code: exitUnavailable, msg: fmt.Sprintf("the broker is unavailable: %v", err)}
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
