/*
 * raft_progress.c - per-follower replication state; see raft_progress.h.
 */
#include "raft_progress.h"

#include <stdlib.h>
#include <string.h>

int raft_progress_init(struct raft_progress *pr, raft_id id, raft_index next, uint32_t window)
{
    memset(pr, 0, sizeof(*pr));
    pr->ring = calloc(window ? window : 1, sizeof(*pr->ring));
    if (pr->ring == NULL)
        return RAFT_ENOMEM;
    pr->ring_cap = window ? window : 1;
    pr->id = id;
    pr->state = RAFT_PR_PROBE;
    pr->next = next ? next : 1;
    return RAFT_OK;
}

void raft_progress_free(struct raft_progress *pr)
{
    free(pr->ring);
    pr->ring = NULL;
}

static void clear_window(struct raft_progress *pr)
{
    pr->ring_start = 0;
    pr->ring_n = 0;
    pr->ring_bytes = 0;
}

void raft_progress_probe(struct raft_progress *pr)
{
    if (pr->state == RAFT_PR_SNAPSHOT && pr->snap_index > pr->match)
        pr->next = pr->snap_index + 1;
    else if (pr->next <= pr->match)
        pr->next = pr->match + 1;
    pr->state = RAFT_PR_PROBE;
    pr->probe_sent = false;
    pr->snap_index = 0;
    clear_window(pr);
}

void raft_progress_replicate(struct raft_progress *pr)
{
    pr->state = RAFT_PR_REPLICATE;
    pr->next = pr->match + 1;
    pr->probe_sent = false;
    pr->snap_index = 0;
    clear_window(pr);
}

void raft_progress_snapshot(struct raft_progress *pr, raft_index snap_index)
{
    pr->state = RAFT_PR_SNAPSHOT;
    pr->snap_index = snap_index;
    pr->snap_offset = 0;
    pr->snap_sent_ms = 0;
    pr->probe_sent = false;
    clear_window(pr);
}

bool raft_progress_paused(const struct raft_progress *pr, uint64_t max_bytes)
{
    switch (pr->state) {
    case RAFT_PR_PROBE:
        return pr->probe_sent;
    case RAFT_PR_REPLICATE:
        return pr->ring_n >= pr->ring_cap || (max_bytes && pr->ring_bytes >= max_bytes);
    default:
        return true;
    }
}

void raft_progress_sent(struct raft_progress *pr, raft_index last, uint64_t bytes)
{
    if (pr->state == RAFT_PR_PROBE) {
        pr->probe_sent = true;
        return;
    }
    if (pr->state != RAFT_PR_REPLICATE)
        return;
    pr->next = last + 1;
    if (pr->ring_n >= pr->ring_cap)
        raft_progress_free_first(pr);
    pr->ring[(pr->ring_start + pr->ring_n) % pr->ring_cap] =
        (struct raft_inflight){.last = last, .bytes = bytes};
    pr->ring_n++;
    pr->ring_bytes += bytes;
}

void raft_progress_free_first(struct raft_progress *pr)
{
    if (pr->ring_n == 0)
        return;
    pr->ring_bytes -= pr->ring[pr->ring_start].bytes;
    pr->ring_start = (pr->ring_start + 1) % pr->ring_cap;
    pr->ring_n--;
}

void raft_progress_free_to(struct raft_progress *pr, raft_index index)
{
    while (pr->ring_n > 0 && pr->ring[pr->ring_start].last <= index)
        raft_progress_free_first(pr);
}

bool raft_progress_ack(struct raft_progress *pr, raft_index index)
{
    bool grew = false;

    if (index > pr->match) {
        pr->match = index;
        grew = true;
    }
    if (pr->next < pr->match + 1)
        pr->next = pr->match + 1;
    return grew;
}
