package handlers

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/core"
)

// batchHTTP serves POST /v1/leases/batch: the contract middleware has
// authenticated the caller and bounded and buffered the body, and decoded
// it when it took the fast path (batch_fast.go); otherwise the body is
// validated against the contract while it is decoded (decodeBatch). The
// answer is encoded by hand (appendBatchAnswer): the same JSON the strict
// handler would write, without reflection.
func (s *Server) batchHTTP(w http.ResponseWriter, r *http.Request) {
	if req := hotBody[batchBody](r.Context()); req != nil {
		s.serveBatch(w, r, req)
		return
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		writeProblem(w, muster.CodeInvalidRequest, "the request body must be application/json")
		return
	}
	buf := batchBufs.Get().(*[]byte)
	data, err := appendAll((*buf)[:0], r.Body)
	if err != nil {
		batchBufs.Put(buf)
		writeProblem(w, muster.CodeInvalidRequest, "the request body could not be read")
		return
	}
	req, err := decodeBatch(data, s.batchRules) // its strings are copies: data goes back
	*buf = data[:0]
	batchBufs.Put(buf)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveBatch(w, r, &req)
}

// serveBatch applies a decoded batch and writes the answer.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, req *batchBody) {
	defer func(ops []wireOp) { recycleWireOps(&ops) }(req.Ops) // last: the answer quotes them
	sc := batchScratches.Get().(*batchScratch)
	defer sc.recycle()
	_, res, rev, err := s.applyBatch(r.Context(), req.Session, req.Ops, sc)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	buf := batchBufs.Get().(*[]byte)
	defer batchBufs.Put(buf)
	data := appendBatchAnswer((*buf)[:0], req.Ops, res, rev)
	*buf = data[:0]
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// batchBufs recycles the buffers of batch bodies and answers.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// batchBodies recycles the bodies of batches served by the fast path
// (the contract middleware reads them into these).
var batchBodies = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// recycleBatchBody pools the bytes of a body the fast path served, unless
// they are of an outsized body.
func recycleBatchBody(data []byte) {
	if cap(data) <= 64<<10 {
		batchBodies.Put(&data)
	}
}

// appendAll reads r to its end onto dst.
func appendAll(dst []byte, r io.Reader) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// appendBatchAnswer encodes the answer to ops as encoding/json encodes the
// BatchResponse that BatchLeases builds for them (members in declaration
// order, omitempty honoured), straight from the core's results.
func appendBatchAnswer(b []byte, ops []wireOp, res []core.BatchResult, rev core.Revision) []byte {
	b = slices.Grow(b, 64+len(res)*batchResultSize)
	b = append(b, `{"results":[`...)
	var times timeTexts
	for i := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendBatchResult(b, &ops[i], &res[i], &times)
	}
	b = append(b, `],"revision":`...)
	b = strconv.AppendUint(b, uint64(rev), 10)
	return append(b, '}')
}

// batchResultSize is about what one result of a grant takes, to size the
// answer's buffer once.
const batchResultSize = 300

// timeTexts remembers the last two times written: the operations of a
// batch are applied at one instant with mostly one TTL, so their times
// repeat and are formatted once.
type timeTexts struct {
	at   [2]int64
	text [2][]byte
	buf  [2][40]byte
	next int
}

// append appends t (a broker time: in MarshalJSON's range) as appendTime does.
func (c *timeTexts) append(b []byte, t time.Time) []byte {
	ns := t.UnixNano()
	for i := range c.at {
		if c.text[i] != nil && c.at[i] == ns {
			return append(b, c.text[i]...)
		}
	}
	start := len(b)
	b, _ = appendTime(b, t, true)
	i := c.next
	c.next = 1 - i
	c.at[i], c.text[i] = ns, append(c.buf[i][:0], b[start:]...)
	return b
}

func appendBatchResult(b []byte, op *wireOp, r *core.BatchResult, times *timeTexts) []byte {
	b = append(b, '{')
	var status int
	if r.Err != nil {
		var code muster.Code
		var detail string
		code, status, detail = batchFailure(r.Err)
		b = append(b, `"code":`...)
		b = appendString(b, string(code))
		b = append(b, `,"detail":`...)
		b = appendString(b, detail)
		b = append(b, ',')
	} else if h := &r.Holding; h.Item != nil {
		b = append(b, `"lease":{"acquired_at":`...)
		b = times.append(b, h.Item.AcquiredAt()) // the broker clock: always in MarshalJSON's range
		if h.Outcome != core.OutcomeNone {
			b = append(b, `,"expires_after_request_ms":`...)
			b = strconv.AppendInt(b, h.ExpiresAfterRequest.Milliseconds(), 10)
		}
		b = append(b, `,"expires_at":`...)
		b = times.append(b, h.Item.ExpiresAt())
		b = append(b, `,"fencing_token":`...)
		b = strconv.AppendUint(b, uint64(h.Token), 10)
		switch h.Outcome {
		case core.OutcomeAcquired:
			b = append(b, `,"outcome":"acquired"`...)
		case core.OutcomeAlreadyHeld:
			b = append(b, `,"outcome":"already_held"`...)
		}
		b = append(b, `,"renewals":`...)
		b = strconv.AppendUint(b, h.Item.Renewals(), 10)
		b = append(b, `,"route":`...)
		b = appendString(b, op.Route)
		b = append(b, "},"...)
	}
	b = append(b, `"ok":`...)
	b = strconv.AppendBool(b, r.Err == nil)
	b = append(b, `,"op":`...)
	b = appendString(b, string(op.Op))
	b = append(b, `,"route":`...)
	b = appendString(b, op.Route)
	if r.Err != nil {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(status), 10)
	}
	return append(b, '}')
}

// appendString quotes s as JSON (s is valid UTF-8: it came from a
// validated body or from the broker). Printable ASCII other than `"` and
// `\` is written as it is, as jsontext.AppendQuote writes it.
func appendString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	out, err := jsontext.AppendQuote(b, s)
	if err != nil {
		return append(b, `""`...)
	}
	return out
}
