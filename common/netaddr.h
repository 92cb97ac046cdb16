/*
 * netaddr.h - the address grammar of the configuration, and its socket addresses.
 *
 * This module is the one owner of what an address in spur.yaml may look like; cfg.c
 * validates every address and port through it, and every listener and dialler turns the
 * strings into sockets through it, so the loader and the sockets cannot disagree.
 *
 * Three forms appear in spur.yaml:
 *   - a listen address "HOST:PORT" / "[V6]:PORT" whose host must be an IP literal
 *     (controller.listen, raft.listen);
 *   - a bind setting "all", "loopback" or an IP literal, with a separate port
 *     (health.bind/port, metrics.bind/port);
 *   - a peer or leader address "HOST:PORT" whose host may also be a name
 *     (controller.peers, controller.hosts, leader hints).
 * The grammar of HOST:PORT: an IPv6 host is written in brackets; a host outside brackets
 * is letters, digits, '.', '-' and '_' (a name or an IPv4 literal; a bare IPv6 address
 * would be ambiguous with the port); the host is never empty; the port follows the one
 * colon (after "]" when bracketed) as 1 to 5 decimal digits, no sign, in 1..65535, and
 * nothing follows it. What stands inside brackets is not checked here: the listen form
 * then requires an IP literal (netaddr_listen()), and a peer's bracketed host goes to
 * the resolver as written.
 *
 * Only the dialling side accepts names, because a listener's address must not depend on
 * DNS; the worker resolves them without blocking in raftd/resolver.c (evdns, cached).
 * Everything here is pure (no DNS, no sockets opened) and allocates nothing.
 */
#ifndef SPUR_NETADDR_H
#define SPUR_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The ports a listener or a peer may use (0, "any port", is never configured). */
#define NETADDR_PORT_MIN 1u
#define NETADDR_PORT_MAX 65535u

bool netaddr_port_ok(unsigned long port);

/*
 * Split "host:port" or "[v6]:port"; host gets the bracket-free host (hostlen bytes with
 * its NUL, else refused, never truncated). Returns 0, or -1 for anything outside the
 * grammar above.
 */
int netaddr_split_hostport(const char *s, char *host, size_t hostlen, uint16_t *port);

/*
 * The address a bind setting means: "all" -> "::" (dual stack), "loopback" ->
 * "127.0.0.1", anything else must be an IPv4 or IPv6 literal (no brackets, no zone, no
 * port), copied as it is. Returns 0 or -1.
 */
int netaddr_bind_address(const char *bind, char *addr, size_t addrlen);

/*
 * The configuration's checks, with the loader's messages: 0, or -1 with why set to
 * "\"V\" is not HOST:PORT (IPv6 as [ADDR]:PORT, port 1-65535)" or
 * "\"V\" is not all, loopback or an IP address".
 */
int netaddr_check_hostport(const char *v, char *why, size_t whylen);
int netaddr_check_bind(const char *v, char *why, size_t whylen);

/*
 * Could listeners bound to hosts a and b (bracket-free, as split) on one port collide?
 * Yes when either is a wildcard ("::" takes IPv4 too, dual stack; "0.0.0.0"), when they
 * are the same address (an IPv4 one and its ::ffff: form included), and when either is a
 * host name, which could resolve to anything.
 */
bool netaddr_hosts_overlap(const char *a, const char *b);

/* Same host, as the peers see it: the same address, or the same name in any case. */
bool netaddr_same_host(const char *a, const char *b);

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
