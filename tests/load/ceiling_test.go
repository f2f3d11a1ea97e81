package load

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/cmd/muster/app"
)

const clients = 32

// startBroker runs the real broker (the same Main as the binary) on a free
// loopback port, with the fleet store at storeURL ("" is bbolt in the data
// dir) and config as its token file ("" is dev mode).
func startBroker(b *testing.B, config string, storeURL ...string) *app.Main {
	b.Helper()
	dir := b.TempDir()
	m := app.NewMain()
	m.Addr, m.DataDir = "127.0.0.1:0", dir
	if len(storeURL) > 0 {
		m.StoreURL = storeURL[0]
	}
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if config != "" {
		m.ConfigPath = dir + "/muster.yaml"
		writeFile(b, m.ConfigPath, config)
	}
	if err := m.Open(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m
}

// startBare serves a trivial handler with nothing but net/http.
func startBare(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok","epoch":"bare"}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func get(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return nil
}

// BenchmarkCeiling compares one trivial request through the whole Muster
// stack (chi, epoch header, metrics, recoverer, contract validation) with the
// same trivial answer from a bare net/http handler, 32 keep-alive clients,
// same driver, same run.
func BenchmarkCeiling(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		url := startBare(b) + "/healthz"
		c := Client(clients)
		Parallel(b, clients, func(int) error { return get(c, url) })
	})
	b.Run("stack", func(b *testing.B) {
		url := startBroker(b, "").URL() + "/healthz"
		c := Client(clients)
		Parallel(b, clients, func(int) error { return get(c, url) })
	})
	b.Run("stack-auth-post", func(b *testing.B) {
		m := startBroker(b, tokenConfig)
		url := m.URL() + "/v1/sessions"
		c := Client(clients)
		Parallel(b, clients, func(int) error {
			req, _ := http.NewRequest("POST", url, strings.NewReader(`{"owner_id":"load","ttl_ms":1000}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer load-token")
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				return fmt.Errorf("create session: %d", resp.StatusCode)
			}
			return nil
		})
	})
}
