/*
 * test_wal.c - the log: segment header and names, replay rules, recovery of every torn-tail
 * shape, refusal of corruption with file and offset, the write path through the storage
 * facade (completions, truncation, rotation, compaction, installs) and a crash test that
 * SIGKILLs a writer mid-stream. The batch codec on its own is tested in test_wal_codec.c.
 */
#include "crc32c.h"
#include "scratch.h"
#include "storage.h"
#include "wal.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Every test works in its own directory under base; main() removes base at the end, so
 * a failed test (whose teardown Check skips) leaves nothing behind either. */
static char base[64];
static char tdir[96];

static void setup(void)
{
    scratch_make(tdir, sizeof(tdir), base);
}

static void teardown(void)
{
    scratch_remove(tdir);
}

static void seg_path(char *out, size_t len, uint64_t seq)
{
    char name[WAL_NAME_MAX];
    wal_seg_name(name, seq);
    snprintf(out, len, "%s/%s", tdir, name);
}

/* Deterministic payload of an entry, so any entry can be checked on its own. */
static uint32_t payload_len(uint64_t index)
{
    return (uint32_t)(index * 37 % 300);
}

static void fill(uint8_t *buf, uint64_t index, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(index * 131 + i * 7 + 1);
}

static int payload_ok(const struct wal_entry *e)
{
    uint8_t buf[512];
    if (e->len != payload_len(e->index))
        return 0;
    fill(buf, e->index, e->len);
    return e->len == 0 || memcmp(buf, e->data, e->len) == 0;
}

static struct storage_options opts(void)
{
    struct storage_options o;
    storage_options_default(&o);
    o.fsync = false;
    return o;
}

static struct storage *open_ok(const struct storage_options *o, struct storage_recovered *rec)
{
    struct storage *st = NULL;
    struct diskio_err err = {0};
    int rc = storage_open(tdir, o, &st, rec, &err);
    ck_assert_msg(rc == DISKIO_OK, "open failed: %d %s", rc, err.msg);
    return st;
}

static int open_fails(const struct storage_options *o, struct diskio_err *err)
{
    struct storage *st = NULL;
    struct storage_recovered rec;
    int rc = storage_open(tdir, o, &st, &rec, err);
    ck_assert_ptr_null(st);
    return rc;
}

/* Wait for exactly one completion. */
static struct storage_done wait_one(struct storage *st)
{
    struct storage_done d;
    struct pollfd pfd = {.fd = storage_event_fd(st), .events = POLLIN};
    for (;;) {
        if (storage_poll(st, &d, 1) == 1)
            return d;
        ck_assert_int_ge(poll(&pfd, 1, 10000), 1);
    }
}

/* Append entries first..first+n-1 with term in one request and wait for it. */
static void append(struct storage *st, uint64_t first, size_t n, uint64_t term)
{
    struct wal_entry *e = calloc(n, sizeof(*e));
    uint8_t *data = malloc(n * 300 + 1);
    struct storage_write w = {0};
    struct diskio_err err;
    struct storage_done d;
    size_t off = 0;

    for (size_t i = 0; i < n; i++) {
        e[i].index = first + i;
        e[i].term = term;
        e[i].type = 1;
        e[i].len = payload_len(first + i);
        e[i].data = data + off;
        fill(data + off, first + i, e[i].len);
        off += e[i].len;
    }
    w.entries = e;
    w.n_entries = n;
    w.cookie = (void *)(uintptr_t)(first + n);
    ck_assert_msg(storage_submit(st, &w, &err) == DISKIO_OK, "%s", err.msg);
    /* The caller's buffers may go away at once: the request holds copies. */
    memset(data, 0xee, n * 300 + 1);
    free(data);
    free(e);
    d = wait_one(st);
    ck_assert_int_eq(d.status, DISKIO_OK);
    ck_assert_ptr_eq(d.cookie, (void *)(uintptr_t)(first + n));
    ck_assert_uint_eq(d.last_index, first + n - 1);
    ck_assert_uint_eq(d.last_term, term);
}

static void check_entries(const struct storage_recovered *rec, uint64_t first, uint64_t last)
{
    ck_assert_uint_eq(rec->n_entries, last >= first ? last - first + 1 : 0);
    for (size_t i = 0; i < rec->n_entries; i++) {
        ck_assert_uint_eq(rec->entries[i].index, first + i);
        ck_assert_msg(payload_ok(&rec->entries[i]), "payload of %" PRIu64 " differs",
                      rec->entries[i].index);
    }
}

static uint8_t *read_all(const char *path, size_t *len)
{
    struct stat sb;
    int fd = open(path, O_RDONLY);
    uint8_t *buf;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fstat(fd, &sb), 0);
    buf = malloc((size_t)sb.st_size + 1);
    ck_assert_int_eq(read(fd, buf, (size_t)sb.st_size), sb.st_size);
    close(fd);
    *len = (size_t)sb.st_size;
    return buf;
}

static void write_at(const char *path, size_t off, const void *p, size_t len)
{
    int fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, p, len, (off_t)off), (ssize_t)len);
    close(fd);
}

static void zero_at(const char *path, size_t off, size_t len)
{
    uint8_t *z = calloc(1, len);
    write_at(path, off, z, len);
    free(z);
}

static void flip_at(const char *path, size_t off)
{
    size_t len;
    uint8_t *img = read_all(path, &len);
    uint8_t b = img[off] ^ 0x40;
    write_at(path, off, &b, 1);
    free(img);
}

/* Offsets and sizes of the valid batches of a segment file. */
struct batches {
    size_t n;
    size_t off[4096];
    size_t size[4096];
    uint32_t salt;
};

