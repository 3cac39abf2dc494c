// forkbench's oneTBB contender: the same kernels with tbb::parallel_invoke (join) and
// tbb::parallel_for over a blocked_range of grain 1 (auto_partitioner). Protocol:
//   forkbench-tbb BENCH WORKERS SIZE SPIN INNER   ->  one "SECONDS CHECK" line per timed run
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_invoke.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "kernels.h"
}

static uint64_t fib(uint64_t n) {
  if (n < 2) return n;
  uint64_t a, b;
  tbb::parallel_invoke([&] { a = fib(n - 1); }, [&] { b = fib(n - 2); });
  return a + b;
}

static uint64_t tree(uint64_t id, uint32_t depth, uint32_t limit);

static uint64_t kids(uint64_t parent, uint64_t lo, uint64_t hi, uint32_t depth, uint32_t limit) {
  uint64_t n = hi - lo;
  if (n == 0) return 0;
  if (n == 1) return tree(fb_mix(parent ^ lo), depth, limit);
  uint64_t mid = lo + n / 2, a, b;
  tbb::parallel_invoke([&] { a = kids(parent, lo, mid, depth, limit); },
                       [&] { b = kids(parent, mid, hi, depth, limit); });
  return a + b;
}

static uint64_t tree(uint64_t id, uint32_t depth, uint32_t limit) {
  return 1 + kids(id, 0, fb_children(id, depth, limit), depth + 1, limit);
}

static uint64_t loop(uint64_t n, uint32_t spin) {
  std::vector<uint64_t> out(n);
  tbb::parallel_for(tbb::blocked_range<uint64_t>(0, n, 1), [&](const tbb::blocked_range<uint64_t>& r) {
    for (uint64_t i = r.begin(); i != r.end(); i++) out[i] = fb_body(i, spin);
  });
  uint64_t sum = 0;
  for (uint64_t x : out) sum += x;
  return sum;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s BENCH WORKERS SIZE SPIN INNER\n", argv[0]);
    return 2;
  }
  const char* bench = argv[1];
  int workers = std::atoi(argv[2]);
  uint64_t size = std::strtoull(argv[3], nullptr, 10);
  uint32_t spin = (uint32_t)std::strtoul(argv[4], nullptr, 10);
  int inner = std::atoi(argv[5]);
  if (workers < 1 || inner < 1) {
    std::fprintf(stderr, "workers and inner must be at least 1\n");
    return 2;
  }
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, workers);
  tbb::task_arena arena(workers);
  auto once = [&]() -> uint64_t {
    uint64_t r = 0;
    arena.execute([&] {
      if (!std::strcmp(bench, "fib")) r = fib(size);
      else if (!std::strcmp(bench, "tree")) r = tree(fb_mix(19), 0, (uint32_t)size);
      else if (!std::strcmp(bench, "loop")) r = loop(size, spin);
      else { std::fprintf(stderr, "unknown benchmark '%s'\n", bench); std::exit(2); }
    });
    return r;
  };
  once();
  for (int k = 0; k < inner; k++) {
    auto t = std::chrono::steady_clock::now();
    uint64_t check = once();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    std::printf("%.9f %llu\n", s, (unsigned long long)check);
  }
  return 0;
}
