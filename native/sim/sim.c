/* corecast trace-driven simulator core.
 *
 * Caches: set-associative arrays of line addresses (tags are whole line numbers), with
 * LRU / FIFO / random / tree-PLRU replacement; invalid ways are filled first.  A hierarchy is
 * one "path" per core and side (instruction, data): up to three levels, each level either
 * private to a core or shared by a group of cores.  Policies describe a level towards the
 * levels above it:
 *   non-inclusive  fills on a miss, evicts on its own;
 *   inclusive      fills on a miss; evicting a line invalidates it in every level above
 *                  (back-invalidation) that this copy serves;
 *   exclusive      never fills on a miss; is filled by the victims of the level above; a hit
 *                  moves the line up (it leaves this level);
 *   victim         like exclusive, but a hit leaves the line here too.
 * Coherence (more than one core): MESI by snooping every cache off the accessing core's path.
 * A write without an exclusive copy invalidates every other copy (an "upgrade" if the writer
 * already held the line); a read that leaves the core's private levels downgrades a modified
 * copy elsewhere (an "intervention").  A miss on a line whose copy was invalidated by another
 * core's write -- its way not reused since -- is a coherence miss.
 * Driving: cc_sim_run() walks a batch of records; one core (no coherence) takes the
 * single-core kernel (run_fast(), chosen once per batch), which gives the same results as
 * the general loop (run_general()) and is tested against it.
 *
 * See docs/sim.md for the counting rules. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "ccsim.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define TAG_INVALID UINT64_MAX
#define COH_BIT (1ULL << 63)
#define F_DIRTY 1
#define F_EXCL 2
#define MEM_LEVEL 4
#define MAX_LINES 16
#define PF_DIST 16
#define PF_VDIST 8 /* (less than PF_DIST) */

/* the compact set layout (at most 16 ways): fixed offsets */
#define CMP_WAYS 16
#define CMP_PERM 32
#define CMP_CNT 40
#define CMP_FLAGS 48
#define CMP_TAGS 64

/* ------------------------------------------------------------------------------------ */
/* set-associative array
 *
 * One block of memory per array, one stride per set.  Sets of at most 16 ways have the
 * compact layout: the first host cache line holds the partial tags (u16 x 16; 0: a free
 * way), the replacement word (the LRU/FIFO order as 4-bit way numbers, or the PLRU bits),
 * the number of valid ways (u32) and the flags (u8 x 16) -- all that a lookup that misses
 * reads -- and the tags (u64 x ways) follow.  Wider sets: partial tags (padded to 16 ways),
 * tags, flags, the replacement word (PLRU bits, or the head and tail of the LRU/FIFO order),
 * the count, then the LRU/FIFO order as a doubly linked list (prev[ways], next[ways], u16).
 * A slot is (set << 16) | way. */

typedef struct {
    uint8_t *mem;
    size_t stride, tag_off, flag_off, plru_off, cnt_off, stamp_off;
    int set_bits;
    uint64_t *plru_set, *plru_clear; /* tree-PLRU: bits a touch of way w sets and clears */
    uint64_t set_mask;
    uint32_t sets, ways;
    int repl;
    int nib; /* LRU/FIFO order kept as a permutation of 4-bit way numbers (ways <= 16) */
    int big; /* worth prefetching */
    uint64_t clock; /* only cc_array_set_clock() writes it */
    uint64_t rng;
    uint64_t last_line; /* MRU fast path: the line last touched, and its slot */
    size_t last_slot;
    uint16_t *hidx; /* the single-core kernel's index of a fully associative TLB: way + 1 by */
    uint32_t hmask, hshift; /* a hash of the tag, open addressing (see hidx_build()) */
} carr;

#define SLOT(set, way) (((size_t)(set) << 16) | (size_t)(way))
#define SLOT_SET(slot) ((slot) >> 16)
#define SLOT_WAY(slot) ((uint32_t)((slot) & 0xffff))

static inline uint64_t *TAGS(const carr *a, uint64_t set) { return (uint64_t *)(a->mem + set * a->stride + a->tag_off); }
static inline uint16_t *PTAGS(const carr *a, uint64_t set) { return (uint16_t *)(a->mem + set * a->stride); }
/* A 15-bit hash of the line, never 0 (0 marks a free way), stored per way and compared 8 ways
 * at a time before the full tags. The same for every level, so it is computed once. */
static inline uint16_t line_ptag(uint64_t line) {
    return (uint16_t)((line * 0x9E3779B97F4A7C15ULL) >> 48) | 1;
}
static inline uint16_t ptag(const carr *a, uint64_t line) {
    (void)a;
    return line_ptag(line);
}
static inline uint8_t *FL(const carr *a, size_t slot) {
    return a->mem + SLOT_SET(slot) * a->stride + a->flag_off + SLOT_WAY(slot);
}
static inline uint64_t *PLRU(const carr *a, uint64_t set) { return (uint64_t *)(a->mem + set * a->stride + a->plru_off); }
static inline uint32_t *NVALID(const carr *a, uint64_t set) { return (uint32_t *)(a->mem + set * a->stride + a->cnt_off); }
/* The LRU/FIFO order of a wide set (more than 16 ways), most recent first: head and tail in
 * the replacement word, the links after the count. */
static inline uint16_t *LHT(const carr *a, uint8_t *sb) { return (uint16_t *)(sb + a->plru_off); }
static inline uint16_t *LPREV(const carr *a, uint8_t *sb) { return (uint16_t *)(sb + a->stamp_off); }
static inline uint16_t *LNEXT(const carr *a, uint8_t *sb) { return (uint16_t *)(sb + a->stamp_off) + a->ways; }

static inline void plru_touch(uint64_t *bits, uint32_t ways, uint32_t w);

static int carr_init(carr *a, uint32_t sets, uint32_t ways, int repl, uint64_t seed) {
    memset(a, 0, sizeof *a);
    if (ways > 65535) return -1;
    size_t tags = (size_t)ways * 8;
    if (ways <= CMP_WAYS) {
        /* compact: the partial tags, replacement word, count and flags in the first host
         * line (all a lookup that misses reads), then the tags */
        a->plru_off = CMP_PERM;
        a->cnt_off = CMP_CNT;
        a->flag_off = CMP_FLAGS;
        a->tag_off = CMP_TAGS;
        a->stamp_off = a->tag_off + tags;
    } else {
        a->tag_off = ((size_t)ways + 15) / 16 * 32; /* partial tags, padded to 16 ways */
        a->flag_off = a->tag_off + tags;
        a->plru_off = (a->flag_off + ways + 7) & ~(size_t)7;
        a->cnt_off = a->plru_off + 8;
        a->stamp_off = a->cnt_off + 8;
    }
    a->nib = (repl == CC_REPL_LRU || repl == CC_REPL_FIFO) && ways <= 16;
    size_t stride = a->stamp_off + ((repl == CC_REPL_LRU || repl == CC_REPL_FIFO) && !a->nib ? (size_t)ways * 4 : 0);
    /* whole host cache lines for large sets, 8-byte granules for tiny ones (TLBs) */
    a->stride = stride >= 64 ? (stride + 63) & ~(size_t)63 : (stride + 7) & ~(size_t)7;
    size_t bytes = a->stride * sets;
    if (posix_memalign((void **)&a->mem, 64, bytes ? bytes : 64)) return -1;
    memset(a->mem, 0, bytes);
    a->sets = sets;
    a->ways = ways;
    a->set_mask = sets - 1;
    a->set_bits = 0;
    while ((1u << a->set_bits) < sets) a->set_bits++;
    uint64_t perm = 0;
    /* LRU/FIFO order, most recent first: the ways start in descending order, so that the
     * least recent place always holds the lowest-numbered of the never-used ways (the way a
     * free-way install picks) until the set has filled */
    for (uint32_t p = 0; p < 16; p++) perm |= (uint64_t)(p < ways ? ways - 1 - p : 0xF) << (4 * p);
    for (uint64_t st = 0; st < sets; st++) {
        uint64_t *t = TAGS(a, st);
        for (uint32_t w = 0; w < ways; w++) t[w] = TAG_INVALID;
        uint8_t *sb = a->mem + st * a->stride;
        if (a->nib) *(uint64_t *)(sb + a->plru_off) = perm;
        if ((repl == CC_REPL_LRU || repl == CC_REPL_FIFO) && !a->nib) {
            /* the same start for the list: ways - 1 first, way 0 last */
            uint16_t *ht = LHT(a, sb), *prev = LPREV(a, sb), *next = LNEXT(a, sb);
            ht[0] = (uint16_t)(ways - 1);
            ht[1] = 0;
            for (uint32_t w = 0; w < ways; w++) {
                next[w] = (uint16_t)(w ? w - 1 : 0);
                prev[w] = (uint16_t)(w + 1 < ways ? w + 1 : 0);
            }
        }
    }
    a->repl = repl;
    if (repl == CC_REPL_PLRU) {
        a->plru_set = calloc(ways, sizeof *a->plru_set);
        a->plru_clear = calloc(ways, sizeof *a->plru_clear);
        if (!a->plru_set || !a->plru_clear) return -1;
        for (uint32_t w = 0; w < ways; w++) {
            uint64_t before = 0, after = ~0ULL;
            plru_touch(&before, ways, w);       /* bits the touch sets */
            plru_touch(&after, ways, w);        /* bits it clears stay 0 */
            a->plru_set[w] = before;
            a->plru_clear[w] = ~after;
        }
    }
    a->big = bytes > (64u << 10); /* more than a host L1 data cache holds: prefetched */
    a->rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
    a->last_line = TAG_INVALID;
    return 0;
}

static void carr_free(carr *a) {
    free(a->mem);
    free(a->plru_set);
    free(a->plru_clear);
    free(a->hidx);
    memset(a, 0, sizeof *a);
}

static inline uint8_t *SB(const carr *a, uint64_t set) { return a->mem + set * a->stride; }

/* The way holding `line` in the set at sb, or -1. */
static inline int sb_find(const carr *a, const uint8_t *sb, uint64_t line, uint16_t ptv) {
    const uint64_t *t = (const uint64_t *)(sb + a->tag_off);
#if defined(__SSE2__) && !defined(CC_SCALAR_FIND)
    /* 16 partial tags at a time (the padding holds 0, which no line has), a mask bit per way */
    const uint16_t *pt = (const uint16_t *)sb;
    const __m128i key = _mm_set1_epi16((short)ptv);
    for (uint32_t g = 0; g < a->ways; g += 16) {
        const __m128i lo = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(pt + g)), key);
        const __m128i hi = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(pt + g + 8)), key);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(lo, hi));
        while (m) {
            uint32_t w = g + (uint32_t)__builtin_ctz(m);
            if (t[w] == line) return (int)w;
            m &= m - 1;
        }
    }
    return -1;
#else
    (void)ptv;
    for (uint32_t w = 0; w < a->ways; w++)
        if (t[w] == line) return (int)w;
    return -1;
#endif
}

static inline int64_t carr_find_pt(const carr *a, uint64_t line, uint16_t ptv) {
    uint64_t set = line & a->set_mask;
    int w = sb_find(a, SB(a, set), line, ptv);
    return w < 0 ? -1 : (int64_t)SLOT(set, (uint32_t)w);
}

static inline int64_t carr_find(const carr *a, uint64_t line) { return carr_find_pt(a, line, line_ptag(line)); }

static inline void carr_prefetch(const carr *a, uint64_t line) {
    /* the tags, flags and replacement word: the first one to three host lines */
    const uint8_t *p = a->mem + (line & a->set_mask) * a->stride;
    __builtin_prefetch(p);
    if (a->stamp_off > 64) __builtin_prefetch(p + 64);
    if (a->stamp_off > 128) __builtin_prefetch(p + 128);
}

/* Move way w to the front (most recent) of a wide set's LRU/FIFO list. */
static inline __attribute__((always_inline)) void list_front(const carr *a, uint8_t *sb, uint32_t w) {
    uint16_t *ht = LHT(a, sb), *prev = LPREV(a, sb), *next = LNEXT(a, sb);
    if (ht[0] == w) return;
    const uint16_t p = prev[w], n = next[w];
    next[p] = n;
    if (ht[1] == w) ht[1] = p;
    else prev[n] = p;
    prev[ht[0]] = (uint16_t)w;
    next[w] = ht[0];
    ht[0] = (uint16_t)w;
}

static inline void plru_touch(uint64_t *bits, uint32_t ways, uint32_t w) {
    uint32_t node = 1, lo = 0, span = ways;
    uint64_t b = *bits;
    while (span > 1) {
        span >>= 1;
        if (w < lo + span) { /* accessed the left half: point the victim to the right */
            b |= 1ULL << node;
            node = 2 * node;
        } else {
            b &= ~(1ULL << node);
            node = 2 * node + 1;
            lo += span;
        }
    }
    *bits = b;
}

/* Move way w to the front (most recent) of a permutation of 4-bit way numbers: the nibbles
 * below w's move up one place. The lowest nibble equal to w is found with the zero-nibble
 * trick (exact for the lowest match). */
static inline uint64_t nib_front(uint64_t P, uint32_t w) {
    const uint64_t ones = 0x1111111111111111ULL;
    uint64_t x = P ^ (ones * w);
    uint64_t y = (x - ones) & ~x & 0x8888888888888888ULL; /* lowest set bit: top of w's nibble */
    uint64_t m = y ^ (y - 1);                             /* w's nibble and those below it */
    return (P & ~m) | ((P << 4) & m) | w;
}

static inline void plru_apply(const carr *a, uint64_t *bits, uint32_t w) {
    *bits = (*bits & ~a->plru_clear[w]) | a->plru_set[w];
}

/* The tree-PLRU victim: from the root (node 1), follow each node's bit (1: right) down to a
 * leaf. The first three levels of the walk are read from a table of the 128 values of bits
 * 1..7 (nodes of a tree narrower than 8 ways are bits that stay 0: its victim is the 8-way
 * victim shifted right); a 16-way tree takes one more step. */
