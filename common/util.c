/*
 * util.c - shared helpers; see util.h.
 */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t mono_ms(void)
{
    return mono_ns() / 1000000ull;
}

uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

int fd_set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int fd_set_cloexec(int fd, int on)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0)
        return -1;
    fl = on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
    return fcntl(fd, F_SETFD, fl);
}

static int is_kept(int fd, const int *keep, size_t nkeep)
{
    for (size_t i = 0; i < nkeep; i++)
        if (keep[i] == fd)
            return 1;
    return 0;
}

int fd_close_all_except(const int *keep, size_t nkeep)
{
    /*
     * Read the open descriptors first and close them afterwards: closing while iterating
     * /proc/self/fd would also close the directory's own descriptor under us. Called in
     * a freshly forked child, so no other thread can open descriptors meanwhile.
     */
    int fds[1024];
    size_t n = 0;
    int more = 1;
    while (more) {
        DIR *d = opendir("/proc/self/fd");
        if (d == NULL) {
            /* No /proc: fall back to a bounded sweep. */
            long max = sysconf(_SC_OPEN_MAX);
            if (max < 0 || max > 65536)
                max = 65536;
            for (int fd = 3; fd < max; fd++)
                if (!is_kept(fd, keep, nkeep))
                    close(fd);
            return 0;
        }
        int dfd = dirfd(d);
        struct dirent *e;
        n = 0;
        more = 0;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            int fd = atoi(e->d_name);
            if (fd < 3 || fd == dfd || is_kept(fd, keep, nkeep))
                continue;
            if (n == sizeof(fds) / sizeof(fds[0])) {
                more = 1;
                break;
            }
            fds[n++] = fd;
        }
        closedir(d);
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
    }
    return 0;
}

const char *signal_name(int sig)
{
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGCHLD: return "SIGCHLD";
    case SIGCONT: return "SIGCONT";
    case SIGSTOP: return "SIGSTOP";
    case SIGTSTP: return "SIGTSTP";
    case SIGTTIN: return "SIGTTIN";
    case SIGTTOU: return "SIGTTOU";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    default: return "SIG?";
    }
}

void describe_wait_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with code %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by %s (signal %d%s)", signal_name(WTERMSIG(status)),
                 WTERMSIG(status), WCOREDUMP(status) ? ", core dumped" : ", no core");
    else
        snprintf(buf, len, "wait status 0x%x", status);
}

int mkdir_parents(const char *path, mode_t mode)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

uint64_t jitter_rand(uint64_t *state)
{
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}
