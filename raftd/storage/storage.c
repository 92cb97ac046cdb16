/*
 * storage.c - the storage facade: recovery, the request queue, the writer thread, snapshots
 * and metrics. See storage.h for the contract; the file formats are in wal.c, meta.c and
 * snapfile.c.
 *
 * How the pieces fit:
 *
 *   loop thread                      writer thread
 *   storage_submit --> queue (mu) --> takes a group, writes hard state, records, one sync
 *   storage_poll   <-- done  (mu) <-- marks the group done, bumps the eventfd
 *
 * The loop thread keeps a "view" of the log as it will be once everything it queued is
 * written (base, last index, the terms by index). Every request is checked against the
 * view and its resulting (last index, last term) computed at submit time, so a bad request
 * is refused before it is queued, and the writer thread never has to decide anything: it
 * writes what it is given, in order. The view is the loop thread's alone.
 *
 * Lock order: mu, then met_mu; snap_mu is never held with either. No lock is held across
 * file I/O except snap_mu around snapshot retention (directory listing and unlinks), which
 * only snapshot committers and the writer's compaction step take.
 */
#include "storage.h"

#include "log.h"
#include "meta.h"
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

const uint64_t storage_fsync_bucket_ns[STORAGE_FSYNC_BUCKETS - 1] = {
    50000ull,     100000ull,    250000ull,    500000ull,     1000000ull,
    2500000ull,   5000000ull,   10000000ull,  25000000ull,   50000000ull,
    100000000ull, 250000000ull, 500000000ull, 1000000000ull, 2500000000ull,
};

/* A run of entries with one term: from index `first` up to the next run's first - 1. */
struct term_run {
    uint64_t first;
    uint64_t term;
};

/* The log as it will be once every queued request is written (loop thread only). */
struct view {
    uint64_t base; /* entries start at base + 1 (the snapshot or reset point) */
    uint64_t base_term;
    uint64_t last;         /* last index; base when there are no entries */
    struct term_run *runs; /* owned */
    size_t n_runs, cap_runs;
    uint64_t hs_term; /* hard state as queued: never goes back, one vote per term */
    uint64_t hs_vote;
};

/*
 * One queued request. Allocated in one piece by storage_submit (the struct, the entry
 * array, the entry bytes, the configuration bytes and, unless borrowed, the snapshot data)
 * and freed by whoever takes it off the last list it is on: storage_poll, the writer (for
 * unreported requests) or storage_close.
 */
struct req {
    struct req *next;
    void *cookie;
    bool report; /* false: internal (compaction), no completion */
    bool has_hs;
    uint64_t term, vote;
    bool has_install;
    bool released;
    uint64_t inst_index, inst_term;
    const uint8_t *inst_config;
    uint32_t inst_config_len;
    const uint8_t *inst_data;
    uint64_t inst_data_len;
    void (*inst_release)(void *arg);
    void *inst_release_arg;
    uint64_t truncate_from;
    uint64_t compact_to;
    struct wal_entry *entries;
    size_t n_entries;
    uint64_t bytes; /* payload bytes, for sizing groups */
    int status;
    uint64_t last_index, last_term;
};

struct storage {
    char *dir; /* owned copy of the path */
    int dirfd;
    struct storage_options opt;
    struct diskio_sync sync;
    int efd; /* eventfd: readable while done is not empty */

    struct view view; /* loop thread */

    pthread_mutex_t mu; /* guards everything down to fail_err */
    pthread_cond_t cond;
    struct req *q_head, *q_tail;
    size_t queued;
    struct req *d_head, *d_tail;
    bool stopping;
    int failed;
    struct diskio_err fail_err;

    pthread_mutex_t snap_mu; /* guards the two newest durable snapshot indexes */
    uint64_t snaps[2];       /* [0] newest, [1] the one before; valid up to n_snaps */
    size_t n_snaps;

    pthread_mutex_t met_mu;
    struct storage_metrics met;

    /* writer thread only (after open) */
    pthread_t thread;
    bool thread_started;
    struct wal_writer wal;
    struct meta_state hs; /* durable hard state */
};

/* ---------------------------------------------------------------- options */

void storage_options_default(struct storage_options *o)
{
    o->fsync = true;
    o->segment_bytes = 64ull << 20;
    o->max_entry_bytes = (4u << 20) + (64u << 10);
    o->max_group_bytes = 8ull << 20;
}

