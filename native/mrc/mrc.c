/* Miss-rate curves in one pass over a trace (driven from Python by ctypes: src/corecast/sim/mrc.py).
 *
 * Exact LRU stack distances (Mattson's stack algorithm, counted with Olken's method): every line's
 * most recent access holds a mark at its position in time, in a Fenwick tree; the stack distance
 * of an access is the number of marks after the line's previous position (the distinct lines
 * touched since). A fully associative LRU cache of S lines hits exactly the accesses whose
 * distance is below S, so one histogram of distances is the miss curve for every size at once.
 * Memory is proportional to the distinct lines, not to the trace: when the time axis fills up,
 * the live marks are renumbered 1..live (compaction, amortised O(1) per access).
 *
 * Spatial sampling (SHARDS, Waldspurger et al., FAST'15): only lines whose hash falls under a
 * threshold T of a modulus P are tracked (rate R = T/P); their distances are scaled by 1/R and
 * each counts 1/R accesses; Python applies the SHARDS_adj correction from the counts kept here.
 *
 * Fixed-size SHARDS (the same paper's bounded variant, cc_sd_set_max): at most s_max lines are
 * tracked. When a new line would make s_max + 1, the tracked line of the largest hash leaves
 * the stack (its mark, its slot) and the threshold falls to its hash, so the rate only falls;
 * a reuse tracked at rate R_i counts 1/R_i accesses at distance floor(d / R_i) lines (a
 * histogram in lines and in estimated accesses, doubles: the weight of each reuse is that of
 * the rate it was tracked at, which is what rescaling the earlier counts at each fall of the
 * rate amounts to).
 *
 * Set-associative LRU caches of several geometries are simulated together in one pass
 * (cc_sa_*), for the points where a fully associative curve is not the question.
 *
 * Records are corecast's trace records (native/include/cctrace.h): 16 bytes, address, aux, tid,
 * kind, size.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cctrace.h"

#define API __attribute__((visibility("default")))


/* ---------------------------------------------------------------------- helpers */

