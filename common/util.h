/*
 * util.h - small helpers every program shares: clocks, fd flags, exit codes, jitter.
 *
 * The exit codes are sysexits.h values with the meanings DESIGN.md section 4 gives them;
 * they are repeated here as names so a reader of a call site sees the contract, not a
 * number.
 */
#ifndef SPUR_UTIL_H
#define SPUR_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXIT_USAGE 64       /* EX_USAGE: bad command line */
#define EXIT_DATAERR 65     /* EX_DATAERR: state on disk corrupt beyond a torn tail */
#define EXIT_SOFTWARE 70    /* EX_SOFTWARE: the worker died or stalled; restart the replica */
#define EXIT_OSERR 71       /* EX_OSERR: fork, pipe or bind failed at start */
#define EXIT_CANTCREAT 73   /* EX_CANTCREAT: state dir unusable or locked */
#define EXIT_CONFIG 78      /* EX_CONFIG: invalid configuration */

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t mono_ns(void);
uint64_t mono_ms(void);
/* Wall clock in milliseconds since the epoch. */
uint64_t wall_ms(void);

int fd_set_nonblock(int fd);
int fd_set_cloexec(int fd, int on);
/* Close every descriptor >= 3 except those listed. Returns 0 or -1. */
int fd_close_all_except(const int *keep, size_t nkeep);

/* "SIGSEGV" for 11, "SIG?" for unknown numbers. */
const char *signal_name(int sig);
/* Describe a wait status: "exited with code 3", "killed by SIGSEGV (core dumped)". */
void describe_wait_status(int status, char *buf, size_t len);

/*
 * mkdir -p: make path and its missing parents (mode 0755), path itself with mode (an
 * existing one is left as it is). Returns 0 or -1 (errno set).
 */
int mkdir_parents(const char *path, mode_t mode);

/* Write all of buf, retrying on EINTR; returns 0 or -1 (errno set). */
int write_all(int fd, const void *buf, size_t len);

/*
 * The next number of a xorshift64* sequence kept in *state (advanced). For jitter only:
 * retry delays that must not march in step; nothing cryptographic. A zero state (never a
 * fixed point of xorshift) starts from a fixed odd constant, so a zero seed still works.
 * The same seed gives the same sequence, which is what makes a test's delays repeatable.
 */
uint64_t jitter_rand(uint64_t *state);

#endif
