package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	muster "github.com/musterhq/muster/clients/go"
	"github.com/musterhq/muster/clients/go/api"
	"github.com/musterhq/muster/core"
)

// itemJSON is a held lease as `-o json` prints it (the contract's LeaseItem).
type itemJSON struct {
	Route             string    `json:"route"`
	OwnerID           string    `json:"owner_id"`
	HolderIncarnation string    `json:"holder_incarnation"`
	AcquiredAt        time.Time `json:"acquired_at"`
	ExpiresAt         time.Time `json:"expires_at"`
	RemainingMs       int64     `json:"remaining_ms"`
	Renewals          int64     `json:"renewals"`
}

func toItemJSON(it muster.Item) *itemJSON {
	return &itemJSON{Route: it.Route, OwnerID: it.OwnerID, HolderIncarnation: it.HolderIncarnation,
		AcquiredAt: it.AcquiredAt, ExpiresAt: it.ExpiresAt, RemainingMs: it.Remaining.Milliseconds(), Renewals: it.Renewals}
}

func itemRow(it muster.Item) []string {
	return []string{it.Route, it.OwnerID, when(it.ExpiresAt), it.Remaining.Truncate(time.Millisecond).String(), strconv.FormatInt(it.Renewals, 10)}
}

var itemHeader = []string{"ROUTE", "OWNER", "EXPIRES", "REMAINING", "RENEWALS"}

