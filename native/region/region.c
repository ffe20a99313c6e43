/* corecast region API: per-thread perf counters around named regions. See corecast_region.h. */
#define _GNU_SOURCE
#include "corecast_region.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define NEV 5
#define MAX_REGIONS 256
#define MAX_DEPTH 64
#define NAME_MAX_LEN 127

static const struct { uint32_t type; uint64_t config; const char *name; } EVENTS[NEV] = {
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "task_clock_ns"},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, "context_switches"},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, "page_faults"},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "instructions"},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles"},
};

struct total {
    char name[NAME_MAX_LEN + 1];
    uint64_t calls;
    uint64_t wall_ns;
    double value[NEV];
    int counted[NEV];          /* 1 once a value was counted */
    uint64_t threads_mask;     /* rough: number of distinct threads, capped */
    int nthreads;
};

static struct total totals[MAX_REGIONS];
static int ntotals;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

struct frame { char name[NAME_MAX_LEN + 1]; uint64_t wall; uint64_t val[NEV][3]; };
static __thread int fds[NEV] = {-2, -2, -2, -2, -2};
static __thread struct frame stack[MAX_DEPTH];
static __thread int depth;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void open_thread_counters(void) {
    for (int i = 0; i < NEV; i++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = EVENTS[i].type;
        a.config = EVENTS[i].config;
        a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        a.exclude_kernel = 0;
        int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {           /* kernel counting not allowed: user mode only */
            a.exclude_kernel = 1;
            a.exclude_hv = 1;
            fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        }
        fds[i] = fd;            /* -1: not available here */
    }
}

static void read_all(uint64_t out[NEV][3]) {
    for (int i = 0; i < NEV; i++) {
        out[i][0] = out[i][1] = out[i][2] = 0;
        if (fds[i] >= 0) {
            uint64_t buf[3];
            if (read(fds[i], buf, sizeof buf) == (ssize_t)sizeof buf)
                memcpy(out[i], buf, sizeof buf);
        }
    }
}

static void write_report_atexit(void) { corecast_region_report(); }
static void init_once(void) { atexit(write_report_atexit); }

API int corecast_region_begin(const char *name) {
    pthread_once(&once, init_once);
    if (!name || strlen(name) > NAME_MAX_LEN || depth >= MAX_DEPTH) return -1;
    if (fds[0] == -2) open_thread_counters();
    struct frame *f = &stack[depth++];
    strcpy(f->name, name);
    f->wall = now_ns();
    read_all(f->val);
    return 0;
}

API int corecast_region_end(const char *name) {
    uint64_t cur[NEV][3];
    read_all(cur);
    uint64_t t = now_ns();
    if (!name || depth == 0) return -1;
    /* find the innermost open region with this name */
    int k = depth - 1;
    while (k >= 0 && strcmp(stack[k].name, name) != 0) k--;
    if (k < 0) return -1;
    struct frame *f = &stack[k];
    pthread_mutex_lock(&lock);
    struct total *tot = NULL;
    for (int i = 0; i < ntotals; i++)
        if (strcmp(totals[i].name, name) == 0) { tot = &totals[i]; break; }
    if (!tot && ntotals < MAX_REGIONS) {
        tot = &totals[ntotals++];
        memset(tot, 0, sizeof *tot);
        strcpy(tot->name, name);
    }
    if (tot) {
        tot->calls++;
        tot->wall_ns += t - f->wall;
        for (int i = 0; i < NEV; i++) {
            if (fds[i] < 0) continue;
            uint64_t raw = cur[i][0] - f->val[i][0];
            uint64_t en = cur[i][1] - f->val[i][1];
            uint64_t run = cur[i][2] - f->val[i][2];
            if (run > 0) {
                tot->value[i] += (double)raw * ((double)en / (double)run);
                tot->counted[i] = 1;
            } else if (en == 0) {
                tot->counted[i] = 1;   /* the thread did not run: a true zero */
            }
        }
    }
    pthread_mutex_unlock(&lock);
    depth = k;        /* closes any region opened inside it and left open */
    return tot ? 0 : -1;
}

/* Whether `path` is /proc/PID/fd/N (or /proc/self/fd/N): a descriptor a process hands to its
 * children (`corecast stat`'s fast path passes a memfd so). Such a name is a link the kernel
 * makes, which no other user can plant, and O_NOFOLLOW cannot open it (ELOOP). */
static int is_proc_fd(const char *path) {
    if (strncmp(path, "/proc/", 6)) return 0;
    const char *p = path + 6;
    if (!strncmp(p, "self/", 5)) p += 4;
    else { if (!isdigit((unsigned char)*p)) return 0; while (isdigit((unsigned char)*p)) p++; }
    if (strncmp(p, "/fd/", 4)) return 0;
    p += 4;
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
    return *p == 0;
}

/* The results file, opened to append; -1 (and one line on stderr) when it cannot be or must not
 * be. The default name is predictable and in the current folder, which may be /tmp: a program
 * run there as root must not append through a link another user planted (fs.protected_symlinks
 * may be 0) nor into a file hard-linked there, so the last name is never followed, and what is
 * opened must be a regular file of this user with at most one name (0: a memfd). */
static int open_results(const char *path) {
    /* O_NONBLOCK: a FIFO planted there never holds the program at its exit */
    int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | (is_proc_fd(path) ? 0 : O_NOFOLLOW);
    int fd = open(path, flags, 0600);
    if (fd < 0) {
        fprintf(stderr, "corecast region: %s: %s: region totals not written\n", path,
                errno == ELOOP ? "a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink > 1) {
        fprintf(stderr, "corecast region: %s: not a regular file of this user with one name: "
                "region totals not written\n", path);
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

API int corecast_region_report(void) {
    const char *path = getenv("CORECAST_REGION_OUT");
    char buf[256];
    if (!path || !*path) {
        snprintf(buf, sizeof buf, "corecast-regions-%d.jsonl", (int)getpid());
        path = buf;
    }
    pthread_mutex_lock(&lock);
    if (ntotals == 0) { pthread_mutex_unlock(&lock); return 0; }
    int fd = open_results(path);
    FILE *fh = fd < 0 ? NULL : fdopen(fd, "a");
    if (!fh) {
        if (fd >= 0) close(fd);
        pthread_mutex_unlock(&lock);
        return -1;
    }
    for (int r = 0; r < ntotals; r++) {
        struct total *tot = &totals[r];
        fprintf(fh, "{\"source\": \"c\", \"pid\": %d, \"region\": \"", (int)getpid());
        for (const char *c = tot->name; *c; c++) {
            if (*c == '"' || *c == '\\') fputc('\\', fh);
            if ((unsigned char)*c < 0x20) fprintf(fh, "\\u%04x", *c); else fputc(*c, fh);
        }
        fprintf(fh, "\", \"calls\": %llu, \"wall_ns\": %llu", (unsigned long long)tot->calls,
                (unsigned long long)tot->wall_ns);
        for (int i = 0; i < NEV; i++) {
            if (!tot->counted[i]) fprintf(fh, ", \"%s\": null", EVENTS[i].name);
            else fprintf(fh, ", \"%s\": %.0f", EVENTS[i].name, tot->value[i]);
        }
        fputs("}\n", fh);
    }
    ntotals = 0;          /* written: a later report appends only what follows */
    fclose(fh);
    pthread_mutex_unlock(&lock);
    return 0;
}
