#!/usr/bin/env bash
# Sets up and runs the main job: a METG comparison of every Tactor system on this machine
# (stencil_1d, width = cores, 1000 steps, compute_bound), printing the table and leaving the
# raw logs, CSV, JSON summary and plot in results/metg/ (three whole sweeps, median and range). Extra arguments go to `taskbench metg`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# The plot needs a TrueType font; install one where we can.
if ! ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq fonts-dejavu-core) >/dev/null 2>&1 || echo "warning: could not install fonts-dejavu-core; plots will be skipped" >&2
fi
cargo build --release --locked -p taskbench -p commbench
cores=$(nproc)
# Three whole sweeps: the table gives each system's median METG and its range over them,
# and flags sizes measured under noise (see README, "METG on a noisy machine"). `S@2` is
# system S on 2 MPI ranks (cores/2 workers each), so the cost of the process boundary shows.
# --oversubscribe only where it is needed: with it, Open MPI neither binds ranks to cores nor
# lets them spin (measured here: bsp@2's METG 4.4 µs with it, 1.6 without).
launcher='mpirun -np {R}'
[ "$cores" -lt 2 ] && launcher='mpirun --oversubscribe -np {R}'
./target/release/taskbench metg --runs 3 --ranks 2 --launcher "$launcher" \
  --out results/metg "$@" \
  -steps 1000 -width "$cores" -type stencil_1d -kernel compute_bound
