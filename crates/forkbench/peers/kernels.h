/* The forkbench kernels' shared arithmetic, exactly as crates/forkbench/src/kernels.rs
 * computes it, so that every contender's check value agrees. */
#ifndef FORKBENCH_KERNELS_H
#define FORKBENCH_KERNELS_H
#include <math.h>
#include <stdint.h>

static inline uint64_t fb_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Children of a node of the geometric (UTS T1-shaped) tree, mean 4, none at the limit. */
static inline uint64_t fb_children(uint64_t id, uint32_t depth, uint32_t limit) {
  if (depth >= limit) return 0;
  double u = ((double)(id >> 11) + 1.0) * (1.0 / (double)(1ULL << 53));
  double q = 1.0 / (1.0 + 4.0);
  return (uint64_t)floor(log(u) / log(1.0 - q));
}

static inline uint64_t fb_body(uint64_t i, uint32_t spin) {
  uint64_t x = i | 1;
  for (uint32_t s = 0; s < spin; s++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

#endif
