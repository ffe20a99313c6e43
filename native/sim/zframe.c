/* Compressed trace frames (src/corecast/sim/zframes.py) and the census of the records written:
 * one independently compressed frame per slice of records, so that a reader decompresses a
 * slice at a time; lz4 blocks, or zstd frames (version 2, and the frames lz4 does poorly on in
 * version 3), chosen by measurement (zframes.py says why). A reader checks the kinds of a
 * frame's records as it decompresses it, while they are in the cache. zstd's contexts are made
 * once, not once a frame. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <lz4.h>
#include <zstd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "cctrace.h"

#define API __attribute__((visibility("default")))

/* Whether every one of the n records is of a known kind (cctrace.h). With SSE2, the largest
 * byte at each of the 16 positions of a record, over all records (one unsigned maximum a
 * record): byte 14 is then the largest kind. The byte-wise loop cost half as much as lz4's
 * decompression of the frame it checks (6% of `sim TRACE`'s time, sort of 100,000 lines). */
static int kinds_known(const void *recs, size_t n) {
    const cc_rec *r = recs;
    size_t i = 0;
    unsigned bad = 0;
#ifdef __SSE2__
    __m128i m0 = _mm_setzero_si128(), m1 = m0, m2 = m0, m3 = m0;
    const __m128i *v = recs;
    for (; i + 4 <= n; i += 4, v += 4) {
        m0 = _mm_max_epu8(m0, _mm_loadu_si128(v));
        m1 = _mm_max_epu8(m1, _mm_loadu_si128(v + 1));
        m2 = _mm_max_epu8(m2, _mm_loadu_si128(v + 2));
        m3 = _mm_max_epu8(m3, _mm_loadu_si128(v + 3));
    }
    unsigned char top[16];
    _mm_storeu_si128((__m128i *)top, _mm_max_epu8(_mm_max_epu8(m0, m1), _mm_max_epu8(m2, m3)));
    bad = top[offsetof(cc_rec, kind)] >= CC_NKINDS;
#endif
    for (; i < n; i++) bad |= r[i].kind >= CC_NKINDS;
    return !bad;
}

API size_t cc_zstd_bound(size_t n) { return ZSTD_compressBound(n); }

/* A compression context kept from frame to frame (ZSTD_compress makes one a call). */
API void *cc_zc_new(int level) {
    ZSTD_CCtx *c = ZSTD_createCCtx();
    if (c && ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level))) {
        ZSTD_freeCCtx(c);
        return NULL;
    }
    return c;
}

API void cc_zc_free(void *c) { ZSTD_freeCCtx(c); }

API size_t cc_zc_compress(void *c, void *dst, size_t cap, const void *src, size_t n) {
    size_t r = ZSTD_compress2(c, dst, cap, src, n);
    return ZSTD_isError(r) ? 0 : r;
}

API void *cc_zd_new(void) { return ZSTD_createDCtx(); }

API void cc_zd_free(void *d) { ZSTD_freeDCtx(d); }

/* Decompress one frame into exactly nrec records: 0; -1 when the frame is damaged or does not
 * hold exactly that many; -2 when it holds a record of no known kind (the caller says which). */
API int cc_zd_records(void *d, void *dst, size_t nrec, const void *src, size_t n) {
    size_t want = nrec * 16;
    unsigned long long size = ZSTD_getFrameContentSize(src, n);
    if (size == ZSTD_CONTENTSIZE_ERROR || (size != ZSTD_CONTENTSIZE_UNKNOWN && size != want)) return -1;
    size_t r = ZSTD_decompressDCtx(d, dst, want, src, n);
    if (ZSTD_isError(r) || r != want) return -1;
    return kinds_known(dst, nrec) ? 0 : -2;
}

/* What a trace writer keeps of the records it writes: the records of each kind, and which
 * thread ids occur (seen[tid] = 1), in one pass. The counts go to four sets in turn (a run of
 * one kind would otherwise wait on its own counter) and a thread id is marked when it changes. */
API void cc_trace_census(const void *recs, size_t n, uint64_t *kinds, uint8_t *seen) {
    const unsigned char *r = recs;
    uint64_t c[4][256];
    memset(c, 0, sizeof c);
    unsigned last = n ? ((unsigned)r[12] | (unsigned)r[13] << 8) : 0;
    if (n) seen[last] = 1;
    for (size_t i = 0; i < n; i++, r += 16) {
        c[i & 3][r[14]]++;
        unsigned t = (unsigned)r[12] | (unsigned)r[13] << 8;
        if (t != last) {
            seen[t] = 1;
            last = t;
        }
    }
    for (int j = 0; j < 4; j++)
        for (int k = 0; k < 256; k++) kinds[k] += c[j][k];
}

/* ------------------------------------------------------------------ version 3: lz4 frames */
/* lz4 (block format) for the frames of a version-3 trace, by measurement: on a captured `sort`
 * it compresses a frame and decompresses it in 0.6-0.9 of zstd level 1's time, 23-26 times
 * smaller; where lz4 stores a frame less than 8 times smaller (a plain stream of addresses:
 * 2.6 times), the writer keeps zstd's frame if that is smaller (7 times), and says which in the
 * frame header. */
API size_t cc_lz4_bound(size_t n) { return n > LZ4_MAX_INPUT_SIZE ? 0 : (size_t)LZ4_compressBound((int)n); }

/* Compress n bytes: the block's size, or 0 on an error. */
API size_t cc_lz4_compress(void *dst, size_t cap, const void *src, size_t n) {
    if (n > LZ4_MAX_INPUT_SIZE || cap > INT32_MAX) return 0;
    int r = LZ4_compress_default(src, dst, (int)n, (int)cap);
    return r > 0 ? (size_t)r : 0;
}

/* The census of nrec records (cc_trace_census), then their lz4 block (as cc_lz4_compress), in
 * one call: the compressor reads the records from the cache the census brought them into
 * (separately, the census cost a `sim capture` 0.65 ns a record, mostly fetching them). */
API size_t cc_lz4_census(void *dst, size_t cap, const void *src, size_t nrec, uint64_t *kinds, uint8_t *seen) {
    cc_trace_census(src, nrec, kinds, seen);
    return cc_lz4_compress(dst, cap, src, nrec * sizeof(cc_rec));
}

/* Decompress one block into exactly nrec records: as cc_zd_records. */
API int cc_lz4_records(void *dst, size_t nrec, const void *src, size_t n) {
    size_t want = nrec * 16;
    if (want > LZ4_MAX_INPUT_SIZE || n > INT32_MAX) return -1;
    int r = LZ4_decompress_safe(src, dst, (int)n, (int)want);
    if (r < 0 || (size_t)r != want) return -1;
    return kinds_known(dst, nrec) ? 0 : -2;
}
