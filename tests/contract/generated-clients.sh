#!/usr/bin/env bash
# Generates a Python client (openapi-python-client) and TypeScript types
# (openapi-typescript) from openapi.yaml and checks that they survive the
# contract's promises: the Python client talks to the real broker and parses
# a problem whose `code` it has never heard of; the TypeScript types accept
# such a code (tsc --strict). Tools are pinned (requirements.txt,
# package-lock.json) and installed on first use into tests/contract/.venv
# and tests/contract/node_modules (both git-ignored), reused afterwards.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
tmp="$(mktemp -d)"
broker=""
cleanup() {
	[[ -n "$broker" ]] && kill "$broker" 2>/dev/null && wait "$broker" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# Interpreters, from Debian when missing.
need=()
command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3 python3-venv)
command -v npm >/dev/null || need+=(nodejs npm)
if ((${#need[@]})); then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Python: a venv of its own, rebuilt when requirements.txt changes.
if [[ ! -x .venv/bin/openapi-python-client ]] || ! cmp -s requirements.txt .venv/requirements.txt; then
	rm -rf .venv
	python3 -m venv .venv
	.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
	cp requirements.txt .venv/requirements.txt
fi
# TypeScript: exactly the lockfile.
if [[ ! -x node_modules/.bin/openapi-typescript ]] || ! cmp -s package-lock.json node_modules/.package-lock.json.copy; then
	npm ci --no-audit --no-fund --loglevel=error >/dev/null
	cp package-lock.json node_modules/.package-lock.json.copy
fi

# The real broker, dev mode, on a free port; its first stdout line is its URL.
(cd "$root" && go build -o "$tmp/muster" ./cmd/muster)
"$tmp/muster" serve --addr 127.0.0.1:0 --data-dir "$tmp/data" >"$tmp/out" 2>"$tmp/log" &
broker=$!
url=""
for _ in $(seq 100); do
	url="$(sed -n 's/^muster is serving on \(http:[^ ]*\).*/\1/p' "$tmp/out")"
	[[ -n "$url" ]] && break
	sleep 0.1
done
[[ -n "$url" ]] || { cat "$tmp/log" >&2; echo "the broker did not start" >&2; exit 1; }

PATH="$here/.venv/bin:$PATH" .venv/bin/openapi-python-client generate --path "$root/openapi.yaml" \
	--output-path "$tmp/py/muster_client" --meta none >"$tmp/pygen.log" 2>&1 ||
	{ cat "$tmp/pygen.log" >&2; exit 1; }
.venv/bin/python check_python.py "$tmp/py" "$url"

mkdir -p gen
node_modules/.bin/openapi-typescript "$root/openapi.yaml" -o gen/schema.d.ts --silent
node_modules/.bin/tsc --strict --noEmit --skipLibCheck check.ts
echo "typescript: generated types accept an unknown code"
