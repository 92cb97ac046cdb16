/*
 * snapfile.c - snapshot files; see snapfile.h for the guarantees.
 *
 * ON-DISK FORMAT of state_dir/snap-<index>-<term>.snap (version 1), little-endian; index
 * and term in the name are 16 lower-case hex digits each and must equal the header's.
 *
 *     offset size field
 *          0    8 magic "SPURSNAP"
 *          8    4 version, 1
 *         12    4 header length, 64
 *         16    8 index of the last entry the snapshot covers
 *         24    8 term of that entry
 *         32    8 data length D
 *         40    4 configuration length C (at most 16 MiB)
 *         44    4 CRC-32C of the C configuration bytes followed by the D data bytes
 *         48   12 reserved, zero
 *         60    4 CRC-32C of bytes 0..59
 *         64    C configuration bytes (opaque: the Raft core's encoding of the membership)
 *       64+C    D data bytes (opaque: the serialized state machine)
 *
 * The file is exactly 64 + C + D bytes long. Writing: the bytes go to
 * snap-<index>-<term>.snap.tmp-<random>, the header last (its sizes and data checksum are
 * only known at the end), then fdatasync, rename to the final name, fsync of the directory.
 * A .tmp file is therefore never a snapshot anyone relied on, and one under the final name
 * was complete on disk before its name existed. There is no torn-tail case for snapshots:
 * any mismatch in a file under the final name is corruption.
 */
#include "snapfile.h"

#include "crc32c.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAP_MAGIC       "SPURSNAP"
#define SNAP_VERSION     1
#define SNAP_HDR_CRC_OFF 60
#define SNAP_IO_CHUNK    (1u << 20)
#define SNAP_WBUF        (256u << 10)
#define SNAP_TMP_MARK    ".snap.tmp-"

void snapfile_name(char out[SNAPFILE_NAME_MAX], uint64_t index, uint64_t term)
{
    snprintf(out, SNAPFILE_NAME_MAX, "snap-%016" PRIx64 "-%016" PRIx64 ".snap", index, term);
}

static int parse_hex16(const char *s, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            return -1;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return 0;
}

int snapfile_parse_name(const char *name, uint64_t *index, uint64_t *term)
{
    /* snap- (5) hex16 - hex16 .snap (5) = 43 characters */
    if (strlen(name) != 43 || strncmp(name, "snap-", 5) != 0 || name[21] != '-' ||
        strcmp(name + 38, ".snap") != 0)
        return -1;
    if (parse_hex16(name + 5, index) < 0 || parse_hex16(name + 22, term) < 0)
        return -1;
    return 0;
}

void snapfile_encode_header(const struct snapfile_meta *m, uint8_t out[SNAPFILE_HEADER_SIZE])
{
    memset(out, 0, SNAPFILE_HEADER_SIZE);
    memcpy(out, SNAP_MAGIC, 8);
    diskio_put_le32(out + 8, SNAP_VERSION);
    diskio_put_le32(out + 12, SNAPFILE_HEADER_SIZE);
    diskio_put_le64(out + 16, m->index);
    diskio_put_le64(out + 24, m->term);
    diskio_put_le64(out + 32, m->data_len);
    diskio_put_le32(out + 40, m->config_len);
    diskio_put_le32(out + 44, m->crc);
    diskio_put_le32(out + SNAP_HDR_CRC_OFF, crc32c_update(0, out, SNAP_HDR_CRC_OFF));
}

