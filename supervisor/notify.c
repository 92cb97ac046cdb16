/*
 * notify.c - sd_notify datagrams; see notify.h.
 */
#include "notify.h"

#include "log.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void notify_init(struct notifier *n)
{
    const char *sock = getenv("NOTIFY_SOCKET");
    const char *wd_usec = getenv("WATCHDOG_USEC");
    const char *wd_pid = getenv("WATCHDOG_PID");

    memset(n, 0, sizeof(*n));
    n->fd = -1;
    if (wd_usec != NULL) {
        char *end;
        unsigned long long v = wd_usec[0] >= '0' && wd_usec[0] <= '9'
                                   ? strtoull(wd_usec, &end, 10)
                                   : (end = (char *)"x", 0); /* no sign, no blanks */
        bool for_us = true;
        if (wd_pid != NULL) {
            long p = strtol(wd_pid, NULL, 10);
            for_us = p == (long)getpid();
        }
        if (*end == '\0' && v > 0 && for_us)
            n->watchdog_usec = v;
    }
    if (sock != NULL && sock[0] != '\0') {
        size_t len = strlen(sock);
        if ((sock[0] != '/' && sock[0] != '@') || len >= sizeof(n->path)) {
            log_event(LOG_WARN, "notify", "NOTIFY_SOCKET ignored: not a path or @name",
                      "value=\"%.100s\"", sock);
        } else {
            memcpy(n->path, sock, len);
            if (n->path[0] == '@')
                n->path[0] = '\0';
            n->path_len = (unsigned)len;
            n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            if (n->fd < 0)
                log_event(LOG_WARN, "notify", "cannot create the notify socket", "err=\"%s\"",
                          strerror(errno));
        }
    }
    if (n->fd < 0)
        n->watchdog_usec = 0;
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

bool notify_enabled(const struct notifier *n)
{
    return n->fd >= 0;
}

uint64_t notify_watchdog_usec(const struct notifier *n)
{
    return n->watchdog_usec;
}

void notify_send(struct notifier *n, const char *msg)
{
    struct sockaddr_un sa;

    if (n->fd < 0)
        return;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, n->path, n->path_len);
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n->path_len);
    if (n->path[0] != '\0')
        sl++; /* count the path's NUL, as systemd does */
    ssize_t w = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT,
                       (struct sockaddr *)&sa, sl);
    if (w < 0 && !n->warned) {
        n->warned = true;
        log_event(LOG_WARN, "notify", "sd_notify send failed", "err=\"%s\"", strerror(errno));
    }
}

void notify_close(struct notifier *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}
