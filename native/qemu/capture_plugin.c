/* A QEMU user-mode (TCG) plugin that records corecast's trace records: every executed
 * instruction as a fetch (address, length), every memory access as a load or a store (address,
 * size), with the thread (vCPU index: one per guest thread in user mode). Records are the
 * simulator's 16-byte ones (native/sim/ccsim.h), appended in blocks to the trace file corecast
 * is writing (src/corecast/sim/capture.py), which is why this is much faster than lackey: no
 * text, no per-access formatting, no instrumentation framework of its own.
 *
 * Arguments (qemu-x86_64 -plugin libcorecast_qemu.so,fd=N|ring=N,maps=PATH[,count=PATH]):
 *   fd=N       where the records go (the trace file, opened for appending), or
 *   ring=N     the shared-memory ring corecast reads as the program runs (native/include/
 *              ccring.h: a memfd, inherited); when corecast is gone (its process died, or it
 *              closed the ring) the program is killed: nothing runs on without its reader
 *   maps=PATH  at exit, the executable file mappings of the process, so that corecast can find
 *              which object each instruction came from (guest addresses are host addresses in
 *              64-bit-on-64-bit user mode)
 *   mapsfd=N   the same, written into descriptor N (a memfd of corecast's) instead of a file
 *   count=PATH optional: a file of 8 bytes that holds, as the run goes, the instructions written
 *              so far (a native-endian uint64, updated at every block written), for progress
 *
 * QEMU does not install its plugin header on Debian; the declarations below are those of the
 * plugin API (version 1, as QEMU 7.2 implements it), written from its documentation. Only the
 * calls used here are declared.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---------------------------------------------------------------- the QEMU plugin API */
typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;   /* not looked into */

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
extern void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                                   qemu_plugin_vcpu_udata_cb_t cb,
                                                   enum qemu_plugin_cb_flags flags, void *userdata);
extern void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                             enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                             void *userdata);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
extern uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
extern size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
extern unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
extern _Bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

/* ---------------------------------------------------------------- records */
/* corecast's trace record (cc_rec) and its kinds (CC_K_*) */
#include "cctrace.h"
#include "ccring.h"

#define BLOCK 8192                      /* records per write */

/* One buffer per thread: guest threads run as host threads, each its own vCPU index. */
typedef struct {
    cc_rec rec[BLOCK];
    size_t n;
    uint64_t fetches;                   /* instructions in rec[0..n) */
} tbuf;

/* initial-exec: one load from the thread pointer, where the default model for a dlopen'ed object calls
 * __tls_get_addr at every record (a pointer fits glibc's spare static TLS) */
static __thread tbuf *tls __attribute__((tls_model("initial-exec")));
static int out_fd = -1;
static char *maps_path;
static int maps_fd = -1;
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static tbuf **all;                      /* every buffer, flushed at exit */
static size_t nall, capall;
static int failed;
static uint64_t *shown;                 /* count=PATH, mapped: instructions written so far */
static struct cc_ring_header *ring;     /* ring=N: the shared-memory ring, and its data area */
static unsigned char *ring_data;
static pid_t reader;                    /* corecast: the ring's consumer */
static pid_t owner;                     /* the process QEMU started as (not a child it forked) */

/* Whether corecast still reads the ring: its process is there and the ring is not closed. */
static int reader_alive(struct cc_ring_header *h) {
    return !__atomic_load_n(&h->closed, __ATOMIC_ACQUIRE) && (kill(reader, 0) == 0 || errno != ESRCH);
}

/* A child process of the program (QEMU forks with the guest): it starts with none of its
 * parent's records (they are the parent's to write), and writes its own under its own
 * buffers. */
static void forked(void) {
    for (size_t i = 0; i < nall; i++) {
        all[i]->n = 0;
        all[i]->fetches = 0;
    }
    nall = 0;
    tls = NULL;
    pthread_mutex_init(&write_lock, NULL);
    pthread_mutex_init(&list_lock, NULL);
}

