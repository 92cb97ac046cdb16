/*
 * api.c - client API listener; contract in api.h.
 *
 * Connections are bufferevents. A connection is reference-counted: the server holds one
 * reference while it is open and every call in flight holds one, so a reply that comes
 * after the client left finds a closed connection and is dropped instead of touching
 * freed memory. Frames come and go through frame_ev.h: requests are taken out of the
 * input buffer as malloc'd copies (kept by the call, for forwarding), replies are packed
 * straight into the output buffer.
 *
 * Who asks: a connection carries its identity (struct auth_id, computed once) from the
 * moment it is authenticated: at accept on the local socket, at the first valid
 * credential on a user's TCP connection, at the end of the chan handshake on a member's.
 * A connection waiting for its MUNGE answer holds the one request that carried the
 * credential and is not read from until the answer comes back (a reference held by the
 * MUNGE job keeps the connection's memory alive meanwhile). Log lines about refused
 * credentials and members go through a small per-remote rate limiter (struct rl).
 */
#include "api.h"

#include "cfg.h"
#include "chan.h"
#include "chan_ev.h"
#include "frame_ev.h"
#include "jobscript.h"
#include "listener.h"
#include "log.h"
#include "netaddr.h"
#include "util.h"
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define API_OUT_HIGH (16u << 20) /* stop reading a client this far behind */
#define API_MAX_INFLIGHT 4096    /* calls in flight per connection */
#define RL_SLOTS         32      /* remotes whose refusals are rate-limited */
#define RL_INTERVAL_MS   10000   /* one refusal line per remote this often */
#define CHAN_ROLE_OURS   "controller"

/*
 * Ownership: the server owns its listener, its copy of the cluster name and the list of
 * open connections (one reference each). A connection owns its bufferevent (the socket
 * closes with it) while open, and is freed when its last reference goes: the server's, at
 * close, and one per call in flight. A call owns the decoded request and the frame's
 * malloc'd bytes (from frame_ev_take()) until api_reply().
 */
struct aconn {
    struct api_server *srv;
    struct bufferevent *bev; /* NULL once closed */
    struct aconn *prev, *next;
    unsigned refs;
    unsigned inflight;
    bool refused_logged;
    bool closing; /* close once the output is flushed */
    bool paused;
    char peer[64];
    bool local;     /* on the Unix socket */
    bool decided;   /* the first frame said user or member */
    bool authed;    /* id is valid */
    bool auth_wait; /* a MUNGE answer pending: not read from */
    struct auth_id id;
    struct chan *ch; /* a member's channel (malloc'd, chan_free()d at the last unref) */
    /* The request whose MUNGE credential is being decoded (auth_wait), and its frame. */
    Spur__Api__Request *held;
    uint8_t *held_bytes;
    size_t held_len;
};

struct api_call {
    struct aconn *conn;
    Spur__Api__Request *req;
    uint8_t *bytes;
    size_t len;
};

/* The last refusal line logged for a remote, and how many were left out since. */
struct rl {
    char peer[64];
    uint64_t last_ms;
    unsigned suppressed;
};

struct api_server {
    struct evconnlistener *listener;
    struct evconnlistener *local; /* the Unix socket, or NULL */
    char *socket_path;            /* set once bound: removed at free */
    dev_t sock_dev;
    ino_t sock_ino;
    struct auth_policy auth;  /* the options' copy; cluster_name is ours */
    struct auth_munge *munge; /* NULL: MUNGE off */
    struct rl rl[RL_SLOTS];
    struct api_options opt;
    char *cluster_name;
    api_dispatch_fn dispatch;
    void *arg;
    struct aconn *head, *tail;
    unsigned nconns;
    struct api_stats stats;
};

static void held_free(struct aconn *c)
{
    if (c->held)
        spur__api__request__free_unpacked(c->held, NULL);
    free(c->held_bytes);
    c->held = NULL;
    c->held_bytes = NULL;
}

static void conn_unref(struct aconn *c)
{
    if (--c->refs != 0)
        return;
    held_free(c);
    if (c->ch) {
        chan_free(c->ch);
        free(c->ch);
    }
    free(c);
}

/* Read from c when nothing holds it back: its output, its calls, a MUNGE answer. */
static bool conn_may_read(const struct aconn *c)
{
    return c->bev != NULL && !c->paused && !c->auth_wait && !c->closing;
}

