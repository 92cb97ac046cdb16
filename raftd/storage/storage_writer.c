/*
 * storage_writer.c - the request queue, the writer thread and the completion list; see
 * storage_int.h for how they fit and storage.h for the guarantees.
 *
 * Invariants: requests are written strictly in queue order, a group at a time (up to
 * max_group_bytes of payload, at least one request), and a group's completions are
 * published only after its one sync returned. The writer decides nothing: every request was
 * checked against the view at submit time. After the first write or sync error every later
 * request completes with that error (the page cache cannot be trusted after a failed fsync).
 *
 * Ownership: a request is owned by the list it is on (queue, then the done list) and freed
 * by storage_writer_poll (reported), by the writer (internal, unreported), or by
 * storage_writer_drain at close. A borrowed install buffer is released exactly once, on the
 * writer thread after its snapshot file is written or failed, or at close.
 */
#include "storage_int.h"

#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- queue */

int storage_writer_req_new(const struct storage_write *w, const struct storage_view_plan *pl,
                           struct storage_req **out, struct diskio_err *err)
{
    const struct storage_install *in = w->install;
    const struct wal_entry *e = w->entries;
    size_t n = w->n_entries, size;
    struct storage_req *r;
    uint8_t *p;

    /* One allocation for everything the writer will need. */
    *out = NULL;
    size = sizeof(*r) + n * sizeof(struct wal_entry) + pl->bytes;
    if (in != NULL) {
        size += in->config_len;
        if (in->release == NULL) {
            if (in->data_len > SIZE_MAX - size)
                return diskio_fail(err, DISKIO_ENOMEM, "storage: submit: snapshot too large");
            size += (size_t)in->data_len;
        }
    }
    if ((r = calloc(1, size)) == NULL)
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
    r->truncate_from = pl->truncate_from;
    r->bytes = pl->bytes + (in != NULL ? in->data_len : 0);
    r->last_index = pl->last_index;
    r->last_term = pl->last_term;
    *out = r;
    return DISKIO_OK;
}

void storage_writer_req_release(struct storage_req *r)
{
    if (r->has_install && r->inst_release != NULL && !r->released) {
        r->released = true;
        r->inst_release(r->inst_release_arg);
    }
}

void storage_writer_enqueue(struct storage *st, struct storage_req *r)
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

int storage_writer_check_failed(struct storage *st, struct diskio_err *err)
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

size_t storage_writer_poll(struct storage *st, struct storage_done *out, size_t max)
{
    struct storage_req *taken = NULL, **tail = &taken;
    size_t n = 0;

    pthread_mutex_lock(&st->mu);
    while (n < max && st->d_head != NULL) {
        struct storage_req *r = st->d_head;
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
        struct storage_req *r = taken;
        taken = r->next;
        free(r);
    }
    return n;
}

/* ---------------------------------------------------------------- writer thread */

static int write_install(struct storage *st, struct storage_req *r, struct diskio_err *err)
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
    storage_writer_req_release(r);
    if (rc != DISKIO_OK)
        return rc;
    rc = storage_snapshots_durable(st, r->inst_index, err);
    if (rc != DISKIO_OK)
        return rc;
    /* Only now, with the snapshot durable, may the log say the entries are gone. */
    return wal_writer_reset(&st->wal, r->inst_index, r->inst_term, err);
}

static int write_group(struct storage *st, struct storage_req *group, uint64_t *entries,
                       struct diskio_err *err)
{
    struct storage_req *hs = NULL;
    uint64_t compact = 0;
    int rc;

    *entries = 0;
    for (struct storage_req *r = group; r != NULL; r = r->next)
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
    for (struct storage_req *r = group; r != NULL; r = r->next) {
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
        uint64_t lim = storage_snapshots_limit(st);
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

static void finish_group(struct storage *st, struct storage_req *group, int rc, uint64_t entries,
                         const struct diskio_err *err)
{
    struct storage_req *last_reported = NULL, *unreported = NULL;
    uint64_t completed = 0;
    bool any = false;

    for (struct storage_req *r = group; r != NULL; r = r->next) {
        r->status = rc;
        storage_writer_req_release(r);
    }
    pthread_mutex_lock(&st->mu);
    if (rc != DISKIO_OK && st->failed == 0) {
        st->failed = rc;
        st->fail_err = *err;
        log_event(LOG_ERROR, "storage", "write failed; storage stopped, restart needed", "err=%s",
                  log_q(err->msg));
    }
    while (group != NULL) {
        struct storage_req *r = group;
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
        struct storage_req *r = unreported;
        unreported = r->next;
        free(r);
    }
}

static void *writer_main(void *arg)
{
    struct storage *st = arg;

    for (;;) {
        struct storage_req *group, *r, *last = NULL;
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

int storage_writer_start(struct storage *st, struct diskio_err *err)
{
    int rc = pthread_create(&st->thread, NULL, writer_main, st);

    if (rc != 0)
        return diskio_fail_errno(err, rc, "storage: start writer thread");
    st->thread_started = true;
    return DISKIO_OK;
}

void storage_writer_stop(struct storage *st)
{
    if (!st->thread_started)
        return;
    pthread_mutex_lock(&st->mu);
    st->stopping = true;
    pthread_cond_signal(&st->cond);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->thread, NULL);
    st->thread_started = false;
}

void storage_writer_drain(struct storage *st)
{
    while (st->q_head != NULL) {
        struct storage_req *r = st->q_head;
        st->q_head = r->next;
        storage_writer_req_release(r);
        free(r);
    }
    st->q_tail = NULL;
    while (st->d_head != NULL) {
        struct storage_req *r = st->d_head;
        st->d_head = r->next;
        free(r);
    }
    st->d_tail = NULL;
}
