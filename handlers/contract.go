package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore"
)

// Body limits. A body above its operation's limit is refused with 413
// `payload_too_large` before it is parsed.
const (
	DefaultBodyLimit = 16 << 10
	FleetBodyLimit   = 80 << 10
	SweepBodyLimit   = 260 << 10 // a 256 KiB schema plus its {"schema": …} wrapper
	PlanBodyLimit    = 4 << 20
)

var bodyLimits = map[string]int64{
	"registerSpec": FleetBodyLimit,
	"sweepSpecs":   SweepBodyLimit,
	"planFleet":    PlanBodyLimit,
	"batchLeases":  BatchBodyLimit,
}

// operation is what the contract middleware knows of one generated route.
type operation struct {
	route      routers.Route
	public     bool  // security: [] — no token needed
	queryToken bool  // accepts access_token (watch only)
	bodyLimit  int64 // 0: the operation takes no body
	noInput    bool  // no parameters and no body: nothing to validate
	// selfValidated: the operation's handler validates its body against
	// the contract while decoding it (one pass; see batch_decode.go), and
	// it takes no parameters.
	selfValidated bool
}

// selfValidating lists the operations whose handlers validate their own
// body against the contract (each held to kin-openapi by a differential
// test).
var selfValidating = map[string]bool{"batchLeases": true}

// contract authenticates, bounds the body and validates the request against
// openapi.yaml for the generated routes it wraps. It finds the operation by
// the chi route pattern, so routing happens once.
type contract struct {
	log         *slog.Logger
	bodyTimeout time.Duration
	auth        *Authenticator
	ops         map[string]*operation // "METHOD pattern"
	opts        openapi3filter.Options
}

func newContract(spec *openapi3.T, auth *Authenticator, log *slog.Logger, bodyTimeout time.Duration) (*contract, error) {
	spec.Servers = nil
	c := &contract{log: log, bodyTimeout: bodyTimeout, auth: auth, ops: map[string]*operation{}}
	c.opts = openapi3filter.Options{
		// Authentication happened before validation; the validator only
		// needs to know that every security requirement is satisfiable.
		AuthenticationFunc:  func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
		SkipSettingDefaults: true,
	}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			o := &operation{route: routers.Route{Spec: spec, Path: path, PathItem: item, Method: method, Operation: op}}
			o.public = op.Security != nil && len(*op.Security) == 0
			o.queryToken = op.OperationID == "watchLeases"
			o.noInput = len(op.Parameters) == 0 && len(item.Parameters) == 0 && op.RequestBody == nil
			o.selfValidated = selfValidating[op.OperationID] && len(op.Parameters) == 0 && len(item.Parameters) == 0
			if op.RequestBody != nil {
				o.bodyLimit = DefaultBodyLimit
				if l, ok := bodyLimits[op.OperationID]; ok {
					o.bodyLimit = l
				}
			}
			c.ops[method+" "+path] = o
		}
	}
	if len(c.ops) == 0 {
		return nil, errors.New("the spec has no operations")
	}
	return c, nil
}

