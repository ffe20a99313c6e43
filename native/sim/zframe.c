/* Compressed trace frames (src/corecast/sim/trace.py) and the census of the records written: zstd, one independent frame per slice of
 * records, so that a reader decompresses a slice at a time. zstd over lz4 by measurement
 * (bench/trace_compress.py: on a captured `sort`, level 3 stores 140x smaller at the same
 * compression speed as lz4's 25x, and decompresses at 1.7 ns a record against 1.0). */
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#define API __attribute__((visibility("default")))

API size_t cc_zstd_bound(size_t n) { return ZSTD_compressBound(n); }

/* Compress n bytes: the frame's size, or 0 on an error. */
API size_t cc_zstd_compress(void *dst, size_t cap, const void *src, size_t n, int level) {
    size_t r = ZSTD_compress(dst, cap, src, n, level);
    return ZSTD_isError(r) ? 0 : r;
}

/* Decompress one frame into exactly `want` bytes: 0 on success, -1 when the frame is damaged
 * or does not hold exactly that many bytes. */
API int cc_zstd_decompress(void *dst, size_t want, const void *src, size_t n) {
    unsigned long long size = ZSTD_getFrameContentSize(src, n);
    if (size == ZSTD_CONTENTSIZE_ERROR || (size != ZSTD_CONTENTSIZE_UNKNOWN && size != want)) return -1;
    size_t r = ZSTD_decompress(dst, want, src, n);
    return (ZSTD_isError(r) || r != want) ? -1 : 0;
}

/* What a trace writer keeps of the records it writes: the records of each kind, and which
 * thread ids occur (seen[tid] = 1), in one pass. */
API void cc_trace_census(const void *recs, size_t n, uint64_t *kinds, uint8_t *seen) {
    const unsigned char *r = recs;
    for (size_t i = 0; i < n; i++, r += 16) {
        kinds[r[14]]++;
        seen[(unsigned)r[12] | (unsigned)r[13] << 8] = 1;
    }
}
