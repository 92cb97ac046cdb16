/*
 * responder.h - the health responder process (DESIGN.md section 5).
 *
 * The supervisor forks this process; it answers /healthz, /livez and /readyz on the
 * listening socket the supervisor bound, from the shared health page, and nothing else.
 *
 * Guarantees:
 *   - It never waits on the worker or the supervisor: it reads the shared page (a seqlock
 *     read that cannot block) and polls the worker's pidfd with a zero timeout, so a dead
 *     worker reads "dead" even in the instant before the supervisor has noticed.
 *   - Slow or hostile clients cannot starve a probe: connections are capped (the least
 *     recently active one is dropped to admit a new one), request headers are capped in
 *     size (431), a request must be complete within a fixed time of its first byte
 *     (408), idle keep-alive connections are closed after health.idle_timeout_ms.
 *   - Pipelined requests (many sent before any answer is read) are all answered, in
 *     order, as soon as each is complete. Input buffered per connection is bounded (2 KiB,
 *     the header limit): while its answers cannot be sent, a connection is not read, and
 *     one that then stays stuck is closed by the idle timeout.
 *   - It dies with the supervisor: PR_SET_PDEATHSIG plus a check, on every wakeup, that its
 *     parent is still the pid it was forked from.
 *   - It holds only: the listening socket, the worker's pidfd, the shared page, and its
 *     client sockets; everything else is closed right after the fork.
 */
#ifndef SPUR_RESPONDER_H
#define SPUR_RESPONDER_H

#include "health.h"

#include <stdint.h>
#include <sys/types.h>

struct responder_config {
    int listen_fd;             /* bound, listening; owned by the supervisor, shared */
    int worker_pidfd;          /* -1 when pidfds are unavailable */
    struct health_shm *shm;    /* shared page, read only here */
    pid_t parent_pid;          /* the supervisor */
    uint32_t max_connections;  /* health.max_connections */
    uint32_t idle_timeout_ms;  /* health.idle_timeout_ms */
    uint32_t header_timeout_ms;/* a request must be complete this long after its first byte */
};

/* Run the responder in this (freshly forked) process. Never returns. */
__attribute__((noreturn)) void responder_main(const struct responder_config *rc);

/*
 * Bind and listen on bind ("all", "loopback" or an address) and port. "all" binds [::]
 * with IPV6_V6ONLY off (dual stack) and falls back to 0.0.0.0 where IPv6 is missing.
 * Returns the socket (non-blocking, close-on-exec) or -1 with why set to
 * "ADDRESS:PORT: reason".
 */
int responder_listen(const char *bind, uint32_t port, char *why, size_t whylen);

#endif