/*
 * Whether to log a refusal from peer now (true at most once per RL_INTERVAL_MS per
 * remote); *suppressed is how many were left out before this one.
 */
static bool rl_allow(struct api_server *s, const char *peer, unsigned *suppressed)
{
    uint64_t now = mono_ms();
    struct rl *oldest = &s->rl[0];
    for (int i = 0; i < RL_SLOTS; i++) {
        struct rl *r = &s->rl[i];
        if (r->peer[0] && strcmp(r->peer, peer) == 0) {
            if (now - r->last_ms < RL_INTERVAL_MS) {
                r->suppressed++;
                return false;
            }
            *suppressed = r->suppressed;
            r->suppressed = 0;
            r->last_ms = now;
            return true;
        }
        if (r->last_ms < oldest->last_ms || (r->peer[0] == '\0' && oldest->peer[0]))
            oldest = r;
    }
    snprintf(oldest->peer, sizeof(oldest->peer), "%s", peer);
    oldest->last_ms = now;
    oldest->suppressed = 0;
    *suppressed = 0;
    return true;
}

static void conn_close(struct aconn *c)
{
    struct api_server *s = c->srv;
    if (c->bev == NULL)
        return;
    bufferevent_free(c->bev);
    c->bev = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        s->tail = c->prev;
    c->prev = c->next = NULL;
    s->nconns--;
    conn_unref(c);
}

static void send_frame(struct aconn *c, const Spur__Api__Response *resp)
{
    if (c->bev == NULL)
        return;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    int rc = c->ch && chan_established(c->ch) ? chan_ev_add_message(c->ch, out, &resp->base)
                                              : frame_ev_add_message(out, &resp->base);
    if (rc != 0) {
        log_event(LOG_ERROR, "api", "out of memory packing a reply; closing the connection",
                  "peer=%s", c->peer);
        conn_close(c);
        return;
    }
    if (evbuffer_get_length(out) > API_OUT_HIGH && !c->paused) {
        c->paused = true;
        bufferevent_disable(c->bev, EV_READ);
    }
}

/* A reply that needs no call: protocol errors before dispatch. */
static void reply_direct(struct aconn *c, uint64_t request_id, Spur__Api__Code code,
                         const char *msg)
{
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    r.protocol_version = SPUR_PROTOCOL_VERSION;
    r.request_id = request_id;
    r.code = code;
    r.error = (char *)msg;
    r.served_by = c->srv->opt.node_id;
    r.cluster_name = c->srv->cluster_name;
    send_frame(c, &r);
}

static void call_free(struct api_call *call)
{
    if (call->req)
        spur__api__request__free_unpacked(call->req, NULL);
    free(call->bytes);
    struct aconn *c = call->conn;
    c->inflight--;
    if (c->bev && c->paused && c->inflight < API_MAX_INFLIGHT / 2 &&
        evbuffer_get_length(bufferevent_get_output(c->bev)) < API_OUT_HIGH / 2) {
        c->paused = false;
        if (conn_may_read(c))
            bufferevent_enable(c->bev, EV_READ);
    }
    conn_unref(c);
    free(call);
}

void api_reply(struct api_call *call, const Spur__Api__Response *resp)
{
    struct aconn *c = call->conn;
    /* The envelope goes on a shallow copy: resp may be freed by protobuf-c later, and
     * must not end up owning our strings. */
    Spur__Api__Response r = *resp;
    r.protocol_version = SPUR_PROTOCOL_VERSION;
    r.request_id = call->req->request_id;
    r.served_by = c->srv->opt.node_id;
    r.cluster_name = c->srv->cluster_name;
    send_frame(c, &r);
    call_free(call);
}

void api_reply_error(struct api_call *call, Spur__Api__Code code, uint32_t leader_id,
                     const char *leader_hint, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    r.code = code;
    r.error = msg;
    r.leader_id = leader_id;
    r.leader_hint = (char *)(leader_hint ? leader_hint : "");
    api_reply(call, &r);
}

const uint8_t *api_call_bytes(const struct api_call *call, size_t *len)
{
    *len = call->len;
    return call->bytes;
}

bool api_call_abandoned(const struct api_call *call)
{
    return call->conn->bev == NULL;
}

void api_get_stats(const struct api_server *s, struct api_stats *out)
{
    *out = s->stats;
    out->connections = s->nconns;
}

