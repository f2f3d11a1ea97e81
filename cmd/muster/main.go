// Command muster is the Muster lease broker and its command-line client.
//
//	muster serve [flags]   run the broker
//	muster token           print a new random token and the sha256 line for the config
//	muster session …       create|keepalive|end
//	muster lease …         acquire|extend|release|get|list|watch|run
//	muster fleet …         register|forget|desired|plan|gap|sweep|export|import
//	muster placement show  where the token's family is served
//	muster backup …        copy the running broker's bbolt store to a file
//	muster reload          reload the running broker's configuration file
//	muster healthcheck     exit 0 when the local broker answers /healthz
//
// Every command answers --help (exit 0) and refuses a usage error with a
// message on stderr (exit 2). `muster help` lists the commands.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/musterhq/muster/fleetstore/judge"
)

// command is one verb of the binary.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands lists the verbs in the order the usage shows them.
func commands() []command {
	return []command{
		{"serve", "run the broker", serve},
		{"token", "print a new random token and the sha256 line for the configuration file", token},
		{"session", "create, keep alive and end sessions (create|keepalive|end)", sessionCommand()},
		{"lease", "leases: acquire|extend|release|get|list|watch, and run a command holding one", leaseCommand()},
		{"fleet", "the desired set: register|forget|desired|plan|gap|sweep|export|import", fleetCommand()},
		{"placement", "where the token's family is served in a multi-broker deployment (show)", placementCommand()},
		{"backup", "copy the running broker's bbolt fleet store to a file, online", backup},
		{"reload", "make the running broker read its configuration file again (as SIGHUP), and say whether it took", reload},
		{"version", "print the version and commit of this binary (also --version)", version},
		{"healthcheck", "exit 0 when the broker on this host answers /healthz (a container's health check)", healthcheck},
	}
}

// usage is the top-level help.
func usage() string {
	var b strings.Builder
	b.WriteString("Muster is a lease broker for worker fleets.\n\nusage:\n  muster COMMAND [flags]\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-11s %s\n", c.name, c.summary)
	}
	b.WriteString(`
  muster serve [--addr HOST:PORT] [--data-dir DIR] [--config FILE] [--store URL | --store-file FILE] [--insecure-dev]

The client commands (session, lease, fleet) talk to the broker at
MUSTER_ADDR (default http://127.0.0.1:7420; several brokers of one
deployment separated by commas) with the token MUSTER_TOKEN; --addr and
--token override them, -o json prints JSON.

Run 'muster COMMAND --help' for the flags of a command.
`)
	return b.String()
}

func main() {
	judge.Main() // a sweep's worker process serves here and exits
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "muster: no command given\n\n"+usage())
		return 2
	}
	switch args[0] {
	case "--version", "-version":
		return version(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[0] == "help" {
			for _, c := range commands() {
				if c.name == args[1] {
					return c.run([]string{"--help"}, stdout, stderr)
				}
			}
			fmt.Fprintf(stderr, "muster help: unknown command %q\n\n%s", args[1], usage())
			return 2
		}
		fmt.Fprint(stdout, usage())
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "muster: unknown command %q\n\n%s", args[0], usage())
	return 2
}
