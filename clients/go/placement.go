package muster

import (
	"context"
	"time"

	"github.com/musterhq/muster/clients/go/api"
)

// Placement is where the caller's family is served (docs/placement.md), as
// the answering broker last read the claims.
type Placement struct {
	Family string
	Placed bool   // a multi-broker deployment
	Broker string // the broker that answered ("" when not placed)
	// Owner holds the family's live claim; nil when none does (a failover
	// in progress) or when not placed.
	Owner   *PlacementOwner
	Brokers []PlacementBroker // the live brokers, by name
}

// PlacementOwner is the broker holding a family's claim.
type PlacementOwner struct {
	Broker, Addr string
	Epoch        int64
	ExpiresIn    time.Duration // left on the claim unless renewed
}

// PlacementBroker is one live broker of the deployment.
type PlacementBroker struct{ Broker, Addr string }

// Placement asks where the caller's family is served. Any broker answers;
// the token needs read on some lease pattern of its family.
func (c *Client) Placement(ctx context.Context) (Placement, error) {
	var p api.Placement
	resp, err := c.raw.GetPlacement(ctx)
	if err := c.call(resp, err, 200, &p); err != nil {
		return Placement{}, err
	}
	out := Placement{Family: p.Family, Placed: p.Placed}
	if p.Broker != nil {
		out.Broker = *p.Broker
	}
	if o := p.Owner; o != nil {
		out.Owner = &PlacementOwner{Broker: o.Broker, Addr: o.Addr, Epoch: o.Epoch, ExpiresIn: time.Duration(o.ExpiresInMs) * time.Millisecond}
	}
	if p.Brokers != nil {
		for _, b := range *p.Brokers {
			out.Brokers = append(out.Brokers, PlacementBroker{Broker: b.Broker, Addr: b.Addr})
		}
	}
	return out, nil
}
