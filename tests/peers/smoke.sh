#!/usr/bin/env bash
# The peers benchmark's check for `make test`: installs Debian's
# redis-server and etcd-server when absent, checks this module (tidy, vet),
# runs its tests (every leaser takes real exclusive leases) and one short
# round of every benchmark row, and prints the tables, which fails when a
# row failed. Figures from this run mean nothing: it proves the driver works.
# MUSTER_TEST_PEERS=off skips it.
set -euo pipefail
cd "$(dirname "$0")"
if [[ "${MUSTER_TEST_PEERS:-on}" == "off" ]]; then
  echo "peers smoke: skipped (MUSTER_TEST_PEERS=off)"
  exit 0
fi
start=$(date +%s)
bash install.sh
go mod tidy -diff
go vet ./...
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
MUSTER_PEERS_ROUNDS=1 MUSTER_PEERS_WATCHERS=20 MUSTER_PEERS_10K_WATCHERS=20 MUSTER_PEERS_10K_TIME=100ms go test -count=1 -run . -bench . -benchtime 20x -timeout 5m . 2>&1 |
  grep -E '^(Benchmark|ok|FAIL|--- FAIL|panic|PASS)' | tee "$raw"
go run ./table < "$raw" >/dev/null
# Every pair row reports its server's own CPU (read from /proc).
if grep '^BenchmarkPairs/' "$raw" | grep -v -q 'server-cpu-ms'; then
  echo "peers smoke: a pair row lacks the server CPU column" >&2
  exit 1
fi
echo "peers smoke: ok in $(($(date +%s) - start))s"
