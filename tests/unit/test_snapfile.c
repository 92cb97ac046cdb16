/*
 * test_snapfile.c - snapshot files: names, header codec, streaming writer, verification,
 * retention of the last two, leftovers, and through the storage facade: a damaged newest
 * snapshot is never loaded, the older one is used only when the log covers the gap (the
 * pure rule, storage_fallback_check, and the refusal's exact message).
 */
#include "scratch.h"
#include "snapfile.h"
#include "storage.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
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

static size_t count_files(const char *suffix)
{
    DIR *d = opendir(tdir);
    struct dirent *de;
    size_t n = 0, sl = strlen(suffix);
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l >= sl && strcmp(de->d_name + l - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static void flip_byte(const char *name, off_t off)
{
    char path[160];
    uint8_t b;
    int fd;
    snprintf(path, sizeof(path), "%s/%s", tdir, name);
    fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &b, 1, off), 1);
    b ^= 0x08;
    ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

static void save(uint64_t index, uint64_t term, const void *cfg, uint32_t cfg_len, const void *data,
                 size_t len)
{
    struct snapfile_writer *w;
    struct diskio_err err;
    ck_assert_int_eq(snapfile_create(dfd, tdir, index, term, cfg, cfg_len, &nosync, &w, &err),
                     DISKIO_OK);
    ck_assert_int_eq(snapfile_append(w, data, len, &err), DISKIO_OK);
    ck_assert_int_eq(snapfile_commit(w, &err), DISKIO_OK);
}

/* ================================================================ codec */

START_TEST(test_names)
{
    char name[SNAPFILE_NAME_MAX];
    uint64_t i, t;

    snapfile_name(name, 0xabc, 7);
    ck_assert_str_eq(name, "snap-0000000000000abc-0000000000000007.snap");
    ck_assert_int_eq(snapfile_parse_name(name, &i, &t), 0);
    ck_assert_uint_eq(i, 0xabc);
    ck_assert_uint_eq(t, 7);
    ck_assert_int_eq(
        snapfile_parse_name("snap-0000000000000abc-0000000000000007.snap.corrupt", &i, &t), -1);
    ck_assert_int_eq(snapfile_parse_name("snap-0000000000000ABC-0000000000000007.snap", &i, &t),
                     -1);
    ck_assert_int_eq(snapfile_parse_name("snap-0000000000000abc_0000000000000007.snap", &i, &t),
                     -1);
    ck_assert_int_eq(snapfile_parse_name("meta", &i, &t), -1);
}
END_TEST

START_TEST(test_header_codec)
{
    struct snapfile_meta m = {.index = 10,
                              .term = 2,
                              .data_len = 12345,
                              .config_len = 17,
                              .crc = 0xcafe},
                         g;
    uint8_t buf[SNAPFILE_HEADER_SIZE];
    const char *why;
    size_t at;

    snapfile_encode_header(&m, buf);
    ck_assert_int_eq(snapfile_decode_header(buf, &g, &why, &at), 0);
    ck_assert_uint_eq(g.index, 10);
    ck_assert_uint_eq(g.term, 2);
    ck_assert_uint_eq(g.data_len, 12345);
    ck_assert_uint_eq(g.config_len, 17);
    ck_assert_uint_eq(g.crc, 0xcafe);
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] ^= 0x80;
        ck_assert_int_eq(snapfile_decode_header(buf, &g, &why, &at), -1);
        buf[i] ^= 0x80;
    }
}
END_TEST

/* ================================================================ files */

