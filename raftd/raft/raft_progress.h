/*
 * raft_progress.h - what a leader knows about one follower's log, and how fast it may send.
 *
 * States (as in etcd/raft):
 *   PROBE      the leader does not know where the follower's log matches; it sends one
 *              AppendEntries at a time (probe_sent) and backs next down on each rejection,
 *              guided by the follower's conflict hint.
 *   REPLICATE  the logs match up to `match`; the leader streams AppendEntries and advances
 *              `next` optimistically, bounded by a window of in-flight messages and bytes.
 *   SNAPSHOT   next fell behind the leader's first log entry; the leader sends its snapshot
 *              chunk by chunk and nothing else until the follower has installed it.
 *
 * Invariants: match < next; match only grows within a term (it counts durable entries the
 * follower acknowledged); the in-flight window holds the last index of each unacknowledged
 * AppendEntries, oldest first, and its byte total. The ring is owned by the progress.
 */
#ifndef SPUR_RAFT_PROGRESS_H
#define SPUR_RAFT_PROGRESS_H

#include "raft.h"

enum raft_progress_state { RAFT_PR_PROBE = 1, RAFT_PR_REPLICATE = 2, RAFT_PR_SNAPSHOT = 3 };

struct raft_inflight {
    raft_index last;
    uint64_t bytes;
};

struct raft_progress {
    raft_id id;
    uint8_t state;
    raft_index match;
    raft_index next;
    bool probe_sent;        /* PROBE: a message is out; wait for its answer or a heartbeat */
    bool recent_active;     /* heard from since the last check-quorum round */
    uint64_t read_ack;      /* highest heartbeat read round it answered in this term */
    raft_index sent_commit; /* commit index carried by the last AppendEntries to it */
    /* SNAPSHOT */
    raft_index snap_index; /* the snapshot being sent */
    uint64_t snap_offset;  /* first byte not yet acknowledged */
    uint64_t snap_sent_ms; /* when the last chunk went out */
    /* REPLICATE window */
    struct raft_inflight *ring;
    uint32_t ring_cap;
    uint32_t ring_start;
    uint32_t ring_n;
    uint64_t ring_bytes;
};

/* RAFT_OK or RAFT_ENOMEM. */
int raft_progress_init(struct raft_progress *pr, raft_id id, raft_index next, uint32_t window);
void raft_progress_free(struct raft_progress *pr);

void raft_progress_probe(struct raft_progress *pr);
void raft_progress_replicate(struct raft_progress *pr);
void raft_progress_snapshot(struct raft_progress *pr, raft_index snap_index);

/* True when no AppendEntries with entries may be sent now. */
bool raft_progress_paused(const struct raft_progress *pr, uint64_t max_bytes);
void raft_progress_sent(struct raft_progress *pr, raft_index last, uint64_t bytes);
/* Forget in-flight messages up to index (acknowledged). */
void raft_progress_free_to(struct raft_progress *pr, raft_index index);
/* Forget the oldest in-flight message (the window is full and a heartbeat came back). */
void raft_progress_free_first(struct raft_progress *pr);
/* Record a durable acknowledgement; true when match grew. */
bool raft_progress_ack(struct raft_progress *pr, raft_index index);

#endif
