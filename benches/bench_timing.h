/* Timing helpers shared by the C benchmark programs: a monotonic clock in nanoseconds and the
 * median (and minimum) of a set of timed runs. Include after defining _POSIX_C_SOURCE or
 * _GNU_SOURCE (clock_gettime). */
#ifndef TVMRT_BENCH_TIMING_H_
#define TVMRT_BENCH_TIMING_H_

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Median and minimum of n samples (sorts them in place; an even n averages the middle two). */
static inline void median_min(double* v, int n, double* median, double* min) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  *min = v[0];
  *median = (n % 2) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The median of n samples (sorts them in place). */
static inline double median_of(double* v, int n) {
  double median, min;
  median_min(v, n, &median, &min);
  return median;
}

#endif /* TVMRT_BENCH_TIMING_H_ */
