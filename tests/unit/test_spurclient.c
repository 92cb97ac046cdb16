/*
 * test_spurclient.c - the blocking client library (client/spurclient.c) against fake
 * replicas the test plays itself.
 *
 * A fake replica is a thread listening on 127.0.0.1 on a port the kernel chose. It reads
 * request frames with common/frame.h, records what each request carried and answers with
 * a Spur__Api__Response it packs itself, in the way the test asked: a plain answer, an
 * answer preceded by one to an abandoned request, one sent a byte at a time, an
 * UNAVAILABLE with a leader hint, a header announcing more than the frame limit, an
 * answer cut short by a close, or silence. Pinned here: a call gets the answer to its own
 * request id; every request carries the protocol version, the cluster name, the user and
 * a deadline, and a write the client's (client_id, seq), kept across a retry on another
 * replica; an oversized answer header is refused at once, without allocating it and
 * without asking another replica; a replica that closes mid-answer sends the call to the
 * next one; a silent one costs the call its time-out and no more; a leader hint moves the
 * call to the hinted replica, and the next write goes straight there; the cluster name is
 * learned from an unnamed Ping; the host list parser.
 *
 * Authentication: a replica on a Unix socket (nothing is sent to prove who asks); the
 * token of a TCP connection in its first non-Ping request only, and again after a
 * reconnect; no MUNGE credential possible: a local error, nothing sent; a socket client
 * stays on its socket rather than follow a TCP hint it cannot prove itself on, and
 * follows it with a token; cluster-key mode: the fake runs chan.h as the responder,
 * every request and answer sealed, and a fake holding another key makes the call fail
 * at once saying so.
 *
 * Each fake replica thread lives at most FAKE_LIFETIME_MS and polls in 20 ms steps; every
 * loop here is bounded in turns and in time.
 */
#include "chan.h"
#include "check_run.h"
#include "clusterkey.h"
#include "frame.h"
#include "spurclient.h"
#include "wire.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FAKE_LIFETIME_MS 20000
#define FAKE_MAX_SEEN    32
#define FAKE_MAX_FRAME   65536

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* How a fake replica answers the requests it reads (pings included unless noted). */
enum fake_way {
    FAKE_ANSWER,           /* OK, to the request's id */
    FAKE_ANSWER_AFTER_OLD, /* first an OK to another request id, then the real answer */
    FAKE_ANSWER_BYTEWISE,  /* the real answer, one byte per send, 1 ms apart */
    FAKE_UNAVAILABLE,      /* UNAVAILABLE naming the leader_hint set on the fake */
    FAKE_OVERSIZED,        /* a header announcing 0xFFFFFFF0 bytes, then silence */
    FAKE_CUT_SHORT,        /* a header and half of the answer, then close */
    FAKE_SILENT,           /* read and never answer */
    FAKE_ID0_ERROR,        /* TOO_LARGE with request id 0, then close: "could not read it" */
    FAKE_OTHER_VERSION,    /* OK, but protocol version SPUR_PROTOCOL_VERSION + 1 */
    FAKE_REFUSE,           /* REFUSED (another cluster) */
    FAKE_PING_NO_NAME,     /* answers carry no cluster name */
    FAKE_UNAUTHENTICATED,  /* UNAUTHENTICATED "not authenticated" */
};

/* What one request carried, as the fake replica read it. */
struct seen {
    uint32_t protocol_version;
    uint64_t request_id;
    uint64_t client_id;
    uint64_t seq;
    uint32_t timeout_ms;
    int op; /* Spur__Api__Request__OpCase */
    char cluster_name[64];
    char user[64];
    int cred_kind;  /* Spur__Api__Credential__KindCase; 0: no credential */
    char cred[128]; /* the token or MUNGE credential it carried */
};

struct fake {
    int lfd;       /* listening socket, owned */
    char addr[64]; /* "127.0.0.1:PORT" */
    pthread_t thread;
    bool running; /* the thread was started and not yet joined */
    atomic_bool stop;
    /* Set before fake_start(), read only by the thread afterwards. */
    enum fake_way way;
    uint32_t node_id;         /* served_by, and leader_id when leader_hint is set */
    const char *cluster;      /* the name answers carry ("" none) */
    const char *leader_hint;  /* carried by every answer when non-NULL */
    const struct keyring *kr; /* set: chan.h responder (role "controller") on every connection */
    char path[108];           /* a Unix socket's path ("": TCP); unlinked by fake_stop() */
    char dir[64];             /* the directory made for it */
    atomic_bool drop;         /* the test asks: close the connection (then clears it) */
    /* The thread's own, per connection. */
    struct chan ch;
    bool ch_live;
    /* Written by the thread under mu, read by the test under mu. */
    pthread_mutex_t mu;
    unsigned accepts;
    unsigned nseen;
    unsigned handshakes; /* connections that proved the key */
    char peer_role[CHAN_ROLE_MAX];
    unsigned refusals; /* handshakes refused */
    struct seen seen[FAKE_MAX_SEEN];
};

static void fake_init(struct fake *f, enum fake_way way, uint32_t node_id, const char *cluster)
{
    memset(f, 0, sizeof(*f));
    f->way = way;
    f->node_id = node_id;
    f->cluster = cluster;
    atomic_init(&f->stop, false);
    atomic_init(&f->drop, false);
    pthread_mutex_init(&f->mu, NULL);
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(f->lfd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&sa, &sl), 0);
    ck_assert_int_eq(listen(f->lfd, 8), 0);
    snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
}

/* A fake replica on a Unix socket in a directory of its own; addr is "unix:PATH". */
static void fake_init_unix(struct fake *f, enum fake_way way, uint32_t node_id, const char *cluster)
{
    memset(f, 0, sizeof(*f));
    f->way = way;
    f->node_id = node_id;
    f->cluster = cluster;
    atomic_init(&f->stop, false);
    atomic_init(&f->drop, false);
    pthread_mutex_init(&f->mu, NULL);
    memcpy(f->dir, "/tmp/spurclient-XXXXXX", sizeof("/tmp/spurclient-XXXXXX"));
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    size_t dl = strlen(f->dir);
    memcpy(f->path, f->dir, dl);
    memcpy(f->path + dl, "/api.sock", sizeof("/api.sock"));
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(f->lfd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
    ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(f->lfd, 8), 0);
    memcpy(f->addr, "unix:", 5);
    memcpy(f->addr + 5, f->path, strlen(f->path) + 1);
}

static void send_all_blocking(int fd, const uint8_t *p, size_t n)
{
    /* The connection is blocking on this side; a client gone away ends the attempt. */
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* Pack r into one frame; the caller frees it. */
static uint8_t *pack_frame(const Spur__Api__Response *r, size_t *n)
{
    size_t len = spur__api__response__get_packed_size(r);
    uint8_t *buf = malloc(FRAME_HEADER_LEN + len + CHAN_TRAILER_LEN);
    ck_assert_ptr_nonnull(buf);
    frame_put_header(buf, (uint32_t)len);
    spur__api__response__pack(r, buf + FRAME_HEADER_LEN);
    *n = FRAME_HEADER_LEN + len;
    return buf;
}

/* On a keyed connection: seal the frame pack_frame() made (it left room for the trailer). */
static void fake_seal(struct fake *f, uint8_t *buf, size_t *n)
{
    if (!f->ch_live || !chan_established(&f->ch))
        return;
    size_t len = *n - FRAME_HEADER_LEN;
    ck_assert_int_eq(chan_seal(&f->ch, buf + FRAME_HEADER_LEN, len, buf + *n), CHAN_OK);
    frame_put_header(buf, (uint32_t)(len + CHAN_TRAILER_LEN));
    *n += CHAN_TRAILER_LEN;
}

/* Send one unsealed handshake payload as a frame. */
static void send_payload(int conn, const uint8_t *p, size_t len)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_put_header(hdr, (uint32_t)len);
    send_all_blocking(conn, hdr, sizeof(hdr));
    send_all_blocking(conn, p, len);
}

