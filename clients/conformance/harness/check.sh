#!/usr/bin/env bash
# The harness module's whole check sequence: go.mod tidy, vet, staticcheck,
# tests (they run the real broker through run-harness.sh).
set -euo pipefail
cd "$(dirname "$0")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp go.mod go.sum "$tmp/"
go mod tidy
if ! cmp -s go.mod "$tmp/go.mod" || ! cmp -s go.sum "$tmp/go.sum"; then
  cp "$tmp/go.mod" "$tmp/go.sum" .
  echo "clients/conformance/harness: go.mod/go.sum are not tidy: run 'go mod tidy' there" >&2
  exit 1
fi
go vet ./...
go tool staticcheck ./...
go test -count=1 -timeout 5m ./...