START_TEST(test_write_verify_read)
{
    struct snapfile_meta m;
    struct diskio_err err;
    uint8_t *cfg, *data = malloc(3 << 20), *back = malloc(3 << 20);
    struct snapfile_writer *w;
    char name[SNAPFILE_NAME_MAX];

    for (size_t i = 0; i < (3u << 20); i++)
        data[i] = (uint8_t)(i * 13 + (i >> 12));
    /* Streamed in uneven pieces, some bigger than the writer's buffer. */
    ck_assert_int_eq(snapfile_create(dfd, tdir, 77, 3, "config!", 7, &dosync, &w, &err), DISKIO_OK);
    for (size_t off = 0, step = 1; off < (3u << 20); step = step * 3 + 1) {
        size_t n = step % 700000;
        if (n > (3u << 20) - off)
            n = (3u << 20) - off;
        ck_assert_int_eq(snapfile_append(w, data + off, n, &err), DISKIO_OK);
        off += n;
    }
    ck_assert_int_eq(count_files(".snap"), 0); /* not visible before commit */
    ck_assert_int_eq(snapfile_commit(w, &err), DISKIO_OK);
    ck_assert_int_eq(count_files(".snap"), 1);

    snapfile_name(name, 77, 3);
    ck_assert_int_eq(snapfile_verify(dfd, tdir, name, &m, &cfg, &err), DISKIO_OK);
    ck_assert_uint_eq(m.index, 77);
    ck_assert_uint_eq(m.term, 3);
    ck_assert_uint_eq(m.data_len, 3u << 20);
    ck_assert_uint_eq(m.config_len, 7);
    ck_assert_mem_eq(cfg, "config!", 7);
    free(cfg);
    ck_assert_int_eq(snapfile_read_data(dfd, tdir, name, back, 3u << 20, &err), DISKIO_OK);
    ck_assert_int_eq(memcmp(back, data, 3u << 20), 0);
    ck_assert_int_eq(snapfile_read_data(dfd, tdir, name, back, 5, &err), DISKIO_EINVAL);
    free(data);
    free(back);
}
END_TEST

START_TEST(test_empty_snapshot)
{
    struct snapfile_meta m;
    struct diskio_err err;
    uint8_t *cfg = (uint8_t *)1;
    char name[SNAPFILE_NAME_MAX];

    save(1, 1, NULL, 0, NULL, 0);
    snapfile_name(name, 1, 1);
    ck_assert_int_eq(snapfile_verify(dfd, tdir, name, &m, &cfg, &err), DISKIO_OK);
    ck_assert_ptr_null(cfg);
    ck_assert_uint_eq(m.data_len, 0);
}
END_TEST

START_TEST(test_abort_leaves_nothing)
{
    struct snapfile_writer *w;
    struct diskio_err err;

    ck_assert_int_eq(snapfile_create(dfd, tdir, 5, 1, NULL, 0, &nosync, &w, &err), DISKIO_OK);
    ck_assert_int_eq(snapfile_append(w, "abc", 3, &err), DISKIO_OK);
    ck_assert_uint_eq(count_files(""), 3); /* . .. and the tmp file */
    snapfile_abort(w);
    ck_assert_uint_eq(count_files(""), 2);
    snapfile_abort(NULL);
}
END_TEST

START_TEST(test_corruption_detected)
{
    struct snapfile_meta m;
    struct diskio_err err;
    char name[SNAPFILE_NAME_MAX], path[160], moved[SNAPFILE_NAME_MAX];
    uint8_t data[1000], back[1000];

    memset(data, 0x5a, sizeof(data));
    save(9, 2, "c", 1, data, sizeof(data));
    snapfile_name(name, 9, 2);
    snprintf(path, sizeof(path), "%s/%s", tdir, name);

    flip_byte(name, 500);
    ck_assert_int_eq(snapfile_verify(dfd, tdir, name, &m, NULL, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, name));
    ck_assert_ptr_nonnull(strstr(err.msg, "offset 64: checksum mismatch"));
    ck_assert_int_eq(snapfile_read_data(dfd, tdir, name, back, sizeof(back), &err),
                     DISKIO_ECORRUPT);
    flip_byte(name, 500);
    ck_assert_int_eq(snapfile_verify(dfd, tdir, name, &m, NULL, &err), DISKIO_OK);

    flip_byte(name, 20); /* header (index field) */
    ck_assert_int_eq(snapfile_verify(dfd, tdir, name, &m, NULL, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "header checksum mismatch"));
    flip_byte(name, 20);

    ck_assert_int_eq(truncate(path, 700), 0); /* shorter than the header says */
    ck_assert_int_eq(snapfile_verify(dfd, tdir, name, &m, NULL, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "offset 700"));
    ck_assert_int_eq(truncate(path, 30), 0);
    ck_assert_int_eq(snapfile_verify(dfd, tdir, name, &m, NULL, &err), DISKIO_ECORRUPT);

    /* A valid file under another snapshot's name. */
    save(9, 2, "c", 1, data, sizeof(data));
    snapfile_name(moved, 10, 2);
    snprintf(path, sizeof(path), "%s/%s", tdir, name);
    {
        char to[256];
        snprintf(to, sizeof(to), "%s/%s", tdir, moved);
        ck_assert_int_eq(rename(path, to), 0);
    }
    ck_assert_int_eq(snapfile_verify(dfd, tdir, moved, &m, NULL, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "the name another"));
}
END_TEST

