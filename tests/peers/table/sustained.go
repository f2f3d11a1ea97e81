package main

import (
	"fmt"
	"io"
)

// writeSustained prints the sustained fan-out table (BenchmarkWatch10k),
// if the runs have it.
func writeSustained(w io.Writer, runs []run) {
	g := byGroup(runs, "Watch10k")
	if len(g.order) == 0 {
		return
	}
	fmt.Fprintf(w, "Sustained watch (changes at a steady rate, open loop, every watcher on its own connection): %d round(s); latency of each delivery from when its change was due; min–max over the rounds\n\n", g.rounds)
	fmt.Fprintln(w, "| system | watchers | changes/s | delivered | overflowed streams | pairs not answered | delivery p50 | delivery p99 | delivery max | broker CPU (cores) | broker CPU per change | driver (cores) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, s := range g.order {
		rs := g.by[s]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s,
			rng(values(rs, "watchers"), "%.0f"), rng(values(rs, "changes/s"), "%.0f"),
			rng(values(rs, "delivered-ratio"), "%.3f"), rng(values(rs, "overflows"), "%.0f"),
			rng(values(rs, "failed-pairs"), "%.0f"),
			ms(values(rs, "delivery-p50-µs")), ms(values(rs, "delivery-p99-µs")), ms(values(rs, "delivery-max-µs")),
			rng(values(rs, "broker-cores"), "%.2f"), ms(values(rs, "broker-cpu-µs/change")),
			rng(values(rs, "driver-cores"), "%.2f"))
	}
	fmt.Fprintln(w)
}
