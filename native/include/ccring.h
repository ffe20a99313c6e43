/* The shared-memory ring that carries trace records from the QEMU capture plugin (the one
 * producer, native/qemu/capture_plugin.c) to corecast (the one consumer, native/sim/ring.c
 * through src/corecast/sim/online.py) while the program runs: `sim --online`, `sim mrc
 * --online` and `sim capture` read it instead of a file.
 *
 * The memory is a memfd corecast creates (no name anywhere in a file system, private to the
 * two processes: it goes away with the last descriptor and mapping, whatever way they end)
 * and hands to QEMU as an inherited descriptor. Layout: one page of header, then the data
 * area of `capacity` bytes (a power of two, a multiple of the page size). Each side maps the
 * data area twice, back to back, so that a block that wraps past the end is still one
 * contiguous span in memory (the producer copies, the consumer reads, without splitting).
 *
 * Positions are byte counts since the start (never wrapped): the producer advances `head`
 * after writing, the consumer advances `tail` after reading; free space is capacity - (head -
 * tail). Each is written by one side only, on its own cache line. A side that has to wait
 * (the ring is full, or empty) says so in its `*_waiting` word and sleeps on a futex word
 * (`*_seq`) that the other side bumps and wakes when it moves; it wakes at least every 100 ms
 * to look at the other side (a producer whose consumer died exits; see the plugin).
 *
 * Blocks are whole records (16 bytes each), written in the order the plugin flushes them, so
 * the stream is exactly what the plugin wrote to a trace file before this ring existed. */
#ifndef CCRING_H
#define CCRING_H

#include <stdint.h>
#include <string.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CC_RING_MAGIC "CCRING1"
#define CC_RING_HEADER 4096
#define CC_RING_TIDS 16384              /* thread ids counted exactly (a bit each) */

struct cc_ring_header {
    char magic[8];                      /* "CCRING1" */
    uint32_t version, header_size;      /* 1, CC_RING_HEADER */
    uint64_t capacity;                  /* bytes of the data area */
    int32_t producer_pid, consumer_pid; /* QEMU's pid (set by the plugin); corecast's */
    char pad0[64 - 32];
    uint64_t head;                      /* producer: bytes written */
    uint32_t prod_waiting, prod_seq;    /* the producer sleeps on prod_seq when full */
    uint64_t records, fetches;          /* producer: records and instructions written */
    uint32_t done;                      /* producer: 1 once its last block is in (exit) */
    uint32_t put_lock;                  /* producers: the program's child processes write too */
    char pad1[64 - 40];
    uint64_t tail;                      /* consumer: bytes read */
    uint32_t cons_waiting, cons_seq;    /* the consumer sleeps on cons_seq when empty */
    uint32_t closed;                    /* consumer: 1 when it stopped reading (gave up) */
    uint32_t cons_want;                 /* consumer: the bytes it waits for (0: any) */
    char pad2[64 - 24];
    uint64_t tids[CC_RING_TIDS / 64];   /* producer: the thread ids written (bit t: thread t) */
    uint32_t tids_beyond;               /* producer: a thread id at or above CC_RING_TIDS was written */
};

_Static_assert(sizeof(struct cc_ring_header) == 192 + CC_RING_TIDS / 8 + 4 + 4, "ring header layout");
_Static_assert(sizeof(struct cc_ring_header) <= CC_RING_HEADER, "the ring header fits its page");

/* Producer: thread `tid` writes records (once per thread buffer, not per record). */
static inline void cc_ring_thread(struct cc_ring_header *h, unsigned tid) {
    if (tid < CC_RING_TIDS)
        __atomic_fetch_or(&h->tids[tid / 64], (uint64_t)1 << (tid % 64), __ATOMIC_RELAXED);
    else
        __atomic_store_n(&h->tids_beyond, 1u, __ATOMIC_RELAXED);
}

static inline long cc_ring__futex(uint32_t *word, int op, uint32_t val, int timeout_ms) {
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    return syscall(SYS_futex, word, op, val, timeout_ms >= 0 ? &ts : NULL, NULL, 0);
}

static inline void cc_ring__wake(uint32_t *seq, uint32_t *waiting) {
    if (__atomic_load_n(waiting, __ATOMIC_SEQ_CST)) {
        __atomic_fetch_add(seq, 1u, __ATOMIC_SEQ_CST);
        cc_ring__futex(seq, FUTEX_WAKE, INT32_MAX, -1);
    }
}

