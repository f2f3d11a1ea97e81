package placement

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestFailoverWithDefaults measures kill -9 failover with the broker's
// default timing (claim TTL 6 s, renewal every 2 s, margin 1 s): the time
// from the kill to the first grant on another broker, over several rounds,
// while workers keep acquiring. Long: it runs only with
// MUSTER_PLACEMENT_LONG=1 (figures in BENCHMARKS.md).
func TestFailoverWithDefaults(t *testing.T) {
	if os.Getenv("MUSTER_PLACEMENT_LONG") == "" {
		t.Skip("long: set MUSTER_PLACEMENT_LONG=1 to measure failover with the default timing")
	}
	rounds := 5
	if n, err := strconv.Atoi(os.Getenv("MUSTER_PLACEMENT_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	c := newClusterTimed(t, defaults, 3, "acme")
	live := slices.Clone(c.brokers)
	var took, learnt []time.Duration
	for round := range rounds {
		old := c.waitSettled("acme", live, 30*time.Second)
		s, _, err := newSession(old.url, "acme")
		if err != nil || s == "" {
			t.Fatalf("round %d: session on the owner failed", round)
		}
		before, _, _ := acquire(old.url, "acme", s, "job")
		killed := time.Now()
		old.kill9(t)
		live = without(live, old)
		var after uint64
		var owner *broker
		for after == 0 {
			if time.Since(killed) > 15*time.Second {
				t.Fatalf("round %d: no grant 15 s after kill -9", round)
			}
			for _, b := range live {
				if s, _, err := newSession(b.url, "acme"); err == nil && s != "" {
					after, _, _ = acquire(b.url, "acme", s, "job")
					owner = b
					break
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		d := time.Since(killed)
		took = append(took, d)
		// The other survivors name the new owner soon after it serves.
		served := time.Now()
		for _, b := range without(live, owner) {
			for {
				if _, a, err := newSession(b.url, "acme"); err == nil && a.status == 421 && a.body["owner"] == owner.url {
					break
				}
				if time.Since(served) > 5*time.Second {
					t.Fatalf("round %d: %s does not name the new owner %s 5 s after it serves", round, b.id, owner.id)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		learnt = append(learnt, time.Since(served))
		if after <= before {
			t.Fatalf("round %d: token %d after failover, %d before", round, after, before)
		}
		t.Logf("round %d: served again %v after kill -9", round, d.Round(time.Millisecond))
		live = append(live, c.start(fmt.Sprintf("r%d", round)))
	}
	slices.Sort(took)
	slices.Sort(learnt)
	t.Logf("kill -9 failover with defaults over %d rounds: min %v, median %v, max %v (bound ttl+margin = 7s after the last renewal); the other survivors named the new owner within min %v, median %v, max %v of its first grant",
		rounds, took[0].Round(time.Millisecond), took[rounds/2].Round(time.Millisecond), took[rounds-1].Round(time.Millisecond),
		learnt[0].Round(time.Millisecond), learnt[rounds/2].Round(time.Millisecond), learnt[rounds-1].Round(time.Millisecond))
	if took[rounds-1] > 8*time.Second {
		t.Fatalf("failover took up to %v, target claim_ttl + margin + 1 s = 8 s", took[rounds-1])
	}
	if learnt[rounds-1] > time.Second {
		t.Fatalf("a survivor named the new owner up to %v after it served, target 1 s", learnt[rounds-1])
	}
}

// TestRenewLatencyManyFamilies measures the placement loop's renewal with
// many families on one broker: once it holds them all, the mean latency of
// its renewal statement (muster_placement_renew_seconds) over a few rounds.
// Long: it runs only with MUSTER_PLACEMENT_LONG=1 (figure in BENCHMARKS.md).
func TestRenewLatencyManyFamilies(t *testing.T) {
	if os.Getenv("MUSTER_PLACEMENT_LONG") == "" {
		t.Skip("long: set MUSTER_PLACEMENT_LONG=1 to measure renewals with many families")
	}
	const families, rounds = 1000, 5
	fams := make([]string, families)
	for i := range fams {
		fams[i] = fmt.Sprintf("f%04d", i)
	}
	c := newClusterTimed(t, defaults, 1, fams...)
	b := c.brokers[0]
	deadline := time.Now().Add(2 * time.Minute)
	for metric(t, b, "muster_placement_claims") < families {
		if time.Now().After(deadline) {
			t.Fatalf("the broker holds %v of %d families after 2 min", metric(t, b, "muster_placement_claims"), families)
		}
		time.Sleep(time.Second)
	}
	sum0, n0 := metric(t, b, "muster_placement_renew_seconds_sum"), metric(t, b, "muster_placement_renew_seconds_count")
	time.Sleep(rounds * defaults.every)
	sum1, n1 := metric(t, b, "muster_placement_renew_seconds_sum"), metric(t, b, "muster_placement_renew_seconds_count")
	if n1-n0 < rounds-1 {
		t.Fatalf("%v renewals in %d rounds", n1-n0, rounds)
	}
	mean := time.Duration((sum1 - sum0) / (n1 - n0) * float64(time.Second))
	t.Logf("renewing %d families: %v renewal statements, mean %v (renew_every %v)", families, n1-n0, mean.Round(time.Microsecond), defaults.every)
	if f := metric(t, b, "muster_placement_renew_failures_total"); f != 0 {
		t.Fatalf("%v renewals failed", f)
	}
	if mean > defaults.every/4 {
		t.Fatalf("mean renewal %v, more than a quarter of the round", mean)
	}
}
