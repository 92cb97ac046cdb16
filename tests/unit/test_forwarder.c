/*
 * test_forwarder.c - forwarding requests to the leader (raftd/forwarder.c) on a real loop.
 *
 * The "leader" is either a real client API server (raftd/api.c) on a free port of
 * 127.0.0.1 whose dispatcher answers, or a raw listening socket the test plays by hand
 * (accept and close, accept and stay silent, answer with an oversized header). Pinned
 * here: the answer comes back to the right callback, and the leader saw hops = 1, a fresh
 * request id, and the client's (client_id, seq); a leader that closes, one that refuses
 * the connection, one that does not answer in time, one whose answer is over the frame
 * limit, and shutting down each end in exactly one error callback naming the address.
 */
#include "api.h"
#include "check_run.h"
#include "forwarder.h"
#include "frame.h"
#include "resolver.h"
#include "test_ipresolver.h"
#include "test_loop.h"
#include "wire.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAME 65536

/* What one forwarded request's callback saw. */
struct outcome {
    unsigned calls;
    Spur__Api__Code code;
    uint64_t request_id;
    char error[400]; /* the answer's error text, or the forwarder's err */
    bool had_resp;
};

static void on_done(void *arg, Spur__Api__Response *resp, const char *err)
{
    struct outcome *o = arg;
    o->calls++;
    o->had_resp = resp != NULL;
    if (resp) {
        o->code = resp->code;
        o->request_id = resp->request_id;
        snprintf(o->error, sizeof(o->error), "%s", resp->error ? resp->error : "");
    } else {
        snprintf(o->error, sizeof(o->error), "%s", err ? err : "(null)");
    }
}

/* The leader's dispatcher: answers with what it was sent. */
static void leader_dispatch(void *arg, struct api_call *call, Spur__Api__Request *req)
{
    unsigned *calls = arg;
    (*calls)++;
    api_reply_error(call, SPUR__API__CODE__CODE_OK, 0, NULL, "hops=%u id=%llu client=%llu seq=%llu",
                    req->hops, (unsigned long long)req->request_id,
                    (unsigned long long)req->client_id, (unsigned long long)req->seq);
}

struct fixture {
    struct test_loop l;
    struct resolver *res;
    struct forwarder *f;
    char resolv[64]; /* a resolv.conf of the test's own, naming a server never asked */
    int lfd;         /* a leader the test plays by hand (forward_to_raw()), or -1 */
    char addr[64];   /* its address */
};

static void fixture_start(struct fixture *fx)
{
    memset(fx, 0, sizeof(*fx));
    fx->lfd = -1;
    test_loop_init(&fx->l);
    /* Addresses here are IP literals: the resolver answers them without a lookup. */
    fx->res = test_ipresolver_new(fx->l.base, fx->resolv, sizeof(fx->resolv));
    fx->f = forwarder_new(fx->l.base, MAX_FRAME, fx->res);
    ck_assert_ptr_nonnull(fx->f);
}

static void fixture_stop(struct fixture *fx)
{
    forwarder_free(fx->f);
    resolver_free(fx->res);
    test_loop_free(&fx->l);
    unlink(fx->resolv);
    if (fx->lfd >= 0)
        close(fx->lfd);
}

static Spur__Api__Request request(Spur__Api__Ping *ping)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    req.protocol_version = SPUR_PROTOCOL_VERSION;
    req.cluster_name = (char *)"spur";
    req.request_id = 5;
    req.client_id = 77;
    req.seq = 9;
    req.op_case = SPUR__API__REQUEST__OP_PING;
    req.ping = ping;
    return req;
}

/*
 * Forward a request to a leader the test plays on a raw socket; returns the accepted
 * connection. The outcome goes to o.
 */
static int forward_to_raw(struct fixture *fx, struct outcome *o, uint32_t timeout_ms)
{
    fx->lfd = test_listen(fx->addr, sizeof(fx->addr));
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request req = request(&ping);
    ck_assert_int_eq(forwarder_send(fx->f, fx->addr, &req, timeout_ms, on_done, o), 0);
    return test_accept(&fx->l, fx->lfd);
}

START_TEST(test_answer_comes_back)
{
    struct fixture fx;
    fixture_start(&fx);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", test_free_port());
    unsigned leader_calls = 0;
    struct api_options ao = {
        .listen = addr, .max_frame = MAX_FRAME, .cluster_name = "spur", .node_id = 1};
    char why[256] = "";
    struct api_server *leader =
        api_new(fx.l.base, &ao, leader_dispatch, &leader_calls, why, sizeof(why));
    ck_assert_msg(leader != NULL, "api_new: %s", why);

    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request req = request(&ping);
    struct outcome a = {0}, b = {0};
    /* Two requests on the one connection, each answer to its own callback. */
    ck_assert_int_eq(forwarder_send(fx.f, addr, &req, 3000, on_done, &a), 0);
    req.seq = 10;
    ck_assert_int_eq(forwarder_send(fx.f, addr, &req, 3000, on_done, &b), 0);
    ck_assert(test_loop_until(&fx.l, &b.calls, 1, 3000));
    ck_assert(test_loop_until(&fx.l, &a.calls, 1, 3000));
    ck_assert_uint_eq(leader_calls, 2);
    ck_assert(a.had_resp && b.had_resp);
    ck_assert_int_eq(a.code, SPUR__API__CODE__CODE_OK);
    /* A fresh id per forwarded request, hops 1, and the client's own (client_id, seq). */
    char want[200];
    snprintf(want, sizeof(want), "hops=1 id=%llu client=77 seq=9",
             (unsigned long long)a.request_id);
    ck_assert_str_eq(a.error, want);
    snprintf(want, sizeof(want), "hops=1 id=%llu client=77 seq=10",
             (unsigned long long)b.request_id);
    ck_assert_str_eq(b.error, want);
    ck_assert_uint_ne(a.request_id, b.request_id);
    /* The caller's request is not changed. */
    ck_assert_uint_eq(req.hops, 0);
    ck_assert_uint_eq(req.request_id, 5);
    test_loop_run(&fx.l, 50);
    ck_assert_uint_eq(a.calls, 1);
    ck_assert_uint_eq(b.calls, 1);
    api_free(leader);
    fixture_stop(&fx);
}
END_TEST