int snapfile_decode_header(const uint8_t *buf, struct snapfile_meta *m, const char **why,
                           size_t *at)
{
    *at = 0;
    if (memcmp(buf, SNAP_MAGIC, 8) != 0) {
        *why = "bad magic (not a spur snapshot)";
        return -1;
    }
    if (diskio_get_le32(buf + SNAP_HDR_CRC_OFF) != crc32c_update(0, buf, SNAP_HDR_CRC_OFF)) {
        *why = "header checksum mismatch";
        *at = SNAP_HDR_CRC_OFF;
        return -1;
    }
    if (diskio_get_le32(buf + 8) != SNAP_VERSION) {
        *why = "unsupported version";
        *at = 8;
        return -1;
    }
    if (diskio_get_le32(buf + 12) != SNAPFILE_HEADER_SIZE) {
        *why = "bad header length";
        *at = 12;
        return -1;
    }
    for (size_t i = 48; i < SNAP_HDR_CRC_OFF; i++) {
        if (buf[i] != 0) {
            *why = "reserved bytes not zero";
            *at = i;
            return -1;
        }
    }
    m->index = diskio_get_le64(buf + 16);
    m->term = diskio_get_le64(buf + 24);
    m->data_len = diskio_get_le64(buf + 32);
    m->config_len = diskio_get_le32(buf + 40);
    m->crc = diskio_get_le32(buf + 44);
    if (m->config_len > SNAPFILE_MAX_CONFIG) {
        *why = "configuration length over 16 MiB";
        *at = 40;
        return -1;
    }
    if (m->data_len > (uint64_t)INT64_MAX - SNAPFILE_HEADER_SIZE - m->config_len) {
        *why = "data length out of range";
        *at = 32;
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- directory */

static int cmp_entry(const void *a, const void *b)
{
    const struct snapfile_entry *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    if (x->term != y->term)
        return x->term < y->term ? -1 : 1;
    return 0;
}

/* opendir on a dup of dirfd, so closedir does not close the caller's descriptor. */
static DIR *open_dir(int dirfd)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d;
    if (fd < 0)
        return NULL;
    d = fdopendir(fd);
    if (d == NULL) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

int snapfile_list(int dirfd, const char *dirpath, struct snapfile_entry **out, size_t *n,
                  struct diskio_err *err)
{
    struct snapfile_entry *v = NULL;
    size_t len = 0, cap = 0;
    struct dirent *de;
    DIR *d;

    *out = NULL;
    *n = 0;
    d = open_dir(dirfd);
    if (d == NULL)
        return diskio_fail_errno(err, errno, "storage: list directory %s", dirpath);
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        uint64_t index, term;
        if (snapfile_parse_name(de->d_name, &index, &term) < 0)
            continue;
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            struct snapfile_entry *nv = realloc(v, ncap * sizeof(*nv));
            if (nv == NULL) {
                free(v);
                closedir(d);
                return diskio_fail(err, DISKIO_ENOMEM, "storage: list directory %s: %s", dirpath,
                                   strerror(ENOMEM));
            }
            v = nv;
            cap = ncap;
        }
        v[len].index = index;
        v[len].term = term;
        memcpy(v[len].name, de->d_name, 44); /* parse_name checked: 43 characters + NUL */
        len++;
    }
    if (errno != 0) {
        int e = errno;
        free(v);
        closedir(d);
        return diskio_fail_errno(err, e, "storage: list directory %s", dirpath);
    }
    closedir(d);
    if (len > 1)
        qsort(v, len, sizeof(*v), cmp_entry);
    *out = v;
    *n = len;
    return DISKIO_OK;
}

int snapfile_remove_tmp(int dirfd, const char *dirpath, struct diskio_err *err)
{
    struct dirent *de;
    DIR *d = open_dir(dirfd);

    if (d == NULL)
        return diskio_fail_errno(err, errno, "storage: list directory %s", dirpath);
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "snap-", 5) != 0 || strstr(de->d_name, SNAP_TMP_MARK) == NULL)
            continue;
        if (unlinkat(dirfd, de->d_name, 0) < 0 && errno != ENOENT) {
            int e = errno;
            closedir(d);
            return diskio_fail_errno(err, e, "storage: remove %s/%s", dirpath, de->d_name);
        }
        log_event(LOG_INFO, "storage", "removed an unfinished snapshot", "dir=%s file=%s",
                  log_q(dirpath), log_q(de->d_name));
    }
    closedir(d);
    return DISKIO_OK;
}

int snapfile_retain(int dirfd, const char *dirpath, size_t keep, const struct diskio_sync *sync,
                    struct diskio_err *err)
{
    struct snapfile_entry *v;
    size_t n;
    int rc = snapfile_list(dirfd, dirpath, &v, &n, err);

    if (rc != DISKIO_OK)
        return rc;
    if (n <= keep) {
        free(v);
        return DISKIO_OK;
    }
    for (size_t i = 0; i + keep < n; i++) {
        if (unlinkat(dirfd, v[i].name, 0) < 0 && errno != ENOENT) {
            rc = diskio_fail_errno(err, errno, "storage: remove old snapshot %s/%s", dirpath,
                                   v[i].name);
            free(v);
            return rc;
        }
    }
    free(v);
    if (diskio_sync_dir(sync, dirfd) < 0)
        return diskio_fail_errno(err, errno, "storage: fsync directory %s", dirpath);
    return DISKIO_OK;
}

int snapfile_quarantine(int dirfd, const char *dirpath, const char *name,
                        const struct diskio_sync *sync, struct diskio_err *err)
{
    char to[SNAPFILE_NAME_MAX + 16];

    snprintf(to, sizeof(to), "%s.corrupt", name);
    if (renameat(dirfd, name, dirfd, to) < 0)
        return diskio_fail_errno(err, errno, "storage: rename %s/%s to %s", dirpath, name, to);
    if (diskio_sync_dir(sync, dirfd) < 0)
        return diskio_fail_errno(err, errno, "storage: fsync directory %s", dirpath);
    return DISKIO_OK;
}

