// Package claims is the placement claim store: which broker of a deployment
// serves which family, recorded in the PostgreSQL database the brokers share
// (docs/placement.md).
//
// A broker holds a family while it owns the family's row in muster_placement
// and the row's expires_at has not passed by PostgreSQL's clock. Every
// operation is one statement in autocommit whose condition reads the
// server's now(); the brokers' clocks are never compared with it. What a
// broker may rely on:
//
//   - Acquire succeeds only when the family has no row, or its claim was
//     released, or it expired more than Margin ago (server time). It bumps
//     the family's epoch, which never decreases.
//   - Renew and Rebase succeed only while the claim is the caller's, of the
//     epoch it knows, not released and not expired (server time).
//   - Claim.Deadline is a local monotonic instant before which the claim
//     cannot have expired as seen by anyone, under the clock-rate assumption
//     Rho: the caller stops serving the family at that instant unless a later
//     renewal moved it.
//
// Every call is bounded by its context; a call that fails or times out
// changes nothing the caller can rely on (a renewal may have landed: the
// claim is then valid longer than the caller believes, which is safe).
package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The timing assumptions of docs/placement.md.
const (
	// Rho bounds the rate error of every clock involved (brokers' monotonic
	// clocks, the server's clock): each runs within 1±Rho of real time.
	Rho = 0.01
	// Slack is taken off every deadline besides the rate term: one tick of
	// the core, which drops a family at most one tick after its deadline
	// passes (it refuses commands at the deadline exactly).
	Slack = 50 * time.Millisecond
)

// MaxEpoch is the largest placement epoch: epochs go in bits 32..52 of
// fencing tokens and revisions, which must stay below 2^53 (the SDKs of
// languages whose JSON numbers are doubles read them exactly up to there).
const MaxEpoch = 1<<21 - 1

// Defaults of Config.
const (
	DefaultTTL    = 6 * time.Second
	DefaultMargin = time.Second
)

// Config names this broker and fixes the claim timing.
type Config struct {
	Broker string        // this broker's id, unique in the deployment
	Addr   string        // the base URL clients are sent to
	TTL    time.Duration // how long one renewal keeps a claim (DefaultTTL)
	Margin time.Duration // how long past expiry a takeover waits (DefaultMargin)
}

// Errors.
var (
	// ErrHeld: another broker holds the family (Acquire).
	ErrHeld = errors.New("claims: the family is held by another broker")
	// ErrLost: the claim is no longer the caller's (Renew, Rebase).
	ErrLost = errors.New("claims: the claim was lost")
	// ErrEpochLimit: the family's epoch reached MaxEpoch.
	ErrEpochLimit = errors.New("claims: the family's placement epoch reached its limit")
)

// Claim is one broker's hold on one family.
type Claim struct {
	Family string
	Epoch  uint64
	// Sent is the local (monotonic) time the statement that last set the
	// claim's expiry was sent; Deadline counts from it.
	Sent time.Time
	ttl  time.Duration
	// Handover is the state a planned move left for this claim (Acquire
	// only); nil when the family's last owner did not hand it over.
	Handover *Handover
}

// Deadline is the local instant at which the holder must have stopped
// serving the family: Sent + TTL·(1−2·Rho) − Slack. See docs/placement.md
// for why the claim cannot have expired as seen by anyone before then.
func (c Claim) Deadline() time.Time {
	return c.Sent.Add(time.Duration(float64(c.ttl)*(1-2*Rho)) - Slack)
}

// Owner is what the table says about one family.
type Owner struct {
	Family string
	Broker string
	Addr   string
	Epoch  uint64
	Live   bool // held now: not released and not expired (server time)
	// Released: its last owner gave it up (a planned move), rather than
	// let it expire.
	Released bool
	// HandoverTo: the released claim carries a handover its last owner
	// meant for this broker (Store.Handover).
	HandoverTo string
	// Until is when the claim expires unless renewed: the server's
	// remaining time added to the local clock read before the query (a
	// routing hint, not a safety bound).
	Until time.Time
}

// Store is the claim store of one broker.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	now  func() time.Time // local monotonic clock; tests may replace it
}

// Open connects (pgxpool, at most 4 connections unless the URL says
// otherwise) and creates or migrates the placement tables.
func Open(ctx context.Context, connURL string, cfg Config) (*Store, error) {
	if cfg.Broker == "" || cfg.Addr == "" {
		return nil, errors.New("claims: a broker id and an address are required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Margin == 0 {
		cfg.Margin = DefaultMargin
	}
	if cfg.TTL < time.Second || cfg.Margin < 0 {
		return nil, errors.New("claims: the claim TTL must be at least 1s and the margin not negative")
	}
	pc, err := pgxpool.ParseConfig(connURL)
	if err != nil {
		return nil, errors.New("claims: the store URL does not parse") // never quote it: it may hold a password
	}
	if !hasParam(connURL, "pool_max_conns") {
		pc.MaxConns = 4
	}
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "muster-placement"
	}
	p, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	s := &Store{pool: p, cfg: cfg, now: time.Now}
	if err := p.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return migrate(ctx, c.Conn()) }); err != nil {
		p.Close()
		return nil, fmt.Errorf("claims: migrate: %w", err)
	}
	return s, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Config is the store's configuration, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

