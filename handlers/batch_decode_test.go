package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
)

// contractVerdict is what the generic path answers for a batch body:
// bufferBody's JSON rules, kin-openapi's validation against the embedded
// contract, then the generated (strict) decoder.
func contractVerdict(t testing.TB, data []byte) (api.BatchRequest, error) {
	var req api.BatchRequest
	if len(data) > 0 {
		if err := checkOneJSONValue(data); err != nil {
			return req, err
		}
	}
	route := batchRoute(t)
	hr := httptest.NewRequest("POST", "/v1/leases/batch", bytes.NewReader(data))
	hr.Header.Set("Content-Type", "application/json")
	in := &openapi3filter.RequestValidationInput{Request: hr, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil }, SkipSettingDefaults: true}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return req, muster.Errorf(muster.CodeInvalidRequest, "kin-openapi: %v", err)
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return req, muster.Errorf(muster.CodeInvalidRequest, "the request body does not match its schema")
	}
	return req, nil
}

var batchRouteOnce struct {
	sync.Once
	route *routers.Route
	rules *batchRules
}

func batchRoute(t testing.TB) *routers.Route {
	batchRouteOnce.Do(func() {
		spec, err := api.GetSpec()
		if err != nil {
			t.Fatal(err)
		}
		spec.Servers = nil
		item := spec.Paths.Find("/v1/leases/batch")
		batchRouteOnce.route = &routers.Route{Spec: spec, Path: "/v1/leases/batch", PathItem: item, Method: "POST", Operation: item.Post}
		if batchRouteOnce.rules, err = loadBatchRules(spec); err != nil {
			t.Fatal(err)
		}
	})
	return batchRouteOnce.route
}

// checkSameVerdict holds decodeBatch to the generic path: both accept with
// the same request, or both refuse with invalid_request.
func checkSameVerdict(t *testing.T, data []byte) {
	t.Helper()
	wantReq, werr := contractVerdict(t, data)
	want := batchBody{Session: wantReq.SessionId, Ops: wireOps(wantReq.Ops)}
	got, gerr := decodeBatch(data, batchRouteOnce.rules)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("body %q: decodeBatch says %v, the contract says %v", data, gerr, werr)
	case werr == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("body %q: decodeBatch read %+v, the generated decoder %+v", data, got, want)
	case werr != nil && (muster.ErrorCode(gerr) != muster.CodeInvalidRequest || muster.ErrorCode(werr) != muster.CodeInvalidRequest):
		t.Fatalf("body %q: codes %v / %v", data, gerr, werr)
	}
}

