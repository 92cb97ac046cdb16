/*
 * fuzz_snapfile.c - snapshot-file recovery (snapfile.c, and storage_open over it) fed
 * arbitrary files.
 *
 * Input layout: byte 0 holds flags, the rest is the image of one snapshot file. The image
 * is written into a private temporary directory (made once per process with mkdtemp and
 * emptied after every input) under the name snapfile_name() gives for the index and term
 * found at offsets 16 and 24 of the image (zeros where it is too short), so that the
 * name check passes unless the image changed them; flag 0x04 changes the name's index
 * instead, so that it does not. Flag 0x01 opens the directory with storage_open as well
 * (no fsync, the smallest segments); flag 0x02 adds beforehand a valid snapshot at index
 * 1, term 1 made by snapfile_create/append/commit, which the fuzzed file either replaces
 * (same name), supersedes (newer) or sits behind (older). The seeds in corpus/snapfile are
 * files from the real writer, some of them truncated or with a bit flipped.
 *
 * Checked:
 *   - snapfile_decode_header refuses with a reason and an offset inside the header, and
 *     what it accepts encodes (snapfile_encode_header) back to the same 64 bytes;
 *   - snapfile_verify's verdict is exactly the format's rule, computed here from the image
 *     with crc32c: a decodable header whose index and term the name repeats, a file of
 *     exactly 64 + C + D bytes, and a CRC-32C of bytes 64.. equal to the header's. When it
 *     passes, the configuration copy is the image's C bytes and snapfile_read_data reads
 *     back exactly the D data bytes (and refuses another length); when it fails, the
 *     error is DISKIO_ECORRUPT with a message naming the file, and snapfile_read_data
 *     refuses too;
 *   - storage_open starts from the newest snapshot when it verifies and refuses
 *     (DISKIO_ECORRUPT, naming it) when it does not, since an empty log can never cover
 *     a fallback; when it starts, the recovered snapshot is that file's (or the valid
 *     one's) header and configuration, and storage_snapshot_read gives its data. Either
 *     way no snapshot file is renamed, removed or changed.
 * Everything is freed and every descriptor closed, so ASan's leak check covers the error
 * paths of both.
 */
#define FUZZ_NAME "fuzz_snapfile"
#include "fuzz_check.h"

#include "crc32c.h"
#include "diskio.h"
#include "log.h"
#include "snapfile.h"
#include "storage.h"
#include "wal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FLAG_OPEN     0x01
#define FLAG_OLDER    0x02
#define FLAG_MISNAMED 0x04

/* The valid snapshot of FLAG_OLDER. */
#define OLDER_CONFIG "older-config"
#define OLDER_DATA   "the older snapshot's data"

static const struct diskio_sync nosync = {.fsync = false};

/* The private directory, made on the first input and removed at exit. */
static char dir[256];
static int dir_fd = -1;

/* Remove every file in the directory (there are no subdirectories). */
static void empty_dir(void)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d;
    struct dirent *de;

    CHECK(fd >= 0);
    d = fdopendir(fd);
    CHECK(d != NULL);
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        CHECK(unlinkat(dir_fd, de->d_name, 0) == 0);
    }
    closedir(d);
}

static void remove_dir(void)
{
    empty_dir();
    close(dir_fd);
    rmdir(dir);
}

