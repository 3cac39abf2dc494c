#!/usr/bin/env bash
# Sets up and runs every test: formatting, lints, unit, integration and doc tests.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
echo "== loom model checks (tactor)"
# A separate target directory: --cfg loom changes every crate's flags.
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p tactor --lib --release --locked loom
