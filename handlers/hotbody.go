package handlers

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/musterhq/muster/api"
)

// The hot path. The lease mutations carry a flat JSON object and three
// path segments; validating them with kin-openapi costs more than the lease
// itself. For these operations the contract middleware first tries the
// rules compiled from the same openapi.yaml at start-up (rules.go, shared
// with the batch decoder): it ACCEPTS only requests
// it can prove kin-openapi accepts too (and then decodes the body once, into
// the generated type); everything else — any refusal, any body it does not
// understand — takes the general path (kin-openapi, then the generated
// decoder), so every refusal and its problem are exactly the general
// path's. TestHotPathDifferential and FuzzHotPath hold the two to the same
// answer, code, detail and decoded body.

// hotBodies are the operations with a fast path and their generated body
// types. Each body type's fields must be exactly its schema's properties.
var hotBodies = map[string]reflect.Type{
	"acquireLease": reflect.TypeFor[api.AcquireLeaseJSONRequestBody](),
	"extendLease":  reflect.TypeFor[api.ExtendLeaseJSONRequestBody](),
	"releaseLease": reflect.TypeFor[api.ReleaseLeaseJSONRequestBody](),
}

// maxHotMembers bounds the members of a body the fast path reads.
const maxHotMembers = 8

// hotField is where a property of a hot body goes in the generated type.
type hotField struct {
	index   int  // struct field index
	pointer bool // the struct field is a pointer (optional member)
}

// hotParam is one path parameter of a hot operation.
type hotParam struct {
	name string
	rule *stringRule
}

// hotOp is the compiled fast path of one operation: the contract's rules
// (rules.go) of its parameters and body, and the body's generated type.
type hotOp struct {
	params []hotParam
	rules  *objectRule
	fields []hotField // by the index of the rule's field
	body   reflect.Type
}

// compileHot compiles the fast path of op from the contract. It fails on any
// keyword it does not implement: a schema change it cannot follow must be
// met by a change here, never silently skipped.
func compileHot(item *openapi3.PathItem, op *openapi3.Operation, body reflect.Type) (*hotOp, error) {
	h := &hotOp{body: body}
	params := slices.Concat(item.Parameters, op.Parameters)
	for _, ref := range params {
		p := ref.Value
		if p.In != openapi3.ParameterInPath || !p.Required || p.Schema == nil || p.Content != nil ||
			p.Style != "" && p.Style != openapi3.SerializationSimple || p.AllowEmptyValue {
			return nil, fmt.Errorf("parameter %q: only required simple path parameters with a schema", p.Name)
		}
		rule, err := compileString(p.Schema.Value)
		if err != nil {
			return nil, fmt.Errorf("parameter %q: %w", p.Name, err)
		}
		h.params = append(h.params, hotParam{name: p.Name, rule: rule})
	}
	rb := op.RequestBody
	if rb == nil || rb.Value == nil || !rb.Value.Required || len(rb.Value.Content) != 1 || rb.Value.Content["application/json"] == nil {
		return nil, fmt.Errorf("the request body must be required and application/json only")
	}
	mt := rb.Value.Content["application/json"]
	if mt.Schema == nil || len(mt.Encoding) > 0 {
		return nil, fmt.Errorf("the request body needs a schema and no encoding")
	}
	var err error
	if h.rules, err = compileObject(mt.Schema.Value); err != nil {
		return nil, err
	}
	fieldOf := map[string]reflect.StructField{}
	for i := range body.NumField() {
		f := body.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fieldOf[name] = f
	}
	if len(h.rules.fields) > maxHotMembers {
		return nil, fmt.Errorf("more than %d properties", maxHotMembers)
	}
	if len(fieldOf) != len(h.rules.fields) {
		return nil, fmt.Errorf("%s has %d fields, the schema %d properties", body, len(fieldOf), len(h.rules.fields))
	}
	for _, fr := range h.rules.fields {
		f, ok := fieldOf[fr.name]
		if !ok {
			return nil, fmt.Errorf("property %q has no field in %s", fr.name, body)
		}
		hf := hotField{index: f.Index[0]}
		typ := f.Type
		if typ.Kind() == reflect.Pointer {
			hf.pointer, typ = true, typ.Elem()
		}
		if hf.pointer == fr.required {
			return nil, fmt.Errorf("property %q: a required property needs a value field, an optional one a pointer", fr.name)
		}
		if !(fr.str != nil && typ.Kind() == reflect.String || fr.num != nil && typ.Kind() == reflect.Int64) {
			return nil, fmt.Errorf("property %q: only strings and int64 integers", fr.name)
		}
		h.fields = append(h.fields, hf)
	}
	return h, nil
}

// accept checks the path parameters (chi's keys and values, escaped when
// chi matched the escaped path: decoded by pathParam as the general path
// decodes them) and the body, and returns the decoded body (a pointer to
// the generated type), or nil when the request must take the general path.
// It accepts only bodies checkOneJSONValue passes: one object (scanFlat
// reads nothing else) of valid UTF-8 without duplicate member names.
func (h *hotOp) accept(keys, values []string, escaped bool, data []byte) any {
	for _, p := range h.params {
		i := slices.Index(keys, p.name)
		if i < 0 || i >= len(values) {
			return nil
		}
		v, err := pathParam(values[i], escaped)
		if err != nil || !p.rule.ok(v) {
			return nil
		}
	}
	var ms [maxHotMembers]member
	n, ok := scanFlat(data, &ms)
	if !ok {
		return nil
	}
	out := reflect.New(h.body)
	elem := out.Elem()
	var seen uint64
	for _, m := range ms[:n] {
		i := h.rules.field(string(m.name))
		if i < 0 {
			return nil // unknown member: the general path names it
		}
		if seen&(1<<i) != 0 {
			return nil // a duplicate: checkOneJSONValue refuses it
		}
		seen |= 1 << i
		rule, f := &h.rules.fields[i], h.fields[i]
		dst := elem.Field(f.index)
		if f.pointer {
			p := reflect.New(dst.Type().Elem())
			dst.Set(p)
			dst = p.Elem()
		}
		switch {
		case rule.str != nil:
			if !m.str {
				return nil
			}
			v := string(m.value)
			if !utf8.ValidString(v) || !rule.str.ok(v) {
				return nil
			}
			dst.SetString(v)
		default:
			if m.str {
				return nil
			}
			// Past 2^53 kin-openapi's float64 is not the number: the
			// general path judges it.
			v, err := strconv.ParseInt(string(m.value), 10, 64)
			if err != nil || v < -exactInt || v > exactInt || !rule.num.ok(v) {
				return nil
			}
			dst.SetInt(v)
		}
	}
	if h.rules.missing(seen) != "" {
		return nil
	}
	return out.Interface()
}
