#!/usr/bin/env bash
# Runs the code with `unsafe` in it under Miri (the Rust UB checker): Tactor's unit, API and
# subgraph tests (sizes scaled down under cfg(miri)) and the communication layer's unit tests
# (its rings). Tests of safe code only are left to the ordinary run: Miri finds undefined
# behaviour, which safe code cannot cause on its own, and it runs a test a thousand times
# slower (Task Bench's systems, safe programs on Tactor's calls; the in-process transport's
# stress tests; the pure algorithms inside tactor, `#[cfg_attr(miri, ignore)]`). Installs
# nightly's Miri when it is missing.
#
# Flags: tree borrows, because crossbeam-epoch (inside crossbeam-deque) breaks the stricter
# stacked-borrows rules on its own; leaks are ignored because crossbeam-epoch's global
# collector is never freed by design (our own leaks are caught by the `threads` test and
# the drop-counting tests).
#
# Miri interprets on one thread, so the tests run as two groups side by side, each in a
# build directory of its own (cargo holds a build directory's lock while its tests run):
# on a 2-core machine the phase takes about half the time. Each group's output is printed
# whole when both are done.
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
target=${CARGO_TARGET_DIR:-target}

# (tests/spmd.rs and tactor-apps are left out: no unsafe code of their own, and their idle
# workers poll the job's network all along, which Miri runs a thousand times slower. So are
# most of tests/replicated.rs and tests/replicated_index.rs, ~70 s of wall time each: only
# the eager copies, which read a region at the end of its writer's job, run here (~12 s).
# Until session 43 those stalled under some -Zmiri-seed (2, 5, 8): a worker that parked
# before its rank's program opened the job's port was never woken to poll it, and Miri,
# which parks at once, hit that often; a port that opens now wakes the job's runtimes,
# and seeds 0 to 9 pass.)
# The groups are balanced by Miri's clock per test binary (printed as each binary's "finished
# in"). Session 60's split: A 128 s of Miri's clock, B 137 s (tactor-comm's 9 s moved to B
# after a fresh clone took A 405 s and B 335 s of wall time for 137 and 128 s of clock);
# the history of the split is in docs/ (latest: docs/2026-12-03-test-time-s60.md).
# Each group says how long it took in wall time (the "finished in" of a Miri test binary is
# Miri's own virtual clock, the same on every machine).
group_a() {
  local start=$SECONDS
  cargo +nightly miri test --locked -p tactor --no-default-features --lib --test index_launch --test forkjoin
  cargo +nightly miri test --locked -p tactor --no-default-features --test replicated -- eager
  echo "== group A took $((SECONDS - start)) s"
}

group_b() {
  export CARGO_TARGET_DIR="$target/miri-b"
  local start=$SECONDS
  cargo +nightly miri test --locked -p tactor --no-default-features --test api --test implicit_outside --test future \
    --test job --test subgraph --test implicit
  # The communication layer's own unit tests: its rings' unsafe code (without MPI: Miri
  # cannot call into a C library).
  cargo +nightly miri test --locked -p tactor-comm --no-default-features --lib
  echo "== group B took $((SECONDS - start)) s"
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
(set -euo pipefail; group_a) >"$logs/a" 2>&1 &
a=$!
(set -euo pipefail; group_b) >"$logs/b" 2>&1 &
b=$!
ra=0 rb=0
wait "$a" || ra=$?
wait "$b" || rb=$?
echo "== Miri group A (tactor: unit, index_launch, forkjoin, replicated eager): exit $ra"
cat "$logs/a"
echo "== Miri group B (tactor: api, implicit_outside, future, job, subgraph, implicit; tactor-comm: unit): exit $rb"
cat "$logs/b"
if [ "$ra" -ne 0 ] || [ "$rb" -ne 0 ]; then
  echo "error: Miri found a problem (group A exit $ra, group B exit $rb)" >&2
  exit 1
fi
