/* bench_common.h - the timing helpers every bench/ program shares: clocks and the median of repeated runs.
   Included after the ocr-c headers (which bring in time.h and stdlib.h under the POSIX feature macro). */
#ifndef OCR_BENCH_COMMON_H
#define OCR_BENCH_COMMON_H
#include <stdlib.h>
#include <time.h>

static inline double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double now(void) { return clock_s(CLOCK_MONOTONIC); }

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place. */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
#endif
