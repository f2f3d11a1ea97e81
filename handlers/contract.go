package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
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
	// PlanBodyLimit fits two lists of the contract's 10,000 names each, of
	// about 100 bytes (the longest name register mints is 84).
	PlanBodyLimit = 2 << 20
)

var bodyLimits = map[string]int64{
	"registerSpec": FleetBodyLimit,
	"sweepSpecs":   SweepBodyLimit,
	"planFleet":    PlanBodyLimit,
	"batchLeases":  BatchBodyLimit,
}

// admissionBounds are the operations bounded in number before their
// bodies are read (see admission); each contract (each Server) counts its
// own.
var admissionBounds = map[string]struct {
	what           string
	access         core.Access
	perFamily, all int
}{
	"planFleet":  {"plans", core.Read, PlansPerFamily, PlansRunning},
	"sweepSpecs": {"sweeps", core.Write, SweepsPerFamily, SweepsAdmitted},
}

// operation is what the contract middleware knows of one generated route.
type operation struct {
	route routers.Route
	// hot is the fast path of a lease mutation (hotbody.go), or nil.
	hot        *hotOp
	public     bool  // security: [] — no token needed
	queryToken bool  // accepts access_token (watch only)
	bodyLimit  int64 // 0: the operation takes no body
	// admit, when set, bounds the operation's requests in the broker per
	// family and in all, before the body is read, once the caller passed
	// its grant check.
	admit   *admission
	noInput bool // no parameters and no body: nothing to validate
	// selfValidated: the operation's handler validates its body against
	// the contract while decoding it (one pass; see batch_decode.go), and
	// it takes no parameters.
	selfValidated bool
	// batch: the body is a batch (BatchRequest), which has a fast path
	// (batch_fast.go).
	batch bool
}

// selfValidating lists the operations whose handlers validate their own
// body against the contract (each held to kin-openapi by a differential
// test).
var selfValidating = map[string]bool{"batchLeases": true}

// opKey names an operation by its method and chi route pattern.
type opKey struct{ method, pattern string }

// contract authenticates, bounds the body and validates the request against
// openapi.yaml for the generated routes it wraps. It finds the operation by
// the chi route pattern, so routing happens once.
type contract struct {
	log         *slog.Logger
	bodyTimeout time.Duration
	auth        *Authenticator
	ops         map[opKey]*operation
	opts        openapi3filter.Options
	// generalOnly turns the fast path off (tests compare the two).
	generalOnly bool
	// batch is the batch body's rules, for its fast path (batch_fast.go).
	batch *batchRules
}

