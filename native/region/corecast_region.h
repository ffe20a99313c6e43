/* corecast region API: count named code regions of a program (like libpmctrack's
 * start/stop counters or LIKWID's markers).
 *
 *   #include <corecast_region.h>
 *   corecast_region_begin("solve");
 *   ...
 *   corecast_region_end("solve");
 *
 * Link with -lcorecast_region (corecast's _native directory). Each thread counts its own
 * regions with perf_event_open (task-clock, context switches, page faults, instructions,
 * cycles; hardware events are reported as null where the machine has no PMU). Regions nest
 * and repeat; totals per region are written as JSON lines at exit (or by
 * corecast_region_report) to $CORECAST_REGION_OUT, else ./corecast-regions-<pid>.jsonl, where
 * `corecast stat` and corecast.region.load() read them. The file is opened without following a
 * link at its name and written only if it is a regular file of this user with one name.
 */
#ifndef CORECAST_REGION_H
#define CORECAST_REGION_H
#ifdef __cplusplus
extern "C" {
#endif

/* 0 on success, -1 when the region table is full or the name is too long. */
int corecast_region_begin(const char *name);
int corecast_region_end(const char *name);
/* Write the totals now (also done at exit). Returns 0, or -1 when the file cannot be written. */
int corecast_region_report(void);

#ifdef __cplusplus
}
#endif
#endif
