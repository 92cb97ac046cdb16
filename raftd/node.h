/*
 * node.h - one Raft replica: the I/O shell around the pure core (raftd/raft/).
 *
 * The node owns the durable storage, the Raft core, the peer transport, the state
 * machine, the client API listener, the forwarder and the metrics listener, and drives
 * them from one libevent loop. It reports its phase, role, term and leader to the
 * supervisor over the status pipe.
 *
 * What it guarantees is written at the top of node.c; the short version: nothing is sent
 * before what it depends on is durable, nothing is acknowledged to a client before it is
 * committed and applied, reads are linearizable unless the client asks for a local one
 * (and is then told it may be stale), and a replica with empty state founds a cluster only
 * when a quorum of its configured peers are empty too.
 */
#ifndef SPUR_NODE_H
#define SPUR_NODE_H

#include "cfg.h"
#include "statusw.h"

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

struct node;

/*
 * Open the state in cfg->controller.state_dir (already locked), recover, start listening.
 * Returns 0 with *out, or an exit code (65 corrupt state, 71 OS failure, 78 configuration)
 * with why set.
 */
int node_open(struct event_base *base, const struct cfg *cfg, uint32_t node_id,
              struct statusw *sw, struct node **out, char *why, size_t whylen);

/*
 * Begin a graceful stop: report STOPPING, hand leadership to the most up-to-date voter
 * when leading, stop taking requests, then break the event loop once done (or after
 * a bounded wait).
 */
void node_shutdown(struct node *n);

/* Start sending status frames (after the caller's start-up frames have stopped). */
void node_enable_status(struct node *n);

/* Exit code the node wants (0 after a clean shutdown, 70 after a fatal storage error). */
int node_exit_code(const struct node *n);

/* Log one line with the node's state (SIGUSR1). */
void node_log_status(const struct node *n);

void node_free(struct node *n);

#endif
