/*
 * storage.h - the worker's durable Raft storage: hard state, log, snapshots.
 *
 * This is the only header the Raft shell needs. The on-disk format is in wal_codec.c, meta.c
 * and snapfile.c (one comment block each) and in docs/storage-format.md. The module's files
 * and how they fit are described in storage_int.h.
 *
 * GUARANTEES
 *
 *   - Write order is submit order. Requests are written strictly in the order
 *     storage_submit() accepted them, and completions come back in that order. A
 *     completion means every byte of that request - and of every request before it - is
 *     durable (fdatasync'ed; directory fsync'ed where files were created, renamed or
 *     removed). With options.fsync false the order is the same and nothing is synced.
 *   - Within a group commit the hard state is made durable first (its own atomic file
 *     replace, see meta.h), then the log records, then ONE fdatasync of the log covers the
 *     whole group (two when the group crosses into a new segment). So a message that may
 *     only go out "after persist" may go out when its request's completion is polled.
 *   - The event-loop thread never waits for a disk: storage_submit() copies and queues,
 *     storage_poll() takes finished work from a list; all file I/O after storage_open()
 *     runs on the storage's writer thread (except the blocking snapshot calls below, which
 *     run on the caller's thread and say so).
 *   - Nothing durable is lost by a crash, and nothing damaged is used: storage_open()
 *     repairs a torn tail (the batch a crash interrupted, which no completion ever
 *     reported) with a warning, and refuses anything else that fails a checksum with
 *     DISKIO_ECORRUPT, naming the file and byte offset. The caller exits 65 then.
 *   - After a write or sync error the storage stops for good: that request and all later
 *     ones complete with an error, storage_submit() returns DISKIO_EFAILED. After a failed
 *     fsync the page cache cannot be trusted, so the only safe continuation is a restart,
 *     which recovers from what is on disk. The caller should exit (70).
 *
 * THREADS
 *
 *   Loop thread (one thread, the one that called storage_open): storage_submit,
 *   storage_compact, storage_poll, storage_event_fd, storage_close.
 *   Any thread: storage_metrics_get, storage_failed, the storage_snapshot_* calls and
 *   storage_snapshot_read (blocking I/O on the calling thread; one snapshot writer per
 *   thread at a time; several may run concurrently with each other and with the writer).
 *   Writer thread (internal): the only thread that touches the segment files and the meta
 *   file after storage_open() returns.
 *
 * OWNERSHIP
 *
 *   - storage_submit() copies everything it needs (entries, their data, hard state,
 *     configuration bytes) before it returns, except the data of an installed snapshot when
 *     install.release is set: then that buffer is borrowed until release(release_arg) is
 *     called, once, on the writer thread (or in storage_close()), after the snapshot file is
 *     written or the request failed.
 *   - struct storage_recovered owns the recovered entries (they point into one private
 *     arena) and the snapshot's configuration bytes, until storage_recovered_free(); it does
 *     not depend on the struct storage and may be freed before or after storage_close().
 *   - struct storage is owned by the caller of storage_open() until storage_close().
 *
 * ERRORS
 *
 *   Every call that can fail takes a struct diskio_err (diskio.h): rc is one of
 *   DISKIO_EIO (system call failed: the message has strerror), DISKIO_ECORRUPT (damaged
 *   state on disk: exit 65, see docs/storage-format.md for what the operator can do),
 *   DISKIO_EINVAL (the caller broke this contract), DISKIO_ENOMEM, DISKIO_EFAILED (stopped
 *   after an earlier write error); msg reads "storage: what failed: why".
 */
#ifndef SPUR_STORAGE_H
#define SPUR_STORAGE_H

#include "diskio.h"
#include "snapfile.h"
#include "wal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct storage;

/* ---------------------------------------------------------------- options */

