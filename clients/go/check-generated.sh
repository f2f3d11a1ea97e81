#!/usr/bin/env bash
# Fails when clients/go/api/client.gen.go is stale against openapi.yaml at the
# repository root. Run from anywhere; `make test` calls it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The config's `output` wins over -o: generate with a copy that writes to $tmp.
sed "s|^output: .*|output: $tmp/client.gen.go|" api/config.yaml >"$tmp/config.yaml"
go tool oapi-codegen -config "$tmp/config.yaml" ../../openapi.yaml
if ! cmp -s "$tmp/client.gen.go" api/client.gen.go; then
	echo "clients/go/api is stale: run 'go generate ./api' in clients/go and commit the result" >&2
	exit 1
fi