// leaseCommand is `muster lease …`.
func leaseCommand() func([]string, io.Writer, io.Writer) int {
	var (
		session string
		ttl     time.Duration
		wait    time.Duration
		fencing int64
		limit   int
		owner   string
	)
	leaseFlags := func(withTTL, withToken bool) func(fs *flag.FlagSet) {
		return func(fs *flag.FlagSet) {
			sessionFlag(fs, &session)
			if withTTL {
				fs.DurationVar(&ttl, "ttl", 30*time.Second, "lease `TTL` ("+span(core.MinLeaseTTL, core.MaxLeaseTTL)+")")
			}
			if withToken {
				fs.Int64Var(&fencing, "fencing-token", 0, "the lease's fencing `token` (from acquire)")
			}
		}
	}
	needSession := func() error {
		session = cmp.Or(session, os.Getenv("MUSTER_SESSION"))
		if session == "" {
			return usageErr{"no session: pass --session or set MUSTER_SESSION (muster session create)"}
		}
		return nil
	}
	// sessionRoute opens the commands that act for a session on one route:
	// a client, the route's segments, and the session (flag or environment).
	// The flags the command took are checked first: ttl (when withTTL),
	// the fencing token (withToken), wait (withWait).
	sessionRoute := func(cf *clientFlags, route string, withTTL, withToken, withWait bool) (c *muster.Client, realm, area, res string, err error) {
		var bad error
		if withTTL {
			bad = inSpan("ttl", ttl, core.MinLeaseTTL, core.MaxLeaseTTL)
		}
		if withWait && bad == nil {
			bad = inSpan("wait", wait, 0, core.MaxWait)
		}
		if withToken && bad == nil && fencing < 1 {
			bad = usageErr{"--fencing-token is required: the fencing token acquire printed (at least 1)"}
		}
		if bad != nil {
			return nil, "", "", "", bad
		}
		if c, err = cf.client(); err != nil {
			return nil, "", "", "", err
		}
		realm, area, res, err = splitRoute(route)
		if err := errors.Join(err, needSession()); err != nil {
			return nil, "", "", "", err
		}
		return c, realm, area, res, nil
	}
	printLease := func(cf *clientFlags, out io.Writer, l api.Lease) error {
		if cf.json() {
			return printJSON(out, l)
		}
		kv := []any{"route", l.Route, "fencing_token", l.FencingToken, "expires_at", when(l.ExpiresAt), "renewals", l.Renewals}
		if l.Outcome != nil {
			kv = append(kv, "outcome", string(*l.Outcome))
		}
		return printFields(out, kv...)
	}
	return group("lease", "Acquire, extend, release, read, list and watch leases, or hold one while a\ncommand runs (run).", []subcommand{
		{name: "acquire", args: "ROUTE", summary: "acquire an exact lease for a session (waiting up to --wait in its queue)", nargs: [2]int{1, 1},
			flags: func(fs *flag.FlagSet) {
				leaseFlags(true, false)(fs)
				fs.DurationVar(&wait, "wait", 0, "how long to wait when it is held ("+span(0, core.MaxWait)+")")
			},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, realm, area, res, err := sessionRoute(cf, args[0], true, false, true)
				if err != nil {
					return err
				}
				body := api.AcquireRequest{SessionId: session, TtlMs: ttl.Milliseconds()}
				if wait > 0 {
					w := wait.Milliseconds()
					body.WaitMs = &w
				}
				var l api.Lease
				resp, err := c.Raw().AcquireLease(ctx, realm, area, res, body)
				if err := call(resp, err, 200, &l); err != nil {
					return err
				}
				return printLease(cf, out, l)
			}},
		{name: "extend", args: "ROUTE", summary: "extend a held lease to now + --ttl", nargs: [2]int{1, 1}, flags: leaseFlags(true, true),
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, realm, area, res, err := sessionRoute(cf, args[0], true, true, false)
				if err != nil {
					return err
				}
				var l api.Lease
				resp, err := c.Raw().ExtendLease(ctx, realm, area, res, api.ExtendRequest{SessionId: session, FencingToken: fencing, TtlMs: ttl.Milliseconds()})
				if err := call(resp, err, 200, &l); err != nil {
					return err
				}
				return printLease(cf, out, l)
			}},
		{name: "release", args: "ROUTE", summary: "release a held lease", nargs: [2]int{1, 1}, flags: leaseFlags(false, true),
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, realm, area, res, err := sessionRoute(cf, args[0], false, true, false)
				if err != nil {
					return err
				}
				resp, err := c.Raw().ReleaseLease(ctx, realm, area, res, api.ReleaseRequest{SessionId: session, FencingToken: fencing})
				return call(resp, err, 204, nil)
			}},
		{name: "get", args: "ROUTE", summary: "show who holds one route, and how many wait for it", nargs: [2]int{1, 1},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				st, err := c.Get(ctx, leaseURI(args[0]))
				if err != nil {
					return err
				}
				if cf.json() {
					v := struct {
						Route   string    `json:"route"`
						Held    bool      `json:"held"`
						Holder  *itemJSON `json:"holder,omitempty"`
						Waiters int       `json:"waiters"`
					}{Route: st.Route, Held: st.Held, Waiters: st.Waiters}
					if st.Held {
						v.Holder = toItemJSON(st.Item)
					}
					return printJSON(out, v)
				}
				if !st.Held {
					return printFields(out, "route", st.Route, "held", "no", "waiters", st.Waiters)
				}
				return printFields(out, "route", st.Route, "held", "yes", "owner_id", st.Item.OwnerID,
					"expires_at", when(st.Item.ExpiresAt), "remaining", st.Item.Remaining, "renewals", st.Item.Renewals, "waiters", st.Waiters)
			}},
		{name: "list", args: "SELECTOR", summary: "list the held leases matching a selector (every page of one snapshot)", nargs: [2]int{1, 1},
			flags: func(fs *flag.FlagSet) {
				fs.IntVar(&limit, "limit", 0, "page `size` (1..500; 0 = the broker's default)")
			},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				var rows [][]string
				items := []*itemJSON{}
				for it, err := range c.List(ctx, leaseURI(args[0]), muster.ListOptions{Limit: limit}) {
					if err != nil {
						return err
					}
					rows = append(rows, itemRow(it))
					items = append(items, toItemJSON(it))
				}
				if cf.json() {
					return printJSON(out, items)
				}
				return printTable(out, itemHeader, rows)
			}},
		{name: "watch", args: "SELECTOR…", summary: "print the held leases, then every change as it happens, until Ctrl-C", nargs: [2]int{1, -1},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				sels := make([]string, len(args))
				for i, a := range args {
					sels[i] = leaseURI(a)
				}
				return watch(ctx, c, cf, sels, out)
			}},
		{name: "run", args: "ROUTE -- COMMAND [ARG…]", summary: "hold a lease while a command runs (renewed until it exits; killed if the lease is lost). Exit status: the command's, or 2 usage, 69 broker unavailable, 75 held by another, 76 lease lost, 127 command not started", nargs: [2]int{2, -1},
			flags: func(fs *flag.FlagSet) {
				fs.DurationVar(&ttl, "ttl", 30*time.Second, "lease `TTL` ("+span(core.MinLeaseTTL, core.MaxLeaseTTL)+"); renewed every third of it")
				fs.DurationVar(&wait, "wait", 0, "how long to wait for the lease when it is held (0: do not wait; no upper bound: queued again every "+short(core.MaxWait)+")")
				fs.StringVar(&owner, "owner", "", "owner `ID` shown in the inventory (default: the command's name)")
			},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				return runWithLease(ctx, c, leaseURI(args[0]), args[1:], ttl, wait, owner)
			}},
	})
}

