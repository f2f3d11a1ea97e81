package fleetstore

import (
	"context"
	"encoding/json"
	"strconv"
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

	// Roots returns up to limit roots (1 ≤ limit ≤ MaxPageSize) strictly
	// after (afterFamily, afterRoot), in (family, root) byte order, each with
	// its counter, and whether more follow. A root is listed once Register
	// or Restore wrote it, even when it holds no spec any more: its counter
	// still matters.
	Roots(ctx context.Context, afterFamily, afterRoot string, limit int) (roots []RootCounter, more bool, err error)

	// Restore stores each row under its own name, in one transaction, and
	// raises the root's counter to next when it is lower (never lowers it).
	// A name not stored is added; a name stored with the same bytes is left
	// alone (Unchanged); a name stored with other bytes is left alone and
	// reported (Conflict). Outcomes are in rows' order. Fleet has checked
	// that the names are distinct, minted-shaped ("<kind>-<n>"), and that
	// next is above every n among them.
	Restore(ctx context.Context, family, root string, rows []Row, next uint64) (outcomes []Outcome, err error)

	// Close releases the backend. Calls after Close fail.
	Close() error
}

// RootCounter is one root of the store with its counter: Next is the number
// the root's next Register mints (1 for a root that never minted one).
type RootCounter struct {
	Family string `json:"family"`
	Root   string `json:"root"`
	Next   uint64 `json:"next"`
}

// Outcome is what Restore did with one row.
type Outcome int

const (
	// Added: the name was not stored; it is now, with the row's spec.
	Added Outcome = iota
	// Unchanged: the name was already stored with exactly these bytes.
	Unchanged
	// Conflict: the name is stored with other bytes, which were kept.
	Conflict
)

func (o Outcome) String() string {
	switch o {
	case Added:
		return "added"
	case Unchanged:
		return "unchanged"
	case Conflict:
		return "conflict"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}
