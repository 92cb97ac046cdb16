/*
 * api.c - client API listener; contract in api.h.
 *
 * Connections are bufferevents. A connection is reference-counted: the server holds one
 * reference while it is open and every call in flight holds one, so a reply that comes
 * after the client left finds a closed connection and is dropped instead of touching
 * freed memory. Frames come and go through frame_ev.h: requests are taken out of the
 * input buffer as malloc'd copies (kept by the call, for forwarding), replies are packed
 * straight into the output buffer.
 */
#include "api.h"

#include "cfg.h"
#include "frame_ev.h"
#include "jobscript.h"
#include "listener.h"
#include "log.h"
#include "netaddr.h"
#include "wire.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define API_OUT_HIGH (16u << 20) /* stop reading a client this far behind */
#define API_MAX_INFLIGHT 4096    /* calls in flight per connection */

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
};

struct api_call {
    struct aconn *conn;
    Spur__Api__Request *req;
    uint8_t *bytes;
    size_t len;
};

struct api_server {
    struct evconnlistener *listener;
    struct api_options opt;
    char *cluster_name;
    api_dispatch_fn dispatch;
    void *arg;
    struct aconn *head, *tail;
    unsigned nconns;
    struct api_stats stats;
};

static void conn_unref(struct aconn *c)
{
    if (--c->refs == 0)
        free(c);
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
    if (frame_ev_add_message(out, &resp->base) != 0) {
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

/* Handle one complete frame. Returns -1 when the connection must close. */
static int handle_frame(struct aconn *c, uint8_t *bytes, size_t len)
{
    struct api_server *s = c->srv;
    Spur__Api__Request *req = spur__api__request__unpack(NULL, len, bytes);
    if (req == NULL) {
        s->stats.bad_frames++;
        log_event(LOG_WARN, "api", "undecodable request; closing the connection",
                  "peer=%s len=%zu", c->peer, len);
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
    if (api_check_request(req, msg, sizeof(msg)) != 0) {
        reply_direct(c, req->request_id, SPUR__API__CODE__CODE_INVALID, msg);
        spur__api__request__free_unpacked(req, NULL);
        free(bytes);
        return 0;
    }
    struct api_call *call = calloc(1, sizeof(*call));
    if (call == NULL) {
        reply_direct(c, req->request_id, SPUR__API__CODE__CODE_INTERNAL, "out of memory");
        spur__api__request__free_unpacked(req, NULL);
        free(bytes);
        return 0;
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
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct aconn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    c->refs++; /* the dispatcher may reply and the client may vanish under us */
    while (c->bev != NULL && !c->paused) {
        uint8_t *body = NULL;
        size_t len = 0;
        enum frame_status st = frame_ev_take(in, c->srv->opt.max_frame, &body, &len);
        if (st == FRAME_NEED_MORE)
            break;
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
        bufferevent_enable(bev, EV_READ);
        on_read(bev, c); /* frames may be waiting in the input buffer */
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    conn_close(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int sl,
                      void *arg)
{
    struct api_server *s = arg;
    (void)sl;
    if (s->nconns >= s->opt.max_conns && s->head)
        conn_close(s->head);
    struct aconn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        return;
    }
    c->srv = s;
    c->refs = 1;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, c->peer, sizeof(c->peer));
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, c->peer, sizeof(c->peer));
    c->bev = listener_wrap(l, fd, true);
    if (c->bev == NULL) {
        free(c);
        return;
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
}

struct api_server *api_new(struct event_base *base, const struct api_options *o,
                           api_dispatch_fn dispatch, void *arg, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (netaddr_listen(o->listen, &ss, &sl, why, whylen) != 0)
        return NULL;
    struct api_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(why, whylen, "%s: out of memory", o->listen);
        return NULL;
    }
    s->opt = *o;
    if (s->opt.max_conns == 0)
        s->opt.max_conns = 4096;
    s->cluster_name = strdup(o->cluster_name);
    s->opt.cluster_name = s->cluster_name;
    s->opt.listen = NULL;
    s->dispatch = dispatch;
    s->arg = arg;
    if (s->cluster_name == NULL) {
        snprintf(why, whylen, "%s: out of memory", o->listen);
        api_free(s);
        return NULL;
    }
    s->listener = listener_bind(base, &ss, sl, 1024, on_accept, s, o->listen, why, whylen);
    if (s->listener == NULL) {
        api_free(s);
        return NULL;
    }
    return s;
}

void api_free(struct api_server *s)
{
    if (s == NULL)
        return;
    while (s->head)
        conn_close(s->head);
    if (s->listener) /* NULL: api_new() failed before binding */
        evconnlistener_free(s->listener);
    free(s->cluster_name);
    free(s);
}