static void write_all(const void *p, size_t len) {
    const char *c = p;
    while (len && !failed) {
        ssize_t w = write(out_fd, c, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            failed = 1;                 /* the reader went away: stop writing, let the guest run */
            return;
        }
        c += w;
        len -= (size_t)w;
    }
}

static void flush(tbuf *b) {
    if (!b->n) return;
    pthread_mutex_lock(&write_lock);    /* blocks stay whole: records of a thread in order */
    if (ring) {
        if (!failed && cc_ring_put(ring, ring_data, b->rec, b->n * sizeof(cc_rec), b->n, b->fetches, reader_alive)) {
            failed = 1;                 /* corecast is gone or stopped reading: so does the program */
            kill(getpid(), SIGKILL);
        }
    } else {
        write_all(b->rec, b->n * sizeof(cc_rec));
    }
    if (shown) __atomic_store_n(shown, *shown + b->fetches, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&write_lock);
    b->n = 0;
    b->fetches = 0;
}

static tbuf *buf(void) {
    tbuf *b = tls;
    if (__builtin_expect(b != NULL, 1)) return b;
    b = calloc(1, sizeof *b);
    if (!b) abort();
    pthread_mutex_lock(&list_lock);
    if (nall == capall) {
        capall = capall ? 2 * capall : 16;
        all = realloc(all, capall * sizeof *all);
        if (!all) abort();
    }
    all[nall++] = b;
    pthread_mutex_unlock(&list_lock);
    tls = b;
    return b;
}

/* A data record joined to the thread's last record (`p`), when it is part of the same access:
 * 1, or 0 when it is a record of its own. A store to what the same instruction just loaded is
 * one read-modify-write record, as lackey writes it ("M") and cachegrind counts it (a data
 * read). TCG performs an access wider than 8 bytes (SSE, AVX, x87 extended) as 8-byte pieces
 * at ascending addresses: they are put back together into the one access valgrind reports (a
 * 16- or 32-byte load is one access to the caches, not two or four). */
static inline __attribute__((always_inline)) int joined(cc_rec *p, uint64_t addr, uint8_t kind, unsigned size) {
    if (kind == CC_K_STORE && p->kind == CC_K_LOAD && p->addr == addr && p->size == size) {
        p->kind = CC_K_MODIFY;
        return 1;
    }
    if (p->kind == kind && p->addr + p->size == addr && p->size >= 8 && p->size + size <= 64) {
        p->size = (uint8_t)(p->size + size);
        return 1;
    }
    return 0;
}

/* Every record goes through here when it is the first of its thread or its block is full; the
 * callbacks below take the other records themselves (the same rules, inline): out of line,
 * their common path needs no registers saved and no call. */
static __attribute__((noinline)) void emit(unsigned vcpu, uint64_t addr, uint8_t kind, unsigned size) {
    tbuf *b = tls;
    if (__builtin_expect(b == NULL, 0)) {
        b = buf();
        if (ring) cc_ring_thread(ring, vcpu);
    }
    /* The records after a fetch, up to the next one, are its instruction's accesses (QEMU calls
     * the instruction's callback before its memory callbacks). So a data record that follows a
     * data record of the same thread belongs to the same instruction. */
    if (kind != CC_K_FETCH && b->n && joined(&b->rec[b->n - 1], addr, kind, size))
        return;
    /* A full block is written when the next record does not fit, so that the last record is
     * still there for the pieces and the store above to join. */
    if (b->n == BLOCK) flush(b);
    cc_rec *r = &b->rec[b->n++];
    r->addr = addr;
    r->aux = 0;
    r->tid = (uint16_t)vcpu;
    r->kind = kind;
    r->size = (uint8_t)(size > 255 ? 255 : size);
    b->fetches += kind == CC_K_FETCH;
}

