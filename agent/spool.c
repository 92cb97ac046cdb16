/*
 * spool.c - spurd's spool; the layout and its invariants are in spool.h.
 *
 * The tombstone table is an open-addressing hash map from job id (never 0) to the highest
 * attempt tombstoned and the sequence number of that tombstone (its line in the file), so
 * that a compaction keeps the newest SPOOL_TOMB_KEEP jobs. It only grows between
 * compactions, which rebuild it, so it needs no deletion.
 */
#include "spool.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPOOL_MAX_RECORD (64u << 20) /* a launch carries a script of at most 4 MiB */

struct tomb_slot {
    uint64_t job_id; /* 0: empty */
    uint32_t attempt;
    uint64_t seq;
};

/* Ownership: the slots array. */
struct spool_tomb {
    struct tomb_slot *slots;
    size_t cap; /* a power of two */
    size_t used;
    uint64_t next_seq;
};

static size_t tomb_hash(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

static int tomb_grow(struct spool_tomb *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 1024;
    struct tomb_slot *ns = calloc(ncap, sizeof(*ns));
    if (ns == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i].job_id == 0)
            continue;
        size_t h = tomb_hash(t->slots[i].job_id, ncap);
        while (ns[h].job_id != 0)
            h = (h + 1) & (ncap - 1);
        ns[h] = t->slots[i];
    }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
    return 0;
}

static struct tomb_slot *tomb_lookup(const struct spool_tomb *t, uint64_t job_id)
{
    if (t->cap == 0)
        return NULL;
    for (size_t h = tomb_hash(job_id, t->cap);; h = (h + 1) & (t->cap - 1)) {
        if (t->slots[h].job_id == job_id)
            return &t->slots[h];
        if (t->slots[h].job_id == 0)
            return NULL;
    }
}

/* Record (job_id, attempt) in memory; the highest attempt of a job wins. */
static int tomb_put(struct spool_tomb *t, uint64_t job_id, uint32_t attempt)
{
    struct tomb_slot *s = tomb_lookup(t, job_id);
    if (s == NULL) {
        if ((t->used + 1) * 4 > t->cap * 3 && tomb_grow(t) != 0)
            return -1;
        size_t h = tomb_hash(job_id, t->cap);
        while (t->slots[h].job_id != 0)
            h = (h + 1) & (t->cap - 1);
        s = &t->slots[h];
        s->job_id = job_id;
        t->used++;
    } else if (s->attempt > attempt) {
        return 0;
    }
    s->attempt = attempt;
    s->seq = t->next_seq++;
    return 0;
}

static void set_err(char *err, size_t errlen, const char *path, const char *what)
{
    snprintf(err, errlen, "%s: %s: %s", path, what, strerror(errno));
}

/* "JOB_ID.ATTEMPT" with both parts decimal, no sign, job id and attempt not 0. */
static bool parse_key(const char *s, size_t len, uint64_t *job_id, uint32_t *attempt)
{
    uint64_t j = 0, a = 0;
    size_t i = 0;
    if (len == 0 || s[0] < '0' || s[0] > '9')
        return false;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (j > (UINT64_MAX - 9) / 10)
            return false;
        j = j * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == len || s[i] != '.' || ++i == len)
        return false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9' || a > UINT32_MAX / 10)
            return false;
        a = a * 10 + (uint64_t)(s[i] - '0');
    }
    if (j == 0 || a == 0 || a > UINT32_MAX)
        return false;
    *job_id = j;
    *attempt = (uint32_t)a;
    return true;
}

