/* corecast-pool: a pthread pool whose throughput falls when it has more workers than CPUs, and
 * the example of obeying corecast meters' concurrency advice (corecast_meters.h).
 *
 *   corecast-pool [-t THREADS] [-n TASKS] [--cs UNITS] [--think UNITS] [--throttle]
 *
 * THREADS workers take TASKS tasks from one queue guarded by a spin lock; a task does CS units
 * of work on shared data inside the lock and THINK units of its own outside it. With more
 * workers than CPUs, the scheduler preempts workers holding the lock, and the others spin
 * through their time slices: throughput drops. With --throttle each worker calls
 * cc_throttle_point() before taking a task, so that workers beyond the daemon's
 * allowed_workers (scope $CORECAST_METERS_SCOPE, default node; board $CORECAST_METERS, default
 * "default") sleep instead of competing; the worker that finds the queue empty calls
 * cc_throttle_release() so that the sleeping ones wake and end. Without a live daemon
 * nothing is throttled.
 *
 * Prints `throughput: X tasks/s`, the settings, the time, and with --throttle the advice seen
 * and how often workers slept. */
#include "../common.h"
#include "corecast_meters.h"
#include <getopt.h>
#include <pthread.h>

static long g_tasks, g_cs, g_think;
static int g_throttle;
static long g_next;                                /* the queue: the next task to take */
static pthread_spinlock_t g_lock;
static struct { uint64_t v; char pad[56]; } g_shared[8] __attribute__((aligned(64)));
static long g_slept;
static volatile uint64_t g_sink;

static void *worker(void *arg) {
    int me = (int)(uintptr_t)arg;
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)me;
    if (g_throttle)
        cc_set_worker(me);
    for (;;) {
        if (g_throttle)
            __atomic_fetch_add(&g_slept, cc_throttle_point(), __ATOMIC_RELAXED);
        pthread_spin_lock(&g_lock);
        long t = g_next < g_tasks ? g_next++ : -1;
        if (t >= 0) {
            uint64_t s = g_shared[t & 7].v | 1;
            g_shared[t & 7].v = wl_work(s, g_cs);
        }
        pthread_spin_unlock(&g_lock);
        if (t < 0)
            break;
        x = wl_work(x | 1, g_think);
    }
    if (g_throttle)
        cc_throttle_release();                     /* the queue is empty: sleepers, wake and end */
    g_sink += x;
    return NULL;
}

int main(int argc, char **argv) {
    const char *prog = "corecast-pool";
    long threads = 1;
    g_tasks = 200000;
    g_cs = 200;
    g_think = 2000;
    static struct option opts[] = {
        {"threads", required_argument, 0, 't'}, {"tasks", required_argument, 0, 'n'},
        {"cs", required_argument, 0, 'c'}, {"think", required_argument, 0, 'w'},
        {"throttle", no_argument, 0, 'T'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "t:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = wl_long(prog, "-t", optarg, 1); break;
        case 'n': g_tasks = wl_long(prog, "-n", optarg, 1); break;
        case 'c': g_cs = wl_long(prog, "--cs", optarg, 0); break;
        case 'w': g_think = wl_long(prog, "--think", optarg, 0); break;
        case 'T': g_throttle = 1; break;
        case 'h':
            printf("usage: %s [-t THREADS] [-n TASKS] [--cs UNITS] [--think UNITS] [--throttle]\n", prog);
            return 0;
        default: return 2;
        }
    }
    pthread_spin_init(&g_lock, PTHREAD_PROCESS_PRIVATE);
    int allowed = g_throttle ? cc_allowed_workers(NULL) : -1;
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    double t0 = wl_now();
    for (long i = 0; i < threads; i++)
        if (pthread_create(&tids[i], NULL, worker, (void *)(uintptr_t)i) != 0) {
            fprintf(stderr, "%s: cannot create thread %ld\n", prog, i);
            return 1;
        }
    for (long i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    double dt = wl_now() - t0;
    printf("threads: %ld\ntasks: %ld\ncs: %ld\nthink: %ld\ntime_s: %.6f\n", threads, g_tasks, g_cs, g_think, dt);
    if (g_throttle)
        printf("allowed_workers: %d\nslept: %ld\n", allowed, g_slept);
    printf("throughput: %.1f tasks/s\n", (double)g_tasks / dt);
    free(tids);
    return 0;
}