/* The forward ended in the forwarder's failure message for addr, with reason why. */
static void expect_forward_failed(const struct outcome *o, const char *addr, const char *why)
{
    char want[200];
    snprintf(want, sizeof(want), "forwarding to the leader at %s failed: %s", addr, why);
    ck_assert_str_eq(o->error, want);
}

START_TEST(test_server_closes)
{
    struct fixture fx;
    fixture_start(&fx);
    struct outcome o = {0};
    int cfd = forward_to_raw(&fx, &o, 5000);
    const char *addr = fx.addr;
    /* The request arrives whole, as a frame of a decodable Request. */
    struct frame_reader r;
    frame_reader_init(&r, MAX_FRAME);
    const uint8_t *p = NULL;
    size_t len = 0;
    ck_assert_int_eq(test_recv_frame(&fx.l, cfd, &r, &p, &len, 3000), 1);
    Spur__Api__Request *got = spur__api__request__unpack(NULL, len, p);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(got->hops, 1);
    spur__api__request__free_unpacked(got, NULL);
    frame_reader_free(&r);
    close(cfd);
    ck_assert(test_loop_until(&fx.l, &o.calls, 1, 3000));
    ck_assert(!o.had_resp);
    expect_forward_failed(&o, addr, "connection closed");
    test_loop_run(&fx.l, 50);
    ck_assert_uint_eq(o.calls, 1);
    fixture_stop(&fx);
}
END_TEST

START_TEST(test_connection_refused)
{
    struct fixture fx;
    fixture_start(&fx);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", test_free_port()); /* nobody listens */
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request req = request(&ping);
    struct outcome o = {0};
    ck_assert_int_eq(forwarder_send(fx.f, addr, &req, 5000, on_done, &o), 0);
    ck_assert(test_loop_until(&fx.l, &o.calls, 1, 3000));
    ck_assert(!o.had_resp);
    char want[200];
    snprintf(want, sizeof(want), "forwarding to the leader at %s failed: ", addr);
    ck_assert_msg(strncmp(o.error, want, strlen(want)) == 0, "%s", o.error);
    fixture_stop(&fx);
}
END_TEST

START_TEST(test_timeout)
{
    struct fixture fx;
    fixture_start(&fx);
    struct outcome o = {0};
    uint64_t t0 = test_now_ms();
    int cfd = forward_to_raw(&fx, &o, 200); /* accepted, never answered */
    const char *addr = fx.addr;
    ck_assert(test_loop_until(&fx.l, &o.calls, 1, 3000));
    uint64_t took = test_now_ms() - t0;
    ck_assert_uint_ge(took, 200);
    ck_assert_uint_lt(took, 2000);
    ck_assert(!o.had_resp);
    char want[200];
    snprintf(want, sizeof(want), "the leader at %s did not answer in time", addr);
    ck_assert_str_eq(o.error, want);
    close(cfd);
    fixture_stop(&fx);
}
END_TEST

START_TEST(test_oversized_answer)
{
    struct fixture fx;
    fixture_start(&fx);
    struct outcome o = {0};
    int cfd = forward_to_raw(&fx, &o, 5000);
    const char *addr = fx.addr;
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_put_header(hdr, MAX_FRAME + 1); /* the header alone: refused from it */
    ck_assert_int_eq(send(cfd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    ck_assert(test_loop_until(&fx.l, &o.calls, 1, 3000));
    expect_forward_failed(&o, addr, "answer over the frame limit");
    close(cfd);
    fixture_stop(&fx);
}
END_TEST

START_TEST(test_free_fails_pending)
{
    struct fixture fx;
    fixture_start(&fx);
    struct outcome o = {0};
    int cfd = forward_to_raw(&fx, &o, 5000);
    const char *addr = fx.addr;
    forwarder_free(fx.f);
    fx.f = NULL;
    ck_assert_uint_eq(o.calls, 1);
    expect_forward_failed(&o, addr, "shutting down");
    /* Not a request address: refused at once, no callback. */
    fx.f = forwarder_new(fx.l.base, MAX_FRAME, fx.res);
    struct outcome none = {0};
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request req = request(&ping);
    ck_assert_int_eq(forwarder_send(fx.f, "not an address", &req, 100, on_done, &none), -1);
    test_loop_run(&fx.l, 50);
    ck_assert_uint_eq(none.calls, 0);
    close(cfd);
    fixture_stop(&fx);
}
END_TEST

static Suite *forwarder_suite(void)
{
    Suite *s = suite_create("forwarder");
    TCase *tc = check_case(s, "loopback",
                           (const TTest *[]){test_answer_comes_back, test_server_closes,
                                             test_connection_refused, test_timeout,
                                             test_oversized_answer, test_free_fails_pending, NULL});
    tcase_set_timeout(tc, 30);
    return s;
}

int main(void)
{
    return check_run(forwarder_suite());
}