static void find_batches(const char *path, struct batches *b)
{
    size_t len, pos = WAL_SEG_HEADER_SIZE, at;
    uint8_t *img = read_all(path, &len);
    struct wal_seg_header h;
    const char *why;

    ck_assert_int_eq(wal_codec_seg_header_decode(img, &h, &why, &at), 0);
    b->n = 0;
    b->salt = h.salt;
    while (pos < len && b->n < 4096) {
        struct wal_batch_info bi;
        size_t bad;
        if (wal_codec_batch_check(img + pos, len - pos, h.salt, &bi, &why, &bad) != WAL_CHECK_OK)
            break;
        b->off[b->n] = pos;
        b->size[b->n] = bi.size;
        b->n++;
        pos += bi.size;
    }
    free(img);
}

static uint32_t file_crc(const char *path)
{
    size_t len;
    uint8_t *img = read_all(path, &len);
    uint32_t c = crc32c_update(0, img, len);
    free(img);
    return c;
}

/* ================================================================ segment header, names */

START_TEST(test_seg_header_and_names)
{
    struct wal_seg_header h = {.seq = 0x1234,
                               .salt = 0xdeadbeef,
                               .first_batch = 99,
                               .capacity = 1 << 20,
                               .created_ms = 5},
                          g;
    uint8_t buf[WAL_SEG_HEADER_SIZE];
    char name[WAL_NAME_MAX];
    const char *why;
    size_t at;
    uint64_t seq;

    wal_codec_seg_header_encode(&h, buf);
    ck_assert_int_eq(wal_codec_seg_header_decode(buf, &g, &why, &at), 0);
    ck_assert_uint_eq(g.seq, h.seq);
    ck_assert_uint_eq(g.salt, h.salt);
    ck_assert_uint_eq(g.first_batch, 99);
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] ^= 0x10;
        ck_assert_int_eq(wal_codec_seg_header_decode(buf, &g, &why, &at), -1);
        buf[i] ^= 0x10;
    }
    wal_seg_name(name, 0x1234);
    ck_assert_str_eq(name, "wal-0000000000001234.log");
    ck_assert_int_eq(wal_seg_parse_name(name, &seq), 0);
    ck_assert_uint_eq(seq, 0x1234);
    ck_assert_int_eq(wal_seg_parse_name("wal-0000000000001234.log.tmp", &seq), -1);
    ck_assert_int_eq(wal_seg_parse_name("wal-000000000000123G.log", &seq), -1);
    ck_assert_int_eq(wal_seg_parse_name("wal-00000000000001234.log", &seq), -1);
}
END_TEST

/* ================================================================ replay rules */

static int apply(struct wal_replay *r, uint8_t kind, uint64_t index, uint64_t term)
{
    struct wal_record rec = {.kind = kind, .index = index, .term = term};
    const char *why;
    return wal_replay_apply(r, &rec, &why);
}

START_TEST(test_replay_rules)
{
    struct wal_entry v[64];
    struct wal_replay r;

    wal_replay_init(&r, v, 64);
    /* The first record may start anywhere (older segments may be compacted away). */
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 5, 1), 0);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 6, 1), 0);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 8, 1), -1); /* gap */
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 6, 1), -1); /* repeat without truncate */
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 7, 2), 0);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 8, 1), -1); /* term going back */
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 0, 9), -1);
    /* Truncate the suffix from 6, then rewrite it in a new term. */
    ck_assert_int_eq(apply(&r, WAL_KIND_TRUNCATE, 9, 0), -1); /* beyond next (8) */
    ck_assert_int_eq(apply(&r, WAL_KIND_TRUNCATE, 6, 0), 0);
    ck_assert_uint_eq(r.n - r.start, 1);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 6, 3), 0);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 7, 3), 0);
    ck_assert_uint_eq(r.v[r.n - 1].term, 3);
    /* A reset inside the log keeps what follows it. */
    ck_assert_int_eq(apply(&r, WAL_KIND_RESET, 6, 3), 0);
    ck_assert_uint_eq(r.n - r.start, 1);
    ck_assert_uint_eq(r.v[r.start].index, 7);
    /* A reset past the end empties the log and moves next. */
    ck_assert_int_eq(apply(&r, WAL_KIND_RESET, 20, 4), 0);
    ck_assert_uint_eq(r.n - r.start, 0);
    ck_assert_uint_eq(r.next, 21);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 8, 4), -1);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 21, 3), -1); /* below the reset's term */
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 21, 4), 0);
    /* Truncating everything. */
    ck_assert_int_eq(apply(&r, WAL_KIND_TRUNCATE, 21, 0), 0);
    ck_assert_uint_eq(r.n - r.start, 0);
    ck_assert_uint_eq(r.next, 21);
    ck_assert_int_eq(apply(&r, WAL_KIND_RESET, 0, 0), -1);
}
END_TEST

START_TEST(test_replay_capacity)
{
    struct wal_entry v[2];
    struct wal_replay r;

    wal_replay_init(&r, v, 2);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 1, 1), 0);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 2, 1), 0);
    ck_assert_int_eq(apply(&r, WAL_KIND_ENTRY, 3, 1), -1);
}
END_TEST

/* ================================================================ write path */

START_TEST(test_roundtrip_and_hard_state)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&o, &rec);
    struct storage_write w = {0};
    struct diskio_err err;
    struct storage_done d;
    struct storage_metrics m;

    ck_assert_uint_eq(rec.n_entries, 0);
    ck_assert_uint_eq(rec.term, 0);
    ck_assert(!rec.has_snapshot);
    storage_recovered_free(&rec);
    w.has_hard_state = true;
    w.term = 3;
    w.vote = 2;
    w.cookie = &w;
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    d = wait_one(st);
    ck_assert_ptr_eq(d.cookie, &w);
    ck_assert_uint_eq(d.last_index, 0);
    for (uint64_t i = 1; i <= 1000; i += 50)
        append(st, i, 50, 3);
    storage_metrics_get(st, &m);
    ck_assert_uint_eq(m.entries_written, 1000);
    ck_assert_uint_eq(m.last_index, 1000);
    ck_assert_uint_eq(m.last_term, 3);
    ck_assert_uint_eq(m.hard_states_written, 1);
    ck_assert_uint_eq(m.segments, 1);
    ck_assert_uint_gt(m.bytes_written, 1000 * 32);
    storage_close(st);

    st = open_ok(&o, &rec);
    ck_assert_uint_eq(rec.term, 3);
    ck_assert_uint_eq(rec.vote, 2);
    ck_assert_uint_eq(rec.last_index, 1000);
    ck_assert_uint_eq(rec.last_term, 3);
    check_entries(&rec, 1, 1000);
    ck_assert_int_eq(rec.entries[0].type, 1);
    storage_close(st);
    /* The recovered entries outlive the storage. */
    check_entries(&rec, 1, 1000);
    storage_recovered_free(&rec);
}
END_TEST

