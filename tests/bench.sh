#!/usr/bin/env bash
# Reproduces the figures of BENCHMARKS.md. Compare ratios within one run:
# the machines are shared and noisy. Output: bench-results.txt (raw go test
# -bench lines, one section per package).
set -euo pipefail
cd "$(dirname "$0")/.."

cleanup() { :; }
trap 'cleanup' EXIT
if [[ "${MUSTER_TEST_PG:-on}" != "off" && -z "${MUSTER_TEST_PG_URL:-}" ]]; then
  MUSTER_TEST_PG_URL="$(bash tests/pg/start.sh)"
  export MUSTER_TEST_PG_URL
  cleanup() { bash tests/pg/stop.sh || true; }
fi

out=bench-results.txt
: > "$out"
run() { # package, regexp, benchtime
  echo "== $1 $2" | tee -a "$out"
  go test "$1" -run '^$' -bench "$2" -benchtime "$3" -benchmem 2>&1 | grep -E '^(Benchmark|cpu:|ok|FAIL)' | tee -a "$out"
}
uname -srm | tee -a "$out"
nproc | sed 's/^/cores: /' | tee -a "$out"

# Issue 2: the stack and its ceiling.
run ./handlers 'StackSmallPOST' 2s
# Issue 19: the broker's own cost of an acquire+release pair, fast path vs general path.
run ./handlers 'ServerLeasePair' 2s
# Issue 3: the lease core, memory, and the HTTP path with the ceiling in one run.
run ./core 'StateAcquireRelease|BrokerAcquireRelease|ContendedFIFO' 2s
run ./core 'MemoryPerLease' 1x
run ./tests/load 'HTTPLeases' 5s
# Issue 19: lease batches of 64 over HTTP (lease-ops/s), the in-process cost per batch.
run ./tests/load 'HTTPLeaseBatches' 5s
run ./handlers 'BatchHandler' 2s
# Issue 4: inventory at 1,000,000 leases.
run ./core 'ListExact|ListArea|Snapshot|PageAll' 2s
run ./tests/load 'HTTPPageAll' 3x
# Issue 5: matching and streams.
run ./core 'MatchSparse|MatchDense' 2s
run ./sse 'Offer|AppendEvent|IdleStream' 1s
run ./tests/load 'Streams1000|IdleStreamMemory' 20x
run ./handlers 'WatchActorStep' 1s # issue 18: what streams cost the actor
# Issue 6: the desired set.
run ./fleetstore 'Register|Sweep|Desired|Plan' 1s
run ./tests/load 'HTTPGap' 20x
# Issue 19: peers (ceiling, Muster, etcd, Redis) in one run, and the watch side;
# installs redis-server and etcd-server when absent, prints the tables.
bash tests/peers/bench.sh | tee -a "$out"
# Issues 21 and 28: kill -9 failover and planned moves with the default
# placement timing (three real brokers on the PostgreSQL above).
if [[ -n "${MUSTER_TEST_PG_URL:-}" ]]; then
  echo "== ./tests/placement TestFailoverWithDefaults|TestPlannedMovePauses" | tee -a "$out"
  MUSTER_PLACEMENT_LONG=1 go test -count=1 -v -run 'TestFailoverWithDefaults|TestPlannedMovePauses' ./tests/placement 2>&1 |
    grep -E '^    [a-z_]+_test\.go:[0-9]+: |^(--- |ok|FAIL)' | tee -a "$out"
fi
