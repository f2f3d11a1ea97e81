#!/usr/bin/env bash
# Fails when src/api/schema.ts is stale against openapi.yaml at the
# repository root. Needs node_modules (npm ci); test.sh calls it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
npx --no-install openapi-typescript ../../openapi.yaml -o "$tmp/schema.ts" >/dev/null 2>&1
if ! cmp -s "$tmp/schema.ts" src/api/schema.ts; then
	echo "clients/ts/src/api/schema.ts is stale: run 'npm run generate' in clients/ts and commit the result" >&2
	exit 1
fi
