/* The kernel of `corecast chase` and the core-to-core part of `corecast calibrate`, loaded
 * with ctypes by corecast.collect.chase (see docs/chase.md for the method).
 *
 * A buffer is cut into lines (`line` bytes, the first word of each holds a pointer). The
 * lines are put in one cyclic *order*:
 *   - random: the buffer is cut into TLB-locality groups (`group_bytes`, default 64 pages);
 *     the groups are visited in a random order and the lines inside a group in a random order,
 *     so a walk stays inside a few pages for a while (the TLB holds them) and then moves on,
 *     while no hardware prefetcher can guess the next line;
 *   - stride: 0, s, 2s, ... then 1, 1+s, ... (s lines; forward is s = 1).
 * The order is then cut into `nchains` equal consecutive segments, each closed into a cycle of
 * its own: disjoint chains, so no chain ever finds a line another brought in. Thread t walks
 * chains t*k .. t*k+k-1, i.e. every thread starts at its own offset of the order. Relinking for
 * another number of chains touches only the segments' ends (O(chains)), so a sweep over chain
 * counts builds the order once.
 *
 * A run starts the workers pinned to the CPUs given, lets them warm up (phase 0: the batch size
 * is doubled until a batch takes BATCH_NS, the caches and TLB fill; this sample is discarded),
 * then advances a shared phase counter once per sample. Each worker notices the change at the
 * end of its current batch and records its own clock and count there, so every sample is timed
 * by the thread that did the work, on the wall clock and on its own CPU-time clock (how long it
 * really ran: on a shared machine another program may have taken the CPU for a while); the
 * clocks are read once per sample (their cost is measured by cc_timer_overhead_ns and
 * subtracted by the caller).
 *
 * Loaders (the loaded-latency mode) read their slice of a second buffer line after line, with
 * `delay` turns of an empty loop after each line (the injection delay).
 *
 * One file of ~650 lines: the buffers, the walks (64 unrolled loops and their table), the runs
 * and the ping-pong share the buffer type and the pinning, and are loaded as one library.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

#define MAX_CHAINS 64           /* chains per thread: one specialised loop each (below) */
#define HUGE_BYTES (2UL << 20)
#define BATCH_NS 50000ULL       /* a batch between two looks at the phase: ~50 us */

enum { PAGE_4K = 0, PAGE_2M = 1, PAGE_THP = 2 };
enum { PAT_RANDOM = 0, PAT_STRIDE = 1 };

typedef struct {
    char *base;                 /* first line */
    void *map;                  /* what mmap returned */
    size_t map_bytes;
    size_t bytes, line, nlines;
    int page;                   /* the page kind obtained */
    uint32_t *order;            /* the cyclic order of line indexes */
    size_t nseg;                /* chains linked now */
    void **heads;               /* one per chain */
} cc_chase_buf;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void say(char *msg, size_t cap, const char *fmt, const char *a, const char *b) {
    if (msg && cap)
        snprintf(msg, cap, fmt, a, b);
}

/* splitmix64 */
static uint64_t rnd(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n) {   /* uniform in [0, n) (n < 2^32) */
    return (uint64_t)(((unsigned __int128)rnd(s) * n) >> 64);
}

