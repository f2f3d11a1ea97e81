#!/usr/bin/env bash
# The whole check of the TypeScript SDK, as `make test` runs it (tests/run.sh
# calls this with one line): npm ci from the lockfile, the generated-types
# staleness check, tsc --strict, eslint, the shape check (no import cycle,
# no file over 500 lines: scripts/shape.mjs), the build (ESM and CommonJS, each
# with its declarations, and the browser bundle with its own), the npm pack
# content check, then every test against the
# real broker: unit and SDK tests, the shared conformance scenarios through
# the harness (with broken observer variants), and the bundle in headless
# Chromium. Installs Node and Chromium from Debian packages when absent.
#
# MUSTER_TEST_BROWSER=off skips the browser test; MUSTER_TS_BROKEN=all runs
# every broken observer variant (the default runs six of them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
start=$(date +%s)
step() { echo "clients/ts: $* ($(($(date +%s) - start))s)" >&2; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if ((major < 20)); then
	echo "clients/ts needs Node >= 20, found $(node --version)" >&2
	exit 1
fi

step "npm ci"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
step "generated types"
./check-generated.sh
step "tsc --strict --noEmit"
npx --no-install tsc --strict --noEmit -p tsconfig.json
step "eslint"
npx --no-install eslint --max-warnings=0 .
step "shape: import cycles, file sizes"
node scripts/shape.mjs src test scripts
probe="$(mktemp -d)" # the check must fail on a cycle of two files (type-only imports count)
printf 'import type { B } from "./b.js";\nexport type A = { b?: B };\n' >"$probe/a.ts"
printf 'import { type A } from "./a.js";\nexport type B = { a?: A };\n' >"$probe/b.ts"
if (cd "$probe" && node "$here/scripts/shape.mjs" . 2>/dev/null); then
	echo "clients/ts: scripts/shape.mjs missed a planted import cycle" >&2
	exit 1
fi
rm -rf "$probe"
step "build"
rm -rf dist .build
npm run --silent build >/dev/null

step "npm pack --dry-run"
npm pack --dry-run --json 2>/dev/null | node -e '
const files = JSON.parse(require("fs").readFileSync(0, "utf8"))[0].files.map((f) => f.path).sort();
const must = ["package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/observe.js", "dist/observe.d.ts", "dist/api/schema.d.ts", "dist/cjs/package.json", "dist/cjs/index.js", "dist/cjs/index.d.ts", "dist/cjs/api/schema.d.ts", "dist/browser/muster.js", "dist/browser/muster.d.ts"];
const missing = must.filter((f) => !files.includes(f));
const stray = files.filter((f) => !(f === "package.json" || f === "README.md" || f === "dist/cjs/package.json" || /^dist\/.*\.(js|d\.ts)$/.test(f)));
if (missing.length || stray.length) {
  console.error("npm pack content: missing", missing, "unexpected", stray);
  process.exit(1);
}
console.error(`npm pack: ${files.length} files`);'

step "the broker binary"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/muster" ./cmd/muster)
export MUSTER_BIN="$bin/muster"
if [[ "${MUSTER_TEST_BROWSER:-on}" != "off" ]]; then
	step "chromium"
	MUSTER_CHROMIUM="$(bash "$root/tests/browser/install.sh")"
	export MUSTER_CHROMIUM
fi

step "tests"
# Type-checked above: esbuild only transpiles src and test to .build, file by file.
npx --no-install esbuild $(find src test -name '*.ts') --outdir=.build --outbase=. --format=esm --platform=node --target=node20 --log-level=warning
tests=(.build/test/sse.test.js .build/test/errors.test.js .build/test/follow.test.js .build/test/deadline.test.js .build/test/loss.test.js .build/test/stream.test.js .build/test/sdk.test.js .build/test/batch.test.js .build/test/limits.test.js .build/test/observe.test.js .build/test/idioms.test.js .build/test/tls.test.js .build/test/package.test.js .build/test/conformance.test.js)
if [[ "${MUSTER_TEST_BROWSER:-on}" != "off" ]]; then
	tests+=(.build/test/browser.test.js)
fi
node --test --test-concurrency=1 "${tests[@]}"
step "done"
