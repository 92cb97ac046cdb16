/*
 * cgroup.c - per-job cgroups (cgroup.h has the layout and the guarantees).
 *
 * Everything here is cgroupfs file I/O through directory descriptors: a job's cgroup is
 * opened once (O_DIRECTORY) and its files are reached with openat(), so the monitor's
 * later reads and the job child's cgroup_job_enter() neither build paths nor allocate.
 * Finding the hierarchy reads /proc/self/mountinfo (the cgroup2 mount and the v1 memory
 * mount, with the root each mount shows, so a cgroup namespace's paths line up) and
 * /proc/self/cgroup (spurd's own cgroups).
 */
#include "cgroup.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CG_FREEZE_WAIT_TRIES 200 /* x 5 ms: a freeze that takes over 1 s is given up */
#define CG_RMDIR_TRIES       100 /* x 10 ms */
#define CG_NO_LIMIT          (1ull << 60)

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Read dirfd/name into buf (NUL-terminated). Returns the length or -1. */
static ssize_t cg_read(int dirfd, const char *name, char *buf, size_t len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t r = read(fd, buf + got, len - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

/* Write s to dirfd/name in one write(2), as cgroupfs wants. Async-signal-safe. */
static int cg_write(int dirfd, const char *name, const char *s)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(s);
    ssize_t w;
    do {
        w = write(fd, s, len);
    } while (w < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    errno = saved;
    return w == (ssize_t)len ? 0 : -1;
}

static int cg_write_u64(int dirfd, const char *name, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof(num), "%" PRIu64, v);
    return cg_write(dirfd, name, num);
}

/* The number after "key " in a flat keyed file ("populated 1\nfrozen 0\n"); -1 if absent. */
static long long keyed_value(const char *text, const char *key)
{
    size_t klen = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, klen) == 0 && p[klen] == ' ')
            return strtoll(p + klen + 1, NULL, 10);
    return -1;
}

static bool word_in(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\n' || *p == ',')
            p++;
        size_t l = strcspn(p, " \n,");
        if (l == wl && strncmp(p, word, wl) == 0)
            return true;
        p += l;
    }
    return false;
}

/*
 * The mount point and mount root of the first mount of fstype (with opt among its super
 * options when opt is set) in /proc/self/mountinfo. Returns 0 or -1.
 */
static int find_mount(const char *fstype, const char *opt, char *mnt, char *root)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL)
        return -1;
    char line[4096];
    int rc = -1;
    while (rc != 0 && fgets(line, sizeof(line), f) != NULL) {
        char r[PATH_MAX], m[PATH_MAX], type[64], super[1024];
        char *sep = strstr(line, " - ");
        if (sep == NULL || sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2)
            continue;
        if (sscanf(sep + 3, "%63s %*s %1023s", type, super) != 2)
            continue;
        if (strcmp(type, fstype) != 0 || (opt && !word_in(super, opt)))
            continue;
        snprintf(mnt, PATH_MAX, "%s", m);
        snprintf(root, PATH_MAX, "%s", r);
        rc = 0;
    }
    fclose(f);
    return rc;
}

/*
 * spurd's own cgroup path from /proc/self/cgroup: the "0::" line when controller is NULL,
 * else the v1 line whose controller list holds controller. Returns 0 or -1.
 */
