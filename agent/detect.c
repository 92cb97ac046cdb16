/*
 * detect.c - the node's name, address, CPUs and memory; contract in detect.h.
 */
#include "detect.h"

#include "netaddr.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int detect_parse_meminfo(const char *text, uint64_t *mem_mb)
{
    const char *p = text;
    while (strncmp(p, "MemTotal:", 9) != 0) {
        p = strchr(p, '\n');
        if (p == NULL)
            return -1;
        p++;
    }
    p += 9;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long kb = strtoull(p, &end, 10);
    if (errno != 0)
        return -1;
    while (*end == ' ' || *end == '\t')
        end++;
    if (strncmp(end, "kB", 2) != 0)
        return -1;
    *mem_mb = kb / 1024;
    return 0;
}

uint32_t detect_combine_cpus(uint32_t online, uint32_t cgroup_limit)
{
    uint32_t v = online;
    if (cgroup_limit != 0 && (v == 0 || cgroup_limit < v))
        v = cgroup_limit;
    return v ? v : 1;
}

uint64_t detect_combine_mem(uint64_t physical_mb, uint64_t cgroup_limit_mb)
{
    uint64_t v = physical_mb;
    if (cgroup_limit_mb != 0 && (v == 0 || cgroup_limit_mb < v))
        v = cgroup_limit_mb;
    return v ? v : 1;
}

int detect_check_node_name(const char *name, char *why, size_t whylen)
{
    size_t n = strlen(name);
    if (n == 0 || n > 64) {
        snprintf(why, whylen, "is %zu bytes; a node name has 1 to 64", n);
        return -1;
    }
    if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != n) {
        snprintf(why, whylen, "may hold only letters, digits, '.', '-' and '_'");
        return -1;
    }
    return 0;
}

void detect_short_name(const char *hostname, char *out, size_t outlen)
{
    size_t n = strcspn(hostname, ".");
    if (n >= outlen)
        n = outlen - 1;
    memcpy(out, hostname, n);
    out[n] = '\0';
}

int detect_address(const char *listen, const char *fqdn, char *out, size_t outlen)
{
    char host[256];
    uint16_t port;
    if (netaddr_split_hostport(listen, host, sizeof(host), &port) != 0)
        return -1;
    int n;
    if (host[0] != '\0' && strcmp(host, "::") != 0 && strcmp(host, "0.0.0.0") != 0)
        n = snprintf(out, outlen, "%s", listen);
    else if (strchr(fqdn, ':') != NULL)
        n = snprintf(out, outlen, "[%s]:%u", fqdn, (unsigned)port);
    else
        n = snprintf(out, outlen, "%s:%u", fqdn, (unsigned)port);
    return n < 0 || (size_t)n >= outlen || fqdn[0] == '\0' ? -1 : 0;
}

/* The host's canonical name, or its name as gethostname() gives it. */
static void fqdn_of(const char *hostname, char *out, size_t outlen)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_flags = AI_CANONNAME;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(hostname, NULL, &hints, &ai) == 0 && ai && ai->ai_canonname &&
        ai->ai_canonname[0] != '\0')
        snprintf(out, outlen, "%s", ai->ai_canonname);
    else
        snprintf(out, outlen, "%s", hostname);
    if (ai)
        freeaddrinfo(ai);
}

static uint64_t physical_mem_mb(char *err, size_t errlen)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (f == NULL) {
        snprintf(err, errlen, "/proc/meminfo: cannot open: %s", strerror(errno));
        return 0;
    }
    char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    uint64_t mb;
    if (detect_parse_meminfo(buf, &mb) != 0) {
        snprintf(err, errlen, "/proc/meminfo: no MemTotal line");
        return 0;
    }
    return mb;
}

int detect_node(const char *name, const char *address, const char *listen, uint32_t cpus,
                uint64_t mem_mb, uint32_t cgroup_cpus, uint64_t cgroup_mem_mb,
                struct detect_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof(*r));
    char hostname[256] = "";
    if (gethostname(hostname, sizeof(hostname) - 1) != 0 || hostname[0] == '\0') {
        if ((name == NULL || name[0] == '\0') || (address == NULL || address[0] == '\0')) {
            snprintf(err, errlen, "gethostname: %s", strerror(errno));
            return -1;
        }
    }
    if (name && name[0])
        snprintf(r->node_name, sizeof(r->node_name), "%s", name);
    else
        detect_short_name(hostname, r->node_name, sizeof(r->node_name));
    if (address && address[0]) {
        snprintf(r->address, sizeof(r->address), "%s", address);
    } else {
        char fqdn[256];
        fqdn_of(hostname, fqdn, sizeof(fqdn));
        if (detect_address(listen, fqdn, r->address, sizeof(r->address)) != 0) {
            snprintf(err, errlen, "agent.address: cannot derive one from listen %s and host %s",
                     listen, fqdn);
            return -1;
        }
    }
    if (cpus != 0) {
        r->cpus = cpus;
    } else {
        cpu_set_t set;
        uint32_t online = 0;
        if (sched_getaffinity(0, sizeof(set), &set) == 0)
            online = (uint32_t)CPU_COUNT(&set);
        else
            online = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
        r->cpus = detect_combine_cpus(online, cgroup_cpus);
    }
    if (mem_mb != 0) {
        r->mem_mb = mem_mb;
    } else {
        uint64_t phys = physical_mem_mb(err, errlen);
        if (phys == 0)
            return -1;
        r->mem_mb = detect_combine_mem(phys, cgroup_mem_mb);
    }
    return 0;
}
