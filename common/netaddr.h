/*
 * netaddr.h - turning the addresses of the configuration into socket addresses.
 *
 * Three forms appear in spur.yaml: a listen address "HOST:PORT" / "[V6]:PORT" whose host
 * must be an IP literal (controller.listen, raft.listen); a bind setting "all",
 * "loopback" or an IP literal plus a separate port (health.*, metrics.*); and a peer or
 * leader address whose host may be a name (controller.peers, leader hints). One module
 * does all three, so every listener and dialler reads them the same way.
 *
 * Only the dialling side accepts names, because a listener's address must not depend on
 * DNS; the worker resolves them without blocking in raftd/resolver.c (evdns, cached).
 */
#ifndef SPUR_NETADDR_H
#define SPUR_NETADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* "HOST:PORT" with an IP literal host. Returns 0, or -1 with why set. */
int netaddr_listen(const char *hostport, struct sockaddr_storage *ss, socklen_t *sl, char *why,
                   size_t whylen);
/*
 * A bind setting ("all" -> [::], dual stack; "loopback" -> 127.0.0.1; or an IP literal)
 * and a port. Returns 0, or -1 with why set.
 */
int netaddr_bind(const char *bind, uint32_t port, struct sockaddr_storage *ss, socklen_t *sl,
                 char *why, size_t whylen);
/* "[v6]:port" or "v4:port" for logs. */
void netaddr_format(const struct sockaddr_storage *ss, char *out, size_t outlen);

#endif
