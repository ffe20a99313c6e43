/* The sampling loop of `corecast meters` (see src/corecast/meters/engine.py).
 *
 * Python builds the blackboard (corecast_meters.h's layout) and describes what to read and
 * compute: files (a /proc file read whole each tick, a perf counter, or a value Python sets),
 * inputs (a cumulative count picked out of a file: the sum of some fields of the line that
 * starts with a key), meters (a value per tick from the deltas of their inputs), triggers and
 * advice. Then ccm_run() sleeps to each tick's deadline (CLOCK_MONOTONIC, absolute, so the
 * ticks do not drift), reads every file once, computes every meter, updates its window
 * (average, minimum, maximum), the triggers and the advice, and publishes each record under
 * its seqlock. It returns to Python after `max_ticks`, when a trigger or an advice changed
 * (Python runs the actions), or when a signal came.
 *
 * A meter's value over a tick:
 *   GAUGE  scale * sum(inputs now) + bias                     (tasks runnable)
 *   RATE   scale * sum(deltas of num) / seconds               (context switches per second)
 *   RATIO  scale * sum(deltas of num) / sum(deltas of den)    (busy jiffies / all jiffies; cycles / instructions)
 * A RATIO whose denominator did not move (/proc/stat counts in clock ticks: at 1 ms most ticks
 * see none) carries its numerator over to the next tick that has one, so the current value is
 * over the span since the last value. The window's average is the sum of the numerators over
 * the sum of the denominators (time-weighted, right for ratios); min and max are over the
 * per-tick values. A delta that cannot be had (the first reading, a counter the kernel did not
 * schedule in the tick, a file that could not be read) makes the tick's value undefined (NaN),
 * never 0. A perf counter the kernel multiplexed is scaled by its enabled/running times.
 *
 * A file read every few ticks only (ccm_set_file_period) leaves its meters untouched at the
 * ticks between: a meter is computed and its record written only at the ticks all its files
 * are read (its period), a RATE over the time since its last reading, and its window holds
 * its readings of the last window (window / (interval * period) of them, rounded up). Each
 * tick reads every due file once and picks all of its inputs out of that one reading.
 *
 * An input marked optional (bit 31 of its fields: a thread slot summed into its process) adds 0
 * while it cannot be read instead of making the sum undefined.
 *
 * Nothing is allocated while running; the caller owns the blackboard mapping.
 *
 * One file of ~800 lines, on purpose: every part (reading, meters and their windows, triggers,
 * advice, the loop) works on the one `struct engine`, which no other file needs to see; the
 * last section only exports corecast_meters.h's reader to Python. */
#define _GNU_SOURCE
#include "corecast_meters.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

enum { FILE_KEYED = 0, FILE_PLAIN = 1, FILE_PERF = 2, FILE_EXTERNAL = 3, FILE_PERF_GROUP = 4 };
enum { WHY_ALL = 0, WHY_EVENT = 1, WHY_SIGNAL = 2, WHY_ERROR = 3 };
enum { EV_TRIGGER = 1, EV_ADVICE = 2 };
#define MAX_FIELDS 32
#define EVENTS 1024

struct file {
    int fd, type, ok, err;
    int period, due;             /* read every `period` ticks; due: read at this tick */
    char *buf;
    int cap, len;
    int *inputs;                 /* keyed: indexes of its inputs, sorted by key */
    int ninputs;
    int members, stride;         /* a perf group: its counters, words per counter in a read */
};

struct input {
    int file;
    char key[32];
    uint32_t fields;             /* which fields after the key are summed (bit i: field i) */
    int optional;                /* missing (a thread slot with no thread): adds 0, not NaN */
    int ok, have_prev, sampled;  /* sampled: its file has been read (a meter reads it only at
                                    the ticks its files are read: its period) */
    uint64_t raw, en, run, praw, pen, prun;
    double delta, cur;
};

struct slot {                    /* one reading in a window */
    double n, d, v;              /* numerator, denominator, value (NaN: none) */
};

struct qent {                    /* an entry of a monotonic queue: push number and value */
    uint64_t p;
    double v;
};