/* ---------------------------------------------------------------- reading */

/* Open name and check its header against its name and its size. */
static int open_checked(int dirfd, const char *dirpath, const char *name, int *fdp,
                        struct snapfile_meta *m, struct diskio_err *err)
{
    uint8_t hdr[SNAPFILE_HEADER_SIZE];
    uint64_t nindex, nterm;
    const char *why;
    struct stat st;
    size_t at;
    ssize_t n;
    int fd;

    *fdp = -1;
    if (snapfile_parse_name(name, &nindex, &nterm) < 0)
        return diskio_fail(err, DISKIO_EINVAL, "storage: %s is not a snapshot file name", name);
    fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return diskio_fail_errno(err, errno, "storage: open snapshot %s/%s", dirpath, name);
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return diskio_fail_errno(err, e, "storage: stat snapshot %s/%s", dirpath, name);
    }
    n = diskio_pread_full(fd, hdr, sizeof(hdr), 0);
    if (n < 0) {
        int e = errno;
        close(fd);
        return diskio_fail_errno(err, e, "storage: read snapshot %s/%s", dirpath, name);
    }
    if ((size_t)n < sizeof(hdr)) {
        close(fd);
        return diskio_fail(err, DISKIO_ECORRUPT,
                           "storage: corrupt snapshot %s/%s at offset %zd: file shorter than "
                           "its 64-byte header",
                           dirpath, name, n);
    }
    if (snapfile_decode_header(hdr, m, &why, &at) < 0) {
        close(fd);
        return diskio_fail(err, DISKIO_ECORRUPT,
                           "storage: corrupt snapshot %s/%s at offset %zu: %s", dirpath, name, at,
                           why);
    }
    if (m->index != nindex || m->term != nterm) {
        close(fd);
        return diskio_fail(err, DISKIO_ECORRUPT,
                           "storage: corrupt snapshot %s/%s at offset 16: header says index "
                           "%" PRIu64 " term %" PRIu64 ", the name another",
                           dirpath, name, m->index, m->term);
    }
    if ((uint64_t)st.st_size != SNAPFILE_HEADER_SIZE + m->config_len + m->data_len) {
        close(fd);
        return diskio_fail(err, DISKIO_ECORRUPT,
                           "storage: corrupt snapshot %s/%s at offset %" PRIu64 ": file is %" PRIu64
                           " bytes, header says %" PRIu64,
                           dirpath, name,
                           (uint64_t)st.st_size < SNAPFILE_HEADER_SIZE + m->config_len + m->data_len
                               ? (uint64_t)st.st_size
                               : SNAPFILE_HEADER_SIZE + m->config_len + m->data_len,
                           (uint64_t)st.st_size,
                           SNAPFILE_HEADER_SIZE + m->config_len + m->data_len);
    }
    *fdp = fd;
    return DISKIO_OK;
}

/*
 * Read len bytes at off into dst (or through a scratch buffer when dst is NULL), folding
 * them into *crc.
 */
static int read_crc(int fd, const char *dirpath, const char *name, uint8_t *dst, uint64_t len,
                    uint64_t off, uint8_t *scratch, uint32_t *crc, struct diskio_err *err)
{
    while (len > 0) {
        size_t want = len > SNAP_IO_CHUNK ? SNAP_IO_CHUNK : (size_t)len;
        uint8_t *p = dst != NULL ? dst : scratch;
        ssize_t n = diskio_pread_full(fd, p, want, (off_t)off);
        if (n < 0)
            return diskio_fail_errno(err, errno, "storage: read snapshot %s/%s", dirpath, name);
        if ((size_t)n < want)
            return diskio_fail(err, DISKIO_ECORRUPT,
                               "storage: corrupt snapshot %s/%s at offset %" PRIu64
                               ": file shrank while being read",
                               dirpath, name, off + (uint64_t)n);
        *crc = crc32c_update(*crc, p, want);
        if (dst != NULL)
            dst += want;
        off += want;
        len -= want;
    }
    return DISKIO_OK;
}

