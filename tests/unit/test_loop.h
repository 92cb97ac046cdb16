/*
 * test_loop.h - what the unit tests of the worker's network modules (transport, client
 * API, forwarder, agents) share: a port on 127.0.0.1 the kernel gave as free, an event loop
 * driven in bounded steps with a deadline, a raw TCP client that speaks frames, and a raw
 * listening socket that plays the other end.
 *
 * Every wait is bounded in time and in loop turns; a ticker keeps EVLOOP_ONCE from sleeping
 * longer than 10 ms, so a deadline is checked at least that often.
 */
#ifndef SPUR_TEST_LOOP_H
#define SPUR_TEST_LOOP_H

#include "frame.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static inline unsigned test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static inline uint64_t test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct test_loop {
    struct event_base *base;
    struct event *ticker;
};

static inline void test_loop_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static inline void test_loop_init(struct test_loop *l)
{
    l->base = event_base_new();
    ck_assert_ptr_nonnull(l->base);
    l->ticker = event_new(l->base, -1, EV_PERSIST, test_loop_tick, NULL);
    ck_assert_ptr_nonnull(l->ticker);
    struct timeval tv = {0, 10000};
    event_add(l->ticker, &tv);
}

static inline void test_loop_free(struct test_loop *l)
{
    event_free(l->ticker);
    event_base_free(l->base);
}

/* Run the loop for ms milliseconds (at most 100000 turns). */
static inline void test_loop_run(struct test_loop *l, unsigned ms)
{
    uint64_t deadline = test_now_ms() + ms;
    for (unsigned i = 0; i < 100000 && test_now_ms() < deadline; i++)
        event_base_loop(l->base, EVLOOP_ONCE);
}

/* Run the loop until *counter reaches want or ms pass; returns whether it did. */
static inline bool test_loop_until(struct test_loop *l, const unsigned *counter, unsigned want,
                                   unsigned ms)
{
    uint64_t deadline = test_now_ms() + ms;
    for (unsigned i = 0; i < 100000 && *counter < want && test_now_ms() < deadline; i++)
        event_base_loop(l->base, EVLOOP_ONCE);
    return *counter >= want;
}

/* A non-blocking listening socket on 127.0.0.1 at a free port; its address in addr. */
static inline int test_listen(char *addr, size_t addrlen)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(addr, addrlen, "127.0.0.1:%u", ntohs(sa.sin_port));
    return fd;
}

/* Drive the loop until a connection to lfd can be accepted (non-blocking), 3 s at most. */
static inline int test_accept(struct test_loop *l, int lfd)
{
    uint64_t deadline = test_now_ms() + 3000;
    while (test_now_ms() < deadline) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        if (fd >= 0)
            return fd;
        ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
        test_loop_run(l, 10);
    }
    ck_abort_msg("no connection to accept");
    return -1;
}

/* A non-blocking TCP connection to "127.0.0.1:PORT". */
static inline int test_connect(const char *addr)
{
    unsigned port = 0;
    ck_assert_int_eq(sscanf(addr, "127.0.0.1:%u", &port), 1);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    ck_assert(rc == 0 || errno == EINPROGRESS);
    return fd;
}

/* Send one frame (header + payload) on fd; small enough for the socket buffer. */
static inline void test_send_frame(int fd, const void *payload, size_t len)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_put_header(hdr, (uint32_t)len);
    ck_assert_int_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    if (len > 0)
        ck_assert_int_eq(send(fd, payload, len, MSG_NOSIGNAL), (ssize_t)len);
}

/*
 * Drive the loop until a frame arrives on fd (1, *payload valid until the next call on r),
 * the peer closes it (0), or ms pass (-1).
 */
static inline int test_recv_frame(struct test_loop *l, int fd, struct frame_reader *r,
                                  const uint8_t **payload, size_t *len, unsigned ms)
{
    uint64_t deadline = test_now_ms() + ms;
    for (unsigned i = 0; i < 100000 && test_now_ms() < deadline; i++) {
        enum frame_status st = frame_reader_next(r, payload, len);
        if (st == FRAME_READY)
            return 1;
        ck_assert_int_eq(st, FRAME_NEED_MORE);
        uint8_t *p = NULL;
        size_t space = 0;
        ck_assert_int_eq(frame_reader_space(r, 4096, &p, &space), 0);
        ssize_t n = recv(fd, p, space, 0);
        if (n > 0) {
            frame_reader_commit(r, (size_t)n);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return 0;
        event_base_loop(l->base, EVLOOP_ONCE);
    }
    return -1;
}

/* Drive the loop until the other end closes fd (true) or ms pass (false). */
static inline bool test_closed_by_peer(struct test_loop *l, int fd, unsigned ms)
{
    uint64_t deadline = test_now_ms() + ms;
    for (unsigned i = 0; i < 100000 && test_now_ms() < deadline; i++) {
        event_base_loop(l->base, EVLOOP_ONCE);
        char b[256];
        ssize_t r = recv(fd, b, sizeof(b), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return true;
    }
    return false;
}

#endif