START_TEST(test_pipelined_completions_in_order)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&o, &rec);
    uint8_t data[300];
    size_t got = 0;

    storage_recovered_free(&rec);
    for (uint64_t i = 1; i <= 500; i++) {
        struct wal_entry e = {
            .index = i, .term = 1 + i / 100, .type = 1, .len = payload_len(i), .data = data};
        struct storage_write w = {.entries = &e, .n_entries = 1, .cookie = (void *)(uintptr_t)i};
        struct diskio_err err;
        fill(data, i, e.len);
        if (i % 100 == 0) {
            w.has_hard_state = true;
            w.term = e.term;
        }
        ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    }
    while (got < 500) {
        struct storage_done d[7];
        size_t n = storage_poll(st, d, 7);
        for (size_t k = 0; k < n; k++) {
            got++;
            ck_assert_ptr_eq(d[k].cookie, (void *)(uintptr_t)got);
            ck_assert_uint_eq(d[k].last_index, got);
            ck_assert_uint_eq(d[k].last_term, 1 + got / 100);
        }
        if (n == 0) {
            struct pollfd pfd = {.fd = storage_event_fd(st), .events = POLLIN};
            ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
        }
    }
    storage_close(st);
    st = open_ok(&o, &rec);
    check_entries(&rec, 1, 500);
    ck_assert_uint_eq(rec.term, 6);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

START_TEST(test_truncate_suffix)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&o, &rec);
    struct storage_write w = {0};
    struct diskio_err err;
    struct storage_done d;

    storage_recovered_free(&rec);
    append(st, 1, 10, 1);
    /* A new leader overwrites 6..8 in term 2: entries at or below the last index. */
    append(st, 6, 3, 2);
    /* An explicit truncate without entries. */
    w.truncate_from = 8;
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    d = wait_one(st);
    ck_assert_uint_eq(d.last_index, 7);
    ck_assert_uint_eq(d.last_term, 2);
    storage_close(st);

    st = open_ok(&o, &rec);
    check_entries(&rec, 1, 7);
    for (size_t i = 0; i < rec.n_entries; i++)
        ck_assert_uint_eq(rec.entries[i].term, i < 5 ? 1 : 2);
    storage_recovered_free(&rec);
    append(st, 8, 5, 2);
    storage_close(st);
    st = open_ok(&o, &rec);
    check_entries(&rec, 1, 12);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

START_TEST(test_submit_validation)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st;
    struct diskio_err err;
    uint8_t big[64];
    struct wal_entry e[2] = {{.index = 1, .term = 1, .type = 1}, {.index = 2, .term = 1}};
    struct storage_write w = {.entries = e, .n_entries = 1};

    o.max_entry_bytes = 32;
    st = open_ok(&o, &rec);
    storage_recovered_free(&rec);
    e[0].index = 2; /* gap: the log is empty */
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "storage: submit"));
    e[0].index = 1;
    e[0].len = 33;
    e[0].data = big;
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_EINVAL);
    e[0].len = 5;
    e[0].data = NULL;
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_EINVAL);
    e[0].len = 0;
    e[1].index = 3; /* not contiguous */
    w.n_entries = 2;
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_EINVAL);
    e[1].index = 2;
    e[1].term = 0; /* term going back */
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_EINVAL);
    e[0].term = 5;
    e[1].term = 5;
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    ck_assert_int_eq(wait_one(st).status, DISKIO_OK);
    /* Below the term of the entry before. */
    e[0].index = 3;
    e[0].term = 4;
    w.n_entries = 1;
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_EINVAL);
    w.n_entries = 0;
    w.truncate_from = 4; /* beyond last + 1 */
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_EINVAL);
    w.truncate_from = 3; /* last + 1: nothing to cut, accepted */
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    ck_assert_uint_eq(wait_one(st).last_index, 2);

    /* The hard state never goes back and a vote, once cast in a term, never changes. */
    {
        struct storage_write h = {.has_hard_state = true, .term = 5, .vote = 2};
        ck_assert_int_eq(storage_submit(st, &h, &err), DISKIO_OK);
        ck_assert_int_eq(wait_one(st).status, DISKIO_OK);
        h.term = 4;
        ck_assert_int_eq(storage_submit(st, &h, &err), DISKIO_EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "would undo"));
        h.term = 5;
        h.vote = 3;
        ck_assert_int_eq(storage_submit(st, &h, &err), DISKIO_EINVAL);
        h.vote = 2;
        ck_assert_int_eq(storage_submit(st, &h, &err), DISKIO_OK);
        ck_assert_int_eq(wait_one(st).status, DISKIO_OK);
        h.term = 6;
        h.vote = 0;
        ck_assert_int_eq(storage_submit(st, &h, &err), DISKIO_OK);
        ck_assert_int_eq(wait_one(st).status, DISKIO_OK);
    }
    storage_close(st);
    st = open_ok(&o, &rec);
    ck_assert_uint_eq(rec.term, 6);
    storage_recovered_free(&rec);
    {
        struct storage_write h = {.has_hard_state = true, .term = 5, .vote = 1};
        ck_assert_int_eq(storage_submit(st, &h, &err), DISKIO_EINVAL);
    }
    storage_close(st);

    /* Options that cannot work are refused. */
    o = opts();
    o.segment_bytes = 1024;
    ck_assert_int_eq(open_fails(&o, &err), DISKIO_EINVAL);
}
END_TEST

