#!/usr/bin/env bash
# The crate as a user installs it (test.sh runs this after `cargo test`):
#
# 1. `cargo package` makes target/package/muster-client-VERSION.crate and
#    verifies it (cargo builds the unpacked crate, in CARGO_TARGET_DIR).
# 2. A fresh project outside the repository (`cargo new` in a temporary
#    directory) unpacks that .crate into its vendor/, as README.md's Install
#    says; its Cargo.toml's dependencies are README.md's dependency block,
#    verbatim, and its src/main.rs is README.md's first Rust block, verbatim.
#    It builds offline with the versions of this crate's Cargo.lock (the
#    fresh lockfile is checked to hold no other version).
# 3. Without the `test-util` feature the deliberate defects are not API, and
#    without `rustls` there is no TLS option (each must fail to compile).
# 4. The example runs against the real broker (`go build ./cmd/muster`,
#    dev mode, on 127.0.0.1:0) and prints what it should.
#
# CARGO_TARGET_DIR is this crate's target/ (unless set), for the
# verification and the fresh project alike: the dependencies that `cargo
# test` compiled with the same features are not compiled again. The fresh
# project is built with debug = 0, as this crate's profile, for the same
# reason.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"
export CARGO_TERM_COLOR=never

fail() {
  echo "clients/rust/package-test.sh: $*" >&2
  exit 1
}

# The first fenced block of README.md whose info string starts with $1 (up
# to a comma). One awk, which stops reading there: no pipe whose writer a
# reader's early exit could kill (SIGPIPE under pipefail).
first_block() {
  awk -v lang="$1" '
    inside && /^```$/ { exit }
    inside { print; next }
    /^```/ { info = substr($0, 4); sub(/,.*/, "", info); if (info == lang) inside = 1 }
  ' "$here/README.md"
}

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/Cargo.toml" | head -n1)"
(cd "$here" && cargo package --offline --locked --allow-dirty --quiet 2>&1) |
  grep -v -e 'manifest has no documentation' -e '^  |$' -e 'package-metadata' -e '^$' >&2 || true
crate="$CARGO_TARGET_DIR/package/muster-client-$version.crate"
[[ -f "$crate" ]] || fail "cargo package made no $crate"

tmp="$(mktemp -d)"
broker_pid=""
cleanup() {
  if [[ -n "$broker_pid" ]]; then
    kill "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The user's project: cargo new, the .crate in vendor/, the README's blocks.
proj="$tmp/muster-readme-user"
(cd "$tmp" && cargo new --quiet --vcs none --bin muster-readme-user)
mkdir "$proj/vendor"
tar -xzf "$crate" -C "$proj/vendor"
deps="$(first_block toml)"
[[ "$deps" == "[dependencies]"* ]] || fail "README.md's first toml block is not a [dependencies] block"
grep -q "path = \"vendor/muster-client-$version\"" <<<"$deps" ||
  fail "README.md's dependency block does not name vendor/muster-client-$version"
{
  sed '/^\[dependencies\]$/,$d' "$proj/Cargo.toml"
  printf '%s\n' "$deps"
} >"$proj/Cargo.toml.new"
mv "$proj/Cargo.toml.new" "$proj/Cargo.toml"
first_block rust >"$proj/src/main.rs"
grep -q 'fn main()' "$proj/src/main.rs" || fail "README.md's first Rust block has no main"
cp "$here/Cargo.lock" "$proj/Cargo.lock"

build() {
  (cd "$proj" && CARGO_PROFILE_DEV_DEBUG=0 cargo build --offline --quiet \
    --message-format=short "$@" 2>&1)
}
said="$(build --bin muster-readme-user)" ||
  fail "README.md's example does not build with README.md's dependencies:
$said"

# Every locked version is this crate's.
lock_pairs() { awk '/^name = / { n = $3 } /^version = / { print n, $3 }' "$1" | sort -u; }
extra="$(comm -23 <(lock_pairs "$proj/Cargo.lock" | grep -v -e '^"muster-readme-user"' -e '^"muster-client"') \
  <(lock_pairs "$here/Cargo.lock"))"
[[ -z "$extra" ]] || fail "the fresh project locked versions this crate's Cargo.lock does not hold:
$extra"

# What a user's build must not see: each program must fail with its error.
refused() { # NAME CODE SOURCE
  printf '%s\n' "$3" >"$proj/src/bin/$1.rs"
  local said
  if said="$(build --bin "$1")"; then
    fail "$1 compiled: $4"
  fi
  grep -q "$2" <<<"$said" || fail "$1 failed without $2:
$said"
  rm "$proj/src/bin/$1.rs"
}
mkdir -p "$proj/src/bin"
refused faults E0432 'use muster_client::Faults;
fn main() { let _ = Faults::default(); }' "Faults is public without test-util"
refused options_faults E0599 'fn main() {
    let _ = muster_client::ObserveOptions::default().faults(Default::default());
}' "ObserveOptions::faults is public without test-util"
refused ca_file E0599 'fn main() {
    let _ = muster_client::Client::builder("https://b1").ca_file("ca.pem");
}' "ClientBuilder::ca_file exists without rustls"

# The real broker, in dev mode, on a free port.
(cd "$root" && go build -o "$tmp/muster" ./cmd/muster)
printf 'dev_mode: true\n' >"$tmp/muster.yaml"
"$tmp/muster" serve --addr 127.0.0.1:0 --data-dir "$tmp/data" --config "$tmp/muster.yaml" \
  </dev/null >/dev/null 2>"$tmp/broker.log" &
broker_pid=$!
addr=""
for _ in $(seq 1200); do
  addr="$(sed -n 's/.*"msg":"muster serving","addr":"\([^"]*\)".*/\1/p' "$tmp/broker.log")"
  [[ -n "$addr" ]] && break
  kill -0 "$broker_pid" 2>/dev/null || fail "the broker exited: $(cat "$tmp/broker.log")"
  sleep 0.1
done
[[ -n "$addr" ]] || fail "the broker did not start: $(cat "$tmp/broker.log")"

out="$(MUSTER_URL="http://$addr" "$CARGO_TARGET_DIR/debug/muster-readme-user" 2>&1)" ||
  fail "README.md's example failed against the broker:
$out"
for want in \
  "rendering doc-123 under fencing token " \
  "lease://acme/renderers/doc-456 held by worker-1 (" \
  "listed lease://acme/renderers/doc-456"; do
  grep -qF "$want" <<<"$out" || fail "README.md's example did not print \"$want\":
$out"
done
if grep -qF "listed lease://acme/renderers/doc-123" <<<"$out"; then
  fail "README.md's example listed doc-123 after its work released it:
$out"
fi
echo "clients/rust/package-test.sh: muster-client-$version.crate installs and README.md's example runs"
