package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// The batch body is validated while it is decoded, in one pass, instead of
// by kin-openapi and then again by the generated decoder: a batch of 64
// operations costs those two generic passes several times what the broker
// spends applying it. The contract stays the authority: batchLimits reads
// every bound from the embedded openapi.yaml, New refuses to start when a
// pattern is not the one decodeBatch implements, and a differential test
// (batch_decode_test.go) holds decodeBatch to kin-openapi's verdict.

// The patterns decodeBatch implements; New fails if the contract's differ.
const (
	batchRoutePattern   = `^lease://[^\x00-\x1f\x7f-\x9f]+$`
	batchSessionPattern = `^[0-9a-f]{32}$`
)

// batchLimits are the bounds of BatchRequest, read from the contract.
type batchLimits struct {
	minOps, maxOps     int
	minTTL, maxTTL     int64
	minToken           int64
	minRoute, maxRoute int // characters, as JSON Schema counts them
	sessionLen         int
}

// loadBatchLimits reads the bounds of BatchRequest from the spec.
func loadBatchLimits(spec *openapi3.T) (*batchLimits, error) {
	sc := spec.Components.Schemas
	get := func(name string) (*openapi3.Schema, error) {
		if r := sc[name]; r != nil && r.Value != nil {
			return r.Value, nil
		}
		return nil, fmt.Errorf("handlers: the contract has no schema %s", name)
	}
	req, err := get("BatchRequest")
	if err != nil {
		return nil, err
	}
	ops := req.Properties["ops"].Value
	ttl, err := get("LeaseTTL")
	if err != nil {
		return nil, err
	}
	tok, err := get("FencingToken")
	if err != nil {
		return nil, err
	}
	route, err := get("Route")
	if err != nil {
		return nil, err
	}
	sess, err := get("SessionId")
	if err != nil {
		return nil, err
	}
	if route.Pattern != batchRoutePattern || sess.Pattern != batchSessionPattern || route.MaxLength == nil || sess.MaxLength == nil ||
		ops.MaxItems == nil || ttl.Min == nil || ttl.Max == nil || tok.Min == nil || req.AdditionalProperties.Has == nil {
		return nil, errors.New("handlers: the contract's batch schemas changed: update decodeBatch to match")
	}
	if int(*ops.MaxItems) != core.MaxBatchOps {
		return nil, fmt.Errorf("handlers: the contract allows %d batch operations, the core %d", int(*ops.MaxItems), core.MaxBatchOps)
	}
	return &batchLimits{
		minOps: int(ops.MinItems), maxOps: int(*ops.MaxItems),
		minTTL: int64(*ttl.Min), maxTTL: int64(*ttl.Max),
		minToken: int64(*tok.Min),
		minRoute: int(route.MinLength), maxRoute: int(*route.MaxLength),
		sessionLen: int(*sess.MaxLength),
	}, nil
}

// batchFieldError is the problem of one body field, worded as the contract
// middleware words kin-openapi's findings (validationError).
func batchFieldError(field, why string) error {
	return muster.Errorf(muster.CodeInvalidRequest, "request body field %q %s", field, why)
}

func invalidField(field string) error { return batchFieldError(field, "is missing or invalid") }

// decodeBatch decodes and validates a batch body against the contract in
// one pass. Like every body, it must be exactly one JSON value of valid
// UTF-8 without duplicate names: the decoder refuses anything else, and a
// refusal is worded by checkOneJSONValue when the body breaks its rules, so
// that the problem is the one any other operation would answer.
func decodeBatch(data []byte, lim *batchLimits) (batchBody, error) {
	if len(data) == 0 {
		return batchBody{}, muster.Errorf(muster.CodeInvalidRequest, "a request body is required")
	}
	req, err := decodeBatchValue(data, lim)
	if err != nil {
		if jerr := checkOneJSONValue(data); jerr != nil {
			return req, jerr
		}
	}
	return req, err
}

// batchBody is a decoded batch body.
type batchBody struct {
	Session string
	Ops     []wireOp
}

