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
 *
 * Who asks: a request on the local socket carries the test process's uid, whatever
 * caller it forged, and so do the bytes kept for forwarding; the socket is 0666, a stale
 * one is replaced, a live one or a file is refused (73), and it is gone after api_free();
 * on TCP, a request without a credential is UNAUTHENTICATED and never dispatched, a
 * Ping is dispatched with caller NULL; a valid token authenticates the connection once,
 * an expired one is refused and the client may retry; scontrol token is answered here,
 * not dispatched; a MUNGE credential is decoded off the loop while the frames behind it
 * wait, in order; a cluster member (a chan initiator in the test) gets the member's
 * caller or keeps a forwarded one, and answers come sealed; a member with another key,
 * or a frame whose MAC does not verify, is closed.
 */
#include "api.h"
#include "chan.h"
#include "check_run.h"
#include "clusterkey.h"
#include "frame.h"
#include "test_loop.h"
#include "token.h"
#include "util.h"
#include "wire.h"

#include <check.h>
#include <munge.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#define MAX_FRAME 65536
#define NODE_ID   3

struct disp {
    unsigned calls;
    bool hold;             /* keep the call instead of answering */
    struct api_call *held; /* the kept call */
    uint64_t last_request_id;
    uint8_t bytes[4096]; /* api_call_bytes() of the last call */
    size_t nbytes;
    /* The last call's req->caller (has_caller false: NULL) and req->user. */
    bool has_caller;
    Spur__Api__Caller caller;
    char caller_user[64], caller_method[32], user[64];
};

static void dispatch(void *arg, struct api_call *call, Spur__Api__Request *req)
{
    struct disp *d = arg;
    d->calls++;
    d->last_request_id = req->request_id;
    d->has_caller = req->caller != NULL;
    if (req->caller) {
        d->caller = *req->caller;
        snprintf(d->caller_user, sizeof(d->caller_user), "%s", req->caller->user);
        snprintf(d->caller_method, sizeof(d->caller_method), "%s", req->caller->method);
        d->caller.user = d->caller_user;
        d->caller.method = d->caller_method;
    }
    snprintf(d->user, sizeof(d->user), "%s", req->user ? req->user : "");
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

/* The options of every test server; a test changes what it needs before server_open(). */
static struct api_options server_options(struct server *sv)
{
    return (struct api_options){
        .listen = sv->addr,
        .max_frame = MAX_FRAME,
        .cluster_name = "spur",
        .node_id = NODE_ID,
        .auth = {.munge = "off", .token_lifespan_s = 1800, .max_token_lifespan_s = 7200},
    };
}

static void server_init(struct server *sv)
{
    memset(sv, 0, sizeof(*sv));
    test_loop_init(&sv->l);
    snprintf(sv->addr, sizeof(sv->addr), "127.0.0.1:%u", test_free_port());
    frame_reader_init(&sv->r, 1 << 20);
    sv->fd = -1;
}

/* Open the server with o and connect a TCP client to it. */
static void server_open(struct server *sv, const struct api_options *o)
{
    char why[256] = "";
    sv->s = api_new(sv->l.base, o, dispatch, &sv->d, why, sizeof(why));
    ck_assert_msg(sv->s != NULL, "api_new: %s", why);
    sv->fd = test_connect(sv->addr);
}

static void server_start(struct server *sv)
{
    server_init(sv);
    struct api_options o = server_options(sv);
    server_open(sv, &o);
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
    uint8_t bytes[4096];
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

/* ---- who asks: helpers ---------------------------------------------------------------- */

/* A scratch directory for a socket, and the socket's path in it. */
struct sockdir {
    char dir[64];
    char path[128];
};

static void sockdir_make(struct sockdir *sd)
{
    snprintf(sd->dir, sizeof(sd->dir), "/tmp/spur-test-api-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(sd->dir));
    snprintf(sd->path, sizeof(sd->path), "%s/run/spurctld.sock", sd->dir);
}

static void sockdir_remove(struct sockdir *sd)
{
    char run[128];
    snprintf(run, sizeof(run), "%s/run", sd->dir);
    unlink(sd->path);
    rmdir(run);
    rmdir(sd->dir);
}

/* A blocking-free connection to the Unix socket at path. */
static int connect_local(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(path), sizeof(un.sun_path));
    memcpy(un.sun_path, path, strlen(path) + 1);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&un, sizeof(un)), 0);
    return fd;
}

