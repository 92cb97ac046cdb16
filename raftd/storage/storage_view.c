/*
 * storage_view.c - the loop thread's view of the log as it will be once every queued
 * request is written, and the check of a new request against it; see storage_int.h.
 *
 * Invariants: runs[0..n_runs) have strictly increasing `first`, all in base + 1 .. last,
 * and consecutive runs have different terms (non-decreasing, as the log's terms are);
 * hs_term never goes down, and hs_vote changes within a term only from 0. Pure: no locks
 * (the view is the loop thread's alone), no I/O; only runs is allocated.
 */
#include "storage_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void storage_view_free(struct storage_view *v)
{
    free(v->runs);
    memset(v, 0, sizeof(*v));
}

uint64_t storage_view_term_at(const struct storage_view *v, uint64_t i)
{
    size_t lo = 0, hi = v->n_runs;

    if (i == v->base)
        return v->base_term;
    if (i < v->base || i > v->last || v->n_runs == 0 || v->runs[0].first > i)
        return 0;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->runs[mid].first <= i)
            lo = mid;
        else
            hi = mid;
    }
    return v->runs[lo].term;
}

static int view_reserve(struct storage_view *v, size_t more)
{
    if (v->n_runs + more <= v->cap_runs)
        return 0;
    size_t ncap = v->cap_runs ? v->cap_runs : 16;
    while (ncap < v->n_runs + more)
        ncap *= 2;
    struct storage_term_run *nr = realloc(v->runs, ncap * sizeof(*nr));
    if (nr == NULL)
        return -1;
    v->runs = nr;
    v->cap_runs = ncap;
    return 0;
}

/* Capacity was reserved by the caller. */
static void view_append(struct storage_view *v, uint64_t index, uint64_t term)
{
    if (v->n_runs == 0 || v->runs[v->n_runs - 1].term != term) {
        v->runs[v->n_runs].first = index;
        v->runs[v->n_runs].term = term;
        v->n_runs++;
    }
    v->last = index;
}

int storage_view_init(struct storage_view *v, uint64_t base, uint64_t base_term,
                      const struct wal_entry *e, size_t n)
{
    memset(v, 0, sizeof(*v));
    v->base = base;
    v->base_term = base_term;
    v->last = base;
    for (size_t i = 0; i < n; i++) {
        if (view_reserve(v, 1) < 0)
            return -1;
        view_append(v, e[i].index, e[i].term);
    }
    return 0;
}

static void view_truncate(struct storage_view *v, uint64_t from)
{
    v->last = from - 1;
    while (v->n_runs > 0 && v->runs[v->n_runs - 1].first >= from)
        v->n_runs--;
}

static void view_reset(struct storage_view *v, uint64_t index, uint64_t term, bool keep)
{
    v->base = index;
    v->base_term = term;
    if (!keep || v->last <= index) {
        v->last = index;
        v->n_runs = 0;
        return;
    }
    /* Drop runs that end at or before the new base. */
    size_t k = 0;
    while (k + 1 < v->n_runs && v->runs[k + 1].first <= index + 1)
        k++;
    if (k > 0) {
        memmove(v->runs, v->runs + k, (v->n_runs - k) * sizeof(*v->runs));
        v->n_runs -= k;
    }
}

/* The checks that need only the request itself: hard state and the entries' own order. */
static int plan_request(const struct storage_view *v, const struct storage_write *w,
                        uint32_t max_entry_bytes, struct storage_view_plan *p,
                        struct diskio_err *err)
{
    const struct wal_entry *e = w->entries;
    size_t n = w->n_entries;

