/*
 * httpd.c - the worker's HTTP listener on libevent; see httpd.h.
 */
#include "httpd.h"

#include "http.h"
#include "listener.h"
#include "netaddr.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define HTTPD_MAX_CONNS  64
#define HTTPD_MAX_HEADER 4096
#define HTTPD_IDLE_S     30
#define HTTPD_TEXT       "text/plain; charset=utf-8"

/* One client connection: on its server's list, oldest first. */
struct httpd_conn {
    struct httpd *h;
    struct bufferevent *bev; /* owned; closes the socket when freed */
    struct httpd_conn *prev, *next;
    bool closing; /* the last answer is queued: free once it is written */
};

struct httpd {
    struct evconnlistener *listener; /* owned */
    httpd_handler handler;
    void *arg;
    struct httpd_conn *head, *tail; /* owned, oldest first */
    unsigned nconns;
};

static void httpd_conn_free(struct httpd_conn *c)
{
    struct httpd *h = c->h;
    if (c->prev)
        c->prev->next = c->next;
    else
        h->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        h->tail = c->prev;
    bufferevent_free(c->bev);
    h->nconns--;
    free(c);
}

/* Queue one response; a connection that must not stay open closes once it is written. */
static void httpd_conn_reply(struct httpd_conn *c, int code, const char *ctype, const char *body,
                             size_t blen, bool head, bool keep)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    char hdr[512];
    size_t n = http_format_head(hdr, sizeof(hdr), code, ctype, blen, keep, code == 405);
    if (n == 0) {
        /* Only a content type longer than any the handler sets could do this. */
        c->closing = true;
        return;
    }
    evbuffer_add(out, hdr, n);
    if (!head && blen > 0)
        evbuffer_add(out, body, blen);
    if (!keep)
        c->closing = true;
}

static void httpd_conn_on_read(struct bufferevent *bev, void *arg)
{
    struct httpd_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    while (!c->closing) {
        size_t avail = evbuffer_get_length(in);
        if (avail == 0)
            break;
        size_t look = avail < HTTPD_MAX_HEADER ? avail : HTTPD_MAX_HEADER;
        const char *data = (const char *)evbuffer_pullup(in, (ev_ssize_t)look);
        struct http_request req;
        enum http_result r = http_parse_request(data, look, HTTPD_MAX_HEADER, &req);
        if (r == HTTP_NEED_MORE)
            break;
        if (r != HTTP_REQUEST) {
            int code = r == HTTP_TOO_LARGE ? 431 : 400;
            httpd_conn_reply(c, code, HTTPD_TEXT, "bad request\n", 12, false, false);
            break;
        }
        evbuffer_drain(in, req.consumed);
        if (req.method == HTTP_OTHER) {
            httpd_conn_reply(c, 405, HTTPD_TEXT, "method not allowed\n", 19, false, req.keep_alive);
            continue;
        }
        struct httpd_reply rep = {.code = 200, .content_type = HTTPD_TEXT};
        buf_init(&rep.body);
        if (req.path_truncated) {
            rep.code = 404;
            buf_puts(&rep.body, "not found\n");
        } else {
            c->h->handler(c->h->arg, req.path, &rep);
        }
        if (rep.body.oom) {
            buf_reset(&rep.body);
            rep.code = 503;
            buf_puts(&rep.body, "out of memory\n");
        }
        httpd_conn_reply(c, rep.code, rep.content_type, rep.body.p ? rep.body.p : "", rep.body.len,
                         req.method == HTTP_HEAD, req.keep_alive);
        buf_free(&rep.body);
    }
}

static void httpd_conn_on_write(struct bufferevent *bev, void *arg)
{
    struct httpd_conn *c = arg;
    if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        httpd_conn_free(c);
}

static void httpd_conn_on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what; /* EOF, error or timeout: all end the connection */
    httpd_conn_free(arg);
}

static void httpd_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                            int sl, void *arg)
{
    struct httpd *h = arg;
    (void)sa;
    (void)sl;
    if (h->nconns >= HTTPD_MAX_CONNS && h->head)
        httpd_conn_free(h->head);
    struct httpd_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        return;
    }
    c->h = h;
    c->bev = listener_wrap(l, fd, false);
    if (c->bev == NULL) {
        free(c);
        return;
    }
    struct timeval idle = {HTTPD_IDLE_S, 0};
    bufferevent_set_timeouts(c->bev, &idle, &idle);
    bufferevent_setcb(c->bev, httpd_conn_on_read, httpd_conn_on_write, httpd_conn_on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    c->prev = h->tail;
    if (h->tail)
        h->tail->next = c;
    else
        h->head = c;
    h->tail = c;
    h->nconns++;
}

struct httpd *httpd_new(struct event_base *base, const char *bind, uint32_t port,
                        httpd_handler handler, void *arg, char *why, size_t whylen)
{
    char addr[80];
    struct sockaddr_storage ss;
    socklen_t sl;
    if (netaddr_bind(bind, port, &ss, &sl, why, whylen) != 0)
        return NULL;
    netaddr_format(&ss, addr, sizeof(addr));
    struct httpd *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        snprintf(why, whylen, "%s: out of memory", addr);
        return NULL;
    }
    h->handler = handler;
    h->arg = arg;
    h->listener = listener_bind(base, &ss, sl, 64, httpd_on_accept, h, addr, why, whylen);
    if (h->listener == NULL) {
        free(h);
        return NULL;
    }
    return h;
}

void httpd_free(struct httpd *h)
{
    if (h == NULL)
        return;
    while (h->head)
        httpd_conn_free(h->head);
    evconnlistener_free(h->listener);
    free(h);
}