struct storage_options {
    bool fsync;               /* raft.fsync; default true. false: same writes, no syncs */
    uint64_t segment_bytes;   /* preallocated size of a log segment; default 64 MiB */
    uint32_t max_entry_bytes; /* largest entry payload accepted; default 4 MiB + 64 KiB */
    uint64_t max_group_bytes; /* entry bytes the writer takes per group commit; default 8 MiB */
};

/* Fill o with the defaults above. */
void storage_options_default(struct storage_options *o);

/* ---------------------------------------------------------------- open and recover */

struct storage_snapshot_info {
    uint64_t index;
    uint64_t term;
    uint8_t *config; /* configuration bytes as given to the save; malloc'ed, owned by
                      * the struct storage_recovered; NULL when config_len is 0 */
    uint32_t config_len;
    uint64_t data_len;            /* read the data with storage_snapshot_read() */
    char name[SNAPFILE_NAME_MAX]; /* file name inside the state directory */
};

/*
 * What was durable. entries are the log after the snapshot: indexes snapshot.index + 1
 * onward (1 onward without a snapshot), contiguous, terms non-decreasing. last_index and
 * last_term describe the end of the log (the snapshot's when there are no entries).
 */
struct storage_recovered {
    uint64_t term;
    uint64_t vote;
    bool has_snapshot;
    struct storage_snapshot_info snapshot;
    const struct wal_entry *entries; /* data points into the private arena below */
    size_t n_entries;
    uint64_t last_index;
    uint64_t last_term;
    /* private: the arena and entry array (see wal.h), freed by storage_recovered_free() */
    struct wal_mem mem;
};

/*
 * Open the state directory dir (created and locked by the caller, see raftd/statedir.h),
 * recover everything and start the writer thread.
 *
 * Recovery: removes leftover temporary files; loads the hard state; reads every log
 * segment; picks the newest snapshot whose checksums pass. When the newest snapshot fails
 * its checksum, the next older one is used instead only if the log still holds every entry
 * between the two (storage_fallback_check below) and the damaged file is renamed
 * *.corrupt, with an error-level log line; otherwise open fails with DISKIO_ECORRUPT and a
 * message that names the damaged file, the entries the fallback lacks, and what the
 * operator can do. A torn log tail is truncated with a warning.
 *
 * On success *out is the storage, *rec what was recovered (free it with
 * storage_recovered_free). On failure nothing was changed on disk beyond removing
 * temporary files, and err says why: DISKIO_ECORRUPT (exit 65), otherwise an I/O,
 * memory or option problem (the worker should exit 71).
 */
int storage_open(const char *dir, const struct storage_options *opts, struct storage **out,
                 struct storage_recovered *rec, struct diskio_err *err);
void storage_recovered_free(struct storage_recovered *rec);

/*
 * The fallback rule for a damaged newest snapshot, as storage_open applies it (pure, so a
 * test can call it). The newest snapshot (newest_index, newest_term) failed its checksum;
 * the one before it is (older_index, older_term); log[0..n) are the live log entries
 * (contiguous indexes, as recovered). The older snapshot may stand in only when
 *   - the log holds every entry older_index + 1 .. newest_index, so replaying it on the
 *     older snapshot rebuilds the state the damaged one held, and
 *   - the log has newest_term at newest_index and, if it holds older_index, older_term
 *     there: the log, the older and the damaged snapshot belong to one history.
 * Snapshots this replica took keep that true: compaction never deletes log entries after
 * the older of the two newest snapshots (storage_compact). It stops being true when a
 * snapshot installed from the leader replaced the log, or when the log lost its tail (a
 * torn-tail repair, damage). Then the replica cannot rebuild what it acknowledged, and
 * storage_open refuses (DISKIO_ECORRUPT, exit 65) saying which entries are missing.
 */
