package handlers

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/musterhq/muster/api"
)

// The hot path. The lease mutations carry a flat JSON object and three
// path segments; validating them with kin-openapi costs more than the lease
// itself. For these operations the contract middleware first tries a check
// compiled from the same openapi.yaml at start-up: it ACCEPTS only requests
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

// exactInt is the largest magnitude a JSON integer may have for the fast
// path: kin-openapi judges numbers as float64, exact up to 2^53.
const exactInt = 1 << 53

// maxHotMembers bounds the members of a body the fast path reads.
const maxHotMembers = 8

// stringRule is a compiled string schema: lengths in characters, as
// kin-openapi counts them, and the pattern.
type stringRule struct {
	minLen, maxLen int // maxLen < 0: none
	match          func(string) bool
}

func (s *stringRule) ok(v string) bool {
	if s.minLen > 0 || s.maxLen >= 0 {
		n := utf8.RuneCountInString(v)
		if n < s.minLen || s.maxLen >= 0 && n > s.maxLen {
			return false
		}
	}
	return s.match == nil || s.match(v)
}

// knownPatterns are hand-written matchers of the contract's patterns on the
// hot path, each equal to Go's regexp of the same pattern
// (TestKnownPatternsAreTheRegexps); any other pattern is matched by regexp.
var knownPatterns = map[string]func(string) bool{
	`^[^/*\x00-\x1f\x7f-\x9f]+$`: func(v string) bool { // Segment
		for _, r := range v { // an invalid byte is U+FFFD, as for regexp
			if r == '/' || r == '*' || r <= 0x1f || r >= 0x7f && r <= 0x9f {
				return false
			}
		}
		return v != ""
	},
	`^[0-9a-f]{32}$`: func(v string) bool { // SessionId
		if len(v) != 32 {
			return false
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
		return true
	},
}

// intRule is a compiled integer schema (format int64 or none).
type intRule struct {
	min, max int64 // inclusive, within ±2^53
}

// hotField is one property of a hot body and the struct field it fills.
type hotField struct {
	name     string
	required bool
	str      *stringRule // exactly one of str and num
	num      *intRule
	index    int  // struct field index
	pointer  bool // the struct field is a pointer (optional member)
}

// hotParam is one path parameter of a hot operation.
type hotParam struct {
	name string
	rule *stringRule
}

// hotOp is the compiled fast path of one operation.
type hotOp struct {
	params []hotParam
	fields []hotField // sorted by name
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
	s := mt.Schema.Value
	if err := onlyKeywords(s, "type", "additionalProperties", "required", "properties", "description", "example"); err != nil {
		return nil, err
	}
	if !s.Type.Is(openapi3.TypeObject) || s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has || s.AdditionalProperties.Schema != nil {
		return nil, fmt.Errorf("the body must be an object with additionalProperties: false")
	}
	fieldOf := map[string]reflect.StructField{}
	for i := range body.NumField() {
		f := body.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fieldOf[name] = f
	}
	if len(s.Properties) > maxHotMembers {
		return nil, fmt.Errorf("more than %d properties", maxHotMembers)
	}
	if len(fieldOf) != len(s.Properties) {
		return nil, fmt.Errorf("%s has %d fields, the schema %d properties", body, len(fieldOf), len(s.Properties))
	}
	for name, ref := range s.Properties {
		f, ok := fieldOf[name]
		if !ok {
			return nil, fmt.Errorf("property %q has no field in %s", name, body)
		}
		hf := hotField{name: name, required: slices.Contains(s.Required, name), index: f.Index[0]}
		typ := f.Type
		if typ.Kind() == reflect.Pointer {
			hf.pointer, typ = true, typ.Elem()
		}
		if hf.pointer == hf.required {
			return nil, fmt.Errorf("property %q: a required property needs a value field, an optional one a pointer", name)
		}
		ps := ref.Value
		var err error
		switch {
		case ps.Type.Is(openapi3.TypeString) && typ.Kind() == reflect.String:
			hf.str, err = compileString(ps)
		case ps.Type.Is(openapi3.TypeInteger) && typ.Kind() == reflect.Int64:
			hf.num, err = compileInt(ps)
		default:
			err = fmt.Errorf("only strings and int64 integers")
		}
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		h.fields = append(h.fields, hf)
	}
	for _, name := range s.Required {
		if s.Properties[name] == nil {
			return nil, fmt.Errorf("required %q is not a property", name)
		}
	}
	slices.SortFunc(h.fields, func(a, b hotField) int { return strings.Compare(a.name, b.name) })
	return h, nil
}

// onlyKeywords fails when s sets a keyword outside allowed.
func onlyKeywords(s *openapi3.Schema, allowed ...string) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("keyword %q is not implemented by the fast path", k)
		}
	}
	return nil
}

