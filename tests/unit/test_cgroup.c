/*
 * test_cgroup.c - job cgroups on this host (agent/cgroup.c).
 *
 * Needs root (it makes cgroups); skipped with the reason printed otherwise.
 *
 * Pinned: "none" gives a context with nothing in it and jobs without cgroups; "auto"
 * finds what the host has; a process that entered a job cgroup and the process it forked
 * after setsid() are both listed (populated), both receive a signal sent through the
 * cgroup (freeze, signal each pid, thaw: the count is 2), and a SIGKILL through it ends
 * both; the emptied cgroup is removed. The v1 memory path (where v2 is missing) tracks
 * and kills the same way. cgroup_detect_cpus_mem() gives 0 or a plausible figure.
 */
#include "cgroup.h"
#include "check_run.h"
#include "util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char node[32];

static bool root_or_skip(const char *test)
{
    if (geteuid() != 0)
        fprintf(stderr, "test_cgroup: %s skipped: needs root (makes cgroups)\n", test);
    return geteuid() == 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(test_none)
{
    struct cgroup_ctx *c;
    char err[256];
    ck_assert_int_eq(cgroup_init("none", node, &c, err, sizeof(err)), 0);
    ck_assert(!c->v2 && !c->v1_memory && !c->v2_memory);
    struct cgroup_job j;
    ck_assert_int_eq(cgroup_job_create(c, 1, 1, 1, 64, &j, err, sizeof(err)), 0);
    ck_assert(!cgroup_job_tracked(&j));
    ck_assert_int_eq(cgroup_job_enter(&j), 0);
    ck_assert(!cgroup_job_populated(&j));
    ck_assert(!cgroup_job_oom(&j));
    cgroup_job_remove(&j);
    cgroup_free(c);
}
END_TEST

/*
 * Fork a process that enters j and forks a setsid()ed grandchild; both sleep. Returns
 * the child; *grand gets the grandchild's pid through a pipe.
 */
static pid_t fork_pair(struct cgroup_job *j, pid_t *grand)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
        close(p[0]);
        if (cgroup_job_enter(j) != 0)
            _exit(2);
        pid_t g = fork();
        if (g == 0) {
            setsid();
            execl("/bin/sleep", "sleep", "300", (char *)NULL);
            _exit(3);
        }
        (void)write(p[1], &g, sizeof(g));
        execl("/bin/sleep", "sleep", "300", (char *)NULL);
        _exit(3);
    }
    close(p[1]);
    ck_assert_int_eq(read(p[0], grand, sizeof(*grand)), (ssize_t)sizeof(*grand));
    close(p[0]);
    return c;
}

static bool gone(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return true;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    char *rp = strrchr(buf, ')');
    return rp == NULL || rp[2] == 'Z' || rp[2] == 'X';
}

static void track_and_kill(struct cgroup_ctx *c, uint64_t id)
{
    char err[256];
    struct cgroup_job j;
    ck_assert_msg(cgroup_job_create(c, id, 1, 2, 0, &j, err, sizeof(err)) == 0, "%s", err);
    ck_assert(cgroup_job_tracked(&j));
    ck_assert(!cgroup_job_populated(&j));
    pid_t grand;
    pid_t child = fork_pair(&j, &grand);
    sleep_ms(100); /* both exec'd sleep */
    ck_assert(cgroup_job_populated(&j));
    ck_assert_int_eq(cgroup_job_signal(&j, SIGCONT), 2);
    ck_assert_int_ge(cgroup_job_signal(&j, SIGKILL), 1);
    int st;
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    for (int i = 0; i < 250 && !gone(grand); i++)
        sleep_ms(20);
    ck_assert_msg(gone(grand), "the setsid()ed grandchild %ld survived", (long)grand);
    for (int i = 0; i < 250 && cgroup_job_populated(&j); i++)
        sleep_ms(20);
    ck_assert(!cgroup_job_populated(&j));
    ck_assert(!cgroup_job_oom(&j));
    cgroup_job_remove(&j);
    /* Opening it again finds nothing: the directories are gone. */
    cgroup_job_open(c, id, 1, &j);
    ck_assert(!cgroup_job_tracked(&j));
    cgroup_job_close(&j);
}

START_TEST(test_auto_track_and_kill)
{
    if (!root_or_skip(__func__))
        return;
    struct cgroup_ctx *c;
    char err[256];
    ck_assert_int_eq(cgroup_init("auto", node, &c, err, sizeof(err)), 0);
    if (!c->v2 && !c->v1_memory) {
        fprintf(stderr, "test_cgroup: no cgroups on this host: tracking not tested\n");
        cgroup_free(c);
        return;
    }
    track_and_kill(c, (uint64_t)getpid());
    cgroup_free(c);
}
END_TEST

START_TEST(test_v1_memory_track_and_kill)
{
    if (!root_or_skip(__func__))
        return;
    struct cgroup_ctx *c;
    char err[256];
    ck_assert_int_eq(cgroup_init("auto", node, &c, err, sizeof(err)), 0);
    if (!c->v1_memory) {
        fprintf(stderr, "test_cgroup: no v1 memory controller here: v1 path not tested\n");
        cgroup_free(c);
        return;
    }
    /* As on a host without v2: the v1 memory cgroup is all the job has. */
    c->v2 = c->v2_memory = c->v2_cpu = c->v2_pids = c->v2_kill = false;
    track_and_kill(c, (uint64_t)getpid());
    cgroup_free(c);
}
END_TEST

START_TEST(test_v2_required)
{
    if (!root_or_skip(__func__))
        return;
    struct cgroup_ctx *c;
    char err[256];
    ck_assert_int_eq(cgroup_init("auto", node, &c, err, sizeof(err)), 0);
    bool v2 = c->v2;
    cgroup_free(c);
    int rc = cgroup_init("v2", node, &c, err, sizeof(err));
    if (v2) {
        ck_assert_int_eq(rc, 0);
        ck_assert(c->v2);
        cgroup_free(c);
    } else {
        ck_assert_int_eq(rc, -1);
        ck_assert_ptr_nonnull(strstr(err, "v2"));
    }
}
END_TEST

START_TEST(test_detect_cpus_mem)
{
    uint32_t cpus = 12345;
    uint64_t mem = 12345;
    cgroup_detect_cpus_mem(&cpus, &mem);
    long online = sysconf(_SC_NPROCESSORS_CONF);
    ck_assert_msg(cpus == 0 || (long)cpus <= online * 4, "cpus %u", cpus);
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    uint64_t phys_mb = (uint64_t)pages * (uint64_t)psize >> 20;
    ck_assert_msg(mem != 12345 && (mem == 0 || mem <= phys_mb * 64), "mem %llu",
                  (unsigned long long)mem);
}
END_TEST

int main(void)
{
    snprintf(node, sizeof(node), "ct%ld", (long)getpid());
    Suite *s = suite_create("cgroup");
    const TTest *const tests[] = {
        test_none,        test_auto_track_and_kill, test_v1_memory_track_and_kill,
        test_v2_required, test_detect_cpus_mem,     NULL};
    check_case(s, "cgroup", tests);
    int rc = check_run(s);
    struct cgroup_ctx *c; /* the node's directories the tests made, now empty */
    char err[256];
    if (geteuid() == 0 && cgroup_init("auto", node, &c, err, sizeof(err)) == 0) {
        cgroup_remove_node(c);
        cgroup_free(c);
    }
    return rc;
}