/* A server with its local socket in sd; sv.fd is a client of the local socket. */
static void server_start_local(struct server *sv, struct sockdir *sd)
{
    server_init(sv);
    sockdir_make(sd);
    struct api_options o = server_options(sv);
    o.socket_path = sd->path;
    server_open(sv, &o);
    close(sv->fd);
    sv->fd = connect_local(sd->path);
}

static void make_keyring(struct keyring *kr, uint8_t fill)
{
    memset(kr, 0, sizeof(*kr));
    uint8_t bytes[32];
    memset(bytes, fill, sizeof(bytes));
    struct clusterkey k;
    char err[256];
    ck_assert_msg(clusterkey_from_bytes(&k, bytes, sizeof(bytes), "test", err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_int_eq(keyring_add(kr, &k), 0);
}

static Spur__Api__Request status_request(Spur__Api__RaftStatusRequest *rs, uint64_t id)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    req.protocol_version = SPUR_PROTOCOL_VERSION;
    req.cluster_name = (char *)"spur";
    req.request_id = id;
    req.op_case = SPUR__API__REQUEST__OP_RAFT_STATUS;
    req.raft_status = rs;
    return req;
}

static void expect_ok_answer(struct server *sv, uint64_t request_id)
{
    Spur__Api__Response *resp = next_answer(sv);
    ck_assert_msg(resp->code == SPUR__API__CODE__CODE_OK, "code %d: %s", resp->code, resp->error);
    ck_assert_uint_eq(resp->request_id, request_id);
    spur__api__response__free_unpacked(resp, NULL);
}

/* The caller of the request kept for forwarding (api_call_bytes() of the last call). */
static Spur__Api__Request *forwarded(const struct server *sv)
{
    Spur__Api__Request *req = spur__api__request__unpack(NULL, sv->d.nbytes, sv->d.bytes);
    ck_assert_ptr_nonnull(req);
    return req;
}

/* ---- who asks: the local socket -------------------------------------------------------- */

START_TEST(test_local_socket_identity)
{
    struct server sv;
    struct sockdir sd;
    server_start_local(&sv, &sd);
    struct stat st;
    ck_assert_int_eq(stat(sd.path, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));
    ck_assert_uint_eq(st.st_mode & 0777, 0666);
    char run[128];
    snprintf(run, sizeof(run), "%s/run", sd.dir);
    ck_assert_int_eq(stat(run, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0755);

    /* A caller and a user forged by the client: both replaced by the kernel's word. */
    Spur__Api__Caller forged = SPUR__API__CALLER__INIT;
    forged.user = (char *)"mallory";
    forged.uid = 4242;
    forged.gid = 4242;
    forged.operator_ = getuid() != 0;
    forged.method = (char *)"replica";
    Spur__Api__RaftStatusRequest rs = SPUR__API__RAFT_STATUS_REQUEST__INIT;
    Spur__Api__Request req = status_request(&rs, 51);
    req.caller = &forged;
    req.user = (char *)"mallory";
    send_request(sv.fd, &req);
    expect_ok_answer(&sv, 51);
    struct passwd *pw = getpwuid(getuid());
    ck_assert_ptr_nonnull(pw);
    ck_assert_uint_eq(sv.d.calls, 1);
    ck_assert(sv.d.has_caller);
    ck_assert_uint_eq(sv.d.caller.uid, getuid());
    ck_assert_uint_eq(sv.d.caller.gid, getgid());
    ck_assert_str_eq(sv.d.caller_user, pw->pw_name);
    ck_assert_str_eq(sv.d.caller_method, "socket");
    ck_assert(sv.d.caller.operator_ == (getuid() == 0));
    ck_assert_str_eq(sv.d.user, pw->pw_name);
    /* The bytes kept for forwarding carry the same caller, not the forged one. */
    Spur__Api__Request *fw = forwarded(&sv);
    ck_assert_ptr_nonnull(fw->caller);
    ck_assert_uint_eq(fw->caller->uid, getuid());
    ck_assert_str_eq(fw->caller->method, "socket");
    ck_assert_str_eq(fw->user, pw->pw_name);
    spur__api__request__free_unpacked(fw, NULL);
    struct api_stats as;
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_ok[AUTH_SOCKET], 1);

    /* A Ping on the socket carries the identity too. */
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    req = ping_request(&ping, "spur", 52);
    send_request(sv.fd, &req);
    expect_ok_answer(&sv, 52);
    ck_assert(sv.d.has_caller);
    ck_assert_uint_eq(sv.d.caller.uid, getuid());

    server_stop(&sv);
    /* api_free() removed the socket. */
    ck_assert_int_eq(lstat(sd.path, &st), -1);
    sockdir_remove(&sd);
}
END_TEST

START_TEST(test_socket_stale_live_file)
{
    struct server sv;
    server_init(&sv);
    struct sockdir sd;
    sockdir_make(&sd);
    char run[128];
    snprintf(run, sizeof(run), "%s/run", sd.dir);
    ck_assert_int_eq(mkdir(run, 0755), 0);
    /* A socket file a dead replica left: bound, never listened on, closed. */
    int dead = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(sd.path), sizeof(un.sun_path));
    memcpy(un.sun_path, sd.path, strlen(sd.path) + 1);
    ck_assert_int_eq(bind(dead, (struct sockaddr *)&un, sizeof(un)), 0);
    close(dead);
    struct api_options o = server_options(&sv);
    o.socket_path = sd.path;
    server_open(&sv, &o);
    int fd = connect_local(sd.path); /* ours now */
    close(fd);

    /* A second replica on the same socket: refused, the first one's socket untouched. */
    struct api_options o2 = o;
    char addr2[64];
    snprintf(addr2, sizeof(addr2), "127.0.0.1:%u", test_free_port());
    o2.listen = addr2;
    struct api_server *second = NULL;
    char why[256] = "";
    ck_assert_int_eq(api_open(sv.l.base, &o2, dispatch, &sv.d, &second, why, sizeof(why)),
                     EXIT_CANTCREAT);
    ck_assert_ptr_null(second);
    char want[256];
    snprintf(want, sizeof(want), "another replica serves socket %s", sd.path);
    ck_assert_str_eq(why, want);
    fd = connect_local(sd.path);
    close(fd);
    server_stop(&sv);

    /* A file that is not a socket is never removed. */
    FILE *f = fopen(sd.path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    struct test_loop l;
    test_loop_init(&l);
    ck_assert_int_eq(api_open(l.base, &o2, dispatch, &sv.d, &second, why, sizeof(why)),
                     EXIT_CANTCREAT);
    ck_assert_ptr_nonnull(strstr(why, "exists and is not a socket"));
    struct stat st;
    ck_assert_int_eq(lstat(sd.path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    test_loop_free(&l);
    sockdir_remove(&sd);
}
END_TEST

/* ---- who asks: TCP users ---------------------------------------------------------------- */

START_TEST(test_tcp_unauthenticated)
{
    struct server sv;
    server_start(&sv);
    /* No credential: refused, never dispatched. */
    Spur__Api__RaftStatusRequest rs = SPUR__API__RAFT_STATUS_REQUEST__INIT;
    Spur__Api__Request req = status_request(&rs, 61);
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_UNAUTHENTICATED, 61, "not authenticated");
    ck_assert_uint_eq(sv.d.calls, 0);
    /* A forged caller proves nothing either. */
    Spur__Api__Caller forged = SPUR__API__CALLER__INIT;
    forged.user = (char *)"root";
    forged.operator_ = 1;
    forged.method = (char *)"replica";
    req.caller = &forged;
    req.request_id = 62;
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_UNAUTHENTICATED, 62, "not authenticated");
    ck_assert_uint_eq(sv.d.calls, 0);
    /* scontrol token on an unauthenticated connection. */
    Spur__Api__TokenRequest tr = SPUR__API__TOKEN_REQUEST__INIT;
    req = status_request(&rs, 63);
    req.op_case = SPUR__API__REQUEST__OP_TOKEN;
    req.token = &tr;
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_UNAUTHENTICATED, 63, "not authenticated");
    /* A Ping is answered: dispatched with no caller, the forged one dropped. */
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    req = ping_request(&ping, "spur", 64);
    req.caller = &forged;
    req.user = (char *)"root";
    send_request(sv.fd, &req);
    expect_ok_answer(&sv, 64);
    ck_assert_uint_eq(sv.d.calls, 1);
    ck_assert(!sv.d.has_caller);
    ck_assert_str_eq(sv.d.user, "");
    Spur__Api__Request *fw = forwarded(&sv);
    ck_assert_ptr_null(fw->caller);
    spur__api__request__free_unpacked(fw, NULL);
    struct api_stats as;
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_failures[AUTH_FAIL_MISSING], 3);
    server_stop(&sv);
}
END_TEST