int snapfile_verify(int dirfd, const char *dirpath, const char *name, struct snapfile_meta *m,
                    uint8_t **config, struct diskio_err *err)
{
    uint8_t *cfg = NULL, *scratch;
    uint32_t crc = 0;
    int fd, rc;

    if (config != NULL)
        *config = NULL;
    rc = open_checked(dirfd, dirpath, name, &fd, m, err);
    if (rc != DISKIO_OK)
        return rc;
    scratch = malloc(SNAP_IO_CHUNK);
    if (scratch == NULL ||
        (config != NULL && m->config_len > 0 && (cfg = malloc(m->config_len)) == NULL)) {
        free(scratch);
        close(fd);
        return diskio_fail(err, DISKIO_ENOMEM, "storage: read snapshot %s/%s: %s", dirpath, name,
                           strerror(ENOMEM));
    }
    rc = read_crc(fd, dirpath, name, cfg, m->config_len, SNAPFILE_HEADER_SIZE, scratch, &crc, err);
    if (rc == DISKIO_OK)
        rc = read_crc(fd, dirpath, name, NULL, m->data_len,
                      SNAPFILE_HEADER_SIZE + (uint64_t)m->config_len, scratch, &crc, err);
    free(scratch);
    close(fd);
    if (rc == DISKIO_OK && crc != m->crc)
        rc =
            diskio_fail(err, DISKIO_ECORRUPT,
                        "storage: corrupt snapshot %s/%s at offset %d: checksum mismatch in "
                        "the %" PRIu64 " bytes of configuration and data",
                        dirpath, name, SNAPFILE_HEADER_SIZE, (uint64_t)m->config_len + m->data_len);
    if (rc != DISKIO_OK) {
        free(cfg);
        return rc;
    }
    if (config != NULL)
        *config = cfg;
    return DISKIO_OK;
}

int snapfile_read_data(int dirfd, const char *dirpath, const char *name, void *dst, uint64_t len,
                       struct diskio_err *err)
{
    struct snapfile_meta m;
    uint8_t *scratch;
    uint32_t crc = 0;
    int fd, rc;

    rc = open_checked(dirfd, dirpath, name, &fd, &m, err);
    if (rc != DISKIO_OK)
        return rc;
    if (m.data_len != len) {
        close(fd);
        return diskio_fail(err, DISKIO_EINVAL,
                           "storage: read snapshot %s/%s: it holds %" PRIu64
                           " data bytes, the caller asked for %" PRIu64,
                           dirpath, name, m.data_len, len);
    }
    scratch = malloc(SNAP_IO_CHUNK);
    if (scratch == NULL) {
        close(fd);
        return diskio_fail(err, DISKIO_ENOMEM, "storage: read snapshot %s/%s: %s", dirpath, name,
                           strerror(ENOMEM));
    }
    rc = read_crc(fd, dirpath, name, NULL, m.config_len, SNAPFILE_HEADER_SIZE, scratch, &crc, err);
    if (rc == DISKIO_OK)
        rc = read_crc(fd, dirpath, name, dst, len, SNAPFILE_HEADER_SIZE + (uint64_t)m.config_len,
                      scratch, &crc, err);
    free(scratch);
    close(fd);
    if (rc == DISKIO_OK && crc != m.crc)
        rc = diskio_fail(err, DISKIO_ECORRUPT,
                         "storage: corrupt snapshot %s/%s at offset %d: checksum mismatch in "
                         "the %" PRIu64 " bytes of configuration and data",
                         dirpath, name, SNAPFILE_HEADER_SIZE, (uint64_t)m.config_len + len);
    return rc;
}

/* ---------------------------------------------------------------- writing */

struct snapfile_writer {
    int dirfd;     /* borrowed from the caller */
    int fd;        /* the temporary file; owned */
    char *dirpath; /* owned copy, for messages */
    char name[SNAPFILE_NAME_MAX];
    char tmpname[SNAPFILE_NAME_MAX + 32];
    struct diskio_sync sync;
    struct snapfile_meta m;
    uint64_t off; /* file offset of buf[0] */
    uint8_t *buf; /* owned write buffer of SNAP_WBUF bytes */
    size_t buf_len;
};

static void writer_free(struct snapfile_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    free(w->buf);
    free(w->dirpath);
    free(w);
}

static int writer_flush(struct snapfile_writer *w, struct diskio_err *err)
{
    if (w->buf_len == 0)
        return DISKIO_OK;
    if (diskio_pwrite_full(w->fd, w->buf, w->buf_len, (off_t)w->off) < 0)
        return diskio_fail_errno(err, errno, "storage: write snapshot %s/%s", w->dirpath,
                                 w->tmpname);
    w->off += w->buf_len;
    w->buf_len = 0;
    return DISKIO_OK;
}

