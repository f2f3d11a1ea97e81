package fleetstore

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/musterhq/muster"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The bounds of a sweep. A schema's structure decides how much work one
// validation can take: nested combinators over "$ref" double it per level,
// so a 1.4 KB schema can ask for billions of steps. Sweep therefore refuses,
// before reading a single spec, every schema whose shape exceeds one of the
// structural limits below (400 invalid_request naming the limit), and
// validates what it accepts under a work budget counted in subschema
// evaluations, per spec and per request. Time and memory (the library's
// error tree grows with the evaluations) are bounded by these numbers, not
// by the schema's good will.
const (
	// MaxSchemaDepth is the deepest nesting of JSON values in a schema
	// document, objects and arrays counted.
	MaxSchemaDepth = 128
	// MaxSchemaPatternBytes is the longest "pattern" or "patternProperties"
	// key.
	MaxSchemaPatternBytes = 1024
	// MaxSchemaFanOut is the most subschemas one "allOf", "anyOf", "oneOf"
	// or "prefixItems" may list.
	MaxSchemaFanOut = 1000
	// MaxSchemaExpansion is the most subschemas the schema amounts to once
	// every "$ref" is replaced by its target (a reference back to a schema
	// being expanded counts once): the static bound on one validation of a
	// one-value instance.
	MaxSchemaExpansion = 100_000
	// MaxSchemaNesting is the deepest chain of subschemas in that expansion.
	MaxSchemaNesting = 256
	// SweepSpecBudget is the most subschema evaluations the validation of
	// one spec may take. A spec that needs more ends the sweep with
	// invalid_request: the schema is too costly for the specs it is
	// applied to.
	SweepSpecBudget = 200_000
	// SweepRequestBudget is the most subschema evaluations one sweep may
	// take over all its specs.
	SweepRequestBudget = 20_000_000
)

// meter counts the subschema evaluations of one validation. It is reached
// from every compiled subschema (see countVocab) and owned by one Schema.
type meter struct {
	ctx       context.Context
	spec, req int64 // evaluations left
	n         int64 // evaluations since the last context check
}

// abort is the panic value that ends a validation early; Judge recovers it.
type abort struct{ err error }

var errSpecBudget = muster.Errorf(muster.CodeInvalidRequest,
	"the schema exceeds the sweep work budget of %d subschema evaluations per spec (limit: sweep work per spec)", SweepSpecBudget)
var errRequestBudget = muster.Errorf(muster.CodeInvalidRequest,
	"the schema exceeds the sweep work budget of %d subschema evaluations per request (limit: sweep work per request)", SweepRequestBudget)

func (m *meter) step() {
	if m.ctx == nil {
		return // not validating a spec: the compiler's own meta-validation
	}
	m.spec--
	m.req--
	if m.spec < 0 {
		panic(abort{errSpecBudget})
	}
	if m.req < 0 {
		panic(abort{errRequestBudget})
	}
	if m.n++; m.n >= 1024 {
		m.n = 0
		if err := m.ctx.Err(); err != nil {
			panic(abort{err})
		}
	}
}

// countExt is attached to every compiled subschema: the validator calls it
// once per evaluation of a subschema that reaches its applicators (an
// evaluation that stops at "type", "const", "enum" or "format" does
// constant work and branches nowhere).
type countExt struct{ m *meter }

func (c countExt) Validate(*jsonschema.ValidatorContext, any) { c.m.step() }

const countVocabURL = "urn:muster:sweep-meter"

func countVocab(m *meter) *jsonschema.Vocabulary {
	return &jsonschema.Vocabulary{
		URL: countVocabURL,
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return countExt{m}, nil
		},
	}
}

