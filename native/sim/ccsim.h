/* corecast trace-driven simulator: cache/TLB hierarchy with MESI coherence, branch
 * predictors, issue-rate model, lackey text parser.  Driven from Python through ctypes
 * (src/corecast/sim/native.py mirrors every struct here; keep them in step). */
#ifndef CCSIM_H
#define CCSIM_H

#include <stddef.h>
#include <stdint.h>

#define CC_API __attribute__((visibility("default")))

#define CC_MAX_CACHES 8
#define CC_MAX_TLBS 6
#define CC_MAX_CORES 64
#define CC_NCLASS 4 /* fetch, load, store, modify */

/* The trace record (cc_rec), its kinds (CC_K_*), branch flags (CC_BR_*) and uop packing. */
#include "cctrace.h"

/* in the annotation table's branch flags: a transaction starts at this instruction */
#define CC_ANNOT_MARKER 0x80

enum { CC_KIND_DATA = 0, CC_KIND_INSTR = 1, CC_KIND_UNIFIED = 2 };
enum { CC_REPL_LRU = 0, CC_REPL_FIFO = 1, CC_REPL_RANDOM = 2, CC_REPL_PLRU = 3 };
enum { CC_POL_INCLUSIVE = 0, CC_POL_EXCLUSIVE = 1, CC_POL_VICTIM = 2, CC_POL_NINE = 3 };
enum { CC_SPLIT_THREADS = 0, CC_SPLIT_TRANSACTIONS = 1, CC_SPLIT_CHUNKS = 2 };
enum { CC_BP_NONE = 0, CC_BP_GSHARE = 1, CC_BP_BIMODAL = 2 };

typedef struct {
    int32_t level, kind, replacement, policy, write_allocate, shared; /* shared: cores per copy, 0 = all */
    uint64_t size;
    uint32_t line_size, ways;
} cc_cache_cfg;

typedef struct {
    int32_t level, kind, replacement, pad;
    uint32_t entries, ways;
    uint64_t page_size;
} cc_tlb_cfg;

typedef struct {
    int32_t ncores, ncaches, ntlbs, bp_kind;
    int32_t bp_history_bits, issue_enabled, sched_size, issue_width;
    int32_t units[CC_NUNITS];
    int32_t split_mode;
    int32_t stack_hash;   /* remap stack addresses per virtual thread */
    int32_t straddle_all; /* cachegrind rule: a straddling miss sends the whole access down */
    uint32_t bp_table_size;
    uint32_t force_general; /* 1: the general loop even where the single-core kernel applies */
    uint64_t chunk_instructions, stack_lo, stack_hi, warmup_instructions, seed;
    cc_cache_cfg caches[CC_MAX_CACHES];
    cc_tlb_cfg tlbs[CC_MAX_TLBS];
} cc_config;

typedef struct {
    uint64_t access[CC_NCLASS], miss[CC_NCLASS];
    uint64_t writebacks, coh_misses, coh_invalidations, back_invalidations, fills, evictions;
} cc_cache_stats;

typedef struct {
    uint64_t access[2], miss[2]; /* [0] instruction side, [1] data side */
} cc_tlb_stats;

typedef struct {
    uint64_t records, instructions, markers;
    uint64_t first_marker_instr, last_marker_instr; /* instruction counts at the first/last marker */
    uint64_t access[CC_NCLASS], split[CC_NCLASS];
    uint64_t served[CC_NCLASS][5]; /* level that served the access: 1..3, 4 = memory */
    uint64_t stlb_hit[2], tlb_walk[2];
    uint64_t branches, cond_branches, taken, mispredicts;
    uint64_t invalidations, upgrades, interventions, coh_misses, coh_exposed;
    uint64_t mem_writebacks;
    uint64_t uops, cycles, issue_instructions, placeholder_instructions;
    uint64_t warm; /* 1 once warm-up is over */
    cc_cache_stats cache[CC_MAX_CACHES];
    cc_tlb_stats tlb[CC_MAX_TLBS];
    uint64_t core_instructions[CC_MAX_CORES];
} cc_stats;

typedef struct cc_sim cc_sim;

CC_API cc_sim *cc_sim_new(const cc_config *cfg, char *err, size_t errlen);
CC_API void cc_sim_free(cc_sim *s);
/* 1 when an access of the batch passed the top of the address space (it was simulated clamped
 * at 2^64 - 1: the caller refuses the trace), else 0. */
CC_API int cc_sim_run(cc_sim *s, const cc_rec *recs, size_t n);
CC_API void cc_sim_finish(cc_sim *s);
CC_API void cc_sim_stats(const cc_sim *s, cc_stats *out);
CC_API size_t cc_sizeof(int what);

/* A single set-associative array, for unit tests of replacement policies. */
typedef struct cc_array cc_array;
CC_API cc_array *cc_array_new(uint32_t sets, uint32_t ways, int replacement, uint64_t seed);
CC_API void cc_array_free(cc_array *a);
/* Access `line`: returns 1 on a hit, 0 on a miss (the line is then installed); *victim is the
 * evicted line or UINT64_MAX. */
CC_API int cc_array_access(cc_array *a, uint64_t line, uint64_t *victim);
/* Test hook, from when LRU/FIFO kept 32-bit stamps: moves a clock that no policy reads any
 * more (the order is a nibble permutation, or a linked list in sets of more than 16 ways). */
CC_API void cc_array_set_clock(cc_array *a, uint64_t clock);

/* Lackey `--trace-mem=yes` text. */
typedef struct {
    uint64_t lines, trace_lines, bad_lines, first_bad_line, messages, msg_dropped;
    const uint64_t *markers; /* sorted instruction addresses that start a transaction */
    uint64_t nmarkers;
    char *msg;              /* non-trace lines (valgrind's own) are copied here */
    uint64_t msg_cap, msg_len;
    uint16_t tid;           /* current thread, from --trace-sched lines */
    uint16_t max_tid;
    uint32_t pad;
} cc_lackey_state;

/* Parse complete lines of buf[0..len); records go to out (room for cap). Returns the number of
 * bytes consumed (stops before an incomplete last line unless `final`, or when out is full);
 * *nout receives the number of records written. */
CC_API size_t cc_lackey_parse(cc_lackey_state *st, const char *buf, size_t len, int final,
                              cc_rec *out, size_t cap, size_t *nout);

/* Annotation: add BRANCH and UOP records after FETCH records using a table of decoded
 * instructions (pc -> branch kind, uops). */
typedef struct cc_annot cc_annot;
CC_API cc_annot *cc_annot_new(const uint64_t *pcs, const uint8_t *lens, const uint8_t *brflags,
                              const uint32_t *uop_start, const uint8_t *uop_count,
                              const uint64_t *uops, uint64_t n);
CC_API void cc_annot_free(cc_annot *a);
/* out needs room for n * 8 records. Returns records written. */
CC_API size_t cc_annotate(cc_annot *a, const cc_rec *in, size_t n, cc_rec *out, int final);
CC_API void cc_annot_counts(const cc_annot *a, uint64_t *found, uint64_t *missing);
CC_API int cc_annot_add(cc_annot *a, const uint64_t *pcs, const uint8_t *lens, const uint8_t *brflags,
                        const uint32_t *uop_start, const uint8_t *uop_count, const uint64_t *uops, uint64_t n,
                        const uint8_t *missing);
CC_API size_t cc_annot_unknown(const cc_annot *a, const cc_rec *in, size_t n, uint64_t *pcs, size_t cap);
CC_API size_t cc_annotate_until_unknown(cc_annot *a, const cc_rec *in, size_t n, cc_rec *out, size_t *consumed);

#endif
