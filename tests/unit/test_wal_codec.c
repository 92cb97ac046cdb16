/*
 * test_wal_codec.c - the log's codec alone, over memory buffers: batches encoded and
 * decoded back, every single-bit error caught, every kind of torn tail told apart from
 * damage in the middle, lengths that point past the data refused, and the 8-byte
 * alignment of every frame. No files: the images are built in memory.
 */
#include "check_run.h"
#include "crc32c.h"
#include "diskio.h"
#include "wal_codec.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES(b) ((uint8_t *)(b).buf.p)

#define SALT      0x5eed1234u
#define IMG_BYTES 4096

/* A segment image built in memory: header, batches at off[], then zeros up to len. */
struct image {
    uint8_t p[IMG_BYTES];
    size_t len;
    size_t n;       /* batches */
    size_t off[8];  /* where each batch starts */
    size_t size[8]; /* its bytes */
    size_t end;     /* after the last batch */
};

/* Batch k holds entries 3k+1 .. 3k+3 (payload lengths 0, 5 and 17) in term k + 1. */
static void add_batch(struct image *im, uint64_t seq)
{
    struct wal_batch b;
    uint8_t data[17];
    uint64_t first = 3 * im->n + 1;

    for (int i = 0; i < 17; i++)
        data[i] = (uint8_t)(first * 11 + (uint64_t)i);
    wal_codec_batch_init(&b);
    wal_codec_batch_begin(&b, SALT);
    ck_assert_int_eq(wal_codec_batch_add_entry(&b, first, im->n + 1, 1, NULL, 0), 0);
    ck_assert_int_eq(wal_codec_batch_add_entry(&b, first + 1, im->n + 1, 1, data, 5), 0);
    ck_assert_int_eq(wal_codec_batch_add_entry(&b, first + 2, im->n + 1, 2, data, 17), 0);
    wal_codec_batch_seal(&b, seq);
    ck_assert_uint_le(im->end + b.buf.len, sizeof(im->p));
    memcpy(im->p + im->end, b.buf.p, b.buf.len);
    im->off[im->n] = im->end;
    im->size[im->n] = b.buf.len;
    im->n++;
    im->end += b.buf.len;
    wal_codec_batch_free(&b);
}

/* A segment with n batches numbered 1..n, followed by `zeros` zero bytes. */
static void build(struct image *im, size_t n, size_t zeros)
{
    struct wal_seg_header h = {.seq = 1, .salt = SALT, .first_batch = 1, .capacity = 4096};

    memset(im, 0, sizeof(*im));
    wal_codec_seg_header_encode(&h, im->p);
    im->end = WAL_SEG_HEADER_SIZE;
    for (size_t i = 0; i < n; i++)
        add_batch(im, i + 1);
    im->len = im->end + zeros;
    ck_assert_uint_le(im->len, sizeof(im->p));
}

/* Records seen by a scan, and an optional index the collector refuses. */
struct seen {
    size_t n;
    struct wal_record rec[64];
    uint64_t refuse_index;
};

static int collect(void *arg, const struct wal_record *rec, const char **why)
{
    struct seen *s = arg;

    if (s->refuse_index != 0 && rec->index == s->refuse_index) {
        *why = "refused by the test";
        return -1;
    }
    ck_assert_uint_lt(s->n, 64);
    s->rec[s->n++] = *rec;
    return 0;
}

static void scan(const struct image *im, struct seen *s, struct wal_codec_scan *sc)
{
    memset(s, 0, sizeof(*s));
    wal_codec_scan(im->p, WAL_SEG_HEADER_SIZE, im->len, SALT, 1, collect, s, sc);
}

/* Recompute the checksum of the frame at p (fsize bytes), as a writer that meant it would. */
static void reseal(uint8_t *p, size_t fsize)
{
    diskio_put_le32(p, crc32c_update(SALT, p + 4, fsize - 4));
}

/* ================================================================ batches */