// decoders recycles decoders and their buffers across requests.
var decoders = sync.Pool{New: func() any {
	pd := &pooledDecoder{}
	pd.dec = jsontext.NewDecoder(&pd.r)
	return pd
}}

type pooledDecoder struct {
	r   bytes.Reader
	dec *jsontext.Decoder
}

func decodeBatchValue(data []byte, lim *batchLimits) (batchBody, error) {
	pd := decoders.Get().(*pooledDecoder)
	defer func() {
		pd.r.Reset(nil)
		pd.dec.Reset(&pd.r)
		decoders.Put(pd)
	}()
	pd.r.Reset(data)
	pd.dec.Reset(&pd.r)
	return decodeBatchFrom(pd.dec, lim)
}

func decodeBatchFrom(dec *jsontext.Decoder, lim *batchLimits) (batchBody, error) {
	var req batchBody
	if dec.PeekKind() != '{' {
		return req, muster.Errorf(muster.CodeInvalidRequest, "the request body does not match its schema")
	}
	dec.ReadToken()
	var haveSession, haveOps bool
	for dec.PeekKind() != '}' {
		name, err := readName(dec)
		if err != nil {
			return req, err
		}
		switch name {
		case "session_id":
			s, err := readString(dec, "", "session_id")
			if err != nil {
				return req, err
			}
			if len(s) != lim.sessionLen || !isLowerHex(s) {
				return req, invalidField("/session_id")
			}
			req.Session, haveSession = s, true
		case "ops":
			if req.Ops, err = decodeOps(dec, lim); err != nil {
				return req, err
			}
			haveOps = true
		default:
			return req, unknownField("", name)
		}
	}
	dec.ReadToken()
	if _, err := dec.ReadToken(); err != io.EOF {
		return req, muster.Errorf(muster.CodeInvalidRequest, "the request body has data after its JSON value")
	}
	switch {
	case !haveSession:
		return req, muster.Errorf(muster.CodeInvalidRequest, "request body property %q is missing", "session_id")
	case !haveOps:
		return req, muster.Errorf(muster.CodeInvalidRequest, "request body property %q is missing", "ops")
	}
	return req, nil
}