struct meter {
    int rec, kind, has_total;
    int period;                  /* computed every `period` ticks: when all its files are read */
    double scale, total_scale, bias;
    int num_off, nnum, den_off, nden;
    double acc_n, acc_d;         /* a RATIO's numerator carried over readings without a denominator */
    int64_t last_t;              /* the tick of its last reading (a RATE is over the time since) */
    int wcap, head, filled, nvals;
    struct slot *w;              /* the window: its last `wcap` readings */
    uint64_t pushed;             /* readings pushed since the window was cleared */
    struct qent *qmin, *qmax;    /* monotonic queues (circular, wcap each): the window's */
    int qmin_h, qmin_n, qmax_h, qmax_n;   /* minimum and maximum in O(1) a reading */
    double sn, sd, mn, mx, current, total;
    uint64_t aux;
    int64_t t_ns;
};

struct trigger {
    int rec, meter;
    double low, high, value;
    int64_t dwell, pending, since;
    uint32_t state, ups, downs;
    uint64_t transitions;
};

struct advice {
    int rec, min, max, cut_one, allowed, trig_off, ntrig;
    uint32_t high, last;
    int64_t interval, changed;
    uint64_t changes;
};

struct ccm_event {               /* 32 bytes, read by Python */
    int32_t kind, index, state, previous;
    int64_t t_ns;
    double value;
};

struct engine {
    struct ccm_header *h;
    unsigned char *base;
    int64_t interval, window, t0, k;
    uint64_t tick;
    struct file *files;
    int nfiles;
    struct input *inputs;
    int ninputs;
    struct meter *meters;
    int nmeters;
    struct trigger *triggers;
    int ntriggers;
    struct advice *advice;
    int nadvice;
    int *refs;
    int nrefs;
    struct ccm_event events[EVENTS];
    int nevents;
    uint64_t dropped_events;
};

static int64_t now_ns(void) { return ccm_now_ns(); }

static int grow(void **p, int n, size_t size) {
    void *q = realloc(*p, (size_t)(n + 1) * size);
    if (!q)
        return -1;
    *p = q;
    memset((char *)q + (size_t)n * size, 0, size);
    return 0;
}

API struct engine *ccm_engine_new(void *base, int64_t interval_ns, int64_t window_ns) {
    struct engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->base = base;
    e->h = base;
    e->interval = interval_ns;
    e->window = window_ns;
    return e;
}

API void ccm_engine_free(struct engine *e) {
    if (!e)
        return;
    for (int i = 0; i < e->nfiles; i++) {
        free(e->files[i].buf);
        free(e->files[i].inputs);
    }
    for (int i = 0; i < e->nmeters; i++) {
        free(e->meters[i].w);
        free(e->meters[i].qmin);
        free(e->meters[i].qmax);
    }
    free(e->files);
    free(e->inputs);
    free(e->meters);
    free(e->triggers);
    free(e->advice);
    free(e->refs);
    free(e);
}

API int ccm_add_file(struct engine *e, int fd, int type) {
    if (grow((void **)&e->files, e->nfiles, sizeof *e->files))
        return -1;
    struct file *f = &e->files[e->nfiles];
    f->fd = fd;
    f->type = type;
    f->period = 1;
    f->cap = (type == FILE_KEYED || type == FILE_PLAIN) ? 4096 : 64;
    f->buf = malloc((size_t)f->cap);
    return f->buf ? e->nfiles++ : -1;
}

/* A perf group read in one call (PERF_FORMAT_GROUP on its leader `fd`: nr, time enabled, time
 * running, then `stride` words per counter, its value first): one read, so one inter-processor
 * interrupt for a CPU's counters instead of one each. Its inputs name their counter's position
 * in the group in `fields`. */
API int ccm_add_perf_group(struct engine *e, int fd, int members, int stride) {
    if (members < 1 || stride < 1 || members > 64 || stride > 4)
        return -1;
    int i = ccm_add_file(e, fd, FILE_PERF_GROUP);
    if (i < 0)
        return -1;
    struct file *f = &e->files[i];
    int cap = 8 * (3 + members * stride);
    char *nb = realloc(f->buf, (size_t)cap);
    if (!nb)
        return -1;
    f->buf = nb;
    f->cap = cap;
    f->members = members;
    f->stride = stride;
    return i;
}

/* Read the file every `ticks` ticks only (its counts are coarse, or reading it is dear): the
 * meters over it get a value at those ticks, over the time since the last one. Set it before
 * the meters over the file are added (their period and window follow from it). */
API void ccm_set_file_period(struct engine *e, int file, int ticks) { e->files[file].period = ticks < 1 ? 1 : ticks; }

API void ccm_set_file_fd(struct engine *e, int file, int fd) {
    e->files[file].fd = fd;
    for (int i = 0; i < e->ninputs; i++)
        if (e->inputs[i].file == file)
            e->inputs[i].have_prev = 0;
}

