package handlers

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
)

// TestKinOpenAPIErrorShapes pins every property of kin-openapi's errors
// that validationError reads (types, SchemaField, JSONPointer, Value,
// Schema, ErrInvalidRequired), and the problem each becomes. When a
// kin-openapi upgrade changes one, this test fails and names it: make
// validationError follow, then update the expectations here. It is the one
// place where kin-openapi's message text appears, to show that what
// validationError derives from the structure is what kin-openapi meant.
func TestKinOpenAPIErrorShapes(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	c, err := newContract(spec, NewAuthenticator(nil), slog.New(slog.NewTextHandler(io.Discard, nil)), DefaultBodyReadTimeout)
	if err != nil {
		t.Fatal(err)
	}
	validate := func(pattern, target, contentType, body string, params map[string]string) error {
		t.Helper()
		op := c.ops[opKey{"POST", pattern}]
		if op == nil {
			t.Fatalf("no operation POST %s", pattern)
		}
		r, err := http.NewRequest("POST", "http://x"+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: &op.route, Options: &c.opts}
		return openapi3filter.ValidateRequest(r.Context(), in)
	}
	const acquire = "/v1/leases/{realm}/{area}/{resource}/acquire"
	const register = "/v1/fleets/{root}/specs"
	route := map[string]string{"realm": "a", "area": "b", "resource": "c"}
	root := map[string]string{"root": "m"}
	session := `"session_id":"0123456789abcdef0123456789abcdef"`

	cases := []struct {
		name               string
		pattern, ct, body  string
		params             map[string]string
		shape              func(*openapi3filter.RequestError, *openapi3.SchemaError) string // "" when the shape holds
		wantCode, wantText string
	}{
		{"unknown members: the first in sorted order", acquire, "application/json", `{` + session + `,"ttl_ms":1000,"zz":1,"wait":5}`, route,
			func(re *openapi3filter.RequestError, se *openapi3.SchemaError) string {
				switch {
				case se == nil || se.SchemaField != "properties":
					return "want a SchemaError with SchemaField properties"
				case se.Reason != `property "wait" is unsupported`:
					return "kin-openapi named " + se.Reason + `, not "wait"`
				}
				if _, ok := se.Value.(map[string]any); !ok {
					return "Value is not the object"
				}
				return ""
			}, "invalid_request", `request body field "/wait" is unknown: this operation does not take it`},
		{"unknown member, not an identifier", acquire, "application/json", `{` + session + `,"ttl_ms":1000,"<b>":1}`, route,
			func(_ *openapi3filter.RequestError, se *openapi3.SchemaError) string {
				if se == nil || se.SchemaField != "properties" {
					return "want SchemaField properties"
				}
				return ""
			}, "invalid_request", "request body has an unknown field (its name is not shown: it is not a plain identifier)"},
		{"missing property", acquire, "application/json", `{"ttl_ms":1000}`, route,
			func(_ *openapi3filter.RequestError, se *openapi3.SchemaError) string {
				switch {
				case se == nil || se.SchemaField != "required":
					return "want SchemaField required"
				case strings.Join(se.JSONPointer(), "/") != "session_id":
					return "the pointer is " + strings.Join(se.JSONPointer(), "/") + ", not the missing property"
				case se.Reason != `property "session_id" is missing`:
					return "reason " + se.Reason
				}
				return ""
			}, "invalid_request", `request body property "session_id" is missing`},
		{"null", register, "application/json", `{"kind":"k","spec":null}`, root,
			func(_ *openapi3filter.RequestError, se *openapi3.SchemaError) string {
				if se == nil || se.SchemaField != "nullable" || strings.Join(se.JSONPointer(), "/") != "spec" {
					return "want SchemaField nullable at /spec"
				}
				return ""
			}, "invalid_request", `request body field "/spec" must not be null`},
		{"invalid field", acquire, "application/json", `{` + session + `,"ttl_ms":5}`, route,
			func(_ *openapi3filter.RequestError, se *openapi3.SchemaError) string {
				if se == nil || se.SchemaField != "minimum" || strings.Join(se.JSONPointer(), "/") != "ttl_ms" {
					return "want SchemaField minimum at /ttl_ms"
				}
				return ""
			}, "invalid_request", `request body field "/ttl_ms" is missing or invalid`},
		{"not an object", acquire, "application/json", `[1]`, route,
			func(_ *openapi3filter.RequestError, se *openapi3.SchemaError) string {
				if se == nil || len(se.JSONPointer()) != 0 {
					return "want a SchemaError at the root"
				}
				return ""
			}, "invalid_request", "the request body does not match its schema"},
		{"media type", acquire, "text/plain", `{}`, route,
			func(re *openapi3filter.RequestError, se *openapi3.SchemaError) string {
				switch {
				case se != nil || re.RequestBody == nil || re.Err != nil:
					return "want a body RequestError without a cause"
				case !strings.HasPrefix(re.Reason, "header Content-Type has unexpected value"):
					return "reason " + re.Reason
				}
				return ""
			}, "invalid_request", "the request body must be application/json"},
		{"empty body, whatever the media type", acquire, "text/plain", ``, route,
			func(re *openapi3filter.RequestError, _ *openapi3.SchemaError) string {
				if re.RequestBody == nil || !errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
					return "want ErrInvalidRequired"
				}
				return ""
			}, "invalid_request", "a request body is required"},
		{"undecodable body", acquire, "application/json;;", `{"a":`, route,
			func(re *openapi3filter.RequestError, _ *openapi3.SchemaError) string {
				var pe *openapi3filter.ParseError
				if re.RequestBody == nil || !errors.As(re.Err, &pe) {
					return "want a ParseError"
				}
				return ""
			}, "invalid_request", "the request body is not valid JSON"},
		{"path parameter", acquire, "application/json", `{` + session + `,"ttl_ms":1000}`, map[string]string{"realm": "a*", "area": "b", "resource": "c"},
			func(re *openapi3filter.RequestError, _ *openapi3.SchemaError) string {
				if re.Parameter == nil || re.Parameter.Name != "realm" || re.Parameter.In != openapi3.ParameterInPath {
					return "want the realm parameter"
				}
				return ""
			}, "invalid_route", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := validate(tc.pattern, "/", tc.ct, tc.body, tc.params)
			var re *openapi3filter.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("kin-openapi changed: want a *RequestError, got %T %v", err, err)
			}
			var se *openapi3.SchemaError
			if !errors.As(err, &se) {
				se = nil
			}
			if msg := tc.shape(re, se); msg != "" {
				t.Fatalf("kin-openapi changed the error validationError reads: %s (%v)", msg, err)
			}
			got := validationError(err, tc.ct, func(p *openapi3.Parameter) string { return tc.params[p.Name] })
			var ce *muster.Error
			if !errors.As(got, &ce) || string(ce.Code) != tc.wantCode || tc.wantText != "" && ce.Message != tc.wantText {
				t.Fatalf("problem %v, want %s: %s", got, tc.wantCode, tc.wantText)
			}
		})
	}
	// A valid request passes, so the cases above fail for their own reason.
	if err := validate(acquire, "/", "application/json", `{`+session+`,"ttl_ms":1000}`, route); err != nil {
		t.Fatalf("a valid acquire is refused: %v", err)
	}
}
