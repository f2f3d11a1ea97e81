package app

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore/claims"
	"github.com/musterhq/muster/handlers"
)

// placer is one broker's placement loop (docs/placement.md): every
// renewEvery it heartbeats, renews the claims it holds (and moves the core's
// serving deadline after each), gives up the families another live broker
// should serve (a planned move: the core drops the family first, then the
// claim is released), and acquires the families it should serve that no
// live claim holds. It is the only writer of claims and the only caller of
// the core's Serve and Unserve. It also answers handlers.Directory from the
// owners it last read.
type placer struct {
	store   *claims.Store
	broker  *core.Broker
	set     *placementSettings
	log     *slog.Logger
	self    string
	held    map[string]claims.Claim // touched by the loop goroutine only
	beating time.Time               // since when every round heartbeated (loop goroutine only)
	// unowned: since when each family without a live claim has been seen
	// so (loop goroutine only).
	unowned  map[string]time.Time
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	started  bool

	kick chan struct{} // a request asks for a fresh step (Route)

	mu     sync.Mutex
	pins   map[string]string       // the pins recorded at run time (Move), as last read
	read   time.Time               // when the claims were last read
	owners map[string]claims.Owner // the last read of the table
	live   map[string]string       // the live brokers then, with their addresses
	// serving mirrors held's families for Route; moving has a channel per
	// family whose handover is being written, closed when it is done;
	// movedTo names where a family handed over went until a read of the
	// table shows its new owner (handover.go).
	serving map[string]bool
	moving  map[string]chan struct{}
	movedTo map[string]string
	// begun and ended count the steps; stepped is closed at the end of
	// each (and replaced).
	begun, ended uint64
	stepped      chan struct{}

	metrics *placementMetrics
}

func newPlacer(store *claims.Store, broker *core.Broker, set *placementSettings, log *slog.Logger) *placer {
	return &placer{store: store, broker: broker, set: set, log: log, self: set.claims.Broker,
		held: map[string]claims.Claim{}, unowned: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{}), owners: map[string]claims.Owner{},
		kick: make(chan struct{}, 1), serving: map[string]bool{}, moving: map[string]chan struct{}{}, movedTo: map[string]string{},
		stepped: make(chan struct{}), metrics: newPlacementMetrics()}
}

// start runs the loop; its first step runs at once. A step runs every
// renewEvery, and also at the moment another broker's claim may be taken
// (takeoverAt): a crashed owner's families move at expires_at + margin,
// not up to a round later.
func (p *placer) start() {
	p.started = true
	go func() {
		defer close(p.done)
		t := time.NewTimer(0)
		defer t.Stop()
		var last time.Time
		for {
			select {
			case <-t.C:
			case <-p.kick:
				// Kicked steps come at most every kickGap.
				select {
				case <-time.After(time.Until(last.Add(kickGap))):
				case <-p.stop:
					return
				}
			case <-p.stop:
				return
			}
			last = time.Now()
			p.mu.Lock()
			p.begun++
			p.mu.Unlock()
			next := p.step()
			p.mu.Lock()
			p.ended = p.begun
			close(p.stepped)
			p.stepped = make(chan struct{})
			p.mu.Unlock()
			t.Reset(time.Until(next))
		}
	}()
}

// takeoverSlack is how long after a claim's expiry plus margin (by this
// broker's reading of the server's clock) the step that may take it runs:
// the reading comes before the server's now(), so it is early by up to
// the query's time.
const takeoverSlack = 50 * time.Millisecond