func (c *contract) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rctx := chi.RouteContext(r.Context())
		method := r.Method
		if method == http.MethodHead {
			method = http.MethodGet // routed to the GET operation (middleware.GetHead)
		}
		op := c.ops[method+" "+rctx.RoutePattern()]
		if op == nil {
			writeProblem(w, muster.CodeNotFound, "no such operation")
			return
		}
		if !op.public {
			secret := bearer(r)
			if secret == "" && op.queryToken {
				secret = r.URL.Query().Get("access_token")
			}
			caller, ok := c.auth.Authenticate(secret)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="muster"`)
				writeProblem(w, muster.CodeUnauthenticated, "a valid bearer token is required")
				return
			}
			r = r.WithContext(withCaller(r.Context(), caller))
		}
		if op.bodyLimit > 0 {
			if err := bufferBody(r, op.bodyLimit, c.bodyTimeout); err != nil {
				writeError(c.log, w, r, err)
				return
			}
			liftBodyDeadline(w)
		}
		if op.noInput || op.selfValidated {
			next.ServeHTTP(w, r)
			return
		}
		// Path parameters are validated as the handlers receive them:
		// unescaped ("inst-7%2Fmonitors" is the root "inst-7/monitors").
		params := make(map[string]string, len(rctx.URLParams.Keys))
		for i, k := range rctx.URLParams.Keys {
			v, err := url.PathUnescape(rctx.URLParams.Values[i])
			if err != nil {
				writeProblem(w, muster.CodeInvalidRequest, fmt.Sprintf("path parameter %q is not correctly escaped", k))
				return
			}
			params[k] = v
		}
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: &op.route, Options: &c.opts}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			writeError(c.log, w, r, validationError(err, func(p *openapi3.Parameter) string {
				if p.In == openapi3.ParameterInPath {
					return params[p.Name]
				}
				return r.URL.Query().Get(p.Name)
			}))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bufferBody reads at most limit bytes of the body into memory so that the
// validator and the handler can both read it.
func bufferBody(r *http.Request, limit int64, timeout time.Duration) error {
	if r.ContentLength > limit {
		return muster.Errorf(muster.CodePayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if isTimeout(err) {
		return muster.Errorf(muster.CodeInvalidRequest, "the request body did not arrive within %s", timeout)
	}
	if err != nil {
		return muster.Errorf(muster.CodeInvalidRequest, "the request body could not be read")
	}
	if int64(len(data)) > limit {
		return muster.Errorf(muster.CodePayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	// The validator and the generated decoder both stop after the first JSON
	// value and replace invalid UTF-8 with U+FFFD; a body must be exactly
	// one value of valid UTF-8, whatever the case of its media type.
	if len(data) > 0 && isJSON(r.Header.Get("Content-Type")) {
		if err := checkOneJSONValue(data); err != nil {
			return err
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	return nil
}

// isJSON reports whether a Content-Type is application/json; media types
// are case-insensitive (RFC 9110 §8.3.1).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// checkOneJSONValue refuses a body that is not exactly one JSON value of
// valid UTF-8 (RFC 8259 §8.1): trailing data, invalid UTF-8 bytes, lone
// surrogate escapes, and an object with a duplicate member name, which
// decoders read differently.
func checkOneJSONValue(data []byte) error {
	if !utf8.Valid(data) {
		return muster.Errorf(muster.CodeInvalidRequest, "the request body is not valid UTF-8")
	}
	if jsontext.Value(data).IsValid() {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	_, err := dec.ReadValue()
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return muster.Errorf(muster.CodeInvalidRequest, "the request body has an object with a duplicate member name")
	case err != nil && strings.Contains(err.Error(), "surrogate"):
		return muster.Errorf(muster.CodeInvalidRequest, "the request body has an invalid escape (such as a lone surrogate \\ud800), which is not valid UTF-8")
	case err == nil:
		return muster.Errorf(muster.CodeInvalidRequest, "the request body has data after its JSON value")
	}
	return muster.Errorf(muster.CodeInvalidRequest, "the request body is not valid JSON")
}

// unsupportedRe finds the member named by kin-openapi's failure of
// `additionalProperties: false`.
var unsupportedRe = regexp.MustCompile(`^property "(.*)" is unsupported$`)

// fieldNameRe is what an unknown member name must look like to be named in
// a problem: a short plain identifier (a misspelt field), never arbitrary
// submitted text.
var fieldNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// paramCodes gives the code of a parameter that fails validation; any other
// parameter or the body gives invalid_request.
var paramCodes = map[string]muster.Code{
	"selector": muster.CodeInvalidSelector,
	"live":     muster.CodeInvalidSelector,
	"realm":    muster.CodeInvalidRoute,
	"area":     muster.CodeInvalidRoute,
	"resource": muster.CodeInvalidRoute,
	"cursor":   muster.CodeInvalidCursor,
	"name":     muster.CodeInvalidName,
	"root":     muster.CodeInvalidRequest,
}

// domainChecks judge a parameter the way the handler behind it would, so
// that a value the contract refuses gets the domain's own message (and the
// same one whichever layer sees it first).
var domainChecks = map[string]func(string) error{
	"name":     fleetstore.CheckName,
	"root":     func(v string) error { _, err := muster.ParseFleetRoot(v); return err },
	"selector": checkSelector,
	"live":     checkSelector,
	"realm":    func(v string) error { _, err := core.NewRoute(v, "a", "a"); return err },
	"area":     func(v string) error { _, err := core.NewRoute("a", v, "a"); return err },
	"resource": func(v string) error { _, err := core.NewRoute("a", "a", v); return err },
}

// paramCode is the code of a parameter that fails validation.
func paramCode(name string) muster.Code {
	if code, ok := paramCodes[name]; ok {
		return code
	}
	return muster.CodeInvalidRequest
}

func checkSelector(v string) error { _, err := core.ParseSelector(v); return err }

// validationError turns a validator error into a problem that names the
// parameter or body field at fault and never echoes a value or the schema.
// value gives the (unescaped) value of a parameter.
func validationError(err error, value func(*openapi3.Parameter) string) error {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return muster.Errorf(muster.CodeInvalidRequest, "the request does not match the contract")
	}
	if p := re.Parameter; p != nil {
		if check, ok := domainChecks[p.Name]; ok && p.In != openapi3.ParameterInHeader {
			var ce *muster.Error
			if errors.As(check(value(p)), &ce) && ce.Code == paramCode(p.Name) {
				return ce
			}
		}
		return muster.Errorf(paramCode(p.Name), "%s parameter %q is missing or invalid", p.In, p.Name)
	}
	if re.RequestBody != nil {
		var se *openapi3.SchemaError
		if errors.As(err, &se) {
			ptr := se.JSONPointer()
			field := "/" + strings.Join(ptr, "/")
			if len(ptr) == 0 {
				field = ""
			}
			switch m := unsupportedRe.FindStringSubmatch(se.Reason); {
			case se.SchemaField == "required":
				return muster.Errorf(muster.CodeInvalidRequest, "request body %s", se.Reason)
			case m != nil && fieldNameRe.MatchString(m[1]):
				return muster.Errorf(muster.CodeInvalidRequest, "request body field %q is unknown: this operation does not take it", field+"/"+m[1])
			case m != nil:
				return muster.Errorf(muster.CodeInvalidRequest, "request body has an unknown field (its name is not shown: it is not a plain identifier)")
			case se.SchemaField == "nullable" || strings.Contains(se.Reason, "not nullable"):
				return muster.Errorf(muster.CodeInvalidRequest, "request body field %q must not be null", field)
			}
			if len(ptr) > 0 {
				return muster.Errorf(muster.CodeInvalidRequest, "request body field %q is missing or invalid", "/"+strings.Join(ptr, "/"))
			}
			return muster.Errorf(muster.CodeInvalidRequest, "the request body does not match its schema")
		}
		if strings.Contains(re.Error(), "header Content-Type") {
			return muster.Errorf(muster.CodeInvalidRequest, "the request body must be application/json")
		}
		if strings.Contains(re.Reason, "must not be empty") || errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
			return muster.Errorf(muster.CodeInvalidRequest, "a request body is required")
		}
		return muster.Errorf(muster.CodeInvalidRequest, "the request body is not valid JSON")
	}
	return muster.Errorf(muster.CodeInvalidRequest, "the request does not match the contract")
}
