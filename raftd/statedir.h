/*
 * statedir.h - the worker's state directory and its LOCK (DESIGN.md section 10).
 *
 * Guarantees: at most one live worker uses a state directory. The lock is flock(2) on
 * state_dir/LOCK, held for the life of the process through one close-on-exec descriptor;
 * the kernel drops it when the process dies, however it dies, so a crash never leaves a
 * stale lock behind. The file holds the holder's pid as text, so a refused second worker
 * can name it.
 */
#ifndef SPUR_STATEDIR_H
#define SPUR_STATEDIR_H

#include <stddef.h>

struct statedir {
    char path[4096];
    int lock_fd; /* -1 when not held */
};

/*
 * Create the directory (and missing parents, mode 0700) and take the lock. Returns 0, or
 * the exit code to use (73) with why set: "state dir /x: cannot create: Permission denied",
 * "state dir /x is locked by pid 1234".
 */
int statedir_open(struct statedir *sd, const char *path, char *why, size_t whylen);
void statedir_close(struct statedir *sd);

#endif
