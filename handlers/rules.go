package handlers

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
)

// Rules compiled from openapi.yaml. Two hand-written readers check bodies
// against the contract instead of kin-openapi: the fast path of the lease
// mutations (hotbody.go) and the batch's streaming decoder
// (batch_decode.go). Both read the same rules, compiled here once per
// schema: lengths, patterns, enums, bounds, required members and
// `additionalProperties: false`. compileValue fails on any keyword or shape
// it does not implement, so a schema change the rules cannot follow stops
// the server from starting instead of being skipped; each reader then
// checks that the rules fit what it decodes. Each reader is held to
// kin-openapi by its own differential test and fuzz target.

// stringRule is a compiled string schema: lengths in characters, as
// kin-openapi counts them, the pattern and the enum.
type stringRule struct {
	minLen, maxLen int // maxLen < 0: none
	match          func(string) bool
	enum           []string // nil: any value
}

func (s *stringRule) ok(v string) bool { return s.okCount(v, -1) }

// okCount is ok for v of n characters (n < 0: count them).
func (s *stringRule) okCount(v string, n int) bool {
	if s.minLen > 0 || s.maxLen >= 0 {
		if n < 0 {
			n = utf8.RuneCountInString(v)
		}
		if n < s.minLen || s.maxLen >= 0 && n > s.maxLen {
			return false
		}
	}
	if s.enum != nil && !slices.Contains(s.enum, v) {
		return false
	}
	return s.match == nil || s.match(v)
}

// intRule is a compiled integer schema (format int64 or none): inclusive
// bounds, the int64 extremes where the schema sets none.
type intRule struct {
	min, max int64
}

func (r *intRule) ok(v int64) bool { return v >= r.min && v <= r.max }

// listRule is a compiled array schema whose items are objects.
type listRule struct {
	minItems, maxItems int // maxItems < 0: none
	items              *objectRule
}

// valueRule is a compiled schema: exactly one of its rules is set.
type valueRule struct {
	str  *stringRule
	num  *intRule
	list *listRule
}

// fieldRule is one property of an object schema.
type fieldRule struct {
	name     string
	required bool
	valueRule
}

// objectRule is a compiled object schema with `additionalProperties:
// false`: a member it does not name is refused. A reader marks the members
// it saw in a bit set of field indexes (seen).
type objectRule struct {
	fields   []fieldRule // sorted by name
	required []int       // field indexes, in the schema's order
}

// field is the index of the property name, or -1: not a property.
func (o *objectRule) field(name string) int {
	for i := range o.fields {
		if o.fields[i].name == name {
			return i
		}
	}
	return -1
}

// missing is the first required property, in the schema's order, that is
// not in seen; "" when none is missing.
func (o *objectRule) missing(seen uint64) string {
	for _, i := range o.required {
		if seen&(1<<i) == 0 {
			return o.fields[i].name
		}
	}
	return ""
}

// exactInt is the largest magnitude a bound of an integer schema may have:
// kin-openapi judges numbers as float64, exact up to 2^53.
const exactInt = 1 << 53

// maxRuleFields bounds the properties of an object rule: seen is a uint64.
const maxRuleFields = 64

// compileValue compiles a string, integer, array-of-objects or object
// schema.
func compileValue(s *openapi3.Schema) (valueRule, error) {
	var v valueRule
	var err error
	switch {
	case s.Type.Is(openapi3.TypeString):
		v.str, err = compileString(s)
	case s.Type.Is(openapi3.TypeInteger):
		v.num, err = compileInt(s)
	case s.Type.Is(openapi3.TypeArray):
		v.list, err = compileList(s)
	default:
		err = fmt.Errorf("only string, integer and array schemas")
	}
	return v, err
}

