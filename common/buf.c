/*
 * buf.c - growable byte buffer; see buf.h.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b)
{
    memset(b, 0, sizeof(*b));
}

void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    b->oom = false;
}

bool buf_reserve(struct buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (extra > SIZE_MAX - 1 - b->len) {
        b->oom = true; /* the size itself does not fit in a size_t */
        return false;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return true;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2; /* doubling would wrap: ask exactly */
    char *np = realloc(b->p, ncap);
    if (np == NULL) {
        b->oom = true;
        return false;
    }
    b->p = np;
    b->cap = ncap;
    return true;
}

void buf_commit(struct buf *b, size_t k)
{
    if (b->oom || b->p == NULL || k > b->cap - b->len - 1)
        return; /* nothing reserved for it: a caller's bug, refused rather than overrun */
    b->len += k;
    b->p[b->len] = '\0';
}

void buf_append(struct buf *b, const void *data, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    if (!buf_reserve(b, 64))
        return;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= b->cap - b->len) {
        if (!buf_reserve(b, (size_t)n))
            return;
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

char *buf_take(struct buf *b)
{
    char *s = b->oom ? NULL : b->p;
    if (b->oom)
        free(b->p);
    else if (s == NULL)
        s = calloc(1, 1);
    memset(b, 0, sizeof(*b));
    return s;
}
