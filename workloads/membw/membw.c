/* corecast-membw: a memory-bandwidth-bound kernel (STREAM's triad, a = b + s*c).
 *
 * Three arrays of MB mebibytes each, split among T threads, each thread touching its own
 * slice first (so pages land on its NUMA node), then ITERS sweeps. Throughput saturates at the
 * machine's memory bandwidth, not at its core count.
 *
 *   corecast-membw [-t THREADS] [--mb MIB] [--iters N]
 *
 * Prints `throughput: X MB/s` (bytes read and written per second, 1 MB = 1e6 bytes).
 */
#include "../common.h"
#include <getopt.h>
#include <pthread.h>

static double *A, *B, *C;
static long g_n, g_iters, g_threads;
static pthread_barrier_t g_start;

static void *worker(void *arg) {
    long id = (long)(intptr_t)arg;
    long lo = g_n * id / g_threads, hi = g_n * (id + 1) / g_threads;
    for (long i = lo; i < hi; i++) {
        A[i] = 0.0;
        B[i] = 1.0 + (double)(i & 7);
        C[i] = 2.0;
    }
    pthread_barrier_wait(&g_start);
    for (long k = 0; k < g_iters; k++) {
        const double s = 3.0 + (double)k;
        for (long i = lo; i < hi; i++)
            A[i] = B[i] + s * C[i];
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *prog = "corecast-membw";
    long mb = 64;
    g_threads = 1;
    g_iters = 10;
    static struct option opts[] = {
        {"threads", required_argument, 0, 't'}, {"mb", required_argument, 0, 'm'},
        {"iters", required_argument, 0, 'i'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': g_threads = wl_long(prog, "-t", optarg, 1); break;
        case 'm': mb = wl_long(prog, "--mb", optarg, 1); break;
        case 'i': g_iters = wl_long(prog, "--iters", optarg, 1); break;
        case 'h': printf("usage: %s [-t THREADS] [--mb MIB] [--iters N]\n", prog); return 0;
        default: return 2;
        }
    }
    g_n = mb * 1024 * 1024 / (long)sizeof(double);
    A = malloc((size_t)g_n * sizeof(double));
    B = malloc((size_t)g_n * sizeof(double));
    C = malloc((size_t)g_n * sizeof(double));
    if (!A || !B || !C) {
        fprintf(stderr, "%s: cannot allocate 3 x %ld MiB\n", prog, mb);
        return 1;
    }
    pthread_barrier_init(&g_start, NULL, (unsigned)g_threads + 1);
    pthread_t *tids = calloc((size_t)g_threads, sizeof *tids);
    for (long i = 0; i < g_threads; i++)
        if (pthread_create(&tids[i], NULL, worker, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "%s: cannot create thread %ld\n", prog, i);
            return 1;
        }
    pthread_barrier_wait(&g_start);
    double t0 = wl_now();
    for (long i = 0; i < g_threads; i++)
        pthread_join(tids[i], NULL);
    double dt = wl_now() - t0;
    double bytes = 3.0 * (double)sizeof(double) * (double)g_n * (double)g_iters;
    double check = 0;
    for (long i = 0; i < g_n; i += 4096)
        check += A[i];
    printf("threads: %ld\narray_mib: %ld\niters: %ld\ntime_s: %.6f\ncheck: %.1f\n", g_threads, mb,
           g_iters, dt, check);
    printf("throughput: %.1f MB/s\n", bytes / dt / 1e6);
    return 0;
}