static inline uint64_t mix64(uint64_t x) { /* a 64-bit finaliser: spreads line numbers */
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The sampling hash of a line, in [0, 2^(64 - shift)): the high half folded onto the low one,
 * then the top bits of its product with 2^64 / golden ratio (Knuth's multiplicative hashing).
 * Four instructions: the sampled pass hashes every record. */
static inline uint64_t sample_hash(uint64_t line, int shift) {
    return ((line ^ (line >> 32)) * 0x9e3779b97f4a7c15ULL) >> shift;
}

/* For each record whose kind is in kindmask and whose thread matches (tid < 0: every thread),
 * runs BODY with first and last set to the first and last line it touches. An access that would
 * run past the top of the address space is clamped there. A record of no known kind (a damaged
 * trace: Python does not check the kinds for these passes) returns -2 from the function. */
#define FOR_RECORDS(recs, n, kindmask, tid, shift, BODY)                                      \
    for (size_t i_ = 0; i_ < (n); i_++) {                                                     \
        const cc_rec *r_ = &(recs)[i_];                                                        \
        if (r_->kind >= CC_NKINDS) return -2;                                                  \
        if (!((kindmask) >> r_->kind & 1)) continue;                                          \
        if ((tid) >= 0 && r_->tid != (uint32_t)(tid)) continue;                               \
        uint64_t a_ = r_->addr, e_ = a_ + (r_->size ? r_->size : 1) - 1;                      \
        if (e_ < a_) e_ = UINT64_MAX;                                                         \
        const uint64_t first = a_ >> (shift), last = e_ >> (shift);                           \
        BODY;                                                                                 \
    }

/* ---------------------------------------------------------------------- stack distances */

typedef struct {
    int shift;                /* log2 of the line size */
    uint64_t threshold, modulus_mask; /* sampled when sample_hash(line) < threshold */
    int hash_shift;                   /* 64 - log2 of the modulus */
    /* line -> position (open addressing; key stored as line + 1, 0 = empty) */
    uint64_t *hkey;
    uint64_t *hpos;
    size_t hcap, hcount;
    /* Fenwick tree over positions 1..tn, and the line at each position */
    int32_t *bit;
    uint64_t *pline;
    size_t tn, now;
    /* histogram of distances (in sampled lines); cold accesses apart */
    uint64_t *hist;
    size_t histn;
    uint64_t cold, refs;      /* sampled accesses: first touches, all */
    uint64_t seen;            /* accesses counted (sampled or not) */
    uint64_t instr;           /* fetch records of the thread(s) */
    /* fixed-size SHARDS (smax > 0): the tracked lines in a max-heap by hash, and the counts in
     * estimated accesses by distance in lines */
    size_t smax, hn;
    uint64_t *heap_hash, *heap_line;
    double *whist, wcold, wrefs;
    size_t whistn;
    int modulus_bits;
    /* An access is one record: when it straddles lines, each line is looked up in order (so
     * the stack evolves as for separate accesses), and the access counts once, at the largest
     * distance of its lines (it hits a cache only if every line does), as the simulator counts. */
} cc_sd;

static int sd_hash_grow(cc_sd *s) {
    size_t ncap = s->hcap ? s->hcap * 2 : 1 << 12;
    uint64_t *nk = calloc(ncap, sizeof *nk), *np = malloc(ncap * sizeof *np);
    if (!nk || !np) { free(nk); free(np); return -1; }
    for (size_t i = 0; i < s->hcap; i++) {
        if (!s->hkey[i]) continue;
        size_t j = mix64(s->hkey[i]) & (ncap - 1);
        while (nk[j]) j = (j + 1) & (ncap - 1);
        nk[j] = s->hkey[i];
        np[j] = s->hpos[i];
    }
    free(s->hkey);
    free(s->hpos);
    s->hkey = nk;
    s->hpos = np;
    s->hcap = ncap;
    return 0;
}

/* The slot of line (inserted with position 0 if absent); NULL on allocation failure. */
static uint64_t *sd_slot(cc_sd *s, uint64_t line) {
    if (2 * (s->hcount + 1) > s->hcap && sd_hash_grow(s)) return NULL;
    uint64_t key = line + 1;
    size_t j = mix64(key) & (s->hcap - 1);
    while (s->hkey[j] && s->hkey[j] != key) j = (j + 1) & (s->hcap - 1);
    if (!s->hkey[j]) {
        s->hkey[j] = key;
        s->hpos[j] = 0;
        s->hcount++;
    }
    return &s->hpos[j];
}

/* Removes line from the table (linear probing: the entries after it that would no longer be
 * found are moved back into the gap). */
static void sd_forget(cc_sd *s, uint64_t line) {
    uint64_t key = line + 1;
    size_t m = s->hcap - 1, j = mix64(key) & m;
    while (s->hkey[j] && s->hkey[j] != key) j = (j + 1) & m;
    if (!s->hkey[j]) return;
    size_t gap = j;
    for (size_t k = (j + 1) & m; s->hkey[k]; k = (k + 1) & m) {
        size_t home = mix64(s->hkey[k]) & m;
        /* k's entry may move into the gap when its home is not cyclically in (gap, k] */
        if (gap < k ? (home <= gap || home > k) : (home <= gap && home > k)) {
            s->hkey[gap] = s->hkey[k];
            s->hpos[gap] = s->hpos[k];
            gap = k;
        }
    }
    s->hkey[gap] = 0;
    s->hcount--;
}

/* The tracked lines of fixed-size SHARDS, a binary max-heap by sampling hash. */
static void heap_push(cc_sd *s, uint64_t hash, uint64_t line) {
    size_t i = s->hn++;
    while (i) {
        size_t up = (i - 1) / 2;
        if (s->heap_hash[up] >= hash) break;
        s->heap_hash[i] = s->heap_hash[up];
        s->heap_line[i] = s->heap_line[up];
        i = up;
    }
    s->heap_hash[i] = hash;
    s->heap_line[i] = line;
}

static void heap_pop(cc_sd *s) {
    uint64_t hash = s->heap_hash[--s->hn], line = s->heap_line[s->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->hn) break;
        if (c + 1 < s->hn && s->heap_hash[c + 1] > s->heap_hash[c]) c++;
        if (s->heap_hash[c] <= hash) break;
        s->heap_hash[i] = s->heap_hash[c];
        s->heap_line[i] = s->heap_line[c];
        i = c;
    }
    s->heap_hash[i] = hash;
    s->heap_line[i] = line;
}

static inline void bit_add(int32_t *bit, size_t n, size_t i, int32_t v) {
    for (; i <= n; i += i & -i) bit[i] += v;
}

static inline int64_t bit_sum(const int32_t *bit, size_t i) {
    int64_t t = 0;
    for (; i; i -= i & -i) t += bit[i];
    return t;
}

/* Renumbers the live marks 1..live and sizes the time axis to twice that (at least 64 Ki). */
static int sd_compact(cc_sd *s) {
    size_t live = 0;
    for (size_t p = 1; p < s->now; p++) {
        if (!s->pline[p]) continue;
        uint64_t *slot = sd_slot(s, s->pline[p] - 1);
        if (!slot) return -1;
        if (*slot != p) continue;            /* a stale position */
        s->pline[++live] = s->pline[p];
        *slot = live;
    }
    size_t ntn = 2 * live > (1 << 16) ? 2 * live : (1 << 16);
    int32_t *nb = calloc(ntn + 1, sizeof *nb);
    uint64_t *npl = calloc(ntn + 1, sizeof *npl);
    if (!nb || !npl) { free(nb); free(npl); return -1; }
    memcpy(npl + 1, s->pline + 1, live * sizeof *npl);
    for (size_t i = 1; i <= ntn; i++) {      /* O(n) Fenwick build: ones at 1..live */
        nb[i] += i <= live;
        size_t j = i + (i & -i);
        if (j <= ntn) nb[j] += nb[i];
    }
    free(s->bit);
    free(s->pline);
    s->bit = nb;
    s->pline = npl;
    s->tn = ntn;
    s->now = live + 1;
    return 0;
}

API cc_sd *cc_sd_new(int line_shift, uint64_t threshold, int modulus_bits) {
    cc_sd *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->shift = line_shift;
    if (modulus_bits < 1 || modulus_bits > 63) modulus_bits = 63;
    s->modulus_mask = ((uint64_t)1 << modulus_bits) - 1;
    s->modulus_bits = modulus_bits;
    s->hash_shift = 64 - modulus_bits;
    s->threshold = threshold;
    s->now = 1;
    if (sd_compact(s) || sd_hash_grow(s)) {
        free(s->bit);
        free(s->pline);
        free(s);
        return NULL;
    }
    return s;
}

API void cc_sd_free(cc_sd *s) {
    if (!s) return;
    free(s->hkey);
    free(s->hpos);
    free(s->bit);
    free(s->pline);
    free(s->hist);
    free(s->whist);
    free(s->heap_hash);
    free(s->heap_line);
    free(s);
}

/* Fixed-size SHARDS: at most `smax` lines tracked (the rate falls from the threshold given to
 * cc_sd_new as needed). Before the first record; 0, or -1 out of memory. */
API int cc_sd_set_max(cc_sd *s, size_t smax) {
    if (!smax || s->hn || s->now > 1) return -1;
    s->heap_hash = malloc((smax + 1) * sizeof *s->heap_hash);
    s->heap_line = malloc((smax + 1) * sizeof *s->heap_line);
    if (!s->heap_hash || !s->heap_line) return -1;
    s->smax = smax;
    return 0;
}

/* Fixed-size SHARDS's weighted counts: out[0] the threshold now, then (as doubles) the
 * estimated counted accesses tracked, their first touches; returns the histogram's length. */
API size_t cc_sd_wcounts(const cc_sd *s, uint64_t *threshold, double *w) {
    *threshold = s->threshold;
    w[0] = s->wrefs;
    w[1] = s->wcold;
    size_t len = s->whistn;
    while (len && s->whist[len - 1] == 0.0) len--;
    return len;
}

API void cc_sd_whist(const cc_sd *s, double *out, size_t n) {
    size_t k = n < s->whistn ? n : s->whistn;
    if (k) memcpy(out, s->whist, k * sizeof *out);
    if (n > k) memset(out + k, 0, (n - k) * sizeof *out);
}

/* Reads every record once (a sum of its words): what any pass over the trace pays at least,
 * the floor the sampled pass is measured against (bench/sim_mrc.py). */
API uint64_t cc_scan(const cc_rec *recs, size_t n) {
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += recs[i].addr ^ recs[i].kind;
    return sum;
}

static int sd_count(cc_sd *s, uint64_t d) {
    if (d >= s->histn) {
        size_t nn = s->histn ? s->histn : 1024;
        while (nn <= d) nn *= 2;
        uint64_t *nh = realloc(s->hist, nn * sizeof *nh);
        if (!nh) return -1;
        memset(nh + s->histn, 0, (nn - s->histn) * sizeof *nh);
        s->hist = nh;
        s->histn = nn;
    }
    s->hist[d]++;
    return 0;
}

/* Looks a tracked line up: its distance, or -1 on a first touch, or -2 when out of memory. */
static inline int64_t sd_touch(cc_sd *s, uint64_t line) {
    if (s->now > s->tn && sd_compact(s)) return -2;
    uint64_t *slot = sd_slot(s, line);
    if (!slot) return -2;
    size_t p = (size_t)*slot, t = s->now++;
    int64_t d = -1;
    if (p) {
        d = bit_sum(s->bit, t - 1) - bit_sum(s->bit, p);
        bit_add(s->bit, s->tn, p, -1);
        s->pline[p] = 0;
    }
    bit_add(s->bit, s->tn, t, 1);
    s->pline[t] = line + 1;
    *slot = t;
    return d;
}

/* Fixed-size SHARDS: more than s_max lines are tracked. The threshold falls to the largest
 * hash tracked, and every tracked line at or above it leaves the stack and the table. */
static void sd_evict(cc_sd *s) {
    uint64_t t = s->heap_hash[0];
    while (s->hn && s->heap_hash[0] >= t) {
        uint64_t line = s->heap_line[0];
        heap_pop(s);
        uint64_t *slot = sd_slot(s, line);          /* present: found, never inserted */
        if (slot && *slot) {
            bit_add(s->bit, s->tn, (size_t)*slot, -1);
            s->pline[*slot] = 0;
        }
        sd_forget(s, line);
    }
    s->threshold = t;
}

static int sd_wcount(cc_sd *s, uint64_t d, double w) {
    if (d >= s->whistn) {
        size_t nn = s->whistn ? s->whistn : 1024;
        while (nn <= d) nn *= 2;
        double *nh = realloc(s->whist, nn * sizeof *nh);
        if (!nh) return -1;
        memset(nh + s->whistn, 0, (nn - s->whistn) * sizeof *nh);
        s->whist = nh;
        s->whistn = nn;
    }
    s->whist[d] += w;
    return 0;
}

/* sd_access for fixed-size SHARDS. */
static int sd_access_fixed(cc_sd *s, uint64_t first, uint64_t last, int counted) {
    s->seen += counted;
    int tracked = 0, cold = 0;
    int64_t dmax = 0;
    for (uint64_t line = first;; line++) {
        const uint64_t h = sample_hash(line, s->hash_shift);
        if (h < s->threshold) {
            int64_t d = sd_touch(s, line);
            if (d == -2) return -1;
            int still = 1;
            if (d < 0) {                              /* a new line in the sample */
                heap_push(s, h, line);
                if (s->hn > s->smax) {
                    sd_evict(s);
                    still = h < s->threshold;         /* it may have been the one to go */
                }
            }
            if (still) {
                tracked = 1;
                if (d < 0) cold = 1;
                else if (d > dmax) dmax = d;
            }
        }
        if (line == last) break;
    }
    if (!tracked || !counted) return 0;
    const double w = (double)((uint64_t)1 << s->modulus_bits) / (double)s->threshold;   /* 1/R */
    s->refs++;
    s->wrefs += w;
    if (cold) {
        s->cold++;
        s->wcold += w;
        return 0;
    }
    return sd_wcount(s, (uint64_t)((double)dmax * w), w);
}

/* One access to lines first..last; 0, or -1 when out of memory. An access not `counted` moves its
 * lines to the top of the stack and leaves no trace in the counts (a store, when only the misses
 * a core waits for are asked for). */
static int sd_access(cc_sd *s, uint64_t first, uint64_t last, int counted) {
    if (s->smax) return sd_access_fixed(s, first, last, counted);
    s->seen += counted;
    int tracked = 0, cold = 0;
    int64_t dmax = 0;
    for (uint64_t line = first;; line++) {
        if (sample_hash(line, s->hash_shift) < s->threshold) {
            int64_t d = sd_touch(s, line);
            if (d == -2) return -1;
            tracked = 1;
            if (d < 0) cold = 1;
            else if (d > dmax) dmax = d;
        }
        if (line == last) break;
    }
    if (!tracked || !counted) return 0;
    s->refs++;
    if (cold) s->cold++;
    else if (sd_count(s, (uint64_t)dmax)) return -1;
    return 0;
}

/* The pick of the sampled pass with AVX-512 (x86-64 CPUs that have it, chosen at run time):
 * eight records at a time, their kinds, threads, straddles and sampling hashes in vectors, the
 * indices of those to track compressed into `pick`. The same records as the scalar loop below
 * in the same order (tests/test_sim_mrc.py compares the two). Returns how many were picked. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MRC_SIMD 1
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
static size_t pick_avx512(const cc_rec *r, size_t m, uint32_t *pick, uint64_t thr, int shift, int hshift,
                          uint32_t kindmask, uint32_t countmask, int tid, uint64_t *offered,
                          uint64_t *counted_taken, uint64_t *instr, unsigned *bad) {
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i kmask = _mm512_set1_epi64(kindmask), cmask = _mm512_set1_epi64(countmask);
    const __m512i one = _mm512_set1_epi64(1), ff = _mm512_set1_epi64(0xff);
    const __m512i lowbits = _mm512_set1_epi64((int64_t)(((uint64_t)1 << shift) - 1));
    const __m512i golden = _mm512_set1_epi64((int64_t)0x9e3779b97f4a7c15ULL);
    const __m512i vthr = _mm512_set1_epi64((int64_t)thr), nk = _mm512_set1_epi64(CC_NKINDS);
    const __m512i vtid = _mm512_set1_epi64(tid < 0 ? 0 : tid), tmask = _mm512_set1_epi64(0xffff);
    const __m128i shiftv = _mm_cvtsi32_si128(shift), hshiftv = _mm_cvtsi32_si128(hshift);
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i eight = _mm256_set1_epi32(8);
    size_t k = 0, i = 0;
    uint64_t off = 0, ct = 0, ins = 0;
    __mmask8 anybad = 0;
    for (; i + 8 <= m; i += 8) {
        const __m512i v0 = _mm512_loadu_si512((const void *)(r + i));
        const __m512i v1 = _mm512_loadu_si512((const void *)(r + i + 4));
        const __m512i addr = _mm512_permutex2var_epi64(v0, even, v1);
        const __m512i meta = _mm512_permutex2var_epi64(v0, odd, v1);       /* aux, tid, kind, size */
        const __m512i kind = _mm512_and_si512(_mm512_srli_epi64(meta, 48), ff);
        const __m512i size = _mm512_srli_epi64(meta, 56);
        const __mmask8 mine = tid < 0 ? (__mmask8)0xff
                                      : _mm512_cmpeq_epi64_mask(_mm512_and_si512(_mm512_srli_epi64(meta, 32), tmask), vtid);
        const __mmask8 ok = _mm512_test_epi64_mask(_mm512_srlv_epi64(kmask, kind), one) & mine;
        const __mmask8 counted = _mm512_test_epi64_mask(_mm512_srlv_epi64(cmask, kind), one) & mine;
        anybad |= _mm512_cmpge_epu64_mask(kind, nk);
        ins += (uint64_t)__builtin_popcount(_mm512_cmpeq_epi64_mask(kind, _mm512_setzero_si512()) & mine);
        const __m512i last = _mm512_add_epi64(_mm512_and_si512(addr, lowbits),
                                              _mm512_sub_epi64(_mm512_max_epu64(size, one), one));
        const __mmask8 straddle = _mm512_cmpgt_epu64_mask(last, lowbits);
        const __m512i line = _mm512_srl_epi64(addr, shiftv);
        const __m512i hash = _mm512_srl_epi64(
            _mm512_mullo_epi64(_mm512_xor_si512(line, _mm512_srli_epi64(line, 32)), golden), hshiftv);
        const __mmask8 take = ok & (straddle | _mm512_cmplt_epu64_mask(hash, vthr));
        _mm256_mask_compressstoreu_epi32(pick + k, take, idx);
        k += (size_t)__builtin_popcount(take);
        off += (uint64_t)__builtin_popcount(counted);
        ct += (uint64_t)__builtin_popcount(counted & take);
        idx = _mm256_add_epi32(idx, eight);
    }
    for (; i < m; i++) {                                     /* the last few, one at a time */
        const unsigned kind = r[i].kind;
        const uint64_t mn = tid < 0 || r[i].tid == (uint32_t)tid;
        const uint64_t okk = kind < 64 && (kindmask >> kind & 1) && mn;
        const uint64_t cnt = kind < 64 && (countmask >> kind & 1) && mn;
        anybad |= kind >= CC_NKINDS;
        ins += kind == CC_K_FETCH && mn;
        const uint64_t a = r[i].addr, sz = r[i].size;
        const uint64_t lb = ((uint64_t)1 << shift) - 1;
        const uint64_t strad = ((a & lb) + sz - (sz != 0)) >> shift;
        const uint64_t take = okk & (strad != 0 || sample_hash(a >> shift, hshift) < thr);
        pick[k] = (uint32_t)i;
        k += take;
        off += cnt;
        ct += cnt & take;
    }
    *offered += off;
    *counted_taken += ct;
    *instr += ins;
    if (anybad) *bad |= 2;
    return k;
}

