/*
 * wal_codec.c - the log's bytes: frames, batches, segment headers, and the scan that finds
 * where a segment's log ends; pure (see wal_codec.h). wal.c does the files around it.
 *
 * ON-DISK FORMAT (version 1). All integers little-endian.
 *
 * Files. The log is a sequence of segment files state_dir/wal-<seq>.log, seq 16 lower-case
 * hex digits, consecutive (1, 2, 3, ...; compaction removes the oldest, so the first may be
 * higher than 1, but there is never a hole). A segment is created as wal-<seq>.log.tmp,
 * preallocated to its capacity (64 MiB by default) so appends do not change its size, given
 * its header, fsync'ed, renamed, and the directory fsync'ed; a *.tmp file is never part of
 * the log and is deleted at start-up.
 *
 * Segment header, bytes 0..63:
 *
 *     0  8 magic "SPURWAL\0"         32  8 capacity (informational)
 *     8  4 version, 1                40  8 creation time, ms since the epoch (informational)
 *    12  4 salt (random)             48 12 reserved, zero
 *    16  8 seq, as in the file name  60  4 CRC-32C of bytes 0..59
 *    24  8 sequence number of the first batch in this segment
 *
 * Frames. After the header the segment holds batches, back to back from offset 64, then
 * zeros (the preallocated space). Every frame starts at an offset that is a multiple of 8
 * and has a 32-byte header:
 *
 *     0  4 CRC-32C, seeded with the segment's salt, of bytes 4 .. end of the frame
 *          (rest of the header, payload, padding)
 *     4  1 kind: 1 batch, 2 entry, 3 truncate, 4 reset
 *     5  1 entry type (entry frames; zero otherwise)
 *     6  2 reserved, zero
 *     8  4 length: payload bytes (entry), body bytes (batch), zero otherwise
 *    12  4 frame count (batch), zero otherwise
 *    16  8 index (entry, truncate, reset) or batch sequence number (batch)
 *    24  8 term (entry, reset) or the constant "SPURBTCH" (batch)
 *
 * followed, for an entry, by its payload and zero padding to a multiple of 8. A batch is
 * a batch frame followed by `count` record frames filling exactly `length` bytes. Batch
 * sequence numbers increase by one across the whole log, segment boundaries included; the
 * segment header records the number its first batch carries.
 *
 * Records. An entry frame appends one entry, which must have the next index. A truncate
 * frame removes every entry with index >= its index (the conflicting suffix a new leader
 * overwrites). A reset frame records that a snapshot (index, term) was installed: entries
 * <= index are gone, entries after it stay only if they follow on from it. Replay applies
 * the records of every valid batch in order (rules in wal_replay.h).
 *
 * Writing. The writer thread appends one batch per group commit with one pwrite and then
 * one fdatasync, and does not start the next batch before the sync returned. When a batch
 * does not fit, the segment so far is written and synced, and the rest goes to a new one.
 * So at most the last batch of the last segment can be incomplete after a crash.
 *
 * Recovery. Each segment is read whole and checked batch by batch. The log of a segment
 * ends cleanly where a batch header would start and only zeros follow up to the end of the
 * file (the unused, preallocated space), or at the end of the file. Anything else there -
 * a batch that is not whole and valid, or a zeroed header with written bytes after it - is
 * a TORN TAIL when it is in the last segment and no valid batch header can be found
 * anywhere after it: it and everything after it is cut off (the file truncated there,
 * preallocated again) with a warning. Otherwise - a valid batch follows, or the segment is
 * not the last - it is CORRUPTION: the recovery fails naming the file and offset, and the
 * caller exits 65 without touching the files. The salt in every checksum makes sure that
 * bytes copied from elsewhere (an entry whose payload is itself a log, a file from another
 * node) can never pass for a batch.
 */
#include "wal_codec.h"

#include "crc32c.h"
#include "diskio.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define WAL_MAGIC       "SPURWAL"
#define WAL_VERSION     1
#define WAL_SEG_CRC_OFF 60
#define WAL_BATCH_MAGIC 0x4843544252555053ull /* "SPURBTCH" read as a little-endian u64 */

/* ---------------------------------------------------------------- encode */

void wal_codec_batch_init(struct wal_batch *b)
{
    memset(b, 0, sizeof(*b));
    buf_init(&b->buf);
}

void wal_codec_batch_free(struct wal_batch *b)
{
    buf_free(&b->buf);
    memset(b, 0, sizeof(*b));
}

void wal_codec_batch_begin(struct wal_batch *b, uint32_t salt)
{
    buf_reset(&b->buf);
    b->count = 0;
    b->salt = salt;
}

