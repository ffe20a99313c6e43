/* corecast sync shim: preloaded with LD_PRELOAD, it measures how long each thread WAITS in
 * pthread mutexes, spin locks, rwlocks, condition variables, barriers and semaphores.
 *
 * Cost model: every lock-type wrapper first tries the non-blocking variant of the primitive
 * (trylock / tryrdlock / sem_trywait). When that succeeds -- the uncontended case -- no clock
 * is read: the only extra work is a call, a thread-local counter increment and a branch.
 * Only when the fast path fails is a cheap clock (the TSC on x86-64, the virtual counter on
 * AArch64, clock_gettime elsewhere) read around the real blocking call. Condition waits and
 * barrier waits always block, so they are always timed. Failed trylocks are counted, and the
 * time a thread spends spinning on trylock (from its first failure on a lock to acquiring it,
 * or to its last failure when it gives up) is charged to the trylock primitive.
 *
 * Totals per thread and per primitive are written when the process ends -- on return from
 * main, on exit() from any thread, and on fatal signals whose disposition is the default --
 * to the file named by $CORECAST_SHIM_REPORT ("%p" is replaced by the process id), written
 * to a temporary name and renamed, so a reader never sees half a report. Each thread's
 * /proc/self/task/TID/schedstat (run time, run-queue delay, timeslices) is recorded when the
 * thread exits, since an exited thread's schedstat is otherwise lost.
 *
 * Idle cores: a thread blocked in a wait frees its CPU. That costs the run nothing while
 * another of its threads can use the CPU (a coordinator waiting for its workers, an idle pool),
 * and costs the wait while cores stand idle. On the slow path only -- never on an uncontended
 * lock -- the shim keeps a process-wide count of the threads that are running (not blocked in
 * a wrapped wait) and of those waiting in a stall wait (lock, condition, barrier, semaphore),
 * and integrates over time each waiter's share of the idle CPUs, min(1, (cpus - running) /
 * waiting), cpus being the process's affinity mask at load. A wait reads that integral when it
 * starts and ends: the difference ("idle" in the report) is the part of the wait during which
 * cores stood idle, split fairly among the waiters, so the waits' idle parts never add up to
 * more than the idle core-time. Spinning waits (spin locks) count as waiting: the spinning core
 * does no work. pthread_join, sleeps, poll/select/epoll and waits for child processes are
 * wrapped only to take their thread out of the running count (they are not stall categories).
 * Threads blocked elsewhere (read(), raw futexes) count as running, which can only hide idle
 * time, and other processes of the run are not seen.
 *
 * Report format (text, one record per line, fields separated by single spaces):
 *   corecast-shim 1
 *   pid P / ppid P / clock tsc|cntvct|ns / ticks T / ns N   (ticks and ns elapsed since load)
 *   cpus C                                                  (CPUs in the affinity mask at load)
 *   end exit | end signal S
 *   thread TID exited 0|1 run_ns R delay_ns D slices S
 *   stat TID PRIMITIVE calls C contended K wait W max M idle I   (W, M, I in clock ticks)
 *   done
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------------ primitives */
enum prim {
    P_MUTEX_LOCK, P_MUTEX_TIMEDLOCK, P_MUTEX_TRYLOCK,
    P_SPIN_LOCK, P_SPIN_TRYLOCK,
    P_RWLOCK_RDLOCK, P_RWLOCK_WRLOCK, P_RWLOCK_TIMEDRDLOCK, P_RWLOCK_TIMEDWRLOCK,
    P_RWLOCK_TRYRDLOCK, P_RWLOCK_TRYWRLOCK,
    P_COND_WAIT, P_COND_TIMEDWAIT,
    P_BARRIER_WAIT,
    P_SEM_WAIT, P_SEM_TIMEDWAIT, P_SEM_TRYWAIT,
    /* not stall categories: wrapped only to take the thread out of the running count */
    P_JOIN, P_SLEEP, P_POLL, P_WAITCHILD,
    NPRIM
};

static const char *const prim_name[NPRIM] = {
    "mutex_lock", "mutex_timedlock", "mutex_trylock",
    "spin_lock", "spin_trylock",
    "rwlock_rdlock", "rwlock_wrlock", "rwlock_timedrdlock", "rwlock_timedwrlock",
    "rwlock_tryrdlock", "rwlock_trywrlock",
    "cond_wait", "cond_timedwait",
    "barrier_wait",
    "sem_wait", "sem_timedwait", "sem_trywait",
    "join", "sleep", "poll", "waitchild",
};

struct pstat {
    uint64_t calls;      /* calls of the wrapper */
    uint64_t contended;  /* fast path failed (for try-primitives: failed attempts) */
    uint64_t wait;       /* clock ticks spent waiting (try-primitives: spinning) */
    uint64_t max;        /* longest single wait */
    uint64_t idle;       /* ticks of the waits during which cores stood idle (this waiter's share) */
};

struct cc_thread {
    struct pstat s[NPRIM];
    /* an open trylock spin episode */
    const void *spin_addr;
    uint64_t spin_start, spin_last;
    int spin_prim;
    int tid;
    _Atomic int used;
    int exited;
    uint64_t sched[3];          /* schedstat at exit: run ns, run-queue delay ns, slices */
    void *(*start_fn)(void *);
    void *start_arg;
    struct cc_thread *next;     /* overflow list */
};

