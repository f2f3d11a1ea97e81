#!/usr/bin/env bash
# Start a throwaway PostgreSQL for the test suites and print its URL.
#
#   export MUSTER_TEST_PG_URL="$(tests/pg/start.sh)"
#   go test ./...
#   tests/pg/stop.sh
#
# stdout carries exactly one line, the postgres:// URL; everything else goes to
# stderr. Exit status is non-zero, with the reason on stderr, when no server
# could be started: callers must fail, not skip.
#
# Environment:
#   MUSTER_TEST_PG=off    the caller opts out: print nothing, start nothing,
#                         succeed (the Go tests then skip, saying why).
#   MUSTER_TEST_PG_URL    already set: print it and start nothing.
#   MUSTER_TEST_PG_STATE  where the running server is recorded for stop.sh
#                         (default ${TMPDIR:-/tmp}/muster-test-pg.state). A
#                         recorded server that still answers is reused.
#   MUSTER_TEST_PG_BIN    directory with initdb, pg_ctl, postgres and createdb
#                         (default: the newest /usr/lib/postgresql/*/bin).
#
# When no server binaries are found, installs the distribution's PostgreSQL
# (Debian: apt-get update once, then apt-get install -y postgresql, non-
# interactively; as root, or through sudo -n). PostgreSQL refuses to run as
# root, so as root the cluster runs as the postgres user, in a temporary
# directory it owns, on a free loopback port, with password authentication
# over TCP.
set -euo pipefail

log() { printf 'tests/pg/start.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ "${MUSTER_TEST_PG:-}" == off ]]; then
  log "MUSTER_TEST_PG=off: not starting PostgreSQL; its tests will skip"
  exit 0
fi
if [[ -n "${MUSTER_TEST_PG_URL:-}" ]]; then
  printf '%s\n' "$MUSTER_TEST_PG_URL"
  exit 0
fi

state="${MUSTER_TEST_PG_STATE:-${TMPDIR:-/tmp}/muster-test-pg.state}"
dbname=muster_test

# as_pg runs a command as the user the server runs as.
if [[ $(id -u) -eq 0 ]]; then
  runas=postgres
  as_pg() {
    if command -v runuser >/dev/null; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c '"$0" "$@"' -- "$@"; fi
  }
else
  runas=$(id -un)
  as_pg() { "$@"; }
fi

# read_state KEY prints KEY's value from the state file (no eval of its text).
read_state() { sed -n "s/^$1=//p" "$state" | head -n 1; }

# A server from an earlier start that was never stopped: reuse it if it runs.
if [[ -f $state ]]; then
  old_bin=$(read_state bin) old_data=$(read_state data) old_url=$(read_state url)
  if [[ -n $old_url && -x $old_bin/pg_ctl ]] && as_pg "$old_bin/pg_ctl" -D "$old_data" status >/dev/null 2>&1; then
    log "reusing the server recorded in $state"
    printf '%s\n' "$old_url"
    exit 0
  fi
  log "removing the stale record $state"
  old_dir=$(read_state dir)
  [[ $old_dir == */muster-pg.* ]] && rm -rf -- "$old_dir"
  rm -f -- "$state"
fi

# find_bin prints the first directory among its arguments holding the server
# binaries, newest major version first.
find_bin() {
  local d
  for d in "$@"; do
    if [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres && -x $d/createdb ]]; then
      printf '%s\n' "$d"
      return 0
    fi
  done
  return 1
}
distro_bins() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4,4 -n -r; }

install_postgres() {
  command -v apt-get >/dev/null || die "no PostgreSQL server binaries and no apt-get to install them; set MUSTER_TEST_PG_URL or MUSTER_TEST_PG_BIN"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null && sudo -n true 2>/dev/null || die "installing PostgreSQL needs root (or sudo without a password); set MUSTER_TEST_PG_URL instead"
    sudo=(sudo -n)
  fi
  log "no PostgreSQL server binaries found; installing the distribution's postgresql (apt-get)"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 ||
    die "apt-get update failed"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 ||
    die "apt-get install -y postgresql failed"
}

if [[ -n "${MUSTER_TEST_PG_BIN:-}" ]]; then
  bin=$(find_bin "$MUSTER_TEST_PG_BIN") || die "MUSTER_TEST_PG_BIN=$MUSTER_TEST_PG_BIN lacks initdb, pg_ctl, postgres or createdb"
else
  # shellcheck disable=SC2046 # one directory per line, no spaces
  if ! bin=$(find_bin $(distro_bins)); then
    install_postgres
    # shellcheck disable=SC2046
    bin=$(find_bin $(distro_bins)) || die "postgresql is installed but no server binaries are under /usr/lib/postgresql/*/bin"
  fi
fi
log "using $bin ($("$bin/postgres" --version))"

if [[ $runas == postgres ]] && ! id postgres >/dev/null 2>&1; then
  die "running as root needs a postgres user to run the server (the postgresql package creates it)"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/muster-pg.XXXXXXXX")
started=
cleanup() {
  if [[ -n $started ]]; then as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf -- "$dir"
}
trap 'cleanup' ERR
trap 'cleanup; exit 1' INT TERM

[[ $runas == postgres ]] && chown postgres: "$dir"
as_pg test -w "$dir" || { cleanup; die "the $runas user cannot write $dir; set TMPDIR to a directory it can reach"; }

password=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
as_pg sh -c 'umask 077; cat > "$1"' -- "$dir/pwfile" <<<"$password"
log "initdb in $dir/data"
as_pg "$bin/initdb" -D "$dir/data" -U postgres --pwfile="$dir/pwfile" \
  --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; cleanup; die "initdb failed"; }
as_pg rm -f "$dir/pwfile"

# port_free PORT succeeds when nothing accepts connections on 127.0.0.1:PORT.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

port=
for _ in 1 2 3 4 5 6 7 8; do
  try=$((20000 + RANDOM % 40000))
  port_free "$try" || continue
  if as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $try -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >&2; then
    port=$try
    started=1
    break
  fi
  grep -q 'could not bind\|already in use' "$dir/server.log" 2>/dev/null || { cat "$dir/server.log" >&2 || true; cleanup; die "postgres did not start"; }
done
[[ -n $port ]] || { cleanup; die "found no free port for postgres"; }

as_pg "$bin/createdb" -h "$dir" -p "$port" -U postgres "$dbname" >&2 ||
  { cleanup; die "createdb failed"; }

url="postgres://postgres:$password@127.0.0.1:$port/$dbname?sslmode=disable"
(
  umask 077
  {
    echo "dir=$dir"
    echo "data=$dir/data"
    echo "bin=$bin"
    echo "port=$port"
    echo "url=$url"
    echo "stop=$bin/pg_ctl -D $dir/data -m fast stop (as $runas), then rm -rf $dir"
  } >"$state"
)
trap - ERR INT TERM
log "PostgreSQL $port up (data $dir/data, log $dir/server.log); stop it with tests/pg/stop.sh"
printf '%s\n' "$url"