/* Room for `more` bytes of frames (and the batch header in front of the first one). */
static uint8_t *batch_reserve(struct wal_batch *b, size_t more)
{
    size_t hdr = b->buf.len == 0 ? WAL_FRAME_HEADER : 0;

    if (!buf_reserve(&b->buf, hdr + more)) {
        errno = ENOMEM;
        return NULL;
    }
    b->buf.len += hdr; /* room for the batch header, filled in by the seal */
    return (uint8_t *)b->buf.p + b->buf.len;
}

static void put_frame_header(uint8_t *p, uint8_t kind, uint8_t etype, uint32_t len, uint32_t count,
                             uint64_t a, uint64_t b)
{
    p[4] = kind;
    p[5] = etype;
    p[6] = 0;
    p[7] = 0;
    diskio_put_le32(p + 8, len);
    diskio_put_le32(p + 12, count);
    diskio_put_le64(p + 16, a);
    diskio_put_le64(p + 24, b);
}

static void seal_frame(uint8_t *p, size_t fsize, uint32_t salt)
{
    diskio_put_le32(p, crc32c_update(salt, p + 4, fsize - 4));
}

static int batch_add(struct wal_batch *b, uint8_t kind, uint8_t etype, uint64_t a, uint64_t t,
                     const void *data, uint32_t len)
{
    size_t fsize = wal_codec_frame_size(len);
    uint8_t *p = batch_reserve(b, fsize);

    if (p == NULL)
        return -1;
    put_frame_header(p, kind, etype, len, 0, a, t);
    if (len > 0)
        memcpy(p + WAL_FRAME_HEADER, data, len);
    memset(p + WAL_FRAME_HEADER + len, 0, fsize - WAL_FRAME_HEADER - len);
    seal_frame(p, fsize, b->salt);
    b->buf.len += fsize;
    b->count++;
    return 0;
}

int wal_codec_batch_add_entry(struct wal_batch *b, uint64_t index, uint64_t term, uint8_t type,
                              const void *data, uint32_t len)
{
    return batch_add(b, WAL_KIND_ENTRY, type, index, term, data, len);
}

int wal_codec_batch_add_truncate(struct wal_batch *b, uint64_t index)
{
    return batch_add(b, WAL_KIND_TRUNCATE, 0, index, 0, NULL, 0);
}

int wal_codec_batch_add_reset(struct wal_batch *b, uint64_t index, uint64_t term)
{
    return batch_add(b, WAL_KIND_RESET, 0, index, term, NULL, 0);
}

void wal_codec_batch_seal(struct wal_batch *b, uint64_t seq)
{
    uint8_t *p = (uint8_t *)b->buf.p;

    put_frame_header(p, WAL_KIND_BATCH, 0, (uint32_t)(b->buf.len - WAL_FRAME_HEADER), b->count, seq,
                     WAL_BATCH_MAGIC);
    seal_frame(p, WAL_FRAME_HEADER, b->salt);
}

/* ---------------------------------------------------------------- decode */

