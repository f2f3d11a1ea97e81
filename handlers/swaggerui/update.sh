#!/usr/bin/env bash
# Refreshes handlers/swaggerui/dist/ from the npm package swagger-ui-dist.
#
#   handlers/swaggerui/update.sh            re-fetch the version named in dist/VERSION
#   handlers/swaggerui/update.sh 5.35.0     fetch that version
#   handlers/swaggerui/update.sh latest     fetch the newest 5.x release
#
# Only the files the page needs are kept (no source maps, no ES bundles, no
# standalone preset, no sample index.html). The package is taken with
# `npm pack` into a temporary directory: nothing is installed, no install
# scripts (and so no install-time analytics) run, and no node_modules is left
# behind. Afterwards the script lists every absolute URL found in the kept
# CSS, and fails if the CSS would fetch anything from outside (@import, url()
# other than data:), so that an upgrade cannot quietly add a CDN reference.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dist="$here/dist"
pkg=swagger-ui-dist

want=${1:-}
if [[ -z "$want" ]]; then
	want=$(tr -d '[:space:]' <"$dist/VERSION")
fi
if [[ "$want" == latest ]]; then
	want=$(npm view "$pkg@^5" version --json |
		node -e 'let v=JSON.parse(require("fs").readFileSync(0,"utf8"));for(const x of [].concat(v))console.log(x)' |
		grep -E '^5\.[0-9]+\.[0-9]+$' | sort -V | tail -n 1)
fi
if [[ ! "$want" =~ ^5\.[0-9]+\.[0-9]+$ ]]; then
	echo "update.sh: want a 5.x.y release of $pkg, got '$want'" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "update.sh: fetching $pkg@$want" >&2
(cd "$tmp" && SCARF_ANALYTICS=false npm pack --silent "$pkg@$want" >/dev/null)
tar -xzf "$tmp/$pkg-$want.tgz" -C "$tmp"
src="$tmp/package"

got=$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$src/package.json")
if [[ "$got" != "$want" ]]; then
	echo "update.sh: tarball says version $got, wanted $want" >&2
	exit 1
fi

files=(
	swagger-ui-bundle.js
	swagger-ui-bundle.js.LICENSE.txt
	swagger-ui.css
	favicon-16x16.png
	favicon-32x32.png
	LICENSE
	NOTICE
)
for f in "${files[@]}"; do
	if [[ ! -f "$src/$f" ]]; then
		echo "update.sh: $pkg@$want has no $f" >&2
		exit 1
	fi
done

# The CSS must not load anything from elsewhere: no @import, and url() only
# with data: URIs.
if grep -q '@import' "$src/swagger-ui.css"; then
	echo "update.sh: swagger-ui.css contains @import; review it" >&2
	exit 1
fi
if grep -oE 'url\([^)]*\)' "$src/swagger-ui.css" | grep -vqE '^url\(["'\'']?data:'; then
	echo "update.sh: swagger-ui.css references non-data: url(); review it:" >&2
	grep -oE 'url\([^)]*\)' "$src/swagger-ui.css" | grep -vE '^url\(["'\'']?data:' | cut -c1-120 >&2
	exit 1
fi

rm -rf "$dist"
mkdir -p "$dist"
for f in "${files[@]}"; do
	cp "$src/$f" "$dist/$f"
done
echo "$want" >"$dist/VERSION"
(cd "$dist" && sha256sum "${files[@]}" VERSION >SHA256SUMS)

echo "update.sh: hosts named in swagger-ui-bundle.js (links and identifiers; review any that could be fetched at load):" >&2
grep -oE 'https?://[a-zA-Z0-9.-]+' "$dist/swagger-ui-bundle.js" | sort | uniq -c | sort -rn >&2

echo "update.sh: $pkg $want is in $dist; now run: go test ./handlers/swaggerui/ ./tests/browser/" >&2