START_TEST(test_batch_roundtrip)
{
    struct wal_batch b;
    struct wal_batch_info bi;
    struct wal_record rec;
    const char *why;
    size_t bad, pos;
    uint8_t data[64];
    uint32_t lens[] = {0, 1, 7, 8, 9, 63};

    for (int i = 0; i < 64; i++)
        data[i] = (uint8_t)i;
    wal_codec_batch_init(&b);
    wal_codec_batch_begin(&b, 0x1234);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(wal_codec_batch_add_entry(&b, 10 + i, 3, 2, data, lens[i]), 0);
    ck_assert_int_eq(wal_codec_batch_add_truncate(&b, 12), 0);
    ck_assert_int_eq(wal_codec_batch_add_reset(&b, 40, 5), 0);
    wal_codec_batch_seal(&b, 77);
    ck_assert_uint_eq(b.buf.len % 8, 0);
    ck_assert_int_eq(wal_codec_batch_check(BYTES(b), b.buf.len, 0x1234, &bi, &why, &bad),
                     WAL_CHECK_OK);
    ck_assert_uint_eq(bi.seq, 77);
    ck_assert_uint_eq(bi.count, 8);
    ck_assert_uint_eq(bi.size, b.buf.len);
    /* The same bytes under another salt are not a batch. */
    ck_assert_int_eq(wal_codec_batch_check(BYTES(b), b.buf.len, 0x1235, &bi, &why, &bad),
                     WAL_CHECK_BAD);
    ck_assert_int_eq(wal_codec_batch_check(BYTES(b), b.buf.len, 0x1234, &bi, &why, &bad),
                     WAL_CHECK_OK);
    pos = WAL_FRAME_HEADER;
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(pos % 8, 0);
        pos = wal_codec_batch_record(BYTES(b), pos, &rec);
        ck_assert_int_eq(rec.kind, WAL_KIND_ENTRY);
        ck_assert_uint_eq(rec.index, 10 + (uint64_t)i);
        ck_assert_uint_eq(rec.term, 3);
        ck_assert_int_eq(rec.etype, 2);
        ck_assert_uint_eq(rec.len, lens[i]);
        if (lens[i] > 0)
            ck_assert_mem_eq(rec.data, data, lens[i]);
        else
            ck_assert_ptr_null(rec.data);
    }
    pos = wal_codec_batch_record(BYTES(b), pos, &rec);
    ck_assert_int_eq(rec.kind, WAL_KIND_TRUNCATE);
    ck_assert_uint_eq(rec.index, 12);
    pos = wal_codec_batch_record(BYTES(b), pos, &rec);
    ck_assert_int_eq(rec.kind, WAL_KIND_RESET);
    ck_assert_uint_eq(rec.index, 40);
    ck_assert_uint_eq(rec.term, 5);
    ck_assert_uint_eq(pos, b.buf.len);
    wal_codec_batch_free(&b);
}
END_TEST

/* Every single-bit error anywhere in a batch is caught. */
START_TEST(test_batch_every_flip_detected)
{
    struct wal_batch b;
    struct wal_batch_info bi;
    const char *why;
    size_t bad;
    uint8_t data[40] = "the quick brown fox jumps over the lazy";

    wal_codec_batch_init(&b);
    wal_codec_batch_begin(&b, 99);
    wal_codec_batch_add_entry(&b, 1, 1, 1, data, sizeof(data));
    wal_codec_batch_add_entry(&b, 2, 1, 1, data, 5);
    wal_codec_batch_add_truncate(&b, 2);
    wal_codec_batch_seal(&b, 1);
    for (size_t i = 0; i < b.buf.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            BYTES(b)[i] ^= (uint8_t)(1u << bit);
            ck_assert_msg(wal_codec_batch_check(BYTES(b), b.buf.len, 99, &bi, &why, &bad) !=
                              WAL_CHECK_OK,
                          "flip of byte %zu bit %d not detected", i, bit);
            BYTES(b)[i] ^= (uint8_t)(1u << bit);
        }
    }
    /* Every strict prefix is incomplete, never valid. */
    for (size_t l = 0; l < b.buf.len; l++)
        ck_assert_int_ne(wal_codec_batch_check(BYTES(b), l, 99, &bi, &why, &bad), WAL_CHECK_OK);
    wal_codec_batch_free(&b);
}
END_TEST