bool wal_codec_all_zero(const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, sizeof(w));
        if ((w[0] | w[1] | w[2] | w[3]) != 0)
            return false;
    }
    for (; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

static int batch_header_valid(const uint8_t *p, uint32_t salt)
{
    return p[4] == WAL_KIND_BATCH && diskio_get_le64(p + 24) == WAL_BATCH_MAGIC &&
           diskio_get_le32(p) == crc32c_update(salt, p + 4, WAL_FRAME_HEADER - 4);
}

int wal_codec_batch_check(const uint8_t *p, size_t avail, uint32_t salt, struct wal_batch_info *bi,
                          const char **why, size_t *bad_off)
{
    size_t body, pos, end;
    uint32_t count;

    memset(bi, 0, sizeof(*bi));
    *bad_off = 0;
    if (avail < WAL_FRAME_HEADER) {
        if (wal_codec_all_zero(p, avail))
            return WAL_CHECK_END;
        *why = "incomplete batch header at the end of the segment";
        return WAL_CHECK_BAD;
    }
    if (wal_codec_all_zero(p, WAL_FRAME_HEADER))
        return WAL_CHECK_END;
    if (p[4] != WAL_KIND_BATCH || diskio_get_le64(p + 24) != WAL_BATCH_MAGIC) {
        *why = "no batch header where one must start";
        return WAL_CHECK_BAD;
    }
    if (diskio_get_le32(p) != crc32c_update(salt, p + 4, WAL_FRAME_HEADER - 4)) {
        *why = "batch header checksum mismatch";
        return WAL_CHECK_BAD;
    }
    body = diskio_get_le32(p + 8);
    count = diskio_get_le32(p + 12);
    bi->seq = diskio_get_le64(p + 16);
    bi->count = count;
    bi->size = WAL_FRAME_HEADER + body;
    if (p[5] != 0 || p[6] != 0 || p[7] != 0 || body % 8 != 0 || count == 0 ||
        body < (size_t)count * WAL_FRAME_HEADER) {
        *why = "batch header with impossible length or count";
        return WAL_CHECK_BAD;
    }
    if (body > avail - WAL_FRAME_HEADER) {
        *why = "batch runs past the end of the segment";
        *bad_off = avail;
        return WAL_CHECK_BAD;
    }
    end = WAL_FRAME_HEADER + body;
    pos = WAL_FRAME_HEADER;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *f = p + pos;
        uint8_t kind;
        uint32_t len;
        size_t fsize;

        *bad_off = pos;
        if (end - pos < WAL_FRAME_HEADER) {
            *why = "batch shorter than its frame count";
            return WAL_CHECK_BAD;
        }
        if (wal_codec_all_zero(f, WAL_FRAME_HEADER)) {
            *why = "zeroed frame inside a batch";
            return WAL_CHECK_BAD;
        }
        kind = f[4];
        len = diskio_get_le32(f + 8);
        fsize = wal_codec_frame_size(len);
        if (fsize > end - pos) {
            *why = "frame runs past the end of its batch";
            return WAL_CHECK_BAD;
        }
        if (diskio_get_le32(f) != crc32c_update(salt, f + 4, fsize - 4)) {
            *why = "frame checksum mismatch";
            return WAL_CHECK_BAD;
        }
        if (kind != WAL_KIND_ENTRY && kind != WAL_KIND_TRUNCATE && kind != WAL_KIND_RESET) {
            *why = "unknown frame kind";
            return WAL_CHECK_BAD;
        }
        if (f[6] != 0 || f[7] != 0 || diskio_get_le32(f + 12) != 0 ||
            (kind != WAL_KIND_ENTRY && (len != 0 || f[5] != 0))) {
            *why = "frame with reserved fields set";
            return WAL_CHECK_BAD;
        }
        pos += fsize;
    }
    if (pos != end) {
        *bad_off = pos;
        *why = "batch longer than its frames";
        return WAL_CHECK_BAD;
    }
    return WAL_CHECK_OK;
}

size_t wal_codec_batch_record(const uint8_t *p, size_t pos, struct wal_record *rec)
{
    const uint8_t *f = p + pos;

    rec->kind = f[4];
    rec->etype = f[5];
    rec->len = diskio_get_le32(f + 8);
    rec->index = diskio_get_le64(f + 16);
    rec->term = diskio_get_le64(f + 24);
    rec->data = rec->len > 0 ? f + WAL_FRAME_HEADER : NULL;
    return pos + wal_codec_frame_size(rec->len);
}

size_t wal_codec_find_batch(const uint8_t *img, size_t from, size_t len, uint32_t salt)
{
    size_t pos = (from + 7) & ~(size_t)7;

    for (; pos + WAL_FRAME_HEADER <= len; pos += 8) {
        if (img[pos + 4] == WAL_KIND_BATCH && batch_header_valid(img + pos, salt))
            return pos;
    }
    return SIZE_MAX;
}

/* ---------------------------------------------------------------- segment header */

void wal_codec_seg_header_encode(const struct wal_seg_header *h, uint8_t out[WAL_SEG_HEADER_SIZE])
{
    memset(out, 0, WAL_SEG_HEADER_SIZE);
    memcpy(out, WAL_MAGIC, 8); /* includes the NUL */
    diskio_put_le32(out + 8, WAL_VERSION);
    diskio_put_le32(out + 12, h->salt);
    diskio_put_le64(out + 16, h->seq);
    diskio_put_le64(out + 24, h->first_batch);
    diskio_put_le64(out + 32, h->capacity);
    diskio_put_le64(out + 40, h->created_ms);
    diskio_put_le32(out + WAL_SEG_CRC_OFF, crc32c_update(0, out, WAL_SEG_CRC_OFF));
}

int wal_codec_seg_header_decode(const uint8_t *buf, struct wal_seg_header *h, const char **why,
                                size_t *at)
{
    *at = 0;
    if (memcmp(buf, WAL_MAGIC, 8) != 0) {
        *why = "bad magic (not a spur log segment)";
        return -1;
    }
    if (diskio_get_le32(buf + WAL_SEG_CRC_OFF) != crc32c_update(0, buf, WAL_SEG_CRC_OFF)) {
        *why = "segment header checksum mismatch";
        *at = WAL_SEG_CRC_OFF;
        return -1;
    }
    if (diskio_get_le32(buf + 8) != WAL_VERSION) {
        *why = "unsupported segment version";
        *at = 8;
        return -1;
    }
    if (!wal_codec_all_zero(buf + 48, 12)) {
        *why = "segment header reserved bytes not zero";
        *at = 48;
        return -1;
    }
    h->salt = diskio_get_le32(buf + 12);
    h->seq = diskio_get_le64(buf + 16);
    h->first_batch = diskio_get_le64(buf + 24);
    h->capacity = diskio_get_le64(buf + 32);
    h->created_ms = diskio_get_le64(buf + 40);
    return 0;
}

