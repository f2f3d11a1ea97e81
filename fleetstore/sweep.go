package fleetstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/musterhq/muster"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SweepResult is what a sweep kept, dropped and could not judge, each in
// name order. All three are non-nil, so they encode as JSON arrays.
type SweepResult struct {
	Kept    []Row    `json:"kept"`
	Dropped []string `json:"dropped"`
	// Invalid lists the stored specs beyond a limit of register's (stored
	// before the limit existed: see MaxSpecDepth): never shown to the
	// schema, neither kept nor dropped, left in the store for their owner
	// to forget.
	Invalid []InvalidRow `json:"invalid"`
}

// InvalidRow is a stored spec a sweep did not judge, and why.
type InvalidRow struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Schema is a compiled JSON Schema with its work meter. It is not safe for
// concurrent use: one validation at a time.
type Schema struct {
	s *jsonschema.Schema
	m *meter
}

// schemaLocation names the caller's schema inside the compiler. It resolves
// nowhere: Sweep never loads anything from outside the request.
const schemaLocation = "urn:muster:sweep-schema"

// CompileSchema compiles a JSON Schema given as JSON (draft 2020-12 unless its
// "$schema" names another draft). "$ref"s may point inside the schema and to
// the standard meta-schemas only: nothing is fetched from files or the
// network. "format" is an annotation, as draft 2020-12 specifies, not an
// assertion. Failures are CodeInvalidRequest, or CodePayloadTooLarge above
// MaxSchemaBytes. A schema beyond one of the structural limits
// (MaxSchemaDepth, MaxSchemaPatternBytes, MaxSchemaFanOut,
// MaxSchemaExpansion, MaxSchemaNesting) is CodeInvalidRequest with a message
// naming the limit; the checks cost time linear in the schema's size.
func CompileSchema(raw []byte) (*Schema, error) { return compileSchema(raw, true) }

// compileSchema is CompileSchema; fast=false skips the first look at the
// expansion (tests compare it with the compiled walk).
func compileSchema(raw []byte, fast bool) (*Schema, error) {
	doc, err := precheck(raw, fast)
	if err != nil {
		return nil, err
	}
	m := &meter{}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.AssertVocabs()
	c.RegisterVocabulary(countVocab(m))
	if err := c.AddResource(schemaLocation, doc); err != nil {
		return nil, muster.Errorf(muster.CodeInvalidRequest, "schema cannot be added")
	}
	s, err := c.Compile(schemaLocation)
	if err != nil {
		var le *jsonschema.LoadURLError
		if errors.As(err, &le) {
			return nil, muster.Errorf(muster.CodeInvalidRequest,
				"schema refers to an external resource; sweep loads none")
		}
		return nil, muster.Errorf(muster.CodeInvalidRequest, "schema is not a valid JSON Schema")
	}
	if err := checkShape(s); err != nil {
		return nil, err
	}
	return &Schema{s: s, m: m}, nil
}

// PrecheckSchema applies the checks of CompileSchema that cost time linear
// in the schema's size and no more (JSON, size, depth, patterns, the first
// look at the expansion): what refuses the abuse report's schemas in a
// fraction of a millisecond. Compiling, which costs more, can then wait
// for its turn (see the HTTP layer's sweep gate). A schema that passes may
// still be refused by CompileSchema.
func PrecheckSchema(raw []byte) error {
	_, err := precheck(raw, true)
	return err
}

func precheck(raw []byte, fast bool) (any, error) {
	if len(raw) > MaxSchemaBytes {
		return nil, muster.Errorf(muster.CodePayloadTooLarge, "schema is larger than %d bytes", MaxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, muster.Errorf(muster.CodeInvalidRequest, "schema is not one valid JSON value")
	}
	if err := checkDocument(doc); err != nil {
		return nil, err
	}
	if fast && rawExpansion(doc) {
		return nil, errExpansion
	}
	return doc, nil
}

// Budget starts a request's work budget: SweepRequestBudget evaluations in
// all, checked against ctx every 1,024 evaluations.
func (s *Schema) Budget(ctx context.Context) {
	s.m.ctx, s.m.req = ctx, SweepRequestBudget
}

// Judge reports whether spec is JSON that the schema accepts, within
// SweepSpecBudget evaluations and what is left of the request's budget (see
// Budget; without one, a fresh one under ctx). valid is false, with a nil
// error, only when spec is not one JSON value or the schema's validation
// reports it failing; any other outcome is an error: CodeInvalidRequest
// naming the budget that ran out, ctx's error when ctx ends, CodeInternal
// when the validator fails otherwise.
func (s *Schema) Judge(ctx context.Context, spec []byte) (valid bool, err error) {
	if s.m.ctx == nil {
		s.Budget(ctx)
	}
	if err := s.m.ctx.Err(); err != nil {
		return false, err
	}
	v, uerr := jsonschema.UnmarshalJSON(bytes.NewReader(spec))
	if uerr != nil {
		return false, nil
	}
	s.m.spec = SweepSpecBudget
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(abort)
			if !ok {
				panic(r)
			}
			valid, err = false, a.err
		}
	}()
	verr := s.s.Validate(v)
	if verr == nil {
		return true, nil
	}
	if _, failed := verr.(*jsonschema.ValidationError); failed {
		return false, nil
	}
	return false, muster.Errorf(muster.CodeInternal, "the schema validator failed on a spec")
}

type refuseLoader struct{}

func (refuseLoader) Load(string) (any, error) {
	return nil, errors.New("external schema resources are not loaded")
}

