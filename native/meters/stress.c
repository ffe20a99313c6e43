/* corecast-meters-stress: the blackboard's seqlock under load, through corecast_meters.h only.
 *
 *   corecast-meters-stress write NAME SECONDS [RECORDS]   a writer as fast as it can
 *   corecast-meters-stress read NAME SECONDS [GAP_NS]     a reader checking every record (and
 *                                                         pausing GAP_NS between two passes)
 *   corecast-meters-stress read-unlocked NAME SECONDS     the same without the seqlock (a
 *                                                         control: it should see torn records)
 *
 * The writer makes a board /dev/shm/corecast-NAME with RECORDS meter records (default 64) and
 * rewrites them round-robin; its k-th write puts k into every field in a fixed relation
 * (current = k, avg = k + 0.5, min = k - 1, max = k + 1, total = 2k, t_ns = k, count = k mod
 * 2^32, aux = k * 2654435761 ^ record), so a record mixing two writes breaks the relation. A
 * reader opens the board with ccm_open() and reads every record with ccm_read_meter() in a
 * loop, counting the reads whose record breaks it (torn) and those that gave up (busy).
 * Each prints one line: `writes N seconds S cpu_s C` or `reads N torn T busy B seconds S`; the
 * writer stops early, and still prints its line, on SIGTERM or SIGINT (a test stops it once its
 * readers are done, however late a loaded machine started them). */
#define _GNU_SOURCE
#include "corecast_meters.h"

#include <math.h>
#include <signal.h>
#include <sys/resource.h>

static volatile sig_atomic_t stop_writing;

