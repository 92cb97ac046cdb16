/*
 * test_api.c - the client API listener (raftd/api.c) on a real event loop.
 *
 * The server listens on 127.0.0.1 at a port the kernel chose free, with a dispatcher of
 * the test's own that answers at once or keeps the call for later. A raw client speaks
 * frames to it. Pinned here: a request gets its reply with the envelope set (request id,
 * served_by, cluster name, version) and the raw bytes kept for forwarding; an undecodable
 * frame gets INVALID with request id 0 and the connection closes; a header over the limit
 * gets TOO_LARGE naming both sizes before any payload is sent, and the connection closes;
 * another cluster, or none for anything but a Ping, gets REFUSED and the connection stays;
 * the batch script rule is checked before the dispatcher; a client that leaves makes its
 * call abandoned, and the late reply is dropped safely.
 */
#include "api.h"
#include "check_run.h"
#include "frame.h"
#include "test_loop.h"
#include "wire.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAME 65536
#define NODE_ID   3

struct disp {
    unsigned calls;
    bool hold;             /* keep the call instead of answering */
    struct api_call *held; /* the kept call */
    uint64_t last_request_id;
    uint8_t bytes[256]; /* api_call_bytes() of the last call */
    size_t nbytes;
};

static void dispatch(void *arg, struct api_call *call, Spur__Api__Request *req)
{
    struct disp *d = arg;
    d->calls++;
    d->last_request_id = req->request_id;
    size_t n = 0;
    const uint8_t *b = api_call_bytes(call, &n);
    d->nbytes = n < sizeof(d->bytes) ? n : sizeof(d->bytes);
    memcpy(d->bytes, b, d->nbytes);
    if (d->hold) {
        d->held = call;
        return;
    }
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    r.code = SPUR__API__CODE__CODE_OK;
    r.leader_id = 5;
    r.request_id = 999; /* the envelope overrides it */
    r.cluster_name = (char *)"wrong";
    api_reply(call, &r);
}

struct server {
    struct test_loop l;
    struct api_server *s;
    struct disp d;
    char addr[64];
    int fd;                /* a client connected to it, -1 once closed */
    struct frame_reader r; /* the client's answers */
};

static void server_start(struct server *sv)
{
    memset(sv, 0, sizeof(*sv));
    test_loop_init(&sv->l);
    snprintf(sv->addr, sizeof(sv->addr), "127.0.0.1:%u", test_free_port());
    struct api_options o = {
        .listen = sv->addr,
        .max_frame = MAX_FRAME,
        .cluster_name = "spur",
        .node_id = NODE_ID,
    };
    char why[256] = "";
    sv->s = api_new(sv->l.base, &o, dispatch, &sv->d, why, sizeof(why));
    ck_assert_msg(sv->s != NULL, "api_new: %s", why);
    sv->fd = test_connect(sv->addr);
    frame_reader_init(&sv->r, 1 << 20);
}

static void server_stop(struct server *sv)
{
    if (sv->fd >= 0)
        close(sv->fd);
    frame_reader_free(&sv->r);
    api_free(sv->s);
    test_loop_free(&sv->l);
}

static Spur__Api__Request ping_request(Spur__Api__Ping *ping, const char *cluster, uint64_t id)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    req.protocol_version = SPUR_PROTOCOL_VERSION;
    req.cluster_name = (char *)cluster;
    req.request_id = id;
    req.op_case = SPUR__API__REQUEST__OP_PING;
    req.ping = ping;
    return req;
}

/* A request as it went out: its packed bytes, the payload of its frame. */
struct sent_request {
    uint8_t bytes[256];
    size_t len;
};

/* Send req as one frame on fd; returns what was sent. */
static struct sent_request send_request(int fd, const Spur__Api__Request *req)
{
    struct sent_request sent;
    sent.len = spur__api__request__get_packed_size(req);
    ck_assert_uint_le(sent.len, sizeof(sent.bytes));
    spur__api__request__pack(req, sent.bytes);
    test_send_frame(fd, sent.bytes, sent.len);
    return sent;
}

