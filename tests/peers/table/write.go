package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// write prints the pair table, then the watch table, for what the runs
// have.
func write(w io.Writer, runs []run) {
	pairs := byGroup(runs, "Pairs")
	if len(pairs.order) > 0 {
		fmt.Fprintf(w, "Pairs (take a free key's exclusive TTL lease, give it back): %d round(s); each figure min–max over the rounds\n\n", pairs.rounds)
		fmt.Fprintln(w, "| system | pairs/s | lease ops/s | of the ceiling | × Redis | server CPU µs per lease op | acquire p50 / p99 (closed loop) | acquire p50 / p99 at half peak (open loop) |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
		for _, s := range pairs.order {
			if strings.HasSuffix(s, "-half") {
				continue
			}
			rs := pairs.by[s]
			peer := "redis"
			if strings.Contains(s, "pipe") || strings.Contains(s, "batch") {
				peer = "redis-pipe64"
			}
			ofCeiling := "—"
			if peer == "redis" {
				ofCeiling = rng(ratio(rs, pairs.by["ceiling"], "pairs/s"), "%.2f")
			}
			halfLat := "—"
			if h := pairs.by[s+"-half"]; len(h) > 0 {
				halfLat = ms(values(h, "first-p50-µs")) + " / " + ms(values(h, "first-p99-µs"))
				if v := values(h, "broker-acq-p99-le-µs"); len(v) > 0 {
					halfLat += " (broker's own p99 ≤ " + ms(v) + ")"
				}
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", s,
				kilo(values(rs, "pairs/s")), kilo(values(rs, "ops/s")), ofCeiling,
				rng(ratio(rs, pairs.by[peer], "pairs/s"), "%.2f"), rng(values(rs, cpuUnit), "%.2f"),
				ms(values(rs, "acq-p50-µs"))+" / "+ms(values(rs, "acq-p99-µs")), halfLat)
		}
		fmt.Fprintln(w)
		writeRounds(w, pairs)
	}
	watch := byGroup(runs, "Watch1000")
	if len(watch.order) > 0 {
		fmt.Fprintf(w, "Watch (1 change reaching every watcher): %d round(s); latency of each delivery, min–max over the rounds; server CPU per op (a change and its undoing: two deliveries to every watcher); × etcd-watch-50conn round by round\n\n", watch.rounds)
		fmt.Fprintln(w, "| system | watchers | delivery p50 | delivery p99 | server CPU per op | p50 × etcd-50conn | p99 × etcd-50conn |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
		peer := watch.by["etcd-watch-50conn"]
		for _, s := range watch.order {
			rs := watch.by[s]
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", s, rng(values(rs, "watchers"), "%.0f"),
				ms(values(rs, "delivery-p50-µs")), ms(values(rs, "delivery-p99-µs")), ms(values(rs, cpuUnit)),
				rng(ratio(rs, peer, "delivery-p50-µs"), "%.2f"), rng(ratio(rs, peer, "delivery-p99-µs"), "%.2f"))
		}
		fmt.Fprintln(w)
	}
	writeSustained(w, runs)
}

// cpuUnit is the server's own CPU time per operation (tests/peers
// cpu_test.go).
const cpuUnit = "server-cpu-µs/op"

// writeRounds prints the same-round ratios one round a column: the
// comparisons the issues ask for, and the server CPU per lease op of every
// system.
func writeRounds(w io.Writer, g group) {
	type line struct {
		name   string
		a, b   string // system a over system b, or a alone (b == "")
		unit   string
		format string
	}
	lines := []line{
		{name: "muster pairs/s ÷ ceiling", a: "muster", b: "ceiling", unit: "pairs/s", format: "%.2f"},
		{name: "muster-batch64 ops/s ÷ redis-pipe64", a: "muster-batch64", b: "redis-pipe64", unit: "ops/s", format: "%.2f"},
		{name: "muster ops/s ÷ etcd", a: "muster", b: "etcd", unit: "ops/s", format: "%.2f"},
		// with MUSTER_PEERS_BASE_BIN: the same comparisons for the "before"
		// broker, and after ÷ before.
		{name: "muster-base pairs/s ÷ ceiling", a: "muster-base", b: "ceiling", unit: "pairs/s", format: "%.2f"},
		{name: "muster-base-batch64 ops/s ÷ redis-pipe64", a: "muster-base-batch64", b: "redis-pipe64", unit: "ops/s", format: "%.2f"},
		{name: "muster CPU per op ÷ muster-base", a: "muster", b: "muster-base", unit: cpuUnit, format: "%.2f"},
		{name: "muster-batch64 CPU per op ÷ muster-base-batch64", a: "muster-batch64", b: "muster-base-batch64", unit: cpuUnit, format: "%.2f"},
	}
	for _, s := range g.order {
		if !strings.HasSuffix(s, "-half") {
			lines = append(lines, line{name: s + ": server CPU µs per lease op", a: s, unit: cpuUnit, format: "%.2f"})
		}
	}
	for _, s := range g.order {
		if !strings.HasSuffix(s, "-half") {
			lines = append(lines, line{name: s + ": driver CPU µs per lease op", a: s, unit: "driver-cpu-µs/op", format: "%.2f"})
		}
	}
	lines = append(lines, line{name: "muster-batch64 CPU ÷ redis-pipe64 CPU per op", a: "muster-batch64", b: "redis-pipe64", unit: cpuUnit, format: "%.2f"})
	fmt.Fprintf(w, "Round by round (same-round ratios)\n\n| | ")
	for r := 1; r <= g.rounds; r++ {
		fmt.Fprintf(w, "round %d | ", r)
	}
	fmt.Fprintf(w, "\n| --- |%s\n", strings.Repeat(" --- |", g.rounds))
	for _, l := range lines {
		cells := make([]string, g.rounds)
		seen := false
		for r := 1; r <= g.rounds; r++ {
			cells[r-1] = "—"
			a, ok := inRound(g.by[l.a], r, l.unit)
			if !ok {
				continue
			}
			if l.b != "" {
				b, ok := inRound(g.by[l.b], r, l.unit)
				if !ok || b == 0 {
					continue
				}
				a /= b
			}
			cells[r-1], seen = fmt.Sprintf(l.format, a), true
		}
		if seen {
			fmt.Fprintf(w, "| %s | %s |\n", l.name, strings.Join(cells, " | "))
		}
	}
	fmt.Fprintln(w)
}

// inRound is the unit's value in round r of rs.
func inRound(rs []run, r int, unit string) (float64, bool) {
	for _, x := range rs {
		if v, ok := x.metrics[unit]; ok && x.round == r {
			return v, true
		}
	}
	return 0, false
}

type group struct {
	order  []string         // systems in their first order of appearance
	by     map[string][]run // system → its runs
	rounds int
}

func byGroup(runs []run, name string) group {
	g := group{by: map[string][]run{}}
	for _, r := range runs {
		if r.group != name {
			continue
		}
		if _, ok := g.by[r.system]; !ok {
			g.order = append(g.order, r.system)
		}
		g.by[r.system] = append(g.by[r.system], r)
		g.rounds = max(g.rounds, r.round)
	}
	return g
}

func values(rs []run, unit string) []float64 {
	var out []float64
	for _, r := range rs {
		if v, ok := r.metrics[unit]; ok {
			out = append(out, v)
		}
	}
	return out
}

// ratio is a's unit over b's, round by round (rounds present in both).
func ratio(a, b []run, unit string) []float64 {
	var out []float64
	for _, x := range a {
		for _, y := range b {
			if x.round == y.round && y.metrics[unit] > 0 {
				out = append(out, x.metrics[unit]/y.metrics[unit])
			}
		}
	}
	return out
}

// rng formats min–max (one value when they print the same); "—" for none.
func rng(vs []float64, format string) string {
	return rngWith(vs, func(v float64) string { return fmt.Sprintf(format, v) })
}

func rngWith(vs []float64, f func(float64) string) string {
	if len(vs) == 0 {
		return "—"
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	a, b := f(lo), f(hi)
	if a == b {
		return a
	}
	return a + "–" + b
}

func kilo(vs []float64) string {
	k := make([]float64, len(vs))
	for i, v := range vs {
		k[i] = v / 1000
	}
	if len(k) == 0 {
		return "—"
	}
	return rng(k, "%.1f") + " k"
}

// ms formats microsecond values as milliseconds, two significant digits
// or more.
func ms(vs []float64) string {
	if len(vs) == 0 {
		return "—"
	}
	return rngWith(vs, func(us float64) string {
		switch m := us / 1000; {
		case m >= 10:
			return fmt.Sprintf("%.0f", m)
		case m >= 1:
			return fmt.Sprintf("%.1f", m)
		default:
			return fmt.Sprintf("%.2f", m)
		}
	}) + " ms"
}