START_TEST(test_batch_end_and_find)
{
    uint8_t img[512] = {0};
    struct wal_batch b;
    struct wal_batch_info bi;
    const char *why;
    size_t bad;

    ck_assert_int_eq(wal_codec_batch_check(img, sizeof(img), 5, &bi, &why, &bad), WAL_CHECK_END);
    ck_assert_int_eq(wal_codec_batch_check(img, 10, 5, &bi, &why, &bad), WAL_CHECK_END);
    img[3] = 1;
    ck_assert_int_eq(wal_codec_batch_check(img, 10, 5, &bi, &why, &bad), WAL_CHECK_BAD);
    img[3] = 0;
    ck_assert_uint_eq(wal_codec_find_batch(img, 0, sizeof(img), 5), SIZE_MAX);
    wal_codec_batch_init(&b);
    wal_codec_batch_begin(&b, 5);
    wal_codec_batch_add_entry(&b, 1, 1, 1, "x", 1);
    wal_codec_batch_seal(&b, 1);
    memcpy(img + 200, BYTES(b), b.buf.len);
    ck_assert_uint_eq(wal_codec_find_batch(img, 0, sizeof(img), 5), 200);
    ck_assert_uint_eq(wal_codec_find_batch(img, 201, sizeof(img), 5), SIZE_MAX);
    ck_assert_uint_eq(wal_codec_find_batch(img, 0, sizeof(img), 6), SIZE_MAX);
    wal_codec_batch_free(&b);
}
END_TEST

/* ================================================================ scan */

START_TEST(test_scan_roundtrip)
{
    struct image im;
    struct seen s;
    struct wal_codec_scan sc;

    build(&im, 4, 500);
    scan(&im, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_CLEAN);
    ck_assert_uint_eq(sc.end, im.end);
    ck_assert_uint_eq(sc.batches, 4);
    ck_assert_uint_eq(sc.next_batch, 5);
    ck_assert_uint_eq(s.n, 12);
    for (size_t i = 0; i < s.n; i++) {
        uint64_t index = i + 1;
        uint32_t lens[] = {0, 5, 17};
        ck_assert_int_eq(s.rec[i].kind, WAL_KIND_ENTRY);
        ck_assert_uint_eq(s.rec[i].index, index);
        ck_assert_uint_eq(s.rec[i].term, i / 3 + 1);
        ck_assert_uint_eq(s.rec[i].len, lens[i % 3]);
        ck_assert_int_eq(s.rec[i].etype, i % 3 == 2 ? 2 : 1);
        for (uint32_t k = 0; k < s.rec[i].len; k++)
            ck_assert_uint_eq(s.rec[i].data[k], (uint8_t)((index - i % 3) * 11 + k));
        /* Decoded data points into the image, never into a copy. */
        if (s.rec[i].len > 0)
            ck_assert(s.rec[i].data > im.p && s.rec[i].data < im.p + im.len);
    }
    /* The image may also end right after the last batch, or hold no batch at all. */
    im.len = im.end;
    scan(&im, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_CLEAN);
    ck_assert_uint_eq(sc.end, im.end);
    build(&im, 0, 300);
    scan(&im, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_CLEAN);
    ck_assert_uint_eq(sc.end, WAL_SEG_HEADER_SIZE);
    ck_assert_uint_eq(s.n, 0);
    ck_assert_uint_eq(sc.next_batch, 1);
}
END_TEST

/* The last batch damaged in every way a crash can leave it: a torn tail at its start. */
static void expect_torn(const struct image *im, const char *why, size_t bad)
{
    struct seen s;
    struct wal_codec_scan sc;
    size_t last = im->off[im->n - 1];

    scan(im, &s, &sc);
    ck_assert_msg(sc.stop == WAL_CODEC_TORN, "stop %d, why %s", sc.stop, sc.why ? sc.why : "-");
    ck_assert_uint_eq(sc.end, last);
    ck_assert_str_eq(sc.why, why);
    ck_assert_uint_eq(sc.bad, bad);
    ck_assert_uint_eq(sc.batches, im->n - 1);
    ck_assert_uint_eq(sc.next_batch, im->n);
    /* Only the records of the whole batches before it were handed out. */
    ck_assert_uint_eq(s.n, 3 * (im->n - 1));
    ck_assert_uint_gt(sc.torn_bytes, 0);
    ck_assert_uint_le(sc.end + sc.torn_bytes, im->len);
}

