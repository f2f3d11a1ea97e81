package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/musterhq/muster/api"
)

// hotContext carries what the contract middleware learnt of a request that
// took the fast path (see hotbody.go): its caller and its body, decoded
// once into the generated type, in one allocation.
type hotContext struct {
	context.Context
	caller *Caller
	body   any
}

type hotBodyKey struct{}

func (c *hotContext) Value(key any) any {
	switch key.(type) {
	case callerKey:
		return c.caller
	case hotBodyKey:
		return c.body
	}
	return c.Context.Value(key)
}

// hotBody is the body the fast path decoded, or nil: the generated decoder
// reads the body then.
func hotBody[T any](ctx context.Context) *T {
	b, _ := ctx.Value(hotBodyKey{}).(*T)
	return b
}

// The lease mutations take their body from the fast path when it has one;
// otherwise they are the generated strict handlers unchanged. Either way
// the parameters are the generated wrapper's.

func (rt routes) AcquireLease(w http.ResponseWriter, r *http.Request, realm api.Realm, area api.Area, resource api.Resource) {
	body := hotBody[api.AcquireLeaseJSONRequestBody](r.Context())
	if body == nil {
		rt.ServerInterface.AcquireLease(w, r, realm, area, resource)
		return
	}
	resp, err := rt.s.AcquireLease(r.Context(), api.AcquireLeaseRequestObject{Realm: realm, Area: area, Resource: resource, Body: body})
	if err != nil {
		rt.s.writeError(w, r, err)
		return
	}
	if l, ok := resp.(api.AcquireLease200JSONResponse); ok {
		writeLease(rt.s, w, r, (*api.Lease)(&l))
		return
	}
	if err := resp.VisitAcquireLeaseResponse(w); err != nil {
		rt.s.writeError(w, r, err)
	}
}

func (rt routes) ExtendLease(w http.ResponseWriter, r *http.Request, realm api.Realm, area api.Area, resource api.Resource) {
	body := hotBody[api.ExtendLeaseJSONRequestBody](r.Context())
	if body == nil {
		rt.ServerInterface.ExtendLease(w, r, realm, area, resource)
		return
	}
	resp, err := rt.s.ExtendLease(r.Context(), api.ExtendLeaseRequestObject{Realm: realm, Area: area, Resource: resource, Body: body})
	if err != nil {
		rt.s.writeError(w, r, err)
		return
	}
	if l, ok := resp.(api.ExtendLease200JSONResponse); ok {
		writeLease(rt.s, w, r, (*api.Lease)(&l))
		return
	}
	if err := resp.VisitExtendLeaseResponse(w); err != nil {
		rt.s.writeError(w, r, err)
	}
}

func (rt routes) ReleaseLease(w http.ResponseWriter, r *http.Request, realm api.Realm, area api.Area, resource api.Resource) {
	body := hotBody[api.ReleaseLeaseJSONRequestBody](r.Context())
	if body == nil {
		rt.ServerInterface.ReleaseLease(w, r, realm, area, resource)
		return
	}
	resp, err := rt.s.ReleaseLease(r.Context(), api.ReleaseLeaseRequestObject{Realm: realm, Area: area, Resource: resource, Body: body})
	if err != nil {
		rt.s.writeError(w, r, err)
		return
	}
	if err := resp.VisitReleaseLeaseResponse(w); err != nil {
		rt.s.writeError(w, r, err)
	}
}

// jsonContentType is shared by every hot answer; net/http never modifies a
// header's value slice.
var jsonContentType = []string{"application/json"}

var leaseBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// writeLease answers 200 with l, byte for byte what the generated response
// writes (encoding/json's Encoder, newline included; see
// TestAppendLeaseIsEncodingJSON), without reflection.
func writeLease(s *Server, w http.ResponseWriter, r *http.Request, l *api.Lease) {
	bp := leaseBufs.Get().(*[]byte)
	defer leaseBufs.Put(bp)
	b, ok := appendLease((*bp)[:0], l)
	if !ok {
		var err error
		if b, err = json.Marshal(l); err != nil {
			s.writeError(w, r, err)
			return
		}
		b = append(b, '\n')
	}
	*bp = b[:0]
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(b); err != nil {
		s.writeError(w, r, err)
	}
}

// appendLease appends l as encoding/json encodes it, and a newline. It
// reports false when l holds a value it does not write the way
// encoding/json does (a string needing escapes, a time MarshalJSON would
// refuse); the caller then uses encoding/json.
func appendLease(b []byte, l *api.Lease) ([]byte, bool) {
	ok := true
	b = append(b, `{"acquired_at":`...)
	b, ok = appendTime(b, l.AcquiredAt, ok)
	if l.ExpiresAfterRequestMs != nil {
		b = append(b, `,"expires_after_request_ms":`...)
		b = strconv.AppendInt(b, *l.ExpiresAfterRequestMs, 10)
	}
	b = append(b, `,"expires_at":`...)
	b, ok = appendTime(b, l.ExpiresAt, ok)
	b = append(b, `,"fencing_token":`...)
	b = strconv.AppendInt(b, l.FencingToken, 10)
	if l.Outcome != nil {
		b = append(b, `,"outcome":`...)
		b, ok = appendPlain(b, string(*l.Outcome), ok)
	}
	b = append(b, `,"renewals":`...)
	b = strconv.AppendInt(b, l.Renewals, 10)
	b = append(b, `,"route":`...)
	b, ok = appendPlain(b, l.Route, ok)
	return append(b, "}\n"...), ok
}

// appendPlain appends s quoted when encoding/json (HTML escaping on, as in
// its Encoder) would write it unchanged: printable ASCII without `"`, `\`,
// `<`, `>` and `&`.
func appendPlain(b []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			ok = false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ok
}

// appendTime appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), for the years and offsets it accepts.
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	_, offset := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || offset%60 != 0 || offset <= -24*3600 || offset >= 24*3600 {
		ok = false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), ok
}