// watch prints the marker's snapshot (every page), then each change, until
// ctx ends (errInterrupted: a clean exit). When the stream ends for a
// reason a new stream repairs (the broker restarted or shut down, the
// network failed, the stream overflowed), it says so on stderr and watches
// again, after 50 ms doubling to 2 s: a new snapshot follows, as the
// observer's recovery does. Other errors end it.
func watch(ctx context.Context, c *muster.Client, cf *clientFlags, selectors []string, out io.Writer) error {
	if !cf.json() {
		fmt.Fprintf(out, "%-8s %-15s %-40s %s\n", "REVISION", "KIND", "ROUTE", "OWNER")
	}
	delay := 50 * time.Millisecond
	for {
		printed, err := watchOnce(ctx, c, cf, selectors, out)
		var oe outputError
		switch {
		case ctx.Err() != nil || errors.Is(err, errInterrupted):
			return errInterrupted
		case errors.As(err, &oe) || muster.Advice(err) == muster.RetryNo:
			return err
		}
		if printed {
			delay = 50 * time.Millisecond
		}
		fmt.Fprintf(os.Stderr, "muster lease watch: %s; watching again in %v (a new snapshot follows)\n", displayf(err), delay)
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// watchOnce is one stream of watch; printed reports whether it got as far
// as its snapshot.
func watchOnce(ctx context.Context, c *muster.Client, cf *clientFlags, selectors []string, out io.Writer) (printed bool, err error) {
	sub, err := c.Watch(ctx, selectors...)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	m := sub.Marker()
	line := func(rev int64, kind, sel string, it *muster.Item, route string) error {
		if cf.json() {
			v := struct {
				Revision int64     `json:"revision"`
				Kind     string    `json:"kind"`
				Selector string    `json:"selector"`
				Route    string    `json:"route,omitempty"`
				Item     *itemJSON `json:"item,omitempty"`
			}{rev, kind, sel, route, nil}
			if it != nil {
				v.Item = toItemJSON(*it)
			}
			return output(printJSON(out, v))
		}
		owner := "-"
		if it != nil {
			owner = it.OwnerID
		}
		_, err := fmt.Fprintf(out, "%-8d %-15s %-40s %s\n", rev, display(kind), display(route), display(owner))
		return output(err)
	}
	for _, p := range m.Selectors {
		items, cursor := p.Items, p.NextCursor
		for {
			for _, it := range items {
				if err := line(m.Revision, "held", p.Selector, &it, it.Route); err != nil {
					return true, err
				}
			}
			if cursor == "" {
				break
			}
			page, err := c.ListPage(ctx, p.Selector, muster.ListOptions{Cursor: cursor})
			if err != nil {
				return true, err
			}
			items, cursor = page.Items, page.NextCursor
		}
		// The selector's snapshot is complete, even when it held nothing:
		// a script knows where the changes start.
		if err := line(m.Revision, "snapshot", p.Selector, nil, ""); err != nil {
			return true, err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return true, errInterrupted
		case ch, ok := <-sub.Events():
			if !ok {
				if ctx.Err() != nil {
					return true, errInterrupted
				}
				return true, sub.Err()
			}
			var it *muster.Item
			if ch.Kind == muster.Acquired {
				it = &ch.Item
			}
			if err := line(ch.Revision, string(ch.Kind), ch.Selector, it, ch.Route); err != nil {
				return true, err
			}
		}
	}
}

// outputError is a failure to write what watch prints (a closed pipe): it
// ends watch, whatever the stream does.
type outputError struct{ err error }

func (e outputError) Error() string { return e.err.Error() }
func (e outputError) Unwrap() error { return e.err }

func output(err error) error {
	if err != nil {
		return outputError{err}
	}
	return nil
}