START_TEST(test_segment_rotation)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage_metrics m;
    struct storage *st;
    char path[256];
    struct stat sb;

    o.segment_bytes = 64 * 1024;
    o.max_entry_bytes = 8 * 1024;
    st = open_ok(&o, &rec);
    storage_recovered_free(&rec);
    for (uint64_t i = 1; i <= 3000; i += 100)
        append(st, i, 100, 1);
    storage_metrics_get(st, &m);
    ck_assert_uint_ge(m.segments, 5);
    ck_assert_uint_eq(m.segments_created, m.segments);
    storage_close(st);
    /* Segments are preallocated to their full size. */
    seg_path(path, sizeof(path), 1);
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_size, 64 * 1024);

    st = open_ok(&o, &rec);
    check_entries(&rec, 1, 3000);
    storage_recovered_free(&rec);
    append(st, 3001, 10, 2);
    storage_close(st);
    st = open_ok(&o, &rec);
    check_entries(&rec, 1, 3010);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

START_TEST(test_tmp_leftovers_removed)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&o, &rec);
    char path[256];
    int fd;

    storage_recovered_free(&rec);
    append(st, 1, 10, 1);
    storage_close(st);
    snprintf(path, sizeof(path), "%s/wal-0000000000000002.log.tmp", tdir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    ck_assert_int_ge(write(fd, "garbage", 7), 0);
    close(fd);
    st = open_ok(&o, &rec);
    check_entries(&rec, 1, 10);
    ck_assert_int_eq(access(path, F_OK), -1);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

START_TEST(test_fsync_metrics)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage_metrics m;
    struct storage *st;
    uint64_t sum = 0;

    o.fsync = true;
    st = open_ok(&o, &rec);
    storage_recovered_free(&rec);
    for (uint64_t i = 1; i <= 50; i += 10)
        append(st, i, 10, 1);
    storage_metrics_get(st, &m);
    /* One fdatasync per group commit at least, each timed into one bucket. */
    ck_assert_uint_ge(m.fsync_count, m.group_commits);
    ck_assert_uint_eq(m.group_commits, 5);
    for (int b = 0; b < STORAGE_FSYNC_BUCKETS; b++)
        sum += m.fsync_bucket[b];
    ck_assert_uint_eq(sum, m.fsync_count);
    ck_assert_uint_gt(m.fsync_sum_ns, 0);
    ck_assert_uint_eq(m.requests_completed, 5);
    ck_assert_uint_eq(m.queued, 0);
    ck_assert_uint_eq(m.failed, 0);
    storage_close(st);
}
END_TEST

/*
 * A write error (here: the file size limit, EFBIG) stops the storage for good: the request
 * fails, later submits are refused, and a restart recovers a clean prefix.
 */
START_TEST(test_write_error_stops_storage)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage_metrics m;
    struct diskio_err err;
    struct storage *st;
    struct rlimit rl = {.rlim_cur = 40 * 1024, .rlim_max = RLIM_INFINITY};
    uint8_t data[300];
    uint64_t i, ok_last = 0;
    int failed = 0;

    o.segment_bytes = 64 * 1024;
    o.max_entry_bytes = 1024;
    st = open_ok(&o, &rec);
    storage_recovered_free(&rec);
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    for (i = 1; i < 1000 && !failed; i++) {
        struct wal_entry e = {
            .index = i, .term = 1, .type = 1, .len = payload_len(i), .data = data};
        struct storage_write w = {.entries = &e, .n_entries = 1};
        struct storage_done d;
        fill(data, i, e.len);
        ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
        d = wait_one(st);
        if (d.status != DISKIO_OK) {
            ck_assert_int_eq(d.status, DISKIO_EIO);
            failed = 1;
        } else {
            ok_last = d.last_index;
        }
    }
    ck_assert(failed);
    ck_assert_int_eq(storage_failed(st, &err), DISKIO_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "storage: write"));
    {
        struct wal_entry e = {.index = i, .term = 1, .type = 1};
        struct storage_write w = {.entries = &e, .n_entries = 1};
        ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_EFAILED);
        ck_assert_ptr_nonnull(strstr(err.msg, "earlier error"));
    }
    storage_metrics_get(st, &m);
    ck_assert_uint_eq(m.failed, 1);
    storage_close(st);

    rl.rlim_cur = RLIM_INFINITY;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    st = open_ok(&o, &rec);
    ck_assert_uint_ge(rec.last_index, ok_last);
    check_entries(&rec, 1, rec.last_index);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

/* ================================================================ torn tails */

/*
 * Write 5 batches of 3 entries (1..15), damage the last one with `damage`, and check
 * that recovery keeps 1..12, that appending continues cleanly after the repair, and that a
 * second recovery sees everything.
 */
typedef void (*damage_fn)(const char *path, size_t off, size_t size, const struct batches *b);

static void torn_case(damage_fn damage, uint64_t expect_last)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&o, &rec);
    struct batches *b = malloc(sizeof(*b));
    char path[256];

    storage_recovered_free(&rec);
    for (uint64_t i = 1; i <= 15; i += 3)
        append(st, i, 3, 1);
    storage_close(st);
    seg_path(path, sizeof(path), 1);
    find_batches(path, b);
    ck_assert_uint_eq(b->n, 5);
    damage(path, b->off[4], b->size[4], b);

    st = open_ok(&o, &rec);
    check_entries(&rec, 1, expect_last);
    ck_assert_uint_eq(rec.last_index, expect_last);
    storage_recovered_free(&rec);
    append(st, expect_last + 1, 4, 2);
    storage_close(st);

    st = open_ok(&o, &rec);
    check_entries(&rec, 1, expect_last + 4);
    storage_recovered_free(&rec);
    storage_close(st);
    /* The repaired file holds exactly the valid batches, then zeros. */
    find_batches(path, b);
    ck_assert_uint_eq(b->n, expect_last == 15 ? 6 : 5);
    free(b);
}