START_TEST(test_scan_torn_tails)
{
    struct image im;
    size_t last;

    /* The file ends inside the last batch's header. */
    build(&im, 3, 0);
    last = im.off[2];
    im.len = last + 10;
    expect_torn(&im, "incomplete batch header at the end of the segment", last);
    /* The file ends inside the last batch's payload. */
    build(&im, 3, 0);
    im.len = im.end - 8;
    expect_torn(&im, "batch runs past the end of the segment", im.len);
    /* The payload never reached the disk: zeros where its frames belong. */
    build(&im, 3, 64);
    last = im.off[2];
    memset(im.p + last + WAL_FRAME_HEADER, 0, im.size[2] - WAL_FRAME_HEADER);
    expect_torn(&im, "zeroed frame inside a batch", last + WAL_FRAME_HEADER);
    /* A bad checksum in the last frame. */
    build(&im, 3, 64);
    last = im.off[2];
    im.p[im.end - 9] ^= 0x01;
    expect_torn(&im, "frame checksum mismatch", last + im.size[2] - 32 - 24);
    /* The header never reached the disk but the frames after it did. */
    build(&im, 3, 64);
    last = im.off[2];
    memset(im.p + last, 0, WAL_FRAME_HEADER);
    expect_torn(&im, "zeroed batch header followed by written bytes", last);
    /* Garbage where the next batch would start. */
    build(&im, 3, 64);
    memset(im.p + im.end, 0xa5, 40);
    im.off[3] = im.end;
    im.n = 4;
    expect_torn(&im, "no batch header where one must start", im.end);
}
END_TEST

/* A whole batch of zeros at the end is not torn: the log simply ends before it. */
START_TEST(test_scan_zeroed_last_batch_is_clean)
{
    struct image im;
    struct seen s;
    struct wal_codec_scan sc;

    build(&im, 3, 64);
    memset(im.p + im.off[2], 0, im.size[2]);
    scan(&im, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_CLEAN);
    ck_assert_uint_eq(sc.end, im.off[2]);
    ck_assert_uint_eq(s.n, 6);
}
END_TEST

/* Damage with a valid batch after it is corruption, never a torn tail. */
START_TEST(test_scan_corrupt_middle)
{
    struct image im;
    struct seen s;
    struct wal_codec_scan sc;
    char want[160];

    build(&im, 3, 64);
    im.p[im.off[1] + 3 * WAL_FRAME_HEADER + 2] ^= 0x80; /* a payload of batch 2 */
    scan(&im, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_CORRUPT);
    ck_assert_str_eq(sc.why, "frame checksum mismatch");
    snprintf(want, sizeof(want), "frame checksum mismatch (a valid batch follows at offset %zu)",
             im.off[2]);
    ck_assert_str_eq(sc.msg, want);
    ck_assert_uint_eq(sc.end, im.off[1]);
    ck_assert_uint_eq(s.n, 3);

    build(&im, 3, 64);
    memset(im.p + im.off[1], 0, im.size[1]); /* a lost block */
    scan(&im, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_CORRUPT);
    ck_assert_uint_eq(sc.bad, im.off[1]);
    snprintf(want, sizeof(want),
             "zeroed bytes where a batch must start, and a valid batch at offset %zu after them",
             im.off[2]);
    ck_assert_str_eq(sc.msg, want);
}
END_TEST

