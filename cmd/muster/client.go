package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// The client commands (session, lease, fleet) talk to a broker through the
// Go SDK. They read MUSTER_ADDR, MUSTER_TOKEN and MUSTER_CA_FILE (flags
// override), print
// tables for people by default and JSON with -o json, and exit 0 on
// success, 1 when the broker (or the network) refuses, 2 on a usage error.

// DefaultClientAddr is the broker a client command talks to without
// MUSTER_ADDR or --addr: `muster serve`'s default.
const DefaultClientAddr = "http://127.0.0.1:7420"

// clientFlags are the flags every client command takes.
type clientFlags struct {
	addr, token, output, caFile string
}

// register defines the flags. Their defaults come from the environment
// after parsing, so that --help never prints a token or a session id.
func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "", "broker `URL`, or several separated by commas (default $MUSTER_ADDR, else "+DefaultClientAddr+")")
	fs.StringVar(&c.token, "token", "", "bearer `token` (default $MUSTER_TOKEN; none in dev mode)")
	fs.StringVar(&c.output, "o", "table", "output `format`: table or json")
	fs.StringVar(&c.caFile, "ca-file", "", "trust the CA certificates in PEM `FILE` for an https:// broker (default $MUSTER_CA_FILE, else the system's)")
}

// client checks the flags and builds the SDK client.
func (c *clientFlags) client() (*muster.Client, error) {
	if c.output != "table" && c.output != "json" {
		return nil, usageErr{fmt.Sprintf("-o must be table or json, not %q", c.output)}
	}
	// Several brokers are separated by commas (docs/client-operations.md,
	// "Several brokers"); each without a scheme is http.
	addrs := strings.Split(cmp.Or(c.addr, os.Getenv("MUSTER_ADDR"), DefaultClientAddr), ",")
	for i, a := range addrs {
		if a = strings.TrimSpace(a); !strings.Contains(a, "://") {
			a = "http://" + a
		}
		addrs[i] = a
	}
	addr := strings.Join(addrs, ",")
	var opts []muster.Option
	if token := cmp.Or(c.token, os.Getenv("MUSTER_TOKEN")); token != "" {
		opts = append(opts, muster.WithToken(token))
	}
	opts = append(opts, muster.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}))
	if ca := cmp.Or(c.caFile, os.Getenv("MUSTER_CA_FILE")); ca != "" {
		opts = append(opts, muster.WithCAFile(ca))
	}
	mc, err := muster.New(addr, opts...)
	if err != nil {
		return nil, usageErr{err.Error()}
	}
	return mc, nil
}

func (c *clientFlags) json() bool { return c.output == "json" }

// usageErr is a usage error found after flag parsing (exit 2).
type usageErr struct{ msg string }

func (e usageErr) Error() string { return e.msg }

// subcommand is one verb of a command group (`muster lease acquire`).
type subcommand struct {
	name, args, summary string
	run                 func(ctx context.Context, cf *clientFlags, args []string, stdout io.Writer) error
	flags               func(fs *flag.FlagSet)
	nargs               [2]int // min and max positional arguments (max -1: any)
	// own, if set, runs the verb instead, with flags of its own: for the
	// verbs that open the store rather than talk to a broker.
	own func(args []string, stdout, stderr io.Writer) int
}

// group dispatches `muster NAME VERB …` to its subcommands.
func group(name, summary string, subs []subcommand) func([]string, io.Writer, io.Writer) int {
	usage := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "usage:\n  muster %s VERB [flags] ARGS\n\n%s\n\nverbs:\n", name, summary)
		for _, s := range subs {
			fmt.Fprintf(&b, "  %-10s %s\n", s.name, s.summary)
		}
		fmt.Fprintf(&b, "\nRun 'muster %s VERB --help' for the flags of a verb. Every verb reads\nMUSTER_ADDR and MUSTER_TOKEN; -o json prints JSON for scripts.\n", name)
		return b.String()
	}
	return func(args []string, stdout, stderr io.Writer) int {
		if len(args) == 0 {
			fmt.Fprintf(stderr, "muster %s: no verb given\n\n%s", name, usage())
			return 2
		}
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(stdout, usage())
			return 0
		}
		for _, s := range subs {
			if s.name == args[0] && s.own != nil {
				return s.own(args[1:], stdout, stderr)
			}
			if s.name == args[0] {
				return runSub(name, s, args[1:], stdout, stderr)
			}
		}
		fmt.Fprintf(stderr, "muster %s: unknown verb %q\n\n%s", name, args[0], usage())
		return 2
	}
}

