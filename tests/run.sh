#!/usr/bin/env bash
# Runs every Go test against real dependencies: a throwaway PostgreSQL
# (started here unless MUSTER_TEST_PG_URL is given; MUSTER_TEST_PG=off opts
# out explicitly) and Debian's Chromium (installed here unless present;
# MUSTER_TEST_BROWSER=off opts out explicitly).
set -euo pipefail
cd "$(dirname "$0")/.."

cleanup() { :; }
trap 'cleanup' EXIT

if [[ "${MUSTER_TEST_PG:-on}" != "off" && -z "${MUSTER_TEST_PG_URL:-}" && -x tests/pg/start.sh ]]; then
  MUSTER_TEST_PG_URL="$(bash tests/pg/start.sh)"
  export MUSTER_TEST_PG_URL
  cleanup() { bash tests/pg/stop.sh || true; }
fi
# The README's tour is executed with the real curl.
if ! command -v curl >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
fi
if [[ "${MUSTER_TEST_BROWSER:-on}" != "off" && -x tests/browser/install.sh ]]; then
  bash tests/browser/install.sh
fi
bash tests/proxy/install.sh >/dev/null # Debian's nginx for tests/proxy, unless MUSTER_TEST_NGINX=off

go mod tidy -diff && (cd clients/go && go mod tidy -diff) # go.mod/go.sum are tidy
go test -count=1 -timeout 12m $(go list ./... | grep -v /tests/hostile)
# The hostile corpus alone: it measures another family's latency while each
# hostile request runs, which other test packages running beside it would
# blur.
go test -count=1 -timeout 5m ./tests/hostile
# The Go SDK is its own module: generation check, static checks, its tests
# (against the real broker binary) and the conformance scenarios.
(cd clients/go && ./check-generated.sh && go vet ./... && go tool staticcheck ./... && go test -count=1 -timeout 8m ./...)
# The conformance harness every SDK's runner drives: its own module.
bash clients/conformance/harness/check.sh
# Clients generated from openapi.yaml (Python, TypeScript) survive its promises.
bash tests/contract/generated-clients.sh
bash handlers/ui/check.sh # /ui/: its committed scripts are what the TypeScript source and the SDK build today
# The language suites run side by side (most of their time is waiting on
# brokers and TTLs, not CPU), each into its own log, shown whole in order
# once all are done; what they install is installed first, in one apt-get.
bash tests/lib/sdk-packages.sh
logs="$(mktemp -d)"
suite() { # NAME COMMAND…: runs COMMAND in the background, into $logs/NAME
  local name=$1
  shift
  (
    set +e
    "$@" >"$logs/$name.log" 2>&1
    echo $? >"$logs/$name.rc"
  ) &
}
suite ts bash clients/ts/test.sh                 # the TypeScript SDK's whole check sequence
suite dotnet bash clients/dotnet/test.sh         # .NET (Mono): build, unit, real-broker and conformance tests
suite python bash clients/python/test.sh         # a fresh venv from pinned constraints, ruff, mypy --strict, pytest
suite rust bash clients/rust/test.sh             # fmt, clippy, rustdoc and its tests (conformance included)
suite peers bash tests/peers/smoke.sh            # the peers benchmark's driver: real redis-server and etcd, one short round of every row
suite alerts bash tests/deploy/alerts.sh         # the Prometheus alert rules: promtool check rules and their unit tests
suite systemd bash deploy/systemd/verify.sh      # the systemd unit: systemd-analyze verify and security (offline)
suite race go test -count=1 -race -timeout 8m ./core ./sse ./handlers/... # the concurrent packages under the race detector
suite sse-pool env MUSTER_SSE_POOL=1 go test -count=1 -race ./sse # every sse test again, each stream written by a Pool
wait
failed=()
for name in ts dotnet python rust peers alerts systemd race sse-pool; do
  rc=$(cat "$logs/$name.rc" 2>/dev/null || echo 1)
  printf '\n===== %s (exit %s) =====\n' "$name" "$rc"
  cat "$logs/$name.log"
  [[ $rc == 0 ]] || failed+=("$name")
done
rm -rf "$logs"
if ((${#failed[@]})); then
  echo "tests/run.sh: failed: ${failed[*]}" >&2
  exit 1
fi