static int own_cgroup(const char *controller, char *path)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return -1;
    char line[PATH_MAX + 128];
    int rc = -1;
    while (rc != 0 && fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        bool match = controller == NULL ? c1 == line + 1 && line[0] == '0' && c2 == c1 + 1
                                        : word_in(c1 + 1, controller);
        if (match) {
            snprintf(path, PATH_MAX, "%s", c2 + 1);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/* mnt + own with the mount's root taken off own (a cgroup namespace or a bind mount). */
static int own_dir(const char *mnt, const char *root, const char *own, char *out)
{
    size_t rl = strlen(root);
    const char *rel = own;
    if (strcmp(root, "/") != 0 && strncmp(own, root, rl) == 0 && (own[rl] == '/' || !own[rl]))
        rel = own + rl;
    if (strcmp(rel, "/") == 0)
        rel = "";
    int n = snprintf(out, PATH_MAX, "%s%s", mnt, rel);
    return n > 0 && n < PATH_MAX ? 0 : -1;
}

/* Whether the cgroup at dir holds processes (cgroup.procs not empty). */
static bool has_procs(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[64];
    ssize_t n = cg_read(fd, "cgroup.procs", buf, sizeof(buf));
    close(fd);
    return n > 0;
}

static const char *const cg_wanted[] = {"cpu", "memory", "pids"};

/*
 * Enable the wanted controllers that own offers for its children. A non-root own with
 * processes in it cannot hand controllers down (cgroup v2's no-internal-process rule):
 * spurd moves itself into own/spurd-<node> first; other processes left in own make the
 * enabling fail, and the jobs then go without controllers (still tracked and killed).
 */
static void enable_controllers(const char *own, bool own_is_root, const char *node_name)
{
    int fd = open(own, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    char offered[512], enabled[512];
    if (cg_read(fd, "cgroup.controllers", offered, sizeof(offered)) < 0)
        offered[0] = '\0';
    if (cg_read(fd, "cgroup.subtree_control", enabled, sizeof(enabled)) < 0)
        enabled[0] = '\0';
    bool need = false;
    for (size_t i = 0; i < sizeof(cg_wanted) / sizeof(cg_wanted[0]); i++)
        need |= word_in(offered, cg_wanted[i]) && !word_in(enabled, cg_wanted[i]);
    if (need && !own_is_root && has_procs(own)) {
        char leaf[64];
        snprintf(leaf, sizeof(leaf), "spurd-%s", node_name);
        if (mkdirat(fd, leaf, 0755) != 0 && errno != EEXIST) {
            log_event(LOG_WARN, "cgroup", "cannot make spurd's leaf cgroup", "dir=%s err=%s",
                      log_q(leaf), log_q(strerror(errno)));
        } else {
            int lfd = openat(fd, leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (lfd >= 0) {
                char pid[24];
                snprintf(pid, sizeof(pid), "%ld", (long)getpid());
                if (cg_write(lfd, "cgroup.procs", pid) != 0)
                    log_event(LOG_WARN, "cgroup", "cannot move spurd to its leaf cgroup", "err=%s",
                              log_q(strerror(errno)));
                close(lfd);
            }
        }
    }
    for (size_t i = 0; need && i < sizeof(cg_wanted) / sizeof(cg_wanted[0]); i++) {
        char op[32];
        snprintf(op, sizeof(op), "+%s", cg_wanted[i]);
        if (word_in(offered, cg_wanted[i]) && !word_in(enabled, cg_wanted[i]) &&
            cg_write(fd, "cgroup.subtree_control", op) != 0)
            log_event(LOG_WARN, "cgroup", "cannot enable a controller for the jobs",
                      "controller=%s err=%s", cg_wanted[i], log_q(strerror(errno)));
    }
    close(fd);
}

/* Set up OWN/spur-<node> in the v2 hierarchy; true when jobs can have cgroups there. */
static bool init_v2(struct cgroup_ctx *c, const char *node_name, char *why, size_t whylen)
{
    char mnt[PATH_MAX], root[PATH_MAX], own[PATH_MAX], base[PATH_MAX];
    if (find_mount("cgroup2", NULL, mnt, root) != 0) {
        snprintf(why, whylen, "no cgroup2 mount");
        return false;
    }
    if (own_cgroup(NULL, own) != 0 || own_dir(mnt, root, own, base) != 0) {
        snprintf(why, whylen, "no cgroup v2 line in /proc/self/cgroup");
        return false;
    }
    enable_controllers(base, strcmp(base, mnt) == 0, node_name);
    int n = snprintf(c->v2_node, sizeof(c->v2_node), "%s/spur-%s", base, node_name);
    if (n < 0 || (size_t)n >= sizeof(c->v2_node)) {
        snprintf(why, whylen, "cgroup path too long");
        return false;
    }
    if (mkdir(c->v2_node, 0755) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "mkdir %s: %s", c->v2_node, strerror(errno));
        return false;
    }
    int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int nfd = open(c->v2_node, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char handed[512] = "", enabled[512] = "";
    if (fd >= 0 && cg_read(fd, "cgroup.subtree_control", handed, sizeof(handed)) < 0)
        handed[0] = '\0';
    for (size_t i = 0; nfd >= 0 && i < sizeof(cg_wanted) / sizeof(cg_wanted[0]); i++) {
        char op[32];
        snprintf(op, sizeof(op), "+%s", cg_wanted[i]);
        if (word_in(handed, cg_wanted[i]))
            (void)cg_write(nfd, "cgroup.subtree_control", op);
    }
    if (nfd >= 0 && cg_read(nfd, "cgroup.subtree_control", enabled, sizeof(enabled)) < 0)
        enabled[0] = '\0';
    c->v2_cpu = word_in(enabled, "cpu");
    c->v2_memory = word_in(enabled, "memory");
    c->v2_pids = word_in(enabled, "pids");
    /* cgroup.kill shows in every non-root cgroup of a kernel that has it. */
    c->v2_kill = nfd >= 0 && faccessat(nfd, "cgroup.kill", W_OK, 0) == 0;
    if (fd >= 0)
        close(fd);
    if (nfd < 0) {
        snprintf(why, whylen, "open %s: %s", c->v2_node, strerror(errno));
        return false;
    }
    close(nfd);
    return true;
}

/* Set up MEMV1/spur-<node> in the v1 memory hierarchy; true when --mem can go there. */
static bool init_v1_memory(struct cgroup_ctx *c, const char *node_name)
{
    char mnt[PATH_MAX], root[PATH_MAX], own[PATH_MAX], base[PATH_MAX];
    if (find_mount("cgroup", "memory", mnt, root) != 0 || own_cgroup("memory", own) != 0 ||
        own_dir(mnt, root, own, base) != 0)
        return false;
    int n = snprintf(c->v1_node, sizeof(c->v1_node), "%s/spur-%s", base, node_name);
    if (n < 0 || (size_t)n >= sizeof(c->v1_node))
        return false;
    if (mkdir(c->v1_node, 0755) != 0 && errno != EEXIST) {
        log_event(LOG_WARN, "cgroup", "cgroup v1 memory controller unusable", "dir=%s err=%s",
                  log_q(c->v1_node), log_q(strerror(errno)));
        return false;
    }
    int fd = open(c->v1_node, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = faccessat(fd, "memory.limit_in_bytes", W_OK, 0) == 0;
    close(fd);
    return ok;
}

int cgroup_init(const char *mode, const char *node_name, struct cgroup_ctx **out, char *err,
                size_t errlen)
{
    *out = NULL;
    struct cgroup_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "cgroup: out of memory");
        return -1;
    }
    if (mode != NULL && strcmp(mode, "none") == 0) {
        *out = c;
        return 0;
    }
    bool want_v2 = mode != NULL && strcmp(mode, "v2") == 0;
    char why[PATH_MAX + 64] = "";
    c->v2 = init_v2(c, node_name, why, sizeof(why));
    if (!c->v2) {
        c->v2_cpu = c->v2_memory = c->v2_pids = c->v2_kill = false;
        c->v2_node[0] = '\0';
        if (want_v2) {
            snprintf(err, errlen, "cgroup: agent.cgroup is v2 but cgroup v2 is unusable: %s", why);
            free(c);
            return -1;
        }
    }
    if (!c->v2_memory)
        c->v1_memory = init_v1_memory(c, node_name);
    if (!c->v1_memory)
        c->v1_node[0] = '\0';
    if (!c->v2 && !c->v1_memory)
        log_event(LOG_WARN, "cgroup", "jobs run without cgroups", "why=%s", log_q(why));
    else
        log_event(LOG_INFO, "cgroup", "job cgroups ready",
                  "v2=%s cpu=%d memory=%d pids=%d kill=%d v1_memory=%s", log_q(c->v2_node),
                  c->v2_cpu, c->v2_memory, c->v2_pids, c->v2_kill, log_q(c->v1_node));
    *out = c;
    return 0;
}

void cgroup_free(struct cgroup_ctx *c)
{
    free(c);
}

void cgroup_remove_node(const struct cgroup_ctx *c)
{
    if (c->v2_node[0] && rmdir(c->v2_node) != 0 && errno != EBUSY && errno != ENOENT)
        log_event(LOG_WARN, "cgroup", "cannot remove the node's cgroup", "dir=%s err=%s",
                  log_q(c->v2_node), log_q(strerror(errno)));
    if (c->v1_node[0] && rmdir(c->v1_node) != 0 && errno != EBUSY && errno != ENOENT)
        log_event(LOG_WARN, "cgroup", "cannot remove the node's cgroup", "dir=%s err=%s",
                  log_q(c->v1_node), log_q(strerror(errno)));
}

/* The smallest limit file gives from dir up to mnt; parse returns CG_NO_LIMIT for none. */
static uint64_t min_up(const char *mnt, const char *dir, const char *file,
                       uint64_t (*parse)(const char *))
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s", dir);
    uint64_t best = CG_NO_LIMIT;
    size_t ml = strlen(mnt);
    for (int depth = 0; depth < 64; depth++) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            char buf[128];
            if (cg_read(fd, file, buf, sizeof(buf)) > 0) {
                uint64_t v = parse(buf);
                if (v < best)
                    best = v;
            }
            close(fd);
        }
        char *slash = strrchr(path, '/');
        if (strlen(path) <= ml || slash == NULL || (size_t)(slash - path) < ml)
            break;
        *slash = '\0';
    }
    return best;
}

