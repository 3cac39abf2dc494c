#!/usr/bin/env bash
# Sets up and runs every test: formatting, lints, rustdoc links, unit, integration and doc
# tests, loom models, and Miri over the unsafe code.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# Each phase's heading says how long the run has taken so far (CI's budget is 20 minutes).
phase() { echo "== [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }
phase "cargo fmt --check"
cargo fmt --all -- --check
phase "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
phase "cargo doc (every intra-doc link resolves)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
phase "cargo check without MPI (the shared-memory-only build)"
cargo check -p taskbench --no-default-features --locked
phase "cargo test (multi-rank tests run under mpirun --oversubscribe)"
cargo test --workspace --locked
phase "loom model checks (tactor)"
# A separate target directory: --cfg loom changes every crate's flags. The models need
# neither MPI nor debug info: without them the build skips bindgen, mpi-sys and libffi
# (measured: 2m15s -> 1m12s cold, docs/2026-12-02-test-time-s54.md).
RUSTFLAGS="--cfg loom" CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_TARGET_DIR=target/loom \
  cargo test -p tactor --no-default-features --lib --release --locked loom
phase "Miri (unsafe code; scaled-down tests)"
# Exit status 3: Miri could not be installed here (no nightly toolchain reachable); that is
# reported loudly and does not fail the run. Any other failure does.
status=0
bash scripts/miri.sh || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
  exit "$status"
fi
phase "done"
