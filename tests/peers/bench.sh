#!/usr/bin/env bash
# The peers benchmark: Muster beside a trivial net/http handler (the
# ceiling), etcd and Redis, one driver, one run (see pairs_test.go and
# watch_test.go). Installs Debian's redis-server and etcd-server when absent.
#
# Prints the raw `go test -bench` lines, then the tables (with each
# server's own CPU per operation, read from /proc: cpu_test.go, and the
# ratios round by round). Compare ratios within one run: the machines are
# shared and noisy.
#
# Usage: tests/peers/bench.sh
#   MUSTER_PEERS_ROUNDS    rounds per row, rows interleaved (default 3)
#   MUSTER_PEERS_WATCHERS  watchers of the watch benchmark (default 1000)
#   MUSTER_PEERS_BASE_BIN  a muster binary of another commit, measured beside
#                          this checkout's in the watch rows (muster-base-sse)
#   MUSTER_PEERS_10K_WATCHERS, MUSTER_PEERS_10K_TIME, MUSTER_PEERS_10K_RATE
#                          the sustained watch row (default 10000 watchers,
#                          10s of 100 changes/s)
#   PEERS_BENCHTIME        closed/open-loop time per row and round (default 5s)
#   PEERS_WATCHTIME        changes per watch row and round (default 20x)
#   MUSTER_PEERS_BASE_BIN  a muster binary of another commit, measured beside
#                          this checkout's in the same rounds (base_test.go)
set -euo pipefail
cd "$(dirname "$0")"
bash install.sh

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
echo "start: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
go test -count=1 -run '^$' -bench 'Pairs' -benchtime "${PEERS_BENCHTIME:-5s}" -timeout 60m . 2>&1 |
  grep -E '^(Benchmark|cpu:|ok|FAIL|--- FAIL|panic)' | tee -a "$raw"
go test -count=1 -run '^$' -bench 'Watch1000' -benchtime "${PEERS_WATCHTIME:-20x}" -timeout 30m . 2>&1 |
  grep -E '^(Benchmark|ok|FAIL|--- FAIL|panic)' | tee -a "$raw"
go test -count=1 -run '^$' -bench 'Watch10k' -benchtime 1x -timeout 30m . 2>&1 |
  grep -E '^(Benchmark|ok|FAIL|--- FAIL|panic)' | tee -a "$raw"
echo "end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
go run ./table < "$raw"
