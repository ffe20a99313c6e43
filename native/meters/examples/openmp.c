/* corecast-meters-openmp: an OpenMP loop that obeys corecast meters' concurrency advice.
 *
 *   corecast-meters-openmp [ITERATIONS]
 *
 * Every thread of the parallel region calls cc_throttle_point() before it takes a chunk of
 * iterations: threads beyond the daemon's allowed_workers sleep there while the others work
 * (a dynamic schedule: nothing waits for a sleeping thread's share). The thread that finds no
 * chunk left calls cc_throttle_release(), so the sleepers wake, find nothing either and reach
 * the end of the region; cc_throttle_reset() after it arms the throttle points again.
 * Prints the sum, the threads and allowed_workers (-1: no live daemon: nothing throttled). */
#include "corecast_meters.h"
#include <omp.h>

enum { CHUNK = 4096 };

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 50000000L;
    long next = 0;
    double sum = 0;
    int threads = 0;
#pragma omp parallel reduction(+ : sum)
    {
        cc_set_worker(omp_get_thread_num());
#pragma omp single
        threads = omp_get_num_threads();
        for (;;) {
            cc_throttle_point();
            long i = __atomic_fetch_add(&next, CHUNK, __ATOMIC_RELAXED);
            if (i >= n) {
                cc_throttle_release();
                break;
            }
            long end = i + CHUNK < n ? i + CHUNK : n;
            for (long k = i; k < end; k++)
                sum += 1.0 / ((double)k * 2.0 + 1.0) * ((k & 1) ? -1.0 : 1.0);
        }
    }
    cc_throttle_reset();
    printf("pi: %.9f\nthreads: %d\nallowed_workers: %d\n", 4.0 * sum, threads, cc_allowed_workers(NULL));
    return 0;
}
