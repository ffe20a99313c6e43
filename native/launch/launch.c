/* corecast-launch: supervise one run of a campaign, the way `perf stat` and `time` do.
 *
 *   corecast-launch [--parent PID] [--keep-group] GO_FD REPORT_FD CPULIST TIMEOUT_S GRACE_S
 *                   -- PROGRAM ARGS...
 *
 * `measure`, `stat -- PROGRAM` and `sched run` start every program through it.
 *
 * 0. Asks for SIGTERM when corecast dies (parent-death signal) and checks, after asking, that
 *    its parent is still PID (--parent: corecast's pid; without it, that the parent is not
 *    init), so that a corecast killed before the request cannot leave it behind. Becomes a
 *    child subreaper and leaves corecast's process group for one of its own, so that a
 *    `kill -9` aimed at corecast's job does not reach it (the tree would lose its keeper).
 *    It ignores SIGINT, SIGQUIT, SIGHUP and SIGPIPE (a report corecast can no longer read
 *    must not end it before the tree is killed); the program gets them back as they were.
 * 1. Forks the run's first process. The child closes its copies of the start pipe's write end
 *    (so that the supervisor's death is an end of file to it), asks to be killed if this
 *    supervisor dies and checks that it has not already, makes itself a process-group leader
 *    (so the whole tree can be killed at once; with --keep-group it joins corecast's group
 *    instead, so that the terminal's Ctrl-C reaches it as it reaches corecast: `stat`), pins
 *    itself to CPULIST ("-" for no pinning; every process and thread it creates inherits the
 *    placement), and waits for the start signal.
 * 2. Writes "pid N" to REPORT_FD and waits for one byte on GO_FD: corecast opens its counters
 *    on the child in between (inherited, enabled at exec).
 * 3. Starts the clock, lets the child exec PROGRAM, and reports "exec ok" or "exec_error ERRNO".
 * 4. Waits for the child. Past TIMEOUT_S (0: no limit) it sends SIGTERM to the child's process
 *    group (with --keep-group: to the child), and SIGKILL after GRACE_S more. When the child has exited, every process still
 *    descending from this supervisor is killed: those of the child's process group, and those
 *    that left it (setsid, a new group) -- the supervisor is a child subreaper, so orphaned
 *    descendants are reparented to it and stay findable. How many there were is reported.
 *    If corecast itself dies, this supervisor gets SIGTERM (parent-death signal) and kills the
 *    whole tree the same way before it exits.
 * 5. Reports how it ended and the child's rusage (wait4: the child and the descendants it
 *    waited for), then "end".
 *
 * The child is forked from this small process rather than from corecast's Python process so
 * that its peak RSS (ru_maxrss, which survives exec) is the program's own.
 *
 * A library to preload into the program (corecast's sync shim) comes in
 * CORECAST_LAUNCH_PRELOAD and is put into LD_PRELOAD by the child just before exec, so that it
 * is never loaded into this supervisor (whose threads and run-queue delay would otherwise be
 * counted as the program's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

static int parse_cpus(const char *s, cpu_set_t *set) {
    CPU_ZERO(set);
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10);
        if (end == s || lo < 0 || lo >= CPU_SETSIZE)
            return -1;
        long hi = lo;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo || hi >= CPU_SETSIZE)
                return -1;
            s = end;
        }
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, set);
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every process below this one: pids of /proc entries whose parent chain reaches us. Returns
 * how many distinct processes were found and signalled (SIGKILL: one still dying when the
 * tree is looked at again is not counted twice); zombies among them are reaped here. */
