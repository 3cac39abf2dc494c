#!/usr/bin/env bash
# A/B timing of Task Bench binaries on this noisy machine: runs each binary with the same
# arguments, alternating, REPS times, and prints median, min and max of "Elapsed Time".
# Usage: scripts/ab.sh REPS "TASKBENCH ARGS" BINARY...
# Build the binaries to compare from clean checkouts (touch the sources after a checkout).
# A BINARY may be a command with arguments, e.g. "mpirun -np 2 /tmp/old/taskbench".
# With AB_FAST_NS=N, a round starts only once scripts/pingpong.sh measures a round trip of at
# most N ns (the VM's fast state), and a round after which it measures more is dropped.
set -euo pipefail
probe() { bash "$(dirname "$0")/pingpong.sh" | awk '{print $3}'; }
if [ $# -lt 3 ]; then
  echo "usage: $0 REPS \"TASKBENCH ARGS\" BINARY..." >&2
  exit 2
fi
reps=$1 args=$2
shift 2
declare -A res
round=0
while [ "$round" -lt "$reps" ]; do
  if [ -n "${AB_FAST_NS:-}" ]; then
    while [ "$(probe)" -gt "$AB_FAST_NS" ]; do sleep 2; done
  fi
  declare -A this=()
  for b in "$@"; do
    # shellcheck disable=SC2086
    t=$($b $args 2>&1 | awk '/Elapsed Time/{print $3}')  || true
    [ -n "$t" ] || { echo "error: $b printed no Elapsed Time for: $args" >&2; exit 1; }
    this[$b]=$t
  done
  if [ -n "${AB_FAST_NS:-}" ] && [ "$(probe)" -gt "$AB_FAST_NS" ]; then
    echo "ab: round dropped (the machine left its fast state)" >&2
    continue
  fi
  for b in "$@"; do
    res[$b]="${res[$b]:-} ${this[$b]}"
  done
  round=$((round + 1))
done
for b in "$@"; do
  printf '%s: ' "$b"
  tr ' ' '\n' <<<"${res[$b]}" | grep . | sort -g |
    awk '{a[NR]=$1} END{printf "median %.4g s  min %.4g  max %.4g  (n=%d)\n", a[int((NR+1)/2)], a[1], a[NR], NR}'
done
