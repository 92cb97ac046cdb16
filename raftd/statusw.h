/*
 * statusw.h - the worker's end of the status pipe (DESIGN.md section 6).
 *
 * Guarantees: sending never blocks the caller. The descriptor is made non-blocking and
 * close-on-exec when attached (before the worker forks anything, so no grandchild can
 * hold the pipe open and hide the worker's death). A frame is a few dozen bytes, below
 * PIPE_BUF, so each write is all or nothing; when the pipe is full the frame is dropped
 * and counted, and the next one carries the news. EPIPE (the supervisor is gone) is
 * remembered and reported to the caller.
 */
#ifndef SPUR_STATUSW_H
#define SPUR_STATUSW_H

#include "status.h"

#include <stdbool.h>
#include <stdint.h>

struct statusw {
    int fd;            /* -1: not supervised (run by hand) */
    uint64_t seq;
    uint64_t sent;
    uint64_t dropped;
    bool broken;       /* the read end is gone */
    struct worker_status last;
};

/* Attach to fd (may be -1). Returns 0, or -1 if fd is not an open descriptor. */
int statusw_attach(struct statusw *w, int fd);
/* Send s (its seq is filled in). Returns 0, or -1 once the pipe is broken. */
int statusw_send(struct statusw *w, const struct worker_status *s);
/* True when s differs from the last frame sent in anything but the sequence number. */
bool statusw_changed(const struct statusw *w, const struct worker_status *s);

#endif
