/*
 * test_forwarder.c - forwarding requests to the leader (raftd/forwarder.c) on a real loop.
 *
 * The "leader" is a raw listening socket on a free port of 127.0.0.1 that the test plays
 * by hand: it proves the cluster key as the client API does (test_chanpeer.h, responder
 * "controller"), then reads sealed requests and answers sealed, or closes, stays silent,
 * announces an oversized answer, holds another key, or alters a byte of its answer.
 * Pinned here: requests given before the key is proved wait and go once it is; the answer
 * comes back to the right callback, and the leader saw hops = 1, a fresh request id, the
 * client's (client_id, seq) and the caller the API layer set; a leader that closes, one
 * that refuses the connection, one that does not answer in time, one whose answer is over
 * the frame limit, one with another cluster key, one whose answer does not verify, and
 * shutting down each end in exactly one error callback naming the address.
 */
#include "check_run.h"
#include "forwarder.h"
#include "frame.h"
#include "resolver.h"
#include "test_chanpeer.h"
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

struct fixture {
    struct test_loop l;
    struct resolver *res;
    struct forwarder *f;
    struct keyring kr;        /* the forwarder's: outlives it */
    struct keyring leader_kr; /* the fake leader's: outlives its chan */
    char resolv[64];          /* a resolv.conf of the test's own, naming a server never asked */
    int lfd;                  /* a leader the test plays by hand (forward_to_raw()), or -1 */
    char addr[64];            /* its address */
};