/* ------------------------------------------------------------------ clock */
static inline uint64_t cc_now(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

#if defined(__x86_64__) || defined(__i386__)
static const char *const clock_name = "tsc";
#elif defined(__aarch64__)
static const char *const clock_name = "cntvct";
#else
static const char *const clock_name = "ns";
#endif

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ real functions */
#define REAL(ret, name, ...) static ret (*real_##name)(__VA_ARGS__)
REAL(int, pthread_mutex_lock, pthread_mutex_t *);
REAL(int, pthread_mutex_trylock, pthread_mutex_t *);
REAL(int, pthread_mutex_timedlock, pthread_mutex_t *, const struct timespec *);
REAL(int, pthread_mutex_clocklock, pthread_mutex_t *, clockid_t, const struct timespec *);
REAL(int, pthread_spin_lock, pthread_spinlock_t *);
REAL(int, pthread_spin_trylock, pthread_spinlock_t *);
REAL(int, pthread_rwlock_rdlock, pthread_rwlock_t *);
REAL(int, pthread_rwlock_wrlock, pthread_rwlock_t *);
REAL(int, pthread_rwlock_tryrdlock, pthread_rwlock_t *);
REAL(int, pthread_rwlock_trywrlock, pthread_rwlock_t *);
REAL(int, pthread_rwlock_timedrdlock, pthread_rwlock_t *, const struct timespec *);
REAL(int, pthread_rwlock_timedwrlock, pthread_rwlock_t *, const struct timespec *);
REAL(int, pthread_rwlock_clockrdlock, pthread_rwlock_t *, clockid_t, const struct timespec *);
REAL(int, pthread_rwlock_clockwrlock, pthread_rwlock_t *, clockid_t, const struct timespec *);
REAL(int, pthread_cond_wait, pthread_cond_t *, pthread_mutex_t *);
REAL(int, pthread_cond_timedwait, pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
REAL(int, pthread_cond_clockwait, pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
REAL(int, pthread_barrier_wait, pthread_barrier_t *);
REAL(int, sem_wait, sem_t *);
REAL(int, sem_trywait, sem_t *);
REAL(int, sem_timedwait, sem_t *, const struct timespec *);
REAL(int, sem_clockwait, sem_t *, clockid_t, const struct timespec *);
REAL(int, pthread_create, pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
REAL(int, pthread_join, pthread_t, void **);
REAL(int, pthread_timedjoin_np, pthread_t, void **, const struct timespec *);
REAL(int, pthread_clockjoin_np, pthread_t, void **, clockid_t, const struct timespec *);
REAL(int, nanosleep, const struct timespec *, struct timespec *);
REAL(int, clock_nanosleep, clockid_t, int, const struct timespec *, struct timespec *);
REAL(int, usleep, useconds_t);
REAL(unsigned, sleep, unsigned);
REAL(int, poll, struct pollfd *, nfds_t, int);
REAL(int, ppoll, struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
REAL(int, select, int, fd_set *, fd_set *, fd_set *, struct timeval *);
REAL(int, pselect, int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
REAL(int, epoll_wait, int, struct epoll_event *, int, int);
REAL(int, epoll_pwait, int, struct epoll_event *, int, int, const sigset_t *);
REAL(pid_t, waitpid, pid_t, int *, int);
REAL(pid_t, wait, int *);
REAL(pid_t, wait4, pid_t, int *, int, struct rusage *);
REAL(int, waitid, idtype_t, id_t, siginfo_t *, int);
static void (*real__exit)(int) __attribute__((noreturn));
static void (*real__Exit)(int) __attribute__((noreturn));

static _Atomic int resolved;

static void *find(const char *name, const char *version) {
    void *p = NULL;
    if (version)
        p = dlvsym(RTLD_NEXT, name, version);
    if (!p)
        p = dlsym(RTLD_NEXT, name);
    return p;
}

static void cc_resolve(void) {
    if (atomic_load_explicit(&resolved, memory_order_acquire))
        return;
#define R(name, ver) real_##name = (__typeof__(real_##name))find(#name, ver)
    R(pthread_mutex_lock, NULL);
    R(pthread_mutex_trylock, NULL);
    R(pthread_mutex_timedlock, NULL);
    R(pthread_mutex_clocklock, NULL);
    R(pthread_spin_lock, NULL);
    R(pthread_spin_trylock, NULL);
    R(pthread_rwlock_rdlock, NULL);
    R(pthread_rwlock_wrlock, NULL);
    R(pthread_rwlock_tryrdlock, NULL);
    R(pthread_rwlock_trywrlock, NULL);
    R(pthread_rwlock_timedrdlock, NULL);
    R(pthread_rwlock_timedwrlock, NULL);
    R(pthread_rwlock_clockrdlock, NULL);
    R(pthread_rwlock_clockwrlock, NULL);
#if defined(__x86_64__)
    R(pthread_cond_wait, "GLIBC_2.3.2");
    R(pthread_cond_timedwait, "GLIBC_2.3.2");
#else
    R(pthread_cond_wait, NULL);
    R(pthread_cond_timedwait, NULL);
#endif
    R(pthread_cond_clockwait, NULL);
    R(pthread_barrier_wait, NULL);
    R(sem_wait, NULL);
    R(sem_trywait, NULL);
    R(sem_timedwait, NULL);
    R(sem_clockwait, NULL);
    R(pthread_create, NULL);
    R(pthread_join, NULL);
    R(pthread_timedjoin_np, NULL);
    R(pthread_clockjoin_np, NULL);
    R(nanosleep, NULL);
    R(clock_nanosleep, NULL);
    R(usleep, NULL);
    R(sleep, NULL);
    R(poll, NULL);
    R(ppoll, NULL);
    R(select, NULL);
    R(pselect, NULL);
    R(epoll_wait, NULL);
    R(epoll_pwait, NULL);
    R(waitpid, NULL);
    R(wait, NULL);
    R(wait4, NULL);
    R(waitid, NULL);
    R(_exit, NULL);
    R(_Exit, NULL);
#undef R
    atomic_store_explicit(&resolved, 1, memory_order_release);
}

#define NEED(name) do { if (UNLIKELY(!real_##name)) { cc_resolve(); if (!real_##name) { errno = ENOSYS; return ENOSYS; } } } while (0)

/* ------------------------------------------------------------------ thread registry */
#define STATIC_THREADS 4096
static struct cc_thread g_threads[STATIC_THREADS];
static _Atomic unsigned g_nthreads;
static struct cc_thread *_Atomic g_overflow;
static __thread struct cc_thread *tls_self __attribute__((tls_model("initial-exec")));
static pthread_key_t g_key;
static _Atomic int g_key_state;    /* 0 none, 1 creating, 2 ready */

static int cc_gettid(void) { return (int)syscall(SYS_gettid); }

static void thread_gone(void *p);

static struct cc_thread *alloc_thread(void) {
    unsigned i = atomic_fetch_add(&g_nthreads, 1);
    struct cc_thread *t;
    if (i < STATIC_THREADS) {
        t = &g_threads[i];
        memset(t, 0, sizeof *t);
    } else {
        void *m = mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        t = m;
        struct cc_thread *head = atomic_load(&g_overflow);
        do { t->next = head; } while (!atomic_compare_exchange_weak(&g_overflow, &head, t));
    }
    return t;
}

static void ensure_key(void) {
    int st = atomic_load(&g_key_state);
    if (st == 2)
        return;
    int zero = 0;
    if (atomic_compare_exchange_strong(&g_key_state, &zero, 1)) {
        if (pthread_key_create(&g_key, thread_gone) == 0)
            atomic_store(&g_key_state, 2);
        else
            atomic_store(&g_key_state, 3);
        return;
    }
    while (atomic_load(&g_key_state) == 1)
        ;
}

static void idle_count(int dr, int dw);

/* `counted`: the thread is in the running count already (pthread_create counts a new thread
 * when it creates it: it is runnable from then on). */
static void adopt(struct cc_thread *t, int counted) {
    t->tid = cc_gettid();
    if (!counted)
        idle_count(1, 0);
    atomic_store(&t->used, 1);
    tls_self = t;
    ensure_key();
    if (atomic_load(&g_key_state) == 2)
        pthread_setspecific(g_key, t);
}

static struct cc_thread dummy_thread;   /* when even mmap fails: counts go nowhere */

static __attribute__((noinline)) struct cc_thread *register_self(void) {
    struct cc_thread *t = alloc_thread();
    if (!t) {
        tls_self = &dummy_thread;
        return &dummy_thread;
    }
    adopt(t, 0);
    return t;
}

static inline struct cc_thread *self(void) {
    struct cc_thread *t = tls_self;
    if (UNLIKELY(!t))
        t = register_self();
    return t;
}

/* ------------------------------------------------------------------ idle cores
 * (see the top of the file). Only wrapped waits and thread starts and ends take this lock: the
 * uncontended lock path never does. */
static int g_ncpu = 1;            /* CPUs in the affinity mask at load */
static int g_running;             /* threads not blocked in a wrapped wait */
static int g_waiting;             /* threads blocked in a stall wait */
static uint64_t g_idle_acc;       /* integral of min(1, (cpus - running) / waiting), in ticks */
static uint64_t g_idle_last;      /* when it was last brought up to date */
static atomic_flag g_idle_lock = ATOMIC_FLAG_INIT;
static __thread int tls_marking __attribute__((tls_model("initial-exec")));

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Bring the integral up to now, then change the counts by dr (running) and dw (waiting).
 * *acc gets the integral and *now the time read under the lock. Returns 0, changing nothing,
 * when called from a signal handler that interrupted this thread inside the lock (taking it
 * again would deadlock): the caller then skips the accounting of that wait. */
static __attribute__((noinline)) int idle_mark(int dr, int dw, uint64_t *now, uint64_t *acc) {
    if (tls_marking)
        return 0;
    tls_marking = 1;
    unsigned spins = 0;
    while (atomic_flag_test_and_set_explicit(&g_idle_lock, memory_order_acquire)) {
        if (++spins > 64) {
            sched_yield();          /* the holder may have been preempted */
            spins = 0;
        } else {
            cpu_relax();
        }
    }
    uint64_t t = cc_now();
    if (t > g_idle_last) {
        if (g_running < g_ncpu && g_waiting > 0) {
            uint64_t dt = t - g_idle_last;
            uint64_t free_cpus = (uint64_t)(g_ncpu - (g_running > 0 ? g_running : 0));
            g_idle_acc += free_cpus >= (uint64_t)g_waiting ? dt : dt * free_cpus / (uint64_t)g_waiting;
        }
        g_idle_last = t;
    }
    g_running += dr;
    g_waiting += dw;
    *acc = g_idle_acc;
    atomic_flag_clear_explicit(&g_idle_lock, memory_order_release);
    tls_marking = 0;
    *now = t;
    return 1;
}

/* Marks that need neither the time nor the integral (thread start and end). */
static void idle_count(int dr, int dw) {
    uint64_t now, acc;
    (void)idle_mark(dr, dw, &now, &acc);
}

/* ------------------------------------------------------------------ accounting */
static inline void add_wait(struct cc_thread *t, int p, uint64_t d, uint64_t idle) {
    t->s[p].contended++;
    t->s[p].wait += d;
    t->s[p].idle += idle;
    if (d > t->s[p].max)
        t->s[p].max = d;
}

/* A blocking wait of a stall category, timed from idle_mark to idle_mark. */
#define WAIT_BEGIN \
    uint64_t t0_ = 0, i0_ = 0; \
    int marked_ = idle_mark(-1, 1, &t0_, &i0_); \
    if (!marked_) t0_ = cc_now()
#define WAIT_END(p) do { \
    uint64_t t1_ = 0, i1_ = 0; \
    if (!marked_ || !idle_mark(1, -1, &t1_, &i1_)) { t1_ = cc_now(); i1_ = i0_; } \
    add_wait(t, p, t1_ > t0_ ? t1_ - t0_ : 0, i1_ - i0_); \
} while (0)

/* Charge an open spin episode up to `end`. */
static void spin_charge(struct cc_thread *t, uint64_t end) {
    if (end > t->spin_start) {
        uint64_t d = end - t->spin_start;
        t->s[t->spin_prim].wait += d;
        t->s[t->spin_prim].idle += d;     /* a spinning core does no work: all of it */
        if (d > t->s[t->spin_prim].max)
            t->s[t->spin_prim].max = d;
    }
    t->spin_addr = NULL;
}

/* Any wrapped call while an episode is open: the lock itself ends it at `now` (acquired or
 * about to block on it); another primitive ends it at the last failure (the thread gave up). */
static __attribute__((noinline)) void spin_touch(struct cc_thread *t, const void *addr) {
    if (addr == t->spin_addr)
        spin_charge(t, cc_now());
    else
        spin_charge(t, t->spin_last);
}

static __attribute__((noinline)) void spin_fail(struct cc_thread *t, const void *addr, int p) {
    uint64_t now = cc_now();
    t->s[p].contended++;
    if (t->spin_addr != addr) {
        if (t->spin_addr)
            spin_charge(t, t->spin_last);
        t->spin_addr = addr;
        t->spin_start = now;
        t->spin_prim = p;
    }
    t->spin_last = now;
}

/* Per-lock, per-call-site tables (acquisitions, waits, sampled hold times) and the unlock
 * wrappers: a file of its own. */
#include "locktab.c"

#define ENTER(p, addr) \
    struct cc_thread *t = self(); \
    t->s[p].calls++; \
    if (UNLIKELY(t->spin_addr != NULL)) spin_touch(t, (addr))

/* A lock-type primitive: try first, time the blocking call only when the try fails. */
#define LOCKLIKE(p, addr, trycall, blockcall) do { \
    int r_ = (trycall); \
    if (LIKELY(r_ == 0)) { lt_acquired((const void *)(addr), LT_SITE(), lt_kind_of(p)); return 0; } \
    if (r_ != EBUSY) { r_ = (blockcall); if (r_ == 0) lt_acquired((const void *)(addr), LT_SITE(), lt_kind_of(p)); return r_; } \
    uint64_t w0_ = t->s[p].wait; \
    WAIT_BEGIN; \
    r_ = (blockcall); \
    WAIT_END(p); \
    if (r_ == 0) lt_waited((const void *)(addr), LT_SITE(), lt_kind_of(p), t->s[p].wait - w0_); \
    return r_; \
} while (0)

/* ------------------------------------------------------------------ mutexes */
EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
    NEED(pthread_mutex_trylock);
    ENTER(P_MUTEX_LOCK, m);
    LOCKLIKE(P_MUTEX_LOCK, m, real_pthread_mutex_trylock(m), real_pthread_mutex_lock(m));
}

EXPORT int pthread_mutex_trylock(pthread_mutex_t *m) {
    NEED(pthread_mutex_trylock);
    ENTER(P_MUTEX_TRYLOCK, m);
    int r = real_pthread_mutex_trylock(m);
    if (r == EBUSY)
        spin_fail(t, m, P_MUTEX_TRYLOCK);
    lt_tried(m, LT_SITE(), LT_MUTEX, r);
    return r;
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abst) {
    NEED(pthread_mutex_timedlock);
    ENTER(P_MUTEX_TIMEDLOCK, m);
    LOCKLIKE(P_MUTEX_TIMEDLOCK, m, real_pthread_mutex_trylock(m), real_pthread_mutex_timedlock(m, abst));
}

EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t c, const struct timespec *abst) {
    NEED(pthread_mutex_clocklock);
    ENTER(P_MUTEX_TIMEDLOCK, m);
    LOCKLIKE(P_MUTEX_TIMEDLOCK, m, real_pthread_mutex_trylock(m), real_pthread_mutex_clocklock(m, c, abst));
}

/* ------------------------------------------------------------------ spin locks */
EXPORT int pthread_spin_lock(pthread_spinlock_t *l) {
    NEED(pthread_spin_lock);
    ENTER(P_SPIN_LOCK, (const void *)l);
    LOCKLIKE(P_SPIN_LOCK, l, real_pthread_spin_trylock(l), real_pthread_spin_lock(l));
}

EXPORT int pthread_spin_trylock(pthread_spinlock_t *l) {
    NEED(pthread_spin_trylock);
    ENTER(P_SPIN_TRYLOCK, (const void *)l);
    int r = real_pthread_spin_trylock(l);
    if (r == EBUSY)
        spin_fail(t, (const void *)l, P_SPIN_TRYLOCK);
    lt_tried((const void *)l, LT_SITE(), LT_SPIN, r);
    return r;
}

/* ------------------------------------------------------------------ rwlocks */
EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l) {
    NEED(pthread_rwlock_rdlock);
    ENTER(P_RWLOCK_RDLOCK, l);
    LOCKLIKE(P_RWLOCK_RDLOCK, l, real_pthread_rwlock_tryrdlock(l), real_pthread_rwlock_rdlock(l));
}

EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l) {
    NEED(pthread_rwlock_wrlock);
    ENTER(P_RWLOCK_WRLOCK, l);
    LOCKLIKE(P_RWLOCK_WRLOCK, l, real_pthread_rwlock_trywrlock(l), real_pthread_rwlock_wrlock(l));
}

EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *abst) {
    NEED(pthread_rwlock_timedrdlock);
    ENTER(P_RWLOCK_TIMEDRDLOCK, l);
    LOCKLIKE(P_RWLOCK_TIMEDRDLOCK, l, real_pthread_rwlock_tryrdlock(l), real_pthread_rwlock_timedrdlock(l, abst));
}

EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *abst) {
    NEED(pthread_rwlock_timedwrlock);
    ENTER(P_RWLOCK_TIMEDWRLOCK, l);
    LOCKLIKE(P_RWLOCK_TIMEDWRLOCK, l, real_pthread_rwlock_trywrlock(l), real_pthread_rwlock_timedwrlock(l, abst));
}

EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t c, const struct timespec *abst) {
    NEED(pthread_rwlock_clockrdlock);
    ENTER(P_RWLOCK_TIMEDRDLOCK, l);
    LOCKLIKE(P_RWLOCK_TIMEDRDLOCK, l, real_pthread_rwlock_tryrdlock(l), real_pthread_rwlock_clockrdlock(l, c, abst));
}

EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t c, const struct timespec *abst) {
    NEED(pthread_rwlock_clockwrlock);
    ENTER(P_RWLOCK_TIMEDWRLOCK, l);
    LOCKLIKE(P_RWLOCK_TIMEDWRLOCK, l, real_pthread_rwlock_trywrlock(l), real_pthread_rwlock_clockwrlock(l, c, abst));
}

EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *l) {
    NEED(pthread_rwlock_tryrdlock);
    ENTER(P_RWLOCK_TRYRDLOCK, l);
    int r = real_pthread_rwlock_tryrdlock(l);
    if (r == EBUSY)
        spin_fail(t, l, P_RWLOCK_TRYRDLOCK);
    lt_tried(l, LT_SITE(), LT_RDLOCK, r);
    return r;
}

EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *l) {
    NEED(pthread_rwlock_trywrlock);
    ENTER(P_RWLOCK_TRYWRLOCK, l);
    int r = real_pthread_rwlock_trywrlock(l);
    if (r == EBUSY)
        spin_fail(t, l, P_RWLOCK_TRYWRLOCK);
    lt_tried(l, LT_SITE(), LT_WRLOCK, r);
    return r;
}

/* ------------------------------------------------------------------ condition variables */
#define TIMED(p, addr, call) do { \
    WAIT_BEGIN; \
    int r_ = (call); \
    WAIT_END(p); \
    return r_; \
} while (0)

EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    NEED(pthread_cond_wait);
    ENTER(P_COND_WAIT, c);
    lt_release(m);              /* the wait releases the mutex: a hold sample ends */
    TIMED(P_COND_WAIT, c, real_pthread_cond_wait(c, m));
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abst) {
    NEED(pthread_cond_timedwait);
    ENTER(P_COND_TIMEDWAIT, c);
    lt_release(m);              /* the wait releases the mutex: a hold sample ends */
    TIMED(P_COND_TIMEDWAIT, c, real_pthread_cond_timedwait(c, m, abst));
}

EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t ck, const struct timespec *abst) {
    NEED(pthread_cond_clockwait);
    ENTER(P_COND_TIMEDWAIT, c);
    lt_release(m);              /* the wait releases the mutex: a hold sample ends */
    TIMED(P_COND_TIMEDWAIT, c, real_pthread_cond_clockwait(c, m, ck, abst));
}

/* ------------------------------------------------------------------ barriers */
EXPORT int pthread_barrier_wait(pthread_barrier_t *b) {
    NEED(pthread_barrier_wait);
    ENTER(P_BARRIER_WAIT, b);
    TIMED(P_BARRIER_WAIT, b, real_pthread_barrier_wait(b));
}

/* ------------------------------------------------------------------ other blocking calls
 * Not stall categories: a thread blocked in one of these is not running, so it leaves the
 * running count while it is there (and its time is recorded under its own primitive). */
#define OFFCPU(p, type, call) do { \
    ENTER(p, NULL); \
    uint64_t t0_ = 0, i0_ = 0, t1_ = 0, i1_ = 0; \
    int marked_ = idle_mark(-1, 0, &t0_, &i0_); \
    type r_ = (call); \
    int e_ = errno; \
    if (marked_ && idle_mark(1, 0, &t1_, &i1_) && t1_ > t0_) { \
        t->s[p].wait += t1_ - t0_; \
        if (t1_ - t0_ > t->s[p].max) t->s[p].max = t1_ - t0_; \
    } \
    errno = e_; \
    return r_; \
} while (0)

