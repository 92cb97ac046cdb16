/*
 * test_statedir.c - the state directory and its LOCK (raftd/statedir.c): created with its
 * parents and the right modes; one holder at a time, a second one refused naming the
 * holder's pid; the lock gone when its holder dies, however it dies; every refusal exit 73
 * with a message that says why.
 */
#include "check_run.h"
#include "statedir.h"
#include "util.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[64];

/* Everything a test here may create below base, children before their parents. */
static const char *const made[] = {"a/b/state/LOCK", "a/b/state", "a/b",   "a",
                                   "state/LOCK",     "state",     "plain", "ro"};

static void setup(void)
{
    snprintf(base, sizeof(base), "/tmp/spur-test-statedir-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(base));
    umask(022);
}

static void teardown(void)
{
    char p[128];

    for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", base, made[i]);
        remove(p);
    }
    rmdir(base);
}

static void path_in(char *out, size_t len, const char *rel)
{
    snprintf(out, len, "%s/%s", base, rel);
}

/* The pid written in dir/LOCK. */
static long lock_pid(const char *dir)
{
    char p[256], buf[32] = {0};
    int fd;
    ssize_t n;

    snprintf(p, sizeof(p), "%s/LOCK", dir);
    fd = open(p, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(buf[n - 1], '\n');
    return strtol(buf, NULL, 10);
}

START_TEST(test_creates_with_parents_and_modes)
{
    struct statedir sd;
    char dir[256], parent[256], lock[300], why[512] = "";
    struct stat st;

    path_in(dir, sizeof(dir), "a/b/state");
    path_in(parent, sizeof(parent), "a/b");
    ck_assert_int_eq(statedir_open(&sd, dir, why, sizeof(why)), 0);
    ck_assert_str_eq(sd.path, dir);
    ck_assert_int_ge(sd.lock_fd, 0);
    ck_assert_int_ne(fcntl(sd.lock_fd, F_GETFD) & FD_CLOEXEC, 0);
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    ck_assert_int_eq(stat(parent, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0755);
    snprintf(lock, sizeof(lock), "%s/LOCK", dir);
    ck_assert_int_eq(stat(lock, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(lock_pid(dir), (long)getpid());
    statedir_close(&sd);
    ck_assert_int_eq(sd.lock_fd, -1);
    statedir_close(&sd); /* twice is harmless */
    /* An existing directory is used as it is; a trailing slash too. */
    snprintf(lock, sizeof(lock), "%s/", dir);
    ck_assert_int_eq(statedir_open(&sd, lock, why, sizeof(why)), 0);
    statedir_close(&sd);
}
END_TEST

START_TEST(test_second_holder_refused)
{
    struct statedir a, b;
    char dir[256], why[512] = "", want[512];

    path_in(dir, sizeof(dir), "state");
    ck_assert_int_eq(statedir_open(&a, dir, why, sizeof(why)), 0);
    /* A second open file description, even in the same process, does not get the lock. */
    ck_assert_int_eq(statedir_open(&b, dir, why, sizeof(why)), EXIT_CANTCREAT);
    ck_assert_int_eq(b.lock_fd, -1);
    snprintf(want, sizeof(want), "state dir %s is locked by pid %ld (another worker)", dir,
             (long)getpid());
    ck_assert_str_eq(why, want);
    /* Released: the next one gets it. */
    statedir_close(&a);
    ck_assert_int_eq(statedir_open(&b, dir, why, sizeof(why)), 0);
    statedir_close(&b);
}
END_TEST

/* A holder killed with SIGKILL leaves no stale lock behind. */
START_TEST(test_lock_dies_with_its_holder)
{
    struct statedir sd;
    char dir[256], why[512] = "", want[512];
    int ready[2], status;
    pid_t child;
    char c;

    path_in(dir, sizeof(dir), "state");
    ck_assert_int_eq(pipe(ready), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        struct statedir mine;
        char w[512];
        close(ready[0]);
        if (statedir_open(&mine, dir, w, sizeof(w)) != 0)
            _exit(1);
        if (write(ready[1], "k", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    close(ready[0]);
    ck_assert_int_eq(statedir_open(&sd, dir, why, sizeof(why)), EXIT_CANTCREAT);
    snprintf(want, sizeof(want), "state dir %s is locked by pid %ld (another worker)", dir,
             (long)child);
    ck_assert_str_eq(why, want);
    ck_assert_int_eq(lock_pid(dir), (long)child); /* the refused one wrote nothing */
    kill(child, SIGKILL);
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFSIGNALED(status));
    ck_assert_int_eq(statedir_open(&sd, dir, why, sizeof(why)), 0);
    ck_assert_int_eq(lock_pid(dir), (long)getpid());
    statedir_close(&sd);
}
END_TEST

/* A lock held by something that wrote no pid is refused without naming one. */
START_TEST(test_locked_without_pid)
{
    struct statedir sd;
    char dir[256], lock[300], why[512] = "", want[512];
    int fd;

    path_in(dir, sizeof(dir), "state");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(lock, sizeof(lock), "%s/LOCK", dir);
    fd = open(lock, O_RDWR | O_CREAT, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
    ck_assert_int_eq(statedir_open(&sd, dir, why, sizeof(why)), EXIT_CANTCREAT);
    snprintf(want, sizeof(want), "state dir %s is locked by another process", dir);
    ck_assert_str_eq(why, want);
    close(fd);
}
END_TEST

START_TEST(test_not_a_directory)
{
    struct statedir sd;
    char file[256], below[300], why[512] = "", want[600];
    int fd;

    path_in(file, sizeof(file), "plain");
    fd = open(file, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(statedir_open(&sd, file, why, sizeof(why)), EXIT_CANTCREAT);
    snprintf(want, sizeof(want), "state dir %s: not a directory", file);
    ck_assert_str_eq(why, want);
    ck_assert_int_eq(sd.lock_fd, -1);
    /* A path through a regular file cannot be created. */
    snprintf(below, sizeof(below), "%s/state", file);
    ck_assert_int_eq(statedir_open(&sd, below, why, sizeof(why)), EXIT_CANTCREAT);
    snprintf(want, sizeof(want), "state dir %s: cannot create: Not a directory", below);
    ck_assert_str_eq(why, want);
}
END_TEST

START_TEST(test_path_too_long)
{
    struct statedir sd;
    char why[8192] = ""; /* room for the whole path in the message */
    char *p = malloc(5000);

    memset(p, 'a', 4999);
    p[0] = '/';
    p[4999] = '\0';
    ck_assert_int_eq(statedir_open(&sd, p, why, sizeof(why)), EXIT_CANTCREAT);
    ck_assert_ptr_nonnull(strstr(why, ": cannot create: File name too long"));
    ck_assert_int_eq(sd.lock_fd, -1);
    ck_assert_int_eq(statedir_open(&sd, "", why, sizeof(why)), EXIT_CANTCREAT);
    ck_assert_ptr_nonnull(strstr(why, "cannot create"));
    free(p);
}
END_TEST

/*
 * Permission problems, as an unprivileged user (root passes every permission check, so
 * when the test runs as root a child drops to nobody first). The child sends back the
 * exit code and message of two opens: a directory it cannot write, and one it cannot
 * create.
 */
START_TEST(test_permission_denied)
{
    char ro[256], sub[300], msg[2][512];
    int p[2], status, rc[2];
    pid_t child;

    path_in(ro, sizeof(ro), "ro");
    ck_assert_int_eq(mkdir(ro, 0755), 0);
    snprintf(sub, sizeof(sub), "%s/state", ro);
    ck_assert_int_eq(chmod(base, 0755), 0);
    ck_assert_int_eq(pipe(p), 0);
    child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        struct statedir sd;
        close(p[0]);
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(2);
        for (int i = 0; i < 2; i++) {
            char why[512] = "";
            int r = statedir_open(&sd, i == 0 ? ro : sub, why, sizeof(why));
            if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r) ||
                write(p[1], why, sizeof(why)) != (ssize_t)sizeof(why))
                _exit(3);
        }
        _exit(0);
    }
    close(p[1]);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(read(p[0], &rc[i], sizeof(rc[i])), (ssize_t)sizeof(rc[i]));
        ck_assert_int_eq(read(p[0], msg[i], sizeof(msg[i])), (ssize_t)sizeof(msg[i]));
    }
    close(p[0]);
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(rc[0], EXIT_CANTCREAT);
    ck_assert_msg(strstr(msg[0], ": not writable: Permission denied") != NULL, "%s", msg[0]);
    ck_assert_int_eq(rc[1], EXIT_CANTCREAT);
    ck_assert_msg(strstr(msg[1], ": cannot create: Permission denied") != NULL, "%s", msg[1]);
}
END_TEST

static Suite *statedir_suite(void)
{
    Suite *s = suite_create("statedir");
    TCase *tc = check_case(
        s, "lock",
        (const TTest *[]){test_creates_with_parents_and_modes, test_second_holder_refused,
                          test_lock_dies_with_its_holder, test_locked_without_pid,
                          test_not_a_directory, test_path_too_long, test_permission_denied, NULL});

    tcase_add_checked_fixture(tc, setup, teardown);
    return s;
}

int main(void)
{
    return check_run(statedir_suite());
}
