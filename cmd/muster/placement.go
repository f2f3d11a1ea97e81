package main

import (
	"context"
	"io"
	"strings"

	"github.com/musterhq/muster/clients/go/api"
)

// placementCommand is `muster placement show`: where the token's family is
// served in a multi-broker deployment (GET /v1/placement).
func placementCommand() func([]string, io.Writer, io.Writer) int {
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
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