/* ---------------------------------------------------------------- scan */

/* Offset one past the last non-zero byte of img[from..len), or from when all are zero. */
static size_t last_nonzero(const uint8_t *img, size_t from, size_t len)
{
    while (len - from >= 8) {
        uint64_t v;
        memcpy(&v, img + len - 8, 8);
        if (v != 0)
            break;
        len -= 8;
    }
    while (len > from && img[len - 1] == 0)
        len--;
    return len;
}

static void scan_corrupt(struct wal_codec_scan *out, size_t bad, const char *why)
{
    out->stop = WAL_CODEC_CORRUPT;
    out->bad = bad;
    out->why = why;
    if (out->msg[0] == '\0')
        snprintf(out->msg, sizeof(out->msg), "%s", why);
}

/* Hand the records of the valid batch at img + pos to fn; 0, or -1 when fn refused one. */
static int scan_records(const uint8_t *img, size_t pos, const struct wal_batch_info *bi,
                        wal_codec_record_fn fn, void *arg, struct wal_codec_scan *out)
{
    size_t fpos = WAL_FRAME_HEADER;

    for (uint32_t i = 0; i < bi->count; i++) {
        struct wal_record rec;
        size_t rpos = fpos;
        const char *why = "record refused";

        fpos = wal_codec_batch_record(img + pos, fpos, &rec);
        if (fn != NULL && fn(arg, &rec, &why) < 0) {
            scan_corrupt(out, pos + rpos, why);
            return -1;
        }
    }
    return 0;
}

void wal_codec_scan(const uint8_t *img, size_t from, size_t len, uint32_t salt,
                    uint64_t first_batch, wal_codec_record_fn fn, void *arg,
                    struct wal_codec_scan *out)
{
    size_t pos = from < len ? from : len;

    memset(out, 0, sizeof(*out));
    out->stop = WAL_CODEC_CLEAN;
    out->next_batch = first_batch;
    while (pos < len) {
        struct wal_batch_info bi;
        const char *why = NULL;
        size_t bad, found;
        int rc = wal_codec_batch_check(img + pos, len - pos, salt, &bi, &why, &bad);

        if (rc == WAL_CHECK_OK) {
            if (bi.seq != out->next_batch) {
                snprintf(out->msg, sizeof(out->msg),
                         "batch has sequence number %" PRIu64 ", expected %" PRIu64, bi.seq,
                         out->next_batch);
                scan_corrupt(out, pos, "batch out of sequence");
                break;
            }
            if (scan_records(img, pos, &bi, fn, arg, out) < 0)
                break;
            out->next_batch++;
            out->batches++;
            pos += bi.size;
            continue;
        }
        if (rc == WAL_CHECK_END) {
            found = wal_codec_find_batch(img, pos + WAL_FRAME_HEADER, len, salt);
            if (found != SIZE_MAX) {
                snprintf(out->msg, sizeof(out->msg),
                         "zeroed bytes where a batch must start, and a valid batch at offset "
                         "%zu after them",
                         found);
                scan_corrupt(out, pos, "zeroed bytes where a batch must start");
                break;
            }
            if (last_nonzero(img, pos, len) == pos)
                break; /* the clean end: nothing but zeros from here */
            /* Zeros where the next batch header belongs, yet bytes after them: the header
             * of a batch that was being written never reached the disk. */
            why = "zeroed batch header followed by written bytes";
            bad = 0;
            memset(&bi, 0, sizeof(bi));
        }
        /* WAL_CHECK_BAD: a torn tail only if no valid batch follows. */
        found = wal_codec_find_batch(
            img, bi.size > 0 && bi.size <= len - pos ? pos + bi.size : pos + 8, len, salt);
        if (found != SIZE_MAX) {
            snprintf(out->msg, sizeof(out->msg), "%s (a valid batch follows at offset %zu)", why,
                     found);
            scan_corrupt(out, pos + bad, why);
            break;
        }
        out->stop = WAL_CODEC_TORN;
        out->bad = pos + bad;
        out->why = why;
        out->torn_bytes = last_nonzero(img, pos, len) - pos;
        break;
    }
    out->end = pos;
}
