/* corecast-phases: a program whose CPU use goes up and down on a schedule, to drive meters and
 * triggers (tests/test_meters_triggers.py).
 *
 *   corecast-phases [-t THREADS] PHASE...      PHASE: idle:SECONDS or busy:SECONDS
 *
 * In a busy phase THREADS threads (default 1) spin; in an idle phase the program sleeps. At the
 * start of each phase, and at the end, it prints one line (flushed):
 *   phase N KIND REALTIME_S MONOTONIC_S          (N from 1; KIND idle or busy)
 *   end REALTIME_S MONOTONIC_S
 * so that a test can set what it saw against when each phase began. */
#include "../common.h"
#include <pthread.h>

static volatile int g_stop;
static volatile uint64_t g_sink;

static void *spin(void *arg) {
    uint64_t x = (uint64_t)(uintptr_t)arg | 1;
    while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED))
        x = wl_work(x, 1000);
    g_sink += x;
    return NULL;
}

static void stamp(const char *what) {
    struct timespec rt, mt;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    printf("%s %.6f %.6f\n", what, (double)rt.tv_sec + 1e-9 * (double)rt.tv_nsec,
           (double)mt.tv_sec + 1e-9 * (double)mt.tv_nsec);
    fflush(stdout);
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv) {
    const char *prog = "corecast-phases";
    long threads = 1;
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "-t") == 0) {
        threads = wl_long(prog, "-t", argv[2], 1);
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: %s [-t THREADS] idle:SECONDS|busy:SECONDS ...\n", prog);
        return 2;
    }
    for (int i = first; i < argc; i++) {          /* check them all before starting */
        char *end;
        const char *colon = strchr(argv[i], ':');
        double s = colon ? strtod(colon + 1, &end) : -1;
        if (!colon || *end || !(s >= 0) || (strncmp(argv[i], "idle:", 5) != 0 && strncmp(argv[i], "busy:", 5) != 0)) {
            fprintf(stderr, "%s: '%s' is not idle:SECONDS or busy:SECONDS\n", prog, argv[i]);
            return 2;
        }
    }
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    for (int i = first; i < argc; i++) {
        double s = strtod(strchr(argv[i], ':') + 1, NULL);
        int busy = strncmp(argv[i], "busy:", 5) == 0;
        char what[64];
        snprintf(what, sizeof what, "phase %d %s", i - first + 1, busy ? "busy" : "idle");
        stamp(what);
        if (!busy) {
            sleep_s(s);
            continue;
        }
        g_stop = 0;
        for (long t = 0; t < threads; t++)
            pthread_create(&tids[t], NULL, spin, (void *)(uintptr_t)(t + 1));
        sleep_s(s);
        __atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
        for (long t = 0; t < threads; t++)
            pthread_join(tids[t], NULL);
    }
    stamp("end");
    free(tids);
    return 0;
}
