/* corecast-front: the `corecast` command of the development install (and of any install that
 * puts it on PATH), a C front end to the Python CLI.
 *
 * `corecast stat -c EVENTS -- CMD ...` with only the kernel's software events (task_clock,
 * context_switches, cpu_migrations, page_faults; one -c set, the table on standard error) is
 * counted here, with no Python started: perf stat's start-up is ~10 ms, Python's alone is more,
 * and the imports of the Python counting path ~50 ms more. It does what the Python path
 * (src/corecast/collect/stat/, cli/stat.py) does for that case, and prints the same lines:
 *
 *   - the command is found in PATH, else among the bundled workloads beside corecast-launch,
 *     and started through corecast-launch (stopped before exec, in corecast's process group,
 *     its tree killed when it ends or when corecast dies);
 *   - the root thread has counters of its own (enabled at exec); every task of the tree is
 *     followed through the kernel's task records (per-CPU inherited counters with
 *     inherit_stat and a dummy event per CPU owning a ring buffer: FORK, EXIT and READ
 *     records; see collect/perf/tasks.py), so a thread gets counters of its own when it is
 *     created, `tick` rows every second, and an `exit` row that is the kernel's count of its
 *     whole life less what its rows reported;
 *   - [Totals], [Process totals] (the inherited counts), the notes, the regions the program
 *     marked (CORECAST_REGION_OUT: printed by Python, only when there are any), the command's
 *     exit status as corecast's own (128 + N for signal N).
 *
 * Anything else -- another command, another option, another event, a failure before the
 * command started (the tracker unavailable, a program not found) -- is handed to Python
 * unchanged: exec of `python3 -m corecast ARGS...`, the python3 beside the `corecast` that was
 * run (a virtual environment's bin/), else the interpreter the build was configured with.
 * CORECAST_FRONT=python hands every command over (the tests compare both paths with it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CORECAST_VERSION
#define CORECAST_VERSION "unknown"
#endif
#ifndef CORECAST_PYTHON
#define CORECAST_PYTHON "/usr/bin/python3"
#endif
#ifndef PERF_FORMAT_LOST
#define PERF_FORMAT_LOST (1U << 4)
#endif

#define HAND_OVER (-1000)
#define MAXEV 4
#define MAXCPU 1024
#define MAXTHREADS 65536
#define RING_PAGES 64
#define INTERVAL_NS 1000000000LL
#define STOP_GRACE_S 2.0

static const struct {
    const char *name, *desc, *unit;
    uint64_t config;
} SOFTWARE[] = {
    {"task_clock", "CPU time of the task (ns)", "ns", PERF_COUNT_SW_TASK_CLOCK},
    {"context_switches", "context switches", "count", PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu_migrations", "migrations to another CPU", "count", PERF_COUNT_SW_CPU_MIGRATIONS},
    {"page_faults", "page faults", "count", PERF_COUNT_SW_PAGE_FAULTS},
};
#define NSOFT 4

/* ------------------------------------------------------------------ where things are */
static char self_path[PATH_MAX];      /* the `corecast` that was run, links not followed */
static char native_dir[PATH_MAX];     /* the folder holding corecast-launch (and the workloads) */

static int is_exec(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static void dir_of(const char *p, char *out, size_t n) {
    snprintf(out, n, "%s", p);
    char *s = strrchr(out, '/');
    if (s == out) s[1] = 0;
    else if (s) *s = 0;
    else snprintf(out, n, ".");
}

static int search_path(const char *name, char *out, size_t n) {
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";          /* Python's os.defpath */
    while (1) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len == 0) snprintf(out, n, "./%s", name);
        else snprintf(out, n, "%.*s/%s", (int)len, path, name);
        if (is_exec(out)) return 1;
        if (!end) return 0;
        path = end + 1;
    }
}

/* self_path from argv[0]; native_dir: along the chain of links from it, the first folder
 * that holds corecast-launch (.venv/bin/corecast -> src/corecast/_native/corecast-front ->
 * build/...). */
static void locate(const char *argv0) {
    if (strchr(argv0, '/')) snprintf(self_path, sizeof self_path, "%s", argv0);
    else if (!search_path(argv0, self_path, sizeof self_path)) self_path[0] = 0;
    char cur[PATH_MAX], dir[PATH_MAX], probe[PATH_MAX + 32];
    snprintf(cur, sizeof cur, "%s", self_path[0] ? self_path : "/proc/self/exe");
    for (int hop = 0; hop < 16 && cur[0]; hop++) {
        dir_of(cur, dir, sizeof dir);
        snprintf(probe, sizeof probe, "%s/corecast-launch", dir);
        if (is_exec(probe)) {
            snprintf(native_dir, sizeof native_dir, "%s", dir);
            return;
        }
        char link[PATH_MAX];
        ssize_t k = readlink(cur, link, sizeof link - 1);
        if (k <= 0) break;
        link[k] = 0;
        if (link[0] == '/') snprintf(cur, sizeof cur, "%s", link);
        else {
            char tmp[2 * PATH_MAX + 2];
            snprintf(tmp, sizeof tmp, "%s/%s", dir, link);
            if (strlen(tmp) >= sizeof cur) break;
            memcpy(cur, tmp, strlen(tmp) + 1);
        }
    }
    char real[PATH_MAX];
    if (realpath("/proc/self/exe", real)) {
        dir_of(real, dir, sizeof dir);
        snprintf(probe, sizeof probe, "%s/corecast-launch", dir);
        if (is_exec(probe)) snprintf(native_dir, sizeof native_dir, "%s", dir);
    }
}