static int by_key(const void *a, const void *b, void *arg) {
    struct engine *e = arg;
    return strcmp(e->inputs[*(const int *)a].key, e->inputs[*(const int *)b].key);
}

API int ccm_add_input(struct engine *e, int file, const char *key, uint32_t fields) {
    if (grow((void **)&e->inputs, e->ninputs, sizeof *e->inputs))
        return -1;
    struct input *in = &e->inputs[e->ninputs];
    in->file = file;
    snprintf(in->key, sizeof in->key, "%s", key ? key : "");
    in->fields = fields & 0x7FFFFFFFu;
    in->optional = (int)(fields >> 31);
    in->delta = NAN;
    in->cur = NAN;
    struct file *f = &e->files[file];
    if (grow((void **)&f->inputs, f->ninputs, sizeof(int)))
        return -1;
    f->inputs[f->ninputs++] = e->ninputs;
    qsort_r(f->inputs, (size_t)f->ninputs, sizeof(int), by_key, e);
    return e->ninputs++;
}

static int add_refs(struct engine *e, const int *idx, int n) {
    int off = e->nrefs;
    int *p = realloc(e->refs, (size_t)(e->nrefs + n + 1) * sizeof(int));
    if (!p)
        return -1;
    e->refs = p;
    memcpy(e->refs + off, idx, (size_t)n * sizeof(int));
    e->nrefs += n;
    return off;
}

static void clear_window(struct meter *m) {
    for (int i = 0; i < m->wcap; i++)
        m->w[i] = (struct slot){0, 0, NAN};
    m->head = m->filled = m->nvals = 0;
    m->sn = m->sd = 0;
    m->mn = m->mx = NAN;
    m->pushed = 0;
    m->qmin_h = m->qmin_n = m->qmax_h = m->qmax_n = 0;
    m->acc_n = m->acc_d = 0;
    m->last_t = 0;
    m->current = NAN;
}

static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

/* Every how many ticks all of a meter's files are read (the least common multiple of their
 * periods): the meter is computed and published at those ticks only. */
static int meter_period(struct engine *e, int off, int n, int period) {
    for (int i = 0; i < n; i++) {
        int p = e->files[e->inputs[e->refs[off + i]].file].period;
        if (period < 1000000 / p)
            period = period / gcd(period, p) * p;
    }
    return period;
}

API int ccm_add_meter(struct engine *e, int rec, int kind, double scale, double total_scale, double bias,
                      int has_total, const int *num, int nnum, const int *den, int nden) {
    if (grow((void **)&e->meters, e->nmeters, sizeof *e->meters))
        return -1;
    struct meter *m = &e->meters[e->nmeters];
    m->rec = rec;
    m->kind = kind;
    m->scale = scale;
    m->total_scale = total_scale;
    m->bias = bias;
    m->has_total = has_total;
    m->num_off = add_refs(e, num, nnum);
    m->nnum = nnum;
    m->den_off = add_refs(e, den, nden);
    m->nden = nden;
    if (m->num_off < 0 || m->den_off < 0)
        return -1;
    /* the window in ticks, then in the meter's readings (one every `period` ticks: the window
     * holds the same readings as a window of ticks would at the ticks that read them) */
    m->period = meter_period(e, m->den_off, nden, meter_period(e, m->num_off, nnum, 1));
    int64_t w = e->interval > 0 ? (e->window + e->interval / 2) / e->interval : 1;
    w = w < 1 ? 1 : w;
    w = (w + m->period - 1) / m->period;
    m->wcap = (int)w;
    m->w = malloc((size_t)m->wcap * sizeof *m->w);
    m->qmin = malloc((size_t)m->wcap * sizeof *m->qmin);
    m->qmax = malloc((size_t)m->wcap * sizeof *m->qmax);
    if (!m->w || !m->qmin || !m->qmax)
        return -1;
    clear_window(m);
    m->total = has_total ? 0.0 : NAN;
    return e->nmeters++;
}

/* Start a meter afresh (a thread slot that follows another thread): window, current value and
 * total cleared; `aux` goes into its record. */
API void ccm_reset_meter(struct engine *e, int meter, uint64_t aux) {
    struct meter *m = &e->meters[meter];
    clear_window(m);
    m->total = m->has_total ? 0.0 : NAN;
    m->aux = aux;
}

