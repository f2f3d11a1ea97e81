package e2e

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawExchange sends the bytes of one request on its own connection to the
// broker, reads the answer, and reports whether the broker then closed the
// connection (read EOF within a second) rather than keeping it for another
// request.
func rawExchange(tb testing.TB, b *Broker, request string) (*http.Response, bool) {
	tb.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.URL(), "http://"))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		tb.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err = br.ReadByte()
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF):
		return resp, true
	case errors.As(err, &ne) && ne.Timeout():
		return resp, false
	case err == nil:
		tb.Fatalf("the broker sent bytes after its answer")
	}
	return resp, true // reset: closed too
}

// RFC 9112 §6.1: a request with both Transfer-Encoding and Content-Length
// may be served by its Transfer-Encoding, but the server must close the
// connection after answering it (the two framings are a smuggling attempt
// as often as a mistake, and what follows on the connection cannot be
// trusted). A request with one framing keeps its connection.
func TestChunkedWithContentLengthClosesTheConnection(t *testing.T) {
	b := MustStartBroker(t)
	const body = `{"owner_id":"w","ttl_ms":60000}`
	chunked := "1f\r\n" + body + "\r\n0\r\n\r\n"
	head := "POST /v1/sessions HTTP/1.1\r\nHost: muster\r\nContent-Type: application/json\r\n"
	tests := []struct {
		name      string
		request   string
		wantClose bool
	}{
		{"ContentLengthOnly", head + "Content-Length: 31\r\n\r\n" + body, false},
		{"ChunkedAndContentLength", head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, true},
		{"ContentLengthAndChunked", head + "Transfer-Encoding: chunked\r\nContent-Length: 31\r\n\r\n" + chunked, true},
		// The broker cannot tell this one from the two above (net/http
		// drops Content-Length before a handler runs), so it closes too.
		{"ChunkedOnly", head + "Transfer-Encoding: chunked\r\n\r\n" + chunked, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, closed := rawExchange(t, b, tc.request)
			if resp.StatusCode != 201 {
				t.Fatalf("status %d, want 201 (served by its Transfer-Encoding)", resp.StatusCode)
			}
			if closed != tc.wantClose {
				t.Fatalf("connection closed after the answer: %v, want %v", closed, tc.wantClose)
			}
			if tc.wantClose && !resp.Close {
				t.Fatalf("the answer does not say Connection: close (header %v)", resp.Header)
			}
		})
	}
}