/* The interpreter with `args` (args[0] is ignored): never returns. */
static void python_exec(char **args, int n) __attribute__((noreturn));
static void python_exec(char **args, int n) {
    char py[PATH_MAX + 16];
    py[0] = 0;
    if (self_path[0]) {
        char dir[PATH_MAX];
        dir_of(self_path, dir, sizeof dir);
        snprintf(py, sizeof py, "%s/python3", dir);
        if (!is_exec(py)) py[0] = 0;
    }
    if (!py[0]) snprintf(py, sizeof py, "%s", CORECAST_PYTHON);
    char **av = calloc((size_t)n + 1, sizeof *av);
    if (!av) { fprintf(stderr, "corecast: out of memory\n"); _exit(1); }
    av[0] = py;
    for (int i = 1; i < n; i++) av[i] = args[i];
    execv(py, av);
    fprintf(stderr, "corecast: error: cannot start Python (%s): %s\n", py, strerror(errno));
    _exit(2);
}

/* Python with `-m corecast` and the same arguments: never returns. */
static void hand_over(int argc, char **argv) __attribute__((noreturn));
static void hand_over(int argc, char **argv) {
    char **av = calloc((size_t)argc + 3, sizeof *av);
    if (!av) { fprintf(stderr, "corecast: out of memory\n"); _exit(1); }
    av[0] = argv[0];
    av[1] = "-m";
    av[2] = "corecast";
    for (int i = 1; i < argc; i++) av[i + 2] = argv[i];
    python_exec(av, argc + 2);
}

/* ------------------------------------------------------------------ perf */
static int perf_open(uint64_t config, pid_t pid, int cpu, int inherit, int enable_on_exec, int enabled,
                     int task, uint64_t read_format) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof a;
    a.config = config;
    a.read_format = read_format;
    a.disabled = !enabled;
    a.inherit = inherit;
    a.inherit_stat = inherit && config != PERF_COUNT_SW_DUMMY;
    a.enable_on_exec = enable_on_exec;
    a.task = task;
    if (task) {
        a.watermark = 1;
        a.wakeup_watermark = 1;
    }
    return (int)syscall(SYS_perf_event_open, &a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static uint64_t rformat = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID |
                          PERF_FORMAT_LOST;

struct reading { int ok; uint64_t raw, en, run; };

static struct reading read_counter(int fd) {
    struct reading r = {0, 0, 0, 0};
    uint64_t v[5];
    if (fd >= 0 && read(fd, v, sizeof v) >= 24) {
        r.ok = 1;
        r.raw = v[0];
        r.en = v[1];
        r.run = v[2];
    }
    return r;
}

/* ------------------------------------------------------------------ state */
struct thread {
    int tid, pid;
    int root, opened, exited, fresh;
    int fds[MAXEV];
    struct reading prev[MAXEV];
    uint64_t rraw[MAXEV], rrun[MAXEV];   /* READ records: summed per event */
    int nparts[MAXEV];
    int nreads;
};

static int nev;
static int ev[MAXEV];                    /* indices into SOFTWARE */
static int ncpu, cpus[MAXCPU];
static struct thread *threads;
static int nthreads;

struct ring { int fd; void *base; size_t size; };
static struct ring rings[MAXCPU];
static int inh[MAXEV][MAXCPU];           /* inherited counters, per event and CPU */
static uint64_t ids[MAXEV][MAXCPU];
static int pin_fd = -1;
static long page;
static uint64_t lost_records;
static int record_gaps;

/* totals per event: value, raw, enabled, running */
static double tot_val[MAXEV];
static uint64_t tot_en[MAXEV], tot_run[MAXEV];
static int tot_rows;
static long nsample;

/* '-' in a row: (event, reason) -> rows */
struct dash { int e; char why[256]; int n; };
static struct dash dashes[32];
static int ndash;

static char notes[8][512];
static int nnotes;

static FILE *out;
static double t0;

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void note(const char *fmt, ...) {
    if (nnotes >= 8) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes[nnotes++], sizeof notes[0], fmt, ap);
    va_end(ap);
}

static double fabs_(double x) { return x < 0 ? -x : x; }

/* corecast.collect.stat.rows._fmt_num */
static void fmt_num(char *buf, size_t n, double v, const char *unit) {
    int intunit = !strcmp(unit, "count") || !strcmp(unit, "ns");
    double r = (double)(long long)(v + (v >= 0 ? 0.5 : -0.5));
    if (intunit && fabs_(v - r) < 1e-6 * (fabs_(v) > 1.0 ? fabs_(v) : 1.0)) snprintf(buf, n, "%.0f", r);
    else if (fabs_(v) >= 1e6 || v == (double)(long long)v) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%.4g", v);
}

/* ------------------------------------------------------------------ rows */
struct val { int has; double value; uint64_t en, run; char msg[200]; };

static void not_counted_reason(char *buf, size_t n, uint64_t en, uint64_t run) {
    (void)run;
    if (en == 0) snprintf(buf, n, "did not run while monitored (enabled 0 ns: its task was never scheduled)");
    else snprintf(buf, n, "enabled %.3g ms but never on a counter (the PMU had no counter free: fewer hardware "
                  "events per -c set)", (double)en / 1e6);
}

