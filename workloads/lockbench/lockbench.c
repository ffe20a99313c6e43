/* corecast-lockbench: lock contention with a known shape.
 *
 * T threads share N operations. Each operation takes one lock, does CS units of work on
 * shared data inside the critical section, releases it, then does THINK units of private
 * work. With THINK >> CS the program scales; as T grows past (THINK + CS) / CS the lock
 * saturates and throughput flattens (Amdahl), and cache-line transfers of the shared data make
 * it fall (coherency).
 *
 *   corecast-lockbench [-t THREADS] [-n OPS] [--cs UNITS] [--think UNITS] [--lock mutex|spin]
 *
 * Prints `throughput: X ops/s` (and the settings) on stdout.
 */
#include "../common.h"
#include <getopt.h>
#include <pthread.h>

static long g_ops_per_thread, g_cs, g_think;
static int g_spin;
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_spinlock_t g_spinlock;
static struct { uint64_t v; char pad[56]; } g_shared[8] __attribute__((aligned(64)));
static volatile uint64_t g_sink;

static void *worker(void *arg) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)arg;
    for (long i = 0; i < g_ops_per_thread; i++) {
        if (g_spin)
            pthread_spin_lock(&g_spinlock);
        else
            pthread_mutex_lock(&g_mutex);
        uint64_t s = g_shared[i & 7].v | 1;
        g_shared[i & 7].v = wl_work(s, g_cs);
        if (g_spin)
            pthread_spin_unlock(&g_spinlock);
        else
            pthread_mutex_unlock(&g_mutex);
        x = wl_work(x | 1, g_think);
    }
    g_sink += x;
    return NULL;
}

int main(int argc, char **argv) {
    const char *prog = "corecast-lockbench";
    long threads = 1, ops = 2000000;
    g_cs = 50;
    g_think = 200;
    static struct option opts[] = {
        {"threads", required_argument, 0, 't'}, {"ops", required_argument, 0, 'n'},
        {"cs", required_argument, 0, 'c'}, {"think", required_argument, 0, 'w'},
        {"lock", required_argument, 0, 'l'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "t:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = wl_long(prog, "-t", optarg, 1); break;
        case 'n': ops = wl_long(prog, "-n", optarg, 1); break;
        case 'c': g_cs = wl_long(prog, "--cs", optarg, 0); break;
        case 'w': g_think = wl_long(prog, "--think", optarg, 0); break;
        case 'l':
            if (strcmp(optarg, "spin") == 0) g_spin = 1;
            else if (strcmp(optarg, "mutex") == 0) g_spin = 0;
            else { fprintf(stderr, "%s: --lock must be mutex or spin\n", prog); return 2; }
            break;
        case 'h':
            printf("usage: %s [-t THREADS] [-n OPS] [--cs UNITS] [--think UNITS] [--lock mutex|spin]\n", prog);
            return 0;
        default: return 2;
        }
    }
    pthread_spin_init(&g_spinlock, PTHREAD_PROCESS_PRIVATE);
    g_ops_per_thread = ops / threads;
    if (g_ops_per_thread < 1) g_ops_per_thread = 1;
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    double t0 = wl_now();
    for (long i = 0; i < threads; i++)
        if (pthread_create(&tids[i], NULL, worker, (void *)(uintptr_t)(i + 1)) != 0) {
            fprintf(stderr, "%s: cannot create thread %ld\n", prog, i);
            return 1;
        }
    for (long i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    double dt = wl_now() - t0;
    long done = g_ops_per_thread * threads;
    printf("threads: %ld\nlock: %s\ncs: %ld\nthink: %ld\nops: %ld\ntime_s: %.6f\n", threads,
           g_spin ? "spin" : "mutex", g_cs, g_think, done, dt);
    printf("throughput: %.1f ops/s\n", (double)done / dt);
    free(tids);
    return 0;
}
