#!/usr/bin/env bash
# Fork-join, tree-search and parallel-loop micro-benchmarks (issue 39): Tactor against rayon,
# oneTBB and GCC's OpenMP, 1 and 2 workers, repetitions alternated. Builds our two small peer
# programs (crates/forkbench/peers) against Debian's libtbb-dev and libgomp when they can be
# had, and leaves a peer out (saying so) when not. Any argument goes to `forkbench`
# (see `forkbench --help`), e.g. `scripts/forkbench.sh --reps 9 --out results/forkbench`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
if [ ! -e /usr/include/oneapi/tbb.h ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing libtbb-dev"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtbb-dev) >/dev/null ||
    echo "warning: could not install libtbb-dev; oneTBB is left out" >&2
fi
cargo build --release --locked -p forkbench
mkdir -p target/peers
peers=()
src=crates/forkbench/peers
if g++ -O3 -std=c++17 -o target/peers/forkbench-tbb "$src/tbb.cpp" -ltbb -lm 2>target/peers/tbb.log; then
  peers+=(--peer "onetbb=target/peers/forkbench-tbb")
else
  echo "warning: oneTBB peer not built (target/peers/tbb.log); it is left out" >&2
fi
if gcc -O3 -fopenmp -o target/peers/forkbench-openmp "$src/openmp.c" -lm 2>target/peers/openmp.log; then
  peers+=(--peer "openmp=target/peers/forkbench-openmp")
else
  echo "warning: OpenMP peer not built (target/peers/openmp.log); it is left out" >&2
fi
# Each contender runs in a process of its own, one at a time: OpenMP keeps its default
# (spinning) wait policy, as the others keep theirs.
exec target/release/forkbench "${peers[@]}" "$@"
