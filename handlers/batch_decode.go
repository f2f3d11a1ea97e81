package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// The batch body is validated while it is decoded, in one pass, instead of
// by kin-openapi and then again by the generated decoder: a batch of 64
// operations costs those two generic passes several times what the broker
// spends applying it. The contract stays the authority: every check is a
// rule compiled from the embedded openapi.yaml (rules.go, shared with the
// lease mutations' fast path), New refuses to start when BatchRequest has
// a keyword the rules do not implement or members decodeBatch does not
// fill, and a differential test (batch_decode_test.go) holds decodeBatch to
// kin-openapi's verdict.

// batchRules are the rules of BatchRequest, bound to the members
// decodeBatch fills.
type batchRules struct {
	body        *objectRule // BatchRequest
	session     *stringRule
	ops         *listRule
	op          *objectRule // BatchOp
	kind, route *stringRule
	ttl, token  *intRule
	// The indexes in op of its members, for the fast path's seen bits.
	opIdx, routeIdx, ttlIdx, tokenIdx int
}

// loadBatchRules compiles the rules of BatchRequest from the spec.
func loadBatchRules(spec *openapi3.T) (*batchRules, error) {
	ref := spec.Components.Schemas["BatchRequest"]
	if ref == nil || ref.Value == nil {
		return nil, errors.New("handlers: the contract has no schema BatchRequest")
	}
	body, err := compileObject(ref.Value)
	if err == nil {
		err = fitsBatch(body)
	}
	if err != nil {
		return nil, fmt.Errorf("handlers: the batch's rules no longer follow openapi.yaml (update handlers/batch_decode.go): %w", err)
	}
	rule := func(o *objectRule, name string) *fieldRule { return &o.fields[o.field(name)] }
	r := &batchRules{body: body, session: rule(body, "session_id").str, ops: rule(body, "ops").list}
	r.op = r.ops.items
	r.kind, r.route = rule(r.op, "op").str, rule(r.op, "route").str
	r.ttl, r.token = rule(r.op, "ttl_ms").num, rule(r.op, "fencing_token").num
	r.opIdx, r.routeIdx, r.ttlIdx, r.tokenIdx = r.op.field("op"), r.op.field("route"), r.op.field("ttl_ms"), r.op.field("fencing_token")
	for _, k := range r.kind.enum {
		if !api.BatchOpKind(k).Valid() {
			return nil, fmt.Errorf("handlers: the batch operation %q is not one decodeBatch knows", k)
		}
	}
	if r.kind.enum == nil {
		return nil, errors.New("handlers: the batch operation kinds are not an enum")
	}
	if r.ops.maxItems != core.MaxBatchOps {
		return nil, fmt.Errorf("handlers: the contract allows %d batch operations, the core %d", r.ops.maxItems, core.MaxBatchOps)
	}
	return r, nil
}

// fitsBatch checks that the rules have exactly the members decodeBatch
// fills, each of the kind it reads.
func fitsBatch(body *objectRule) error {
	if err := hasMembers(body, "ops", "session_id"); err != nil {
		return err
	}
	ops := body.fields[body.field("ops")].list
	if body.fields[body.field("session_id")].str == nil || ops == nil {
		return errors.New("BatchRequest: session_id must be a string, ops an array")
	}
	if err := hasMembers(ops.items, "fencing_token", "op", "route", "ttl_ms"); err != nil {
		return err
	}
	f := func(name string) *fieldRule { return &ops.items.fields[ops.items.field(name)] }
	if f("op").str == nil || f("route").str == nil || f("ttl_ms").num == nil || f("fencing_token").num == nil {
		return errors.New("BatchOp: op and route must be strings, ttl_ms and fencing_token integers")
	}
	return nil
}

