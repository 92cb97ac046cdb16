/*
 * fuzz_wal.c - the log codec's scan fed arbitrary segment images.
 *
 * Input layout: byte 0 picks the mode. Even: the rest is a whole segment image; its
 * 64-byte header is decoded and, when it passes, the batches after it are scanned with its
 * salt and first batch number (the seeds in corpus/wal are such images). Odd: bytes 1..4
 * are a salt and the rest is scanned from offset 0 as a run of batches numbered from 1, so
 * the fuzzer need not forge a segment header's checksum to reach the batch decoder.
 *
 * Every record of a valid batch is replayed (wal_replay) into an entry array sized as
 * recovery sizes it (one entry per 32 bytes of image, plus one), so the sizing claim in
 * wal.c is checked too. After the scan:
 *   - the verdict is consistent: CLEAN means only zeros follow `end`; TORN means non-zero
 *     bytes follow it; CORRUPT comes with a reason; every offset is inside the image;
 *   - the bytes up to `end` re-scan as the same batches, each of which passes
 *     wal_codec_batch_check on its own, and re-encoding a batch's records with the same
 *     salt and number gives a batch of the same size whose header is byte-identical and
 *     whose records decode to the same values.
 */
#include "wal_codec.h"
#include "wal_replay.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_wal: check failed: %s (line %d)\n", #c, __LINE__);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

struct ctx {
    const uint8_t *img;
    size_t len;
    struct wal_replay replay;
    uint64_t records;
};

static int on_record(void *arg, const struct wal_record *rec, const char **why)
{
    struct ctx *c = arg;

    c->records++;
    CHECK(rec->kind == WAL_KIND_ENTRY || rec->kind == WAL_KIND_TRUNCATE ||
          rec->kind == WAL_KIND_RESET);
    if (rec->len > 0) {
        CHECK(rec->kind == WAL_KIND_ENTRY);
        CHECK(rec->data >= c->img && rec->data + rec->len <= c->img + c->len);
    } else {
        CHECK(rec->data == NULL);
    }
    if (wal_replay_apply(&c->replay, rec, why) < 0) {
        /* The array is sized for the worst case: it can never be too small. */
        CHECK(strcmp(*why, "more entries than the log can hold") != 0);
        return -1;
    }
    CHECK(c->replay.start <= c->replay.n && c->replay.n <= c->replay.cap);
    return 0;
}

/* Re-encode the valid batch at p (size bytes) and compare. */
static void check_reencode(const uint8_t *p, const struct wal_batch_info *bi, uint32_t salt)
{
    struct wal_batch b;
    struct wal_batch_info bi2;
    const char *why;
    size_t bad, pos = WAL_FRAME_HEADER, pos2 = WAL_FRAME_HEADER;

    wal_codec_batch_init(&b);
    wal_codec_batch_begin(&b, salt);
    for (uint32_t i = 0; i < bi->count; i++) {
        struct wal_record r;
        pos = wal_codec_batch_record(p, pos, &r);
        if (r.kind == WAL_KIND_ENTRY)
            CHECK(wal_codec_batch_add_entry(&b, r.index, r.term, r.etype, r.data, r.len) == 0);
        else if (r.kind == WAL_KIND_TRUNCATE)
            CHECK(wal_codec_batch_add_truncate(&b, r.index) == 0);
        else
            CHECK(wal_codec_batch_add_reset(&b, r.index, r.term) == 0);
    }
    CHECK(pos == bi->size);
    wal_codec_batch_seal(&b, bi->seq);
    CHECK(b.buf.len == bi->size);
    CHECK(memcmp(b.buf.p, p, WAL_FRAME_HEADER) == 0);
    CHECK(wal_codec_batch_check((const uint8_t *)b.buf.p, b.buf.len, salt, &bi2, &why, &bad) ==
          WAL_CHECK_OK);
    CHECK(bi2.seq == bi->seq && bi2.count == bi->count && bi2.size == bi->size);
    pos = WAL_FRAME_HEADER;
    for (uint32_t i = 0; i < bi->count; i++) {
        struct wal_record r, r2;
        pos = wal_codec_batch_record(p, pos, &r);
        pos2 = wal_codec_batch_record((const uint8_t *)b.buf.p, pos2, &r2);
        CHECK(r.kind == r2.kind && r.etype == r2.etype && r.index == r2.index &&
              r.term == r2.term && r.len == r2.len);
        CHECK(r.len == 0 || memcmp(r.data, r2.data, r.len) == 0);
    }
    wal_codec_batch_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *img;
    size_t len, from, max_entries;
    uint32_t salt;
    uint64_t first_batch;
    struct wal_codec_scan sc, again;
    struct wal_entry *v;
    struct ctx c;

    if (size < 5)
        return 0;
    if (data[0] % 2 == 0) {
        struct wal_seg_header h;
        const char *why;
        size_t at;
        img = data + 1;
        len = size - 1;
        if (len < WAL_SEG_HEADER_SIZE)
            return 0;
        if (wal_codec_seg_header_decode(img, &h, &why, &at) < 0) {
            CHECK(why != NULL && at < WAL_SEG_HEADER_SIZE);
            return 0;
        }
        salt = h.salt;
        first_batch = h.first_batch;
        from = WAL_SEG_HEADER_SIZE;
    } else {
        salt = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 |
               (uint32_t)data[4] << 24;
        img = data + 5;
        len = size - 5;
        first_batch = 1;
        from = 0;
    }

    max_entries = len / WAL_FRAME_HEADER + 1;
    v = calloc(max_entries, sizeof(*v));
    CHECK(v != NULL);
    memset(&c, 0, sizeof(c));
    c.img = img;
    c.len = len;
    wal_replay_init(&c.replay, v, max_entries);
    wal_codec_scan(img, from, len, salt, first_batch, on_record, &c, &sc);

    CHECK(sc.end >= from && sc.end <= len && (sc.end - from) % 8 == 0);
    CHECK(sc.next_batch == first_batch + sc.batches);
    switch (sc.stop) {
    case WAL_CODEC_CLEAN:
        CHECK(wal_codec_all_zero(img + sc.end, len - sc.end));
        break;
    case WAL_CODEC_TORN:
        CHECK(sc.why != NULL && sc.torn_bytes > 0 && sc.end + sc.torn_bytes <= len);
        CHECK(sc.bad >= sc.end && sc.bad <= len);
        break;
    case WAL_CODEC_CORRUPT:
        CHECK(sc.why != NULL && sc.msg[0] != '\0' && sc.bad <= len);
        break;
    default:
        CHECK(!"unknown stop");
    }

    /* The valid part again, batch by batch, and as a scan of its own. */
    {
        size_t pos = from;
        uint64_t n = 0;
        while (pos < sc.end) {
            struct wal_batch_info bi;
            const char *why;
            size_t bad;
            CHECK(wal_codec_batch_check(img + pos, len - pos, salt, &bi, &why, &bad) ==
                  WAL_CHECK_OK);
            CHECK(bi.seq == first_batch + n);
            check_reencode(img + pos, &bi, salt);
            pos += bi.size;
            n++;
        }
        CHECK(pos == sc.end && n == sc.batches);
        wal_codec_scan(img, from, sc.end, salt, first_batch, NULL, NULL, &again);
        CHECK(again.stop == WAL_CODEC_CLEAN && again.end == sc.end && again.batches == sc.batches);
    }
    free(v);
    return 0;
}
