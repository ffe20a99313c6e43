/* corecast meters: the blackboard reader, concurrency advice and the application area.
 * Header only: include it, nothing to link (gcc/clang on Linux; C11 or later; with strict
 * -std=c11, include it first or define _GNU_SOURCE: it needs POSIX and Linux declarations).
 *
 *   #include <corecast_meters.h>
 *
 *   // advice a runtime obeys: workers beyond the allowed count sleep here until allowed
 *   int n = cc_allowed_workers("node");        // -1: no live daemon (then nothing throttles)
 *   cc_set_worker(i);                          // once per worker thread (0, 1, 2, ...)
 *   cc_throttle_point();                       // at a safe point of each worker's loop
 *   cc_throttle_release();                     // the queue ran dry: wake the sleepers to end
 *
 *   // reading meters
 *   ccm_board b;
 *   if (ccm_open(&b, "default") == 0) {
 *       int i = ccm_find_meter(&b, "cpu_busy", "node");
 *       struct ccm_meter_rec r;
 *       if (i >= 0 && ccm_read_meter(&b, i, &r) == 0) printf("%.3f\n", r.avg);
 *       ccm_close(&b);
 *   }
 *
 * The blackboard is the POSIX shared memory object /corecast-NAME (/dev/shm/corecast-NAME),
 * written by one `corecast meters` daemon and read by anyone (no root needed). A reader trusts
 * only a regular file owned by its own user or root and writable by its owner only (never a
 * symbolic link, and a FIFO planted at the name never blocks it: see ccm_open). Layout
 * (version 1, native byte order, `byte_order` = 0x01020304 as written):
 *
 *   struct ccm_header                    256 bytes at offset 0
 *   struct ccm_scope [scope_count]       the meter tree: node, socketN, coreN, pidP, threadK
 *   struct ccm_meter_desc [meter_count]  name, scope, unit, quality, source (fixed once running)
 *   struct ccm_meter_rec [meter_count]   64 bytes each, one seqlock each, rewritten every tick
 *   struct ccm_trigger_desc / _rec       the triggers and their states
 *   struct ccm_advice_desc / _rec        allowed_workers per advised scope
 *
 * The header gives every section's offset, count and element size, so a reader built for
 * version 1 reads a board whose elements grew (it reads the prefix it knows). Each record
 * starts with a 32-bit sequence number: odd while the daemon writes it. A reader copies the
 * record and keeps the copy only when the number was even and unchanged across the copy
 * (ccm_read_rec): it never sees a torn record and never makes the writer wait.
 *
 * Staleness: the header holds the daemon's pid and its start time (clock ticks after boot,
 * /proc/PID/stat field 22), a heartbeat (CLOCK_MONOTONIC of the last tick) and a state
 * (running, or stopped by a clean exit). ccm_stale() says why a board is stale: stopped, the
 * daemon is gone (a crash leaves the board behind), or no tick for too long.
 *
 * Notification: `trigger_gen` (+1 at every trigger state change) and `advice_gen` (+1 at
 * every allowed_workers change) are futex words; ccm_wait_change() sleeps on the first until
 * it changes. For poll()/epoll, ccm_subscribe() connects to the daemon's socket
 * (abstract name "corecast-meters-NAME", its server checked to be the board's owner or root):
 * one byte arrives at every trigger state change.
 *
 * Application area: /dev/shm/corecast-NAME.app, slots where programs publish their own state
 * (ccm_app_publish(&b, "phase", 3); "active_workers", ...), each under its own seqlock;
 * the daemon shows them in /meters.json and /metrics. Publishing needs write permission on
 * that file (the daemon's --app-mode). Its other writers are not trusted: its geometry is
 * checked and copied once at open, and slots are read with pread (ccm_read_app); a publisher
 * keeps a SIGBUS handler so that the file cut under its mapping makes a publish fail with
 * -ESTALE, not kill it (see "a publisher's mapping of the application area").
 *
 * One header on purpose (~1,100 lines): programs include it and link nothing.
 *
 * Thread safety: ccm_* reads are safe from any thread. cc_allowed_workers/cc_throttle_point
 * use one process-wide board (weak symbols: one copy however many files include this). */
#ifndef CORECAST_METERS_H
#define CORECAST_METERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/futex.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CCM_MAGIC "CCMETERS"
#define CCM_APP_MAGIC "CCMAPPS"
#define CCM_VERSION 1u
#define CCM_BYTE_ORDER 0x01020304u
#define CCM_NAME_MAX 24

enum { CCM_STARTING = 0, CCM_RUNNING = 1, CCM_STOPPED = 2 };                 /* header.state */
enum { CCM_MEASURED = 0, CCM_DERIVED = 1, CCM_UNAVAILABLE = 2 };            /* meter quality */
enum { CCM_GAUGE = 0, CCM_RATE = 1, CCM_RATIO = 2 };                        /* meter kind */
enum { CCM_LOW = 1, CCM_HIGH = 2 };                                         /* trigger state */

struct ccm_header {
    char magic[8];               /* "CCMETERS" */
    uint32_t version;            /* 1 */
    uint32_t header_size;        /* 256 */
    uint64_t layout_size;        /* bytes of the whole board */
    uint32_t byte_order;         /* 0x01020304 */
    uint32_t state;              /* CCM_STARTING, CCM_RUNNING, CCM_STOPPED */
    int32_t pid;                 /* the daemon */
    uint32_t flags;              /* bit 0: an application area exists */
    uint64_t pid_start;          /* the daemon's start time, clock ticks after boot */
    int64_t started_real_ns;     /* CLOCK_REALTIME when the daemon started */
    int64_t heartbeat_ns;        /* CLOCK_MONOTONIC of the last tick */
    int64_t heartbeat_real_ns;   /* CLOCK_REALTIME of the last tick */
    int64_t interval_ns;         /* sampling interval */
    int64_t window_ns;           /* the window of avg/min/max */
    uint64_t ticks;              /* ticks taken */
    uint32_t trigger_gen;        /* futex word: +1 at every trigger state change */
    uint32_t advice_gen;         /* futex word: +1 at every allowed_workers change */
    uint32_t scope_count, scope_off, scope_size;
    uint32_t meter_count, meter_desc_off, meter_desc_size, meter_rec_off, meter_rec_size;
    uint32_t trigger_count, trigger_desc_off, trigger_desc_size, trigger_rec_off, trigger_rec_size;
    uint32_t advice_count, advice_desc_off, advice_desc_size, advice_rec_off, advice_rec_size;
    uint64_t late_ticks;         /* ticks taken more than one interval after their deadline */
    char name[32];               /* the blackboard's NAME */
    char reserved[40];
};

