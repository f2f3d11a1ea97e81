package claims_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/fleetstore/claims"
	"github.com/musterhq/muster/tests/pgtest"
)

// RenewAll renews, in one statement, exactly the claims Renew would renew
// one by one (the caller's, of the epoch it knows, not released, not
// expired by the server's clock), rebases the ones asked, and leaves the
// others alone.
func TestRenewAllIsRenewForEach(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	a := mustOpen(t, u, "a", 5*time.Second, time.Second)
	b := mustOpen(t, u, "b", 5*time.Second, time.Second)
	held := map[string]claims.Claim{}
	for _, fam := range []string{"live", "rebased", "released", "expired", "stale"} {
		c, err := a.Acquire(ctx(t), fam)
		if err != nil {
			t.Fatal(err)
		}
		held[fam] = c
	}
	theirs, err := b.Acquire(ctx(t), "theirs")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx(t), held["released"]); err != nil {
		t.Fatal(err)
	}
	exec(t, u, `UPDATE muster_placement SET expires_at = now() - interval '1 millisecond' WHERE family = 'expired'`)
	stale := held["stale"]
	if _, err := a.Rebase(ctx(t), stale); err != nil { // the claim moved on: a's copy is stale
		t.Fatal(err)
	}
	before := expiries(t, u)
	cs := []claims.Claim{theirs}
	for _, c := range held {
		cs = append(cs, c)
	}
	sent := time.Now()
	got, err := a.RenewAll(ctx(t), cs, map[string]bool{"rebased": true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("renewed %v, want live and rebased only", got)
	}
	if c := got["live"]; c.Epoch != held["live"].Epoch || c.Sent.Before(sent) {
		t.Fatalf("live: %+v, want epoch %d sent after %v", c, held["live"].Epoch, sent)
	}
	if c := got["rebased"]; c.Epoch != held["rebased"].Epoch+1 {
		t.Fatalf("rebased: epoch %d, want %d", c.Epoch, held["rebased"].Epoch+1)
	}
	for fam, exp := range expiries(t, u) {
		if _, renewed := got[fam]; exp.After(before[fam]) != renewed {
			t.Errorf("%s: expiry moved from %v to %v; renewed %v", fam, before[fam], exp, renewed)
		}
	}
	owners, err := a.Owners(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if o := owners["theirs"]; o.Broker != "b" || o.Epoch != theirs.Epoch || !o.Live {
		t.Errorf("another broker's claim changed: %+v", o)
	}
	// The single-claim calls are RenewAll of one.
	if _, err := a.Renew(ctx(t), got["live"]); err != nil {
		t.Fatal(err)
	}
	if none, err := a.RenewAll(ctx(t), nil, nil); err != nil || len(none) != 0 {
		t.Fatalf("RenewAll of nothing: %v %v", none, err)
	}
}

// BenchmarkRenew compares renewing n families one statement each (the loop
// before RenewAll) with one RenewAll, against real PostgreSQL.
func BenchmarkRenew(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		u := pgtest.Schema(b, "claims")
		s := mustOpen(b, u, "a", time.Minute, time.Second)
		cs := make([]claims.Claim, n)
		for i := range cs {
			c, err := s.Acquire(ctx(b), fmt.Sprintf("fam-%04d", i))
			if err != nil {
				b.Fatal(err)
			}
			cs[i] = c
		}
		b.Run(fmt.Sprintf("families=%d/each", n), func(b *testing.B) {
			for b.Loop() {
				for _, c := range cs {
					if _, err := s.Renew(ctx(b), c); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("families=%d/all", n), func(b *testing.B) {
			for b.Loop() {
				got, err := s.RenewAll(ctx(b), cs, nil)
				if err != nil || len(got) != n {
					b.Fatalf("%d of %d renewed: %v", len(got), n, err)
				}
			}
		})
	}
}

// expiries reads every claim's expires_at.
func expiries(tb testing.TB, u string) map[string]time.Time {
	tb.Helper()
	c, err := pgx.Connect(ctx(tb), u)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx(tb), `SELECT family, expires_at FROM muster_placement`)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]time.Time{}
	for rows.Next() {
		var fam string
		var exp time.Time
		if err := rows.Scan(&fam, &exp); err != nil {
			tb.Fatal(err)
		}
		out[fam] = exp
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}
