/*
 * storage.c - the storage facade: the public API of storage.h. Open and close, options,
 * metrics, local snapshots, and the glue that takes a request through the view
 * (storage_view.c) into the writer's queue (storage_writer.c); recovery is
 * storage_recover.c. How the pieces fit, and the lock order, is in storage_int.h; the
 * contract is storage.h; the file formats are in wal_codec.c, meta.c and snapfile.c.
 */
#include "storage_int.h"

#include "log.h"
#include "meta.h"
#include "util.h"

#include <errno.h>
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

/* ---------------------------------------------------------------- the write path */

int storage_submit(struct storage *st, const struct storage_write *w, struct diskio_err *err)
{
    struct storage_view_plan plan;
    struct storage_req *r;
    int rc;

    if (storage_writer_check_failed(st, err) != DISKIO_OK)
        return DISKIO_EFAILED;
    rc = storage_view_plan(&st->view, w, st->opt.max_entry_bytes, &plan, err);
    if (rc != DISKIO_OK)
        return rc;
    rc = storage_writer_req_new(w, &plan, &r, err);
    if (rc != DISKIO_OK)
        return rc;
    if (storage_view_apply(&st->view, w, &plan) < 0) {
        free(r);
        return diskio_fail(err, DISKIO_ENOMEM, "storage: submit: %s", strerror(ENOMEM));
    }
    storage_writer_enqueue(st, r);
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
    struct storage_req *r;

    if (storage_writer_check_failed(st, err) != DISKIO_OK)
        return DISKIO_EFAILED;
    if (index == 0)
        return DISKIO_OK;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return diskio_fail(err, DISKIO_ENOMEM, "storage: compact: %s", strerror(ENOMEM));
    r->compact_to = index;
    storage_writer_enqueue(st, r);
    return DISKIO_OK;
}

int storage_event_fd(const struct storage *st)
{
    return st->efd;
}

size_t storage_poll(struct storage *st, struct storage_done *out, size_t max)
{
    return storage_writer_poll(st, out, max);
}

/* ---------------------------------------------------------------- snapshots */

/* A snapshot (index) became durable: apply retention and remember it (storage_int.h). */
int storage_snapshots_durable(struct storage *st, uint64_t index, struct diskio_err *err)
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
uint64_t storage_snapshots_limit(struct storage *st)
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
    return storage_snapshots_durable(st, index, err);
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
    storage_writer_drain(st);
    wal_writer_close(&st->wal);
    if (st->efd >= 0)
        close(st->efd);
    if (st->dirfd >= 0)
        close(st->dirfd);
    storage_view_free(&st->view);
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
    storage_writer_stop(st);
    storage_free(st);
}

/* ------------------------------------------- a damaged newest snapshot (storage_recover.c) */

void storage_fallback_check(uint64_t older_index, uint64_t older_term, uint64_t newest_index,
                            uint64_t newest_term, const struct wal_entry *log, size_t n,
                            struct storage_fallback *out)
{
    storage_recover_fallback(older_index, older_term, newest_index, newest_term, log, n, out);
}

int storage_open(const char *dir, const struct storage_options *opts, struct storage **out,
                 struct storage_recovered *rec, struct diskio_err *err)
{
    struct wal_recovery wr;
    uint64_t t0 = mono_ns();
    struct storage *st;
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

    /* Recovery and repairs (storage_recover.c); then the view starts from what it found. */
    rc = storage_recover_run(st, rec, &wr, err);
    if (rc != DISKIO_OK)
        goto fail;
    if (storage_view_init(&st->view, rec->has_snapshot ? rec->snapshot.index : 0,
                          rec->has_snapshot ? rec->snapshot.term : 0, rec->entries,
                          rec->n_entries) < 0) {
        rc = diskio_fail(err, DISKIO_ENOMEM, "storage: open: %s", strerror(ENOMEM));
        goto fail;
    }
    st->view.hs_term = st->hs.term;
    st->view.hs_vote = st->hs.vote;
    st->met.last_index = rec->last_index;
    st->met.last_term = rec->last_term;
    st->met.segments = st->wal.n_segs;
    st->met.segments_created = st->wal.segments_created;

    rc = storage_writer_start(st, err);
    if (rc != DISKIO_OK)
        goto fail;

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
    *out = st;
    return DISKIO_OK;
fail:
    wal_recovery_free(&wr);
    storage_recovered_free(rec);
    storage_free(st);
    return rc;
}
