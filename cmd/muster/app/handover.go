package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"time"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore/claims"
)

// Planned moves keep sessions (docs/placement.md). When the deployment
// moves a family on purpose (this broker stops, or another should serve
// it), the owner hands it over: the core exports the family's sessions and
// leases and stops serving it, the export is written with the release of
// the claim in one statement bound to the claim's epoch, and the next
// owner loads it as it acquires the claim. Meanwhile requests for the
// family are held here until the write is done and then sent to the next
// owner (Route), which names itself once it serves the family.

// handOver moves fam, held under c, to the broker to ("" for whichever
// acquires it next). When the export or the write fails the family's
// sessions are lost as in a crash: the claim is released (or expires).
func (p *placer) handOver(ctx context.Context, fam string, c claims.Claim, to, cause string) {
	done := make(chan struct{})
	p.mu.Lock()
	p.moving[fam] = done
	if addr := p.live[to]; addr != "" {
		p.movedTo[fam] = addr
	}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.moving, fam)
		p.mu.Unlock()
		close(done)
	}()
	salt := make([]byte, core.SaltLen)
	_, _ = rand.Read(salt)
	taken := time.Now()
	h, err := p.broker.Export(context.Background(), core.Family(fam), salt)
	if err != nil && muster.ErrorCode(err) != muster.CodeWrongBroker {
		return // the actor is gone: the claim expires on its own
	}
	p.unhold(fam)
	p.metrics.releases.Inc()
	p.metrics.moves.WithLabelValues(cause).Inc()
	if err != nil { // the deadline passed first: nothing to hand over
		p.giveUpClaim(ctx, fam, c)
		return
	}
	state, err := json.Marshal(h)
	if err == nil {
		var written bool
		written, err = p.store.Handover(ctx, c, to, state, time.Since(taken))
		if err == nil && !written {
			err = claims.ErrLost
		}
	}
	if err != nil {
		p.log.Warn("placement: handing a family over failed; its sessions are lost", "family", fam, "to", to, "err", err)
		p.metrics.handoverFailed.Inc()
		return
	}
	p.log.Info("placement: handed family over", "family", fam, "epoch", c.Epoch, "to", to, "sessions", len(h.Sessions), "bytes", len(state))
}

// giveUpClaim releases c, which this broker no longer serves.
func (p *placer) giveUpClaim(ctx context.Context, fam string, c claims.Claim) {
	if err := p.store.Release(ctx, c); err != nil {
		p.log.Warn("placement: releasing a claim failed; it expires on its own", "family", fam, "err", err)
		return
	}
	p.log.Info("placement: gave family up", "family", fam, "epoch", c.Epoch)
}

// serve starts serving fam under the newly acquired c: with the state its
// last owner handed over, when there is one the core accepts, else empty.
// It returns how many sessions were handed over.
func (p *placer) serve(fam string, c claims.Claim) (int, error) {
	epoch, until := core.PlacementEpoch(c.Epoch), c.Deadline()
	if c.Handover != nil {
		var h core.Handover
		err := json.Unmarshal(c.Handover.State, &h)
		if err == nil {
			transit := c.Handover.Age + time.Since(c.Sent) // never less than the time it took
			if err = p.broker.Import(context.Background(), core.Family(fam), epoch, until, h, transit); err == nil {
				return len(h.Sessions), nil
			}
		}
		p.log.Warn("placement: a handover could not be loaded; serving the family empty", "family", fam, "err", err)
		p.metrics.handoverFailed.Inc()
	}
	return 0, p.broker.Serve(context.Background(), core.Family(fam), epoch, until)
}

// routeWait bounds how long Route holds a request.
const routeWait = time.Second

// kickGap is the least time between two steps asked for by Route.
const kickGap = 20 * time.Millisecond

// Route implements handlers.Directory: where to send a request for a
// family this broker did not serve when the request arrived. A handover
// of the family under way here is waited for; otherwise the loop takes a
// fresh step (which acquires a family handed over to this broker), and the
// answer is this broker when it serves the family now, else Owner.
func (p *placer) Route(ctx context.Context, family string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, routeWait)
	defer cancel()
	p.mu.Lock()
	moving := p.moving[family]
	p.mu.Unlock()
	if moving != nil {
		select {
		case <-moving:
		case <-ctx.Done():
		}
	} else {
		p.fresh(ctx)
	}
	p.mu.Lock()
	serving := p.serving[family]
	p.mu.Unlock()
	if serving {
		return p.set.claims.Addr, true
	}
	if addr, ok := p.Owner(family); ok {
		return addr, true
	}
	return p.peer(family)
}

// peer is where a broker cut off from the claims sends the clients of a
// family it does not serve, once it has not read the claims for
// cutRedirect (by then a live peer has taken the family over): the peer it
// last saw alive that should serve the family without this broker, which
// knows the owner. Until then, and with no peer, it answers
// family_unavailable.
func (p *placer) peer(family string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.read.IsZero() || time.Since(p.read) < p.set.cutRedirect {
		return "", false
	}
	to := p.wantsWithoutSelf()[family]
	return p.live[to], to != ""
}

// fresh waits until a step that began after the call has ended, or ctx
// ends, or the loop stops.
func (p *placer) fresh(ctx context.Context) {
	p.mu.Lock()
	want := p.begun + 1
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	for {
		p.mu.Lock()
		ended, ch := p.ended, p.stepped
		p.mu.Unlock()
		if ended >= want {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-p.done:
			return
		}
	}
}