/* A record's last eight bytes (aux 0, thread, kind, size) as one word (cctrace.h's layout). */
static inline uint64_t rec_word(unsigned vcpu, unsigned kind, unsigned size) {
    return (uint64_t)(uint16_t)vcpu << 32 | (uint64_t)kind << 48 | (uint64_t)size << 56;
}

static inline void put(tbuf *b, uint64_t addr, uint64_t word) {
    cc_rec *r = &b->rec[b->n++];
    memcpy(r, &addr, 8);
    memcpy((char *)r + 8, &word, 8);
}

/* The instruction's address and length ride in userdata: length in the top byte. */
static void on_exec(unsigned int vcpu, void *ud) {
    uintptr_t v = (uintptr_t)ud;
    tbuf *b = tls;
    if (__builtin_expect(b == NULL || b->n == BLOCK, 0)) {
        emit(vcpu, v & 0x00ffffffffffffffULL, CC_K_FETCH, (unsigned)(v >> 56));
        return;
    }
    put(b, v & 0x00ffffffffffffffULL, rec_word(vcpu, CC_K_FETCH, (unsigned)(v >> 56)));
    b->fetches++;
}

/* QEMU 7.2's meminfo: the access's MemOpIdx (MemOp << 4 | mmu index), whose MemOp holds log2
 * of the size in its low three bits, and the direction (1 read, 2 write) << 16. Checked against
 * the API's own qemu_plugin_mem_size_shift() and qemu_plugin_mem_is_store() for every value
 * they can take, at start-up (meminfo_known); another layout takes the calls. (A callback
 * registered for one direction only is called for both by QEMU 7.2.) */
static int meminfo_known;

static int meminfo_check(void) {
    for (uint32_t i = 0; i < (1u << 18); i++)
        if (qemu_plugin_mem_size_shift(i) != ((i >> 4) & 7) || qemu_plugin_mem_is_store(i) != ((i >> 17) & 1))
            return 0;
    return 1;
}

/* A load or a store: emit()'s rules, the common path inline. */
static inline __attribute__((always_inline)) void on_data(unsigned vcpu, uint64_t addr, const uint8_t kind,
                                                          unsigned size) {
    tbuf *b = tls;
    if (__builtin_expect(b == NULL || b->n == 0 || b->n == BLOCK || size > 255, 0)) {
        emit(vcpu, addr, kind, size);
        return;
    }
    if (!joined(&b->rec[b->n - 1], addr, kind, size))
        put(b, addr, rec_word(vcpu, kind, size));
}

static __attribute__((noinline)) void on_mem_api(unsigned vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr) {
    emit(vcpu, vaddr, qemu_plugin_mem_is_store(info) ? CC_K_STORE : CC_K_LOAD, 1u << qemu_plugin_mem_size_shift(info));
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud) {
    (void)ud;
    if (__builtin_expect(!meminfo_known, 0)) {
        on_mem_api(vcpu, info, vaddr);
        return;
    }
    const unsigned size = 1u << ((info >> 4) & 7);
    if (info & (2u << 16)) on_data(vcpu, vaddr, CC_K_STORE, size);
    else on_data(vcpu, vaddr, CC_K_LOAD, size);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t pc = qemu_plugin_insn_vaddr(insn);
        uint64_t len = qemu_plugin_insn_size(insn);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_exec, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)((pc & 0x00ffffffffffffffULL) | (len << 56)));
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
    }
}

