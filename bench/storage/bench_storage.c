/*
 * bench_storage.c - throughput and recovery of the Raft storage (raftd/storage), as tables.
 *
 *   bench_storage [-d DIR] [-t SECONDS] [-n MAX_ENTRIES]
 *
 * Table 1, append with fsync on: requests of 1, 16, 64 and 256 entries of 256 bytes, first
 * with one request in flight (every request waits for its own fdatasync: the latency a
 * follower's acknowledgement sees), then with 32 in flight (the writer groups them: the
 * throughput a busy leader sees). Latency is submit to completion as the loop thread
 * would observe it.
 *
 * Table 2, recovery of logs of 100k and 1M entries of 256 bytes: the time storage_open()
 * takes and the peak RSS of a fresh process that does only that, with the segment files in
 * the page cache ("warm") and evicted from it first with POSIX_FADV_DONTNEED ("cold", as
 * after a reboot; the eviction is best effort).
 *
 * DIR defaults to a new directory under $TMPDIR or /tmp; it is removed afterwards. The
 * numbers depend on the disk and file system under DIR: say which when quoting them.
 */
#include "storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAYLOAD 256

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tree(const char *dir)
{
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void die(const char *what, const struct diskio_err *err)
{
    fprintf(stderr, "bench_storage: %s: %s\n", what, err != NULL ? err->msg : strerror(errno));
    exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static struct storage *open_fresh(const char *dir, bool fsync)
{
    struct storage_options o;
    struct storage_recovered rec;
    struct storage *st;
    struct diskio_err err;

    rm_tree(dir);
    if (mkdir(dir, 0700) < 0)
        die("mkdir", NULL);
    storage_options_default(&o);
    o.fsync = fsync;
    if (storage_open(dir, &o, &st, &rec, &err) != DISKIO_OK)
        die("open", &err);
    storage_recovered_free(&rec);
    return st;
}

/* One append run: requests of `batch` entries, `depth` in flight, for `seconds`. */
static void append_run(const char *dir, size_t batch, size_t depth, double seconds)
{
    struct storage *st = open_fresh(dir, true);
    struct wal_entry *e = calloc(batch, sizeof(*e));
    uint8_t payload[PAYLOAD];
    size_t cap = 1 << 20, n_lat = 0, inflight = 0;
    uint64_t *lat = malloc(cap * sizeof(*lat));
    uint64_t next = 1, t0 = now_ns(), deadline = t0 + (uint64_t)(seconds * 1e9), done_entries = 0;
    struct storage_metrics m;
    struct diskio_err err;
    double secs;

    memset(payload, 'x', sizeof(payload));
    for (;;) {
        uint64_t t = now_ns();
        while (inflight < depth && t < deadline) {
            struct storage_write w = {
                .entries = e, .n_entries = batch, .cookie = (void *)(uintptr_t)t};
            for (size_t i = 0; i < batch; i++) {
                e[i].index = next + i;
                e[i].term = 1;
                e[i].type = 1;
                e[i].len = PAYLOAD;
                e[i].data = payload;
            }
            if (storage_submit(st, &w, &err) != DISKIO_OK)
                die("submit", &err);
            next += batch;
            inflight++;
        }
        if (inflight == 0)
            break;
        struct pollfd pfd = {.fd = storage_event_fd(st), .events = POLLIN};
        struct storage_done d[64];
        size_t k;
        poll(&pfd, 1, 1000);
        k = storage_poll(st, d, 64);
        t = now_ns();
        for (size_t i = 0; i < k; i++) {
            if (d[i].status != DISKIO_OK)
                die("write", NULL);
            if (n_lat < cap)
                lat[n_lat++] = t - (uint64_t)(uintptr_t)d[i].cookie;
            done_entries += batch;
            inflight--;
        }
    }
    secs = (double)(now_ns() - t0) / 1e9;
    storage_metrics_get(st, &m);
    storage_close(st);
    qsort(lat, n_lat, sizeof(*lat), cmp_u64);
    printf("| %5zu | %5zu | %8zu | %10.0f | %7.2f | %7" PRIu64 " | %7" PRIu64
           " | %8.0f | %8.0f | %8.0f |\n",
           batch, depth, n_lat, (double)done_entries / secs,
           (double)done_entries * PAYLOAD / secs / 1e6, m.group_commits, m.fsync_count,
           m.fsync_count ? (double)m.fsync_sum_ns / (double)m.fsync_count / 1e3 : 0.0,
           n_lat ? (double)lat[n_lat / 2] / 1e3 : 0.0,
           n_lat ? (double)lat[n_lat * 99 / 100] / 1e3 : 0.0);
    fflush(stdout);
    free(lat);
    free(e);
}

/* Fill dir with n entries (fsync off: only the result matters), synced at the end. */
static double fill_log(const char *dir, uint64_t n)
{
    struct storage *st = open_fresh(dir, false);
    struct wal_entry e[256];
    uint8_t payload[PAYLOAD];
    uint64_t next = 1, inflight = 0, t0 = now_ns();
    struct diskio_err err;

    memset(payload, 'y', sizeof(payload));
    while (next <= n || inflight > 0) {
        while (next <= n && inflight < 64) {
            size_t b = n - next + 1 < 256 ? (size_t)(n - next + 1) : 256;
            struct storage_write w = {.entries = e, .n_entries = b};
            for (size_t i = 0; i < b; i++) {
                e[i].index = next + i;
                e[i].term = 1 + (next + i) / 100000;
                e[i].type = 1;
                e[i].len = PAYLOAD;
                e[i].data = payload;
            }
            if (storage_submit(st, &w, &err) != DISKIO_OK)
                die("submit", &err);
            next += b;
            inflight++;
        }
        struct pollfd pfd = {.fd = storage_event_fd(st), .events = POLLIN};
        struct storage_done d[64];
        poll(&pfd, 1, 1000);
        inflight -= storage_poll(st, d, 64);
    }
    storage_close(st);
    sync();
    return (double)(now_ns() - t0) / 1e9;
}

static void evict(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[4600];

    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        int fd;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    closedir(d);
}

static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, key, kl) == 0 && line[kl] == ':')
            v = strtol(line + kl + 1, NULL, 10);
    fclose(f);
    return v;
}

