/* corecast-coord: one coordinator, THREADS independent workers (the shape of `xz -T`, a build
 * driver or any fork-join pipeline whose main thread hands out work and waits for results).
 *
 *   corecast-coord [-t THREADS] [--items N] [--work UNITS]
 *
 * The workers take ITEMS items from a shared counter (an atomic increment, no lock) and do
 * WORK units of private work on each; nothing is shared between items. The coordinator (the
 * main thread) collects the results in order, as a compressor writes its blocks: it waits on a
 * condition variable until item i is done, then takes the next. Its waits overlap the workers'
 * running: they cost no time, and the program scales with THREADS up to ITEMS (at THREADS
 * workers on THREADS cores the coordinator needs no core of its own).
 *
 * Prints `throughput: X items/s` and the settings. */
#include "../common.h"
#include <getopt.h>
#include <pthread.h>

static long g_items, g_work;
static long g_next;                        /* the next item to take (atomic) */
static unsigned char *g_done;              /* per item: done (under g_lock) */
static uint64_t *g_result;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        long i = __atomic_fetch_add(&g_next, 1, __ATOMIC_RELAXED);
        if (i >= g_items)
            break;
        uint64_t x = wl_work(0x9E3779B97F4A7C15ull ^ (uint64_t)i, g_work);
        pthread_mutex_lock(&g_lock);
        g_result[i] = x;
        g_done[i] = 1;
        pthread_cond_broadcast(&g_cond);
        pthread_mutex_unlock(&g_lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *prog = "corecast-coord";
    long threads = 1;
    g_items = 256;
    g_work = 2000000;
    static struct option opts[] = {
        {"threads", required_argument, 0, 't'},
        {"items", required_argument, 0, 'n'},
        {"work", required_argument, 0, 'w'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "t:n:w:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = wl_long(prog, "-t", optarg, 1); break;
        case 'n': g_items = wl_long(prog, "--items", optarg, 1); break;
        case 'w': g_work = wl_long(prog, "--work", optarg, 0); break;
        case 'h':
            printf("usage: %s [-t THREADS] [--items N] [--work UNITS]\n", prog);
            return 0;
        default:
            fprintf(stderr, "usage: %s [-t THREADS] [--items N] [--work UNITS]\n", prog);
            return 2;
        }
    }
    if (threads > 4096 || g_items > 100000000) {
        fprintf(stderr, "%s: at most 4096 threads and 1e8 items\n", prog);
        return 2;
    }
    g_done = calloc((size_t)g_items, 1);
    g_result = calloc((size_t)g_items, sizeof *g_result);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    if (!g_done || !g_result || !th) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    double t0 = wl_now();
    for (long k = 0; k < threads; k++) {
        if (pthread_create(&th[k], NULL, worker, NULL) != 0) {
            fprintf(stderr, "%s: cannot create thread %ld\n", prog, k);
            return 1;
        }
    }
    uint64_t sum = 0;
    pthread_mutex_lock(&g_lock);
    for (long i = 0; i < g_items; i++) {        /* collect in order, as a writer would */
        while (!g_done[i])
            pthread_cond_wait(&g_cond, &g_lock);
        sum += g_result[i];
    }
    pthread_mutex_unlock(&g_lock);
    for (long k = 0; k < threads; k++)
        pthread_join(th[k], NULL);
    double dt = wl_now() - t0;
    printf("threads: %ld\nitems: %ld\nwork: %ld\nchecksum: %016llx\ntime: %.6f s\n", threads, g_items, g_work,
           (unsigned long long)sum, dt);
    printf("throughput: %.3f items/s\n", (double)g_items / dt);
    free(th);
    free(g_done);
    free(g_result);
    return 0;
}