START_TEST(test_tcp_token)
{
    struct keyring kr;
    make_keyring(&kr, 7);
    struct server sv;
    server_init(&sv);
    struct api_options o = server_options(&sv);
    o.auth.kr = &kr;
    server_open(&sv, &o);
    uint64_t now = (uint64_t)time(NULL);
    struct passwd *nb = getpwnam("nobody");
    ck_assert_ptr_nonnull(nb);

    /* Expired: refused like no credential at all; the connection may try again. */
    char *old = NULL;
    ck_assert_int_eq(token_issue(&kr, "nobody", now - 3600, 60, &old), TOKEN_OK);
    Spur__Api__Credential cred = SPUR__API__CREDENTIAL__INIT;
    cred.kind_case = SPUR__API__CREDENTIAL__KIND_TOKEN;
    cred.token = old;
    Spur__Api__RaftStatusRequest rs = SPUR__API__RAFT_STATUS_REQUEST__INIT;
    Spur__Api__Request req = status_request(&rs, 71);
    req.credential = &cred;
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_UNAUTHENTICATED, 71, "not authenticated");
    ck_assert_uint_eq(sv.d.calls, 0);
    struct api_stats as;
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_failures[AUTH_FAIL_EXPIRED], 1);
    free(old);

    /* A token of another key: refused. */
    struct keyring other;
    make_keyring(&other, 8);
    char *forged_tok = NULL;
    ck_assert_int_eq(token_issue(&other, "root", now, 600, &forged_tok), TOKEN_OK);
    cred.token = forged_tok;
    req.request_id = 72;
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_UNAUTHENTICATED, 72, "not authenticated");
    free(forged_tok);

    /* A valid one, with a forged caller beside it: the token's user counts. */
    char *tok = NULL;
    ck_assert_int_eq(token_issue(&kr, "nobody", now, 600, &tok), TOKEN_OK);
    cred.token = tok;
    Spur__Api__Caller forged = SPUR__API__CALLER__INIT;
    forged.user = (char *)"root";
    forged.operator_ = 1;
    forged.method = (char *)"socket";
    req.request_id = 73;
    req.caller = &forged;
    send_request(sv.fd, &req);
    expect_ok_answer(&sv, 73);
    ck_assert_uint_eq(sv.d.calls, 1);
    ck_assert(sv.d.has_caller);
    ck_assert_str_eq(sv.d.caller_user, "nobody");
    ck_assert_uint_eq(sv.d.caller.uid, nb->pw_uid);
    ck_assert_uint_eq(sv.d.caller.gid, nb->pw_gid);
    ck_assert(!sv.d.caller.operator_);
    ck_assert_str_eq(sv.d.caller_method, "token");
    ck_assert_str_eq(sv.d.user, "nobody");
    /* Forwarded: the caller goes along, the token does not. */
    Spur__Api__Request *fw = forwarded(&sv);
    ck_assert_str_eq(fw->caller->user, "nobody");
    ck_assert_ptr_null(fw->credential);
    spur__api__request__free_unpacked(fw, NULL);

    /* Once per connection: the next request needs no credential. */
    req = status_request(&rs, 74);
    send_request(sv.fd, &req);
    expect_ok_answer(&sv, 74);
    ck_assert_uint_eq(sv.d.calls, 2);
    ck_assert_str_eq(sv.d.caller_user, "nobody");

    /* scontrol token: answered here, never dispatched; another user is for operators. */
    Spur__Api__TokenRequest tr = SPUR__API__TOKEN_REQUEST__INIT;
    req = status_request(&rs, 75);
    req.op_case = SPUR__API__REQUEST__OP_TOKEN;
    req.token = &tr;
    send_request(sv.fd, &req);
    Spur__Api__Response *resp = next_answer(&sv);
    ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_OK);
    ck_assert_int_eq(resp->result_case, SPUR__API__RESPONSE__RESULT_TOKEN);
    ck_assert_str_eq(resp->token->user, "nobody");
    ck_assert_uint_ge(resp->token->expires_s, now + 1800);
    struct token_claims cl;
    ck_assert_int_eq(token_verify(&kr, resp->token->token, now, &cl), TOKEN_OK);
    ck_assert_str_eq(cl.user, "nobody");
    spur__api__response__free_unpacked(resp, NULL);
    tr.username = (char *)"root";
    req.request_id = 76;
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_DENIED, 76, "Access/permission denied");
    tr.username = (char *)"";
    tr.lifespan_s = 7201;
    req.request_id = 77;
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_INVALID, 77,
                        "lifespan 7201 s is over the limit of 7200 s (auth.max_token_lifespan_s)");
    ck_assert_uint_eq(sv.d.calls, 2);
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_ok[AUTH_TOKEN], 1);
    free(tok);
    server_stop(&sv);
    keyring_wipe(&kr);
    keyring_wipe(&other);
}
END_TEST