/* Answer one request the way the fake was told. Returns false when it closes conn. */
static bool fake_answer(struct fake *f, int conn, const Spur__Api__Request *req)
{
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    Spur__Api__PingResponse ping = SPUR__API__PING_RESPONSE__INIT;
    Spur__Api__Empty done = SPUR__API__EMPTY__INIT;
    r.protocol_version = SPUR_PROTOCOL_VERSION;
    r.request_id = req->request_id;
    r.code = SPUR__API__CODE__CODE_OK;
    r.served_by = f->node_id;
    r.cluster_name = (char *)(f->way == FAKE_PING_NO_NAME ? "" : f->cluster);
    if (f->leader_hint) {
        r.leader_hint = (char *)f->leader_hint;
        r.leader_id = f->node_id;
    }
    if (req->op_case == SPUR__API__REQUEST__OP_PING) {
        ping.node_id = f->node_id;
        ping.role = (char *)"leader";
        r.result_case = SPUR__API__RESPONSE__RESULT_PING;
        r.ping = &ping;
    } else {
        r.result_case = SPUR__API__RESPONSE__RESULT_DONE;
        r.done = &done;
    }
    size_t n = 0;
    uint8_t *buf = NULL;
    switch (f->way) {
    case FAKE_SILENT:
        return true;
    case FAKE_OVERSIZED: {
        uint8_t hdr[FRAME_HEADER_LEN];
        frame_put_header(hdr, 0xFFFFFFF0u);
        send_all_blocking(conn, hdr, sizeof(hdr));
        return true;
    }
    case FAKE_UNAVAILABLE:
        r.code = SPUR__API__CODE__CODE_UNAVAILABLE;
        r.error = (char *)"not the leader";
        r.leader_id = 0; /* the hint alone: this replica does not know the leader's id */
        r.result_case = SPUR__API__RESPONSE__RESULT__NOT_SET;
        break;
    case FAKE_UNAUTHENTICATED:
        r.code = SPUR__API__CODE__CODE_UNAUTHENTICATED;
        r.error = (char *)"not authenticated";
        r.result_case = SPUR__API__RESPONSE__RESULT__NOT_SET;
        break;
    case FAKE_REFUSE:
        r.code = SPUR__API__CODE__CODE_REFUSED;
        r.error = (char *)"another cluster";
        r.result_case = SPUR__API__RESPONSE__RESULT__NOT_SET;
        break;
    case FAKE_ID0_ERROR:
        r.code = SPUR__API__CODE__CODE_TOO_LARGE;
        r.request_id = 0;
        r.error = (char *)"request over the frame limit";
        r.result_case = SPUR__API__RESPONSE__RESULT__NOT_SET;
        break;
    case FAKE_OTHER_VERSION:
        r.protocol_version = SPUR_PROTOCOL_VERSION + 1;
        break;
    case FAKE_ANSWER_AFTER_OLD: {
        Spur__Api__Response old = r;
        old.request_id = req->request_id - 1;
        old.served_by = 99;
        buf = pack_frame(&old, &n);
        send_all_blocking(conn, buf, n);
        free(buf);
        break;
    }
    default:
        break;
    }
    buf = pack_frame(&r, &n);
    fake_seal(f, buf, &n);
    bool open = true;
    if (f->way == FAKE_CUT_SHORT) {
        send_all_blocking(conn, buf, FRAME_HEADER_LEN + (n - FRAME_HEADER_LEN) / 2);
        open = false;
    } else if (f->way == FAKE_ANSWER_BYTEWISE) {
        for (size_t i = 0; i < n; i++) {
            send_all_blocking(conn, buf + i, 1);
            struct timespec ts = {0, 1000000L};
            nanosleep(&ts, NULL);
        }
    } else {
        send_all_blocking(conn, buf, n);
        open = f->way != FAKE_ID0_ERROR;
    }
    free(buf);
    return open;
}

static void fake_record(struct fake *f, const Spur__Api__Request *req)
{
    pthread_mutex_lock(&f->mu);
    if (f->nseen < FAKE_MAX_SEEN) {
        struct seen *s = &f->seen[f->nseen++];
        s->protocol_version = req->protocol_version;
        s->request_id = req->request_id;
        s->client_id = req->client_id;
        s->seq = req->seq;
        s->timeout_ms = req->timeout_ms;
        s->op = (int)req->op_case;
        snprintf(s->cluster_name, sizeof(s->cluster_name), "%s",
                 req->cluster_name ? req->cluster_name : "(null)");
        snprintf(s->user, sizeof(s->user), "%s", req->user ? req->user : "(null)");
        const Spur__Api__Credential *cr = req->credential;
        s->cred_kind = cr ? (int)cr->kind_case : 0;
        const char *v = cr == NULL                                           ? ""
                        : cr->kind_case == SPUR__API__CREDENTIAL__KIND_TOKEN ? cr->token
                                                                             : cr->munge;
        snprintf(s->cred, sizeof(s->cred), "%s", v ? v : "");
    }
    pthread_mutex_unlock(&f->mu);
}

/*
 * Take every whole request frame out of rd and answer it. Returns false when the
 * connection is to be closed (the fake's way says so, or the bytes are not a request).
 */
static bool fake_serve_frames(struct fake *f, int conn, struct frame_reader *rd)
{
    for (unsigned i = 0; i < 64; i++) {
        const uint8_t *payload = NULL;
        size_t len = 0;
        enum frame_status st = frame_reader_next(rd, &payload, &len);
        if (st == FRAME_NEED_MORE)
            return true;
        if (st != FRAME_READY)
            return false;
        if (f->ch_live && !chan_established(&f->ch)) {
            /* The handshake: the initiator's hello, then its proof. */
            if (f->ch.state == CHAN_S_NEW) {
                uint8_t *out = NULL;
                size_t outlen = 0;
                enum chan_rc rc = chan_take_hello(&f->ch, payload, len, &out, &outlen);
                if (out != NULL)
                    send_payload(conn, out, outlen);
                free(out);
                if (rc != CHAN_OK) {
                    pthread_mutex_lock(&f->mu);
                    f->refusals++;
                    pthread_mutex_unlock(&f->mu);
                    return false;
                }
                continue;
            }
            if (chan_take_proof(&f->ch, payload, len) != CHAN_OK)
                return false;
            pthread_mutex_lock(&f->mu);
            f->handshakes++;
            snprintf(f->peer_role, sizeof(f->peer_role), "%s", f->ch.peer_role);
            pthread_mutex_unlock(&f->mu);
            continue;
        }
        if (f->ch_live && chan_open(&f->ch, payload, len, &len) != CHAN_OK)
            return false; /* not sealed, or not under this connection's key */
        Spur__Api__Request *req = spur__api__request__unpack(NULL, len, payload);
        if (req == NULL)
            return false;
        fake_record(f, req);
        bool open = fake_answer(f, conn, req);
        spur__api__request__free_unpacked(req, NULL);
        if (!open)
            return false;
    }
    return true;
}

