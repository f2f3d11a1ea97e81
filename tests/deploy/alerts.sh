#!/usr/bin/env bash
# Checks deploy/prometheus/muster-alerts.yaml with promtool: the rules parse
# (`promtool check rules`) and do what their unit tests say
# (`promtool test rules`, deploy/prometheus/muster-alerts.test.yaml), and
# the queries of deploy/grafana/muster-dashboard.json parse. That
# every metric the rules and the Grafana dashboard name is one the broker
# exports is checked by the Go test beside this script (tests/deploy), which
# `go test ./...` runs.
#
# promtool comes with Debian's prometheus package: when it is absent it is
# installed (apt-get update once, then apt-get install -y
# --no-install-recommends prometheus, non-interactively; as root, or through
# sudo -n), as tests/pg/start.sh installs PostgreSQL. The package's service is
# not started by this script. Environment:
#   PROMTOOL   the promtool to run (default: promtool on PATH)
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf 'tests/deploy/alerts.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=../lib/apt.sh
. tests/lib/apt.sh
install_promtool() { apt_install promtool prometheus; }

promtool=${PROMTOOL:-}
if [[ -z $promtool ]]; then
  command -v promtool >/dev/null || install_promtool
  promtool=$(command -v promtool) || die "prometheus is installed but promtool is not on PATH"
fi
log "using $promtool ($("$promtool" --version 2>&1 | head -n 1))"

"$promtool" check rules deploy/prometheus/muster-alerts.yaml
# The dashboard's queries parse: as recording rules, Grafana's variables
# replaced (tests/deploy/dashrules).
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
go run ./tests/deploy/dashrules deploy/grafana/muster-dashboard.json >"$tmp/dashboard-queries.yaml"
"$promtool" check rules "$tmp/dashboard-queries.yaml"
(cd deploy/prometheus && "$promtool" test rules muster-alerts.test.yaml)
