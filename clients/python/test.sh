#!/usr/bin/env bash
# The Python SDK's whole check sequence, on a clean machine: a fresh virtual
# environment with the pinned tools (constraints.txt), then ruff format
# --check, ruff check, mypy --strict and pytest (unit tests, the SDK against
# the real broker binary, and the shared conformance scenarios).
set -euo pipefail
cd "$(dirname "$0")"

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
  PY=python3
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/muster-python-XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$PY" -m venv "$work/venv"
VPY="$work/venv/bin/python"
# PIP_CONSTRAINT pins the build backend of the isolated build too.
PIP_CONSTRAINT="$PWD/constraints.txt" "$VPY" -m pip install -q --disable-pip-version-check ".[test]"

# One build of the real broker for every test that starts one.
(cd ../.. && go build -o "$work/muster" ./cmd/muster)
export MUSTER_BIN="$work/muster"

"$VPY" -m ruff format --check src tests
"$VPY" -m ruff check src tests
"$VPY" -m mypy
"$VPY" -m pytest -q -p no:cacheprovider