/* One connection at a time: the client holds at most one; a new one replaces the old. */
static void *fake_main(void *arg)
{
    struct fake *f = arg;
    uint64_t end = now_ms() + FAKE_LIFETIME_MS;
    int conn = -1;
    struct frame_reader rd;
    frame_reader_init(&rd, FAKE_MAX_FRAME);
    for (unsigned turn = 0; turn < 100000 && !atomic_load(&f->stop) && now_ms() < end; turn++) {
        if (conn >= 0 && atomic_exchange(&f->drop, false)) {
            close(conn);
            conn = -1;
            frame_reader_free(&rd);
        }
        struct pollfd p[2] = {{.fd = f->lfd, .events = POLLIN}, {.fd = conn, .events = POLLIN}};
        if (poll(p, conn >= 0 ? 2 : 1, 20) <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            int nc = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (nc >= 0) {
                int one = 1;
                setsockopt(nc, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                if (conn >= 0)
                    close(conn);
                frame_reader_free(&rd);
                conn = nc;
                if (f->ch_live)
                    chan_free(&f->ch);
                f->ch_live = false;
                if (f->kr != NULL) {
                    ck_assert_int_eq(
                        chan_init(&f->ch, CHAN_RESPONDER, f->kr, f->cluster, "controller"), 0);
                    f->ch_live = true;
                }
                pthread_mutex_lock(&f->mu);
                f->accepts++;
                pthread_mutex_unlock(&f->mu);
            }
            continue;
        }
        if (conn < 0 || !(p[1].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        uint8_t *space = NULL;
        size_t room = 0;
        bool keep = frame_reader_space(&rd, 4096, &space, &room) == 0;
        ssize_t got = keep ? recv(conn, space, room, 0) : 0;
        if (got > 0) {
            frame_reader_commit(&rd, (size_t)got);
            keep = fake_serve_frames(f, conn, &rd);
        } else if (got < 0 && errno == EINTR) {
            keep = true;
        } else {
            keep = false;
        }
        if (!keep) {
            close(conn);
            conn = -1;
            frame_reader_free(&rd);
        }
    }
    if (conn >= 0)
        close(conn);
    frame_reader_free(&rd);
    if (f->ch_live)
        chan_free(&f->ch);
    f->ch_live = false;
    return NULL;
}

static void fake_start(struct fake *f)
{
    ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
    f->running = true;
}

/* Stop the thread and close the listener: the address then refuses connections. */
static void fake_stop(struct fake *f)
{
    if (!f->running)
        return;
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    f->running = false;
    close(f->lfd);
    pthread_mutex_destroy(&f->mu);
    if (f->path[0]) {
        unlink(f->path);
        rmdir(f->dir);
    }
}

/* A copy of what the fake has seen so far, taken under its lock. */
static unsigned fake_seen(struct fake *f, struct seen *out, unsigned *accepts)
{
    pthread_mutex_lock(&f->mu);
    unsigned n = f->nseen;
    memcpy(out, f->seen, sizeof(f->seen));
    if (accepts)
        *accepts = f->accepts;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/*
 * One test's world: up to three fake replicas, a client, and the last call's outcome.
 * The replicas are set up with scene_fake() (then their leader_hint if wanted); the first
 * scene_client() starts them. scene_end() frees the answer and the client and stops the
 * replicas.
 */
struct scene {
    struct fake fk[3];
    unsigned nfk;
    struct spurclient *c; /* owned; replaced by scene_client() */
    Spur__Api__Request req;
    Spur__Api__GetJobsRequest get;
    Spur__Api__JobIdRequest job;
    Spur__Api__Ping ping;
    spurclient_response *r; /* the last call's answer, owned; freed by the next call */
    int rc;                 /* the last call's return */
    uint64_t took_ms;       /* how long the last call took */
    char err[512];
};

static struct fake *scene_fake(struct scene *sc, enum fake_way way, uint32_t node_id,
                               const char *cluster)
{
    ck_assert_uint_lt(sc->nfk, 3);
    struct fake *f = &sc->fk[sc->nfk++];
    fake_init(f, way, node_id, cluster);
    return f;
}

static struct fake *scene_fake_unix(struct scene *sc, enum fake_way way, uint32_t node_id,
                                    const char *cluster)
{
    ck_assert_uint_lt(sc->nfk, 3);
    struct fake *f = &sc->fk[sc->nfk++];
    fake_init_unix(f, way, node_id, cluster);
    return f;
}

/* Two replicas of cluster "alpha": f (node 1) answering way_f, g (node 2) way_g. */
static void scene_pair(struct scene *sc, enum fake_way way_f, enum fake_way way_g, struct fake **f,
                       struct fake **g)
{
    *f = scene_fake(sc, way_f, 1, "alpha");
    *g = scene_fake(sc, way_g, 2, "alpha");
}

static void scene_client_opts(struct scene *sc, struct spurclient_options *o)
{
    for (unsigned i = 0; i < sc->nfk; i++)
        if (!sc->fk[i].running && !atomic_load(&sc->fk[i].stop))
            fake_start(&sc->fk[i]);
    spurclient_free(sc->c);
    if (o->user == NULL)
        o->user = "alice";
    sc->c = spurclient_new(o);
    ck_assert_ptr_nonnull(sc->c);
}

/* A client over hosts (NULL: the first n replicas' addresses, in order). */
static void scene_client(struct scene *sc, const char *const *hosts, size_t n, const char *cluster,
                         uint32_t timeout_ms)
{
    const char *mine[3];
    for (unsigned i = 0; i < sc->nfk; i++)
        mine[i] = sc->fk[i].addr;
    if (hosts == NULL)
        ck_assert_uint_le(n, sc->nfk);
    struct spurclient_options o = {.hosts = hosts ? hosts : mine,
                                   .nhosts = n,
                                   .cluster_name = cluster,
                                   .timeout_ms = timeout_ms};
    scene_client_opts(sc, &o);
}

/* One replica of cluster "alpha" (node node_id, answering way) and a client over it. */
static struct fake *scene_one(struct scene *sc, enum fake_way way, uint32_t node_id,
                              const char *cluster, uint32_t timeout_ms)
{
    struct fake *f = scene_fake(sc, way, node_id, "alpha");
    scene_client(sc, NULL, 1, cluster, timeout_ms);
    return f;
}

static void scene_end(struct scene *sc)
{
    spurclient_response_free(sc->r);
    sc->r = NULL;
    spurclient_free(sc->c);
    sc->c = NULL;
    for (unsigned i = 0; i < sc->nfk; i++)
        fake_stop(&sc->fk[i]);
}

/* Send sc->req, set up by one of the call_* functions below, and time the call. */
static int scene_call(struct scene *sc, bool write)
{
    spurclient_response_free(sc->r);
    sc->r = NULL;
    sc->err[0] = '\0';
    uint64_t t0 = now_ms();
    sc->rc = spurclient_call(sc->c, &sc->req, write, &sc->r, sc->err, sizeof(sc->err));
    sc->took_ms = now_ms() - t0;
    ck_assert_msg(sc->rc == 0 ? sc->r != NULL : sc->r == NULL, "rc %d with answer %p", sc->rc,
                  (void *)sc->r);
    return sc->rc;
}

static void request_reset(struct scene *sc, Spur__Api__Request__OpCase op)
{
    sc->req = (Spur__Api__Request)SPUR__API__REQUEST__INIT;
    sc->req.op_case = op;
}

/* A read: GetJobs. */
static int call_read(struct scene *sc)
{
    request_reset(sc, SPUR__API__REQUEST__OP_GET_JOBS);
    sc->get = (Spur__Api__GetJobsRequest)SPUR__API__GET_JOBS_REQUEST__INIT;
    sc->req.get_jobs = &sc->get;
    return scene_call(sc, false);
}

/* A write: CancelJob of job_id. */
static int call_write(struct scene *sc, uint64_t job_id)
{
    request_reset(sc, SPUR__API__REQUEST__OP_CANCEL_JOB);
    sc->job = (Spur__Api__JobIdRequest)SPUR__API__JOB_ID_REQUEST__INIT;
    sc->job.job_id = job_id;
    sc->req.cancel_job = &sc->job;
    return scene_call(sc, true);
}

static int call_ping(struct scene *sc)
{
    request_reset(sc, SPUR__API__REQUEST__OP_PING);
    sc->ping = (Spur__Api__Ping)SPUR__API__PING__INIT;
    sc->req.ping = &sc->ping;
    return scene_call(sc, false);
}

/* The last call failed (-1, no answer) within [lo, hi) ms, and its error names want. */
static void assert_failed(const struct scene *sc, const char *want, uint64_t lo, uint64_t hi)
{
    ck_assert_msg(sc->rc == -1, "rc %d, err: %s", sc->rc, sc->err);
    ck_assert_msg(strstr(sc->err, want) != NULL, "err: %s; wanted: %s", sc->err, want);
    ck_assert_msg(sc->took_ms >= lo && sc->took_ms < hi, "took %llu ms, not in [%llu, %llu)",
                  (unsigned long long)sc->took_ms, (unsigned long long)lo, (unsigned long long)hi);
}

/* The last call was answered with code by the replica whose node id is served_by. */
static void assert_answered(const struct scene *sc, Spur__Api__Code code, uint32_t served_by)
{
    ck_assert_msg(sc->rc == 0, "rc %d, err: %s", sc->rc, sc->err);
    ck_assert_int_eq(sc->r->code, code);
    ck_assert_uint_eq(sc->r->served_by, served_by);
}

/* f has read nseen requests over naccepts connections so far. */
static void assert_contacts(struct fake *f, unsigned nseen, unsigned naccepts)
{
    struct seen s[FAKE_MAX_SEEN];
    unsigned accepts = 0;
    ck_assert_uint_eq(fake_seen(f, s, &accepts), nseen);
    ck_assert_uint_eq(accepts, naccepts);
}

/* ---- the request and its answer ------------------------------------------------------- */

START_TEST(test_request_fields_and_own_answer)
{
    struct scene sc = {0};
    struct fake *f = scene_one(&sc, FAKE_ANSWER, 1, "alpha", 5000);
    ck_assert_ptr_null(spurclient_current_host(sc.c));
    ck_assert_uint_ne(spurclient_client_id(sc.c), 0);

    /* Two writes and a read on one connection. */
    for (unsigned i = 0; i < 3; i++) {
        if (i < 2)
            call_write(&sc, 10 + i);
        else
            call_read(&sc);
        assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
        ck_assert_uint_eq(sc.r->request_id, sc.req.request_id);
    }
    ck_assert_str_eq(spurclient_current_host(sc.c), f->addr);

    struct seen s[FAKE_MAX_SEEN];
    unsigned accepts = 0;
    ck_assert_uint_eq(fake_seen(f, s, &accepts), 3);
    ck_assert_uint_eq(accepts, 1); /* the connection is kept between calls */
    for (unsigned i = 0; i < 3; i++) {
        ck_assert_uint_eq(s[i].protocol_version, SPUR_PROTOCOL_VERSION);
        ck_assert_str_eq(s[i].cluster_name, "alpha");
        ck_assert_str_eq(s[i].user, "alice");
        ck_assert_uint_gt(s[i].timeout_ms, 0);
        ck_assert_uint_le(s[i].timeout_ms, 5000);
        if (i > 0)
            ck_assert_uint_gt(s[i].request_id, s[i - 1].request_id);
    }
    ck_assert_int_eq(s[0].op, SPUR__API__REQUEST__OP_CANCEL_JOB);
    /* Writes: this client's id and the next sequence number each; a read: neither. */
    ck_assert_uint_eq(s[0].client_id, spurclient_client_id(sc.c));
    ck_assert_uint_eq(s[1].client_id, spurclient_client_id(sc.c));
    ck_assert_uint_eq(s[0].seq, 1);
    ck_assert_uint_eq(s[1].seq, 2);
    ck_assert_int_eq(s[2].op, SPUR__API__REQUEST__OP_GET_JOBS);
    ck_assert_uint_eq(s[2].client_id, 0);
    ck_assert_uint_eq(s[2].seq, 0);
    scene_end(&sc);
}
END_TEST

START_TEST(test_answer_to_an_older_request_is_skipped)
{
    struct scene sc = {0};
    scene_one(&sc, FAKE_ANSWER_AFTER_OLD, 1, "alpha", 5000);
    call_read(&sc);
    /* Not the answer to the older id, which says served_by 99. */
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    ck_assert_uint_eq(sc.r->request_id, sc.req.request_id);
    scene_end(&sc);
}
END_TEST

START_TEST(test_answer_in_single_bytes)
{
    struct scene sc = {0};
    scene_one(&sc, FAKE_ANSWER_BYTEWISE, 3, "alpha", 5000);
    call_ping(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 3);
    ck_assert_uint_eq(sc.r->request_id, sc.req.request_id);
    ck_assert_int_eq(sc.r->result_case, SPUR__API__RESPONSE__RESULT_PING);
    ck_assert_uint_eq(sc.r->ping->node_id, 3);
    ck_assert_str_eq(sc.r->ping->role, "leader");
    scene_end(&sc);
}
END_TEST

/* A connection-level error (request id 0) is the answer to the request in flight. */
START_TEST(test_request_id_zero_error_is_the_answer)
{
    struct scene sc = {0};
    struct fake *f = scene_one(&sc, FAKE_ID0_ERROR, 1, "alpha", 5000);
    for (unsigned i = 0; i < 2; i++) {
        call_read(&sc);
        assert_answered(&sc, SPUR__API__CODE__CODE_TOO_LARGE, 1);
        ck_assert_uint_eq(sc.r->request_id, 0);
        ck_assert_str_eq(sc.r->error, "request over the frame limit");
    }
    /* The replica closed after such an answer: the second call dialled again. */
    assert_contacts(f, 2, 2);
    scene_end(&sc);
}
END_TEST

START_TEST(test_other_protocol_version_gives_up)
{
    struct scene sc = {0};
    struct fake *f, *g;
    scene_pair(&sc, FAKE_OTHER_VERSION, FAKE_ANSWER, &f, &g);
    scene_client(&sc, NULL, 2, "alpha", 5000);
    call_read(&sc);
    char want[160];
    snprintf(want, sizeof(want), "%s: speaks protocol version %u, this client %u", f->addr,
             SPUR_PROTOCOL_VERSION + 1, SPUR_PROTOCOL_VERSION);
    assert_failed(&sc, want, 0, 2000);
    /* A definite failure: the next replica is not asked. */
    assert_contacts(g, 0, 0);
    scene_end(&sc);
}
END_TEST

START_TEST(test_request_over_frame_limit_is_not_sent)
{
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_ANSWER, 1, "alpha");
    char user[300];
    memset(user, 'u', sizeof(user) - 1);
    user[sizeof(user) - 1] = '\0';
    const char *hosts[] = {f->addr};
    struct spurclient_options o = {.hosts = hosts,
                                   .nhosts = 1,
                                   .cluster_name = "alpha",
                                   .timeout_ms = 5000,
                                   .max_frame = 128,
                                   .user = user};
    scene_client_opts(&sc, &o);
    call_read(&sc);
    assert_failed(&sc, "over the 128-byte frame limit", 0, 2000);
    struct seen s[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, s, NULL), 0);
    scene_end(&sc);
}
END_TEST

/* ---- answers that do not come, or come wrong ----------------------------------------- */

/*
 * Make the process's address space too small for a 4 GiB buffer, so a client that tried
 * to allocate the announced frame would fail with "out of memory" instead of the refusal.
 * Under AddressSanitizer (which reserves terabytes for its shadow) the limit is not set;
 * the refusal and its timing are still checked.
 */
#if defined(__SANITIZE_ADDRESS__)
#define LIMIT_ADDRESS_SPACE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LIMIT_ADDRESS_SPACE 0
#endif
#endif
#ifndef LIMIT_ADDRESS_SPACE
#define LIMIT_ADDRESS_SPACE 1
#endif

static void limit_address_space(void)
{
    if (!LIMIT_ADDRESS_SPACE)
        return;
    FILE *fp = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(fp);
    unsigned long pages = 0;
    ck_assert_int_eq(fscanf(fp, "%lu", &pages), 1);
    fclose(fp);
    /* What the process maps now, plus 1 GiB for the threads' stacks and arenas. */
    rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (1ul << 30);
    struct rlimit rl = {.rlim_cur = lim, .rlim_max = lim};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
}

START_TEST(test_oversized_answer_header_refused)
{
    struct scene sc = {0};
    struct fake *f, *g;
    scene_pair(&sc, FAKE_OVERSIZED, FAKE_ANSWER, &f, &g);
    scene_client(&sc, NULL, 2, "alpha", 5000);
    limit_address_space();
    call_read(&sc);
    /* Refused from the header alone: the payload never comes, and the call does not wait. */
    char want[200];
    snprintf(want, sizeof(want),
             "%s: answer of %u bytes is over the %u-byte limit (controller.max_frame_bytes)",
             f->addr, 0xFFFFFFF0u, SPUR_DEFAULT_MAX_FRAME);
    assert_failed(&sc, want, 0, 2000);
    /* Every replica would answer the same: the second is not asked. */
    assert_contacts(g, 0, 0);
    scene_end(&sc);
}
END_TEST

START_TEST(test_close_mid_answer_moves_on_keeping_seq)
{
    struct scene sc = {0};
    struct fake *f, *g;
    scene_pair(&sc, FAKE_CUT_SHORT, FAKE_ANSWER, &f, &g);
    scene_client(&sc, NULL, 2, "alpha", 5000);
    call_write(&sc, 7);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 2);
    ck_assert_str_eq(spurclient_current_host(sc.c), g->addr);

    /* The retry is the same write: same request id, client id and sequence number. */
    struct seen a[FAKE_MAX_SEEN], b[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, a, NULL), 1);
    ck_assert_uint_eq(fake_seen(g, b, NULL), 1);
    ck_assert_uint_eq(a[0].client_id, spurclient_client_id(sc.c));
    ck_assert_uint_eq(a[0].seq, 1);
    ck_assert_uint_eq(b[0].client_id, a[0].client_id);
    ck_assert_uint_eq(b[0].seq, a[0].seq);
    ck_assert_uint_eq(b[0].request_id, a[0].request_id);

    /* The next call starts with the replica that answered last. */
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 2);
    ck_assert_uint_eq(fake_seen(f, a, NULL), 1);
    scene_end(&sc);
}
END_TEST