/* Add bytes to the file body (after the header), through the buffer. */
static int writer_put(struct snapfile_writer *w, const void *p, size_t len, struct diskio_err *err)
{
    w->m.crc = crc32c_update(w->m.crc, p, len);
    if (w->buf_len + len <= SNAP_WBUF) {
        memcpy(w->buf + w->buf_len, p, len);
        w->buf_len += len;
        return DISKIO_OK;
    }
    int rc = writer_flush(w, err);
    if (rc != DISKIO_OK)
        return rc;
    if (len <= SNAP_WBUF) {
        memcpy(w->buf, p, len);
        w->buf_len = len;
        return DISKIO_OK;
    }
    if (diskio_pwrite_full(w->fd, p, len, (off_t)w->off) < 0)
        return diskio_fail_errno(err, errno, "storage: write snapshot %s/%s", w->dirpath,
                                 w->tmpname);
    w->off += len;
    return DISKIO_OK;
}

int snapfile_create(int dirfd, const char *dirpath, uint64_t index, uint64_t term,
                    const void *config, uint32_t config_len, const struct diskio_sync *sync,
                    struct snapfile_writer **out, struct diskio_err *err)
{
    struct snapfile_writer *w;
    uint64_t rnd = 0;
    int rc;

    *out = NULL;
    if (config_len > SNAPFILE_MAX_CONFIG || (config_len > 0 && config == NULL))
        return diskio_fail(err, DISKIO_EINVAL,
                           "storage: snapshot configuration missing or over 16 MiB");
    w = calloc(1, sizeof(*w));
    if (w == NULL)
        return diskio_fail(err, DISKIO_ENOMEM, "storage: snapshot writer: %s", strerror(ENOMEM));
    w->fd = -1;
    w->dirfd = dirfd;
    w->sync = *sync;
    w->dirpath = strdup(dirpath);
    w->buf = malloc(SNAP_WBUF);
    if (w->dirpath == NULL || w->buf == NULL) {
        writer_free(w);
        return diskio_fail(err, DISKIO_ENOMEM, "storage: snapshot writer: %s", strerror(ENOMEM));
    }
    w->m.index = index;
    w->m.term = term;
    w->m.config_len = config_len;
    w->off = SNAPFILE_HEADER_SIZE;
    snapfile_name(w->name, index, term);
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        rnd = (uint64_t)(uintptr_t)w ^ ((uint64_t)getpid() << 32);
    snprintf(w->tmpname, sizeof(w->tmpname), "%s.tmp-%016" PRIx64, w->name, rnd);
    w->fd = openat(dirfd, w->tmpname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (w->fd < 0) {
        rc = diskio_fail_errno(err, errno, "storage: create snapshot %s/%s", dirpath, w->tmpname);
        writer_free(w);
        return rc;
    }
    if (config_len > 0 && (rc = writer_put(w, config, config_len, err)) != DISKIO_OK) {
        snapfile_abort(w);
        return rc;
    }
    *out = w;
    return DISKIO_OK;
}

int snapfile_append(struct snapfile_writer *w, const void *buf, size_t len, struct diskio_err *err)
{
    if (len == 0)
        return DISKIO_OK;
    w->m.data_len += len;
    return writer_put(w, buf, len, err);
}

int snapfile_commit(struct snapfile_writer *w, struct diskio_err *err)
{
    uint8_t hdr[SNAPFILE_HEADER_SIZE];
    int rc;

    rc = writer_flush(w, err);
    if (rc != DISKIO_OK)
        goto fail;
    snapfile_encode_header(&w->m, hdr);
    if (diskio_pwrite_full(w->fd, hdr, sizeof(hdr), 0) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: write snapshot %s/%s", w->dirpath, w->tmpname);
        goto fail;
    }
    if (diskio_sync_fd(&w->sync, w->fd, true) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: fdatasync snapshot %s/%s", w->dirpath,
                               w->tmpname);
        goto fail;
    }
    if (close(w->fd) < 0) {
        w->fd = -1;
        rc = diskio_fail_errno(err, errno, "storage: close snapshot %s/%s", w->dirpath, w->tmpname);
        goto fail;
    }
    w->fd = -1;
    if (renameat(w->dirfd, w->tmpname, w->dirfd, w->name) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: rename snapshot %s/%s to %s", w->dirpath,
                               w->tmpname, w->name);
        goto fail;
    }
    if (diskio_sync_dir(&w->sync, w->dirfd) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: fsync directory %s", w->dirpath);
        writer_free(w);
        return rc;
    }
    writer_free(w);
    return DISKIO_OK;
fail:
    snapfile_abort(w);
    return rc;
}

void snapfile_abort(struct snapfile_writer *w)
{
    if (w == NULL)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    unlinkat(w->dirfd, w->tmpname, 0);
    writer_free(w);
}