/* cpu.max "QUOTA PERIOD" or "max PERIOD": CPUs, rounded up. */
static uint64_t parse_cpu_max(const char *s)
{
    if (strncmp(s, "max", 3) == 0)
        return CG_NO_LIMIT;
    unsigned long long quota = 0, period = 0;
    if (sscanf(s, "%llu %llu", &quota, &period) != 2 || period == 0 || quota == 0)
        return CG_NO_LIMIT;
    return (quota + period - 1) / period;
}

static uint64_t parse_bytes(const char *s)
{
    if (strncmp(s, "max", 3) == 0)
        return CG_NO_LIMIT;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    return end == s || v >= CG_NO_LIMIT ? CG_NO_LIMIT : v;
}

static uint64_t parse_u64(const char *s)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    return end == s || v <= 0 ? CG_NO_LIMIT : (uint64_t)v;
}

void cgroup_detect_cpus_mem(uint32_t *cpus, uint64_t *mem_mb)
{
    char mnt[PATH_MAX], root[PATH_MAX], own[PATH_MAX], dir[PATH_MAX];
    uint64_t ncpu = CG_NO_LIMIT, mem = CG_NO_LIMIT;
    if (find_mount("cgroup2", NULL, mnt, root) == 0 && own_cgroup(NULL, own) == 0 &&
        own_dir(mnt, root, own, dir) == 0) {
        ncpu = min_up(mnt, dir, "cpu.max", parse_cpu_max);
        mem = min_up(mnt, dir, "memory.max", parse_bytes);
    }
    if (ncpu == CG_NO_LIMIT && find_mount("cgroup", "cpu", mnt, root) == 0 &&
        own_cgroup("cpu", own) == 0 && own_dir(mnt, root, own, dir) == 0) {
        uint64_t quota = min_up(mnt, dir, "cpu.cfs_quota_us", parse_u64);
        uint64_t period = min_up(mnt, dir, "cpu.cfs_period_us", parse_u64);
        if (quota != CG_NO_LIMIT && period != CG_NO_LIMIT && period > 0)
            ncpu = (quota + period - 1) / period;
    }
    if (mem == CG_NO_LIMIT && find_mount("cgroup", "memory", mnt, root) == 0 &&
        own_cgroup("memory", own) == 0 && own_dir(mnt, root, own, dir) == 0)
        mem = min_up(mnt, dir, "memory.limit_in_bytes", parse_bytes);
    *cpus = ncpu == CG_NO_LIMIT || ncpu > UINT32_MAX ? 0 : (uint32_t)ncpu;
    *mem_mb = mem == CG_NO_LIMIT ? 0 : mem >> 20;
}