/* perf.interval_value on a delta */
static struct val interval_val(int64_t raw, int64_t en, int64_t run) {
    struct val v;
    memset(&v, 0, sizeof v);
    v.en = (uint64_t)(en > 0 ? en : 0);
    v.run = (uint64_t)(run > 0 ? run : 0);
    v.en = (uint64_t)en;
    v.run = (uint64_t)run;
    if (en > 0 && run <= 0) {
        v.has = 0;
        snprintf(v.msg, sizeof v.msg, "not counted");
    } else if (en <= 0) {
        v.has = 1;
        v.value = (double)raw;
    } else {
        v.has = 1;
        v.value = run >= en ? (double)raw : (double)raw * ((double)en / (double)run);
    }
    return v;
}

static void add_dash(int e, const char *why) {
    for (int i = 0; i < ndash; i++)
        if (dashes[i].e == e && !strcmp(dashes[i].why, why)) { dashes[i].n++; return; }
    if (ndash < 32) {
        dashes[ndash].e = e;
        snprintf(dashes[ndash].why, sizeof dashes[ndash].why, "%s", why);
        dashes[ndash].n = 1;
        ndash++;
    }
}

static void emit_row(double now, int pid, int tid, const char *label, struct val *vals) {
    nsample++;
    tot_rows++;
    fprintf(out, "%7ld %9.3f %7d %7d %9s", nsample, now - t0, pid, tid, label);
    for (int i = 0; i < nev; i++) {
        struct val *v = &vals[i];
        tot_en[i] += v->en;
        tot_run[i] += v->run;
        if (!v->has) {
            if (!v->msg[0] || !strcmp(v->msg, "not counted")) not_counted_reason(v->msg, sizeof v->msg, v->en, v->run);
            add_dash(i, v->msg);
            fprintf(out, " %14s", "-");
            continue;
        }
        tot_val[i] += v->value;
        char txt[64], num[48];
        if (v->value == (double)(long long)v->value && v->value > -1e15 && v->value < 1e15)
            snprintf(num, sizeof num, "%lld", (long long)v->value);
        else
            fmt_num(num, sizeof num, v->value, SOFTWARE[ev[i]].unit);
        snprintf(txt, sizeof txt, "%s%s", v->run < v->en ? "~" : "", num);
        fprintf(out, " %14s", txt);
    }
    fputc('\n', out);
}

/* a tick or end row from the thread's own counters */
static void own_row(struct thread *t, double now, const char *label) {
    struct val vals[MAXEV];
    for (int i = 0; i < nev; i++) {
        struct reading c = read_counter(t->fds[i]);
        struct reading p = t->prev[i];
        if (!c.ok) {
            memset(&vals[i], 0, sizeof vals[i]);
            snprintf(vals[i].msg, sizeof vals[i].msg, "not counted");
            continue;
        }
        vals[i] = interval_val((int64_t)(c.raw - (p.ok ? p.raw : 0)), (int64_t)(c.en - (p.ok ? p.en : 0)),
                               (int64_t)(c.run - (p.ok ? p.run : 0)));
        t->prev[i] = c;
    }
    emit_row(now, t->pid, t->tid, label, vals);
}

/* the exit row of a followed (not root) thread: the kernel's count less what was reported */
static void exit_row(struct thread *t, double now) {
    struct val vals[MAXEV];
    for (int i = 0; i < nev; i++) {
        struct val *v = &vals[i];
        memset(v, 0, sizeof *v);
        if (t->nparts[i] >= ncpu) {
            struct reading p = t->prev[i];
            uint64_t raw = t->rraw[i], run = t->rrun[i];
            if (p.ok) {
                raw = raw > p.raw ? raw - p.raw : 0;
                uint64_t en = run > p.en ? run - p.en : 0;
                run = run > p.run ? run - p.run : 0;
                v->has = 1;
                v->value = (double)raw;
                v->en = en;
                v->run = run;
            } else {
                v->has = 1;
                v->value = (double)raw;
                v->en = v->run = run;
            }
        } else if (t->opened) {
            struct reading c = read_counter(t->fds[i]);
            struct reading p = t->prev[i];
            if (c.ok) {
                *v = interval_val((int64_t)(c.raw - (p.ok ? p.raw : 0)), (int64_t)(c.en - (p.ok ? p.en : 0)),
                                  (int64_t)(c.run - (p.ok ? p.run : 0)));
                if (v->msg[0] == 0 || !strcmp(v->msg, "not counted")) {
                    if (!v->has) not_counted_reason(v->msg, sizeof v->msg, v->en, v->run);
                    else v->msg[0] = 0;
                }
            }
            if (t->exited) {
                record_gaps++;
                size_t k = strlen(v->msg);
                snprintf(v->msg + k, sizeof v->msg - k, "%sthe kernel's exit record was lost: from the thread's "
                         "own counter", k ? "; " : "");
            }
        } else {
            record_gaps++;
            snprintf(v->msg, sizeof v->msg, "not counted: the kernel's exit record was lost");
        }
    }
    emit_row(now, t->pid, t->tid, "exit", vals);
}

