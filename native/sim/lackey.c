/* Fast parser of valgrind lackey `--trace-mem=yes` output, and the annotation pass that adds
 * branch and uop records after instruction fetches.
 *
 * Lackey lines:   "I  04016b0,3"   instruction fetch of 3 bytes at 0x4016b0
 *                 " L 1ffefffd58,8" load, " S ..." store, " M ..." read-modify-write
 * valgrind's own lines start with "==PID==" or "--PID--"; with --trace-sched=yes the lines
 * "--PID--   SCHED[N]: ..." say which thread runs (valgrind numbers threads from 1). */
#include <stdlib.h>
#include <string.h>

#include "ccsim.h"

static signed char HEX[256];
static int hex_ready;

static void hex_init(void) {
    if (hex_ready) return;
    for (int i = 0; i < 256; i++) HEX[i] = -1;
    for (int i = 0; i < 10; i++) HEX['0' + i] = (signed char)i;
    for (int i = 0; i < 6; i++) {
        HEX['a' + i] = (signed char)(10 + i);
        HEX['A' + i] = (signed char)(10 + i);
    }
    hex_ready = 1;
}

static int is_marker(const cc_lackey_state *st, uint64_t pc) {
    size_t lo = 0, hi = st->nmarkers;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (st->markers[mid] < pc) lo = mid + 1;
        else hi = mid;
    }
    return lo < st->nmarkers && st->markers[lo] == pc;
}

static void keep_message(cc_lackey_state *st, const char *p, const char *e) {
    /* thread switches */
    const char *q = memchr(p, 'S', (size_t)(e - p));
    while (q && q + 6 < e) {
        if (!memcmp(q, "SCHED[", 6)) {
            unsigned v = 0;
            const char *d = q + 6;
            while (d < e && *d >= '0' && *d <= '9') v = v * 10 + (unsigned)(*d++ - '0');
            if (d < e && *d == ']' && v >= 1) {
                st->tid = (uint16_t)(v - 1);
                if (st->tid > st->max_tid) st->max_tid = st->tid;
            }
            return; /* scheduler chatter is not kept */
        }
        q = memchr(q + 1, 'S', (size_t)(e - q - 1));
    }
    st->messages++;
    size_t n = (size_t)(e - p) + 1;
    if (st->msg && st->msg_len + n <= st->msg_cap) {
        memcpy(st->msg + st->msg_len, p, n - 1);
        st->msg[st->msg_len + n - 1] = '\n';
        st->msg_len += n;
    } else {
        st->msg_dropped++;
    }
}

size_t cc_lackey_parse(cc_lackey_state *st, const char *buf, size_t len, int final, cc_rec *out,
                       size_t cap, size_t *nout) {
    hex_init();
    const char *p = buf, *end = buf + len;
    size_t n = 0;
    while (p < end) {
        if (n + 2 > cap) break; /* room for a marker and a record */
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        if (!nl && !final) break;
        st->lines++;
        int kind = -1;
        const char *q = NULL;
        if (e - p >= 4) {
            if (p[0] == 'I' && p[1] == ' ' && p[2] == ' ') {
                kind = CC_K_FETCH;
                q = p + 3;
            } else if (p[0] == ' ' && p[2] == ' ') {
                switch (p[1]) {
                case 'L': kind = CC_K_LOAD; break;
                case 'S': kind = CC_K_STORE; break;
                case 'M': kind = CC_K_MODIFY; break;
                default: break;
                }
                q = p + 3;
            }
        }
        int ok = 0;
        if (kind >= 0) {
            uint64_t a = 0;
            const char *h = q;
            signed char v;
            while (h < e && (v = HEX[(unsigned char)*h]) >= 0) {
                a = (a << 4) | (uint64_t)v;
                h++;
            }
            if (h > q && h < e && *h == ',') {
                unsigned sz = 0;
                const char *d = h + 1;
                while (d < e && *d >= '0' && *d <= '9') sz = sz * 10 + (unsigned)(*d++ - '0');
                if (d > h + 1 && (d == e || *d == '\r') && sz > 0) {
                    if (sz > 255) sz = 255;
                    if (kind == CC_K_FETCH && st->nmarkers && is_marker(st, a)) {
                        cc_rec *m = &out[n++];
                        m->addr = a;
                        m->aux = 0;
                        m->tid = st->tid;
                        m->kind = CC_K_MARKER;
                        m->size = 0;
                    }
                    cc_rec *r = &out[n++];
                    r->addr = a;
                    r->aux = 0;
                    r->tid = st->tid;
                    r->kind = (uint8_t)kind;
                    r->size = (uint8_t)sz;
                    st->trace_lines++;
                    ok = 1;
                }
            }
        }
        if (!ok) {
            if (e > p && (p[0] == '=' || p[0] == '-')) {
                keep_message(st, p, e);
            } else if (e > p) {
                st->bad_lines++;
                if (!st->first_bad_line) st->first_bad_line = st->lines;
            }
        }
        p = nl ? nl + 1 : end;
    }
    *nout = n;
    return (size_t)(p - buf);
}

