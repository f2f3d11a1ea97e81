#!/usr/bin/env bash
# The crate's shape, checked in a second by test.sh before anything builds:
# - no Rust file (src/, tests/, examples/) above MAX_LINES lines;
# - no cycle between the library's modules. A module is a file of src/ or a
#   folder of them (src/client.rs and src/client/*.rs are `client`); module
#   A uses B when a line of A's code (not a comment) names `crate::b`. Unit
#   tests (tests.rs, contract_tests.rs) and doc tests (doctests.rs) are not
#   modules of the library; lib.rs, the root, only declares and re-exports,
#   and code does not reach the API through it: a line naming
#   `crate::Type` is refused (name the module that defines it).
set -euo pipefail
cd "$(dirname "$0")"
MAX_LINES="${MAX_LINES:-500}"
status=0

while read -r n f; do
  if [[ "$f" != total && "$n" -gt "$MAX_LINES" ]]; then
    echo "clients/rust/shape.sh: $f has $n lines (at most $MAX_LINES): split it along a plain line" >&2
    status=1
  fi
done < <(find src tests examples -name '*.rs' -print0 | xargs -0 wc -l)

# "A B" for every use of module B by module A, and "! file:line" for every
# code line that names the root's re-exports.
uses="$(
  find src -name '*.rs' ! -name lib.rs ! -name tests.rs ! -name contract_tests.rs \
    ! -name doctests.rs -print0 | sort -z | xargs -0 awk '
    FNR == 1 { m = FILENAME; sub(/^src\//, "", m); sub(/[\/.].*$/, "", m) }
    { line = $0; sub(/\/\/.*$/, "", line) }
    line ~ /crate::[A-Z]/ { print "! " FILENAME ":" FNR ": " $0 }
    {
      while (match(line, /crate::[a-z_][a-z0-9_]*/)) {
        b = substr(line, RSTART + 7, RLENGTH - 7)
        if (b != m) print m, b
        line = substr(line, RSTART + RLENGTH)
      }
    }' | sort -u
)"
if grep -q '^! ' <<<"$uses"; then
  echo "clients/rust/shape.sh: code that reaches a type through the crate root (name its module):" >&2
  grep '^! ' <<<"$uses" | cut -c3- >&2
  status=1
fi
cycle="$(grep -v '^! ' <<<"$uses" | awk '
  { out[$1] = out[$1] " " $2; node[$1]; node[$2] }
  function visit(a, path,    i, n, next_) {
    state[a] = 1
    n = split(out[a], next_, " ")
    for (i = 1; i <= n; i++) {
      if (state[next_[i]] == 1) { found = path " -> " next_[i]; return 1 }
      if (state[next_[i]] == 0 && visit(next_[i], path " -> " next_[i])) return 1
    }
    state[a] = 2
    return 0
  }
  END { for (a in node) if (state[a] == 0 && visit(a, a)) { print found; exit } }
')"
if [[ -n "$cycle" ]]; then
  echo "clients/rust/shape.sh: the modules use each other in a cycle: $cycle" >&2
  status=1
fi
exit "$status"