// checkDocument applies the limits that must hold before the compiler sees
// the document: nesting depth, pattern length, and the size of numbers (the
// bound of a spec's: see MaxSpecNumberBytes).
func checkDocument(doc any) error {
	type item struct {
		v     any
		depth int
	}
	stack := []item{{doc, 1}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch v := it.v.(type) {
		case map[string]any:
			if it.depth > MaxSchemaDepth {
				return muster.Errorf(muster.CodeInvalidRequest, "schema nests deeper than %d levels (limit: schema depth)", MaxSchemaDepth)
			}
			for k, c := range v {
				if k == "pattern" {
					if p, ok := c.(string); ok && len(p) > MaxSchemaPatternBytes {
						return muster.Errorf(muster.CodeInvalidRequest, "schema has a pattern longer than %d bytes (limit: pattern size)", MaxSchemaPatternBytes)
					}
				}
				if k == "patternProperties" {
					if pp, ok := c.(map[string]any); ok {
						for p := range pp {
							if len(p) > MaxSchemaPatternBytes {
								return muster.Errorf(muster.CodeInvalidRequest, "schema has a pattern longer than %d bytes (limit: pattern size)", MaxSchemaPatternBytes)
							}
						}
					}
				}
				stack = append(stack, item{c, it.depth + 1})
			}
		case json.Number:
			if numberTooBig(v) {
				return errSchemaNumber
			}
		case []any:
			if it.depth > MaxSchemaDepth {
				return muster.Errorf(muster.CodeInvalidRequest, "schema nests deeper than %d levels (limit: schema depth)", MaxSchemaDepth)
			}
			for _, c := range v {
				stack = append(stack, item{c, it.depth + 1})
			}
		}
	}
	return nil
}

// rawExpansion is a fast first look at the $ref expansion, on the document
// before it is compiled (compiling costs milliseconds; this, microseconds):
// every object counts as a subschema, except under keywords that hold data
// ("enum", "const", "default", "examples") and under "$defs" and
// "definitions" (reached through references only), and a "$ref" "#" or
// "#/json/pointer" counts its target's expansion, memoized; a reference back
// to a target being expanded counts once. It reports whether the document
// certainly expands beyond MaxSchemaExpansion. A document with "$id",
// "$anchor" or "$dynamicRef" below its root is left to checkShape (its
// references may resolve elsewhere), and so is anything it cannot resolve.
func rawExpansion(doc any) bool {
	root, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	w := rawWalk{root: root, memo: map[string]int{}, open: map[string]bool{}}
	n, ok := w.expand(root, true)
	return ok && n > MaxSchemaExpansion
}

type rawWalk struct {
	root map[string]any
	memo map[string]int
	open map[string]bool
}

// dataKeywords hold values, or subschemas reached only through a "$ref".
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true, "$defs": true, "definitions": true}

// expand counts v; ok is false when the walk gives up.
func (w *rawWalk) expand(v any, top bool) (n int, ok bool) {
	switch v := v.(type) {
	case map[string]any:
		n = 1
		for k, c := range v {
			if dataKeywords[k] {
				continue
			}
			if !top && (k == "$id" || k == "$anchor" || k == "$dynamicRef" || k == "$dynamicAnchor" || k == "$recursiveRef") {
				return 0, false
			}
			if k == "$ref" {
				ref, isStr := c.(string)
				if !isStr {
					continue
				}
				m, ok := w.ref(ref)
				if !ok {
					return 0, false
				}
				n += m
				continue
			}
			m, ok := w.expand(c, false)
			if !ok {
				return 0, false
			}
			n += m
			if n > MaxSchemaExpansion {
				return n, true
			}
		}
		return n, true
	case []any:
		for _, c := range v {
			m, ok := w.expand(c, false)
			if !ok {
				return 0, false
			}
			if n += m; n > MaxSchemaExpansion {
				return n, true
			}
		}
		return n, true
	}
	return 0, true
}

// ref expands the target of a local JSON-pointer reference.
func (w *rawWalk) ref(ref string) (int, bool) {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return 0, false
	}
	if n, ok := w.memo[ref]; ok {
		return n, true
	}
	if w.open[ref] {
		return 1, true
	}
	var target any = w.root
	if ref != "#" {
		for _, tok := range strings.Split(ref[2:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			obj, isObj := target.(map[string]any)
			if !isObj || strings.Contains(tok, "%") {
				return 0, false
			}
			if target, isObj = obj[tok]; !isObj {
				return 0, false
			}
		}
	}
	w.open[ref] = true
	n, ok := w.expand(target, ref == "#")
	delete(w.open, ref)
	if !ok {
		return 0, false
	}
	n = min(n, MaxSchemaExpansion+1)
	w.memo[ref] = n
	return n, true
}