START_TEST(test_close_mid_answer_alone_fails_in_time)
{
    struct scene sc = {0};
    struct fake *f = scene_one(&sc, FAKE_CUT_SHORT, 1, "alpha", 400);
    call_read(&sc);
    assert_failed(&sc, "no replica answered within 400 ms", 350, 1500);
    assert_failed(&sc, "answer cut short", 350, 1500);
    /* It kept trying the one replica, with a back-off between rounds, not in a tight loop. */
    struct seen s[FAKE_MAX_SEEN];
    unsigned accepts = 0;
    unsigned n = fake_seen(f, s, &accepts);
    ck_assert_uint_ge(n, 2);
    ck_assert_uint_le(accepts, 20);
    /* Each retry tells the server the time that is left, not the whole time-out again. */
    ck_assert_uint_le(s[0].timeout_ms, 400);
    ck_assert_uint_lt(s[n - 1].timeout_ms, s[0].timeout_ms);
    scene_end(&sc);
}
END_TEST

START_TEST(test_silent_replica_times_out)
{
    struct scene sc = {0};
    struct fake *f = scene_one(&sc, FAKE_SILENT, 1, "alpha", 300);
    call_read(&sc);
    assert_failed(&sc, "no replica answered within 300 ms", 280, 1300);
    assert_failed(&sc, "no answer", 280, 1300);
    struct seen s[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, s, NULL), 1);
    /* The server is told how long the caller waits. */
    ck_assert_uint_le(s[0].timeout_ms, 300);
    ck_assert_uint_gt(s[0].timeout_ms, 200);

    /* A new deadline applies to the next call. */
    ck_assert_uint_eq(spurclient_set_timeout(sc.c, 150), 300);
    call_read(&sc);
    assert_failed(&sc, "no replica answered within 150 ms", 130, 1100);
    scene_end(&sc);
}
END_TEST

