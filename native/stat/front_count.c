/* corecast-front's counting (see front.c): the counters on the command's root thread and the
 * tracker of every task it creates (task records), corecast-launch as its supervisor, the
 * tick loop and the end of the run. */
#define _GNU_SOURCE
#include "front.h"

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
    a.inherit_stat = inherit && cpu >= 0 && config != PERF_COUNT_SW_DUMMY;   /* the tracker's */
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


struct reading read_counter(int fd) {
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

int nev;
int ev[MAXEV];                    /* indices into SOFTWARE */
int ncpu, cpus[MAXCPU];
static struct thread *threads;
int nthreads;

struct ring { int fd; void *base; size_t size; };
static struct ring rings[MAXCPU];
static int inh[MAXEV][MAXCPU];           /* inherited counters, per event and CPU */
static uint64_t ids[MAXEV][MAXCPU];
static int pin_fd = -1;
static long page;
uint64_t lost_records;
int record_gaps;
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
    /* -A: one inherited counter per event on the root counts the whole tree; no tracker */
    for (int i = 0; i < nev; i++) {
        t->fds[i] = perf_open(SOFTWARE[ev[i]].config, pid, -1, totals_only, 1, 0, 0, rformat);
        if (t->fds[i] < 0 && errno == EINVAL) {
            rformat &= ~(uint64_t)PERF_FORMAT_LOST;          /* an older kernel */
            t->fds[i] = perf_open(SOFTWARE[ev[i]].config, pid, -1, totals_only, 1, 0, 0, rformat);
        }
        if (t->fds[i] < 0) return -1;
    }
    if (totals_only) return 0;
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
static int sup_pid = -1, child_pid = -1, go_fd = -1, rep_fd = -1;
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

/* Count `cmd` (its program at `prog`) and print the report: the exit status to return, or
 * HAND_OVER when nothing ran yet and Python is to do it. */
int stat_count(char **cmd, const char *prog) {
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

    int watch_rings = !totals_only, empty_wakes = 0;
    for (long k = 1;; k++) {
        double deadline = t0 + (double)k * interval_s;
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
        if (stop_sig) {
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

    /* the process's inherited totals (the tracker's; -A has none) */
    uint64_t inh_raw[MAXEV] = {0}, inh_run[MAXEV] = {0};
    for (int e = 0; e < nev && !totals_only; e++)
        for (int c = 0; c < ncpu; c++) {
            struct reading r = read_counter(inh[e][c]);
            if (!r.ok) continue;
            inh_raw[e] += r.raw;
            inh_run[e] += r.run;
        }
    if (!totals_only) settle();
    for (int e = 0; e < nev && !totals_only; e++) {
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
    /* a command still running (a signal ended the monitoring): STOP_GRACE_S, SIGTERM, SIGKILL;
     * a second signal kills it at once (Python's KeyboardInterrupt) */
    if (!ended()) {
        double until = mono() + STOP_GRACE_S;
        while (!ended() && !second_sig && mono() < until) read_report(100);
        if (!ended() && !second_sig) {
            kill(child_pid, SIGTERM);
            until = mono() + STOP_GRACE_S;
            while (!ended() && !second_sig && mono() < until) read_report(100);
        }
        if (!ended()) kill(child_pid, SIGKILL);
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