/* ------------------------------------------------------------------ threads */
static int cmp_tid(const void *a, const void *b) {
    return ((const struct thread *)a)->tid - ((const struct thread *)b)->tid;
}

static struct thread *find_thread(int tid) {
    for (int i = 0; i < nthreads; i++)
        if (threads[i].tid == tid) return &threads[i];
    return NULL;
}

static struct thread *new_thread(int tid, int pid, int root) {
    if (nthreads >= MAXTHREADS) return NULL;
    struct thread *t = &threads[nthreads++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    t->pid = pid;
    t->root = root;
    for (int i = 0; i < MAXEV; i++) t->fds[i] = -1;
    return t;
}

static void close_thread(struct thread *t) {
    for (int i = 0; i < nev; i++)
        if (t->fds[i] >= 0) { close(t->fds[i]); t->fds[i] = -1; }
    *t = threads[--nthreads];
}

/* a thread the records say was created: counters of its own (counting now) */
static void add_followed(int tid, int pid, int fresh) {
    struct thread *t = new_thread(tid, pid, 0);
    if (!t) return;
    t->opened = 1;
    for (int i = 0; i < nev; i++) {
        t->fds[i] = perf_open(SOFTWARE[ev[i]].config, tid, -1, 0, 0, 1, 0, rformat);
        if (t->fds[i] < 0) {          /* gone first: its exit record still counts it */
            for (int j = 0; j < i; j++) { close(t->fds[j]); t->fds[j] = -1; }
            t->fds[i] = -1;
            t->opened = 0;
            break;
        }
    }
    t->fresh = fresh && t->opened;
}

static struct thread *ghost(int tid, int pid) {
    return new_thread(tid, pid, 0);
}

/* ------------------------------------------------------------------ the kernel's task records */
static int drain(int at_tick) {
    int got = 0;
    for (int c = 0; c < ncpu; c++) {
        struct ring *r = &rings[c];
        if (!r->base) continue;
        struct perf_event_mmap_page *mp = r->base;
        uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
        uint64_t tail = mp->data_tail;
        unsigned char *data = (unsigned char *)r->base + page;
        while (tail + sizeof(struct perf_event_header) <= head) {
            struct perf_event_header h;
            unsigned char rec[512];
            for (size_t k = 0; k < sizeof h; k++) ((unsigned char *)&h)[k] = data[(tail + k) % r->size];
            if (h.size < sizeof h || tail + h.size > head) break;
            size_t body = h.size - sizeof h;
            if (body > sizeof rec) body = sizeof rec;
            for (size_t k = 0; k < body; k++) rec[k] = data[(tail + sizeof h + k) % r->size];
            tail += h.size;
            got = 1;
            uint32_t u32[4];
            uint64_t u64[5];
            if ((h.type == PERF_RECORD_FORK || h.type == PERF_RECORD_EXIT) && body >= 24) {
                memcpy(u32, rec, 16);
                int pid = (int)u32[0], tid = (int)u32[2];
                if (h.type == PERF_RECORD_FORK) {
                    if (!find_thread(tid)) add_followed(tid, pid, at_tick);
                } else {
                    struct thread *t = find_thread(tid);
                    if (!t) t = ghost(tid, pid);
                    if (t) t->exited = 1;
                }
            } else if (h.type == PERF_RECORD_READ && body >= 40) {
                memcpy(u32, rec, 8);
                size_t nv = (body - 8) / 8;
                if (nv > 5) nv = 5;
                memcpy(u64, rec + 8, nv * 8);
                int e = -1;
                for (int i = 0; i < nev && e < 0; i++)
                    for (int k = 0; k < ncpu; k++)
                        if (ids[i][k] == u64[3]) { e = i; break; }
                if (e < 0) continue;
                struct thread *t = find_thread((int)u32[1]);
                if (!t) t = ghost((int)u32[1], (int)u32[0]);
                if (!t) continue;
                t->rraw[e] += u64[0];
                t->rrun[e] += u64[2];
                t->nparts[e]++;
                t->nreads++;
            } else if (h.type == PERF_RECORD_LOST && body >= 16) {
                memcpy(u64, rec, 16);
                lost_records += u64[1];
            }
        }
        __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
    }
    return got;
}

/* the rows of a tick (final: the last one, labelled `end` where a thread still ran), in the
 * order of the threads' ids; the threads that ended are closed after */
static void tick_rows(double now, int final, const char *end) {
    drain(1);
    qsort(threads, (size_t)nthreads, sizeof *threads, cmp_tid);
    int expected = nev * ncpu;
    int kept = 0;
    for (int i = 0; i < nthreads; i++) {
        struct thread *t = &threads[i];
        int gone = 0;
        if (t->root || (final && !t->exited)) {
            gone = final || t->exited;
            if (t->opened) own_row(t, now, t->exited ? "exit" : (final ? end : "tick"));
        } else if ((t->exited && t->nreads >= expected) || final) {
            exit_row(t, now);
            gone = 1;
        } else if (t->fresh) {
            t->fresh = 0;
        } else if (!t->exited && t->opened) {
            own_row(t, now, "tick");
        }
        if (gone) {
            for (int e = 0; e < nev; e++)
                if (t->fds[e] >= 0) close(t->fds[e]);
        } else {
            threads[kept++] = *t;
        }
    }
    nthreads = kept;
    fflush(out);
}

/* ------------------------------------------------------------------ the tracker */
static int online_cpus(void) {
    char buf[4096];
    int fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return -1;
    buf[k] = 0;
    char *s = buf;
    ncpu = 0;
    while (*s && *s != '\n') {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s) return -1;
        s = end;
        if (*s == '-') { hi = strtol(s + 1, &end, 10); s = end; }
        for (long c = lo; c <= hi; c++) {
            if (ncpu >= MAXCPU) return -1;
            cpus[ncpu++] = (int)c;
        }
        if (*s == ',') s++;
    }
    return ncpu > 0 ? 0 : -1;
}

