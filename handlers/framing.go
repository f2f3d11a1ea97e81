package handlers

import "net/http"

// closeAfterChunked closes the connection after answering an HTTP/1.1
// request whose body came with Transfer-Encoding.
//
// RFC 9112 §6.1: a request with both Transfer-Encoding and Content-Length
// is read by its Transfer-Encoding, and the server must close the
// connection after answering it, since a peer that framed it one way may
// have framed what follows the other (request smuggling). net/http removes
// Content-Length from such a request before any handler runs, so a
// handler cannot tell it from a request that was chunked alone: both are
// answered with `Connection: close`. Clients send bodies of known length
// with Content-Length (every SDK does), so this costs a chunked sender one
// new connection per request and nobody else anything. HTTP/2 has no
// Transfer-Encoding and is not affected.
func closeAfterChunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 && len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