API int ccm_add_trigger(struct engine *e, int rec, int meter, double low, double high, int64_t dwell_ns) {
    if (grow((void **)&e->triggers, e->ntriggers, sizeof *e->triggers))
        return -1;
    struct trigger *t = &e->triggers[e->ntriggers];
    t->rec = rec;
    t->meter = meter;
    t->low = low;
    t->high = high;
    t->dwell = dwell_ns;
    t->state = CCM_LOW;
    t->value = NAN;
    return e->ntriggers++;
}

API int ccm_add_advice(struct engine *e, int rec, int min_workers, int max_workers, int64_t interval_ns,
                       int cut_one, const int *triggers, int ntriggers) {
    if (grow((void **)&e->advice, e->nadvice, sizeof *e->advice))
        return -1;
    struct advice *a = &e->advice[e->nadvice];
    a->rec = rec;
    a->min = min_workers;
    a->max = max_workers;
    a->allowed = max_workers;
    a->interval = interval_ns;
    a->cut_one = cut_one;
    a->changed = INT64_MIN / 2;
    a->trig_off = add_refs(e, triggers, ntriggers);
    a->ntrig = ntriggers;
    return a->trig_off < 0 ? -1 : e->nadvice++;
}

API void ccm_set_external(struct engine *e, int input, uint64_t raw, uint64_t en, uint64_t run, int ok) {
    struct input *in = &e->inputs[input];
    in->raw = raw;
    in->en = en;
    in->run = run;
    in->ok = ok;
}

/* ------------------------------------------------------------------------------------------
 * reading */

static void read_file(struct file *f, uint64_t tick) {
    f->due = tick % (uint64_t)f->period == 0;
    if (f->type == FILE_EXTERNAL || !f->due)
        return;
    ssize_t n;
    if (f->type == FILE_PERF || f->type == FILE_PERF_GROUP) {
        n = read(f->fd, f->buf, (size_t)f->cap);
    } else {
        for (;;) {
            n = pread(f->fd, f->buf, (size_t)f->cap - 1, 0);
            if (n < f->cap - 1)
                break;
            char *nb = realloc(f->buf, (size_t)f->cap * 2);      /* a bigger file than thought: */
            if (!nb)                                             /* grows once, then never again */
                break;
            f->buf = nb;
            f->cap *= 2;
        }
    }
    if (n <= 0) {
        f->ok = 0;
        f->err = n < 0 ? errno : ENODATA;
        f->len = 0;
        return;
    }
    f->ok = 1;
    f->err = 0;
    f->len = (int)n;
    if (f->type != FILE_PERF && f->type != FILE_PERF_GROUP)
        f->buf[n] = 0;
}

static uint64_t field_value(const char *s) {
    const char *eq = strchr(s, '=');
    return strtoull(eq ? eq + 1 : s, NULL, 10);
}

/* Sum the selected fields of the line after its key (tokens "k=v" give v). */
static int parse_fields(char *p, char *end, uint32_t mask, uint64_t *out) {
    uint64_t sum = 0;
    int seen = 0;
    for (int i = 0; i < MAX_FIELDS && p < end; i++) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p >= end)
            break;
        char *tok = p;
        while (p < end && *p != ' ' && *p != '\t')
            p++;
        if (mask & (1u << i)) {
            char c = *p;
            *p = 0;
            sum += field_value(tok);
            *p = c;
            seen++;
        }
    }
    *out = sum;
    return seen == __builtin_popcount(mask);
}

static void parse_keyed(struct engine *e, struct file *f) {
    for (int j = 0; j < f->ninputs; j++)
        e->inputs[f->inputs[j]].ok = 0;
    if (!f->ok)
        return;
    char *p = f->buf, *end = f->buf + f->len;
    while (p < end) {
        char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        char *k = p;
        while (k < eol && *k != ' ' && *k != '\t')
            k++;
        size_t klen = (size_t)(k - p);
        /* binary search for the first input with this key */
        int lo = 0, hi = f->ninputs;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            const char *mk = e->inputs[f->inputs[mid]].key;
            int c = strncmp(mk, p, klen);
            if (c == 0 && mk[klen] != 0)
                c = 1;
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (int j = lo; j < f->ninputs; j++) {
            struct input *in = &e->inputs[f->inputs[j]];
            if (strlen(in->key) != klen || strncmp(in->key, p, klen) != 0)
                break;
            in->ok = parse_fields(k, eol, in->fields, &in->raw);
        }
        p = eol + 1;
    }
}