static int simd_on = -1;             /* -1: not decided yet */

static int use_simd(void) {
    if (simd_on < 0) {
        __builtin_cpu_init();
        simd_on = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
    }
    return simd_on;
}
#else
#define MRC_SIMD 0
static int use_simd(void) { return 0; }
#endif

/* Whether the sampled pass uses the vector pick (1), the scalar one (0); `on` >= 0 sets it (for
 * tests: a CPU without AVX-512 keeps the scalar one). */
API int cc_mrc_simd(int on) {
#if MRC_SIMD
    if (on >= 0) {
        simd_on = 0;
        if (on) {
            simd_on = -1;
            (void)use_simd();
        }
    }
#else
    (void)on;
#endif
    return use_simd();
}

/* The sampled pass (see cc_sd_run); inlined twice, for every thread (tid < 0) and for one. */
static inline __attribute__((always_inline)) int sd_sampled(cc_sd *s, const cc_rec *recs, size_t n,
                                                            const uint8_t *kindok, int tid, uint32_t kindmask,
                                                            uint32_t countmask, unsigned *badp) {
    const int simd = use_simd();
    (void)simd;
    (void)kindmask;
    enum { STEP = 4096 };
    uint32_t pick[STEP];
    const uint64_t lowbits = ((uint64_t)1 << s->shift) - 1;
    const int shift = s->shift, hshift = s->hash_shift;
    unsigned bad = 0;
    for (size_t base = 0; base < n; base += STEP) {
        size_t m = n - base < STEP ? n - base : STEP;
        const uint64_t thr = s->threshold;      /* falls as fixed-size SHARDS evicts */
        const cc_rec *r = recs + base;
        size_t k = 0;
        uint64_t offered = 0, counted_taken = 0, instr = 0;
#if MRC_SIMD
        if (simd) {
            k = pick_avx512(r, m, pick, thr, shift, hshift, kindmask, countmask, tid, &offered, &counted_taken,
                            &instr, &bad);
            m = 0;                              /* the scalar loop below has nothing left */
        }
#endif
        for (size_t i = 0; i < m; i++) {
            const unsigned kk = kindok[r[i].kind];
            bad |= kk;
            const uint64_t mine = tid < 0 || r[i].tid == (uint32_t)tid;
            const uint64_t ok = kk & mine, counted = kk >> 2 & mine;
            instr += kk >> 3 & mine;
            const uint64_t a = r[i].addr, size = r[i].size;
            const uint64_t straddle = ((a & lowbits) + size - (size != 0)) >> shift;
            const uint64_t take = ok & (straddle | (sample_hash(a >> shift, hshift) < thr));
            pick[k] = (uint32_t)i;
            k += take;
            offered += counted;
            counted_taken += counted & take;
        }
        s->seen += offered - counted_taken;   /* sd_access counts those it is given */
        s->instr += instr;
        for (size_t j = 0; j < k; j++) {
            const cc_rec *q = &r[pick[j]];
            uint64_t a = q->addr, e = a + (q->size ? q->size : 1) - 1;
            if (e < a) e = UINT64_MAX;
            if (sd_access(s, a >> shift, e >> shift, countmask >> q->kind & 1)) return -1;
        }
    }
    *badp = bad;
    return 0;
}