/*
 * The envelope: another protocol version, or another cluster, is refused. An empty
 * cluster name is a client that does not know it yet (the CLI with SPUR_CONTROLLER and no
 * configuration): a Ping may ask so, and its reply carries the name like every reply;
 * anything else must name the cluster. Returns true with msg set when refused.
 */
static bool refuse_envelope(const struct api_server *s, const Spur__Api__Request *req, char *msg,
                            size_t msglen)
{
    const char *name = req->cluster_name ? req->cluster_name : "";
    if (req->protocol_version != SPUR_PROTOCOL_VERSION) {
        snprintf(msg, msglen, "refused: request speaks protocol version %u, this replica %u",
                 req->protocol_version, SPUR_PROTOCOL_VERSION);
        return true;
    }
    if (name[0] == '\0') {
        if (req->op_case == SPUR__API__REQUEST__OP_PING)
            return false;
        snprintf(msg, msglen,
                 "refused: request names no cluster; this is \"%s\" (set SPUR_CLUSTER, or "
                 "cluster_name in the configuration)",
                 s->cluster_name);
        return true;
    }
    if (strcmp(name, s->cluster_name) != 0) {
        snprintf(msg, msglen, "refused: request for cluster \"%.100s\", this is \"%s\"", name,
                 s->cluster_name);
        return true;
    }
    return false;
}

int api_check_request(const Spur__Api__Request *req, char *msg, size_t msglen)
{
    if (req->op_case == SPUR__API__REQUEST__OP_SUBMIT_JOB && req->submit_job != NULL &&
        req->submit_job->spec != NULL) {
        const ProtobufCBinaryData *script = &req->submit_job->spec->script;
        return jobscript_check((const char *)script->data, script->data ? script->len : 0, msg,
                               msglen);
    }
    return 0;
}

/* ---- who asks --------------------------------------------------------------------- */

static void on_read(struct bufferevent *bev, void *arg);

/*
 * A refused credential: counted, and logged with why (never told the client), at most
 * once per RL_INTERVAL_MS per remote; suppressed= counts the lines left out before it.
 */
static void auth_failed(struct aconn *c, enum auth_method m, enum auth_fail f, const char *why)
{
    struct api_server *s = c->srv;
    s->stats.auth_failures[f]++;
    unsigned sup = 0;
    if (!rl_allow(s, c->peer, &sup))
        return;
    log_event(LOG_INFO, "api", "authentication failed",
              "peer=%s method=%s reason=%s why=%s suppressed=%u", log_q(c->peer),
              auth_method_name(m), auth_fail_name(f), log_q(why), sup);
}

/* A cluster member whose handshake or frame failed: counted and logged (rate-limited). */
static void member_refused(struct aconn *c, const char *why)
{
    struct api_server *s = c->srv;
    s->stats.auth_failures[AUTH_FAIL_MEMBER]++;
    unsigned sup = 0;
    if (!rl_allow(s, c->peer, &sup))
        return;
    log_event(LOG_WARN, "api", "cluster member refused; closing the connection",
              "peer=%s why=%s suppressed=%u", log_q(c->peer), log_q(why), sup);
}

static void conn_authenticated(struct aconn *c, const struct auth_id *id, enum auth_method m)
{
    c->authed = true;
    c->id = *id;
    c->srv->stats.auth_ok[m]++;
    log_event(LOG_DEBUG, "api", "authenticated", "peer=%s method=%s user=%s uid=%u operator=%d",
              log_q(c->peer), id->method, log_q(id->user), id->uid, id->is_operator ? 1 : 0);
}

/* The one answer to every credential that did not prove anything. */
static int refuse_unauthenticated(struct aconn *c, Spur__Api__Request *req, uint8_t *bytes)
{
    reply_direct(c, req->request_id, SPUR__API__CODE__CODE_UNAUTHENTICATED, "not authenticated");
    spur__api__request__free_unpacked(req, NULL);
    free(bytes);
    return 0;
}

