package main

import (
	"context"
	"flag"
	"io"
	"os"
	"time"

	"github.com/musterhq/muster/clients/go/api"
	"github.com/musterhq/muster/core"
)

// sessionCommand is `muster session create|keepalive|end`: a session that
// outlives the command, for the lease verbs that take --session. (`muster
// lease run` makes and ends its own.)
func sessionCommand() func([]string, io.Writer, io.Writer) int {
	var owner string
	var ttl time.Duration
	return group("session", "Create, keep alive and end sessions. A session is a worker's liveness: every\nlease belongs to one, and ends with it.", []subcommand{
		{name: "create", args: "", summary: "create a session; prints its id (export it as MUSTER_SESSION)", nargs: [2]int{0, 0},
			flags: func(fs *flag.FlagSet) {
				host, _ := os.Hostname()
				fs.StringVar(&owner, "owner", "cli@"+host, "owner `ID` shown in the inventory")
				fs.DurationVar(&ttl, "ttl", 10*time.Minute, "session `TTL` ("+span(core.MinSessionTTL, core.MaxSessionTTL)+"): keep it alive within it")
			},
			run: func(ctx context.Context, cf *clientFlags, _ []string, out io.Writer) error {
				if err := inSpan("ttl", ttl, core.MinSessionTTL, core.MaxSessionTTL); err != nil {
					return err
				}
				c, err := cf.client()
				if err != nil {
					return err
				}
				var s api.Session
				resp, err := c.Raw().CreateSession(ctx, api.CreateSessionRequest{OwnerId: owner, TtlMs: ttl.Milliseconds()})
				if err := call(resp, err, 201, &s); err != nil {
					return err
				}
				if cf.json() {
					return printJSON(out, s)
				}
				return printFields(out, "session_id", s.SessionId, "owner_id", s.OwnerId, "ttl", ms(s.TtlMs),
					"expires_at", when(s.ExpiresAt), "epoch", s.Epoch)
			}},
		{name: "keepalive", args: "SESSION_ID", summary: "move a session's expiry to now + its TTL", nargs: [2]int{1, 1},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				var k api.Keepalive
				resp, err := c.Raw().KeepaliveSession(ctx, args[0])
				if err := call(resp, err, 200, &k); err != nil {
					return err
				}
				if cf.json() {
					return printJSON(out, k)
				}
				return printFields(out, "expires_at", when(k.ExpiresAt), "ttl", ms(k.TtlMs))
			}},
		{name: "end", args: "SESSION_ID", summary: "end a session: every lease it holds is released", nargs: [2]int{1, 1},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				resp, err := c.Raw().DeleteSession(ctx, args[0])
				return call(resp, err, 204, nil)
			}},
	})
}