func compileString(s *openapi3.Schema) (*stringRule, error) {
	if err := onlyKeywords(s, "type", "minLength", "maxLength", "pattern", "description", "example"); err != nil {
		return nil, err
	}
	if !s.Type.Is(openapi3.TypeString) {
		return nil, fmt.Errorf("only string schemas")
	}
	r := &stringRule{minLen: int(s.MinLength), maxLen: -1}
	if s.MaxLength != nil {
		r.maxLen = int(*s.MaxLength)
	}
	if s.Pattern != "" {
		// kin-openapi rewrites \uXXXX escapes before compiling; without
		// them its pattern is exactly this one.
		if strings.Contains(s.Pattern, `\u`) {
			return nil, fmt.Errorf("pattern with \\u escapes")
		}
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return nil, err
		}
		r.match = re.MatchString
		if m, ok := knownPatterns[s.Pattern]; ok {
			r.match = m
		}
	}
	return r, nil
}

func compileInt(s *openapi3.Schema) (*intRule, error) {
	if err := onlyKeywords(s, "type", "format", "minimum", "maximum", "default", "description", "example"); err != nil {
		return nil, err
	}
	if s.Format != "" && s.Format != "int64" {
		return nil, fmt.Errorf("integer format %q", s.Format)
	}
	r := &intRule{min: -exactInt, max: exactInt}
	bound := func(p *float64, def int64) (int64, error) {
		if p == nil {
			return def, nil
		}
		if *p != math.Trunc(*p) || math.Abs(*p) > exactInt {
			return 0, fmt.Errorf("bound %v is not an integer within ±2^53", *p)
		}
		return int64(*p), nil
	}
	var err error
	if r.min, err = bound(s.Min, r.min); err != nil {
		return nil, err
	}
	if r.max, err = bound(s.Max, r.max); err != nil {
		return nil, err
	}
	return r, nil
}

// accept checks the path parameters (chi's keys and values, unescaped
// here as the general path unescapes them) and the body, and returns the
// decoded body (a pointer to the generated type), or nil when the request
// must take the general path. It accepts only bodies checkOneJSONValue
// passes: one object (scanFlat reads nothing else) of valid UTF-8 without
// duplicate member names.
func (h *hotOp) accept(keys, values []string, data []byte) any {
	for _, p := range h.params {
		i := slices.Index(keys, p.name)
		if i < 0 || i >= len(values) {
			return nil
		}
		v := values[i]
		if strings.IndexByte(v, '%') >= 0 {
			var err error
			if v, err = url.PathUnescape(v); err != nil {
				return nil
			}
		}
		if !p.rule.ok(v) {
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
		i := h.field(m.name)
		if i < 0 {
			return nil // unknown member: the general path names it
		}
		if seen&(1<<i) != 0 {
			return nil // a duplicate: checkOneJSONValue refuses it
		}
		seen |= 1 << i
		f := &h.fields[i]
		dst := elem.Field(f.index)
		if f.pointer {
			p := reflect.New(dst.Type().Elem())
			dst.Set(p)
			dst = p.Elem()
		}
		switch {
		case f.str != nil:
			if !m.str {
				return nil
			}
			v := string(m.value)
			if !utf8.ValidString(v) || !f.str.ok(v) {
				return nil
			}
			dst.SetString(v)
		default:
			if m.str {
				return nil
			}
			v, err := strconv.ParseInt(string(m.value), 10, 64)
			if err != nil || v < f.num.min || v > f.num.max {
				return nil
			}
			dst.SetInt(v)
		}
	}
	for i := range h.fields {
		if h.fields[i].required && seen&(1<<i) == 0 {
			return nil
		}
	}
	return out.Interface()
}

func (h *hotOp) field(name []byte) int {
	for i := range h.fields {
		if h.fields[i].name == string(name) {
			return i
		}
	}
	return -1
}
