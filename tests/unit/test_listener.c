/*
 * test_listener.c - raftd/listener.c, the one way the worker opens a TCP listener and
 * takes in a connection.
 *
 * Pinned: a listener bound through listener_bind() is close-on-exec, has SO_REUSEADDR set
 * and is non-blocking; an address already taken is refused with "WHAT: bind: <strerror>";
 * listener_wrap() turns an accepted socket into a bufferevent that owns it, with
 * TCP_NODELAY set exactly when asked. Only 127.0.0.1 and kernel-chosen ports are used.
 */
#include "check_run.h"
#include "listener.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One event base and a listener on 127.0.0.1, with what its accept callback saw. */
struct fixture {
    struct event_base *base;
    struct evconnlistener *l;
    bool nodelay;    /* what the callback asks listener_wrap() for */
    int accepted;    /* connections wrapped */
    int nodelay_set; /* TCP_NODELAY as found on the last wrapped socket */
    char why[128];
};

static socklen_t loopback(struct sockaddr_storage *ss, uint16_t port)
{
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    memset(ss, 0, sizeof(*ss));
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sizeof(*in);
}

static uint16_t bound_port(const struct evconnlistener *l)
{
    struct sockaddr_in in;
    socklen_t len = sizeof(in);
    ck_assert_int_eq(getsockname(evconnlistener_get_fd((struct evconnlistener *)l),
                                 (struct sockaddr *)&in, &len),
                     0);
    return ntohs(in.sin_port);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int sl,
                      void *arg)
{
    struct fixture *fx = arg;
    (void)sa;
    (void)sl;
    struct bufferevent *bev = listener_wrap(l, fd, fx->nodelay);
    ck_assert_ptr_nonnull(bev);
    ck_assert_int_eq(bufferevent_getfd(bev), fd);
    socklen_t len = sizeof(fx->nodelay_set);
    ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &fx->nodelay_set, &len), 0);
    fx->accepted++;
    bufferevent_free(bev); /* closes fd */
    event_base_loopbreak(fx->base);
}

/* A base and a listener bound on 127.0.0.1:port (0: the kernel's choice) as WHAT. */
static struct evconnlistener *fixture_bind(struct fixture *fx, uint16_t port, const char *what)
{
    if (fx->base == NULL)
        fx->base = event_base_new();
    ck_assert_ptr_nonnull(fx->base);
    struct sockaddr_storage ss;
    socklen_t sl = loopback(&ss, port);
    fx->why[0] = '\0';
    return listener_bind(fx->base, &ss, sl, 16, on_accept, fx, what, fx->why, sizeof(fx->why));
}

static void fixture_free(struct fixture *fx)
{
    if (fx->l)
        evconnlistener_free(fx->l);
    event_base_free(fx->base);
}

START_TEST(test_socket_options)
{
    struct fixture fx = {0};
    fx.l = fixture_bind(&fx, 0, "t");
    ck_assert_ptr_nonnull(fx.l);
    ck_assert_str_eq(fx.why, "");
    int fd = evconnlistener_get_fd(fx.l);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    ck_assert_int_ne(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    int on = 0;
    socklen_t len = sizeof(on);
    ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, &len), 0);
    ck_assert_int_ne(on, 0);
    fixture_free(&fx);
}
END_TEST

START_TEST(test_address_in_use)
{
    struct fixture fx = {0};
    fx.l = fixture_bind(&fx, 0, "first");
    ck_assert_ptr_nonnull(fx.l);
    ck_assert_ptr_null(fixture_bind(&fx, bound_port(fx.l), "raft.listen 127.0.0.1:x"));
    char want[128];
    snprintf(want, sizeof(want), "raft.listen 127.0.0.1:x: bind: %s", strerror(EADDRINUSE));
    ck_assert_str_eq(fx.why, want);
    fixture_free(&fx);
}
END_TEST

START_TEST(test_wrap_accepted)
{
    for (int nodelay = 0; nodelay <= 1; nodelay++) {
        struct fixture fx = {.nodelay = nodelay, .nodelay_set = -1};
        fx.l = fixture_bind(&fx, 0, "t");
        ck_assert_ptr_nonnull(fx.l);
        struct sockaddr_storage to;
        socklen_t tl = loopback(&to, bound_port(fx.l));
        int c = socket(AF_INET, SOCK_STREAM, 0);
        ck_assert_int_ge(c, 0);
        ck_assert_int_eq(connect(c, (struct sockaddr *)&to, tl), 0);
        struct timeval limit = {5, 0};
        event_base_loopexit(fx.base, &limit); /* bounded: the accept breaks the loop first */
        event_base_dispatch(fx.base);
        ck_assert_int_eq(fx.accepted, 1);
        ck_assert_int_eq(fx.nodelay_set != 0, nodelay);
        close(c);
        fixture_free(&fx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("listener");
    check_case(s, "listener_bind",
               (const TTest *[]){test_socket_options, test_address_in_use, NULL});
    check_case(s, "listener_wrap", (const TTest *[]){test_wrap_accepted, NULL});
    return check_run(s);
}