/* The next answer on fd, decoded (the caller frees it). */
static Spur__Api__Response *next_answer(struct server *sv)
{
    const uint8_t *p = NULL;
    size_t len = 0;
    ck_assert_int_eq(test_recv_frame(&sv->l, sv->fd, &sv->r, &p, &len, 3000), 1);
    Spur__Api__Response *resp = spur__api__response__unpack(NULL, len, p);
    ck_assert_ptr_nonnull(resp);
    return resp;
}

/* The next answer on sv's connection carries code, request_id and exactly error. */
static void expect_error_answer(struct server *sv, Spur__Api__Code code, uint64_t request_id,
                                const char *error)
{
    Spur__Api__Response *resp = next_answer(sv);
    ck_assert_int_eq(resp->code, code);
    ck_assert_uint_eq(resp->request_id, request_id);
    ck_assert_str_eq(resp->error, error);
    spur__api__response__free_unpacked(resp, NULL);
}

START_TEST(test_request_gets_reply)
{
    struct server sv;
    server_start(&sv);
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    /* Two requests in a row, on one connection, each answered in turn. */
    for (uint64_t id = 41; id <= 42; id++) {
        Spur__Api__Request req = ping_request(&ping, "spur", id);
        struct sent_request sent = send_request(sv.fd, &req);
        Spur__Api__Response *resp = next_answer(&sv);
        ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_OK);
        ck_assert_uint_eq(resp->request_id, id);
        ck_assert_uint_eq(resp->served_by, NODE_ID);
        ck_assert_uint_eq(resp->leader_id, 5);
        ck_assert_uint_eq(resp->protocol_version, SPUR_PROTOCOL_VERSION);
        ck_assert_str_eq(resp->cluster_name, "spur");
        spur__api__response__free_unpacked(resp, NULL);
        ck_assert_uint_eq(sv.d.last_request_id, id);
        /* The call kept the request's frame payload unchanged, for forwarding. */
        ck_assert_uint_eq(sv.d.nbytes, sent.len);
        ck_assert_int_eq(memcmp(sv.d.bytes, sent.bytes, sent.len), 0);
    }
    ck_assert_uint_eq(sv.d.calls, 2);
    struct api_stats st;
    api_get_stats(sv.s, &st);
    ck_assert_uint_eq(st.requests, 2);
    ck_assert_uint_eq(st.bad_frames, 0);
    ck_assert_uint_eq(st.connections, 1);
    /* A Ping that names no cluster is answered too, and the answer names it. */
    Spur__Api__Request req = ping_request(&ping, "", 43);
    send_request(sv.fd, &req);
    Spur__Api__Response *resp = next_answer(&sv);
    ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_OK);
    ck_assert_str_eq(resp->cluster_name, "spur");
    spur__api__response__free_unpacked(resp, NULL);
    server_stop(&sv);
}
END_TEST

START_TEST(test_malformed_protobuf)
{
    struct server sv;
    server_start(&sv);
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    test_send_frame(sv.fd, junk, sizeof(junk));
    expect_error_answer(&sv, SPUR__API__CODE__CODE_INVALID, 0,
                        "undecodable request: not a spur.api.Request");
    ck_assert(test_closed_by_peer(&sv.l, sv.fd, 3000));
    ck_assert_uint_eq(sv.d.calls, 0);
    struct api_stats st;
    api_get_stats(sv.s, &st);
    ck_assert_uint_eq(st.bad_frames, 1);
    ck_assert_uint_eq(st.requests, 0);
    ck_assert_uint_eq(st.connections, 0);
    server_stop(&sv);
}
END_TEST

