/*
 * node.h - the Raft shell: the one owner of stepping the pure core (raftd/raft/) and of
 * handling what each step returns (persist, send, apply, snapshot, report status).
 *
 * Data flows one way through the worker (docs/design.md, "The worker's flow"):
 *
 *     api.c --request--> node_api.c --raft_event--> node_step() (node.c)
 *                                                        |
 *                     storage, transport, fsm  <---------+ handle_update()
 *                                                        |
 *     node_api.c, controller.c <--- hooks.applied() <----+ once per step
 *
 * Nothing in node.c calls node_api.c or controller.c: they are told what happened
 * through the hooks the composition root (replica.c) registered. They read the fields
 * below; only node.c writes them.
 *
 * What the shell guarantees is written at the top of node.c; the short version: nothing
 * is sent before what it depends on is durable, nothing is applied before it is
 * committed, and the status frames report a leader only once this replica is caught up.
 */
#ifndef SPUR_NODE_H
#define SPUR_NODE_H

#include "cfg.h"
#include "fsm.h"
#include "raft.h"
#include "status.h"
#include "statusw.h"
#include "storage.h"
#include "transport.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* One entry applied in a step, with the state machine's answer. */
struct node_applied_entry {
    const struct raft_entry *entry;
    const struct fsm_reply *reply; /* NULL: not a command, or the state machine gave none */
};

/*
 * What one step did that the rest of the worker waits on. Everything here is borrowed
 * for the duration of the hook.
 */
struct node_applied {
    const struct node_applied_entry *entries; /* in index order */
    size_t n_entries;
    const struct raft_read_state *reads; /* ReadIndex answers (the node's own among them) */
    size_t n_reads;
    bool state_moved;        /* entries applied or a snapshot installed */
    bool leadership_changed; /* role or leader changed */
};

/*
 * The hooks the composition root registers. applied() is called once after every step
 * of the core, including steps that applied nothing (the controller's clock runs on
 * them). peer() reports a peer's handshake (up) or its loss, for the bootstrap decision.
 * A hook may queue work for later loop turns; it must not step the core itself.
 */
struct node_hooks {
    void (*applied)(void *arg, const struct node_applied *a);
    void (*peer)(void *arg, const struct transport_peer_info *info, bool up);
    void *arg;
};

/* Messages that may go only once the persist with sequence number seq is durable. */
struct held_msgs {
    struct held_msgs *next;
    uint64_t seq;
    size_t n;
    struct tframe **frames; /* owned; encoded when the core emitted them */
};

/*
 * The shell's state. Ownership: the node owns st, raft, fsm, tr, every event and the
 * held message list; it borrows cfg, sw and base from the caller of node_open() for
 * its whole life. Written only by node.c.
 */
struct node {
    struct event_base *base; /* borrowed */
    const struct cfg *cfg;   /* borrowed */
    const struct keyring *kr; /* borrowed: the cluster key(s) peers and agents prove */
    raft_id id;
    struct statusw *sw; /* borrowed */
    bool status_ready;
    int exit_code;
    struct node_hooks hooks;

    /* storage and state */
    struct storage *st;
    struct raft *raft; /* NULL until started (bootstrap decided or state recovered) */
    struct fsm *fsm;
    uint64_t persist_seq;  /* last persist request submitted */
    uint64_t persist_done; /* last completed */
    struct held_msgs *held_head, *held_tail;
    struct event *ev_storage;
    struct event *ev_tick;
    uint64_t tick_at; /* deadline the tick timer is armed for */
    uint64_t applied;
    uint64_t snapshot_index; /* newest durable local or installed snapshot */
    bool snapshot_running;
    pthread_t snap_thread;
    bool snap_thread_valid;
    int snap_pipe[2]; /* snapshot thread -> loop */
    struct event *ev_snap;
    uint64_t last_snapshot_ms;     /* when the newest local snapshot finished */
    uint64_t last_snapshot_bytes;  /* its size */
    uint64_t bytes_since_snapshot; /* entry bytes applied since a snapshot was started */
    /* an installed snapshot waits for its persist: (cookie seq, index, term) */
    uint64_t install_seq, install_index, install_term;
    bool started; /* raft_new done */
    /* what handle_update() applied in the current step, for the applied hook: owned,
     * grown to the largest step seen (the hooks never step the core, so one is enough) */
    struct node_applied_entry *apply_entries;
    struct fsm_reply *apply_replies;
    size_t apply_cap;