// takeoverAt is the earliest moment, after now, at which a live claim of
// another broker on one of the deployment's families may be taken over if
// it is not renewed; zero when there is none.
func (p *placer) takeoverAt(owners map[string]claims.Owner, now time.Time) time.Time {
	var at time.Time
	for _, fam := range p.set.families {
		o, ok := owners[fam]
		if !ok || !o.Live || o.Broker == p.self {
			continue
		}
		if t := o.Until.Add(p.set.claims.Margin + takeoverSlack); t.After(now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	return at
}

// close stops the loop, leaves the broker table, then hands every held
// family over (a planned move, handover.go) to the broker that should
// serve it without this one, so that its sessions and leases live on
// there; with no other broker live, to whichever acquires it next (this
// broker restarted within the sessions' TTLs, say).
func (p *placer) close() {
	p.stopOnce.Do(func() { close(p.stop) })
	if p.started {
		<-p.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.store.Leave(ctx); err != nil {
		p.log.Warn("placement: leaving the broker table failed", "err", err)
	}
	p.mu.Lock()
	wants := p.wantsWithoutSelf()
	p.mu.Unlock()
	for _, fam := range sortedKeys(p.held) {
		p.handOver(ctx, fam, p.held[fam], wants[fam], "shutdown")
	}
	p.store.Close()
}

// Owner implements handlers.Directory: the owner of the family's live claim
// as of the last read of the table, unless that broker's heartbeat had
// expired by then (a broker that stopped heartbeating is never named).
func (p *placer) Owner(family string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.owners[family]
	if to, moved := p.movedTo[family]; moved && (!ok || !o.Live || o.Broker == p.self) {
		return to, true // handed over; the table read before that says nothing newer
	}
	if !ok || !o.Live || o.Broker == p.self || !time.Now().Before(o.Until) {
		return "", false
	}
	if _, alive := p.live[o.Broker]; !alive {
		return "", false
	}
	return o.Addr, true
}

// Describe implements handlers.Directory: family's live claim and the live
// brokers, as the loop last read them.
func (p *placer) Describe(family string) handlers.PlacementView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := handlers.PlacementView{Self: p.self, Pinned: p.pinnedLocked()[family]}
	if o, ok := p.owners[family]; ok && o.Live {
		left := max(0, time.Until(o.Until))
		v.Owner = &api.PlacementOwner{Broker: o.Broker, Addr: o.Addr, Epoch: int64(o.Epoch), ExpiresInMs: left.Milliseconds()}
	}
	for _, b := range sortedKeys(p.live) {
		v.Brokers = append(v.Brokers, api.PlacementBroker{Broker: b, Addr: p.live[b]})
	}
	return v
}

// step is one round, bounded by renewEvery. It returns when the next one
// is due: renewEvery after it started, or earlier at takeoverAt.
func (p *placer) step() (next time.Time) {
	start := time.Now()
	next = start.Add(p.set.renewEvery)
	ctx, cancel := context.WithTimeout(context.Background(), p.set.renewEvery)
	defer cancel()
	// Renewals first: they are what keeps the families served. A failed
	// renewal is tried again every renewRetry within the round (and the
	// next round goes on), so that PostgreSQL back within the serving
	// deadline costs nothing: waiting a whole round could let the deadline
	// pass (a 4 s restart dropped every family at the default timing).
	for attempt := 0; p.renewAll(ctx, attempt == 0) != nil; attempt++ {
		select {
		case <-ctx.Done():
			p.beating = time.Time{}
			return
		case <-p.stop:
			return
		case <-time.After(min(renewRetry, p.set.renewEvery/4)):
		}
	}
	if err := p.store.Heartbeat(ctx); err != nil {
		p.log.Warn("placement: heartbeat failed", "err", err)
		p.beating = time.Time{}
		return
	}
	if p.beating.IsZero() {
		p.beating = start
	}
	addrs, err := p.store.LiveAddrs(ctx)
	if err != nil {
		p.log.Warn("placement: reading the live brokers failed", "err", err)
		return
	}
	live := sortedKeys(addrs)
	owners, err := p.store.Owners(ctx)
	if err != nil {
		p.log.Warn("placement: reading the claims failed", "err", err)
		return
	}
	pins, err := p.store.Pins(ctx)
	if err != nil {
		p.log.Warn("placement: reading the pins failed", "err", err)
		return
	}
	p.mu.Lock()
	p.owners, p.live, p.pins, p.read = owners, addrs, pins, time.Now()
	for fam := range p.movedTo {
		if o := owners[fam]; o.Live && o.Broker != p.self {
			delete(p.movedTo, fam)
		}
	}
	p.mu.Unlock()
	// No herd: a broker takes free families only once it has heartbeated
	// for a whole round, so that brokers starting together (a cold start,
	// the end of a PostgreSQL outage) see each other first, and each
	// family is acquired once, by its desired owner, instead of by the
	// first broker up and handed away a round later.
	settled := !start.Before(p.beating.Add(p.set.renewEvery))
	wants := desiredOwners(p.set.families, live, p.pinned(), currentOwners(owners))
	for _, fam := range p.set.families {
		want := wants[fam]
		c, holding := p.held[fam]
		switch {
		case holding && want != p.self && want != "":
			p.handOver(ctx, fam, c, want, "rebalance")
		case !holding && !owners[fam].Live && (want == p.self && settled || owners[fam].Released && owners[fam].HandoverTo == p.self):
			if p.acquire(ctx, fam, acquireCause(owners[fam])) && owners[fam].Broker != "" {
				// Expired, but its margin has not passed by the server's
				// clock (the takeover step ran early by the query's
				// latency): try again shortly rather than a round later.
				next = time.Now().Add(takeoverRetry)
			}
		}
	}
	now := time.Now()
	if at := p.takeoverAt(owners, now); !at.IsZero() {
		next = minTime(next, at)
	}
	// A family another broker should take has no live claim: read the
	// table again every takeoverPoll rather than at the next round, so that
	// this broker names the new owner within a fraction of a second of the
	// takeover; for one claim TTL at most from when the family was first
	// seen unowned (a takeover comes within its margin and a round).
	for _, fam := range p.set.families {
		if owners[fam].Live {
			delete(p.unowned, fam)
			continue
		}
		since, seen := p.unowned[fam]
		if !seen {
			since = now
			p.unowned[fam] = now
		}
		if wants[fam] != p.self && wants[fam] != "" && now.Sub(since) < p.set.claims.TTL {
			next = minTime(next, now.Add(takeoverPoll))
		}
	}
	return next
}

// takeoverPoll is how often a broker reads the claims while another broker
// is expected to take a lapsed one.
const takeoverPoll = 250 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// takeoverRetry is how soon an acquisition refused within a claim's margin
// is tried again.
const takeoverRetry = 100 * time.Millisecond

// renewRetry is how soon a failed renewal is tried again.
const renewRetry = 200 * time.Millisecond

// renewAll renews every held claim in one statement (rebasing those whose
// core asks) and moves each family's serving deadline. A failed renewal
// changes nothing (the deadlines stand) and is returned, logged when
// logFailure (the first attempt of a round: the retries would log five
// lines a second through an outage).
func (p *placer) renewAll(ctx context.Context, logFailure bool) error {
	var cs []claims.Claim
	rebase := map[string]bool{}
	for _, fam := range sortedKeys(p.held) {
		c := p.held[fam]
		pl, err := p.broker.Placement(ctx, core.Family(fam))
		if err != nil {
			return nil // the core is closing
		}
		if !pl.Serving {
			// The deadline passed (or the core dropped the family): the
			// claim may be live still, but this broker stopped; give it
			// up so that the next acquisition starts a new epoch.
			p.log.Warn("placement: serving deadline passed before a renewal", "family", fam)
			p.metrics.fenced.Inc()
			p.giveUp(ctx, fam, c, "")
			continue
		}
		if pl.Changes >= core.RebaseAt {
			rebase[fam] = true
		}
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return nil
	}
	start := time.Now()
	renewed, err := p.store.RenewAll(ctx, cs, rebase)
	if err != nil {
		if logFailure {
			p.log.Warn("placement: renewal failed", "families", len(cs), "err", err)
		}
		p.metrics.renewFailed.Inc()
		return err
	}
	p.metrics.renew.Observe(time.Since(start).Seconds())
	for _, c := range cs {
		next, ok := renewed[c.Family]
		if !ok {
			p.log.Warn("placement: claim lost", "family", c.Family)
			p.metrics.lost.Inc()
			_ = p.broker.Unserve(context.Background(), core.Family(c.Family))
			p.unhold(c.Family)
			continue
		}
		p.held[c.Family] = next
		if err := p.broker.Serve(context.Background(), core.Family(c.Family), core.PlacementEpoch(next.Epoch), next.Deadline()); err != nil {
			p.log.Warn("placement: the core refused a renewed claim", "family", c.Family, "err", err)
			p.giveUp(ctx, c.Family, next, "")
		}
	}
	p.metrics.held.Store(int64(len(p.held)))
	return nil
}

// acquire takes fam and starts serving it. It reports whether the claim
// was held still (within its margin, or taken by another broker).
func (p *placer) acquire(ctx context.Context, fam, cause string) (held bool) {
	c, err := p.store.Acquire(ctx, fam)
	if err != nil {
		if !errors.Is(err, claims.ErrHeld) {
			p.log.Warn("placement: acquiring a family failed", "family", fam, "err", err)
		}
		return errors.Is(err, claims.ErrHeld)
	}
	sessions, err := p.serve(fam, c)
	if err != nil {
		p.log.Warn("placement: the core refused a new claim", "family", fam, "err", err)
		_ = p.store.Release(ctx, c)
		return
	}
	p.hold(fam, c)
	p.metrics.takeovers.Inc()
	p.metrics.moves.WithLabelValues(cause).Inc()
	p.log.Info("placement: serving family", "family", fam, "epoch", c.Epoch, "cause", cause, "sessions_handed_over", sessions)
	return false
}

// hold records c as held; unhold forgets fam's claim.
func (p *placer) hold(fam string, c claims.Claim) {
	p.held[fam] = c
	p.metrics.held.Store(int64(len(p.held)))
	p.mu.Lock()
	p.serving[fam] = true
	delete(p.movedTo, fam)
	p.mu.Unlock()
}

func (p *placer) unhold(fam string) {
	delete(p.held, fam)
	p.metrics.held.Store(int64(len(p.held)))
	p.mu.Lock()
	delete(p.serving, fam)
	p.mu.Unlock()
}

// acquireCause is the cause of a move that takes a family whose claim is o.
func acquireCause(o claims.Owner) string {
	switch {
	case o.Broker == "":
		return "initial"
	case o.Released:
		return "handover"
	}
	return "failover"
}

// giveUp stops serving fam, then releases its claim: in that order, so the
// release attests that this broker stopped. cause is a move's (rebalance,
// shutdown), "" for a family that stopped at its deadline.
func (p *placer) giveUp(ctx context.Context, fam string, c claims.Claim, cause string) {
	if err := p.broker.Unserve(context.Background(), core.Family(fam)); err != nil {
		return // the actor is gone: the claim expires on its own
	}
	p.unhold(fam)
	p.metrics.releases.Inc()
	if cause != "" {
		p.metrics.moves.WithLabelValues(cause).Inc()
	}
	p.giveUpClaim(ctx, fam, c)
}

// wantsWithoutSelf is the desired owner of every family among the live
// brokers other than this one, as last read (p.mu held): where this broker
// hands its families at shutdown, and where a cut broker sends clients.
func (p *placer) wantsWithoutSelf() map[string]string {
	var others []string
	for _, b := range sortedKeys(p.live) {
		if b != p.self {
			others = append(others, b)
		}
	}
	// This broker's claims among current are ignored: it is not in others.
	return desiredOwners(p.set.families, others, p.pinnedLocked(), currentOwners(p.owners))
}

// desiredOwners is the broker that should serve each of fams (sorted):
// its pinned broker when that one is live; otherwise its current owner
// (current: the live claims as last read) when that one is live and holds
// fewer than limit = ceil(families / live brokers) of the families kept so
// far, in name order; otherwise, family by family in order, the live
// broker with the highest rendezvous hash of (family, broker) among those
// holding fewer than limit — rendezvous hashing with bounded loads, so
// that few families spread evenly (12 over 3 brokers: 4 each) where plain
// hashing can leave a broker with none. Keeping current owners first means
// a move happens only where the spread is off by more than the bound: a
// broker joining (or coming back) takes just enough families to bring
// every broker within limit, and no family moves between the others.
// Every broker computes the same answer from the same configuration, live
// set and claims. No family has an owner when no broker is live.
func desiredOwners(fams, live []string, pinned, current map[string]string) map[string]string {
	out := make(map[string]string, len(fams))
	if len(live) == 0 {
		return out
	}
	limit := (len(fams) + len(live) - 1) / len(live)
	load := map[string]int{}
	for _, fam := range fams {
		if b := pinned[fam]; b != "" && slices.Contains(live, b) {
			out[fam] = b
			load[b]++
		}
	}
	for _, fam := range fams {
		if _, ok := out[fam]; ok {
			continue
		}
		if b := current[fam]; b != "" && slices.Contains(live, b) && load[b] < limit {
			out[fam] = b
			load[b]++
		}
	}
	for _, fam := range fams {
		if _, ok := out[fam]; ok {
			continue
		}
		ranked := slices.Clone(live)
		slices.SortFunc(ranked, func(a, b string) int { return cmp.Compare(score(fam, b), score(fam, a)) })
		out[fam] = ranked[0]
		for _, b := range ranked {
			if load[b] < limit {
				out[fam] = b
				break
			}
		}
		load[out[fam]]++
	}
	return out
}

// currentOwners is the broker of each live claim of owners.
func currentOwners(owners map[string]claims.Owner) map[string]string {
	out := make(map[string]string, len(owners))
	for fam, o := range owners {
		if o.Live {
			out[fam] = o.Broker
		}
	}
	return out
}

// score is the rendezvous hash of (family, broker).
func score(fam, broker string) uint64 {
	h := sha256.Sum256([]byte(fam + "\x00" + broker))
	return binary.BigEndian.Uint64(h[:8])
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