/* the root's own counters, and the tracker on it; -1: the kernel cannot (Python says why) */
static int open_counters(int pid) {
    struct thread *t = new_thread(pid, pid, 1);
    t->opened = 1;
    for (int i = 0; i < nev; i++) {
        t->fds[i] = perf_open(SOFTWARE[ev[i]].config, pid, -1, 0, 1, 0, 0, rformat);
        if (t->fds[i] < 0 && errno == EINVAL) {
            rformat &= ~(uint64_t)PERF_FORMAT_LOST;          /* an older kernel */
            t->fds[i] = perf_open(SOFTWARE[ev[i]].config, pid, -1, 0, 1, 0, 0, rformat);
        }
        if (t->fds[i] < 0) return -1;
    }
    pin_fd = perf_open(PERF_COUNT_SW_DUMMY, pid, -1, 0, 0, 0, 0, rformat);
    if (pin_fd < 0) return -1;
    for (int c = 0; c < ncpu; c++) {
        int d = perf_open(PERF_COUNT_SW_DUMMY, pid, cpus[c], 1, 0, 1, 1, rformat);
        if (d < 0) return -1;
        size_t pages = RING_PAGES;
        void *m = MAP_FAILED;
        while (pages >= 1) {
            m = mmap(NULL, (pages + 1) * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
            if (m != MAP_FAILED || (errno != EPERM && errno != ENOMEM)) break;
            pages /= 2;
        }
        if (m == MAP_FAILED) return -1;
        rings[c].fd = d;
        rings[c].base = m;
        rings[c].size = pages * (size_t)page;
        for (int i = 0; i < nev; i++) {
            int fd = perf_open(SOFTWARE[ev[i]].config, pid, cpus[c], 1, 1, 0, 0, rformat);
            if (fd < 0) return -1;
            inh[i][c] = fd;
            if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, d) != 0) return -1;
            uint64_t v[5];
            if (read(fd, v, sizeof v) < 32) return -1;
            ids[i][c] = v[3];
        }
    }
    return 0;
}

static void close_tracker(void) {
    for (int c = 0; c < ncpu; c++) {
        if (rings[c].base) munmap(rings[c].base, rings[c].size + (size_t)page);
        rings[c].base = NULL;
        if (rings[c].fd > 0) close(rings[c].fd);
        rings[c].fd = 0;
        for (int i = 0; i < nev; i++)
            if (inh[i][c] > 0) { close(inh[i][c]); inh[i][c] = 0; }
    }
    if (pin_fd >= 0) close(pin_fd);
    pin_fd = -1;
}

/* ------------------------------------------------------------------ the supervisor */
static int sup_pid = -1, child_pid = -1, go_fd = -1, rep_fd = -1, sup_pidfd = -1;
static char rep_buf[8192];
static size_t rep_len;
static int rep_eof, rep_end, exit_code = INT_MIN;    /* >= 0: exit status; < 0: -signal */
static int exec_err = -1, exec_ok;

static void take_line(char *line) {
    if (!strncmp(line, "pid ", 4)) child_pid = atoi(line + 4);
    else if (!strcmp(line, "exec ok")) exec_ok = 1;
    else if (!strncmp(line, "exec_error ", 11)) exec_err = atoi(line + 11);
    else if (!strncmp(line, "exit ", 5)) exit_code = atoi(line + 5);
    else if (!strncmp(line, "signal ", 7)) exit_code = -atoi(line + 7);
    else if (!strcmp(line, "end")) rep_end = 1;
}

/* read what the supervisor reported (waiting up to timeout_ms; -1: until it says something) */
static void read_report(int timeout_ms) {
    struct pollfd p = {rep_fd, POLLIN, 0};
    if (rep_eof) return;
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0) return;
    ssize_t k = read(rep_fd, rep_buf + rep_len, sizeof rep_buf - 1 - rep_len);
    if (k <= 0) {
        if (k == 0 || (errno != EINTR && errno != EAGAIN)) rep_eof = 1;
        return;
    }
    rep_len += (size_t)k;
    char *nl;
    while ((nl = memchr(rep_buf, '\n', rep_len))) {
        *nl = 0;
        take_line(rep_buf);
        size_t used = (size_t)(nl - rep_buf) + 1;
        memmove(rep_buf, nl + 1, rep_len - used);
        rep_len -= used;
    }
    if (rep_len >= sizeof rep_buf - 1) rep_len = 0;
}

static int ended(void) { return rep_end || rep_eof; }

