package muster

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/musterhq/muster/clients/go/api"
)

// Fleet is the desired set of one fleet root: the durable specs of the work
// that should run. Nothing a worker does to its leases (or its death) edits
// the desired set; Forget is the one way out.
type Fleet struct {
	c    *Client
	root string
}

// Fleet returns the fleet at root: one or more legal segments (lowercase
// letters, digits, '-' and '_') joined by '/'.
func (c *Client) Fleet(root string) *Fleet { return &Fleet{c: c, root: root} }

// Root is the fleet's root.
func (f *Fleet) Root() string { return f.root }

// Spec is one entry of the desired set: its minted name and the spec
// exactly as registered.
type Spec struct {
	Name string
	Spec json.RawMessage
}

// Register stores spec (any value encoding/json can encode, or a
// json.RawMessage) under a new name <kind>-<n> and returns it. Names are
// never reused.
func (f *Fleet) Register(ctx context.Context, kind string, spec any) (Spec, error) {
	raw, ok := spec.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(spec); err != nil {
			return Spec{}, fmt.Errorf("muster: encoding the spec: %w", err)
		}
	}
	var row api.SpecRow
	resp, err := f.c.raw.RegisterSpec(ctx, f.root, api.RegisterRequest{Kind: kind, Spec: raw})
	if err := f.c.call(resp, err, 201, &row); err != nil {
		return Spec{}, err
	}
	return Spec{Name: row.Name, Spec: row.Spec}, nil
}

// Get reads one spec; ErrSpecNotFound when the name is not in the set.
func (f *Fleet) Get(ctx context.Context, name string) (Spec, error) {
	var row api.SpecRow
	resp, err := f.c.raw.GetSpec(ctx, f.root, name)
	if err := f.c.call(resp, err, 200, &row); err != nil {
		return Spec{}, err
	}
	return Spec{Name: row.Name, Spec: row.Spec}, nil
}

// Forget removes one spec from the desired set; forgetting an absent name
// succeeds. An illegal name (such as "Repo-1") is refused with
// ErrInvalidName and nothing is removed.
func (f *Fleet) Forget(ctx context.Context, name string) error {
	resp, err := f.c.raw.ForgetSpec(ctx, f.root, name)
	return f.c.call(resp, err, 204, nil)
}

// Desired iterates over the desired set in name order, one request per
// page (of up to 1,000), lazily. On an error it yields it once and stops.
func (f *Fleet) Desired(ctx context.Context) iter.Seq2[Spec, error] {
	return func(yield func(Spec, error) bool) {
		limit := 1000
		params := &api.ListSpecsParams{Limit: &limit}
		for {
			var page api.SpecPage
			resp, err := f.c.raw.ListSpecs(ctx, f.root, params)
			if err := f.c.call(resp, err, 200, &page); err != nil {
				yield(Spec{}, err)
				return
			}
			for _, row := range page.Items {
				if !yield(Spec{Name: row.Name, Spec: row.Spec}, nil) {
					return
				}
			}
			if page.NextCursor == nil || *page.NextCursor == "" {
				return
			}
			params.Cursor = page.NextCursor
		}
	}
}

// Kept is a spec that passed a Sweep, decoded by the caller's validator.
type Kept[T any] struct {
	Name string
	Spec T
}

// SweepResult is what a Sweep kept and the names it dropped.
type SweepResult[T any] struct {
	Kept    []Kept[T]
	Dropped []string
}

// Sweep validates every spec of the desired set with the caller's own
// validate function and forgets each one it rejects: validate-or-drop. It
// returns the decoded specs it kept and the names it dropped. A spec
// registered while the sweep runs is either validated or left alone, never
// dropped without validation (names are never reused). On an error the
// sweep stops; what it dropped until then stays dropped (it is in the
// result).
func Sweep[T any](ctx context.Context, f *Fleet, validate func(json.RawMessage) (T, error)) (SweepResult[T], error) {
	var out SweepResult[T]
	for s, err := range f.Desired(ctx) {
		if err != nil {
			return out, err
		}
		v, verr := validate(s.Spec)
		if verr == nil {
			out.Kept = append(out.Kept, Kept[T]{Name: s.Name, Spec: v})
			continue
		}
		if err := f.Forget(ctx, s.Name); err != nil {
			return out, err
		}
		out.Dropped = append(out.Dropped, s.Name)
	}
	return out, nil
}

// Plan is the difference between a desired and a live set of names.
type Plan struct {
	Missing  []string // desired and not live: work nobody holds
	Orphans  []string // live and not desired: leases of forgotten work
	Revision int64    // for Gap: the inventory revision the live set was read at
}

// Plan asks the broker for the pure difference of desired and live (both
// sorted in the answer). It changes nothing.
func (f *Fleet) Plan(ctx context.Context, desired, live []string) (Plan, error) {
	if desired == nil {
		desired = []string{}
	}
	if live == nil {
		live = []string{}
	}
	var p api.Plan
	resp, err := f.c.raw.PlanFleet(ctx, api.PlanRequest{Desired: desired, Live: live})
	if err := f.c.call(resp, err, 200, &p); err != nil {
		return Plan{}, err
	}
	return Plan{Missing: p.Missing, Orphans: p.Orphans}, nil
}

// Gap plans this fleet's desired set against the live lease inventory: the
// resource segment of every held lease matching liveSelector, read from one
// snapshot at Revision. The broker answers a large gap in pages (10,000
// names of each side at most); Gap reads them all. ErrCursorExpired midway
// means the snapshot was evicted: call Gap again.
func (f *Fleet) Gap(ctx context.Context, liveSelector string) (Plan, error) {
	out := Plan{Missing: []string{}, Orphans: []string{}}
	params := &api.FleetGapParams{Live: liveSelector}
	for {
		var g api.Gap
		resp, err := f.c.raw.FleetGap(ctx, f.root, params)
		if err := f.c.call(resp, err, 200, &g); err != nil {
			return Plan{}, err
		}
		out.Missing = append(out.Missing, g.Missing...)
		out.Orphans = append(out.Orphans, g.Orphans...)
		out.Revision = g.Revision
		if g.NextCursor == nil {
			return out, nil
		}
		params.Cursor = g.NextCursor
	}
}