struct ccm_scope {
    char name[32];               /* node, socket0, core3, pid1234, thread0 */
    char kind[16];               /* node, socket, core, process, thread */
    int32_t parent;              /* index of the parent scope, -1 for the node */
    int32_t ncpus;               /* logical CPUs (PUs) in it; 0 for a process or thread */
    char cpus[72];               /* their list, kernel format (0-3,8) */
};

struct ccm_meter_desc {
    char name[40];               /* cpu_busy, runq_delay, psi_cpu_some, cpi, ... */
    char scope[32];
    char unit[24];               /* ratio, s/s, 1/s, bytes/s, s, tasks, ... */
    uint32_t scope_index;
    uint8_t quality;             /* CCM_MEASURED, CCM_DERIVED, CCM_UNAVAILABLE */
    uint8_t kind;                /* CCM_GAUGE, CCM_RATE, CCM_RATIO */
    uint8_t has_total;           /* record.total is a cumulative count in total_unit */
    uint8_t pad;
    char total_unit[24];         /* s, count, bytes */
    char source[384];            /* "measured: /proc/stat ..." or "unavailable: <why>" */
};

struct ccm_meter_rec {           /* 64 bytes; NaN where there is no value */
    uint32_t seq;
    uint32_t count;              /* ticks with a value in the window */
    int64_t t_ns;                /* CLOCK_MONOTONIC of the tick that wrote it */
    double current;              /* over the last tick (or since the last tick with data) */
    double avg;                  /* over the window: sum of the numerators / sum of the denominators */
    double min, max;             /* of the per-tick values in the window */
    double total;                /* cumulative since the daemon started, when has_total */
    uint64_t aux;                /* thread records: the tid they follow (0: slot free) */
};

struct ccm_trigger_desc {
    char name[40];
    char meter[40];
    char scope[32];
    uint32_t meter_index, scope_index;
    double low, high;            /* LOW -> HIGH above high, HIGH -> LOW below low */
    int64_t dwell_ns;            /* for at least this long */
    int32_t advice_index;        /* the advice it feeds, -1 none */
    uint32_t pad;
    char actions[64];            /* "blackboard,notify,log,command" */
    char reserved[40];
};

struct ccm_trigger_rec {         /* 64 bytes */
    uint32_t seq;
    uint32_t state;              /* CCM_LOW, CCM_HIGH */
    int64_t t_ns;                /* last evaluation */
    int64_t since_ns;            /* last change (0: none yet) */
    double value;                /* the window average evaluated */
    int64_t pending_ns;          /* when the value crossed toward the other state (0: not) */
    uint64_t transitions;
    uint32_t ups, downs;         /* LOW -> HIGH, HIGH -> LOW */
    char reserved[8];
};

struct ccm_advice_desc {
    char scope[32];
    uint32_t scope_index;
    uint32_t min_workers, max_workers;
    uint32_t pad;
    int64_t interval_ns;         /* at most one change per interval */
    char policy[32];             /* "halve" or "one" on HIGH; +1 on LOW */
    char reserved[40];
};

struct ccm_advice_rec {          /* 64 bytes */
    uint32_t seq;
    uint32_t allowed;            /* allowed_workers */
    int64_t t_ns;
    int64_t changed_ns;
    uint64_t changes;
    uint32_t high_triggers;      /* linked triggers now HIGH */
    uint32_t last;               /* 0 none, 1 cut, 2 added one */
    char reserved[24];
};

struct ccm_app_header {
    char magic[8];               /* "CCMAPPS" */
    uint32_t version, header_size, slot_count, slot_size;
    int32_t daemon_pid;
    char reserved[36];
};

struct ccm_app_slot {            /* 128 bytes */
    uint32_t seq;
    int32_t pid;                 /* the publisher */
    int64_t t_ns;                /* CLOCK_MONOTONIC of the last publish */
    double value;
    uint64_t pid_start;
    char app[32];                /* the publisher's name (its comm) */
    char key[40];                /* phase, active_workers, ... */
    uint32_t owner;              /* claim word: the pid that owns the slot, 0 free */
    uint32_t pad;
    char reserved[16];
};

#define CCM__CHECK(t, n) typedef char ccm__size_##t[(sizeof(struct t) == (n)) ? 1 : -1]
CCM__CHECK(ccm_header, 256);
CCM__CHECK(ccm_scope, 128);
CCM__CHECK(ccm_meter_desc, 512);
CCM__CHECK(ccm_meter_rec, 64);
CCM__CHECK(ccm_trigger_desc, 256);
CCM__CHECK(ccm_trigger_rec, 64);
CCM__CHECK(ccm_advice_desc, 128);
CCM__CHECK(ccm_advice_rec, 64);
CCM__CHECK(ccm_app_header, 64);
CCM__CHECK(ccm_app_slot, 128);

/* ------------------------------------------------------------------------------------------
 * the seqlock */

static inline void ccm__relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Copy a record (whose first 32-bit word is its sequence number, `size` a multiple of 8) into
 * `out`. 0 on success; -1 when the writer stayed inside the record for 50 ms (a daemon killed
 * in the middle of a write leaves the number odd: the board is stale then). The reader spins
 * a little, then yields the CPU (on a busy machine the writer may have been preempted in the
 * middle of a write: it needs the CPU to finish). */
static inline int ccm_read_rec(const void *rec, void *out, size_t size) {
    const uint32_t *seqp = (const uint32_t *)rec;
    const uint64_t *src = (const uint64_t *)rec;
    uint64_t words[64];                       /* records are at most 512 bytes */
    size_t n = size / 8 < 64 ? size / 8 : 64;
    int64_t deadline = 0;
    for (int tries = 0;; tries++) {
        uint32_t s1 = __atomic_load_n(seqp, __ATOMIC_ACQUIRE);
        if (!(s1 & 1u)) {
            for (size_t i = 0; i < n; i++)
                words[i] = __atomic_load_n(src + i, __ATOMIC_RELAXED);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(seqp, __ATOMIC_RELAXED) == s1) {
                memcpy(out, words, n * 8);
                memcpy(out, &s1, sizeof s1);
                return 0;
            }
        }
        if (tries < 256) {
            ccm__relax();
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        if (!deadline)
            deadline = now + 50000000LL;
        else if (now > deadline)
            return -1;
        sched_yield();
    }
}

