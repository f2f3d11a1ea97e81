#!/usr/bin/env bash
# Builds the broker and the conformance harness (into a cache directory,
# reusing Go's build cache, so a second start is fast) and execs the harness
# with stdin and stdout passed through. Callable from any directory.
#
#   clients/conformance/run-harness.sh [-v]
#
# The harness prints ONE JSON line on stdout ({"control":…,"broker":…,
# "proxy":…}), logs on stderr, and stops everything it started on
# SIGTERM/SIGINT or when its stdin closes. MUSTER_HARNESS_CACHE overrides
# the cache directory (default: one per checkout, under ~/.cache);
# MUSTER_HARNESS_RACE=1 builds the harness with the race detector.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
key="$(printf '%s' "$root" | cksum | cut -d' ' -f1)"
base="${XDG_CACHE_HOME:-${HOME:+$HOME/.cache}}"
cache="${MUSTER_HARNESS_CACHE:-${base:-${TMPDIR:-/tmp}}/muster-conformance/$key}"
mkdir -p "$cache"
# Build into temp names and rename, so concurrent runners never exec a
# half-written binary.
tmp="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/muster" ./cmd/muster) >&2
race=()
[[ "${MUSTER_HARNESS_RACE:-}" == 1 ]] && race=(-race)
(cd "$here/harness" && go build "${race[@]}" -o "$tmp/harness" .) >&2
mv -f "$tmp/muster" "$cache/muster"
mv -f "$tmp/harness" "$cache/harness"
rm -rf "$tmp"
trap - EXIT
exec "$cache/harness" --broker "$cache/muster" --pg-scripts "$root/tests/pg" "$@"