/* Recover in a fresh child so the RSS figures are those of recovery alone. */
static void recover_run(const char *dir, uint64_t n, const char *cache)
{
    int p[2];
    pid_t pid;
    double r[5];

    if (pipe(p) < 0)
        die("pipe", NULL);
    pid = fork();
    if (pid == 0) {
        struct storage_options o;
        struct storage_recovered rec;
        struct storage *st;
        struct diskio_err err;
        long rss0 = status_kb("VmRSS");
        uint64_t t0 = now_ns(), t1;

        storage_options_default(&o);
        if (storage_open(dir, &o, &st, &rec, &err) != DISKIO_OK)
            die("recover", &err);
        t1 = now_ns();
        r[0] = (double)(t1 - t0) / 1e6;
        r[1] = (double)rec.n_entries;
        r[2] = (double)rss0 / 1024.0;
        r[3] = (double)status_kb("VmHWM") / 1024.0;
        r[4] = (double)status_kb("VmRSS") / 1024.0;
        storage_recovered_free(&rec);
        storage_close(st);
        if (write(p[1], r, sizeof(r)) != sizeof(r))
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    if (read(p[0], r, sizeof(r)) != sizeof(r)) {
        fprintf(stderr, "bench_storage: recovery child failed\n");
        exit(1);
    }
    close(p[0]);
    waitpid(pid, NULL, 0);
    printf("| %9" PRIu64 " | %5s | %9.0f | %9.1f | %11.1f | %11.1f | %12.1f |\n", n, cache, r[1],
           r[0], r[2], r[3], r[4]);
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_storage [-d DIR] [-t SECONDS] [-n MAX_ENTRIES]\n");
    exit(64);
}

int main(int argc, char **argv)
{
    char base[4096] = "", dir[4200];
    double seconds = 2.0;
    uint64_t max_entries = 1000000;
    const char *tmp = getenv("TMPDIR");
    bool own = false;
    int c;

    while ((c = getopt(argc, argv, "d:t:n:h")) != -1) {
        switch (c) {
        case 'd':
            snprintf(base, sizeof(base), "%s", optarg);
            break;
        case 't':
            seconds = atof(optarg);
            break;
        case 'n':
            max_entries = strtoull(optarg, NULL, 10);
            break;
        default:
            usage();
        }
    }
    if (base[0] == '\0') {
        snprintf(base, sizeof(base), "%s/spur-bench-storage-XXXXXX", tmp ? tmp : "/tmp");
        if (mkdtemp(base) == NULL)
            die("mkdtemp", NULL);
        own = true;
    }
    snprintf(dir, sizeof(dir), "%s/state", base);

    printf("Append, fsync on, %d-byte entries, %.1f s per row (dir %s)\n\n", PAYLOAD, seconds,
           base);
    printf("| batch | depth | requests |  entries/s |    MB/s |  groups |  fsyncs | fsync us |"
           "  p50 us |   p99 us |\n");
    printf("|------:|------:|---------:|-----------:|--------:|--------:|--------:|---------:|"
           "---------:|---------:|\n");
    {
        size_t batches[] = {1, 16, 64, 256};
        size_t depths[] = {1, 32};
        for (size_t di = 0; di < 2; di++)
            for (size_t bi = 0; bi < 4; bi++)
                append_run(dir, batches[bi], depths[di], seconds);
    }

    printf("\nRecovery of %d-byte entries (storage_open in a fresh process)\n\n", PAYLOAD);
    printf("|   entries | cache | recovered |   open ms | RSS before MB | peak RSS MB |"
           " RSS after MB |\n");
    printf("|----------:|:------|----------:|----------:|------------:|------------:|"
           "-------------:|\n");
    {
        uint64_t sizes[] = {100000, 1000000};
        for (size_t i = 0; i < 2; i++) {
            if (sizes[i] > max_entries)
                continue;
            fill_log(dir, sizes[i]);
            recover_run(dir, sizes[i], "warm");
            evict(dir);
            recover_run(dir, sizes[i], "cold");
        }
    }
    rm_tree(dir);
    if (own)
        rm_tree(base);
    return 0;
}
