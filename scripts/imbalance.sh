#!/usr/bin/env bash
# The rate a system keeps under load imbalance, for A/B comparisons of Task Bench binaries:
# per round and binary, `load_imbalance` at factor 2 and at 0 (stencil_1d), alternated; prints
# the median, min and max over the rounds of FLOP/s at 2 over FLOP/s at 0. A BINARY may be a
# command with arguments (e.g. "mpirun -np 2 /tmp/nonblock", which takes no -system: set
# SYSTEM to "" then). Graph: WIDTH (default 32, 16 points a core on 2 cores, as
# `taskbench study` figure 3), STEPS (100), ITER (65536).
# Usage: scripts/imbalance.sh REPS SYSTEM BINARY...
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 REPS SYSTEM BINARY..." >&2
  exit 2
fi
reps=$1 system=$2
shift 2
case $reps in '' | *[!0-9]* | 0 | 0*) echo "error: REPS must be a positive integer, got '$reps'" >&2; exit 2 ;; esac
graph="-type stencil_1d -kernel load_imbalance -width ${WIDTH:-32} -steps ${STEPS:-100} -iter ${ITER:-65536}"
sys=${system:+-system $system}
rate() {
  # shellcheck disable=SC2086
  { $1 $sys $graph -imbalance "$2" 2>&1 || true; } | awk '/^FLOP\/s/{print $2}'
}
declare -A kept
for _ in $(seq "$reps"); do
  for b in "$@"; do
    balanced=$(rate "$b" 0) uneven=$(rate "$b" 2)
    if [ -z "$balanced" ] || [ -z "$uneven" ]; then
      echo "error: $b printed no FLOP/s for: $sys $graph" >&2
      exit 1
    fi
    kept[$b]="${kept[$b]:-} $(awk -v a="$uneven" -v b="$balanced" 'BEGIN{print a/b}')"
  done
done
for b in "$@"; do
  # shellcheck disable=SC2086
  printf '%s: %s\n' "$b" "$(printf '%s\n' ${kept[$b]} | sort -g | awk '
    {v[NR]=$1} END{m = NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
    printf "kept median %.3f min %.3f max %.3f (n=%d)", m, v[1], v[NR], NR}')"
done
