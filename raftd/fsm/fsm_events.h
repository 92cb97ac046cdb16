/*
 * fsm_events.h - what the entries applied since the last fsm_events_take() ask of the
 * leader (launch, kill, ack a report, run a scheduler pass, look at the nodes again),
 * recorded while fsm_cmd applies them. The public face is in fsm.h (struct fsm_events).
 *
 * Invariants:
 *   - Not replicated and never read by apply: recording changes nothing in the state, a
 *     snapshot holds none of it, and a replica with recording off (every follower)
 *     applies the same entries to the same state.
 *   - Off records nothing and holds no memory; turning it off drops what was recorded.
 *   - Bounded by what one step applies: the leader takes the lists after every step, so
 *     they hold at most one entry per job placed, killed or reported by that step's
 *     entries (a JobsAllocated of n jobs: n launches; a cancel of n jobs: n kills).
 *   - Jobs appear in the order the commands touched them; the leader may see the same
 *     (job, attempt) twice in a list (two cancels) and must treat it as one.
 *
 * Mechanics: three growable arrays and flags in struct fsm_evrec; fsm_events_take() moves
 * the arrays to the caller (no copy, no allocation) and starts empty ones.
 *
 * Ownership: struct fsm_evrec (in struct fsm) owns its arrays until they are taken; then
 * struct fsm_events owns them (fsm_events_free()).
 */
#ifndef SPUR_FSM_EVENTS_H
#define SPUR_FSM_EVENTS_H

#include "fsm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fsm_job;

struct fsm_evrec {
    bool on;
    struct fsm_job_ref *launch; /* owned */
    size_t nlaunch, caplaunch;
    struct fsm_job_ref *kill; /* owned */
    size_t nkill, capkill;
    struct fsm_report_ref *reported; /* owned */
    size_t nreported, capreported;
    uint32_t alloc_entries;
    bool schedule;
    bool nodes;
};

void fsm_evrec_free(struct fsm_evrec *ev);

/* Each returns 0, or -1 when out of memory (the apply then fails with FSM_ENOMEM). */
int fsm_ev_launch(struct fsm_evrec *ev, const struct fsm_job *job);
int fsm_ev_kill(struct fsm_evrec *ev, const struct fsm_job *job);
int fsm_ev_reported(struct fsm_evrec *ev, uint64_t job_id, uint32_t attempt, const char *node);
void fsm_ev_alloc_entry(struct fsm_evrec *ev);
void fsm_ev_schedule(struct fsm_evrec *ev);
void fsm_ev_nodes(struct fsm_evrec *ev);

#endif