void cgroup_job_none(struct cgroup_job *j)
{
    memset(j, 0, sizeof(*j));
    j->v2_fd = j->v1_fd = j->v2_parent_fd = j->v1_parent_fd = -1;
}

/* Open parent_path and, below it, the job directory (made when create). */
static int open_job_dir(const char *parent_path, const char *name, bool create, int *parent_fd,
                        int *fd)
{
    *parent_fd = open(parent_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*parent_fd < 0)
        return -1;
    if (create && mkdirat(*parent_fd, name, 0755) != 0 && errno != EEXIST)
        return -1;
    *fd = openat(*parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return *fd < 0 ? -1 : 0;
}

int cgroup_job_create(const struct cgroup_ctx *c, uint64_t job_id, uint32_t attempt, uint32_t cpus,
                      uint64_t mem_mb, struct cgroup_job *j, char *err, size_t errlen)
{
    cgroup_job_none(j);
    if (c == NULL)
        return 0;
    snprintf(j->name, sizeof(j->name), "job_%" PRIu64 ".%" PRIu32, job_id, attempt);
    j->v2_kill = c->v2_kill;
    const char *what = NULL;
    if (c->v2 && open_job_dir(c->v2_node, j->name, true, &j->v2_parent_fd, &j->v2_fd) != 0)
        what = c->v2_node;
    else if (c->v2 && c->v2_memory && mem_mb > 0 &&
             (cg_write_u64(j->v2_fd, "memory.max", mem_mb << 20) != 0 ||
              (faccessat(j->v2_fd, "memory.swap.max", W_OK, 0) == 0 &&
               cg_write(j->v2_fd, "memory.swap.max", "0") != 0)))
        what = "memory.max";
    else if (c->v2 && c->v2_cpu && cpus > 0 &&
             cg_write_u64(j->v2_fd, "cpu.weight", cpus > 100 ? 10000 : 100ull * cpus) != 0)
        what = "cpu.weight";
    /* v1 memory: for --mem where v2 cannot, and to track the job at all without v2. */
    else if (c->v1_memory && ((mem_mb > 0 && !c->v2_memory) || !c->v2)) {
        if (open_job_dir(c->v1_node, j->name, true, &j->v1_parent_fd, &j->v1_fd) != 0)
            what = c->v1_node;
        else if (mem_mb > 0 && cg_write_u64(j->v1_fd, "memory.limit_in_bytes", mem_mb << 20) != 0)
            what = "memory.limit_in_bytes";
        else if (mem_mb > 0 && faccessat(j->v1_fd, "memory.memsw.limit_in_bytes", W_OK, 0) == 0)
            (void)cg_write_u64(j->v1_fd, "memory.memsw.limit_in_bytes", mem_mb << 20);
    }
    if (what != NULL) {
        snprintf(err, errlen, "cgroup: %s for %s: %s", what, j->name, strerror(errno));
        cgroup_job_remove(j);
        return -1;
    }
    return 0;
}

int cgroup_job_open(const struct cgroup_ctx *c, uint64_t job_id, uint32_t attempt,
                    struct cgroup_job *j)
{
    cgroup_job_none(j);
    if (c == NULL)
        return 0;
    snprintf(j->name, sizeof(j->name), "job_%" PRIu64 ".%" PRIu32, job_id, attempt);
    j->v2_kill = c->v2_kill;
    if (c->v2 && open_job_dir(c->v2_node, j->name, false, &j->v2_parent_fd, &j->v2_fd) != 0)
        j->v2_fd = -1;
    if (c->v1_memory && open_job_dir(c->v1_node, j->name, false, &j->v1_parent_fd, &j->v1_fd) != 0)
        j->v1_fd = -1;
    return 0;
}

bool cgroup_job_tracked(const struct cgroup_job *j)
{
    return j->v2_fd >= 0 || j->v1_fd >= 0;
}

int cgroup_job_enter(const struct cgroup_job *j)
{
    if (j->v2_fd >= 0 && cg_write(j->v2_fd, "cgroup.procs", "0") != 0)
        return -1;
    if (j->v1_fd >= 0 && cg_write(j->v1_fd, "cgroup.procs", "0") != 0)
        return -1;
    return 0;
}

/* The cgroup that lists the job's processes: v2 when there, else v1 memory. */
static int tracking_fd(const struct cgroup_job *j)
{
    return j->v2_fd >= 0 ? j->v2_fd : j->v1_fd;
}

/* Send sig to every pid listed in cgroup.procs of fd; how many were signalled. */
static int signal_procs(int fd, int sig)
{
    int pfd = openat(fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (pfd < 0)
        return -1;
    char buf[4096];
    long pid = 0;
    bool in_num = false;
    int count = 0;
    for (;;) {
        ssize_t r = read(pfd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                pid = pid * 10 + (buf[i] - '0');
                in_num = true;
            } else if (in_num) {
                if (pid > 0 && kill((pid_t)pid, sig) == 0)
                    count++;
                pid = 0;
                in_num = false;
            }
        }
    }
    if (in_num && pid > 0 && kill((pid_t)pid, sig) == 0)
        count++;
    close(pfd);
    return count;
}

/* Freeze (true) or thaw the v2 cgroup; a freeze waits until the kernel says frozen. */
static bool set_frozen(int fd, bool frozen)
{
    if (cg_write(fd, "cgroup.freeze", frozen ? "1" : "0") != 0)
        return false;
    for (int i = 0; frozen && i < CG_FREEZE_WAIT_TRIES; i++) {
        char ev[256];
        if (cg_read(fd, "cgroup.events", ev, sizeof(ev)) < 0 || keyed_value(ev, "frozen") == 1 ||
            keyed_value(ev, "populated") == 0)
            return true;
        sleep_ms(5);
    }
    return true;
}

int cgroup_job_signal(const struct cgroup_job *j, int sig)
{
    int fd = tracking_fd(j);
    if (fd < 0) {
        errno = ENOENT;
        return -1;
    }
    if (sig == SIGKILL && j->v2_fd >= 0 && j->v2_kill) {
        bool any = cgroup_job_populated(j);
        if (cg_write(j->v2_fd, "cgroup.kill", "1") != 0)
            return -1;
        return any ? 1 : 0;
    }
    bool frozen = j->v2_fd >= 0 && set_frozen(j->v2_fd, true);
    int n = signal_procs(fd, sig);
    int saved = errno;
    if (frozen)
        (void)set_frozen(j->v2_fd, false);
    errno = saved;
    return n;
}

bool cgroup_job_populated(const struct cgroup_job *j)
{
    char buf[256];
    if (j->v2_fd >= 0 && cg_read(j->v2_fd, "cgroup.events", buf, sizeof(buf)) > 0)
        return keyed_value(buf, "populated") == 1;
    int fd = tracking_fd(j);
    return fd >= 0 && cg_read(fd, "cgroup.procs", buf, sizeof(buf)) > 0;
}

bool cgroup_job_oom(const struct cgroup_job *j)
{
    char buf[1024];
    if (j->v2_fd >= 0 && cg_read(j->v2_fd, "memory.events", buf, sizeof(buf)) > 0 &&
        keyed_value(buf, "oom_kill") > 0)
        return true;
    return j->v1_fd >= 0 && cg_read(j->v1_fd, "memory.oom_control", buf, sizeof(buf)) > 0 &&
           keyed_value(buf, "oom_kill") > 0;
}

static void remove_one(int *parent_fd, int *fd, const char *name)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
        for (int i = 0; i < CG_RMDIR_TRIES; i++) {
            if (unlinkat(*parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                break;
            if (errno != EBUSY) {
                log_event(LOG_WARN, "cgroup", "cannot remove a job cgroup", "cgroup=%s err=%s",
                          log_q(name), log_q(strerror(errno)));
                break;
            }
            sleep_ms(10);
        }
    }
    if (*parent_fd >= 0) {
        close(*parent_fd);
        *parent_fd = -1;
    }
}

void cgroup_job_remove(struct cgroup_job *j)
{
    remove_one(&j->v2_parent_fd, &j->v2_fd, j->name);
    remove_one(&j->v1_parent_fd, &j->v1_fd, j->name);
}

void cgroup_job_close(struct cgroup_job *j)
{
    int *fds[] = {&j->v2_fd, &j->v1_fd, &j->v2_parent_fd, &j->v1_parent_fd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
}
