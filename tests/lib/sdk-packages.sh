#!/usr/bin/env bash
# Installs, in one apt-get, the Debian packages the language suites of
# tests/run.sh install for themselves when missing (Mono and its NUnit and
# Json.NET, and unzip, for clients/dotnet, python3-venv for clients/python), so that the
# suites can then run side by side: dpkg takes one install at a time.
# Idempotent: installs nothing when everything is present.
set -euo pipefail
cd "$(dirname "$0")/../.."
die() { printf 'tests/lib/sdk-packages.sh: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=apt.sh
. tests/lib/apt.sh
need=()
command -v mcs >/dev/null 2>&1 || need+=(mono-complete)
[[ -f /usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll ]] || need+=(libnewtonsoft-json-cil-dev)
command -v nunit-console >/dev/null 2>&1 || need+=(nunit-console)
[[ -f /usr/lib/cli/nunit.framework-2.6.3/nunit.framework.dll ]] || need+=(libnunit-cil-dev)
command -v unzip >/dev/null 2>&1 || need+=(unzip)
python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || need+=(python3 python3-venv)
if ((${#need[@]})); then
  apt_install "the language suites' tools" "${need[@]}"
fi
bash tests/peers/install.sh