/* munged's socket when one runs here (MUNGE_SOCKET, or libmunge's default), else NULL. */
static const char *munged_socket(void)
{
    const char *s = getenv("MUNGE_SOCKET");
    if (s && s[0])
        return s;
    struct stat st;
    if (stat("/run/munge/munge.socket.2", &st) == 0 && S_ISSOCK(st.st_mode))
        return "/run/munge/munge.socket.2";
    return NULL;
}

START_TEST(test_tcp_munge)
{
    /* munged is not at this path: the answer comes off the loop, and is a refusal. */
    struct server sv;
    server_init(&sv);
    struct api_options o = server_options(&sv);
    o.auth.munge = "on";
    o.auth.munge_socket = "/nonexistent/spur-test/munge.socket.2";
    server_open(&sv, &o);
    Spur__Api__Credential cred = SPUR__API__CREDENTIAL__INIT;
    cred.kind_case = SPUR__API__CREDENTIAL__KIND_MUNGE;
    cred.munge = (char *)"MUNGE:not-a-credential:";
    Spur__Api__RaftStatusRequest rs = SPUR__API__RAFT_STATUS_REQUEST__INIT;
    Spur__Api__Request req = status_request(&rs, 81);
    req.credential = &cred;
    send_request(sv.fd, &req);
    /* A Ping right behind it waits for the answer and keeps its place. */
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    Spur__Api__Request p = ping_request(&ping, "spur", 82);
    send_request(sv.fd, &p);
    Spur__Api__Response *resp = NULL;
    const uint8_t *pl = NULL;
    size_t len = 0;
    ck_assert_int_eq(test_recv_frame(&sv.l, sv.fd, &sv.r, &pl, &len, 15000), 1);
    resp = spur__api__response__unpack(NULL, len, pl);
    ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_UNAUTHENTICATED);
    ck_assert_uint_eq(resp->request_id, 81);
    ck_assert_str_eq(resp->error, "not authenticated");
    spur__api__response__free_unpacked(resp, NULL);
    expect_ok_answer(&sv, 82);
    ck_assert_uint_eq(sv.d.calls, 1);
    ck_assert(!sv.d.has_caller);
    server_stop(&sv);

    /* MUNGE off: refused at once. */
    server_init(&sv);
    o = server_options(&sv);
    server_open(&sv, &o);
    req.request_id = 83;
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_UNAUTHENTICATED, 83, "not authenticated");
    struct api_stats as;
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_failures[AUTH_FAIL_DISABLED], 1);
    server_stop(&sv);

    /* With munged: a real credential is the caller; the same one again is a replay. */
    const char *sock = munged_socket();
    if (sock == NULL) {
        fprintf(stderr, "test_tcp_munge: munged is not running here; the real part skipped\n");
        return;
    }
    munge_ctx_t ctx = munge_ctx_create();
    ck_assert_int_eq(munge_ctx_set(ctx, MUNGE_OPT_SOCKET, sock), EMUNGE_SUCCESS);
    char *good = NULL;
    ck_assert_int_eq(munge_encode(&good, ctx, "spur:spur", 9), EMUNGE_SUCCESS);
    munge_ctx_destroy(ctx);
    server_init(&sv);
    o = server_options(&sv);
    o.auth.munge = "auto";
    o.auth.munge_socket = sock;
    server_open(&sv, &o);
    cred.munge = good;
    req.request_id = 84;
    send_request(sv.fd, &req);
    expect_ok_answer(&sv, 84);
    ck_assert(sv.d.has_caller);
    ck_assert_uint_eq(sv.d.caller.uid, getuid());
    ck_assert_str_eq(sv.d.caller_method, "munge");
    int fd2 = test_connect(sv.addr);
    int fd1 = sv.fd;
    sv.fd = fd2;
    frame_reader_free(&sv.r);
    frame_reader_init(&sv.r, 1 << 20);
    req.request_id = 85;
    send_request(sv.fd, &req);
    expect_error_answer(&sv, SPUR__API__CODE__CODE_UNAUTHENTICATED, 85, "not authenticated");
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_ok[AUTH_MUNGE], 1);
    ck_assert_uint_eq(as.auth_failures[AUTH_FAIL_REPLAYED], 1);
    close(fd1);
    free(good);
    server_stop(&sv);
}
END_TEST