static uint8_t plru_top3[128];

__attribute__((constructor)) static void plru_top3_init(void) {
    for (uint32_t x = 0; x < 128; x++) {
        uint32_t node = 1;
        while (node < 8) node = 2 * node + ((x << 1 >> node) & 1);
        plru_top3[x] = (uint8_t)(node - 8);
    }
}

static inline uint32_t plru_find_victim(const carr *a, uint64_t bits) {
    const uint32_t ways = a->ways;
    if (ways == 16) {
        const uint32_t v = plru_top3[(bits >> 1) & 127];
        return 2 * v + (uint32_t)((bits >> (8 + v)) & 1);
    }
    if (ways <= 8 && ways > 1) return (uint32_t)plru_top3[(bits >> 1) & 127] >> (3 - __builtin_ctz(ways));
    uint32_t node = 1;
    while (node < ways) node = 2 * node + (uint32_t)((bits >> node) & 1);
    return node - ways;
}

static inline void sb_touch(carr *a, uint8_t *sb, uint32_t w) {
    switch (a->repl) {
    case CC_REPL_LRU:
        if (a->nib) {
            uint64_t *P = (uint64_t *)(sb + a->plru_off);
            *P = nib_front(*P, w);
        } else {
            list_front(a, sb, w);
        }
        break;
    case CC_REPL_PLRU: plru_apply(a, (uint64_t *)(sb + a->plru_off), w); break;
    default: break;
    }
}

static inline void carr_touch(carr *a, size_t slot) { sb_touch(a, SB(a, SLOT_SET(slot)), SLOT_WAY(slot)); }

static inline uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static inline uint32_t sb_victim(carr *a, const uint8_t *sb) {
    if (*(const uint32_t *)(sb + a->cnt_off) < a->ways) { /* a free way: never used first, then invalidated */
        const uint64_t *t = (const uint64_t *)(sb + a->tag_off);
        int64_t coh = -1;
        for (uint32_t w = 0; w < a->ways; w++) {
            if (t[w] & COH_BIT) {
                if (t[w] == TAG_INVALID) return w;
                if (coh < 0) coh = w;
            }
        }
        if (coh >= 0) return (uint32_t)coh;
    }
    switch (a->repl) {
    case CC_REPL_LRU:
    case CC_REPL_FIFO: {
        if (a->nib) return (uint32_t)(*(const uint64_t *)(sb + a->plru_off) >> (4 * (a->ways - 1))) & 0xF;
        return ((const uint16_t *)(sb + a->plru_off))[1]; /* the list's tail */
    }
    case CC_REPL_RANDOM: return (uint32_t)(xorshift(&a->rng) % a->ways);
    case CC_REPL_PLRU: return plru_find_victim(a, *(const uint64_t *)(sb + a->plru_off));
    }
    return 0;
}

/* Install `line` (not present) in the set at sb; returns its way; the evicted line and its
 * flags go to vline and vflags (TAG_INVALID when a free way was used). */
static inline uint32_t sb_install(carr *a, uint8_t *sb, uint64_t line, uint16_t ptv, uint8_t flags,
                                  uint64_t *vline, uint8_t *vflags) {
    uint32_t w = sb_victim(a, sb);
    uint64_t *t = (uint64_t *)(sb + a->tag_off) + w;
    uint8_t *f = sb + a->flag_off + w;
    uint64_t old = *t;
    if (old & COH_BIT) { /* free way (never used, or invalidated) */
        *vline = TAG_INVALID;
        *vflags = 0;
        ++*(uint32_t *)(sb + a->cnt_off);
    } else {
        *vline = old;
        *vflags = *f;
        if (old == a->last_line) a->last_line = TAG_INVALID;
    }
    *t = line;
    *f = flags;
    ((uint16_t *)sb)[w] = ptv;
    if (a->repl == CC_REPL_LRU || a->repl == CC_REPL_FIFO) {
        if (a->nib) {
            uint64_t *P = (uint64_t *)(sb + a->plru_off);
            *P = nib_front(*P, w);
        } else {
            list_front(a, sb, w);
        }
    } else if (a->repl == CC_REPL_PLRU) {
        plru_apply(a, (uint64_t *)(sb + a->plru_off), w);
    }
    return w;
}

/* sb_touch() and sb_install() with the common case of a wide (more than 16 ways) LRU/FIFO
 * set written out: the order is a linked list; a full set gives up the list's tail. */
static inline __attribute__((always_inline)) void wtouch(carr *a, uint8_t *sb, uint32_t w) {
    if (a->repl == CC_REPL_LRU && !a->nib) list_front(a, sb, w);
    else if (a->repl != CC_REPL_FIFO) sb_touch(a, sb, w);
}

static inline __attribute__((always_inline)) uint32_t winstall(carr *a, uint8_t *sb, uint64_t line, uint16_t ptv, uint8_t flags,
                                uint64_t *vline, uint8_t *vflags) {
    if ((a->repl != CC_REPL_LRU && a->repl != CC_REPL_FIFO) || a->nib ||
        *(const uint32_t *)(sb + a->cnt_off) < a->ways)
        return sb_install(a, sb, line, ptv, flags, vline, vflags);
    const uint32_t w = LHT(a, sb)[1];
    uint64_t *t = (uint64_t *)(sb + a->tag_off) + w;
    uint8_t *f = sb + a->flag_off + w;
    *vline = *t;
    *vflags = *f;
    if (*t == a->last_line) a->last_line = TAG_INVALID;
    *t = line;
    *f = flags;
    ((uint16_t *)sb)[w] = ptv;
    list_front(a, sb, w);
    return w;
}

static inline size_t carr_install_pt(carr *a, uint64_t line, uint16_t ptv, uint8_t flags,
                                     uint64_t *vline, uint8_t *vflags) {
    uint64_t set = line & a->set_mask;
    return SLOT(set, sb_install(a, SB(a, set), line, ptv, flags, vline, vflags));
}

static inline size_t carr_install(carr *a, uint64_t line, uint8_t flags, uint64_t *vline,
                                  uint8_t *vflags) {
    return carr_install_pt(a, line, line_ptag(line), flags, vline, vflags);
}

static inline void carr_invalidate(carr *a, size_t slot, int coherence) {
    uint64_t *t = TAGS(a, SLOT_SET(slot)) + SLOT_WAY(slot);
    uint64_t line = *t;
    if (line & COH_BIT) return;
    if (line == a->last_line) a->last_line = TAG_INVALID;
    --*NVALID(a, SLOT_SET(slot));
    PTAGS(a, SLOT_SET(slot))[SLOT_WAY(slot)] = 0;
    *t = coherence ? (line | COH_BIT) : TAG_INVALID;
    *FL(a, slot) = 0;
}