#define NEED_ERRNO(name, fail) do { if (UNLIKELY(!real_##name)) { cc_resolve(); if (!real_##name) { errno = ENOSYS; return (fail); } } } while (0)

EXPORT int pthread_join(pthread_t th, void **ret) {
    NEED(pthread_join);
    OFFCPU(P_JOIN, int, real_pthread_join(th, ret));
}

EXPORT int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *abst) {
    NEED(pthread_timedjoin_np);
    OFFCPU(P_JOIN, int, real_pthread_timedjoin_np(th, ret, abst));
}

EXPORT int pthread_clockjoin_np(pthread_t th, void **ret, clockid_t c, const struct timespec *abst) {
    NEED(pthread_clockjoin_np);
    OFFCPU(P_JOIN, int, real_pthread_clockjoin_np(th, ret, c, abst));
}

EXPORT int nanosleep(const struct timespec *req, struct timespec *rem) {
    NEED_ERRNO(nanosleep, -1);
    OFFCPU(P_SLEEP, int, real_nanosleep(req, rem));
}

EXPORT int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem) {
    NEED(clock_nanosleep);      /* returns the error number, as the pthread functions do */
    OFFCPU(P_SLEEP, int, real_clock_nanosleep(c, flags, req, rem));
}

EXPORT int usleep(useconds_t us) {
    NEED_ERRNO(usleep, -1);
    OFFCPU(P_SLEEP, int, real_usleep(us));
}

EXPORT unsigned sleep(unsigned s) {
    NEED_ERRNO(sleep, s);
    OFFCPU(P_SLEEP, unsigned, real_sleep(s));
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout) {
    NEED_ERRNO(poll, -1);
    if (timeout == 0)
        return real_poll(fds, n, timeout);      /* does not block */
    OFFCPU(P_POLL, int, real_poll(fds, n, timeout));
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask) {
    NEED_ERRNO(ppoll, -1);
    OFFCPU(P_POLL, int, real_ppoll(fds, n, tmo, mask));
}

EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tmo) {
    NEED_ERRNO(select, -1);
    OFFCPU(P_POLL, int, real_select(n, r, w, e, tmo));
}

EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *tmo, const sigset_t *mask) {
    NEED_ERRNO(pselect, -1);
    OFFCPU(P_POLL, int, real_pselect(n, r, w, e, tmo, mask));
}

EXPORT int epoll_wait(int fd, struct epoll_event *ev, int max, int timeout) {
    NEED_ERRNO(epoll_wait, -1);
    if (timeout == 0)
        return real_epoll_wait(fd, ev, max, timeout);
    OFFCPU(P_POLL, int, real_epoll_wait(fd, ev, max, timeout));
}

EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int max, int timeout, const sigset_t *mask) {
    NEED_ERRNO(epoll_pwait, -1);
    if (timeout == 0)
        return real_epoll_pwait(fd, ev, max, timeout, mask);
    OFFCPU(P_POLL, int, real_epoll_pwait(fd, ev, max, timeout, mask));
}

EXPORT pid_t waitpid(pid_t pid, int *status, int options) {
    NEED_ERRNO(waitpid, -1);
    if (options & WNOHANG)
        return real_waitpid(pid, status, options);
    OFFCPU(P_WAITCHILD, pid_t, real_waitpid(pid, status, options));
}

EXPORT pid_t wait(int *status) {
    NEED_ERRNO(wait, -1);
    OFFCPU(P_WAITCHILD, pid_t, real_wait(status));
}

EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru) {
    NEED_ERRNO(wait4, -1);
    if (options & WNOHANG)
        return real_wait4(pid, status, options, ru);
    OFFCPU(P_WAITCHILD, pid_t, real_wait4(pid, status, options, ru));
}

EXPORT int waitid(idtype_t idt, id_t id, siginfo_t *info, int options) {
    NEED_ERRNO(waitid, -1);
    if (options & WNOHANG)
        return real_waitid(idt, id, info, options);
    OFFCPU(P_WAITCHILD, int, real_waitid(idt, id, info, options));
}

/* ------------------------------------------------------------------ semaphores
 * These return -1 and set errno; the try must not leave EAGAIN behind on success. */
#define SEMLIKE(p, s, blockcall) do { \
    int e_ = errno; \
    if (LIKELY(real_sem_trywait(s) == 0)) { errno = e_; return 0; } \
    if (errno != EAGAIN) return (blockcall); \
    errno = e_; \
    WAIT_BEGIN; \
    int r_ = (blockcall); \
    e_ = errno; \
    WAIT_END(p); \
    errno = e_; \
    return r_; \
} while (0)

#define NEED_SEM(name) do { if (UNLIKELY(!real_##name || !real_sem_trywait)) { cc_resolve(); if (!real_##name || !real_sem_trywait) { errno = ENOSYS; return -1; } } } while (0)