// hasMembers checks that the properties of o are exactly names (sorted).
func hasMembers(o *objectRule, names ...string) error {
	have := make([]string, len(o.fields))
	for i := range o.fields {
		have[i] = o.fields[i].name
	}
	if !slices.Equal(have, names) {
		return fmt.Errorf("properties %v, decodeBatch fills %v", have, names)
	}
	return nil
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
func decodeBatch(data []byte, rules *batchRules) (batchBody, error) {
	if len(data) == 0 {
		return batchBody{}, muster.Errorf(muster.CodeInvalidRequest, "a request body is required")
	}
	req, err := decodeBatchValue(data, rules)
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

func decodeBatchValue(data []byte, rules *batchRules) (batchBody, error) {
	pd := decoders.Get().(*pooledDecoder)
	defer func() {
		pd.r.Reset(nil)
		pd.dec.Reset(&pd.r)
		decoders.Put(pd)
	}()
	pd.r.Reset(data)
	pd.dec.Reset(&pd.r)
	return decodeBatchFrom(pd.dec, rules)
}

func decodeBatchFrom(dec *jsontext.Decoder, rules *batchRules) (batchBody, error) {
	var req batchBody
	if dec.PeekKind() != '{' {
		return req, muster.Errorf(muster.CodeInvalidRequest, "the request body does not match its schema")
	}
	dec.ReadToken()
	var seen uint64
	for dec.PeekKind() != '}' {
		name, i, err := readMember(dec, rules.body, "")
		if err != nil {
			return req, err
		}
		seen |= 1 << i
		switch name {
		case "session_id":
			s, err := readString(dec, "", name)
			if err != nil {
				return req, err
			}
			if !rules.session.ok(s) {
				return req, invalidField("/session_id")
			}
			req.Session = s
		case "ops":
			if req.Ops, err = decodeOps(dec, rules); err != nil {
				return req, err
			}
		}
	}
	dec.ReadToken()
	if _, err := dec.ReadToken(); err != io.EOF {
		return req, muster.Errorf(muster.CodeInvalidRequest, "the request body has data after its JSON value")
	}
	return req, missingMember(rules.body, seen)
}

func decodeOps(dec *jsontext.Decoder, rules *batchRules) ([]wireOp, error) {
	if err := nonNull(dec, "/ops"); err != nil {
		return nil, err
	}
	if dec.PeekKind() != '[' {
		return nil, invalidField("/ops")
	}
	dec.ReadToken()
	ops := make([]wireOp, 0, 64)
	for dec.PeekKind() != ']' {
		if len(ops) == rules.ops.maxItems {
			return nil, invalidField("/ops")
		}
		op, err := decodeOp(dec, rules, len(ops))
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	dec.ReadToken()
	if len(ops) < rules.ops.minItems {
		return nil, invalidField("/ops")
	}
	return ops, nil
}

// decodeOp decodes operation i; the names of its fields (for problems) are
// built only when one is at fault.
func decodeOp(dec *jsontext.Decoder, rules *batchRules, i int) (wireOp, error) {
	var op wireOp
	at := opPath(i)
	if err := nonNull(dec, at); err != nil {
		return op, err
	}
	if dec.PeekKind() != '{' {
		return op, invalidField(at)
	}
	dec.ReadToken()
	var seen uint64
	for dec.PeekKind() != '}' {
		name, i, err := readMember(dec, rules.op, at)
		if err != nil {
			return op, err
		}
		seen |= 1 << i
		switch name {
		case "op":
			s, err := readString(dec, at, "op")
			if err != nil {
				return op, err
			}
			if !rules.kind.ok(s) {
				return op, invalidField(at + "/op")
			}
			op.Op = api.BatchOpKind(s)
		case "route":
			s, err := readString(dec, at, "route")
			if err != nil {
				return op, err
			}
			if !rules.route.ok(s) {
				return op, invalidField(at + "/route")
			}
			op.Route = s
		case "ttl_ms":
			n, err := readInt(dec, at, "ttl_ms", rules.ttl)
			if err != nil {
				return op, err
			}
			op.TTL, op.HasTTL = n, true
		case "fencing_token":
			n, err := readInt(dec, at, "fencing_token", rules.token)
			if err != nil {
				return op, err
			}
			op.Token, op.HasToken = n, true
		}
	}
	dec.ReadToken()
	return op, missingMember(rules.op, seen)
}

// readMember reads the name of a member of the object at at and its index
// in o; a member o does not name is refused.
func readMember(dec *jsontext.Decoder, o *objectRule, at string) (string, int, error) {
	name, err := readName(dec)
	if err != nil {
		return "", 0, err
	}
	i := o.field(name)
	if i < 0 {
		return "", 0, unknownField(at, name)
	}
	return name, i, nil
}

// missingMember refuses an object without a required member.
func missingMember(o *objectRule, seen uint64) error {
	if name := o.missing(seen); name != "" {
		return muster.Errorf(muster.CodeInvalidRequest, "request body property %q is missing", name)
	}
	return nil
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

// readInt reads an integer member that rule allows. A number with a
// fraction or an exponent is refused, as the generated decoder refuses it
// for an int64.
func readInt(dec *jsontext.Decoder, at, name string, rule *intRule) (int64, error) {
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
	if err != nil || !rule.ok(n) {
		return 0, invalidField(at + "/" + name)
	}
	return n, nil
}

func bodyNotJSON(error) error {
	return muster.Errorf(muster.CodeInvalidRequest, "the request body is not valid JSON")
}
