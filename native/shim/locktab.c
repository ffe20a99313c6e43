/* corecast sync shim: per-lock, per-call-site attribution (included by shim.c, which defines
 * cc_now, EXPORT, LIKELY/UNLIKELY, NEED and the report writer's out_* helpers).
 *
 * Every mutex, spin lock and rwlock acquisition made through the shim's wrappers is counted in
 * a table of the acquiring THREAD, keyed by the lock's address and the call site (the return
 * address of the call into the wrapper). Per thread, so an uncontended acquisition writes only
 * memory its own thread owns: no shared cache line is added to the program's. The table has a
 * fixed size (LT_SLOTS entries, open addressing, LT_PROBES probes); an acquisition that finds
 * no entry is counted in the table's `overflow` and nowhere else. Tables are mmap'd when a
 * thread first locks; at most LT_MAX_TABLES of them (later threads are counted as untracked).
 *
 * Per entry: acquisitions (successful trylocks included), contended acquisitions with their
 * total and longest wait (the clock is read only on the contended path, as shim.c does),
 * failed trylocks, and the hold time of a sample of the acquisitions: one in about LT_SAMPLE
 * (a random stride, so a periodic program cannot alias with it) reads the clock when it has
 * the lock and when the unlock wrapper is called, minus the cost of a clock read measured at
 * load. Hold samples go to an octave histogram (count and sum per power-of-two bucket of
 * ticks), so a reader can leave out the samples during which the holder was preempted (a
 * sample far above the median) and still have their exact sum.
 *
 * A thread has at most one hold sample open at a time (nested locks: the outer one); a sample
 * ends at the unlock of its lock, at pthread_cond_wait on it (the wait releases it), or is
 * dropped when the same thread acquires the same lock again (it was released elsewhere).
 *
 * Report lines (after the thread and stat lines, before "done"):
 *   lt_tick_cost C                                   (clock ticks a clock read costs)
 *   locktab TID entries E overflow O                 (one per table)
 *   lock TID ADDR SITE KIND acq A contended K wait W max M tryfail F hold_n N hold_sum S
 *        hold_max X hist B:N:S,...                    (ADDR, SITE in hex; W M S X in ticks)
 *   lt_untracked U                                   (threads past LT_MAX_TABLES)
 *   map START END OFFSET PATH                         (file-backed mappings at exit, hex)
 * ("map" lines: at most LT_MAX_MAPS, from /proc/self/maps, so that the addresses can be
 * symbolized after the run: see corecast.collect.symbols.)
 */

struct out;
static void out_str(struct out *o, const char *s);
static void out_u64(struct out *o, uint64_t v);
static void out_kv(struct out *o, const char *k, uint64_t v);

#define LT_SLOTS 256             /* entries per thread (a power of two) */
#define LT_PROBES 8
#define LT_BUCKETS 32            /* hold histogram: bucket b holds [2^b, 2^(b+1)) ticks */
#define LT_SAMPLE 64             /* one hold in about LT_SAMPLE is timed ... */
#define LT_FIRST 16              /* ... and the first LT_FIRST of every entry */
#define LT_MAX_TABLES 16384
#define LT_MAX_MAPS 4096

enum lt_kind { LT_MUTEX, LT_SPIN, LT_RDLOCK, LT_WRLOCK, LT_TRY = 4 };   /* LT_TRY: a trylock's site */
static const char *const lt_kind_name[] = {"mutex", "spin", "rdlock", "wrlock",
                                           "mutex-try", "spin-try", "rdlock-try", "wrlock-try"};

struct lt_key {                  /* what the uncontended path touches: 24 bytes an entry */
    const void *addr;
    const void *site;
    uint64_t acq;
};

struct lt_stats {
    uint64_t contended, wait, wait_max, tryfail;
    uint64_t hold_n, hold_sum, hold_max;
    uint32_t kind;
    uint32_t hist_n[LT_BUCKETS];
    uint64_t hist_sum[LT_BUCKETS];
};

struct lt_table {
    uint32_t rng;
    unsigned held_i;             /* the entry of the open hold sample (tls_lt_held) */
    int tid;
    uint64_t held_t0;
    uint64_t entries, overflow;
    struct lt_table *next;       /* every table, for the report */
    struct lt_key keys[LT_SLOTS];
    struct lt_stats stats[LT_SLOTS];
};

