package fleetstore

import (
	"context"

	"github.com/musterhq/muster"
)

// Fleet is the desired set's rules on top of a Store: it judges every family,
// root, kind, name, spec and limit before the backend sees it. A Fleet is safe
// for concurrent use and holds no state of its own besides the Store.
type Fleet struct {
	store Store
	// SpecsPerRoot, if set, is each family's bound on the specs of one root
	// (0: none). Register refuses a spec beyond it with CodeSpecLimit.
	SpecsPerRoot func(family string) int
}

// New returns the Fleet over store. Closing the Fleet closes the store.
func New(store Store) *Fleet { return &Fleet{store: store} }

// errSpecLimit is the refusal of a spec beyond a root's quota.
func errSpecLimit(max int) error {
	return muster.LimitErrorf(muster.CodeSpecLimit, muster.ScopeRoot, "the root holds its quota of %d specs", max)
}

// Close closes the underlying Store.
func (f *Fleet) Close() error { return f.store.Close() }

// Register stores spec under a freshly minted "<kind>-<n>" and returns the
// name once the spec is durable. spec is any JSON value of at most
// MaxSpecBytes (CodePayloadTooLarge above), stored byte for byte; invalid
// JSON is CodeInvalidRequest.
func (f *Fleet) Register(ctx context.Context, family, root, kind string, spec []byte) (string, error) {
	if err := checkScope(family, root); err != nil {
		return "", err
	}
	if err := CheckKind(kind); err != nil {
		return "", err
	}
	if err := checkSpec(spec); err != nil {
		return "", err
	}
	max := 0
	if f.SpecsPerRoot != nil {
		max = f.SpecsPerRoot(family)
	}
	return f.store.Register(ctx, family, root, kind, spec, max)
}

// Get returns the row called name: CodeInvalidName for an illegal name,
// CodeSpecNotFound for a legal one that is not stored.
func (f *Fleet) Get(ctx context.Context, family, root, name string) (Row, error) {
	if err := checkScope(family, root); err != nil {
		return Row{}, err
	}
	if err := CheckName(name); err != nil {
		return Row{}, err
	}
	return f.store.Get(ctx, family, root, name)
}

// Forget is the one door out of the desired set. An illegal name (such as
// "Repo-1") is refused with CodeInvalidName and nothing is deleted or folded;
// forgetting a legal name that is not stored succeeds.
func (f *Fleet) Forget(ctx context.Context, family, root, name string) error {
	if err := checkScope(family, root); err != nil {
		return err
	}
	if err := CheckName(name); err != nil {
		return err
	}
	return f.store.Forget(ctx, family, root, name)
}

// Desired returns one page of the root's rows in name (byte) order, strictly
// after the name after ("" for the first page), and whether more follow.
// limit 0 means DefaultPageSize; larger than MaxPageSize is clamped; negative
// is CodeInvalidRequest. An after that is not a legal name is
// CodeInvalidCursor. Pages are not a snapshot (see the package doc).
func (f *Fleet) Desired(ctx context.Context, family, root, after string, limit int) ([]Row, bool, error) {
	if err := checkScope(family, root); err != nil {
		return nil, false, err
	}
	if after != "" && CheckName(after) != nil {
		return nil, false, muster.Errorf(muster.CodeInvalidCursor, "the position to list after is not a legal name")
	}
	switch {
	case limit < 0:
		return nil, false, muster.Errorf(muster.CodeInvalidRequest, "limit must not be negative")
	case limit == 0:
		limit = DefaultPageSize
	case limit > MaxPageSize:
		limit = MaxPageSize
	}
	return f.store.Desired(ctx, family, root, after, limit)
}

// Names returns every name under root in order: the desired side of a gap.
// It pages through the store, so it is not a snapshot either.
func (f *Fleet) Names(ctx context.Context, family, root string) ([]string, error) {
	names := []string{}
	err := f.each(ctx, family, root, listPage, func(rows []Row) error {
		for _, r := range rows {
			names = append(names, r.Name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// NamePage returns up to limit names of root (1 ≤ limit ≤ MaxGapPage)
// strictly after after, in byte order, and whether more follow. It reads
// names only, where the store can.
func (f *Fleet) NamePage(ctx context.Context, family, root, after string, limit int) ([]string, bool, error) {
	if err := checkScope(family, root); err != nil {
		return nil, false, err
	}
	if nl, ok := f.store.(interface {
		Names(ctx context.Context, family, root, after string, limit int) ([]string, bool, error)
	}); ok {
		return nl.Names(ctx, family, root, after, limit)
	}
	rows, more, err := f.store.Desired(ctx, family, root, after, min(limit, MaxPageSize))
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	return names, more, err
}

// listPage and sweepPage are the page sizes of the Fleet's own walks: Names,
// and Sweep, which holds a page of specs while it judges them (64 of at most
// MaxSpecBytes: 4 MiB). Tests lower them to cross page boundaries with a
// few rows.
var listPage, sweepPage = MaxPageSize, 64

// each calls fn with successive pages of up to page rows of root, in name
// order.
func (f *Fleet) each(ctx context.Context, family, root string, page int, fn func([]Row) error) error {
	if err := checkScope(family, root); err != nil {
		return err
	}
	after := ""
	for {
		rows, more, err := f.store.Desired(ctx, family, root, after, page)
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			if err := fn(rows); err != nil {
				return err
			}
			after = rows[len(rows)-1].Name
		}
		if !more || len(rows) == 0 {
			return nil
		}
	}
}

func checkScope(family, root string) error {
	if err := CheckFamily(family); err != nil {
		return err
	}
	_, err := muster.ParseFleetRoot(root)
	return err
}