START_TEST(test_scan_sequence_and_refusal)
{
    struct image im;
    struct seen s;
    struct wal_codec_scan sc;

    build(&im, 3, 64);
    memset(&s, 0, sizeof(s));
    wal_codec_scan(im.p, WAL_SEG_HEADER_SIZE, im.len, SALT, 5, collect, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_CORRUPT);
    ck_assert_uint_eq(sc.bad, WAL_SEG_HEADER_SIZE);
    ck_assert_str_eq(sc.msg, "batch has sequence number 1, expected 5");
    ck_assert_uint_eq(s.n, 0);

    /* A record the caller refuses stops the scan at that record's frame. */
    memset(&s, 0, sizeof(s));
    s.refuse_index = 5;
    wal_codec_scan(im.p, WAL_SEG_HEADER_SIZE, im.len, SALT, 1, collect, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_CORRUPT);
    ck_assert_str_eq(sc.msg, "refused by the test");
    ck_assert_uint_eq(sc.bad, im.off[1] + WAL_FRAME_HEADER + wal_codec_frame_size(0));
    ck_assert_uint_eq(s.n, 4);
    ck_assert_uint_eq(sc.end, im.off[1]);

    /* Another segment's salt: nothing is a batch, and nothing valid follows. */
    memset(&s, 0, sizeof(s));
    wal_codec_scan(im.p, WAL_SEG_HEADER_SIZE, im.len, SALT + 1, 1, collect, &s, &sc);
    ck_assert_int_eq(sc.stop, WAL_CODEC_TORN);
    ck_assert_uint_eq(sc.end, WAL_SEG_HEADER_SIZE);
    ck_assert_uint_eq(s.n, 0);
}
END_TEST

/* Every single-bit error in a segment image is caught: the header refuses it, or the scan
 * no longer reads the same clean log. */
START_TEST(test_scan_every_flip_detected)
{
    struct image im, ref;
    struct seen s;
    struct wal_codec_scan sc;
    struct wal_seg_header h;
    const char *why;
    size_t at;

    build(&ref, 3, 40);
    for (size_t i = 0; i < ref.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            im = ref;
            im.p[i] ^= (uint8_t)(1u << bit);
            if (i < WAL_SEG_HEADER_SIZE) {
                ck_assert_int_eq(wal_codec_seg_header_decode(im.p, &h, &why, &at), -1);
                continue;
            }
            scan(&im, &s, &sc);
            ck_assert_msg(sc.stop != WAL_CODEC_CLEAN, "flip of byte %zu bit %d not detected", i,
                          bit);
            ck_assert_uint_le(s.n, 9);
        }
    }
}
END_TEST

/* A length that points past the data is refused, even under a valid checksum. */
START_TEST(test_oversize_lengths_refused)
{
    struct image im;
    struct wal_batch_info bi;
    const char *why;
    size_t bad, last, f;

    /* A batch header claiming far more body than the segment has. */
    build(&im, 2, 64);
    last = im.off[1];
    diskio_put_le32(im.p + last + 8, 0xfffffff8u);
    reseal(im.p + last, WAL_FRAME_HEADER);
    ck_assert_int_eq(wal_codec_batch_check(im.p + last, im.len - last, SALT, &bi, &why, &bad),
                     WAL_CHECK_BAD);
    ck_assert_str_eq(why, "batch runs past the end of the segment");

    /* A body that is not a multiple of 8, or too short for its frame count. */
    build(&im, 2, 64);
    diskio_put_le32(im.p + last + 8, (uint32_t)(im.size[1] - WAL_FRAME_HEADER - 4));
    reseal(im.p + last, WAL_FRAME_HEADER);
    ck_assert_int_eq(wal_codec_batch_check(im.p + last, im.len - last, SALT, &bi, &why, &bad),
                     WAL_CHECK_BAD);
    ck_assert_str_eq(why, "batch header with impossible length or count");
    build(&im, 2, 64);
    diskio_put_le32(im.p + last + 12, 1000);
    reseal(im.p + last, WAL_FRAME_HEADER);
    ck_assert_int_eq(wal_codec_batch_check(im.p + last, im.len - last, SALT, &bi, &why, &bad),
                     WAL_CHECK_BAD);
    ck_assert_str_eq(why, "batch header with impossible length or count");

    /* An entry frame whose payload length runs past its batch. */
    build(&im, 2, 64);
    f = last + WAL_FRAME_HEADER + wal_codec_frame_size(0) + wal_codec_frame_size(5);
    diskio_put_le32(im.p + f + 8, 4000);
    ck_assert_int_eq(wal_codec_batch_check(im.p + last, im.len - last, SALT, &bi, &why, &bad),
                     WAL_CHECK_BAD);
    ck_assert_str_eq(why, "frame runs past the end of its batch");
    ck_assert_uint_eq(bad, f - last);
    diskio_put_le32(im.p + f + 8, UINT32_MAX);
    ck_assert_int_eq(wal_codec_batch_check(im.p + last, im.len - last, SALT, &bi, &why, &bad),
                     WAL_CHECK_BAD);
    ck_assert_str_eq(why, "frame runs past the end of its batch");
}
END_TEST