/* ---- who asks: cluster members ---------------------------------------------------------- */

struct member {
    struct chan ch;
    int fd;
    struct frame_reader r;
};

/* Dial sv as a chan initiator of role under kr; returns the handshake's last rc. */
static enum chan_rc member_connect(struct server *sv, struct member *m, const struct keyring *kr,
                                   const char *role)
{
    memset(m, 0, sizeof(*m));
    ck_assert_int_eq(chan_init(&m->ch, CHAN_INITIATOR, kr, "spur", role), 0);
    m->fd = test_connect(sv->addr);
    frame_reader_init(&m->r, 1 << 20);
    uint8_t *out = NULL;
    size_t outlen = 0;
    ck_assert_int_eq(chan_hello(&m->ch, &out, &outlen), CHAN_OK);
    test_send_frame(m->fd, out, outlen);
    free(out);
    const uint8_t *p = NULL;
    size_t len = 0;
    if (test_recv_frame(&sv->l, m->fd, &m->r, &p, &len, 3000) != 1)
        return CHAN_BAD_FRAME;
    out = NULL;
    enum chan_rc rc = chan_take_hello(&m->ch, p, len, &out, &outlen);
    if (rc == CHAN_OK)
        test_send_frame(m->fd, out, outlen);
    free(out);
    return rc;
}

