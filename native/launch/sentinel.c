/* corecast-sentinel: remove what a corecast command leaves behind, whatever way it ends.
 *
 *   corecast-sentinel            (its standard input: a pipe only corecast can write to)
 *
 * corecast starts one sentinel per command, the first time it creates something that must not
 * outlive it (a temporary folder or file, a cgroup), and tells it about each such thing on the
 * pipe, one line each, BEFORE making it:
 *
 *   dir PATH       a temporary folder to remove with everything in it
 *   file PATH      a temporary file to remove
 *   cgroup PATH    a cgroup (v1 or v2) whose processes are killed and which is removed, with
 *                  the cgroups below it (only on a cgroup file system); or a resctrl group
 *                  (`sim mrc-online`), removed with its monitoring groups -- its tasks go back
 *                  to the default group, so nothing in it is killed
 *   mount PATH     a file system corecast is about to mount at PATH (tracefs, which `events`
 *                  and the tracepoint counters mount at /sys/kernel/tracing when it is not):
 *                  unmounted -- the topmost mount there, if it is still the kind it was told
 *                  about, never through a symbolic link, and not while in use (EBUSY: kept)
 *   drop PATH      corecast has removed PATH itself: forget it
 *
 * When the pipe closes -- corecast exited, normally or not, SIGKILL included: the kernel closes
 * the pipe of a dead process -- or on SIGTERM, the sentinel removes whatever is still known and
 * exits. Nothing is removed that corecast did not name; a folder or file is removed only if it
 * is owned by the sentinel's user, and never through a symbolic link (each level is opened with
 * O_NOFOLLOW and removed with unlinkat relative to its parent), so a name planted by another
 * user in /tmp is left alone.
 *
 * The sentinel puts itself into a process group of its own, so that neither the terminal's
 * Ctrl-C nor a `kill -9 %1` aimed at corecast's job reaches it, and ignores SIGINT, SIGQUIT,
 * SIGHUP and SIGPIPE. It holds no process of the measured program: those are the business of
 * corecast-launch (a child subreaper that kills its whole tree when corecast dies).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif
#ifndef RDTGROUP_SUPER_MAGIC
#define RDTGROUP_SUPER_MAGIC 0x7655821
#endif
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

enum { MAX_ITEMS = 4096, MAX_DEPTH = 64 };
enum kind { NONE = 0, DIR_, FILE_, CGROUP, MOUNT };

static struct item {
    enum kind kind;
    char *path;
} items[MAX_ITEMS];

static volatile sig_atomic_t stop;

static void on_term(int sig) {
    (void)sig;
    stop = 1;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Remove everything inside the open folder `dfd` (which is closed), depth-first, never
 * following a symbolic link. */
static void empty_dir(int dfd, int depth) {
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            continue;
        if (errno != EISDIR && errno != EPERM)
            continue;
        if (depth >= MAX_DEPTH)
            continue;
        int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue;
        empty_dir(sub, depth + 1);
        unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* The parent folder of `path`, opened, and the last name in `base`; -1 if it cannot be. */
static int open_parent(const char *path, char *base, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash || !slash[1] || strlen(slash + 1) >= n)
        return -1;
    snprintf(base, n, "%s", slash + 1);
    char parent[PATH_MAX];
    size_t len = (size_t)(slash - path);
    if (len == 0)
        len = 1;
    if (len >= sizeof parent)
        return -1;
    memcpy(parent, path, len);
    parent[len] = 0;
    return open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void remove_path(const char *path, int folder) {
    char base[NAME_MAX + 1];
    int pfd = open_parent(path, base, sizeof base);
    if (pfd < 0)
        return;
    struct stat st;
    if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == geteuid()) {
        if (!folder) {
            if (!S_ISDIR(st.st_mode))
                unlinkat(pfd, base, 0);
        } else if (S_ISDIR(st.st_mode)) {
            int dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (dfd >= 0) {
                empty_dir(dfd, 0);
                unlinkat(pfd, base, AT_REMOVEDIR);
            }
        }
    }
    close(pfd);
}

/* SIGKILL every process listed in FILE (cgroup.procs or tasks) of the cgroup folder `dir`;
 * how many were listed. */
static int kill_listed(const char *dir, const char *file) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "re");
    if (!f)
        return 0;
    int n = 0;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1) {
        if (pid > 1 && pid != getpid()) {
            kill((pid_t)pid, SIGKILL);
            n++;
        }
    }
    fclose(f);
    return n;
}

