/*
 * storage_int.h - what the files of the storage module share; not for users of storage.h.
 *
 * The module is four files, each with one job (storage.h is the contract for all four):
 *
 *   storage.c          the public API of storage.h: open and close, options, metrics,
 *                      local snapshots, and the glue that takes a request through the
 *                      view into the writer's queue.
 *   storage_view.c     the loop thread's view of the log as it will be once everything
 *                      queued is written (base, last index, terms by index), and the check
 *                      of a request against it. Pure: no locks, no I/O.
 *   storage_writer.c   the request queue, the writer thread that writes groups of requests
 *                      (hard state, installs, records, one sync) and the completion list.
 *   storage_recover.c  recovery at open: hard state, log, choice of snapshot (with the
 *                      fallback rule for a damaged newest one), repairs, the writer's start.
 *
 * How the pieces fit:
 *
 *   loop thread                            writer thread
 *   storage_submit: view plan --> queue (mu) --> takes a group, writes hard state,
 *                                                records, one sync
 *   storage_poll   <-- done  (mu) <---------- marks the group done, bumps the eventfd
 *
 * Every request is checked against the view and its resulting (last index, last term)
 * computed at submit time, so a bad request is refused before it is queued, and the writer
 * thread never has to decide anything: it writes what it is given, in order. The view is
 * the loop thread's alone.
 *
 * Lock order: mu, then met_mu; snap_mu is never held with either. No lock is held across
 * file I/O except snap_mu around snapshot retention (directory listing and unlinks), which
 * only snapshot committers and the writer's compaction step take.
 */
#ifndef SPUR_STORAGE_INT_H
#define SPUR_STORAGE_INT_H

#include "meta.h"
#include "storage.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- the view (storage_view.c) */

/* A run of entries with one term: from index `first` up to the next run's first - 1. */
struct storage_term_run {
    uint64_t first;
    uint64_t term;
};

/* The log as it will be once every queued request is written (loop thread only). */
struct storage_view {
    uint64_t base; /* entries start at base + 1 (the snapshot or reset point) */
    uint64_t base_term;
    uint64_t last;                 /* last index; base when there are no entries */
    struct storage_term_run *runs; /* owned; freed by storage_view_free() */
    size_t n_runs, cap_runs;
    uint64_t hs_term; /* hard state as queued: never goes back, one vote per term */
    uint64_t hs_vote;
};

/* What a request does to the view, worked out by storage_view_plan() before anything moves. */
struct storage_view_plan {
    uint64_t truncate_from; /* entries >= this go first (explicit or implied); 0: none */
    bool keep;              /* an install keeps the entries after its index */
    uint64_t bytes;         /* entry payload bytes */
    size_t term_changes;    /* term changes inside the entries (runs to reserve) */
    uint64_t last_index;    /* the end of the log once the request is written */
    uint64_t last_term;
};

/*
 * A view with the log base (snapshot index and term; 0, 0 without one) and the recovered
 * entries after it. 0, or -1 when out of memory (v is then empty but still to be freed).
 */
int storage_view_init(struct storage_view *v, uint64_t base, uint64_t base_term,
                      const struct wal_entry *e, size_t n);
void storage_view_free(struct storage_view *v);
/* Term of index i: base_term at base, 0 outside base..last. */
uint64_t storage_view_term_at(const struct storage_view *v, uint64_t i);
/*
 * Check w against the view (the rules of struct storage_write in storage.h) and work out
 * its effect into *p. DISKIO_OK, or DISKIO_EINVAL with err set; the view is not changed.
 */
int storage_view_plan(const struct storage_view *v, const struct storage_write *w,
                      uint32_t max_entry_bytes, struct storage_view_plan *p,
                      struct diskio_err *err);
/* Move the view as the planned request will move the log. 0, or -1 (ENOMEM, unchanged). */
int storage_view_apply(struct storage_view *v, const struct storage_write *w,
                       const struct storage_view_plan *p);

/* ---------------------------------------------------------------- requests (storage_writer.c) */

/*
 * One queued request. Allocated in one piece by storage_writer_req_new (the struct, the
 * entry array, the entry bytes, the configuration bytes and, unless borrowed, the snapshot
 * data) and freed by whoever takes it off the last list it is on: storage_poll, the writer
 * (for unreported requests) or storage_close.
 */
struct storage_req {
    struct storage_req *next;
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
    int dirfd; /* owned */
    struct storage_options opt;
    struct diskio_sync sync;
    int efd; /* eventfd, owned: readable while done is not empty */

    struct storage_view view; /* loop thread; owned */

    pthread_mutex_t mu; /* guards everything down to fail_err */
    pthread_cond_t cond;
    struct storage_req *q_head, *q_tail; /* queued requests, owned */
    size_t queued;
    struct storage_req *d_head, *d_tail; /* completed, not yet polled, owned */
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
    struct wal_writer wal; /* owned */
    struct meta_state hs;  /* durable hard state */
};

/* A request carrying copies of what w and the plan need; DISKIO_OK or DISKIO_ENOMEM. */
int storage_writer_req_new(const struct storage_write *w, const struct storage_view_plan *p,
                           struct storage_req **out, struct diskio_err *err);
/* Release a borrowed install buffer, once (any thread that owns r). */
void storage_writer_req_release(struct storage_req *r);
/* Append r to the queue and wake the writer (loop thread). */
void storage_writer_enqueue(struct storage *st, struct storage_req *r);
/* DISKIO_OK, or DISKIO_EFAILED with err saying why the storage stopped. */
int storage_writer_check_failed(struct storage *st, struct diskio_err *err);
/* Take up to max completions (see storage_poll). */
size_t storage_writer_poll(struct storage *st, struct storage_done *out, size_t max);
/* Start and stop the writer thread; stop lets it finish every queued request first. */
int storage_writer_start(struct storage *st, struct diskio_err *err);
void storage_writer_stop(struct storage *st);
/* Free what is left on the queue and the completion list (after stop). */
void storage_writer_drain(struct storage *st);

/* ---------------------------------------------------------------- storage.c, for the writer */

/* A snapshot (index) became durable: apply retention and remember it (any thread). */
int storage_snapshots_durable(struct storage *st, uint64_t index, struct diskio_err *err);
/* How far compaction may go: the older of the two newest durable snapshots. */
uint64_t storage_snapshots_limit(struct storage *st);

/* ---------------------------------------------------------------- recovery (storage_recover.c) */

/*
 * Steps 1 to 4 of storage_open (storage.h): remove leftovers, load the hard state, recover
 * the log into *wr, choose the snapshot, settle which entries are visible, repair (torn
 * tail, damaged snapshot, reset record) and open st->wal. On success rec holds the hard
 * state, snapshot and entries (pointing into wr->mem, which the caller moves into rec) and
 * st->hs, st->snaps are set. On failure nothing but temporary files changed on disk.
 */
int storage_recover_run(struct storage *st, struct storage_recovered *rec, struct wal_recovery *wr,
                        struct diskio_err *err);
/* The fallback rule of storage_fallback_check (storage.h). */
void storage_recover_fallback(uint64_t older_index, uint64_t older_term, uint64_t newest_index,
                              uint64_t newest_term, const struct wal_entry *log, size_t n,
                              struct storage_fallback *out);

#endif
