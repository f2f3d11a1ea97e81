// Command table reads the output of the peers benchmarks (go test -bench)
// on stdin and prints their tables in Markdown: one row per system, each
// figure as the range (min–max) over the rounds of the run, and ratios
// taken round by round (a system against the ceiling or Redis of the same
// round). It exits non-zero when the input has no benchmark line or a
// FAIL line, so a broken run does not print an empty table.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	runs, err := parse(os.Stdin)
	if err == nil && len(runs) == 0 {
		err = fmt.Errorf("no benchmark lines on stdin")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
	write(os.Stdout, runs)
}

// A run is one benchmark line: group (Pairs, Watch1000), round, system
// and its metrics by unit.
type run struct {
	group, system string
	round         int
	metrics       map[string]float64
}

// parse reads lines like
//
//	BenchmarkPairs/round1/redis-2   2550   398265 ns/op   5021 ops/s ...
func parse(r io.Reader) ([]run, error) {
	var out []run
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") {
			return nil, fmt.Errorf("the run failed: %s", line)
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(f[0], "Benchmark"), "/")
		if len(parts) != 3 {
			continue
		}
		var rn int
		if _, err := fmt.Sscanf(parts[1], "round%d", &rn); err != nil {
			continue
		}
		name := parts[2]
		if i := strings.LastIndexByte(name, '-'); i > 0 && isDigits(name[i+1:]) {
			name = name[:i] // the GOMAXPROCS suffix
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			var v float64
			if _, err := fmt.Sscan(f[i], &v); err == nil {
				m[f[i+1]] = v
			}
		}
		out = append(out, run{group: parts[0], system: name, round: rn, metrics: m})
	}
	return out, sc.Err()
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
