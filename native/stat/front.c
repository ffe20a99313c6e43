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
 * unchanged: exec of `python3 -P -m corecast ARGS...`, the python3 beside the `corecast` that was
 * run (a virtual environment's bin/), else the interpreter the build was configured with.
 * CORECAST_FRONT=python hands every command over (the tests compare both paths with it).
 *
 * The parts: this file (where things are, the hand-over, the options), front_count.c (the
 * counters, the task records, the supervisor, the run), front_rows.c (the rows, the totals,
 * the report), front.h.
 */
#define _GNU_SOURCE
#include "front.h"

const struct soft_event SOFTWARE[] = {
    {"task_clock", "CPU time of the task (ns)", "ns", PERF_COUNT_SW_TASK_CLOCK},
    {"context_switches", "context switches", "count", PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu_migrations", "migrations to another CPU", "count", PERF_COUNT_SW_CPU_MIGRATIONS},
    {"page_faults", "page faults", "count", PERF_COUNT_SW_PAGE_FAULTS},
};

/* ------------------------------------------------------------------ where things are */
char self_path[PATH_MAX];      /* the `corecast` that was run, links not followed */
char native_dir[PATH_MAX];     /* the folder holding corecast-launch (and the workloads) */

int is_exec(const char *p) {
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
void python_exec(char **args, int n) __attribute__((noreturn));
void python_exec(char **args, int n) {
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

/* Python with `-P -m corecast` and the same arguments: never returns. -P (safe path): `-m` would
 * otherwise put the current folder first on sys.path, so a numpy.py or a corecast/ planted in a
 * folder where root runs corecast (/tmp, a shared project) would be imported and run as root. */
static void hand_over(int argc, char **argv) __attribute__((noreturn));
static void hand_over(int argc, char **argv) {
    char **av = calloc((size_t)argc + 4, sizeof *av);
    if (!av) { fprintf(stderr, "corecast: out of memory\n"); _exit(1); }
    av[0] = argv[0];
    av[1] = "-P";
    av[2] = "-m";
    av[3] = "corecast";
    for (int i = 1; i < argc; i++) av[i + 3] = argv[i];
    python_exec(av, argc + 3);
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

double interval_s = 1.0;
int totals_only;

/* -T TIME (`unit` "s") or --interval-print MS (`unit` "ms"): a plain number, with ms or s or
 * none, above 0.02 s (at 0.02 s and below the Python path looks for task records at the
 * ticks only: --wake auto) and at most an hour; else 0 (Python decides, and says what is wrong) */
static int parse_interval(const char *v, const char *unit) {
    const char *c = v;
    int digits = 0;
    while (*c >= '0' && *c <= '9') { c++; digits++; }
    if (*c == '.') {
        c++;
        while (*c >= '0' && *c <= '9') { c++; digits++; }
    }
    if (!digits || c - v > 20) return 0;
    const char *u = *c ? c : unit;
    double x = strtod(v, NULL);
    if (!strcmp(u, "ms")) x /= 1e3;
    else if (strcmp(u, "s")) return 0;
    if (!(x > 0.02 + 1e-9) || x > 3600.0) return 0;
    interval_s = x;
    return 1;
}

/* `stat` with options the C path takes: counted here; else HAND_OVER */
static int stat_main(int argc, char **argv) {
    int i = 2, sets = 0;
    while (i < argc && strcmp(argv[i], "--")) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-A") || !strcmp(a, "--totals")) {
            totals_only = 1;
            i++;
            continue;
        }
        const char *t = NULL, *unit = "s";
        if (!strcmp(a, "-T") || !strcmp(a, "--interval") || !strcmp(a, "--interval-print")) {
            if (i + 1 >= argc) return HAND_OVER;
            unit = !strcmp(a, "--interval-print") ? "ms" : "s";
            t = argv[++i];
        } else if (!strncmp(a, "-T", 2) && a[2] && a[2] != '=') t = a + 2;
        else if (!strncmp(a, "--interval=", 11)) t = a + 11;
        else if (!strncmp(a, "--interval-print=", 17)) { t = a + 17; unit = "ms"; }
        if (t) {
            if (!parse_interval(t, unit)) return HAND_OVER;
            i++;
            continue;
        }
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
    return stat_count(cmd, prog);
}

/* `corecast --version`: the __version__ of the package the front end belongs to (the folder
 * above native_dir: src/corecast, or an install's corecast), read where Python reads it, so the
 * two never differ; 0 when it cannot be read (Python answers) */
static int version(void) {
    char path[PATH_MAX + 32], buf[4096];
    if (!native_dir[0]) return 0;
    snprintf(path, sizeof path, "%s/../__init__.py", native_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) return 0;
    buf[k] = 0;
    const char *key = "\n__version__ = \"";
    char *v = strstr(buf, key);
    if (!v) return 0;
    v += strlen(key);
    char *end = strchr(v, '"');
    if (!end || end == v || end - v > 64 || memchr(v, '\n', (size_t)(end - v))) return 0;
    printf("corecast %.*s\n", (int)(end - v), v);
    return 1;
}

int main(int argc, char **argv) {
    locate(argv[0]);
    const char *front = getenv("CORECAST_FRONT");
    int python_only = front && !strcmp(front, "python");
    if (!python_only && argc == 2 && !strcmp(argv[1], "--version") && version())
        return 0;
    if (!python_only && argc > 2 && !strcmp(argv[1], "stat")) {
        int rc = stat_main(argc, argv);
        if (rc != HAND_OVER) return rc;
    }
    hand_over(argc, argv);
}

