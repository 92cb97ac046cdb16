/*
 * wal_codec.h - the log's bytes in memory: frames, batches, segment headers, and the scan
 * of a segment image that finds where its log ends and why.
 *
 * The format itself is described in one block at the top of wal_codec.c (and in
 * docs/storage-format.md, which is the contract).
 *
 * Guarantees:
 *   - Pure. Every function works on memory buffers given by the caller: no file
 *     descriptor, no clock, no randomness (the salt is the caller's), no global state. So
 *     the same bytes always decode the same way, and the codec is unit-tested and fuzzed
 *     on its own (tests/unit/test_wal_codec.c, tests/fuzz/fuzz_wal.c).
 *   - A decoder never reads outside [p, p + avail) and never trusts a length before it
 *     checked it against what is there.
 *   - Batches are all or nothing: wal_codec_batch_check() accepts a batch only when its
 *     header and every frame pass their checksums and lengths, and wal_codec_scan() hands
 *     out the records of a batch only after the whole batch was accepted.
 *
 * Prefix: the functions are wal_codec_*. The types and constants keep the wal_ / WAL_
 * names of the log format itself (struct wal_entry is the log entry the whole worker
 * passes around; wal.h and storage.h re-export this header).
 */
#ifndef SPUR_WAL_CODEC_H
#define SPUR_WAL_CODEC_H

#include "buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WAL_SEG_HEADER_SIZE 64
#define WAL_FRAME_HEADER    32

/* One log entry. As returned by recovery, data points into the recovery arena. */
struct wal_entry {
    uint64_t index;
    uint64_t term;
    const uint8_t *data; /* NULL when len is 0 */
    uint32_t len;
    uint8_t type; /* opaque to the storage: the Raft core's entry type */
};

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

/* Bytes one record frame takes: header plus the payload padded to 8. */
static inline size_t wal_codec_frame_size(uint32_t len)
{
    return WAL_FRAME_HEADER + (((size_t)len + 7) & ~(size_t)7);
}

/* ---------------------------------------------------------------- encode */

/*
 * A batch being built: frames are appended to buf behind a reserved header, each with its
 * checksum; wal_codec_batch_seal() fills in the header. Then the batch is the bytes
 * buf.p[0..buf.len) (0 when empty). buf is owned by the batch (common/buf; after an
 * allocation failure it refuses appends until the next wal_codec_batch_begin()).
 */
struct wal_batch {
    struct buf buf;
    uint32_t count; /* frames after the header */
    uint32_t salt;  /* checksum seed of the segment the batch is for */
};

void wal_codec_batch_init(struct wal_batch *b);
void wal_codec_batch_free(struct wal_batch *b);
/* Empty the batch for a segment with this salt (keeps the buffer). */
void wal_codec_batch_begin(struct wal_batch *b, uint32_t salt);
/* Append a frame; 0, or -1 when the buffer cannot grow (errno ENOMEM). */
int wal_codec_batch_add_entry(struct wal_batch *b, uint64_t index, uint64_t term, uint8_t type,
                              const void *data, uint32_t len);
int wal_codec_batch_add_truncate(struct wal_batch *b, uint64_t index);
int wal_codec_batch_add_reset(struct wal_batch *b, uint64_t index, uint64_t term);
/* Fill in the header with the batch sequence number (the batch must hold a frame). */
void wal_codec_batch_seal(struct wal_batch *b, uint64_t seq);

/* ---------------------------------------------------------------- decode */

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
int wal_codec_batch_check(const uint8_t *p, size_t avail, uint32_t salt, struct wal_batch_info *bi,
                          const char **why, size_t *bad_off);
/*
 * Decode the frame at p + pos of a batch that passed wal_codec_batch_check (pos starts at
 * WAL_FRAME_HEADER); returns the position of the next frame.
 */
size_t wal_codec_batch_record(const uint8_t *p, size_t pos, struct wal_record *rec);
/*
 * The offset of the first valid batch header at an 8-aligned offset in [from, len) of a
 * segment image, or SIZE_MAX. Used to tell a torn tail from damage in the middle.
 */
size_t wal_codec_find_batch(const uint8_t *img, size_t from, size_t len, uint32_t salt);
/* True when p[0..n) are all zero bytes (the preallocated, never written space). */
bool wal_codec_all_zero(const uint8_t *p, size_t n);

/* ---------------------------------------------------------------- segment header */

/* Segment header: the first 64 bytes of every segment file. */
struct wal_seg_header {
    uint64_t seq;         /* equals the number in the file name */
    uint32_t salt;        /* random seed of every checksum in the segment */
    uint64_t first_batch; /* sequence number its first batch has (or will have) */
    uint64_t capacity;    /* bytes preallocated at creation */
    uint64_t created_ms;  /* wall clock, informational */
};

void wal_codec_seg_header_encode(const struct wal_seg_header *h, uint8_t out[WAL_SEG_HEADER_SIZE]);
/* 0, or -1 with *why (static) and *at (offset of the bad field) set. */
int wal_codec_seg_header_decode(const uint8_t *buf, struct wal_seg_header *h, const char **why,
                                size_t *at);

/* ---------------------------------------------------------------- scan */

/* Where and why a scan stopped. */
enum wal_codec_stop {
    WAL_CODEC_CLEAN = 0,   /* the log ends at `end`: only zeros follow, or the image ends */
    WAL_CODEC_TORN = 1,    /* bytes from `end` on are not a valid batch and no valid batch
                            * header follows anywhere: a torn tail if this is the last segment */
    WAL_CODEC_CORRUPT = 2, /* damage followed by a valid batch, a batch out of sequence, or a
                            * record the caller refused */
};

/*
 * Called with each record of each valid batch, in order. Return 0, or -1 with *why set to
 * a static string to stop the scan as WAL_CODEC_CORRUPT at that record.
 */
typedef int (*wal_codec_record_fn)(void *arg, const struct wal_record *rec, const char **why);

struct wal_codec_scan {
    int stop;            /* enum wal_codec_stop */
    size_t end;          /* offset after the last valid batch */
    uint64_t next_batch; /* sequence number the next batch must carry */
    uint64_t batches;    /* valid batches seen */
    size_t bad;          /* TORN, CORRUPT: offset of the first bad byte */
    size_t torn_bytes;   /* TORN: bytes from end up to the last non-zero byte */
    const char *why;     /* TORN, CORRUPT: static reason, without numbers */
    char msg[192];       /* CORRUPT: the reason with its numbers (offsets into img) */
};

/*
 * Scan the batches of the segment image img[0..len) from offset `from` (after the segment
 * header, 8-aligned, at most len) with the segment's salt; the first batch must carry
 * sequence number first_batch and each one the next. Records of valid batches go to fn
 * (may be NULL). Offsets in *out are offsets into img.
 */
void wal_codec_scan(const uint8_t *img, size_t from, size_t len, uint32_t salt,
                    uint64_t first_batch, wal_codec_record_fn fn, void *arg,
                    struct wal_codec_scan *out);

#endif