struct storage_fallback {
    bool ok;
    uint64_t need_first, need_last; /* the entries a fallback needs: older + 1 .. newest */
    uint64_t have_first, have_last; /* what the log holds; both 0 when it holds nothing */
    size_t n_missing;               /* missing ranges (0 to 2), lowest first */
    uint64_t missing[2][2];         /* [k][0] .. [k][1], inclusive */
    bool newest_term_differs;       /* the log holds newest_index, with another term ... */
    bool older_term_differs;        /* ... or holds older_index with another term */
    uint64_t log_term;              /* the log's term at the index that differs */
};

void storage_fallback_check(uint64_t older_index, uint64_t older_term, uint64_t newest_index,
                            uint64_t newest_term, const struct wal_entry *log, size_t n,
                            struct storage_fallback *out);

/*
 * Read the recovered snapshot's data (exactly info->data_len bytes) into dst, verifying its
 * checksum again. Blocking; any thread. The file stays until two newer snapshots have been
 * saved or installed.
 */
int storage_snapshot_read(struct storage *st, const struct storage_snapshot_info *info, void *dst,
                          uint64_t len, struct diskio_err *err);

/* ---------------------------------------------------------------- the write path */

/* A snapshot received from the leader, to install in log order. */
struct storage_install {
    uint64_t index;
    uint64_t term;
    const void *config; /* copied */
    uint32_t config_len;
    const void *data; /* copied, unless release is set (then borrowed, see OWNERSHIP) */
    uint64_t data_len;
    void (*release)(void *arg);
    void *release_arg;
};

/*
 * One persist request, as one Raft step produces it. Applied in this order:
 *   1. hard state (term, vote), when has_hard_state;
 *   2. install: write the snapshot file (tmp, fdatasync, rename, fsync dir; the last two
 *      snapshots are kept), then record in the log that every entry <= install->index is
 *      gone. Entries after it are kept when the log holds install->index with
 *      install->term, and discarded otherwise (Raft's InstallSnapshot rule). A caller
 *      that wants the log empty after the install (raft.h: "drop every stored log
 *      entry") also sets truncate_from = install->index + 1;
 *   3. truncate: every entry with index >= truncate_from is removed (0: none);
 *   4. entries[0..n_entries): contiguous indexes, non-decreasing terms. When entries[0]
 *      is at or below the last index, the entries from there on are removed first (an
 *      implicit truncate), so a follower can pass what the core gives it unchanged.
 * Validation happens here, before anything is queued: an index gap, an index at or below
 * the snapshot base, a term going backwards, an entry over max_entry_bytes, or a hard
 * state that lowers the term or changes a vote already cast in the same term is
 * DISKIO_EINVAL and nothing is queued.
 */
struct storage_write {
    bool has_hard_state;
    uint64_t term;
    uint64_t vote;
    const struct storage_install *install; /* NULL: none */
    uint64_t truncate_from;
    const struct wal_entry *entries; /* data copied */
    size_t n_entries;
    void *cookie; /* returned in the completion, never dereferenced */
};

/*
 * Queue a request (loop thread). Returns DISKIO_OK, or DISKIO_EINVAL / DISKIO_ENOMEM /
 * DISKIO_EFAILED with nothing queued.
 */
int storage_submit(struct storage *st, const struct storage_write *w, struct diskio_err *err);

/* Shorthand: a request with only install (and cookie) set. */
int storage_snapshot_install(struct storage *st, const struct storage_install *in, void *cookie,
                             struct diskio_err *err);

/* A finished request. */
struct storage_done {
    void *cookie;
    int status;          /* DISKIO_OK, or the error that stopped the storage */
    uint64_t last_index; /* end of the log once this request is durable (0: empty) */
    uint64_t last_term;
};

/*
 * Readable (level-triggered: an eventfd) while completions wait. Watch it with libevent
 * (EV_READ | EV_PERSIST) and call storage_poll() when it fires.
 */
int storage_event_fd(const struct storage *st);

/*
 * Take up to max completions, oldest first (loop thread). Returns how many. The fd stays
 * readable while more remain, so calling again on the next event (or in a loop until it
 * returns less than max) loses nothing.
 */
