/*
 * wal_replay.c - apply log records in order to rebuild the log; see wal_replay.h.
 */
#include "wal_replay.h"

#include <string.h>

void wal_replay_init(struct wal_replay *r, struct wal_entry *v, size_t cap)
{
    memset(r, 0, sizeof(*r));
    r->v = v;
    r->cap = cap;
}

int wal_replay_apply(struct wal_replay *r, const struct wal_record *rec, const char **why)
{
    size_t live = r->n - r->start;
    uint64_t first = live ? r->v[r->start].index : 0;
    uint64_t last = live ? r->v[r->n - 1].index : 0;

    switch (rec->kind) {
    case WAL_KIND_ENTRY: {
        struct wal_entry *e;
        if (rec->index == 0) {
            *why = "entry with index 0";
            return -1;
        }
        if (r->next != 0 && rec->index != r->next) {
            *why = "entry index does not follow the previous record";
            return -1;
        }
        if (rec->term < r->last_term) {
            *why = "entry term lower than the term before it";
            return -1;
        }
        if (r->n == r->cap) {
            *why = "more entries than the log can hold";
            return -1;
        }
        e = &r->v[r->n++];
        e->index = rec->index;
        e->term = rec->term;
        e->type = rec->etype;
        e->len = rec->len;
        e->data = rec->data;
        r->next = rec->index + 1;
        r->last_term = rec->term;
        return 0;
    }
    case WAL_KIND_TRUNCATE:
        if (rec->index == 0 || (r->next != 0 && rec->index > r->next)) {
            *why = "truncate beyond the end of the log";
            return -1;
        }
        if (live > 0 && rec->index <= first)
            r->n = r->start;
        else if (live > 0 && rec->index <= last)
            r->n = r->start + (size_t)(rec->index - first);
        if (r->n == r->start) {
            r->n = r->start = 0;
            /* The term before the cut is known only when the cut is where it was. */
            if (r->next != rec->index)
                r->last_term = 0;
        } else {
            r->last_term = r->v[r->n - 1].term;
        }
        r->next = rec->index;
        return 0;
    case WAL_KIND_RESET:
        if (rec->index == 0) {
            *why = "reset to index 0";
            return -1;
        }
        if (live > 0 && first <= rec->index + 1 && rec->index <= last) {
            if (rec->index >= first)
                r->start += (size_t)(rec->index - first + 1);
        } else {
            r->start = r->n;
        }
        if (r->n == r->start) {
            r->n = r->start = 0;
            r->next = rec->index + 1;
            r->last_term = rec->term;
        }
        return 0;
    }
    *why = "unknown record kind";
    return -1;
}
