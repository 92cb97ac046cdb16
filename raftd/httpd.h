/*
 * httpd.h - the worker's small HTTP listener (metrics port 6822).
 *
 * Serves GET and HEAD through one callback that fills a reply; everything else gets 405,
 * malformed requests 400, oversized headers 431. Keep-alive is supported; connections are
 * capped (the oldest is dropped to admit a new one) and idle ones time out, so a scraper
 * that misbehaves cannot hold the worker's loop.
 *
 * This module is only the libevent shell: sockets, buffers, the connection cap and the
 * timeouts. What a request says and how a response's head reads is decided by the pure
 * parser in common/http.c, the same one the supervisor's health responder uses.
 *
 * Ownership: struct httpd owns its listener and every connection on its list; a
 * connection owns its bufferevent (and through BEV_OPT_CLOSE_ON_FREE its socket). A
 * connection is freed on EOF, error or idle timeout, after the answer to a request that
 * closes it has been written, when the cap admits a newer one, and by httpd_free(). The
 * handler's reply body is owned by the server for the length of one request.
 */
#ifndef SPUR_HTTPD_H
#define SPUR_HTTPD_H

#include "buf.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

struct httpd_reply {
    int code;                 /* 200 by default */
    const char *content_type; /* "text/plain; charset=utf-8" by default */
    struct buf body;          /* owned by the server; the handler appends */
};

typedef void (*httpd_handler)(void *arg, const char *path, struct httpd_reply *reply);

struct httpd;

/*
 * Listen on bind ("all", "loopback" or an address) and port. Returns NULL with why set
 * ("127.0.0.1:6822: bind: Address already in use") on failure.
 */
struct httpd *httpd_new(struct event_base *base, const char *bind, uint32_t port,
                        httpd_handler handler, void *arg, char *why, size_t whylen);
void httpd_free(struct httpd *h);

#endif