func micros(d time.Duration) int64 { return d.Microseconds() }

// Acquire takes family when it is free, released, or expired by more than
// the margin, with the next epoch. ErrHeld when another broker (or this
// one, under an epoch it lost) holds it live. When the claim was released
// by a planned move (Handover) of the epoch just before the new one, the
// claim carries that handover's state and its age by the server's clock.
func (s *Store) Acquire(ctx context.Context, family string) (Claim, error) {
	sent := s.now()
	var epoch, ageMicros int64
	var state []byte
	err := s.pool.QueryRow(ctx, `
		INSERT INTO muster_placement AS p (family, owner, addr, epoch, expires_at, released)
		VALUES ($1, $2, $3, 1, now() + $4 * interval '1 microsecond', false)
		ON CONFLICT (family) DO UPDATE
		SET owner = EXCLUDED.owner, addr = EXCLUDED.addr, epoch = p.epoch + 1,
		    expires_at = EXCLUDED.expires_at, released = false
		WHERE (p.released OR p.expires_at + $5 * interval '1 microsecond' < now()) AND p.epoch < $6
		RETURNING p.epoch,
		          CASE WHEN p.handover_epoch = p.epoch - 1 THEN p.handover END,
		          CASE WHEN p.handover_epoch = p.epoch - 1
		               THEN GREATEST(0, EXTRACT(EPOCH FROM now() - p.handover_at) * 1000000)::bigint ELSE 0 END`,
		family, s.cfg.Broker, s.cfg.Addr, micros(s.cfg.TTL), micros(s.cfg.Margin), int64(MaxEpoch)).Scan(&epoch, &state, &ageMicros)
	if errors.Is(err, pgx.ErrNoRows) {
		var at int64
		if s.pool.QueryRow(ctx, `SELECT epoch FROM muster_placement WHERE family = $1`, family).Scan(&at) == nil && at >= MaxEpoch {
			return Claim{}, ErrEpochLimit
		}
		return Claim{}, ErrHeld
	}
	if err != nil {
		return Claim{}, err
	}
	c := Claim{Family: family, Epoch: uint64(epoch), Sent: sent, ttl: s.cfg.TTL}
	if state != nil {
		c.Handover = &Handover{State: state, Age: time.Duration(ageMicros) * time.Microsecond}
	}
	return c, nil
}

// Handover is a planned move's state as the next owner receives it.
type Handover struct {
	State []byte        // what the last owner wrote, opaque here
	Age   time.Duration // since it was written (taken), by the server's clock
}