    /* soft state as last reported */
    uint8_t role;
    raft_id leader;
    raft_term term;
    uint64_t leader_noop_index; /* leader: index of this term's no-op */
    uint64_t leader_changes;
    uint64_t elections_started;
    uint64_t last_leader_ms;

    /* peers */
    struct transport *tr;
    char api_address[300]; /* the client API address this replica announces */
    uint64_t next_read_id; /* ReadIndex ids, for the node's own reads and node_api's */

    /*
     * Readiness (node.c, readiness_check): this replica says "ready" (and reports the
     * leader in its status frames) only once it has applied up to a linearizable read index
     * taken from the current leader, i.e. once it could serve a linearizable read at once.
     * After every change of (term, leader) it issues such a read of its own.
     */
    bool caught_up;
    raft_term ready_term; /* the (term, leader) caught_up and the read belong to */
    raft_id ready_leader;
    uint64_t ready_read_id; /* the read in the core; 0: none outstanding */
    uint64_t ready_read_ms; /* when it was issued */
    bool ready_released;    /* the core released it at ready_index */
    uint64_t ready_index;
    bool in_readiness;        /* issuing the read steps the core: no re-entry */
    uint64_t lost_acked_seen; /* raft_counters.lost_acked already logged */

    /* shutdown */
    bool stopping;
    bool stop_transfer; /* a hand-over was started by the stop */
    struct event *ev_status;
};

/*
 * Open the state in cfg->controller.state_dir (already locked) and recover it; start the
 * core at once when the state is not empty (else the controller decides to found or join,
 * then calls node_start()). Returns 0 with *out, or an exit code (65 corrupt state, 71 OS
 * failure) with why set.
 */
int node_open(struct event_base *base, const struct cfg *cfg, uint32_t node_id, struct statusw *sw,
              const struct keyring *kr, const struct node_hooks *hooks, struct node **out,
              char *why, size_t whylen);

/* Start the core on empty state: found the cluster (found) or wait to be caught up. */
int node_start(struct node *n, bool found);

/*
 * The one way into the core: step it with ev and handle the update whole. Returns the
 * core's code; *index and *term (either may be NULL) get the proposal's place in the log.
 */
int node_step(struct node *n, const struct raft_event *ev, raft_index *index, raft_term *term);

/* A ReadIndex id no other read of this replica uses. */
uint64_t node_new_read_id(struct node *n);

/* The client API address of the known leader, or NULL. */
const char *node_leader_api(const struct node *n);

/* Knows a leader and has applied up to a read index it gave: what /readyz "ok" means. */
bool node_is_caught_up(const struct node *n);

/*
 * Begin a graceful stop: report STOPPING, and when leading with other voters, start
 * handing leadership to the most up-to-date one. Returns true when a hand-over started.
 */
bool node_begin_stop(struct node *n);

/* Start sending status frames (after the caller's start-up frames have stopped). */
void node_enable_status(struct node *n);

/* Exit code the node wants (0 after a clean shutdown, 70 after a fatal storage error). */
int node_exit_code(const struct node *n);

uint64_t node_now_ms(void);

/* The status protocol's role (and so its name in common/names) for a core role. */
enum status_role node_status_role(uint8_t raft_role);
/* Its name ("follower", "leader", ...), from the one table in common/names. */
const char *node_role_name(uint8_t raft_role);

void node_free(struct node *n);

#endif