/* The writer's side (one writer per record): begin, store the words, end. */
static inline void ccm_write_rec(void *rec, const void *in, size_t size) {
    uint32_t *seqp = (uint32_t *)rec;
    uint64_t *dst = (uint64_t *)rec;
    uint32_t s = __atomic_load_n(seqp, __ATOMIC_RELAXED), second;
    __atomic_store_n(seqp, s + 1u, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    /* the rest of the first word, then the 64-bit words after it */
    memcpy(&second, (const char *)in + 4, 4);
    __atomic_store_n(seqp + 1, second, __ATOMIC_RELAXED);
    for (size_t i = 1; i < size / 8; i++) {
        uint64_t w;
        memcpy(&w, (const char *)in + 8 * i, 8);
        __atomic_store_n(dst + i, w, __ATOMIC_RELAXED);
    }
    __atomic_store_n(seqp, s + 2u, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------------------------------
 * opening a board */

/* A section's place, copied from the header when the board is opened: the header's counts and
 * offsets never change while the daemon runs, and its first two cache lines are rewritten at
 * every tick (heartbeat, ticks), so a reader that looked its offsets up there at every read
 * would pull those lines away from the writer each time. */
struct ccm__section {
    uint32_t count, desc_off, desc_size, rec_off, rec_size;
};

typedef struct {
    const struct ccm_header *h;
    const unsigned char *base;
    size_t size;
    unsigned char *app;          /* the application area (NULL without one) */
    size_t app_size;             /* its mapping's length: the file's size when it was opened */
    int app_writable;
    char name[CCM_NAME_MAX + 1];
    struct ccm__section scopes, meters, triggers, advice;   /* the reader's own copies */
    int64_t interval_ns;
    /* The application area's geometry, copied and checked once at open: its file is writable by
     * the daemon's --app-mode (the group, or everyone), so its header may be rewritten at any
     * moment and is never read again (see ccm__app_check). Appended here: the Python reader
     * (board.py `_Handle`) mirrors this structure. */
    uint32_t app_header_size, app_slot_count, app_slot_size;
    int app_fd;                  /* the area's file, kept open (when app is not NULL): slots are
                                    read with pread(), which cannot fault where the file was
                                    truncated under the mapping */
} ccm_board;

static inline int64_t ccm_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline const char *ccm__default_name(const char *name) {
    if (name && *name)
        return name;
    const char *e = getenv("CORECAST_METERS");
    return (e && *e) ? e : "default";
}

static inline int ccm__valid_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > CCM_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.'))
            return 0;
    }
    return name[0] != '.';
}

/* Map a file of /dev/shm that this process trusts: opened without following a symbolic link
 * and without waiting (a FIFO planted at the name never blocks), then checked on the open file
 * before use: a regular file (-ENOTSUP: a FIFO, a directory, a device), owned by this user or
 * root (-EPERM), and for the board (`shared_write` 0) writable by its owner only (-EPERM:
 * anyone else could write the values readers act on; the application area is writable by the
 * daemon's --app-mode on purpose). -ELOOP: a symbolic link. */
static inline void *ccm__map(const char *path, int writable, int shared_write, size_t *size, int *err,
                             int *keep_fd) {
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        *err = -errno;
        return NULL;
    }
    struct stat st;
    int e = 0;
    if (fstat(fd, &st) != 0)
        e = -errno;
    else if (!S_ISREG(st.st_mode))
        e = -ENOTSUP;
    else if (st.st_uid != geteuid() && st.st_uid != 0)
        e = -EPERM;
    else if (!shared_write && (st.st_mode & (S_IWGRP | S_IWOTH)))
        e = -EPERM;
    else if (st.st_size < 64)
        e = -EPROTO;
    if (e) {
        *err = e;
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        *err = -errno;
        close(fd);
        return NULL;
    }
    if (keep_fd)
        *keep_fd = fd;
    else
        close(fd);
    *size = (size_t)st.st_size;
    return p;
}