// Handover releases the claim, as Release does, and writes state with it
// for the next acquisition (by to, the broker the caller expects, "" for
// any; every acquirer receives it). taken is how long ago the caller took
// the state: it counts as part of the handover's age. Nothing is written
// when the claim is no longer the caller's: it reports false then.
func (s *Store) Handover(ctx context.Context, c Claim, to string, state []byte, taken time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE muster_placement
		SET released = true, expires_at = now(), handover = $4, handover_epoch = epoch, handover_to = $5,
		    handover_at = now() - $6 * interval '1 microsecond'
		WHERE family = $1 AND owner = $2 AND epoch = $3 AND NOT released`,
		c.Family, s.cfg.Broker, int64(c.Epoch), state, to, micros(taken))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// Renew pushes the claim's expiry to now + TTL (server time) and returns it
// with the new Sent. ErrLost when the claim is not the caller's any more.
func (s *Store) Renew(ctx context.Context, c Claim) (Claim, error) {
	return s.one(ctx, c, false)
}

// Rebase renews the claim and moves it to the next epoch, so that the
// holder's fencing tokens and revisions restart above everything it issued.
func (s *Store) Rebase(ctx context.Context, c Claim) (Claim, error) {
	return s.one(ctx, c, true)
}

func (s *Store) one(ctx context.Context, c Claim, rebase bool) (Claim, error) {
	var bump map[string]bool
	if rebase {
		bump = map[string]bool{c.Family: true}
	}
	got, err := s.RenewAll(ctx, []Claim{c}, bump)
	if err != nil {
		return Claim{}, err
	}
	next, ok := got[c.Family]
	if !ok {
		return Claim{}, ErrLost
	}
	return next, nil
}

// RenewAll renews every claim of cs in one statement, each as Renew does,
// and rebases those whose family rebase names, as Rebase does. It returns
// the renewed claims by family, all with the same Sent: a family of cs that
// is missing was lost (ErrLost of Renew). On an error nothing is known
// (some renewals may have landed, which is safe: see the package comment).
// One statement per round keeps the renewal latency of a broker that holds
// thousands of families at one round trip. The families of cs are distinct.
func (s *Store) RenewAll(ctx context.Context, cs []Claim, rebase map[string]bool) (map[string]Claim, error) {
	if len(cs) == 0 {
		return map[string]Claim{}, nil
	}
	fams := make([]string, len(cs))
	epochs := make([]int64, len(cs))
	bumps := make([]int64, len(cs))
	for i, c := range cs {
		fams[i], epochs[i] = c.Family, int64(c.Epoch)
		if rebase[c.Family] {
			bumps[i] = 1
		}
	}
	sent := s.now()
	rows, err := s.pool.Query(ctx, `
		UPDATE muster_placement AS p
		SET expires_at = now() + $2 * interval '1 microsecond', epoch = p.epoch + c.bump
		FROM unnest($3::text[], $4::bigint[], $5::bigint[]) AS c(family, epoch, bump)
		WHERE p.family = c.family AND p.owner = $1 AND p.epoch = c.epoch AND NOT p.released
		  AND p.expires_at > now() AND p.epoch + c.bump <= $6
		RETURNING p.family, p.epoch`,
		s.cfg.Broker, micros(s.cfg.TTL), fams, epochs, bumps, int64(MaxEpoch))
	if err != nil {
		return nil, err
	}
	out := make(map[string]Claim, len(cs))
	for rows.Next() {
		var fam string
		var epoch int64
		if err := rows.Scan(&fam, &epoch); err != nil {
			rows.Close()
			return nil, err
		}
		out[fam] = Claim{Family: fam, Epoch: uint64(epoch), Sent: sent, ttl: s.cfg.TTL}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Release gives the claim up at once: the next Acquire by anyone succeeds
// without waiting for the expiry. The caller must have stopped serving the
// family before it calls Release. Releasing a claim that is no longer the
// caller's changes nothing and is not an error.
func (s *Store) Release(ctx context.Context, c Claim) error {
	_, err := s.pool.Exec(ctx, `
		UPDATE muster_placement SET released = true, expires_at = now(), handover = NULL, handover_epoch = NULL, handover_to = NULL
		WHERE family = $1 AND owner = $2 AND epoch = $3`,
		c.Family, s.cfg.Broker, int64(c.Epoch))
	return err
}

// Owners reads every family's row.
func (s *Store) Owners(ctx context.Context) (map[string]Owner, error) {
	sent := s.now()
	rows, err := s.pool.Query(ctx, `
		SELECT family, owner, addr, epoch, NOT released AND expires_at > now(), released,
		       GREATEST(0, EXTRACT(EPOCH FROM expires_at - now()) * 1000000)::bigint,
		       CASE WHEN released AND handover_epoch = epoch THEN coalesce(handover_to, '') ELSE '' END
		FROM muster_placement`)
	if err != nil {
		return nil, err
	}
	out := map[string]Owner{}
	for rows.Next() {
		var o Owner
		var epoch, remaining int64
		if err := rows.Scan(&o.Family, &o.Broker, &o.Addr, &epoch, &o.Live, &o.Released, &remaining, &o.HandoverTo); err != nil {
			rows.Close()
			return nil, err
		}
		o.Epoch = uint64(epoch)
		if o.Live {
			o.Until = sent.Add(time.Duration(remaining) * time.Microsecond)
		}
		out[o.Family] = o
	}
	return out, rows.Err()
}

// Heartbeat records this broker as live for one TTL (server time).
func (s *Store) Heartbeat(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO muster_brokers (broker, addr, expires_at)
		VALUES ($1, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (broker) DO UPDATE SET addr = EXCLUDED.addr, expires_at = EXCLUDED.expires_at`,
		s.cfg.Broker, s.cfg.Addr, micros(s.cfg.TTL))
	return err
}

// Leave marks this broker as gone (a clean shutdown).
func (s *Store) Leave(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM muster_brokers WHERE broker = $1`, s.cfg.Broker)
	return err
}

// LiveBrokers lists the brokers whose heartbeat has not expired, by id.
// LiveAddrs is every live broker (heartbeat not expired, by the server's
// clock) with its advertised base URL.
func (s *Store) LiveAddrs(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT broker, addr FROM muster_brokers WHERE expires_at > now()`)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var broker, addr string
	_, err = pgx.ForEachRow(rows, []any{&broker, &addr}, func() error {
		out[broker] = addr
		return nil
	})
	return out, err
}

func (s *Store) LiveBrokers(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT broker FROM muster_brokers WHERE expires_at > now() ORDER BY broker`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
