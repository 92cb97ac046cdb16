/*
 * storage_recover.c - recovery at open: what was durable, which snapshot to start from,
 * which log entries are visible after it, and the repairs; see storage_open in storage.h
 * and "What happens at start-up" in docs/storage-format.md.
 *
 * Invariants: everything is read and checked before anything on disk changes (steps 1 to 3
 * only remove temporary files), so a refusal (DISKIO_ECORRUPT, exit 65) leaves the files as
 * they were for analysis. A damaged newest snapshot is replaced by the older one only under
 * the fallback rule (storage_recover_fallback, public as storage_fallback_check), which is
 * pure so that a test can call it. Runs on the thread of storage_open, before the writer
 * thread exists.
 */
#include "storage_int.h"

#include "log.h"
#include "meta.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- a damaged newest snapshot */

void storage_recover_fallback(uint64_t older_index, uint64_t older_term, uint64_t newest_index,
                              uint64_t newest_term, const struct wal_entry *log, size_t n,
                              struct storage_fallback *out)
{
    uint64_t first = n > 0 ? log[0].index : 0, last = n > 0 ? log[n - 1].index : 0;
    uint64_t hi = newest_index, lo = older_index < hi ? older_index + 1 : hi;

    /* lo..hi always holds hi: the log must have the damaged snapshot's own index, to show
     * by its term that it continues the same history. */
    memset(out, 0, sizeof(*out));
    out->need_first = lo;
    out->need_last = hi;
    out->have_first = first;
    out->have_last = last;
    if (n == 0) {
        out->missing[0][0] = lo;
        out->missing[0][1] = hi;
        out->n_missing = 1;
    } else {
        /* need \ have: a piece below the log's first entry, a piece after its last. */
        if (first > lo) {
            out->missing[out->n_missing][0] = lo;
            out->missing[out->n_missing][1] = first - 1 < hi ? first - 1 : hi;
            out->n_missing++;
        }
        if (last < hi) {
            out->missing[out->n_missing][0] = last + 1 > lo ? last + 1 : lo;
            out->missing[out->n_missing][1] = hi;
            out->n_missing++;
        }
    }
    if (out->n_missing > 0)
        return;
    /* The log holds lo - 1 (or starts at lo) through hi: do the terms agree? */
    if (log[hi - first].term != newest_term) {
        out->newest_term_differs = true;
        out->log_term = log[hi - first].term;
        return;
    }
    if (older_index >= first && log[older_index - first].term != older_term) {
        out->older_term_differs = true;
        out->log_term = log[older_index - first].term;
        return;
    }
    out->ok = true;
}

/* printf at buf + *used, never past len; *used stays at most len - 1. */
static void appendf(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (*used + 1 >= len)
        return;
    va_start(ap, fmt);
    k = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (k > 0)
        *used = *used + (size_t)k < len ? *used + (size_t)k : len - 1;
}

/* Why the older snapshot cannot stand in, as a phrase ("the log lacks ..."). */
static void describe_fallback(const struct storage_fallback *f, uint64_t older_index,
                              uint64_t older_term, uint64_t newest_index, uint64_t newest_term,
                              char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    if (f->newest_term_differs) {
        appendf(buf, len, &used,
                "the log holds index %" PRIu64 " with term %" PRIu64
                ", not the damaged snapshot's term %" PRIu64 " (another history)",
                newest_index, f->log_term, newest_term);
        return;
    }
    if (f->older_term_differs) {
        appendf(buf, len, &used,
                "the log holds index %" PRIu64 " with term %" PRIu64
                ", not the older snapshot's term %" PRIu64 " (another history)",
                older_index, f->log_term, older_term);
        return;
    }
    appendf(buf, len, &used, "the log must hold entries %" PRIu64 "..%" PRIu64 " but lacks",
            f->need_first, f->need_last);
    for (size_t i = 0; i < f->n_missing; i++) {
        uint64_t a = f->missing[i][0], b = f->missing[i][1];
        const char *sep = i > 0 ? " and" : "";
        if (a == b)
            appendf(buf, len, &used, "%s %" PRIu64, sep, a);
        else
            appendf(buf, len, &used, "%s %" PRIu64 "..%" PRIu64, sep, a, b);
    }
    if (f->have_first == 0)
        appendf(buf, len, &used, " (it holds no entries)");
    else
        appendf(buf, len, &used, " (it holds %" PRIu64 "..%" PRIu64 ")", f->have_first,
                f->have_last);
}

/*
 * What the operator can do when a damaged snapshot cannot be replaced: appended to every
 * refusal of storage_open that comes from a damaged snapshot. A replica of a cluster that
 * has lost state it acknowledged is rebuilt from its peers; that is safe only while the
 * others hold a quorum (they then have every committed entry, and elect without it).
 */
#define SNAPSHOT_ADVICE                                                                            \
    "Refusing to start: this replica cannot rebuild its state. In a cluster, and only while "      \
    "the other replicas form a quorum with a leader: move the state directory %s aside and "       \
    "start this replica empty; the leader catches it up. A single replica: restore the "           \
    "state directory from a backup (docs/storage-format.md)"

