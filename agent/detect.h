/*
 * detect.h - what this node is: its name, the address the leader dials, its CPUs and
 * memory, for RegisterNode and every Pong.
 *
 * Guarantees:
 *   - A configured value (agent.node_name, agent.address, agent.cpus, agent.mem_mb, or the
 *     options that override them) always wins; detection fills only what is left at its
 *     "detect" value ("" or 0).
 *   - CPUs: the count of CPUs spurd may run on (sched_getaffinity), lowered to the cgroup's
 *     cpu.max quota when one is set; memory: MemTotal of /proc/meminfo, lowered to the
 *     cgroup's memory.max when one is set. So an agent in a container offers what the
 *     container may use, never the host's whole size. Never 0: at least 1 CPU and 1 MiB.
 *   - The address: agent.address when set; else the listen address when its host is a
 *     specific address; else "<FQDN of this host>:<listen port>" (the short hostname when
 *     the resolver knows no canonical name).
 *
 * The parsers and the rules that combine are pure (detect_parse_*, detect_combine_*,
 * detect_address, detect_short_name), tested with sample contents; detect_node() does the
 * reading. The cgroup limits come from cgroup.c (cgroup_detect_cpus_mem()), which owns
 * the cgroup hierarchy; main passes them in.
 */
#ifndef SPUR_DETECT_H
#define SPUR_DETECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* MemTotal of /proc/meminfo text, in MiB (rounded down). Returns 0, or -1 if absent. */
int detect_parse_meminfo(const char *text, uint64_t *mem_mb);
/* The lower of the two, a limit of 0 meaning none; never below 1. */
uint32_t detect_combine_cpus(uint32_t online, uint32_t cgroup_limit);
uint64_t detect_combine_mem(uint64_t physical_mb, uint64_t cgroup_limit_mb);
/*
 * Whether name can be a node's name as partitions list them: 1 to 64 letters, digits,
 * '.', '-' and '_'. 0, or -1 with why ("may hold only ...").
 */
int detect_check_node_name(const char *name, char *why, size_t whylen);
/* hostname up to its first '.', into out (truncated to fit). */
void detect_short_name(const char *hostname, char *out, size_t outlen);
/*
 * The address the leader dials: listen itself when its host is a specific address (not
 * "::", "0.0.0.0" or empty), else "fqdn:PORT" (IPv6 literals in brackets). Returns 0, or
 * -1 when listen is not HOST:PORT or out is too small.
 */
int detect_address(const char *listen, const char *fqdn, char *out, size_t outlen);

struct detect_result {
    char node_name[256];
    char address[320];
    uint32_t cpus;
    uint64_t mem_mb;
};

/*
 * Fill r from the configured values (name, address: "" to detect; cpus, mem_mb: 0 to
 * detect) and the host, with the cgroup limits given (0: none). Returns 0, or -1 with err
 * (the host name or the address cannot be found, /proc/meminfo unreadable).
 */
int detect_node(const char *name, const char *address, const char *listen, uint32_t cpus,
                uint64_t mem_mb, uint32_t cgroup_cpus, uint64_t cgroup_mem_mb,
                struct detect_result *r, char *err, size_t errlen);

#endif
