/*
 * diskio.h - the small I/O layer under the storage modules (wal, meta, snapfile, storage).
 *
 * What it gives:
 *   - struct diskio_err, the one error report of every storage function: a return code
 *     that tells the caller what to do (DISKIO_ECORRUPT: the bytes on disk are wrong, exit
 *     65; DISKIO_EIO: the operating system refused, retrying or another disk may help) and
 *     a message ready for a log line, "storage: what failed: why".
 *   - reads and writes that never return short except at end of file, and retry EINTR.
 *   - durability calls (fsync, fdatasync, fsync of a directory) that all go through
 *     struct diskio_sync, so that "raft.fsync: false" is honoured in exactly one place and
 *     every sync is timed for the latency histogram.
 *
 * Nothing here keeps state between calls; a struct diskio_sync is read-only to this module
 * and may be shared by threads when its on_sync callback is thread-safe.
 */
#ifndef SPUR_DISKIO_H
#define SPUR_DISKIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum diskio_rc {
    DISKIO_OK = 0,
    DISKIO_EIO = -1,      /* a system call failed (message carries strerror) */
    DISKIO_ECORRUPT = -2, /* the bytes on disk are invalid; message names file and offset */
    DISKIO_EINVAL = -3,   /* the caller broke the API contract (bad argument or order) */
    DISKIO_ENOMEM = -4,   /* allocation failed */
    DISKIO_EFAILED = -5,  /* the storage stopped after an earlier write error */
};

#define DISKIO_MSG_MAX 1024 /* room for a path, a reason and what to do about it */

struct diskio_err {
    int rc;                   /* enum diskio_rc */
    char msg[DISKIO_MSG_MAX]; /* "storage: ...", NUL-terminated */
};

/* Fill err (may be NULL) with rc and a printf-formatted message; returns rc. */
int diskio_fail(struct diskio_err *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, appending ": strerror(errnum)". */
int diskio_fail_errno(struct diskio_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *diskio_rc_name(int rc);

/*
 * How to make things durable. fsync false skips every sync (raft.fsync: false, tests and
 * benchmarks) while the writes stay in the same order. on_sync, when set, is called after
 * each sync with its duration in nanoseconds.
 */
struct diskio_sync {
    bool fsync;
    void (*on_sync)(void *arg, uint64_t ns);
    void *arg;
};

/* fdatasync (data_only) or fsync of fd; 0 or -1 with errno. */
int diskio_sync_fd(const struct diskio_sync *s, int fd, bool data_only);
/* fsync of the directory open as dirfd (makes creates, renames and unlinks durable). */
int diskio_sync_dir(const struct diskio_sync *s, int dirfd);

/* Read up to len bytes at off; returns the bytes read (less only at end of file) or -1. */
ssize_t diskio_pread_full(int fd, void *buf, size_t len, off_t off);
/* Write all of buf at off; 0 or -1 with errno (ENOSPC for a write that made no progress). */
int diskio_pwrite_full(int fd, const void *buf, size_t len, off_t off);

/* Join dir and name into out; -1 (ENAMETOOLONG) when it does not fit. */
int diskio_path(char *out, size_t outlen, const char *dir, const char *name);

/* Little-endian field access for the on-disk formats. */
static inline void diskio_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void diskio_put_le64(uint8_t *p, uint64_t v)
{
    diskio_put_le32(p, (uint32_t)v);
    diskio_put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t diskio_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t diskio_get_le64(const uint8_t *p)
{
    return (uint64_t)diskio_get_le32(p) | (uint64_t)diskio_get_le32(p + 4) << 32;
}

#endif
