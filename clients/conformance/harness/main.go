// Command harness is the Muster conformance harness: it runs the real broker
// (`muster serve`, the binary given by --broker) with the conformance tokens
// on a free loopback port, a gating proxy in front of it, and the scenario
// actors (Go SDK sessions), and serves a small control API so that an SDK's
// runner implements only the observer ops. See clients/conformance/README.md.
//
// It prints exactly one JSON line on stdout,
//
//	{"control":"http://127.0.0.1:P","broker":"http://127.0.0.1:Q","proxy":"http://127.0.0.1:R"}
//
// logs on stderr, and stops everything it started on SIGTERM, SIGINT or when
// its stdin closes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("broker", "", "path of the muster binary (required)")
	verbose := flag.Bool("v", false, "copy the broker's log and every control step to stderr")
	pgScripts := flag.String("pg-scripts", "", "the directory of tests/pg/start.sh and stop.sh, to start a private PostgreSQL for placed scenarios when MUSTER_TEST_PG_URL is not set")
	flag.Parse()
	log.SetPrefix("harness: ")
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if *bin == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: harness --broker PATH [--pg-scripts DIR] [-v]")
		os.Exit(2)
	}
	if err := serve(*bin, *pgScripts, *verbose, os.Stdin, os.Stdout); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

// startLine is the one line printed on stdout.
type startLine struct {
	Control string `json:"control"`
	Broker  string `json:"broker"`
	Proxy   string `json:"proxy"`
}

// serve runs until a signal arrives or stdin closes, then stops everything.
func serve(bin, pgScripts string, verbose bool, stdin io.Reader, stdout io.Writer) error {
	// Signals are caught from the start: a runner may stop the harness as
	// soon as it has read the line.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var brokerLogs io.Writer
	if verbose {
		brokerLogs = os.Stderr
	}
	b, err := newBroker(bin, brokerLogs)
	if err != nil {
		return err
	}
	defer b.close()

	p := newProxy(b.url())
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	proxySrv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = proxySrv.Serve(proxyLn) }()
	defer proxySrv.Close()

	logf := func(string, ...any) {}
	if verbose {
		logf = log.Printf
	}
	pg := &pgServer{scripts: pgScripts, state: filepath.Join(b.dir, "pg.state")}
	h := newHarness(b, p, pg, logf)
	h.proxyURL = "http://" + proxyLn.Addr().String()
	dead, err := deadAddr()
	if err != nil {
		return err
	}
	h.deadURL = "http://" + dead
	defer h.close()
	ctlLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctlSrv := &http.Server{Handler: h.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ctlSrv.Serve(ctlLn) }()
	defer ctlSrv.Close()

	line, _ := json.Marshal(startLine{
		Control: "http://" + ctlLn.Addr().String(),
		Broker:  b.url(),
		Proxy:   h.proxyURL,
	})
	if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
		return err
	}

	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
		log.Print("signal: stopping")
	case <-eof:
		log.Print("stdin closed: stopping")
	}
	// The deferred closes run in reverse: control server, scenario (and a
	// placed deployment, a private PostgreSQL), proxy, broker.
	return nil
}
