/*
 * raft_buf.c - immutable reference-counted byte buffers (declared in raft.h).
 *
 * A buffer is written once by its creator before anyone else sees it and never changes
 * afterwards, so the only shared mutable word is the reference count. It is atomic because
 * the shell may drop references on its writer thread while the core runs on another: the
 * decrement that reaches zero frees, and acquire/release ordering makes the bytes written
 * by the creator visible to whichever thread frees.
 */
#include "raft.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct raft_buf *raft_buf_new(size_t len)
{
    struct raft_buf *b;

    if (len > SIZE_MAX - sizeof(*b))
        return NULL;
    b = malloc(sizeof(*b) + len);
    if (b == NULL)
        return NULL;
    atomic_init(&b->refs, 1);
    b->len = len;
    return b;
}

struct raft_buf *raft_buf_copy(const void *data, size_t len)
{
    struct raft_buf *b = raft_buf_new(len);

    if (b != NULL && len > 0)
        memcpy(b->data, data, len);
    return b;
}

struct raft_buf *raft_buf_resize(struct raft_buf *b, size_t len)
{
    struct raft_buf *nb;

    if (b == NULL || len > SIZE_MAX - sizeof(*b))
        return NULL;
    nb = realloc(b, sizeof(*nb) + len);
    if (nb == NULL)
        return NULL;
    nb->len = len;
    return nb;
}

void raft_buf_ref(struct raft_buf *b)
{
    if (b != NULL)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

void raft_buf_unref(struct raft_buf *b)
{
    if (b == NULL)
        return;
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}