/* Read a whole small file at dirfd/name into a malloc'd buffer. 0, or -1 with errno. */
static int read_file_at(int dirfd, const char *name, uint8_t **buf, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > SPOOL_MAX_RECORD) {
        close(fd);
        errno = EINVAL; /* not a record spurd or its monitor could have written */
        return -1;
    }
    uint8_t *b = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (b != NULL && got < (size_t)st.st_size) {
        ssize_t n = read(fd, b + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    int saved = errno;
    close(fd);
    if (b == NULL || got < (size_t)st.st_size) {
        free(b);
        errno = b == NULL ? ENOMEM : (saved ? saved : EIO);
        return -1;
    }
    b[got] = 0;
    *buf = b;
    *len = got;
    return 0;
}

/*
 * Write dirfd/name whole: name.tmp, rename (a reader never sees half a file). durable:
 * fsync the file before the rename and the directory after, so it survives a crash of
 * the host, not only of spurd. See "What is synced, and why" in docs/agent.md.
 */
static int write_file_at(int dirfd, const char *name, const void *data, size_t len, bool durable)
{
    char tmp[64];
    snprintf(tmp, sizeof(tmp), "%s.tmp", name);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    const uint8_t *p = data;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, p + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            close(fd);
            unlinkat(dirfd, tmp, 0);
            errno = saved;
            return -1;
        }
        off += (size_t)n;
    }
    if ((durable && fsync(fd) != 0) || close(fd) != 0 ||
        renameat(dirfd, tmp, dirfd, name) != 0) {
        int saved = errno;
        unlinkat(dirfd, tmp, 0);
        errno = saved;
        return -1;
    }
    return durable ? fsync(dirfd) : 0;
}

static void skip(struct spool *sp, const char *what, const char *name, const char *why)
{
    sp->skipped++;
    log_event(LOG_WARN, "agent", "spool: skipped", "what=%s item=%s path=%s why=%s", what,
              log_q(name), log_q(sp->path), log_q(why));
}

static void load_term(struct spool *sp)
{
    uint8_t *b;
    size_t len;
    if (read_file_at(sp->dirfd, "term", &b, &len) != 0) {
        if (errno != ENOENT)
            skip(sp, "term", "term", strerror(errno));
        return;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull((char *)b, &end, 10);
    if (len == 0 || b[0] < '0' || b[0] > '9' || errno != 0 || strcmp(end, "\n") != 0)
        skip(sp, "term", "term", "not a decimal number and a newline");
    else
        sp->term = v;
    free(b);
}

static int cmp_seq(const void *a, const void *b)
{
    const struct tomb_slot *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Rewrite the tombstones file with the newest SPOOL_TOMB_KEEP jobs, oldest first, and
 * rebuild the table from them.
 */
static int compact_tombs(struct spool *sp)
{
    struct spool_tomb *t = sp->tombs;
    size_t n = 0;
    struct tomb_slot *all = malloc((t->used ? t->used : 1) * sizeof(*all));
    if (all == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].job_id != 0)
            all[n++] = t->slots[i];
    qsort(all, n, sizeof(*all), cmp_seq);
    size_t first = n > sp->tomb_keep ? n - sp->tomb_keep : 0;
    size_t outcap = (n - first) * 32 + 1, outlen = 0;
    char *out = malloc(outcap);
    if (out == NULL) {
        free(all);
        return -1;
    }
    struct spool_tomb fresh = {0};
    for (size_t i = first; i < n; i++) {
        outlen += (size_t)snprintf(out + outlen, outcap - outlen, "%" PRIu64 ".%u\n", all[i].job_id,
                                   all[i].attempt);
        if (tomb_put(&fresh, all[i].job_id, all[i].attempt) != 0) {
            free(fresh.slots);
            free(all);
            free(out);
            return -1;
        }
    }
    free(all);
    int rc = write_file_at(sp->dirfd, "tombstones", out, outlen, false);
    free(out);
    if (rc != 0) {
        free(fresh.slots);
        return -1;
    }
    free(t->slots);
    *t = fresh;
    sp->tomb_lines = t->used;
    if (sp->tombfd >= 0)
        close(sp->tombfd);
    sp->tombfd = openat(sp->dirfd, "tombstones", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    return sp->tombfd < 0 ? -1 : 0;
}

static void load_tombs(struct spool *sp)
{
    uint8_t *b;
    size_t len;
    if (read_file_at(sp->dirfd, "tombstones", &b, &len) != 0) {
        if (errno != ENOENT)
            skip(sp, "tombstones", "tombstones", strerror(errno));
        return;
    }
    unsigned bad = 0;
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && b[e] != '\n')
            e++;
        uint64_t j;
        uint32_t a;
        if (e == len) /* a torn last line (no newline): never complete, so never relied on */
            bad++;
        else if (parse_key((char *)b + i, e - i, &j, &a))
            tomb_put(sp->tombs, j, a);
        else
            bad++;
        sp->tomb_lines++;
        i = e + 1;
    }
    free(b);
    if (bad > 0) {
        char why[64];
        snprintf(why, sizeof(why), "%u lines are not JOB_ID.ATTEMPT", bad);
        skip(sp, "tombstones", "tombstones", why);
    }
}