// runSub parses a verb's flags and arguments and runs it; SIGINT and
// SIGTERM cancel its context.
func runSub(group string, s subcommand, args []string, stdout, stderr io.Writer) int {
	full := "muster " + group + " " + s.name
	fs := flag.NewFlagSet(full, flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	if s.flags != nil {
		s.flags(fs)
	}
	synopsis := fmt.Sprintf("  %s [flags] %s\n\n%s", full, s.args, s.summary)
	pos, done, code := parseInterspersed(fs, synopsis, args, s.nargs[1], stdout, stderr)
	if done {
		return code
	}
	if len(pos) < s.nargs[0] {
		fmt.Fprintf(stderr, "%s: expected %s\n\n", full, s.args)
		printUsage(fs, synopsis, stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := s.run(ctx, &cf, pos, stdout)
	var ue usageErr
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\n\n", full, err)
		printUsage(fs, synopsis, stderr)
		return 2
	case errors.Is(err, errInterrupted):
		return 0
	}
	var ee exitErr
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(stderr, "%s: %s\n", full, display(ee.msg))
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "%s: %s\n", full, display(strings.TrimPrefix(err.Error(), "muster: ")))
	return 1
}

// errInterrupted ends a command that was stopped on purpose (Ctrl-C on a
// watch): exit 0, nothing printed.
var errInterrupted = errors.New("interrupted")

// exitErr ends a command with a given exit code (`lease run` passes on the
// command's own).
type exitErr struct {
	code int
	msg  string
}

func (e exitErr) Error() string { return e.msg }

// printJSON writes v as one line of JSON, its unprintable characters
// escaped (escapeJSON).
func printJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSON(b.Bytes()))
	return err
}

// printFields writes name/value pairs as two aligned columns, each value
// through display.
func printFields(w io.Writer, kv ...any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s\t%s\n", displayf(kv[i]), displayf(kv[i+1]))
	}
	return tw.Flush()
}

// printTable writes a header and rows as aligned columns, each cell
// through display.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				io.WriteString(tw, "\t")
			}
			io.WriteString(tw, display(c))
		}
		io.WriteString(tw, "\n")
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	return tw.Flush()
}

// call decodes the answer of a raw SDK call the way the SDK does: want is
// the success status; anything else becomes a *muster.Error from the
// problem body.
func call(resp *http.Response, err error, want int, out any) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		var p struct {
			Code   string `json:"code"`
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(body, &p) != nil || p.Code == "" {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
		}
		return &muster.Error{Code: muster.Code(p.Code), Status: resp.StatusCode, Title: p.Title, Detail: p.Detail}
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// sessionFlag is --session (default $MUSTER_SESSION, read by sessionID).
func sessionFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "session", "", "session `ID` from 'muster session create' (default $MUSTER_SESSION)")
}

// leaseURI adds the scheme to a route or selector given without it
// ("acme/r/doc-1" is lease://acme/r/doc-1).
func leaseURI(s string) string {
	if strings.Contains(s, "://") {
		return s
	}
	return "lease://" + s
}

// splitRoute takes lease://realm/area/resource (or realm/area/resource)
// apart.
func splitRoute(s string) (realm, area, resource string, err error) {
	parts := strings.Split(strings.TrimPrefix(s, "lease://"), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", usageErr{fmt.Sprintf("route %q: want lease://realm/area/resource", s)}
	}
	return parts[0], parts[1], parts[2], nil
}

// span is the help text of a duration flag's bounds, "100ms..10m", from the
// broker's own constants (core), so the help never states other limits.
func span(lo, hi time.Duration) string { return short(lo) + ".." + short(hi) }

// inSpan refuses a duration flag outside lo..hi as a usage error, before any
// request: the broker would refuse it as a field error of its body.
func inSpan(flag string, d, lo, hi time.Duration) error {
	if d < lo || d > hi {
		return usageErr{fmt.Sprintf("--%s %v is outside %s", flag, d, span(lo, hi))}
	}
	return nil
}

// short formats d without zero trailing units: 10m, 30s, 100ms, 0.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	if s == "0s" {
		s = "0"
	}
	return s
}

// ms formats a millisecond count as a duration.
func ms(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

// when formats a time for a table: RFC 3339 in UTC, to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