START_TEST(test_list_retain_tmp)
{
    struct snapfile_entry *v;
    struct diskio_err err;
    struct snapfile_writer *w;
    size_t n;
    char path[160];
    int fd;

    for (uint64_t i = 1; i <= 5; i++)
        save(i * 10, 1, NULL, 0, "x", 1);
    /* an unrelated file, a quarantined one, and an unfinished one */
    snprintf(path, sizeof(path), "%s/notes.txt", tdir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    close(fd);
    snprintf(path, sizeof(path), "%s/snap-00000000000003e8-0000000000000001.snap.corrupt", tdir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    close(fd);
    ck_assert_int_eq(snapfile_create(dfd, tdir, 99, 1, NULL, 0, &nosync, &w, &err), DISKIO_OK);

    ck_assert_int_eq(snapfile_list(dfd, tdir, &v, &n, &err), DISKIO_OK);
    ck_assert_uint_eq(n, 5);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(v[i].index, (i + 1) * 10);
    free(v);
    ck_assert_int_eq(snapfile_retain(dfd, tdir, 2, &dosync, &err), DISKIO_OK);
    ck_assert_int_eq(snapfile_list(dfd, tdir, &v, &n, &err), DISKIO_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(v[0].index, 40);
    ck_assert_uint_eq(v[1].index, 50);
    free(v);
    ck_assert_uint_eq(count_files(".corrupt"), 1);
    ck_assert_uint_eq(count_files(".txt"), 1);

    snapfile_abort(w); /* close it; recreate a leftover by hand */
    snprintf(path, sizeof(path), "%s/snap-0000000000000063-0000000000000001.snap.tmp-0123", tdir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    close(fd);
    ck_assert_int_eq(snapfile_remove_tmp(dfd, tdir, &err), DISKIO_OK);
    ck_assert_int_eq(access(path, F_OK), -1);
    ck_assert_uint_eq(count_files(".snap"), 2);
}
END_TEST

/* ================================================================ through the storage */

static struct storage_options opts(void)
{
    struct storage_options o;
    storage_options_default(&o);
    o.fsync = false;
    return o;
}

static void append(struct storage *st, uint64_t first, size_t n, uint64_t term)
{
    struct wal_entry *e = calloc(n, sizeof(*e));
    struct storage_write w = {.entries = e, .n_entries = n};
    struct pollfd pfd;
    struct storage_done d;
    struct diskio_err err;

    for (size_t i = 0; i < n; i++) {
        e[i].index = first + i;
        e[i].term = term;
        e[i].type = 1;
        e[i].len = 8;
        e[i].data = (const uint8_t *)&e[i].index;
    }
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    free(e);
    pfd.fd = storage_event_fd(st);
    pfd.events = POLLIN;
    while (storage_poll(st, &d, 1) == 0)
        ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
    ck_assert_int_eq(d.status, DISKIO_OK);
}

static struct storage *open_ok(struct storage_recovered *rec)
{
    struct storage_options o = opts();
    struct storage *st;
    struct diskio_err err;
    ck_assert_msg(storage_open(tdir, &o, &st, rec, &err) == DISKIO_OK, "%s", err.msg);
    return st;
}

START_TEST(test_storage_keeps_last_two)
{
    struct storage_recovered rec;
    struct storage *st = open_ok(&rec);
    struct storage_snapshot *s;
    struct diskio_err err;

    storage_recovered_free(&rec);
    append(st, 1, 100, 1);
    for (uint64_t i = 1; i <= 4; i++)
        ck_assert_int_eq(storage_snapshot_save(st, i * 20, 1, "cfg", 3, "data", 4, &err),
                         DISKIO_OK);
    ck_assert_uint_eq(count_files(".snap"), 2);
    /* Streaming, and an aborted one that leaves nothing. */
    ck_assert_int_eq(storage_snapshot_begin(st, 90, 1, NULL, 0, &s, &err), DISKIO_OK);
    ck_assert_int_eq(storage_snapshot_write(s, "ab", 2, &err), DISKIO_OK);
    storage_snapshot_abort(s);
    ck_assert_int_eq(storage_snapshot_begin(st, 95, 1, "c2", 2, &s, &err), DISKIO_OK);
    ck_assert_int_eq(storage_snapshot_write(s, "abc", 3, &err), DISKIO_OK);
    ck_assert_int_eq(storage_snapshot_write(s, "def", 3, &err), DISKIO_OK);
    ck_assert_int_eq(storage_snapshot_commit(s, &err), DISKIO_OK);
    ck_assert_uint_eq(count_files(".snap"), 2);
    ck_assert_uint_eq(count_files(".snap.tmp"), 0);
    storage_close(st);

    st = open_ok(&rec);
    ck_assert(rec.has_snapshot);
    ck_assert_uint_eq(rec.snapshot.index, 95);
    ck_assert_mem_eq(rec.snapshot.config, "c2", 2);
    ck_assert_uint_eq(rec.snapshot.data_len, 6);
    {
        char buf[7] = {0};
        ck_assert_int_eq(storage_snapshot_read(st, &rec.snapshot, buf, 6, &err), DISKIO_OK);
        ck_assert_str_eq(buf, "abcdef");
    }
    ck_assert_uint_eq(rec.n_entries, 5);
    ck_assert_uint_eq(rec.entries[0].index, 96);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

START_TEST(test_storage_removes_tmp_at_open)
{
    struct storage_recovered rec;
    struct storage *st = open_ok(&rec);
    const char *left[] = {"snap-0000000000000007-0000000000000001.snap.tmp-00ff00ff00ff00ff",
                          "meta.tmp", "wal-0000000000000002.log.tmp"};
    char path[160];
    struct dirent *de;
    DIR *d;

    storage_recovered_free(&rec);
    append(st, 1, 10, 1);
    storage_close(st);
    /* What a crash in the middle of each kind of write leaves behind. */
    for (size_t i = 0; i < 3; i++) {
        int fd;
        snprintf(path, sizeof(path), "%s/%s", tdir, left[i]);
        fd = open(path, O_CREAT | O_WRONLY, 0600);
        ck_assert_int_eq(write(fd, "half-written", 12), 12);
        close(fd);
    }
    st = open_ok(&rec);
    ck_assert(!rec.has_snapshot);
    ck_assert_uint_eq(rec.n_entries, 10);
    d = opendir(tdir);
    while ((de = readdir(d)) != NULL)
        ck_assert_msg(strstr(de->d_name, ".tmp") == NULL, "left: %s", de->d_name);
    closedir(d);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

/* The newest snapshot is damaged; the log still covers the older one: fall back, loudly. */
START_TEST(test_storage_falls_back_when_log_covers)
{
    struct storage_recovered rec;
    struct storage *st = open_ok(&rec);
    struct diskio_err err;
    char name[SNAPFILE_NAME_MAX];

    storage_recovered_free(&rec);
    append(st, 1, 100, 1);
    ck_assert_int_eq(storage_snapshot_save(st, 40, 1, "old", 3, "forty", 5, &err), DISKIO_OK);
    ck_assert_int_eq(storage_snapshot_save(st, 80, 1, "new", 3, "eighty", 6, &err), DISKIO_OK);
    storage_close(st);
    snapfile_name(name, 80, 1);
    flip_byte(name, 64 + 4);

    st = open_ok(&rec);
    ck_assert(rec.has_snapshot);
    ck_assert_uint_eq(rec.snapshot.index, 40);
    ck_assert_mem_eq(rec.snapshot.config, "old", 3);
    ck_assert_uint_eq(rec.n_entries, 60);
    ck_assert_uint_eq(rec.entries[0].index, 41);
    ck_assert_uint_eq(count_files(".corrupt"), 1);
    storage_recovered_free(&rec);
    storage_close(st);
    /* It stays out of the way afterwards. */
    st = open_ok(&rec);
    ck_assert_uint_eq(rec.snapshot.index, 40);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

/* Damaged newest snapshot and nothing to replace it with: refuse, naming it. */
START_TEST(test_storage_refuses_damaged_only_snapshot)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&rec);
    struct diskio_err err;
    char name[SNAPFILE_NAME_MAX];

    storage_recovered_free(&rec);
    append(st, 1, 10, 1);
    ck_assert_int_eq(storage_snapshot_save(st, 5, 1, NULL, 0, "five", 4, &err), DISKIO_OK);
    storage_close(st);
    snapfile_name(name, 5, 1);
    flip_byte(name, 66);
    st = NULL;
    ck_assert_int_eq(storage_open(tdir, &o, &st, &rec, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(err.msg, name));
    ck_assert_ptr_nonnull(strstr(err.msg, "offset 64"));
    ck_assert_ptr_nonnull(strstr(err.msg, "no older snapshot"));
    ck_assert_ptr_nonnull(strstr(err.msg, "Refusing to start"));
    ck_assert_ptr_nonnull(strstr(err.msg, "restore the state directory from a backup"));
    /* Refusing changed nothing: the file is still there under its name. */
    ck_assert_uint_eq(count_files(".snap"), 1);
    ck_assert_uint_eq(count_files(".corrupt"), 0);
}
END_TEST

/* Damaged newest snapshot that was installed (the log was reset past the older one). */
START_TEST(test_storage_refuses_when_log_does_not_cover)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&rec);
    struct storage_install in = {.index = 500, .term = 2, .data = "remote", .data_len = 6};
    struct storage_write w = {.install = &in};
    struct diskio_err err;
    struct storage_done d;
    struct pollfd pfd;
    char name[SNAPFILE_NAME_MAX];

    storage_recovered_free(&rec);
    append(st, 1, 50, 1);
    ck_assert_int_eq(storage_snapshot_save(st, 30, 1, NULL, 0, "local", 5, &err), DISKIO_OK);
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    pfd.fd = storage_event_fd(st);
    pfd.events = POLLIN;
    while (storage_poll(st, &d, 1) == 0)
        ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
    ck_assert_int_eq(d.status, DISKIO_OK);
    append(st, 501, 5, 2);
    storage_close(st);
    snapfile_name(name, 500, 2);
    flip_byte(name, 0); /* magic */
    st = NULL;
    ck_assert_int_eq(storage_open(tdir, &o, &st, &rec, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, name));
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot replace it"));
    /* The install reset the log past the older snapshot: 31..500 are gone. */
    ck_assert_ptr_nonnull(
        strstr(err.msg, "the log must hold entries 31..500 but lacks 31..500 (it holds 501..505)"));
    ck_assert_ptr_null(strstr(err.msg, "torn"));
    ck_assert_ptr_nonnull(strstr(err.msg, "move the state directory"));
}
END_TEST

/* ---------------------------------------------------------------- the fallback rule */

/* entries first..last, with term t1 up to (and including) split and t2 after it */
static struct wal_entry *mklog(uint64_t first, uint64_t last, uint64_t split, uint64_t t1,
                               uint64_t t2, size_t *n)
{
    struct wal_entry *v;
    *n = last >= first ? (size_t)(last - first + 1) : 0;
    v = calloc(*n + 1, sizeof(*v));
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < *n; i++) {
        v[i].index = first + i;
        v[i].term = v[i].index <= split ? t1 : t2;
    }
    return v;
}

struct fb_case {
    uint64_t first, last; /* the log (first > last: empty) */
    bool ok;
    size_t n_missing;
    uint64_t m0a, m0b, m1a, m1b;
};

/* Older snapshot at 40, damaged newest at 80, one term: which logs can replace it. */
START_TEST(test_fallback_rule_ranges)
{
    static const struct fb_case cases[] = {
        {41, 100, true, 0, 0, 0, 0, 0},    /* starts right after the older one */
        {1, 100, true, 0, 0, 0, 0, 0},     /* starts before it (nothing compacted) */
        {41, 80, true, 0, 0, 0, 0, 0},     /* exactly the gap */
        {1, 0, false, 1, 41, 80, 0, 0},    /* empty */
        {61, 100, false, 1, 41, 60, 0, 0}, /* compacted past the older snapshot */
        {1, 70, false, 1, 71, 80, 0, 0},   /* lost its tail (torn-tail repair) */
        {1, 79, false, 1, 80, 80, 0, 0},   /* one entry short */
        {42, 79, false, 2, 41, 41, 80, 80}, {50, 70, false, 2, 41, 49, 71, 80},
        {90, 100, false, 1, 41, 80, 0, 0}, /* starts after the damaged one (an install) */
        {1, 30, false, 1, 41, 80, 0, 0},   /* ends before the older one */
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const struct fb_case *c = &cases[k];
        struct storage_fallback f;
        size_t n;
        struct wal_entry *v = mklog(c->first, c->last, UINT64_MAX, 1, 1, &n);

        storage_fallback_check(40, 1, 80, 1, v, n, &f);
        ck_assert_msg(f.ok == c->ok, "case %zu", k);
        ck_assert_uint_eq(f.need_first, 41);
        ck_assert_uint_eq(f.need_last, 80);
        ck_assert_uint_eq(f.have_first, n > 0 ? c->first : 0);
        ck_assert_uint_eq(f.have_last, n > 0 ? c->last : 0);
        ck_assert_msg(f.n_missing == c->n_missing, "case %zu: %zu missing ranges", k, f.n_missing);
        if (c->n_missing > 0) {
            ck_assert_uint_eq(f.missing[0][0], c->m0a);
            ck_assert_uint_eq(f.missing[0][1], c->m0b);
        }
        if (c->n_missing > 1) {
            ck_assert_uint_eq(f.missing[1][0], c->m1a);
            ck_assert_uint_eq(f.missing[1][1], c->m1b);
        }
        ck_assert(!f.newest_term_differs && !f.older_term_differs);
        free(v);
    }
}
END_TEST

/* The log covers the range but belongs to another history: refuse. */
START_TEST(test_fallback_rule_terms)
{
    struct storage_fallback f;
    size_t n;
    struct wal_entry *v = mklog(1, 100, 60, 1, 2, &n); /* term 1 up to 60, then 2 */

    storage_fallback_check(40, 1, 80, 2, v, n, &f); /* agrees at 40 and at 80 */
    ck_assert(f.ok);
    storage_fallback_check(40, 1, 80, 3, v, n, &f); /* the damaged one says term 3 at 80 */
    ck_assert(!f.ok);
    ck_assert(f.newest_term_differs);
    ck_assert_uint_eq(f.log_term, 2);
    ck_assert_uint_eq(f.n_missing, 0);
    storage_fallback_check(40, 2, 80, 2, v, n, &f); /* the older one says term 2 at 40 */
    ck_assert(!f.ok);
    ck_assert(f.older_term_differs);
    ck_assert_uint_eq(f.log_term, 1);
    /* A log that starts after the older index cannot contradict it: only the newest counts. */
    free(v);
    v = mklog(41, 100, 60, 1, 2, &n);
    storage_fallback_check(40, 7, 80, 2, v, n, &f);
    ck_assert(f.ok);
    /* Two snapshots at one index (different terms): the log must hold it with the newest's
     * term, and with the older's term too, which cannot both hold. */
    storage_fallback_check(80, 1, 80, 2, v, n, &f);
    ck_assert(!f.ok);
    ck_assert_uint_eq(f.need_first, 80);
    ck_assert_uint_eq(f.need_last, 80);
    free(v);
}
END_TEST

/* Where the first segment's second batch starts after two append() calls of 20 entries. */
#define BATCH2_OFF (64 + 32 + 20 * (32 + 8))

static void garble(const char *name, off_t off, size_t len)
{
    char path[160];
    uint8_t junk[64];
    int fd;
    memset(junk, 0x5A, sizeof(junk));
    ck_assert_uint_le(len, sizeof(junk));
    snprintf(path, sizeof(path), "%s/%s", tdir, name);
    fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, junk, len, off), (ssize_t)len);
    close(fd);
}

/*
 * The newest snapshot is damaged, and the log lost the entries after the older one to a
 * torn tail: refuse with the exact message (which file, what is missing, what to do), and
 * change nothing - not even the torn tail's repair - so the evidence stays.
 */
START_TEST(test_storage_refuses_after_torn_tail_with_exact_message)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&rec);
    struct diskio_err err;
    char newest[SNAPFILE_NAME_MAX], older[SNAPFILE_NAME_MAX], want[DISKIO_MSG_MAX];
    struct stat sb;

    storage_recovered_free(&rec);
    append(st, 1, 20, 1);  /* batch 1: entries 1..20 */
    append(st, 21, 20, 1); /* batch 2: entries 21..40, at BATCH2_OFF */
    ck_assert_int_eq(storage_snapshot_save(st, 20, 1, NULL, 0, "twenty", 6, &err), DISKIO_OK);
    ck_assert_int_eq(storage_snapshot_save(st, 40, 1, NULL, 0, "forty", 5, &err), DISKIO_OK);
    storage_close(st);
    snapfile_name(older, 20, 1);
    snapfile_name(newest, 40, 1);
    flip_byte(newest, 64 + 1);
    garble("wal-0000000000000001.log", BATCH2_OFF, 40); /* header and first frame */

    st = NULL;
    ck_assert_int_eq(storage_open(tdir, &o, &st, &rec, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_null(st);
    snprintf(want, sizeof(want),
             "storage: corrupt snapshot %s/%s at offset 64: checksum mismatch in the 5 bytes "
             "of configuration and data; the older snapshot %s (index 20) cannot replace it: "
             "the log must hold entries 21..40 but lacks 21..40 (it holds 1..20); the log ends "
             "in a torn tail at offset %d of wal-0000000000000001.log. Refusing to start: this "
             "replica cannot rebuild its state. In a cluster, and only while the other "
             "replicas form a quorum with a leader: move the state directory %s aside and "
             "start this replica empty; the leader catches it up. A single replica: restore "
             "the state directory from a backup (docs/storage-format.md)",
             tdir, newest, older, BATCH2_OFF, tdir);
    ck_assert_str_eq(err.msg, want);
    /* Nothing changed: both snapshots under their names, the torn bytes still there. */
    ck_assert_uint_eq(count_files(".snap"), 2);
    ck_assert_uint_eq(count_files(".corrupt"), 0);
    {
        char path[160];
        uint8_t b = 0;
        int fd;
        snprintf(path, sizeof(path), "%s/wal-0000000000000001.log", tdir);
        ck_assert_int_eq(stat(path, &sb), 0);
        fd = open(path, O_RDONLY);
        ck_assert_int_eq(pread(fd, &b, 1, BATCH2_OFF), 1);
        close(fd);
        ck_assert_uint_eq(b, 0x5A);
    }
    /* And it refuses the same way every time (no half-made repair on the first try). */
    ck_assert_int_eq(storage_open(tdir, &o, &st, &rec, &err), DISKIO_ECORRUPT);
    ck_assert_str_eq(err.msg, want);
}
END_TEST

/* The same damage but the log keeps its tail: the fallback works, and says so. */
START_TEST(test_storage_falls_back_with_both_batches)
{
    struct storage_recovered rec;
    struct storage *st = open_ok(&rec);
    struct diskio_err err;
    char newest[SNAPFILE_NAME_MAX];

    storage_recovered_free(&rec);
    append(st, 1, 20, 1);
    append(st, 21, 20, 1);
    ck_assert_int_eq(storage_snapshot_save(st, 20, 1, NULL, 0, "twenty", 6, &err), DISKIO_OK);
    ck_assert_int_eq(storage_snapshot_save(st, 40, 1, NULL, 0, "forty", 5, &err), DISKIO_OK);
    storage_close(st);
    snapfile_name(newest, 40, 1);
    flip_byte(newest, 64 + 1);
    st = open_ok(&rec);
    ck_assert_uint_eq(rec.snapshot.index, 20);
    ck_assert_uint_eq(rec.n_entries, 20);
    ck_assert_uint_eq(rec.entries[0].index, 21);
    ck_assert_uint_eq(rec.last_index, 40);
    ck_assert_uint_eq(count_files(".corrupt"), 1);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

/*
 * A state directory with snapshots and no log segment (found by fuzz_snapfile). Without
 * segments recovery has no entry array (NULL), and it used to compute NULL + 0 for the
 * empty log, which is undefined (clang's UBSan stops there). A valid snapshot alone is
 * recovered with an empty log after it; a damaged newest one beside an older one is refused,
 * since an empty log covers nothing.
 */
START_TEST(test_storage_snapshot_without_log)
{
    struct storage_recovered rec;
    struct storage *st;
    struct diskio_err err;
    char data[5];

    save(7, 2, "cfg", 3, "seven", 5);
    st = open_ok(&rec);
    ck_assert(rec.has_snapshot);
    ck_assert_uint_eq(rec.snapshot.index, 7);
    ck_assert_uint_eq(rec.n_entries, 0);
    ck_assert_uint_eq(rec.last_index, 7);
    ck_assert_uint_eq(rec.last_term, 2);
    ck_assert_int_eq(storage_snapshot_read(st, &rec.snapshot, data, 5, &err), DISKIO_OK);
    ck_assert_mem_eq(data, "seven", 5);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

START_TEST(test_storage_refuses_damaged_newest_without_log)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = NULL;
    struct diskio_err err;
    char name[SNAPFILE_NAME_MAX];

    save(1, 1, NULL, 0, "one", 3);
    save(5, 1, NULL, 0, "five", 4);
    snapfile_name(name, 5, 1);
    flip_byte(name, 66);
    ck_assert_int_eq(storage_open(tdir, &o, &st, &rec, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_null(st);
    ck_assert_ptr_nonnull(strstr(err.msg, name));
    ck_assert_ptr_nonnull(strstr(err.msg, "lacks 2..5 (it holds no entries)"));
    ck_assert_uint_eq(count_files(".snap"), 2);
    ck_assert_uint_eq(count_files(".corrupt"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("snapfile");
    check_case(s, "codec", (const TTest *[]){test_names, test_header_codec, NULL});
    TCase *tc = check_case(s, "files",
                           (const TTest *[]){test_write_verify_read, test_empty_snapshot,
                                             test_abort_leaves_nothing, test_corruption_detected,
                                             test_list_retain_tmp, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);
    tc = check_case(s, "storage",
                    (const TTest *[]){test_storage_keeps_last_two, test_storage_removes_tmp_at_open,
                                      test_storage_falls_back_when_log_covers,
                                      test_storage_refuses_damaged_only_snapshot,
                                      test_storage_refuses_when_log_does_not_cover,
                                      test_storage_refuses_after_torn_tail_with_exact_message,
                                      test_storage_falls_back_with_both_batches,
                                      test_storage_snapshot_without_log,
                                      test_storage_refuses_damaged_newest_without_log, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);
    check_case(s, "fallback rule",
               (const TTest *[]){test_fallback_rule_ranges, test_fallback_rule_terms, NULL});
    return scratch_run(s, base, sizeof(base), "snap");
}