static void torn_length(const char *path, size_t off, size_t size, const struct batches *b)
{
    /* Only the first half of the batch header reached the disk. */
    zero_at(path, off + 16, size - 16);
}

static void torn_header_garbled(const char *path, size_t off, size_t size, const struct batches *b)
{
    /* The length field holds garbage: the header checksum fails. */
    uint8_t junk[4] = {0xff, 0xff, 0x00, 0x01};
    write_at(path, off + 8, junk, 4);
}

static void torn_header_zeroed(const char *path, size_t off, size_t size, const struct batches *b)
{
    /* The sector with the batch header was lost, the frames after it were written. */
    zero_at(path, off, WAL_FRAME_HEADER);
}

static void torn_payload(const char *path, size_t off, size_t size, const struct batches *b)
{
    /* The last sector of the batch never made it. */
    zero_at(path, off + size - 40, 40);
}

static void partial_batch(const char *path, size_t off, size_t size, const struct batches *b)
{
    /* The first two frames are complete, the third is missing: the whole batch goes. */
    size_t len;
    uint8_t *img = read_all(path, &len);
    size_t pos = off + WAL_FRAME_HEADER;
    struct wal_record rec;
    pos = off + wal_codec_batch_record(img + off, WAL_FRAME_HEADER, &rec);
    pos = off + wal_codec_batch_record(img + off, pos - off, &rec);
    free(img);
    zero_at(path, pos, off + size - pos);
}

static void torn_short_file(const char *path, size_t off, size_t size, const struct batches *b)
{
    /* The file ends in the middle of the batch (a file system without preallocation). */
    ck_assert_int_eq(truncate(path, (off_t)(off + size / 2)), 0);
}

static void torn_header_short_file(const char *path, size_t off, size_t size,
                                   const struct batches *b)
{
    ck_assert_int_eq(truncate(path, (off_t)(off + 12)), 0);
}

static void garbage_tail(const char *path, size_t off, size_t size, const struct batches *b)
{
    /* Random bytes where the last batch was: no checksum can pass. */
    uint8_t *junk = malloc(size + 100);
    srand(7);
    for (size_t i = 0; i < size + 100; i++)
        junk[i] = (uint8_t)rand();
    write_at(path, off, junk, size + 100);
    free(junk);
}

static void zeroed_tail(const char *path, size_t off, size_t size, const struct batches *b)
{
    /* The whole last batch is zeros: the log simply ends before it. */
    zero_at(path, off, size);
}

static void no_damage(const char *path, size_t off, size_t size, const struct batches *b)
{
}

START_TEST(test_torn_length)
{
    torn_case(torn_length, 12);
}
END_TEST

START_TEST(test_torn_header_garbled)
{
    torn_case(torn_header_garbled, 12);
}
END_TEST

START_TEST(test_torn_header_zeroed)
{
    torn_case(torn_header_zeroed, 12);
}
END_TEST

START_TEST(test_torn_payload)
{
    torn_case(torn_payload, 12);
}
END_TEST

START_TEST(test_torn_partial_batch)
{
    torn_case(partial_batch, 12);
}
END_TEST

START_TEST(test_torn_short_file)
{
    torn_case(torn_short_file, 12);
}
END_TEST

START_TEST(test_torn_header_short_file)
{
    torn_case(torn_header_short_file, 12);
}
END_TEST

START_TEST(test_torn_garbage_tail)
{
    torn_case(garbage_tail, 12);
}
END_TEST

START_TEST(test_zeroed_tail)
{
    torn_case(zeroed_tail, 12);
}
END_TEST

START_TEST(test_clean_reopen)
{
    torn_case(no_damage, 15);
}
END_TEST

/* ================================================================ corruption */

/* Five batches of three entries; returns their positions. */
static void five_batches(struct batches *b, char *path, size_t len)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&o, &rec);

    storage_recovered_free(&rec);
    for (uint64_t i = 1; i <= 15; i += 3)
        append(st, i, 3, 1);
    storage_close(st);
    seg_path(path, len, 1);
    find_batches(path, b);
    ck_assert_uint_eq(b->n, 5);
}

static void expect_corrupt_at(const char *file, size_t off)
{
    struct storage_options o = opts();
    struct diskio_err err;
    char want[128];

    ck_assert_int_eq(open_fails(&o, &err), DISKIO_ECORRUPT);
    ck_assert_msg(strstr(err.msg, file) != NULL, "no file name in: %s", err.msg);
    snprintf(want, sizeof(want), "at offset %zu:", off);
    ck_assert_msg(strstr(err.msg, want) != NULL, "want \"%s\" in: %s", want, err.msg);
}

START_TEST(test_corrupt_middle_payload)
{
    struct batches *b = malloc(sizeof(*b));
    char path[256];
    uint32_t before;
    size_t frame;

    five_batches(b, path, sizeof(path));
    /* A byte of the second entry's payload in batch 2. */
    frame = b->off[1] + WAL_FRAME_HEADER + wal_codec_frame_size(payload_len(4));
    flip_at(path, frame + WAL_FRAME_HEADER + 1);
    before = file_crc(path);
    expect_corrupt_at("wal-0000000000000001.log", frame);
    /* A refused start changes nothing on disk. */
    ck_assert_uint_eq(file_crc(path), before);
    expect_corrupt_at("wal-0000000000000001.log", frame);
    free(b);
}
END_TEST

