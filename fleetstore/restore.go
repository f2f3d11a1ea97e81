package fleetstore

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/musterhq/muster"
)

// Restoring a desired set (muster fleet import) writes specs under the names
// they were minted with, and carries each root's counter along, so that a
// restored root never mints a name it held before.

// MaxCounter is the largest counter a root may hold: the next number to
// mint. Register mints numbers below it.
const MaxCounter = math.MaxInt64

// ParseMintedName takes a name of the shape Register mints apart:
// "<kind>-<n>", kind a legal kind (which may itself hold '-': the number is
// after the last one) and n a decimal without leading zeros in
// 1 … MaxCounter-1. Anything else is CodeInvalidName.
func ParseMintedName(name string) (kind string, n uint64, err error) {
	bad := func() (string, uint64, error) {
		return "", 0, muster.Errorf(muster.CodeInvalidName,
			"a restored name must be KIND-N as Register mints it (N from 1 to %d, no leading zero)", uint64(MaxCounter-1))
	}
	if CheckName(name) != nil {
		return bad()
	}
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return bad()
	}
	kind, digits := name[:i], name[i+1:]
	if CheckKind(kind) != nil || digits == "" || digits[0] == '0' {
		return bad()
	}
	n, perr := strconv.ParseUint(digits, 10, 64)
	if perr != nil || n >= MaxCounter {
		return bad()
	}
	return kind, n, nil
}

// Roots returns one page of the store's roots after (afterFamily,
// afterRoot), in (family, root) byte order, with their counters, and whether
// more follow. limit is clamped as Desired's is. Pages are not a snapshot.
func (f *Fleet) Roots(ctx context.Context, afterFamily, afterRoot string, limit int) ([]RootCounter, bool, error) {
	switch {
	case limit < 0:
		return nil, false, muster.Errorf(muster.CodeInvalidRequest, "limit must not be negative")
	case limit == 0:
		limit = DefaultPageSize
	case limit > MaxPageSize:
		limit = MaxPageSize
	}
	return f.store.Roots(ctx, afterFamily, afterRoot, limit)
}

// Restore stores rows under their own names in one transaction and raises
// the root's counter to at least next and above every restored number (see
// Store.Restore for the outcomes). Each name must have the minted shape
// (ParseMintedName) and appear once; each spec is checked as Register checks
// it; next is 0 (no counter given) or 1 … MaxCounter; at most MaxPageSize
// rows. No quota applies: a restore puts back what was there. Any refusal
// (CodeInvalidName, CodeInvalidRequest, CodePayloadTooLarge) writes nothing.
func (f *Fleet) Restore(ctx context.Context, family, root string, rows []Row, next uint64) ([]Outcome, error) {
	if err := checkScope(family, root); err != nil {
		return nil, err
	}
	if len(rows) > MaxPageSize {
		return nil, muster.Errorf(muster.CodeInvalidRequest, "at most %d rows per restore", MaxPageSize)
	}
	if next > MaxCounter {
		return nil, muster.Errorf(muster.CodeInvalidRequest, "a counter is at most %d", uint64(MaxCounter))
	}
	next = max(next, 1)
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		_, n, err := ParseMintedName(r.Name)
		if err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, muster.Errorf(muster.CodeInvalidRequest, "a name appears twice in one restore")
		}
		seen[r.Name] = true
		if err := checkSpec(r.Spec); err != nil {
			return nil, err
		}
		next = max(next, n+1)
	}
	if len(rows) == 0 && next == 1 {
		// Nothing to store and no counter to raise: leave the root unwritten.
		return []Outcome{}, nil
	}
	return f.store.Restore(ctx, family, root, rows, next)
}

// CheckSpec judges a spec as Register does: CodePayloadTooLarge beyond
// MaxSpecBytes, CodeInvalidRequest when it is not one valid JSON value of
// the allowed shape.
func CheckSpec(spec []byte) error { return checkSpec(spec) }