/* scontrol token: answered here from the caller the request carries; never dispatched. */
static void answer_token(struct aconn *c, const Spur__Api__Request *req)
{
    struct api_server *s = c->srv;
    char *token = NULL;
    char user[AUTH_USER_MAX] = "";
    uint64_t expires = 0;
    char msg[300] = "";
    Spur__Api__Code code =
        auth_token_answer(&s->auth, req->caller, req->token, (uint64_t)time(NULL), &token, user,
                          sizeof(user), &expires, msg, sizeof(msg));
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    Spur__Api__TokenResponse tr = SPUR__API__TOKEN_RESPONSE__INIT;
    r.protocol_version = SPUR_PROTOCOL_VERSION;
    r.request_id = req->request_id;
    r.served_by = s->opt.node_id;
    r.cluster_name = s->cluster_name;
    r.code = code;
    if (code == SPUR__API__CODE__CODE_OK) {
        tr.token = token;
        tr.user = user;
        tr.expires_s = expires;
        r.result_case = SPUR__API__RESPONSE__RESULT_TOKEN;
        r.token = &tr;
        log_event(LOG_INFO, "api", "token issued", "user=%s by=%s method=%s expires=%llu",
                  log_q(user), log_q(req->caller->user), log_q(req->caller->method),
                  (unsigned long long)expires);
    } else {
        r.error = msg;
    }
    send_frame(c, &r);
    if (token) {
        memset(token, 0, strlen(token)); /* a bearer secret: not left in freed memory */
        free(token);
    }
}

/*
 * The common tail of every request that may reach the dispatcher: the request's own
 * rules, scontrol token, then the call. changed: the request differs from its frame
 * (caller, user or credential), so the bytes kept for forwarding are packed again.
 */
static int process_request(struct aconn *c, Spur__Api__Request *req, uint8_t *bytes, size_t len,
                           bool changed)
{
    struct api_server *s = c->srv;
    char msg[400];
    if (api_check_request(req, msg, sizeof(msg)) != 0) {
        reply_direct(c, req->request_id, SPUR__API__CODE__CODE_INVALID, msg);
        goto done;
    }
    if (req->op_case == SPUR__API__REQUEST__OP_TOKEN) {
        s->stats.requests++;
        answer_token(c, req);
        goto done;
    }
    if (changed) {
        size_t n = spur__api__request__get_packed_size(req);
        uint8_t *nb = malloc(n ? n : 1);
        if (nb == NULL) {
            reply_direct(c, req->request_id, SPUR__API__CODE__CODE_INTERNAL, "out of memory");
            goto done;
        }
        spur__api__request__pack(req, nb);
        free(bytes);
        bytes = nb;
        len = n;
    }
    struct api_call *call = calloc(1, sizeof(*call));
    if (call == NULL) {
        reply_direct(c, req->request_id, SPUR__API__CODE__CODE_INTERNAL, "out of memory");
        goto done;
    }
    call->conn = c;
    call->req = req;
    call->bytes = bytes;
    call->len = len;
    c->refs++;
    c->inflight++;
    s->stats.requests++;
    if (c->inflight >= API_MAX_INFLIGHT && !c->paused) {
        c->paused = true;
        bufferevent_disable(c->bev, EV_READ);
    }
    s->dispatch(s->arg, call, req);
    return 0;
done:
    spur__api__request__free_unpacked(req, NULL);
    free(bytes);
    return 0;
}

/* An authenticated request: the connection's identity on it, then the common tail. */
static int process_as(struct aconn *c, Spur__Api__Request *req, uint8_t *bytes, size_t len,
                      const struct auth_id *id)
{
    auth_drop_credential(req);
    if (auth_set_caller(req, id) != 0) {
        reply_direct(c, req->request_id, SPUR__API__CODE__CODE_INTERNAL, "out of memory");
        spur__api__request__free_unpacked(req, NULL);
        free(bytes);
        return 0;
    }
    return process_request(c, req, bytes, len, true);
}

/* The MUNGE thread's answer for the request c holds. */
static void on_munge(void *arg, const struct auth_munge_result *res)
{
    struct aconn *c = arg;
    Spur__Api__Request *req = c->held;
    uint8_t *bytes = c->held_bytes;
    size_t len = c->held_len;
    c->held = NULL;
    c->held_bytes = NULL;
    c->auth_wait = false;
    if (res == NULL || c->bev == NULL || req == NULL) {
        if (req)
            spur__api__request__free_unpacked(req, NULL);
        free(bytes);
        conn_unref(c);
        return;
    }
    if (!res->ok) {
        auth_failed(c, AUTH_MUNGE, res->fail, res->why);
        refuse_unauthenticated(c, req, bytes);
    } else {
        conn_authenticated(c, &res->id, AUTH_MUNGE);
        process_as(c, req, bytes, len, &c->id);
    }
    /* The frames that came meanwhile wait in the input buffer. */
    if (conn_may_read(c)) {
        bufferevent_enable(c->bev, EV_READ);
        on_read(c->bev, c);
    }
    conn_unref(c);
}

