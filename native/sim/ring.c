/* The consumer's side of the shared-memory ring (native/include/ccring.h), for corecast's
 * Python (src/corecast/sim/online.py) through ctypes; the producer is the QEMU plugin. */
#define _GNU_SOURCE
#include "ccring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

typedef struct {
    struct cc_ring_header *h;
    unsigned char *data;
    uint64_t capacity;                  /* our own copy: the peer writes the header */
    int fd;
} cc_ring;

/* A new ring of `capacity` bytes (rounded up to a power of two, at least 1 MiB, at most
 * 1 GiB) in a memfd (close-on-exec: corecast hands it to QEMU explicitly). NULL, errno set. */
API cc_ring *cc_ring_create(uint64_t capacity) {
    uint64_t cap = 1u << 20;
    while (cap < capacity && cap < (1ull << 30)) cap <<= 1;
    int fd = memfd_create("corecast-ring", MFD_CLOEXEC);
    if (fd < 0) return NULL;
    cc_ring *r = calloc(1, sizeof *r);
    if (!r || ftruncate(fd, (off_t)(CC_RING_HEADER + cap)) != 0 || cc_ring_map(fd, cap, &r->h, &r->data) != 0) {
        int e = errno;
        free(r);
        close(fd);
        errno = e;
        return NULL;
    }
    r->capacity = cap;
    r->fd = fd;
    memcpy(r->h->magic, CC_RING_MAGIC, 8);
    r->h->version = 1;
    r->h->header_size = CC_RING_HEADER;
    r->h->capacity = cap;
    r->h->consumer_pid = (int32_t)getpid();
    return r;
}

API int cc_ring_fd(const cc_ring *r) { return r->fd; }
API uint64_t cc_ring_capacity(const cc_ring *r) { return r->capacity; }

/* Bytes ready to read (whole records), waiting up to `timeout_ms` (< 0: no limit) for at least
 * `min_bytes` of them, or for the producer to be done. */
API uint64_t cc_ring_wait(cc_ring *r, uint64_t min_bytes, int timeout_ms) {
    struct cc_ring_header *h = r->h;
    uint64_t tail = h->tail;
    int waited = 0;
    for (;;) {
        uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
        uint64_t avail = head - tail;
        if (avail > r->capacity) avail = 0;          /* a damaged header: nothing to trust */
        if (avail >= min_bytes || __atomic_load_n(&h->done, __ATOMIC_ACQUIRE) || (timeout_ms >= 0 && waited))
            return avail & ~(uint64_t)15;
        /* woken when min_bytes are there (at most half the ring: the producer never waits for
         * room while the consumer waits for more), when the producer is done, or at the timeout */
        uint64_t want = min_bytes < r->capacity / 2 ? min_bytes : r->capacity / 2;
        __atomic_store_n(&h->cons_want, (uint32_t)(want < UINT32_MAX ? want : UINT32_MAX), __ATOMIC_SEQ_CST);
        uint32_t seq = __atomic_load_n(&h->cons_seq, __ATOMIC_SEQ_CST);
        __atomic_store_n(&h->cons_waiting, 1u, __ATOMIC_SEQ_CST);
        head = __atomic_load_n(&h->head, __ATOMIC_SEQ_CST);
        if (head - tail < min_bytes && !__atomic_load_n(&h->done, __ATOMIC_SEQ_CST))
            cc_ring__futex(&h->cons_seq, FUTEX_WAIT, seq, timeout_ms >= 0 ? timeout_ms : 100);
        __atomic_store_n(&h->cons_waiting, 0u, __ATOMIC_SEQ_CST);
        if (timeout_ms >= 0) waited = 1;
    }
}

/* Where the next unread byte is: `cc_ring_wait`'s bytes lie there contiguously. */
API void *cc_ring_at(const cc_ring *r) { return r->data + (r->h->tail & (r->capacity - 1)); }

/* The consumer is done with `bytes` more (at most what cc_ring_wait said). */
API void cc_ring_release(cc_ring *r, uint64_t bytes) {
    struct cc_ring_header *h = r->h;
    __atomic_store_n(&h->tail, h->tail + bytes, __ATOMIC_SEQ_CST);   /* before reading prod_waiting */
    cc_ring__wake(&h->prod_seq, &h->prod_waiting);
}

API int cc_ring_done(const cc_ring *r) { return (int)__atomic_load_n(&r->h->done, __ATOMIC_ACQUIRE); }

/* Records and instructions the producer has written so far (for progress). */
API void cc_ring_counts(const cc_ring *r, uint64_t *records, uint64_t *fetches) {
    *records = __atomic_load_n(&r->h->records, __ATOMIC_RELAXED);
    *fetches = __atomic_load_n(&r->h->fetches, __ATOMIC_RELAXED);
}

/* Threads that wrote records: their count (-1: one id was beyond the bitmap, count unknown). */
API int cc_ring_threads(const cc_ring *r) {
    if (__atomic_load_n(&r->h->tids_beyond, __ATOMIC_ACQUIRE)) return -1;
    int n = 0;
    for (int i = 0; i < CC_RING_TIDS / 64; i++) n += __builtin_popcountll(__atomic_load_n(&r->h->tids[i], __ATOMIC_ACQUIRE));
    return n;
}

/* Stop reading: a producer waiting for room gives up; then unmap and close. */
API void cc_ring_close(cc_ring *r) {
    if (!r) return;
    __atomic_store_n(&r->h->closed, 1u, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&r->h->prod_seq, 1u, __ATOMIC_SEQ_CST);
    cc_ring__futex(&r->h->prod_seq, FUTEX_WAKE, INT32_MAX, -1);
    cc_ring_unmap(r->h, r->capacity);
    close(r->fd);
    free(r);
}