/* Instructions (fetch records) of the thread (tid < 0: of every thread) in a batch. */
static uint64_t fetches(const cc_rec *recs, size_t n, int tid) {
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += recs[i].kind == CC_K_FETCH && (tid < 0 || recs[i].tid == (uint32_t)tid);
    return k;
}

/* Feeds a batch: records of the kinds in kindmask move their lines in the stack, and those of the
 * kinds in countmask (a subset) are counted. Returns 0, -1 when memory ran out, -2 at a record of
 * no known kind. */
API int cc_sd_run(cc_sd *s, const cc_rec *recs, size_t n, uint32_t kindmask, uint32_t countmask, int tid) {
    countmask &= kindmask;
    if (s->threshold > s->modulus_mask) {   /* exact: every line is tracked */
        s->instr += fetches(recs, n, tid);
        FOR_RECORDS(recs, n, kindmask, tid, s->shift,
                    if (sd_access(s, first, last, countmask >> r_->kind & 1)) return -1);
        return 0;
    }
    /* Sampled: most records are passed over. The pass that picks the few to track is kept free
     * of branches (a wrong kind or thread, or a line not sampled, is a zero, not a jump): it
     * writes the indices of the records to track, and a line-straddling access's, into a small
     * buffer, which a second loop then takes in order. Branches on the sample would be
     * mispredicted at every tracked record, throwing away the hashes under way. */
    uint8_t kindok[256];                /* 1: a kind in the stack; 2: no kind at all; 4: counted;
                                           8: an instruction */
    for (int k = 0; k < 256; k++)
        kindok[k] = k >= CC_NKINDS ? 2 : (kindmask >> k & 1) | (countmask >> k & 1) << 2 | (k == CC_K_FETCH) << 3;
    unsigned bad = 0;
    const int rc = tid < 0 ? sd_sampled(s, recs, n, kindok, -1, kindmask, countmask, &bad)
                           : sd_sampled(s, recs, n, kindok, tid, kindmask, countmask, &bad);
    if (rc) return rc;
    return bad & 2 ? -2 : 0;
}