/* Kill what is in the cgroup `dir` and in every cgroup below it, then remove them, deepest
 * first. A v2 cgroup is emptied at once through cgroup.kill; a v1 one (or a threaded v2 one)
 * by killing what it lists. Gives up on a cgroup that does not empty within about five
 * seconds. A resctrl group is only removed: the kernel moves its tasks to the default group
 * (they are the business of corecast-launch). */
static void remove_cgroup(const char *dir, int depth) {
    struct statfs fs;
    if (depth > MAX_DEPTH || statfs(dir, &fs) != 0)
        return;
    int resctrl = fs.f_type == RDTGROUP_SUPER_MAGIC;
    if (fs.f_type != CGROUP_SUPER_MAGIC && fs.f_type != CGROUP2_SUPER_MAGIC && !resctrl)
        return;                 /* not a cgroup: nothing there is ours to kill */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/cgroup.kill", dir);
    int fd = resctrl ? -1 : open(p, O_WRONLY | O_CLOEXEC);  /* v2: this cgroup and all below it at once */
    if (fd >= 0) {
        if (write(fd, "1", 1) < 0) { /* a threaded cgroup, or not permitted: one by one below */ }
        close(fd);
    }
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p)
            continue;
        remove_cgroup(p, depth + 1);
    }
    closedir(d);
    for (int i = 0; i < 500; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return;
        if (errno != EBUSY || resctrl)
            return;
        kill_listed(dir, "cgroup.procs");
        kill_listed(dir, "cgroup.threads");
        kill_listed(dir, "tasks");
        sleep_ms(10);
    }
}

/* Unmount the file system corecast mounted at `path`: only a tracefs (the one kind corecast
 * mounts), never through a symbolic link; one in use (EBUSY) stays. */
static void unmount(const char *path) {
    struct statfs fs;
    if (statfs(path, &fs) != 0 || fs.f_type != TRACEFS_MAGIC)
        return;
    umount2(path, UMOUNT_NOFOLLOW);
}

static void clean(void) {
    /* cgroups first: their processes die before the folders they may write to are removed;
     * then mounts, then folders and files */
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < MAX_ITEMS; i++) {
            struct item *it = &items[i];
            int want = it->kind == CGROUP ? 0 : it->kind == MOUNT ? 1 : 2;
            if (it->kind == NONE || pass != want)
                continue;
            if (it->kind == CGROUP)
                remove_cgroup(it->path, 0);
            else if (it->kind == MOUNT)
                unmount(it->path);
            else
                remove_path(it->path, it->kind == DIR_);
            free(it->path);
            it->kind = NONE;
            it->path = NULL;
        }
}

static void take(const char *line) {
    const char *sp = strchr(line, ' ');
    if (!sp || sp[1] != '/')
        return;
    const char *path = sp + 1;
    size_t kl = (size_t)(sp - line);
    enum kind k = NONE;
    if (kl == 3 && !strncmp(line, "dir", 3))
        k = DIR_;
    else if (kl == 4 && !strncmp(line, "file", 4))
        k = FILE_;
    else if (kl == 6 && !strncmp(line, "cgroup", 6))
        k = CGROUP;
    else if (kl == 5 && !strncmp(line, "mount", 5))
        k = MOUNT;
    else if (kl == 4 && !strncmp(line, "drop", 4)) {
        for (int i = 0; i < MAX_ITEMS; i++)
            if (items[i].kind != NONE && !strcmp(items[i].path, path)) {
                free(items[i].path);
                items[i].kind = NONE;
                items[i].path = NULL;
            }
        return;
    }
    if (k == NONE || strlen(path) >= PATH_MAX)
        return;
    for (int i = 0; i < MAX_ITEMS; i++)
        if (items[i].kind == NONE) {
            items[i].path = strdup(path);
            if (items[i].path)
                items[i].kind = k;
            return;
        }
}

int main(void) {
    setpgid(0, 0);
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTTOU, SIG_IGN);
    signal(SIGTTIN, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;          /* no SA_RESTART: a blocked read returns */
    sigaction(SIGTERM, &sa, NULL);
    static char buf[PATH_MAX + 64];
    size_t have = 0;
    while (!stop) {
        ssize_t r = read(0, buf + have, sizeof buf - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        char *nl;
        size_t off = 0;
        while ((nl = memchr(buf + off, '\n', have - off))) {
            *nl = 0;
            take(buf + off);
            off = (size_t)(nl - buf) + 1;
        }
        memmove(buf, buf + off, have - off);
        have -= off;
        if (have == sizeof buf - 1)
            have = 0;                   /* a line longer than any path: dropped */
    }
    clean();
    return 0;
}
