#!/usr/bin/env bash
# Builds the SDK and its tests with Mono's mcs, warnings as errors, and packs the SDK.
# Output: build/Muster.Client.dll (+ its XML doc), build/Muster.Client.<Version>.nupkg,
# build/Muster.Client.Tests.dll (+ Newtonsoft.Json.dll copied). The version and the package
# metadata come from src/Muster.Client/Muster.Client.csproj, through pack/Pack.cs.
set -euo pipefail
cd "$(dirname "$0")"
NEWTONSOFT=/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll
NUNIT=/usr/lib/cli/nunit.framework-2.6.3/nunit.framework.dll
mkdir -p build
cp "$NEWTONSOFT" build/
# Compiled against Mono's runtime profile (lib/mono/4.5, Mono 6's .NET 4.8 plus
# netstandard 2.1), not against a .NET Framework reference profile (4.7.2-api): only the
# runtime's mscorlib defines IAsyncEnumerable<T>, IAsyncEnumerator<T>, IAsyncDisposable
# and ValueTask, which the SDK implements. mcs speaks C# 7 (-langversion up to 7.2), so
# the sources use no C# 8 syntax (await foreach, await using, async iterators); the
# check below keeps the framework types to .NET Standard 2.0 plus those interfaces.
MONO_LIB=/usr/lib/mono/4.5
MCS=(mcs -nologo -warn:4 -warnaserror+ -debug -langversion:7.2 -nostdlib -r:"$MONO_LIB/mscorlib.dll" -lib:"$MONO_LIB"
  -lib:"$MONO_LIB/Facades" -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll -r:"$NEWTONSOFT")
CSPROJ=src/Muster.Client/Muster.Client.csproj
"${MCS[@]}" -target:exe -r:System.Xml.Linq.dll -r:System.IO.Compression.dll -out:build/Pack.exe pack/Pack.cs
mono build/Pack.exe assembly-info "$CSPROJ" build/AssemblyVersion.cs
"${MCS[@]}" -target:library -out:build/Muster.Client.dll -doc:build/Muster.Client.xml \
  -nowarn:1591 src/Muster.Client/*.cs build/AssemblyVersion.cs
rm -f build/Muster.Client.*.nupkg
mono build/Pack.exe nupkg "$CSPROJ" build README.md build
"${MCS[@]}" -target:library -out:build/Muster.Client.Tests.dll -r:build/Muster.Client.dll -r:"$NUNIT" -nowarn:1702 -define:NUNIT2 \
  -r:System.Xml.Linq.dll -r:System.IO.Compression.dll -r:System.IO.Compression.FileSystem.dll \
  tests/Muster.Client.Tests/*.cs

# .NET Standard 2.0 check (type level): every framework type the SDK references must be
# one netstandard.dll forwards, or one of the async interfaces .NET Standard 2.0 gets
# from the Microsoft.Bcl.AsyncInterfaces package (which brings System.Threading.Tasks.
# Extensions' ValueTask); the csproj references it for netstandard2.0, and those types
# must be in .NET Standard 2.1. Members are not checked here (Mono has no netstandard
# reference assembly with member definitions); the csproj build for .NET checks them.
NS=/usr/lib/mono/4.7.2-api/Facades/netstandard.dll
NS21=$MONO_LIB/Facades/netstandard.dll
ASYNC_IFACES='System.Collections.Generic.IAsyncEnumerable`1
System.Collections.Generic.IAsyncEnumerator`1
System.IAsyncDisposable
System.Threading.Tasks.ValueTask
System.Threading.Tasks.ValueTask`1'
exported() { monodis --exported "$1" | sed -n 's/^[0-9]*: \(.*\) is in assemblyref.*/\1/p' | sort -u; }
comm -23 \
  <(monodis --typeref build/Muster.Client.dll | sed -n 's/^[0-9]*: \[\([^]]*\)\]\(.*\)/\1 \2/p' |
      grep -v '^Newtonsoft' | awk '{print $2}' | sed 's|/.*||' | sort -u) \
  <(exported "$NS") | comm -23 - <(sort <<<"$ASYNC_IFACES") > build/not-netstandard.txt
if [[ -s build/not-netstandard.txt ]]; then
  echo "clients/dotnet: types outside .NET Standard 2.0 and Microsoft.Bcl.AsyncInterfaces:" >&2
  cat build/not-netstandard.txt >&2
  exit 1
fi
comm -23 <(sort <<<"$ASYNC_IFACES") <(exported "$NS21") > build/not-netstandard.txt
if [[ -s build/not-netstandard.txt ]]; then
  echo "clients/dotnet: async interfaces missing from .NET Standard 2.1:" >&2
  cat build/not-netstandard.txt >&2
  exit 1
fi
