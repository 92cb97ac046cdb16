/*
 * buf.h - a growable byte buffer, for building text (metrics, JSON) and frames.
 *
 * Ownership: the struct owns p; buf_free() releases it. After an allocation failure the
 * buffer remembers it (oom) and ignores further appends, so a caller can build a whole
 * document and check once at the end.
 *
 * buf_take() hands p over instead: the caller then owns the string and free()s it, and the
 * buffer is left empty, as after buf_init(), ready for reuse.
 */
#ifndef SPUR_BUF_H
#define SPUR_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct buf {
    char *p;
    size_t len;
    size_t cap;
    bool oom;
};

void buf_init(struct buf *b);
void buf_free(struct buf *b);
void buf_reset(struct buf *b); /* length 0, memory kept */
bool buf_reserve(struct buf *b, size_t extra);
/*
 * For writing in place (a read(2) into the buffer): after buf_reserve(b, n) succeeded, up
 * to b->cap - b->len - 1 bytes may be written at b->p + b->len; buf_commit(b, k) then
 * takes k of them into the length and keeps the text NUL-terminated.
 */
void buf_commit(struct buf *b, size_t k);
void buf_append(struct buf *b, const void *data, size_t n);
void buf_puts(struct buf *b, const char *s);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * The text built, NUL-terminated, for the caller to free(): "" (allocated) when nothing
 * was appended, NULL when an append or that allocation ran out of memory. Either way b is
 * left empty (as after buf_init).
 */
char *buf_take(struct buf *b);

#endif