/* A host nobody listens on (bound, not listening: refused) and ones not HOST:PORT. */
START_TEST(test_unreachable_hosts_are_skipped)
{
    int dead = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(dead, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(bind(dead, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(dead, (struct sockaddr *)&sa, &sl), 0);
    char dead_addr[64];
    snprintf(dead_addr, sizeof(dead_addr), "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));

    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_ANSWER, 4, "alpha");
    unsigned port = 0;
    ck_assert_int_eq(sscanf(f->addr, "127.0.0.1:%u", &port), 1);
    char bracketed[64];
    snprintf(bracketed, sizeof(bracketed), "[127.0.0.1]:%u", port);

    /* Alone, each fails with its own reason. */
    const char *none[] = {dead_addr};
    scene_client(&sc, none, 1, "alpha", 200);
    call_read(&sc);
    assert_failed(&sc, "connect: Connection refused", 150, 1200);
    const char *bad[] = {"127.0.0.1"};
    scene_client(&sc, bad, 1, "alpha", 200);
    call_read(&sc);
    assert_failed(&sc, "127.0.0.1: not HOST:PORT", 150, 1200);

    /* In a list, the call goes on to the replica that answers (brackets and all). */
    const char *hosts[] = {dead_addr, "nocolon", "[127.0.0.1:1", bracketed};
    scene_client(&sc, hosts, 4, "alpha", 3000);
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 4);
    ck_assert_str_eq(spurclient_current_host(sc.c), bracketed);
    scene_end(&sc);
    close(dead);
}
END_TEST

/* ---- following the leader ------------------------------------------------------------- */

START_TEST(test_unavailable_hint_moves_to_leader)
{
    struct scene sc = {0};
    struct fake *f, *g;
    scene_pair(&sc, FAKE_UNAVAILABLE, FAKE_ANSWER, &f, &g);
    f->leader_hint = g->addr;
    g->leader_hint = g->addr;                  /* the leader names itself, with its id */
    scene_client(&sc, NULL, 1, "alpha", 2000); /* the leader is not even in the list */
    call_write(&sc, 5);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 2);
    ck_assert_uint_eq(sc.r->request_id, sc.req.request_id);
    ck_assert_str_eq(spurclient_current_host(sc.c), g->addr);

    struct seen a[FAKE_MAX_SEEN], b[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, a, NULL), 1);
    ck_assert_uint_eq(fake_seen(g, b, NULL), 1);
    ck_assert_uint_eq(b[0].client_id, a[0].client_id);
    ck_assert_uint_eq(b[0].client_id, spurclient_client_id(sc.c));
    ck_assert_uint_eq(b[0].seq, a[0].seq);
    ck_assert_uint_eq(b[0].request_id, a[0].request_id);

    /* The next write goes straight to the leader the answer named, with the next seq. */
    call_write(&sc, 6);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 2);
    ck_assert_uint_eq(fake_seen(f, a, NULL), 1);
    ck_assert_uint_eq(fake_seen(g, b, NULL), 2);
    ck_assert_uint_eq(b[1].seq, b[0].seq + 1);
    scene_end(&sc);
}
END_TEST

