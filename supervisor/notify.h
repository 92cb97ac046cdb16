/*
 * notify.h - the systemd notification protocol, without libsystemd.
 *
 * When NOTIFY_SOCKET names a datagram socket (a path, or "@name" for the abstract
 * namespace), each notify_send() is one datagram such as "READY=1" or "STATUS=...".
 * WATCHDOG_USEC and WATCHDOG_PID tell whether systemd expects WATCHDOG=1 from this
 * process and how often; notify_watchdog_usec() returns 0 when it does not.
 *
 * notify_init() reads the three variables and removes them from the environment, so no
 * child (the worker, the responder, their children) can send in our name.
 */
#ifndef SPUR_NOTIFY_H
#define SPUR_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

struct notifier {
    int fd;             /* -1 when NOTIFY_SOCKET is not set */
    char path[108];     /* sun_path, '\0'-prefixed for abstract sockets */
    unsigned path_len;  /* bytes of path used */
    uint64_t watchdog_usec;
    bool warned;        /* a send failure was logged already */
};

void notify_init(struct notifier *n);
bool notify_enabled(const struct notifier *n);
/* Send one message; failures are logged once per kind and otherwise ignored. */
void notify_send(struct notifier *n, const char *msg);
uint64_t notify_watchdog_usec(const struct notifier *n);
void notify_close(struct notifier *n);

#endif
