/*
 * fsm_state.h - struct fsm itself, and the rules that read several parts of it at once:
 * a job's pending reason, and node allocation for running jobs.
 *
 * Guarantees:
 *   - Everything in struct fsm above the counters is replicated state: it is what a
 *     snapshot holds and what determinism covers. The counters are this process's
 *     metrics, and the event record (fsm_events.h) is the leader's to-do list: nothing
 *     replicated is decided from either.
 *   - A pending job's reason is never stored: fsm_state_pending_reason() derives it from
 *     the job, its partition and the nodes whenever it is shown, so it is always current
 *     and costs nothing at apply time.
 *   - A node's allocation (alloc_cpus, alloc_mem_mb, njobs) is the sum over placed jobs
 *     (CONFIGURING, RUNNING, COMPLETING) of their unfinished parts on it;
 *     fsm_state_alloc_job() and fsm_state_release_part() are the only changes to it, and
 *     a restore recomputes it from the jobs.
 *   - Pending reasons that compare jobs (Priority against Resources) are computed from
 *     one walk of the pending jobs per answer, kept in struct fsm_fit_cache, never per
 *     job: an answer of n jobs costs O(n), not O(n^2).
 *
 * Ownership: struct fsm owns all its parts (fsm_jobs, fsm_nodes, fsm_sessions, fsm_acct).
 */
#ifndef SPUR_FSM_STATE_H
#define SPUR_FSM_STATE_H

#include "fsm.h"
#include "fsm_acct.h"
#include "fsm_events.h"
#include "fsm_jobs.h"
#include "fsm_nodes.h"
#include "fsm_sess.h"

struct fsm_counters {
    uint64_t applied;
    uint64_t bad_entries;
    uint64_t rejected;
    uint64_t duplicates;
    uint64_t purged_jobs;
    uint64_t expired_sessions;
    uint64_t alloc_skipped;
};

struct fsm {
    struct fsm_limits lim; /* same on every replica (fsm.h) */
    uint64_t last_applied;
    uint64_t next_job_id;
    uint64_t now_ms; /* the log clock */
    uint32_t retention_s;
    uint32_t max_script_bytes;
    struct fsm_jobs jobs;
    struct fsm_nodes nodes;
    struct fsm_sessions sess;
    struct fsm_acct acct;    /* the accounting outbox and its setting (fsm_acct.h) */
    struct fsm_counters ctr; /* not replicated */
    struct fsm_evrec ev;     /* not replicated: what the leader must do (fsm_events.h) */
};

void fsm_state_init(struct fsm *f, const struct fsm_limits *lim);
void fsm_state_free(struct fsm *f);

/*
 * Remembers, across the jobs of one answer, whether a job shape fits the nodes of its
 * partition right now (most jobs share a few shapes), whether a partition has a usable
 * node at all, and the first pending job of each partition (by eligible time, then id)
 * that waits for resources. Zero it before use; it is valid while the state is unchanged.
 */
#define FSM_FIT_CACHE 256
struct fsm_fit_cache {
    struct {
        const struct fsm_part *part; /* NULL: empty entry */
        uint32_t nodes;
        uint64_t cpus;
        uint64_t mem_mb;
        bool fits;
    } e[FSM_FIT_CACHE];
    uint8_t usable[FSM_MAX_PARTITIONS]; /* 0: not known yet, 1: a usable node, 2: none */
    bool blocked_known;
    struct {
        bool any;
        uint64_t eligible_ms;
        uint64_t id;
    } blocked[FSM_MAX_PARTITIONS]; /* index: the partition's place in fsm_nodes.parts */
};

/*
 * The reason a pending job waits, in Slurm's words, first that applies: JobHeldUser,
 * Dependency (it waits on other jobs, or on a singleton of its user and name),
 * DependencyNeverSatisfied (its dependency failed, --kill-on-invalid-dep=no), BeginTime
 * (eligible later: a launch back-off), PartitionConfig (its partition is gone),
 * PartitionDown, PartitionNodeLimit, PartitionTimeLimit, PartitionConfig (more CPUs or
 * memory per node than the partition allows now), ReqNodeNotAvail (no node of the
 * partition is usable), None (it fits now: about to start), Priority (it does not fit
 * and an earlier pending job of its partition does not either), Resources (it does not
 * fit and is the first such job of its partition). cache may be NULL (then one walk of
 * the jobs per call).
 */
const char *fsm_state_pending_reason(const struct fsm *f, const struct fsm_job *job,
                                     struct fsm_fit_cache *cache);
/*
 * Whether a singleton job must wait: another job of its user and name is placed, or one
 * with a lower id is pending, singleton itself and free to start. One walk of the jobs.
 */
bool fsm_state_singleton_busy(const struct fsm *f, const struct fsm_job *job);
/* The reason shown for any job: the pending reason, or why a finished job ended. */
const char *fsm_state_job_reason(const struct fsm *f, const struct fsm_job *job,
                                 struct fsm_fit_cache *cache);
/*
 * The same reason for one job on its own (an accounting record at apply): equal to
 * fsm_state_job_reason(), but a blocked pending job is compared with the others by a
 * walk from the newest job back that stops at the first earlier blocked job of its
 * partition, instead of a walk of every job: one record per submit stays cheap when many
 * jobs wait for resources.
 */
const char *fsm_state_job_reason_one(const struct fsm *f, const struct fsm_job *job);

/* Charge a placed job's CPUs and memory to each of its nodes not yet done. */
void fsm_state_alloc_job(struct fsm *f, const struct fsm_job *job);
/* Give back the job's part on its i-th node and mark that part done. */
void fsm_state_release_part(struct fsm *f, struct fsm_job *job, uint32_t i);

#endif