static int kill_descendants(void) {
    pid_t self = getpid();
    int killed = 0;
    enum { MAXK = 4096 };
    static pid_t seen[MAXK];
    for (int round = 0; round < 50; round++) {     /* a tree still forking: a few passes */
        enum { MAXP = 1 << 16 };
        static pid_t pid[MAXP], ppid[MAXP];
        int n = 0;
        DIR *d = opendir("/proc");
        if (!d) return killed;
        struct dirent *e;
        while ((e = readdir(d)) && n < MAXP) {
            char *end;
            long p = strtol(e->d_name, &end, 10);
            if (*end || p <= 0) continue;
            char path[64], buf[512];
            snprintf(path, sizeof path, "/proc/%ld/stat", p);
            int fd = open(path, O_RDONLY);
            if (fd < 0) continue;
            ssize_t k = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (k <= 0) continue;
            buf[k] = 0;
            char *rp = strrchr(buf, ')');          /* the name may hold spaces and parentheses */
            long pp;
            char st;
            if (!rp || sscanf(rp + 1, " %c %ld", &st, &pp) != 2) continue;
            pid[n] = (pid_t)p;
            ppid[n] = (pid_t)pp;
            n++;
        }
        closedir(d);
        int found = 0;
        for (int i = 0; i < n; i++) {
            pid_t q = ppid[i];
            int depth = 0;
            while (q > 1 && q != self && depth++ < 4096) {   /* walk up to us or to init */
                int j;
                for (j = 0; j < n && pid[j] != q; j++) {}
                if (j == n) break;
                q = ppid[j];
            }
            if (q == self) {
                kill(pid[i], SIGKILL);
                found++;
                int k;
                for (k = 0; k < killed && k < MAXK && seen[k] != pid[i]; k++) {}
                if (k == killed || k == MAXK) {
                    if (killed < MAXK)
                        seen[killed] = pid[i];
                    killed++;
                }
            }
        }
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        if (!found) break;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
    }
    return killed;
}

static volatile sig_atomic_t orphaned;

static void on_parent_death(int sig) {
    (void)sig;
    orphaned = 1;
}

static FILE *rep;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(rep, fmt, ap);
    va_end(ap);
    fflush(rep);
}

static long tv_us(struct timeval tv) { return (long)tv.tv_sec * 1000000L + (long)tv.tv_usec; }

static int keep_group;

/* A signal to the program: its process group, or (--keep-group) the program itself. */
static void signal_program(pid_t child, int sig) {
    if (keep_group)
        kill(child, sig);
    else
        killpg(child, sig);
}

static void usage(void) {
    fprintf(stderr, "usage: corecast-launch [--parent PID] [--keep-group] GO_FD REPORT_FD CPULIST TIMEOUT_S "
                    "GRACE_S -- PROGRAM ARGS...\n");
}

/* The signals the supervisor ignores; the child puts them back as they were. */
static const int held[] = {SIGINT, SIGQUIT, SIGHUP, SIGPIPE};
enum { NHELD = sizeof held / sizeof held[0] };

