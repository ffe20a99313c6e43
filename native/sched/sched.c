/* The per-quantum loop of corecast's AMP scheduling simulator for the ranked policies.
 *
 * src/corecast/sched/engine.py is the reference: between two events (a thread's part of a phase
 * ends) a ranked policy (A-DWRR, EQP, ACFS: src/corecast/sched/policies.py) orders the runnable
 * threads every quantum and fills the cores fastest first; this file does exactly that, quantum
 * after quantum, and returns to Python at the first event, at `until`, or past `max_time`.
 * Every formula below has its twin in engine.py, policies.py, policy.py or sfsource.py, in the
 * same order of operations; tests/test_sched_engine.py holds the two loops equal.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef struct {
    int64_t T, K, A;
    int64_t kind;            /* 1 adwrr, 2 eqp, 3 acfs, 4 acfs against a big core */
    int64_t source;          /* 0 true, 1 ipc-sampling, 2 model */
    int64_t any_dynamic;
    double t, next_dec, until, max_time, quantum, mig_cost, idle_power;
    double energy, migrations;
    int64_t decisions;
    /* machine (K) */
    const double *counts, *speeds, *active_w, *idle_w, *pos;
    double *busy;
    /* threads */
    const int64_t *app;
    const double *weight;
    const uint8_t *runnable, *tdyn;
    const double *R;         /* T*K */
    double *seg_left, *S, *last_row, *cpu, *rtime, *work, *progress, *sf_seen;
    double *alone_progress, *alone_rate;
    int64_t *dom;
    const double *sf_true, *sf_est_rows;   /* T, T*K */
    const double *offset;    /* adwrr: T */
    uint8_t *needs_sample;   /* T*K */
    /* applications */
    double *pool;
    const uint8_t *dynamic, *finished;
    const double *app_threads, *app_weight;
    /* IPC sampler */
    double *acc_cpu, *acc_work, *last, *avg, *nsmp, *ssf;
    uint8_t *valid;
    double window, noise, threshold, round_s, next_round;
    uint64_t rng;
    int64_t samples, phase_rounds;
    /* out */
    int64_t *done, ndone, *apps_done, napps_done;
    /* scratch: T doubles x4, T int64 x3, A doubles */
    double *key, *key2, *rate, *wbuf;
    int64_t *order, *tmp, *run;
    double *abuf;
} cc_sched;