static void shuffle(uint32_t *a, size_t n, uint64_t *s) {
    for (size_t i = n; i > 1; i--) {
        size_t j = below(s, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static void mapped(cc_chase_buf *b, void *map, size_t len, char *base, int page) {
    b->map = map;
    b->map_bytes = len;
    b->base = base;
    b->page = page;
}

static inline char *line_at(const cc_chase_buf *b, size_t idx) { return b->base + idx * b->line; }

/* ------------------------------------------------------------------------ buffers */
API cc_chase_buf *cc_chase_new(size_t bytes, size_t line, int page, char *msg, size_t cap) {
    if (msg && cap)
        msg[0] = 0;
    if (line < sizeof(void *) || line % sizeof(void *)) {
        say(msg, cap, "line size must be a multiple of %s bytes%s", "8", "");
        return NULL;
    }
    size_t nlines = bytes / line;
    if (nlines < 2) {
        say(msg, cap, "the buffer must hold at least two lines%s%s", "", "");
        return NULL;
    }
    if (nlines > UINT32_MAX) {
        say(msg, cap, "the buffer holds more than 2^32 lines%s%s", "", "");
        return NULL;
    }
    cc_chase_buf *b = calloc(1, sizeof *b);
    if (!b) {
        say(msg, cap, "out of memory%s%s", "", "");
        return NULL;
    }
    b->bytes = nlines * line;
    b->line = line;
    b->nlines = nlines;
    size_t huge_len = (b->bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
    char why[160];
    if (page == PAGE_2M) {
        void *m = mmap(NULL, huge_len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0);
        if (m != MAP_FAILED) {
            mapped(b, m, huge_len, m, PAGE_2M);
        } else {
            snprintf(why, sizeof why, "%s", strerror(errno));
            say(msg, cap, "--page 2m: no 2 MiB hugetlb pages (mmap MAP_HUGETLB: %s; the pool is "
                "HugePages_Free in /proc/meminfo, set by vm.nr_hugepages)%s; using thp instead",
                why, "");
            page = PAGE_THP;
        }
    }
    if (!b->map && page == PAGE_THP) {
        size_t len = huge_len + HUGE_BYTES;
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            goto nomem;
        char *base = (char *)(((uintptr_t)m + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
        if (madvise(base, huge_len, MADV_HUGEPAGE) == 0) {
            mapped(b, m, len, base, PAGE_THP);
        } else {
            snprintf(why, sizeof why, "%s", strerror(errno));
            munmap(m, len);
            size_t used = msg ? strlen(msg) : 0;
            if (msg && used + 2 < cap) {
                if (used) {
                    msg[used++] = ';';
                    msg[used++] = ' ';
                    msg[used] = 0;
                }
                snprintf(msg + used, cap - used, "--page thp: madvise(MADV_HUGEPAGE) failed (%s); "
                         "using 4 KiB pages instead", why);
            }
            page = PAGE_4K;
        }
    }
    if (!b->map) {
        void *m = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            goto nomem;
        /* 4 KiB pages even where transparent huge pages are always on */
        (void)madvise(m, b->bytes, MADV_NOHUGEPAGE);
        mapped(b, m, b->bytes, m, PAGE_4K);
    }
    b->order = malloc(nlines * sizeof *b->order);
    if (!b->order)
        goto nomem;
    return b;
nomem:
    snprintf(why, sizeof why, "%s", strerror(errno));
    if (b->map)
        munmap(b->map, b->map_bytes);
    free(b);
    say(msg, cap, "cannot allocate the buffer (%s)%s", why, "");
    return NULL;
}

API void cc_chase_free(cc_chase_buf *b) {
    if (!b)
        return;
    munmap(b->map, b->map_bytes);
    free(b->order);
    free(b->heads);
    free(b);
}

/* out: base address, bytes, page kind obtained, lines */
API void cc_chase_info(const cc_chase_buf *b, uint64_t out[4]) {
    out[0] = (uint64_t)(uintptr_t)b->base;
    out[1] = b->bytes;
    out[2] = (uint64_t)b->page;
    out[3] = b->nlines;
}

/* The cyclic order of the lines, and one chain linked through all of them. */
API int cc_chase_order(cc_chase_buf *b, int pattern, size_t stride_lines, size_t group_bytes,
                       uint64_t seed) {
    size_t n = b->nlines;
    uint64_t s = seed ? seed : 0x5EEDULL;
    if (pattern == PAT_RANDOM) {
        size_t g = group_bytes / b->line;
        if (g < 1)
            g = 1;
        size_t ngroups = (n + g - 1) / g;
        uint32_t *gorder = malloc(ngroups * sizeof *gorder);
        if (!gorder)
            return -1;
        for (size_t i = 0; i < ngroups; i++)
            gorder[i] = (uint32_t)i;
        shuffle(gorder, ngroups, &s);
        size_t pos = 0;
        for (size_t k = 0; k < ngroups; k++) {
            size_t first = (size_t)gorder[k] * g, len = first + g <= n ? g : n - first;
            for (size_t i = 0; i < len; i++)
                b->order[pos + i] = (uint32_t)(first + i);
            shuffle(b->order + pos, len, &s);
            pos += len;
        }
        free(gorder);
    } else {
        if (stride_lines < 1)
            return -1;
        size_t pos = 0;
        for (size_t off = 0; off < stride_lines && off < n; off++)
            for (size_t i = off; i < n; i += stride_lines)
                b->order[pos++] = (uint32_t)i;
    }
    for (size_t i = 0; i < n; i++)
        *(void **)line_at(b, b->order[i]) = line_at(b, b->order[(i + 1) % n]);
    free(b->heads);
    b->heads = malloc(sizeof(void *));
    if (!b->heads)
        return -1;
    b->heads[0] = line_at(b, b->order[0]);
    b->nseg = 1;
    return 0;
}

/* Cut the order into `nchains` cycles (consecutive segments of it). */
API int cc_chase_link(cc_chase_buf *b, size_t nchains) {
    size_t n = b->nlines;
    if (nchains < 1 || nchains > n || !b->nseg)
        return -1;
    void **heads = malloc(nchains * sizeof *heads);
    if (!heads)
        return -1;
    for (size_t c = 0; c < b->nseg; c++) {          /* back to the one cycle of the order */
        size_t e = (c + 1) * n / b->nseg - 1;
        *(void **)line_at(b, b->order[e]) = line_at(b, b->order[(e + 1) % n]);
    }
    for (size_t c = 0; c < nchains; c++) {
        size_t start = c * n / nchains, e = (c + 1) * n / nchains - 1;
        *(void **)line_at(b, b->order[e]) = line_at(b, b->order[start]);
        heads[c] = line_at(b, b->order[start]);
    }
    free(b->heads);
    b->heads = heads;
    b->nseg = nchains;
    return 0;
}

/* Walk every chain from its head back to it: 0 when the chains are disjoint cycles that cover
 * every line once (lengths[c]: chain c's lines), -1 otherwise. For tests. */
API int cc_chase_verify(const cc_chase_buf *b, uint64_t *lengths) {
    uint8_t *seen = calloc(b->nlines, 1);
    if (!seen)
        return -1;
    size_t total = 0;
    int rc = 0;
    for (size_t c = 0; c < b->nseg && rc == 0; c++) {
        char *p = b->heads[c];
        uint64_t n = 0;
        do {
            size_t off = (size_t)(p - b->base);
            if (p < b->base || off >= b->bytes || off % b->line || seen[off / b->line]) {
                rc = -1;
                break;
            }
            seen[off / b->line] = 1;
            n++;
            p = *(char **)p;
        } while (p != b->heads[c]);
        lengths[c] = n;
        total += n;
    }
    free(seen);
    return rc == 0 && total == b->nlines ? 0 : -1;
}

/* ------------------------------------------------------------------------ the walks */
/* K chains dereferenced interleaved: K independent loads in flight. With K a constant the
 * loops unroll and p[] lives in registers (spilled to the stack past ~14 chains: the spills
 * hit L1 and stay off the misses' critical path). A loop over an array of K pointers instead
 * would add a load and a store to every dereference and fill the core's window sooner: tried
 * here, it gave ~25% less bandwidth at 64 chains, so every K has its own unrolled loop. */
static inline __attribute__((always_inline)) void walk(void **heads, const int K, uint64_t n) {
    void *p[MAX_CHAINS];
#pragma GCC unroll 64
    for (int j = 0; j < K; j++)
        p[j] = heads[j];
    for (uint64_t i = 0; i < n; i++) {
#pragma GCC unroll 64
        for (int j = 0; j < K; j++)
            p[j] = *(void *volatile *)p[j];
    }
#pragma GCC unroll 64
    for (int j = 0; j < K; j++)
        heads[j] = p[j];
}

#define W(k) static void walk##k(void **h, uint64_t n) { walk(h, k, n); }
W(1) W(2) W(3) W(4) W(5) W(6) W(7) W(8) W(9) W(10) W(11) W(12) W(13) W(14) W(15) W(16)
W(17) W(18) W(19) W(20) W(21) W(22) W(23) W(24) W(25) W(26) W(27) W(28) W(29) W(30) W(31) W(32)
W(33) W(34) W(35) W(36) W(37) W(38) W(39) W(40) W(41) W(42) W(43) W(44) W(45) W(46) W(47) W(48)
W(49) W(50) W(51) W(52) W(53) W(54) W(55) W(56) W(57) W(58) W(59) W(60) W(61) W(62) W(63) W(64)
#undef W
typedef void (*walk_fn)(void **, uint64_t);
static const walk_fn WALKS[MAX_CHAINS + 1] = {
    NULL, walk1, walk2, walk3, walk4, walk5, walk6, walk7, walk8, walk9, walk10, walk11, walk12,
    walk13, walk14, walk15, walk16, walk17, walk18, walk19, walk20, walk21, walk22, walk23, walk24,
    walk25, walk26, walk27, walk28, walk29, walk30, walk31, walk32, walk33, walk34, walk35, walk36,
    walk37, walk38, walk39, walk40, walk41, walk42, walk43, walk44, walk45, walk46, walk47, walk48,
    walk49, walk50, walk51, walk52, walk53, walk54, walk55, walk56, walk57, walk58, walk59, walk60,
    walk61, walk62, walk63, walk64};

API int cc_chase_max_chains(void) { return MAX_CHAINS; }

/* ------------------------------------------------------------------------ runs */
typedef struct {
    _Atomic int phase;          /* 0 warm-up, 1..nsamples samples, nsamples+1 stop */
    _Atomic int go;
    _Atomic int ready;
    int nsamples;
} control;

typedef struct {
    pthread_t th;
    control *ctl;
    int cpu, err;
    /* a chaser */
    void *heads[MAX_CHAINS];
    int chains;
    /* a loader */
    char *lo, *hi, *pos;
    size_t line;
    uint64_t delay, sum;
    /* results, one per sample */
    uint64_t *count, *ns, *cpu_ns;
} worker;

static uint64_t load_batch(worker *w, uint64_t n) {
    char *p = w->pos;
    uint64_t sum = w->sum;
    for (uint64_t i = 0; i < n; i++) {
        sum += *(volatile uint64_t *)p;
        p += w->line;
        if (p >= w->hi)
            p = w->lo;
        for (uint64_t d = 0; d < w->delay; d++)
            __asm__ volatile("" ::: "memory");
    }
    w->pos = p;
    w->sum = sum;
    return n;
}

static uint64_t batch(worker *w, uint64_t n) {
    if (w->chains) {
        WALKS[w->chains](w->heads, n);
        return n * (uint64_t)w->chains;
    }
    return load_batch(w, n);
}

static int pin(int cpu) {
    if (cpu < 0)
        return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *run_worker(void *arg) {
    worker *w = arg;
    control *c = w->ctl;
    w->err = pin(w->cpu);
    atomic_fetch_add(&c->ready, 1);
    struct timespec nap = {0, 20000};
    while (!atomic_load(&c->go))
        nanosleep(&nap, NULL);
    if (w->err)
        return NULL;
    uint64_t iters = 4, done = 0, c0 = 0, t0 = 0, u0 = 0, tb = now_ns();
    int seen = 0;
    for (;;) {
        done += batch(w, iters);
        int ph = atomic_load_explicit(&c->phase, memory_order_acquire);
        if (ph == seen) {
            if (seen == 0) {                      /* warming up: size the batches */
                uint64_t t = now_ns();
                if (t - tb < BATCH_NS && iters < (1ULL << 40))
                    iters *= 2;
                tb = t;
            }
            continue;
        }
        uint64_t t = now_ns(), u = thread_cpu_ns();
        if (seen >= 1 && seen <= c->nsamples) {   /* the sample `seen` ends here */
            w->count[seen - 1] = done - c0;
            w->ns[seen - 1] = t - t0;
            w->cpu_ns[seen - 1] = u - u0;
        }
        /* phases skipped while this thread did not run (oversubscribed) stay 0: no sample */
        seen = ph;
        c0 = done;
        t0 = t;
        u0 = u;
        if (ph > c->nsamples)
            break;
    }
    return NULL;
}

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* Run `nchasers` threads walking `chains` chains each of `chase` (linked with nchasers*chains
 * chains) and `nloaders` threads reading `load` with `delay`, pinned to cpus[0..] (-1: not
 * pinned). out_count/out_ns/out_cpu_ns: [worker][sample], workers in that order (chasers, then
 * loaders); a chaser counts dereferences, a loader lines read; ns is wall time, cpu_ns the time
 * the thread ran (CLOCK_THREAD_CPUTIME_ID). Returns 0, or -1 with `msg`. */
API int cc_chase_run(cc_chase_buf *chase, int nchasers, int chains, cc_chase_buf *load, int nloaders,
                     uint64_t delay, const int *cpus, int nsamples, uint64_t sample_ns,
                     uint64_t warmup_ns, uint64_t *out_count, uint64_t *out_ns, uint64_t *out_cpu_ns,
                     char *msg, size_t cap) {
    if (msg && cap)
        msg[0] = 0;
    int nw = nchasers + nloaders;
    if (nw < 1 || nsamples < 1 || (nchasers && (!chase || chains < 1 || chains > MAX_CHAINS ||
                                                 chase->nseg != (size_t)nchasers * (size_t)chains)) ||
        (nloaders && (!load || load->nlines < (size_t)nloaders))) {
        say(msg, cap, "bad run request (chains not linked for %s threads%s)", "these", "");
        return -1;
    }
    control ctl;
    atomic_init(&ctl.phase, 0);
    atomic_init(&ctl.go, 0);
    atomic_init(&ctl.ready, 0);
    ctl.nsamples = nsamples;
    worker *ws = calloc((size_t)nw, sizeof *ws);
    if (!ws) {
        say(msg, cap, "out of memory%s%s", "", "");
        return -1;
    }
    memset(out_count, 0, sizeof *out_count * (size_t)nw * (size_t)nsamples);
    memset(out_ns, 0, sizeof *out_ns * (size_t)nw * (size_t)nsamples);
    memset(out_cpu_ns, 0, sizeof *out_cpu_ns * (size_t)nw * (size_t)nsamples);
    for (int i = 0; i < nw; i++) {
        worker *w = &ws[i];
        w->ctl = &ctl;
        w->cpu = cpus ? cpus[i] : -1;
        w->count = out_count + (size_t)i * nsamples;
        w->ns = out_ns + (size_t)i * nsamples;
        w->cpu_ns = out_cpu_ns + (size_t)i * nsamples;
        if (i < nchasers) {
            w->chains = chains;
            for (int j = 0; j < chains; j++)
                w->heads[j] = chase->heads[(size_t)i * chains + j];
        } else {
            int k = i - nchasers;
            size_t a = (size_t)k * load->nlines / nloaders, z = (size_t)(k + 1) * load->nlines / nloaders;
            w->lo = w->pos = line_at(load, a);
            w->hi = line_at(load, z);
            w->line = load->line;
            w->delay = delay;
        }
    }
    int started = 0, rc = 0;
    for (; started < nw; started++) {
        int e = pthread_create(&ws[started].th, NULL, run_worker, &ws[started]);
        if (e) {
            char why[96];
            snprintf(why, sizeof why, "%s", strerror(e));
            say(msg, cap, "cannot start a thread (%s)%s", why, "");
            rc = -1;
            break;
        }
    }
    struct timespec nap = {0, 50000};
    while (atomic_load(&ctl.ready) < started)
        nanosleep(&nap, NULL);
    if (rc == 0) {
        for (int i = 0; i < nw; i++)
            if (ws[i].err) {
                char cpu[24], why[96];
                snprintf(cpu, sizeof cpu, "%d", ws[i].cpu);
                snprintf(why, sizeof why, "%s", strerror(ws[i].err));
                say(msg, cap, "cannot pin a thread to CPU %s (%s)", cpu, why);
                rc = -1;
                break;
            }
    }
    if (rc) {
        atomic_store(&ctl.phase, nsamples + 1);
        for (int i = 0; i < started; i++)
            ws[i].err = ws[i].err ? ws[i].err : EINVAL;
    }
    atomic_store(&ctl.go, 1);
    if (rc == 0) {
        sleep_ns(warmup_ns);
        for (int s = 1; s <= nsamples + 1; s++) {
            atomic_store_explicit(&ctl.phase, s, memory_order_release);
            if (s <= nsamples)
                sleep_ns(sample_ns);
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].th, NULL);
    free(ws);
    return rc;
}

/* The cost of the clock reads at one sample boundary (the wall clock and the thread's CPU-time
 * clock), ns: the least over `trials` of the mean over 200 back-to-back pairs (the least: the
 * trial no scheduler or hypervisor interrupted). Every sample carries one such pair. */
API double cc_timer_overhead_ns(int trials) {
    double best = 1e18;
    for (int t = 0; t < trials; t++) {
        uint64_t a = now_ns(), x = 0;
        for (int i = 0; i < 200; i++)
            x += now_ns() + thread_cpu_ns();
        uint64_t z = now_ns();
        __asm__ volatile("" ::"r"(x));
        double per = (double)(z - a) / 200.0;
        if (per < best)
            best = per;
    }
    return best;
}

/* ------------------------------------------------------------------------ ping-pong */
/* One cache line handed between two pinned threads: A writes odd values, B even ones, each
 * waiting for the other's. A times `rounds` round trips per sample; one transfer (one way) is
 * half a round trip. out_ns[nsamples]: ns per one-way transfer; a first sample is run and
 * dropped before them. out_disturbed[nsamples]: 1 where either thread was switched out (its
 * voluntary + involuntary context switches, RUSAGE_THREAD) during the sample: on a busy machine
 * a sample the scheduler cut is the time the other programs ran, not a transfer.
 *
 * Between samples the threads meet on a second line (`gate`): B reads its context switches,
 * then opens the gate for the next sample; A reads its own and starts the clock only once the
 * gate is open, so neither thread's bookkeeping (a system call) is inside a timed sample. */
typedef struct {
    _Alignas(128) _Atomic uint64_t v;
    char pad[120];
} flag_line;

typedef struct {
    flag_line *f, *gate;
    int cpu, err, is_a, rounds, nsamples;
    _Atomic int *ready;
    double *out;
    unsigned char *switched;      /* per sample (nsamples + 1): this thread was switched out */
} pp_arg;

static uint64_t switches(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

static void *pp_thread(void *arg) {
    pp_arg *a = arg;
    a->err = pin(a->cpu);
    atomic_fetch_add(a->ready, a->err ? 100 : 1);  /* 100 and more: a thread could not be pinned */
    while (atomic_load(a->ready) < 2)
        ;
    if (atomic_load(a->ready) >= 100)
        return NULL;
    _Atomic uint64_t *v = &a->f->v, *gate = &a->gate->v;
    uint64_t rounds = (uint64_t)a->rounds;
    for (int s = 0; s <= a->nsamples; s++) {
        uint64_t first = (uint64_t)s * rounds;
        if (a->is_a) {
            while (atomic_load_explicit(gate, memory_order_acquire) != (uint64_t)s + 1)
                ;                                 /* B is ready for sample s */
            uint64_t c0 = switches();
            uint64_t t0 = now_ns();
            for (uint64_t i = first; i < first + rounds; i++) {
                atomic_store_explicit(v, 2 * i + 1, memory_order_release);
                while (atomic_load_explicit(v, memory_order_acquire) != 2 * i + 2)
                    ;
            }
            uint64_t t1 = now_ns();
            a->switched[s] = switches() != c0;
            if (s > 0)
                a->out[s - 1] = (double)(t1 - t0) / (2.0 * (double)rounds);
        } else {
            uint64_t c0 = switches();
            atomic_store_explicit(gate, (uint64_t)s + 1, memory_order_release);
            for (uint64_t i = first; i < first + rounds; i++) {
                while (atomic_load_explicit(v, memory_order_acquire) != 2 * i + 1)
                    ;
                atomic_store_explicit(v, 2 * i + 2, memory_order_release);
            }
            a->switched[s] = switches() != c0;
        }
    }
    return NULL;
}

API int cc_pingpong(int cpu_a, int cpu_b, int rounds, int nsamples, double *out_ns,
                    unsigned char *out_disturbed, char *msg, size_t cap) {
    if (msg && cap)
        msg[0] = 0;
    if (rounds < 1 || nsamples < 1)
        return -1;
    flag_line *f = aligned_alloc(128, 2 * sizeof *f);
    unsigned char *sw = calloc(2 * ((size_t)nsamples + 1), 1);
    if (!f || !sw) {
        free(f);
        free(sw);
        say(msg, cap, "out of memory%s%s", "", "");
        return -1;
    }
    atomic_init(&f[0].v, 0);
    atomic_init(&f[1].v, 0);
    _Atomic int ready;
    atomic_init(&ready, 0);
    pp_arg a = {f, f + 1, cpu_a, 0, 1, rounds, nsamples, &ready, out_ns, sw};
    pp_arg b = {f, f + 1, cpu_b, 0, 0, rounds, nsamples, &ready, out_ns, sw + nsamples + 1};
    pthread_t ta, tb;
    int e = pthread_create(&tb, NULL, pp_thread, &b);
    if (e) {
        free(f);
        free(sw);
        say(msg, cap, "cannot start a thread (%s)%s", strerror(e), "");
        return -1;
    }
    e = pthread_create(&ta, NULL, pp_thread, &a);
    if (e) {
        atomic_fetch_add(&ready, 100);            /* let B go */
        pthread_join(tb, NULL);
        free(f);
        free(sw);
        say(msg, cap, "cannot start a thread (%s)%s", strerror(e), "");
        return -1;
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (out_disturbed)
        for (int s = 1; s <= nsamples; s++)
            out_disturbed[s - 1] = a.switched[s] | b.switched[s];
    free(f);
    free(sw);
    if (a.err || b.err) {
        char cpu[24];
        snprintf(cpu, sizeof cpu, "%d", a.err ? cpu_a : cpu_b);
        say(msg, cap, "cannot pin a thread to CPU %s (%s)", cpu, strerror(a.err ? a.err : b.err));
        return -1;
    }
    return 0;
}