/* ------------------------------------------------------------------------------------ */
/* annotation */

typedef struct {
    uint64_t pc;
    uint32_t uop_start;
    uint8_t len, brflags, nuops, missing;   /* missing: looked for and not decoded (online) */
} ainfo;

typedef struct {
    uint64_t pc, next;
    uint8_t brflags, active;
} pending_t;

struct cc_annot {
    ainfo *tab;
    uint64_t mask, n;                  /* slots - 1, entries */
    uint64_t *uops;
    uint64_t nuops_total, nuops_cap;
    pending_t pend[65536 / 64]; /* per thread (tid & 1023) */
    uint64_t found, missing;
};

static inline uint64_t hmix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static int annot_grow(cc_annot *a, uint64_t want) {
    uint64_t size = a->mask + 1;
    if (a->tab && want * 2 <= size) return 0;
    while (size < want * 2) size <<= 1;
    ainfo *t = calloc(size, sizeof *t);
    if (!t) return -1;
    for (uint64_t i = 0; a->tab && i <= a->mask; i++) {
        if (!a->tab[i].len) continue;
        uint64_t h = hmix(a->tab[i].pc) & (size - 1);
        while (t[h].len) h = (h + 1) & (size - 1);
        t[h] = a->tab[i];
    }
    free(a->tab);
    a->tab = t;
    a->mask = size - 1;
    return 0;
}

/* Add n decoded instructions (uop_start indexes `uops`, which holds their uops); an instruction
 * already there is replaced. `missing` (may be NULL): those looked for and not decoded, whose
 * fetches get the placeholder uop and count as missing, as an instruction never added does.
 * 0, or -1 out of memory. */
int cc_annot_add(cc_annot *a, const uint64_t *pcs, const uint8_t *lens, const uint8_t *brflags,
                 const uint32_t *uop_start, const uint8_t *uop_count, const uint64_t *uops, uint64_t n,
                 const uint8_t *missing) {
    if (annot_grow(a, a->n + n)) return -1;
    uint64_t nu = 0;
    for (uint64_t i = 0; i < n; i++)
        if ((uint64_t)uop_start[i] + uop_count[i] > nu) nu = (uint64_t)uop_start[i] + uop_count[i];
    if (a->nuops_total + nu > a->nuops_cap) {
        uint64_t cap = a->nuops_cap ? a->nuops_cap : 1024;
        while (cap < a->nuops_total + nu) cap *= 2;
        uint64_t *u = realloc(a->uops, cap * sizeof *u);
        if (!u) return -1;
        a->uops = u;
        a->nuops_cap = cap;
    }
    if (nu) memcpy(a->uops + a->nuops_total, uops, nu * sizeof *uops);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pc = pcs[i];
        uint64_t h = hmix(pc) & a->mask;
        while (a->tab[h].len && a->tab[h].pc != pc) h = (h + 1) & a->mask;
        if (!a->tab[h].len) a->n++;
        a->tab[h].pc = pc;
        a->tab[h].len = lens[i] ? lens[i] : 1;
        a->tab[h].brflags = brflags[i];
        a->tab[h].uop_start = (uint32_t)(a->nuops_total + uop_start[i]);
        a->tab[h].nuops = uop_count[i];
        a->tab[h].missing = missing ? missing[i] : 0;
    }
    a->nuops_total += nu;
    return 0;
}

cc_annot *cc_annot_new(const uint64_t *pcs, const uint8_t *lens, const uint8_t *brflags,
                       const uint32_t *uop_start, const uint8_t *uop_count, const uint64_t *uops,
                       uint64_t n) {
    cc_annot *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    if (annot_grow(a, n > 8 ? n : 8) || cc_annot_add(a, pcs, lens, brflags, uop_start, uop_count, uops, n, NULL)) {
        cc_annot_free(a);
        return NULL;
    }
    return a;
}

void cc_annot_free(cc_annot *a) {
    if (!a) return;
    free(a->tab);
    free(a->uops);
    free(a);
}

void cc_annot_counts(const cc_annot *a, uint64_t *found, uint64_t *missing) {
    *found = a->found;
    *missing = a->missing;
}

