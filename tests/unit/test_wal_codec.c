/*
 * test_wal_codec.c - the log's codec alone, over memory buffers: batches encoded and
 * decoded back, every single-bit error caught.
 */
#include "wal_codec.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES(b) ((uint8_t *)(b).buf.p)

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

static Suite *wal_codec_suite(void)
{
    Suite *s = suite_create("wal_codec");
    TCase *tc = tcase_create("batch");

    tcase_add_test(tc, test_batch_roundtrip);
    tcase_add_test(tc, test_batch_every_flip_detected);
    tcase_add_test(tc, test_batch_end_and_find);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(wal_codec_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
