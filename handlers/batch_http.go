package handlers

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// batchHTTP serves POST /v1/leases/batch: the contract middleware has
// authenticated the caller and bounded and buffered the body; the body is
// validated against the contract while it is decoded (decodeBatch), and the
// answer is encoded by hand (appendBatchResponse): the same JSON the strict
// handler would write, without reflection.
func (s *Server) batchHTTP(w http.ResponseWriter, r *http.Request) {
	if !isJSON(r.Header.Get("Content-Type")) {
		writeProblem(w, core.CodeInvalidRequest, "the request body must be application/json")
		return
	}
	buf := batchBufs.Get().(*[]byte)
	defer batchBufs.Put(buf)
	data, err := appendAll((*buf)[:0], r.Body)
	if err != nil {
		writeProblem(w, core.CodeInvalidRequest, "the request body could not be read")
		return
	}
	req, err := decodeBatch(data, s.batchLimits)
	if err != nil {
		writeError(s.log, w, r, err)
		return
	}
	out, err := s.applyBatch(r.Context(), &req)
	if err != nil {
		writeError(s.log, w, r, err)
		return
	}
	data = appendBatchResponse(data[:0], &out)
	*buf = data
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// batchBufs recycles the buffers of batch bodies and answers.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

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

// appendBatchResponse encodes a BatchResponse as encoding/json would (the
// members of each struct in declaration order, omitempty honoured).
func appendBatchResponse(b []byte, out *api.BatchResponse) []byte {
	b = append(b, `{"results":[`...)
	for i := range out.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendBatchResult(b, &out.Results[i])
	}
	b = append(b, `],"revision":`...)
	b = strconv.AppendInt(b, out.Revision, 10)
	return append(b, '}')
}

func appendBatchResult(b []byte, r *api.BatchResult) []byte {
	b = append(b, '{')
	if r.Code != nil {
		b = append(b, `"code":`...)
		b = appendString(b, string(*r.Code))
		b = append(b, ',')
	}
	if r.Detail != nil {
		b = append(b, `"detail":`...)
		b = appendString(b, *r.Detail)
		b = append(b, ',')
	}
	if l := r.Lease; l != nil {
		b = append(b, `"lease":{"acquired_at":`...)
		b = appendTime(b, l.AcquiredAt)
		b = append(b, `,"expires_at":`...)
		b = appendTime(b, l.ExpiresAt)
		b = append(b, `,"fencing_token":`...)
		b = strconv.AppendInt(b, l.FencingToken, 10)
		if l.Outcome != nil {
			b = append(b, `,"outcome":`...)
			b = appendString(b, string(*l.Outcome))
		}
		b = append(b, `,"renewals":`...)
		b = strconv.AppendInt(b, l.Renewals, 10)
		b = append(b, `,"route":`...)
		b = appendString(b, l.Route)
		b = append(b, "},"...)
	}
	b = append(b, `"ok":`...)
	b = strconv.AppendBool(b, r.Ok)
	b = append(b, `,"op":`...)
	b = appendString(b, string(r.Op))
	b = append(b, `,"route":`...)
	b = appendString(b, r.Route)
	if r.Status != nil {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(*r.Status), 10)
	}
	return append(b, '}')
}

// appendString quotes s as JSON (s is valid UTF-8: it came from a
// validated body or from the broker).
func appendString(b []byte, s string) []byte {
	out, err := jsontext.AppendQuote(b, s)
	if err != nil {
		return append(b, `""`...)
	}
	return out
}

// appendTime writes t as encoding/json does: RFC 3339 with nanoseconds.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