EXPORT int sem_wait(sem_t *s) {
    NEED_SEM(sem_wait);
    ENTER(P_SEM_WAIT, s);
    SEMLIKE(P_SEM_WAIT, s, real_sem_wait(s));
}

EXPORT int sem_timedwait(sem_t *s, const struct timespec *abst) {
    NEED_SEM(sem_timedwait);
    ENTER(P_SEM_TIMEDWAIT, s);
    SEMLIKE(P_SEM_TIMEDWAIT, s, real_sem_timedwait(s, abst));
}

EXPORT int sem_clockwait(sem_t *s, clockid_t c, const struct timespec *abst) {
    NEED_SEM(sem_clockwait);
    ENTER(P_SEM_TIMEDWAIT, s);
    SEMLIKE(P_SEM_TIMEDWAIT, s, real_sem_clockwait(s, c, abst));
}

EXPORT int sem_trywait(sem_t *s) {
    NEED_SEM(sem_trywait);
    ENTER(P_SEM_TRYWAIT, s);
    int r = real_sem_trywait(s);
    if (r != 0 && errno == EAGAIN) {
        int e = errno;
        spin_fail(t, s, P_SEM_TRYWAIT);
        errno = e;
    }
    return r;
}

/* ------------------------------------------------------------------ threads */
static void read_schedstat(int tid, uint64_t out[3]);

static void thread_gone(void *p) {
    struct cc_thread *t = p;
    if (!t)
        return;
    if (t->spin_addr)
        spin_charge(t, t->spin_last);
    read_schedstat(t->tid, t->sched);
    t->exited = 1;
    idle_count(-1, 0);
}

static void *trampoline(void *p) {
    struct cc_thread *t = p;
    adopt(t, 1);
    return t->start_fn(t->start_arg);
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    NEED(pthread_create);
    struct cc_thread *t = alloc_thread();
    if (!t)
        return real_pthread_create(th, attr, fn, arg);
    t->start_fn = fn;
    t->start_arg = arg;
    idle_count(1, 0);                   /* runnable from now on */
    int r = real_pthread_create(th, attr, trampoline, t);
    /* on failure the slot stays unused (used == 0) and is left out of the report */
    if (r != 0)
        idle_count(-1, 0);
    return r;
}

/* ------------------------------------------------------------------ the report */
static uint64_t g_t0_ticks, g_t0_ns;
static _Atomic int g_written;
static pid_t g_pid;     /* the process the counts belong to (set at load and in fork children) */

static void read_schedstat(int tid, uint64_t out[3]) {
    char path[64] = "/proc/self/task/";
    char num[16];
    int n = 0, v = tid;
    do { num[n++] = (char)('0' + v % 10); v /= 10; } while (v && n < 15);
    size_t len = strlen(path);
    while (n)
        path[len++] = num[--n];
    memcpy(path + len, "/schedstat", 11);
    out[0] = out[1] = out[2] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[128];
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0)
        return;
    buf[r] = 0;
    int field = 0;
    for (char *c = buf; *c && field < 3; c++) {
        if (*c >= '0' && *c <= '9')
            out[field] = out[field] * 10 + (uint64_t)(*c - '0');
        else if (*c == ' ')
            field++;
    }
}

struct out {
    int fd;
    size_t n;
    char buf[4096];
};

