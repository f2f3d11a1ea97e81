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
// PostgreSQL and migrating its schema, or taking the bbolt file lock).
const StoreOpenTimeout = 30 * time.Second

// StoreReadyTimeout bounds the readiness probe of the fleet store.
const StoreReadyTimeout = 2 * time.Second

// readyProbeFamily is the family the readiness probe reads from: one no
// configuration can name in practice, and the read changes nothing anyway.
const readyProbeFamily = "\x01muster-readyz"

// openStore opens the desired set named by StoreURL: "" is the bbolt file in
// the data directory, postgres://… a PostgreSQL database. The URL is never
// logged or quoted in an error: it may hold a password.
func (m *Main) openStore() error {
	ctx, cancel := context.WithTimeout(context.Background(), StoreOpenTimeout)
	defer cancel()
	store, err := fleetstore.Open(ctx, m.DataDir, m.StoreURL)
	if err != nil {
		return fmt.Errorf("fleet store: %w", err)
	}
	m.fleet = fleetstore.New(store)
	backend := "bbolt"
	if m.StoreURL != "" {
		backend = "postgres"
	}
	m.Logger.Info("fleet store open", "backend", backend)
	return nil
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
