package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"

	"github.com/musterhq/muster/core"
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
}

// operation is what the contract middleware knows of one generated route.
type operation struct {
	route      routers.Route
	public     bool  // security: [] — no token needed
	queryToken bool  // accepts access_token (watch only)
	bodyLimit  int64 // 0: the operation takes no body
	noInput    bool  // no parameters and no body: nothing to validate
}

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
		op := c.ops[r.Method+" "+rctx.RoutePattern()]
		if op == nil {
			writeProblem(w, core.CodeNotFound, "no such operation")
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
				writeProblem(w, core.CodeUnauthenticated, "a valid bearer token is required")
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
		if op.noInput {
			next.ServeHTTP(w, r)
			return
		}
		params := make(map[string]string, len(rctx.URLParams.Keys))
		for i, k := range rctx.URLParams.Keys {
			params[k] = rctx.URLParams.Values[i]
		}
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: &op.route, Options: &c.opts}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			writeError(c.log, w, r, validationError(err))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bufferBody reads at most limit bytes of the body into memory so that the
// validator and the handler can both read it.
func bufferBody(r *http.Request, limit int64, timeout time.Duration) error {
	if r.ContentLength > limit {
		return core.Errorf(core.CodePayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if isTimeout(err) {
		return core.Errorf(core.CodeInvalidRequest, "the request body did not arrive within %s", timeout)
	}
	if err != nil {
		return core.Errorf(core.CodeInvalidRequest, "the request body could not be read")
	}
	if int64(len(data)) > limit {
		return core.Errorf(core.CodePayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	// The validator and the generated decoder both stop after the first JSON
	// value; a body must be exactly one.
	if len(data) > 0 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") && !json.Valid(data) {
		return core.Errorf(core.CodeInvalidRequest, "the request body is not valid JSON")
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	return nil
}

// paramCodes gives the code of a parameter that fails validation; any other
// parameter or the body gives invalid_request.
var paramCodes = map[string]core.Code{
	"selector": core.CodeInvalidSelector,
	"live":     core.CodeInvalidSelector,
	"realm":    core.CodeInvalidRoute,
	"area":     core.CodeInvalidRoute,
	"resource": core.CodeInvalidRoute,
	"cursor":   core.CodeInvalidCursor,
	"name":     core.CodeInvalidName,
	"root":     core.CodeInvalidRequest,
}

// validationError turns a validator error into a problem that names the
// parameter or body field at fault and never echoes a value or the schema.
func validationError(err error) error {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return core.Errorf(core.CodeInvalidRequest, "the request does not match the contract")
	}
	if p := re.Parameter; p != nil {
		code, ok := paramCodes[p.Name]
		if !ok {
			code = core.CodeInvalidRequest
		}
		return core.Errorf(code, "%s parameter %q is missing or invalid", p.In, p.Name)
	}
	if re.RequestBody != nil {
		var se *openapi3.SchemaError
		if errors.As(err, &se) {
			if se.SchemaField == "required" {
				return core.Errorf(core.CodeInvalidRequest, "request body %s", se.Reason)
			}
			if ptr := se.JSONPointer(); len(ptr) > 0 {
				return core.Errorf(core.CodeInvalidRequest, "request body field %q is missing or invalid", "/"+strings.Join(ptr, "/"))
			}
			return core.Errorf(core.CodeInvalidRequest, "the request body does not match its schema")
		}
		if strings.Contains(re.Error(), "header Content-Type") {
			return core.Errorf(core.CodeInvalidRequest, "the request body must be application/json")
		}
		if strings.Contains(re.Reason, "must not be empty") || errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
			return core.Errorf(core.CodeInvalidRequest, "a request body is required")
		}
		return core.Errorf(core.CodeInvalidRequest, "the request body is not valid JSON")
	}
	return core.Errorf(core.CodeInvalidRequest, "the request does not match the contract")
}
