#!/usr/bin/env bash
# Random Task Bench configurations through every system, in one process and on 1-3 ranks of
# 1-2 workers (oversubscribed), for SECONDS (default 300): the hidden-input check a tester
# runs. Each run validates every dependency it executed, on every rank; this script flags a
# run that panics, hangs (60 s), fails validation, or exits non-zero without exactly one line
# `error: ...` naming a bad configuration (flags out of range, a period or width a graph type
# does not take, `serial` on ranks). Prints each flagged command with the start of its output
# and, at the end, the runs and the flagged count; exits 1 if any was flagged. A command, not
# a test: minutes. FUZZ_SEED=N repeats a sequence of configurations.
# Usage: scripts/fuzz.sh [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
secs=${1:-300}
case $secs in '' | *[!0-9]*) echo "error: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
cargo build --release --quiet -p taskbench || exit 1
bin=target/release/taskbench
RANDOM=${FUZZ_SEED:-$$}
types=(trivial no_comm stencil_1d stencil_1d_periodic dom tree fft all_to_all nearest spread random_nearest random_spread)
systems=(serial bsp tasks compiled implicit traced auto forkjoin futures futures-barrier parfor)
kernels=(empty compute_bound memory_bound load_imbalance busy_wait)
# What a configuration error says (taskbench-core's ConfigError and the CLI's own checks).
config='^error: (Flag "|Invalid flag|Unknown flag|Graph type "|-system [a-z-]+ runs in one process only)'
graph() {
  local t=${types[RANDOM % ${#types[@]}]} k=${kernels[RANDOM % ${#kernels[@]}]}
  local g="-type $t -width $((1 + RANDOM % 17)) -steps $((1 + RANDOM % 25))"
  case $t in nearest | spread | random_*) g="$g -radix $((1 + RANDOM % 5))" ;; esac
  case $t in spread | random_nearest) g="$g -period $((1 + RANDOM % 4))" ;; esac
  case $t in random_*) g="$g -fraction 0.$((RANDOM % 10))" ;; esac
  [ $((RANDOM % 3)) = 0 ] && g="$g -output $((16 + RANDOM % 70))"
  if [ $((RANDOM % 4)) = 0 ] || [ "$k" = memory_bound ]; then
    g="$g -scratch $((8 * (1 + RANDOM % 20)))"
  fi
  g="$g -kernel $k -iter $((RANDOM % 8))"
  [ "$k" = load_imbalance ] && g="$g -imbalance 0.$((RANDOM % 10))"
  echo "$g"
}
end=$(($(date +%s) + secs))
runs=0 flagged=0
while [ "$(date +%s)" -lt "$end" ]; do
  g=$(graph)
  [ $((RANDOM % 3)) = 0 ] && g="$g -and $(graph)"
  sys=${systems[RANDOM % ${#systems[@]}]}
  ranks=$((1 + RANDOM % 3)) workers=$((1 + RANDOM % 2))
  if [ "$ranks" = 1 ] && [ $((RANDOM % 2)) = 0 ]; then
    cmd="$bin $g -system $sys -worker $workers"
  else
    cmd="mpirun --oversubscribe -np $ranks $bin $g -system $sys -worker $workers"
  fi
  runs=$((runs + 1))
  # shellcheck disable=SC2086
  out=$(timeout 60 $cmd 2>&1)
  rc=$?
  errors=$(grep -c '^error: ' <<<"$out")
  why=""
  if [ "$rc" = 124 ]; then
    why="hung (60 s)"
  elif grep -qiE 'panicked|RUST_BACKTRACE' <<<"$out"; then
    why="panicked"
  elif [ "$rc" != 0 ] && [ "$errors" != 1 ]; then
    why="exit $rc with $errors error lines"
  elif [ "$rc" != 0 ] && ! grep -qE "$config" <<<"$out"; then
    why="exit $rc: not a configuration error"
  fi
  if [ -n "$why" ]; then
    flagged=$((flagged + 1))
    echo "FLAGGED ($why): $cmd"
    grep -v '^ *$' <<<"$out" | grep -E 'error|panick|fail' | head -5
  fi
  [ $((runs % 50)) = 0 ] && echo "fuzz: $runs runs, $flagged flagged" >&2
done
echo "fuzz: $runs runs, $flagged flagged"
[ "$flagged" = 0 ]