static int start_supervisor(char **cmd, const char *prog, char **envp) {
    int go[2], rep[2];
    if (pipe(go) || pipe2(rep, O_CLOEXEC)) return -1;
    fcntl(go[1], F_SETFD, FD_CLOEXEC);
    fcntl(rep[1], F_SETFD, 0);
    char launch[PATH_MAX + 32], parent[32], gs[16], rs[16];
    snprintf(launch, sizeof launch, "%s/corecast-launch", native_dir);
    snprintf(parent, sizeof parent, "%d", (int)getpid());
    snprintf(gs, sizeof gs, "%d", go[0]);
    snprintf(rs, sizeof rs, "%d", rep[1]);
    int n = 0;
    while (cmd[n]) n++;
    char **av = calloc((size_t)n + 16, sizeof *av);
    if (!av) return -1;
    int k = 0;
    av[k++] = launch; av[k++] = "--parent"; av[k++] = parent; av[k++] = "--keep-group";
    av[k++] = gs; av[k++] = rs; av[k++] = "-"; av[k++] = "0.0"; av[k++] = "2.0"; av[k++] = "--";
    av[k++] = (char *)prog;
    for (int i = 1; i < n; i++) av[k++] = cmd[i];
    av[k] = NULL;
    pid_t p = fork();
    if (p < 0) return -1;
    if (p == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(launch, av, envp);
        _exit(127);
    }
    free(av);
    close(go[0]);
    close(rep[1]);
    sup_pid = p;
    go_fd = go[1];
    rep_fd = rep[0];
    sup_pidfd = (int)syscall(SYS_pidfd_open, p, 0);
    while (child_pid < 0 && !rep_eof) read_report(-1);
    return child_pid > 0 ? 0 : -1;
}

static void kill_supervisor(void) {
    if (sup_pid > 0) {
        kill(sup_pid, SIGKILL);
        waitpid(sup_pid, NULL, 0);
        sup_pid = -1;
    }
}

/* ------------------------------------------------------------------ signals */
static volatile sig_atomic_t stop_sig, second_sig;
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int e = errno;
    if (stop_sig) second_sig = sig;
    else stop_sig = sig;
    if (sig_pipe[1] >= 0) (void)!write(sig_pipe[1], "s", 1);
    errno = e;
}

/* ------------------------------------------------------------------ the end */
static void settle(void) {
    if (lost_records)
        note("the kernel's ring buffer overflowed: %llu task records lost", (unsigned long long)lost_records);
    if (record_gaps)
        note("%d exit count(s) came from the threads' own counters (their kernel records were lost): those miss "
             "what ran before the thread was picked up", record_gaps);
}

static void summary(uint64_t *inh_raw, uint64_t *inh_run) {
    char given[MAXEV][256];
    fprintf(out, "[Totals]\n");
    for (int i = 0; i < nev; i++) {
        const char *name = SOFTWARE[ev[i]].name, *unit = SOFTWARE[ev[i]].unit;
        char label[16];
        snprintf(label, sizeof label, "pmc%d", i);
        given[i][0] = 0;
        if (tot_rows == 0 || tot_run[i] == 0) {
            if (tot_rows == 0) snprintf(given[i], sizeof given[i], "no sample was taken");
            else not_counted_reason(given[i], sizeof given[i], tot_en[i], tot_run[i]);
            fprintf(out, "%-6s %-32s %18s  %s\n", label, name, "<not counted>", given[i]);
            continue;
        }
        char num[48], pct[48] = "";
        fmt_num(num, sizeof num, tot_val[i], unit);
        if (tot_en[i] && tot_run[i] < tot_en[i])
            snprintf(pct, sizeof pct, "  (%.1f%% running)", 100.0 * (double)tot_run[i] / (double)tot_en[i]);
        fprintf(out, "%-6s %-32s %18s%s%s%s\n", label, name, num, strcmp(unit, "count") ? " " : "",
                strcmp(unit, "count") ? unit : "", pct);
    }
    fprintf(out, "[Process totals] (inherited counters: every thread, from the kernel)\n");
    for (int i = 0; i < nev; i++) {
        const char *name = SOFTWARE[ev[i]].name, *unit = SOFTWARE[ev[i]].unit;
        char label[16], num[48];
        snprintf(label, sizeof label, "pmc%d", i);
        if (!inh_run[i] && !inh_raw[i]) {
            char why[256];
            not_counted_reason(why, sizeof why, inh_run[i], inh_run[i]);
            fprintf(out, "%-6s %-32s %18s  %s\n", label, name, "<not counted>", why);
            continue;
        }
        fmt_num(num, sizeof num, (double)inh_raw[i], unit);
        fprintf(out, "%-6s %-32s %18s%s%s\n", label, name, num, strcmp(unit, "count") ? " " : "",
                strcmp(unit, "count") ? unit : "");
    }
    for (int i = 0; i < nnotes; i++) fprintf(out, "note: %s\n", notes[i]);
    for (int d = 0; d < ndash; d++) {
        if (!strcmp(given[dashes[d].e], dashes[d].why)) continue;
        fprintf(out, "note: '-' for %s in %d row%s: %s\n", SOFTWARE[ev[dashes[d].e]].name, dashes[d].n,
                dashes[d].n > 1 ? "s" : "", dashes[d].why);
    }
    fflush(out);
}

/* the regions the program marked: printed by Python (only a program that marks regions pays) */
static const char REGIONS_PY[] =
    "import sys\n"
    "from corecast.errors import UserError\n"
    "from corecast.region import load\n"
    "from corecast.collect.stat.writers import TableWriter\n"
    "try:\n"
    "    TableWriter(sys.stderr, None).regions(load(sys.argv[1]))\n"
    "except UserError as err:\n"
    "    sys.stderr.write(f'corecast stat: error: {err}\\n')\n"
    "    sys.exit(2)\n";