START_TEST(test_corrupt_middle_header)
{
    struct batches *b = malloc(sizeof(*b));
    char path[256];

    five_batches(b, path, sizeof(path));
    flip_at(path, b->off[2] + 9); /* batch 3's length */
    expect_corrupt_at("wal-0000000000000001.log", b->off[2]);
    free(b);
}
END_TEST

START_TEST(test_corrupt_zeroed_hole)
{
    struct batches *b = malloc(sizeof(*b));
    char path[256];

    five_batches(b, path, sizeof(path));
    /* A whole batch in the middle reads as zeros (a lost block): not a clean end. */
    zero_at(path, b->off[1], b->size[1]);
    expect_corrupt_at("wal-0000000000000001.log", b->off[1]);
    free(b);
}
END_TEST

START_TEST(test_corrupt_segment_header)
{
    struct batches *b = malloc(sizeof(*b));
    char path[256];

    five_batches(b, path, sizeof(path));
    flip_at(path, 20);
    expect_corrupt_at("wal-0000000000000001.log", 60);
    free(b);
}
END_TEST

/* Several segments: damage in one that is not the last, and a missing one. */
static void many_segments(struct storage_options *o)
{
    struct storage_recovered rec;
    struct storage *st;

    *o = opts();
    o->segment_bytes = 64 * 1024;
    o->max_entry_bytes = 8 * 1024;
    st = open_ok(o, &rec);
    storage_recovered_free(&rec);
    for (uint64_t i = 1; i <= 2000; i += 50)
        append(st, i, 50, 1);
    storage_close(st);
}

START_TEST(test_corrupt_older_segment_tail)
{
    struct batches *b = malloc(sizeof(*b));
    struct storage_options o;
    char path[256];

    many_segments(&o);
    seg_path(path, sizeof(path), 2);
    find_batches(path, b);
    ck_assert_uint_ge(b->n, 1);
    /* The last batch of an older segment was synced before the next segment existed, so
     * damage there is corruption even though no batch follows it in that file. */
    zero_at(path, b->off[b->n - 1] + b->size[b->n - 1] - 16, 16);
    {
        struct diskio_err err;
        ck_assert_int_eq(open_fails(&o, &err), DISKIO_ECORRUPT);
        ck_assert_ptr_nonnull(strstr(err.msg, "wal-0000000000000002.log"));
        ck_assert_ptr_nonnull(strstr(err.msg, "not the last"));
    }
    free(b);
}
END_TEST

START_TEST(test_corrupt_older_segment_zeroed_header)
{
    struct batches *b = malloc(sizeof(*b));
    struct storage_options o;
    struct diskio_err err;
    char path[256];

    many_segments(&o);
    seg_path(path, sizeof(path), 1);
    find_batches(path, b);
    zero_at(path, b->off[b->n - 1], WAL_FRAME_HEADER);
    ck_assert_int_eq(open_fails(&o, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "wal-0000000000000001.log"));
    free(b);
}
END_TEST

START_TEST(test_corrupt_missing_segment)
{
    struct storage_options o;
    struct diskio_err err;
    char path[256];

    many_segments(&o);
    seg_path(path, sizeof(path), 2);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(open_fails(&o, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "wal-0000000000000003.log"));
    ck_assert_ptr_nonnull(strstr(err.msg, "missing"));
}
END_TEST

START_TEST(test_corrupt_missing_first_segment)
{
    struct storage_options o;
    struct diskio_err err;
    char path[256];

    /* Without a snapshot, a log that does not start at index 1 lost its beginning. */
    many_segments(&o);
    seg_path(path, sizeof(path), 1);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(open_fails(&o, &err), DISKIO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "missing"));
}
END_TEST

/* ================================================================ snapshots and the log */

