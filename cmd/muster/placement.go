package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/musterhq/muster/clients/go/api"
)

// placementCommand is `muster placement show`: where the token's family is
// served in a multi-broker deployment (GET /v1/placement).
func placementCommand() func([]string, io.Writer, io.Writer) int {
	var to string
	var wait time.Duration
	return group("placement", "Where the token's family is served in a multi-broker deployment (docs/placement.md).", []subcommand{
		{name: "show", args: "", summary: "the broker serving the family, its claim, and the live brokers", nargs: [2]int{0, 0},
			run: func(ctx context.Context, cf *clientFlags, _ []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				var p api.Placement
				resp, err := c.Raw().GetPlacement(ctx)
				if err := call(resp, err, 200, &p); err != nil {
					return err
				}
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
				if p.Brokers != nil {
					var live []string
					for _, b := range *p.Brokers {
						live = append(live, b.Broker+"="+b.Addr)
					}
					kv = append(kv, "live_brokers", strings.Join(live, " "))
				}
				return printFields(out, kv...)
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
				var p api.Placement
				resp, err := c.Raw().GetPlacement(ctx)
				if err := call(resp, err, 200, &p); err != nil {
					return err
				}
				if p.Family != args[0] {
					return usageErr{fmt.Sprintf("the token is for family %s, not %s", p.Family, args[0])}
				}
				resp, err = c.Raw().MovePlacement(ctx, api.MovePlacementJSONRequestBody{To: to})
				if err := call(resp, err, 202, &p); err != nil {
					return err
				}
				deadline := time.Now().Add(wait)
				for to != "auto" && wait > 0 && (p.Owner == nil || p.Owner.Broker != to) {
					if time.Now().After(deadline) {
						return fmt.Errorf("pinned to %s, but the family has not moved there within %v", to, wait)
					}
					time.Sleep(100 * time.Millisecond)
					resp, err := c.Raw().GetPlacement(ctx)
					if err := call(resp, err, 200, &p); err != nil {
						return err
					}
				}
				if cf.json() {
					return printJSON(out, p)
				}
				kv := []any{"family", p.Family, "pinned", to}
				if o := p.Owner; o != nil {
					kv = append(kv, "owner", o.Broker, "owner_addr", o.Addr, "epoch", o.Epoch)
				}
				return printFields(out, kv...)
			}},
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