static void fixture_start(struct fixture *fx)
{
    memset(fx, 0, sizeof(*fx));
    fx->lfd = -1;
    test_loop_init(&fx->l);
    /* Addresses here are IP literals: the resolver answers them without a lookup. */
    fx->res = test_ipresolver_new(fx->l.base, fx->resolv, sizeof(fx->resolv));
    test_keyring(&fx->kr, 0x5a);
    fx->f = forwarder_new(fx->l.base, MAX_FRAME, fx->res, &fx->kr, "spur");
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

/* The leader's side of the key proof on cfd, with key_fill's key; returns the outcome. */
static enum chan_rc leader_prove(struct fixture *fx, int cfd, struct chan *c,
                                 struct frame_reader *r, uint8_t key_fill)
{
    test_keyring(&fx->leader_kr, key_fill);
    test_chanpeer_reader_init(r, MAX_FRAME);
    return test_chanpeer_accept(&fx->l, cfd, r, c, &fx->leader_kr, "controller");
}

/* The next sealed request on cfd (the caller frees it). */
static Spur__Api__Request *leader_recv(struct fixture *fx, int cfd, struct chan *c,
                                       struct frame_reader *r)
{
    const uint8_t *p = NULL;
    size_t len = 0;
    ck_assert_int_eq(test_chanpeer_recv(&fx->l, cfd, r, c, &p, &len), 1);
    Spur__Api__Request *got = spur__api__request__unpack(NULL, len, p);
    ck_assert_ptr_nonnull(got);
    return got;
}

/* Answer req sealed, OK, with what it carried in the error text; flip_at as in send. */
static void leader_answer(struct chan *c, int cfd, const Spur__Api__Request *req, long flip_at)
{
    char text[300];
    snprintf(text, sizeof(text), "hops=%u id=%llu client=%llu seq=%llu caller=%s/%u/%s", req->hops,
             (unsigned long long)req->request_id, (unsigned long long)req->client_id,
             (unsigned long long)req->seq, req->caller ? req->caller->user : "-",
             req->caller ? req->caller->uid : 0, req->caller ? req->caller->method : "-");
    Spur__Api__Response resp = SPUR__API__RESPONSE__INIT;
    resp.protocol_version = SPUR_PROTOCOL_VERSION;
    resp.cluster_name = (char *)"spur";
    resp.request_id = req->request_id;
    resp.code = SPUR__API__CODE__CODE_OK;
    resp.error = text;
    size_t n = spur__api__response__get_packed_size(&resp);
    uint8_t *buf = malloc(n);
    ck_assert_ptr_nonnull(buf);
    spur__api__response__pack(&resp, buf);
    test_chanpeer_send(c, cfd, buf, n, flip_at);
    free(buf);
}

START_TEST(test_answer_comes_back)
{
    struct fixture fx;
    fixture_start(&fx);
    fx.lfd = test_listen(fx.addr, sizeof(fx.addr));
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request req = request(&ping);
    Spur__Api__Caller caller = SPUR__API__CALLER__INIT;
    caller.user = (char *)"alice";
    caller.uid = 1234;
    caller.gid = 1234;
    caller.method = (char *)"munge";
    req.caller = &caller;
    struct outcome a = {0}, b = {0};
    /* Two requests given before the connection exists, on the one connection. */
    ck_assert_int_eq(forwarder_send(fx.f, fx.addr, &req, 3000, on_done, &a), 0);
    req.seq = 10;
    ck_assert_int_eq(forwarder_send(fx.f, fx.addr, &req, 3000, on_done, &b), 0);
    int cfd = test_accept(&fx.l, fx.lfd);
    struct chan c;
    struct frame_reader r;
    /* The key proof comes first: the first frame is a hello, no request before it. */
    ck_assert_int_eq(leader_prove(&fx, cfd, &c, &r, 0x5a), CHAN_OK);
    Spur__Api__Request *g1 = leader_recv(&fx, cfd, &c, &r);
    Spur__Api__Request *g2 = leader_recv(&fx, cfd, &c, &r);
    ck_assert_uint_eq(g1->seq, 9);
    ck_assert_uint_eq(g2->seq, 10);
    /* Answered out of order: each answer still finds its own callback. */
    leader_answer(&c, cfd, g2, -1);
    leader_answer(&c, cfd, g1, -1);
    ck_assert(test_loop_until(&fx.l, &b.calls, 1, 3000));
    ck_assert(test_loop_until(&fx.l, &a.calls, 1, 3000));
    ck_assert(a.had_resp && b.had_resp);
    ck_assert_int_eq(a.code, SPUR__API__CODE__CODE_OK);
    /* A fresh id per forwarded request, hops 1, the client's (client_id, seq), the caller. */
    char want[300];
    snprintf(want, sizeof(want), "hops=1 id=%llu client=77 seq=9 caller=alice/1234/munge",
             (unsigned long long)a.request_id);
    ck_assert_str_eq(a.error, want);
    snprintf(want, sizeof(want), "hops=1 id=%llu client=77 seq=10 caller=alice/1234/munge",
             (unsigned long long)b.request_id);
    ck_assert_str_eq(b.error, want);
    ck_assert_uint_ne(a.request_id, b.request_id);
    /* The caller's request is not changed. */
    ck_assert_uint_eq(req.hops, 0);
    ck_assert_uint_eq(req.request_id, 5);
    /* A request given now, with the channel up, is sealed at once. */
    struct outcome d = {0};
    req.seq = 11;
    ck_assert_int_eq(forwarder_send(fx.f, fx.addr, &req, 3000, on_done, &d), 0);
    Spur__Api__Request *g3 = leader_recv(&fx, cfd, &c, &r);
    ck_assert_uint_eq(g3->seq, 11);
    leader_answer(&c, cfd, g3, -1);
    ck_assert(test_loop_until(&fx.l, &d.calls, 1, 3000));
    ck_assert(d.had_resp);
    test_loop_run(&fx.l, 50);
    ck_assert_uint_eq(a.calls, 1);
    ck_assert_uint_eq(b.calls, 1);
    spur__api__request__free_unpacked(g1, NULL);
    spur__api__request__free_unpacked(g2, NULL);
    spur__api__request__free_unpacked(g3, NULL);
    chan_free(&c);
    frame_reader_free(&r);
    close(cfd);
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
    /* The request arrives whole, as a sealed frame of a decodable Request. */
    struct chan c;
    struct frame_reader r;
    ck_assert_int_eq(leader_prove(&fx, cfd, &c, &r, 0x5a), CHAN_OK);
    Spur__Api__Request *got = leader_recv(&fx, cfd, &c, &r);
    ck_assert_uint_eq(got->hops, 1);
    spur__api__request__free_unpacked(got, NULL);
    frame_reader_free(&r);
    chan_free(&c);
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
    struct chan c;
    struct frame_reader r;
    ck_assert_int_eq(leader_prove(&fx, cfd, &c, &r, 0x5a), CHAN_OK);
    uint8_t hdr[FRAME_HEADER_LEN];
    /* The limit is the answer's, the seal's trailer on top; the header alone is refused. */
    frame_put_header(hdr, MAX_FRAME + CHAN_TRAILER_LEN + 1);
    ck_assert_int_eq(send(cfd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    ck_assert(test_loop_until(&fx.l, &o.calls, 1, 3000));
    expect_forward_failed(&o, addr, "answer over the frame limit");
    frame_reader_free(&r);
    chan_free(&c);
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
    fx.f = forwarder_new(fx.l.base, MAX_FRAME, fx.res, &fx.kr, "spur");
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

/* A leader with another cluster key: the request fails with the refusal, never sent. */
START_TEST(test_other_key_fails)
{
    struct fixture fx;
    fixture_start(&fx);
    struct outcome o = {0};
    int cfd = forward_to_raw(&fx, &o, 5000);
    struct chan c;
    struct frame_reader r;
    ck_assert_int_eq(leader_prove(&fx, cfd, &c, &r, 0x77), CHAN_NO_COMMON_KEY);
    ck_assert(test_loop_until(&fx.l, &o.calls, 1, 3000));
    ck_assert(!o.had_resp);
    char want[200];
    snprintf(want, sizeof(want),
             "forwarding to the leader at %s failed: refused by peer: ", fx.addr);
    ck_assert_msg(strncmp(o.error, want, strlen(want)) == 0, "%s", o.error);
    ck_assert_msg(strstr(o.error, "no common cluster key") != NULL, "%s", o.error);
    /* Nothing but the hello came: the forwarder closed without sending the request. */
    ck_assert(test_closed_by_peer(&fx.l, cfd, 3000));
    test_loop_run(&fx.l, 50);
    ck_assert_uint_eq(o.calls, 1);
    frame_reader_free(&r);
    chan_free(&c);
    close(cfd);
    fixture_stop(&fx);
}
END_TEST

/* An answer altered on the way (one bit flipped) fails the request and the connection. */
START_TEST(test_altered_answer_fails)
{
    struct fixture fx;
    fixture_start(&fx);
    struct outcome o = {0};
    int cfd = forward_to_raw(&fx, &o, 5000);
    struct chan c;
    struct frame_reader r;
    ck_assert_int_eq(leader_prove(&fx, cfd, &c, &r, 0x5a), CHAN_OK);
    Spur__Api__Request *got = leader_recv(&fx, cfd, &c, &r);
    leader_answer(&c, cfd, got, 7);
    spur__api__request__free_unpacked(got, NULL);
    ck_assert(test_loop_until(&fx.l, &o.calls, 1, 3000));
    ck_assert(!o.had_resp);
    char want[200];
    snprintf(want, sizeof(want), "forwarding to the leader at %s failed: ", fx.addr);
    ck_assert_msg(strncmp(o.error, want, strlen(want)) == 0, "%s", o.error);
    ck_assert_msg(strstr(o.error, "MAC") != NULL, "%s", o.error);
    ck_assert(test_closed_by_peer(&fx.l, cfd, 3000));
    frame_reader_free(&r);
    chan_free(&c);
    close(cfd);
    fixture_stop(&fx);
}
END_TEST

static Suite *forwarder_suite(void)
{
    Suite *s = suite_create("forwarder");
    TCase *tc = check_case(
        s, "loopback",
        (const TTest *[]){test_answer_comes_back, test_server_closes, test_connection_refused,
                          test_timeout, test_oversized_answer, test_free_fails_pending,
                          test_other_key_fails, test_altered_answer_fails, NULL});
    tcase_set_timeout(tc, 30);
    return s;
}

int main(void)
{
    return check_run(forwarder_suite());
}