static inline int carr_coh_was(const carr *a, uint64_t line) {
    uint64_t want = line | COH_BIT;
    const uint64_t *t = TAGS(a, line & a->set_mask);
    for (uint32_t w = 0; w < a->ways; w++)
        if (t[w] == want) return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* public array for unit tests */

struct cc_array { carr a; };

cc_array *cc_array_new(uint32_t sets, uint32_t ways, int replacement, uint64_t seed) {
    if (!sets || (sets & (sets - 1)) || !ways || replacement < 0 || replacement > 3) return NULL;
    if (replacement == CC_REPL_PLRU && ((ways & (ways - 1)) || ways > 64)) return NULL;
    cc_array *x = calloc(1, sizeof *x);
    if (!x || carr_init(&x->a, sets, ways, replacement, seed)) {
        if (x) carr_free(&x->a);
        free(x);
        return NULL;
    }
    return x;
}

void cc_array_free(cc_array *x) {
    if (!x) return;
    carr_free(&x->a);
    free(x);
}

void cc_array_set_clock(cc_array *x, uint64_t clock) { x->a.clock = clock; }

int cc_array_access(cc_array *x, uint64_t line, uint64_t *victim) {
    int64_t slot = carr_find(&x->a, line);
    *victim = TAG_INVALID;
    if (slot >= 0) {
        carr_touch(&x->a, (size_t)slot);
        return 1;
    }
    uint8_t vf;
    carr_install(&x->a, line, 0, victim, &vf);
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* simulator structures */

typedef struct cinst cinst;
struct cinst {
    carr arr;
    cc_cache_stats *st; /* this level's counters */
    int pol, wa;        /* policy, write-allocate */
    int fill_read, fill_write; /* a miss of a read / of a store allocates here */
    int cfg;      /* index into config caches */
    int owner;    /* core number for private caches, 64 + id for shared ones */
    int priv;
    cinst **upper; /* instances above this one (for back-invalidation) */
    int nupper;
};

typedef struct {
    int n;     /* levels */
    int npriv; /* leading private levels */
    int evict_work; /* bit k: a clean victim of level k needs evicted() (back-invalidation, or
                     * an exclusive/victim level below it) */
    cinst *lv[3];
} cpath;

typedef struct {
    int S, W;
    int units[CC_NUNITS];
    int pool[CC_NUNITS];
    int n;
    uint64_t *seq;
    uint8_t *unit;
    uint64_t *dep; /* 4 per entry */
    uint8_t *ndep;
    uint64_t next_seq, cycle, base_cycle;
    uint64_t reg_writer[256]; /* seq + 1 of the latest writer not yet issued; 0: ready */
    uint64_t *ring;           /* issue cycle by seq */
    uint64_t rmask;
} issue_t;

typedef struct {
    const uint8_t *mem;
    uint64_t set_mask;
    size_t stride;
    int lines; /* host cache lines to prefetch per set */
    int level; /* its index in the path */
    int quiet; /* the single-core kernel: too few data accesses reached it in the last batch to
                * pay for prefetching its sets at every one (pf_decide) */
} pfdesc;

typedef struct {
    cpath path[2];
    pfdesc pf[2][2]; /* the large levels of each side, prefetched ahead */
    int npf[2];
    carr *tlb[2][2];
    int tlbcfg[2][2];
    int ntlb[2];
    uint8_t *bp;
    uint64_t ghr;
    issue_t iss;
    cinst **off[2]; /* instances off this core's path, per side */
    int noff[2];
} core_t;

struct cc_sim {
    cc_config cfg;
    cc_stats st;
    int ncores, coherent, line_shift;
    int tlb_shift[2];
    cinst *inst[CC_MAX_CACHES];
    int ninst[CC_MAX_CACHES];
    carr *tlbarr; /* ncores * ntlbs */
    core_t *core;
    uint64_t bp_mask, hist_mask;
    /* split state */
    int cur_vt;
    uint64_t ntx, chunk_left, fetch_seen;
    uint8_t last_coh; /* set when the L1 lookup of the current access saw a coherence miss */
    int pf_levels;    /* some level is large enough to prefetch */
    int fast;         /* one core: the single-core kernel, run_fast() */
    int wrapped;      /* an access of this batch passed the top of the address space */
};

size_t cc_sizeof(int what) {
    switch (what) {
    case 0: return sizeof(cc_rec);
    case 1: return sizeof(cc_config);
    case 2: return sizeof(cc_stats);
    case 3: return sizeof(cc_lackey_state);
    case 4: return sizeof(cc_cache_cfg);
    case 5: return sizeof(cc_tlb_cfg);
    }
    return 0;
}

static int ilog2(uint64_t x) {
    int n = 0;
    while (x > 1) {
        x >>= 1;
        n++;
    }
    return n;
}

static int pow2(uint64_t x) { return x && !(x & (x - 1)); }

/* ------------------------------------------------------------------------------------ */
/* issue-rate model */

static int iss_init(issue_t *q, const cc_config *c) {
    memset(q, 0, sizeof *q);
    q->S = c->sched_size > 0 ? c->sched_size : 1;
    q->W = c->issue_width > 0 ? c->issue_width : 1;
    for (int i = 0; i < CC_NUNITS; i++) {
        q->units[i] = c->units[i];
        q->pool[i] = i;
    }
    if (q->units[CC_UNIT_ALU] < 1) q->units[CC_UNIT_ALU] = 1;
    if (q->units[CC_UNIT_LOAD] < 1) q->units[CC_UNIT_LOAD] = 1;
    if (q->units[CC_UNIT_STORE] < 1) q->units[CC_UNIT_STORE] = 1;
    if (q->units[CC_UNIT_BRANCH] < 1) q->pool[CC_UNIT_BRANCH] = CC_UNIT_ALU;
    if (q->units[CC_UNIT_FP] < 1) q->pool[CC_UNIT_FP] = CC_UNIT_ALU;
    uint64_t r = 64;
    while (r < (uint64_t)q->S * (uint64_t)(q->W + 1) * 4 + 256) r <<= 1;
    q->rmask = r - 1;
    q->seq = malloc(q->S * sizeof *q->seq);
    q->unit = malloc(q->S);
    q->dep = malloc(q->S * 4 * sizeof *q->dep);
    q->ndep = malloc(q->S);
    q->ring = malloc(r * sizeof *q->ring);
    if (!q->seq || !q->unit || !q->dep || !q->ndep || !q->ring) return -1;
    for (uint64_t i = 0; i < r; i++) q->ring[i] = UINT64_MAX;
    return 0;
}

static void iss_free(issue_t *q) {
    free(q->seq);
    free(q->unit);
    free(q->dep);
    free(q->ndep);
    free(q->ring);
}

static void iss_cycle(issue_t *q) {
    int used[CC_NUNITS] = {0};
    int total = 0, w = 0;
    for (int i = 0; i < q->n; i++) {
        int ok = 0;
        if (total < q->W) {
            int pool = q->pool[q->unit[i]];
            if (used[pool] < q->units[pool]) {
                ok = 1;
                for (int d = 0; d < q->ndep[i]; d++) {
                    uint64_t ic = q->ring[q->dep[i * 4 + d] & q->rmask];
                    if (ic == UINT64_MAX || ic >= q->cycle) {
                        ok = 0;
                        break;
                    }
                }
                if (ok) {
                    used[pool]++;
                    total++;
                    q->ring[q->seq[i] & q->rmask] = q->cycle;
                }
            }
        }
        if (!ok) {
            if (w != i) {
                q->seq[w] = q->seq[i];
                q->unit[w] = q->unit[i];
                q->ndep[w] = q->ndep[i];
                memcpy(&q->dep[w * 4], &q->dep[i * 4], 4 * sizeof *q->dep);
            }
            w++;
        }
    }
    q->n = w;
    q->cycle++;
}

static void iss_push(issue_t *q, uint64_t packed) {
    while (q->n >= q->S) iss_cycle(q);
    uint64_t seq = q->next_seq++;
    int i = q->n++;
    uint8_t unit = (uint8_t)(packed >> 48);
    q->seq[i] = seq;
    q->unit[i] = unit < CC_NUNITS ? unit : CC_UNIT_ALU;
    q->ndep[i] = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t r = (uint8_t)(packed >> (8 * k));
        if (r == CC_REG_NONE) continue;
        uint64_t wr = q->reg_writer[r];
        if (!wr) continue;
        uint64_t p = wr - 1;
        if (seq - p > (q->rmask >> 1)) continue; /* ancient: long issued */
        if (q->ring[p & q->rmask] != UINT64_MAX && q->ring[p & q->rmask] < q->cycle) {
            q->reg_writer[r] = 0; /* issued in an earlier cycle: ready */
            continue;
        }
        int dup = 0;
        for (int d = 0; d < q->ndep[i]; d++)
            if (q->dep[i * 4 + d] == p) dup = 1;
        if (!dup) q->dep[i * 4 + q->ndep[i]++] = p;
    }
    q->ring[seq & q->rmask] = UINT64_MAX;
    for (int k = 4; k < 6; k++) {
        uint8_t r = (uint8_t)(packed >> (8 * k));
        if (r != CC_REG_NONE) q->reg_writer[r] = seq + 1;
    }
}

static void iss_drain(issue_t *q) {
    while (q->n) iss_cycle(q);
}

/* ------------------------------------------------------------------------------------ */
/* set-up */

static int fast_ok(const cc_sim *s);

static int path_contains(const cpath *p, const cinst *ci) {
    for (int k = 0; k < p->n; k++)
        if (p->lv[k] == ci) return 1;
    return 0;
}

static int add_unique(cinst ***list, int *n, cinst *ci) {
    for (int i = 0; i < *n; i++)
        if ((*list)[i] == ci) return 0;
    cinst **nl = realloc(*list, (*n + 1) * sizeof **list);
    if (!nl) return -1;
    nl[(*n)++] = ci;
    *list = nl;
    return 0;
}

#define FAIL(...)                                                                            \
    do {                                                                                     \
        if (err && errlen) snprintf(err, errlen, __VA_ARGS__);                               \
        cc_sim_free(s);                                                                      \
        return NULL;                                                                         \
    } while (0)

cc_sim *cc_sim_new(const cc_config *cfg, char *err, size_t errlen) {
    cc_sim *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    const cc_config *c = &s->cfg;
    if (c->ncores < 1 || c->ncores > CC_MAX_CORES) FAIL("cores must be 1..%d", CC_MAX_CORES);
    if (c->ncaches < 0 || c->ncaches > CC_MAX_CACHES) FAIL("too many caches");
    if (c->ntlbs < 0 || c->ntlbs > CC_MAX_TLBS) FAIL("too many TLBs");
    s->ncores = c->ncores;
    s->coherent = c->ncores > 1 && c->ncaches > 0;
    s->line_shift = c->ncaches ? ilog2(c->caches[0].line_size) : 6;
    s->core = calloc(s->ncores, sizeof *s->core);
    if (!s->core) FAIL("out of memory");

    for (int i = 0; i < c->ncaches; i++) {
        const cc_cache_cfg *cc = &c->caches[i];
        if (!pow2(cc->line_size) || cc->line_size != c->caches[0].line_size)
            FAIL("cache %d: line size", i);
        if (!cc->ways || cc->size % ((uint64_t)cc->line_size * cc->ways)) FAIL("cache %d: geometry", i);
        uint64_t sets = cc->size / ((uint64_t)cc->line_size * cc->ways);
        if (!pow2(sets)) FAIL("cache %d: sets not a power of two", i);
        if (cc->replacement == CC_REPL_PLRU && (!pow2(cc->ways) || cc->ways > 64))
            FAIL("cache %d: PLRU ways", i);
        if (cc->level < 1 || cc->level > 3) FAIL("cache %d: level", i);
        int share = cc->shared <= 0 ? s->ncores : cc->shared;
        int n = (s->ncores + share - 1) / share;
        s->ninst[i] = n;
        s->inst[i] = calloc(n, sizeof(cinst));
        if (!s->inst[i]) FAIL("out of memory");
        for (int j = 0; j < n; j++) {
            cinst *ci = &s->inst[i][j];
            if (carr_init(&ci->arr, (uint32_t)sets, cc->ways, cc->replacement,
                          c->seed * 1315423911ULL + (uint64_t)i * 977 + (uint64_t)j + 1))
                FAIL("out of memory for cache %d", i);
            ci->cfg = i;
            ci->st = &s->st.cache[i];
            ci->pol = cc->policy;
            ci->wa = cc->write_allocate;
            ci->fill_read = cc->level == 1 || cc->policy == CC_POL_INCLUSIVE || cc->policy == CC_POL_NINE;
            ci->fill_write = ci->fill_read && cc->write_allocate;
            ci->priv = share == 1;
            ci->owner = share == 1 ? j : 64 + i * 64 + j;
        }
    }
    for (int core = 0; core < s->ncores; core++) {
        core_t *co = &s->core[core];
        for (int side = 0; side < 2; side++) {
            cpath *p = &co->path[side];
            for (int lvl = 1; lvl <= 3; lvl++) {
                for (int i = 0; i < c->ncaches; i++) {
                    const cc_cache_cfg *cc = &c->caches[i];
                    if (cc->level != lvl) continue;
                    int serves = cc->kind == CC_KIND_UNIFIED ||
                                 (side == 0 ? cc->kind == CC_KIND_INSTR : cc->kind == CC_KIND_DATA);
                    if (!serves) continue;
                    if (p->n != lvl - 1) FAIL("cache levels of side %d are not contiguous", side);
                    int share = cc->shared <= 0 ? s->ncores : cc->shared;
                    p->lv[p->n++] = &s->inst[i][core / share];
                }
            }
            p->npriv = 0;
            while (p->npriv < p->n && p->lv[p->npriv]->priv) p->npriv++;
            for (int k = 0; k < p->n; k++) {
                int pol = c->caches[p->lv[k]->cfg].policy;
                int npol = k + 1 < p->n ? c->caches[p->lv[k + 1]->cfg].policy : -1;
                if ((k > 0 && pol == CC_POL_INCLUSIVE) || npol == CC_POL_EXCLUSIVE || npol == CC_POL_VICTIM)
                    p->evict_work |= 1 << k;
            }
            if (c->ncaches && p->n == 0) FAIL("no cache serves side %d", side);
        }
    }
    /* back-invalidation lists */
    for (int core = 0; core < s->ncores; core++)
        for (int side = 0; side < 2; side++) {
            cpath *p = &s->core[core].path[side];
            for (int k = 1; k < p->n; k++)
                for (int side2 = 0; side2 < 2; side2++) {
                    cpath *p2 = &s->core[core].path[side2];
                    for (int k2 = 0; k2 < p2->n; k2++) {
                        if (c->caches[p2->lv[k2]->cfg].level >= c->caches[p->lv[k]->cfg].level) continue;
                        if (add_unique(&p->lv[k]->upper, &p->lv[k]->nupper, p2->lv[k2]))
                            FAIL("out of memory");
                    }
                }
        }
    /* snoop lists */
    if (s->coherent)
        for (int core = 0; core < s->ncores; core++)
            for (int side = 0; side < 2; side++) {
                core_t *co = &s->core[core];
                for (int i = 0; i < c->ncaches; i++)
                    for (int j = 0; j < s->ninst[i]; j++) {
                        cinst *ci = &s->inst[i][j];
                        if (path_contains(&co->path[side], ci)) continue;
                        if (add_unique(&co->off[side], &co->noff[side], ci)) FAIL("out of memory");
                    }
            }
    /* TLBs */
    if (c->ntlbs) {
        s->tlbarr = calloc((size_t)s->ncores * c->ntlbs, sizeof(carr));
        if (!s->tlbarr) FAIL("out of memory");
        for (int side = 0; side < 2; side++) s->tlb_shift[side] = 12;
        for (int core = 0; core < s->ncores; core++) {
            core_t *co = &s->core[core];
            for (int i = 0; i < c->ntlbs; i++) {
                const cc_tlb_cfg *t = &c->tlbs[i];
                if (!t->ways || t->entries % t->ways || !pow2(t->entries / t->ways) || !pow2(t->page_size))
                    FAIL("tlb %d: geometry", i);
                if (t->replacement == CC_REPL_PLRU && (!pow2(t->ways) || t->ways > 64)) FAIL("tlb %d: PLRU ways", i);
                carr *a = &s->tlbarr[(size_t)core * c->ntlbs + i];
                if (carr_init(a, t->entries / t->ways, t->ways, t->replacement,
                              c->seed * 2654435761ULL + (uint64_t)i * 31 + (uint64_t)core + 7))
                    FAIL("out of memory");
            }
            for (int side = 0; side < 2; side++)
                for (int lvl = 1; lvl <= 2; lvl++)
                    for (int i = 0; i < c->ntlbs; i++) {
                        const cc_tlb_cfg *t = &c->tlbs[i];
                        int serves = t->kind == CC_KIND_UNIFIED ||
                                     (side == 0 ? t->kind == CC_KIND_INSTR : t->kind == CC_KIND_DATA);
                        if (t->level != lvl || !serves) continue;
                        if (co->ntlb[side] != lvl - 1) FAIL("TLB levels of side %d are not contiguous", side);
                        co->tlb[side][co->ntlb[side]] = &s->tlbarr[(size_t)core * c->ntlbs + i];
                        co->tlbcfg[side][co->ntlb[side]] = i;
                        co->ntlb[side]++;
                        s->tlb_shift[side] = ilog2(t->page_size);
                    }
        }
    }
    /* branch predictors */
    if (c->bp_kind != CC_BP_NONE) {
        if (!pow2(c->bp_table_size)) FAIL("branch table size must be a power of two");
        s->bp_mask = c->bp_table_size - 1;
        s->hist_mask = c->bp_history_bits >= 64 ? UINT64_MAX : ((1ULL << c->bp_history_bits) - 1);
        for (int core = 0; core < s->ncores; core++) {
            s->core[core].bp = malloc(c->bp_table_size);
            if (!s->core[core].bp) FAIL("out of memory");
            memset(s->core[core].bp, 1, c->bp_table_size); /* weakly not taken */
        }
    }
    if (c->issue_enabled)
        for (int core = 0; core < s->ncores; core++)
            if (iss_init(&s->core[core].iss, c)) FAIL("out of memory");
    s->chunk_left = c->chunk_instructions;
    for (int core = 0; core < s->ncores; core++)
        for (int side = 0; side < 2; side++) {
            core_t *co = &s->core[core];
            const cpath *p = &co->path[side];
            for (int k = 1; k < p->n && co->npf[side] < 2; k++) {
                const carr *a = &p->lv[k]->arr;
                if (!a->big) continue;
                pfdesc *d = &co->pf[side][co->npf[side]++];
                d->mem = a->mem;
                d->set_mask = a->set_mask;
                d->stride = a->stride;
                d->lines = a->stamp_off > 128 ? 3 : a->stamp_off > 64 ? 2 : 1;
                d->level = k;
                d->quiet = 0;
                s->pf_levels = 1;
            }
        }
    s->st.warm = c->warmup_instructions == 0;
    s->fast = !c->force_general && fast_ok(s);
    return s;
}

void cc_sim_free(cc_sim *s) {
    if (!s) return;
    for (int i = 0; i < CC_MAX_CACHES; i++) {
        if (!s->inst[i]) continue;
        for (int j = 0; j < s->ninst[i]; j++) {
            carr_free(&s->inst[i][j].arr);
            free(s->inst[i][j].upper);
        }
        free(s->inst[i]);
    }
    if (s->tlbarr) {
        for (int i = 0; i < s->ncores * s->cfg.ntlbs; i++) carr_free(&s->tlbarr[i]);
        free(s->tlbarr);
    }
    if (s->core) {
        for (int core = 0; core < s->ncores; core++) {
            free(s->core[core].bp);
            free(s->core[core].off[0]);
            free(s->core[core].off[1]);
            if (s->cfg.issue_enabled) iss_free(&s->core[core].iss);
        }
        free(s->core);
    }
    free(s);
}

/* ------------------------------------------------------------------------------------ */
/* hierarchy */

static void writeback(cc_sim *s, const cpath *p, int k, uint64_t line) {
    for (; k < p->n; k++) {
        int64_t slot = carr_find(&p->lv[k]->arr, line);
        if (slot >= 0) {
            *FL(&p->lv[k]->arr, (size_t)slot) |= F_DIRTY;
            return;
        }
    }
    s->st.mem_writebacks++;
}

static int back_invalidate(cc_sim *s, cinst *ci, uint64_t line) {
    int dirty = 0;
    for (int u = 0; u < ci->nupper; u++) {
        carr *a = &ci->upper[u]->arr;
        int64_t slot = carr_find(a, line);
        if (slot < 0) continue;
        dirty |= *FL(a, (size_t)slot) & F_DIRTY;
        carr_invalidate(a, (size_t)slot, 0);
        s->st.cache[ci->cfg].back_invalidations++;
    }
    return dirty;
}

static void evicted(cc_sim *s, const cpath *p, int k, uint64_t line, uint8_t flags) {
    cinst *ci = p->lv[k];
    const cc_cache_cfg *cc = &s->cfg.caches[ci->cfg];
    cc_cache_stats *st = &s->st.cache[ci->cfg];
    st->evictions++;
    int dirty = flags & F_DIRTY;
    if (k > 0 && cc->policy == CC_POL_INCLUSIVE) dirty |= back_invalidate(s, ci, line);
    if (dirty) st->writebacks++;
    if (k + 1 < p->n) {
        cinst *ni = p->lv[k + 1];
        int npol = s->cfg.caches[ni->cfg].policy;
        if (npol == CC_POL_EXCLUSIVE || npol == CC_POL_VICTIM) {
            int64_t slot = carr_find(&ni->arr, line);
            if (slot >= 0) {
                if (dirty) *FL(&ni->arr, (size_t)slot) |= F_DIRTY;
                carr_touch(&ni->arr, (size_t)slot);
            } else {
                uint64_t vl;
                uint8_t vf;
                carr_install(&ni->arr, line, dirty ? F_DIRTY : 0, &vl, &vf);
                s->st.cache[ni->cfg].fills++;
                if (vl != TAG_INVALID) evicted(s, p, k + 1, vl, vf);
            }
        } else if (dirty) {
            writeback(s, p, k + 1, line);
        }
    } else if (dirty) {
        s->st.mem_writebacks++;
    }
}

/* The walk for an access within one line (the common case): as hier() below with one line. */
static int hier1(cc_sim *s, const cpath *p, int k, uint64_t line, int cls, int above_alloc,
                 int *dirty_up, int64_t *slot0) {
    if (k == p->n) return MEM_LEVEL;
    cinst *ci = p->lv[k];
    carr *a = &ci->arr;
    cc_cache_stats *st = ci->st;
    const int is_write = cls >= CC_K_STORE;
    const int writer_here = is_write && !above_alloc;
    int64_t slot = carr_find(a, line);
    st->access[cls]++;
    if (slot >= 0) {
        carr_touch(a, (size_t)slot);
        *slot0 = slot;
        if (k > 0 && ci->pol == CC_POL_EXCLUSIVE && above_alloc) {
            if (*FL(a, (size_t)slot) & F_DIRTY) *dirty_up = 1;
            carr_invalidate(a, (size_t)slot, 0);
        } else if (writer_here) {
            *FL(a, (size_t)slot) |= F_DIRTY;
        }
        return k + 1;
    }
    st->miss[cls]++;
    if (s->coherent && carr_coh_was(a, line)) {
        st->coh_misses++;
        if (k == 0) s->last_coh = 1;
    }
    const int alloc_here = (k == 0 || ci->pol == CC_POL_INCLUSIVE || ci->pol == CC_POL_NINE) &&
                           (cls != CC_K_STORE || ci->wa);
    int below_dirty = 0;
    int64_t ignore;
    int served = hier1(s, p, k + 1, line, cls, above_alloc || alloc_here, &below_dirty, &ignore);
    if (alloc_here) {
        uint64_t vl;
        uint8_t vf;
        *slot0 = (int64_t)carr_install(a, line, (writer_here || below_dirty) ? F_DIRTY : 0, &vl, &vf);
        st->fills++;
        if (vl != TAG_INVALID) {
            if ((vf & F_DIRTY) || (p->evict_work >> k & 1)) evicted(s, p, k, vl, vf);
            else st->evictions++;
        }
    } else if (below_dirty) {
        *dirty_up = 1;
    }
    return served;
}

/* The same walk without recursion, for one core (no coherence): look levels up top-down until
 * one hits, then fill the levels that missed bottom-up. Returns the serving level. */
static inline int walk1(cc_sim *s, const cpath *p, uint64_t line, int cls, int64_t *slot0) {
    const int n = p->n;
    const uint16_t ptv = line_ptag(line);
    const int is_write = cls >= CC_K_STORE;
    uint8_t *sb[3];
    int hit = n, hw = -1;
    unsigned alloc = 0; /* the missed levels that allocate */
    for (int k = 0; k < n; k++) {
        cinst *ci = p->lv[k];
        carr *a = &ci->arr;
        ci->st->access[cls]++;
        sb[k] = SB(a, line & a->set_mask);
        int w = sb_find(a, sb[k], line, ptv);
        if (w >= 0) {
            hit = k;
            hw = w;
            break;
        }
        ci->st->miss[cls]++;
        if (cls == CC_K_STORE ? ci->fill_write : ci->fill_read) alloc |= 1u << k;
    }
    int carry = 0; /* dirty data moving up from an exclusive hit */
    if (hit < n) {
        cinst *ci = p->lv[hit];
        carr *a = &ci->arr;
        sb_touch(a, sb[hit], (uint32_t)hw);
        if (hit == 0) *slot0 = (int64_t)SLOT(line & a->set_mask, (uint32_t)hw);
        uint8_t *f = sb[hit] + a->flag_off + hw;
        if (hit > 0 && ci->pol == CC_POL_EXCLUSIVE && alloc) {
            carry = *f & F_DIRTY;
            carr_invalidate(a, SLOT(line & a->set_mask, (uint32_t)hw), 0);
        } else if (is_write && !alloc) {
            *f |= F_DIRTY;
        }
    }
    for (int k = hit - 1; k >= 0; k--) {
        if (!(alloc >> k & 1)) continue;
        cinst *ci = p->lv[k];
        carr *a = &ci->arr;
        const int writer_here = is_write && !(alloc & ((1u << k) - 1));
        uint64_t vl;
        uint8_t vf;
        uint32_t w = sb_install(a, sb[k], line, ptv, (writer_here || carry) ? F_DIRTY : 0, &vl, &vf);
        carry = 0;
        if (k == 0) *slot0 = (int64_t)SLOT(line & a->set_mask, w);
        ci->st->fills++;
        if (vl != TAG_INVALID) {
            if ((vf & F_DIRTY) || (p->evict_work >> k & 1)) evicted(s, p, k, vl, vf);
            else ci->st->evictions++;
        }
    }
    return hit < n ? hit + 1 : MEM_LEVEL;
}

/* Look up `mask` lines of the access at level k and below; returns the level (1-based, 4 =
 * memory) that served the deepest line. *dirty_up gets lines whose dirty data moves up
 * (exclusive hits). */
static int hier(cc_sim *s, const cpath *p, int k, const uint64_t *lines, int nl, unsigned mask,
                int cls, int store_above_alloc, unsigned *dirty_up, int64_t *slot0) {
    if (k == p->n) return MEM_LEVEL;
    cinst *ci = p->lv[k];
    carr *a = &ci->arr;
    const cc_cache_cfg *cc = &s->cfg.caches[ci->cfg];
    cc_cache_stats *st = &s->st.cache[ci->cfg];
    const int is_write = cls >= CC_K_STORE;
    const int alloc_here = (k == 0 || cc->policy == CC_POL_INCLUSIVE || cc->policy == CC_POL_NINE) &&
                           (cls != CC_K_STORE || cc->write_allocate);
    const int writer_here = is_write && !store_above_alloc;
    unsigned missmask = 0, coh = 0;
    for (int i = 0; i < nl; i++) {
        if (!(mask & (1u << i))) continue;
        int64_t slot = carr_find(a, lines[i]);
        if (slot >= 0) {
            carr_touch(a, (size_t)slot);
            *slot0 = slot;
            if (k > 0 && cc->policy == CC_POL_EXCLUSIVE && store_above_alloc) {
                if (*FL(a, (size_t)slot) & F_DIRTY) *dirty_up |= 1u << i;
                carr_invalidate(a, (size_t)slot, 0);
            } else if (writer_here) {
                *FL(a, (size_t)slot) |= F_DIRTY;
            }
        } else {
            missmask |= 1u << i;
            if (s->coherent && carr_coh_was(a, lines[i])) coh = 1;
        }
    }
    st->access[cls]++;
    if (!missmask) return k + 1;
    st->miss[cls]++;
    if (coh) {
        st->coh_misses++;
        if (k == 0) s->last_coh = 1;
    }
    unsigned fwd = s->cfg.straddle_all ? mask : missmask;
    unsigned below_dirty = 0;
    int64_t ignore;
    int served = hier(s, p, k + 1, lines, nl, fwd, cls, store_above_alloc || alloc_here, &below_dirty,
                      &ignore);
    if (alloc_here) {
        for (int i = 0; i < nl; i++) {
            if (!(missmask & (1u << i))) continue;
            uint8_t fl = (writer_here || (below_dirty & (1u << i))) ? F_DIRTY : 0;
            uint64_t vl;
            uint8_t vf;
            *slot0 = (int64_t)carr_install(a, lines[i], fl, &vl, &vf);
            st->fills++;
            if (vl != TAG_INVALID) evicted(s, p, k, vl, vf);
        }
    } else {
        *dirty_up |= below_dirty;
    }
    return served;
}

/* ------------------------------------------------------------------------------------ */
/* coherence */

static int probe_invalidate(cc_sim *s, core_t *co, int side, uint64_t line) {
    uint64_t cores = 0;
    int shared_owners = 0, dirty = 0;
    for (int i = 0; i < co->noff[side]; i++) {
        cinst *ci = co->off[side][i];
        int64_t slot = carr_find(&ci->arr, line);
        if (slot < 0) continue;
        if (*FL(&ci->arr, (size_t)slot) & F_DIRTY) dirty = 1;
        carr_invalidate(&ci->arr, (size_t)slot, 1);
        s->st.cache[ci->cfg].coh_invalidations++;
        if (ci->owner < 64) {
            cores |= 1ULL << ci->owner;
        } else {
            shared_owners++;
        }
    }
    int n = __builtin_popcountll(cores) + shared_owners;
    s->st.invalidations += (uint64_t)n;
    if (dirty) s->st.interventions++; /* the modified copy supplied the data */
    return n;
}

static int probe_read(cc_sim *s, core_t *co, int side, uint64_t line) {
    int found = 0, dirty = 0;
    for (int i = 0; i < co->noff[side]; i++) {
        cinst *ci = co->off[side][i];
        int64_t slot = carr_find(&ci->arr, line);
        if (slot < 0) continue;
        found = 1;
        uint8_t *f = FL(&ci->arr, (size_t)slot);
        if (*f & F_DIRTY) dirty = 1;
        *f &= (uint8_t)~(F_DIRTY | F_EXCL);
    }
    if (dirty) s->st.interventions++;
    return found;
}

static void set_excl(core_t *co, uint64_t line, int excl) {
    for (int side = 0; side < 2; side++) {
        cpath *p = &co->path[side];
        for (int k = 0; k < p->npriv; k++) {
            int64_t slot = carr_find(&p->lv[k]->arr, line);
            if (slot < 0) continue;
            if (excl) *FL(&p->lv[k]->arr, (size_t)slot) |= F_EXCL;
            else *FL(&p->lv[k]->arr, (size_t)slot) &= (uint8_t)~F_EXCL;
        }
    }
}

static int any_excl(core_t *co, uint64_t line) {
    for (int side = 0; side < 2; side++) {
        cpath *p = &co->path[side];
        for (int k = 0; k < p->npriv; k++) {
            int64_t slot = carr_find(&p->lv[k]->arr, line);
            if (slot >= 0 && (*FL(&p->lv[k]->arr, (size_t)slot) & F_EXCL)) return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* TLBs */

static void tlb_access(cc_sim *s, core_t *co, int side, uint64_t addr, unsigned size) {
    int shift = s->tlb_shift[side];
    uint64_t p0 = addr >> shift, p1 = (addr + size - 1) >> shift;
    for (uint64_t pg = p0; pg <= p1; pg++) {
        carr *t = co->tlb[side][0];
        cc_tlb_stats *ts = &s->st.tlb[co->tlbcfg[side][0]];
        ts->access[side]++;
        if (pg == t->last_line) continue;
        int64_t slot = carr_find(t, pg);
        if (slot >= 0) {
            carr_touch(t, (size_t)slot);
            t->last_line = pg;
            continue;
        }
        ts->miss[side]++;
        uint64_t vl;
        uint8_t vf;
        carr_install(t, pg, 0, &vl, &vf);
        t->last_line = pg;
        if (co->ntlb[side] > 1) {
            carr *t2 = co->tlb[side][1];
            cc_tlb_stats *ts2 = &s->st.tlb[co->tlbcfg[side][1]];
            ts2->access[side]++;
            int64_t s2 = carr_find(t2, pg);
            if (s2 >= 0) {
                carr_touch(t2, (size_t)s2);
                s->st.stlb_hit[side]++;
            } else {
                ts2->miss[side]++;
                carr_install(t2, pg, 0, &vl, &vf);
                s->st.tlb_walk[side]++;
            }
        } else {
            s->st.tlb_walk[side]++;
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* one memory access */

static __attribute__((noinline)) void mem_access_slow(cc_sim *s, core_t *co, int side, int cls,
                                                      uint64_t addr, unsigned size) {
    const cpath *p = &co->path[side];
    if (!p->n) {
        s->st.served[cls][MEM_LEVEL]++;
        return;
    }
    if (size <= 64 && ((addr ^ (addr + size - 1)) >> s->line_shift) == 0 && !s->coherent) {
        /* within one line, one core: the plain walk */
        uint64_t l0 = addr >> s->line_shift;
        carr *l1 = &p->lv[0]->arr;
        if (l0 == l1->last_line) { /* a store to the MRU line (coherent runs only reach here) */
            *FL(l1, l1->last_slot) |= F_DIRTY;
            p->lv[0]->st->access[cls]++;
            return;
        }
        int64_t slot0 = -1;
        int served = walk1(s, p, l0, cls, &slot0);
        if (served > 1) s->st.served[cls][served]++;
        if (slot0 >= 0 && TAGS(l1, SLOT_SET((size_t)slot0))[SLOT_WAY((size_t)slot0)] == l0) {
            l1->last_line = l0;
            l1->last_slot = (size_t)slot0;
        } else {
            l1->last_line = TAG_INVALID;
        }
        return;
    }
    carr *l1 = &p->lv[0]->arr;
    const int is_write = cls >= CC_K_STORE;
    uint64_t l0 = addr >> s->line_shift, lend = (addr + size - 1) >> s->line_shift;
    if (l0 == lend) {
        if (l0 == l1->last_line) { /* a store to the MRU line without an exclusive copy */
            uint8_t *f = FL(l1, l1->last_slot);
            if (!is_write || !s->coherent || (*f & F_EXCL)) {
                if (is_write) *f |= F_DIRTY;
                p->lv[0]->st->access[cls]++;
                return;
            }
        }
    } else {
        s->st.split[cls]++;
    }
    int nl = (int)(lend - l0 + 1);
    if (nl > MAX_LINES) nl = MAX_LINES;
    uint64_t lines[MAX_LINES];
    unsigned pre_excl = 0, l1hit = 0;
    for (int i = 0; i < nl; i++) lines[i] = l0 + (uint64_t)i;
    if (s->coherent) {
        for (int i = 0; i < nl; i++) {
            int64_t slot = carr_find(l1, lines[i]);
            if (slot >= 0) {
                l1hit |= 1u << i;
                if (*FL(l1, (size_t)slot) & F_EXCL) pre_excl |= 1u << i;
            }
        }
    }
    s->last_coh = 0;
    int64_t slot0 = -1;
    int served;
    if (nl == 1) {
        int dirty_up = 0;
        served = hier1(s, p, 0, l0, cls, 0, &dirty_up, &slot0);
    } else {
        unsigned dirty_up = 0;
        served = hier(s, p, 0, lines, nl, (1u << nl) - 1, cls, 0, &dirty_up, &slot0);
    }
    if (served > 1) s->st.served[cls][served]++; /* level 1: derived from L1's counters */
    if (s->last_coh) {
        s->st.coh_misses++;
        if (cls != CC_K_STORE) s->st.coh_exposed++;
    }
    if (s->coherent) {
        for (int i = 0; i < nl; i++) {
            unsigned bit = 1u << i;
            if (is_write) {
                if (!(pre_excl & bit)) {
                    int n = probe_invalidate(s, co, side, lines[i]);
                    if (n && served <= p->npriv) s->st.upgrades++;
                    set_excl(co, lines[i], 1);
                }
            } else if (served > p->npriv) {
                int found = probe_read(s, co, side, lines[i]);
                set_excl(co, lines[i], !found);
            } else if (!(l1hit & bit)) {
                set_excl(co, lines[i], any_excl(co, lines[i]));
            }
        }
    }
    if (nl == 1) {
        /* the L1 slot, unless the coherence actions or an eviction cascade moved it */
        int64_t slot = slot0;
        if (slot < 0 || TAGS(l1, SLOT_SET((size_t)slot))[SLOT_WAY((size_t)slot)] != l0) slot = carr_find(l1, l0);
        if (slot >= 0) {
            l1->last_line = l0;
            l1->last_slot = (size_t)slot;
        } else {
            l1->last_line = TAG_INVALID;
        }
    } else {
        l1->last_line = TAG_INVALID;
    }
}

/* One memory access. The fast path: a load (or a store with an exclusive copy) to the line
 * the L1 touched last -- no replacement state changes. */
static inline void mem_access(cc_sim *s, core_t *co, int side, int cls, uint64_t addr, unsigned size) {
    if (size == 0) size = 1;
    if (__builtin_expect(addr + size < addr, 0)) { /* no wrap past 2^64 */
        if (addr + size) s->wrapped = 1;          /* its last byte passed 2^64 - 1, not just reached it */
        size = (unsigned)(0 - addr);
    }
    if (co->ntlb[side]) tlb_access(s, co, side, addr, size);
    const cpath *p = &co->path[side];
    if (p->n) {
        carr *l1 = &p->lv[0]->arr;
        uint64_t l0 = addr >> s->line_shift;
        if (l0 == l1->last_line && ((addr + size - 1) >> s->line_shift) == l0) {
            if (cls < CC_K_STORE || (!s->coherent && (*FL(l1, l1->last_slot) |= F_DIRTY))) {
                p->lv[0]->st->access[cls]++;
                return;
            }
        }
    } else {
        s->st.access[cls]++; /* no caches: counted here (else derived from the L1s) */
    }
    mem_access_slow(s, co, side, cls, addr, size);
}

/* ------------------------------------------------------------------------------------ */
/* driver */

static void reset_counters(cc_sim *s) {
    memset(&s->st, 0, sizeof s->st);
    s->st.warm = 1;
    if (s->cfg.issue_enabled)
        for (int c = 0; c < s->ncores; c++) s->core[c].iss.base_cycle = s->core[c].iss.cycle;
}

static void other_record(cc_sim *s, core_t *co, const cc_rec *r) {
    const cc_config *c = &s->cfg;
    switch (r->kind) {
    case CC_K_BRANCH:
        s->st.branches++;
        if (r->size & CC_BR_TAKEN) s->st.taken++;
        if (r->size & CC_BR_COND) {
            s->st.cond_branches++;
            if (co->bp) {
                int taken = r->size & CC_BR_TAKEN;
                uint64_t idx = c->bp_kind == CC_BP_GSHARE ? ((r->addr ^ (co->ghr & s->hist_mask)) & s->bp_mask)
                                                          : (r->addr & s->bp_mask);
                uint8_t *ctr = &co->bp[idx];
                int pred = *ctr >= 2;
                if (pred != (taken != 0)) s->st.mispredicts++;
                if (taken) {
                    if (*ctr < 3) (*ctr)++;
                } else if (*ctr > 0) {
                    (*ctr)--;
                }
                co->ghr = (co->ghr << 1) | (taken ? 1 : 0);
            }
        }
        break;
    case CC_K_MARKER:
        if (!s->st.markers++) s->st.first_marker_instr = s->st.instructions;
        s->st.last_marker_instr = s->st.instructions;
        break;
    case CC_K_UOP:
        if (c->issue_enabled) {
            uint8_t fl = (uint8_t)(r->addr >> 56);
            s->st.uops++;
            if (fl & CC_UOP_FIRST) s->st.issue_instructions++;
            if (fl & CC_UOP_PLACEHOLDER) s->st.placeholder_instructions++;
            iss_push(&co->iss, r->addr);
        }
        break;
    default: break;
    }
}

/* ------------------------------------------------------------------------------------ */
/* the single-core kernel
 *
 * With one core there is no coherence, and every access within one line takes the walk of
 * walk1() above, whatever the policies.  That walk is written once more here, lean:
 *  - each level's geometry and policy are copied into a descriptor once per batch, and sets
 *    of at most 16 ways have the compact layout (fixed offsets; a lookup that misses reads
 *    one host line);
 *  - the walk is compiled for 1, 2 and 3 levels, for reads and writes, and for LRU-only and
 *    PLRU-only hierarchies without inclusive, exclusive or victim levels (chosen once per
 *    batch), with a per-level policy switch for the rest;
 *  - the per-level access, miss, fill and eviction counters follow from the level that
 *    served each access, so an access bumps one local counter; they are folded into the
 *    stats at the end of the batch (and dropped at the end of the warm-up, as the general
 *    loop drops its counters);
 *  - whatever is rare goes to the general code: a line-straddling access, a free way, a
 *    dirty victim or one an inclusive, exclusive or victim level must hear of. */

enum { FK_LRU, FK_FIFO, FK_PLRU, FK_RANDOM, FK_GENERIC, FK_MIXED, FK_LRU_E, FK_PLRU_E, FK_LRU_W };
/* FK_LRU_E / FK_PLRU_E: every level LRU (PLRU), compact, none exclusive, but some level's
 * victims need eviction work (back-invalidation by an inclusive level, a fill of a victim
 * level below): done by fevict() in the kernel. FK_BASE: the levels' own policy. */
#define FK_BASE(R) ((R) == FK_LRU_E || (R) == FK_LRU_W ? FK_LRU : (R) == FK_PLRU_E ? FK_PLRU : (R))
/* FK_LRU_W: every level LRU, none exclusive or with eviction work, some wide (more than 16
 * ways: a linked-list order), which take the generic code */
#define FK_WIDE(R) ((R) == FK_LRU_W)
#define FK_EVICT(R) ((R) == FK_MIXED || (R) == FK_LRU_E || (R) == FK_PLRU_E)

typedef struct {
    uint8_t *mem;
    uint64_t set_mask;
    size_t stride;
    uint32_t ways;
    int repl;
    int excl, ework;
    int wide;  /* repl is FK_GENERIC (more than 16 ways, or a linked-list order): the
                * uniform kernels take the generic code for this level */
    int base;  /* the policy (FK_LRU, FK_FIFO, FK_PLRU, FK_RANDOM), whatever the layout */
    int binv;  /* an inclusive level below L1: its victims are invalidated above */
    int vnext; /* the next level is exclusive or a victim cache: it is filled by our victims */
    cinst **up; /* binv: the instances above (back-invalidation) */
    int nup;
    struct {        /* their sets, when at most four and of at most 16 ways */
        uint8_t *mem;
        uint64_t set_mask;
        size_t stride;
        carr *a;
    } upd[4];
    int fup;        /* the descriptors upd[] apply */
    uint64_t pset[CMP_WAYS], pclr[CMP_WAYS]; /* compact PLRU: the bits a touch of way w sets, clears */
    int pvmode;     /* PLRU victim: 16 (16 ways), 1..3 (the 8-way table's victim >> (3 - pvmode)), 0 */
    int vshift;      /* LRU/FIFO: the least recent way is nibble ways - 1 of the order word */
    uint64_t pad_or; /* the order word's unused nibbles (all ones) from nibble `ways` up */
    carr *a;
    cc_cache_stats *st;
} flvl;

typedef struct {
    int n, tlb;
    unsigned alloc[CC_NCLASS]; /* bit k: a miss of this class allocates in level k */
    uint64_t line_mask, line_size;
    uint64_t stack_lo, stack_span; /* stack hashing: addresses in [lo, lo + span) */
    flvl lv[3];
    /* the sets of the large levels (up to two) are prefetched a few records ahead: the host
     * lines at offsets 0, pfoff1 and pfoff2 of the set */
    int npf;
    int pfv; /* a level whose victims fill the (victim or exclusive) level below it, or -1 */
    int ntl, tshift;   /* TLB levels (as tlb_access() walks them) and the page shift */
    flvl tl[2];
    cc_tlb_stats *tst[2];
    size_t pfoff1, pfoff2;
    int pfrest[2]; /* sets wider than three host lines (linked-list LRU/FIFO of more than 16
                    * ways): their further lines, up to eight in all */
    uint64_t pfmask[2];
    size_t pfstride[2];
    const uint8_t *pfmem[2];
    int pflevel[2];
} fpath;

/* counters of one batch */
typedef struct {
    uint64_t served[CC_NCLASS][5]; /* accesses by the level that served them (4: memory) */
    uint64_t nfree[2][3];          /* installs into a free way, per side and level */
    uint64_t nevict[2][3];         /* victims handed to evicted() (which counts them) */
    uint64_t fetches;
} fcount;

/* what one walk needs besides the line */
typedef struct {
    cc_sim *s;
    const cpath *p;
    const fpath *fp;
    fcount *fc;
    uint64_t line;
    uint16_t ptv;
    int side, cls;
    int w0;      /* the L1 way that holds the line after the walk, or -1 */
    int general; /* the general code ran (and may have moved the line out of the L1) */
    int carry;   /* dirty data moving down to the next allocating level (exclusive hits) */
} fctx;

static int fast_ok(const cc_sim *s) {
    if (s->ncores != 1 || !s->cfg.ncaches) return 0;
    for (int side = 0; side < 2; side++)
        if (s->core[0].path[side].n < 1) return 0;
    return 1;
}

/* A level's geometry and replacement in the kernel's descriptor (caches and TLBs). */
static void flvl_set(flvl *L, carr *a) {
    L->mem = a->mem;
    L->set_mask = a->set_mask;
    L->stride = a->stride;
    L->ways = a->ways;
    L->base = a->repl == CC_REPL_LRU ? FK_LRU : a->repl == CC_REPL_FIFO ? FK_FIFO
            : a->repl == CC_REPL_PLRU ? FK_PLRU : FK_RANDOM;
    L->wide = a->ways > CMP_WAYS || ((a->repl == CC_REPL_LRU || a->repl == CC_REPL_FIFO) && !a->nib);
    L->repl = L->wide ? FK_GENERIC : L->base;
    if (a->repl == CC_REPL_PLRU && a->ways <= CMP_WAYS)
        for (uint32_t w = 0; w < a->ways; w++) {
            L->pset[w] = a->plru_set[w];
            L->pclr[w] = a->plru_clear[w];
        }
    L->pvmode = a->ways == 16 ? 16 : a->ways == 8 ? 3 : a->ways == 4 ? 2 : a->ways == 2 ? 1 : 0;
    L->vshift = 4 * ((int)a->ways - 1);
    L->pad_or = a->ways >= 16 ? 0 : ~0ULL << (4 * a->ways);
    L->a = a;
}

static void fpath_init(const cc_sim *s, const core_t *co, int side, fpath *fp) {
    const cpath *p = &co->path[side];
    const cc_config *c = &s->cfg;
    memset(fp, 0, sizeof *fp);
    fp->n = p->n;
    fp->line_size = 1ULL << s->line_shift;
    fp->line_mask = fp->line_size - 1;
    fp->stack_lo = c->stack_lo;
    fp->stack_span = c->stack_hash && c->stack_hi > c->stack_lo ? c->stack_hi - c->stack_lo : 0;
    for (int k = 0; k < p->n; k++) {
        cinst *ci = p->lv[k];
        carr *a = &ci->arr;
        flvl *L = &fp->lv[k];
        flvl_set(L, a);
        L->excl = k > 0 && ci->pol == CC_POL_EXCLUSIVE;
        L->ework = (p->evict_work >> k) & 1;
        L->binv = k > 0 && ci->pol == CC_POL_INCLUSIVE;
        L->vnext = k + 1 < p->n && (p->lv[k + 1]->pol == CC_POL_EXCLUSIVE || p->lv[k + 1]->pol == CC_POL_VICTIM);
        L->up = ci->upper;
        L->nup = ci->nupper;
        L->fup = ci->nupper <= 4;
        for (int u = 0; u < ci->nupper && u < 4; u++) {
            carr *ua = &ci->upper[u]->arr;
            L->upd[u].mem = ua->mem;
            L->upd[u].set_mask = ua->set_mask;
            L->upd[u].stride = ua->stride;
            L->upd[u].a = ua;
            if (ua->ways > CMP_WAYS) L->fup = 0;
        }
        L->st = ci->st;
        for (int cls = 0; cls < CC_NCLASS; cls++)
            if (cls == CC_K_STORE ? ci->fill_write : ci->fill_read) fp->alloc[cls] |= 1u << k;
    }
    fp->pfv = -1;
    for (int k = 0; k + 1 < fp->n; k++)
        if (fp->lv[k].vnext && fp->lv[k].ways <= CMP_WAYS && (fp->alloc[CC_K_LOAD] >> k & 1)) fp->pfv = k;
    fp->tlb = co->ntlb[side] > 0;
    fp->ntl = co->ntlb[side];
    fp->tshift = s->tlb_shift[side];
    for (int i = 0; i < fp->ntl; i++) {
        flvl_set(&fp->tl[i], co->tlb[side][i]);
        fp->tst[i] = (cc_tlb_stats *)&s->st.tlb[co->tlbcfg[side][i]];
    }
    fp->npf = 0;
    int lines = 1;
    for (int j = 0; j < co->npf[side]; j++) {
        const pfdesc *d = &co->pf[side][j];
        if (d->quiet) continue;
        const int k = fp->npf++;
        fp->pfmem[k] = d->mem;
        fp->pfmask[k] = d->set_mask;
        fp->pfstride[k] = d->stride;
        fp->pflevel[k] = d->level;
        if (d->lines > lines) lines = d->lines;
    }
    fp->pfoff1 = lines > 1 ? 64 : 0;
    fp->pfoff2 = lines > 2 ? 128 : fp->pfoff1;
    for (int k = 0; k < fp->npf; k++) {
        const size_t hl = fp->pfstride[k] / 64;
        fp->pfrest[k] = hl > 3 ? (int)(hl < 8 ? hl : 8) - 3 : 0;
    }
}

/* The hierarchy's policy when every level has the same one (LRU or PLRU) and no level is
 * exclusive or needs to hear of clean victims; else FK_MIXED. */
static int fpath_uniform(const fpath fp[2]) {
    int r = fp[0].lv[0].repl, ework = 0, wide = 0;
    if (r != FK_LRU && r != FK_PLRU) return FK_MIXED;
    for (int side = 0; side < 2; side++) {
        for (int k = 0; k < fp[side].n; k++) {
            const flvl *L = &fp[side].lv[k];
            if (L->base != r || L->excl) return FK_MIXED;
            ework |= L->ework;
            wide |= L->wide;
        }
    }
    if (wide) return r == FK_LRU && !ework ? FK_LRU_W : FK_MIXED;
    return ework ? (r == FK_LRU ? FK_LRU_E : FK_PLRU_E) : r;
}

/* Fold the instruction count into the stats (a marker record reads it). */
static void fcount_flush_fetches(cc_sim *s, fcount *fc) {
    s->fetch_seen += fc->fetches;
    s->st.instructions += fc->fetches;
    s->st.core_instructions[0] += fc->fetches;
    fc->fetches = 0;
}

/* Whether the data side's large levels are worth prefetching in the next batch: a prefetch
 * at every data access (the set's two or three host lines, PF_DIST records ahead) costs more
 * than it saves when few accesses reach the level -- a program whose data mostly hits the L1
 * (sort's capture, cachegrind's caches: 0.6 ns a record, a fifth of the kernel's time) --
 * and saves more than it costs when many do (random loads over 256 KiB and more: 7-9%). A
 * level is prefetched while at least 1/PF_REACH of the batch's data accesses reached it
 * (prefetching changes no count). */
#define PF_REACH 16
static void pf_decide(cc_sim *s, const fcount *fc) {
    core_t *co = &s->core[0];
    uint64_t data = 0, past[MEM_LEVEL + 1] = {0}; /* past[k]: those that reached level index k */
    for (int cls = CC_K_LOAD; cls <= CC_K_MODIFY; cls++)
        for (int h = 1; h <= MEM_LEVEL; h++) {
            data += fc->served[cls][h];
            for (int k = 0; k < h; k++) past[k] += fc->served[cls][h];
        }
    if (data < 1024) return; /* too few to tell: as before */
    for (int j = 0; j < co->npf[1]; j++)
        co->pf[1][j].quiet = past[co->pf[1][j].level] * PF_REACH < data;
}

/* Fold a batch's counters into the stats. */
static void fcount_flush(cc_sim *s, const fpath fp[2], fcount *fc) {
    uint64_t fills[2][3] = {{0}};
    pf_decide(s, fc);
    for (int cls = 0; cls < CC_NCLASS; cls++) {
        const int side = cls != CC_K_FETCH;
        const fpath *p = &fp[side];
        for (int h = 1; h <= MEM_LEVEL; h++) {
            const uint64_t cnt = fc->served[cls][h];
            if (!cnt) continue;
            if (h > 1) s->st.served[cls][h] += cnt;
            const int looked = h == MEM_LEVEL ? p->n : h, missed = h == MEM_LEVEL ? p->n : h - 1;
            for (int k = 0; k < looked; k++) p->lv[k].st->access[cls] += cnt;
            for (int k = 0; k < missed; k++) {
                p->lv[k].st->miss[cls] += cnt;
                if (p->alloc[cls] >> k & 1) fills[side][k] += cnt;
            }
        }
    }
    for (int side = 0; side < 2; side++)
        for (int k = 0; k < fp[side].n; k++) {
            cc_cache_stats *st = fp[side].lv[k].st;
            st->fills += fills[side][k];
            st->evictions += fills[side][k] - fc->nfree[side][k] - fc->nevict[side][k];
        }
    fcount_flush_fetches(s, fc);
    memset(fc, 0, sizeof *fc);
}

/* The way of `line` in the compact set (of `ways` ways) at b, or -1. */
static inline __attribute__((always_inline)) int ffindw(uint32_t ways, const uint8_t *b, uint64_t line,
                                                        uint16_t ptv) {
    const uint64_t *t = (const uint64_t *)(b + CMP_TAGS);
#if defined(__SSE2__) && !defined(CC_SCALAR_FIND)
    /* all 16 partial tags (unused ways hold 0, which no line has), one mask bit per way */
    (void)ways;
    const __m128i key = _mm_set1_epi16((short)ptv);
    const __m128i lo = _mm_cmpeq_epi16(_mm_load_si128((const __m128i *)b), key);
    const __m128i hi = _mm_cmpeq_epi16(_mm_load_si128((const __m128i *)(b + 16)), key);
    unsigned m = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(lo, hi));
    while (__builtin_expect(m != 0, 0)) {
        unsigned w = (unsigned)__builtin_ctz(m);
        if (t[w] == line) return (int)w;
        m &= m - 1;
    }
    return -1;
#else
    (void)ptv;
    for (uint32_t w = 0; w < ways; w++)
        if (t[w] == line) return (int)w;
    return -1;
#endif
}

static inline __attribute__((always_inline)) int ffind(const flvl *L, const uint8_t *b, uint64_t line,
                                                       uint16_t ptv) {
    return ffindw(L->ways, b, line, ptv);
}

/* plru_apply() and plru_find_victim() with the level's tables and victim rule at hand. */
static inline __attribute__((always_inline)) void fplru_apply(const flvl *L, uint64_t *P, uint32_t w) {
    *P = (*P & ~L->pclr[w]) | L->pset[w];
}

static inline __attribute__((always_inline)) uint32_t fplru_victim(const flvl *L, uint64_t bits) {
    if (L->pvmode == 16) {
        const uint32_t v = plru_top3[(bits >> 1) & 127];
        return 2 * v + (uint32_t)((bits >> (8 + v)) & 1);
    }
    if (L->pvmode == 3) return plru_top3[(bits >> 1) & 127];
    if (L->pvmode) return (uint32_t)plru_top3[(bits >> 1) & 127] >> (3 - L->pvmode);
    return plru_find_victim(L->a, bits);
}

/* sb_install() for a full compact set, the victim chosen by the policy r; a set with a free
 * way goes to sb_install(). *vl gets the victim, or TAG_INVALID. (The victim may be the L1's
 * MRU line only in an L1 install, after which the walk sets the MRU line anew.)
 * lru_only: an LRU level of a hierarchy where no line is ever invalidated, so that free ways
 * are only the never-used ones, which the LRU order gives up first, lowest first (see
 * carr_init): the victim the order names is the way sb_install() would pick. */
static inline __attribute__((always_inline)) uint32_t finstall(const flvl *L, const int r,
                                                               const int lru_only, uint8_t *b,
                                                               uint64_t line, uint16_t ptv,
                                                               uint8_t flags, uint64_t *vl,
                                                               uint8_t *vf) {
    if (!lru_only && __builtin_expect(*(const uint32_t *)(b + CMP_CNT) < L->ways, 0)) {
        uint64_t l;
        uint8_t f;
        uint32_t w = sb_install(L->a, b, line, ptv, flags, &l, &f);
        *vl = l;
        *vf = f;
        return w;
    }
    uint64_t *P = (uint64_t *)(b + CMP_PERM);
    uint32_t w;
    if (r == FK_LRU || r == FK_FIFO) {
        /* the least recent way becomes the most recent: every other way moves down one
         * place, and the nibble it vacates above the used ones is refilled with ones */
        uint64_t p = *P;
        w = (uint32_t)(p >> L->vshift) & 0xF;
        *P = (p << 4) | L->pad_or | w;
    } else if (r == FK_PLRU) {
        w = fplru_victim(L, *P);
        fplru_apply(L, P, w);
    } else {
        w = (uint32_t)(xorshift(&L->a->rng) % L->ways);
    }
    uint64_t *t = (uint64_t *)(b + CMP_TAGS) + w;
    uint8_t *f = b + CMP_FLAGS + w;
    uint64_t old = *t;
    *vl = old;
    *vf = *f;
    if (lru_only && __builtin_expect(old == TAG_INVALID, 0)) ++*(uint32_t *)(b + CMP_CNT);
    *t = line;
    *f = flags;
    ((uint16_t *)b)[w] = ptv;
    return w;
}

/* The index of a fully associative LRU/FIFO TLB of more than 16 entries, kept by the
 * kernel (the only code that touches the TLBs of a single-core run) and rebuilt from the
 * tags at the start of each batch: a table of 4 x (ways, rounded up to a power of two)
 * slots holding way + 1 (0: empty), placed by a hash of the tag, linear probing. */
static inline uint32_t hidx_home(const carr *a, uint64_t tag) {
    return (uint32_t)((tag * 0x9E3779B97F4A7C15ULL) >> a->hshift);
}

static int hidx_build(carr *a) {
    if (!a->hidx) {
        uint32_t n = 4;
        while (n < 4 * a->ways) n <<= 1;
        a->hidx = calloc(n, sizeof *a->hidx);
        if (!a->hidx) return -1;
        a->hmask = n - 1;
        a->hshift = 64 - (uint32_t)ilog2(n);
    }
    memset(a->hidx, 0, (a->hmask + 1) * sizeof *a->hidx);
    const uint64_t *t = TAGS(a, 0);
    for (uint32_t w = 0; w < a->ways; w++) {
        if (t[w] & COH_BIT) continue;
        uint32_t i = hidx_home(a, t[w]);
        while (a->hidx[i]) i = (i + 1) & a->hmask;
        a->hidx[i] = (uint16_t)(w + 1);
    }
    return 0;
}

static inline int hidx_find(const carr *a, uint64_t tag) {
    const uint64_t *t = TAGS(a, 0);
    for (uint32_t i = hidx_home(a, tag);; i = (i + 1) & a->hmask) {
        const uint32_t e = a->hidx[i];
        if (!e) return -1;
        if (t[e - 1] == tag) return (int)(e - 1);
    }
}

/* Way w, which held `old`, leaves the index (backward-shift deletion: a later entry of the
 * probe run moves into the hole unless its home lies cyclically after the hole); then way
 * w with its new tag goes in. */
static inline void hidx_replace(carr *a, uint32_t w, uint64_t old, uint64_t tag) {
    uint16_t *h = a->hidx;
    const uint32_t mask = a->hmask;
    const uint64_t *t = TAGS(a, 0);
    if (!(old & COH_BIT)) {
        uint32_t i = hidx_home(a, old);
        while (h[i] != w + 1) i = (i + 1) & mask;
        for (uint32_t j = (i + 1) & mask; h[j]; j = (j + 1) & mask) {
            const uint32_t home = hidx_home(a, t[h[j] - 1]);
            if (((j - home) & mask) >= ((j - i) & mask)) { /* home at or before the hole */
                h[i] = h[j];
                i = j;
            }
        }
        h[i] = 0;
    }
    uint32_t i = hidx_home(a, tag);
    while (h[i]) i = (i + 1) & mask;
    h[i] = (uint16_t)(w + 1);
}

/* One TLB level's lookup of page pg: 1 on a hit (the entry touched), 0 on a miss (installed). */
static inline __attribute__((always_inline)) int ftlb_level(const flvl *L, uint64_t pg) {
    carr *a = L->a;
    const uint16_t pt = line_ptag(pg);
    uint8_t *b = L->mem + (pg & L->set_mask) * L->stride;
    if (a->hidx) {
        const int w = hidx_find(a, pg);
        if (w >= 0) {
            if (a->repl == CC_REPL_LRU) list_front(a, b, (uint32_t)w);
            return 1;
        }
        uint64_t vl;
        uint8_t vf;
        const uint32_t iw = winstall(a, b, pg, pt, 0, &vl, &vf);
        hidx_replace(a, iw, vl, pg);
        return 0;
    }
    const int r = L->repl;
    const int w = r == FK_GENERIC ? sb_find(a, b, pg, pt) : ffind(L, b, pg, pt);
    if (w >= 0) {
        if (r == FK_GENERIC) wtouch(a, b, (uint32_t)w);
        else if (r == FK_LRU) {
            uint64_t *P = (uint64_t *)(b + CMP_PERM);
            *P = nib_front(*P, (uint32_t)w);
        } else if (r == FK_PLRU) {
            fplru_apply(L, (uint64_t *)(b + CMP_PERM), (uint32_t)w);
        }
        return 1;
    }
    uint64_t vl;
    uint8_t vf;
    if (r == FK_LRU) finstall(L, FK_LRU, 0, b, pg, pt, 0, &vl, &vf);
    else if (r == FK_PLRU) finstall(L, FK_PLRU, 0, b, pg, pt, 0, &vl, &vf);
    else if (r == FK_FIFO) finstall(L, FK_FIFO, 0, b, pg, pt, 0, &vl, &vf);
    else if (r == FK_RANDOM) finstall(L, FK_RANDOM, 0, b, pg, pt, 0, &vl, &vf);
    else winstall(a, b, pg, pt, 0, &vl, &vf);
    return 0;
}

/* tlb_access() in the kernel. */
static inline __attribute__((always_inline)) void ftlb(cc_sim *s, const fpath *fp, const int side,
                                                       uint64_t addr, unsigned size) {
    const int sh = fp->tshift;
    const uint64_t p0 = addr >> sh, p1 = (addr + size - 1) >> sh;
    carr *t = fp->tl[0].a;
    for (uint64_t pg = p0;; pg++) {
        fp->tst[0]->access[side]++;
        if (pg == t->last_line) goto next;
        const int hit = ftlb_level(&fp->tl[0], pg);
        t->last_line = pg;
        if (hit) goto next;
        fp->tst[0]->miss[side]++;
        if (fp->ntl > 1) {
            fp->tst[1]->access[side]++;
            if (ftlb_level(&fp->tl[1], pg)) {
                s->st.stlb_hit[side]++;
            } else {
                fp->tst[1]->miss[side]++;
                s->st.tlb_walk[side]++;
            }
        } else {
            s->st.tlb_walk[side]++;
        }
    next:
        if (__builtin_expect(pg == p1, 1)) break;
    }
}

/* evicted() for the victim vl (flags vf) of level K, a level whose victims need eviction
 * work, in the kernel: an inclusive level invalidates the line in the levels above it
 * (back_invalidate()); a dirty victim is written back, into the next level if that is a
 * victim or exclusive level -- which is filled with the victim, clean or dirty -- else by
 * writeback(). The next level's own victim goes to evicted() unless it is clean and needs
 * nothing. Level K's eviction itself is counted by fcount_flush(). */
static inline __attribute__((always_inline)) void fevict(fctx *x, const int K, const int R,
                                                         uint64_t vl, uint8_t vf) {
    const flvl *L = &x->fp->lv[K];
    int dirty = vf & F_DIRTY;
    const uint16_t vpt = line_ptag(vl);
    if (L->binv && L->fup) {
        /* at most four levels above, compact sets: one host line read per probe */
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            if (u >= L->nup) break;
            uint8_t *ub = L->upd[u].mem + (vl & L->upd[u].set_mask) * L->upd[u].stride;
            const int w = ffindw(L->upd[u].a->ways, ub, vl, vpt);
            if (__builtin_expect(w < 0, 1)) continue;
            dirty |= ub[CMP_FLAGS + (uint32_t)w] & F_DIRTY;
            carr_invalidate(L->upd[u].a, SLOT(vl & L->upd[u].set_mask, (uint32_t)w), 0);
            L->st->back_invalidations++;
            x->general = 1; /* the L1 may have lost a line */
        }
    } else if (L->binv) {
        for (int u = 0; u < L->nup; u++) {
            carr *ua = &L->up[u]->arr;
            const uint64_t set = vl & ua->set_mask;
            uint8_t *ub = SB(ua, set);
            const int w = sb_find(ua, ub, vl, vpt);
            if (__builtin_expect(w < 0, 1)) continue;
            dirty |= ub[ua->flag_off + (uint32_t)w] & F_DIRTY;
            carr_invalidate(ua, SLOT(set, (uint32_t)w), 0);
            L->st->back_invalidations++;
            x->general = 1; /* the L1 may have lost a line */
        }
    }
    if (dirty) L->st->writebacks++;
    if (K < 2 && L->vnext) { /* (K < 2: the last of three levels has no next) */
        const flvl *V = &x->fp->lv[K + 1];
        const int r = R == FK_MIXED ? V->repl : FK_BASE(R);
        uint8_t *b = V->mem + (vl & V->set_mask) * V->stride;
        const int w = r == FK_GENERIC ? sb_find(V->a, b, vl, vpt) : ffind(V, b, vl, vpt);
        if (w >= 0) {
            if (dirty) b[(r == FK_GENERIC ? V->a->flag_off : CMP_FLAGS) + (uint32_t)w] |= F_DIRTY;
            if (r == FK_GENERIC) wtouch(V->a, b, (uint32_t)w);
            else if (r == FK_LRU) {
                uint64_t *P = (uint64_t *)(b + CMP_PERM);
                *P = nib_front(*P, (uint32_t)w);
            } else if (r == FK_PLRU) {
                fplru_apply(V, (uint64_t *)(b + CMP_PERM), (uint32_t)w);
            }
            return;
        }
        const uint8_t fl = dirty ? F_DIRTY : 0;
        uint64_t l2;
        uint8_t f2;
        if (r == FK_LRU) finstall(V, FK_LRU, 0, b, vl, vpt, fl, &l2, &f2);
        else if (r == FK_PLRU) finstall(V, FK_PLRU, 0, b, vl, vpt, fl, &l2, &f2);
        else if (r == FK_FIFO) finstall(V, FK_FIFO, 0, b, vl, vpt, fl, &l2, &f2);
        else if (r == FK_RANDOM) finstall(V, FK_RANDOM, 0, b, vl, vpt, fl, &l2, &f2);
        else winstall(V->a, b, vl, vpt, fl, &l2, &f2);
        V->st->fills++;
        if (l2 != TAG_INVALID) {
            if ((f2 & F_DIRTY) || V->ework) {
                x->general = 1;
                evicted(x->s, x->p, K + 1, l2, f2);
            } else {
                V->st->evictions++;
            }
        }
    } else if (dirty) {
        if (K + 1 < x->fp->n) writeback(x->s, x->p, K + 1, vl);
        else x->s->st.mem_writebacks++;
    }
}

/* Level K missed and will install the line: the set of the next (victim or exclusive)
 * level that its victim will go to is prefetched while the levels below are looked up. */
static inline __attribute__((always_inline)) void fpf_victim(const fpath *fp, const int K, const int R,
                                                             const uint8_t *b) {
    const flvl *L = &fp->lv[K];
    const uint64_t P = *(const uint64_t *)(b + CMP_PERM);
    const uint32_t w = FK_BASE(R) == FK_PLRU ? fplru_victim(L, P) : (uint32_t)(P >> L->vshift) & 0xF;
    const uint64_t vl = ((const uint64_t *)(b + CMP_TAGS))[w];
    const flvl *V = &fp->lv[K + 1 < 3 ? K + 1 : 2];
    const uint8_t *vb = V->mem + (vl & V->set_mask) * V->stride;
    __builtin_prefetch(vb);
    __builtin_prefetch(vb + fp->pfoff1);
    __builtin_prefetch(vb + fp->pfoff2);
}

/* Level K of the walk (walk1() above, written recursively so that each level is compiled
 * with its number): look the line up; on a miss, walk the levels below, then install the
 * line here if this level allocates. N: the number of levels (0: fp->n); R: the policy of
 * every level (FK_MIXED: each level's own); W: a store or read-modify-write. Returns the
 * serving level. */
#define FSTEP(K, NEXT)                                                                        \
    static inline __attribute__((always_inline)) int fstep##K(fctx *x, const int N, const int R, \
                                                              const int W) {                  \
        const int K_ = K;                                                                     \
        if (N ? K_ >= N : K_ >= x->fp->n) return MEM_LEVEL;                                    \
        const flvl *L = &x->fp->lv[K_];                                                       \
        const int r = R == FK_MIXED || (FK_WIDE(R) && L->wide) ? L->repl : FK_BASE(R);        \
        const unsigned above = x->fp->alloc[x->cls] & ((1u << K_) - 1); /* all missed */      \
        uint8_t *b = L->mem + (x->line & L->set_mask) * L->stride;                            \
        int w = r == FK_GENERIC ? sb_find(L->a, b, x->line, x->ptv) : ffind(L, b, x->line, x->ptv); \
        if (w >= 0) {                                                                         \
            if (r == FK_GENERIC) wtouch(L->a, b, (uint32_t)w);                                \
            else if (r == FK_LRU) {                                                           \
                uint64_t *P = (uint64_t *)(b + CMP_PERM);                                     \
                *P = nib_front(*P, (uint32_t)w);                                              \
            } else if (r == FK_PLRU) {                                                        \
                fplru_apply(L, (uint64_t *)(b + CMP_PERM), (uint32_t)w);                       \
            }                                                                                 \
            if (K_ == 0) x->w0 = w;                                                           \
            uint8_t *f = b + (r == FK_GENERIC ? L->a->flag_off : CMP_FLAGS) + w;              \
            if (R == FK_MIXED && K_ > 0 && __builtin_expect(L->excl && above, 0)) {           \
                x->carry = *f & F_DIRTY;                                                      \
                carr_invalidate(L->a, SLOT(x->line & L->set_mask, (uint32_t)w), 0);           \
                x->general = 1;                                                               \
            } else if (W && !above) {                                                         \
                *f |= F_DIRTY;                                                                \
            }                                                                                 \
            return K_ + 1;                                                                    \
        }                                                                                     \
        const int served = NEXT(x, N, R, W);                                                  \
        if (!(x->fp->alloc[x->cls] >> K_ & 1)) return served;                                 \
        const uint8_t fl = ((W && !above) || (R == FK_MIXED && x->carry)) ? F_DIRTY : 0;      \
        if (R == FK_MIXED) x->carry = 0;                                                      \
        uint64_t vl;                                                                          \
        uint8_t vf;                                                                           \
        uint32_t iw;                                                                          \
        if ((R == FK_LRU || R == FK_LRU_W) && r == FK_LRU) iw = finstall(L, FK_LRU, 1, b, x->line, x->ptv, fl, &vl, &vf); \
        else if (r == FK_LRU) iw = finstall(L, FK_LRU, 0, b, x->line, x->ptv, fl, &vl, &vf);     \
        else if (r == FK_PLRU) iw = finstall(L, FK_PLRU, 0, b, x->line, x->ptv, fl, &vl, &vf); \
        else if (r == FK_FIFO) iw = finstall(L, FK_FIFO, 0, b, x->line, x->ptv, fl, &vl, &vf); \
        else if (r == FK_RANDOM) iw = finstall(L, FK_RANDOM, 0, b, x->line, x->ptv, fl, &vl, &vf); \
        else {                                                                                \
            uint64_t l;                                                                       \
            uint8_t f;                                                                        \
            iw = winstall(L->a, b, x->line, x->ptv, fl, &l, &f);                              \
            vl = l;                                                                           \
            vf = f;                                                                           \
        }                                                                                     \
        if (K_ == 0) x->w0 = (int)iw;                                                         \
        if (__builtin_expect(vl == TAG_INVALID, 0)) {                                         \
            x->fc->nfree[x->side][K_]++;                                                      \
        } else if (FK_EVICT(R) && L->ework) {                                                 \
            fevict(x, K_, R, vl, vf);                                                         \
        } else if (__builtin_expect(vf & F_DIRTY, 0)) {                                       \
            x->fc->nevict[x->side][K_]++;                                                     \
            x->general = 1;                                                                   \
            evicted(x->s, x->p, K_, vl, vf);                                                  \
        }                                                                                     \
        return served;                                                                        \
    }

static inline __attribute__((always_inline)) int fstep3(fctx *x, const int N, const int R, const int W) {
    (void)x, (void)N, (void)R, (void)W;
    return MEM_LEVEL;
}
FSTEP(2, fstep3)
FSTEP(1, fstep2)
FSTEP(0, fstep1)

/* An access over two lines that both hit an L1 kept in LRU order in the compact layout: what
 * mem_access_slow() does for it (hier(): both lines looked up and made the most recent, in that
 * order, a store marking both dirty; one access and one split access counted; the L1's MRU line
 * forgotten), without the general walk. 0: not that case (nothing done). 3% of the records of
 * sort's capture cross a line, nearly all of them instruction fetches that hit: through the
 * general walk they took 14% of the simulator's time (`sim TRACE`, cachegrind's caches). */
static inline __attribute__((always_inline)) int fsplit2(cc_sim *s, const fpath *fp, fcount *fc, const int R,
                                                         const int W, int cls, uint64_t addr, unsigned size,
                                                         const int shift) {
    const uint64_t l0 = addr >> shift, l1 = l0 + 1;
    if (fp->n == 0 || ((addr + size - 1) >> shift) != l1) return 0;
    const flvl *L = &fp->lv[0];
    const int r = R == FK_MIXED || (FK_WIDE(R) && L->wide) ? L->repl : FK_BASE(R);
    if (r != FK_LRU) return 0;
    uint8_t *b0 = L->mem + (l0 & L->set_mask) * L->stride;
    uint8_t *b1 = L->mem + (l1 & L->set_mask) * L->stride;
    const int w0 = ffind(L, b0, l0, line_ptag(l0));
    if (w0 < 0) return 0;
    const int w1 = ffind(L, b1, l1, line_ptag(l1));
    if (w1 < 0) return 0;
    uint64_t *P0 = (uint64_t *)(b0 + CMP_PERM);
    *P0 = nib_front(*P0, (uint32_t)w0);
    uint64_t *P1 = (uint64_t *)(b1 + CMP_PERM);            /* (P0 itself with one set) */
    *P1 = nib_front(*P1, (uint32_t)w1);
    if (W) {
        b0[CMP_FLAGS + w0] |= F_DIRTY;
        b1[CMP_FLAGS + w1] |= F_DIRTY;
    }
    fc->served[cls][1]++;
    s->st.split[cls]++;
    L->a->last_line = TAG_INVALID;
    return 1;
}

static inline __attribute__((always_inline)) void faccess(cc_sim *s, core_t *co, const fpath *fp,
                                                          fcount *fc, const int N, const int R,
                                                          const int W, const int side, int cls,
                                                          uint64_t addr, unsigned size,
                                                          const int shift) {
    const int cross = (addr & fp->line_mask) + size > fp->line_size;      /* two lines or more */
    /* an access is clamped at the top of the address space (only one that crosses a line can
     * pass it): its last byte would wrap to 0 and the page and line walks would never end */
    if (__builtin_expect(cross, 0) && addr + size < addr) {
        if (addr + size) s->wrapped = 1;
        size = (unsigned)(0 - addr);
    }
    if (fp->tlb) ftlb(s, fp, side, addr, size ? size : 1);
    if (__builtin_expect(cross, 0)) {
        if (!fsplit2(s, fp, fc, R, W, cls, addr, size, shift)) mem_access_slow(s, co, side, cls, addr, size);
        return;
    }
    const uint64_t l0 = addr >> shift;
    carr *l1 = fp->lv[0].a;
    if (l0 == l1->last_line) { /* the MRU line: no replacement state changes */
        if (W) *FL(l1, l1->last_slot) |= F_DIRTY;
        fc->served[cls][1]++;
        return;
    }
    fctx x = {s, &co->path[side], fp, fc, l0, line_ptag(l0), side, cls, -1, 0, 0};
    const int served = fstep0(&x, N, R, W);
    fc->served[cls][served]++;
    const uint64_t set = l0 & fp->lv[0].set_mask;
    if (x.w0 >= 0 && (!x.general || TAGS(l1, set)[x.w0] == l0)) {
        l1->last_line = l0;
        l1->last_slot = SLOT(set, (uint32_t)x.w0);
    } else {
        l1->last_line = TAG_INVALID;
    }
}

/* Prefetch the set of `line` in the k-th prefetched level: its first host lines and, with
 * `wide` (a kernel that may meet sets wider than three host lines), up to pfrest[k] more. */
static inline __attribute__((always_inline)) void fpf_set(const fpath *dp, int k, uint64_t line, const int wide) {
    const uint8_t *b = dp->pfmem[k] + (line & dp->pfmask[k]) * dp->pfstride[k];
    __builtin_prefetch(b);
    __builtin_prefetch(b + dp->pfoff1);
    __builtin_prefetch(b + dp->pfoff2);
    if (wide) {
#pragma GCC unroll 5
        for (int i = 0; i < 5; i++) {
            if (i >= dp->pfrest[k]) break;
            __builtin_prefetch(b + 192 + 64 * i);
        }
    }
}

static inline __attribute__((always_inline)) void run_fast_t(cc_sim *s, const cc_rec *recs, size_t n,
                                                             const fpath *fp, const int N, const int R) {
    const cc_config *c = &s->cfg;
    core_t *co = &s->core[0];
    fcount fc;
    memset(&fc, 0, sizeof fc);
    const int shift = s->line_shift;
    const int vt = c->split_mode == CC_SPLIT_THREADS;
    const fpath *const dp = &fp[1];
    const cc_rec *const end = recs + n;
    /* data accesses prefetch the sets of the large levels a few records ahead (instruction
     * fetches nearly always hit the L1) */
    const cc_rec *const pfend = dp->npf && n > PF_DIST ? end - PF_DIST : recs;
    for (const cc_rec *r = recs; r < end; r++) {
        if (r < pfend) {
            const cc_rec *q = r + PF_DIST;
            if (q->kind - CC_K_LOAD <= CC_K_MODIFY - CC_K_LOAD) {
                const uint64_t line = q->addr >> shift;
                fpf_set(dp, 0, line, FK_WIDE(R) || R == FK_MIXED);
                if (dp->npf > 1)
                    fpf_set(dp, 1, line, FK_WIDE(R) || R == FK_MIXED);
            }
        }
        if ((R == FK_LRU_E || R == FK_PLRU_E) && dp->pfv >= 0 && r < pfend) {
            /* a few records after the sets: the set of the victim level that the victim of
             * the level above will go to, as that level's replacement state names it now */
            const cc_rec *q = r + PF_VDIST;
            if (q->kind - CC_K_LOAD <= CC_K_MODIFY - CC_K_LOAD) {
                const flvl *L = &dp->lv[dp->pfv];
                fpf_victim(dp, dp->pfv, R, L->mem + ((q->addr >> shift) & L->set_mask) * L->stride);
            }
        }
        const unsigned kind = r->kind;
        if (kind - CC_K_LOAD <= CC_K_MODIFY - CC_K_LOAD) {
            uint64_t a = r->addr;
            if (__builtin_expect(a - dp->stack_lo < dp->stack_span, 0))
                a ^= ((uint64_t)((vt ? r->tid : 0) + 1) & 0x7fff) << 48;
            if (kind == CC_K_LOAD) faccess(s, co, &fp[1], &fc, N, R, 0, 1, CC_K_LOAD, a, r->size, shift);
            else faccess(s, co, &fp[1], &fc, N, R, 1, 1, (int)kind, a, r->size, shift);
        } else if (kind == CC_K_FETCH) {
            if (__builtin_expect(!s->st.warm, 0) && s->fetch_seen + fc.fetches >= c->warmup_instructions) {
                /* the warm-up is over: what was counted so far is dropped */
                s->fetch_seen += fc.fetches;
                memset(&fc, 0, sizeof fc);
                reset_counters(s);
            }
            fc.fetches++;
            faccess(s, co, &fp[0], &fc, N, R, 0, 0, CC_K_FETCH, r->addr, r->size, shift);
        } else {
            if (kind == CC_K_MARKER) fcount_flush_fetches(s, &fc);
            other_record(s, co, r);
        }
    }
    fcount_flush(s, fp, &fc);
    s->st.records += n;
}

#define RUN_FAST(NAME, N, R) \
    static void NAME(cc_sim *s, const cc_rec *r, size_t n, const fpath *fp) { run_fast_t(s, r, n, fp, N, R); }
RUN_FAST(run_fast1_lru, 1, FK_LRU)
RUN_FAST(run_fast2_lru, 2, FK_LRU)
RUN_FAST(run_fast3_lru, 3, FK_LRU)
RUN_FAST(run_fast1_plru, 1, FK_PLRU)
RUN_FAST(run_fast2_plru, 2, FK_PLRU)
RUN_FAST(run_fast3_plru, 3, FK_PLRU)
RUN_FAST(run_fast2_lru_e, 2, FK_LRU_E)
RUN_FAST(run_fast3_lru_e, 3, FK_LRU_E)
RUN_FAST(run_fast2_plru_e, 2, FK_PLRU_E)
RUN_FAST(run_fast3_plru_e, 3, FK_PLRU_E)
RUN_FAST(run_fast1_lru_w, 1, FK_LRU_W)
RUN_FAST(run_fast2_lru_w, 2, FK_LRU_W)
RUN_FAST(run_fast3_lru_w, 3, FK_LRU_W)
RUN_FAST(run_fast1_mixed, 1, FK_MIXED)
RUN_FAST(run_fast2_mixed, 2, FK_MIXED)
RUN_FAST(run_fast3_mixed, 3, FK_MIXED)
RUN_FAST(run_fastv_mixed, 0, FK_MIXED)

static void run_fast(cc_sim *s, const cc_rec *recs, size_t n) {
    fpath fp[2];
    fpath_init(s, &s->core[0], 0, &fp[0]);
    fpath_init(s, &s->core[0], 1, &fp[1]);
    for (int side = 0; side < 2; side++) {
        carr *t = fp[side].ntl ? fp[side].tl[0].a : NULL;
        if (t && t->sets == 1 && t->ways > CMP_WAYS && t->ways < 65535 &&
            (t->repl == CC_REPL_LRU || t->repl == CC_REPL_FIFO) && hidx_build(t)) {
            free(t->hidx); /* out of memory: the scan, as before */
            t->hidx = NULL;
        }
    }
    const int R = fpath_uniform(fp);
    const int N = fp[0].n == fp[1].n ? fp[0].n : 0;
    static void (*const table[4][6])(cc_sim *, const cc_rec *, size_t, const fpath *) = {
        {run_fastv_mixed, run_fastv_mixed, run_fastv_mixed, run_fastv_mixed, run_fastv_mixed, run_fastv_mixed},
        {run_fast1_lru, run_fast1_plru, run_fast1_mixed, run_fast1_mixed, run_fast1_mixed, run_fast1_lru_w},
        {run_fast2_lru, run_fast2_plru, run_fast2_mixed, run_fast2_lru_e, run_fast2_plru_e, run_fast2_lru_w},
        {run_fast3_lru, run_fast3_plru, run_fast3_mixed, run_fast3_lru_e, run_fast3_plru_e, run_fast3_lru_w},
    };
    /* (one level has no eviction work: no level below it) */
    table[N][R == FK_LRU ? 0 : R == FK_PLRU ? 1 : R == FK_LRU_E ? 3 : R == FK_PLRU_E ? 4 : R == FK_LRU_W ? 5 : 2](s, recs, n, fp);
}

static void run_general(cc_sim *s, const cc_rec *recs, size_t n) {
    const cc_config *c = &s->cfg;
    const int pf = s->pf_levels;
    const int by_thread = c->split_mode == CC_SPLIT_THREADS;
    const int ncores = s->ncores;
    const int hash = c->stack_hash;
    for (size_t i = 0; i < n; i++) {
        const cc_rec *r = &recs[i];
        const unsigned kind = r->kind;
        int core;
        if (pf && i + PF_DIST < n) {
            /* prefetch the sets of the deeper, larger levels a few records ahead */
            const cc_rec *q = &recs[i + PF_DIST];
            if (q->kind <= CC_K_MODIFY) {
                const core_t *qo = &s->core[ncores == 1 ? 0 : by_thread ? q->tid % ncores : s->cur_vt];
                const int side = q->kind != CC_K_FETCH;
                const uint64_t line = q->addr >> s->line_shift;
                for (int k = 0; k < qo->npf[side]; k++) {
                    const pfdesc *d = &qo->pf[side][k];
                    const uint8_t *b = d->mem + (line & d->set_mask) * d->stride;
                    __builtin_prefetch(b);
                    if (d->lines > 1) __builtin_prefetch(b + 64);
                    if (d->lines > 2) __builtin_prefetch(b + 128);
                }
            }
        }
        if (ncores == 1) {
            core = 0;
        } else if (by_thread) {
            core = r->tid % ncores;
        } else {
            if (kind == CC_K_MARKER && c->split_mode == CC_SPLIT_TRANSACTIONS) {
                s->cur_vt = (int)(s->ntx % (uint64_t)ncores);
                s->ntx++;
            } else if (kind == CC_K_FETCH && c->split_mode == CC_SPLIT_CHUNKS) {
                if (s->chunk_left == 0) {
                    s->cur_vt = (s->cur_vt + 1) % ncores;
                    s->chunk_left = c->chunk_instructions;
                }
                s->chunk_left--;
            }
            core = s->cur_vt;
        }
        core_t *co = &s->core[core];
        if (kind - CC_K_LOAD <= CC_K_MODIFY - CC_K_LOAD) {
            uint64_t a = r->addr;
            if (hash && a >= c->stack_lo && a < c->stack_hi) {
                int vt = by_thread ? r->tid : core;
                a ^= ((uint64_t)(vt + 1) & 0x7fff) << 48;
            }
            mem_access(s, co, 1, (int)kind, a, r->size);
        } else if (kind == CC_K_FETCH) {
            if (!s->st.warm && s->fetch_seen >= c->warmup_instructions) reset_counters(s);
            s->fetch_seen++;
            s->st.instructions++;
            s->st.core_instructions[core]++;
            mem_access(s, co, 0, CC_K_FETCH, r->addr, r->size);
        } else {
            other_record(s, co, r);
        }
    }
    s->st.records += n;
}

int cc_sim_run(cc_sim *s, const cc_rec *recs, size_t n) {
    s->wrapped = 0;
    if (s->fast) run_fast(s, recs, n);
    else run_general(s, recs, n);
    return s->wrapped;
}

void cc_sim_finish(cc_sim *s) {
    if (!s->cfg.issue_enabled) return;
    for (int c = 0; c < s->ncores; c++) iss_drain(&s->core[c].iss);
}

void cc_sim_stats(const cc_sim *s, cc_stats *out) {
    *out = s->st;
    if (s->cfg.ncaches) {
        /* every access is counted once by the level-1 cache of its side; level-1 service is
         * what that cache did not miss */
        for (int cls = 0; cls < CC_NCLASS; cls++) {
            uint64_t acc = 0, miss = 0;
            for (int i = 0; i < s->cfg.ncaches; i++) {
                if (s->cfg.caches[i].level != 1) continue;
                int kind = s->cfg.caches[i].kind;
                int serves = kind == CC_KIND_UNIFIED || (cls == CC_K_FETCH) == (kind == CC_KIND_INSTR);
                if (!serves) continue;
                acc += s->st.cache[i].access[cls];
                miss += s->st.cache[i].miss[cls];
            }
            out->access[cls] = acc;
            out->served[cls][1] = acc - miss;
        }
    }
    out->cycles = 0;
    if (s->cfg.issue_enabled)
        for (int c = 0; c < s->ncores; c++) out->cycles += s->core[c].iss.cycle - s->core[c].iss.base_cycle;
}
