/*
 * listener.c - TCP listeners with the worker's socket options; see listener.h.
 */
#include "listener.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
