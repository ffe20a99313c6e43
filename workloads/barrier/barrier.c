/* corecast-barrier: a barrier-heavy kernel (bulk-synchronous phases).
 *
 * Each of PHASES phases splits WORK units among T threads, then all meet at a barrier.
 * IMBALANCE percent gives the last thread that much more work than the first (linearly in
 * between), so faster threads wait at the barrier: barrier-wait time grows with T.
 *
 *   corecast-barrier [-t THREADS] [--phases N] [--work UNITS] [--imbalance PCT]
 *
 * Prints `throughput: X phases/s`.
 */
#include "../common.h"
#include <getopt.h>
#include <pthread.h>

static long g_threads, g_phases, g_work, g_imb;
static pthread_barrier_t g_bar;
static volatile uint64_t g_sink[64];

static void *worker(void *arg) {
    long id = (long)(intptr_t)arg;
    double share = (double)g_work / (double)g_threads;
    if (g_threads > 1)
        share *= 1.0 + (double)g_imb / 100.0 * (double)id / (double)(g_threads - 1);
    long units = (long)share;
    uint64_t x = 0x2545F4914F6CDD1Dull + (uint64_t)id;
    for (long p = 0; p < g_phases; p++) {
        x = wl_work(x | 1, units);
        pthread_barrier_wait(&g_bar);
    }
    g_sink[id & 63] = x;
    return NULL;
}

int main(int argc, char **argv) {
    const char *prog = "corecast-barrier";
    g_threads = 1;
    g_phases = 2000;
    g_work = 40000;
    g_imb = 20;
    static struct option opts[] = {
        {"threads", required_argument, 0, 't'}, {"phases", required_argument, 0, 'p'},
        {"work", required_argument, 0, 'w'}, {"imbalance", required_argument, 0, 'i'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': g_threads = wl_long(prog, "-t", optarg, 1); break;
        case 'p': g_phases = wl_long(prog, "--phases", optarg, 1); break;
        case 'w': g_work = wl_long(prog, "--work", optarg, 1); break;
        case 'i': g_imb = wl_long(prog, "--imbalance", optarg, 0); break;
        case 'h':
            printf("usage: %s [-t THREADS] [--phases N] [--work UNITS] [--imbalance PCT]\n", prog);
            return 0;
        default: return 2;
        }
    }
    pthread_barrier_init(&g_bar, NULL, (unsigned)g_threads);
    pthread_t *tids = calloc((size_t)g_threads, sizeof *tids);
    double t0 = wl_now();
    for (long i = 0; i < g_threads; i++)
        if (pthread_create(&tids[i], NULL, worker, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "%s: cannot create thread %ld\n", prog, i);
            return 1;
        }
    for (long i = 0; i < g_threads; i++)
        pthread_join(tids[i], NULL);
    double dt = wl_now() - t0;
    printf("threads: %ld\nphases: %ld\nwork: %ld\nimbalance_pct: %ld\ntime_s: %.6f\n", g_threads,
           g_phases, g_work, g_imb, dt);
    printf("throughput: %.1f phases/s\n", (double)g_phases / dt);
    return 0;
}