// shape is what checkShape measured of one subschema.
type shape struct{ size, depth int }

// checkShape applies the limits on the compiled schema: fan-out, expansion
// and nesting. The expansion is memoized per subschema, so the walk costs
// the compiled schema's size, not its expansion.
func checkShape(root *jsonschema.Schema) error {
	w := shapeWalk{memo: map[*jsonschema.Schema]shape{}, open: map[*jsonschema.Schema]bool{}}
	sh, err := w.walk(root)
	if err != nil {
		return err
	}
	if sh.size > MaxSchemaExpansion {
		return errExpansion
	}
	if sh.depth > MaxSchemaNesting {
		return errNesting
	}
	return nil
}

var (
	errExpansion = muster.Errorf(muster.CodeInvalidRequest,
		"schema expands to more than %d subschemas once its $refs are followed (limit: $ref expansion)", MaxSchemaExpansion)
	errNesting = muster.Errorf(muster.CodeInvalidRequest,
		"schema nests subschemas deeper than %d once its $refs are followed (limit: subschema nesting)", MaxSchemaNesting)
	errSchemaNumber = muster.Errorf(muster.CodeInvalidRequest,
		"schema holds a number longer than %d characters or with more than %d exponent digits (limit: schema number)",
		MaxSpecNumberBytes, MaxSpecExponentDigits)
	errFanOut = muster.Errorf(muster.CodeInvalidRequest,
		"schema lists more than %d subschemas in one allOf, anyOf, oneOf or prefixItems (limit: combinator fan-out)", MaxSchemaFanOut)
)

type shapeWalk struct {
	memo map[*jsonschema.Schema]shape
	open map[*jsonschema.Schema]bool
}

func (w *shapeWalk) walk(s *jsonschema.Schema) (shape, error) {
	if s == nil {
		return shape{}, nil
	}
	if sh, ok := w.memo[s]; ok {
		return sh, nil
	}
	if w.open[s] {
		return shape{1, 1}, nil // recursion: bounded by the instance, and by the budget
	}
	for _, l := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		if len(l) > MaxSchemaFanOut {
			return shape{}, errFanOut
		}
	}
	w.open[s] = true
	defer delete(w.open, s)
	total := shape{1, 1}
	var err error
	add := func(c *jsonschema.Schema) {
		if err != nil || c == nil {
			return
		}
		var sh shape
		if sh, err = w.walk(c); err != nil {
			return
		}
		total.size = min(total.size+sh.size, MaxSchemaExpansion+1)
		total.depth = max(total.depth, sh.depth+1)
		if total.size > MaxSchemaExpansion {
			err = errExpansion
		} else if total.depth > MaxSchemaNesting {
			err = errNesting
		}
	}
	each(s, add)
	if err != nil {
		return shape{}, err
	}
	w.memo[s] = total
	return total, nil
}

// each calls f on every subschema s applies, "$ref"s included.
func each(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	f(s.Ref)
	f(s.RecursiveRef)
	if s.DynamicRef != nil {
		f(s.DynamicRef.Ref)
	}
	f(s.Not)
	for _, l := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		for _, c := range l {
			f(c)
		}
	}
	f(s.If)
	f(s.Then)
	f(s.Else)
	f(s.PropertyNames)
	for _, c := range s.Properties {
		f(c)
	}
	for _, c := range s.PatternProperties {
		f(c)
	}
	for _, c := range s.DependentSchemas {
		f(c)
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			f(c)
		}
	}
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			f(v)
		case []*jsonschema.Schema:
			for _, c := range v {
				f(c)
			}
		}
	}
	f(s.UnevaluatedProperties)
	f(s.Contains)
	f(s.Items2020)
	f(s.UnevaluatedItems)
	f(s.ContentSchema)
}