static int check_options(const struct storage_options *o, struct diskio_err *err)
{
    if (o->max_entry_bytes == 0 || o->max_group_bytes == 0)
        return diskio_fail(err, DISKIO_EINVAL,
                           "storage: options: max_entry_bytes and max_group_bytes must be > 0");
    if (o->segment_bytes < WAL_MIN_SEGMENT_BYTES ||
        o->segment_bytes <
            WAL_SEG_HEADER_SIZE + WAL_FRAME_HEADER + wal_codec_frame_size(o->max_entry_bytes))
        return diskio_fail(err, DISKIO_EINVAL,
                           "storage: options: segment_bytes %" PRIu64
                           " cannot hold the largest entry (%" PRIu32 " bytes) or is under %u",
                           o->segment_bytes, o->max_entry_bytes, WAL_MIN_SEGMENT_BYTES);
    return DISKIO_OK;
}

/* ---------------------------------------------------------------- metrics */

static void on_sync(void *arg, uint64_t ns)
{
    struct storage *st = arg;
    size_t b = 0;

    while (b < STORAGE_FSYNC_BUCKETS - 1 && ns > storage_fsync_bucket_ns[b])
        b++;
    pthread_mutex_lock(&st->met_mu);
    st->met.fsync_count++;
    st->met.fsync_sum_ns += ns;
    st->met.fsync_bucket[b]++;
    pthread_mutex_unlock(&st->met_mu);
}

void storage_metrics_get(struct storage *st, struct storage_metrics *out)
{
    size_t queued;
    int failed;

    pthread_mutex_lock(&st->mu);
    queued = st->queued;
    failed = st->failed;
    pthread_mutex_unlock(&st->mu);
    pthread_mutex_lock(&st->met_mu);
    *out = st->met;
    pthread_mutex_unlock(&st->met_mu);
    out->queued = queued;
    out->failed = failed != 0;
}

int storage_failed(struct storage *st, struct diskio_err *err)
{
    int rc;

    pthread_mutex_lock(&st->mu);
    rc = st->failed;
    if (rc != 0 && err != NULL)
        *err = st->fail_err;
    pthread_mutex_unlock(&st->mu);
    return rc;
}

/* ---------------------------------------------------------------- the view */

static uint64_t view_term_at(const struct view *v, uint64_t i)
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

static int view_reserve(struct view *v, size_t more)
{
    if (v->n_runs + more <= v->cap_runs)
        return 0;
    size_t ncap = v->cap_runs ? v->cap_runs : 16;
    while (ncap < v->n_runs + more)
        ncap *= 2;
    struct term_run *nr = realloc(v->runs, ncap * sizeof(*nr));
    if (nr == NULL)
        return -1;
    v->runs = nr;
    v->cap_runs = ncap;
    return 0;
}

/* Capacity was reserved by the caller. */
static void view_append(struct view *v, uint64_t index, uint64_t term)
{
    if (v->n_runs == 0 || v->runs[v->n_runs - 1].term != term) {
        v->runs[v->n_runs].first = index;
        v->runs[v->n_runs].term = term;
        v->n_runs++;
    }
    v->last = index;
}

static void view_truncate(struct view *v, uint64_t from)
{
    v->last = from - 1;
    while (v->n_runs > 0 && v->runs[v->n_runs - 1].first >= from)
        v->n_runs--;
}

static void view_reset(struct view *v, uint64_t index, uint64_t term, bool keep)
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

/* ---------------------------------------------------------------- queue */

static void req_release(struct req *r)
{
    if (r->has_install && r->inst_release != NULL && !r->released) {
        r->released = true;
        r->inst_release(r->inst_release_arg);
    }
}

static void enqueue(struct storage *st, struct req *r)
{
    pthread_mutex_lock(&st->mu);
    r->next = NULL;
    if (st->q_tail != NULL)
        st->q_tail->next = r;
    else
        st->q_head = r;
    st->q_tail = r;
    st->queued++;
    pthread_cond_signal(&st->cond);
    pthread_mutex_unlock(&st->mu);
}

static int check_failed(struct storage *st, struct diskio_err *err)
{
    int rc;

    pthread_mutex_lock(&st->mu);
    rc = st->failed;
    if (rc != 0 && err != NULL) {
        err->rc = DISKIO_EFAILED;
        snprintf(err->msg, sizeof(err->msg), "storage: stopped after an earlier error: %.700s",
                 st->fail_err.msg);
    }
    pthread_mutex_unlock(&st->mu);
    return rc != 0 ? DISKIO_EFAILED : DISKIO_OK;
}

