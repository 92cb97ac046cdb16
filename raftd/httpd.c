/*
 * httpd.c - the worker's HTTP listener on libevent; see httpd.h.
 */
#include "httpd.h"

#include "cfg.h"
#include "http.h"
#include "log.h"
#include "netaddr.h"

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

#define HTTPD_MAX_CONNS 64
#define HTTPD_MAX_HEADER 4096
#define HTTPD_IDLE_S 30

struct hconn {
    struct httpd *h;
    struct bufferevent *bev;
    struct hconn *prev, *next;
    bool closing;
};

struct httpd {
    struct evconnlistener *listener;
    httpd_handler handler;
    void *arg;
    struct hconn *head, *tail; /* oldest first */
    unsigned nconns;
};

static void conn_free(struct hconn *c)
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

static void send_reply(struct hconn *c, int code, const char *ctype, const char *body,
                       size_t blen, bool head, bool keep)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    const char *reason = code == 200   ? "OK"
                         : code == 404 ? "Not Found"
                         : code == 405 ? "Method Not Allowed"
                         : code == 431 ? "Request Header Fields Too Large"
                         : code == 503 ? "Service Unavailable"
                                       : "Bad Request";
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                        "Cache-Control: no-store\r\n%sConnection: %s\r\n\r\n",
                        code, reason, ctype, blen, code == 405 ? "Allow: GET, HEAD\r\n" : "",
                        keep ? "keep-alive" : "close");
    if (!head && blen > 0)
        evbuffer_add(out, body, blen);
    if (!keep)
        c->closing = true;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct hconn *c = arg;
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
            send_reply(c, code, "text/plain; charset=utf-8", "bad request\n", 12, false, false);
            break;
        }
        evbuffer_drain(in, req.consumed);
        if (req.method == HTTP_OTHER) {
            send_reply(c, 405, "text/plain; charset=utf-8", "method not allowed\n", 19, false,
                       req.keep_alive);
            continue;
        }
        struct httpd_reply rep = {.code = 200, .content_type = "text/plain; charset=utf-8"};
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
        send_reply(c, rep.code, rep.content_type, rep.body.p ? rep.body.p : "", rep.body.len,
                   req.method == HTTP_HEAD, req.keep_alive);
        buf_free(&rep.body);
    }
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct hconn *c = arg;
    if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        conn_free(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what; /* EOF, error or timeout: all end the connection */
    conn_free(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int sl,
                      void *arg)
{
    struct httpd *h = arg;
    (void)sa;
    (void)sl;
    if (h->nconns >= HTTPD_MAX_CONNS && h->head)
        conn_free(h->head);
    struct hconn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        return;
    }
    c->h = h;
    c->bev = bufferevent_socket_new(evconnlistener_get_base(l), fd, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL) {
        evutil_closesocket(fd);
        free(c);
        return;
    }
    struct timeval idle = {HTTPD_IDLE_S, 0};
    bufferevent_set_timeouts(c->bev, &idle, &idle);
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
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
    h->listener = evconnlistener_new_bind(
        base, on_accept, h, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
        64, (struct sockaddr *)&ss, (int)sl);
    if (h->listener == NULL) {
        snprintf(why, whylen, "%s: bind: %s", addr, strerror(errno));
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
        conn_free(h->head);
    evconnlistener_free(h->listener);
    free(h);
}