static inline const ainfo *lookup_any(const cc_annot *a, uint64_t pc) {
    uint64_t h = hmix(pc) & a->mask;
    while (a->tab[h].len) {
        if (a->tab[h].pc == pc) return &a->tab[h];
        h = (h + 1) & a->mask;
    }
    return NULL;
}

static inline const ainfo *lookup(const cc_annot *a, uint64_t pc) {
    const ainfo *i = lookup_any(a, pc);
    return i && !i->missing ? i : NULL;
}

static inline size_t emit_branch(pending_t *pd, uint64_t next_pc, uint16_t tid, cc_rec *out) {
    cc_rec *r = out;
    int taken = next_pc != pd->next;
    int64_t delta = (int64_t)(next_pc - pd->pc);
    r->addr = pd->pc;
    r->aux = (delta > INT32_MAX || delta < INT32_MIN) ? 0 : (uint32_t)(int32_t)delta;
    r->tid = tid;
    r->kind = CC_K_BRANCH;
    r->size = (uint8_t)((pd->brflags & ~CC_BR_TAKEN) | (taken ? CC_BR_TAKEN : 0));
    pd->active = 0;
    return 1;
}

/* The unknown instructions of a batch (online annotation): the address of each fetch whose
 * instruction is neither decoded nor known missing, into pcs (at most cap; repeats
 * included); returns how many. */
size_t cc_annot_unknown(const cc_annot *a, const cc_rec *in, size_t n, uint64_t *pcs, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++)
        if (in[i].kind == CC_K_FETCH && !lookup_any(a, in[i].addr)) pcs[k++] = in[i].addr;
    return k;
}

static size_t annotate(cc_annot *a, const cc_rec *in, size_t n, cc_rec *out, int stop, size_t *consumed);

size_t cc_annotate(cc_annot *a, const cc_rec *in, size_t n, cc_rec *out, int final) {
    (void)final; /* a branch still pending at the very end has no known outcome: dropped */
    return annotate(a, in, n, out, 0, NULL);
}

/* cc_annotate that stops before the first fetch of an unknown instruction (online: its
 * decoding is looked for, then the batch goes on from there); `consumed` says where. */
size_t cc_annotate_until_unknown(cc_annot *a, const cc_rec *in, size_t n, cc_rec *out, size_t *consumed) {
    return annotate(a, in, n, out, 1, consumed);
}

static size_t annotate(cc_annot *a, const cc_rec *in, size_t n, cc_rec *out, int stop, size_t *consumed) {
    size_t o = 0, i = 0;
    for (; i < n; i++) {
        const cc_rec *r = &in[i];
        if (r->kind != CC_K_FETCH) {
            out[o++] = *r;
            continue;
        }
        if (stop && !lookup_any(a, r->addr)) break;
        pending_t *pd = &a->pend[r->tid & 1023];
        if (pd->active) o += emit_branch(pd, r->addr, r->tid, &out[o]);
        const ainfo *inf = lookup(a, r->addr);
        if (inf && (inf->brflags & CC_ANNOT_MARKER)) {
            cc_rec *m = &out[o++];
            m->addr = r->addr;
            m->aux = 0;
            m->tid = r->tid;
            m->kind = CC_K_MARKER;
            m->size = 0;
        }
        out[o++] = *r;
        if (!inf) {
            a->missing++;
            cc_rec *u = &out[o++];
            /* placeholder: one independent ALU uop */
            u->addr = 0x0000ffffffffffffULL | ((uint64_t)CC_UNIT_ALU << 48) |
                      ((uint64_t)(CC_UOP_FIRST | CC_UOP_PLACEHOLDER) << 56);
            u->aux = 0;
            u->tid = r->tid;
            u->kind = CC_K_UOP;
            u->size = 0;
            continue;
        }
        a->found++;
        for (int k = 0; k < inf->nuops; k++) {
            cc_rec *u = &out[o++];
            uint64_t w = a->uops[inf->uop_start + k];
            if (k == 0) w |= (uint64_t)CC_UOP_FIRST << 56;
            u->addr = w;
            u->aux = 0;
            u->tid = r->tid;
            u->kind = CC_K_UOP;
            u->size = 0;
        }
        if (inf->brflags & ~CC_ANNOT_MARKER) {
            pd->active = 1;
            pd->pc = r->addr;
            pd->next = r->addr + inf->len;
            pd->brflags = inf->brflags & (uint8_t)~CC_ANNOT_MARKER;
        }
    }
    if (consumed) *consumed = i;
    return o;
}
