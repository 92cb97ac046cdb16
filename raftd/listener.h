/*
 * listener.h - the one way the worker opens a TCP listener: the client API (api.c), the
 * peer transport (transport.c) and the metrics endpoint (httpd.c) all bind through here.
 *
 * Guarantees, for every listener the worker opens:
 *   - the socket is close-on-exec, so no child the worker starts inherits a listening
 *     port it would keep open after the worker is gone;
 *   - SO_REUSEADDR is set, so a restarted replica rebinds its ports at once instead of
 *     failing while the old connections sit in TIME_WAIT;
 *   - the socket is non-blocking (libevent's listeners always are) and is closed when the
 *     listener is freed (evconnlistener_free());
 *   - a failure is named the same way everywhere: "WHAT: bind: <strerror>", WHAT being the
 *     address as the caller's configuration wrote it.
 *
 *   - an accepted connection becomes a bufferevent that owns its socket (closed when the
 *     bufferevent is freed), or, when libevent cannot allocate one, the socket is closed
 *     at once: no accepted descriptor leaks on any path.
 *
 * Ownership: the returned listener belongs to the caller, who frees it with
 * evconnlistener_free(); the address is only read. The bufferevent of an accepted
 * connection belongs to the caller, and it owns the socket.
 */
#ifndef SPUR_LISTENER_H
#define SPUR_LISTENER_H

#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/*
 * Bind a libevent listener on ss (as netaddr_listen() or netaddr_bind() filled it) with
 * the given backlog, accepting into cb(arg). Returns NULL with why set to
 * "WHAT: bind: <strerror>" when the address cannot be bound.
 */
struct evconnlistener *listener_bind(struct event_base *base, const struct sockaddr_storage *ss,
                                     socklen_t sl, int backlog, evconnlistener_cb cb, void *arg,
                                     const char *what, char *why, size_t whylen);

/*
 * Wrap fd, just accepted by l, in a bufferevent on l's event base that closes fd when
 * freed, with TCP_NODELAY set first when nodelay (the protocols whose small frames must
 * not wait for Nagle: the client API's replies, the peers' messages). Returns NULL, with
 * fd closed, when the bufferevent cannot be made.
 */
struct bufferevent *listener_wrap(struct evconnlistener *l, evutil_socket_t fd, bool nodelay);

#endif
