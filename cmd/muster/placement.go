package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	muster "github.com/musterhq/muster/clients/go"
	"github.com/musterhq/muster/clients/go/api"
)

// placementCommand is `muster placement show|move`: where the token's
// family is served in a multi-broker deployment (GET /v1/placement), and a
// manual planned move (POST /v1/placement/move).
func placementCommand() func([]string, io.Writer, io.Writer) int {
	var to string
	var wait time.Duration
	return group("placement", "Where the token's family is served in a multi-broker deployment (docs/placement.md).", []subcommand{
		{name: "show", args: "", summary: "the broker serving the family, its claim, its pin, and the live brokers", nargs: [2]int{0, 0},
			run: func(ctx context.Context, cf *clientFlags, _ []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				p, err := getPlacement(ctx, c)
				if err != nil {
					return err
				}
				return printPlacement(out, cf, p)
			}},
		{name: "move", args: "FAMILY", summary: "move the token's family to a broker, keeping its sessions and leases (--to BROKER, or --to auto to unpin)", nargs: [2]int{1, 1},
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&to, "to", "", "the live `BROKER` to move the family to (its placement.broker), or auto: back to the automatic choice")
				fs.DurationVar(&wait, "wait", 30*time.Second, "wait up to `D` for the move to be done (0: do not wait)")
			},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				if to == "" {
					return usageErr{"--to is required: a broker's name, or auto"}
				}
				c, err := cf.client()
				if err != nil {
					return err
				}
				p, err := movePlacement(ctx, c, args[0], to, wait)
				if err != nil {
					return err
				}
				return printPlacement(out, cf, p)
			}},
	})
}

func getPlacement(ctx context.Context, c *muster.Client) (api.Placement, error) {
	var p api.Placement
	resp, err := c.Raw().GetPlacement(ctx)
	return p, call(resp, err, 200, &p)
}

// movePlacement pins family (the token's) to the broker to and waits up
// to wait for that broker to serve it.
func movePlacement(ctx context.Context, c *muster.Client, family, to string, wait time.Duration) (api.Placement, error) {
	p, err := getPlacement(ctx, c)
	if err != nil {
		return p, err
	}
	if p.Family != family {
		return p, usageErr{fmt.Sprintf("the token is for family %s, not %s", p.Family, family)}
	}
	resp, err := c.Raw().MovePlacement(ctx, api.MovePlacementJSONRequestBody{To: to})
	if err := call(resp, err, 202, &p); err != nil {
		return p, err
	}
	deadline := time.Now().Add(wait)
	for to != "auto" && wait > 0 && (p.Owner == nil || p.Owner.Broker != to) {
		if time.Now().After(deadline) {
			return p, fmt.Errorf("pinned to %s, but the family has not moved there within %v", to, wait)
		}
		time.Sleep(100 * time.Millisecond)
		if p, err = getPlacement(ctx, c); err != nil {
			return p, err
		}
	}
	return p, nil
}

func printPlacement(out io.Writer, cf *clientFlags, p api.Placement) error {
	if cf.json() {
		return printJSON(out, p)
	}
	kv := []any{"family", p.Family, "placed", yesNo(p.Placed)}
	if p.Broker != nil {
		kv = append(kv, "answered_by", *p.Broker)
	}
	if o := p.Owner; o != nil {
		kv = append(kv, "owner", o.Broker, "owner_addr", o.Addr, "epoch", o.Epoch, "claim_expires_in", ms(o.ExpiresInMs))
	} else if p.Placed {
		kv = append(kv, "owner", "none (a failover is in progress)")
	}
	if p.Pinned != nil {
		kv = append(kv, "pinned", *p.Pinned)
	}
	if p.Brokers != nil {
		var live []string
		for _, b := range *p.Brokers {
			live = append(live, b.Broker+"="+b.Addr)
		}
		kv = append(kv, "live_brokers", strings.Join(live, " "))
	}
	return printFields(out, kv...)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
