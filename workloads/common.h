/* Shared helpers for corecast's bundled workloads. */
#ifndef CORECAST_WORKLOAD_COMMON_H
#define CORECAST_WORKLOAD_COMMON_H
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double wl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* `n` rounds of xorshift on *state: a unit of work the compiler cannot remove. */
static inline uint64_t wl_work(uint64_t x, long n) {
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static inline long wl_long(const char *prog, const char *opt, const char *s, long min) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < min) {
        fprintf(stderr, "%s: %s needs a whole number >= %ld (got '%s')\n", prog, opt, min, s);
        exit(2);
    }
    return v;
}
#endif
