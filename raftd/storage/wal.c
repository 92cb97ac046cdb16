/*
 * wal.c - the log's files: segment names, recovery (read every segment, scan it with the
 * codec, replay its records) and the writer (create, preallocate, append, sync, compact);
 * see wal.h. The on-disk format is described in one block at the top of wal_codec.c, which
 * holds every function that reads or writes the log's bytes; this file only moves them
 * between the files and memory.
 */
#include "wal.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- names */

void wal_seg_name(char out[WAL_NAME_MAX], uint64_t seq)
{
    snprintf(out, WAL_NAME_MAX, "wal-%016" PRIx64 ".log", seq);
}

int wal_seg_parse_name(const char *name, uint64_t *seq)
{
    uint64_t v = 0;

    /* wal- (4) hex16 .log (4) = 24 characters */
    if (strlen(name) != 24 || strncmp(name, "wal-", 4) != 0 || strcmp(name + 20, ".log") != 0)
        return -1;
    for (int i = 4; i < 20; i++) {
        char c = name[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *seq = v;
    return 0;
}

/* ---------------------------------------------------------------- recovery */

void wal_mem_free(struct wal_mem *m)
{
    if (m->arena != NULL)
        munmap(m->arena, m->arena_len);
    if (m->vmap != NULL)
        munmap(m->vmap, m->vmap_len);
    memset(m, 0, sizeof(*m));
}

void wal_recovery_free(struct wal_recovery *r)
{
    free(r->segs);
    wal_mem_free(&r->mem);
    memset(r, 0, sizeof(*r));
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

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

/* The sequence numbers of the segment files, sorted. *out malloc'ed (NULL when none). */
static int list_segments(int dirfd, const char *dirpath, uint64_t **out, size_t *n,
                         struct diskio_err *err)
{
    uint64_t *v = NULL;
    size_t len = 0, cap = 0;
    struct dirent *de;
    DIR *d = open_dir(dirfd);

    *out = NULL;
    *n = 0;
    if (d == NULL)
        return diskio_fail_errno(err, errno, "storage: list directory %s", dirpath);
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        uint64_t seq;
        if (wal_seg_parse_name(de->d_name, &seq) < 0)
            continue;
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            uint64_t *nv = realloc(v, ncap * sizeof(*nv));
            if (nv == NULL) {
                free(v);
                closedir(d);
                return diskio_fail(err, DISKIO_ENOMEM, "storage: list directory %s: %s", dirpath,
                                   strerror(ENOMEM));
            }
            v = nv;
            cap = ncap;
        }
        v[len++] = seq;
        errno = 0;
    }
    if (errno != 0) {
        int e = errno;
        free(v);
        closedir(d);
        return diskio_fail_errno(err, e, "storage: list directory %s", dirpath);
    }
    closedir(d);
    if (len > 1)
        qsort(v, len, sizeof(*v), cmp_u64);
    *out = v;
    *n = len;
    return DISKIO_OK;
}

int wal_remove_tmp(int dirfd, const char *dirpath, struct diskio_err *err)
{
    struct dirent *de;
    DIR *d = open_dir(dirfd);

    if (d == NULL)
        return diskio_fail_errno(err, errno, "storage: list directory %s", dirpath);
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "wal-", 4) != 0 || l < 8 ||
            strcmp(de->d_name + l - 8, ".log.tmp") != 0)
            continue;
        if (unlinkat(dirfd, de->d_name, 0) < 0 && errno != ENOENT) {
            int e = errno;
            closedir(d);
            return diskio_fail_errno(err, e, "storage: remove %s/%s", dirpath, de->d_name);
        }
        log_event(LOG_INFO, "storage", "removed an unfinished log segment", "dir=%s file=%s",
                  log_q(dirpath), log_q(de->d_name));
    }
    closedir(d);
    return DISKIO_OK;
}

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

struct scan_ctx {
    const char *dirpath;
    char name[WAL_NAME_MAX];
    struct diskio_err *err;
};

static int corrupt(struct scan_ctx *c, uint64_t off, const char *why)
{
    return diskio_fail(c->err, DISKIO_ECORRUPT,
                       "storage: corrupt log %s/%s at offset %" PRIu64 ": %s", c->dirpath, c->name,
                       off, why);
}

