#!/usr/bin/env bash
# Builds the SDK and its tests with Mono's mcs, warnings as errors.
# Output: build/Muster.Client.dll, build/Muster.Client.Tests.dll (+ Newtonsoft.Json.dll copied).
set -euo pipefail
cd "$(dirname "$0")"
NEWTONSOFT=/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll
NUNIT=/usr/lib/cli/nunit.framework-2.6.3/nunit.framework.dll
mkdir -p build
cp "$NEWTONSOFT" build/
MCS=(mcs -nologo -warn:4 -warnaserror+ -debug -sdk:4.7.2 -r:System.Net.Http.dll -r:"$NEWTONSOFT")
"${MCS[@]}" -target:library -out:build/Muster.Client.dll -doc:build/Muster.Client.xml \
  -nowarn:1591 src/Muster.Client/*.cs
"${MCS[@]}" -target:library -out:build/Muster.Client.Tests.dll -r:build/Muster.Client.dll -r:"$NUNIT" -nowarn:1702 \
  tests/Muster.Client.Tests/*.cs
