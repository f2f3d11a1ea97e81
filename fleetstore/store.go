package fleetstore

import (
	"context"
	"encoding/json"
)

// Row is one stored spec: its name and the spec exactly as registered.
type Row struct {
	Name string          `json:"name"`
	Spec json.RawMessage `json:"spec"`
}

// Store is a backend: dumb, durable storage with the transactions inside. It
// judges nothing; Fleet checks families, roots, kinds, names, specs and limits
// before calling it, and a Store may assume they are legal. Every method is
// safe for concurrent use. Failures of the backend itself are BackendErrors.
type Store interface {
	// Register mints "<kind>-<n>" from the root's counter (CounterKey, which
	// starts at 1 and is shared by every kind of the root) and stores spec
	// under that name, both in one transaction. It returns only after the
	// transaction is durable. A name is never minted twice, whatever the
	// concurrency, the restarts or the names forgotten since. When max > 0
	// and the root already holds max specs, nothing is stored and the error
	// is errSpecLimit(max) (on PostgreSQL, registers racing on other
	// connections may pass max by at most their number).
	Register(ctx context.Context, family, root, kind string, spec []byte, max int) (name string, err error)

	// Get returns one row, or a CodeSpecNotFound error.
	Get(ctx context.Context, family, root, name string) (Row, error)

	// Forget deletes the named rows that exist, in one transaction, and
	// ignores the names that do not. It never touches the counter.
	Forget(ctx context.Context, family, root string, names ...string) error

	// Drop is a sweep's compare-and-delete: in one transaction, it deletes
	// each row of judged whose stored spec is exactly judged[i].Spec (the
	// bytes the sweep judged) and returns the names deleted, in judged's
	// order. A name no longer stored (forgotten meanwhile) is skipped. If a
	// name is stored with any other bytes, nothing at all is deleted and the
	// error wraps ErrSpecChanged: the bytes judged were not the bytes stored.
	// On any error nothing is deleted, except when the commit itself may or
	// may not have happened (a connection cut after COMMIT was sent), and
	// then only rows stored with exactly the judged bytes.
	Drop(ctx context.Context, family, root string, judged []Row) (dropped []string, err error)

	// Desired returns up to limit rows (1 ≤ limit ≤ MaxPageSize) whose names
	// are strictly greater than after, in byte order, and whether more rows
	// follow. A root that was never written is empty, not an error.
	Desired(ctx context.Context, family, root, after string, limit int) (rows []Row, more bool, err error)

	// Close releases the backend. Calls after Close fail.
	Close() error
}