static void member_close(struct member *m)
{
    close(m->fd);
    frame_reader_free(&m->r);
    chan_free(&m->ch);
}

static void member_send(struct member *m, const Spur__Api__Request *req)
{
    uint8_t buf[4096];
    size_t n = spur__api__request__get_packed_size(req);
    ck_assert_uint_le(n + CHAN_TRAILER_LEN, sizeof(buf));
    spur__api__request__pack(req, buf);
    ck_assert_int_eq(chan_seal(&m->ch, buf, n, buf + n), CHAN_OK);
    test_send_frame(m->fd, buf, n + CHAN_TRAILER_LEN);
}

/* The next answer on m, opened (its MAC checked) and decoded. */
static Spur__Api__Response *member_answer(struct server *sv, struct member *m)
{
    const uint8_t *p = NULL;
    size_t len = 0;
    ck_assert_int_eq(test_recv_frame(&sv->l, m->fd, &m->r, &p, &len, 3000), 1);
    size_t inner = 0;
    ck_assert_int_eq(chan_open(&m->ch, p, len, &inner), CHAN_OK);
    Spur__Api__Response *resp = spur__api__response__unpack(NULL, inner, p);
    ck_assert_ptr_nonnull(resp);
    return resp;
}

START_TEST(test_member_caller)
{
    struct keyring kr;
    make_keyring(&kr, 9);
    struct server sv;
    server_init(&sv);
    struct api_options o = server_options(&sv);
    o.auth.kr = &kr;
    server_open(&sv, &o);
    struct member m;
    ck_assert_int_eq(member_connect(&sv, &m, &kr, "agent"), CHAN_OK);
    /* No caller: the member's own. */
    Spur__Api__RaftStatusRequest rs = SPUR__API__RAFT_STATUS_REQUEST__INIT;
    Spur__Api__Request req = status_request(&rs, 91);
    member_send(&m, &req);
    Spur__Api__Response *resp = member_answer(&sv, &m);
    ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_OK);
    ck_assert_uint_eq(resp->request_id, 91);
    spur__api__response__free_unpacked(resp, NULL);
    ck_assert_uint_eq(sv.d.calls, 1);
    ck_assert(sv.d.has_caller);
    ck_assert_str_eq(sv.d.caller_user, "spur:agent");
    ck_assert_uint_eq(sv.d.caller.uid, 0);
    ck_assert_uint_eq(sv.d.caller.gid, 0);
    ck_assert(sv.d.caller.operator_);
    ck_assert_str_eq(sv.d.caller_method, "agent");
    ck_assert_str_eq(sv.d.user, "spur:agent");
    /* A forwarded request: its caller is kept. */
    Spur__Api__Caller fwd = SPUR__API__CALLER__INIT;
    fwd.user = (char *)"nobody";
    fwd.uid = 65534;
    fwd.gid = 65534;
    fwd.method = (char *)"token";
    req = status_request(&rs, 92);
    req.caller = &fwd;
    req.user = (char *)"someone-else";
    member_send(&m, &req);
    resp = member_answer(&sv, &m);
    ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_OK);
    spur__api__response__free_unpacked(resp, NULL);
    ck_assert_uint_eq(sv.d.calls, 2);
    ck_assert_str_eq(sv.d.caller_user, "nobody");
    ck_assert_uint_eq(sv.d.caller.uid, 65534);
    ck_assert(!sv.d.caller.operator_);
    ck_assert_str_eq(sv.d.caller_method, "token");
    ck_assert_str_eq(sv.d.user, "nobody");
    /* Errors before dispatch come sealed too. */
    req = status_request(&rs, 93);
    req.cluster_name = (char *)"elsewhere";
    member_send(&m, &req);
    resp = member_answer(&sv, &m);
    ck_assert_int_eq(resp->code, SPUR__API__CODE__CODE_REFUSED);
    spur__api__response__free_unpacked(resp, NULL);
    struct api_stats as;
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_ok[AUTH_MEMBER], 1);

    /* A frame altered on the way: the connection is closed. */
    uint8_t buf[512];
    req = status_request(&rs, 94);
    size_t n = spur__api__request__pack(&req, buf);
    ck_assert_int_eq(chan_seal(&m.ch, buf, n, buf + n), CHAN_OK);
    buf[0] ^= 0x01;
    test_send_frame(m.fd, buf, n + CHAN_TRAILER_LEN);
    ck_assert(test_closed_by_peer(&sv.l, m.fd, 3000));
    ck_assert_uint_eq(sv.d.calls, 2);
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_failures[AUTH_FAIL_MEMBER], 1);
    member_close(&m);
    server_stop(&sv);
    keyring_wipe(&kr);
}
END_TEST

