#!/usr/bin/env bash
# Sets up and runs the main job: one stencil_1d benchmark per system on every core of this
# machine, each printing the Task Bench report.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }
cargo build --release --locked -p taskbench
cores=$(nproc)
for system in serial bsp; do
  echo "== -system $system"
  ./target/release/taskbench -steps 1000 -width "$cores" -type stencil_1d -kernel compute_bound -iter 4096 \
    -system "$system" -worker "$cores"
done