/* Map a ring's memfd: the header, then the data area twice in a row. 0, or -1 (errno set). */
static inline int cc_ring_map(int fd, uint64_t capacity, struct cc_ring_header **hp, unsigned char **dp) {
    size_t span = CC_RING_HEADER + 2 * (size_t)capacity;
    unsigned char *base = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return -1;
    if (mmap(base, CC_RING_HEADER, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED ||
        mmap(base + CC_RING_HEADER, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             CC_RING_HEADER) == MAP_FAILED ||
        mmap(base + CC_RING_HEADER + capacity, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             CC_RING_HEADER) == MAP_FAILED) {
        munmap(base, span);
        return -1;
    }
    *hp = (struct cc_ring_header *)base;
    *dp = base + CC_RING_HEADER;
    return 0;
}

static inline void cc_ring_unmap(struct cc_ring_header *h, uint64_t capacity) {
    munmap(h, CC_RING_HEADER + 2 * (size_t)capacity);
}

/* Producer: append `len` bytes (a multiple of 16, at most the capacity) from `src`, waiting
 * while the ring is full. `alive()` is asked every 100 ms of waiting: when it says the
 * consumer is gone (0), the bytes are dropped and -1 returned. */
static inline void cc_ring__lock(uint32_t *lock) {
    uint32_t z = 0;
    while (!__atomic_compare_exchange_n(lock, &z, 1u, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        z = 0;
        sched_yield();
    }
}

static inline int cc_ring_put(struct cc_ring_header *h, unsigned char *data, const void *src, uint64_t len,
                              uint64_t records, uint64_t fetches, int (*alive)(struct cc_ring_header *)) {
    cc_ring__lock(&h->put_lock);        /* one producer at a time (a forked program's processes) */
    int rc = 0;
    uint64_t head = h->head;
    for (;;) {
        uint64_t tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);
        if (h->capacity - (head - tail) >= len) break;
        if (__atomic_load_n(&h->closed, __ATOMIC_ACQUIRE)) {
            rc = -1;
            break;
        }
        uint32_t seq = __atomic_load_n(&h->prod_seq, __ATOMIC_SEQ_CST);
        __atomic_store_n(&h->prod_waiting, 1u, __ATOMIC_SEQ_CST);
        tail = __atomic_load_n(&h->tail, __ATOMIC_SEQ_CST);
        if (h->capacity - (head - tail) < len) {
            if (cc_ring__futex(&h->prod_seq, FUTEX_WAIT, seq, 100) != 0 && alive && !alive(h)) {
                __atomic_store_n(&h->prod_waiting, 0u, __ATOMIC_SEQ_CST);
                rc = -1;
                break;
            }
        }
        __atomic_store_n(&h->prod_waiting, 0u, __ATOMIC_SEQ_CST);
    }
    if (rc) {
        __atomic_store_n(&h->put_lock, 0u, __ATOMIC_RELEASE);
        return rc;
    }
    memcpy(data + (head & (h->capacity - 1)), src, len);  /* the double mapping takes a wrap */
    __atomic_store_n(&h->records, h->records + records, __ATOMIC_RELAXED);
    __atomic_store_n(&h->fetches, h->fetches + fetches, __ATOMIC_RELAXED);
    __atomic_store_n(&h->head, head + len, __ATOMIC_SEQ_CST);    /* before reading cons_waiting */
    __atomic_store_n(&h->put_lock, 0u, __ATOMIC_RELEASE);
    /* The consumer is woken once what it waits for is there, not at every block: woken at every
     * one of the 16 blocks of a 2 MiB read, it spent 0.15 s of CPU draining sort's 86.8 M
     * records (10,130 sleeps for 662 reads). A consumer that sees the new head before it
     * sleeps does not sleep; one that sleeps first is seen waiting here, with its want. */
    if (__atomic_load_n(&h->cons_waiting, __ATOMIC_SEQ_CST) &&
        head + len - __atomic_load_n(&h->tail, __ATOMIC_SEQ_CST) >= __atomic_load_n(&h->cons_want, __ATOMIC_SEQ_CST))
        cc_ring__wake(&h->cons_seq, &h->cons_waiting);
    return 0;
}

/* Producer: the last block is in. */
static inline void cc_ring_finish(struct cc_ring_header *h) {
    __atomic_store_n(&h->done, 1u, __ATOMIC_RELEASE);
    __atomic_fetch_add(&h->cons_seq, 1u, __ATOMIC_SEQ_CST);
    cc_ring__futex(&h->cons_seq, FUTEX_WAKE, INT32_MAX, -1);
}

#endif