static void parse_file(struct engine *e, struct file *f) {
    for (int j = 0; j < f->ninputs; j++)
        e->inputs[f->inputs[j]].sampled = 1;
    if (f->type == FILE_KEYED) {
        parse_keyed(e, f);
        return;
    }
    for (int j = 0; j < f->ninputs; j++) {
        struct input *in = &e->inputs[f->inputs[j]];
        if (f->type == FILE_EXTERNAL)
            continue;
        if (!f->ok) {
            in->ok = 0;
        } else if (f->type == FILE_PLAIN) {
            in->ok = parse_fields(f->buf, f->buf + f->len, in->fields, &in->raw);
        } else if (f->type == FILE_PERF_GROUP) {   /* nr, enabled, running, {value, ...} */
            uint64_t head[3], v;
            int at = 3 + (int)in->fields * f->stride;
            in->ok = f->len >= 8 * (at + 1);
            if (in->ok) {
                memcpy(head, f->buf, sizeof head);
                memcpy(&v, f->buf + 8 * at, sizeof v);
                in->ok = head[0] > in->fields;
                in->raw = v;
                in->en = head[1];
                in->run = head[2];
            }
        } else {                         /* perf: value, time enabled, time running */
            uint64_t v[3];
            in->ok = f->len >= 24;
            if (in->ok) {
                memcpy(v, f->buf, sizeof v);
                in->raw = v[0];
                in->en = v[1];
                in->run = v[2];
            }
        }
    }
}

static void input_delta(struct engine *e, struct input *in) {
    if (!in->sampled)
        return;                  /* not read at this tick: its last reading stands */
    int perf = e->files[in->file].type == FILE_PERF || e->files[in->file].type == FILE_PERF_GROUP ||
               (e->files[in->file].type == FILE_EXTERNAL && in->en != 0);
    in->delta = NAN;
    in->cur = in->ok ? (double)in->raw : NAN;
    if (!in->ok) {
        in->have_prev = 0;
        if (in->optional) {
            in->delta = 0;
            in->cur = 0;
        }
        return;
    }
    if (in->have_prev && in->raw >= in->praw) {
        double d = (double)(in->raw - in->praw);
        if (perf) {
            uint64_t den = in->en - in->pen, drun = in->run - in->prun;
            if (drun > 0)
                in->delta = drun >= den ? d : d * ((double)den / (double)drun);
            else if (den == 0)
                in->delta = d;       /* not enabled in this tick: nothing happened */
            /* enabled but never running: not counted, NaN */
        } else {
            in->delta = d;
        }
    }
    if (isnan(in->delta) && in->optional)
        in->delta = 0;
    in->praw = in->raw;
    in->pen = in->en;
    in->prun = in->run;
    in->have_prev = 1;
}

/* ------------------------------------------------------------------------------------------
 * computing */

static int sampled(struct engine *e, int off, int n) {
    for (int i = 0; i < n; i++)
        if (!e->inputs[e->refs[off + i]].sampled)
            return 0;
    return 1;
}

static double sum_delta(struct engine *e, int off, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += e->inputs[e->refs[off + i]].delta;       /* a NaN makes the sum NaN */
    return s;
}

/* The window's minimum and maximum: a monotonic queue each (the readings still in the window
 * that no later, smaller (larger) reading has made irrelevant, with their values), so a reading
 * costs O(1) amortised whatever the window, where rescanning the window whenever its minimum
 * or maximum left it cost O(window) a tick for a meter whose value often repeats (a rate of 0). */
static void queue_push(struct meter *m, struct qent *q, int *h, int *n, uint64_t p, double v, int lower) {
    while (*n > 0 && q[*h].p + (uint64_t)m->wcap <= p) {      /* left the window */
        *h = *h + 1 == m->wcap ? 0 : *h + 1;
        (*n)--;
    }
    if (isnan(v))
        return;
    while (*n > 0) {
        int back = *h + *n - 1;
        double bv = q[back >= m->wcap ? back - m->wcap : back].v;
        if (lower ? bv < v : bv > v)
            break;
        (*n)--;
    }
    int at = *h + *n;
    q[at >= m->wcap ? at - m->wcap : at] = (struct qent){p, v};
    (*n)++;
}