static int print_regions(int memfd) {
    struct stat st;
    if (fstat(memfd, &st) != 0 || st.st_size == 0) return 0;
    fflush(out);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    pid_t p = fork();
    if (p < 0) return 0;
    if (p == 0) {
        fcntl(memfd, F_SETFD, 0);
        char *av[] = {"corecast", "-c", (char *)REGIONS_PY, path, NULL};
        python_exec(av, 4);
    }
    int status = 0;
    waitpid(p, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ------------------------------------------------------------------ stat */
static int header_done;

static void header(void) {
    if (header_done) return;
    header_done = 1;
    fprintf(out, "[Event-to-counter mappings]\n");
    for (int i = 0; i < nev; i++)
        fprintf(out, "pmc%d=%s  (%s)\n", i, SOFTWARE[ev[i]].name, SOFTWARE[ev[i]].desc);
    fprintf(out, "[Event counts]\n");
    fprintf(out, "%7s %9s %7s %7s %9s", "nsample", "time_s", "pid", "tid", "event");
    for (int i = 0; i < nev; i++) {
        char l[16];
        snprintf(l, sizeof l, "pmc%d", i);
        fprintf(out, " %14s", l);
    }
    fputc('\n', out);
    fflush(out);
}

/* -c SPEC: only the software events, each once; else 0 (Python decides) */
static int parse_events(const char *spec) {
    char buf[256];
    if (strlen(spec) >= sizeof buf || !*spec) return 0;
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int k = 0; k < NSOFT; k++)
            if (!strcmp(tok, SOFTWARE[k].name)) found = k;
        if (found < 0 || nev >= MAXEV) return 0;
        for (int i = 0; i < nev; i++)
            if (ev[i] == found) return 0;
        ev[nev++] = found;
    }
    for (const char *c = spec; *c; c++)
        if (*c == ',' && (c == spec || c[1] == ',' || c[1] == 0)) return 0;
    return nev > 0;
}

static const char *find_program(const char *name, char *buf, size_t n) {
    if (strchr(name, '/')) return name;
    if (search_path(name, buf, n)) return buf;
    if (!strncmp(name, "corecast-", 9) && native_dir[0]) {
        snprintf(buf, n, "%s/%s", native_dir, name);
        if (is_exec(buf)) return buf;
    }
    return NULL;
}

static const char *sig_name(int sig, char *buf, size_t n) {
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) snprintf(buf, n, "SIG%s", abbrev);
    else snprintf(buf, n, "signal %d", sig);
    return buf;
}

