/*
 * fsm_acct.h - the accounting outbox of the replicated state (fsm.h "accounting: the
 * outbox", docs/state-machine.md "Accounting outbox").
 *
 * Guarantees:
 *   - While enabled (the replicated setting SetSettings.accounting), every job event
 *     (submit, start, end, requeue) appends one packed spur.fsm.AcctRecord: seq from the
 *     replicated counter next_seq (1, 2, 3, ...; never reused, not even after a trim),
 *     time_ms the log clock, the job's AcctJob row as it is after the event. The bytes are
 *     a function of the state alone, so every replica holds the same records.
 *   - The records are in strictly increasing seq order; every seq is below next_seq. A
 *     trim drops a prefix (seq <= through); nothing else ever removes a record (the purge
 *     of finished jobs leaves them for the exporter).
 *   - Appending is amortised O(1) and a trim costs what it drops.
 *
 * Ownership: struct fsm_acct owns its array and every record (one allocation each:
 * header and packed bytes).
 */
#ifndef SPUR_FSM_ACCT_H
#define SPUR_FSM_ACCT_H

#include "fsm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fsm;
struct fsm_job;
struct fsm_fit_cache;

struct fsm_acct_rec {
    uint64_t seq;
    uint64_t time_ms;
    uint64_t job_id;
    uint32_t event; /* enum fsm_acct_event */
    size_t len;
    uint8_t bytes[]; /* the packed AcctRecord */
};

struct fsm_acct {
    bool enabled;            /* replicated: SetSettings.accounting */
    uint64_t next_seq;       /* replicated: what the next record gets (>= 1) */
    struct fsm_acct_rec **v; /* owned; records v[first .. first + n - 1], by seq */
    size_t first;
    size_t n;
    size_t cap;
    size_t bytes; /* sum of the records' packed sizes */
};

void fsm_acct_init(struct fsm_acct *a);
void fsm_acct_free(struct fsm_acct *a);

/*
 * Append the record of one event of job (in f's state as it is now) when accounting is
 * enabled; nothing otherwise. FSM_OK or FSM_ENOMEM (nothing appended).
 */
int fsm_acct_record(struct fsm *f, const struct fsm_job *job, enum fsm_acct_event event);

/* Drop every record with seq <= through. Returns how many were dropped. */
size_t fsm_acct_trim(struct fsm_acct *a, uint64_t through);

/*
 * Append a record read from a snapshot (bytes copied): it must decode as an AcctRecord
 * with a job, an event 1..4, a seq above the last record's and below next_seq (set
 * first), and job.last_seq == seq. FSM_OK, FSM_EINVAL (why in err) or FSM_ENOMEM.
 */
int fsm_acct_restore_record(struct fsm_acct *a, const uint8_t *bytes, size_t len, char *err,
                            size_t errlen);

/* The i-th record (0: oldest), i < a->n. */
static inline const struct fsm_acct_rec *fsm_acct_at(const struct fsm_acct *a, size_t i)
{
    return a->v[a->first + i];
}

/*
 * Fill row with job's accounting row (strings and node list borrowed from the job and
 * state; reason from fsm_state_job_reason() with cache, or fsm_state_job_reason_one()
 * when cache is NULL). last_seq 0.
 */
void fsm_acct_fill_row(const struct fsm *f, const struct fsm_job *job, Spur__Api__AcctJob *row,
                       struct fsm_fit_cache *cache);

#endif
