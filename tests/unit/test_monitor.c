/*
 * test_monitor.c - running real jobs through the per-job monitor (agent/monitor.c).
 *
 * These fork monitors that run scripts as the user nobody, so they need root: without it
 * every test is skipped with the reason printed. The cgroups are this host's ("auto":
 * cgroup v2, or its unified mount, plus the v1 memory fallback), and the kill test also
 * runs with no cgroups at all (process group, subreaper and /proc descendants).
 *
 * Pinned: the output file is created as nobody (mode 0644) in the working directory
 * with the script's output, and exit code 7 is reported; a missing working directory
 * gives Slurm's error line and /tmp; a script without "#!" runs under /bin/sh; terminate
 * ends a job whose background process setsid()ed away, and nothing of it is left when
 * "ended" appears; the time limit sends SIGTERM, then SIGKILL after the kill wait, and
 * reports timed_out; --mem is enforced and the OOM reported; monitor_signal() delivers
 * SIGUSR1 to a job that traps it; monitor_alive() is false once the monitor exited and
 * signalling it then answers "gone"; monitor_abandoned() after a kill -9 of the monitor
 * kills the job and writes an Ended with SIGKILL; a user that does not exist is refused.
 */
#include "check_run.h"
#include "monitor.h"
#include "scratch.h"
#include "util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOBODY        65534
#define WAIT_ENDED_MS 20000

static char base[64];
static char node[32];
static bool have_root;

/* One test's job: a scratch dir with work/ (nobody's) and job/ (the spool dir). */
struct tjob {
    char dir[128];
    char work[160];
    int jobfd;
    Spur__Api__JobSpec spec;
    Spur__Agent__Launch l;
    struct cgroup_ctx *cg;
    struct monitor_conf conf;
    pid_t mon;
};

/* Whether the test can run; prints why not (Check has no skip). */
static bool root_or_skip(const char *test)
{
    if (!have_root)
        fprintf(stderr, "test_monitor: %s skipped: needs root (runs jobs as nobody)\n", test);
    return have_root;
}

static void tjob_init(struct tjob *t, const char *script, const char *cgmode)
{
    memset(t, 0, sizeof(*t));
    ck_assert_int_eq(chmod(base, 0711), 0); /* nobody must reach its working directory */
    scratch_make(t->dir, sizeof(t->dir), base);
    ck_assert_int_eq(chmod(t->dir, 0711), 0);
    snprintf(t->work, sizeof(t->work), "%s/work", t->dir);
    ck_assert_int_eq(mkdir(t->work, 0755), 0);
    ck_assert_int_eq(chown(t->work, NOBODY, NOBODY), 0);
    char jd[192];
    snprintf(jd, sizeof(jd), "%s/job", t->dir);
    ck_assert_int_eq(mkdir(jd, 0700), 0);
    t->jobfd = open(jd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(t->jobfd, 0);
    char err[512];
    ck_assert_msg(cgroup_init(cgmode, node, &t->cg, err, sizeof(err)) == 0, "%s", err);
    t->conf = (struct monitor_conf){.node_name = node, .cluster_name = "testc", .cg = t->cg};
    spur__api__job_spec__init(&t->spec);
    spur__agent__launch__init(&t->l);
    struct passwd *pw = getpwuid(NOBODY);
    ck_assert_ptr_nonnull(pw);
    t->spec.name = "tjob";
    t->spec.user = pw->pw_name;
    t->spec.uid = NOBODY;
    t->spec.gid = (uint32_t)pw->pw_gid;
    t->spec.workdir = t->work;
    t->spec.script.data = (uint8_t *)script;
    t->spec.script.len = strlen(script);
    t->l.spec = &t->spec;
    t->l.job_id = (uint64_t)getpid();
    t->l.attempt = 1;
    t->l.cpus = 1;
    static char *one[1];
    one[0] = node;
    t->l.node_list = one;
    t->l.n_node_list = 1;
}

static void tjob_spawn(struct tjob *t, uint64_t limit_ms, uint64_t kill_wait_ms)
{
    struct monitor_limits lim = {limit_ms, kill_wait_ms};
    char err[512];
    ck_assert_msg(
        monitor_spawn_limits(&t->conf, t->jobfd, &t->l, &lim, &t->mon, err, sizeof(err)) == 0, "%s",
        err);
    ck_assert(monitor_alive(t->jobfd));
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The attempt's ended report, unpacked (caller frees), checked against the job. */
static Spur__Agent__Ended *read_ended(struct tjob *t)
{
    int fd = openat(t->jobfd, "ended", O_RDONLY);
    ck_assert_int_ge(fd, 0);
    uint8_t buf[512];
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    ck_assert_int_gt(n, 0);
    Spur__Agent__Ended *e = spur__agent__ended__unpack(NULL, (size_t)n, buf);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->job_id, t->l.job_id);
    ck_assert_uint_eq(e->attempt, 1);
    ck_assert_str_eq(e->node, node);
    ck_assert_uint_gt(e->start_time_ms, 0);
    ck_assert_uint_ge(e->end_time_ms, e->start_time_ms);
    return e;
}

/* Wait for the monitor to write ended and exit 0; returns the report (caller frees). */
static Spur__Agent__Ended *tjob_wait(struct tjob *t)
{
    uint64_t deadline = mono_ms() + WAIT_ENDED_MS;
    while (faccessat(t->jobfd, "ended", F_OK, 0) != 0 && mono_ms() < deadline)
        sleep_ms(20);
    ck_assert_msg(faccessat(t->jobfd, "ended", F_OK, 0) == 0, "no ended report in time");
    int st;
    ck_assert_int_eq(waitpid(t->mon, &st, 0), t->mon);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "monitor status %d", st);
    ck_assert(!monitor_alive(t->jobfd));
    return read_ended(t);
}

