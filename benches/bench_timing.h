/* Timing helpers shared by the C benchmark programs: a monotonic clock in nanoseconds and the
 * median of a set of timed runs. Include after defining _POSIX_C_SOURCE (clock_gettime). */
#ifndef TVMRT_BENCH_TIMING_H_
#define TVMRT_BENCH_TIMING_H_

#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Sorts `v` and returns its median. */
static double median_of(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[n / 2];
}

#endif /* TVMRT_BENCH_TIMING_H_ */