/* Records of a segment go to the replay; the segment remembers the highest index named. */
struct scan_replay {
    struct wal_replay *replay;
    struct wal_segment *seg;
};

static int scan_record(void *arg, const struct wal_record *rec, const char **why)
{
    struct scan_replay *s = arg;

    if (wal_replay_apply(s->replay, rec, why) < 0)
        return -1;
    if (rec->index > s->seg->high)
        s->seg->high = rec->index;
    return 0;
}

/*
 * Check and replay one segment image. On a torn tail in the last segment, fills the torn
 * fields of out and returns DISKIO_OK.
 */
static int scan_segment(struct scan_ctx *c, const uint8_t *img, size_t len, bool is_last,
                        const struct wal_segment *prev, struct wal_segment *seg,
                        struct wal_recovery *out)
{
    struct scan_replay sr = {.replay = &out->replay, .seg = seg};
    struct wal_seg_header h;
    struct wal_codec_scan sc;
    const char *why;
    size_t at;
    char msg[240];

    if (len < WAL_SEG_HEADER_SIZE)
        return corrupt(c, len, "file shorter than the 64-byte segment header");
    if (wal_codec_seg_header_decode(img, &h, &why, &at) < 0)
        return corrupt(c, at, why);
    if (h.seq != seg->seq)
        return corrupt(c, 16, "segment header names another sequence number than the file");
    if (prev != NULL && h.first_batch != prev->next_batch) {
        snprintf(msg, sizeof(msg),
                 "segment starts at batch %" PRIu64 " but the previous one ended before batch "
                 "%" PRIu64 " (batches missing)",
                 h.first_batch, prev->next_batch);
        return corrupt(c, 24, msg);
    }
    seg->salt = h.salt;
    seg->first_batch = h.first_batch;
    seg->size = len;
    seg->capacity = h.capacity;
    seg->high = 0;

    wal_codec_scan(img, WAL_SEG_HEADER_SIZE, len, h.salt, h.first_batch, scan_record, &sr, &sc);
    if (sc.stop == WAL_CODEC_CORRUPT)
        return corrupt(c, sc.bad, sc.msg);
    if (sc.stop == WAL_CODEC_TORN) {
        /* A torn tail only at the end of the last segment. */
        if (!is_last) {
            snprintf(msg, sizeof(msg), "%s (in a segment that is not the last)", sc.why);
            return corrupt(c, sc.bad, msg);
        }
        out->torn = true;
        out->torn_off = sc.end;
        out->torn_bytes = sc.torn_bytes;
        out->torn_why = sc.why;
    }
    seg->next_batch = sc.next_batch;
    seg->end = sc.end;
    return DISKIO_OK;
}

/* Cheap first look: is any of a few sampled words of p[0..n) non-zero? */
static int looks_nonzero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < 8 && n >= 8; i++) {
        uint64_t v;
        memcpy(&v, p + (n - 8) / 7 * i, 8);
        if (v != 0)
            return 1;
    }
    return 0;
}

/*
 * Read a segment into its arena region in chunks. A chunk that is all zeros (the
 * preallocated, never written space) is handed back at once with MADV_DONTNEED: the
 * arena is anonymous memory, so those pages still read as zeros, and the peak memory of a
 * recovery is the log's data, not its preallocated size.
 */
static int read_file(int fd, uint8_t *dst, size_t len, size_t pg, struct scan_ctx *c)
{
    const size_t chunk = 4u << 20; /* a multiple of any page size */
    size_t off = 0;

    while (off < len) {
        size_t want = len - off < chunk ? len - off : chunk;
        ssize_t n = diskio_pread_full(fd, dst + off, want, (off_t)off);
        if (n < 0)
            return diskio_fail_errno(c->err, errno, "storage: read %s/%s", c->dirpath, c->name);
        if ((size_t)n != want)
            return diskio_fail(c->err, DISKIO_EIO, "storage: read %s/%s: file shrank while read",
                               c->dirpath, c->name);
        if (want == chunk && !looks_nonzero(dst + off, want) && wal_codec_all_zero(dst + off, want))
            madvise(dst + off, round_up(want, pg), MADV_DONTNEED);
        off += want;
    }
    return DISKIO_OK;
}