    if (w->has_hard_state && (w->term < v->hs_term ||
                              (w->term == v->hs_term && v->hs_vote != 0 && w->vote != v->hs_vote)))
        return diskio_fail(err, DISKIO_EINVAL,
                           "storage: submit: hard state (term %" PRIu64 ", vote %" PRIu64
                           ") would undo (term %" PRIu64 ", vote %" PRIu64 ")",
                           w->term, w->vote, v->hs_term, v->hs_vote);
    if (n > 0 && e == NULL)
        return diskio_fail(err, DISKIO_EINVAL, "storage: submit: entries missing");
    for (size_t i = 0; i < n; i++) {
        if (e[i].len > max_entry_bytes)
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: entry %" PRIu64 " has %" PRIu32
                               " bytes, more than the %" PRIu32 " allowed",
                               e[i].index, e[i].len, max_entry_bytes);
        if (e[i].len > 0 && e[i].data == NULL)
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: entry %" PRIu64 " has a length but no data",
                               e[i].index);
        if (i > 0 && (e[i].index != e[i - 1].index + 1 || e[i].term < e[i - 1].term))
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: entries not contiguous or term going back "
                               "at index %" PRIu64,
                               e[i].index);
        if (i > 0 && e[i].term != e[i - 1].term)
            p->term_changes++;
        p->bytes += e[i].len;
    }
    return DISKIO_OK;
}

int storage_view_plan(const struct storage_view *v, const struct storage_write *w,
                      uint32_t max_entry_bytes, struct storage_view_plan *p, struct diskio_err *err)
{
    const struct storage_install *in = w->install;
    const struct wal_entry *e = w->entries;
    size_t n = w->n_entries;
    uint64_t base, base_term, last, tf = w->truncate_from;
    int rc;

    memset(p, 0, sizeof(*p));
    if ((rc = plan_request(v, w, max_entry_bytes, p, err)) != DISKIO_OK)
        return rc;

    /* Work out the effect on the view without changing it yet. */
    base = v->base;
    base_term = v->base_term;
    last = v->last;
    if (in != NULL) {
        if (in->index == 0 || in->index < base)
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: snapshot index %" PRIu64
                               " is below the log base %" PRIu64,
                               in->index, base);
        if (in->config_len > SNAPFILE_MAX_CONFIG || (in->config_len > 0 && in->config == NULL) ||
            (in->data_len > 0 && in->data == NULL))
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: snapshot configuration or data missing or "
                               "too large");
        p->keep = in->index < last && storage_view_term_at(v, in->index) == in->term;
        if (!p->keep && in->index < last)
            tf = tf == 0 || tf > in->index + 1 ? in->index + 1 : tf;
        base = in->index;
        base_term = in->term;
        if (!p->keep)
            last = in->index < last ? last : in->index;
    }
    if (tf != 0 && (tf <= base || tf > last + 1))
        return diskio_fail(err, DISKIO_EINVAL,
                           "storage: submit: truncate from %" PRIu64 " outside the log (%" PRIu64
                           "..%" PRIu64 ")",
                           tf, base + 1, last);
    if (n > 0) {
        uint64_t start = e[0].index, eff_last = tf != 0 ? tf - 1 : last, prev_term;
        if (start <= base || start > eff_last + 1)
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: entry %" PRIu64
                               " does not follow the log (%" PRIu64 "..%" PRIu64 ")",
                               start, base + 1, eff_last);
        if (start <= eff_last)
            tf = start;
        prev_term = start - 1 == base ? base_term : storage_view_term_at(v, start - 1);
        if (e[0].term < prev_term)
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: entry %" PRIu64 " has term %" PRIu64
                               ", lower than the %" PRIu64 " before it",
                               start, e[0].term, prev_term);
    }
    if (tf == last + 1)
        tf = 0; /* nothing to cut */
    p->truncate_from = tf;
    if (n > 0) {
        p->last_index = e[n - 1].index;
        p->last_term = e[n - 1].term;
    } else {
        p->last_index = tf != 0 ? tf - 1 : last;
        p->last_term = p->last_index == base ? base_term : storage_view_term_at(v, p->last_index);
    }
    return DISKIO_OK;
}

int storage_view_apply(struct storage_view *v, const struct storage_write *w,
                       const struct storage_view_plan *p)
{
    if (view_reserve(v, p->term_changes + 1) < 0)
        return -1;
    if (w->has_hard_state) {
        v->hs_term = w->term;
        v->hs_vote = w->vote;
    }
    if (w->install != NULL)
        view_reset(v, w->install->index, w->install->term, p->keep);
    if (p->truncate_from != 0)
        view_truncate(v, p->truncate_from);
    for (size_t i = 0; i < w->n_entries; i++)
        view_append(v, w->entries[i].index, w->entries[i].term);
    return 0;
}