int storage_submit(struct storage *st, const struct storage_write *w, struct diskio_err *err)
{
    const struct storage_install *in = w->install;
    const struct wal_entry *e = w->entries;
    size_t n = w->n_entries, size, term_changes = 0;
    uint64_t base, base_term, last, tf = w->truncate_from, bytes = 0, res_last, res_term;
    bool keep = false;
    struct req *r;
    uint8_t *p;

    if (check_failed(st, err) != DISKIO_OK)
        return DISKIO_EFAILED;
    if (w->has_hard_state &&
        (w->term < st->view.hs_term ||
         (w->term == st->view.hs_term && st->view.hs_vote != 0 && w->vote != st->view.hs_vote)))
        return diskio_fail(err, DISKIO_EINVAL,
                           "storage: submit: hard state (term %" PRIu64 ", vote %" PRIu64
                           ") would undo (term %" PRIu64 ", vote %" PRIu64 ")",
                           w->term, w->vote, st->view.hs_term, st->view.hs_vote);
    if (n > 0 && e == NULL)
        return diskio_fail(err, DISKIO_EINVAL, "storage: submit: entries missing");
    for (size_t i = 0; i < n; i++) {
        if (e[i].len > st->opt.max_entry_bytes)
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: entry %" PRIu64 " has %" PRIu32
                               " bytes, more than the %" PRIu32 " allowed",
                               e[i].index, e[i].len, st->opt.max_entry_bytes);
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
            term_changes++;
        bytes += e[i].len;
    }

    /* Work out the effect on the view without changing it yet. */
    base = st->view.base;
    base_term = st->view.base_term;
    last = st->view.last;
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
        keep = in->index < last && view_term_at(&st->view, in->index) == in->term;
        if (!keep && in->index < last)
            tf = tf == 0 || tf > in->index + 1 ? in->index + 1 : tf;
        base = in->index;
        base_term = in->term;
        if (!keep)
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
        prev_term = start - 1 == base ? base_term : view_term_at(&st->view, start - 1);
        if (e[0].term < prev_term)
            return diskio_fail(err, DISKIO_EINVAL,
                               "storage: submit: entry %" PRIu64 " has term %" PRIu64
                               ", lower than the %" PRIu64 " before it",
                               start, e[0].term, prev_term);
    }
    if (tf == last + 1)
        tf = 0; /* nothing to cut */
    if (n > 0) {
        res_last = e[n - 1].index;
        res_term = e[n - 1].term;
    } else {
        res_last = tf != 0 ? tf - 1 : last;
        res_term = res_last == base ? base_term : view_term_at(&st->view, res_last);
    }

    /* One allocation for everything the writer will need. */
    size = sizeof(*r) + n * sizeof(struct wal_entry) + bytes;
    if (in != NULL) {
        size += in->config_len;
        if (in->release == NULL) {
            if (in->data_len > SIZE_MAX - size)
                return diskio_fail(err, DISKIO_ENOMEM, "storage: submit: snapshot too large");
            size += (size_t)in->data_len;
        }
    }
    if (view_reserve(&st->view, term_changes + 1) < 0 || (r = calloc(1, size)) == NULL)
        return diskio_fail(err, DISKIO_ENOMEM, "storage: submit: %s", strerror(ENOMEM));
    p = (uint8_t *)(r + 1);
    r->cookie = w->cookie;
    r->report = true;
    r->has_hs = w->has_hard_state;
    r->term = w->term;
    r->vote = w->vote;
    r->entries = (struct wal_entry *)p;
    r->n_entries = n;
    p += n * sizeof(struct wal_entry);
    for (size_t i = 0; i < n; i++) {
        r->entries[i] = e[i];
        if (e[i].len > 0) {
            memcpy(p, e[i].data, e[i].len);
            r->entries[i].data = p;
            p += e[i].len;
        } else {
            r->entries[i].data = NULL;
        }
    }
    if (in != NULL) {
        r->has_install = true;
        r->inst_index = in->index;
        r->inst_term = in->term;
        r->inst_config_len = in->config_len;
        if (in->config_len > 0) {
            memcpy(p, in->config, in->config_len);
            r->inst_config = p;
            p += in->config_len;
        }
        r->inst_data_len = in->data_len;
        if (in->release != NULL) {
            r->inst_data = in->data;
            r->inst_release = in->release;
            r->inst_release_arg = in->release_arg;
        } else if (in->data_len > 0) {
            memcpy(p, in->data, (size_t)in->data_len);
            r->inst_data = p;
        }
    }
    r->truncate_from = tf;
    r->bytes = bytes + (in != NULL ? in->data_len : 0);
    r->last_index = res_last;
    r->last_term = res_term;

    /* Now the view moves. */
    if (w->has_hard_state) {
        st->view.hs_term = w->term;
        st->view.hs_vote = w->vote;
    }
    if (in != NULL)
        view_reset(&st->view, in->index, in->term, keep);
    if (tf != 0)
        view_truncate(&st->view, tf);
    for (size_t i = 0; i < n; i++)
        view_append(&st->view, e[i].index, e[i].term);
    enqueue(st, r);
    return DISKIO_OK;
}