func decodeOps(dec *jsontext.Decoder, lim *batchLimits) ([]wireOp, error) {
	if err := nonNull(dec, "/ops"); err != nil {
		return nil, err
	}
	if dec.PeekKind() != '[' {
		return nil, invalidField("/ops")
	}
	dec.ReadToken()
	ops := make([]wireOp, 0, 64)
	for dec.PeekKind() != ']' {
		if len(ops) == lim.maxOps {
			return nil, invalidField("/ops")
		}
		op, err := decodeOp(dec, lim, len(ops))
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	dec.ReadToken()
	if len(ops) < lim.minOps {
		return nil, invalidField("/ops")
	}
	return ops, nil
}

// decodeOp decodes operation i; the names of its fields (for problems) are
// built only when one is at fault.
func decodeOp(dec *jsontext.Decoder, lim *batchLimits, i int) (wireOp, error) {
	var op wireOp
	at := opPath(i)
	if err := nonNull(dec, at); err != nil {
		return op, err
	}
	if dec.PeekKind() != '{' {
		return op, invalidField(at)
	}
	dec.ReadToken()
	var haveOp, haveRoute bool
	for dec.PeekKind() != '}' {
		name, err := readName(dec)
		if err != nil {
			return op, err
		}
		switch name {
		case "op":
			s, err := readString(dec, at, "op")
			if err != nil {
				return op, err
			}
			op.Op = api.BatchOpKind(s)
			if !op.Op.Valid() {
				return op, invalidField(at + "/op")
			}
			haveOp = true
		case "route":
			s, err := readString(dec, at, "route")
			if err != nil {
				return op, err
			}
			if !routeText(s, lim) {
				return op, invalidField(at + "/route")
			}
			op.Route, haveRoute = s, true
		case "ttl_ms":
			n, err := readInt(dec, at, "ttl_ms", lim.minTTL, lim.maxTTL)
			if err != nil {
				return op, err
			}
			op.TTL, op.HasTTL = n, true
		case "fencing_token":
			n, err := readInt(dec, at, "fencing_token", lim.minToken, 1<<63-1)
			if err != nil {
				return op, err
			}
			op.Token, op.HasToken = n, true
		default:
			return op, unknownField(at, name)
		}
	}
	dec.ReadToken()
	switch {
	case !haveOp:
		return op, muster.Errorf(muster.CodeInvalidRequest, "request body property %q is missing", "op")
	case !haveRoute:
		return op, muster.Errorf(muster.CodeInvalidRequest, "request body property %q is missing", "route")
	}
	return op, nil
}

// routeText is the contract's Route schema: minLength..maxLength
// characters matching batchRoutePattern. The grammar is ParseRoute's.
func routeText(s string, lim *batchLimits) bool {
	if n := utf8.RuneCountInString(s); n < lim.minRoute || n > lim.maxRoute || len(s) <= len(core.LeaseScheme) || s[:len(core.LeaseScheme)] != core.LeaseScheme {
		return false
	}
	for _, r := range s[len(core.LeaseScheme):] {
		if r <= 0x1f || r >= 0x7f && r <= 0x9f {
			return false
		}
	}
	return true
}

// opPath is the JSON pointer of operation i; the pointers of the first
// operations are built once.
func opPath(i int) string {
	if i < len(opPaths) {
		return opPaths[i]
	}
	return "/ops/" + strconv.Itoa(i)
}

var opPaths = func() []string {
	p := make([]string, core.MaxBatchOps)
	for i := range p {
		p[i] = "/ops/" + strconv.Itoa(i)
	}
	return p
}()

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// unknownField words an unknown member as validationError does.
func unknownField(at, name string) error {
	if fieldNameRe.MatchString(name) {
		return muster.Errorf(muster.CodeInvalidRequest, "request body field %q is unknown: this operation does not take it", at+"/"+name)
	}
	return muster.Errorf(muster.CodeInvalidRequest, "request body has an unknown field (its name is not shown: it is not a plain identifier)")
}

// readName reads a member name. The names the batch schemas know are
// returned without allocating; an escaped or unknown name is unquoted.
func readName(dec *jsontext.Decoder) (string, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return "", bodyNotJSON(err)
	}
	if n, ok := batchNames[string(v)]; ok { // no allocation: a map lookup by []byte
		return n, nil
	}
	var name string
	if err := json.Unmarshal(v, &name); err != nil {
		return "", bodyNotJSON(err)
	}
	return name, nil
}

// batchNames are the member names of the batch schemas, quoted as they
// are most often sent (unescaped).
var batchNames = map[string]string{
	`"session_id"`: "session_id", `"ops"`: "ops", `"op"`: "op", `"route"`: "route",
	`"ttl_ms"`: "ttl_ms", `"fencing_token"`: "fencing_token",
}

// nonNull refuses a null where the contract has no nullable schema.
func nonNull(dec *jsontext.Decoder, at string) error {
	if dec.PeekKind() == 'n' {
		return batchFieldError(at, "must not be null")
	}
	return nil
}

// readString reads the string member name of the object at at.
func readString(dec *jsontext.Decoder, at, name string) (string, error) {
	if dec.PeekKind() != '"' {
		if err := nonNull(dec, at+"/"+name); err != nil {
			return "", err
		}
		dec.SkipValue()
		return "", invalidField(at + "/" + name)
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return "", bodyNotJSON(err)
	}
	return tok.String(), nil
}

// readInt reads an integer in [lo, hi]. A number with a fraction or an
// exponent is refused, as the generated decoder refuses it for an int64.
func readInt(dec *jsontext.Decoder, at, name string, lo, hi int64) (int64, error) {
	if dec.PeekKind() != '0' {
		if err := nonNull(dec, at+"/"+name); err != nil {
			return 0, err
		}
		dec.SkipValue()
		return 0, invalidField(at + "/" + name)
	}
	v, err := dec.ReadValue()
	if err != nil {
		return 0, bodyNotJSON(err)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalidField(at + "/" + name)
	}
	return n, nil
}

func bodyNotJSON(error) error {
	return muster.Errorf(muster.CodeInvalidRequest, "the request body is not valid JSON")
}