static int munge_start(struct aconn *c, Spur__Api__Request *req, uint8_t *bytes, size_t len)
{
    struct api_server *s = c->srv;
    const char *cred = req->credential->munge ? req->credential->munge : "";
    if (s->munge == NULL) {
        auth_failed(c, AUTH_MUNGE, AUTH_FAIL_DISABLED,
                    "MUNGE credentials are off on this replica (auth.munge: off)");
        return refuse_unauthenticated(c, req, bytes);
    }
    if (auth_munge_submit(s->munge, cred, on_munge, c) != 0) {
        auth_failed(c, AUTH_MUNGE, AUTH_FAIL_BUSY, "the MUNGE queue is full");
        reply_direct(c, req->request_id, SPUR__API__CODE__CODE_UNAVAILABLE, "authentication busy");
        spur__api__request__free_unpacked(req, NULL);
        free(bytes);
        return 0;
    }
    c->refs++; /* the job's */
    c->held = req;
    c->held_bytes = bytes;
    c->held_len = len;
    c->auth_wait = true;
    bufferevent_disable(c->bev, EV_READ);
    return 0;
}

/* A request on a user's connection (local socket or TCP). */
static int user_request(struct aconn *c, Spur__Api__Request *req, uint8_t *bytes, size_t len)
{
    struct api_server *s = c->srv;
    uint64_t now_s = (uint64_t)time(NULL);
    if (c->authed && c->id.until_s != 0 && now_s >= c->id.until_s) {
        /* A connection proved by a token is good for the token's life, no longer: expiry
         * (and retiring its key) is how a token is revoked. A fresh credential may follow. */
        log_event(LOG_INFO, "api", "connection's token expired", "peer=%s user=%s", log_q(c->peer),
                  log_q(c->id.user));
        c->authed = false;
    }
    if (c->authed)
        return process_as(c, req, bytes, len, &c->id);
    const Spur__Api__Credential *cr = req->credential;
    if (cr && cr->kind_case == SPUR__API__CREDENTIAL__KIND_TOKEN) {
        struct auth_id id;
        enum auth_fail f = AUTH_FAIL_INVALID;
        char why[256] = "";
        if (auth_check_token(&s->auth, cr->token ? cr->token : "", now_s, &id, &f, why,
                             sizeof(why)) != 0) {
            auth_failed(c, AUTH_TOKEN, f, why);
            return refuse_unauthenticated(c, req, bytes);
        }
        conn_authenticated(c, &id, AUTH_TOKEN);
        return process_as(c, req, bytes, len, &c->id);
    }
    if (cr && cr->kind_case == SPUR__API__CREDENTIAL__KIND_MUNGE)
        return munge_start(c, req, bytes, len);
    if (req->op_case == SPUR__API__REQUEST__OP_PING) {
        /* Answered with no identity: whatever the client claimed goes. */
        bool changed = req->caller != NULL || req->credential != NULL ||
                       (req->user != NULL && req->user[0] != '\0');
        auth_drop_credential(req);
        auth_clear_caller(req);
        return process_request(c, req, bytes, len, changed);
    }
    s->stats.auth_failures[AUTH_FAIL_MISSING]++;
    return refuse_unauthenticated(c, req, bytes);
}

/* A request on a member's channel: a forwarded caller is kept, else the member's own. */
static int member_request(struct aconn *c, Spur__Api__Request *req, uint8_t *bytes, size_t len)
{
    if (req->caller == NULL)
        return process_as(c, req, bytes, len, &c->id);
    auth_drop_credential(req);
    if (auth_keep_caller(req) != 0) {
        reply_direct(c, req->request_id, SPUR__API__CODE__CODE_INTERNAL, "out of memory");
        spur__api__request__free_unpacked(req, NULL);
        free(bytes);
        return 0;
    }
    return process_request(c, req, bytes, len, true);
}

