#!/usr/bin/env bash
# Runs the code with `unsafe` in it under Miri (the Rust UB checker): Tactor's unit, API and
# subgraph tests (sizes scaled down under cfg(miri)), Task Bench's unit tests, and a small run
# of every Task Bench system. Installs nightly's Miri when it is missing.
#
# Flags: tree borrows, because crossbeam-epoch (inside crossbeam-deque) breaks the stricter
# stacked-borrows rules on its own; leaks are ignored because crossbeam-epoch's global
# collector is never freed by design (our own leaks are caught by the `threads` test and
# the drop-counting tests).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  # An existing nightly only lacks the components; otherwise install a minimal one.
  if ! rustup component add --toolchain nightly miri rust-src 2>/dev/null &&
    ! rustup toolchain install nightly --profile minimal --component miri,rust-src; then
    echo "WARNING: Miri NOT run: the nightly toolchain with Miri could not be installed" >&2
    exit 3
  fi
fi
export MIRIFLAGS="-Zmiri-permissive-provenance -Zmiri-tree-borrows -Zmiri-ignore-leaks"
cargo +nightly miri setup >/dev/null
# (tests/spmd.rs and tactor-apps are left out: no unsafe code of their own, and their idle
# workers poll the job's network all along, which Miri runs a thousand times slower.)
cargo +nightly miri test --locked -p tactor --no-default-features --lib --test api --test job --test forkjoin --test subgraph --test implicit --test implicit_outside --test index_launch
# Without MPI: Miri cannot call into a C library. The communication layer's in-process
# transport (completion queues, progress, collectives) runs under Miri instead.
cargo +nightly miri test --locked -p tactor-comm --no-default-features --lib --test loopback
cargo +nightly miri test --locked -p taskbench --no-default-features --lib
G="-steps 3 -width 4 -type nearest -radix 3 -kernel compute_bound -iter 2"
for s in serial bsp tasks compiled implicit traced auto forkjoin parfor futures; do
  echo "== miri: taskbench -system $s"
  # shellcheck disable=SC2086
  cargo +nightly miri run --locked -q -p taskbench --no-default-features -- $G -and -steps 4 -width 3 -type stencil_1d -system $s -worker 2 |
    grep -E "^(Elapsed|Total Tasks)"
done