/* Two replicas naming each other: the hints are followed a bounded number of times. */
START_TEST(test_unavailable_everywhere_returns_last_answer)
{
    struct scene sc = {0};
    struct fake *f, *g;
    scene_pair(&sc, FAKE_UNAVAILABLE, FAKE_UNAVAILABLE, &f, &g);
    f->leader_hint = g->addr;
    g->leader_hint = f->addr;
    scene_client(&sc, NULL, 2, "alpha", 500);
    call_write(&sc, 1);
    /* At the deadline, the last "not the leader" answer is the call's answer. */
    ck_assert_int_eq(sc.rc, 0);
    ck_assert_int_eq(sc.r->code, SPUR__API__CODE__CODE_UNAVAILABLE);
    ck_assert_str_eq(sc.r->error, "not the leader");
    ck_assert_msg(sc.took_ms >= 450 && sc.took_ms < 1500, "took %llu ms",
                  (unsigned long long)sc.took_ms);
    /* Backing off between rounds: a few dozen requests in 500 ms, not thousands. */
    struct seen a[FAKE_MAX_SEEN], b[FAKE_MAX_SEEN];
    unsigned na = fake_seen(f, a, NULL), nb = fake_seen(g, b, NULL);
    ck_assert_uint_ge(na, 1);
    ck_assert_uint_ge(nb, 1);
    ck_assert_uint_lt(na + nb, 2 * FAKE_MAX_SEEN);
    ck_assert_uint_eq(a[0].seq, b[0].seq);
    ck_assert_uint_eq(a[0].client_id, b[0].client_id);
    scene_end(&sc);
}
END_TEST

/* ---- the cluster name ---------------------------------------------------------------- */

START_TEST(test_cluster_learned_from_unnamed_ping)
{
    struct scene sc = {0};
    struct fake *f = scene_one(&sc, FAKE_ANSWER, 1, NULL, 5000);
    ck_assert_ptr_null(spurclient_cluster_name(sc.c));
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    ck_assert_uint_eq(sc.r->request_id, sc.req.request_id);
    ck_assert_str_eq(spurclient_cluster_name(sc.c), "alpha");

    /* First a Ping naming no cluster, then the request naming the one learned. */
    struct seen s[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, s, NULL), 2);
    ck_assert_int_eq(s[0].op, SPUR__API__REQUEST__OP_PING);
    ck_assert_str_eq(s[0].cluster_name, "");
    ck_assert_uint_eq(s[0].protocol_version, SPUR_PROTOCOL_VERSION);
    ck_assert_str_eq(s[0].user, "alice");
    ck_assert_int_eq(s[1].op, SPUR__API__REQUEST__OP_GET_JOBS);
    ck_assert_str_eq(s[1].cluster_name, "alpha");

    /* A Ping call itself goes out unnamed, once, and its answer teaches the name. */
    scene_client(&sc, NULL, 1, "", 5000);
    call_ping(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    ck_assert_int_eq(sc.r->result_case, SPUR__API__RESPONSE__RESULT_PING);
    ck_assert_str_eq(spurclient_cluster_name(sc.c), "alpha");
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    ck_assert_uint_eq(fake_seen(f, s, NULL), 4);
    ck_assert_int_eq(s[2].op, SPUR__API__REQUEST__OP_PING);
    ck_assert_str_eq(s[2].cluster_name, "");
    ck_assert_int_eq(s[3].op, SPUR__API__REQUEST__OP_GET_JOBS);
    ck_assert_str_eq(s[3].cluster_name, "alpha");
    scene_end(&sc);
}
END_TEST

/* The name learned goes to every later connection; a configured one is never replaced. */
START_TEST(test_cluster_name_kept_across_replicas)
{
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_ANSWER, 1, "alpha");
    struct fake *g = scene_fake(&sc, FAKE_ANSWER, 2, "beta");
    scene_client(&sc, NULL, 2, NULL, 5000);
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    ck_assert_str_eq(spurclient_cluster_name(sc.c), "alpha");

    /* f goes away; the call moves to g and names "alpha" there without asking again. */
    fake_stop(f);
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 2);
    ck_assert_str_eq(spurclient_cluster_name(sc.c), "alpha"); /* not g's "beta" */
    struct seen s[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(g, s, NULL), 1);
    ck_assert_int_eq(s[0].op, SPUR__API__REQUEST__OP_GET_JOBS);
    ck_assert_str_eq(s[0].cluster_name, "alpha");

    /* Given a name, the client sends it from the first request and keeps it. */
    const char *hosts[] = {g->addr};
    scene_client(&sc, hosts, 1, "gamma", 5000);
    ck_assert_str_eq(spurclient_cluster_name(sc.c), "gamma");
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 2);
    ck_assert_str_eq(spurclient_cluster_name(sc.c), "gamma");
    ck_assert_uint_eq(fake_seen(g, s, NULL), 2);
    ck_assert_int_eq(s[1].op, SPUR__API__REQUEST__OP_GET_JOBS);
    ck_assert_str_eq(s[1].cluster_name, "gamma");
    scene_end(&sc);
}
END_TEST

START_TEST(test_refused_ping_is_the_answer)
{
    struct scene sc = {0};
    struct fake *f = scene_one(&sc, FAKE_REFUSE, 1, NULL, 5000);
    call_write(&sc, 3);
    assert_answered(&sc, SPUR__API__CODE__CODE_REFUSED, 1);
    ck_assert_str_eq(sc.r->error, "another cluster");
    ck_assert_ptr_null(spurclient_cluster_name(sc.c));
    /* The write itself was never sent: only the Ping was. */
    struct seen s[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, s, NULL), 1);
    ck_assert_int_eq(s[0].op, SPUR__API__REQUEST__OP_PING);
    scene_end(&sc);
}
END_TEST

START_TEST(test_ping_answer_without_name_moves_on)
{
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_PING_NO_NAME, 1, "alpha");
    scene_fake(&sc, FAKE_ANSWER, 2, "alpha");
    scene_client(&sc, NULL, 2, NULL, 5000);
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 2);
    ck_assert_str_eq(spurclient_cluster_name(sc.c), "alpha");
    struct seen s[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, s, NULL), 1); /* the Ping, nothing after it */
    ck_assert_int_eq(s[0].op, SPUR__API__REQUEST__OP_PING);

    /* With only that replica, the error says why. */
    scene_client(&sc, NULL, 1, NULL, 300);
    call_read(&sc);
    assert_failed(&sc, "the answer names no cluster", 250, 1300);
    scene_end(&sc);
}
END_TEST

/* ---- the host list -------------------------------------------------------------------- */

/* Split list and compare with want (n strings). */
static void assert_hosts(const char *list, const char *const *want, size_t n)
{
    size_t got = 99;
    char **v = spurclient_hosts_parse(list, &got);
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(got == n, "\"%s\": %zu hosts, want %zu", list ? list : "(null)", got, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(v[i], want[i]);
    ck_assert_ptr_null(v[n]);
    spurclient_hosts_free(v, got);
}

START_TEST(test_hosts_parse)
{
    assert_hosts("a:1,b:2", (const char *[]){"a:1", "b:2"}, 2);
    /* Commas, spaces and tabs separate; empty fields vanish; brackets are kept. */
    assert_hosts(" ,a:1,, b:2\t[::1]:3 ,", (const char *[]){"a:1", "b:2", "[::1]:3"}, 3);
    /* Nothing to split: an empty vector, not NULL. */
    assert_hosts("", NULL, 0);
    assert_hosts(", \t,", NULL, 0);
    assert_hosts(NULL, NULL, 0);

    /* More hosts than the first allocation holds. */
    char list[256] = "";
    char names[11][16];
    const char *want[11];
    for (unsigned i = 0; i < 11; i++) {
        snprintf(names[i], sizeof(names[i]), "h%u:%u", i, 100 + i);
        want[i] = names[i];
        if (i > 0)
            strcat(list, ",");
        strcat(list, names[i]);
    }
    assert_hosts(list, want, 11);
}
END_TEST

START_TEST(test_new_refuses_no_hosts)
{
    struct spurclient_options o = {.hosts = NULL, .nhosts = 0, .cluster_name = "alpha"};
    ck_assert_ptr_null(spurclient_new(&o));
    spurclient_free(NULL);
}
END_TEST

/*
 * A port over 65535 is refused, not dialled: glibc takes a numeric service modulo 65536, so
 * before dial() used netaddr's grammar "127.0.0.1:(P + 65536)" reached port P (a mistyped
 * SPUR_CONTROLLER could reach an unrelated service).
 */
START_TEST(test_port_out_of_range_refused)
{
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_ANSWER, 1, "alpha");
    unsigned port = 0;
    ck_assert_int_eq(sscanf(f->addr, "127.0.0.1:%u", &port), 1);
    char wrapped[64];
    snprintf(wrapped, sizeof(wrapped), "127.0.0.1:%u", port + 65536);
    const char *hosts[] = {wrapped};
    scene_client(&sc, hosts, 1, "alpha", 300);
    call_read(&sc);
    unsigned accepts = 0;
    struct seen s[FAKE_MAX_SEEN];
    fake_seen(f, s, &accepts);
    ck_assert_msg(sc.rc == -1 && accepts == 0, "%s reached %s (rc %d, %u connections)", wrapped,
                  f->addr, sc.rc, accepts);
    scene_end(&sc);
}
END_TEST

