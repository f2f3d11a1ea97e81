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
"${MCS[@]}" -target:library -out:build/Muster.Client.Tests.dll -r:build/Muster.Client.dll -r:"$NUNIT" -nowarn:1702 -define:NUNIT2 \
  tests/Muster.Client.Tests/*.cs

# .NET Standard 2.0 check (type level): every framework type the SDK references must be
# one netstandard.dll forwards. Members are not checked here (Mono has no netstandard
# reference assembly with member definitions); the csproj build for .NET checks them.
NS=/usr/lib/mono/4.7.2-api/Facades/netstandard.dll
comm -23 \
  <(monodis --typeref build/Muster.Client.dll | sed -n 's/^[0-9]*: \[\([^]]*\)\]\(.*\)/\1 \2/p' |
      grep -v '^Newtonsoft' | awk '{print $2}' | sed 's|/.*||' | sort -u) \
  <(monodis --exported "$NS" | sed -n 's/^[0-9]*: \(.*\) is in assemblyref.*/\1/p' | sort -u) > build/not-netstandard.txt
if [[ -s build/not-netstandard.txt ]]; then
  echo "clients/dotnet: types outside .NET Standard 2.0:" >&2
  cat build/not-netstandard.txt >&2
  exit 1
fi