static struct lt_table *_Atomic lt_all;
static _Atomic unsigned lt_ntables;
static _Atomic uint64_t lt_untracked;
static uint64_t lt_tick_cost;
static __thread struct lt_table *tls_lt __attribute__((tls_model("initial-exec")));
/* What every acquisition and unlock reads, in thread-local storage beside tls_lt (one cache line
 * with the shim's other thread-locals), not in the table: the lock of the open hold sample, and
 * the acquisitions until the next one. */
static __thread const void *tls_lt_held __attribute__((tls_model("initial-exec")));
static __thread uint32_t tls_lt_countdown __attribute__((tls_model("initial-exec")));
static __thread int tls_lt_none __attribute__((tls_model("initial-exec")));  /* no table: do not retry */

/* The clock of a hold sample, ordered with the instructions around it: a plain TSC read is not,
 * and on some machines costs tens of ticks that would overlap the critical section by an
 * amount no calibration knows. Fenced, the reads cost more (only one acquisition in LT_SAMPLE
 * pays) but the ticks between them are the critical section plus a fixed cost, measured at load. */
static inline uint64_t lt_clock_begin(void) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0; isb" : "=r"(v) :: "memory");
    return v;
#else
    return cc_now();
#endif
}

static inline uint64_t lt_clock_end(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
#else
    return lt_clock_begin();
#endif
}

static inline unsigned lt_hash(const void *addr, const void *site) {
    uint64_t h = ((uint64_t)(uintptr_t)addr ^ ((uint64_t)(uintptr_t)site << 7)) * 0x9E3779B97F4A7C15ull;
    return (unsigned)(h >> 56) & (LT_SLOTS - 1);
}

static inline uint32_t lt_stride(struct lt_table *tb) {
    uint32_t x = tb->rng;
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    tb->rng = x;
    return 1 + (x % (2 * LT_SAMPLE - 1));          /* 1 .. 2*LT_SAMPLE-1: mean LT_SAMPLE */
}

static void lt_calibrate_once(void);

static __attribute__((noinline)) struct lt_table *lt_alloc(void) {
    if (tls_lt_none)
        return NULL;
    lt_calibrate_once();
    if (atomic_fetch_add(&lt_ntables, 1) >= LT_MAX_TABLES) {
        atomic_fetch_add(&lt_untracked, 1);
        tls_lt_none = 1;
        return NULL;
    }
    void *m = mmap(NULL, sizeof(struct lt_table), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        atomic_fetch_add(&lt_untracked, 1);
        tls_lt_none = 1;
        return NULL;
    }
    struct lt_table *tb = m;            /* zero-filled by mmap */
    tb->tid = cc_gettid();
    tb->rng = (uint32_t)(cc_now() ^ (uint64_t)tb->tid * 2654435761u) | 1u;
    tls_lt_countdown = lt_stride(tb);
    struct lt_table *head = atomic_load(&lt_all);
    do { tb->next = head; } while (!atomic_compare_exchange_weak(&lt_all, &head, tb));
    tls_lt = tb;
    return tb;
}

/* The entry of (addr, site), made if new; -1 when the probes find no room (counted). */
static __attribute__((noinline)) int lt_find(struct lt_table *tb, const void *addr, const void *site, int kind) {
    unsigned i = lt_hash(addr, site);
    for (int k = 0; k < LT_PROBES; k++, i = (i + 1) & (LT_SLOTS - 1)) {
        struct lt_key *e = &tb->keys[i];
        if (e->addr == addr && e->site == site)
            return (int)i;
        if (e->addr == NULL) {
            e->addr = addr;
            e->site = site;
            tb->stats[i].kind = (uint32_t)kind;
            tb->entries++;
            return (int)i;
        }
    }
    tb->overflow++;
    return -1;
}

static __attribute__((noinline)) void lt_sample_start(struct lt_table *tb, int i, const void *addr, int stride) {
    if (stride)
        tls_lt_countdown = lt_stride(tb);
    if (tls_lt_held)
        return;                          /* a sample is open (nested locks): the outer one */
    tls_lt_held = addr;
    tb->held_i = (unsigned)i;
    tb->held_t0 = lt_clock_begin();
}

static __attribute__((noinline)) void lt_sample_end(struct lt_table *tb) {
    uint64_t now = lt_clock_end();
    struct lt_stats *s = &tb->stats[tb->held_i];
    uint64_t d = now - tb->held_t0;
    d = d > lt_tick_cost ? d - lt_tick_cost : 0;
    tls_lt_held = NULL;
    s->hold_n++;
    s->hold_sum += d;
    if (d > s->hold_max)
        s->hold_max = d;
    int b = d ? 63 - __builtin_clzll(d) : 0;
    if (b >= LT_BUCKETS)
        b = LT_BUCKETS - 1;
    s->hist_n[b]++;
    s->hist_sum[b] += d;
}

