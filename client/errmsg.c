/*
 * errmsg.c - a parser's error message into the caller's buffer; see errmsg.h.
 */
#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

int errmsg_set(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}
