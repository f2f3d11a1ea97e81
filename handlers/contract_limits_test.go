package handlers

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore"
)

// TestContractLimitsAreTheServers: every bound openapi.yaml states is the
// server's own constant, so generated clients and schema-driven fuzzers
// refuse what the server refuses, no more and no less.
func TestContractLimitsAreTheServers(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	schema := func(name string) *openapi3.Schema { return spec.Components.Schemas[name].Value }
	param := func(name string) *openapi3.Schema { return spec.Components.Parameters[name].Value.Schema.Value }
	opParam := func(path, method, in, name string) *openapi3.Schema {
		op := spec.Paths.Find(path).GetOperation(method)
		return op.Parameters.GetByInAndName(in, name).Schema.Value
	}
	prop := func(s *openapi3.Schema, name string) *openapi3.Schema { return s.Properties[name].Value }
	ms := func(d time.Duration) float64 { return float64(d / time.Millisecond) }
	maxLen := func(s *openapi3.Schema) int {
		if s.MaxLength == nil {
			return -1
		}
		return int(*s.MaxLength)
	}
	num := func(p *float64) float64 {
		if p == nil {
			return -1
		}
		return *p
	}

	ints := []struct {
		what      string
		got, want int
	}{
		{"Segment maxLength", maxLen(schema("Segment")), muster.MaxSegmentLen},
		{"Selector maxLength", maxLen(schema("Selector")), core.MaxSelectorLen},
		{"OwnerId maxLength", maxLen(schema("OwnerId")), core.MaxOwnerIDLen},
		{"SessionId maxLength", maxLen(schema("SessionId")), 2 * len(core.SessionID{})},
		{"SessionId minLength", int(schema("SessionId").MinLength), 2 * len(core.SessionID{})},
		{"Cursor maxLength", maxLen(param("Cursor")), core.MaxCursorLen},
		{"Root maxLength", maxLen(param("Root")), muster.MaxFleetRootLen},
		{"SpecName maxLength", maxLen(param("SpecName")), fleetstore.MaxNameBytes},
		{"RegisterRequest.kind maxLength", maxLen(prop(schema("RegisterRequest"), "kind")), fleetstore.MaxKindBytes},
		{"watch selector maxItems", int(*opParam("/v1/leases/watch", "GET", "query", "selector").MaxItems), core.MaxSelectorsPerStream},
		{"listLeases limit maximum", int(num(opParam("/v1/leases", "GET", "query", "limit").Max)), core.MaxPageLimit},
		{"listLeases limit default", int(opParam("/v1/leases", "GET", "query", "limit").Default.(float64)), core.DefaultPageLimit},
		{"listSpecs limit maximum", int(num(opParam("/v1/fleets/{root}/specs", "GET", "query", "limit").Max)), fleetstore.MaxPageSize},
		{"listSpecs limit default", int(opParam("/v1/fleets/{root}/specs", "GET", "query", "limit").Default.(float64)), fleetstore.DefaultPageSize},
		{"fleetGap limit maximum", int(num(opParam("/v1/fleets/{root}/gap", "GET", "query", "limit").Max)), core.MaxGapPage},
		{"fleetGap limit default", int(opParam("/v1/fleets/{root}/gap", "GET", "query", "limit").Default.(float64)), core.DefaultGapPage},
		{"session ttl_ms minimum", int(num(prop(schema("CreateSessionRequest"), "ttl_ms").Min)), int(ms(core.MinSessionTTL))},
		{"session ttl_ms maximum", int(num(prop(schema("CreateSessionRequest"), "ttl_ms").Max)), int(ms(core.MaxSessionTTL))},
		{"LeaseTTL minimum", int(num(schema("LeaseTTL").Min)), int(ms(core.MinLeaseTTL))},
		{"LeaseTTL maximum", int(num(schema("LeaseTTL").Max)), int(ms(core.MaxLeaseTTL))},
		{"wait_ms maximum", int(num(prop(schema("AcquireRequest"), "wait_ms").Max)), int(ms(core.MaxWait))},
		{"BatchRequest.ops maxItems", int(*prop(schema("BatchRequest"), "ops").MaxItems), core.MaxBatchOps},
		{"Route maxLength", maxLen(schema("Route")), len(core.LeaseScheme) + 3*muster.MaxSegmentLen + 2},
	}
	for _, c := range ints {
		if c.got != c.want {
			t.Errorf("openapi.yaml %s = %d, the server's limit is %d", c.what, c.got, c.want)
		}
	}

	// The numbers inside the Root pattern are the root's bounds as well.
	rootPattern := fmt.Sprintf(`^[a-z0-9_-]{1,%d}(/[a-z0-9_-]{1,%d}){0,%d}$`,
		muster.MaxSegmentLen, muster.MaxSegmentLen, muster.MaxFleetDepth-1)
	if got := param("Root").Pattern; got != rootPattern {
		t.Errorf("openapi.yaml Root pattern = %s, the server's bounds make %s", got, rootPattern)
	}
}

