/* forkbench's OpenMP contender: the same kernels with GCC's OpenMP tasks (join: one task and
 * taskwait) and a parallel for, schedule(dynamic, 1) as the grain-1 loop the others run
 * (OMP_SCHEDULE is not read: the schedule is part of the program). Protocol:
 *   forkbench-openmp BENCH WORKERS SIZE SPIN INNER  ->  one "SECONDS CHECK" line per timed run */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

static uint64_t fib(uint64_t n) {
  if (n < 2) return n;
  uint64_t a, b;
#pragma omp task shared(a) untied
  a = fib(n - 1);
  b = fib(n - 2);
#pragma omp taskwait
  return a + b;
}

static uint64_t tree(uint64_t id, uint32_t depth, uint32_t limit);

static uint64_t kids(uint64_t parent, uint64_t lo, uint64_t hi, uint32_t depth, uint32_t limit) {
  uint64_t n = hi - lo;
  if (n == 0) return 0;
  if (n == 1) return tree(fb_mix(parent ^ lo), depth, limit);
  uint64_t mid = lo + n / 2, a, b;
#pragma omp task shared(a) untied
  a = kids(parent, lo, mid, depth, limit);
  b = kids(parent, mid, hi, depth, limit);
#pragma omp taskwait
  return a + b;
}

static uint64_t tree(uint64_t id, uint32_t depth, uint32_t limit) {
  return 1 + kids(id, 0, fb_children(id, depth, limit), depth + 1, limit);
}

static uint64_t loop(uint64_t n, uint32_t spin) {
  uint64_t* out = malloc(n * sizeof *out);
  if (!out) { fprintf(stderr, "out of memory\n"); exit(1); }
#pragma omp parallel for schedule(dynamic, 1)
  for (uint64_t i = 0; i < n; i++) out[i] = fb_body(i, spin);
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; i++) sum += out[i];
  free(out);
  return sum;
}

static uint64_t once(const char* bench, uint64_t size, uint32_t spin) {
  uint64_t r = 0;
  if (!strcmp(bench, "loop")) return loop(size, spin);
#pragma omp parallel
#pragma omp single
  {
    if (!strcmp(bench, "fib")) r = fib(size);
    else if (!strcmp(bench, "tree")) r = tree(fb_mix(19), 0, (uint32_t)size);
  }
  return r;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s BENCH WORKERS SIZE SPIN INNER\n", argv[0]);
    return 2;
  }
  const char* bench = argv[1];
  int workers = atoi(argv[2]);
  uint64_t size = strtoull(argv[3], NULL, 10);
  uint32_t spin = (uint32_t)strtoul(argv[4], NULL, 10);
  int inner = atoi(argv[5]);
  if (workers < 1 || inner < 1) { fprintf(stderr, "workers and inner must be at least 1\n"); return 2; }
  if (strcmp(bench, "fib") && strcmp(bench, "tree") && strcmp(bench, "loop")) {
    fprintf(stderr, "unknown benchmark '%s'\n", bench);
    return 2;
  }
  omp_set_num_threads(workers);
  once(bench, size, spin);
  for (int k = 0; k < inner; k++) {
    double t = omp_get_wtime();
    uint64_t check = once(bench, size, spin);
    printf("%.9f %llu\n", omp_get_wtime() - t, (unsigned long long)check);
  }
  return 0;
}
