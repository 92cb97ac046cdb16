/*
 * register.h - spurd tells the controller it exists: RegisterNode{name, address, cpus,
 * mem_mb, from_agent = true} through the client API (client/spurclient, a blocking call),
 * sent to any replica of controller.hosts (or SPUR_CONTROLLER, as the CLI reads it); the
 * replicas forward the write to the leader.
 *
 * Guarantees:
 *   - A registration is a write with one (client id, seq) for all its retries, so a retry
 *     after a lost answer changes nothing twice.
 *   - Each call ends within the timeout given; every failure is logged once with why.
 *   - register_until() retries with a growing delay (1 s doubling to 30 s, jittered)
 *     until a replica answers OK or *stop becomes true (SIGTERM), checked at least every
 *     100 ms while it waits.
 *
 * from_agent = true is what lets a node that went DOWN for not responding come back: the
 * controller clears the flag it set then, never an operator's "down".
 *
 * Authentication: every connection to the client API proves the cluster key first
 * (chan.h's handshake, spurd the initiator in role "agent", the replica the responder in
 * role "controller") and seals every frame after it (spurclient.h, cluster-key mode); a
 * replica then acts on the registration as the member "spur:agent". A replica that holds
 * no common key refuses the handshake, and the failure says so ("no common cluster key").
 *
 * Ownership: struct registrar owns its spurclient and its copies of the hosts; it
 * borrows the keyring, which must outlive it; the strings in struct register_node are
 * the caller's.
 */
#ifndef SPUR_REGISTER_H
#define SPUR_REGISTER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct register_node {
    const char *name;
    const char *address;
    uint32_t cpus;
    uint64_t mem_mb;
};

struct registrar;

struct keyring;

/*
 * hosts: the comma list of SPUR_CONTROLLER when env is set and not empty, else cfg_hosts.
 * kr: the cluster keys spurd loaded (auth.key_file, auth.next_key_file); borrowed.
 * Returns NULL with err (no host at all, no keyring or cluster name, out of memory).
 */
struct registrar *register_new(const char *env, const char *const *cfg_hosts, size_t ncfg,
                               const char *cluster_name, const struct keyring *kr,
                               uint32_t max_frame, char *err, size_t errlen);
void register_free(struct registrar *r);

/* One registration, within timeout_ms. Returns 0 (OK), or -1 with err. */
int register_once(struct registrar *r, const struct register_node *n, uint32_t timeout_ms,
                  char *err, size_t errlen);

/* The delay before retry number failures (1 ...): 1 s doubling, at most 30 s. Pure. */
uint32_t register_backoff_ms(unsigned failures);

/* Register, retrying, until OK (returns 0) or *stop (returns -1). */
int register_until(struct registrar *r, const struct register_node *n, volatile sig_atomic_t *stop);

#endif
