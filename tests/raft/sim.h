/*
 * sim.h - a deterministic simulated cluster for the Raft core.
 *
 * The simulator owns N cores and everything around them that a real shell would do: a
 * network (per-message delay, loss, duplication, reordering, link-level partitions), a
 * disk per node (writes that complete later, in order, and a crash that loses every write
 * not yet complete), an application state machine (a hash chain over applied entries, with
 * snapshots), and virtual time. Nothing reads a real clock; every random choice comes from
 * the seed, so a run is reproducible from (seed, configuration).
 *
 * After every step of every node it checks the safety invariants and records the first
 * violation in sim_failure():
 *   - at most one leader per term;
 *   - log matching: an (index, term) pair names one entry (data and previous term) in
 *     every log of the cluster, which by induction makes logs identical up to it;
 *   - leader completeness: a node that becomes leader holds every entry known committed;
 *   - state machine safety: no two nodes apply different entries at one index, every node
 *     applies in order without gaps, and an installed snapshot equals what others applied;
 *   - durability contract: messages released after persistence never precede the write;
 *   - proposal cap: a leader's uncommitted bytes of its term stay within
 *     max_uncommitted_bytes (one proposal may pass it when nothing else was uncommitted),
 *     and a proposal is refused with RAFT_EBUSY only when it would pass the cap.
 *
 * sim_run also checks two liveness properties after healing: a proposal commits and every
 * member applies it; then, with no further proposals, a follower that restarts catches up
 * with the leader's commit index within a few heartbeats (the idle catch-up).
 *
 * Two ways to drive it:
 *   - manual (tests and scenarios): messages wait in a mailbox until sim_deliver(); disk
 *     writes complete at once unless a node's disk is set to manual (then sim_persist());
 *   - random (sim_run): a seeded chaos schedule, then a heal phase that checks liveness.
 */
#ifndef SPUR_TESTS_SIM_H
#define SPUR_TESTS_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "raft.h"

#define SIM_MAX_NODES 9

struct sim_config {
    uint32_t voters; /* nodes 1..voters are bootstrapped as voters */
    uint32_t spares; /* nodes voters+1.. start empty, outside the configuration */
    uint64_t seed;
    uint32_t election_ms;  /* default 100 */
    uint32_t heartbeat_ms; /* default 20 */
    bool disable_prevote;
    bool disable_check_quorum;
    uint32_t max_inflight_msgs;
    uint32_t max_msg_bytes;
    uint32_t snapshot_chunk_bytes;  /* default 512 in the simulator, to exercise chunks */
    uint64_t max_uncommitted_bytes; /* 0: the core's default */
    FILE *trace;                    /* readable trace of every event; NULL: none */
};

struct sim;

struct sim *sim_new(const struct sim_config *cfg);
void sim_free(struct sim *s);
const char *sim_failure(const struct sim *s); /* NULL while every invariant holds */
uint64_t sim_now(const struct sim *s);
void sim_set_trace(struct sim *s, FILE *trace);
/* Leave delivered messages out of the trace (events and state changes stay). */
void sim_trace_messages(struct sim *s, bool on);
uint32_t sim_nodes(const struct sim *s);

/* ---- manual driving */

/* Move virtual time forward by ms, ticking nodes whose deadlines pass (in time order). */
void sim_advance(struct sim *s, uint64_t ms);
/* Tick one node as if its election timer fired now (the others are not ticked). */
void sim_campaign(struct sim *s, raft_id id);
/* Deliver queued messages from->to (0: any), oldest first, including those the deliveries
 * produce when `all` is set; returns how many were delivered. */
int sim_deliver(struct sim *s, raft_id from, raft_id to, bool all);
/* Drop queued messages from->to (0: any); returns how many. */
int sim_drop(struct sim *s, raft_id from, raft_id to);
/* Deliver until no message is left (bounded); returns the number delivered. */
int sim_stabilize(struct sim *s);
int sim_pending(const struct sim *s, raft_id from, raft_id to);
/* Cut or restore the link a->b (one direction). */
void sim_link(struct sim *s, raft_id a, raft_id b, bool up);
/* Cut every link between the group and the rest; sim_heal() restores all. */
void sim_isolate(struct sim *s, raft_id id);
void sim_heal(struct sim *s);
/* Disk: manual means writes wait for sim_persist(); sim_persist completes them all. */
void sim_disk_manual(struct sim *s, raft_id id, bool manual);
int sim_persist(struct sim *s, raft_id id);
void sim_crash(struct sim *s, raft_id id);
void sim_restart(struct sim *s, raft_id id);
/* Crash id and lose its whole disk (term, vote, log, snapshot): an operator's mistake that
 * Raft does not cover, used to check that a leader still catches such a node up. */
void sim_wipe(struct sim *s, raft_id id);
bool sim_up(const struct sim *s, raft_id id);
/* A paused node (a stopped process) gets no ticks and no messages until resumed. */
void sim_pause(struct sim *s, raft_id id, bool paused);
/* Remove the first queued message from->to of a type; a shallow copy of its fixed fields
 * (no entries, no snapshot data) goes to *out. False when there is none. */
bool sim_steal(struct sim *s, raft_id from, raft_id to, int type, struct raft_msg *out);

/* ---- client operations (return the raft_rc of the step) */
int sim_propose(struct sim *s, raft_id id, const char *data, raft_index *index);
int sim_read(struct sim *s, raft_id id, uint64_t read_id);
int sim_transfer(struct sim *s, raft_id id, raft_id target);
int sim_change(struct sim *s, raft_id id, int type, raft_id target);
int sim_snapshot(struct sim *s, raft_id id, raft_index trailing);
/* Feed an arbitrary message to a node (robustness tests). */
int sim_inject(struct sim *s, raft_id to, const struct raft_msg *m);

/* ---- inspection */
struct raft *sim_raft(struct sim *s, raft_id id); /* NULL when down */
void sim_status(struct sim *s, raft_id id, struct raft_status *st);
raft_id sim_leader(struct sim *s); /* the leader of the highest term among live nodes */
raft_index sim_applied(const struct sim *s, raft_id id);
/* The last read state a node produced: id, index, rc; false when none since last call. */
bool sim_last_read(struct sim *s, raft_id id, uint64_t *read_id, raft_index *index, int *rc);
/* Messages that broke the durability contract (each one also fails the run). */
uint64_t sim_early_sends(const struct sim *s);
/* Count of queued messages of a type from a node (for the persist-before-send tests). */
int sim_count_queued(const struct sim *s, raft_id from, int type);
void sim_print_status(struct sim *s, FILE *out);
void sim_print_log(struct sim *s, raft_id id, FILE *out);

/* ---- random runs */
struct sim_run_result {
    bool ok;
    char failure[512];
    uint64_t steps;
    uint64_t commits;   /* highest committed index */
    uint64_t elections; /* leaders elected */
    uint64_t snapshots; /* snapshots installed from a leader */
    uint64_t changes;   /* membership changes committed */
    uint64_t crashes;
    uint64_t reads; /* linearizable reads answered */
    uint64_t busy;  /* proposals refused by the uncommitted-bytes cap */
};
/* One chaos run for `chaos_ms` of virtual time, then heal and check liveness. */
void sim_run(uint32_t voters, uint64_t seed, uint64_t chaos_ms, FILE *trace,
             struct sim_run_result *res);

#endif
