/*
 * netaddr.c - the configuration's address grammar and socket addresses; see netaddr.h.
 */
#include "netaddr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool netaddr_port_ok(unsigned long port)
{
    return port >= NETADDR_PORT_MIN && port <= NETADDR_PORT_MAX;
}

/* A host outside brackets: a name or an IPv4 literal, never empty. */
static bool plain_host_ok(const char *h, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)h[i];
        if (!(isalnum(ch) || ch == '.' || ch == '-' || ch == '_'))
            return false;
    }
    return true;
}

/* The port after the colon: 1 to 5 decimal digits, in range, nothing after them. */
static int parse_port(const char *p, uint16_t *port)
{
    if (*p == '\0' || strlen(p) > 5)
        return -1;
    unsigned long v = 0;
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (!netaddr_port_ok(v))
        return -1;
    *port = (uint16_t)v;
    return 0;
}

int netaddr_split_hostport(const char *s, char *host, size_t hostlen, uint16_t *port)
{
    const char *h, *colon;
    size_t hlen;

    if (s == NULL || *s == '\0')
        return -1;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL || rb[1] != ':')
            return -1;
        h = s + 1;
        hlen = (size_t)(rb - h);
        if (hlen == 0)
            return -1;
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL || strchr(s, ':') != colon)
            return -1; /* no port, or a bare IPv6 address without brackets */
        h = s;
        hlen = (size_t)(colon - s);
        if (!plain_host_ok(h, hlen))
            return -1;
    }
    if (hlen >= hostlen)
        return -1;
    uint16_t p;
    if (parse_port(colon + 1, &p) != 0)
        return -1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = p;
    return 0;
}

int netaddr_bind_address(const char *bind, char *addr, size_t addrlen)
{
    unsigned char bytes[sizeof(struct in6_addr)];
    if (strcmp(bind, "all") == 0) {
        snprintf(addr, addrlen, "::");
        return 0;
    }
    if (strcmp(bind, "loopback") == 0) {
        snprintf(addr, addrlen, "127.0.0.1");
        return 0;
    }
    if (inet_pton(AF_INET, bind, bytes) == 1 || inet_pton(AF_INET6, bind, bytes) == 1) {
        snprintf(addr, addrlen, "%s", bind);
        return 0;
    }
    return -1;
}

int netaddr_check_hostport(const char *v, char *why, size_t whylen)
{
    char host[256];
    uint16_t port;
    if (netaddr_split_hostport(v, host, sizeof(host), &port) != 0) {
        snprintf(why, whylen, "\"%s\" is not HOST:PORT (IPv6 as [ADDR]:PORT, port 1-65535)", v);
        return -1;
    }
    return 0;
}

int netaddr_check_bind(const char *v, char *why, size_t whylen)
{
    char addr[64];
    if (netaddr_bind_address(v, addr, sizeof(addr)) != 0) {
        snprintf(why, whylen, "\"%s\" is not all, loopback or an IP address", v);
        return -1;
    }
    return 0;
}

/* An address as bytes for comparison: 16 bytes, IPv4 as ::ffff:a.b.c.d. false: a name. */
static bool addr_bytes(const char *host, unsigned char out[16])
{
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &a4, 4);
        return true;
    }
    return inet_pton(AF_INET6, host, out) == 1;
}

static bool addr_is_any(const unsigned char a[16])
{
    static const unsigned char any6[16], any4[16] = {[10] = 0xff, [11] = 0xff};
    return memcmp(a, any6, 16) == 0 || memcmp(a, any4, 16) == 0;
}

bool netaddr_hosts_overlap(const char *a, const char *b)
{
    unsigned char x[16], y[16];
    if (!addr_bytes(a, x) || !addr_bytes(b, y))
        return true;
    return addr_is_any(x) || addr_is_any(y) || memcmp(x, y, 16) == 0;
}

bool netaddr_same_host(const char *a, const char *b)
{
    unsigned char x[16], y[16];
    bool ax = addr_bytes(a, x), by = addr_bytes(b, y);
    if (ax && by)
        return memcmp(x, y, 16) == 0;
    return !ax && !by && strcasecmp(a, b) == 0;
}

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
    if (netaddr_split_hostport(hostport, host, sizeof(host), &port) != 0) {
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
    if (!netaddr_port_ok(port) || netaddr_bind_address(bind, addr, sizeof(addr)) != 0 ||
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
