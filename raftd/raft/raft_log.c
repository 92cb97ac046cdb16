/*
 * raft_log.c - the in-memory Raft log; see raft_log.h for the invariants.
 */
#include "raft_log.h"

#include <stdlib.h>
#include <string.h>

void raft_log_init(struct raft_log *l)
{
    memset(l, 0, sizeof(*l));
}

static void release(struct raft_entry *e, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        raft_buf_unref(e[i].buf);
}

void raft_log_free(struct raft_log *l)
{
    release(l->e, l->n);
    free(l->e);
    memset(l, 0, sizeof(*l));
}

void raft_log_reset(struct raft_log *l, raft_index base, raft_term base_term)
{
    release(l->e, l->n);
    l->n = 0;
    l->base = base;
    l->base_term = base_term;
}

int raft_log_reserve(struct raft_log *l, size_t n)
{
    size_t cap;
    struct raft_entry *e;

    if (l->cap - l->n >= n)
        return RAFT_OK;
    cap = l->cap ? l->cap : 64;
    while (cap - l->n < n) {
        if (cap > SIZE_MAX / 2 / sizeof(*e))
            return RAFT_ENOMEM;
        cap *= 2;
    }
    e = realloc(l->e, cap * sizeof(*e));
    if (e == NULL)
        return RAFT_ENOMEM;
    l->e = e;
    l->cap = cap;
    return RAFT_OK;
}

int raft_log_append(struct raft_log *l, const struct raft_entry *entries, size_t n)
{
    size_t i;

    if (n == 0)
        return RAFT_OK;
    if (entries[0].index != raft_log_last(l) + 1)
        return RAFT_EINVAL;
    if (raft_log_reserve(l, n) != RAFT_OK)
        return RAFT_ENOMEM;
    memcpy(l->e + l->n, entries, n * sizeof(*entries));
    for (i = 0; i < n; i++)
        raft_buf_ref(entries[i].buf);
    l->n += n;
    return RAFT_OK;
}

void raft_log_truncate(struct raft_log *l, raft_index from)
{
    size_t keep;

    if (from <= l->base)
        from = l->base + 1;
    if (from > raft_log_last(l))
        return;
    keep = (size_t)(from - l->base - 1);
    release(l->e + keep, l->n - keep);
    l->n = keep;
}

void raft_log_compact(struct raft_log *l, raft_index upto)
{
    size_t drop;
    raft_term t;

    if (upto <= l->base || upto > raft_log_last(l))
        return;
    t = raft_log_term(l, upto);
    drop = (size_t)(upto - l->base);
    release(l->e, drop);
    memmove(l->e, l->e + drop, (l->n - drop) * sizeof(*l->e));
    l->n -= drop;
    l->base = upto;
    l->base_term = t;
}

raft_index raft_log_last(const struct raft_log *l)
{
    return l->base + l->n;
}

raft_term raft_log_last_term(const struct raft_log *l)
{
    return l->n ? l->e[l->n - 1].term : l->base_term;
}

raft_term raft_log_term(const struct raft_log *l, raft_index index)
{
    if (index == l->base)
        return l->base_term;
    if (index < l->base || index > raft_log_last(l))
        return 0;
    return l->e[index - l->base - 1].term;
}

const struct raft_entry *raft_log_get(const struct raft_log *l, raft_index index)
{
    if (index <= l->base || index > raft_log_last(l))
        return NULL;
    return &l->e[index - l->base - 1];
}
