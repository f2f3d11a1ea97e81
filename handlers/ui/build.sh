#!/usr/bin/env bash
# Builds the dashboard's scripts into handlers/ui/dist/ (or OUTDIR):
#
#   muster.js  the TypeScript SDK's browser bundle, exactly as
#              `npm run build` in clients/ts makes it (dist/browser/muster.js)
#   app.js     handlers/ui/src (type-checked with tsc --strict), bundled with
#              esbuild; it imports the SDK from ./muster.js
#
# The results are committed and embedded in the broker (go:embed), so that
# `go build` needs no Node. check.sh rebuilds them and fails when the
# committed files are stale. Uses clients/ts's pinned toolchain (npm ci there
# when node_modules is missing).
#
# Usage: handlers/ui/build.sh [OUTDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/dist}"
ts="$root/clients/ts"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
if [[ ! -x "$ts/node_modules/.bin/esbuild" || ! -x "$ts/node_modules/.bin/tsc" ]]; then
	(cd "$ts" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

"$ts/node_modules/.bin/tsc" -p "$here/tsconfig.json" # src and test, --strict
(cd "$ts" && npm run --silent build >/dev/null 2>&1) || (cd "$ts" && npm run build) # quiet unless it fails
mkdir -p "$out"
cp "$ts/dist/browser/muster.js" "$out/muster.js"
node "$here/build.mjs" "$out"
