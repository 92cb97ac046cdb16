/*
 * statedir.c - create the state directory and hold its lock; see statedir.h.
 */
#include "statedir.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int statedir_open(struct statedir *sd, const char *path, char *why, size_t whylen)
{
    struct stat st;
    sd->lock_fd = -1;
    snprintf(sd->path, sizeof(sd->path), "%s", path);

    if (mkdir_parents(path, 0700) < 0) {
        snprintf(why, whylen, "state dir %s: cannot create: %s", path, strerror(errno));
        return EXIT_CANTCREAT;
    }
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "state dir %s: not a directory", path);
        return EXIT_CANTCREAT;
    }
    if (access(path, W_OK | X_OK) < 0) {
        snprintf(why, whylen, "state dir %s: not writable: %s", path, strerror(errno));
        return EXIT_CANTCREAT;
    }
    char lp[4200];
    snprintf(lp, sizeof(lp), "%s/LOCK", path);
    int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(why, whylen, "state dir %s: cannot open LOCK: %s", path, strerror(errno));
        return EXIT_CANTCREAT;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char buf[32] = {0};
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        long holder = n > 0 ? strtol(buf, NULL, 10) : 0;
        close(fd);
        if (e == EWOULDBLOCK) {
            if (holder > 0)
                snprintf(why, whylen, "state dir %s is locked by pid %ld (another worker)",
                         path, holder);
            else
                snprintf(why, whylen, "state dir %s is locked by another process", path);
        } else {
            snprintf(why, whylen, "state dir %s: cannot lock LOCK: %s", path, strerror(e));
        }
        return EXIT_CANTCREAT;
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        snprintf(why, whylen, "state dir %s: cannot write LOCK: %s", path, strerror(errno));
        close(fd);
        return EXIT_CANTCREAT;
    }
    sd->lock_fd = fd;
    return 0;
}

void statedir_close(struct statedir *sd)
{
    if (sd->lock_fd >= 0)
        close(sd->lock_fd);
    sd->lock_fd = -1;
}