/*
 * Pick the snapshot to start from (see storage_open in storage.h). *chosen is -1 for none;
 * *quarantine the index in v of a damaged newest snapshot to rename, or -1.
 */
static int choose_snapshot(struct storage *st, const struct snapfile_entry *v, size_t n,
                           const struct wal_recovery *wr, struct storage_recovered *rec,
                           long *chosen, long *quarantine, struct diskio_err *err)
{
    const struct wal_replay *rp = &wr->replay;
    struct diskio_err first_err;
    struct snapfile_meta m;
    uint8_t *cfg = NULL;
    int rc;

    *chosen = *quarantine = -1;
    if (n == 0)
        return DISKIO_OK;
    rc = snapfile_verify(st->dirfd, st->dir, v[n - 1].name, &m, &cfg, &first_err);
    if (rc == DISKIO_OK) {
        *chosen = (long)n - 1;
    } else if (rc != DISKIO_ECORRUPT) {
        *err = first_err;
        return rc;
    } else {
        /* The newest is damaged. The one before it will do only if the log still holds
         * every entry from it up to the damaged one's index, with that one's term. */
        const struct snapfile_entry *older, *newest = &v[n - 1];
        struct storage_fallback f;
        char why[320], torn[160] = "", oq[DISKIO_MSG_MAX + 8];

        if (n < 2)
            return diskio_fail(err, DISKIO_ECORRUPT,
                               "%s; there is no older snapshot to fall back on. " SNAPSHOT_ADVICE,
                               first_err.msg, st->dir);
        older = &v[n - 2];
        /* Without segments there is no entry array: rp->v is NULL, and NULL + 0 is
         * undefined, so the empty log is passed as NULL. */
        storage_recover_fallback(older->index, older->term, newest->index, newest->term,
                                 rp->n > rp->start ? rp->v + rp->start : NULL, rp->n - rp->start,
                                 &f);
        if (!f.ok) {
            describe_fallback(&f, older->index, older->term, newest->index, newest->term, why,
                              sizeof(why));
            if (wr->torn && wr->n_segs > 0) {
                char seg[WAL_NAME_MAX];
                wal_seg_name(seg, wr->segs[wr->n_segs - 1].seq);
                snprintf(torn, sizeof(torn),
                         "; the log ends in a torn tail at offset %" PRIu64 " of %s", wr->torn_off,
                         seg);
            }
            return diskio_fail(err, DISKIO_ECORRUPT,
                               "%s; the older snapshot %s (index %" PRIu64
                               ") cannot replace it: %s%s. " SNAPSHOT_ADVICE,
                               first_err.msg, older->name, older->index, why, torn, st->dir);
        }
        rc = snapfile_verify(st->dirfd, st->dir, older->name, &m, &cfg, err);
        if (rc == DISKIO_ECORRUPT)
            return diskio_fail(err, DISKIO_ECORRUPT,
                               "%s; and the older snapshot %s is damaged too. " SNAPSHOT_ADVICE,
                               first_err.msg, older->name, st->dir);
        if (rc != DISKIO_OK)
            return rc;
        log_event(LOG_ERROR, "storage",
                  "newest snapshot is damaged; starting from the older one and the log, "
                  "nothing is lost; the damaged file is renamed *.corrupt (check the disk)",
                  "damaged=%s using=%s from_log=%" PRIu64 "..%" PRIu64 " err=%s",
                  log_q(newest->name), log_q(older->name), f.need_first, f.need_last,
                  log_quote(oq, sizeof(oq), first_err.msg));
        *chosen = (long)n - 2;
        *quarantine = (long)n - 1;
    }
    rec->has_snapshot = true;
    rec->snapshot.index = m.index;
    rec->snapshot.term = m.term;
    rec->snapshot.config = cfg;
    rec->snapshot.config_len = m.config_len;
    rec->snapshot.data_len = m.data_len;
    snprintf(rec->snapshot.name, sizeof(rec->snapshot.name), "%s", v[*chosen].name);
    return DISKIO_OK;
}

/*
 * Decide which recovered entries are visible after the snapshot, and whether the log needs
 * a reset record so that what the writer appends next follows on from the snapshot.
 */
static int settle_log(struct storage *st, const struct wal_recovery *wr,
                      struct storage_recovered *rec, bool *need_reset, bool *drop_suffix,
                      struct diskio_err *err)
{
    const struct wal_replay *rp = &wr->replay;
    size_t live = rp->n - rp->start;
    const struct wal_entry *L = live > 0 ? rp->v + rp->start : NULL; /* rp->v may be NULL */
    uint64_t S = rec->has_snapshot ? rec->snapshot.index : 0;
    uint64_t T = rec->has_snapshot ? rec->snapshot.term : 0;
    char first_seg[WAL_NAME_MAX] = "";

