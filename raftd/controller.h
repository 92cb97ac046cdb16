/*
 * controller.h - the controller's policy on top of the Raft shell: when to found a
 * cluster, what the leader proposes on its own (the configuration file's partitions and
 * settings, the log clock). The mechanisms it uses are the node's (node_start) and the
 * request path's (node_api_propose_internal); it decides, they do.
 *
 * Ownership: struct controller owns its boot timer and the state machine's view of the
 * configuration (partition values borrowing the strings of cfg); it borrows the node, the
 * request path and cfg from the composition root (replica.c), which frees it first.
 */
#ifndef SPUR_CONTROLLER_H
#define SPUR_CONTROLLER_H

#include "cfg.h"
#include "fsm.h"
#include "node.h"
#include "node_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct controller;

struct controller *controller_new(struct node *n, struct node_api *api, const struct cfg *cfg);
void controller_free(struct controller *c);

/*
 * After node_open(): when the state was empty, found the cluster at once if this is the
 * only configured member, else wait for the peers' handshakes (controller_peer). Returns 0
 * or an exit code with why set.
 */
int controller_start(struct controller *c, char *why, size_t whylen);

/* The node's applied hook: the leader's duties run on every step. */
void controller_applied(struct controller *c, const struct node_applied *a);

/* The node's peer hook: a peer's handshake said what it holds. */
void controller_peer(struct controller *c, const struct transport_peer_info *info, bool up);

/*
 * The bootstrap rule, pure: with empty state, found (FOUND) when a quorum of the npeers
 * configured members, this one included, report empty state and none runs a cluster;
 * join (JOIN) when any peer runs one; else wait (WAIT). has_cluster[id] and empty[id] are
 * indexed by node id 1..npeers (self is counted empty whatever its slot says).
 */
enum controller_boot { CONTROLLER_BOOT_WAIT, CONTROLLER_BOOT_FOUND, CONTROLLER_BOOT_JOIN };
enum controller_boot controller_boot_decide(size_t npeers, uint32_t self, const bool *has_cluster,
                                            const bool *empty, uint32_t *cluster_peer);

/* The configuration's partitions and settings as the state machine takes them. */
struct controller_fsm_conf {
    struct fsm_partition_conf *parts; /* owned; strings borrowed from the cfg */
    size_t n;
    struct fsm_settings_conf settings;
};
int controller_fsm_conf(const struct cfg *cfg, struct controller_fsm_conf *out);
void controller_fsm_conf_free(struct controller_fsm_conf *c);

#endif
