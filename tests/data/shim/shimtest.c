/* Scenarios with known waiting, for tests/test_shim.py. `shimtest SCENARIO`. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t sl;
static pthread_barrier_t bar;
static sem_t sem;
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

/* holds the mutex for 200 ms while the main thread blocks on it */
static void *holder(void *arg) {
    pthread_mutex_lock(&m);
    flag = 1;
    sleep_ms(200);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *rw_holder(void *arg) {
    pthread_rwlock_wrlock(&rw);
    flag = 1;
    sleep_ms(200);
    pthread_rwlock_unlock(&rw);
    return NULL;
}

static void *spin_holder(void *arg) {
    pthread_spin_lock(&sl);
    flag = 1;
    sleep_ms(200);
    pthread_spin_unlock(&sl);
    return NULL;
}

static void *signaller(void *arg) {
    sleep_ms(200);
    pthread_mutex_lock(&m);
    flag = 2;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&m);
    return NULL;
}

static void *late_barrier(void *arg) {
    sleep_ms(200);
    pthread_barrier_wait(&bar);
    return NULL;
}

static void *sem_poster(void *arg) {
    sleep_ms(200);
    sem_post(&sem);
    return NULL;
}

static void *spinner(void *arg) {
    spin_ms(100);
    return NULL;
}

static void *exiter(void *arg) {
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    exit(3);
}

static void start(void *(*fn)(void *), pthread_t *t) {
    flag = 0;
    pthread_create(t, NULL, fn, NULL);
    while (!flag)
        sched_yield();
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    pthread_t t;
    if (!strcmp(s, "uncontended")) {
        for (int i = 0; i < 100000; i++) {
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
        }
    } else if (!strcmp(s, "mutex")) {
        start(holder, &t);
        pthread_mutex_lock(&m);       /* waits ~200 ms */
        pthread_mutex_unlock(&m);
        pthread_join(t, NULL);
    } else if (!strcmp(s, "timedlock")) {
        start(holder, &t);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10;
        pthread_mutex_timedlock(&m, &ts);
        pthread_mutex_unlock(&m);
        pthread_join(t, NULL);
    } else if (!strcmp(s, "trylock")) {
        start(holder, &t);
        while (pthread_mutex_trylock(&m) == EBUSY)   /* spins ~200 ms */
            sched_yield();
        pthread_mutex_unlock(&m);
        pthread_join(t, NULL);
    } else if (!strcmp(s, "rwlock")) {
        start(rw_holder, &t);
        pthread_rwlock_rdlock(&rw);
        pthread_rwlock_unlock(&rw);
        pthread_join(t, NULL);
    } else if (!strcmp(s, "spin")) {
        pthread_spin_init(&sl, PTHREAD_PROCESS_PRIVATE);
        start(spin_holder, &t);
        pthread_spin_lock(&sl);
        pthread_spin_unlock(&sl);
        pthread_join(t, NULL);
    } else if (!strcmp(s, "cond")) {
        pthread_create(&t, NULL, signaller, NULL);
        pthread_mutex_lock(&m);
        while (flag != 2)
            pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
        pthread_join(t, NULL);
    } else if (!strcmp(s, "barrier")) {
        pthread_barrier_init(&bar, NULL, 2);
        pthread_create(&t, NULL, late_barrier, NULL);
        pthread_barrier_wait(&bar);
        pthread_join(t, NULL);
    } else if (!strcmp(s, "sem")) {
        sem_init(&sem, 0, 0);
        pthread_create(&t, NULL, sem_poster, NULL);
        if (sem_wait(&sem) != 0)
            return 1;
        pthread_join(t, NULL);
    } else if (!strcmp(s, "sem_uncontended")) {
        sem_init(&sem, 0, 1000);
        errno = 0;
        for (int i = 0; i < 1000; i++)
            if (sem_wait(&sem) != 0)
                return 1;
        if (errno != 0)
            return 4;   /* the shim's try must not leave errno behind */
    } else if (!strcmp(s, "threads")) {
        pthread_t ts[3];
        for (int i = 0; i < 3; i++)
            pthread_create(&ts[i], NULL, spinner, NULL);
        for (int i = 0; i < 3; i++)
            pthread_join(ts[i], NULL);
    } else if (!strcmp(s, "thread_exit")) {
        pthread_create(&t, NULL, exiter, NULL);
        pause();
    } else if (!strcmp(s, "segv")) {
        start(holder, &t);
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
        volatile int *p = NULL;
        *p = 1;
    } else if (!strcmp(s, "fork")) {
        pid_t c = fork();
        if (c == 0) {
            start(holder, &t);
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
            _exit(0);
        }
        int st;
        waitpid(c, &st, 0);
        for (int i = 0; i < 10; i++) {
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
        }
    } else if (!strcmp(s, "vfork")) {
        pid_t c = vfork();
        if (c == 0)
            _exit(0);          /* must not write or suppress the parent's report */
        int st;
        waitpid(c, &st, 0);
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
    } else {
        fprintf(stderr, "unknown scenario '%s'\n", s);
        return 2;
    }
    return 0;
}