static int stat_main(int argc, char **argv) {
    int i = 2, sets = 0;
    while (i < argc && strcmp(argv[i], "--")) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-c") || !strcmp(a, "--events") || !strcmp(a, "--event")) {
            if (i + 1 >= argc) return HAND_OVER;
            v = argv[++i];
        } else if (!strncmp(a, "-c", 2) && a[2] && a[2] != '=') v = a + 2;
        else if (!strncmp(a, "--events=", 9)) v = a + 9;
        else if (!strncmp(a, "--event=", 8)) v = a + 8;
        else return HAND_OVER;
        if (v[0] == '-' || sets++ || !parse_events(v)) return HAND_OVER;
        i++;
    }
    if (!sets || i + 1 >= argc) return HAND_OVER;
    char **cmd = argv + i + 1;
    char progbuf[PATH_MAX + 64];
    const char *prog = find_program(cmd[0], progbuf, sizeof progbuf);
    if (!prog || !native_dir[0]) return HAND_OVER;
    page = sysconf(_SC_PAGESIZE);
    if (online_cpus() != 0) return HAND_OVER;
    threads = calloc(MAXTHREADS, sizeof *threads);
    if (!threads) return HAND_OVER;

    /* the regions the program marks: an anonymous file, gone with this process */
    int memfd = memfd_create("corecast-regions", MFD_CLOEXEC);
    if (memfd < 0) return HAND_OVER;
    char region_env[96];
    snprintf(region_env, sizeof region_env, "CORECAST_REGION_OUT=/proc/%d/fd/%d", (int)getpid(), memfd);
    extern char **environ;
    int nenv = 0;
    while (environ[nenv]) nenv++;
    char **envp = calloc((size_t)nenv + 2, sizeof *envp);
    if (!envp) return HAND_OVER;
    int ke = 0;
    for (int e = 0; e < nenv; e++)
        if (strncmp(environ[e], "CORECAST_REGION_OUT=", 20)) envp[ke++] = environ[e];
    envp[ke++] = region_env;
    envp[ke] = NULL;

    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return HAND_OVER;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    if (start_supervisor(cmd, prog, envp) != 0 || open_counters(child_pid) != 0) {
        /* nothing ran yet: Python does it, and says why when it cannot */
        kill_supervisor();
        return HAND_OVER;
    }
    out = fdopen(2, "w");
    if (!out) out = stderr;
    static char obuf[1 << 16];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);

    t0 = mono();
    (void)!write(go_fd, "g", 1);
    close(go_fd);
    while (!exec_ok && exec_err < 0 && !rep_eof) read_report(-1);
    if (exec_err >= 0) {
        close_tracker();
        while (!ended()) read_report(-1);
        waitpid(sup_pid, NULL, 0);
        fprintf(stderr, "corecast stat: error: cannot run '%s': %s\n", cmd[0], strerror(exec_err));
        return 2;
    }

    int watch_rings = 1, empty_wakes = 0;
    for (long k = 1;; k++) {
        double deadline = t0 + (double)k * (double)INTERVAL_NS / 1e9;
        int end = 0;
        empty_wakes = 0;
        while (1) {
            if (stop_sig) { end = 1; break; }
            double now = mono();
            if (now >= deadline - 1e-9) break;
            if (ended()) { end = 1; break; }
            struct pollfd p[2 + MAXCPU];
            int np = 0;
            p[np++] = (struct pollfd){rep_fd, POLLIN, 0};
            p[np++] = (struct pollfd){sig_pipe[0], POLLIN, 0};
            if (watch_rings && empty_wakes < 2)
                for (int c = 0; c < ncpu; c++) p[np++] = (struct pollfd){rings[c].fd, POLLIN, 0};
            double left = deadline - now;
            if (np == 2 && left > 0.05) left = 0.05;     /* rings not watched: look in steps */
            struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
            int r = ppoll(p, (nfds_t)np, &ts, NULL);
            if (r <= 0) continue;
            if (p[0].revents) read_report(0);
            if (p[1].revents) { char b[64]; while (read(sig_pipe[0], b, sizeof b) > 0) {} }
            int ring_ready = 0;
            for (int q = 2; q < np; q++) ring_ready |= p[q].revents != 0;
            if (ring_ready) empty_wakes = drain(0) ? 0 : empty_wakes + 1;
        }
        if (stop_sig && !second_sig) {
            static int said;
            if (!said) {
                said = 1;
                char b[32];
                if (stop_sig != SIGINT && !ended()) {
                    kill(child_pid, stop_sig);
                    note("stopped by %s (passed on to the command)", sig_name(stop_sig, b, sizeof b));
                } else {
                    note(stop_sig == SIGINT ? "interrupted" : "stopped by %s", sig_name(stop_sig, b, sizeof b));
                }
            }
        }
        double now = mono();
        if (!end && ended()) end = 1;
        header();
        tick_rows(now, end, !stop_sig ? "exit" : stop_sig == SIGINT ? "interrupt" : "stop");
        if (end) break;
    }

    /* the process's inherited totals */
    uint64_t inh_raw[MAXEV] = {0}, inh_run[MAXEV] = {0};
    for (int e = 0; e < nev; e++)
        for (int c = 0; c < ncpu; c++) {
            struct reading r = read_counter(inh[e][c]);
            if (!r.ok) continue;
            inh_raw[e] += r.raw;
            inh_run[e] += r.run;
        }
    settle();
    for (int e = 0; e < nev; e++) {
        double v = (double)inh_raw[e];
        if ((!inh_run[e] && !inh_raw[e]) || v == 0 || tot_rows == 0) continue;
        if (fabs_(tot_val[e] - v) > 0.01 * v) {
            char num[48];
            fmt_num(num, sizeof num, v, SOFTWARE[ev[e]].unit);
            note("the per-thread rows of %s add up to %.1f%% of the process total (%s)", SOFTWARE[ev[e]].name,
                 100.0 * tot_val[e] / v, num);
        }
    }
    close_tracker();
    while (nthreads) close_thread(&threads[0]);
    /* a command still running (a signal ended the monitoring): STOP_GRACE_S, SIGTERM, SIGKILL */
    if (!ended()) {
        double until = mono() + STOP_GRACE_S;
        while (!ended() && mono() < until) read_report(100);
        if (!ended()) {
            kill(child_pid, SIGTERM);
            until = mono() + STOP_GRACE_S;
            while (!ended() && mono() < until) read_report(100);
            if (!ended()) kill(child_pid, SIGKILL);
        }
        while (!ended()) read_report(-1);
    }
    waitpid(sup_pid, NULL, 0);
    summary(inh_raw, inh_run);
    int rc = print_regions(memfd);
    if (rc != 0) return rc;
    if (exit_code == INT_MIN) {
        fprintf(stderr, "corecast stat: error: corecast-launch ended without reporting how '%s' ended\n", cmd[0]);
        return 2;
    }
    char b[32];
    if (exit_code < 0) fprintf(stderr, "corecast stat: note: '%s' was ended by %s\n", cmd[0], sig_name(-exit_code, b, sizeof b));
    else if (exit_code > 0) fprintf(stderr, "corecast stat: note: '%s' exited with status %d\n", cmd[0], exit_code);
    return exit_code < 0 ? 128 - exit_code : exit_code;
}

int main(int argc, char **argv) {
    locate(argv[0]);
    const char *front = getenv("CORECAST_FRONT");
    int python_only = front && !strcmp(front, "python");
    if (!python_only && argc == 2 && !strcmp(argv[1], "--version")) {
        printf("corecast %s\n", CORECAST_VERSION);
        return 0;
    }
    if (!python_only && argc > 2 && !strcmp(argv[1], "stat")) {
        int rc = stat_main(argc, argv);
        if (rc != HAND_OVER) return rc;
    }
    hand_over(argc, argv);
}