/* An acquisition by this thread; returns the entry's index (-1: none). */
static inline int lt_acquired(const void *addr, const void *site, int kind) {
    struct lt_table *tb = tls_lt;
    if (UNLIKELY(!tb)) {
        tb = lt_alloc();
        if (!tb)
            return -1;
    }
    if (UNLIKELY(tls_lt_held == addr))
        tls_lt_held = NULL;              /* re-acquired: it was released where we did not see it */
    int i = (int)lt_hash(addr, site);
    struct lt_key *e = &tb->keys[i];
    if (UNLIKELY(e->addr != addr || e->site != site)) {
        i = lt_find(tb, addr, site, kind);
        if (i < 0)
            return -1;
        e = &tb->keys[i];
    }
    uint64_t a = ++e->acq;
    if (UNLIKELY(--tls_lt_countdown == 0))
        lt_sample_start(tb, i, addr, 1);
    else if (UNLIKELY(a <= LT_FIRST))
        lt_sample_start(tb, i, addr, 0);
    return i;
}

/* A contended acquisition that waited `d` ticks. */
static __attribute__((noinline)) void lt_waited(const void *addr, const void *site, int kind, uint64_t d) {
    int i = lt_acquired(addr, site, kind);
    if (i < 0)
        return;
    struct lt_stats *s = &tls_lt->stats[i];
    s->contended++;
    s->wait += d;
    if (d > s->wait_max)
        s->wait_max = d;
}

static __attribute__((noinline)) void lt_tryfail(const void *addr, const void *site, int kind) {
    struct lt_table *tb = tls_lt;
    if (!tb && !(tb = lt_alloc()))
        return;
    int i = lt_find(tb, addr, site, kind);
    if (i >= 0)
        tb->stats[i].tryfail++;
}

/* A trylock returned `r`: acquired (0) or found the lock taken (EBUSY). */
static inline void lt_tried(const void *addr, const void *site, int kind, int r) {
    if (r == 0)
        lt_acquired(addr, site, kind | LT_TRY);
    else if (r == EBUSY)
        lt_tryfail(addr, site, kind | LT_TRY);
}

/* The lock is being released by this thread (unlock, or a condition wait on it). */
static inline void lt_release(const void *addr) {
    if (UNLIKELY(tls_lt_held == addr && addr != NULL))
        lt_sample_end(tls_lt);
}

#define LT_SITE() __builtin_return_address(0)

/* The kind of lock a shim.c primitive takes (constant-folded in the wrappers). */
static inline int lt_kind_of(int p) {
    switch (p) {
    case P_SPIN_LOCK: case P_SPIN_TRYLOCK: return LT_SPIN;
    case P_RWLOCK_RDLOCK: case P_RWLOCK_TIMEDRDLOCK: case P_RWLOCK_TRYRDLOCK: return LT_RDLOCK;
    case P_RWLOCK_WRLOCK: case P_RWLOCK_TIMEDWRLOCK: case P_RWLOCK_TRYWRLOCK: return LT_WRLOCK;
    default: return LT_MUTEX;
    }
}

/* ------------------------------------------------------------------ unlock wrappers */
REAL(int, pthread_mutex_unlock, pthread_mutex_t *);
REAL(int, pthread_spin_unlock, pthread_spinlock_t *);
REAL(int, pthread_rwlock_unlock, pthread_rwlock_t *);

static void lt_resolve(void) {
    real_pthread_mutex_unlock = (__typeof__(real_pthread_mutex_unlock))find("pthread_mutex_unlock", NULL);
    real_pthread_spin_unlock = (__typeof__(real_pthread_spin_unlock))find("pthread_spin_unlock", NULL);
    real_pthread_rwlock_unlock = (__typeof__(real_pthread_rwlock_unlock))find("pthread_rwlock_unlock", NULL);
}

#define LT_NEED(name) do { if (UNLIKELY(!real_##name)) { lt_resolve(); if (!real_##name) return ENOSYS; } } while (0)

EXPORT int pthread_mutex_unlock(pthread_mutex_t *m) {
    LT_NEED(pthread_mutex_unlock);
    lt_release(m);
    return real_pthread_mutex_unlock(m);
}

EXPORT int pthread_spin_unlock(pthread_spinlock_t *l) {
    LT_NEED(pthread_spin_unlock);
    lt_release((const void *)l);
    return real_pthread_spin_unlock(l);
}

EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l) {
    LT_NEED(pthread_rwlock_unlock);
    lt_release(l);
    return real_pthread_rwlock_unlock(l);
}

/* ------------------------------------------------------------------ load, fork, report */
/* The clock ticks a hold sample counts that are not the critical section's: the clock reads
 * themselves (tens of ticks on some virtual machines) and the calls between the two reads.
 * Measured once per process, when its first thread first locks (a process that never locks
 * pays nothing), the way a program's lock is: empty critical sections on a private mutex,
 * through the exported wrappers, one in about LT_CAL_STRIDE sampled (so that the sampled
 * path's branches are mispredicted as a program's are); the mean of the middle half of LT_CAL
 * samples (finer than the clock's step, 26 ticks on some virtual machines). The calibrating
 * thread's own counts are left as they were; other threads wait for it. */
#define LT_CAL 101
#define LT_CAL_STRIDE 16
static struct lt_table lt_cal_table;     /* in .bss: only the pages calibration touches are made */
static _Atomic int lt_cal_state;         /* 0 not yet, 1 under way, 2 done */

static int lt_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* One empty critical section through the exported wrappers, from one call site. */
static __attribute__((noinline)) int lt_cal_pair(pthread_mutex_t *m) {
    if (pthread_mutex_lock(m) != 0)
        return -1;
    return pthread_mutex_unlock(m);
}

static void lt_calibrate(void) {
    static pthread_mutex_t cal = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t d[LT_CAL];
    struct cc_thread *me = self();
    struct pstat saved = me->s[P_MUTEX_LOCK];
    const void *spin_addr = me->spin_addr;           /* an open trylock episode waits for us */
    me->spin_addr = NULL;
    struct lt_table *tb = &lt_cal_table;
    const void *held = tls_lt_held;
    uint32_t countdown = tls_lt_countdown;
    tls_lt = tb;
    tls_lt_held = NULL;
    tls_lt_countdown = 1;
    if (lt_cal_pair(&cal) == 0) {
        int i = -1;
        for (unsigned j = 0; j < LT_SLOTS; j++)
            if (tb->keys[j].addr == &cal)
                i = (int)j;
        for (int k = 0; i >= 0 && k < LT_FIRST; k++)       /* past the entry's first samples */
            lt_cal_pair(&cal);
        int n = 0;
        uint32_t x = 0x9E3779B9u;
        tls_lt_countdown = 1 + LT_CAL_STRIDE;
        for (int k = 0; i >= 0 && n < LT_CAL && k < 4 * LT_CAL * LT_CAL_STRIDE; k++) {
            uint64_t n0 = tb->stats[i].hold_n, s0 = tb->stats[i].hold_sum;
            if (lt_cal_pair(&cal) != 0)
                break;
            if (tb->stats[i].hold_n == n0 + 1) {
                d[n++] = tb->stats[i].hold_sum - s0;
                x ^= x << 13; x ^= x >> 17; x ^= x << 5;
                tls_lt_countdown = 1 + x % (2 * LT_CAL_STRIDE - 1);
            }
        }
        if (n > 0) {
            qsort(d, (size_t)n, sizeof d[0], lt_cmp);
            uint64_t sum = 0;                        /* the middle half's mean: finer than a */
            for (int k = n / 4; k < n - n / 4; k++)   /* clock that counts in steps */
                sum += d[k];
            lt_tick_cost = sum / (uint64_t)(n - 2 * (n / 4));
        }
    }
    tls_lt = NULL;
    tls_lt_held = held;
    tls_lt_countdown = countdown;
    me->s[P_MUTEX_LOCK] = saved;
    me->spin_addr = spin_addr;
}

static void lt_calibrate_once(void) {
    int st = atomic_load_explicit(&lt_cal_state, memory_order_acquire);
    if (LIKELY(st == 2))
        return;
    int zero = 0;
    if (atomic_compare_exchange_strong(&lt_cal_state, &zero, 1)) {
        lt_calibrate();
        atomic_store_explicit(&lt_cal_state, 2, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&lt_cal_state, memory_order_acquire) != 2)
        sched_yield();
}

static void lt_init(void) {
    lt_resolve();
}

