package handlers

import (
	"sync"
	"unsafe"

	"github.com/musterhq/muster/api"
)

// The batch body's fast path. A batch of 64 operations cost the broker
// more to decode (a general JSON tokenizer with duplicate-name tracking,
// one string allocated per member, then a second pass over the whole body
// to prove it is one JSON value) than to apply. fastBatch reads the form
// clients send, byte by byte, and only ever accepts: whatever it cannot
// prove decodeBatch accepts with the same result (an escape, a character
// outside printable ASCII, a number with a fraction or an exponent or
// past 18 digits, a duplicate or unknown member, a null, a missing member,
// a value a rule refuses, anything after the value) makes it give up, and
// the request takes the general path (checkJSONBody, then decodeBatch),
// whose problems are the contract's. Every check is the same compiled rule
// decodeBatch applies (batchRules), so the contract stays the authority.
// FuzzFastBatch and TestFastBatchMatchesDecodeBatch hold the two to the
// same result on every body fastBatch accepts.

// fastBatch decodes data when it is a batch body of the plain form; ok is
// false otherwise, and the caller takes decodeBatch. The strings of the
// result share data's memory: data must not change afterwards (a request
// body, read once and only read after). Its operations are on a recycled
// slice (wireOpBufs) the handler gives back once it has answered.
func fastBatch(data []byte, rules *batchRules) (req batchBody, ok bool) {
	p := scanner{s: unsafe.String(unsafe.SliceData(data), len(data))}
	if !p.next('{') {
		return req, false
	}
	var seen uint64
	if !p.next('}') {
		for {
			name, ok := p.str()
			if !ok || !p.next(':') {
				return req, false
			}
			i := rules.body.field(name)
			if i < 0 || seen&(1<<i) != 0 {
				return req, false
			}
			seen |= 1 << i
			switch name {
			case "session_id":
				s, ok := p.str()
				if !ok || !rules.session.ok(s) {
					return req, false
				}
				req.Session = s
			case "ops":
				if req.Ops, ok = p.ops(rules); !ok {
					return req, false
				}
			default:
				return req, false
			}
			if p.next(',') {
				continue
			}
			if p.next('}') {
				break
			}
			return req, false
		}
	}
	p.space()
	if p.i != len(p.s) || rules.body.missing(seen) != "" {
		return req, false
	}
	return req, true
}

// ops reads the operations array.
func (p *scanner) ops(rules *batchRules) ([]wireOp, bool) {
	if !p.next('[') || p.next(']') { // no operation: decodeBatch words it
		return nil, false
	}
	ops := wireOpBufs.Get().(*[]wireOp)
	if got, ok := p.opsInto((*ops)[:0], rules); ok {
		return got, true
	}
	recycleWireOps(ops)
	return nil, false
}

// wireOpBufs recycles the operations of batch bodies.
var wireOpBufs = sync.Pool{New: func() any { b := make([]wireOp, 0, 64); return &b }}

// recycleWireOps forgets the strings of *ops and pools it.
func recycleWireOps(ops *[]wireOp) {
	clear((*ops)[:cap(*ops)])
	*ops = (*ops)[:0]
	wireOpBufs.Put(ops)
}

// opsInto reads the operations after the array's opening bracket onto ops.
func (p *scanner) opsInto(ops []wireOp, rules *batchRules) ([]wireOp, bool) {
	for {
		if len(ops) == rules.ops.maxItems {
			return nil, false
		}
		op, ok := p.op(rules)
		if !ok {
			return nil, false
		}
		ops = append(ops, op)
		if p.next(',') {
			continue
		}
		if p.next(']') {
			break
		}
		return nil, false
	}
	return ops, len(ops) >= rules.ops.minItems
}

// op reads one operation object.
func (p *scanner) op(rules *batchRules) (op wireOp, ok bool) {
	if !p.next('{') || p.next('}') {
		return op, false
	}
	var seen uint64
	for {
		name, ok := p.str()
		if !ok || !p.next(':') {
			return op, false
		}
		// The members this reader knows, by their index in the rules
		// (loadBatchRules checked each is a property); any other gives up.
		// Strings from str are printable ASCII: their length is their
		// count of characters.
		i := -1
		switch name {
		case "op":
			s, ok := p.str()
			if !ok || !rules.kind.okCount(s, len(s)) {
				return op, false
			}
			op.Op, i = api.BatchOpKind(s), rules.opIdx
		case "route":
			s, ok := p.str()
			if !ok || !rules.route.okCount(s, len(s)) {
				return op, false
			}
			op.Route, i = s, rules.routeIdx
		case "ttl_ms":
			n, ok := p.int()
			if !ok || !rules.ttl.ok(n) {
				return op, false
			}
			op.TTL, op.HasTTL, i = n, true, rules.ttlIdx
		case "fencing_token":
			n, ok := p.int()
			if !ok || !rules.token.ok(n) {
				return op, false
			}
			op.Token, op.HasToken, i = n, true, rules.tokenIdx
		}
		if i < 0 || seen&(1<<i) != 0 {
			return op, false
		}
		seen |= 1 << i
		if p.next(',') {
			continue
		}
		if p.next('}') {
			break
		}
		return op, false
	}
	return op, rules.op.missing(seen) == ""
}

// scanner reads JSON of the plain form from s at i.
type scanner struct {
	s string
	i int
}

// space skips JSON whitespace.
func (p *scanner) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next consumes c, after whitespace, when it comes next.
func (p *scanner) next(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes: its value is its
// text.
func (p *scanner) str() (string, bool) {
	if !p.next('"') {
		return "", false
	}
	j := p.i
	for j < len(p.s) && plainChar[p.s[j]] {
		j++
	}
	if j == len(p.s) || p.s[j] != '"' {
		return "", false
	}
	s := p.s[p.i:j]
	p.i = j + 1
	return s, true
}

// plainChar holds the bytes str takes inside a string: printable ASCII
// other than '"' and '\\'.
var plainChar = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// int reads an integer of at most 18 digits (so it cannot overflow)
// without a fraction or an exponent, as JSON writes it: -?(0|[1-9][0-9]*).
func (p *scanner) int() (int64, bool) {
	p.space()
	j := p.i
	neg := j < len(p.s) && p.s[j] == '-'
	if neg {
		j++
	}
	start := j
	var n int64
	for ; j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9'; j++ {
		n = n*10 + int64(p.s[j]-'0')
	}
	digits := j - start
	if digits == 0 || digits > 18 || digits > 1 && p.s[start] == '0' {
		return 0, false
	}
	if j < len(p.s) && (p.s[j] == '.' || p.s[j] == 'e' || p.s[j] == 'E') {
		return 0, false
	}
	p.i = j
	if neg {
		n = -n
	}
	return n, true
}