static void tjob_done(struct tjob *t, Spur__Agent__Ended *e)
{
    spur__agent__ended__free_unpacked(e, NULL);
    close(t->jobfd);
    cgroup_free(t->cg);
}

/* The contents of dir/name (NUL-terminated in buf); -1 when it cannot be read. */
static ssize_t slurp(const char *dir, const char *name, char *buf, size_t len)
{
    char p[320];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

/* Wait for dir/name to hold a pid (written by the job); returns it. */
static pid_t wait_pid_file(const char *dir, const char *name)
{
    char buf[64];
    uint64_t deadline = mono_ms() + WAIT_ENDED_MS;
    while (mono_ms() < deadline) {
        if (slurp(dir, name, buf, sizeof(buf)) > 0 && strchr(buf, '\n') != NULL)
            return (pid_t)strtol(buf, NULL, 10);
        sleep_ms(20);
    }
    ck_abort_msg("%s/%s never written", dir, name);
    return -1;
}

static bool pid_alive(pid_t pid)
{
    char p[64], buf[512];
    snprintf(p, sizeof(p), "/proc/%ld/stat", (long)pid);
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

START_TEST(test_output_and_exit_code)
{
    if (!root_or_skip(__func__))
        return;
    struct tjob t;
    tjob_init(&t, "#!/bin/sh\necho hello $SLURM_JOB_ID\nid -u\necho oops >&2\nexit 7\n", "auto");
    tjob_spawn(&t, 0, 1000);
    Spur__Agent__Ended *e = tjob_wait(&t);
    ck_assert_int_eq(e->exit_code, 7);
    ck_assert_int_eq(e->signal, 0);
    ck_assert(!e->timed_out);
    ck_assert(!e->oom);
    char name[64], out[256], want[256];
    snprintf(name, sizeof(name), "slurm-%llu.out", (unsigned long long)t.l.job_id);
    ck_assert_int_gt(slurp(t.work, name, out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "hello %llu\n%d\noops\n", (unsigned long long)t.l.job_id, NOBODY);
    ck_assert_str_eq(out, want);
    char p[320];
    snprintf(p, sizeof(p), "%s/%s", t.work, name);
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert_uint_eq(st.st_uid, NOBODY);
    ck_assert_uint_eq(st.st_mode & 0777, 0644);
    /* Gone: a signal finds no monitor. */
    char err[256];
    ck_assert_int_eq(monitor_signal(t.jobfd, SIGUSR1, false, err, sizeof(err)), 1);
    tjob_done(&t, e);
}
END_TEST

START_TEST(test_no_workdir_and_plain_script)
{
    if (!root_or_skip(__func__))
        return;
    struct tjob t;
    tjob_init(&t, "echo cwd=$(pwd)\nexit 3\n", "auto");
    char out[256], errp[256], missing[256];
    snprintf(out, sizeof(out), "%s/o-%%j-%%N.txt", t.work);
    snprintf(errp, sizeof(errp), "%s/e-%%x.txt", t.work);
    snprintf(missing, sizeof(missing), "%s/does-not-exist", t.work);
    t.spec.stdout_path = out;
    t.spec.stderr_path = errp;
    t.spec.workdir = missing;
    tjob_spawn(&t, 0, 1000);
    Spur__Agent__Ended *e = tjob_wait(&t);
    ck_assert_int_eq(e->exit_code, 3);
    char name[96], buf[512];
    snprintf(name, sizeof(name), "o-%llu-%s.txt", (unsigned long long)t.l.job_id, node);
    ck_assert_int_gt(slurp(t.work, name, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "cwd=/tmp\n");
    ck_assert_int_gt(slurp(t.work, "e-tjob.txt", buf, sizeof(buf)), 0);
    ck_assert_msg(strstr(buf, "couldn't chdir to `") && strstr(buf, "going to /tmp instead"),
                  "stderr: %s", buf);
    tjob_done(&t, e);
}
END_TEST

/* terminate ends a job whose background child setsid()ed; nothing of it is left. */
static void terminate_detached(const char *cgmode)
{
    struct tjob t;
    tjob_init(&t,
              "#!/bin/sh\nsetsid sleep 300 &\necho $! > bg.tmp && mv bg.tmp bg\n"
              "sleep 300\n",
              cgmode);
    tjob_spawn(&t, 0, 2000);
    pid_t bg = wait_pid_file(t.work, "bg");
    ck_assert(pid_alive(bg));
    ck_assert_int_ne(getsid(bg), getsid(t.mon));
    char err[256];
    ck_assert_msg(monitor_signal(t.jobfd, 0, true, err, sizeof(err)) == 0, "%s", err);
    Spur__Agent__Ended *e = tjob_wait(&t);
    ck_assert_msg(!pid_alive(bg), "the setsid()ed sleep %ld survived", (long)bg);
    ck_assert_int_eq(e->signal, SIGTERM);
    ck_assert(!e->timed_out);
    tjob_done(&t, e);
}

START_TEST(test_terminate_kills_detached)
{
    if (!root_or_skip(__func__))
        return;
    terminate_detached("auto");
}
END_TEST

START_TEST(test_terminate_kills_detached_without_cgroups)
{
    if (!root_or_skip(__func__))
        return;
    terminate_detached("none");
}
END_TEST

START_TEST(test_time_limit)
{
    if (!root_or_skip(__func__))
        return;
    struct tjob t;
    /* Ignores SIGTERM (and so does the sleep it runs), so only the SIGKILL ends it. */
    tjob_init(&t, "#!/bin/sh\ntrap '' TERM\necho started\nwhile :; do sleep 1; done\n", "auto");
    uint64_t t0 = mono_ms();
    tjob_spawn(&t, 300, 400);
    Spur__Agent__Ended *e = tjob_wait(&t);
    uint64_t took = mono_ms() - t0;
    ck_assert(e->timed_out);
    ck_assert_int_eq(e->signal, SIGKILL);
    ck_assert_msg(took >= 700 && took < 5000, "took %llu ms", (unsigned long long)took);
    tjob_done(&t, e);
}
END_TEST

START_TEST(test_time_limit_sigterm)
{
    if (!root_or_skip(__func__))
        return;
    struct tjob t;
    tjob_init(&t, "#!/bin/sh\ntrap 'echo term; exit 9' TERM\nwhile :; do sleep 0.1; done\n",
              "auto");
    tjob_spawn(&t, 300, 10000);
    Spur__Agent__Ended *e = tjob_wait(&t);
    ck_assert(e->timed_out);
    ck_assert_int_eq(e->exit_code, 9);
    ck_assert_int_eq(e->signal, 0);
    char name[64], out[128];
    snprintf(name, sizeof(name), "slurm-%llu.out", (unsigned long long)t.l.job_id);
    ck_assert_int_gt(slurp(t.work, name, out, sizeof(out)), 0);
    /* The shell may also say its sleep was "Terminated": every process got the signal. */
    ck_assert_msg(strlen(out) >= 5 && strcmp(out + strlen(out) - 5, "term\n") == 0, "%s", out);
    tjob_done(&t, e);
}
END_TEST

START_TEST(test_memory_limit_oom)
{
    if (!root_or_skip(__func__))
        return;
    struct tjob t;
    tjob_init(&t,
              "#!/bin/sh\nx=$(head -c 300000000 /dev/zero | tr '\\0' x)\n"
              "echo survived ${#x}\n",
              "auto");
    if (!t.cg->v2_memory && !t.cg->v1_memory) {
        fprintf(stderr, "test_monitor: --mem test skipped: no v2 or v1 memory controller\n");
        return;
    }
    t.l.mem_mb = 32;
    t.spec.mem_mb = 32;
    tjob_spawn(&t, 0, 1000);
    Spur__Agent__Ended *e = tjob_wait(&t);
    ck_assert(e->oom);
    char name[64], out[256];
    snprintf(name, sizeof(name), "slurm-%llu.out", (unsigned long long)t.l.job_id);
    ck_assert(slurp(t.work, name, out, sizeof(out)) < 0 || strstr(out, "survived 3") == NULL);
    tjob_done(&t, e);
}
END_TEST

START_TEST(test_signal_usr1)
{
    if (!root_or_skip(__func__))
        return;
    struct tjob t;
    tjob_init(&t,
              "#!/bin/sh\ntrap 'echo got usr1; exit 5' USR1\necho $$ > ready.tmp\n"
              "mv ready.tmp ready\nwhile :; do sleep 0.1; done\n",
              "auto");
    tjob_spawn(&t, 0, 1000);
    (void)wait_pid_file(t.work, "ready");
    char err[256];
    ck_assert_msg(monitor_signal(t.jobfd, SIGUSR1, false, err, sizeof(err)) == 0, "%s", err);
    Spur__Agent__Ended *e = tjob_wait(&t);
    ck_assert_int_eq(e->exit_code, 5);
    ck_assert_int_eq(e->signal, 0);
    char name[64], out[128];
    snprintf(name, sizeof(name), "slurm-%llu.out", (unsigned long long)t.l.job_id);
    ck_assert_int_gt(slurp(t.work, name, out, sizeof(out)), 0);
    /* Every process got it: the sleep died of it too (the shell may say so first). */
    ck_assert_msg(strlen(out) >= 9 && strcmp(out + strlen(out) - 9, "got usr1\n") == 0, "%s", out);
    tjob_done(&t, e);
}
END_TEST

START_TEST(test_abandoned_after_kill9)
{
    if (!root_or_skip(__func__))
        return;
    struct tjob t;
    tjob_init(&t, "#!/bin/sh\nsleep 300 &\necho $! > bg.tmp && mv bg.tmp bg\nsleep 300\n", "auto");
    tjob_spawn(&t, 0, 1000);
    pid_t bg = wait_pid_file(t.work, "bg");
    ck_assert(pid_alive(bg));
    ck_assert_int_eq(kill(t.mon, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(t.mon, &st, 0), t.mon);
    ck_assert(!monitor_alive(t.jobfd));
    ck_assert(pid_alive(bg)); /* the job outlives its monitor until someone acts */
    char err[256];
    ck_assert_msg(monitor_abandoned(&t.conf, t.jobfd, &t.l, err, sizeof(err)) == 0, "%s", err);
    for (int i = 0; i < 250 && pid_alive(bg); i++)
        sleep_ms(20);
    ck_assert_msg(!pid_alive(bg), "the job's sleep %ld survived", (long)bg);
    Spur__Agent__Ended *e = read_ended(&t);
    ck_assert_int_eq(e->signal, SIGKILL);
    tjob_done(&t, e);
}
END_TEST

START_TEST(test_check_user)
{
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    Spur__Agent__Launch l = SPUR__AGENT__LAUNCH__INIT;
    l.spec = &spec;
    struct passwd *pw = getpwuid(NOBODY);
    ck_assert_ptr_nonnull(pw);
    char err[256];
    spec.uid = NOBODY;
    spec.user = pw->pw_name;
    ck_assert_int_eq(monitor_check_user(&l, err, sizeof(err)), 0);
    spec.user = "";
    ck_assert_int_eq(monitor_check_user(&l, err, sizeof(err)), 0);
    spec.user = "not-nobody";
    ck_assert_int_eq(monitor_check_user(&l, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "not-nobody"));
    spec.uid = 3999999;
    spec.user = "";
    ck_assert_int_eq(monitor_check_user(&l, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "3999999"));
}
END_TEST

int main(void)
{
    have_root = geteuid() == 0;
    snprintf(node, sizeof(node), "mt%ld", (long)getpid());
    Suite *s = suite_create("monitor");
    const TTest *const tests[] = {test_check_user,
                                  test_output_and_exit_code,
                                  test_no_workdir_and_plain_script,
                                  test_terminate_kills_detached,
                                  test_terminate_kills_detached_without_cgroups,
                                  test_time_limit,
                                  test_time_limit_sigterm,
                                  test_memory_limit_oom,
                                  test_signal_usr1,
                                  test_abandoned_after_kill9,
                                  NULL};
    TCase *tc = check_case(s, "monitor", tests);
    tcase_set_timeout(tc, 60);
    int rc = scratch_run(s, base, sizeof(base), "monitor");
    struct cgroup_ctx *c; /* the node's directories the tests made, now empty */
    char err[256];
    if (have_root && cgroup_init("auto", node, &c, err, sizeof(err)) == 0) {
        cgroup_remove_node(c);
        cgroup_free(c);
    }
    return rc;
}