// TestContractPatternsAreTheServers: each pattern of openapi.yaml accepts
// exactly the samples the server's own check accepts (ASCII samples within
// maxLength, where characters and bytes agree).
func TestContractPatternsAreTheServers(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	// kin-openapi reads \uXXXX (ECMA-262) as Go's \x{XXXX}.
	unicodeEscape := regexp.MustCompile(`\\u([0-9A-F]{4})`)
	contract := func(s *openapi3.Schema) func(string) bool {
		re := regexp.MustCompile(unicodeEscape.ReplaceAllString(s.Pattern, `\x{$1}`))
		return func(v string) bool {
			return re.MatchString(v) && len(v) >= int(s.MinLength) && (s.MaxLength == nil || len(v) <= int(*s.MaxLength))
		}
	}
	ok := func(err error) bool { return err == nil }
	seg128, seg129 := strings.Repeat("a", 128), strings.Repeat("a", 129)
	cases := []struct {
		name    string
		schema  *openapi3.Schema
		server  func(string) bool
		samples []string
	}{
		{"Segment", spec.Components.Schemas["Segment"].Value,
			func(v string) bool { _, err := core.NewRoute(v, "b", "c"); return ok(err) },
			[]string{"acme", "a b", "doc-1.pdf", "é", "日本", seg128, seg129, "", "*", "**", "a*", "a/b", "a\x00", "a\x1f", "a\x7f", "a\u0085", "a\u009f", "a\u00a0", "%2F",
				".", "..", "...", ".a", "..a", "a.", "a..", ".*", "./", "%2e%2e"}},
		{"Selector", spec.Components.Schemas["Selector"].Value,
			func(v string) bool { _, err := core.ParseSelector(v); return ok(err) },
			// The pattern states the scheme and the characters; the
			// segment structure is the grammar's (docs/routing.md).
			[]string{"lease://a/b/c", "lease://**", "lease://a/*/*", "lease://a\x01/b/c", "acme/b/c", "LEASE://a/b/c", "lease:/a/b/c", "http://a/b/c", "lease://a\u0085/b/c"}},
		{"Root", spec.Components.Parameters["Root"].Value.Schema.Value,
			func(v string) bool { _, err := muster.ParseFleetRoot(v); return ok(err) },
			[]string{"monitors", "inst-7/monitors", seg128, seg129, "x/" + seg129, seg128 + "/" + strings.Repeat("b", 126), seg128 + "/" + strings.Repeat("b", 127),
				"a/b/c/d/e/f/g/h", "a/b/c/d/e/f/g/h/i", "", "/", "a//b", "/a", "a/", "Monitors", "a b", "a/../b", "é"}},
		{"SpecName", spec.Components.Parameters["SpecName"].Value.Schema.Value,
			func(v string) bool { return ok(fleetstore.CheckName(v)) },
			[]string{"repo-1", "a", strings.Repeat("n", 84), strings.Repeat("n", 85), "Repo-1", "", "a/b", "a.b", "é"}},
		{"SessionId", spec.Components.Schemas["SessionId"].Value,
			func(v string) bool { _, err := core.ParseSessionID(v); return ok(err) },
			[]string{strings.Repeat("0a", 16), strings.Repeat("f", 32), strings.Repeat("F", 32), strings.Repeat("a", 31), strings.Repeat("a", 33),
				"", strings.Repeat("g", 32), strings.Repeat("a", 31) + " ", strings.Repeat("a", 31) + "\n"}},
		{"OwnerId", spec.Components.Schemas["OwnerId"].Value,
			func(v string) bool { return ok(core.CheckOwnerID(v)) },
			[]string{"worker-1", "a b", "wörker 日本", "x\u00a0y", "\U0001f680", strings.Repeat("o", 512), strings.Repeat("o", 513), "",
				"\x1b[2J", "a\x00", "a\nb", "a\tb", "a\x7f", "a\u0085", "a\u009f", "a\u00a0", "a\u061c", "a\u061b", "a\u200d", "a\u200e", "a\u200f", "a\u2010",
				"a\u2029", "a\u202a", "a\u202e", "a\u202f", "a\u2065", "a\u2066", "a\u2069", "a\u206a"}},
		{"kind", spec.Components.Schemas["RegisterRequest"].Value.Properties["kind"].Value,
			func(v string) bool { return ok(fleetstore.CheckKind(v)) },
			[]string{"repo", strings.Repeat("k", 64), strings.Repeat("k", 65), "Repo", "", "a-b_c", "a/b"}},
	}
	for _, c := range cases {
		accepts := contract(c.schema)
		for _, v := range c.samples {
			if got, want := accepts(v), c.server(v); got != want {
				// The selector pattern is deliberately coarser than the
				// grammar: it may accept what the grammar refuses, never
				// the other way round.
				if c.name == "Selector" && got && !want {
					continue
				}
				t.Errorf("%s %q: the contract accepts it: %v, the server: %v", c.name, v, got, want)
			}
		}
	}
}
