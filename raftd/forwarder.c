/*
 * forwarder.c - forwarding of client requests to the leader; contract in forwarder.h.
 *
 * One struct fconn per leader address, made on first use and kept while it works. Each
 * pending request is a struct fwd in the connection's list, found again by the request id
 * the forwarder gave it. A periodic sweep fails requests past their deadline. A closed or
 * failed connection fails all its pending requests and is freed; the next request to
 * that address opens a new one.
 *
 * The leader's address may name a host. It is resolved with the worker's shared resolver
 * (resolver.h), never with a blocking call: while a lookup runs, requests are written into
 * the connection's output buffer and leave once it connects; a lookup that fails fails
 * them. A connection that fails tells the resolver, so that the next one looks again.
 *
 * Each connection opens with the cluster-key proof (chan.h, initiator):
 *
 *     connected -> ChanHello -> read ChanHello -> ChanProof -> established
 *
 * Until it is established, requests are packed as plain frames (frame_ev.h) into the
 * connection's `waiting` buffer; once it is, they are taken out of it in order and sealed
 * into the output buffer (chan_ev.h), and later requests are sealed straight into the
 * output. Answers are opened out of the input buffer; one that does not verify fails the
 * connection. A read and write time-out of FORWARD_HANDSHAKE_S covers the connect and the
 * proof, and is lifted once the channel is established.
 */
#include "forwarder.h"

