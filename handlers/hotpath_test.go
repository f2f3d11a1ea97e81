package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/musterhq/muster/api"
)

// TestHotPathFollowsTheContract: the fast path is compiled from
// openapi.yaml, so a changed bound or pattern is followed, and a schema it
// cannot follow (a new keyword, property, type or media type) stops the
// server from starting instead of being skipped.
func TestHotPathFollowsTheContract(t *testing.T) {
	build := func(edit func(*openapi3.T)) (*contract, error) {
		spec, err := api.GetSpec()
		if err != nil {
			t.Fatal(err)
		}
		edit(spec)
		return newContract(spec, NewAuthenticator(nil), slog.New(slog.NewTextHandler(io.Discard, nil)), DefaultBodyReadTimeout)
	}
	body := func(spec *openapi3.T, op string) *openapi3.Schema {
		for _, item := range spec.Paths.Map() {
			for _, o := range item.Operations() {
				if o.OperationID == op {
					return o.RequestBody.Value.Content["application/json"].Schema.Value
				}
			}
		}
		t.Fatalf("no operation %s", op)
		return nil
	}
	prop := func(spec *openapi3.T, op, name string) *openapi3.Schema { return body(spec, op).Properties[name].Value }

	c, err := build(func(*openapi3.T) {})
	if err != nil {
		t.Fatal(err)
	}
	for op := range hotBodies {
		if o := findOp(c, op); o == nil || o.hot == nil {
			t.Fatalf("%s has no fast path", op)
		}
	}

	// Bounds and patterns are read from the contract.
	c, err = build(func(spec *openapi3.T) {
		prop(spec, "acquireLease", "wait_ms").Max = ptr(12345.0)
		prop(spec, "acquireLease", "session_id").Pattern = "^[0-9]{32}$"
	})
	if err != nil {
		t.Fatal(err)
	}
	h := findOp(c, "acquireLease").hot
	if f := h.rules.fields[h.rules.field("wait_ms")]; f.num.max != 12345 {
		t.Fatalf("wait_ms maximum not followed: %+v", f.num)
	}
	if f := h.rules.fields[h.rules.field("session_id")]; f.str.ok("0123456789abcdef0123456789abcdef") {
		t.Fatal("session_id pattern not followed")
	}

	refused := map[string]func(*openapi3.T){
		"enum":     func(s *openapi3.T) { prop(s, "acquireLease", "wait_ms").Enum = []any{0.0, 100.0} },
		"nullable": func(s *openapi3.T) { prop(s, "releaseLease", "fencing_token").Nullable = true },
		"exclusiveMinimum": func(s *openapi3.T) {
			prop(s, "extendLease", "ttl_ms").ExclusiveMin = openapi3.ExclusiveBound{Bool: ptr(true)}
		},
		"multipleOf":       func(s *openapi3.T) { prop(s, "extendLease", "ttl_ms").MultipleOf = ptr(10.0) },
		"string format":    func(s *openapi3.T) { prop(s, "acquireLease", "session_id").Format = "uuid" },
		"integer format":   func(s *openapi3.T) { prop(s, "acquireLease", "ttl_ms").Format = "int32" },
		"fractional bound": func(s *openapi3.T) { prop(s, "acquireLease", "ttl_ms").Min = ptr(0.5) },
		"huge bound":       func(s *openapi3.T) { prop(s, "acquireLease", "ttl_ms").Max = ptr(math.Pow(2, 60)) },
		"number type":      func(s *openapi3.T) { prop(s, "acquireLease", "ttl_ms").Type = &openapi3.Types{openapi3.TypeNumber} },
		"new property": func(s *openapi3.T) {
			body(s, "releaseLease").Properties["reason"] = openapi3.NewStringSchema().NewRef()
		},
		"open object":       func(s *openapi3.T) { body(s, "releaseLease").AdditionalProperties = openapi3.AdditionalProperties{} },
		"optional required": func(s *openapi3.T) { body(s, "releaseLease").Required = []string{"session_id"} },
		"\\u pattern":       func(s *openapi3.T) { prop(s, "acquireLease", "session_id").Pattern = `^[\u0030-\u0039]+$` },
		"oneOf": func(s *openapi3.T) {
			body(s, "acquireLease").OneOf = openapi3.SchemaRefs{openapi3.NewObjectSchema().NewRef()}
		},
		"second media type": func(s *openapi3.T) {
			for _, item := range s.Paths.Map() {
				if o := item.Post; o != nil && o.OperationID == "extendLease" {
					o.RequestBody.Value.Content["application/x-www-form-urlencoded"] = openapi3.NewMediaType()
				}
			}
		},
		"segment keyword": func(s *openapi3.T) { s.Components.Schemas["Segment"].Value.Format = "hostname" },
	}
	for what, edit := range refused {
		if _, err := build(edit); err == nil || !strings.Contains(err.Error(), "fast path") {
			t.Errorf("%s: the contract was accepted (%v)", what, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func findOp(c *contract, id string) *operation {
	for _, o := range c.ops {
		if o.route.Operation.OperationID == id {
			return o
		}
	}
	return nil
}

// TestLeaseFieldsAreTheEncoders: appendLease writes the fields of the
// generated api.Lease, no more and no fewer; a change to the contract's
// Lease fails here until the encoder follows.
func TestLeaseFieldsAreTheEncoders(t *testing.T) {
	want := []string{
		"AcquiredAt time.Time acquired_at",
		"ExpiresAfterRequestMs *int64 expires_after_request_ms,omitempty",
		"ExpiresAt time.Time expires_at",
		"FencingToken int64 fencing_token",
		"Outcome *api.LeaseOutcome outcome,omitempty",
		"Renewals int64 renewals",
		"Route string route",
	}
	var got []string
	typ := reflect.TypeFor[api.Lease]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		got = append(got, f.Name+" "+f.Type.String()+" "+f.Tag.Get("json"))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("api.Lease changed: update appendLease and this list\n got:  %q\n want: %q", got, want)
	}
}

// TestAppendLeaseIsEncodingJSON: the hand-written encoder writes what the
// generated response writes (encoding/json's Encoder), byte for byte, for
// random leases; where it cannot, it says so and encoding/json is used.
func TestAppendLeaseIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 6))
	routes := []string{"lease://acme/renderers/document-123", "lease://a/b/c", `lease://a<b>/&/"q"`, `lease://a\b/é/☃`,
		"lease://a/b/\u2028", "lease://a/b/\x7f", "lease://a/b/\xff", ""}
	zones := []*time.Location{time.UTC, time.FixedZone("p", 5*3600+30*60), time.FixedZone("s", -7*3600-17), time.FixedZone("n", -12*3600)}
	outcomes := []*api.LeaseOutcome{nil, ptr(api.LeaseOutcomeAcquired), ptr(api.LeaseOutcomeAlreadyHeld), ptr(api.LeaseOutcome("x<y"))}
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	fast := 0
	for i := 0; i < 20000; i++ {
		when := func() time.Time {
			sec := rng.Int64N(400 * 365 * 86400)
			if rng.IntN(50) == 0 {
				sec = rng.Int64N(1<<40) - 1<<39 // years outside 0..9999
			}
			nsec := rng.Int64N(1e9)
			if rng.IntN(3) == 0 {
				nsec = nsec / 1e6 * 1e6
			}
			return time.Unix(sec+1_700_000_000-200*365*86400, nsec).In(zones[rng.IntN(len(zones))])
		}
		l := api.Lease{AcquiredAt: when(), ExpiresAt: when(), FencingToken: rng.Int64() - rng.Int64(), Renewals: rng.Int64N(1 << 40),
			Outcome: outcomes[rng.IntN(len(outcomes))], Route: routes[rng.IntN(len(routes))]}
		var want bytes.Buffer
		err := json.NewEncoder(&want).Encode(l)
		got, ok := appendLease(nil, &l)
		if err != nil && ok {
			t.Fatalf("appendLease wrote %s, which encoding/json refuses: %v", got, err)
		}
		if ok {
			fast++
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("appendLease:\n got:  %s want: %s", got, want.Bytes())
			}
		}
		// The whole answer, encoding/json's fallback included.
		w := httptest.NewRecorder()
		writeLease(s, w, httptest.NewRequest("POST", "/", nil), &l)
		switch {
		case err != nil && w.Code != 500:
			t.Fatalf("writeLease answered %d for a lease encoding/json refuses", w.Code)
		case err == nil && (w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || !bytes.Equal(w.Body.Bytes(), want.Bytes())):
			t.Fatalf("writeLease: %d %q %s, want %s", w.Code, w.Header().Get("Content-Type"), w.Body, want.Bytes())
		}
	}
	if fast < 2000 {
		t.Fatalf("only %d of 20000 leases were encoded by hand", fast)
	}
}

