/*
 * wal.h - the Raft log on disk: segment files of checksummed, 8-byte-aligned frames.
 *
 * Guarantees (the format itself is described in one block at the top of wal.c and in
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
 * The codec and replay functions are pure and reentrant.
 */
#ifndef SPUR_WAL_H
#define SPUR_WAL_H

#include "diskio.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WAL_SEG_HEADER_SIZE   64
#define WAL_FRAME_HEADER      32
#define WAL_NAME_MAX          64
#define WAL_MIN_SEGMENT_BYTES (1u << 16)

/* One log entry. As returned by recovery, data points into the recovery arena. */
struct wal_entry {
    uint64_t index;
    uint64_t term;
    const uint8_t *data; /* NULL when len is 0 */
    uint32_t len;
    uint8_t type; /* opaque to the storage: the Raft core's entry type */
};

/* ---------------------------------------------------------------- codec */

enum wal_kind {
    WAL_KIND_BATCH = 1,    /* batch header: seq, body length, frame count */
    WAL_KIND_ENTRY = 2,    /* one log entry */
    WAL_KIND_TRUNCATE = 3, /* drop every entry with index >= index */
    WAL_KIND_RESET = 4,    /* a snapshot (index, term) was installed: drop entries <= index */
};

/* A record decoded from a frame (batch headers are not records). */
struct wal_record {
    uint8_t kind;  /* WAL_KIND_ENTRY, _TRUNCATE or _RESET */
    uint8_t etype; /* entry type (ENTRY only) */
    uint64_t index;
    uint64_t term; /* ENTRY and RESET */
    const uint8_t *data;
    uint32_t len;
};

/* Bytes one entry frame takes: header plus the payload padded to 8. */
static inline size_t wal_entry_frame_size(uint32_t len)
{
    return WAL_FRAME_HEADER + (((size_t)len + 7) & ~(size_t)7);
}

/*
 * A batch being built: frames are appended to buf behind a reserved header, each with its
 * checksum; wal_batch_seal() fills in the header. buf is owned by the batch.
 */
struct wal_batch {
    uint8_t *buf;
    size_t len; /* bytes used, header included (0 when empty) */
    size_t cap;
    uint32_t count; /* frames after the header */
    uint32_t salt;  /* checksum seed of the segment the batch is for */
};

void wal_batch_init(struct wal_batch *b);
void wal_batch_free(struct wal_batch *b);
/* Empty the batch for a segment with this salt (keeps the buffer). */
void wal_batch_begin(struct wal_batch *b, uint32_t salt);
/* Append a frame; 0, or -1 when the buffer cannot grow (ENOMEM). */
int wal_batch_add_entry(struct wal_batch *b, uint64_t index, uint64_t term, uint8_t type,
                        const void *data, uint32_t len);
int wal_batch_add_truncate(struct wal_batch *b, uint64_t index);
int wal_batch_add_reset(struct wal_batch *b, uint64_t index, uint64_t term);
/* Fill in the header with the batch sequence number; the batch is then b->buf[0..len). */
void wal_batch_seal(struct wal_batch *b, uint64_t seq);

enum wal_check {
    WAL_CHECK_OK = 0,  /* a whole valid batch */
    WAL_CHECK_END = 1, /* 32 zero bytes (or zero bytes up to the end): no batch here */
    WAL_CHECK_BAD = 2, /* not a complete valid batch; why and bad_off say where and what */
};

struct wal_batch_info {
    uint64_t seq;
    uint32_t count;
    size_t size; /* header + body */
};

/*
 * Check the batch at p[0..avail) of a segment with this salt: header checksum, lengths,
 * every frame's checksum. On WAL_CHECK_BAD, *why is a static string and *bad_off the offset
 * (from p) of the first bad byte range.
 */
int wal_batch_check(const uint8_t *p, size_t avail, uint32_t salt, struct wal_batch_info *bi,
                    const char **why, size_t *bad_off);
/*
 * Decode the frame at p + pos of a batch that passed wal_batch_check (pos starts at
 * WAL_FRAME_HEADER); returns the position of the next frame.
 */
size_t wal_batch_record(const uint8_t *p, size_t pos, struct wal_record *rec);
/*
 * The offset of the first valid batch header at an 8-aligned offset in [from, len) of a
 * segment image, or SIZE_MAX. Used to tell a torn tail from damage in the middle.
 */
size_t wal_find_batch(const uint8_t *img, size_t from, size_t len, uint32_t salt);

/* Segment header: the first 64 bytes of every segment file. */
struct wal_seg_header {
    uint64_t seq;         /* equals the number in the file name */
    uint32_t salt;        /* random seed of every checksum in the segment */
    uint64_t first_batch; /* sequence number its first batch has (or will have) */
    uint64_t capacity;    /* bytes preallocated at creation */
    uint64_t created_ms;  /* wall clock, informational */
};

void wal_seg_header_encode(const struct wal_seg_header *h, uint8_t out[WAL_SEG_HEADER_SIZE]);
/* 0, or -1 with *why and *at set. */
int wal_seg_header_decode(const uint8_t *buf, struct wal_seg_header *h, const char **why,
                          size_t *at);
/* "wal-<seq as 16 hex>.log" */
void wal_seg_name(char out[WAL_NAME_MAX], uint64_t seq);
int wal_seg_parse_name(const char *name, uint64_t *seq);

/* ---------------------------------------------------------------- replay */

/*
 * The log rebuilt from records, in order. Live entries are v[start..n), indexes
 * contiguous, terms non-decreasing. v is an array with room for cap entries that the
 * caller provides and owns.
 *
 * Rules (anything else is an error: the records cannot have come from a correct writer):
 *   ENTRY i, t:    i must equal `next` (when known) and t must not be below `last_term`;
 *                  appended; next = i + 1.
 *   TRUNCATE i:    i >= 1 and i <= next (when known); entries >= i dropped; next = i.
 *   RESET s, t:    entries <= s dropped; if the remaining entries do not start at s + 1,
 *                  all are dropped; next = max(next, s + 1) and last_term = t when empty.
 */
struct wal_replay {
    struct wal_entry *v;
    size_t cap;
    size_t start;
    size_t n;
    uint64_t next;      /* expected next index; 0 before the first record */
    uint64_t last_term; /* term of the last entry or reset; 0 unknown */
};

void wal_replay_init(struct wal_replay *r, struct wal_entry *v, size_t cap);
/* 0, or -1 with *why (static string) when the record breaks the rules or cap is reached. */
int wal_replay_apply(struct wal_replay *r, const struct wal_record *rec, const char **why);

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
