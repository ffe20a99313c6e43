/* A small deterministic program for the simulator's tests: streaming reads, random
 * read-modify-writes, a column-order matrix walk, unaligned (line-straddling) copies, and
 * `handle`, a request handler called REQUESTS times (the transaction marker). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1 << 14)
#define REQUESTS 40

static unsigned long long rng = 88172645463325252ULL;

static unsigned long long next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

__attribute__((noinline)) unsigned handle(unsigned *table, unsigned key) {
    unsigned h = key * 2654435761u, acc = 0;
    for (int i = 0; i < 64; i++) {
        unsigned j = (h + (unsigned)i * 97u) & (N - 1);
        acc += table[j];
        if (acc & 1) table[j] ^= acc;
    }
    return acc;
}

int main(void) {
    unsigned *a = malloc(N * sizeof *a);
    double *m = malloc(64 * 64 * sizeof *m);
    char *buf = malloc(4096 + 64);
    if (!a || !m || !buf) return 1;
    for (unsigned i = 0; i < N; i++) a[i] = i * 2654435761u;
    unsigned long long sum = 0;
    for (int r = 0; r < 2; r++)
        for (unsigned i = 0; i < N; i += 3) sum += a[i];
    for (int i = 0; i < 30000; i++) a[next_random() & (N - 1)] += (unsigned)i;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++) m[i * 64 + j] = i ^ j;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++) sum += (unsigned long long)m[j * 64 + i];
    for (int k = 0; k < 200; k++) {
        volatile unsigned long long *p = (volatile unsigned long long *)(buf + 60 + (k % 8) * 64);
        *p = (unsigned long long)k;          /* straddles two 64-byte lines */
        sum += *p;
    }
    for (unsigned k = 0; k < REQUESTS; k++) sum += handle(a, k);
    printf("%llu\n", sum);
    free(a);
    free(m);
    free(buf);
    return 0;
}