static void out_flush(struct out *o) {
    size_t off = 0;
    while (off < o->n) {
        ssize_t w = write(o->fd, o->buf + off, o->n - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        off += (size_t)w;
    }
    o->n = 0;
}

static void out_str(struct out *o, const char *s) {
    while (*s) {
        if (o->n == sizeof o->buf)
            out_flush(o);
        o->buf[o->n++] = *s++;
    }
}

static void out_u64(struct out *o, uint64_t v) {
    char tmp[24];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    char s[24];
    int i = 0;
    while (n)
        s[i++] = tmp[--n];
    s[i] = 0;
    out_str(o, s);
}

static void out_kv(struct out *o, const char *k, uint64_t v) {
    out_str(o, " ");
    out_str(o, k);
    out_str(o, " ");
    out_u64(o, v);
}

static void report_thread(struct out *o, struct cc_thread *t) {
    if (!atomic_load(&t->used))
        return;
    uint64_t st[3];
    if (t->exited) {
        st[0] = t->sched[0]; st[1] = t->sched[1]; st[2] = t->sched[2];
    } else {
        read_schedstat(t->tid, st);
    }
    out_str(o, "thread ");
    out_u64(o, (uint64_t)t->tid);
    out_kv(o, "exited", (uint64_t)t->exited);
    out_kv(o, "run_ns", st[0]);
    out_kv(o, "delay_ns", st[1]);
    out_kv(o, "slices", st[2]);
    out_str(o, "\n");
    uint64_t spin_extra = 0;
    if (t->spin_addr && t->spin_last > t->spin_start)
        spin_extra = t->spin_last - t->spin_start;   /* open episode: up to the last failure */
    for (int p = 0; p < NPRIM; p++) {
        struct pstat s = t->s[p];
        if (t->spin_addr && p == t->spin_prim) {
            s.wait += spin_extra;
            s.idle += spin_extra;
        }
        if (!s.calls)
            continue;
        out_str(o, "stat ");
        out_u64(o, (uint64_t)t->tid);
        out_str(o, " ");
        out_str(o, prim_name[p]);
        out_kv(o, "calls", s.calls);
        out_kv(o, "contended", s.contended);
        out_kv(o, "wait", s.wait);
        out_kv(o, "max", s.max);
        out_kv(o, "idle", s.idle);
        out_str(o, "\n");
    }
}

/* Async-signal-safe: only open/write/rename/close and our own formatting. */
static void write_report(int sig) {
    /* A vfork() or posix_spawn() child shares our memory but is another process: it must
     * neither write a report of the parent's counts nor mark the report as written. */
    if (getpid() != g_pid)
        return;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&g_written, &expected, 1))
        return;
    const char *pattern = getenv("CORECAST_SHIM_REPORT");
    if (!pattern || !*pattern)
        return;
    char path[4096], tmp[4200];
    size_t n = 0;
    pid_t pid = getpid();
    for (const char *c = pattern; *c && n < sizeof path - 24; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            char num[16];
            int k = 0;
            unsigned v = (unsigned)pid;
            do { num[k++] = (char)('0' + v % 10); v /= 10; } while (v);
            while (k)
                path[n++] = num[--k];
            c++;
        } else {
            path[n++] = *c;
        }
    }
    path[n] = 0;
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    struct out o;
    o.n = 0;
    o.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o.fd < 0)
        return;
    uint64_t ticks = cc_now() - g_t0_ticks, ns = mono_ns() - g_t0_ns;
    out_str(&o, "corecast-shim 1\n");
    out_str(&o, "pid "); out_u64(&o, (uint64_t)pid); out_str(&o, "\n");
    out_str(&o, "ppid "); out_u64(&o, (uint64_t)getppid()); out_str(&o, "\n");
    out_str(&o, "clock "); out_str(&o, clock_name); out_str(&o, "\n");
    out_str(&o, "ticks "); out_u64(&o, ticks); out_str(&o, "\n");
    out_str(&o, "ns "); out_u64(&o, ns); out_str(&o, "\n");
    out_str(&o, "cpus "); out_u64(&o, (uint64_t)g_ncpu); out_str(&o, "\n");
    if (sig) {
        out_str(&o, "end signal "); out_u64(&o, (uint64_t)sig); out_str(&o, "\n");
    } else {
        out_str(&o, "end exit\n");
    }
    unsigned cnt = atomic_load(&g_nthreads);
    if (cnt > STATIC_THREADS)
        cnt = STATIC_THREADS;
    for (unsigned i = 0; i < cnt; i++)
        report_thread(&o, &g_threads[i]);
    for (struct cc_thread *t = atomic_load(&g_overflow); t; t = t->next)
        report_thread(&o, t);
    lt_report(&o);
    out_str(&o, "done\n");
    out_flush(&o);
    close(o.fd);
    rename(tmp, path);
}

static void at_exit(void) { write_report(0); }

/* Processes that end with _exit() (forked workers often do) skip atexit handlers: report
 * here, then really exit. */
EXPORT __attribute__((noreturn)) void _exit(int status) {
    write_report(0);
    if (!real__exit)
        cc_resolve();
    if (real__exit)
        real__exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

EXPORT __attribute__((noreturn)) void _Exit(int status) {
    write_report(0);
    if (!real__Exit)
        cc_resolve();
    if (real__Exit)
        real__Exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT,
                                    SIGHUP, SIGQUIT, SIGXCPU, SIGXFSZ, SIGPIPE, SIGUSR1, SIGUSR2,
                                    SIGALRM};

static void on_fatal(int sig) {
    int e = errno;
    write_report(sig);
    errno = e;
    /* SA_RESETHAND restored the default action; deliver the signal again so the process
     * ends exactly as it would have without the shim. */
    raise(sig);
}

static void after_fork_child(void) {
    /* The child starts with only the forking thread; its counts start from zero. */
    atomic_store(&g_nthreads, 0);
    atomic_store(&g_overflow, NULL);
    atomic_store(&g_written, 0);
    g_pid = getpid();
    tls_self = NULL;
    tls_marking = 0;
    atomic_flag_clear(&g_idle_lock);
    g_running = g_waiting = 0;      /* only the forking thread goes on: register_self counts it */
    g_idle_acc = 0;
    g_idle_last = cc_now();
    g_t0_ticks = cc_now();
    g_t0_ns = mono_ns();
    lt_after_fork();
    register_self();
}

static int affinity_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

__attribute__((constructor)) static void cc_init(void) {
    g_pid = getpid();
    g_ncpu = affinity_cpus();
    g_idle_last = cc_now();
    g_t0_ticks = cc_now();
    g_t0_ns = mono_ns();
    cc_resolve();
    if (!tls_self)
        register_self();
    lt_init();
    pthread_atfork(NULL, NULL, after_fork_child);
    if (getenv("CORECAST_SHIM_REPORT")) {
        atexit(at_exit);
        for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
            struct sigaction old;
            if (sigaction(fatal_signals[i], NULL, &old) != 0)
                continue;
            if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
                continue;   /* ignored or handled by someone else: leave it alone */
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_fatal;
            sigemptyset(&sa.sa_mask);
            sa.sa_flags = SA_RESETHAND | SA_NODEFER;
            sigaction(fatal_signals[i], &sa, NULL);
        }
    }
}