/* ---------------------------------------------------------------- splitmix64 + Box-Muller */
static uint64_t sm_next(uint64_t *s) {
    *s += 0x9E3779B97F4A7C15ULL;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double sm_uniform(uint64_t *s) { return ((double)(sm_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static double sm_normal(uint64_t *s) {
    double u1 = sm_uniform(s), u2 = sm_uniform(s);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.141592653589793 * u2);
}

/* ---------------------------------------------------------------- ordering */
static cc_sched *g;   /* for the comparators (the library is not re-entrant; Python holds the GIL) */

static int cmp_asc(const void *a, const void *b) {
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    double x = g->key[i], y = g->key[j];
    if (x < y) return -1;
    if (x > y) return 1;
    return (i > j) - (i < j);
}
static int cmp_desc(const void *a, const void *b) {
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    double x = -g->key[i], y = -g->key[j];
    if (x < y) return -1;
    if (x > y) return 1;
    return (i > j) - (i < j);
}
static int cmp_acfs(const void *a, const void *b) {
    /* lexsort((-sd, -appkey)): by -appkey, then -sd, then index */
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    double x = -g->key2[i], y = -g->key2[j];
    if (x < y) return -1;
    if (x > y) return 1;
    x = -g->key[i]; y = -g->key[j];
    if (x < y) return -1;
    if (x > y) return 1;
    return (i > j) - (i < j);
}

/* fair_shares (policy.py): shares of cap cores by weight, none above 1, water-filling */
static void fair_shares(cc_sched *s, const int64_t *th, int64_t n, double cap, double *share) {
    if (cap >= (double)n) { for (int64_t j = 0; j < n; j++) share[j] = 1.0; return; }
    uint8_t *free_ = (uint8_t *)s->tmp;        /* n bytes of scratch */
    for (int64_t j = 0; j < n; j++) { share[j] = 0.0; free_[j] = 1; }
    for (;;) {
        double sw = 0.0;
        for (int64_t j = 0; j < n; j++) if (free_[j]) sw += s->weight[th[j]];
        int64_t over = 0;
        for (int64_t j = 0; j < n; j++) if (free_[j] && cap * s->weight[th[j]] / sw > 1.0) over++;
        if (!over) {
            for (int64_t j = 0; j < n; j++) if (free_[j]) share[j] = cap * s->weight[th[j]] / sw;
            return;
        }
        int64_t left = 0;
        for (int64_t j = 0; j < n; j++)
            if (free_[j] && cap * s->weight[th[j]] / sw > 1.0) { share[j] = 1.0; free_[j] = 2; }
        for (int64_t j = 0; j < n; j++) { if (free_[j] == 2) free_[j] = 0; left += free_[j] != 0; }
        cap -= (double)over;
        if (cap <= 0 || !left) return;
    }
}

/* ---------------------------------------------------------------- one decision */
static void sf_update(cc_sched *s) {
    int64_t T = s->T, K = s->K;
    if (s->source == 0) {
        memcpy(s->sf_seen, s->sf_true, T * sizeof(double));
    } else if (s->source == 2) {
        for (int64_t i = 0; i < T; i++) s->sf_seen[i] = s->sf_est_rows[i * K + s->dom[i]];
    } else {
        memcpy(s->sf_seen, s->ssf, T * sizeof(double));
        for (int64_t i = 0; i < T * K; i++) s->needs_sample[i] = (!s->valid[i]) && s->runnable[i / K];
    }
}

/* engine._alone_rates: a thread's rate were its application alone with its present TLP */
static void alone_rates(cc_sched *s) {
    int64_t T = s->T, K = s->K;
    for (int64_t a = 0; a < s->A; a++) s->abuf[a] = 0.0;
    for (int64_t i = 0; i < T; i++) if (s->runnable[i]) s->abuf[s->app[i]] += 1.0;
    for (int64_t i = 0; i < T; i++) {
        double n = s->abuf[s->app[i]], left = n, acc = 0.0;
        for (int64_t k = 0; k < K; k++) {
            double used = s->counts[k] < left ? s->counts[k] : left;
            left = left - used;
            acc = acc + used / (1.0 + (s->sf_seen[i] - 1.0) * s->pos[k]);
        }
        s->alone_rate[i] = n == 0 ? 1.0 : acc / (n > 1 ? n : 1);
    }
}

static void decide(cc_sched *s) {
    int64_t T = s->T, K = s->K, n = 0;
    sf_update(s);
    alone_rates(s);
    for (int64_t i = 0; i < T; i++) if (s->runnable[i]) s->run[n++] = i;
    s->decisions++;
    for (int64_t i = 0; i < T * K; i++) s->S[i] = 0.0;
    if (n == 0) goto charge;
    /* the ranking */
    g = s;
    if (s->kind == 1) {                     /* A-DWRR: least weighted scaled CPU time first */
        for (int64_t j = 0; j < n; j++) {
            int64_t i = s->run[j];
            double sc = 0.0;
            for (int64_t k = 0; k < K; k++) sc += s->cpu[i * K + k] * s->speeds[k];
            s->key[i] = sc / s->weight[i] * 1024.0 + s->offset[i];
        }
        memcpy(s->order, s->run, n * sizeof(int64_t));
        qsort(s->order, n, sizeof(int64_t), cmp_asc);
    } else if (s->kind == 2) {              /* EQP: highest (cb + cs) / (cb + cs / SF) first */
        for (int64_t j = 0; j < n; j++) {
            int64_t i = s->run[j];
            double cb = s->cpu[i * K], cs = 0.0;
            for (int64_t k = 1; k < K; k++) cs += s->cpu[i * K + k];
            double sf = s->sf_seen[i] > 1e-9 ? s->sf_seen[i] : 1e-9;
            double tot = cb + cs, den = cb + cs / sf;
            s->key[i] = tot > 0 ? tot / (den > 1e-300 ? den : 1e-300) : 1.0;
        }
        memcpy(s->order, s->run, n * sizeof(int64_t));
        qsort(s->order, n, sizeof(int64_t), cmp_desc);
    } else {                                /* ACFS: most slowed applications, then threads */
        for (int64_t a = 0; a < s->A; a++) s->abuf[a] = 0.0;
        const double *prog = s->kind == 3 ? s->alone_progress : s->progress;
        for (int64_t i = 0; i < T; i++) {
            double p = prog[i];
            s->key[i] = p > 1e-12 ? s->rtime[i] / (p > 1e-12 ? p : 1e-12) : 1.0;
            s->abuf[s->app[i]] += s->key[i];
        }
        for (int64_t a = 0; a < s->A; a++) s->abuf[a] = s->abuf[a] / s->app_threads[a] * s->app_weight[a] / 1024.0;
        for (int64_t i = 0; i < T; i++) s->key2[i] = s->abuf[s->app[i]];
        memcpy(s->order, s->run, n * sizeof(int64_t));
        qsort(s->order, n, sizeof(int64_t), cmp_acfs);
    }
    /* sample_first: IPC sampling's wishes go first (big) and last (slowest) */
    if (s->source == 1) {
        int any = 0;
        for (int64_t i = 0; i < T * K && !any; i++) any = s->needs_sample[i];
        if (any) {
            int64_t nb = 0, ns = 0, nm = 0, B = (int64_t)s->counts[0];
            int64_t *big = s->tmp, *mid = s->run;           /* run is free again */
            uint8_t *mark = (uint8_t *)s->rate;             /* T bytes */
            memset(mark, 0, T);
            for (int64_t j = 0; j < n; j++) {
                int64_t i = s->order[j];
                if (s->needs_sample[i * K] && nb < B) { big[nb++] = i; mark[i] = 1; }
            }
            for (int64_t j = 0; j < n; j++) {
                int64_t i = s->order[j];
                if (!mark[i] && s->needs_sample[i * K + K - 1] && !s->needs_sample[i * K]) mark[i] = 2, ns++;
            }
            int64_t *out = (int64_t *)s->wbuf;              /* T int64 */
            int64_t p = 0;
            for (int64_t j = 0; j < nb; j++) out[p++] = big[j];
            for (int64_t j = 0; j < n; j++) if (!mark[s->order[j]]) { out[p++] = s->order[j]; nm++; }
            for (int64_t j = 0; j < n; j++) if (mark[s->order[j]] == 2) out[p++] = s->order[j];
            memcpy(s->order, out, n * sizeof(int64_t));
        }
    }
    /* ranked: fastest cores first, one thread each; the rest share the slowest type */
    {
        int64_t pos = 0;
        for (int64_t k = 0; k < K && pos < n; k++) {
            int64_t c = (int64_t)s->counts[k];
            if (k == K - 1 && n - pos > c) {
                double *sh = s->key2;     /* free now */
                fair_shares(s, s->order + pos, n - pos, s->counts[k], sh);
                for (int64_t j = 0; j < n - pos; j++) s->S[s->order[pos + j] * K + k] = sh[j];
                pos = n;
                break;
            }
            int64_t take = n - pos < c ? n - pos : c;
            for (int64_t j = 0; j < take; j++) s->S[s->order[pos + j] * K + k] = 1.0;
            pos += take;
        }
    }
charge:
    /* _charge_migrations */
    for (int64_t i = 0; i < T; i++) {
        double tot = 0.0, had = 0.0;
        for (int64_t k = 0; k < K; k++) { tot += s->S[i * K + k]; had += s->last_row[i * K + k]; }
        if (!(tot > 0)) continue;
        double moved = 0.0, rr = 0.0, best = -1.0;
        int64_t bk = 0;
        for (int64_t k = 0; k < K; k++) {
            double row = s->S[i * K + k] / tot;
            moved += fabs(row - s->last_row[i * K + k]);
            rr += row * s->R[i * K + k];
            if (row > best) { best = row; bk = k; }
            s->last_row[i * K + k] = row;
        }
        moved = had > 0 ? 0.5 * moved : 0.0;
        if (K > 1) s->dom[i] = bk;
        if (moved > 1e-12) {
            s->migrations += moved;
            if (s->mig_cost > 0) {
                double extra = moved * s->mig_cost * rr;
                if (!s->tdyn[i]) s->seg_left[i] += extra;
                else s->pool[s->app[i]] += extra;
            }
        }
    }
}

/* ---------------------------------------------------------------- the sampler (sfsource.py) */
static void sampler_advance(cc_sched *s, double t_end, double dt) {
    int64_t T = s->T, K = s->K;
    if (K < 2) return;
    for (int64_t i = 0; i < T * K; i++) {
        s->acc_cpu[i] += s->S[i] * dt;
        s->acc_work[i] += s->S[i] * s->R[i] * dt;
    }
    double lim = s->window * (1 - 1e-9);
    for (int64_t i = 0; i < T; i++) {
        for (int64_t k = 0; k < K; k++) {
            int64_t ik = i * K + k;
            if (!(s->acc_cpu[ik] >= lim)) continue;
            double v = s->acc_work[ik] / s->acc_cpu[ik];
            s->acc_cpu[ik] = 0;
            s->acc_work[ik] = 0;
            s->samples++;
            if (s->noise > 0) v = v * exp(s->noise * sm_normal(&s->rng));
            double a = s->avg[ik], nn = s->nsmp[ik];
            if (nn != 0 && fabs(v - a) > s->threshold * a) {
                s->phase_rounds++;
                for (int64_t k2 = 0; k2 < K; k2++) s->valid[i * K + k2] = 0;
                s->avg[ik] = v;
                s->nsmp[ik] = 1;
            } else {
                s->avg[ik] = (a * nn + v) / (nn + 1);
                s->nsmp[ik] = nn + 1;
            }
            s->last[ik] = v;
            s->valid[ik] = 1;
            if (s->valid[i * K] && s->valid[i * K + K - 1]) s->ssf[i] = s->last[i * K] / s->last[i * K + K - 1];
        }
    }
    if (t_end >= s->next_round - 1e-12) {
        memset(s->valid, 0, T * K);
        for (int64_t i = 0; i < T * K; i++) s->nsmp[i] = 0;
        s->next_round = t_end + s->round_s;
    }
}

/* ---------------------------------------------------------------- the loop
 * Returns 0 at `until`, 1 at an event (done / apps_done filled), 2 past max_time,
 * 3 when nothing can progress. */
API int cc_sched_run(cc_sched *s) {
    int64_t T = s->T, K = s->K, A = s->A;
    double q = s->quantum, eps = 1e-12;
    double *rate = s->rate;
    for (;;) {
        /* rates and the next event */
        double fin = INFINITY;
        for (int64_t i = 0; i < T; i++) {
            double r = 0.0;
            for (int64_t k = 0; k < K; k++) r += s->S[i * K + k] * s->R[i * K + k];
            rate[i] = r;
            if (r > 0 && !s->tdyn[i]) { double f = s->seg_left[i] / r; if (f < fin) fin = f; }
        }
        if (s->any_dynamic) {
            for (int64_t a = 0; a < A; a++) s->abuf[a] = 0.0;
            for (int64_t i = 0; i < T; i++) s->abuf[s->app[i]] += rate[i];
            for (int64_t a = 0; a < A; a++)
                if (s->dynamic[a] && s->abuf[a] > 0) { double f = s->pool[a] / s->abuf[a]; if (f < fin) fin = f; }
        }
        double dt = s->next_dec - s->t;
        if (fin < dt) dt = fin;
        int stop = s->t + dt >= s->until;
        if (stop) dt = s->until - s->t > 0 ? s->until - s->t : 0.0;
        if (!isfinite(dt)) return 3;
        if (dt > 0) {
            for (int64_t i = 0; i < T; i++) s->seg_left[i] -= rate[i] * dt;
            if (s->any_dynamic) for (int64_t a = 0; a < A; a++) s->pool[a] -= s->abuf[a] * dt;
            double busyv[16] = {0};
            for (int64_t i = 0; i < T; i++) {
                double pr = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    double x = s->S[i * K + k];
                    s->cpu[i * K + k] += x * dt;
                    busyv[k] += x;
                    pr += x / (1.0 + (s->sf_seen[i] - 1.0) * s->pos[k]);
                }
                s->work[i] += rate[i] * dt;
                if (s->runnable[i]) s->rtime[i] += dt;
                if (K == 1) pr = s->S[i * K];
                s->progress[i] += pr * dt;
                s->alone_progress[i] += pr * dt / s->alone_rate[i];
            }
            double e = 0.0;
            for (int64_t k = 0; k < K; k++) { s->busy[k] += busyv[k] * dt; e += busyv[k] * (s->active_w[k] - s->idle_w[k]); }
            s->energy += (s->idle_power + e) * dt;
            s->t += dt;
            if (s->source == 1) sampler_advance(s, s->t, dt);
        }
        if (stop) return 0;
        if (s->t > s->max_time) return 2;
        /* events */
        s->ndone = 0;
        s->napps_done = 0;
        if (fin <= dt + eps * (s->t > 1.0 ? s->t : 1.0)) {
            double m = q > dt ? q : dt;
            for (int64_t i = 0; i < T; i++)
                if (rate[i] > 0 && !s->tdyn[i] && s->seg_left[i] <= 1e-9 * rate[i] * m + 1e-15) s->done[s->ndone++] = i;
            if (s->any_dynamic)
                for (int64_t a = 0; a < A; a++)
                    if (s->dynamic[a] && !s->finished[a] && s->abuf[a] > 0 && s->pool[a] <= 1e-9 * s->abuf[a] * m + 1e-15)
                        s->apps_done[s->napps_done++] = a;
        }
        if (s->ndone || s->napps_done) return 1;
        if (s->t >= s->next_dec - eps * (s->t > 1.0 ? s->t : 1.0)) {
            decide(s);
            s->next_dec = (floor(s->t / q + 1e-9) + 1) * q;
        }
    }
}
