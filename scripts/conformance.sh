#!/usr/bin/env bash
# Every Task Bench system that runs on ranks, over every dependence type and several graphs
# at once, on 2 and 3 ranks × 1 and 2 workers (oversubscribed): each run validates every
# dependency it executed, on every rank. Prints each failure with the end of its output, then
# a count; exits 1 if any run failed. Minutes, not seconds: a command, not a test.
# SYSTEMS, RANKS and WORKERS narrow it; MPIFLAGS go to mpirun (e.g. for TCP only with
# shared memory off: MPIFLAGS="--mca btl self,tcp -x TACTOR_COMM_SHM=0" TACTOR_COMM_SHM=0).
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release --quiet -p taskbench || exit 1
bin=target/release/taskbench
graphs=(
  "-type trivial -width 5 -steps 7"
  "-type no_comm -width 6 -steps 9"
  "-type stencil_1d -width 7 -steps 13"
  "-type stencil_1d_periodic -width 5 -steps 11"
  "-type dom -width 6 -steps 10"
  "-type tree -width 8 -steps 9"
  "-type fft -width 8 -steps 10"
  "-type all_to_all -width 5 -steps 8"
  "-type nearest -radix 5 -width 9 -steps 12"
  "-type spread -radix 3 -period 2 -width 7 -steps 11"
  "-type random_nearest -radix 4 -period 3 -fraction 0.5 -width 8 -steps 14"
  "-type stencil_1d -width 4 -steps 40 -and -type spread -width 6 -steps 33 -radix 2 -period 3"
  "-type nearest -width 3 -steps 50 -output 40 -and -type fft -width 4 -steps 20 -and -type dom -width 5 -steps 30"
  "-type stencil_1d -width 3 -steps 300 -kernel compute_bound -iter 4"
  "-type random_nearest -width 10 -steps 100 -radix 3 -period 7 -scratch 64 -kernel memory_bound -iter 2"
  "-type tree -width 3 -steps 6"
  "-type stencil_1d -width 3 -steps 20 -output 24"
)
systems=${SYSTEMS:-bsp tasks compiled implicit traced auto forkjoin futures futures-barrier parfor}
runs=0 failed=0
for sys in $systems; do
  for ranks in ${RANKS:-2 3}; do
    for workers in ${WORKERS:-1 2}; do
      for g in "${graphs[@]}"; do
        runs=$((runs + 1))
        # shellcheck disable=SC2086
        out=$(timeout 120 mpirun ${MPIFLAGS:-} --oversubscribe -np "$ranks" "$bin" \
          -system "$sys" -worker "$workers" $g 2>&1)
        rc=$?
        if [ $rc -ne 0 ] || ! grep -q "Elapsed Time" <<<"$out"; then
          failed=$((failed + 1))
          echo "FAIL (exit $rc) -system $sys on $ranks ranks × $workers workers: $g"
          tail -3 <<<"$out" | sed 's/^/    /'
        fi
      done
    done
    echo "$sys on $ranks ranks: done ($runs runs so far, $failed failed)" >&2
  done
done
echo "$runs runs, $failed failed"
[ "$failed" -eq 0 ]
