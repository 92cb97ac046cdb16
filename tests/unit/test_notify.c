/*
 * test_notify.c - sd_notify datagrams (supervisor/notify.c).
 *
 * A real AF_UNIX datagram socket stands in for systemd: bound to a path in a temporary
 * directory, or in the abstract namespace for "@name". Pinned here: what notify_send()
 * delivers; when WATCHDOG_USEC counts (WATCHDOG_PID absent or ours, a usable socket);
 * that notify_init() removes the three variables from the environment; and that bad or
 * absent settings leave the notifier off without failing.
 *
 * Each Check test runs in its own process, so the environment changes stay inside it.
 */
#include "check_run.h"
#include "notify.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

struct listener {
    int fd;
    char dir[64];
    char path[108];
};

static void set_timeout(int fd)
{
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
}

/* A datagram socket bound to DIR/notify; l->path is what NOTIFY_SOCKET should hold. */
static void listen_path(struct listener *l)
{
    snprintf(l->dir, sizeof(l->dir), "/tmp/test_notify.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(l->dir));
    snprintf(l->path, sizeof(l->path), "%s/notify", l->dir);
    l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(l->fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", l->path);
    ck_assert_int_eq(bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    set_timeout(l->fd);
}

/* A datagram socket in the abstract namespace; l->path is "@name". */
static void listen_abstract(struct listener *l)
{
    l->dir[0] = '\0';
    snprintf(l->path, sizeof(l->path), "@spur-test-notify-%ld-%d", (long)getpid(), rand());
    l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(l->fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(l->path);
    memcpy(sa.sun_path, l->path, n);
    sa.sun_path[0] = '\0';
    ck_assert_int_eq(bind(l->fd, (struct sockaddr *)&sa,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)),
                     0);
    set_timeout(l->fd);
}

static void listener_close(struct listener *l)
{
    close(l->fd);
    if (l->dir[0] != '\0') {
        unlink(l->path);
        rmdir(l->dir);
    }
}

/* Receive one datagram and compare it with want, byte for byte. */
static void expect_datagram(struct listener *l, const char *want)
{
    char buf[512];
    ssize_t n = recv(l->fd, buf, sizeof(buf), 0);
    ck_assert_msg(n >= 0, "no datagram: %s", strerror(errno));
    ck_assert_uint_eq((size_t)n, strlen(want));
    ck_assert_mem_eq(buf, want, (size_t)n);
}

static void expect_nothing_pending(struct listener *l)
{
    char buf[64];
    ssize_t n = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT);
    ck_assert_int_eq(n, -1);
    ck_assert_int_eq(errno, EAGAIN);
}

static void clear_env(void)
{
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

static void expect_env_cleared(void)
{
    ck_assert_ptr_null(getenv("NOTIFY_SOCKET"));
    ck_assert_ptr_null(getenv("WATCHDOG_USEC"));
    ck_assert_ptr_null(getenv("WATCHDOG_PID"));
}

/* n started from a clean environment whose NOTIFY_SOCKET is l; it clears the variable. */
static void notifier_for(struct notifier *n, const struct listener *l)
{
    clear_env();
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", l->path, 1), 0);
    notify_init(n);
    ck_assert(notify_enabled(n));
    expect_env_cleared();
}

/* The two kinds of NOTIFY_SOCKET systemd may hand over: a path, and "@name" (abstract). */
static void (*const listen_kinds[])(struct listener *) = {listen_path, listen_abstract};

START_TEST(test_send_each_socket_kind)
{
    struct listener l;
    struct notifier n;
    listen_kinds[_i](&l);
    notifier_for(&n, &l);
    notify_send(&n, "READY=1");
    expect_datagram(&l, "READY=1");
    notify_send(&n, "STATUS=leader term=7 commit=123");
    expect_datagram(&l, "STATUS=leader term=7 commit=123");
    notify_send(&n, "WATCHDOG=1");
    expect_datagram(&l, "WATCHDOG=1");
    notify_send(&n, "STOPPING=1");
    expect_datagram(&l, "STOPPING=1");
    expect_nothing_pending(&l);
    ck_assert(!n.warned);
    notify_close(&n);
    ck_assert(!notify_enabled(&n));
    notify_send(&n, "READY=1"); /* after close: nothing, and no crash */
    expect_nothing_pending(&l);
    notify_close(&n);
    listener_close(&l);
}
END_TEST

START_TEST(test_disabled)
{
    struct notifier n;
    clear_env();
    notify_init(&n);
    ck_assert(!notify_enabled(&n));
    ck_assert_int_eq(n.fd, -1);
    ck_assert_uint_eq(notify_watchdog_usec(&n), 0);
    notify_send(&n, "READY=1"); /* a no-op */
    notify_close(&n);

    /* Empty, relative and over-long values are ignored, and still removed. */
    static const char *const bad[] = {"", "relative/notify", "notify"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(setenv("NOTIFY_SOCKET", bad[i], 1), 0);
        ck_assert_int_eq(setenv("WATCHDOG_USEC", "1000000", 1), 0);
        notify_init(&n);
        ck_assert_msg(!notify_enabled(&n), "enabled by \"%s\"", bad[i]);
        ck_assert_uint_eq(notify_watchdog_usec(&n), 0);
        expect_env_cleared();
    }
    char longpath[200];
    memset(longpath, 'a', sizeof(longpath));
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", longpath, 1), 0);
    notify_init(&n);
    ck_assert(!notify_enabled(&n));
    expect_env_cleared();
}
END_TEST

START_TEST(test_send_failure_warns_once)
{
    /* A socket path nobody listens on: sends fail, the notifier stays usable and quiet. */
    struct notifier n;
    clear_env();
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", "/nonexistent-dir-for-spur-test/notify", 1), 0);
    notify_init(&n);
    ck_assert(notify_enabled(&n));
    ck_assert(!n.warned);
    notify_send(&n, "READY=1");
    ck_assert(n.warned);
    notify_send(&n, "READY=1");
    ck_assert(n.warned);
    notify_close(&n);
}
END_TEST

/* notify_init with a listening socket and the given watchdog variables (NULL: unset). */
static uint64_t watchdog_with(const char *usec, const char *pid)
{
    struct listener l;
    struct notifier n;
    listen_path(&l);
    clear_env();
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", l.path, 1), 0);
    if (usec)
        ck_assert_int_eq(setenv("WATCHDOG_USEC", usec, 1), 0);
    if (pid)
        ck_assert_int_eq(setenv("WATCHDOG_PID", pid, 1), 0);
    notify_init(&n);
    ck_assert(notify_enabled(&n));
    expect_env_cleared();
    uint64_t v = notify_watchdog_usec(&n);
    notify_close(&n);
    listener_close(&l);
    return v;
}

START_TEST(test_watchdog)
{
    char me[32], other[32];
    snprintf(me, sizeof(me), "%ld", (long)getpid());
    snprintf(other, sizeof(other), "%ld", (long)getpid() + 1);

    /* WATCHDOG_PID absent, or ours: the watchdog is for us. */
    ck_assert_uint_eq(watchdog_with("3000000", NULL), 3000000);
    ck_assert_uint_eq(watchdog_with("3000000", me), 3000000);
    ck_assert_uint_eq(watchdog_with("18446744073709551615", me), 18446744073709551615ull);
    /* Someone else's: not for us. */
    ck_assert_uint_eq(watchdog_with("3000000", other), 0);
    ck_assert_uint_eq(watchdog_with("3000000", "1"), 0);
    ck_assert_uint_eq(watchdog_with("3000000", "garbage"), 0);
    /* No or unusable interval. */
    ck_assert_uint_eq(watchdog_with(NULL, me), 0);
    ck_assert_uint_eq(watchdog_with("0", NULL), 0);
    ck_assert_uint_eq(watchdog_with("", NULL), 0);
    ck_assert_uint_eq(watchdog_with("10s", NULL), 0);
    ck_assert_uint_eq(watchdog_with("abc", NULL), 0);

    /* Without NOTIFY_SOCKET there is nobody to send WATCHDOG=1 to. */
    struct notifier n;
    clear_env();
    ck_assert_int_eq(setenv("WATCHDOG_USEC", "3000000", 1), 0);
    notify_init(&n);
    ck_assert(!notify_enabled(&n));
    ck_assert_uint_eq(notify_watchdog_usec(&n), 0);
    expect_env_cleared();
}
END_TEST

START_TEST(test_child_cannot_inherit)
{
    /* After init, a child started by us finds no variables and no inheritable socket. */
    struct listener l;
    struct notifier n;
    listen_path(&l);
    notifier_for(&n, &l);
    int flags = fcntl(n.fd, F_GETFD);
    ck_assert_int_ge(flags, 0);
    ck_assert(flags & FD_CLOEXEC);
    notify_close(&n);
    listener_close(&l);
}
END_TEST

static Suite *notify_suite(void)
{
    Suite *s = suite_create("notify");
    TCase *tc = check_case(s, "notify",
                           (const TTest *[]){test_disabled, test_send_failure_warns_once,
                                             test_watchdog, test_child_cannot_inherit, NULL});
    tcase_add_loop_test(tc, test_send_each_socket_kind, 0,
                        (int)(sizeof(listen_kinds) / sizeof(listen_kinds[0])));
    return s;
}

int main(void)
{
    srand((unsigned)getpid());
    return check_run(notify_suite());
}
