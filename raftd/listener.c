/*
 * listener.c - TCP listeners with the worker's socket options; see listener.h.
 */
#include "listener.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

struct evconnlistener *listener_bind(struct event_base *base, const struct sockaddr_storage *ss,
                                     socklen_t sl, int backlog, evconnlistener_cb cb, void *arg,
                                     const char *what, char *why, size_t whylen)
{
    struct evconnlistener *l = evconnlistener_new_bind(
        base, cb, arg, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, backlog,
        (const struct sockaddr *)ss, (int)sl);
    if (l == NULL)
        snprintf(why, whylen, "%s: bind: %s", what, strerror(errno));
    return l;
}

struct bufferevent *listener_wrap(struct evconnlistener *l, evutil_socket_t fd, bool nodelay)
{
    if (nodelay) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    struct bufferevent *bev =
        bufferevent_socket_new(evconnlistener_get_base(l), fd, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL)
        evutil_closesocket(fd);
    return bev;
}
