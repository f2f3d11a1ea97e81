package app

import (
	"context"
	"maps"

	"github.com/musterhq/muster"
)

// Manual moves (docs/placement.md, "Which broker serves which family"): a
// pin recorded in the claims' database at run time, read by every broker
// each round, wins over the configuration's placement.pinned. The owner
// hands the family over to the pinned broker at its next round, as any
// planned move.

// Move implements handlers.Directory: it pins family to the live broker
// to, or removes the family's pin (to "auto"), and runs this broker's
// loop at once.
func (p *placer) Move(ctx context.Context, family, to string) error {
	if to == "auto" {
		to = ""
	} else {
		p.mu.Lock()
		_, live := p.live[to]
		p.mu.Unlock()
		if !live {
			return muster.Errorf(muster.CodeInvalidRequest, "to names no live broker of the deployment (GET /v1/placement lists them)")
		}
	}
	if err := p.store.Pin(ctx, family, to); err != nil {
		p.log.Warn("placement: recording a pin failed", "family", family, "err", err)
		return muster.Errorf(muster.CodeUnavailable, "the pin could not be recorded: retry")
	}
	p.log.Info("placement: family pinned", "family", family, "to", to)
	p.fresh(ctx)
	return nil
}

// pinned is the pins in force: the configuration's, overridden by those
// recorded at run time.
func (p *placer) pinned() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pinnedLocked()
}

func (p *placer) pinnedLocked() map[string]string {
	out := maps.Clone(p.set.pinned)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, p.pins)
	return out
}
