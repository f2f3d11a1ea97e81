#!/usr/bin/env bash
# The Python SDK's whole check sequence, on a clean machine: a fresh virtual
# environment with the pinned tools (constraints.txt); the package's shape
# (tools/check_shape.py: no import cycle, no oversized file); the artifacts (an sdist, and a wheel
# built from it) checked and installed, the test tools beside it; a second
# fresh environment outside the checkout holding the wheel alone, as a user
# installs it, where the README's examples are type-checked and run; then
# ruff format --check, ruff check, mypy --strict and pytest (unit tests, the
# SDK against the real broker binary, and the shared conformance scenarios).
set -euo pipefail
cd "$(dirname "$0")"

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
  PY=python3
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/muster-python-XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The package's shape: no import cycle between its modules, no file over 500 lines.
"$PY" tools/check_shape.py

"$PY" -m venv "$work/venv"
VPY="$work/venv/bin/python"
pip=("$VPY" -m pip install -q --disable-pip-version-check -c constraints.txt)
"${pip[@]}" build setuptools
# The sdist, then a wheel built from the unpacked sdist (build's default).
"$VPY" -m build --no-isolation --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$VPY" tools/check_dist.py "$work/dist"
wheel="$(echo "$work"/dist/*.whl)"
"${pip[@]}" "$wheel[test]"

# A user's install: a fresh environment (no pip of its own: this pip installs
# into it) with the wheel and its dependencies alone. tests/test_readme.py runs
# the README's blocks with its interpreter.
"$PY" -m venv --without-pip "$work/user"
(cd "$work" && "$VPY" -m pip --python "$work/user/bin/python" install -q --disable-pip-version-check \
  -c "$OLDPWD/constraints.txt" "$wheel")
export MUSTER_SDK_PYTHON="$work/user/bin/python"

# One build of the real broker for every test that starts one.
(cd ../.. && go build -o "$work/muster" ./cmd/muster)
export MUSTER_BIN="$work/muster"

"$VPY" -m ruff format --check src tests tools
"$VPY" -m ruff check src tests tools
"$VPY" -m mypy
"$VPY" -m pytest -q -p no:cacheprovider
