/* Micro-benchmark for the sync shim's overhead (bench/shim_overhead.py runs it with and
 * without LD_PRELOAD). Modes:
 *   lockpair N TRIALS   uncontended pthread_mutex_lock/unlock pairs; prints the best and
 *                       median ns per pair over TRIALS trials of N pairs
 *   compute N TRIALS    a loop with no synchronisation at all; same output per iteration
 *   slowpath N TRIALS   pthread_rwlock_rdlock on a rwlock this thread holds for writing: the
 *                       try fails (EBUSY), so the shim takes its slow path (clock reads and
 *                       idle-core accounting) around the real call, which returns EDEADLK at
 *                       once without a system call: the slow path's own cost per call
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static volatile uint64_t sink;

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s lockpair|compute|slowpath N TRIALS\n", argv[0]);
        return 2;
    }
    int compute = strcmp(argv[1], "compute") == 0;
    int slowpath = strcmp(argv[1], "slowpath") == 0;
    if (slowpath)
        pthread_rwlock_wrlock(&rw);
    long n = atol(argv[2]);
    int trials = atoi(argv[3]);
    if (n <= 0 || trials <= 0 || trials > 1000) {
        fprintf(stderr, "bad N or TRIALS\n");
        return 2;
    }
    double *per = calloc((size_t)trials, sizeof *per);
    for (int k = 0; k < trials; k++) {
        double t0 = now_ns();
        if (slowpath) {
            for (long i = 0; i < n; i++)
                sink += (uint64_t)pthread_rwlock_rdlock(&rw);      /* EDEADLK */
        } else if (compute) {
            uint64_t x = 88172645463325252ull;
            for (long i = 0; i < n; i++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            }
            sink = x;
        } else {
            for (long i = 0; i < n; i++) {
                pthread_mutex_lock(&lock);
                sink++;
                pthread_mutex_unlock(&lock);
            }
        }
        per[k] = (now_ns() - t0) / (double)n;
    }
    qsort(per, (size_t)trials, sizeof *per, cmp);
    printf("best_ns %.3f\nmedian_ns %.3f\n", per[0], per[trials / 2]);
    free(per);
    return 0;
}