static void push(struct meter *m, double n, double d, double v) {
    struct slot *s = &m->w[m->head];
    if (m->filled == m->wcap) {         /* evict the oldest */
        m->sn -= s->n;
        m->sd -= s->d;
        if (!isnan(s->v))
            m->nvals--;
    } else {
        m->filled++;
    }
    uint64_t p = m->pushed++;
    *s = (struct slot){n, d, v};
    m->sn += n;
    m->sd += d;
    if (!isnan(v))
        m->nvals++;
    queue_push(m, m->qmin, &m->qmin_h, &m->qmin_n, p, v, 1);
    queue_push(m, m->qmax, &m->qmax_h, &m->qmax_n, p, v, 0);
    m->mn = m->qmin_n ? m->qmin[m->qmin_h].v : NAN;
    m->mx = m->qmax_n ? m->qmax[m->qmax_h].v : NAN;
    if (++m->head == m->wcap) {         /* once per window: sums afresh, no drift */
        m->head = 0;
        m->sn = m->sd = 0;
        for (int i = 0; i < m->filled; i++) {
            m->sn += m->w[i].n;
            m->sd += m->w[i].d;
        }
    }
}

/* A meter's reading at `now`, one of the ticks at which all its files were read. */
static void compute(struct engine *e, struct meter *m, int64_t now) {
    double n, d, v = NAN;
    double dt = m->last_t ? 1e-9 * (double)(now - m->last_t) : NAN;
    m->last_t = now;
    if (!sampled(e, m->num_off, m->nnum) || !sampled(e, m->den_off, m->nden)) {
        push(m, 0, 0, NAN);          /* not reached: the period says when they are read */
        return;
    }
    if (m->kind == CCM_GAUGE) {
        n = 0;
        for (int i = 0; i < m->nnum; i++)
            n += e->inputs[e->refs[m->num_off + i]].cur;
        v = isnan(n) ? NAN : m->scale * n + m->bias;
        if (isnan(v))
            push(m, 0, 0, NAN);
        else
            push(m, v, 1, v);
        m->current = v;
        return;
    }
    n = sum_delta(e, m->num_off, m->nnum);
    d = m->kind == CCM_RATE ? dt : sum_delta(e, m->den_off, m->nden);
    if (isnan(n) || isnan(d) || d < 0) {
        push(m, 0, 0, NAN);
        if (m->kind != CCM_RATIO)
            m->current = NAN;
        return;
    }
    if (m->has_total)
        m->total += m->total_scale * n;
    if (m->kind == CCM_RATE) {
        v = d > 0 ? m->scale * n / d : NAN;
        m->current = v;
    } else {
        m->acc_n += n;
        m->acc_d += d;
        if (m->acc_d > 0) {
            v = m->scale * m->acc_n / m->acc_d;
            m->current = v;
            m->acc_n = m->acc_d = 0;
        }
    }
    push(m, m->scale * n, d, v);
}

static void publish_meter(struct engine *e, struct meter *m, int64_t now) {
    struct ccm_meter_rec r;
    memset(&r, 0, sizeof r);
    r.count = (uint32_t)m->nvals;
    r.t_ns = now;
    r.current = m->current;
    r.avg = m->sd > 0 ? m->sn / m->sd : NAN;
    r.min = m->mn;
    r.max = m->mx;
    r.total = m->total;
    r.aux = m->aux;
    ccm_write_rec(e->base + e->h->meter_rec_off + (size_t)m->rec * e->h->meter_rec_size, &r, sizeof r);
}

