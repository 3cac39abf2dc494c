#!/usr/bin/env bash
# A/B timing of Task Bench binaries on this noisy machine: runs each binary with the same
# arguments, alternating, REPS times, and prints median, min and max of "Elapsed Time".
# Usage: scripts/ab.sh REPS "TASKBENCH ARGS" BINARY...
# Build the binaries to compare from clean checkouts (touch the sources after a checkout).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 REPS \"TASKBENCH ARGS\" BINARY..." >&2
  exit 2
fi
reps=$1 args=$2
shift 2
declare -A res
for _ in $(seq "$reps"); do
  for b in "$@"; do
    # shellcheck disable=SC2086
    t=$("$b" $args 2>&1 | awk '/Elapsed Time/{print $3}')  || true
    [ -n "$t" ] || { echo "error: $b printed no Elapsed Time for: $args" >&2; exit 1; }
    res[$b]="${res[$b]:-} $t"
  done
done
for b in "$@"; do
  printf '%s: ' "$b"
  tr ' ' '\n' <<<"${res[$b]}" | grep . | sort -g |
    awk '{a[NR]=$1} END{printf "median %.4g s  min %.4g  max %.4g  (n=%d)\n", a[int((NR+1)/2)], a[1], a[NR], NR}'
done
