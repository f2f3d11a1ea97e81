#!/usr/bin/env bash
# Stop and delete the throwaway PostgreSQL that tests/pg/start.sh recorded.
# Does nothing (successfully) when nothing is recorded, or when
# MUSTER_TEST_PG_URL names another server than the recorded one (it was given,
# not started). Reads MUSTER_TEST_PG_STATE like start.sh.
set -euo pipefail

log() { printf 'tests/pg/stop.sh: %s\n' "$*" >&2; }

state="${MUSTER_TEST_PG_STATE:-${TMPDIR:-/tmp}/muster-test-pg.state}"
[[ -f $state ]] || exit 0

read_state() { sed -n "s/^$1=//p" "$state" | head -n 1; }
dir=$(read_state dir) data=$(read_state data) bin=$(read_state bin)
if [[ -n "${MUSTER_TEST_PG_URL:-}" && "$MUSTER_TEST_PG_URL" != "$(read_state url)" ]]; then
  log "MUSTER_TEST_PG_URL is not the server recorded in $state; leaving that one running"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  as_pg() {
    if command -v runuser >/dev/null; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c '"$0" "$@"' -- "$@"; fi
  }
else
  as_pg() { "$@"; }
fi

if [[ -x $bin/pg_ctl && -d $data ]]; then
  as_pg "$bin/pg_ctl" -D "$data" -m fast -w -t 30 stop >&2 ||
    as_pg "$bin/pg_ctl" -D "$data" -m immediate stop >&2 || log "the server was not running"
fi
# Only ever delete what start.sh created.
if [[ $dir == */muster-pg.* ]]; then rm -rf -- "$dir"; fi
rm -f -- "$state"
log "stopped and removed ${dir:-nothing}"