static void wake(uint32_t *word) {
    __atomic_fetch_add(word, 1u, __ATOMIC_RELEASE);
    syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void event(struct engine *e, int kind, int index, int state, int previous, int64_t t, double value) {
    if (e->nevents == EVENTS) {
        e->dropped_events++;
        return;
    }
    struct ccm_event *ev = &e->events[e->nevents++];
    ev->kind = kind;
    ev->index = index;
    ev->state = state;
    ev->previous = previous;
    ev->t_ns = t;
    ev->value = value;
}

static void evaluate(struct engine *e, int ti, int64_t now) {
    struct trigger *t = &e->triggers[ti];
    struct meter *m = &e->meters[t->meter];
    double v = m->sd > 0 ? m->sn / m->sd : NAN;
    t->value = v;
    int crossing = !isnan(v) && (t->state == CCM_LOW ? v > t->high : v < t->low);
    if (!crossing) {
        t->pending = 0;
    } else {
        if (!t->pending)
            t->pending = now;
        if (now - t->pending >= t->dwell) {
            uint32_t prev = t->state;
            t->state = prev == CCM_LOW ? CCM_HIGH : CCM_LOW;
            if (t->state == CCM_HIGH)
                t->ups++;
            else
                t->downs++;
            t->transitions++;
            t->since = now;
            t->pending = 0;
            event(e, EV_TRIGGER, ti, (int)t->state, (int)prev, now, v);
        }
    }
    struct ccm_trigger_rec r;
    memset(&r, 0, sizeof r);
    r.state = t->state;
    r.t_ns = now;
    r.since_ns = t->since;
    r.value = v;
    r.pending_ns = t->pending;
    r.transitions = t->transitions;
    r.ups = t->ups;
    r.downs = t->downs;
    ccm_write_rec(e->base + e->h->trigger_rec_off + (size_t)t->rec * e->h->trigger_rec_size, &r, sizeof r);
}

static int advise(struct engine *e, int ai, int64_t now) {
    struct advice *a = &e->advice[ai];
    uint32_t high = 0;
    for (int i = 0; i < a->ntrig; i++)
        high += e->triggers[e->refs[a->trig_off + i]].state == CCM_HIGH;
    a->high = high;
    int prev = a->allowed, changed = 0;
    if (now - a->changed >= a->interval) {
        if (high > 0 && a->allowed > a->min) {
            a->allowed = a->cut_one ? a->allowed - 1 : a->allowed / 2;
            if (a->allowed < a->min)
                a->allowed = a->min;
            a->last = 1;
            changed = 1;
        } else if (high == 0 && a->allowed < a->max) {
            a->allowed++;
            a->last = 2;
            changed = 1;
        }
    }
    if (changed) {
        a->changed = now;
        a->changes++;
        event(e, EV_ADVICE, ai, a->allowed, prev, now, (double)high);
    }
    struct ccm_advice_rec r;
    memset(&r, 0, sizeof r);
    r.allowed = (uint32_t)a->allowed;
    r.t_ns = now;
    r.changed_ns = a->changed > 0 ? a->changed : 0;
    r.changes = a->changes;
    r.high_triggers = high;
    r.last = a->last;
    ccm_write_rec(e->base + e->h->advice_rec_off + (size_t)a->rec * e->h->advice_rec_size, &r, sizeof r);
    return changed;
}

/* One tick at time `now` (CLOCK_MONOTONIC ns; tests pass a virtual clock). Returns the number
 * of events (trigger or advice changes) waiting for ccm_events(). */
API int ccm_tick(struct engine *e, int64_t now) {
    uint64_t tick = e->tick++;
    for (int i = 0; i < e->nfiles; i++) {        /* each file read once, its inputs picked out */
        struct file *f = &e->files[i];
        read_file(f, tick);
        if (!f->due)
            continue;
        parse_file(e, f);
        for (int j = 0; j < f->ninputs; j++)
            input_delta(e, &e->inputs[f->inputs[j]]);
    }
    for (int i = 0; i < e->nmeters; i++) {       /* only the meters whose files were all read */
        struct meter *m = &e->meters[i];
        if (tick % (uint64_t)m->period != 0)
            continue;
        compute(e, m, now);
        m->t_ns = now;
        publish_meter(e, m, now);
    }
    int before = e->nevents;
    for (int i = 0; i < e->ntriggers; i++)
        evaluate(e, i, now);
    if (e->nevents != before)
        wake(&e->h->trigger_gen);
    int advised = 0;
    for (int i = 0; i < e->nadvice; i++)
        advised += advise(e, i, now);
    if (advised)
        wake(&e->h->advice_gen);
    __atomic_store_n(&e->h->heartbeat_ns, now, __ATOMIC_RELEASE);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    __atomic_store_n(&e->h->heartbeat_real_ns, (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec, __ATOMIC_RELEASE);
    __atomic_store_n(&e->h->ticks, e->h->ticks + 1, __ATOMIC_RELEASE);
    return e->nevents;
}

/* Sleep to each deadline t0 + k * interval and tick there, up to `max_ticks` times. Stops
 * early after a tick with events (why = 1) or when a signal interrupts the sleep (why = 2).
 * A deadline missed by more than an interval (the machine was busy) is not made up: the loop
 * goes on from the next one in the future and counts the ticks it lost in late_ticks. */
API int ccm_run(struct engine *e, int max_ticks, int32_t *why) {
    *why = WHY_ALL;
    if (!e->t0) {
        e->t0 = now_ns();
        e->k = 0;
    }
    for (int j = 0; j < max_ticks; j++) {
        int64_t deadline = e->t0 + e->k * e->interval;
        int64_t now = now_ns();
        if (now - deadline > e->interval) {
            int64_t k = (now - e->t0) / e->interval + 1;
            __atomic_store_n(&e->h->late_ticks, e->h->late_ticks + (uint64_t)(k - e->k), __ATOMIC_RELAXED);
            e->k = k;
            deadline = e->t0 + k * e->interval;
        }
        struct timespec at = {deadline / 1000000000LL, deadline % 1000000000LL};
        int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
        if (r == EINTR) {
            *why = WHY_SIGNAL;
            return j;
        }
        if (r != 0) {
            *why = WHY_ERROR;
            return j;
        }
        e->k++;
        if (ccm_tick(e, now_ns()) > 0) {
            *why = WHY_EVENT;
            return j + 1;
        }
    }
    return max_ticks;
}

/* Take the waiting events (struct ccm_event, 32 bytes each) into `out`; returns how many. */
API int ccm_events(struct engine *e, struct ccm_event *out, int max) {
    int n = e->nevents < max ? e->nevents : max;
    memcpy(out, e->events, (size_t)n * sizeof *out);
    memmove(e->events, e->events + n, (size_t)(e->nevents - n) * sizeof *out);
    e->nevents -= n;
    return n;
}

API uint64_t ccm_dropped_events(struct engine *e) { return e->dropped_events; }

/* ------------------------------------------------------------------------------------------
 * the reader, for Python (corecast.meters.board): the header's functions, exported */

API int ccmx_read_rec(const void *rec, void *out, int size) { return ccm_read_rec(rec, out, (size_t)size); }
API void ccmx_write_rec(void *rec, const void *in, int size) { ccm_write_rec(rec, in, (size_t)size); }

API int ccmx_open(ccm_board *b, const char *name) { return ccm_open(b, name); }
API void ccmx_close(ccm_board *b) { ccm_close(b); }
API int ccmx_board_size(void) { return (int)sizeof(ccm_board); }
API int ccmx_stale(const ccm_board *b, double max_age_s, char *why, int n) {
    return ccm_stale(b, max_age_s, why, (size_t)n);
}
API int ccmx_wait_change(const ccm_board *b, uint32_t gen, int timeout_ms) { return ccm_wait_change(b, gen, timeout_ms); }
API int ccmx_app_publish(ccm_board *b, const char *key, double value) { return ccm_app_publish(b, key, value); }
API uint64_t ccmx_pid_start(int pid) { return ccm_pid_start(pid); }
API int ccmx_attach(const char *name, const char *scope) { return cc_meters_attach(name, scope); }
API int ccmx_allowed_workers(const char *scope) { return cc_allowed_workers(scope); }
API int ccmx_throttle_point_as(int index) { return cc_throttle_point_as(index); }
API void ccmx_throttle_release(void) { cc_throttle_release(); }
API void ccmx_throttle_reset(void) { cc_throttle_reset(); }

/* Sizes and offsets of the layout, so that Python's mirror of it is checked at load. */
API int ccmx_layout(int64_t *out, int max) {
    int64_t v[] = {
        (int64_t)sizeof(struct ccm_header), (int64_t)sizeof(struct ccm_scope), (int64_t)sizeof(struct ccm_meter_desc),
        (int64_t)sizeof(struct ccm_meter_rec), (int64_t)sizeof(struct ccm_trigger_desc),
        (int64_t)sizeof(struct ccm_trigger_rec), (int64_t)sizeof(struct ccm_advice_desc),
        (int64_t)sizeof(struct ccm_advice_rec), (int64_t)sizeof(struct ccm_app_header),
        (int64_t)sizeof(struct ccm_app_slot),
        (int64_t)offsetof(struct ccm_header, heartbeat_ns), (int64_t)offsetof(struct ccm_header, trigger_gen),
        (int64_t)offsetof(struct ccm_header, advice_gen), (int64_t)offsetof(struct ccm_header, late_ticks),
        (int64_t)offsetof(struct ccm_header, name), (int64_t)offsetof(struct ccm_meter_desc, source),
        (int64_t)offsetof(struct ccm_meter_rec, total), (int64_t)offsetof(struct ccm_trigger_desc, actions),
        (int64_t)offsetof(struct ccm_trigger_rec, transitions), (int64_t)offsetof(struct ccm_advice_desc, policy),
        (int64_t)offsetof(struct ccm_advice_rec, high_triggers), (int64_t)offsetof(struct ccm_app_slot, owner),
        (int64_t)sizeof(struct ccm_event),
    };
    int n = (int)(sizeof v / sizeof v[0]);
    for (int i = 0; i < n && i < max; i++)
        out[i] = v[i];
    return n;
}
