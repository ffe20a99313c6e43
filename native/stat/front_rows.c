/* corecast-front's rows and report (see front.c): what TableWriter and the monitor's rows print
 * (src/corecast/collect/stat/writers.py, rows.py), line for line. */
#define _GNU_SOURCE
#include "front.h"


/* totals per event: value, raw, enabled, running */
double tot_val[MAXEV];
static uint64_t tot_en[MAXEV], tot_run[MAXEV];
int tot_rows;
static long nsample;

/* '-' in a row: (event, reason) -> rows */
struct dash { int e; char why[256]; int n; };
static struct dash dashes[32];
static int ndash;

static char notes[8][512];
static int nnotes;

FILE *out;
double t0;

double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void note(const char *fmt, ...) {
    if (nnotes >= 8) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes[nnotes++], sizeof notes[0], fmt, ap);
    va_end(ap);
}

double fabs_(double x) { return x < 0 ? -x : x; }

/* corecast.collect.stat.rows._fmt_num */
void fmt_num(char *buf, size_t n, double v, const char *unit) {
    int intunit = !strcmp(unit, "count") || !strcmp(unit, "ns");
    double r = (double)(long long)(v + (v >= 0 ? 0.5 : -0.5));
    if (intunit && fabs_(v - r) < 1e-6 * (fabs_(v) > 1.0 ? fabs_(v) : 1.0)) snprintf(buf, n, "%.0f", r);
    else if (fabs_(v) >= 1e6 || v == (double)(long long)v) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%.4g", v);
}

/* ------------------------------------------------------------------ rows */

void not_counted_reason(char *buf, size_t n, uint64_t en, uint64_t run) {
    (void)run;
    if (en == 0) snprintf(buf, n, "did not run while monitored (enabled 0 ns: its task was never scheduled)");
    else snprintf(buf, n, "enabled %.3g ms but never on a counter (the PMU had no counter free: fewer hardware "
                  "events per -c set)", (double)en / 1e6);
}

/* perf.interval_value on a delta */
struct val interval_val(int64_t raw, int64_t en, int64_t run) {
    struct val v;
    memset(&v, 0, sizeof v);
    v.en = (uint64_t)(en > 0 ? en : 0);
    v.run = (uint64_t)(run > 0 ? run : 0);
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
    if (totals_only) {                   /* -A: the totals only (no row, no '-' note) */
        for (int i = 0; i < nev; i++) {
            tot_en[i] += vals[i].en;
            tot_run[i] += vals[i].run;
            if (vals[i].has) tot_val[i] += vals[i].value;
        }
        return;
    }
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
void own_row(struct thread *t, double now, const char *label) {
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
void exit_row(struct thread *t, double now) {
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

/* ------------------------------------------------------------------ the end */
void settle(void) {
    if (lost_records)
        note("the kernel's ring buffer overflowed: %llu task records lost", (unsigned long long)lost_records);
    if (record_gaps)
        note("%d exit count(s) came from the threads' own counters (their kernel records were lost): those miss "
             "what ran before the thread was picked up", record_gaps);
}

void summary(uint64_t *inh_raw, uint64_t *inh_run) {
    char given[MAXEV][256];
    fprintf(out, totals_only ? "[Event totals]\n" : "[Totals]\n");
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
    if (!totals_only)
        fprintf(out, "[Process totals] (inherited counters: every thread, from the kernel)\n");
    for (int i = 0; i < nev && !totals_only; i++) {
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

int print_regions(int memfd) {
    struct stat st;
    if (fstat(memfd, &st) != 0 || st.st_size == 0) return 0;
    fflush(out);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    pid_t p = fork();
    if (p < 0) return 0;
    if (p == 0) {
        fcntl(memfd, F_SETFD, 0);
        /* -P: the current folder is not put on sys.path (see hand_over in front.c) */
        char *av[] = {"corecast", "-P", "-c", (char *)REGIONS_PY, path, NULL};
        python_exec(av, 5);
    }
    int status = 0;
    waitpid(p, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* ------------------------------------------------------------------ stat */
static int header_done;

void header(void) {
    if (header_done || totals_only) return;
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

const char *sig_name(int sig, char *buf, size_t n) {
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) snprintf(buf, n, "SIG%s", abbrev);
    else snprintf(buf, n, "signal %d", sig);
    return buf;
}

