/* Scenarios for the sync shim's idle-core accounting (tests/test_shim_idle.py). Each is run
 * pinned to a given set of CPUs; the shim counts the threads running and waiting and charges a
 * wait by the CPUs left idle meanwhile.
 *
 *   overlap   the main thread waits on a condition variable while a worker spins 300 ms
 *   critical  the main thread blocks on a mutex a worker holds while spinning 300 ms
 *   sleeper   the main thread waits on a condition variable while a worker sleeps 300 ms
 *   join      a worker waits on a condition variable while another spins 300 ms and the main
 *             thread is in pthread_join
 *   fair      three workers wait on a condition variable while the main thread sleeps 300 ms
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done, go;
static volatile int flag;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void spin_ms(long ms) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000L + (b.tv_nsec - a.tv_nsec) / 1000000L < ms);
}

static void finish(void) {
    pthread_mutex_lock(&m);
    done++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
}

static void wait_done(int n) {
    pthread_mutex_lock(&m);
    while (done < n)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
}

static void *spinner(void *arg) { (void)arg; spin_ms(300); finish(); return NULL; }
static void *sleeper(void *arg) { (void)arg; sleep_ms(300); finish(); return NULL; }
static void *waiter(void *arg) { (void)arg; wait_done(1); return NULL; }

static void *holder(void *arg) {
    (void)arg;
    pthread_mutex_lock(&held);
    flag = 1;
    spin_ms(300);
    pthread_mutex_unlock(&held);
    return NULL;
}

static void *go_waiter(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    done++;
    pthread_cond_broadcast(&cv);
    while (!go)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: idletest SCENARIO\n");
        return 2;
    }
    const char *s = argv[1];
    pthread_t a, b, w[3];
    if (!strcmp(s, "overlap")) {
        pthread_create(&a, NULL, spinner, NULL);
        wait_done(1);
        pthread_join(a, NULL);
    } else if (!strcmp(s, "critical")) {
        pthread_create(&a, NULL, holder, NULL);
        while (!flag)
            ;
        pthread_mutex_lock(&held);
        pthread_mutex_unlock(&held);
        pthread_join(a, NULL);
    } else if (!strcmp(s, "sleeper")) {
        pthread_create(&a, NULL, sleeper, NULL);
        wait_done(1);
        pthread_join(a, NULL);
    } else if (!strcmp(s, "join")) {
        pthread_create(&b, NULL, waiter, NULL);
        pthread_create(&a, NULL, spinner, NULL);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    } else if (!strcmp(s, "fair")) {
        for (int i = 0; i < 3; i++)
            pthread_create(&w[i], NULL, go_waiter, NULL);
        wait_done(3);               /* all three are about to wait */
        sleep_ms(300);
        pthread_mutex_lock(&m);
        go = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&m);
        for (int i = 0; i < 3; i++)
            pthread_join(w[i], NULL);
    } else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
