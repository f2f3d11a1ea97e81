#!/usr/bin/env bash
# Checks deploy/systemd/muster.service with systemd-analyze (run by
# tests/run.sh). Installs Debian's systemd package when systemd-analyze is
# missing (apt-get, as root or through sudo -n), as tests/pg/start.sh does
# for PostgreSQL.
#
# `systemd-analyze verify` loads the unit offline (no systemd as PID 1 is
# needed): unknown or misspelt directives, bad values, a missing or
# non-executable ExecStart binary and bad dependencies fail it. ExecStart
# names /usr/local/bin/muster, so a temporary copy of the unit points at a
# freshly built binary. `systemd-analyze security --offline=yes` then checks
# the sandboxing settings add up to an exposure of at most 2.0 ("OK"). What
# only a booted systemd shows (the service actually starting under
# DynamicUser, the sandbox letting the broker serve) is not checked here.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { printf 'deploy/systemd/verify.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=../../tests/lib/apt.sh
. tests/lib/apt.sh
command -v systemd-analyze >/dev/null || apt_install systemd-analyze systemd

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/muster" ./cmd/muster
sed "s|/usr/local/bin/muster|$tmp/muster|" deploy/systemd/muster.service >"$tmp/muster.service"
grep -q "^ExecStart=$tmp/muster serve " "$tmp/muster.service" || die "ExecStart was not rewritten"

# verify prints its findings and still exits 0 for some of them: any
# output about the unit is a failure.
out=$(systemd-analyze verify --man=no "$tmp/muster.service" 2>&1) || { printf '%s\n' "$out" >&2; die "systemd-analyze verify failed"; }
if grep -F "muster.service" <<<"$out" >&2; then
  die "systemd-analyze verify found problems in muster.service"
fi
log "systemd-analyze verify: muster.service OK ($(systemd-analyze --version | head -n 1))"

if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
  systemd-analyze security --offline=yes --threshold=20 --no-pager "$tmp/muster.service" >"$tmp/security.txt" 2>&1 ||
    { cat "$tmp/security.txt" >&2; die "systemd-analyze security: exposure above 2.0"; }
  log "systemd-analyze security: $(tail -n 1 "$tmp/security.txt")"
else
  log "systemd-analyze security --offline is not available here (systemd < 250): skipped"
fi