/* Feeds line numbers directly, one access each (for tests and other front ends). */
API int cc_sd_lines(cc_sd *s, const uint64_t *lines, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (sd_access(s, lines[i], lines[i], 1)) return -1;
    return 0;
}

/* counts[0..4] = accesses counted (sampled or not), sampled ones, sampled first touches, distinct
 * sampled lines, instructions; returns the histogram's length (distances 0..len-1). */
API size_t cc_sd_counts(const cc_sd *s, uint64_t *counts) {
    counts[0] = s->seen;
    counts[1] = s->refs;
    counts[2] = s->cold;
    counts[3] = s->hcount;
    counts[4] = s->instr;
    size_t len = s->histn;
    while (len && !s->hist[len - 1]) len--;
    return len;
}

API void cc_sd_hist(const cc_sd *s, uint64_t *out, size_t n) {
    size_t k = n < s->histn ? n : s->histn;
    memcpy(out, s->hist, k * sizeof *out);
    if (n > k) memset(out + k, 0, (n - k) * sizeof *out);
}

/* ---------------------------------------------------------------------- set-associative */

typedef struct {
    uint64_t sets, ways;      /* sets a power of two */
    uint64_t *tag;            /* sets * ways, line + 1 (0 = invalid) */
    uint64_t *stamp;          /* last use, for LRU */
    uint64_t access, miss, clock;
} sa_conf;

