package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/fleetstore"
)

// StoreOpenTimeout bounds opening the fleet store at start-up (connecting to
// PostgreSQL and migrating its schema, or taking the bbolt file lock),
// retries included: a store that is unavailable (refused connection, server
// starting up, lock held) is tried again every StoreRetryEvery until this
// window ends.
const StoreOpenTimeout = 30 * time.Second

// StoreRetryEvery is the pause between two attempts to open the fleet store.
const StoreRetryEvery = time.Second

// StoreReadyTimeout bounds the readiness probe of the fleet store.
const StoreReadyTimeout = 2 * time.Second

// readyProbeFamily is the family the readiness probe reads from: one no
// configuration can name in practice, and the read changes nothing anyway.
const readyProbeFamily = "\x01muster-readyz"

// openStore opens the desired set named by StoreURL: "" is the bbolt file in
// the data directory, postgres://… a PostgreSQL database. The URL is never
// logged or quoted in an error: it may hold a password.
//
// A failure classed unavailable (the server is down or starting, the
// network refuses) is retried every StoreRetryEvery within
// StoreOpenTimeout, with a "waiting for the fleet store" warning each time;
// any other failure (a wrong password, a schema newer than this broker, a
// bad URL) ends the start at once. ctx ends the wait early (SIGTERM).
func (m *Main) openStore(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, StoreOpenTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		store, err := fleetstore.Open(ctx, m.DataDir, m.StoreURL)
		if err == nil {
			m.fleet = fleetstore.New(store)
			backend := "bbolt"
			if m.StoreURL != "" {
				backend = "postgres"
			}
			m.Logger.Info("fleet store open", "backend", backend, "attempts", attempt)
			return nil
		}
		if muster.ErrorCode(err) != muster.CodeUnavailable || ctx.Err() != nil {
			if attempt > 1 {
				return fmt.Errorf("fleet store: gave up after %d attempts in %s: %w", attempt, time.Since(start).Round(time.Millisecond), err)
			}
			return fmt.Errorf("fleet store: %w", err)
		}
		left := StoreOpenTimeout - time.Since(start)
		m.Logger.Warn("waiting for the fleet store", "attempt", attempt, "err", err,
			"retry_in", StoreRetryEvery.String(), "gives_up_in", left.Round(time.Second).String())
		t := time.NewTimer(StoreRetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("fleet store: gave up after %d attempts in %s: %w", attempt, time.Since(start).Round(time.Millisecond), err)
		case <-t.C:
		}
	}
}

// closeStore closes the desired set, if it was opened.
func (m *Main) closeStore() error {
	if m.fleet == nil {
		return nil
	}
	return m.fleet.Close()
}

// storeReady is the readiness check of the fleet store: one bounded read.
// Any failure is `unavailable`; its cause is logged, never shown.
func (m *Main) storeReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, StoreReadyTimeout)
	defer cancel()
	_, _, err := m.fleet.Desired(ctx, readyProbeFamily, "readyz", "", 1)
	if err == nil {
		return nil
	}
	var be *fleetstore.BackendError
	if errors.As(err, &be) {
		err = be.Cause
	}
	m.Logger.Warn("readiness: the fleet store does not answer", "err", err)
	return muster.Errorf(muster.CodeUnavailable, "the fleet store does not answer")
}

// Fleet is the desired set (for tools, tests and benchmarks).
func (m *Main) Fleet() *fleetstore.Fleet { return m.fleet }
