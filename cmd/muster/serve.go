package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/musterhq/muster/cmd/muster/app"
)

const serveSynopsis = `  muster serve [--addr HOST:PORT] [--data-dir DIR] [--config FILE] [--store URL | --store-file FILE] [--insecure-dev]

Runs the broker until SIGTERM or SIGINT. Prints the URL to use on stdout and
logs JSON lines on stderr. Without --config it runs in dev mode (no tokens).
SIGHUP reads the configuration file again and applies its tokens, grants,
CORS origins, limits and log level without a restart (the epoch, sessions
and leases stay); a file that does not load changes nothing.`

// serve runs the broker: exit 0 after a clean shutdown, 1 when it cannot
// start or stops with an error, 2 for a usage error.
func serve(args []string, stdout, stderr io.Writer) int {
	m := app.NewMain()
	fs := flag.NewFlagSet("muster serve", flag.ContinueOnError)
	m.RegisterFlags(fs)
	if done, code := parse(fs, serveSynopsis, args, 0, stdout, stderr); done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Before Open: a SIGHUP that comes while the broker starts waits for it
	// instead of ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := m.OpenContext(ctx); err != nil {
		if ctx.Err() != nil { // SIGTERM while waiting for the fleet store
			fmt.Fprintln(stderr, "muster: stopped before serving:", err)
			return 0
		}
		fmt.Fprintln(stderr, "muster:", err)
		return 1
	}
	url, note := localURL(m.URL())
	fmt.Fprintf(stdout, "muster is serving on %s%s\n  API docs (Swagger UI): %s/docs/\n  live dashboard:        %s/ui/\n  contract:              %s/openapi.yaml\n",
		url, note, url, url, url)
	done := make(chan error, 1)
	go func() { done <- m.Wait() }()
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-hup:
			_ = m.Reload() // logged and counted; a failure keeps the configuration
		case err := <-done:
			fmt.Fprintln(stderr, "muster:", err)
			return 1
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(shutdown); err != nil {
		fmt.Fprintln(stderr, "muster: shutdown:", err)
		return 1
	}
	return 0
}

const tokenSynopsis = `  muster token

Draws 32 random bytes and prints them as a token (hex) and the SHA-256 of
that text: give the token to the client, put the sha256 line in the
configuration file (see docs/operations.md).`

// token prints a new random token and its hash.
func token(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("muster token", flag.ContinueOnError)
	if done, code := parse(fs, tokenSynopsis, args, 0, stdout, stderr); done {
		return code
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		fmt.Fprintln(stderr, "muster token:", err)
		return 1
	}
	tok := hex.EncodeToString(secret)
	sum := sha256.Sum256([]byte(tok))
	fmt.Fprintf(stdout, "token:  %s\nsha256: %s\n", tok, hex.EncodeToString(sum[:]))
	return 0
}

// localURL is the URL a client on this machine uses: a broker listening on
// every interface (0.0.0.0, ::) is reached on the loopback address.
func localURL(u string) (url, note string) {
	scheme, hostport, _ := strings.Cut(u, "://")
	host, port, err := net.SplitHostPort(hostport)
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
		return scheme + "://" + net.JoinHostPort("127.0.0.1", port), " (listening on every interface)"
	}
	return u, ""
}