// compileObject compiles an object schema with `additionalProperties:
// false`.
func compileObject(s *openapi3.Schema) (*objectRule, error) {
	if err := onlyKeywords(s, "type", "additionalProperties", "required", "properties", "description", "example"); err != nil {
		return nil, err
	}
	if !s.Type.Is(openapi3.TypeObject) || s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has || s.AdditionalProperties.Schema != nil {
		return nil, fmt.Errorf("only objects with additionalProperties: false")
	}
	if len(s.Properties) > maxRuleFields {
		return nil, fmt.Errorf("more than %d properties", maxRuleFields)
	}
	o := &objectRule{}
	for name, ref := range s.Properties {
		v, err := compileValue(ref.Value)
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", name, err)
		}
		o.fields = append(o.fields, fieldRule{name: name, required: slices.Contains(s.Required, name), valueRule: v})
	}
	slices.SortFunc(o.fields, func(a, b fieldRule) int { return strings.Compare(a.name, b.name) })
	for _, name := range s.Required {
		i := o.field(name)
		if i < 0 {
			return nil, fmt.Errorf("required %q is not a property", name)
		}
		if !slices.Contains(o.required, i) {
			o.required = append(o.required, i)
		}
	}
	return o, nil
}

func compileList(s *openapi3.Schema) (*listRule, error) {
	if err := onlyKeywords(s, "type", "minItems", "maxItems", "items", "description", "example"); err != nil {
		return nil, err
	}
	if s.Items == nil || s.Items.Value == nil {
		return nil, fmt.Errorf("an array needs items")
	}
	items, err := compileObject(s.Items.Value)
	if err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	l := &listRule{minItems: int(s.MinItems), maxItems: -1, items: items}
	if s.MaxItems != nil {
		l.maxItems = int(*s.MaxItems)
	}
	return l, nil
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
			return fmt.Errorf("keyword %q is not implemented by the compiled rules (handlers/rules.go)", k)
		}
	}
	return nil
}

func compileString(s *openapi3.Schema) (*stringRule, error) {
	if err := onlyKeywords(s, "type", "minLength", "maxLength", "pattern", "enum", "description", "example"); err != nil {
		return nil, err
	}
	if !s.Type.Is(openapi3.TypeString) {
		return nil, fmt.Errorf("only string schemas")
	}
	r := &stringRule{minLen: int(s.MinLength), maxLen: -1}
	if s.MaxLength != nil {
		r.maxLen = int(*s.MaxLength)
	}
	if s.Enum != nil {
		r.enum = []string{}
		for _, e := range s.Enum {
			v, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("enum value %v is not a string", e)
			}
			r.enum = append(r.enum, v)
		}
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
	r := &intRule{min: math.MinInt64, max: math.MaxInt64}
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

// knownPatterns are hand-written matchers of the contract's patterns, each
// equal to Go's regexp of the same pattern (TestKnownPatternsAreTheRegexps,
// FuzzKnownPatterns); any other pattern is matched by regexp.
var knownPatterns = map[string]func(string) bool{
	`^([^/*.\x00-\x1f\x7f-\x9f]|\.[^/*.\x00-\x1f\x7f-\x9f]|\.\.[^/*\x00-\x1f\x7f-\x9f])[^/*\x00-\x1f\x7f-\x9f]*$`: func(v string) bool { // Segment
		for _, r := range v { // an invalid byte is U+FFFD, as for regexp
			if r == '/' || r == '*' || isControl(r) {
				return false
			}
		}
		return v != "" && v != "." && v != ".."
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
	`^lease://[^\x00-\x1f\x7f-\x9f]+$`: func(v string) bool { // Route
		rest, ok := strings.CutPrefix(v, "lease://")
		if !ok || rest == "" {
			return false
		}
		for _, r := range rest {
			if isControl(r) {
				return false
			}
		}
		return true
	},
}

// isControl reports the C0 and C1 controls and DEL: [\x00-\x1f\x7f-\x9f].
func isControl(r rune) bool { return r <= 0x1f || r >= 0x7f && r <= 0x9f }
