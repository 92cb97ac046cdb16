/*
 * test_meta.c - the hard state file: codec, atomic replace, leftovers, and refusal of any
 * checksum failure.
 */
#include "meta.h"
#include "scratch.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every test works in its own directory under base; main() removes base at the end, so
 * a failed test (whose teardown Check skips) leaves nothing behind either. */
static char base[64];
static char tdir[96];
static int dfd = -1;
static const struct diskio_sync nosync = {.fsync = false};
static const struct diskio_sync dosync = {.fsync = true};

static void setup(void)
{
    scratch_make(tdir, sizeof(tdir), base);
    dfd = open(tdir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(dfd, 0);
}

static void teardown(void)
{
    close(dfd);
    scratch_remove(tdir);
}

static void put_file(const char *name, const void *p, size_t len)
{
    char path[128];
    int fd;
    snprintf(path, sizeof(path), "%s/%s", tdir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, p, len), (ssize_t)len);
    close(fd);
}

START_TEST(test_codec_roundtrip)
{
    struct meta_state a = {.term = 0x0102030405060708ull, .vote = 7}, b;
    uint8_t buf[META_SIZE];
    const char *why;
    size_t at;

    meta_encode(&a, buf);
    ck_assert_mem_eq(buf, "SPURMETA", 8);
    ck_assert_int_eq(meta_decode(buf, sizeof(buf), &b, &why, &at), 0);
    ck_assert_uint_eq(b.term, a.term);
    ck_assert_uint_eq(b.vote, 7);
}
END_TEST

START_TEST(test_codec_every_flip_refused)
{
    struct meta_state a = {.term = 9, .vote = 3}, b;
    uint8_t buf[META_SIZE];
    const char *why;
    size_t at;

    meta_encode(&a, buf);
    for (size_t i = 0; i < META_SIZE; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            ck_assert_int_eq(meta_decode(buf, sizeof(buf), &b, &why, &at), -1);
            ck_assert_ptr_nonnull(why);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
    ck_assert_int_eq(meta_decode(buf, META_SIZE - 1, &b, &why, &at), -1);
    ck_assert_int_eq(meta_decode(buf, 0, &b, &why, &at), -1);
}
END_TEST

START_TEST(test_missing_is_empty)
{
    struct meta_state st = {.term = 5};
    struct diskio_err err;
    bool found = true;

    ck_assert_int_eq(meta_load(dfd, tdir, &st, &found, &err), DISKIO_OK);
    ck_assert(!found);
    ck_assert_uint_eq(st.term, 0);
    ck_assert_uint_eq(st.vote, 0);
}
END_TEST

START_TEST(test_store_load_replace)
{
    struct meta_state st;
    struct diskio_err err;
    bool found;
    char path[128];
    struct stat sb;

    for (uint64_t t = 1; t <= 20; t++) {
        struct meta_state w = {.term = t, .vote = t % 3};
        ck_assert_int_eq(meta_store(dfd, tdir, &w, t % 2 ? &dosync : &nosync, &err), DISKIO_OK);
        ck_assert_int_eq(meta_load(dfd, tdir, &st, &found, &err), DISKIO_OK);
        ck_assert(found);
        ck_assert_uint_eq(st.term, t);
        ck_assert_uint_eq(st.vote, t % 3);
    }
    snprintf(path, sizeof(path), "%s/meta", tdir);
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_size, META_SIZE);
    snprintf(path, sizeof(path), "%s/meta.tmp", tdir);
    ck_assert_int_eq(stat(path, &sb), -1);
}
END_TEST

/* A crash between writing meta.tmp and the rename: the old state stands, tmp is removed. */
START_TEST(test_interrupted_update)
{
    struct meta_state old = {.term = 4, .vote = 1}, st;
    struct diskio_err err;
    uint8_t half[20] = "SPURMETA partial";
    char path[128];
    bool found;

    ck_assert_int_eq(meta_store(dfd, tdir, &old, &nosync, &err), DISKIO_OK);
    put_file("meta.tmp", half, sizeof(half));
    ck_assert_int_eq(meta_load(dfd, tdir, &st, &found, &err), DISKIO_OK);
    ck_assert(found);
    ck_assert_uint_eq(st.term, 4);
    ck_assert_uint_eq(st.vote, 1);
    snprintf(path, sizeof(path), "%s/meta.tmp", tdir);
    ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

START_TEST(test_checksum_failure_refused)
{
    struct meta_state w = {.term = 12, .vote = 2}, st;
    struct diskio_err err;
    uint8_t buf[META_SIZE];
    bool found;

    meta_encode(&w, buf);
    buf[17] ^= 1; /* one bit of the term */
    put_file("meta", buf, sizeof(buf));
    ck_assert_int_eq(meta_load(dfd, tdir, &st, &found, &err), DISKIO_ECORRUPT);
    ck_assert_int_eq(err.rc, DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "/meta at offset 60: checksum mismatch"));
    ck_assert_ptr_nonnull(strstr(err.msg, tdir));
    ck_assert(!found);
    ck_assert_uint_eq(st.term, 0);
}
END_TEST

START_TEST(test_short_and_long_file_refused)
{
    struct meta_state w = {.term = 12, .vote = 2}, st;
    struct diskio_err err;
    uint8_t buf[META_SIZE + 8] = {0};
    bool found;

    meta_encode(&w, buf);
    put_file("meta", buf, 30);
    ck_assert_int_eq(meta_load(dfd, tdir, &st, &found, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "offset 30"));
    put_file("meta", buf, sizeof(buf));
    ck_assert_int_eq(meta_load(dfd, tdir, &st, &found, &err), DISKIO_ECORRUPT);
    put_file("meta", "", 0);
    ck_assert_int_eq(meta_load(dfd, tdir, &st, &found, &err), DISKIO_ECORRUPT);
}
END_TEST

START_TEST(test_store_error_reported)
{
    struct meta_state w = {.term = 1};
    struct diskio_err err;
    char path[128];

    /* The directory vanished under its descriptor: creating meta.tmp fails. */
    snprintf(path, sizeof(path), "%s", tdir);
    ck_assert_int_eq(rmdir(path), 0);
    ck_assert_int_eq(meta_store(dfd, tdir, &w, &nosync, &err), DISKIO_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "storage: create"));
    ck_assert_ptr_nonnull(strstr(err.msg, strerror(ENOENT)));
    ck_assert_int_eq(mkdir(path, 0700), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("meta");
    check_case(s, "codec",
               (const TTest *[]){test_codec_roundtrip, test_codec_every_flip_refused, NULL});
    TCase *tc = check_case(s, "file",
                           (const TTest *[]){test_missing_is_empty, test_store_load_replace,
                                             test_interrupted_update, test_checksum_failure_refused,
                                             test_short_and_long_file_refused,
                                             test_store_error_reported, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);
    return scratch_run(s, base, sizeof(base), "meta");
}
