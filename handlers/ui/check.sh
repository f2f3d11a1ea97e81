#!/usr/bin/env bash
# The dashboard's check (tests/run.sh calls it): rebuilds handlers/ui/dist/
# into a temporary directory (tsc --strict included) and fails when the
# committed files differ, then runs the page's Node tests (test/). After
# editing handlers/ui/src, clients/ts/src or the SDK's build, run
# handlers/ui/build.sh and commit dist/. The page itself is tested in
# headless Chromium by tests/browser (go test).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bash "$here/build.sh" "$tmp"
stale=0
for f in app.js muster.js; do
	if ! cmp -s "$tmp/$f" "$here/dist/$f"; then
		echo "handlers/ui/dist/$f is stale: run handlers/ui/build.sh and commit the result" >&2
		stale=1
	fi
done
extra="$(cd "$here/dist" && ls | grep -vxE 'app\.js|muster\.js' || true)"
if [[ -n "$extra" ]]; then
	echo "handlers/ui/dist/ holds files the build does not make: $extra" >&2
	stale=1
fi
if ((stale)); then
	exit 1
fi
node "$here/test.mjs"