typedef struct {
    int shift;
    int n;
    sa_conf *c;
} cc_sa;

API cc_sa *cc_sa_new(int line_shift, int n, const uint64_t *sets, const uint64_t *ways) {
    cc_sa *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->shift = line_shift;
    s->n = n;
    s->c = calloc((size_t)n, sizeof *s->c);
    if (!s->c) { free(s); return NULL; }
    for (int i = 0; i < n; i++) {
        sa_conf *c = &s->c[i];
        if (!sets[i] || (sets[i] & (sets[i] - 1)) || !ways[i]) goto fail;
        c->sets = sets[i];
        c->ways = ways[i];
        c->tag = calloc(sets[i] * ways[i], sizeof *c->tag);
        c->stamp = calloc(sets[i] * ways[i], sizeof *c->stamp);
        if (!c->tag || !c->stamp) goto fail;
    }
    return s;
fail:
    for (int i = 0; i < n; i++) { free(s->c[i].tag); free(s->c[i].stamp); }
    free(s->c);
    free(s);
    return NULL;
}

API void cc_sa_free(cc_sa *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) { free(s->c[i].tag); free(s->c[i].stamp); }
    free(s->c);
    free(s);
}

/* One line looked up (and filled on a miss); 1 on a miss. */
static inline int sa_line(sa_conf *c, uint64_t line) {
    uint64_t *tag = c->tag + (line & (c->sets - 1)) * c->ways;
    uint64_t *st = c->stamp + (line & (c->sets - 1)) * c->ways;
    uint64_t key = line + 1, now = ++c->clock;
    uint64_t victim = 0;
    for (uint64_t w = 0; w < c->ways; w++) {
        if (tag[w] == key) { st[w] = now; return 0; }
        if (st[w] < st[victim]) victim = w;  /* invalid ways have stamp 0: taken first */
    }
    tag[victim] = key;
    st[victim] = now;
    return 1;
}

/* Feeds a batch (kindmask, countmask as cc_sd_run's); returns 0, or -2 at a record of no known
 * kind. */
API int cc_sa_run(cc_sa *s, const cc_rec *recs, size_t n, uint32_t kindmask, uint32_t countmask, int tid) {
    countmask &= kindmask;
    for (int i = 0; i < s->n; i++) {
        sa_conf *c = &s->c[i];
        FOR_RECORDS(recs, n, kindmask, tid, s->shift, {
            int missed = 0;
            for (uint64_t line = first;; line++) {
                missed |= sa_line(c, line);
                if (line == last) break;
            }
            const int counted = countmask >> r_->kind & 1;
            c->access += counted;
            c->miss += missed & counted;
        });
    }
    return 0;
}

API void cc_sa_counts(const cc_sa *s, uint64_t *access, uint64_t *miss) {
    for (int i = 0; i < s->n; i++) {
        access[i] = s->c[i].access;
        miss[i] = s->c[i].miss;
    }
}
