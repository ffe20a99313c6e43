/* A driver that calls the simulator's batch entry point directly, for counting host
 * instructions per simulated access with callgrind (bench/sim_instructions.py builds and
 * runs it): no Python, and the trace is made before the counted region (cc_sim_run).
 *
 *   sim_driver LEVELS WORKING_SET N random|seq [lru|plru|fifo|random] [general]
 *
 * The hierarchy is bench/sim_speed.py's: L1I and L1D 32 KiB 8-way, L2 1 MiB 8-way, L3 32 MiB
 * 16-way, 64-byte lines, non-inclusive; LEVELS data levels (1-3). The trace: N 8-byte loads,
 * at xorshift-random 8-byte slots of WORKING_SET bytes, or sequential. "general" sends every
 * record through the general loop instead of the single-core kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccsim.h"

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s LEVELS WORKING_SET N random|seq [lru|plru|fifo|random] [general]\n", argv[0]);
        return 2;
    }
    const int levels = atoi(argv[1]);
    const uint64_t ws = strtoull(argv[2], NULL, 0), n = strtoull(argv[3], NULL, 0);
    const int seq = strcmp(argv[4], "seq") == 0;
    int repl = CC_REPL_LRU;
    if (argc > 5) {
        if (!strcmp(argv[5], "plru")) repl = CC_REPL_PLRU;
        else if (!strcmp(argv[5], "fifo")) repl = CC_REPL_FIFO;
        else if (!strcmp(argv[5], "random")) repl = CC_REPL_RANDOM;
    }
    if (levels < 1 || levels > 3 || (!seq && ws < 8) || !n) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    cc_config c;
    memset(&c, 0, sizeof c);
    c.ncores = 1;
    c.sched_size = 32;
    c.issue_width = 4;
    c.chunk_instructions = 100000;
    c.seed = 1;
    c.force_general = argc > 6 && !strcmp(argv[6], "general");
    const uint64_t size[4] = {32768, 32768, 1 << 20, 32 << 20};
    const uint32_t ways[4] = {8, 8, 8, 16};
    const int kind[4] = {CC_KIND_INSTR, CC_KIND_DATA, CC_KIND_UNIFIED, CC_KIND_UNIFIED};
    c.ncaches = 1 + levels;
    for (int i = 0; i <= levels; i++) {
        cc_cache_cfg *cc = &c.caches[i];
        cc->level = i ? i : 1;
        cc->kind = kind[i];
        cc->replacement = repl;
        cc->policy = CC_POL_NINE;
        cc->write_allocate = 1;
        cc->shared = 1;
        cc->size = size[i];
        cc->line_size = 64;
        cc->ways = ways[i];
    }
    char err[256];
    cc_sim *s = cc_sim_new(&c, err, sizeof err);
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    cc_rec *r = calloc(n, sizeof *r);
    if (!r) return 1;
    uint64_t x = 88172645463325252ULL;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r[i].addr = 0x10000000 + (seq ? i * 8 : (x % (ws / 8)) * 8);
        r[i].kind = CC_K_LOAD;
        r[i].size = 8;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    cc_sim_run(s, r, n);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    const double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    static cc_stats st;
    cc_sim_stats(s, &st);
    printf("%.1f M accesses/s; misses", (double)n / dt / 1e6);
    for (int i = 1; i <= levels; i++) printf(" %llu", (unsigned long long)st.cache[i].miss[CC_K_LOAD]);
    printf("\n");
    cc_sim_free(s);
    free(r);
    return 0;
}