int main(int argc, char **argv) {
    pid_t want_parent = 0;
    int a = 1;
    while (a < argc && !strncmp(argv[a], "--", 2) && strcmp(argv[a], "--") != 0) {
        if (!strcmp(argv[a], "--parent") && a + 1 < argc) {
            want_parent = (pid_t)atol(argv[a + 1]);
            a += 2;
        } else if (!strcmp(argv[a], "--keep-group")) {
            keep_group = 1;
            a++;
        } else {
            usage();
            return 126;
        }
    }
    if (argc - a < 7 || strcmp(argv[a + 5], "--") != 0) {
        usage();
        return 126;
    }
    int go_fd = atoi(argv[a]);
    int rep_fd = atoi(argv[a + 1]);
    const char *cpus = argv[a + 2];
    double timeout = atof(argv[a + 3]), grace = atof(argv[a + 4]);
    char **cmd = argv + a + 6;
    fcntl(go_fd, F_SETFD, FD_CLOEXEC);
    fcntl(rep_fd, F_SETFD, FD_CLOEXEC);
    rep = fdopen(rep_fd, "w");
    if (!rep)
        return 126;
    /* corecast's death reaches us as SIGTERM: the tree is killed, then we exit */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_parent_death;
    sigaction(SIGTERM, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (want_parent ? getppid() != want_parent : getppid() == 1)
        return 125;            /* corecast died before the request: nobody is left to start us */
    struct sigaction saved[NHELD];
    for (int i = 0; i < NHELD; i++) {
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigaction(held[i], &ign, &saved[i]);
    }
    pid_t job = getpgrp(), self = getpid();
    setpgid(0, 0);
    /* for tests only: hold the child this long before its parent-death request, which widens
     * the window a supervisor dying at that moment must not leave a child behind in */
    const char *hold = getenv("CORECAST_LAUNCH_TEST_CHILD_DELAY_MS");
    long hold_ms = hold ? atol(hold) : 0;
    const char *preload = getenv("CORECAST_LAUNCH_PRELOAD");

    cpu_set_t set;
    int pin = strcmp(cpus, "-") != 0;
    if (pin && parse_cpus(cpus, &set) != 0) {
        say("error bad CPU list '%s'\n", cpus);
        return 126;
    }

    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);

    int start[2], execp[2];
    if (pipe2(start, O_CLOEXEC) != 0 || pipe2(execp, O_CLOEXEC) != 0) {
        say("error pipe: %s\n", strerror(errno));
        return 126;
    }
    pid_t child = fork();
    if (child < 0) {
        say("error fork: %s\n", strerror(errno));
        return 126;
    }
    if (child == 0) {
        if (hold_ms > 0) {
            struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        unsetenv("CORECAST_LAUNCH_TEST_CHILD_DELAY_MS");
        /* our own copies: with them open, the supervisor's death would not end the wait below */
        close(start[1]);
        close(execp[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != self)
            _exit(125);        /* the supervisor died before the request */
        setpgid(0, keep_group ? job : 0);
        signal(SIGTERM, SIG_DFL);
        for (int i = 0; i < NHELD; i++)
            sigaction(held[i], &saved[i], NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (preload) {
            setenv("LD_PRELOAD", preload, 1);
            unsetenv("CORECAST_LAUNCH_PRELOAD");
        }
        int err = 0;
        if (pin && sched_setaffinity(0, sizeof set, &set) != 0)
            err = errno;
        char c;
        ssize_t r;
        do {
            r = read(start[0], &c, 1);
        } while (r < 0 && errno == EINTR);
        if (r != 1)
            _exit(125);
        if (!err) {
            execvp(cmd[0], cmd);
            err = errno;
        }
        if (write(execp[1], &err, sizeof err) < 0) {
            /* the supervisor is gone */
        }
        _exit(127);
    }
    setpgid(child, keep_group ? job : child);
    close(start[0]);
    close(execp[1]);
    say("pid %d\n", (int)child);

    char c;
    ssize_t r;
    do {
        r = read(go_fd, &c, 1);
    } while (r < 0 && errno == EINTR && !orphaned);
    if (r != 1) {              /* corecast went away before starting the run */
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        kill_descendants();
        return 125;
    }
    close(go_fd);

    double t0 = now_s();
    if (write(start[1], "g", 1) != 1) {
        say("error cannot start the child: %s\n", strerror(errno));
    }
    close(start[1]);
    int exec_err = 0;
    do {
        r = read(execp[0], &exec_err, sizeof exec_err);
    } while (r < 0 && errno == EINTR);
    close(execp[0]);
    if (r == (ssize_t)sizeof exec_err)
        say("exec_error %d\n", exec_err);
    else
        say("exec ok\n");

    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    int timed_out = 0, stage = 0;    /* stage 1: SIGTERM sent, 2: SIGKILL sent */
    double deadline = timeout > 0 ? t0 + timeout : 0, kill_at = 0;
    for (;;) {
        if (orphaned) {        /* corecast is gone: nobody will read a report */
            signal_program(child, SIGKILL);
            kill_descendants();
            _exit(125);
        }
        pid_t w = wait4(child, &status, WNOHANG, &ru);
        if (w == child)
            break;
        if (w < 0 && errno != EINTR) {
            say("error wait4: %s\n", strerror(errno));
            return 126;
        }
        double now = now_s(), limit = 3600.0;
        if (deadline > 0 && stage == 0) {
            if (now >= deadline) {
                timed_out = 1;
                stage = 1;
                signal_program(child, SIGTERM);
                kill_at = now + grace;
                continue;
            }
            limit = deadline - now;
        } else if (stage == 1) {
            if (now >= kill_at) {
                stage = 2;
                signal_program(child, SIGKILL);
                continue;
            }
            limit = kill_at - now;
        }
        struct timespec ts = {(time_t)limit, (long)((limit - (double)(time_t)limit) * 1e9)};
        sigtimedwait(&chld, NULL, &ts);
    }
    double t1 = now_s();
    int stray = 0;
    if (killpg(child, 0) == 0) {
        stray = 1;
        killpg(child, SIGKILL);
    }
    /* whatever else is left below us: the group's processes not yet gone, and those that
     * left the group (setsid) -- reparented to us as the subreaper */
    int leftovers = kill_descendants();
    if (WIFSIGNALED(status))
        say("signal %d\n", WTERMSIG(status));
    else
        say("exit %d\n", WEXITSTATUS(status));
    say("timeout %d\nstray %d\nleftovers %d\nwall_ns %.0f\n", timed_out, stray || leftovers > 0, leftovers,
        (t1 - t0) * 1e9);
    say("rusage utime_us %ld stime_us %ld maxrss_kb %ld minflt %ld majflt %ld nvcsw %ld nivcsw %ld\n",
        tv_us(ru.ru_utime), tv_us(ru.ru_stime), ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt, ru.ru_nvcsw,
        ru.ru_nivcsw);
    say("end\n");
    return 0;
}