static void setup_once(void)
{
    const char *tmp = getenv("TMPDIR");

    if (dir_fd >= 0)
        return;
    snprintf(dir, sizeof(dir), "%s/fuzz_snapfile.XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    CHECK(mkdtemp(dir) != NULL);
    dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(dir_fd >= 0);
    /* storage_open logs a line at info and warn level on every start; keep the run quiet. */
    log_setup(LOG_ERROR, NULL);
    atexit(remove_dir);
}

static void write_file(const char *name, const uint8_t *img, size_t len)
{
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    CHECK(fd >= 0);
    CHECK(diskio_pwrite_full(fd, img, len, 0) == 0);
    CHECK(close(fd) == 0);
}

static bool file_has_size(const char *name, size_t len)
{
    struct stat st;

    return fstatat(dir_fd, name, &st, 0) == 0 && (uint64_t)st.st_size == len;
}

static void save_older(void)
{
    struct snapfile_writer *w;
    struct diskio_err err;

    CHECK(snapfile_create(dir_fd, dir, 1, 1, OLDER_CONFIG, sizeof(OLDER_CONFIG) - 1, &nosync, &w,
                          &err) == DISKIO_OK);
    CHECK(snapfile_append(w, OLDER_DATA, sizeof(OLDER_DATA) - 1, &err) == DISKIO_OK);
    CHECK(snapfile_commit(w, &err) == DISKIO_OK);
}

/* What the format says of the image under the name (index, term). */
static bool image_valid(const uint8_t *img, size_t len, uint64_t index, uint64_t term,
                        struct snapfile_meta *m)
{
    uint8_t again[SNAPFILE_HEADER_SIZE];
    const char *why = NULL;
    size_t at = SNAPFILE_HEADER_SIZE;

    if (len < SNAPFILE_HEADER_SIZE)
        return false;
    if (snapfile_decode_header(img, m, &why, &at) < 0) {
        CHECK(why != NULL && why[0] != '\0' && at < SNAPFILE_HEADER_SIZE);
        return false;
    }
    snapfile_encode_header(m, again);
    CHECK(memcmp(again, img, SNAPFILE_HEADER_SIZE) == 0);
    CHECK(m->config_len <= SNAPFILE_MAX_CONFIG);
    return m->index == index && m->term == term &&
           (uint64_t)len == SNAPFILE_HEADER_SIZE + m->config_len + m->data_len &&
           crc32c_update(0, img + SNAPFILE_HEADER_SIZE, len - SNAPFILE_HEADER_SIZE) == m->crc;
}

/* snapfile_verify and snapfile_read_data on the file; returns whether it verified. */
static bool check_file(const char *name, const uint8_t *img, size_t len, bool valid,
                       const struct snapfile_meta *want)
{
    struct snapfile_meta m;
    struct diskio_err err;
    uint8_t *config = (uint8_t *)"not set", *dst;
    uint64_t dlen;
    int rc = snapfile_verify(dir_fd, dir, name, &m, &config, &err);

    if (rc != DISKIO_OK) {
        CHECK(!valid);
        CHECK(rc == DISKIO_ECORRUPT && err.rc == rc);
        CHECK(strstr(err.msg, name) != NULL);
        CHECK(config == NULL);
        /* Reading refuses too, at the length the header claims (0 without a header). */
        dlen = want->data_len;
        dst = malloc((dlen < len ? dlen : len) + 1);
        CHECK(dst != NULL);
        CHECK(snapfile_read_data(dir_fd, dir, name, dst, dlen, &err) != DISKIO_OK);
        CHECK(err.msg[0] != '\0');
        free(dst);
        return false;
    }
    CHECK(valid);
    CHECK(m.index == want->index && m.term == want->term && m.data_len == want->data_len &&
          m.config_len == want->config_len && m.crc == want->crc);
    if (m.config_len > 0)
        CHECK(config != NULL && memcmp(config, img + SNAPFILE_HEADER_SIZE, m.config_len) == 0);
    else
        CHECK(config == NULL);
    free(config);
    /* A file that verifies reads back exactly its data, and only at its length. */
    dst = malloc(m.data_len + 1);
    CHECK(dst != NULL);
    CHECK(snapfile_read_data(dir_fd, dir, name, dst, m.data_len, &err) == DISKIO_OK);
    CHECK(m.data_len == 0 ||
          memcmp(dst, img + SNAPFILE_HEADER_SIZE + m.config_len, m.data_len) == 0);
    CHECK(snapfile_read_data(dir_fd, dir, name, dst, m.data_len + 1, &err) == DISKIO_EINVAL);
    free(dst);
    return true;
}

static bool newer(uint64_t ia, uint64_t ta, uint64_t ib, uint64_t tb)
{
    return ia != ib ? ia > ib : ta > tb;
}

/*
 * storage_open over the directory, which holds the fuzzed file `name` (whose verdict is
 * ok) and, when older is set, the valid snapshot at (1, 1) too.
 */
static void check_open(const char *name, uint64_t index, uint64_t term, bool ok, bool older,
                       const uint8_t *img, size_t len)
{
    struct storage_options o;
    struct storage_recovered rec;
    struct storage *st = NULL;
    struct diskio_err err;
    char older_name[SNAPFILE_NAME_MAX];
    bool fuzzed_newest = !older || !newer(1, 1, index, term);
    int rc;

    storage_options_default(&o);
    o.fsync = false;
    o.segment_bytes = WAL_MIN_SEGMENT_BYTES;
    o.max_entry_bytes = 1024;
    snapfile_name(older_name, 1, 1);
    rc = storage_open(dir, &o, &st, &rec, &err);
    if (fuzzed_newest && !ok) {
        CHECK(rc == DISKIO_ECORRUPT && st == NULL);
        CHECK(strstr(err.msg, name) != NULL);
    } else {
        CHECK(rc == DISKIO_OK && st != NULL);
        CHECK(rec.has_snapshot && rec.n_entries == 0);
        if (fuzzed_newest) {
            uint32_t clen = rec.snapshot.config_len;
            uint8_t *dst = malloc(rec.snapshot.data_len + 1);
            CHECK(dst != NULL);
            CHECK(strcmp(rec.snapshot.name, name) == 0);
            CHECK(rec.snapshot.index == index && rec.snapshot.term == term);
            CHECK((uint64_t)len == SNAPFILE_HEADER_SIZE + clen + rec.snapshot.data_len);
            CHECK(clen == 0 || memcmp(rec.snapshot.config, img + SNAPFILE_HEADER_SIZE, clen) == 0);
            CHECK(storage_snapshot_read(st, &rec.snapshot, dst, rec.snapshot.data_len, &err) ==
                  DISKIO_OK);
            CHECK(rec.snapshot.data_len == 0 ||
                  memcmp(dst, img + SNAPFILE_HEADER_SIZE + clen, rec.snapshot.data_len) == 0);
            free(dst);
        } else {
            char buf[sizeof(OLDER_DATA)];
            CHECK(strcmp(rec.snapshot.name, older_name) == 0);
            CHECK(rec.snapshot.index == 1 && rec.snapshot.term == 1);
            CHECK(rec.snapshot.config_len == sizeof(OLDER_CONFIG) - 1 &&
                  memcmp(rec.snapshot.config, OLDER_CONFIG, sizeof(OLDER_CONFIG) - 1) == 0);
            CHECK(rec.snapshot.data_len == sizeof(OLDER_DATA) - 1);
            CHECK(storage_snapshot_read(st, &rec.snapshot, buf, sizeof(OLDER_DATA) - 1, &err) ==
                  DISKIO_OK);
            CHECK(memcmp(buf, OLDER_DATA, sizeof(OLDER_DATA) - 1) == 0);
        }
        CHECK(rec.last_index == rec.snapshot.index && rec.last_term == rec.snapshot.term);
        storage_close(st);
        storage_recovered_free(&rec);
    }
    /* Starting or refusing, the snapshot files are where they were, as they were. */
    CHECK(file_has_size(name, len));
    if (older && strcmp(name, older_name) != 0)
        CHECK(file_has_size(older_name, SNAPFILE_HEADER_SIZE + sizeof(OLDER_CONFIG) - 1 +
                                            sizeof(OLDER_DATA) - 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *img;
    size_t len;
    uint64_t index = 0, term = 0;
    struct snapfile_meta m;
    char name[SNAPFILE_NAME_MAX];
    bool valid, ok;
    uint8_t flags;

    if (size < 1)
        return 0;
    setup_once();
    flags = data[0];
    img = data + 1;
    len = size - 1;
    if (len >= 24)
        index = diskio_get_le64(img + 16);
    if (len >= 32)
        term = diskio_get_le64(img + 24);
    if (flags & FLAG_MISNAMED)
        index ^= 1;
    snapfile_name(name, index, term);

    memset(&m, 0, sizeof(m));
    valid = image_valid(img, len, index, term, &m);
    if (flags & FLAG_OLDER)
        save_older();
    write_file(name, img, len);
    ok = check_file(name, img, len, valid, &m);
    if (flags & FLAG_OPEN)
        check_open(name, index, term, ok, (flags & FLAG_OLDER) != 0, img, len);
    empty_dir();
    return 0;
}