size_t storage_poll(struct storage *st, struct storage_done *out, size_t max);

/*
 * Queue the compaction "nothing at or below index is needed any more" (loop thread; in
 * order with the writes; no completion is reported for it). The writer deletes the oldest
 * segment files whose every record is at or below
 *     min(index, the older of the two newest durable snapshots' indexes)
 * (the newest alone when only one exists; nothing without a snapshot): so a snapshot always
 * covers what is deleted, and one older snapshot plus the log after it stays available
 * should the newest snapshot be damaged. Entries at or below the snapshot index that still
 * sit in a kept segment are hidden at recovery.
 */
int storage_compact(struct storage *st, uint64_t index, struct diskio_err *err);

/* ---------------------------------------------------------------- local snapshots */

/*
 * Save a snapshot the state machine took at (index, term): blocking I/O on the calling
 * thread (run it on a helper thread to keep the loop free). Streaming:
 * storage_snapshot_begin, any number of storage_snapshot_write, then commit (durable:
 * fdatasync, rename, fsync dir; older snapshots beyond the newest two deleted) or abort.
 * config bytes are copied at begin. storage_snapshot_save does all three at once.
 * Only after commit returned may the caller compact up to index.
 */
struct storage_snapshot;
int storage_snapshot_begin(struct storage *st, uint64_t index, uint64_t term, const void *config,
                           uint32_t config_len, struct storage_snapshot **out,
                           struct diskio_err *err);
int storage_snapshot_write(struct storage_snapshot *s, const void *buf, size_t len,
                           struct diskio_err *err);
/* Frees s whatever the outcome. */
int storage_snapshot_commit(struct storage_snapshot *s, struct diskio_err *err);
void storage_snapshot_abort(struct storage_snapshot *s); /* NULL-safe; frees s */
int storage_snapshot_save(struct storage *st, uint64_t index, uint64_t term, const void *config,
                          uint32_t config_len, const void *data, uint64_t data_len,
                          struct diskio_err *err);

/* ---------------------------------------------------------------- metrics and state */

#define STORAGE_FSYNC_BUCKETS 16
/*
 * Upper bounds (nanoseconds) of the fsync latency buckets; bucket i counts syncs that took
 * more than bound[i-1] and at most bound[i]; the last bucket (i = STORAGE_FSYNC_BUCKETS-1)
 * is +Inf. Counts are per bucket, not cumulative: a Prometheus exporter sums them up.
 */
extern const uint64_t storage_fsync_bucket_ns[STORAGE_FSYNC_BUCKETS - 1];

/* A consistent copy of the counters; all only grow except segments and queued. */
struct storage_metrics {
    uint64_t fsync_count; /* every fsync/fdatasync: log, meta, snapshots, directories */
    uint64_t fsync_sum_ns;
    uint64_t fsync_bucket[STORAGE_FSYNC_BUCKETS];
    uint64_t group_commits; /* groups written by the writer thread */
    uint64_t requests_completed;
    uint64_t entries_written;
    uint64_t bytes_written; /* log bytes, frame headers included */
    uint64_t hard_states_written;
    uint64_t snapshots_written; /* local saves and installs */
    uint64_t segments;          /* live segment files */
    uint64_t segments_created;
    uint64_t segments_deleted;
    uint64_t last_index; /* last index durable (after the last completed request) */
    uint64_t last_term;
    uint64_t queued; /* requests waiting for the writer */
    uint64_t failed; /* 1 once the storage stopped after an error */
};

void storage_metrics_get(struct storage *st, struct storage_metrics *out);

/* 0 while healthy; otherwise the error that stopped the storage (copied into err). */
int storage_failed(struct storage *st, struct diskio_err *err);

/*
 * Stop (loop thread): the writer finishes every queued request, then exits. Completions not
 * yet polled are dropped; borrowed install buffers are released. NULL-safe.
 */
void storage_close(struct storage *st);

#endif
