/* The tick loop of `corecast stat` (see src/corecast/collect/ticks.py).
 *
 * On the machines corecast runs on, a monitor that samples every 10 ms pays mostly for being
 * woken: resuming an interpreter after each sleep costs tens of microseconds of CPU before any
 * work is done. cc_ticks() takes up to `max_ticks` ticks in one call: for each, it sleeps until
 * the deadline t0 + k * interval (CLOCK_MONOTONIC, absolute, so the ticks do not drift), notes
 * the time and reads every descriptor of `read_fds` into its slot. It stops early when there is
 * something for the caller to take in -- the target ended, the kernel wrote task records, a
 * signal came -- in one of two ways:
 *
 *   wake = 1: the sleep is a ppoll() on `watch` (the target's pidfd, the ring buffers, the
 *             monitor's signal pipe): the call returns as soon as one is ready, before the tick
 *             it was waiting for.
 *   wake = 0: the sleep is a plain clock_nanosleep(), measured here ~15 us of CPU cheaper per
 *             tick than a ppoll() on a pidfd. Right after each tick's reads the call looks,
 *             without a system call where it can, for what would have woken it: a ring buffer
 *             whose head moved (`rings`: their mapped control pages), the SIGCHLD of a launched
 *             target (`child`: cc_ticks_sigchld's flag), and else `watch` with a zero-timeout
 *             poll(). When one is there, the call returns with that tick taken (what it found
 *             happened before that tick's reads). A signal with a handler ends the sleep.
 *
 * Nothing is allocated; the caller owns every buffer. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

enum { CC_TICKS_ALL = 0, CC_TICKS_READY = 1, CC_TICKS_SIGNAL = 2, CC_TICKS_ERROR = 3 };

/* struct perf_event_mmap_page: data_head and data_tail */
#define MMAP_DATA_HEAD 1024
#define MMAP_DATA_TAIL 1032

struct cc_ticks {
    /* in */
    int64_t t0_ns;            /* CLOCK_MONOTONIC of tick 0 */
    int64_t interval_ns;
    int64_t first;            /* the first tick to take: deadline t0 + first * interval */
    int32_t max_ticks;        /* how many ticks to take at most */
    int32_t nread;            /* descriptors read at each tick */
    int32_t slot;             /* bytes per read */
    int32_t nwatch;
    int32_t wake;             /* see above */
    int32_t nrings;
    int32_t child;            /* wake = 0: look at the SIGCHLD flag */
    int32_t pad;
    const int32_t *read_fds;  /* [nread] */
    struct pollfd *watch;     /* [nwatch]; revents are set when the call ends with CC_TICKS_READY */
    const uint64_t *rings;    /* [nrings] addresses of mapped perf ring buffers (control pages) */
    int64_t *times;           /* out [max_ticks]: CLOCK_MONOTONIC ns at which each tick was read */
    int32_t *lens;            /* out [max_ticks * nread]: bytes read, or -errno */
    uint8_t *data;            /* out [max_ticks * nread * slot] */
    /* out */
    int32_t done;             /* ticks taken */
    int32_t why;              /* CC_TICKS_* */
    int32_t err;              /* errno with CC_TICKS_ERROR */
    int32_t found;            /* wake = 0, CC_TICKS_READY: 1 a ring buffer, 2 SIGCHLD, 4 a watched descriptor */
};

static volatile sig_atomic_t child_exited;
static struct sigaction saved_chld;
static int chld_installed;

static void on_sigchld(int sig) {
    (void)sig;
    child_exited = 1;
}

/* Install (on = 1) or remove (on = 0) the SIGCHLD handler whose flag cc_ticks looks at with
 * child = 1. Without SA_RESTART, so that the signal ends a sleep. 0 on success. */
API int32_t cc_ticks_sigchld(int32_t on) {
    if (on) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigchld;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_NOCLDSTOP;
        child_exited = 0;
        if (sigaction(SIGCHLD, &sa, chld_installed ? NULL : &saved_chld) != 0)
            return -errno;
        chld_installed = 1;
    } else if (chld_installed) {
        sigaction(SIGCHLD, &saved_chld, NULL);
        chld_installed = 0;
    }
    return 0;
}

API int32_t cc_ticks_size(void) { return (int32_t)sizeof(struct cc_ticks); }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int32_t found(struct cc_ticks *t) {
    int32_t f = 0;
    for (int32_t i = 0; i < t->nrings; i++) {
        const uint8_t *base = (const uint8_t *)(uintptr_t)t->rings[i];
        uint64_t head = __atomic_load_n((const uint64_t *)(base + MMAP_DATA_HEAD), __ATOMIC_ACQUIRE);
        if (head != *(const volatile uint64_t *)(base + MMAP_DATA_TAIL)) {
            f |= 1;
            break;
        }
    }
    if (t->child && child_exited)
        f |= 2;
    if (t->nwatch > 0 && poll(t->watch, (nfds_t)t->nwatch, 0) > 0)
        f |= 4;
    return f;
}

API int32_t cc_ticks(struct cc_ticks *t) {
    t->done = 0;
    t->why = CC_TICKS_ALL;
    t->err = 0;
    t->found = 0;
    for (int32_t j = 0; j < t->max_ticks; j++) {
        int64_t deadline = t->t0_ns + (t->first + j) * t->interval_ns;
        for (;;) {
            int64_t left = deadline - now_ns();
            if (left <= 0)
                break;
            int r;
            if (t->wake && t->nwatch > 0) {
                struct timespec to = {left / 1000000000LL, left % 1000000000LL};
                r = ppoll(t->watch, (nfds_t)t->nwatch, &to, NULL);
                if (r > 0) {
                    t->why = CC_TICKS_READY;
                    return t->done;
                }
            } else {
                struct timespec at = {deadline / 1000000000LL, deadline % 1000000000LL};
                r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
                if (r > 0) {            /* clock_nanosleep returns the error number */
                    errno = r;
                    r = -1;
                }
            }
            if (r < 0) {
                if (errno == EINTR) {
                    t->why = CC_TICKS_SIGNAL;
                } else {
                    t->why = CC_TICKS_ERROR;
                    t->err = errno;
                }
                return t->done;
            }
        }
        t->times[j] = now_ns();
        int32_t *lens = t->lens + (size_t)j * t->nread;
        uint8_t *data = t->data + (size_t)j * t->nread * t->slot;
        for (int32_t i = 0; i < t->nread; i++) {
            ssize_t n = read(t->read_fds[i], data + (size_t)i * t->slot, (size_t)t->slot);
            lens[i] = n < 0 ? -errno : (int32_t)n;
        }
        t->done = j + 1;
        if (!t->wake && (t->found = found(t)) != 0) {
            t->why = CC_TICKS_READY;
            return t->done;
        }
    }
    return t->done;
}
