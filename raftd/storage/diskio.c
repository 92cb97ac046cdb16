/*
 * diskio.c - full reads and writes, timed syncs, error reports; see diskio.h.
 */
#include "diskio.h"

#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int diskio_fail(struct diskio_err *err, int rc, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return rc;
    err->rc = rc;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return rc;
}

int diskio_fail_errno(struct diskio_err *err, int errnum, const char *fmt, ...)
{
    va_list ap;
    size_t n;

    if (err == NULL)
        return DISKIO_EIO;
    err->rc = errnum == ENOMEM ? DISKIO_ENOMEM : DISKIO_EIO;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    n = strlen(err->msg);
    snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(errnum));
    return err->rc;
}

const char *diskio_rc_name(int rc)
{
    switch (rc) {
    case DISKIO_OK:
        return "ok";
    case DISKIO_EIO:
        return "io";
    case DISKIO_ECORRUPT:
        return "corrupt";
    case DISKIO_EINVAL:
        return "invalid";
    case DISKIO_ENOMEM:
        return "nomem";
    case DISKIO_EFAILED:
        return "failed";
    }
    return "unknown";
}

int diskio_sync_fd(const struct diskio_sync *s, int fd, bool data_only)
{
    uint64_t t0;
    int rc;

    if (s != NULL && !s->fsync)
        return 0;
    t0 = mono_ns();
    do {
        rc = data_only ? fdatasync(fd) : fsync(fd);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0 && s != NULL && s->on_sync != NULL)
        s->on_sync(s->arg, mono_ns() - t0);
    return rc;
}

int diskio_sync_dir(const struct diskio_sync *s, int dirfd)
{
    return diskio_sync_fd(s, dirfd, false);
}

ssize_t diskio_pread_full(int fd, void *buf, size_t len, off_t off)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int diskio_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = ENOSPC;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

int diskio_path(char *out, size_t outlen, const char *dir, const char *name)
{
    int n = snprintf(out, outlen, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= outlen) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}