/* ---- authentication ------------------------------------------------------------------- */

/* The request number i the fake read carried no credential. */
static void assert_no_credential(const struct seen *s, unsigned i)
{
    ck_assert_msg(s[i].cred_kind == 0, "request %u carried credential kind %d \"%s\"", i,
                  s[i].cred_kind, s[i].cred);
}

START_TEST(test_unix_socket_host)
{
    const char *path = NULL;
    ck_assert(spurclient_host_is_unix("unix:/run/x.sock", &path));
    ck_assert_str_eq(path, "/run/x.sock");
    ck_assert(spurclient_host_is_unix("/run/x.sock", &path));
    ck_assert_str_eq(path, "/run/x.sock");
    ck_assert(!spurclient_host_is_unix("localhost:6817", &path));
    ck_assert(!spurclient_host_is_unix("[::1]:6817", &path));

    struct scene sc = {0};
    struct fake *f = scene_fake_unix(&sc, FAKE_ANSWER, 1, "alpha");
    /* A token and MUNGE are on offer, but a socket needs neither: nothing is sent. */
    const char *hosts[] = {f->addr};
    struct spurclient_options o = {.hosts = hosts,
                                   .nhosts = 1,
                                   .cluster_name = NULL,
                                   .timeout_ms = 3000,
                                   .token = "tok-socket",
                                   .munge = true,
                                   .munge_socket = "/nonexistent/munge.socket"};
    scene_client_opts(&sc, &o);
    call_write(&sc, 7);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    ck_assert_str_eq(spurclient_current_host(sc.c), f->addr);
    struct seen s[FAKE_MAX_SEEN];
    unsigned accepts = 0;
    ck_assert_uint_eq(fake_seen(f, s, &accepts), 3); /* the Ping that learns the name, two calls */
    ck_assert_uint_eq(accepts, 1);
    for (unsigned i = 0; i < 3; i++)
        assert_no_credential(s, i);
    ck_assert_int_eq(s[1].op, SPUR__API__REQUEST__OP_CANCEL_JOB);
    ck_assert_uint_eq(s[1].client_id, spurclient_client_id(sc.c));

    /* A bare absolute path is a socket too. */
    const char *bare[] = {f->path};
    struct spurclient_options o2 = {
        .hosts = bare, .nhosts = 1, .cluster_name = "alpha", .timeout_ms = 3000};
    scene_client_opts(&sc, &o2);
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    scene_end(&sc);

    /* No one there: the error names the socket. */
    const char *gone[] = {"unix:/nonexistent/spurctld.sock"};
    struct spurclient_options o3 = {
        .hosts = gone, .nhosts = 1, .cluster_name = "alpha", .timeout_ms = 200};
    scene_client_opts(&sc, &o3);
    call_read(&sc);
    assert_failed(&sc, "unix:/nonexistent/spurctld.sock: connect: No such file or directory", 150,
                  1200);
    scene_end(&sc);
}
END_TEST

START_TEST(test_token_in_first_request_of_each_connection)
{
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_ANSWER, 1, "alpha");
    const char *hosts[] = {f->addr};
    struct spurclient_options o = {.hosts = hosts,
                                   .nhosts = 1,
                                   .cluster_name = "alpha",
                                   .timeout_ms = 3000,
                                   .token = "tok-123",
                                   .munge = true};
    scene_client_opts(&sc, &o);
    call_ping(&sc); /* a Ping carries none: it is answered unauthenticated */
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    call_write(&sc, 3);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    struct seen s[FAKE_MAX_SEEN];
    unsigned accepts = 0;
    ck_assert_uint_eq(fake_seen(f, s, &accepts), 3);
    ck_assert_uint_eq(accepts, 1);
    assert_no_credential(s, 0);
    ck_assert_int_eq(s[1].cred_kind, SPUR__API__CREDENTIAL__KIND_TOKEN);
    ck_assert_str_eq(s[1].cred, "tok-123");
    assert_no_credential(s, 2); /* the connection has proved itself */

    /* The replica drops the connection: the next one proves itself again. */
    atomic_store(&f->drop, true);
    for (unsigned i = 0; i < 100 && atomic_load(&f->drop); i++) {
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    ck_assert_uint_eq(fake_seen(f, s, &accepts), 5);
    ck_assert_uint_eq(accepts, 2);
    ck_assert_int_eq(s[3].cred_kind, SPUR__API__CREDENTIAL__KIND_TOKEN);
    ck_assert_str_eq(s[3].cred, "tok-123");
    assert_no_credential(s, 4);
    scene_end(&sc);
}
END_TEST

/* An UNAUTHENTICATED answer ends the connection: the next call proves itself afresh. */
START_TEST(test_unauthenticated_answer_reconnects)
{
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_UNAUTHENTICATED, 1, "alpha");
    const char *hosts[] = {f->addr};
    struct spurclient_options o = {.hosts = hosts,
                                   .nhosts = 1,
                                   .cluster_name = "alpha",
                                   .timeout_ms = 3000,
                                   .token = "expired"};
    scene_client_opts(&sc, &o);
    for (unsigned i = 0; i < 2; i++) {
        call_read(&sc);
        assert_answered(&sc, SPUR__API__CODE__CODE_UNAUTHENTICATED, 1);
        ck_assert_str_eq(sc.r->error, "not authenticated");
    }
    struct seen s[FAKE_MAX_SEEN];
    unsigned accepts = 0;
    ck_assert_uint_eq(fake_seen(f, s, &accepts), 2);
    ck_assert_uint_eq(accepts, 2);
    ck_assert_str_eq(s[0].cred, "expired");
    ck_assert_str_eq(s[1].cred, "expired");
    scene_end(&sc);
}
END_TEST

/* No token and munged unreachable: the call fails here, at once, and sends nothing. */
START_TEST(test_no_credential_is_a_local_error)
{
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_ANSWER, 1, "alpha");
    const char *hosts[] = {f->addr};
    struct spurclient_options o = {.hosts = hosts,
                                   .nhosts = 1,
                                   .cluster_name = "alpha",
                                   .timeout_ms = 5000,
                                   .munge = true,
                                   .munge_socket = "/nonexistent/munge.socket.2",
                                   .local_socket = "/run/spurctld/spurctld.sock"};
    scene_client_opts(&sc, &o);
    call_write(&sc, 9);
    char want[256];
    snprintf(want, sizeof(want), "not authenticated: no credential for %s: munge: ", f->addr);
    assert_failed(&sc, want, 0, 2000);
    assert_failed(&sc,
                  "; set SPUR_JWT (scontrol token) or use the local socket "
                  "/run/spurctld/spurctld.sock",
                  0, 2000);
    struct seen s[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, s, NULL), 0);
    /* A Ping needs no credential, so it still works. */
    call_ping(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    ck_assert_uint_eq(fake_seen(f, s, NULL), 1);
    assert_no_credential(s, 0);
    scene_end(&sc);
}
END_TEST

