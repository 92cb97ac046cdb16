/*
 * wal.h - the Raft log on disk: segment files of checksummed, 8-byte-aligned frames.
 *
 * Guarantees (the format itself is described in one block at the top of wal_codec.c and in
 * docs/storage-format.md):
 *   - Append-only. A byte of a segment, once written, is never rewritten while the log
 *     runs; removing entries (a conflicting suffix, a snapshot install) is itself a record
 *     appended to the log, and replay applies it. So a crash can only ever damage the batch
 *     being written when it happened.
 *   - Batches are all or nothing. Records go to disk in batches (one per group commit); a
 *     batch whose header or any frame fails its checksum is ignored as a whole, never
 *     applied in part.
 *   - Recovery (wal_recover) tells apart the two ways a log can be damaged. A torn tail -
 *     the last segment ends in bytes that are not a complete, checksummed batch and no valid
 *     batch follows them - is what a crash during a write leaves; it is reported in
 *     wal_recovery.torn and removed by wal_truncate_torn(). Anything else (a bad batch
 *     followed by a good one, a bad batch in an older segment, a missing segment, a bad
 *     segment header, records that do not follow each other) is DISKIO_ECORRUPT with the
 *     file and byte offset in the message, and recovery changes nothing on disk.
 *   - Recovery is one sequential pass with a fixed number of allocations: every segment is
 *     read into one anonymous mapping (the arena), entries point into it, and the entry
 *     array is a second mapping sized for the worst case but only touched as used.
 *
 * Threads: recovery runs before the writer exists; afterwards one thread (the storage
 * writer thread) owns the struct wal_writer and is the only one touching segment files.
 *
 * Layout: this module is the I/O; the bytes are encoded and decoded by wal_codec.h (pure,
 * reentrant) and the records turned back into a log by wal_replay.h (pure). Both headers
 * come with this one.
 */
#ifndef SPUR_WAL_H
#define SPUR_WAL_H

#include "diskio.h"
#include "wal_codec.h"
#include "wal_replay.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WAL_NAME_MAX          64
#define WAL_MIN_SEGMENT_BYTES (1u << 16)

/* ---------------------------------------------------------------- names */

/* "wal-<seq as 16 hex>.log" */
void wal_seg_name(char out[WAL_NAME_MAX], uint64_t seq);
int wal_seg_parse_name(const char *name, uint64_t *seq);

/* ---------------------------------------------------------------- recovery */

/* One live segment file. */
struct wal_segment {
    uint64_t seq;
    uint32_t salt;
    uint64_t first_batch;
    uint64_t next_batch; /* after its last valid batch */
    uint64_t end;        /* offset after its last valid batch */
    uint64_t size;       /* file size */
    uint64_t capacity;   /* size the header asked for at creation */
    uint64_t high;       /* highest index any of its records names; 0 when none */
};

/* Memory of a recovered log: two private anonymous mappings, released by wal_mem_free(). */
struct wal_mem {
    void *arena;
    size_t arena_len;
    void *vmap;
    size_t vmap_len;
};
void wal_mem_free(struct wal_mem *m);

struct wal_recovery {
    struct wal_segment *segs; /* oldest first; malloc'ed, owned */
    size_t n_segs;
    uint64_t next_batch;      /* sequence number for the next batch */
    struct wal_replay replay; /* the rebuilt log; entries point into mem.arena */
    struct wal_mem mem;       /* owned; may be moved out (then zeroed) */
    bool torn;                /* the last segment has a torn tail ... */
    uint64_t torn_off;        /* ... starting here (== segs[n_segs-1].end) */
    uint64_t torn_bytes;      /* bytes from torn_off to the end of the file */
    const char *torn_why;
    uint64_t bytes_read;
};

/*
 * Read and check every segment in the directory and replay them. Changes nothing on disk.
 * Returns DISKIO_OK, DISKIO_ECORRUPT, DISKIO_EIO or DISKIO_ENOMEM; on error *out is empty.
 */
int wal_recover(int dirfd, const char *dirpath, struct wal_recovery *out, struct diskio_err *err);
void wal_recovery_free(struct wal_recovery *r);
/* Delete leftover wal-*.log.tmp files (start-up only). */
int wal_remove_tmp(int dirfd, const char *dirpath, struct diskio_err *err);

/* ---------------------------------------------------------------- writer */

struct wal_writer {
    int dirfd;           /* borrowed */
    const char *dirpath; /* borrowed */
    struct diskio_sync sync;
    uint64_t seg_bytes;       /* capacity of new segments */
    struct wal_segment *segs; /* live segments, oldest first; the last is active; owned */
    size_t n_segs, segs_cap;
    int fd;     /* active segment; owned */
    bool dirty; /* written since the last sync */
    uint64_t next_batch;
    struct wal_batch batch;
    /* counters, read by the owner thread */
    uint64_t bytes_written;
    uint64_t batches_written;
    uint64_t segments_created;
    uint64_t segments_deleted;
};

/*
 * Take over the recovered segments: repair a torn tail (truncate it, preallocate again,
 * sync), continue in the last segment, or create the first one. seg_bytes is the size of
 * new segments (at least WAL_MIN_SEGMENT_BYTES and room for the largest frame).
 */
int wal_writer_open(struct wal_writer *w, int dirfd, const char *dirpath,
                    const struct wal_recovery *rec, uint64_t seg_bytes,
                    const struct diskio_sync *sync, struct diskio_err *err);
void wal_writer_close(struct wal_writer *w);
/*
 * Queue a record into the current batch. When the active segment cannot hold it, the
 * batch so far is written, the segment synced, and a new segment started. A frame larger
 * than a whole segment is DISKIO_EINVAL.
 */
int wal_writer_entry(struct wal_writer *w, const struct wal_entry *e, struct diskio_err *err);
int wal_writer_truncate(struct wal_writer *w, uint64_t index, struct diskio_err *err);
int wal_writer_reset(struct wal_writer *w, uint64_t index, uint64_t term, struct diskio_err *err);
/* Write the pending batch (if any) to the active segment, without syncing. */
int wal_writer_flush(struct wal_writer *w, struct diskio_err *err);
/* fdatasync the active segment when something was written since the last sync. */
int wal_writer_sync(struct wal_writer *w, struct diskio_err *err);
/*
 * Delete the oldest segments while every record in them names an index <= upto; never the
 * active one. Returns the number deleted (>= 0) or a negative diskio_rc.
 */
int wal_writer_compact(struct wal_writer *w, uint64_t upto, struct diskio_err *err);

#endif
