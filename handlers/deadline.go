package handlers

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// DefaultBodyReadTimeout is how long a request body may take to arrive,
// counted from the moment its handler starts.
const DefaultBodyReadTimeout = 5 * time.Second

// bodyDeadline bounds the reading of every request body: a request that
// carries one (a Content-Length above zero, or chunked) gets a read
// deadline of now + timeout on its connection before anything else runs.
// It is lifted once the body is buffered (by net/http itself over HTTP/1,
// by the contract middleware on an HTTP/2 stream: liftBodyDeadline), so the
// connection's own close detection keeps working for a long-polling
// acquire. Everywhere the body is left unread — a 401, a 404, a 413 — the
// deadline stays, and it bounds the server's drain of the unread body after
// the answer: a client that trickles its body is cut off when the deadline
// passes, authenticated or not. Requests without a body (watch streams,
// LIST) get no deadline.
func bodyDeadline(timeout time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
				setReadDeadline(w, time.Now().Add(timeout))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// liftBodyDeadline clears the read deadline of a request whose body has
// been read in full. Over HTTP/1 net/http has already cleared it: reading
// the body to its end starts net/http's background read of the connection
// (its close detection), which lifts the connection's read deadline first,
// and the connection's next read is the next request's, under the
// server's own deadlines. So only an HTTP/2 stream's deadline is lifted
// here, saving a timer change on every HTTP/1 request.
func liftBodyDeadline(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		return
	}
	setReadDeadline(w, time.Time{})
}

// setReadDeadline sets the read deadline of w's connection (or HTTP/2
// stream); net/http's own writer is asked directly, without allocating a
// ResponseController.
func setReadDeadline(w http.ResponseWriter, t time.Time) {
	if d, ok := w.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(t)
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(t)
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
