package sse

//lint:file-ignore SA1019 x/net/http2 and its h2c handler are deprecated in favour of http.Protocols (used by startH2C); they are kept here to prove streams also work behind the x/net HTTP/2 server.

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// startXNetH2C starts a server that serves HTTP/2 cleartext through
// golang.org/x/net/http2/h2c; the client is an http2.Transport with
// AllowHTTP that dials plain TCP.
func startXNetH2C(tb testing.TB, h http.Handler) (*httptest.Server, *http.Client) {
	tb.Helper()
	srv := httptest.NewServer(h2c.NewHandler(h, &http2.Server{}))
	dials := mustTrackDials(tb, srv)
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return dials.dial(ctx, network, addr)
		},
	}
	return srv, &http.Client{Transport: tr}
}
