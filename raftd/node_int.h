/*
 * node_int.h - what node.c, node_api.c and node_metrics.c share: the node's struct and
 * the calls between them. Not for use outside raftd/node*.c.
 */
#ifndef SPUR_NODE_INT_H
#define SPUR_NODE_INT_H

#include "api.h"
#include "cfg.h"
#include "forward.h"
#include "fsm.h"
#include "httpd.h"
#include "node.h"
#include "raft.h"
#include "statusw.h"
#include "storage.h"
#include "transport.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Messages that may go only once the persist with sequence number seq is durable. */
struct held_msgs {
    struct held_msgs *next;
    uint64_t seq;
    size_t n;
    struct tframe **frames; /* encoded when the core emitted them */
};

/* A client waiting for a proposal to be applied. */
struct prop_waiter {
    struct prop_waiter *next;
    uint64_t index;
    uint64_t term;
    uint64_t deadline_ms;
    struct api_call *call;
    int kind; /* WAIT_FSM, WAIT_CHANGE */
};

/* A client waiting for a linearizable read, or for a transfer to finish. */
struct read_waiter {
    struct read_waiter *next;
    uint64_t read_id;
    uint64_t index;     /* set once the core released the read */
    bool released;
    uint64_t deadline_ms;
    struct api_call *call;
    Spur__Api__Request *req; /* borrowed from the call */
};

enum { WAIT_FSM = 1, WAIT_CHANGE = 2 };

/* A proposal queued for the next batch. */
struct pending_prop {
    uint8_t *data; /* owned; fsm command bytes */
    size_t len;
    struct api_call *call; /* NULL for internal proposals */
    uint64_t deadline_ms;
};

struct node {
    struct event_base *base;
    const struct cfg *cfg;
    raft_id id;
    struct statusw *sw;
    bool status_ready;
    int exit_code;

    /* storage and state */
    struct storage *st;
    struct raft *raft;
    struct fsm *fsm;
    uint64_t persist_seq;      /* last persist request submitted */
    uint64_t persist_done;     /* last completed */
    struct held_msgs *held_head, *held_tail;
    struct event *ev_storage;
    struct event *ev_tick;
    uint64_t tick_at;          /* deadline the tick timer is armed for */
    uint64_t applied;
    uint64_t snapshot_index;   /* newest durable local or installed snapshot */
    bool snapshot_running;
    pthread_t snap_thread;
    bool snap_thread_valid;
    int snap_pipe[2];          /* snapshot thread -> loop */
    struct event *ev_snap;
    uint64_t last_snapshot_ms; /* when the newest local snapshot finished */
    uint64_t last_snapshot_bytes;  /* its size */
    uint64_t bytes_since_snapshot; /* entry bytes applied since a snapshot was started */
    /* an installed snapshot waits for its persist: (cookie seq, index, term) */
    uint64_t install_seq, install_index, install_term;

    /* bootstrap */
    bool started;              /* raft_new done */
    bool waiting_logged;
    struct event *ev_boot;
    uint64_t boot_deadline_ms;
    bool peer_empty[CFG_MAX_PEERS + 1];
    bool peer_has_cluster[CFG_MAX_PEERS + 1];
    bool peer_lists_us[CFG_MAX_PEERS + 1];

    /* soft state as last reported */
    uint8_t role;
    raft_id leader;
    raft_term term;
    uint64_t leader_noop_index; /* leader: index of this term's no-op */
    uint64_t leader_changes;
    uint64_t elections_started;
    uint64_t last_leader_ms;

    /* networking */
    struct transport *tr;
    struct api_server *api;
    struct forwarder *fwd;
    struct httpd *metrics;
    char api_address[300];

    /* clients */
    struct prop_waiter *props_head, *props_tail;
    struct read_waiter *reads;
    uint64_t next_read_id;
    struct pending_prop *batch;
    size_t nbatch, capbatch;
    struct event *ev_flush;
    struct event *ev_sweep;
    struct read_waiter *transfers; /* waiting for leadership to move */
    uint64_t config_sync_index; /* leader: proposed partitions/settings at this term */
    raft_term config_sync_term;
    uint64_t last_fsm_tick_ms;

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
    uint64_t stop_deadline_ms;
    uint64_t stop_moved_ms; /* when leadership had left during a stop */
    bool stop_transfer;     /* a hand-over was started by the stop */
    struct event *ev_status;

    /* counters */
    uint64_t proposals;
    uint64_t forwarded;
    uint64_t reads_served;
    uint64_t stale_reads;
};

/* node.c */
void node_step(struct node *n, const struct raft_event *ev);
/* Step and also report the proposal's (index, term) and the leader after the step. */
int node_step_ex(struct node *n, const struct raft_event *ev, raft_index *pindex,
                 raft_term *pterm, raft_id *leader);
void node_tick_now(struct node *n);
uint64_t node_now_ms(void);
const char *node_leader_api(const struct node *n);
void node_report_status(struct node *n, bool force);
/* Knows a leader and has applied up to a read index it gave: what /readyz "ok" means. */
bool node_is_caught_up(const struct node *n);

/* node_api.c */
int node_api_init(struct node *n);
void node_api_fini(struct node *n);
void node_api_dispatch(void *arg, struct api_call *call, Spur__Api__Request *req);
void node_api_applied(struct node *n, const struct raft_entry *e, struct fsm_reply *reply);
void node_api_reads_released(struct node *n, const struct raft_read_state *rs, size_t nrs);
void node_api_serve_ready_reads(struct node *n);
void node_api_leader_changed(struct node *n);
void node_api_fail_all(struct node *n, const char *why);
void node_api_sweep(struct node *n);
void node_api_propose_internal(struct node *n, uint8_t *data, size_t len);
void node_api_flush(struct node *n);
size_t node_api_waiting(const struct node *n);

/* node_metrics.c */
void node_metrics_handler(void *arg, const char *path, struct httpd_reply *reply);

#endif