/* The first frame of a member: its hello. Our hello (or the refusal) goes out unsealed. */
static int member_hello(struct aconn *c, const uint8_t *bytes, size_t len)
{
    struct api_server *s = c->srv;
    if (s->auth.kr == NULL || s->auth.kr->n == 0) {
        member_refused(c, "this replica holds no cluster key");
        return -1;
    }
    c->ch = calloc(1, sizeof(*c->ch));
    if (c->ch == NULL)
        return -1;
    if (chan_init(c->ch, CHAN_RESPONDER, s->auth.kr, s->cluster_name, CHAN_ROLE_OURS) != 0) {
        member_refused(c, c->ch->why);
        free(c->ch);
        c->ch = NULL;
        return -1;
    }
    uint8_t *out = NULL;
    size_t outlen = 0;
    enum chan_rc rc = chan_take_hello(c->ch, bytes, len, &out, &outlen);
    if (out) {
        if (c->bev && chan_ev_add_raw(bufferevent_get_output(c->bev), out, outlen) != 0)
            rc = rc == CHAN_OK ? CHAN_NOMEM : rc;
        free(out);
    }
    if (rc != CHAN_OK) {
        member_refused(c, chan_why(c->ch));
        return -1;
    }
    return 0;
}

/* The member's proof: the channel is established, and the connection a member's. */
static int member_proof(struct aconn *c, const uint8_t *bytes, size_t len)
{
    enum chan_rc rc = chan_take_proof(c->ch, bytes, len);
    if (rc != CHAN_OK) {
        member_refused(c, chan_why(c->ch));
        return -1;
    }
    struct auth_id id;
    auth_id_member(c->ch->peer_role, &id);
    conn_authenticated(c, &id, AUTH_MEMBER);
    log_event(LOG_DEBUG, "api", "cluster member connected", "peer=%s role=%s key_id=%s",
              log_q(c->peer), log_q(c->ch->peer_role), chan_key_id(c->ch));
    return 0;
}

/* Handle one complete frame (its inner payload on a member's channel). -1: close. */
static int handle_frame(struct aconn *c, uint8_t *bytes, size_t len)
{
    struct api_server *s = c->srv;
    if (!c->decided) {
        c->decided = true;
        if (chan_is_handshake(bytes, len)) {
            int rc = member_hello(c, bytes, len);
            free(bytes);
            return rc;
        }
    }
    if (c->ch && !chan_established(c->ch)) {
        int rc = member_proof(c, bytes, len);
        free(bytes);
        return rc;
    }
    Spur__Api__Request *req = spur__api__request__unpack(NULL, len, bytes);
    if (req == NULL) {
        s->stats.bad_frames++;
        log_event(LOG_WARN, "api", "undecodable request; closing the connection", "peer=%s len=%zu",
                  c->peer, len);
        reply_direct(c, 0, SPUR__API__CODE__CODE_INVALID,
                     "undecodable request: not a spur.api.Request");
        free(bytes);
        return -1;
    }
    char msg[400];
    if (refuse_envelope(s, req, msg, sizeof(msg))) {
        s->stats.refused++;
        if (!c->refused_logged) {
            c->refused_logged = true;
            log_event(LOG_WARN, "api", "request refused", "peer=%s why=%s", c->peer, log_q(msg));
        }
        reply_direct(c, req->request_id, SPUR__API__CODE__CODE_REFUSED, msg);
        spur__api__request__free_unpacked(req, NULL);
        free(bytes);
        return 0;
    }
    return c->ch ? member_request(c, req, bytes, len) : user_request(c, req, bytes, len);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct aconn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    c->refs++; /* the dispatcher may reply and the client may vanish under us */
    while (conn_may_read(c)) {
        uint8_t *body = NULL;
        size_t len = 0;
        enum chan_rc crc = CHAN_OK;
        int st = c->ch && chan_established(c->ch)
                     ? chan_ev_take(c->ch, in, c->srv->opt.max_frame, &body, &len, &crc)
                     : (int)frame_ev_take(in, c->srv->opt.max_frame, &body, &len);
        if (st == FRAME_NEED_MORE)
            break;
        if (st == CHAN_EV_REFUSED) {
            member_refused(c, chan_why(c->ch));
            conn_close(c);
            break;
        }
        if (st == FRAME_TOO_BIG) {
            char msg[160];
            c->srv->stats.bad_frames++;
            snprintf(msg, sizeof(msg), "frame of %u bytes is over the %u-byte limit",
                     (uint32_t)len, c->srv->opt.max_frame);
            log_event(LOG_WARN, "api", "oversized frame; closing the connection",
                      "peer=%s len=%u max=%u", c->peer, (uint32_t)len, c->srv->opt.max_frame);
            reply_direct(c, 0, SPUR__API__CODE__CODE_TOO_LARGE, msg);
            c->closing = true;
            if (c->bev)
                bufferevent_disable(c->bev, EV_READ);
            break;
        }
        if (st != FRAME_READY) {
            conn_close(c);
            break;
        }
        if (handle_frame(c, body, len) < 0) {
            c->closing = true;
            if (c->bev)
                bufferevent_disable(c->bev, EV_READ);
            break;
        }
    }
    if (c->bev && c->closing && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        conn_close(c);
    conn_unref(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct aconn *c = arg;
    size_t pending = evbuffer_get_length(bufferevent_get_output(bev));
    if (c->closing && pending == 0) {
        conn_close(c);
        return;
    }
    if (c->paused && pending < API_OUT_HIGH / 2 && c->inflight < API_MAX_INFLIGHT / 2) {
        c->paused = false;
        if (conn_may_read(c)) {
            bufferevent_enable(bev, EV_READ);
            on_read(bev, c); /* frames may be waiting in the input buffer */
        }
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    conn_close(arg);
}

/* A new connection on fd from listener l, in the list; NULL (fd closed) when out of memory. */
static struct aconn *conn_add(struct api_server *s, struct evconnlistener *l, evutil_socket_t fd,
                              bool nodelay)
{
    if (s->nconns >= s->opt.max_conns && s->head)
        conn_close(s->head);
    struct aconn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        return NULL;
    }
    c->srv = s;
    c->refs = 1;
    c->bev = listener_wrap(l, fd, nodelay);
    if (c->bev == NULL) {
        free(c);
        return NULL;
    }
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    c->prev = s->tail;
    if (s->tail)
        s->tail->next = c;
    else
        s->head = c;
    s->tail = c;
    s->nconns++;
    return c;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int sl,
                      void *arg)
{
    struct api_server *s = arg;
    (void)sl;
    char peer[64] = "";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, peer, sizeof(peer));
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, peer, sizeof(peer));
    struct aconn *c = conn_add(s, l, fd, true);
    if (c)
        memcpy(c->peer, peer, sizeof(peer));
}