static void save_maps(void) {
    if (maps_fd >= 0) {
        int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
        char chunk[8192];
        ssize_t n;
        while (in >= 0 && (n = read(in, chunk, sizeof chunk)) > 0)
            if (write(maps_fd, chunk, (size_t)n) != n) break;
        if (in >= 0) close(in);
        close(maps_fd);
        maps_fd = -1;
    }
    if (!maps_path) return;
    /* a new file only (corecast names one in a private folder): never through a link or over a file */
    int fd = open(maps_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *in = fopen("/proc/self/maps", "r"), *out = fd < 0 ? NULL : fdopen(fd, "w");
    if (fd >= 0 && !out) close(fd);
    if (in && out) {
        char line[4352];
        while (fgets(line, sizeof line, in)) fputs(line, out);
    }
    if (in) fclose(in);
    if (out) fclose(out);
}

static void on_exit_cb(qemu_plugin_id_t id, void *ud) {
    (void)id, (void)ud;
    pthread_mutex_lock(&list_lock);
    for (size_t i = 0; i < nall; i++) flush(all[i]);
    pthread_mutex_unlock(&list_lock);
    if (getpid() != owner) return;      /* a child process: its records are in, that is all */
    save_maps();
    if (ring) cc_ring_finish(ring);
    if (out_fd >= 0) close(out_fd);
    out_fd = -1;
}

/* The parent of process `pid` (from /proc/PID/stat), or -1. */
static pid_t parent_of(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return -1;
    buf[k] = 0;
    char *rp = strrchr(buf, ')');              /* the name may hold spaces and parentheses */
    char st;
    long pp;
    if (!rp || sscanf(rp + 1, " %c %ld", &st, &pp) != 2) return -1;
    return (pid_t)pp;
}

/* ring=N: map the ring corecast made; the data area's size comes from the memfd's own size. */
static int open_ring(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= CC_RING_HEADER) return -1;
    uint64_t cap = (uint64_t)st.st_size - CC_RING_HEADER;
    if (cap & (cap - 1) || cap % 4096) return -1;
    struct cc_ring_header *h;
    if (cc_ring_map(fd, cap, &h, &ring_data) != 0) return -1;
    if (memcmp(h->magic, CC_RING_MAGIC, 8) != 0 || h->capacity != cap) {
        cc_ring_unmap(h, cap);
        return -1;
    }
    close(fd);
    reader = (pid_t)h->consumer_pid;
    /* corecast killed (SIGKILL included): the kernel kills QEMU too. QEMU's parent is corecast,
       or corecast-launch started by corecast (which kills the program's whole tree, what it
       started in the background included, when corecast dies: it has its own parent-death
       signal), whose death then kills QEMU. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -1;
    pid_t parent = getppid();
    if (parent != reader && parent_of(parent) != reader) return -1;
    h->producer_pid = (int32_t)getpid();
    ring = h;
    return 0;
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "fd=", 3)) out_fd = atoi(argv[i] + 3);
        else if (!strncmp(argv[i], "ring=", 5)) {
            if (open_ring(atoi(argv[i] + 5)) != 0) {
                fprintf(stderr, "corecast qemu plugin: %s is not a corecast ring\n", argv[i]);
                return -1;
            }
        }
        else if (!strncmp(argv[i], "maps=", 5)) maps_path = strdup(argv[i] + 5);
        else if (!strncmp(argv[i], "mapsfd=", 7)) maps_fd = atoi(argv[i] + 7);
        else if (!strncmp(argv[i], "count=", 6)) {
            int fd = open(argv[i] + 6, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
            void *m = fd < 0 ? MAP_FAILED : mmap(NULL, sizeof *shown, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (fd >= 0) close(fd);
            if (m == MAP_FAILED) {
                fprintf(stderr, "corecast qemu plugin: cannot map %s: %s\n", argv[i] + 6, strerror(errno));
                return -1;
            }
            shown = m;
        }
        else {
            fprintf(stderr, "corecast qemu plugin: unknown argument %s\n", argv[i]);
            return -1;
        }
    }
    if (out_fd < 0 && !ring) {
        fprintf(stderr, "corecast qemu plugin: fd=N or ring=N is required\n");
        return -1;
    }
    owner = getpid();
    meminfo_known = meminfo_check();
    pthread_atfork(NULL, NULL, forked);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
    return 0;
}
