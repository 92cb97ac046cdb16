/*
 * fsm_nodes.h - the nodes and partitions of the replicated state.
 *
 * Guarantees:
 *   - Nodes are kept sorted by name (byte order), so lookups are binary searches and
 *     every walk (answers, snapshots, "ALL" partitions) sees them in one order on every
 *     replica. Partitions keep the order the configuration gave them.
 *   - A node's reported state is derived, never stored: UNKNOWN until it registers, DOWN
 *     when marked down, DRAINING / DRAINED when marked to drain (with / without CPUs
 *     allocated), else IDLE, MIXED or ALLOCATED by its allocated CPUs. So a resume
 *     lands in IDLE, MIXED or ALLOCATED by itself, and no flag can disagree with the
 *     allocation.
 *   - Partitions are validated as a whole (fsm_nodes_check_parts()) before they replace
 *     the old ones; the same check runs on the leader before it proposes them, so an
 *     invalid configuration never reaches the log.
 *   - A partition's node list may name nodes that never registered: they exist as
 *     placeholders (NODE_UNKNOWN) while a partition names them.
 *
 * Ownership: struct fsm_nodes owns its nodes and partitions and every string in them.
 */
#ifndef SPUR_FSM_NODES_H
#define SPUR_FSM_NODES_H

#include "spur.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FSM_NAME_MAX       64 /* node, partition and feature names */
#define FSM_MAX_PARTITIONS 64
#define FSM_MAX_NODES      65536 /* nodes in the state, and named by one partition */
#define FSM_MAX_FEATURES   64
#define FSM_ADDRESS_MAX    256
#define FSM_REASON_MAX     256

struct fsm_node {
    char *name;      /* owned */
    char *address;   /* owned, "" when none */
    char **features; /* owned array of owned strings */
    uint32_t nfeatures;
    uint32_t cpus;
    uint32_t alloc_cpus;
    uint32_t njobs; /* running jobs with an unfinished part here */
    uint64_t mem_mb;
    uint64_t alloc_mem_mb;
    char *reason; /* owned, NULL when none */
    uint64_t reason_time_ms;
    char *reason_user;    /* owned, who set the reason (NULL with none, or unknown) */
    uint32_t reason_uid;
    uint64_t last_seen_ms;
    uint32_t launch_failures; /* failed launches in a row; 3 drain the node */
    bool registered;
    bool down;
    bool drain;
    bool not_responding; /* down was set by NodesNotResponding; its agent clears it */
};

struct fsm_part {
    char *name;       /* owned */
    char *nodes_expr; /* owned: "ALL" or the list as configured */
    char **nodes;     /* owned: the configured names, in order; none when all */
    char **sorted;    /* owned array, borrowed strings: nodes sorted, for membership */
    size_t nnodes;
    bool all;
    bool is_default;
    bool up;
    uint32_t max_nodes; /* 0: no limit (as every max_ here) */
    uint32_t max_time_min;
    uint32_t max_cpus_per_node;
    uint64_t max_mem_mb_per_node;
};

struct fsm_nodes {
    struct fsm_node **v; /* owned, sorted by name */
    size_t n;
    size_t cap;
    struct fsm_part *parts; /* owned, configuration order */
    size_t nparts;
};

void fsm_nodes_init(struct fsm_nodes *ns);
void fsm_nodes_free(struct fsm_nodes *ns);

/* Letters, digits, '.', '-', '_'; 1 to max bytes. */
bool fsm_name_ok(const char *s, size_t max);
/* No control characters (tabs included) and at most max bytes. */
bool fsm_text_ok(const char *s, size_t max);

struct fsm_node *fsm_nodes_find(const struct fsm_nodes *ns, const char *name);
/*
 * Insert a new, unregistered node with this (valid, unused) name in name order. NULL
 * when out of memory.
 */
struct fsm_node *fsm_nodes_add(struct fsm_nodes *ns, const char *name);
/* Spur__Api__NodeState of a node, derived as described above. */
int fsm_node_state(const struct fsm_node *node);
/* Registered, not down, not draining: may take new work. */
bool fsm_node_usable(const struct fsm_node *node);
/* Replace a node's reason (NULL or "" clears it). Returns 0 or -1 (out of memory). */
int fsm_node_set_reason(struct fsm_node *node, const char *reason, uint64_t time_ms);
/*
 * The same, recording who set it (the caller of the command, proved). The controller's own
 * reasons (not responding, failed launches) go through fsm_node_set_reason() and are set
 * by root, uid 0, as Slurm's by its default SlurmUser. user NULL or "": not known.
 */
int fsm_node_set_reason_by(struct fsm_node *node, const char *reason, uint64_t time_ms,
                           const char *user, uint32_t uid);
/* Replace address and features (copies). Returns 0 or -1; the node is unchanged on -1. */
int fsm_node_set_identity(struct fsm_node *node, const char *address, char *const *features,
                          size_t nfeatures);

struct fsm_part *fsm_nodes_part(const struct fsm_nodes *ns, const char *name);
/* The default partition, or NULL when there are none. */
struct fsm_part *fsm_nodes_default_part(const struct fsm_nodes *ns);
bool fsm_part_has_node(const struct fsm_part *p, const char *name);

/*
 * Check a partition list as SetPartitions carries it: at most FSM_MAX_PARTITIONS, valid
 * unique names, at most one default, valid node names named once each. Returns 0, or -1 with a
 * one-line reason in err.
 */
int fsm_nodes_check_parts(Spur__Api__Partition *const *parts, size_t n, char *err, size_t errlen);
/*
 * Replace the partitions with a checked list: the first partition becomes the default
 * when none says so; placeholders are created for named nodes that do not exist and
 * dropped when no partition names them any more. Returns 0 or -1 (out of memory: the
 * old partitions stay, placeholders may have been added).
 */
int fsm_nodes_set_parts(struct fsm_nodes *ns, Spur__Api__Partition *const *parts, size_t n);
/* Whether a checked list equals the current partitions (after the default rule). */
bool fsm_nodes_parts_equal(const struct fsm_nodes *ns, Spur__Api__Partition *const *parts,
                           size_t n);
/*
 * Fill out with a partition as SetPartitions would carry it (borrowed strings; nodes is
 * the configured list).
 */
void fsm_part_fill(const struct fsm_part *p, Spur__Api__Partition *out);

#endif