/* The local socket: the kernel says who connected; authenticated at once. */
static void on_accept_local(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                            int sl, void *arg)
{
    struct api_server *s = arg;
    (void)sa;
    (void)sl;
    struct ucred uc;
    socklen_t ul = sizeof(uc);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) != 0) {
        log_event(LOG_WARN, "api", "local connection without peer credentials; closed",
                  "socket=%s why=%s", log_q(s->socket_path), log_q(strerror(errno)));
        evutil_closesocket(fd);
        return;
    }
    struct auth_id id;
    char why[256];
    if (auth_id_from_uid(&s->auth, uc.uid, uc.gid, AUTH_SOCKET, &id, why, sizeof(why)) != 0) {
        s->stats.auth_failures[AUTH_FAIL_UNKNOWN_USER]++;
        log_event(LOG_INFO, "api", "authentication failed",
                  "peer=local:pid=%d method=socket why=%s", (int)uc.pid, log_q(why));
        evutil_closesocket(fd);
        return;
    }
    struct aconn *c = conn_add(s, l, fd, false);
    if (c == NULL)
        return;
    snprintf(c->peer, sizeof(c->peer), "local:pid=%d", (int)uc.pid);
    c->local = true;
    c->decided = true;
    conn_authenticated(c, &id, AUTH_SOCKET);
}

/*
 * Make the socket's directory, take away a socket file a dead replica left, and refuse
 * a live one. Returns 0 with ss/sl filled, or an exit code with why.
 */
static int socket_prepare(const char *path, struct sockaddr_storage *ss, socklen_t *sl, char *why,
                          size_t whylen)
{
    struct sockaddr_un *un = (struct sockaddr_un *)ss;
    memset(ss, 0, sizeof(*ss));
    un->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(un->sun_path)) {
        snprintf(why, whylen, "controller.socket %s: path too long for a Unix socket", path);
        return EXIT_CONFIG;
    }
    memcpy(un->sun_path, path, strlen(path) + 1);
    *sl = (socklen_t)sizeof(*un);
    char dir[sizeof(un->sun_path)];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (mkdir_parents(dir, 0755) != 0) {
            snprintf(why, whylen, "controller.socket %s: cannot make %s: %s", path, dir,
                     strerror(errno));
            return EXIT_CANTCREAT;
        }
    }
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, whylen, "controller.socket %s: %s", path, strerror(errno));
        return EXIT_CANTCREAT;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(why, whylen,
                 "controller.socket %s: exists and is not a socket; remove it or set another "
                 "path",
                 path);
        return EXIT_CANTCREAT;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "controller.socket %s: socket: %s", path, strerror(errno));
        return EXIT_OSERR;
    }
    int rc = connect(fd, (struct sockaddr *)un, *sl);
    int err = errno;
    close(fd);
    if (rc == 0) {
        snprintf(why, whylen, "another replica serves socket %s", path);
        return EXIT_CANTCREAT;
    }
    if (err != ECONNREFUSED && err != ENOENT) {
        snprintf(why, whylen, "controller.socket %s: connect: %s", path, strerror(err));
        return EXIT_CANTCREAT;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(why, whylen, "controller.socket %s: cannot remove the stale socket: %s", path,
                 strerror(errno));
        return EXIT_CANTCREAT;
    }
    log_event(LOG_INFO, "api", "removed a stale socket", "socket=%s", log_q(path));
    return 0;
}