// Sweep is the boot move, validate-or-drop: it checks every spec stored under
// root against the JSON Schema schema (see CompileSchema) and deletes those
// that fail, in the same pass. See SweepFunc for what it guarantees.
func (f *Fleet) Sweep(ctx context.Context, family, root string, schema []byte) (SweepResult, error) {
	if err := checkScope(family, root); err != nil {
		return SweepResult{}, err
	}
	s, err := CompileSchema(schema)
	if err != nil {
		return SweepResult{}, err
	}
	return f.SweepSchema(ctx, family, root, s)
}

// SweepSchema is Sweep with a schema compiled by CompileSchema (a schema
// serves one sweep: its work budget starts here).
func (f *Fleet) SweepSchema(ctx context.Context, family, root string, s *Schema) (SweepResult, error) {
	if err := checkScope(family, root); err != nil {
		return SweepResult{}, err
	}
	s.Budget(ctx)
	return f.SweepFunc(ctx, family, root, func(r Row) (bool, error) { return s.Judge(ctx, r.Spec) })
}

// SweepFunc reads root page by page in name order, calls valid on each row,
// and after each page drops the rows of that page that valid rejected, by
// compare-and-delete (Store.Drop): a row is deleted only while it is stored
// with exactly the bytes valid judged. valid must be a pure judgement: it
// runs with no transaction open.
//
// A spec that parses but breaks one of register's shape limits
// (checkSpecShape) is never handed to valid: it is listed in Invalid and
// left stored (a spec that no longer parses is judged, and dropped, as the
// seed says). Every other spec present
// when the sweep starts is judged once. Only judged rows
// are deleted, and only with the bytes judged: a spec registered while the
// sweep runs is either judged like the others or left alone, never dropped
// unjudged; a read that handed valid other bytes than those stored
// (ErrSpecChanged) deletes nothing of its page and stops the sweep. Dropped
// lists the names this sweep deleted: a spec forgotten while the sweep runs
// is in neither list, or in Kept.
//
// Any failure stops the sweep before anything more is deleted and returns
// an error carrying a *muster.Error, with an empty result: valid's own
// *muster.Error as it is (a work budget ran out, the validator failed), any
// other error as a BackendError (the store failed or ctx ended:
// CodeUnavailable; ErrSpecChanged: CodeInternal). The pages already swept
// stay swept.
func (f *Fleet) SweepFunc(ctx context.Context, family, root string, valid func(Row) (bool, error)) (SweepResult, error) {
	judged, err := f.SweepNames(ctx, family, root, valid)
	if err != nil {
		return SweepResult{}, err
	}
	res := SweepResult{Kept: []Row{}, Dropped: judged.Dropped, Invalid: judged.Invalid}
	err = f.KeptRows(ctx, family, root, judged.Kept, func(r Row) error {
		res.Kept = append(res.Kept, r)
		return nil
	})
	if err != nil {
		return SweepResult{}, err
	}
	return res, nil
}

// SweepNamesResult is a sweep's result with the names of the kept specs
// only: what a sweep holds while it runs, whatever the size of the specs.
type SweepNamesResult struct {
	Kept, Dropped []string
	Invalid       []InvalidRow
}

// SweepNames is the judging pass of SweepFunc, with its guarantees; it
// keeps the names of the kept specs, not their bytes, and holds one page of
// sweepPage specs at a time. KeptRows reads the kept specs back.
func (f *Fleet) SweepNames(ctx context.Context, family, root string, valid func(Row) (bool, error)) (SweepNamesResult, error) {
	res := SweepNamesResult{Kept: []string{}, Dropped: []string{}, Invalid: []InvalidRow{}}
	err := f.each(ctx, family, root, sweepPage, func(rows []Row) error {
		var failed []Row
		for _, r := range rows {
			// A spec that no longer parses goes to valid: the seed's drop.
			if json.Valid(r.Spec) {
				if err := checkSpecShape(r.Spec); err != nil {
					res.Invalid = append(res.Invalid, InvalidRow{Name: r.Name, Reason: err.(*muster.Error).Message})
					continue
				}
			}
			ok, err := valid(r)
			if err != nil {
				return backendErr("sweep", err, false)
			}
			if ok {
				res.Kept = append(res.Kept, r.Name)
			} else {
				failed = append(failed, r)
			}
		}
		if len(failed) == 0 {
			return nil
		}
		dropped, err := f.store.Drop(ctx, family, root, failed)
		if err != nil {
			return err
		}
		res.Dropped = append(res.Dropped, dropped...)
		return nil
	})
	if err != nil {
		return SweepNamesResult{}, err
	}
	return res, nil
}

// KeptRows reads back the rows of kept (names in name order, as SweepNames
// returns them), one page at a time, and calls fn on each, in order. A
// name is stored with the bytes it was judged with, or not at all: names
// are never reused and specs never change, and a spec forgotten since is
// skipped. fn's error, or the store's, stops the walk and is returned.
func (f *Fleet) KeptRows(ctx context.Context, family, root string, kept []string, fn func(Row) error) error {
	if len(kept) == 0 {
		return nil
	}
	err := f.each(ctx, family, root, sweepPage, func(rows []Row) error {
		for _, r := range rows {
			for len(kept) > 0 && kept[0] < r.Name {
				kept = kept[1:] // forgotten since it was judged
			}
			if len(kept) == 0 {
				return errWalkDone
			}
			if kept[0] == r.Name {
				kept = kept[1:]
				if err := fn(r); err != nil {
					return err
				}
			}
		}
		if len(kept) == 0 {
			return errWalkDone
		}
		return nil
	})
	if errors.Is(err, errWalkDone) {
		return nil
	}
	return err
}

// errWalkDone ends a walk of each early, without an error.
var errWalkDone = errors.New("walk done")
