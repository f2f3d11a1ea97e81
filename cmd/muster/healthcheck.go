package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const healthcheckSynopsis = `  muster healthcheck [--addr HOST:PORT|URL] [--timeout DURATION]

GETs /healthz of the broker at --addr (default 127.0.0.1:7420; MUSTER_ADDR is
not read: this checks the broker on this host) and exits 0 when it answers
200, 1 otherwise. For a container's health check, where no curl exists.`

// healthcheck is `muster healthcheck`: exit 0 when the local broker's
// /healthz answers 200, 1 when it does not (or not within --timeout).
func healthcheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("muster healthcheck", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7420", "the broker: `HOST:PORT` or an http:// URL")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after `DURATION`")
	if done, code := parse(fs, healthcheckSynopsis, args, 0, stdout, stderr); done {
		return code
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "muster healthcheck: --timeout must be positive")
		return 2
	}
	base := strings.TrimRight(*addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		fmt.Fprintln(stderr, "muster healthcheck:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "muster healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "muster healthcheck: %s answered %s\n", base+"/healthz", resp.Status)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(string(body)))
	return 0
}