int wal_recover(int dirfd, const char *dirpath, struct wal_recovery *out, struct diskio_err *err)
{
    size_t pg = page_size(), total = 0, off = 0, nseq = 0, max_entries;
    uint64_t *seqs = NULL;
    uint64_t *sizes = NULL;
    struct scan_ctx c = {.dirpath = dirpath, .err = err};
    int rc;

    memset(out, 0, sizeof(*out));
    out->next_batch = 1;
    rc = list_segments(dirfd, dirpath, &seqs, &nseq, err);
    if (rc != DISKIO_OK)
        return rc;
    if (nseq == 0) {
        wal_replay_init(&out->replay, NULL, 0);
        return DISKIO_OK;
    }
    for (size_t i = 1; i < nseq; i++) {
        if (seqs[i] != seqs[i - 1] + 1) {
            char a[WAL_NAME_MAX], b[WAL_NAME_MAX];
            wal_seg_name(a, seqs[i - 1]);
            wal_seg_name(b, seqs[i]);
            rc = diskio_fail(err, DISKIO_ECORRUPT,
                             "storage: corrupt log %s/%s at offset 0: segment files missing "
                             "between %s and it",
                             dirpath, b, a);
            free(seqs);
            return rc;
        }
    }
    sizes = calloc(nseq, sizeof(*sizes));
    out->segs = calloc(nseq, sizeof(*out->segs));
    if (sizes == NULL || out->segs == NULL) {
        rc = diskio_fail(err, DISKIO_ENOMEM, "storage: recover log: %s", strerror(ENOMEM));
        goto fail;
    }
    for (size_t i = 0; i < nseq; i++) {
        struct stat st;
        wal_seg_name(c.name, seqs[i]);
        if (fstatat(dirfd, c.name, &st, 0) < 0) {
            rc = diskio_fail_errno(err, errno, "storage: stat %s/%s", dirpath, c.name);
            goto fail;
        }
        sizes[i] = (uint64_t)st.st_size;
        total += round_up((size_t)st.st_size, pg);
    }
    /* Every entry frame takes at least 32 bytes, so this many entries always fit. */
    max_entries = total / WAL_FRAME_HEADER + 1;
    out->mem.arena_len = total > 0 ? total : pg;
    out->mem.vmap_len = round_up(max_entries * sizeof(struct wal_entry), pg);
    out->mem.arena = mmap(NULL, out->mem.arena_len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (out->mem.arena == MAP_FAILED)
        out->mem.arena = NULL;
    out->mem.vmap = mmap(NULL, out->mem.vmap_len, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (out->mem.vmap == MAP_FAILED)
        out->mem.vmap = NULL;
    if (out->mem.arena == NULL || out->mem.vmap == NULL) {
        rc = diskio_fail_errno(err, ENOMEM, "storage: recover log: map %zu bytes", total);
        goto fail;
    }
    wal_replay_init(&out->replay, out->mem.vmap, max_entries);

    for (size_t i = 0; i < nseq; i++) {
        uint8_t *img = (uint8_t *)out->mem.arena + off;
        struct wal_segment *seg = &out->segs[i];
        size_t len = (size_t)sizes[i];
        int fd;

        wal_seg_name(c.name, seqs[i]);
        fd = openat(dirfd, c.name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            rc = diskio_fail_errno(err, errno, "storage: open %s/%s", dirpath, c.name);
            goto fail;
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        rc = read_file(fd, img, len, pg, &c);
        close(fd);
        if (rc != DISKIO_OK)
            goto fail;
        out->bytes_read += len;
        seg->seq = seqs[i];
        rc = scan_segment(&c, img, len, i + 1 == nseq, i > 0 ? &out->segs[i - 1] : NULL, seg, out);
        if (rc != DISKIO_OK)
            goto fail;
        out->n_segs = i + 1;
        /* Give back the pages past the valid data (the preallocated zeros). */
        {
            size_t keep = round_up((size_t)seg->end, pg);
            size_t mapped = round_up(len, pg);
            if (mapped > keep)
                madvise(img + keep, mapped - keep, MADV_DONTNEED);
        }
        off += round_up(len, pg);
    }
    out->next_batch = out->segs[nseq - 1].next_batch;
    free(seqs);
    free(sizes);
    return DISKIO_OK;
fail:
    free(seqs);
    free(sizes);
    wal_recovery_free(out);
    return rc;
}

/* ---------------------------------------------------------------- writer */

static int preallocate(int fd, uint64_t from, uint64_t size)
{
    if (size <= from)
        return 0;
    if (fallocate(fd, 0, (off_t)from, (off_t)(size - from)) == 0)
        return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS)
        return -1;
    /* No fallocate on this file system: a sparse file still reads zeros. */
    return ftruncate(fd, (off_t)size);
}

static int segs_push(struct wal_writer *w, const struct wal_segment *s)
{
    if (w->n_segs == w->segs_cap) {
        size_t ncap = w->segs_cap ? w->segs_cap * 2 : 16;
        struct wal_segment *nv = realloc(w->segs, ncap * sizeof(*nv));
        if (nv == NULL)
            return -1;
        w->segs = nv;
        w->segs_cap = ncap;
    }
    w->segs[w->n_segs++] = *s;
    return 0;
}

/* Create segment seq durably (tmp, preallocate, header, fsync, rename, fsync dir). */
static int create_segment(struct wal_writer *w, uint64_t seq, struct diskio_err *err)
{
    char name[WAL_NAME_MAX], tmp[WAL_NAME_MAX + 8];
    uint8_t hdr[WAL_SEG_HEADER_SIZE];
    struct wal_seg_header h = {0};
    struct wal_segment s = {0};
    int fd, rc;

    wal_seg_name(name, seq);
    snprintf(tmp, sizeof(tmp), "%s.tmp", name);
    if (getrandom(&h.salt, sizeof(h.salt), 0) != (ssize_t)sizeof(h.salt))
        h.salt = (uint32_t)(mono_ns() ^ seq);
    h.seq = seq;
    h.first_batch = w->next_batch;
    h.capacity = w->seg_bytes;
    h.created_ms = wall_ms();
    wal_codec_seg_header_encode(&h, hdr);

    fd = openat(w->dirfd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return diskio_fail_errno(err, errno, "storage: create %s/%s", w->dirpath, tmp);
    if (preallocate(fd, 0, w->seg_bytes) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: preallocate %s/%s", w->dirpath, tmp);
        goto fail;
    }
    if (diskio_pwrite_full(fd, hdr, sizeof(hdr), 0) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: write %s/%s", w->dirpath, tmp);
        goto fail;
    }
    if (diskio_sync_fd(&w->sync, fd, false) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: fsync %s/%s", w->dirpath, tmp);
        goto fail;
    }
    if (renameat(w->dirfd, tmp, w->dirfd, name) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: rename %s/%s to %s", w->dirpath, tmp, name);
        goto fail;
    }
    if (diskio_sync_dir(&w->sync, w->dirfd) < 0) {
        rc = diskio_fail_errno(err, errno, "storage: fsync directory %s", w->dirpath);
        close(fd);
        return rc;
    }
    s.seq = seq;
    s.salt = h.salt;
    s.first_batch = h.first_batch;
    s.next_batch = h.first_batch;
    s.end = WAL_SEG_HEADER_SIZE;
    s.size = w->seg_bytes;
    s.capacity = w->seg_bytes;
    if (segs_push(w, &s) < 0) {
        close(fd);
        return diskio_fail(err, DISKIO_ENOMEM, "storage: new segment: %s", strerror(ENOMEM));
    }
    if (w->fd >= 0)
        close(w->fd);
    w->fd = fd;
    w->dirty = false;
    w->segments_created++;
    wal_codec_batch_begin(&w->batch, s.salt);
    return DISKIO_OK;
fail:
    close(fd);
    unlinkat(w->dirfd, tmp, 0);
    return rc;
}

static struct wal_segment *active(struct wal_writer *w)
{
    return &w->segs[w->n_segs - 1];
}

int wal_writer_open(struct wal_writer *w, int dirfd, const char *dirpath,
                    const struct wal_recovery *rec, uint64_t seg_bytes,
                    const struct diskio_sync *sync, struct diskio_err *err)
{
    struct wal_segment *a;
    char name[WAL_NAME_MAX];
    uint64_t target;
    int rc;

    memset(w, 0, sizeof(*w));
    w->fd = -1;
    w->dirfd = dirfd;
    w->dirpath = dirpath;
    w->sync = *sync;
    w->seg_bytes = seg_bytes < WAL_MIN_SEGMENT_BYTES ? WAL_MIN_SEGMENT_BYTES : seg_bytes;
    w->next_batch = rec->next_batch;
    wal_codec_batch_init(&w->batch);
    for (size_t i = 0; i < rec->n_segs; i++) {
        if (segs_push(w, &rec->segs[i]) < 0) {
            wal_writer_close(w);
            return diskio_fail(err, DISKIO_ENOMEM, "storage: open log: %s", strerror(ENOMEM));
        }
    }
    if (w->n_segs == 0) {
        rc = create_segment(w, 1, err);
        if (rc != DISKIO_OK)
            wal_writer_close(w);
        return rc;
    }
    a = active(w);
    wal_seg_name(name, a->seq);
    w->fd = openat(dirfd, name, O_RDWR | O_CLOEXEC);
    if (w->fd < 0) {
        rc = diskio_fail_errno(err, errno, "storage: open %s/%s", dirpath, name);
        wal_writer_close(w);
        return rc;
    }
    /* Appends continue in the last segment, preallocated to its capacity again (a file
     * system without fallocate, or a file cut short, may have left it smaller). */
    target = a->capacity < w->seg_bytes ? a->capacity : w->seg_bytes;
    if (target < a->size)
        target = a->size;
    if (rec->torn) {
        /* Cut the torn bytes off: the tail then reads as zeros. */
        if (ftruncate(w->fd, (off_t)a->end) < 0 || preallocate(w->fd, a->end, target) < 0 ||
            diskio_sync_fd(&w->sync, w->fd, false) < 0) {
            rc = diskio_fail_errno(err, errno, "storage: truncate torn tail of %s/%s", dirpath,
                                   name);
            wal_writer_close(w);
            return rc;
        }
        log_event(LOG_WARN, "storage", "truncated a torn log tail",
                  "dir=%s file=%s offset=%" PRIu64 " bytes=%" PRIu64 " why=%s", log_q(dirpath),
                  log_q(name), rec->torn_off, rec->torn_bytes, log_q(rec->torn_why));
    } else if (target > a->size) {
        if (preallocate(w->fd, a->size, target) < 0 || diskio_sync_fd(&w->sync, w->fd, false) < 0) {
            rc = diskio_fail_errno(err, errno, "storage: preallocate %s/%s", dirpath, name);
            wal_writer_close(w);
            return rc;
        }
    }
    a->size = target;
    wal_codec_batch_begin(&w->batch, a->salt);
    return DISKIO_OK;
}

void wal_writer_close(struct wal_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    free(w->segs);
    w->segs = NULL;
    w->n_segs = w->segs_cap = 0;
    wal_codec_batch_free(&w->batch);
}

int wal_writer_flush(struct wal_writer *w, struct diskio_err *err)
{
    struct wal_segment *a = active(w);
    char name[WAL_NAME_MAX];

    if (w->batch.count == 0)
        return DISKIO_OK;
    wal_codec_batch_seal(&w->batch, w->next_batch);
    if (diskio_pwrite_full(w->fd, w->batch.buf.p, w->batch.buf.len, (off_t)a->end) < 0) {
        wal_seg_name(name, a->seq);
        return diskio_fail_errno(err, errno, "storage: write %s/%s at offset %" PRIu64, w->dirpath,
                                 name, a->end);
    }
    a->end += w->batch.buf.len;
    if (a->end > a->size)
        a->size = a->end;
    w->next_batch++;
    a->next_batch = w->next_batch;
    w->bytes_written += w->batch.buf.len;
    w->batches_written++;
    w->dirty = true;
    wal_codec_batch_begin(&w->batch, a->salt);
    return DISKIO_OK;
}

int wal_writer_sync(struct wal_writer *w, struct diskio_err *err)
{
    char name[WAL_NAME_MAX];

    if (!w->dirty)
        return DISKIO_OK;
    if (diskio_sync_fd(&w->sync, w->fd, true) < 0) {
        wal_seg_name(name, active(w)->seq);
        return diskio_fail_errno(err, errno, "storage: fdatasync %s/%s", w->dirpath, name);
    }
    w->dirty = false;
    return DISKIO_OK;
}

/* Make room for a frame of fsize bytes: flush, and start a new segment when needed. */
static int make_room(struct wal_writer *w, size_t fsize, struct diskio_err *err)
{
    struct wal_segment *a = active(w);
    size_t hdr = w->batch.count == 0 ? WAL_FRAME_HEADER : 0;
    int rc;

    if (a->end + w->batch.buf.len + hdr + fsize <= a->size)
        return DISKIO_OK;
    if (WAL_SEG_HEADER_SIZE + WAL_FRAME_HEADER + fsize > w->seg_bytes)
        return diskio_fail(err, DISKIO_EINVAL,
                           "storage: a %zu-byte frame does not fit in a %" PRIu64 "-byte segment",
                           fsize, w->seg_bytes);
    rc = wal_writer_flush(w, err);
    if (rc != DISKIO_OK)
        return rc;
    a = active(w);
    if (a->end + WAL_FRAME_HEADER + fsize <= a->size)
        return DISKIO_OK;
    /* The old segment must be durable before anything lands in the new one, so that only
     * the last segment can ever end in a torn batch. */
    rc = wal_writer_sync(w, err);
    if (rc != DISKIO_OK)
        return rc;
    return create_segment(w, a->seq + 1, err);
}

static void note_index(struct wal_writer *w, uint64_t index)
{
    struct wal_segment *a = active(w);
    if (index > a->high)
        a->high = index;
}

static int nomem(struct diskio_err *err)
{
    return diskio_fail(err, DISKIO_ENOMEM, "storage: batch buffer: %s", strerror(ENOMEM));
}

int wal_writer_entry(struct wal_writer *w, const struct wal_entry *e, struct diskio_err *err)
{
    int rc = make_room(w, wal_codec_frame_size(e->len), err);
    if (rc != DISKIO_OK)
        return rc;
    if (wal_codec_batch_add_entry(&w->batch, e->index, e->term, e->type, e->data, e->len) < 0)
        return nomem(err);
    note_index(w, e->index);
    return DISKIO_OK;
}

int wal_writer_truncate(struct wal_writer *w, uint64_t index, struct diskio_err *err)
{
    int rc = make_room(w, WAL_FRAME_HEADER, err);
    if (rc != DISKIO_OK)
        return rc;
    if (wal_codec_batch_add_truncate(&w->batch, index) < 0)
        return nomem(err);
    note_index(w, index);
    return DISKIO_OK;
}

int wal_writer_reset(struct wal_writer *w, uint64_t index, uint64_t term, struct diskio_err *err)
{
    int rc = make_room(w, WAL_FRAME_HEADER, err);
    if (rc != DISKIO_OK)
        return rc;
    if (wal_codec_batch_add_reset(&w->batch, index, term) < 0)
        return nomem(err);
    note_index(w, index);
    return DISKIO_OK;
}

int wal_writer_compact(struct wal_writer *w, uint64_t upto, struct diskio_err *err)
{
    size_t k = 0, done = 0;
    int rc = DISKIO_OK;

    while (k + 1 < w->n_segs && w->segs[k].high <= upto)
        k++;
    /* Oldest first, each removal durable before the next: whatever a crash interrupts, the
     * segments left are still consecutive (the directory may otherwise persist the unlinks
     * in another order and leave a hole, which recovery must refuse). */
    for (; done < k; done++) {
        char name[WAL_NAME_MAX];
        wal_seg_name(name, w->segs[done].seq);
        if (unlinkat(w->dirfd, name, 0) < 0 && errno != ENOENT) {
            rc = diskio_fail_errno(err, errno, "storage: remove %s/%s", w->dirpath, name);
            break;
        }
        if (diskio_sync_dir(&w->sync, w->dirfd) < 0) {
            rc = diskio_fail_errno(err, errno, "storage: fsync directory %s", w->dirpath);
            done++;
            break;
        }
    }
    if (done > 0) {
        memmove(w->segs, w->segs + done, (w->n_segs - done) * sizeof(*w->segs));
        w->n_segs -= done;
        w->segments_deleted += done;
    }
    return rc != DISKIO_OK ? rc : (int)done;
}