static void on_stop(int sig) {
    (void)sig;
    stop_writing = 1;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

static int usage(void) {
    fprintf(stderr, "usage: corecast-meters-stress write NAME SECONDS [RECORDS] | read[-unlocked] NAME SECONDS\n");
    return 2;
}

static void fill(struct ccm_meter_rec *r, int64_t k, int i) {
    r->count = (uint32_t)k;
    r->t_ns = k;
    r->current = (double)k;
    r->avg = (double)k + 0.5;
    r->min = (double)k - 1;
    r->max = (double)k + 1;
    r->total = 2.0 * (double)k;
    r->aux = (uint64_t)k * 2654435761u ^ (uint64_t)i;
}

static int intact(const struct ccm_meter_rec *r, int i) {
    int64_t k = r->t_ns;
    return r->count == (uint32_t)k && r->current == (double)k && r->avg == (double)k + 0.5 &&
           r->min == (double)k - 1 && r->max == (double)k + 1 && r->total == 2.0 * (double)k &&
           r->aux == ((uint64_t)k * 2654435761u ^ (uint64_t)i);
}

static int writer(const char *name, double seconds, int n) {
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/corecast-%s", name);
    size_t scope = sizeof(struct ccm_header), desc = scope + sizeof(struct ccm_scope);
    size_t recs = desc + (size_t)n * sizeof(struct ccm_meter_desc);
    size_t size = recs + (size_t)n * sizeof(struct ccm_meter_rec);
    unlink(path);              /* a new file, never one found there (a link is not followed) */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || fchmod(fd, 0644) != 0 || ftruncate(fd, (off_t)size) != 0) {
        perror(path);
        return 1;
    }
    unsigned char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    struct ccm_header *h = (struct ccm_header *)base;
    memcpy(h->magic, CCM_MAGIC, 8);
    h->version = CCM_VERSION;
    h->header_size = sizeof *h;
    h->layout_size = size;
    h->byte_order = CCM_BYTE_ORDER;
    h->pid = getpid();
    h->pid_start = ccm_pid_start(getpid());
    h->interval_ns = 1000000;
    h->scope_count = 1;        /* the node: every meter's scope */
    h->scope_off = (uint32_t)scope;
    h->scope_size = sizeof(struct ccm_scope);
    struct ccm_scope *sc = (struct ccm_scope *)(base + scope);
    snprintf(sc->name, sizeof sc->name, "node");
    snprintf(sc->kind, sizeof sc->kind, "node");
    sc->parent = -1;
    h->meter_count = (uint32_t)n;
    h->meter_desc_off = (uint32_t)desc;
    h->meter_desc_size = sizeof(struct ccm_meter_desc);
    h->meter_rec_off = (uint32_t)recs;
    h->meter_rec_size = sizeof(struct ccm_meter_rec);
    snprintf(h->name, sizeof h->name, "%s", name);
    for (int i = 0; i < n; i++) {
        struct ccm_meter_desc *d = (struct ccm_meter_desc *)(base + desc + (size_t)i * sizeof *d);
        snprintf(d->name, sizeof d->name, "stress%d", i);
        snprintf(d->scope, sizeof d->scope, "node");
        snprintf(d->unit, sizeof d->unit, "count");
        snprintf(d->source, sizeof d->source, "measured: corecast-meters-stress");
        struct ccm_meter_rec r;
        memset(&r, 0, sizeof r);
        fill(&r, 0, i);
        ccm_write_rec(base + recs + (size_t)i * sizeof r, &r, sizeof r);
    }
    struct sigaction sa;          /* before the board says running: a reader may stop it then */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    h->heartbeat_ns = ccm_now_ns();
    __atomic_store_n(&h->state, CCM_RUNNING, __ATOMIC_RELEASE);
    double c0 = cpu_s();
    int64_t t0 = ccm_now_ns(), end = t0 + (int64_t)(seconds * 1e9), k = 0, now = t0;
    struct ccm_meter_rec r;
    memset(&r, 0, sizeof r);
    while (now < end && !stop_writing) {
        for (int j = 0; j < 1024; j++) {
            k++;
            int i = (int)(k % n);
            fill(&r, k, i);
            ccm_write_rec(base + recs + (size_t)i * sizeof r, &r, sizeof r);
        }
        now = ccm_now_ns();
        __atomic_store_n(&h->heartbeat_ns, now, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&h->state, CCM_STOPPED, __ATOMIC_RELEASE);
    printf("writes %lld seconds %.6f cpu_s %.6f\n", (long long)k, 1e-9 * (double)(now - t0), cpu_s() - c0);
    munmap(base, size);
    return 0;
}

static int copy_unlocked(const ccm_board *b, int i, struct ccm_meter_rec *out) {
    const volatile uint64_t *src =
        (const volatile uint64_t *)(b->base + b->meters.rec_off + (size_t)i * b->meters.rec_size);
    uint64_t w[8];
    for (int j = 0; j < 8; j++)
        w[j] = src[j];
    memcpy(out, w, sizeof w);
    return 0;
}

static int reader(const char *name, double seconds, int locked, int64_t gap) {
    ccm_board b;
    int r = -ENOENT;
    for (int i = 0; i < 500 && r != 0; i++) {          /* the writer may not have made it yet */
        r = ccm_open(&b, name);
        if (r != 0 || __atomic_load_n(&b.h->state, __ATOMIC_ACQUIRE) != CCM_RUNNING) {
            if (r == 0)
                ccm_close(&b);
            r = r ? r : -EAGAIN;
            usleep(10000);
        }
    }
    if (r != 0) {
        fprintf(stderr, "corecast-meters-stress: cannot open board %s: %s\n", name, strerror(-r));
        return 1;
    }
    int n = (int)b.meters.count;
    long long reads = 0, torn = 0, busy = 0;
    int64_t t0 = ccm_now_ns(), end = t0 + (int64_t)(seconds * 1e9), now = t0, look = t0;
    struct ccm_meter_rec rec;
    int running = 1;
    while (now < end && running) {
        for (int i = 0; i < n; i++) {
            if ((locked ? ccm_read_meter(&b, i, &rec) : copy_unlocked(&b, i, &rec)) != 0) {
                busy++;
                continue;
            }
            reads++;
            torn += !intact(&rec, i);
        }
        now = ccm_now_ns();
        if (now >= look) {              /* the header's state once a millisecond: its line is the */
            look = now + 1000000;       /* writer's (the heartbeat), not to be pulled at every pass */
            running = __atomic_load_n(&b.h->state, __ATOMIC_ACQUIRE) == CCM_RUNNING;
        }
        if (gap) {                      /* a pause between passes, off the board's lines */
            int64_t until = now + gap;
            while ((now = ccm_now_ns()) < until)
                ccm__relax();
        }
    }
    printf("reads %lld torn %lld busy %lld seconds %.6f\n", reads, torn, busy, 1e-9 * (double)(now - t0));
    ccm_close(&b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4)
        return usage();
    double seconds = atof(argv[3]);
    if (!ccm__valid_name(argv[2]) || !(seconds > 0))
        return usage();
    if (strcmp(argv[1], "write") == 0) {
        int n = argc > 4 ? atoi(argv[4]) : 64;
        return n > 0 ? writer(argv[2], seconds, n) : usage();
    }
    if (strcmp(argv[1], "read") == 0 || strcmp(argv[1], "read-unlocked") == 0)
        return reader(argv[2], seconds, strcmp(argv[1], "read") == 0, argc > 4 ? atoll(argv[4]) : 0);
    return usage();
}