START_TEST(test_oversized_frame_refused)
{
    struct server sv;
    server_start(&sv);
    /* The header alone, announcing one byte over the limit: no payload ever follows. */
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_put_header(hdr, MAX_FRAME + 1);
    ck_assert_int_eq(send(sv.fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    expect_error_answer(&sv, SPUR__API__CODE__CODE_TOO_LARGE, 0,
                        "frame of 65537 bytes is over the 65536-byte limit");
    ck_assert(test_closed_by_peer(&sv.l, sv.fd, 3000));
    struct api_stats st;
    api_get_stats(sv.s, &st);
    ck_assert_uint_eq(st.bad_frames, 1);
    ck_assert_uint_eq(sv.d.calls, 0);
    close(sv.fd);

    /* At the limit the server waits for the payload instead. */
    sv.fd = test_connect(sv.addr);
    frame_put_header(hdr, MAX_FRAME);
    ck_assert_int_eq(send(sv.fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    ck_assert(!test_closed_by_peer(&sv.l, sv.fd, 300));
    api_get_stats(sv.s, &st);
    ck_assert_uint_eq(st.bad_frames, 1);
    server_stop(&sv);
}
END_TEST

START_TEST(test_refused_envelope)
{
    struct server sv;
    server_start(&sv);
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request req = ping_request(&ping, "elsewhere", 7);
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_REFUSED, 7,
                        "refused: request for cluster \"elsewhere\", this is \"spur\"");

    /* Anything but a Ping must name the cluster. */
    Spur__Api__RaftStatusRequest rs = SPUR__API__RAFT_STATUS_REQUEST__INIT;
    req = ping_request(&ping, "", 8);
    req.op_case = SPUR__API__REQUEST__OP_RAFT_STATUS;
    req.raft_status = &rs;
    send_request(sv.fd, &req);
    Spur__Api__Response *resp = next_answer(&sv);
    ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_REFUSED);
    ck_assert_uint_eq(resp->request_id, 8);
    ck_assert_ptr_nonnull(strstr(resp->error, "request names no cluster"));
    spur__api__response__free_unpacked(resp, NULL);

    /* The connection stays open: a good request on it is still served. */
    req = ping_request(&ping, "spur", 9);
    send_request(sv.fd, &req);
    resp = next_answer(&sv);
    ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_OK);
    ck_assert_uint_eq(resp->request_id, 9);
    spur__api__response__free_unpacked(resp, NULL);
    ck_assert_uint_eq(sv.d.calls, 1);
    struct api_stats st;
    api_get_stats(sv.s, &st);
    ck_assert_uint_eq(st.refused, 2);
    server_stop(&sv);
}
END_TEST

START_TEST(test_script_rule_before_dispatch)
{
    struct server sv;
    server_start(&sv);
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    spec.script.data = (uint8_t *)"echo no interpreter line\n";
    spec.script.len = strlen((const char *)spec.script.data);
    Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
    sj.spec = &spec;
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request req = ping_request(&ping, "spur", 11);
    req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
    req.submit_job = &sj;
    char want[400];
    ck_assert_int_ne(api_check_request(&req, want, sizeof(want)), 0);
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_INVALID, 11, want);
    ck_assert_uint_eq(sv.d.calls, 0);
    server_stop(&sv);
}
END_TEST

START_TEST(test_client_gone_abandons_call)
{
    struct server sv;
    server_start(&sv);
    sv.d.hold = true;
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request req = ping_request(&ping, "spur", 21);
    struct sent_request sent = send_request(sv.fd, &req);
    ck_assert(test_loop_until(&sv.l, &sv.d.calls, 1, 3000));
    ck_assert_ptr_nonnull(sv.d.held);
    ck_assert(!api_call_abandoned(sv.d.held));
    close(sv.fd);
    sv.fd = -1;
    /* The server notices the close; the call outlives the connection. */
    struct api_stats st;
    uint64_t deadline = test_now_ms() + 3000;
    do {
        test_loop_run(&sv.l, 10);
        api_get_stats(sv.s, &st);
    } while (st.connections != 0 && test_now_ms() < deadline);
    ck_assert_uint_eq(st.connections, 0);
    ck_assert(api_call_abandoned(sv.d.held));
    size_t len = 0;
    ck_assert_ptr_nonnull(api_call_bytes(sv.d.held, &len));
    ck_assert_uint_eq(len, sent.len);
    /* The late answer is dropped, and releases the call (ASan would see a leak or worse). */
    api_reply_error(sv.d.held, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL, "too late: %d", 1);
    sv.d.held = NULL;
    test_loop_run(&sv.l, 20);
    server_stop(&sv);
}
END_TEST

static Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *tc = check_case(s, "loopback",
                           (const TTest *[]){test_request_gets_reply, test_malformed_protobuf,
                                             test_oversized_frame_refused, test_refused_envelope,
                                             test_script_rule_before_dispatch,
                                             test_client_gone_abandons_call, NULL});
    tcase_set_timeout(tc, 30);
    return s;
}

int main(void)
{
    return check_run(api_suite());
}
