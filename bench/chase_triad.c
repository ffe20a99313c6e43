/* A STREAM-like triad, a[i] = b[i] + s * c[i], on T threads pinned to the CPUs given, each on
 * its own slice of three arrays it initialised itself (first touch). Prints one line per
 * repetition: the wall time from the first thread's start to the last one's end (STREAM's), and
 * the bandwidth summed over the threads of each one's bytes over the time it ran (its CPU-time
 * clock: what corecast chase computes), ns and bytes/s. The peer of bench/chase_peak.py.
 *
 *     chase_triad ELEMENTS REPS CPU...
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double *a, *b, *c;
static long n, reps;
static int nthreads;
static pthread_barrier_t bar;
static double *t_start, *t_end, *t_cpu;   /* [rep * nthreads + thread] */

typedef struct { int id, cpu; } arg_t;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *worker(void *p) {
    arg_t *w = p;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(w->cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
    long lo = n * w->id / nthreads, hi = n * (w->id + 1) / nthreads;
    for (long i = lo; i < hi; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.5;
    }
    for (long r = 0; r < reps; r++) {
        pthread_barrier_wait(&bar);
        t_start[r * nthreads + w->id] = now();
        double u = cpu_now();
        for (long i = lo; i < hi; i++)
            a[i] = b[i] + 3.0 * c[i];
        t_cpu[r * nthreads + w->id] = (cpu_now() - u) / (double)(hi - lo);   /* ns per element */
        t_end[r * nthreads + w->id] = now();
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: chase_triad ELEMENTS REPS CPU...\n");
        return 2;
    }
    n = atol(argv[1]);
    reps = atol(argv[2]);
    nthreads = argc - 3;
    a = aligned_alloc(4096, n * sizeof *a);
    b = aligned_alloc(4096, n * sizeof *b);
    c = aligned_alloc(4096, n * sizeof *c);
    t_start = calloc(reps * nthreads, sizeof *t_start);
    t_end = calloc(reps * nthreads, sizeof *t_end);
    t_cpu = calloc(reps * nthreads, sizeof *t_cpu);
    pthread_barrier_init(&bar, NULL, nthreads);
    pthread_t th[nthreads];
    arg_t args[nthreads];
    for (int i = 0; i < nthreads; i++) {
        args[i].id = i;
        args[i].cpu = atoi(argv[3 + i]);
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    double check = 0;
    for (long i = 0; i < n; i += 4096)
        check += a[i];
    for (long r = 0; r < reps; r++) {
        double s = 1e300, e = 0, bw = 0;
        for (int i = 0; i < nthreads; i++) {
            if (t_start[r * nthreads + i] < s) s = t_start[r * nthreads + i];
            if (t_end[r * nthreads + i] > e) e = t_end[r * nthreads + i];
            bw += 24.0 / t_cpu[r * nthreads + i] * 1e9;
        }
        printf("%.0f %.6g\n", e - s, bw);
    }
    fprintf(stderr, "check %g\n", check);
    return 0;
}