START_TEST(test_compaction)
{
    struct storage_options o;
    struct storage_recovered rec;
    struct storage_metrics m0, m1;
    struct diskio_err err;
    struct storage *st;
    uint8_t data[100] = {1, 2, 3};
    char path[256];

    many_segments(&o);
    st = open_ok(&o, &rec);
    storage_recovered_free(&rec);
    storage_metrics_get(st, &m0);
    /* Without a snapshot nothing may go. */
    ck_assert_int_eq(storage_compact(st, 1500, &err), DISKIO_OK);
    append(st, 2001, 1, 1);
    storage_metrics_get(st, &m1);
    ck_assert_uint_eq(m1.segments, m0.segments);
    /* With one snapshot at 1500, segments wholly at or below it go. */
    ck_assert_int_eq(storage_snapshot_save(st, 1500, 1, "cfg", 3, data, sizeof(data), &err),
                     DISKIO_OK);
    ck_assert_int_eq(storage_compact(st, 1500, &err), DISKIO_OK);
    append(st, 2002, 1, 1);
    storage_metrics_get(st, &m1);
    ck_assert_uint_lt(m1.segments, m0.segments);
    ck_assert_uint_eq(m1.segments_deleted, m0.segments - m1.segments);
    seg_path(path, sizeof(path), 1);
    ck_assert_int_eq(access(path, F_OK), -1);
    storage_close(st);

    st = open_ok(&o, &rec);
    ck_assert(rec.has_snapshot);
    ck_assert_uint_eq(rec.snapshot.index, 1500);
    ck_assert_uint_eq(rec.snapshot.config_len, 3);
    ck_assert_mem_eq(rec.snapshot.config, "cfg", 3);
    /* Entries at or below the snapshot that still sit in kept segments are hidden. */
    check_entries(&rec, 1501, 2002);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

START_TEST(test_compaction_keeps_log_after_older_snapshot)
{
    struct storage_options o;
    struct storage_recovered rec;
    struct diskio_err err;
    struct storage *st;
    char path[256];

    many_segments(&o);
    st = open_ok(&o, &rec);
    storage_recovered_free(&rec);
    ck_assert_int_eq(storage_snapshot_save(st, 100, 1, NULL, 0, "a", 1, &err), DISKIO_OK);
    ck_assert_int_eq(storage_snapshot_save(st, 1900, 1, NULL, 0, "b", 1, &err), DISKIO_OK);
    ck_assert_int_eq(storage_compact(st, 1900, &err), DISKIO_OK);
    append(st, 2001, 1, 1);
    storage_close(st);
    /* The limit is the older snapshot (100): segment 1 holds entries past 100 and stays. */
    seg_path(path, sizeof(path), 1);
    ck_assert_int_eq(access(path, F_OK), 0);
    st = open_ok(&o, &rec);
    ck_assert_uint_eq(rec.snapshot.index, 1900);
    check_entries(&rec, 1901, 2001);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

static int released;
static void release_cb(void *arg)
{
    released += *(int *)arg;
}

START_TEST(test_install_snapshot)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&o, &rec);
    struct storage_install in = {.index = 50, .term = 4, .config = "members", .config_len = 7};
    struct storage_write w = {.install = &in, .has_hard_state = true, .term = 4, .vote = 0};
    struct diskio_err err;
    struct storage_done d;
    char *snapdata = strdup("state machine at 50");
    int one = 1;

    storage_recovered_free(&rec);
    append(st, 1, 20, 1);
    /* Install a snapshot past the end, its data borrowed until release. */
    in.data = snapdata;
    in.data_len = strlen(snapdata);
    in.release = release_cb;
    in.release_arg = &one;
    released = 0;
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    d = wait_one(st);
    ck_assert_int_eq(d.status, DISKIO_OK);
    ck_assert_uint_eq(d.last_index, 50);
    ck_assert_uint_eq(d.last_term, 4);
    ck_assert_int_eq(released, 1);
    free(snapdata);
    /* Entries continue after it; 20 and below may not be written any more. */
    {
        struct wal_entry e = {.index = 20, .term = 4, .type = 1};
        struct storage_write w2 = {.entries = &e, .n_entries = 1};
        ck_assert_int_eq(storage_submit(st, &w2, &err), DISKIO_EINVAL);
    }
    append(st, 51, 10, 4);
    storage_close(st);

    st = open_ok(&o, &rec);
    ck_assert(rec.has_snapshot);
    ck_assert_uint_eq(rec.snapshot.index, 50);
    ck_assert_uint_eq(rec.snapshot.term, 4);
    ck_assert_uint_eq(rec.term, 4);
    check_entries(&rec, 51, 60);
    {
        char buf[64] = {0};
        ck_assert_uint_eq(rec.snapshot.data_len, strlen("state machine at 50"));
        ck_assert_int_eq(storage_snapshot_read(st, &rec.snapshot, buf, rec.snapshot.data_len, &err),
                         DISKIO_OK);
        ck_assert_str_eq(buf, "state machine at 50");
    }
    storage_recovered_free(&rec);

    /* Install inside the log with a matching term keeps what follows (copied data). */
    in = (struct storage_install){.index = 55, .term = 4, .data = "x", .data_len = 1};
    w = (struct storage_write){.install = &in};
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    d = wait_one(st);
    ck_assert_uint_eq(d.last_index, 60);
    /* Install inside the log with another term discards what follows. */
    in = (struct storage_install){.index = 58, .term = 5, .data = "y", .data_len = 1};
    ck_assert_int_eq(storage_snapshot_install(st, &in, &in, &err), DISKIO_OK);
    d = wait_one(st);
    ck_assert_ptr_eq(d.cookie, &in);
    ck_assert_uint_eq(d.last_index, 58);
    ck_assert_uint_eq(d.last_term, 5);
    storage_close(st);

    st = open_ok(&o, &rec);
    ck_assert_uint_eq(rec.snapshot.index, 58);
    ck_assert_uint_eq(rec.n_entries, 0);
    ck_assert_uint_eq(rec.last_index, 58);
    ck_assert_uint_eq(rec.last_term, 5);
    storage_recovered_free(&rec);
    append(st, 59, 3, 5);
    storage_close(st);
    st = open_ok(&o, &rec);
    check_entries(&rec, 59, 61);
    storage_recovered_free(&rec);
    /* Matching term, but the caller asks for an empty log (raft.h's contract). */
    in = (struct storage_install){.index = 60, .term = 5, .data = "z", .data_len = 1};
    w = (struct storage_write){.install = &in, .truncate_from = 61};
    ck_assert_int_eq(storage_submit(st, &w, &err), DISKIO_OK);
    d = wait_one(st);
    ck_assert_uint_eq(d.last_index, 60);
    ck_assert_uint_eq(d.last_term, 5);
    storage_close(st);
    st = open_ok(&o, &rec);
    ck_assert_uint_eq(rec.snapshot.index, 60);
    ck_assert_uint_eq(rec.n_entries, 0);
    ck_assert_uint_eq(rec.last_index, 60);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

/*
 * A crash after an installed snapshot became durable but before the log recorded it:
 * the log still holds the old, conflicting entries. Recovery drops them and writes the
 * missing reset, so appending after the snapshot works and survives another restart.
 */
START_TEST(test_snapshot_newer_than_log_record)
{
    struct storage_options o = opts();
    struct storage_recovered rec;
    struct storage *st = open_ok(&o, &rec);
    struct diskio_err err;

    storage_recovered_free(&rec);
    append(st, 1, 30, 1);
    /* Snapshot at 20 with term 2 although the log has term 1 there. */
    ck_assert_int_eq(storage_snapshot_save(st, 20, 2, NULL, 0, "s", 1, &err), DISKIO_OK);
    storage_close(st);
    st = open_ok(&o, &rec);
    ck_assert_uint_eq(rec.snapshot.index, 20);
    ck_assert_uint_eq(rec.n_entries, 0);
    ck_assert_uint_eq(rec.last_index, 20);
    storage_recovered_free(&rec);
    append(st, 21, 5, 2);
    storage_close(st);
    st = open_ok(&o, &rec);
    check_entries(&rec, 21, 25);
    storage_recovered_free(&rec);
    storage_close(st);

    /* And a snapshot past the end of the log. */
    st = open_ok(&o, &rec);
    storage_recovered_free(&rec);
    ck_assert_int_eq(storage_snapshot_save(st, 100, 3, NULL, 0, "s", 1, &err), DISKIO_OK);
    storage_close(st);
    st = open_ok(&o, &rec);
    ck_assert_uint_eq(rec.n_entries, 0);
    ck_assert_uint_eq(rec.last_index, 100);
    storage_recovered_free(&rec);
    append(st, 101, 2, 3);
    storage_close(st);
    st = open_ok(&o, &rec);
    check_entries(&rec, 101, 102);
    storage_recovered_free(&rec);
    storage_close(st);
}
END_TEST

/* ================================================================ crash */

/*
 * A child appends with fsync on, pipelining requests, and after every completion writes
 * the completed last index to a pipe. The parent SIGKILLs it at a random moment; recovery
 * must then hold every entry whose completion was reported, with the right bytes.
 */
static void crash_child(int wfd)
{
    struct storage_options o;
    struct storage_recovered rec;
    struct storage *st = NULL;
    struct diskio_err err;
    uint64_t next, inflight = 0;
    uint8_t *data = malloc(64 * 300);
    struct wal_entry e[64];

    storage_options_default(&o);
    o.segment_bytes = 256 * 1024; /* rotate often */
    o.max_entry_bytes = 4096;
    if (storage_open(tdir, &o, &st, &rec, &err) != DISKIO_OK)
        _exit(3);
    next = rec.last_index + 1;
    storage_recovered_free(&rec);
    srand((unsigned)getpid());
    for (;;) {
        while (inflight < 8) {
            size_t n = 1 + (size_t)rand() % 64, off = 0;
            struct storage_write w = {.entries = e, .n_entries = n};
            for (size_t i = 0; i < n; i++) {
                e[i].index = next + i;
                e[i].term = 1;
                e[i].type = 1;
                e[i].len = payload_len(next + i);
                e[i].data = data + off;
                fill(data + off, next + i, e[i].len);
                off += e[i].len;
            }
            if (storage_submit(st, &w, &err) != DISKIO_OK)
                _exit(4);
            next += n;
            inflight++;
        }
        struct pollfd pfd = {.fd = storage_event_fd(st), .events = POLLIN};
        struct storage_done d[16];
        size_t k;
        poll(&pfd, 1, 1000);
        k = storage_poll(st, d, 16);
        for (size_t i = 0; i < k; i++) {
            if (d[i].status != DISKIO_OK)
                _exit(5);
            if (write(wfd, &d[i].last_index, sizeof(d[i].last_index)) < 0)
                _exit(6);
            inflight--;
        }
    }
}

START_TEST(test_crash_sigkill)
{
    uint64_t reported = 0;

    srand((unsigned)time(NULL));
    for (int round = 0; round < 6; round++) {
        int p[2], status;
        pid_t pid;
        uint64_t v, seen = 0;
        struct storage_options o;
        struct storage_recovered rec;
        struct storage *st;
        struct timespec ts = {0, (long)(20 + rand() % 200) * 1000000L};

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(p[0]);
            crash_child(p[1]);
        }
        close(p[1]);
        /* Let it run until it reported something, plus a random while. */
        ck_assert_int_eq(read(p[0], &v, sizeof(v)), sizeof(v));
        seen = v;
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status));
        while (read(p[0], &v, sizeof(v)) == sizeof(v))
            seen = v > seen ? v : seen;
        close(p[0]);
        ck_assert_uint_ge(seen, reported);
        reported = seen;

        storage_options_default(&o);
        o.segment_bytes = 256 * 1024;
        o.max_entry_bytes = 4096;
        st = open_ok(&o, &rec);
        ck_assert_msg(rec.last_index >= reported,
                      "round %d: recovered up to %" PRIu64 " but %" PRIu64 " was reported", round,
                      rec.last_index, reported);
        check_entries(&rec, 1, rec.last_index);
        storage_recovered_free(&rec);
        storage_close(st);
    }
    ck_assert_uint_gt(reported, 0);
}
END_TEST

