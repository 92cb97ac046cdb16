/*
 * fsm_state.h - struct fsm itself, and the rules that read several parts of it at once:
 * a job's pending reason, and node allocation for running jobs.
 *
 * Guarantees:
 *   - Everything in struct fsm above the counters is replicated state: it is what a
 *     snapshot holds and what determinism covers. The counters are this process's
 *     metrics and nothing decides anything from them.
 *   - A pending job's reason is never stored: fsm_state_pending_reason() derives it from
 *     the job, its partition and the nodes whenever it is shown, so it is always current
 *     and costs nothing at apply time.
 *   - A node's allocation (alloc_cpus, alloc_mem_mb, njobs) is the sum over running jobs
 *     of their unfinished parts on it; fsm_state_alloc_job() and fsm_state_release_part()
 *     are the only changes to it, and a restore recomputes it from the jobs.
 *
 * Ownership: struct fsm owns all its parts (fsm_jobs, fsm_nodes, fsm_sessions).
 */
#ifndef SPUR_FSM_STATE_H
#define SPUR_FSM_STATE_H

#include "fsm.h"
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
    struct fsm_counters ctr; /* not replicated */
};

void fsm_state_init(struct fsm *f, const struct fsm_limits *lim);
void fsm_state_free(struct fsm *f);

/*
 * Remembers, across the jobs of one answer, whether a job shape fits the nodes of its
 * partition right now (most jobs share a few shapes). Zero it before use.
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
};

/*
 * The reason a pending job waits, in Slurm's words: JobHeldUser, PartitionConfig (its
 * partition is gone, or it asks more CPUs or memory per node than the partition allows
 * now), PartitionDown, PartitionNodeLimit, PartitionTimeLimit, Resources (fewer usable
 * nodes of its partition have the CPUs and memory free than it needs), else None.
 * cache may be NULL.
 */
const char *fsm_state_pending_reason(const struct fsm *f, const struct fsm_job *job,
                                     struct fsm_fit_cache *cache);
/* The reason shown for any job: the pending reason, or why a finished job ended. */
const char *fsm_state_job_reason(const struct fsm *f, const struct fsm_job *job,
                                 struct fsm_fit_cache *cache);

/* Charge a started job's CPUs and memory to each of its nodes not yet done (all exist). */
void fsm_state_alloc_job(struct fsm *f, const struct fsm_job *job);
/* Give back the job's part on its i-th node and mark that part done. */
void fsm_state_release_part(struct fsm *f, struct fsm_job *job, uint32_t i);

#endif