static void lt_after_fork(void) {
    /* The child has only the forking thread; its counts start from zero like shim.c's. A
     * calibration another thread was running when the program forked never ends in the child:
     * it starts again there (else the child's first tracked lock waited for it for ever). */
    if (atomic_load(&lt_cal_state) != 2)
        atomic_store(&lt_cal_state, 0);
    atomic_store(&lt_all, NULL);
    atomic_store(&lt_ntables, 0);
    atomic_store(&lt_untracked, 0);
    tls_lt = NULL;
    tls_lt_none = 0;
    tls_lt_held = NULL;
}

static void out_hex(struct out *o, uint64_t v) {
    char s[20];
    int n = 0;
    char tmp[16];
    do { tmp[n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    int i = 0;
    s[i++] = '0';
    s[i++] = 'x';
    while (n)
        s[i++] = tmp[--n];
    s[i] = 0;
    out_str(o, s);
}

static void lt_report_table(struct out *o, struct lt_table *tb) {
    out_str(o, "locktab ");
    out_u64(o, (uint64_t)tb->tid);
    out_kv(o, "entries", tb->entries);
    out_kv(o, "overflow", tb->overflow);
    out_str(o, "\n");
    for (unsigned i = 0; i < LT_SLOTS; i++) {
        struct lt_key *e = &tb->keys[i];
        if (!e->addr)
            continue;
        struct lt_stats *s = &tb->stats[i];
        if (!e->acq && !s->tryfail)
            continue;
        out_str(o, "lock ");
        out_u64(o, (uint64_t)tb->tid);
        out_str(o, " ");
        out_hex(o, (uint64_t)(uintptr_t)e->addr);
        out_str(o, " ");
        out_hex(o, (uint64_t)(uintptr_t)e->site);
        out_str(o, " ");
        out_str(o, lt_kind_name[s->kind < 8 ? s->kind : 0]);
        out_kv(o, "acq", e->acq);
        out_kv(o, "contended", s->contended);
        out_kv(o, "wait", s->wait);
        out_kv(o, "max", s->wait_max);
        out_kv(o, "tryfail", s->tryfail);
        out_kv(o, "hold_n", s->hold_n);
        out_kv(o, "hold_sum", s->hold_sum);
        out_kv(o, "hold_max", s->hold_max);
        out_str(o, " hist ");
        int first = 1;
        for (int b = 0; b < LT_BUCKETS; b++) {
            if (!s->hist_n[b])
                continue;
            if (!first)
                out_str(o, ",");
            first = 0;
            out_u64(o, (uint64_t)b);
            out_str(o, ":");
            out_u64(o, s->hist_n[b]);
            out_str(o, ":");
            out_u64(o, s->hist_sum[b]);
        }
        if (first)
            out_str(o, "-");
        out_str(o, "\n");
    }
}

/* File-backed mappings from /proc/self/maps: "START-END PERMS OFFSET DEV INODE PATH". */
static void lt_report_maps(struct out *o) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096], line[4352];
    size_t len = 0;
    int lines = 0, skip = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t k = 0; k < r; k++) {
            char c = buf[k];
            if (c != '\n') {
                if (len < sizeof line - 1)
                    line[len++] = c;
                else
                    skip = 1;            /* a path too long to keep: leave the line out */
                continue;
            }
            line[len] = 0;
            /* fields: range, perms, offset, dev, inode, then the path after spaces */
            char *f[5];
            char *p = line;
            int nf = 0;
            while (nf < 5 && *p) {
                while (*p == ' ') p++;
                f[nf++] = p;
                while (*p && *p != ' ') p++;
                if (*p) *p++ = 0;
            }
            while (*p == ' ') p++;
            if (!skip && nf == 5 && *p == '/' && lines < LT_MAX_MAPS) {
                char *dash = f[0];
                while (*dash && *dash != '-') dash++;
                if (*dash) {
                    *dash = 0;
                    out_str(o, "map 0x");
                    out_str(o, f[0]);
                    out_str(o, " 0x");
                    out_str(o, dash + 1);
                    out_str(o, " 0x");
                    out_str(o, f[2]);
                    out_str(o, " ");
                    out_str(o, p);
                    out_str(o, "\n");
                    lines++;
                }
            }
            len = 0;
            skip = 0;
        }
    }
    close(fd);
}

static void lt_report(struct out *o) {
    out_str(o, "lt_tick_cost ");
    out_u64(o, lt_tick_cost);
    out_str(o, "\n");
    for (struct lt_table *tb = atomic_load(&lt_all); tb; tb = tb->next)
        lt_report_table(o, tb);
    out_str(o, "lt_untracked ");
    out_u64(o, atomic_load(&lt_untracked));
    out_str(o, "\n");
    if (atomic_load(&lt_all))
        lt_report_maps(o);
}