var batchSeeds = func() []string {
	sess := `"session_id":"0123456789abcdef0123456789abcdef"`
	out := []string{
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000}]}`,
		`{"ops":[{"op":"release","route":"lease://a/b/c","fencing_token":1},{"op":"extend","route":"lease://é/b/c","fencing_token":9,"ttl_ms":100}],` + sess + `}`,
		`{` + sess + `}`, `{"ops":[]}`, `{` + sess + `,"ops":[]}`, `{` + sess + `,"ops":null}`, `{` + sess + `,"ops":{}}`,
		`{` + sess + `,"ops":[null]}`, `{` + sess + `,"ops":[{}]}`, `{` + sess + `,"ops":[{"op":"acquire"}]}`,
		`{` + sess + `,"ops":[{"route":"lease://a/b/c"}]}`, `{` + sess + `,"ops":[{"op":"nap","route":"lease://a/b/c"}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":99}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":600001}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000.0}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1e3}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":"1000"}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":null}]}`,
		`{` + sess + `,"ops":[{"op":"release","route":"lease://a/b/c","fencing_token":0}]}`,
		`{` + sess + `,"ops":[{"op":"release","route":"lease://a/b/c","fencing_token":9223372036854775808}]}`,
		`{` + sess + `,"ops":[{"op":"release","route":"lease://a/b/c","fencing_token":-1}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease:/a/b/c","ttl_ms":1000}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://","ttl_ms":1000}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c\u0085","ttl_ms":1000}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c\t","ttl_ms":1000}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/*/c","ttl_ms":1000}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000,"wait_ms":0}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000,"Route":"x"}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000}],"extra":1}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000}]} {}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000,"ttl_ms":2000}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/\ud800","ttl_ms":1000}]}`,
		`{"session_id":"0123456789ABCDEF0123456789abcdef","ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000}]}`,
		`{"session_id":"0123456789abcdef","ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000}]}`,
		`{"session_id":7,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000}]}`,
		`{"session\u005fid":"0123456789abcdef0123456789abcdef","ops":[{"\u006fp":"acquire","route":"lease://a/b/c","ttl_ms":1000}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000,"\u006fp":"release"}]}`,
		`[]`, `null`, `"x"`, `{`, ``, ` `,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://` + strings.Repeat("é", 386) + `","ttl_ms":1000}]}`,
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://` + strings.Repeat("é", 387) + `","ttl_ms":1000}]}`,
	}
	var many []string
	for i := 0; i < 257; i++ {
		many = append(many, fmt.Sprintf(`{"op":"acquire","route":"lease://a/b/c%d","ttl_ms":1000}`, i))
	}
	out = append(out, `{`+sess+`,"ops":[`+strings.Join(many[:256], ",")+`]}`, `{`+sess+`,"ops":[`+strings.Join(many, ",")+`]}`)
	return out
}()

func TestDecodeBatchMatchesContract(t *testing.T) {
	batchRoute(t)
	for i, s := range batchSeeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkSameVerdict(t, []byte(s)) })
	}
}

// FuzzDecodeBatch: on any body, decodeBatch accepts exactly what the
// generic path (kin-openapi, then the generated decoder) accepts, and reads
// the same request.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range batchSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		batchRoute(t)
		checkSameVerdict(t, data)
	})
}

// TestBatchRulesFollowTheContract: decodeBatch's rules are compiled from
// openapi.yaml (rules.go), so a changed bound, pattern or enum is
// followed, and a schema they cannot follow (a new keyword, member or
// type, an operation kind the broker does not know) stops the server from
// starting instead of being skipped.
func TestBatchRulesFollowTheContract(t *testing.T) {
	load := func(edit func(sc openapi3.Schemas)) (*batchRules, error) {
		spec, err := api.GetSpec()
		if err != nil {
			t.Fatal(err)
		}
		edit(spec.Components.Schemas)
		return loadBatchRules(spec)
	}
	op := func(sc openapi3.Schemas) *openapi3.Schema { return sc["BatchOp"].Value }
	r, err := load(func(sc openapi3.Schemas) {
		sc["LeaseTTL"].Value.Max = ptr(12345.0)
		sc["Route"].Value.Pattern = `^lease://x/`
		sc["BatchOpKind"].Value.Enum = []any{"acquire", "release"}
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.ttl.max != 12345 || r.route.ok("lease://a/b/c") || !r.route.ok("lease://x/b/c") || r.kind.ok("extend") || !r.kind.ok("release") {
		t.Fatalf("the changed contract was not followed: ttl %+v, route, kind %v", r.ttl, r.kind.enum)
	}
	refused := map[string]func(openapi3.Schemas){
		"integer enum":      func(sc openapi3.Schemas) { sc["LeaseTTL"].Value.Enum = []any{100.0} },
		"nullable":          func(sc openapi3.Schemas) { sc["FencingToken"].Value.Nullable = true },
		"string format":     func(sc openapi3.Schemas) { sc["Route"].Value.Format = "uri" },
		"unknown kind":      func(sc openapi3.Schemas) { sc["BatchOpKind"].Value.Enum = []any{"acquire", "nap"} },
		"kinds not an enum": func(sc openapi3.Schemas) { sc["BatchOpKind"].Value.Enum = nil },
		"new op member":     func(sc openapi3.Schemas) { op(sc).Properties["wait_ms"] = sc["LeaseTTL"] },
		"new body member": func(sc openapi3.Schemas) {
			sc["BatchRequest"].Value.Properties["note"] = openapi3.NewStringSchema().NewRef()
		},
		"open op":       func(sc openapi3.Schemas) { op(sc).AdditionalProperties = openapi3.AdditionalProperties{} },
		"route integer": func(sc openapi3.Schemas) { op(sc).Properties["route"] = sc["LeaseTTL"] },
		"more ops than the core": func(sc openapi3.Schemas) {
			sc["BatchRequest"].Value.Properties["ops"].Value.MaxItems = ptr(uint64(1000))
		},
		"uniqueItems": func(sc openapi3.Schemas) { sc["BatchRequest"].Value.Properties["ops"].Value.UniqueItems = true },
		"oneOf":       func(sc openapi3.Schemas) { op(sc).OneOf = openapi3.SchemaRefs{openapi3.NewObjectSchema().NewRef()} },
	}
	for what, edit := range refused {
		_, err := load(edit)
		if err == nil {
			t.Errorf("%s: the contract was accepted", what)
		}
		t.Logf("%s: %v", what, err)
	}
}
