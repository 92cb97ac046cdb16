/*
 * node_api.h - client requests on a replica: each request becomes a Raft event (a
 * proposal, a ReadIndex, a membership change, a transfer) stepped through node_step(),
 * or is forwarded to the leader, or answered at once; its waiter is completed from the
 * node's applied hook (node_api_applied). See node_api.c for what goes where.
 *
 * Ownership: struct node_api owns its waiters, the proposal batch and its two timers;
 * it borrows the node and the forwarder from the composition root (replica.c), which
 * frees it before them. Every api_call it holds gets exactly one answer, at the latest
 * from node_api_fail_all() or node_api_free().
 */
#ifndef SPUR_NODE_API_H
#define SPUR_NODE_API_H

#include "api.h"
#include "forwarder.h"
#include "node.h"

#include <stddef.h>
#include <stdint.h>

struct node_api;

struct node_api_stats {
    uint64_t proposals;    /* client writes proposed here */
    uint64_t forwarded;    /* requests forwarded to the leader */
    uint64_t reads_served; /* reads answered, linearizable or local */
    uint64_t stale_reads;  /* of those, local reads marked stale */
};

struct node_api *node_api_new(struct node *n, struct forwarder *fwd);
void node_api_free(struct node_api *a);

/* The api_server's dispatch callback (arg: the struct node_api). */
void node_api_dispatch(void *arg, struct api_call *call, Spur__Api__Request *req);

/*
 * Who may ask what, decided before anything else is looked at (the dispatch's first
 * step; pure: reads the request only). Returns a Spur__Api__Code:
 *   CODE_UNAUTHENTICATED  no proved caller (Request.caller NULL) and not a Ping
 *   CODE_DENIED           an operator-only request from a caller that is not an operator:
 *                         update_node; register_node, unless from an agent (method
 *                         "agent": a node agent registers its own node); transfer_leader,
 *                         add_learner, promote, remove; a token for another user
 *   CODE_OK               anything else
 * Reads (ping, raft_status, get_jobs, get_job, get_nodes, get_partitions, acct_query) are
 * open to any
 * authenticated caller (Slurm's default without PrivateData). Job writes are open here:
 * who owns a job is decided by the state machine (raftd/fsm/fsm_cmd.h), so every replica
 * agrees; a signal by the leader's jobctl (jobctl_may_signal()).
 */
int node_api_permit(const Spur__Api__Request *req);

/* The node's applied hook: complete what the step released. */
void node_api_applied(struct node_api *a, const struct node_applied *ap);

/*
 * Queue an internal command (the controller's partitions, settings, log clock) for the
 * next batch; takes data. refused(arg) is called when the core does not take the batch.
 */
void node_api_propose_internal(struct node_api *a, uint8_t *data, size_t len,
                               void (*refused)(void *arg), void *arg);

/*
 * Who answers SignalJobRequest on the leader (the leader's job duties, set by the
 * composition root): called with the call and its request, which it answers exactly once.
 * A follower forwards the request to the leader like a write; with no handler set the
 * request is answered INVALID.
 */
typedef void (*node_api_op_fn)(void *arg, struct api_call *call, Spur__Api__Request *req);
void node_api_set_signal_handler(struct node_api *a, node_api_op_fn fn, void *arg);

/*
 * Who answers AcctQueryRequest (sacct) on the leader, and fills RaftStatusResponse's
 * acct_* fields (accounting, set by the composition root): query as the signal handler
 * (a follower forwards; no handler: INVALID); status called with the response being
 * built, its strings borrowed until the reply is sent. NULL fns: none.
 */
typedef void (*node_api_status_fn)(void *arg, Spur__Api__RaftStatusResponse *s);
void node_api_set_acct_handler(struct node_api *a, node_api_op_fn query,
                               node_api_status_fn status, void *arg);

/* Answer every waiting request UNAVAILABLE with why (a stop, a fatal error). */
void node_api_fail_all(struct node_api *a, const char *why);

/* Requests waiting for an answer (queued, proposed or reading). */
size_t node_api_waiting(const struct node_api *a);

void node_api_get_stats(const struct node_api *a, struct node_api_stats *out);

#endif
