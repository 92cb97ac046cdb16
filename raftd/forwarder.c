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
 * Frames go through frame_ev.h: a request is packed straight into the connection's output
 * buffer, an answer is taken out of its input buffer.
 */
#include "forwarder.h"

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
 * Ownership: the forwarder owns its sweep timer and its connections; the resolver is the
 * transport's, borrowed. A connection owns its bufferevent (the socket closes with it), its
 * resolver wait and its pending requests; a pending request owns nothing but its place
 * (cb's arg is the caller's). Requests are packed into the output buffer at once, so the
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
    struct fwd *pending;
    unsigned npending;
};

struct forwarder {
    struct event_base *base;
    struct resolver *res; /* borrowed from the transport */
    uint32_t max_frame;
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
    free(c);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct fconn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    for (;;) {
        uint8_t *body = NULL;
        size_t len = 0;
        enum frame_status st = frame_ev_take(in, c->f->max_frame, &body, &len);
        if (st == FRAME_NEED_MORE)
            return;
        if (st == FRAME_TOO_BIG) {
            conn_free(c, "answer over the frame limit");
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
        return;
    }
    char why[160];
    int e = EVUTIL_SOCKET_ERROR();
    snprintf(why, sizeof(why), "%s",
             (what & BEV_EVENT_EOF) ? "connection closed" : evutil_socket_error_to_string(e));
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
    c->bev = bufferevent_socket_new(f->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL) {
        free(c);
        return NULL;
    }
    bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    /*
     * Requests written before the connection exists wait in the output buffer: while the
     * name is looked up, and while the connect runs.
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
    if (frame_ev_add_message(bufferevent_get_output(c->bev), &copy.base) != 0) {
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

struct forwarder *forwarder_new(struct event_base *base, uint32_t max_frame, struct resolver *res)
{
    if (res == NULL)
        return NULL;
    struct forwarder *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->base = base;
    f->res = res;
    f->max_frame = max_frame;
    f->sweep = event_new(base, -1, EV_PERSIST, on_sweep, f);
    if (f->sweep == NULL) {
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
    free(f);
}
