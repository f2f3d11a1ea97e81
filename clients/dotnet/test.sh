#!/usr/bin/env bash
# The .NET SDK's whole check sequence, as CI runs it (tests/run.sh calls this):
# installs Debian's Mono, Newtonsoft.Json and NUnit 2.6 when absent, builds and packs the
# SDK and builds its tests with mcs (warnings as errors), then runs every NUnit test: unit
# tests, the package read back, the SDK against the real broker, every C# block of
# README.md compiled against the DLL out of the .nupkg and run against the real broker,
# and the conformance scenarios through the shared harness
# (clients/conformance/run-harness.sh, which needs Go).
#
# Tested with Debian bookworm's mono-complete 6.8.0.105, libnewtonsoft-json-cil-dev
# 6.0.8, nunit-console/libnunit-cil-dev 2.6.4 and unzip 6.0 (ReadmeTests takes the DLL out
# of the .nupkg with it, as the README tells users to).
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v mcs >/dev/null 2>&1 || need+=(mono-complete)
[[ -f /usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll ]] || need+=(libnewtonsoft-json-cil-dev)
command -v nunit-console >/dev/null 2>&1 || need+=(nunit-console)
[[ -f /usr/lib/cli/nunit.framework-2.6.3/nunit.framework.dll ]] || need+=(libnunit-cil-dev)
command -v unzip >/dev/null 2>&1 || need+=(unzip)
if ((${#need[@]})); then
  echo "clients/dotnet: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mono-complete \
    libnewtonsoft-json-cil-dev nunit-console libnunit-cil-dev unzip >/dev/null
fi

./build.sh
cd build
MUSTER_REPO="$(cd ../../.. && pwd)" timeout 900 nunit-console -nologo -labels -timeout=180000 -xml=TestResult.xml Muster.Client.Tests.dll