START_TEST(test_socket_client_ignores_tcp_hint_without_credential)
{
    struct scene sc = {0};
    struct fake *u = scene_fake_unix(&sc, FAKE_UNAVAILABLE, 1, "alpha");
    struct fake *g = scene_fake(&sc, FAKE_ANSWER, 2, "alpha");
    u->leader_hint = g->addr;
    const char *hosts[] = {u->addr};
    /* MUNGE on offer but munged unreachable: no credential for TCP. */
    struct spurclient_options o = {.hosts = hosts,
                                   .nhosts = 1,
                                   .cluster_name = "alpha",
                                   .timeout_ms = 300,
                                   .munge = true,
                                   .munge_socket = "/nonexistent/munge.socket.2"};
    scene_client_opts(&sc, &o);
    call_write(&sc, 4);
    ck_assert_int_eq(sc.rc, 0);
    ck_assert_int_eq(sc.r->code, SPUR__API__CODE__CODE_UNAVAILABLE);
    struct seen s[FAKE_MAX_SEEN];
    unsigned accepts = 0;
    ck_assert_uint_ge(fake_seen(u, s, NULL), 2); /* it retried the socket */
    fake_seen(g, s, &accepts);
    ck_assert_uint_eq(accepts, 0); /* and never dialled the hint */

    /* With a token, the hint is worth following, and the token goes there. */
    struct spurclient_options o2 = o;
    o2.token = "tok-hint";
    o2.timeout_ms = 3000;
    scene_client_opts(&sc, &o2);
    call_write(&sc, 5);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 2);
    ck_assert_uint_eq(fake_seen(g, s, &accepts), 1);
    ck_assert_int_eq(s[0].cred_kind, SPUR__API__CREDENTIAL__KIND_TOKEN);
    ck_assert_str_eq(s[0].cred, "tok-hint");
    scene_end(&sc);
}
END_TEST

/* A keyring of one key made from fill (32 bytes of it). */
static void make_ring(struct keyring *kr, uint8_t fill)
{
    uint8_t bytes[32];
    memset(bytes, fill, sizeof(bytes));
    bytes[0] = 0x5a; /* not the placeholder, whatever fill is */
    struct clusterkey k;
    char err[256];
    memset(kr, 0, sizeof(*kr));
    ck_assert_msg(clusterkey_from_bytes(&k, bytes, sizeof(bytes), "test", err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_int_eq(keyring_add(kr, &k), 0);
}

START_TEST(test_keyring_handshake_and_sealed_frames)
{
    struct keyring kr;
    make_ring(&kr, 0x11);
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_ANSWER, 1, "alpha");
    f->kr = &kr;
    const char *hosts[] = {f->addr};
    struct spurclient_options o = {.hosts = hosts,
                                   .nhosts = 1,
                                   .cluster_name = "alpha",
                                   .timeout_ms = 3000,
                                   .token = "not-for-members",
                                   .keyring = &kr,
                                   .role = "agent"};
    scene_client_opts(&sc, &o);
    for (unsigned i = 0; i < 3; i++) {
        call_write(&sc, 20 + i);
        assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
        ck_assert_uint_eq(sc.r->request_id, sc.req.request_id);
    }
    /* The fake opened every request on the channel (an unsealed one it would drop). */
    struct seen s[FAKE_MAX_SEEN];
    unsigned accepts = 0;
    ck_assert_uint_eq(fake_seen(f, s, &accepts), 3);
    ck_assert_uint_eq(accepts, 1);
    for (unsigned i = 0; i < 3; i++) {
        assert_no_credential(s, i); /* a member proves the key, not a user */
        ck_assert_uint_eq(s[i].seq, i + 1);
    }
    pthread_mutex_lock(&f->mu);
    ck_assert_uint_eq(f->handshakes, 1);
    ck_assert_str_eq(f->peer_role, "agent");
    pthread_mutex_unlock(&f->mu);

    /* A new connection does the handshake again. */
    atomic_store(&f->drop, true);
    for (unsigned i = 0; i < 100 && atomic_load(&f->drop); i++) {
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
    call_read(&sc);
    assert_answered(&sc, SPUR__API__CODE__CODE_OK, 1);
    pthread_mutex_lock(&f->mu);
    ck_assert_uint_eq(f->handshakes, 2);
    pthread_mutex_unlock(&f->mu);

    /* Without a cluster name or a role there is nothing to prove: refused at once. */
    struct spurclient_options bad = o;
    bad.cluster_name = NULL;
    ck_assert_ptr_null(spurclient_new(&bad));
    bad = o;
    bad.role = NULL;
    ck_assert_ptr_null(spurclient_new(&bad));
    scene_end(&sc);
    keyring_wipe(&kr);
}
END_TEST

START_TEST(test_keyring_other_key_is_a_clear_error)
{
    struct keyring ours, theirs;
    make_ring(&ours, 0x22);
    make_ring(&theirs, 0x33);
    struct scene sc = {0};
    struct fake *f = scene_fake(&sc, FAKE_ANSWER, 1, "alpha");
    f->kr = &theirs;
    const char *hosts[] = {f->addr};
    struct spurclient_options o = {.hosts = hosts,
                                   .nhosts = 1,
                                   .cluster_name = "alpha",
                                   .timeout_ms = 5000,
                                   .keyring = &ours,
                                   .role = "agent"};
    scene_client_opts(&sc, &o);
    call_write(&sc, 1);
    char want[128];
    snprintf(want, sizeof(want), "%s: cluster key handshake failed: ", f->addr);
    assert_failed(&sc, want, 0, 2000); /* at once, not at the deadline */
    assert_failed(&sc, "no common cluster key", 0, 2000);
    assert_failed(&sc, ours.keys[0].id_hex, 0, 2000);
    struct seen s[FAKE_MAX_SEEN];
    ck_assert_uint_eq(fake_seen(f, s, NULL), 0); /* no request was ever read */
    pthread_mutex_lock(&f->mu);
    ck_assert_uint_eq(f->refusals, 1);
    pthread_mutex_unlock(&f->mu);
    scene_end(&sc);
    keyring_wipe(&ours);
    keyring_wipe(&theirs);
}
END_TEST

static Suite *spurclient_suite(void)
{
    Suite *s = suite_create("spurclient");
    check_case(s, "answer",
               (const TTest *[]){
                   test_request_fields_and_own_answer, test_answer_to_an_older_request_is_skipped,
                   test_answer_in_single_bytes, test_request_id_zero_error_is_the_answer,
                   test_other_protocol_version_gives_up, test_request_over_frame_limit_is_not_sent,
                   NULL});
    check_case(s, "failures",
               (const TTest *[]){
                   test_oversized_answer_header_refused, test_close_mid_answer_moves_on_keeping_seq,
                   test_close_mid_answer_alone_fails_in_time, test_silent_replica_times_out,
                   test_unreachable_hosts_are_skipped, NULL});
    check_case(s, "leader",
               (const TTest *[]){test_unavailable_hint_moves_to_leader,
                                 test_unavailable_everywhere_returns_last_answer, NULL});
    check_case(s, "cluster",
               (const TTest *[]){
                   test_cluster_learned_from_unnamed_ping, test_cluster_name_kept_across_replicas,
                   test_refused_ping_is_the_answer, test_ping_answer_without_name_moves_on, NULL});
    check_case(s, "hosts", (const TTest *[]){test_hosts_parse, test_new_refuses_no_hosts, NULL});
    check_case(s, "ports", (const TTest *[]){test_port_out_of_range_refused, NULL});
    check_case(s, "auth",
               (const TTest *[]){
                   test_unix_socket_host, test_token_in_first_request_of_each_connection,
                   test_unauthenticated_answer_reconnects, test_no_credential_is_a_local_error,
                   test_socket_client_ignores_tcp_hint_without_credential, NULL});
    check_case(s, "keyring",
               (const TTest *[]){test_keyring_handshake_and_sealed_frames,
                                 test_keyring_other_key_is_a_clear_error, NULL});
    return s;
}

int main(void)
{
    return check_run(spurclient_suite());
}