#include "chan.h"
#include "chan_ev.h"
#include "frame_ev.h"
#include "log.h"
#include "resolver.h"
#include "util.h"
#include "wire.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/*
 * Ownership: the forwarder owns its sweep timer, its copy of the cluster name and its
 * connections; the resolver (the transport's) and the keyring are borrowed. A connection
 * owns its bufferevent (the socket closes with it), its channel (chan_free() wipes it), its
 * waiting buffer, its resolver wait and its pending requests; a pending request owns
 * nothing but its place (cb's arg is the caller's). Requests are packed at once, so the
 * caller's request is not kept.
 */
struct fwd {
    struct fwd *next;
    uint64_t id;
    uint64_t deadline_ms;
    forward_cb cb;
    void *arg;
};

struct fconn {
    struct forwarder *f;
    struct fconn *next;
    char address[300];
    struct bufferevent *bev;
    struct resolver_wait rw; /* while the address's name is being looked up */
    bool connected;
    struct chan ch;           /* initiator, role "replica" */
    struct evbuffer *waiting; /* requests as plain frames, until ch is established */
    struct fwd *pending;
    unsigned npending;
};

struct forwarder {
    struct event_base *base;
    struct resolver *res;     /* borrowed from the transport */
    const struct keyring *kr; /* borrowed */
    char *cluster_name;       /* owned copy */
    uint32_t max_frame;
    char last_refusal[300]; /* the last key-proof failure logged, and when */
    uint64_t last_refusal_ms;
    uint64_t next_id;
    struct fconn *conns;
    struct event *sweep;
};

static void fail_all(struct fconn *c, const char *why)
{
    struct fwd *p = c->pending;
    c->pending = NULL;
    c->npending = 0;
    while (p) {
        struct fwd *n = p->next;
        char err[400];
        snprintf(err, sizeof(err), "forwarding to the leader at %s failed: %s", c->address, why);
        p->cb(p->arg, NULL, err);
        free(p);
        p = n;
    }
}

static void conn_free(struct fconn *c, const char *why)
{
    struct forwarder *f = c->f;
    for (struct fconn **pp = &f->conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    resolver_cancel(&c->rw);
    if (c->bev)
        bufferevent_free(c->bev);
    c->bev = NULL;
    fail_all(c, why);
    chan_free(&c->ch);
    if (c->waiting)
        evbuffer_free(c->waiting);
    free(c);
}

/* A key-proof or seal failure: one log line per reason and minute, then close. */
static void conn_refused(struct fconn *c, const char *why)
{
    struct forwarder *f = c->f;
    uint64_t now = mono_ms();
    if (strcmp(f->last_refusal, why) != 0 || now - f->last_refusal_ms >= 60000) {
        snprintf(f->last_refusal, sizeof(f->last_refusal), "%s", why);
        f->last_refusal_ms = now;
        log_event(LOG_ERROR, "forwarder", "leader connection refused", "addr=%s why=%s",
                  log_q(c->address), log_q(why));
    }
    conn_free(c, why);
}

/*
 * The channel is established: seal what waited, in order, into the output. Returns 0, or
 * -1 (out of memory).
 */
static int flush_waiting(struct fconn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    for (;;) {
        uint8_t *body = NULL;
        size_t len = 0;
        enum frame_status st = frame_ev_take(c->waiting, UINT32_MAX, &body, &len);
        if (st == FRAME_NEED_MORE)
            return 0;
        if (st != FRAME_READY)
            return -1;
        int rc = chan_ev_add(&c->ch, out, body, len);
        free(body);
        if (rc != 0)
            return -1;
    }
}

/*
 * Run the key proof with the frames in `in`. Returns 1 once established (and what waited
 * sealed into the output), 0 when more bytes are needed, -1 when c was freed.
 */
static int handshake(struct fconn *c, struct evbuffer *in)
{
    while (!chan_established(&c->ch)) {
        uint8_t *body = NULL;
        size_t len = 0;
        enum frame_status st = frame_ev_take(in, CHAN_MAX_HELLO, &body, &len);
        if (st == FRAME_NEED_MORE)
            return 0;
        if (st != FRAME_READY) {
            conn_refused(c, st == FRAME_TOO_BIG ? "the leader's key-proof frame is over the limit"
                                                : "out of memory");
            return -1;
        }
        uint8_t *out = NULL;
        size_t outlen = 0;
        enum chan_rc rc = chan_take_hello(&c->ch, body, len, &out, &outlen);
        free(body);
        if (rc != CHAN_OK) {
            free(out);
            conn_refused(c, chan_why(&c->ch));
            return -1;
        }
        int added = chan_ev_add_raw(bufferevent_get_output(c->bev), out, outlen);
        free(out);
        if (added != 0 || flush_waiting(c) != 0) {
            conn_free(c, "out of memory");
            return -1;
        }
        bufferevent_set_timeouts(c->bev, NULL, NULL);
    }
    return 1;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct fconn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (handshake(c, in) <= 0)
        return;
    for (;;) {
        uint8_t *body = NULL;
        size_t len = 0;
        enum chan_rc crc = CHAN_OK;
        int st = chan_ev_take(&c->ch, in, c->f->max_frame, &body, &len, &crc);
        if (st == FRAME_NEED_MORE)
            return;
        if (st == FRAME_TOO_BIG) {
            conn_free(c, "answer over the frame limit");
            return;
        }
        if (st == CHAN_EV_REFUSED) {
            conn_refused(c, chan_why(&c->ch));
            return;
        }
        if (st != FRAME_READY) {
            conn_free(c, "out of memory");
            return;
        }
        Spur__Api__Response *r = spur__api__response__unpack(NULL, len, body);
        free(body);
        if (r == NULL) {
            conn_free(c, "undecodable answer");
            return;
        }
        struct fwd **pp = &c->pending;
        while (*pp && (*pp)->id != r->request_id)
            pp = &(*pp)->next;
        if (*pp) {
            struct fwd *p = *pp;
            *pp = p->next;
            c->npending--;
            p->cb(p->arg, r, NULL);
            free(p);
        }
        spur__api__response__free_unpacked(r, NULL);
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct fconn *c = arg;
    (void)bev;
    if (what & BEV_EVENT_CONNECTED) {
        c->connected = true;
        int one = 1;
        setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* Our hello first; the requests that wait go once the leader proved the key. */
        uint8_t *hello = NULL;
        size_t len = 0;
        if (chan_hello(&c->ch, &hello, &len) != CHAN_OK ||
            chan_ev_add_raw(bufferevent_get_output(bev), hello, len) != 0) {
            free(hello);
            conn_free(c, "cannot make the key-proof hello");
            return;
        }
        free(hello);
        return;
    }
    char why[160];
    int e = EVUTIL_SOCKET_ERROR();
    if (what & BEV_EVENT_EOF)
        snprintf(why, sizeof(why), "connection closed");
    else if (what & BEV_EVENT_TIMEOUT)
        snprintf(why, sizeof(why), "no key proof from the leader in %d s", FORWARD_HANDSHAKE_S);
    else
        snprintf(why, sizeof(why), "%s", evutil_socket_error_to_string(e));
    /* The leader may have moved to another IP under the same name. */
    resolver_failed(c->f->res, c->address);
    conn_free(c, why);
}

/* The resolver's answer for a connection that was waiting for it. */
static void on_resolved(void *arg, bool ok, const struct sockaddr_storage *ss, socklen_t sl,
                        const char *err)
{
    struct fconn *c = arg;
    if (!ok) {
        conn_free(c, err);
        return;
    }
    if (bufferevent_socket_connect(c->bev, (const struct sockaddr *)ss, (int)sl) != 0) {
        resolver_failed(c->f->res, c->address);
        conn_free(c, "connect failed");
    }
}

static struct fconn *conn_get(struct forwarder *f, const char *address)
{
    for (struct fconn *c = f->conns; c; c = c->next)
        if (strcmp(c->address, address) == 0)
            return c;
    struct fconn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->f = f;
    snprintf(c->address, sizeof(c->address), "%s", address);
    if (chan_init(&c->ch, CHAN_INITIATOR, f->kr, f->cluster_name, "replica") != 0) {
        log_event(LOG_ERROR, "forwarder", "cannot set up a channel", "why=%s",
                  log_q(chan_why(&c->ch)));
        chan_free(&c->ch);
        free(c);
        return NULL;
    }
    c->waiting = evbuffer_new();
    c->bev = bufferevent_socket_new(f->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL || c->waiting == NULL) {
        if (c->bev)
            bufferevent_free(c->bev);
        if (c->waiting)
            evbuffer_free(c->waiting);
        chan_free(&c->ch);
        free(c);
        return NULL;
    }
    bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    struct timeval hs = {FORWARD_HANDSHAKE_S, 0};
    bufferevent_set_timeouts(c->bev, &hs, &hs);
    /*
     * Requests given before the channel is established wait in c->waiting: while the name
     * is looked up, while the connect runs, and while the key is proved.
     */
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char err[400];
    int rc = resolver_resolve(f->res, address, &ss, &sl, &c->rw, on_resolved, c, err, sizeof(err));
    if (rc == RESOLVER_FAILED ||
        (rc == RESOLVER_OK &&
         bufferevent_socket_connect(c->bev, (struct sockaddr *)&ss, (int)sl) != 0)) {
        resolver_cancel(&c->rw);
        bufferevent_free(c->bev);
        evbuffer_free(c->waiting);
        chan_free(&c->ch);
        free(c);
        return NULL;
    }
    c->next = f->conns;
    f->conns = c;
    return c;
}

int forwarder_send(struct forwarder *f, const char *address, const Spur__Api__Request *req,
                   uint32_t timeout_ms, forward_cb cb, void *arg)
{
    struct fconn *c = conn_get(f, address);
    if (c == NULL || c->npending >= FORWARD_MAX_PENDING)
        return -1;
    struct fwd *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -1;
    Spur__Api__Request copy = *req;
    copy.hops = req->hops + 1;
    copy.request_id = ++f->next_id;
    /* copy.caller is the API layer's, kept as it is: the leader trusts it from a member. */
    int rc = chan_established(&c->ch)
                 ? chan_ev_add_message(&c->ch, bufferevent_get_output(c->bev), &copy.base)
                 : frame_ev_add_message(c->waiting, &copy.base);
    if (rc != 0) {
        free(p);
        return -1;
    }
    p->id = copy.request_id;
    p->deadline_ms = mono_ms() + (timeout_ms ? timeout_ms : 10000);
    p->cb = cb;
    p->arg = arg;
    p->next = c->pending;
    c->pending = p;
    c->npending++;
    return 0;
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    struct forwarder *f = arg;
    uint64_t now = mono_ms();
    (void)fd;
    (void)what;
    for (struct fconn *c = f->conns; c; c = c->next) {
        struct fwd **pp = &c->pending;
        while (*pp) {
            struct fwd *p = *pp;
            if (now >= p->deadline_ms) {
                *pp = p->next;
                c->npending--;
                char err[400];
                snprintf(err, sizeof(err), "the leader at %s did not answer in time", c->address);
                p->cb(p->arg, NULL, err);
                free(p);
            } else {
                pp = &p->next;
            }
        }
    }
}

struct forwarder *forwarder_new(struct event_base *base, uint32_t max_frame, struct resolver *res,
                                const struct keyring *kr, const char *cluster_name)
{
    if (res == NULL || kr == NULL || kr->n == 0 || cluster_name == NULL)
        return NULL;
    struct forwarder *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->base = base;
    f->res = res;
    f->kr = kr;
    f->max_frame = max_frame;
    f->cluster_name = strdup(cluster_name);
    f->sweep = event_new(base, -1, EV_PERSIST, on_sweep, f);
    if (f->sweep == NULL || f->cluster_name == NULL) {
        if (f->sweep)
            event_free(f->sweep);
        free(f->cluster_name);
        free(f);
        return NULL;
    }
    struct timeval tv = {0, 100000};
    event_add(f->sweep, &tv);
    return f;
}

void forwarder_free(struct forwarder *f)
{
    if (f == NULL)
        return;
    while (f->conns)
        conn_free(f->conns, "shutting down");
    event_free(f->sweep);
    free(f->cluster_name);
    free(f);
}
