/*
 * netaddr.c - configuration addresses to socket addresses; see netaddr.h.
 */
#include "netaddr.h"

#include "cfg.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* Fill ss from an IP literal and a port; returns 0 or -1 when ip is not a literal. */
static int from_literal(const char *ip, uint16_t port, struct sockaddr_storage *ss,
                        socklen_t *sl)
{
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    memset(ss, 0, sizeof(*ss));
    if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        *sl = sizeof(*s6);
        return 0;
    }
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        *sl = sizeof(*s4);
        return 0;
    }
    return -1;
}

int netaddr_listen(const char *hostport, struct sockaddr_storage *ss, socklen_t *sl, char *why,
                   size_t whylen)
{
    char host[256];
    uint16_t port;
    if (cfg_split_hostport(hostport, host, sizeof(host), &port) != 0) {
        snprintf(why, whylen, "%s: not HOST:PORT", hostport);
        return -1;
    }
    if (from_literal(host, port, ss, sl) != 0) {
        snprintf(why, whylen, "%s: a listen address needs an IP address, not a name", hostport);
        return -1;
    }
    return 0;
}

int netaddr_bind(const char *bind, uint32_t port, struct sockaddr_storage *ss, socklen_t *sl,
                 char *why, size_t whylen)
{
    char addr[64];
    if (port == 0 || port > 65535 || cfg_bind_address(bind, addr, sizeof(addr)) != 0 ||
        from_literal(addr, (uint16_t)port, ss, sl) != 0) {
        snprintf(why, whylen, "%s:%u: not all, loopback or an address", bind, port);
        return -1;
    }
    return 0;
}

void netaddr_format(const struct sockaddr_storage *ss, char *out, size_t outlen)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        snprintf(out, outlen, "[%s]:%u", ip, ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        snprintf(out, outlen, "%s:%u", ip, ntohs(s4->sin_port));
    }
}