static void job_free(struct spool_job *j)
{
    if (j->dirfd >= 0)
        close(j->dirfd);
    if (j->launch)
        spur__agent__launch__free_unpacked(j->launch, NULL);
    free(j->ended);
    free(j);
}

/* Remove dirfd/name and everything in it (one level: files and the ctl socket). */
static int remove_dir_at(int parentfd, const char *name)
{
    int fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    /* Not synced: a removal lost with the host only brings back an acked report, which
     * the leader acks again and which changes nothing. */
    return unlinkat(parentfd, name, AT_REMOVEDIR);
}

static void add_job(struct spool *sp, struct spool_job *j)
{
    j->next = sp->jobs;
    sp->jobs = j;
    sp->njobs++;
}

/* One attempt directory found at start. */
static void load_job(struct spool *sp, const char *name)
{
    uint64_t job_id;
    uint32_t attempt;
    if (!parse_key(name, strlen(name), &job_id, &attempt)) {
        skip(sp, "job directory", name, "name is not JOB_ID.ATTEMPT");
        return;
    }
    int fd = openat(sp->jobsfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        skip(sp, "job directory", name, strerror(errno));
        return;
    }
    struct stat st;
    if (fstatat(fd, "launch", &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT &&
        faccessat(fd, "monitor", F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
        /* Died between mkdir and the launch's rename: never started, nothing to keep. */
        close(fd);
        if (remove_dir_at(sp->jobsfd, name) != 0)
            skip(sp, "job directory", name, strerror(errno));
        else
            log_event(LOG_INFO, "agent", "spool: removed an attempt that never started",
                      "job_id=%" PRIu64 " attempt=%u", job_id, attempt);
        return;
    }
    struct spool_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        close(fd);
        skip(sp, "job directory", name, "out of memory");
        return;
    }
    j->job_id = job_id;
    j->attempt = attempt;
    j->dirfd = fd;
    uint8_t *b;
    size_t len;
    if (read_file_at(fd, "launch", &b, &len) != 0) {
        skip(sp, "launch record", name, strerror(errno));
    } else {
        j->launch = spur__agent__launch__unpack(NULL, len, b);
        free(b);
        if (j->launch == NULL || j->launch->job_id != job_id || j->launch->attempt != attempt) {
            skip(sp, "launch record", name, "does not decode as this attempt's Launch");
            if (j->launch)
                spur__agent__launch__free_unpacked(j->launch, NULL);
            j->launch = NULL;
        }
    }
    if (fstatat(fd, "launch", &st, AT_SYMLINK_NOFOLLOW) == 0)
        j->start_time_ms =
            (uint64_t)st.st_mtim.tv_sec * 1000u + (uint64_t)st.st_mtim.tv_nsec / 1000000u;
    add_job(sp, j);
    char err[256];
    if (spool_read_ended(sp, j, err, sizeof(err)) < 0)
        skip(sp, "ended report", name, err);
}

static void load_jobs(struct spool *sp)
{
    int fd = dup(sp->jobsfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        skip(sp, "jobs", "jobs", strerror(errno));
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        load_job(sp, de->d_name);
    }
    closedir(d);
}

int spool_open(struct spool *sp, const char *path, char *err, size_t errlen)
{
    memset(sp, 0, sizeof(*sp));
    sp->dirfd = sp->jobsfd = sp->tombfd = -1;
    sp->tomb_keep = SPOOL_TOMB_KEEP;
    sp->path = strdup(path);
    sp->tombs = calloc(1, sizeof(*sp->tombs));
    if (sp->path == NULL || sp->tombs == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        spool_close(sp);
        return -1;
    }
    if (mkdir_parents(path, 0700) != 0) {
        set_err(err, errlen, path, "cannot create");
        spool_close(sp);
        return -1;
    }
    sp->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sp->dirfd < 0) {
        set_err(err, errlen, path, "cannot open");
        spool_close(sp);
        return -1;
    }
    if (fchmod(sp->dirfd, 0700) != 0 ||
        (mkdirat(sp->dirfd, "jobs", 0700) != 0 && errno != EEXIST)) {
        set_err(err, errlen, path, "not writable");
        spool_close(sp);
        return -1;
    }
    sp->jobsfd = openat(sp->dirfd, "jobs", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (sp->jobsfd < 0) {
        set_err(err, errlen, path, "cannot open jobs/");
        spool_close(sp);
        return -1;
    }
    load_term(sp);
    load_tombs(sp);
    if (sp->tomb_lines > sp->tomb_keep + sp->tomb_keep / 4 || sp->skipped > 0 ||
        faccessat(sp->dirfd, "tombstones", F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
        /* Too long, torn or absent: write it afresh from what was read. */
        if (compact_tombs(sp) != 0) {
            set_err(err, errlen, path, "cannot write tombstones");
            spool_close(sp);
            return -1;
        }
    } else {
        sp->tombfd = openat(sp->dirfd, "tombstones", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (sp->tombfd < 0) {
            set_err(err, errlen, path, "cannot open tombstones");
            spool_close(sp);
            return -1;
        }
    }
    load_jobs(sp);
    return 0;
}

void spool_close(struct spool *sp)
{
    while (sp->jobs) {
        struct spool_job *j = sp->jobs;
        sp->jobs = j->next;
        job_free(j);
    }
    if (sp->tombs)
        free(sp->tombs->slots);
    free(sp->tombs);
    if (sp->tombfd >= 0)
        close(sp->tombfd);
    if (sp->jobsfd >= 0)
        close(sp->jobsfd);
    if (sp->dirfd >= 0)
        close(sp->dirfd);
    free(sp->path);
    memset(sp, 0, sizeof(*sp));
    sp->dirfd = sp->jobsfd = sp->tombfd = -1;
}

int spool_set_term(struct spool *sp, uint64_t term, char *err, size_t errlen)
{
    if (term <= sp->term)
        return 0;
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", term);
    if (write_file_at(sp->dirfd, "term", buf, (size_t)n, true) != 0) {
        set_err(err, errlen, sp->path, "cannot write term");
        return -1;
    }
    sp->term = term;
    return 0;
}

uint32_t spool_tomb_attempt(const struct spool *sp, uint64_t job_id)
{
    const struct tomb_slot *s = tomb_lookup(sp->tombs, job_id);
    return s ? s->attempt : 0;
}

int spool_tombstone(struct spool *sp, uint64_t job_id, uint32_t attempt, char *err, size_t errlen)
{
    if (spool_tomb_attempt(sp, job_id) >= attempt)
        return 0;
    char line[48];
    int n = snprintf(line, sizeof(line), "%" PRIu64 ".%u\n", job_id, attempt);
    if (write_all(sp->tombfd, line, (size_t)n) != 0) {
        set_err(err, errlen, sp->path, "cannot append to tombstones");
        return -1;
    }
    if (tomb_put(sp->tombs, job_id, attempt) != 0) {
        snprintf(err, errlen, "%s: tombstones: out of memory", sp->path);
        return -1;
    }
    sp->tomb_lines++;
    if (sp->tomb_lines >= sp->tomb_keep + sp->tomb_keep / 4 && compact_tombs(sp) != 0) {
        set_err(err, errlen, sp->path, "cannot rewrite tombstones");
        return -1;
    }
    return 0;
}

struct spool_job *spool_find(const struct spool *sp, uint64_t job_id, uint32_t attempt)
{
    struct spool_job *best = NULL;
    for (struct spool_job *j = sp->jobs; j; j = j->next) {
        if (j->job_id != job_id)
            continue;
        if (attempt != 0 && j->attempt == attempt)
            return j;
        if (attempt == 0 && (best == NULL || j->attempt > best->attempt))
            best = j;
    }
    return best;
}

enum spool_launch_verdict spool_launch_check(const struct spool *sp, uint64_t job_id,
                                             uint32_t attempt)
{
    if (spool_tomb_attempt(sp, job_id) >= attempt)
        return SPOOL_LAUNCH_FINISHED;
    struct spool_job *hi = spool_find(sp, job_id, 0);
    if (hi == NULL)
        return SPOOL_LAUNCH_NEW;
    if (hi->attempt > attempt)
        return SPOOL_LAUNCH_FINISHED;
    return hi->attempt == attempt || spool_find(sp, job_id, attempt) ? SPOOL_LAUNCH_PRESENT
                                                                     : SPOOL_LAUNCH_NEW;
}

int spool_create(struct spool *sp, const Spur__Agent__Launch *l, struct spool_job **out, char *err,
                 size_t errlen)
{
    char name[48];
    snprintf(name, sizeof(name), "%" PRIu64 ".%u", l->job_id, l->attempt);
    size_t len = spur__agent__launch__get_packed_size(l);
    uint8_t *buf = malloc(len ? len : 1);
    struct spool_job *j = calloc(1, sizeof(*j));
    if (buf == NULL || j == NULL) {
        free(buf);
        free(j);
        snprintf(err, errlen, "%s: out of memory", sp->path);
        return -1;
    }
    spur__agent__launch__pack(l, buf);
    j->job_id = l->job_id;
    j->attempt = l->attempt;
    j->dirfd = -1;
    if (mkdirat(sp->jobsfd, name, 0700) != 0) {
        set_err(err, errlen, sp->path, "cannot create the job directory");
        goto fail;
    }
    j->dirfd = openat(sp->jobsfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (j->dirfd < 0 || write_file_at(j->dirfd, "launch", buf, len, false) != 0) {
        set_err(err, errlen, sp->path, "cannot write the launch record");
        remove_dir_at(sp->jobsfd, name);
        goto fail;
    }
    j->launch = spur__agent__launch__unpack(NULL, len, buf);
    free(buf);
    buf = NULL;
    if (j->launch == NULL) {
        snprintf(err, errlen, "%s: out of memory", sp->path);
        remove_dir_at(sp->jobsfd, name);
        goto fail;
    }
    struct stat st;
    if (fstatat(j->dirfd, "launch", &st, 0) == 0)
        j->start_time_ms =
            (uint64_t)st.st_mtim.tv_sec * 1000u + (uint64_t)st.st_mtim.tv_nsec / 1000000u;
    add_job(sp, j);
    *out = j;
    return 0;
fail:
    free(buf);
    job_free(j);
    return -1;
}

int spool_read_ended(struct spool *sp, struct spool_job *j, char *err, size_t errlen)
{
    if (j->ended != NULL || j->ended_bad)
        return 1;
    uint8_t *b;
    size_t len;
    if (read_file_at(j->dirfd, "ended", &b, &len) != 0) {
        if (errno == ENOENT)
            return 0;
        set_err(err, errlen, sp->path, "cannot read an ended report");
        return -1;
    }
    Spur__Agent__Ended *e = spur__agent__ended__unpack(NULL, len, b);
    if (e == NULL || e->job_id != j->job_id || e->attempt != j->attempt) {
        char name[48];
        snprintf(name, sizeof(name), "%" PRIu64 ".%u/ended", j->job_id, j->attempt);
        skip(sp, "ended report", name, "does not decode as this attempt's Ended");
        if (e)
            spur__agent__ended__free_unpacked(e, NULL);
        free(b);
        j->ended_bad = true;
        return 1;
    }
    spur__agent__ended__free_unpacked(e, NULL);
    j->ended = b;
    j->ended_len = len;
    return 1;
}

int spool_remove(struct spool *sp, struct spool_job *j, char *err, size_t errlen)
{
    if (spool_tombstone(sp, j->job_id, j->attempt, err, errlen) != 0)
        return -1;
    char name[48];
    snprintf(name, sizeof(name), "%" PRIu64 ".%u", j->job_id, j->attempt);
    if (remove_dir_at(sp->jobsfd, name) != 0)
        log_event(LOG_WARN, "agent", "spool: cannot remove an acknowledged attempt",
                  "job_id=%" PRIu64 " attempt=%u error=%s", j->job_id, j->attempt,
                  log_q(strerror(errno)));
    for (struct spool_job **pp = &sp->jobs; *pp; pp = &(*pp)->next) {
        if (*pp == j) {
            *pp = j->next;
            sp->njobs--;
            break;
        }
    }
    job_free(j);
    return 0;
}
