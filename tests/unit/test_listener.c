/*
 * test_listener.c - raftd/listener.c, the one way the worker opens a TCP listener.
 *
 * Pinned: a listener bound through listener_bind() is close-on-exec, has SO_REUSEADDR set
 * and is non-blocking; it accepts into the given callback; an address already taken is
 * refused with "WHAT: bind: <strerror>". Only 127.0.0.1 and kernel-chosen ports are used.
 */
#include "check_run.h"
#include "listener.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static socklen_t loopback(struct sockaddr_storage *ss, uint16_t port)
{
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    memset(ss, 0, sizeof(*ss));
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sizeof(*in);
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_in in;
    socklen_t len = sizeof(in);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&in, &len), 0);
    return ntohs(in.sin_port);
}

struct accepted {
    struct event_base *base;
    int n;
};

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int sl,
                      void *arg)
{
    struct accepted *a = arg;
    (void)l;
    (void)sa;
    (void)sl;
    a->n++;
    evutil_closesocket(fd);
    event_base_loopbreak(a->base);
}

START_TEST(test_socket_options)
{
    struct event_base *base = event_base_new();
    struct accepted a = {base, 0};
    struct sockaddr_storage ss;
    socklen_t sl = loopback(&ss, 0);
    char why[128] = "";
    struct evconnlistener *l =
        listener_bind(base, &ss, sl, 16, on_accept, &a, "t", why, sizeof(why));
    ck_assert_ptr_nonnull(l);
    ck_assert_str_eq(why, "");
    int fd = evconnlistener_get_fd(l);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    ck_assert_int_ne(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    int on = 0;
    socklen_t len = sizeof(on);
    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, &len), 0);
    ck_assert_int_ne(on, 0);
    evconnlistener_free(l);
    event_base_free(base);
}
END_TEST

START_TEST(test_accepts_into_callback)
{
    struct event_base *base = event_base_new();
    struct accepted a = {base, 0};
    struct sockaddr_storage ss;
    socklen_t sl = loopback(&ss, 0);
    char why[128];
    struct evconnlistener *l =
        listener_bind(base, &ss, sl, 16, on_accept, &a, "t", why, sizeof(why));
    ck_assert_ptr_nonnull(l);
    struct sockaddr_storage to;
    socklen_t tl = loopback(&to, bound_port(evconnlistener_get_fd(l)));
    int c = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(c, 0);
    ck_assert_int_eq(connect(c, (struct sockaddr *)&to, tl), 0);
    struct timeval limit = {5, 0};
    event_base_loopexit(base, &limit); /* bounded: the accept breaks the loop well before */
    event_base_dispatch(base);
    ck_assert_int_eq(a.n, 1);
    close(c);
    evconnlistener_free(l);
    event_base_free(base);
}
END_TEST

START_TEST(test_address_in_use)
{
    struct event_base *base = event_base_new();
    struct accepted a = {base, 0};
    struct sockaddr_storage ss;
    socklen_t sl = loopback(&ss, 0);
    char why[128];
    struct evconnlistener *first =
        listener_bind(base, &ss, sl, 16, on_accept, &a, "first", why, sizeof(why));
    ck_assert_ptr_nonnull(first);
    sl = loopback(&ss, bound_port(evconnlistener_get_fd(first)));
    struct evconnlistener *second = listener_bind(base, &ss, sl, 16, on_accept, &a,
                                                  "raft.listen 127.0.0.1:x", why, sizeof(why));
    ck_assert_ptr_null(second);
    char want[128];
    snprintf(want, sizeof(want), "raft.listen 127.0.0.1:x: bind: %s", strerror(EADDRINUSE));
    ck_assert_str_eq(why, want);
    evconnlistener_free(first);
    event_base_free(base);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("listener");
    TCase *tc = tcase_create("listener_bind");
    tcase_add_test(tc, test_socket_options);
    tcase_add_test(tc, test_accepts_into_callback);
    tcase_add_test(tc, test_address_in_use);
    suite_add_tcase(s, tc);
    return check_run(s);
}