START_TEST(test_alignment)
{
    struct wal_batch b;
    uint8_t data[24], img[512] = {0};

    memset(data, 0xff, sizeof(data));
    /* Every frame is a multiple of 8 bytes, its padding zeros. */
    for (uint32_t len = 0; len <= 24; len++) {
        size_t fsize = wal_codec_frame_size(len);
        ck_assert_uint_eq(fsize % 8, 0);
        ck_assert_uint_ge(fsize, WAL_FRAME_HEADER + len);
        ck_assert_uint_lt(fsize, WAL_FRAME_HEADER + len + 8);
        wal_codec_batch_init(&b);
        wal_codec_batch_begin(&b, SALT);
        ck_assert_int_eq(wal_codec_batch_add_entry(&b, 1, 1, 1, data, len), 0);
        wal_codec_batch_seal(&b, 1);
        ck_assert_uint_eq(b.buf.len, WAL_FRAME_HEADER + fsize);
        for (size_t k = 2 * WAL_FRAME_HEADER + len; k < b.buf.len; k++)
            ck_assert_uint_eq(BYTES(b)[k], 0);
        wal_codec_batch_free(&b);
    }
    /* A valid batch is found only at an 8-aligned offset of the image. */
    wal_codec_batch_init(&b);
    wal_codec_batch_begin(&b, SALT);
    wal_codec_batch_add_truncate(&b, 3);
    wal_codec_batch_seal(&b, 1);
    memcpy(img + 203, b.buf.p, b.buf.len);
    ck_assert_uint_eq(wal_codec_find_batch(img, 0, sizeof(img), SALT), SIZE_MAX);
    memset(img, 0, sizeof(img));
    memcpy(img + 208, b.buf.p, b.buf.len);
    ck_assert_uint_eq(wal_codec_find_batch(img, 201, sizeof(img), SALT), 208);
    ck_assert_uint_eq(wal_codec_find_batch(img, 209, sizeof(img), SALT), SIZE_MAX);
    /* The last possible place: a header ending exactly at the end of the image. */
    ck_assert_uint_eq(wal_codec_find_batch(img, 0, 208 + WAL_FRAME_HEADER, SALT), 208);
    ck_assert_uint_eq(wal_codec_find_batch(img, 0, 208 + WAL_FRAME_HEADER - 1, SALT), SIZE_MAX);
    wal_codec_batch_free(&b);
}
END_TEST

START_TEST(test_all_zero)
{
    uint8_t p[100] = {0};

    for (size_t n = 0; n <= sizeof(p); n++)
        ck_assert(wal_codec_all_zero(p, n));
    for (size_t i = 0; i < sizeof(p); i++) {
        p[i] = 0x20;
        ck_assert(!wal_codec_all_zero(p, sizeof(p)));
        ck_assert(!wal_codec_all_zero(p, i + 1));
        ck_assert(wal_codec_all_zero(p, i));
        p[i] = 0;
    }
}
END_TEST

static Suite *wal_codec_suite(void)
{
    Suite *s = suite_create("wal_codec");
    check_case(s, "batch",
               (const TTest *[]){test_batch_roundtrip, test_batch_every_flip_detected,
                                 test_batch_end_and_find, test_oversize_lengths_refused,
                                 test_alignment, test_all_zero, NULL});

    check_case(s, "scan",
               (const TTest *[]){test_scan_roundtrip, test_scan_torn_tails,
                                 test_scan_zeroed_last_batch_is_clean, test_scan_corrupt_middle,
                                 test_scan_sequence_and_refusal, test_scan_every_flip_detected,
                                 NULL});
    return s;
}

int main(void)
{
    return check_run(wal_codec_suite());
}