START_TEST(test_member_other_key)
{
    struct keyring kr, other;
    make_keyring(&kr, 10);
    make_keyring(&other, 11);
    struct server sv;
    server_init(&sv);
    struct api_options o = server_options(&sv);
    o.auth.kr = &kr;
    server_open(&sv, &o);
    struct member m;
    /* The server refuses with a hello that says why, then closes. */
    ck_assert_int_eq(member_connect(&sv, &m, &other, "replica"), CHAN_REFUSED);
    ck_assert_ptr_nonnull(strstr(chan_why(&m.ch), "no common cluster key"));
    ck_assert(test_closed_by_peer(&sv.l, m.fd, 3000));
    ck_assert_uint_eq(sv.d.calls, 0);
    struct api_stats as;
    api_get_stats(sv.s, &as);
    ck_assert_uint_eq(as.auth_failures[AUTH_FAIL_MEMBER], 1);
    ck_assert_uint_eq(as.auth_ok[AUTH_MEMBER], 0);
    member_close(&m);

    /* A replica with no key at all refuses members. */
    server_stop(&sv);
    server_init(&sv);
    o = server_options(&sv);
    server_open(&sv, &o);
    ck_assert_int_ne(member_connect(&sv, &m, &kr, "replica"), CHAN_OK);
    ck_assert(test_closed_by_peer(&sv.l, m.fd, 3000));
    member_close(&m);
    server_stop(&sv);
    keyring_wipe(&kr);
    keyring_wipe(&other);
}
END_TEST

START_TEST(test_script_rule_before_dispatch)
{
    struct server sv;
    struct sockdir sd;
    server_start_local(&sv, &sd);
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
    sockdir_remove(&sd);
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
    tc = check_case(s, "auth",
                    (const TTest *[]){test_local_socket_identity, test_socket_stale_live_file,
                                      test_tcp_unauthenticated, test_tcp_token, test_tcp_munge,
                                      test_member_caller, test_member_other_key, NULL});
    tcase_set_timeout(tc, 60);
    return s;
}

int main(void)
{
    return check_run(api_suite());
}