int storage_snapshot_install(struct storage *st, const struct storage_install *in, void *cookie,
                             struct diskio_err *err)
{
    struct storage_write w = {.install = in, .cookie = cookie};

    if (in == NULL)
        return diskio_fail(err, DISKIO_EINVAL, "storage: install: no snapshot");
    return storage_submit(st, &w, err);
}

int storage_compact(struct storage *st, uint64_t index, struct diskio_err *err)
{
    struct req *r;

    if (check_failed(st, err) != DISKIO_OK)
        return DISKIO_EFAILED;
    if (index == 0)
        return DISKIO_OK;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return diskio_fail(err, DISKIO_ENOMEM, "storage: compact: %s", strerror(ENOMEM));
    r->compact_to = index;
    enqueue(st, r);
    return DISKIO_OK;
}

int storage_event_fd(const struct storage *st)
{
    return st->efd;
}

size_t storage_poll(struct storage *st, struct storage_done *out, size_t max)
{
    struct req *taken = NULL, **tail = &taken;
    size_t n = 0;

    pthread_mutex_lock(&st->mu);
    while (n < max && st->d_head != NULL) {
        struct req *r = st->d_head;
        st->d_head = r->next;
        if (st->d_head == NULL)
            st->d_tail = NULL;
        out[n].cookie = r->cookie;
        out[n].status = r->status;
        out[n].last_index = r->last_index;
        out[n].last_term = r->last_term;
        n++;
        r->next = NULL;
        *tail = r;
        tail = &r->next;
    }
    if (st->d_head == NULL) {
        uint64_t v;
        /* Drain the counter; the writer bumps it under mu, so nothing is lost. */
        if (read(st->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            log_event(LOG_WARN, "storage", "eventfd read failed", "err=\"%s\"", strerror(errno));
    }
    pthread_mutex_unlock(&st->mu);
    while (taken != NULL) {
        struct req *r = taken;
        taken = r->next;
        free(r);
    }
    return n;
}

/* ---------------------------------------------------------------- snapshots */

/* A snapshot (index) became durable: apply retention and remember it. */
static int snapshot_durable(struct storage *st, uint64_t index, struct diskio_err *err)
{
    int rc;

    pthread_mutex_lock(&st->snap_mu);
    rc = snapfile_retain(st->dirfd, st->dir, 2, &st->sync, err);
    if (st->n_snaps == 0 || index > st->snaps[0]) {
        st->snaps[1] = st->snaps[0];
        st->snaps[0] = index;
        st->n_snaps = st->n_snaps < 2 ? st->n_snaps + 1 : 2;
    } else if (index != st->snaps[0] && (st->n_snaps < 2 || index > st->snaps[1])) {
        st->snaps[1] = index;
        st->n_snaps = 2;
    }
    pthread_mutex_unlock(&st->snap_mu);
    pthread_mutex_lock(&st->met_mu);
    st->met.snapshots_written++;
    pthread_mutex_unlock(&st->met_mu);
    return rc;
}

/* How far compaction may go: the older of the two newest durable snapshots. */
static uint64_t compaction_limit(struct storage *st)
{
    uint64_t lim;

    pthread_mutex_lock(&st->snap_mu);
    lim = st->n_snaps == 0 ? 0 : st->n_snaps == 1 ? st->snaps[0] : st->snaps[1];
    pthread_mutex_unlock(&st->snap_mu);
    return lim;
}

struct storage_snapshot {
    struct storage *st;
    struct snapfile_writer *w; /* owned */
    uint64_t index;
};

int storage_snapshot_begin(struct storage *st, uint64_t index, uint64_t term, const void *config,
                           uint32_t config_len, struct storage_snapshot **out,
                           struct diskio_err *err)
{
    struct storage_snapshot *s;
    int rc;

    *out = NULL;
    if (index == 0)
        return diskio_fail(err, DISKIO_EINVAL, "storage: snapshot at index 0");
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return diskio_fail(err, DISKIO_ENOMEM, "storage: snapshot: %s", strerror(ENOMEM));
    s->st = st;
    s->index = index;
    rc =
        snapfile_create(st->dirfd, st->dir, index, term, config, config_len, &st->sync, &s->w, err);
    if (rc != DISKIO_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return DISKIO_OK;
}

int storage_snapshot_write(struct storage_snapshot *s, const void *buf, size_t len,
                           struct diskio_err *err)
{
    return snapfile_append(s->w, buf, len, err);
}

int storage_snapshot_commit(struct storage_snapshot *s, struct diskio_err *err)
{
    struct storage *st = s->st;
    uint64_t index = s->index;
    int rc = snapfile_commit(s->w, err);

    free(s);
    if (rc != DISKIO_OK)
        return rc;
    return snapshot_durable(st, index, err);
}

void storage_snapshot_abort(struct storage_snapshot *s)
{
    if (s == NULL)
        return;
    snapfile_abort(s->w);
    free(s);
}

int storage_snapshot_save(struct storage *st, uint64_t index, uint64_t term, const void *config,
                          uint32_t config_len, const void *data, uint64_t data_len,
                          struct diskio_err *err)
{
    struct storage_snapshot *s;
    int rc = storage_snapshot_begin(st, index, term, config, config_len, &s, err);

    if (rc != DISKIO_OK)
        return rc;
    if (data_len > 0 && (rc = storage_snapshot_write(s, data, (size_t)data_len, err)) != 0) {
        storage_snapshot_abort(s);
        return rc;
    }
    return storage_snapshot_commit(s, err);
}

int storage_snapshot_read(struct storage *st, const struct storage_snapshot_info *info, void *dst,
                          uint64_t len, struct diskio_err *err)
{
    return snapfile_read_data(st->dirfd, st->dir, info->name, dst, len, err);
}

/* ---------------------------------------------------------------- writer thread */

static int write_install(struct storage *st, struct req *r, struct diskio_err *err)
{
    struct snapfile_writer *w;
    int rc = snapfile_create(st->dirfd, st->dir, r->inst_index, r->inst_term, r->inst_config,
                             r->inst_config_len, &st->sync, &w, err);

    if (rc != DISKIO_OK)
        return rc;
    if (r->inst_data_len > 0 &&
        (rc = snapfile_append(w, r->inst_data, (size_t)r->inst_data_len, err)) != DISKIO_OK) {
        snapfile_abort(w);
        return rc;
    }
    rc = snapfile_commit(w, err);
    req_release(r);
    if (rc != DISKIO_OK)
        return rc;
    rc = snapshot_durable(st, r->inst_index, err);
    if (rc != DISKIO_OK)
        return rc;
    /* Only now, with the snapshot durable, may the log say the entries are gone. */
    return wal_writer_reset(&st->wal, r->inst_index, r->inst_term, err);
}

static int write_group(struct storage *st, struct req *group, uint64_t *entries,
                       struct diskio_err *err)
{
    struct req *hs = NULL;
    uint64_t compact = 0;
    int rc;

    *entries = 0;
    for (struct req *r = group; r != NULL; r = r->next)
        if (r->has_hs)
            hs = r;
    if (hs != NULL && (hs->term != st->hs.term || hs->vote != st->hs.vote)) {
        struct meta_state m = {.term = hs->term, .vote = hs->vote};
        rc = meta_store(st->dirfd, st->dir, &m, &st->sync, err);
        if (rc != DISKIO_OK)
            return rc;
        st->hs = m;
        pthread_mutex_lock(&st->met_mu);
        st->met.hard_states_written++;
        pthread_mutex_unlock(&st->met_mu);
    }
    for (struct req *r = group; r != NULL; r = r->next) {
        if (r->has_install && (rc = write_install(st, r, err)) != DISKIO_OK)
            return rc;
        if (r->truncate_from != 0 &&
            (rc = wal_writer_truncate(&st->wal, r->truncate_from, err)) != DISKIO_OK)
            return rc;
        for (size_t i = 0; i < r->n_entries; i++) {
            rc = wal_writer_entry(&st->wal, &r->entries[i], err);
            if (rc != DISKIO_OK)
                return rc;
        }
        *entries += r->n_entries;
        if (r->compact_to > compact)
            compact = r->compact_to;
    }
    rc = wal_writer_flush(&st->wal, err);
    if (rc == DISKIO_OK)
        rc = wal_writer_sync(&st->wal, err);
    if (rc != DISKIO_OK)
        return rc;
    if (compact > 0) {
        uint64_t lim = compaction_limit(st);
        if (compact > lim)
            compact = lim;
        if (compact > 0) {
            int k = wal_writer_compact(&st->wal, compact, err);
            if (k < 0)
                return k;
            if (k > 0)
                log_event(LOG_INFO, "storage", "compacted the log",
                          "segments_deleted=%d upto=%" PRIu64, k, compact);
        }
    }
    return DISKIO_OK;
}

static void finish_group(struct storage *st, struct req *group, int rc, uint64_t entries,
                         const struct diskio_err *err)
{
    struct req *last_reported = NULL, *unreported = NULL;
    uint64_t completed = 0;
    bool any = false;

    for (struct req *r = group; r != NULL; r = r->next) {
        r->status = rc;
        req_release(r);
    }
    pthread_mutex_lock(&st->mu);
    if (rc != DISKIO_OK && st->failed == 0) {
        st->failed = rc;
        st->fail_err = *err;
        log_event(LOG_ERROR, "storage", "write failed; storage stopped, restart needed",
                  "err=%s", log_q(err->msg));
    }
    while (group != NULL) {
        struct req *r = group;
        group = r->next;
        r->next = NULL;
        if (!r->report) {
            r->next = unreported;
            unreported = r;
            continue;
        }
        if (st->d_tail != NULL)
            st->d_tail->next = r;
        else
            st->d_head = r;
        st->d_tail = r;
        last_reported = r;
        completed++;
        any = true;
    }
    if (any) {
        uint64_t one = 1;
        if (write(st->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            log_event(LOG_WARN, "storage", "eventfd write failed", "err=\"%s\"", strerror(errno));
    }
    pthread_mutex_lock(&st->met_mu);
    st->met.group_commits++;
    st->met.requests_completed += completed;
    if (rc == DISKIO_OK) {
        st->met.entries_written += entries;
        if (last_reported != NULL) {
            st->met.last_index = last_reported->last_index;
            st->met.last_term = last_reported->last_term;
        }
    }
    st->met.bytes_written = st->wal.bytes_written;
    st->met.segments = st->wal.n_segs;
    st->met.segments_created = st->wal.segments_created;
    st->met.segments_deleted = st->wal.segments_deleted;
    pthread_mutex_unlock(&st->met_mu);
    pthread_mutex_unlock(&st->mu);
    while (unreported != NULL) {
        struct req *r = unreported;
        unreported = r->next;
        free(r);
    }
}

static void *writer_main(void *arg)
{
    struct storage *st = arg;

    for (;;) {
        struct req *group, *r, *last = NULL;
        struct diskio_err err = {0};
        uint64_t bytes = 0, entries = 0;
        int failed, rc;

        pthread_mutex_lock(&st->mu);
        while (st->q_head == NULL && !st->stopping)
            pthread_cond_wait(&st->cond, &st->mu);
        if (st->q_head == NULL) {
            pthread_mutex_unlock(&st->mu);
            break;
        }
        /* Take requests up to the group size (always at least one). */
        group = r = st->q_head;
        while (r != NULL && (last == NULL || bytes + r->bytes <= st->opt.max_group_bytes)) {
            bytes += r->bytes;
            last = r;
            r = r->next;
            st->queued--;
        }
        st->q_head = r;
        if (r == NULL)
            st->q_tail = NULL;
        last->next = NULL;
        failed = st->failed;
        pthread_mutex_unlock(&st->mu);

        if (failed != 0) {
            rc = DISKIO_EFAILED;
            diskio_fail(&err, rc, "storage: stopped after an earlier error");
        } else {
            rc = write_group(st, group, &entries, &err);
        }
        finish_group(st, group, rc, entries, &err);
    }
    return NULL;
}

/* ---------------------------------------------------------------- open and close */

void storage_recovered_free(struct storage_recovered *rec)
{
    if (rec == NULL)
        return;
    free(rec->snapshot.config);
    wal_mem_free(&rec->mem);
    memset(rec, 0, sizeof(*rec));
}

static void storage_free(struct storage *st)
{
    while (st->q_head != NULL) {
        struct req *r = st->q_head;
        st->q_head = r->next;
        req_release(r);
        free(r);
    }
    while (st->d_head != NULL) {
        struct req *r = st->d_head;
        st->d_head = r->next;
        free(r);
    }
    wal_writer_close(&st->wal);
    if (st->efd >= 0)
        close(st->efd);
    if (st->dirfd >= 0)
        close(st->dirfd);
    free(st->view.runs);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cond);
    pthread_mutex_destroy(&st->snap_mu);
    pthread_mutex_destroy(&st->met_mu);
    free(st->dir);
    free(st);
}

void storage_close(struct storage *st)
{
    if (st == NULL)
        return;
    if (st->thread_started) {
        pthread_mutex_lock(&st->mu);
        st->stopping = true;
        pthread_cond_signal(&st->cond);
        pthread_mutex_unlock(&st->mu);
        pthread_join(st->thread, NULL);
    }
    storage_free(st);
}

/* ---------------------------------------------------------------- a damaged newest snapshot */

void storage_fallback_check(uint64_t older_index, uint64_t older_term, uint64_t newest_index,
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
        storage_fallback_check(older->index, older->term, newest->index, newest->term,
                               rp->v + rp->start, rp->n - rp->start, &f);
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
                  "damaged=%s using=%s from_log=%" PRIu64 "..%" PRIu64 " err=%s", log_q(newest->name),
                  log_q(older->name), f.need_first, f.need_last, log_quote(oq, sizeof(oq), first_err.msg));
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
    const struct wal_entry *L = rp->v + rp->start;
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

static int view_init(struct view *v, const struct storage_recovered *rec)
{
    v->base = rec->has_snapshot ? rec->snapshot.index : 0;
    v->base_term = rec->has_snapshot ? rec->snapshot.term : 0;
    v->last = v->base;
    for (size_t i = 0; i < rec->n_entries; i++) {
        if (view_reserve(v, 1) < 0)
            return -1;
        view_append(v, rec->entries[i].index, rec->entries[i].term);
    }
    return 0;
}

int storage_open(const char *dir, const struct storage_options *opts, struct storage **out,
                 struct storage_recovered *rec, struct diskio_err *err)
{
    struct wal_recovery wr;
    struct snapfile_entry *snaps = NULL;
    size_t n_snaps = 0;
    long chosen, quarantine;
    bool found, need_reset, drop_suffix;
    uint64_t t0 = mono_ns();
    struct storage *st;
    struct meta_state hs;
    int rc;

    *out = NULL;
    memset(rec, 0, sizeof(*rec));
    memset(&wr, 0, sizeof(wr));
    if ((rc = check_options(opts, err)) != DISKIO_OK)
        return rc;
    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return diskio_fail(err, DISKIO_ENOMEM, "storage: open: %s", strerror(ENOMEM));
    st->dirfd = st->efd = -1;
    st->wal.fd = -1;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cond, NULL);
    pthread_mutex_init(&st->snap_mu, NULL);
    pthread_mutex_init(&st->met_mu, NULL);
    st->opt = *opts;
    st->sync.fsync = opts->fsync;
    st->sync.on_sync = on_sync;
    st->sync.arg = st;
    st->dir = strdup(dir);
    if (st->dir == NULL) {
        rc = diskio_fail(err, DISKIO_ENOMEM, "storage: open: %s", strerror(ENOMEM));
        goto fail;
    }
    st->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->dirfd < 0) {
        rc = diskio_fail_errno(err, errno, "storage: open state directory %s", dir);
        goto fail;
    }
    st->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (st->efd < 0) {
        rc = diskio_fail_errno(err, errno, "storage: eventfd");
        goto fail;
    }

    /* 1. Leftovers of interrupted writes; the hard state. */
    if ((rc = wal_remove_tmp(st->dirfd, dir, err)) != DISKIO_OK ||
        (rc = snapfile_remove_tmp(st->dirfd, dir, err)) != DISKIO_OK ||
        (rc = meta_load(st->dirfd, dir, &hs, &found, err)) != DISKIO_OK)
        goto fail;
    /* 2. The log, read and checked whole; nothing on disk changes yet. */
    if ((rc = wal_recover(st->dirfd, dir, &wr, err)) != DISKIO_OK)
        goto fail;
    /* 3. The snapshot, and what of the log is visible after it. */
    if ((rc = snapfile_list(st->dirfd, dir, &snaps, &n_snaps, err)) != DISKIO_OK)
        goto fail;
    rc = choose_snapshot(st, snaps, n_snaps, &wr, rec, &chosen, &quarantine, err);
    if (rc != DISKIO_OK)
        goto fail;
    rc = settle_log(st, &wr, rec, &need_reset, &drop_suffix, err);
    if (rc != DISKIO_OK)
        goto fail;
    if (!found && (wr.replay.n > wr.replay.start || rec->has_snapshot))
        log_event(LOG_WARN, "storage", "no hard state file but a log or snapshot exists", "dir=%s",
                  log_q(dir));
    if (rec->n_entries > 0 && hs.term < rec->last_term)
        log_event(LOG_WARN, "storage", "hard state term is below the last log term",
                  "term=%" PRIu64 " last_log_term=%" PRIu64, hs.term, rec->last_term);

    /* 4. Everything checked: now repair (torn tail, damaged snapshot, reset record). */
    if (quarantine >= 0) {
        rc = snapfile_quarantine(st->dirfd, dir, snaps[quarantine].name, &st->sync, err);
        if (rc != DISKIO_OK)
            goto fail;
    }
    st->n_snaps = 0;
    for (long i = chosen; i >= 0 && st->n_snaps < 2; i--) {
        if (i == quarantine)
            continue;
        st->snaps[st->n_snaps++] = snaps[i].index;
    }
    rc = wal_writer_open(&st->wal, st->dirfd, st->dir, &wr, opts->segment_bytes, &st->sync, err);
    if (rc != DISKIO_OK)
        goto fail;
    if (need_reset) {
        if ((rc = wal_writer_reset(&st->wal, rec->snapshot.index, rec->snapshot.term, err)) !=
                DISKIO_OK ||
            (drop_suffix &&
             (rc = wal_writer_truncate(&st->wal, rec->snapshot.index + 1, err)) != DISKIO_OK) ||
            (rc = wal_writer_flush(&st->wal, err)) != DISKIO_OK ||
            (rc = wal_writer_sync(&st->wal, err)) != DISKIO_OK)
            goto fail;
    }
    st->hs = hs;
    st->view.hs_term = hs.term;
    st->view.hs_vote = hs.vote;
    rec->term = hs.term;
    rec->vote = hs.vote;
    if (view_init(&st->view, rec) < 0) {
        rc = diskio_fail(err, DISKIO_ENOMEM, "storage: open: %s", strerror(ENOMEM));
        goto fail;
    }
    st->met.last_index = rec->last_index;
    st->met.last_term = rec->last_term;
    st->met.segments = st->wal.n_segs;
    st->met.segments_created = st->wal.segments_created;

    rc = pthread_create(&st->thread, NULL, writer_main, st);
    if (rc != 0) {
        rc = diskio_fail_errno(err, rc, "storage: start writer thread");
        goto fail;
    }
    st->thread_started = true;

    /* The entries now belong to rec. */
    rec->mem = wr.mem;
    memset(&wr.mem, 0, sizeof(wr.mem));
    log_event(LOG_INFO, "storage", "recovered",
              "dir=%s term=%" PRIu64 " vote=%" PRIu64 " snapshot_index=%" PRIu64
              " entries=%zu last_index=%" PRIu64 " segments=%zu bytes_read=%" PRIu64 " ms=%" PRIu64,
              log_q(dir), rec->term, rec->vote, rec->has_snapshot ? rec->snapshot.index : 0,
              rec->n_entries, rec->last_index, st->wal.n_segs, wr.bytes_read,
              (mono_ns() - t0) / 1000000);
    wal_recovery_free(&wr);
    free(snaps);
    *out = st;
    return DISKIO_OK;
fail:
    wal_recovery_free(&wr);
    free(snaps);
    storage_recovered_free(rec);
    storage_free(st);
    return rc;
}
