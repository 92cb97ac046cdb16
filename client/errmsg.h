/*
 * errmsg.h - how the client's parsers report a refusal: the message goes into the
 * caller's err buffer (truncated to errlen, always NUL-terminated when errlen > 0) and the
 * parser returns -1, so a check reads `return errmsg_set(err, errlen, "...", ...);`.
 *
 * Memory: err is the caller's; nothing is allocated.
 */
#ifndef SPUR_ERRMSG_H
#define SPUR_ERRMSG_H

#include <stddef.h>

/* Format the message into err; returns -1. */
int errmsg_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
