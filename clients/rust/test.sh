#!/usr/bin/env bash
# The Rust SDK's whole check sequence, as `make test` runs it: the crate's
# shape (shape.sh: file sizes, no module cycle), formatting,
# clippy with warnings denied, rustdoc with warnings denied, every test (unit,
# property, contract examples, the README's blocks as doc tests, the SDK
# against the real broker, and the conformance scenarios through the shared
# harness, which needs Go to build the broker), then the crate as a user
# installs it (package-test.sh). Installs the rustfmt and clippy components
# when absent. target/ stays in this directory (gitignored), so a second run
# is incremental.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v cargo >/dev/null 2>&1; then
  echo "clients/rust/test.sh: cargo is required (a Rust toolchain with rustup)" >&2
  exit 1
fi
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy
fi

./shape.sh
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --quiet
cargo test --locked
./package-test.sh
