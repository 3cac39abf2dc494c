#!/usr/bin/env bash
# The strong-scaling study of tactor-apps' stencil and cg (issue 40): Tactor in one process
# (1 and 2 workers) and on 2 ranks, untraced and traced, beside PRK's MPI1 and OPENMP Stencil
# and PETSc's ex23 — the peers built outside this repository by their own instructions
# (docs/2026-11-27-apps.md says how) and named by the environment: PRK_MPI1, PRK_OPENMP,
# PETSC_EX23 (a peer not named is left out, and said so). Any argument goes to `apps-study`
# (see `apps-study --help`), e.g. `scripts/apps-study.sh --reps 5 --apps cg`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo build --release --locked -p tactor-apps
peers=()
for p in PRK_MPI1:--prk-mpi1 PRK_OPENMP:--prk-openmp PETSC_EX23:--petsc-ex23; do
  var=${p%%:*} flag=${p#*:}
  if [ -n "${!var:-}" ]; then
    peers+=("$flag" "${!var}")
  else
    echo "note: $var not set; that peer is left out" >&2
  fi
done
exec target/release/apps-study "${peers[@]}" "$@"
