/* The parts of corecast-front (front.c: the command; front_count.c: counting; front_rows.c:
 * the rows and the report). See front.c. */
#ifndef CORECAST_FRONT_H
#define CORECAST_FRONT_H
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CORECAST_PYTHON
#define CORECAST_PYTHON "/usr/bin/python3"
#endif
#ifndef PERF_FORMAT_LOST
#define PERF_FORMAT_LOST (1U << 4)
#endif

#define HAND_OVER (-1000)
#define MAXEV 4
#define MAXCPU 1024
#define MAXTHREADS 65536
#define RING_PAGES 64
#define STOP_GRACE_S 2.0

struct soft_event { const char *name, *desc, *unit; uint64_t config; };
extern const struct soft_event SOFTWARE[];
#define NSOFT 4

struct reading { int ok; uint64_t raw, en, run; };

struct thread {
    int tid, pid;
    int root, opened, exited, fresh;
    int fds[MAXEV];
    struct reading prev[MAXEV];
    uint64_t rraw[MAXEV], rrun[MAXEV];   /* READ records: summed per event */
    int nparts[MAXEV];
    int nreads;
};

struct val { int has; double value; uint64_t en, run; char msg[200]; };

/* front.c */
extern char self_path[], native_dir[];
extern double interval_s;                /* -T */
extern int totals_only;                  /* -A */
void python_exec(char **args, int n) __attribute__((noreturn));
int is_exec(const char *p);

/* front_count.c */
extern int nev, ev[MAXEV], ncpu, nthreads, record_gaps;
extern uint64_t lost_records;
struct reading read_counter(int fd);
int stat_count(char **cmd, const char *prog);

/* front_rows.c */
extern FILE *out;
extern double t0;
extern double tot_val[MAXEV];
extern int tot_rows;
double mono(void);
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double fabs_(double x);
void fmt_num(char *buf, size_t n, double v, const char *unit);
void not_counted_reason(char *buf, size_t n, uint64_t en, uint64_t run);
struct val interval_val(int64_t raw, int64_t en, int64_t run);
void own_row(struct thread *t, double now, const char *label);
void exit_row(struct thread *t, double now);
void settle(void);
void summary(uint64_t *inh_raw, uint64_t *inh_run);
int print_regions(int memfd);
void header(void);
const char *sig_name(int sig, char *buf, size_t n);

#endif