    *need_reset = *drop_suffix = false;
    if (wr->n_segs > 0)
        wal_seg_name(first_seg, wr->segs[0].seq);
    rec->entries = NULL;
    rec->n_entries = 0;
    rec->last_index = S;
    rec->last_term = T;
    if (live > 0) {
        uint64_t first = L[0].index, last = L[live - 1].index;
        if (first > S + 1)
            return diskio_fail(
                err, DISKIO_ECORRUPT,
                "storage: corrupt log %s/%s at offset 0: the log starts at index "
                "%" PRIu64 " but %s ends at %" PRIu64 " (entries in between are missing)",
                st->dir, first_seg, first, rec->has_snapshot ? "the snapshot" : "no snapshot", S);
        if (last < S) {
            *need_reset = true; /* everything is older than the snapshot */
        } else if (S >= first && L[S - first].term != T) {
            /* The snapshot was installed but the crash came before the log recorded it:
             * what follows in the log belongs to another history. */
            log_event(LOG_WARN, "storage",
                      "log conflicts with the installed snapshot; dropping the entries after it",
                      "snapshot_index=%" PRIu64 " snapshot_term=%" PRIu64 " log_term=%" PRIu64, S,
                      T, L[S - first].term);
            *need_reset = *drop_suffix = true;
        } else {
            size_t skip = (size_t)(S + 1 - first);
            rec->entries = L + skip;
            rec->n_entries = live - skip;
            if (rec->n_entries > 0) {
                rec->last_index = last;
                rec->last_term = L[live - 1].term;
            }
        }
    } else if (rp->next != 0) {
        if (rp->next - 1 > S)
            return diskio_fail(err, DISKIO_ECORRUPT,
                               "storage: corrupt log %s/%s at offset 0: the log was emptied up "
                               "to index %" PRIu64 " but %s ends at %" PRIu64,
                               st->dir, first_seg, rp->next - 1,
                               rec->has_snapshot ? "the newest snapshot" : "no snapshot", S);
        if (rp->next - 1 < S)
            *need_reset = true;
    }
    return DISKIO_OK;
}

int storage_recover_run(struct storage *st, struct storage_recovered *rec, struct wal_recovery *wr,
                        struct diskio_err *err)
{
    struct snapfile_entry *snaps = NULL;
    size_t n_snaps = 0;
    long chosen, quarantine;
    bool found, need_reset, drop_suffix;
    const char *dir = st->dir;
    struct meta_state hs;
    int rc;

    /* 1. Leftovers of interrupted writes; the hard state. */
    if ((rc = wal_remove_tmp(st->dirfd, dir, err)) != DISKIO_OK ||
        (rc = snapfile_remove_tmp(st->dirfd, dir, err)) != DISKIO_OK ||
        (rc = meta_load(st->dirfd, dir, &hs, &found, err)) != DISKIO_OK)
        goto out;
    /* 2. The log, read and checked whole; nothing on disk changes yet. */
    if ((rc = wal_recover(st->dirfd, dir, wr, err)) != DISKIO_OK)
        goto out;
    /* 3. The snapshot, and what of the log is visible after it. */
    if ((rc = snapfile_list(st->dirfd, dir, &snaps, &n_snaps, err)) != DISKIO_OK)
        goto out;
    rc = choose_snapshot(st, snaps, n_snaps, wr, rec, &chosen, &quarantine, err);
    if (rc != DISKIO_OK)
        goto out;
    rc = settle_log(st, wr, rec, &need_reset, &drop_suffix, err);
    if (rc != DISKIO_OK)
        goto out;
    if (!found && (wr->replay.n > wr->replay.start || rec->has_snapshot))
        log_event(LOG_WARN, "storage", "no hard state file but a log or snapshot exists", "dir=%s",
                  log_q(dir));
    if (rec->n_entries > 0 && hs.term < rec->last_term)
        log_event(LOG_WARN, "storage", "hard state term is below the last log term",
                  "term=%" PRIu64 " last_log_term=%" PRIu64, hs.term, rec->last_term);

    /* 4. Everything checked: now repair (torn tail, damaged snapshot, reset record). */
    if (quarantine >= 0) {
        rc = snapfile_quarantine(st->dirfd, dir, snaps[quarantine].name, &st->sync, err);
        if (rc != DISKIO_OK)
            goto out;
    }
    st->n_snaps = 0;
    for (long i = chosen; i >= 0 && st->n_snaps < 2; i--) {
        if (i == quarantine)
            continue;
        st->snaps[st->n_snaps++] = snaps[i].index;
    }
    rc = wal_writer_open(&st->wal, st->dirfd, st->dir, wr, st->opt.segment_bytes, &st->sync, err);
    if (rc != DISKIO_OK)
        goto out;
    if (need_reset) {
        if ((rc = wal_writer_reset(&st->wal, rec->snapshot.index, rec->snapshot.term, err)) !=
                DISKIO_OK ||
            (drop_suffix &&
             (rc = wal_writer_truncate(&st->wal, rec->snapshot.index + 1, err)) != DISKIO_OK) ||
            (rc = wal_writer_flush(&st->wal, err)) != DISKIO_OK ||
            (rc = wal_writer_sync(&st->wal, err)) != DISKIO_OK)
            goto out;
    }
    st->hs = hs;
    rec->term = hs.term;
    rec->vote = hs.vote;
out:
    free(snaps);
    return rc;
}