// TestKnownPatternsAreTheRegexps: each hand-written matcher answers as Go's
// regexp of its pattern (which is kin-openapi's), on random strings built
// around the characters the patterns name.
func TestKnownPatternsAreTheRegexps(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Segment", "SessionId", "Route"} {
		if _, ok := knownPatterns[spec.Components.Schemas[name].Value.Pattern]; !ok {
			t.Errorf("the pattern of %s is not matched by hand: the fast path uses regexp for it", name)
		}
	}
	alphabet := []string{"lease://", "lease:/", "a", "f", "g", "0", "9", "A", "/", "*", "\x00", "\x1f", " ", "~", "\x7f", "\u0080", "\u009f", "\u00a0", "é", "\u2028", "😀", "\xff", "\xc2", "\ufffd", "%", ".", ".."}
	rng := rand.New(rand.NewPCG(7, 7))
	for pattern, match := range knownPatterns {
		re := regexp.MustCompile(pattern)
		check := func(v string) {
			if got, want := match(v), re.MatchString(v); got != want {
				t.Fatalf("%s on %q: %v, regexp says %v", pattern, v, got, want)
			}
		}
		for _, v := range []string{"", "0123456789abcdef0123456789abcdef", ".", "..", "...", ".a", "..a", "a.", ".*", "./", "..\xff", ".\x00"} {
			check(v)
		}
		for i := 0; i < 50000; i++ {
			var b strings.Builder
			n := rng.IntN(40)
			if rng.IntN(2) == 0 {
				n = 32
			}
			if rng.IntN(3) == 0 {
				b.WriteString("lease://")
			}
			for range n {
				if rng.IntN(3) == 0 {
					b.WriteString(alphabet[rng.IntN(len(alphabet))])
				} else {
					b.WriteByte("0123456789abcdef"[rng.IntN(16)])
				}
			}
			check(b.String())
		}
	}
}

// FuzzKnownPatterns is TestKnownPatternsAreTheRegexps on fuzzed strings.
func FuzzKnownPatterns(f *testing.F) {
	for _, s := range []string{"", "acme", "a/b", "\x80", "0123456789abcdef0123456789abcdef", "lease://a/b/c", "lease://", "lease://\x85", ".", "..", "..."} {
		f.Add(s)
	}
	res := map[string]*regexp.Regexp{}
	for p := range knownPatterns {
		res[p] = regexp.MustCompile(p)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for p, match := range knownPatterns {
			if got, want := match(v), res[p].MatchString(v); got != want {
				t.Fatalf("%s on %q: %v, regexp says %v", p, v, got, want)
			}
		}
	})
}