func newContract(spec *openapi3.T, auth *Authenticator, log *slog.Logger, bodyTimeout time.Duration) (*contract, error) {
	spec.Servers = nil
	c := &contract{log: log, bodyTimeout: bodyTimeout, auth: auth, ops: map[opKey]*operation{}}
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
			o.batch = o.selfValidated && op.OperationID == "batchLeases"
			if op.RequestBody != nil {
				o.bodyLimit = DefaultBodyLimit
				if l, ok := bodyLimits[op.OperationID]; ok {
					o.bodyLimit = l
				}
				if b, ok := admissionBounds[op.OperationID]; ok {
					o.admit = newAdmission(b.what, b.access, b.perFamily, b.all)
				}
			}
			if body, ok := hotBodies[op.OperationID]; ok {
				h, err := compileHot(item, op, body)
				if err != nil {
					return nil, fmt.Errorf("the fast path of %s no longer follows openapi.yaml (handlers/hotbody.go): %w", op.OperationID, err)
				}
				o.hot = h
			}
			c.ops[opKey{method, path}] = o
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
		op := c.ops[opKey{method, rctx.RoutePattern()}]
		if op == nil {
			writeProblem(w, muster.CodeNotFound, "no such operation")
			return
		}
		var caller *Caller
		if !op.public {
			secret := bearer(r)
			if secret == "" && op.queryToken {
				secret = r.URL.Query().Get("access_token")
			}
			var ok bool
			if caller, ok = c.auth.Authenticate(secret); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="muster"`)
				writeProblem(w, muster.CodeUnauthenticated, "a valid bearer token is required")
				return
			}
		}
		if op.admit != nil {
			if !caller.Grants.AllowsSomeFleet(op.admit.access) {
				writeError(c.log, w, r, errForbidden)
				return
			}
			leave, err := op.admit.enter(string(caller.Family))
			if err != nil {
				writeError(c.log, w, r, err)
				// The body is read and thrown away, within its limit and
				// under the body deadline, so that the client reads the 429
				// rather than a connection reset in the middle of its
				// upload (net/http would close the connection after 256
				// KiB). Nothing of it is kept.
				_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, op.bodyLimit))
				return
			}
			defer leave()
		}
		if op.bodyLimit > 0 {
			batchFast := op.batch && c.batch != nil && !c.generalOnly && hotContentType(r.Header.Get("Content-Type"))
			var into []byte
			if batchFast {
				into = (*batchBodies.Get().(*[]byte))[:0]
			}
			data, err := readRequestBody(r, op.bodyLimit, c.bodyTimeout, into)
			if err != nil {
				writeError(c.log, w, r, err)
				return
			}
			// The fast path accepts only one JSON object of plain ASCII
			// members without duplicates: what checkJSONBody passes.
			if op.hot != nil && !c.generalOnly && hotContentType(r.Header.Get("Content-Type")) {
				if body := op.hot.accept(rctx.URLParams.Keys, rctx.URLParams.Values, pathEscaped(r), data); body != nil {
					liftBodyDeadline(w, r)
					next.ServeHTTP(w, r.WithContext(&hotContext{Context: r.Context(), caller: caller, body: body}))
					return
				}
			}
			// The batch's fast path accepts only bodies of plain ASCII that
			// decodeBatch accepts the same way: what checkJSONBody passes.
			if batchFast {
				if body, ok := fastBatch(data, c.batch); ok {
					liftBodyDeadline(w, r)
					next.ServeHTTP(w, r.WithContext(&hotContext{Context: r.Context(), caller: caller, body: &body}))
					// The answer is written and nothing keeps the body's
					// strings (the core copies the keys it keeps): the
					// bytes serve the next batch.
					recycleBatchBody(data)
					return
				}
			}
			if err := checkJSONBody(r, data); err != nil {
				writeError(c.log, w, r, err)
				return
			}
			liftBodyDeadline(w, r)
		}
		if !op.public {
			r = r.WithContext(withCaller(r.Context(), caller))
		}
		if op.noInput || op.selfValidated {
			next.ServeHTTP(w, r)
			return
		}
		// Path parameters are validated as the handlers receive them:
		// decoded once ("inst-7%2Fmonitors" is the root "inst-7/monitors").
		params := make(map[string]string, len(rctx.URLParams.Keys))
		escaped := pathEscaped(r)
		for i, k := range rctx.URLParams.Keys {
			v, err := pathParam(rctx.URLParams.Values[i], escaped)
			if err != nil {
				writeProblem(w, muster.CodeInvalidRequest, fmt.Sprintf("path parameter %q is not correctly escaped", k))
				return
			}
			params[k] = v
		}
		in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: &op.route, Options: &c.opts}
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			writeError(c.log, w, r, validationError(err, r.Header.Get("Content-Type"), func(p *openapi3.Parameter) string {
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

// pathEscaped reports whether chi matched r on its escaped path, so that
// the path parameters it found are still percent-encoded. chi matches
// r.URL.RawPath when net/http kept one (the request spelled its path
// otherwise than the default encoding of r.URL.Path, as "inst-7%2Fmonitors"
// does) and the decoded r.URL.Path when not.
func pathEscaped(r *http.Request) bool { return r.URL.RawPath != "" }

// pathParam is a path parameter as chi found it, decoded exactly once:
// escaped (pathEscaped) values are decoded, the others are decoded already
// and taken as they are. It is the rule of the generated wrappers, which
// bind parameters for the handlers (ValueIsUnescaped: r.URL.RawPath == ""),
// so the contract judges the very value a handler receives: a segment
// "100%zz", sent as "100%25zz", is "100%zz" for both, never decoded twice.
func pathParam(v string, escaped bool) (string, error) {
	if !escaped || strings.IndexByte(v, '%') < 0 {
		return v, nil
	}
	return url.PathUnescape(v)
}

// readRequestBody reads at most limit bytes of the body into memory, so
// that the validator and the handler can both read it (checkJSONBody puts
// them back as the body).
func readRequestBody(r *http.Request, limit int64, timeout time.Duration, into []byte) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, muster.Errorf(muster.CodePayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	data, err := readBody(r.Body, r.ContentLength, limit, into)
	if isTimeout(err) {
		return nil, muster.Errorf(muster.CodeInvalidRequest, "the request body did not arrive within %s", timeout)
	}
	if err != nil {
		return nil, muster.Errorf(muster.CodeInvalidRequest, "the request body could not be read")
	}
	if int64(len(data)) > limit {
		return nil, muster.Errorf(muster.CodePayloadTooLarge, "the request body is larger than %d bytes", limit)
	}
	return data, nil
}

// checkJSONBody refuses a JSON body that is not exactly one value of valid
// UTF-8, and makes data the request's body again.
func checkJSONBody(r *http.Request, data []byte) error {
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

// readBody is io.ReadAll of at most limit+1 bytes of body, with a buffer
// sized by the declared length.
func readBody(body io.Reader, declared, limit int64, into []byte) ([]byte, error) {
	size := int64(512)
	if declared > 0 {
		size = min(declared, limit) + 1 // +1: room for the read that sees EOF
	}
	data := into[:0]
	if int64(cap(data)) < size {
		data = make([]byte, 0, size)
	}
	lr := io.LimitedReader{R: body, N: limit + 1}
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := lr.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}

// hotContentType reports the media types the fast path takes: the plain
// spellings of application/json, which kin-openapi and isJSON both accept.
// Any other is judged by the general path.
func hotContentType(ct string) bool {
	return ct == "application/json" || ct == "application/json; charset=utf-8"
}

// isJSON reports whether a Content-Type is application/json; media types
// are case-insensitive (RFC 9110 §8.3.1).
func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
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
// value gives the (unescaped) value of a parameter; contentType is the
// request's. It reads kin-openapi's errors by their types and fields, never
// their message text; TestKinOpenAPIErrorShapes pins every shape it reads.
func validationError(err error, contentType string, value func(*openapi3.Parameter) string) error {
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
	rb := re.RequestBody
	if rb == nil {
		return muster.Errorf(muster.CodeInvalidRequest, "the request does not match the contract")
	}
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		ptr := se.JSONPointer()
		field := ""
		if len(ptr) > 0 {
			field = "/" + strings.Join(ptr, "/")
		}
		switch se.SchemaField {
		case "required": // the pointer ends with the missing property
			return muster.Errorf(muster.CodeInvalidRequest, "request body property %q is missing", ptr[len(ptr)-1])
		case "properties": // additionalProperties: false
			switch name, ok := unsupported(se); {
			case ok && fieldNameRe.MatchString(name):
				return muster.Errorf(muster.CodeInvalidRequest, "request body field %q is unknown: this operation does not take it", field+"/"+name)
			case ok:
				return muster.Errorf(muster.CodeInvalidRequest, "request body has an unknown field (its name is not shown: it is not a plain identifier)")
			}
		case "nullable":
			return muster.Errorf(muster.CodeInvalidRequest, "request body field %q must not be null", field)
		}
		if field != "" {
			return muster.Errorf(muster.CodeInvalidRequest, "request body field %q is missing or invalid", field)
		}
		return muster.Errorf(muster.CodeInvalidRequest, "the request body does not match its schema")
	}
	if errors.Is(re.Err, openapi3filter.ErrInvalidRequired) { // checked before the media type
		return muster.Errorf(muster.CodeInvalidRequest, "a request body is required")
	}
	if rb.Content.Get(contentType) == nil { // what kin-openapi refused the media type for
		return muster.Errorf(muster.CodeInvalidRequest, "the request body must be application/json")
	}
	return muster.Errorf(muster.CodeInvalidRequest, "the request body is not valid JSON")
}

// unsupported is the member kin-openapi refused for `additionalProperties:
// false`: it visits members in sorted order and stops at the first failure,
// so it is the first member, in that order, the schema does not declare.
func unsupported(se *openapi3.SchemaError) (string, bool) {
	obj, ok := se.Value.(map[string]any)
	if !ok || se.Schema == nil {
		return "", false
	}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		if _, declared := se.Schema.Properties[name]; !declared {
			return name, true
		}
	}
	return "", false
}