/* Read exactly `n` bytes at `off` of `fd` (0), or -1 (an error, or the file ends before). */
static inline int ccm__pread(int fd, void *buf, size_t n, off_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

#define CCM_APP_SLOTS_MAX 4096u  /* more is a damaged area (the daemon makes 64): each read of the
                                    area costs a system call per slot */

/* The application area's header, read from its file (`fd`, `size` bytes mapped) into `ah` and
 * checked: 1 when its geometry lies inside the mapping with every slot 8-byte aligned. It is
 * read with pread, not through the mapping: the file may have been truncated already. */
static inline int ccm__app_check(int fd, size_t size, struct ccm_app_header *ah) {
    if (ccm__pread(fd, ah, sizeof *ah, 0) != 0)
        return 0;
    return memcmp(ah->magic, CCM_APP_MAGIC, 8) == 0 && ah->header_size >= sizeof(struct ccm_app_header) &&
           ah->header_size % 8 == 0 && ah->slot_size >= sizeof(struct ccm_app_slot) && ah->slot_size % 8 == 0 &&
           ah->slot_count <= CCM_APP_SLOTS_MAX &&
           (uint64_t)ah->header_size + (uint64_t)ah->slot_count * ah->slot_size <= (uint64_t)size;
}

static inline int ccm__section_ok(size_t size, uint32_t count, uint32_t off, uint32_t elem, uint32_t min_elem) {
    if (count == 0)
        return 1;
    return elem >= min_elem && off >= sizeof(struct ccm_header) && (uint64_t)off + (uint64_t)count * elem <= size &&
           off % 8 == 0 && elem % 8 == 0;
}

/* Open the board NAME (NULL: $CORECAST_METERS, else "default"). 0, or -errno: -ENOENT no such
 * board, -EINVAL a bad name, -EPROTO not a board of a version this header reads, -ELOOP a
 * symbolic link, -ENOTSUP not a regular file (a FIFO, a directory), -EPERM owned by another
 * user than this one or root, or writable by others (see ccm__map). */
static inline int ccm_open(ccm_board *b, const char *name) {
    memset(b, 0, sizeof *b);
    name = ccm__default_name(name);
    if (!ccm__valid_name(name))
        return -EINVAL;
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/corecast-%s", name);
    int err = 0;
    size_t size = 0;
    void *p = ccm__map(path, 0, 0, &size, &err, NULL);
    if (!p)
        return err;
    const struct ccm_header *h = (const struct ccm_header *)p;
    if (size < sizeof *h) {
        munmap(p, size);
        return -EPROTO;
    }
    /* the sections are copied once, then checked: what is checked is what is used */
    b->scopes = (struct ccm__section){h->scope_count, h->scope_off, h->scope_size, 0, 0};
    b->meters = (struct ccm__section){h->meter_count, h->meter_desc_off, h->meter_desc_size, h->meter_rec_off,
                                      h->meter_rec_size};
    b->triggers = (struct ccm__section){h->trigger_count, h->trigger_desc_off, h->trigger_desc_size,
                                        h->trigger_rec_off, h->trigger_rec_size};
    b->advice = (struct ccm__section){h->advice_count, h->advice_desc_off, h->advice_desc_size, h->advice_rec_off,
                                      h->advice_rec_size};
    b->interval_ns = h->interval_ns;
    int ok = memcmp(h->magic, CCM_MAGIC, 8) == 0 && h->version == CCM_VERSION &&
             h->byte_order == CCM_BYTE_ORDER && h->layout_size <= size &&
             ccm__section_ok(size, b->scopes.count, b->scopes.desc_off, b->scopes.desc_size, sizeof(struct ccm_scope)) &&
             ccm__section_ok(size, b->meters.count, b->meters.desc_off, b->meters.desc_size,
                             sizeof(struct ccm_meter_desc)) &&
             ccm__section_ok(size, b->meters.count, b->meters.rec_off, b->meters.rec_size, sizeof(struct ccm_meter_rec)) &&
             ccm__section_ok(size, b->triggers.count, b->triggers.desc_off, b->triggers.desc_size,
                             sizeof(struct ccm_trigger_desc)) &&
             ccm__section_ok(size, b->triggers.count, b->triggers.rec_off, b->triggers.rec_size,
                             sizeof(struct ccm_trigger_rec)) &&
             ccm__section_ok(size, b->advice.count, b->advice.desc_off, b->advice.desc_size,
                             sizeof(struct ccm_advice_desc)) &&
             ccm__section_ok(size, b->advice.count, b->advice.rec_off, b->advice.rec_size,
                             sizeof(struct ccm_advice_rec));
    if (!ok) {
        munmap(p, size);
        memset(b, 0, sizeof *b);
        return -EPROTO;
    }
    b->h = h;
    b->base = (const unsigned char *)p;
    b->size = size;
    snprintf(b->name, sizeof b->name, "%s", name);
    b->app_fd = -1;
    if (h->flags & 1u) {
        /* Writable by others on purpose (--app-mode): its header is read once, with pread,
         * checked, and only this process's copy of it is used afterwards (like the sections
         * above), so a rewrite of slot_count or header_size after this changes nothing here. */
        snprintf(path, sizeof path, "/dev/shm/corecast-%s.app", name);
        int fd = -1;
        size_t asize = 0;
        void *a = ccm__map(path, 1, 1, &asize, &err, &fd);
        int writable = a != NULL;
        if (!a)
            a = ccm__map(path, 0, 1, &asize, &err, &fd);
        struct ccm_app_header ah;
        if (a && !ccm__app_check(fd, asize, &ah)) {
            munmap(a, asize);
            close(fd);
            a = NULL;
        }
        if (a) {
            b->app = (unsigned char *)a;
            b->app_size = asize;
            b->app_writable = writable;
            b->app_header_size = ah.header_size;
            b->app_slot_count = ah.slot_count;
            b->app_slot_size = ah.slot_size;
            b->app_fd = fd;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * a publisher's mapping of the application area, against the file cut under it
 *
 * Whoever may write the area may also truncate it, and a store into a mapped page past the
 * file's end raises SIGBUS, which would kill the publisher. Checking the size first (fstat)
 * leaves the moment between the look and the store; writing with pwrite instead would leave
 * the claim of a slot, a compare-and-swap on the mapping. So a process that publishes keeps a
 * SIGBUS handler (installed at its first publish, once per process): a fault inside an area it
 * publishes to puts anonymous memory over that whole mapping (mmap MAP_FIXED: the store is
 * done again, into memory that is no file's) and marks the area stale -- that publish and every
 * later one through the handle return -ESTALE (open the board again). A SIGBUS anywhere else
 * goes to the handler that was there before (or the default action: the process dies as it
 * would have). The areas are in a process-wide table (weak symbols: one copy however many
 * files include this), registered at the first publish through a handle and removed by
 * ccm_close; the handler reads only that table (no thread-local storage, no allocation). */

#define CCM__BUS_AREAS 64
struct ccm__bus_area {
    int state;                   /* 0 free, 1 being filled, 2 in use */
    int stale;                   /* the handler replaced the mapping: -ESTALE from now on */
    unsigned char *base;
    size_t len;
};
__attribute__((weak)) struct ccm__bus_area ccm__bus_areas[CCM__BUS_AREAS];
__attribute__((weak)) struct sigaction ccm__bus_old;  /* the handler before ours */
__attribute__((weak)) int ccm__bus_installed;         /* 0 no, 1 installing, 2 installed */

#ifdef BUS_MCEERR_AO
#define CCM__BUS_MCEERR_AO BUS_MCEERR_AO
#else
#define CCM__BUS_MCEERR_AO 5     /* Linux's value, where <signal.h> was read without it */
#endif

static inline void ccm__on_sigbus(int sig, siginfo_t *si, void *ctx) {
    unsigned char *a = (unsigned char *)si->si_addr;
    int ours = 0;
    /* A fault of the instruction the handler returns to, which then runs (and faults) again; not
     * a signal sent (kill, raise: si_code <= 0), nor the kernel's asynchronous notice of a
     * memory error (BUS_MCEERR_AO: it has an address, but nothing runs again after it). */
    const int refaults = si->si_code > 0 && si->si_code != CCM__BUS_MCEERR_AO;
    if (refaults)                /* a fault (not kill or raise): si_addr is the address touched */
        for (int i = 0; i < CCM__BUS_AREAS; i++) {
            struct ccm__bus_area *e = &ccm__bus_areas[i];
            if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != 2)
                continue;
            unsigned char *base = e->base;     /* read once: the range checked is the range replaced */
            size_t len = e->len;
            if (a < base || a >= base + len)
                continue;
            int saved = errno;
            void *p = mmap(base, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            errno = saved;
            if (p == MAP_FAILED)
                break;
            __atomic_store_n(&e->stale, 1, __ATOMIC_RELEASE);
            ours = 1;
        }
    if (ours)
        return;
    if (ccm__bus_old.sa_flags & SA_SIGINFO) {
        if (ccm__bus_old.sa_sigaction)
            ccm__bus_old.sa_sigaction(sig, si, ctx);
        return;
    }
    if (ccm__bus_old.sa_handler == SIG_IGN && !refaults)
        return;
    if (ccm__bus_old.sa_handler != SIG_DFL && ccm__bus_old.sa_handler != SIG_IGN) {
        ccm__bus_old.sa_handler(sig);
        return;
    }
    /* the default action, as without this handler: a fault happens again at once when the
     * handler returns, any other SIGBUS is raised again (delivered when the handler returns) */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, NULL);
    if (!refaults)
        raise(sig);
}

/* The handler in place (once per process): 0, or -errno. */
static inline int ccm__bus_install(void) {
    int st = __atomic_load_n(&ccm__bus_installed, __ATOMIC_ACQUIRE);
    while (st != 2) {
        int zero = 0;
        if (__atomic_compare_exchange_n(&ccm__bus_installed, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            /* the action before ours, read first: a SIGBUS of another thread between installing
             * ours and sigaction's copy of the old one would otherwise find it empty */
            if (sigaction(SIGBUS, NULL, &ccm__bus_old) != 0) {
                int err = errno;
                __atomic_store_n(&ccm__bus_installed, 0, __ATOMIC_RELEASE);
                return -err;
            }
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = ccm__on_sigbus;
            sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
            sigemptyset(&sa.sa_mask);
            if (sigaction(SIGBUS, &sa, NULL) != 0) {
                int err = errno;
                __atomic_store_n(&ccm__bus_installed, 0, __ATOMIC_RELEASE);
                return -err;
            }
            __atomic_store_n(&ccm__bus_installed, 2, __ATOMIC_RELEASE);
            return 0;
        }
        sched_yield();           /* another thread is installing it */
        st = __atomic_load_n(&ccm__bus_installed, __ATOMIC_ACQUIRE);
    }
    return 0;
}

/* The table's entry for the mapping at `base` (registered now if it is not yet: `len` bytes),
 * or NULL when the table is full. */
static inline struct ccm__bus_area *ccm__bus_area(unsigned char *base, size_t len) {
    for (int i = 0; i < CCM__BUS_AREAS; i++) {
        struct ccm__bus_area *e = &ccm__bus_areas[i];
        if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == 2 && e->base == base)
            return e;
    }
    for (int i = 0; i < CCM__BUS_AREAS; i++) {
        struct ccm__bus_area *e = &ccm__bus_areas[i];
        int zero = 0;
        if (__atomic_compare_exchange_n(&e->state, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            e->base = base;
            e->len = len;
            __atomic_store_n(&e->stale, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&e->state, 2, __ATOMIC_RELEASE);
            return e;
        }
    }
    return NULL;
}

/* The mapping at `base` is about to go (ccm_close): forget it. */
static inline void ccm__bus_forget(unsigned char *base) {
    for (int i = 0; i < CCM__BUS_AREAS; i++) {
        struct ccm__bus_area *e = &ccm__bus_areas[i];
        int two = 2;
        if (e->base == base && __atomic_compare_exchange_n(&e->state, &two, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            e->base = NULL;
            e->len = 0;
            __atomic_store_n(&e->state, 0, __ATOMIC_RELEASE);
        }
    }
}

static inline void ccm_close(ccm_board *b) {
    if (b->base)
        munmap((void *)b->base, b->size);
    if (b->app) {
        ccm__bus_forget(b->app);
        munmap(b->app, b->app_size);
        if (b->app_fd >= 0)
            close(b->app_fd);
    }
    memset(b, 0, sizeof *b);
}

static inline const struct ccm_scope *ccm_scope_at(const ccm_board *b, int i) {
    return (const struct ccm_scope *)(b->base + b->scopes.desc_off + (size_t)i * b->scopes.desc_size);
}
static inline const struct ccm_meter_desc *ccm_meter_desc(const ccm_board *b, int i) {
    return (const struct ccm_meter_desc *)(b->base + b->meters.desc_off + (size_t)i * b->meters.desc_size);
}
static inline const struct ccm_trigger_desc *ccm_trigger_desc(const ccm_board *b, int i) {
    return (const struct ccm_trigger_desc *)(b->base + b->triggers.desc_off + (size_t)i * b->triggers.desc_size);
}
static inline const struct ccm_advice_desc *ccm_advice_desc(const ccm_board *b, int i) {
    return (const struct ccm_advice_desc *)(b->base + b->advice.desc_off + (size_t)i * b->advice.desc_size);
}

static inline int ccm__eq(const char *fixed, size_t n, const char *s) {
    return s && strncmp(fixed, s, n) == 0 && strlen(s) < n;
}

/* Index of meter `meter` at scope `scope` (NULL: "node"), or -1. */
static inline int ccm_find_meter(const ccm_board *b, const char *meter, const char *scope) {
    if (!scope)
        scope = "node";
    for (uint32_t i = 0; i < b->meters.count; i++) {
        const struct ccm_meter_desc *d = ccm_meter_desc(b, (int)i);
        if (ccm__eq(d->name, sizeof d->name, meter) && ccm__eq(d->scope, sizeof d->scope, scope))
            return (int)i;
    }
    return -1;
}

static inline int ccm_find_trigger(const ccm_board *b, const char *name, const char *scope) {
    for (uint32_t i = 0; i < b->triggers.count; i++) {
        const struct ccm_trigger_desc *d = ccm_trigger_desc(b, (int)i);
        if (ccm__eq(d->name, sizeof d->name, name) && (!scope || ccm__eq(d->scope, sizeof d->scope, scope)))
            return (int)i;
    }
    return -1;
}

static inline int ccm_find_advice(const ccm_board *b, const char *scope) {
    if (!scope)
        scope = "node";
    for (uint32_t i = 0; i < b->advice.count; i++)
        if (ccm__eq(ccm_advice_desc(b, (int)i)->scope, 32, scope))
            return (int)i;
    return -1;
}

static inline int ccm_read_meter(const ccm_board *b, int i, struct ccm_meter_rec *out) {
    if (i < 0 || (uint32_t)i >= b->meters.count)
        return -1;
    return ccm_read_rec(b->base + b->meters.rec_off + (size_t)i * b->meters.rec_size, out, sizeof *out);
}
static inline int ccm_read_trigger(const ccm_board *b, int i, struct ccm_trigger_rec *out) {
    if (i < 0 || (uint32_t)i >= b->triggers.count)
        return -1;
    return ccm_read_rec(b->base + b->triggers.rec_off + (size_t)i * b->triggers.rec_size, out, sizeof *out);
}
static inline int ccm_read_advice(const ccm_board *b, int i, struct ccm_advice_rec *out) {
    if (i < 0 || (uint32_t)i >= b->advice.count)
        return -1;
    return ccm_read_rec(b->base + b->advice.rec_off + (size_t)i * b->advice.rec_size, out, sizeof *out);
}

/* ------------------------------------------------------------------------------------------
 * staleness */

/* A process's start time (clock ticks after boot, /proc/PID/stat field 22); 0 if it is gone. */
static inline uint64_t ccm_pid_start(int pid) {
    char path[48], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');        /* the name may hold spaces and parentheses */
    if (!p)
        return 0;
    p++;
    for (int field = 3; field < 22 && p; field++)      /* p: the space before field 3; on to 22 */
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* 0 when the board is live; 1 when stale, with the reason in `why` (may be NULL).
 * max_age_s <= 0: stale when no tick came for max(1 s, 5 intervals). */
static inline int ccm_stale(const ccm_board *b, double max_age_s, char *why, size_t n) {
    const struct ccm_header *h = b->h;
    char tmp[8];
    if (!why) {
        why = tmp;
        n = sizeof tmp;
    }
    uint32_t state = __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
    if (state == CCM_STOPPED) {
        snprintf(why, n, "the daemon (pid %d) stopped", h->pid);
        return 1;
    }
    if (kill(h->pid, 0) != 0 && errno == ESRCH) {
        snprintf(why, n, "the daemon (pid %d) is gone: it died without closing the board", h->pid);
        return 1;
    }
    uint64_t start = ccm_pid_start(h->pid);
    if (start != 0 && start != h->pid_start) {
        snprintf(why, n, "the daemon (pid %d) is gone: that pid is another process now", h->pid);
        return 1;
    }
    if (state != CCM_RUNNING) {
        snprintf(why, n, "the daemon (pid %d) has not started sampling yet", h->pid);
        return 1;
    }
    double limit = max_age_s > 0 ? max_age_s : 5e-9 * (double)b->interval_ns;
    if (max_age_s <= 0 && limit < 1.0)
        limit = 1.0;
    double age = 1e-9 * (double)(ccm_now_ns() - __atomic_load_n(&h->heartbeat_ns, __ATOMIC_ACQUIRE));
    if (age > limit) {
        snprintf(why, n, "no tick for %.3g s (the daemon, pid %d, is stopped or starved)", age, h->pid);
        return 1;
    }
    why[0] = 0;
    return 0;
}

/* The cheap half of ccm_stale() for hot paths: running, and a tick within max(1 s, 5
 * intervals) (a daemon that died stops its heartbeat: this turns false within that time). */
static inline int ccm_live(const ccm_board *b) {
    const struct ccm_header *h = b->h;
    if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != CCM_RUNNING)
        return 0;
    int64_t limit = 5 * b->interval_ns;
    if (limit < 1000000000LL)
        limit = 1000000000LL;
    return ccm_now_ns() - __atomic_load_n(&h->heartbeat_ns, __ATOMIC_ACQUIRE) <= limit;
}

/* ------------------------------------------------------------------------------------------
 * waiting for a change */

static inline uint32_t ccm_trigger_generation(const ccm_board *b) {
    return __atomic_load_n(&b->h->trigger_gen, __ATOMIC_ACQUIRE);
}

static inline long ccm__futex_wait(const uint32_t *word, uint32_t val, int timeout_ms) {
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    return syscall(SYS_futex, word, FUTEX_WAIT, val, timeout_ms >= 0 ? &ts : NULL, NULL, 0);
}

/* Sleep until a trigger changes state after generation `gen` (from ccm_trigger_generation) or
 * `timeout_ms` passes (< 0: no limit). 1 changed, 0 timed out. */
static inline int ccm_wait_change(const ccm_board *b, uint32_t gen, int timeout_ms) {
    int64_t end = ccm_now_ns() + (int64_t)timeout_ms * 1000000LL;
    for (;;) {
        if (ccm_trigger_generation(b) != gen)
            return 1;
        int left = timeout_ms;
        if (timeout_ms >= 0) {
            int64_t l = end - ccm_now_ns();
            if (l <= 0)
                return 0;
            left = (int)((l + 999999) / 1000000);
        }
        ccm__futex_wait(&b->h->trigger_gen, gen, left);
    }
}

/* A socket that becomes readable (one byte) at every trigger state change: poll() it, read
 * the bytes, then read the triggers. -errno when the daemon is not there (-ENOENT: no board).
 * An abstract socket name has no owner nor permissions: any local user can bind
 * "corecast-meters-NAME" first. So the server's credentials (SO_PEERCRED) are checked after
 * connecting: it must be the board file's owner, or root, and the board one this reader
 * trusts (as ccm_open: a regular file owned by this user or root); -EPERM otherwise. */
static inline int ccm_subscribe(const char *name) {
    name = ccm__default_name(name);
    if (!ccm__valid_name(name))
        return -EINVAL;
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/corecast-%s", name);
    int bfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (bfd < 0)
        return -errno;
    struct stat st;
    int bad = fstat(bfd, &st) != 0 ? -errno : 0;
    close(bfd);
    if (bad)
        return bad;
    if (!S_ISREG(st.st_mode))
        return -ENOTSUP;
    if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return -EPERM;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "corecast-meters-%s", name);
    if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    /* struct ucred's layout: glibc declares struct ucred only under _GNU_SOURCE, which this
     * header's own #define cannot give a program that included a system header before it */
    struct { pid_t pid; uid_t uid; gid_t gid; } cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred ||
        (cred.uid != st.st_uid && cred.uid != 0)) {
        close(fd);
        return -EPERM;              /* someone else holds the daemon's name */
    }
    return fd;
}

/* ------------------------------------------------------------------------------------------
 * the application area */

/* Slot `i` in this process's mapping, or NULL: `i` and the slot's bytes are checked against
 * the geometry copied at open and the mapping's length, never against the shared header. */
static inline struct ccm_app_slot *ccm__slot(const ccm_board *b, uint32_t i) {
    if (!b->app || i >= b->app_slot_count)
        return NULL;
    size_t off = (size_t)b->app_header_size + (size_t)i * b->app_slot_size;
    if (off + sizeof(struct ccm_app_slot) > b->app_size)
        return NULL;
    return (struct ccm_app_slot *)(b->app + off);
}

static inline uint32_t ccm_app_slots(const ccm_board *b) { return b->app ? b->app_slot_count : 0; }

/* Whether the application area's file still covers the whole mapping. Anyone who may write the
 * file may also truncate it, and a mapped page past a file's end raises SIGBUS when touched:
 * a publisher looks before it writes, and a file cut between this look and the write is
 * caught by the SIGBUS handler above (the publish then returns -ESTALE). */
static inline int ccm__app_intact(const ccm_board *b) {
    struct stat st;
    return b->app && b->app_fd >= 0 && fstat(b->app_fd, &st) == 0 && (uint64_t)st.st_size >= (uint64_t)b->app_size;
}

/* Copy slot `i` under its seqlock into `out`: 0, or -1 (no such slot, the file shrank under
 * it, or a publisher stayed in the middle of a write for 50 ms). The slot is read from the
 * file with pread, never through the mapping: a file truncated by one of its writers makes
 * the read fail, not the reader fault. Its text fields are the publisher's, untrusted: they
 * come back NUL-terminated within their size. */
static inline int ccm_read_app(const ccm_board *b, uint32_t i, struct ccm_app_slot *out) {
    if (!ccm__slot(b, i) || b->app_fd < 0)
        return -1;
    off_t off = (off_t)b->app_header_size + (off_t)i * (off_t)b->app_slot_size;
    struct ccm_app_slot v;
    int64_t deadline = 0;
    for (int tries = 0;; tries++) {
        uint32_t again;
        if (ccm__pread(b->app_fd, &v, sizeof v, off) != 0)
            return -1;
        /* the sequence number is the first word pread copied; read once more after the copy,
         * unchanged and even, the copy is one publish (the seqlock over two system calls) */
        if (!(v.seq & 1u) && ccm__pread(b->app_fd, &again, sizeof again, off) == 0 && again == v.seq) {
            v.app[sizeof v.app - 1] = 0;
            v.key[sizeof v.key - 1] = 0;
            *out = v;
            return 0;
        }
        if (tries < 16) {
            ccm__relax();
            continue;
        }
        int64_t now = ccm_now_ns();
        if (!deadline)
            deadline = now + 50000000LL;
        else if (now > deadline)
            return -1;
        sched_yield();
    }
}

/* Publish `value` under `key` for this process: 0, -EACCES (no write permission on the
 * application area), -ENOSPC (every slot taken), -ENOENT (no application area), -ESTALE (its
 * file was truncated after it was opened, before or during this publish: open the board
 * again), -EMFILE (this process publishes to 64 areas already), or the -errno of installing
 * the SIGBUS handler. A file cut in the middle of the write never kills the publisher: see
 * "a publisher's mapping of the application area" above. */
static inline int ccm_app_publish(ccm_board *b, const char *key, double value) {
    if (!b->app)
        return -ENOENT;
    if (!b->app_writable)
        return -EACCES;
    int err = ccm__bus_install();
    if (err)
        return err;
    struct ccm__bus_area *guard = ccm__bus_area(b->app, b->app_size);
    if (!guard)
        return -EMFILE;
    if (__atomic_load_n(&guard->stale, __ATOMIC_ACQUIRE) || !ccm__app_intact(b))
        return -ESTALE;
    uint32_t me = (uint32_t)getpid();
    uint32_t n = ccm_app_slots(b);
    struct ccm_app_slot *slot = NULL;
    for (uint32_t i = 0; i < n && !slot; i++) {
        struct ccm_app_slot *s = ccm__slot(b, i);
        if (s && __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE) == me && strncmp(s->key, key, sizeof s->key) == 0)
            slot = s;
    }
    for (uint32_t i = 0; i < n && !slot; i++) {          /* claim a free slot, or one of a dead process */
        struct ccm_app_slot *s = ccm__slot(b, i);
        if (!s)
            break;
        uint32_t owner = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
        /* an owner that is no pid (written by another writer of the area) is free too: kill()
         * of a negative number would ask about a process group */
        if ((int32_t)owner > 0 && (owner == me || kill((pid_t)owner, 0) == 0 || errno != ESRCH))
            continue;
        if (__atomic_compare_exchange_n(&s->owner, &owner, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            slot = s;
    }
    if (!slot)
        return __atomic_load_n(&guard->stale, __ATOMIC_ACQUIRE) ? -ESTALE : -ENOSPC;
    struct ccm_app_slot v;
    memset(&v, 0, sizeof v);
    v.pid = (int32_t)me;
    v.t_ns = ccm_now_ns();
    v.value = value;
    v.pid_start = ccm_pid_start((int)me);
    char comm[64] = "";
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r = read(fd, comm, sizeof comm - 1);
        close(fd);
        if (r > 0)
            comm[r - (comm[r - 1] == '\n')] = 0;
    }
    snprintf(v.app, sizeof v.app, "%s", comm);
    snprintf(v.key, sizeof v.key, "%s", key);
    v.owner = me;
    ccm_write_rec(slot, &v, sizeof v);
    return __atomic_load_n(&guard->stale, __ATOMIC_ACQUIRE) ? -ESTALE : 0;
}

/* ------------------------------------------------------------------------------------------
 * concurrency advice: one process-wide board (weak: shared by every file that includes this) */

struct ccm__global {
    ccm_board *board;            /* the board in use (replaced, never unmapped, when a new daemon comes) */
    int advice;                  /* index of the attached scope's advice in it */
    int lock;
    int next_worker;
    int released;                /* cc_throttle_release(): no throttle point blocks */
    char name[CCM_NAME_MAX + 1];
    char scope[32];
    int64_t retry_ns;            /* when to look for a board again */
};
__attribute__((weak)) struct ccm__global ccm__g;
__attribute__((weak)) __thread int ccm__worker = -1;

static inline void ccm__lock(void) {
    int z = 0;
    while (!__atomic_compare_exchange_n(&ccm__g.lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        z = 0;
        ccm__relax();
    }
}
static inline void ccm__unlock(void) { __atomic_store_n(&ccm__g.lock, 0, __ATOMIC_RELEASE); }

/* Under the lock: open the board again; keep the one in use when it is the same daemon's. */
static inline int ccm__reopen(void) {
    ccm_board nb;
    int r = ccm_open(&nb, ccm__g.name[0] ? ccm__g.name : NULL);
    ccm__g.retry_ns = ccm_now_ns() + 1000000000LL;
    if (r != 0)
        return r;
    ccm_board *old = __atomic_load_n(&ccm__g.board, __ATOMIC_ACQUIRE);
    if (old && old->h->pid == nb.h->pid && old->h->started_real_ns == nb.h->started_real_ns) {
        ccm_close(&nb);            /* the same board: readers keep the mapping they have */
        return 0;
    }
    ccm_board *p = (ccm_board *)malloc(sizeof *p);
    if (!p) {
        ccm_close(&nb);
        return -ENOMEM;
    }
    *p = nb;
    __atomic_store_n(&ccm__g.advice, ccm_find_advice(p, ccm__g.scope), __ATOMIC_RELAXED);
    __atomic_store_n(&ccm__g.board, p, __ATOMIC_RELEASE);   /* the old one stays mapped: a
                                                               thread may still be reading it */
    return 0;
}

/* Use board `name` (NULL: $CORECAST_METERS or "default") and the advice of `scope` (NULL:
 * $CORECAST_METERS_SCOPE or "node") for cc_allowed_workers(NULL) and cc_throttle_point().
 * 0, or -errno (then nothing throttles until the board appears: looked for every second). */
static inline int cc_meters_attach(const char *name, const char *scope) {
    ccm__lock();
    name = ccm__default_name(name);
    snprintf(ccm__g.name, sizeof ccm__g.name, "%s", name);
    if (!scope || !*scope)
        scope = getenv("CORECAST_METERS_SCOPE");
    snprintf(ccm__g.scope, sizeof ccm__g.scope, "%s", (scope && *scope) ? scope : "node");
    ccm__g.retry_ns = 0;
    int r = ccm__reopen();
    ccm_board *b = __atomic_load_n(&ccm__g.board, __ATOMIC_ACQUIRE);
    if (b)
        __atomic_store_n(&ccm__g.advice, ccm_find_advice(b, ccm__g.scope), __ATOMIC_RELAXED);
    ccm__unlock();
    return r;
}

/* The advised board, opened on first use and looked for again (at most once a second) while
 * it is missing or stale; NULL when there is no live one. */
static inline ccm_board *ccm__advised(void) {
    ccm_board *b = __atomic_load_n(&ccm__g.board, __ATOMIC_ACQUIRE);
    if (b && ccm_live(b))
        return b;
    if (ccm_now_ns() < __atomic_load_n(&ccm__g.retry_ns, __ATOMIC_RELAXED))
        return NULL;
    ccm__lock();
    if (ccm_now_ns() >= ccm__g.retry_ns) {
        if (!ccm__g.scope[0])
            snprintf(ccm__g.scope, sizeof ccm__g.scope, "%s",
                     getenv("CORECAST_METERS_SCOPE") && *getenv("CORECAST_METERS_SCOPE")
                         ? getenv("CORECAST_METERS_SCOPE") : "node");
        ccm__reopen();
    }
    ccm__unlock();
    b = __atomic_load_n(&ccm__g.board, __ATOMIC_ACQUIRE);
    return (b && ccm_live(b)) ? b : NULL;
}

/* allowed_workers for `scope` (NULL: the attached scope), or -1 when no live daemon advises it. */
static inline int cc_allowed_workers(const char *scope) {
    ccm_board *b = ccm__advised();
    if (!b)
        return -1;
    int i = (!scope || strcmp(scope, ccm__g.scope) == 0) ? __atomic_load_n(&ccm__g.advice, __ATOMIC_RELAXED)
                                                         : ccm_find_advice(b, scope);
    struct ccm_advice_rec r;
    if (i < 0 || ccm_read_advice(b, i, &r) != 0)
        return -1;
    return (int)r.allowed;
}

/* This thread's worker index (0-based) for cc_throttle_point(). */
static inline void cc_set_worker(int index) { ccm__worker = index; }

/* Worker `index` beyond the allowed count sleeps here until allowed (woken by the daemon when
 * allowed_workers changes; it checks at least every 100 ms). Returns how many times it slept
 * (0: it went through). Never blocks without a live daemon or advice for the scope, nor after
 * cc_throttle_release(). */
static inline int cc_throttle_point_as(int index) {
    int slept = 0;
    for (;;) {
        if (__atomic_load_n(&ccm__g.released, __ATOMIC_ACQUIRE))
            return slept;
        ccm_board *b = ccm__advised();
        int a = __atomic_load_n(&ccm__g.advice, __ATOMIC_RELAXED);
        if (!b || a < 0)
            return slept;
        const uint32_t *gen = &b->h->advice_gen;
        uint32_t g = __atomic_load_n(gen, __ATOMIC_ACQUIRE);
        struct ccm_advice_rec r;
        memset(&r, 0, sizeof r);
        if (ccm_read_advice(b, a, &r) != 0 || index < (int)r.allowed)
            return slept;
        if (__atomic_load_n(&ccm__g.released, __ATOMIC_ACQUIRE))
            return slept;
        ccm__futex_wait(gen, g, 100);
        slept++;
    }
}

/* cc_throttle_point_as() for this thread's index (cc_set_worker; else one given on first use,
 * 0, 1, 2, ... in the order threads first get here). */
static inline int cc_throttle_point(void) {
    if (ccm__worker < 0)
        ccm__worker = __atomic_fetch_add(&ccm__g.next_worker, 1, __ATOMIC_RELAXED);
    return cc_throttle_point_as(ccm__worker);
}

/* The work is over: wake every worker sleeping in a throttle point and let none sleep there
 * again until cc_throttle_reset() (a pool whose queue ran dry calls this, so that throttled
 * workers see it and end instead of sleeping forever). */
static inline void cc_throttle_release(void) {
    __atomic_store_n(&ccm__g.released, 1, __ATOMIC_RELEASE);
    ccm_board *b = __atomic_load_n(&ccm__g.board, __ATOMIC_ACQUIRE);
    if (b)
        syscall(SYS_futex, &b->h->advice_gen, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static inline void cc_throttle_reset(void) { __atomic_store_n(&ccm__g.released, 0, __ATOMIC_RELEASE); }

#ifdef __cplusplus
}
#endif
#endif