static Suite *wal_suite(void)
{
    Suite *s = suite_create("wal");
    check_case(s, "codec",
               (const TTest *[]){test_seg_header_and_names, test_replay_rules, test_replay_capacity,
                                 NULL});

    TCase *tc = check_case(
        s, "write",
        (const TTest *[]){test_roundtrip_and_hard_state, test_pipelined_completions_in_order,
                          test_truncate_suffix, test_submit_validation, test_segment_rotation,
                          test_tmp_leftovers_removed, test_fsync_metrics,
                          test_write_error_stops_storage, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);

    tc = check_case(s, "torn",
                    (const TTest *[]){test_torn_length, test_torn_header_garbled,
                                      test_torn_header_zeroed, test_torn_payload,
                                      test_torn_partial_batch, test_torn_short_file,
                                      test_torn_header_short_file, test_torn_garbage_tail,
                                      test_zeroed_tail, test_clean_reopen, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);

    tc = check_case(
        s, "corrupt",
        (const TTest *[]){test_corrupt_middle_payload, test_corrupt_middle_header,
                          test_corrupt_zeroed_hole, test_corrupt_segment_header,
                          test_corrupt_older_segment_tail, test_corrupt_older_segment_zeroed_header,
                          test_corrupt_missing_segment, test_corrupt_missing_first_segment, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);

    tc = check_case(
        s, "snapshots",
        (const TTest *[]){test_compaction, test_compaction_keeps_log_after_older_snapshot,
                          test_install_snapshot, test_snapshot_newer_than_log_record, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);

    tc = check_case(s, "crash", (const TTest *[]){test_crash_sigkill, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    return s;
}

int main(void)
{
    return scratch_run(wal_suite(), base, sizeof(base), "wal");
}