static int socket_open(struct api_server *s, struct event_base *base, const char *path, char *why,
                       size_t whylen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int code = socket_prepare(path, &ss, &sl, why, whylen);
    if (code != 0)
        return code;
    char what[160];
    snprintf(what, sizeof(what), "controller.socket %s", path);
    s->local = listener_bind(base, &ss, sl, 1024, on_accept_local, s, what, why, whylen);
    if (s->local == NULL)
        return EXIT_OSERR;
    s->socket_path = strdup(path);
    struct stat st;
    if (s->socket_path == NULL || lstat(path, &st) != 0 || chmod(path, 0666) != 0) {
        snprintf(why, whylen, "controller.socket %s: %s", path,
                 s->socket_path ? strerror(errno) : "out of memory");
        return EXIT_OSERR;
    }
    s->sock_dev = st.st_dev;
    s->sock_ino = st.st_ino;
    return 0;
}

int api_open(struct event_base *base, const struct api_options *o, api_dispatch_fn dispatch,
             void *arg, struct api_server **out, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    *out = NULL;
    if (netaddr_listen(o->listen, &ss, &sl, why, whylen) != 0)
        return EXIT_CONFIG;
    struct api_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(why, whylen, "%s: out of memory", o->listen);
        return EXIT_OSERR;
    }
    s->opt = *o;
    if (s->opt.max_conns == 0)
        s->opt.max_conns = 4096;
    s->cluster_name = strdup(o->cluster_name);
    s->opt.cluster_name = s->cluster_name;
    s->opt.listen = NULL;
    s->opt.socket_path = NULL;
    s->auth = o->auth;
    s->auth.cluster_name = s->cluster_name;
    s->dispatch = dispatch;
    s->arg = arg;
    if (s->cluster_name == NULL) {
        snprintf(why, whylen, "%s: out of memory", o->listen);
        api_free(s);
        return EXIT_OSERR;
    }
    s->listener = listener_bind(base, &ss, sl, 1024, on_accept, s, o->listen, why, whylen);
    if (s->listener == NULL) {
        api_free(s);
        return EXIT_OSERR;
    }
    if (o->socket_path && o->socket_path[0]) {
        int code = socket_open(s, base, o->socket_path, why, whylen);
        if (code != 0) {
            api_free(s);
            return code;
        }
    }
    if (s->auth.munge && strcmp(s->auth.munge, "off") != 0) {
        s->munge = auth_munge_new(base, &s->auth, AUTH_MUNGE_QUEUE, why, whylen);
        if (s->munge == NULL) {
            api_free(s);
            return EXIT_OSERR;
        }
    }
    *out = s;
    return 0;
}

struct api_server *api_new(struct event_base *base, const struct api_options *o,
                           api_dispatch_fn dispatch, void *arg, char *why, size_t whylen)
{
    struct api_server *s = NULL;
    return api_open(base, o, dispatch, arg, &s, why, whylen) == 0 ? s : NULL;
}

void api_free(struct api_server *s)
{
    if (s == NULL)
        return;
    while (s->head)
        conn_close(s->head);
    /* Joins the thread; the answers it still holds release their connections. */
    auth_munge_free(s->munge);
    if (s->listener) /* NULL: api_new() failed before binding */
        evconnlistener_free(s->listener);
    if (s->local)
        evconnlistener_free(s->local);
    if (s->socket_path) {
        /* Only the socket we made: a later replica's, bound since, stays. */
        struct stat st;
        if (lstat(s->socket_path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
            unlink(s->socket_path);
        free(s->socket_path);
    }
    free(s->cluster_name);
    free(s);
}
