/*
 * replica.h - one Raft replica as the worker's main runs it: the composition root that
 * builds the shell (node.c), the request path (node_api.c), the controller's policy
 * (controller.c), the client API listener, the forwarder and the metrics listener, and
 * wires them together so that data flows one way (docs/design.md, "The worker's flow").
 */
#ifndef SPUR_REPLICA_H
#define SPUR_REPLICA_H

#include "cfg.h"
#include "statusw.h"

#include <event2/event.h>
#include <stdint.h>

struct replica;
struct keyring;

/* What the worker's main gives the replica beside the configuration. */
struct replica_options {
    /* The cluster key(s) (auth.key_file, auth.next_key_file), loaded by main before
     * anything binds: the peers, the forwarder and the agent connections prove them.
     * Borrowed; outlives the replica. */
    const struct keyring *keyring;
};

/*
 * Open the state in cfg->controller.state_dir (already locked), recover, start listening.
 * Returns 0 with *out, or an exit code (65 corrupt state, 71 OS failure, 78 configuration)
 * with why set. cfg, o's keyring, sw and base are borrowed for the replica's life.
 */
int replica_open(struct event_base *base, const struct cfg *cfg, uint32_t node_id,
                 struct statusw *sw, const struct replica_options *o, struct replica **out,
                 char *why, size_t whylen);

/*
 * Begin a graceful stop: report STOPPING, hand leadership to the most up-to-date voter
 * when leading, stop taking requests, then break the event loop once done (or after
 * a bounded wait).
 */
void replica_shutdown(struct replica *r);

/* Start sending status frames (after the caller's start-up frames have stopped). */
void replica_enable_status(struct replica *r);

/* Exit code the replica wants (0 after a clean shutdown, 70 after a fatal storage error). */
int replica_exit_code(const struct replica *r);

/* Log one line with the replica's state (SIGUSR1). */
void replica_log_status(const struct replica *r);

void replica_free(struct replica *r);

#endif
