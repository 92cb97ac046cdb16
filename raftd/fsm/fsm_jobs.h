/*
 * fsm_jobs.h - the jobs of the replicated state: one compact record per job, found by id
 * in O(1), walked in id order, and purged in the order they finished.
 *
 * Guarantees:
 *   - Job ids only grow (the state machine assigns them from a replicated counter and a
 *     snapshot lists jobs by id), so the ordered view is an append-only array of
 *     pointers; a purged job leaves a NULL that a later compaction removes. Walking it
 *     gives every job in id order, which is the only order anything replicated or
 *     answered depends on. The hash map beside it (fsm_map) is never walked.
 *   - Finished jobs sit on a list in the order they finished. Every end time comes from
 *     the log clock, which never goes backwards, so the list is sorted by end time and
 *     retention purges from its head: the cost is proportional to what is purged.
 *   - Per-state counts are kept up to date by fsm_jobs_set_state(), the one place a job's
 *     state changes.
 *   - A job's strings (name, partition, paths, user, environment, script) live in one
 *     allocation, so a job with a 256-byte script costs about 600 bytes in all.
 *
 * Ownership: struct fsm_jobs owns every job in it; a job owns its blob and its run.
 * Nothing here checks input: callers (fsm_cmd, fsm_snap) validate before they build a job.
 */
#ifndef SPUR_FSM_JOBS_H
#define SPUR_FSM_JOBS_H

#include "fsm.h"
#include "fsm_deps.h"
#include "fsm_map.h"
#include "spur.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Why a job ended (JobRecord.end_reason); the names are Slurm's reason strings. The
 * numbers are in snapshots: never renumbered.
 */
enum fsm_end_reason {
    FSM_END_NONE = 0,          /* "None": completed, or cancelled by a user */
    FSM_END_NONZERO_EXIT = 1,  /* "NonZeroExitCode" (an exit code or a signal) */
    FSM_END_TIME_LIMIT = 2,    /* "TimeLimit" */
    FSM_END_NODE_FAIL = 3,     /* "NodeFail": a node went down or lost the job */
    FSM_END_OUT_OF_MEMORY = 4, /* "OutOfMemory" */
    FSM_END_LAUNCH_FAILED = 5, /* "JobLaunchFailure" */
    FSM_END_DEPENDENCY = 6,    /* "DependencyNeverSatisfied": --kill-on-invalid-dep */
    FSM_END_NREASONS = 7,
};

/*
 * The nodes a placed job (CONFIGURING and after) runs its current attempt on; a finished
 * job keeps it, a requeued one drops it. One allocation: this header, flags, names.
 */
struct fsm_job_run {
    uint32_t n;     /* nodes, equal to the job's node count */
    uint32_t ndone; /* nodes whose part has finished */
    bool *done;     /* n flags */
    char **nodes;   /* n names */
};

struct fsm_job {
    uint64_t id;
    uint64_t submit_ms;
    uint64_t start_ms;    /* 0 until started */
    uint64_t end_ms;      /* 0 until finished */
    uint64_t eligible_ms; /* submit, release, or the end of a launch back-off; 0 held */
    uint64_t mem_mb;      /* per node; 0: none requested */
    uint32_t nodes;       /* as accepted: defaults applied */
    uint32_t ntasks;
    uint32_t cpus_per_task;
    uint32_t time_limit_min; /* 0: unlimited */
    uint32_t uid;
    uint32_t gid;
    int32_t exit_code;   /* first non-zero of the attempt's reports */
    int32_t exit_signal; /* first non-zero signal of the attempt's reports */
    uint32_t attempt;    /* placements so far: JobsAllocated / JobStarted add one */
    uint32_t restarts;   /* times it went back to PENDING (requeue, failed launch) */
    uint32_t nenv;
    uint32_t script_len;
    uint8_t state;       /* Spur__Api__JobState */
    uint8_t end_reason;  /* enum fsm_end_reason, for a finished job */
    bool hold_requested; /* JobSpec.hold as submitted */
    bool held;
    bool cancel_requested; /* cancelled while running: ends CANCELLED */
    bool timed_out;        /* a node reported the time limit */
    bool oom;              /* a node reported its cgroup's OOM kill */
    bool requeue;          /* JobSpec.requeue: a node failure puts it back in the queue */
    size_t slot;           /* index in fsm_jobs.order */
    /* Into blob: */
    char *name;
    char *partition;
    char *stdout_path;
    char *stderr_path;
    char *workdir;
    char *user;
    char *account;
    char **env;
    uint8_t *script;
    void *blob;                /* owned */
    struct fsm_job_run *run;   /* owned; NULL until started */
    struct fsm_job_deps *deps; /* owned; NULL: no dependency */
    struct fsm_job *fin_next;  /* finished list */
};

struct fsm_jobs {
    struct fsm_map by_id;
    struct fsm_job **order; /* owned array; jobs by id, NULL where one was purged */
    size_t norder;
    size_t cap;
    size_t count;             /* jobs held */
    struct fsm_job *fin_head; /* finished jobs, oldest end first */
    struct fsm_job *fin_tail;
    uint64_t by_state[FSM_JOB_NSTATES];
    size_t bytes;              /* bytes held by jobs (records, blobs, runs, dependencies) */
    struct fsm_dep_index deps; /* which jobs wait on which (derived, fsm_deps.h) */
};

void fsm_jobs_init(struct fsm_jobs *j);
void fsm_jobs_free(struct fsm_jobs *j);

/*
 * A new job (not in any table) with the strings of spec copied, user and partition given
 * separately (they may differ from the spec's: the request's user, the default
 * partition). Counts and times are left for the caller. NULL when out of memory.
 */
struct fsm_job *fsm_job_new(const Spur__Api__JobSpec *spec, const char *user,
                            const char *partition);
void fsm_job_free(struct fsm_job *job);
/* Place a job not yet in a table on n nodes (names copied). Returns 0 or -1 (no memory). */
int fsm_job_set_run(struct fsm_job *job, char *const *nodes, uint32_t n);
/* Bytes a job holds, as counted in fsm_jobs.bytes. */
size_t fsm_job_bytes(const struct fsm_job *job);

/* CPUs the job needs on each of its nodes: ceil(ntasks / nodes) * cpus_per_task. */
uint64_t fsm_job_cpus_per_node(const struct fsm_job *job);
/* COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY (not CONFIGURING). */
bool fsm_job_state_final(int state);
/* CONFIGURING, RUNNING or COMPLETING: placed on nodes, holding resources. */
bool fsm_job_state_placed(int state);
/* "PENDING", "RUNNING", ... ; "UNKNOWN" for a value out of range. */
const char *fsm_job_state_name(int state);
const char *fsm_end_reason_name(int reason);

/*
 * Add a job whose id is greater than every id held (and not 0); it must not be final yet
 * unless restoring (fsm_jobs_link_finished() then orders the finished list). Returns 0
 * or -1 (out of memory; the job is not added and still belongs to the caller).
 */
int fsm_jobs_add(struct fsm_jobs *j, struct fsm_job *job);
struct fsm_job *fsm_jobs_find(const struct fsm_jobs *j, uint64_t id);
/* fsm_job_set_run() for a job in the table (keeps fsm_jobs.bytes). */
int fsm_jobs_set_run(struct fsm_jobs *j, struct fsm_job *job, char *const *nodes, uint32_t n);
/* Drop a job's run (a requeue: its parts must have been released). Keeps fsm_jobs.bytes. */
void fsm_jobs_clear_run(struct fsm_jobs *j, struct fsm_job *job);
/*
 * Change a job's state, keeping the counts; a final state puts it on the finished list.
 * A job that leaves PENDING or ends, and that other jobs wait on, is queued in j->deps.
 */
void fsm_jobs_set_state(struct fsm_jobs *j, struct fsm_job *job, int state);
/* Remove and free the finished jobs whose end time is <= cutoff_ms. Returns how many. */
size_t fsm_jobs_purge(struct fsm_jobs *j, uint64_t cutoff_ms);
/*
 * After a restore added jobs in id order: count states and build the finished list
 * sorted by (end time, id). Returns 0 or -1 (out of memory).
 */
int fsm_jobs_link_finished(struct fsm_jobs *j);

/*
 * Fill spec (borrowing the job's strings: valid while the job lives) with what the job
 * was accepted with; the script and environment only when full is set.
 */
void fsm_job_fill_spec(const struct fsm_job *job, Spur__Api__JobSpec *spec, bool full);

/*
 * The filters squeue and scancel share (GetJobsRequest and CancelJobsRequest carry the
 * same four lists): a job passes when every non-empty list holds its value; an empty list
 * lets every job through, so a zeroed filter matches all jobs. The lists are borrowed
 * from the request.
 */
struct fsm_job_filter {
    char *const *users;
    size_t n_users;
    const Spur__Api__JobState *states;
    size_t n_states;
    char *const *names;
    size_t n_names;
    char *const *partitions;
    size_t n_partitions;
};

/* A RUNNING in the states list also lets CONFIGURING through (Slurm's base state). */
bool fsm_job_filter_match(const struct fsm_job *job, const struct fsm_job_filter *flt);

/*
 * Sort the job ids a request names in ascending order and drop repeats, in place, so each
 * named job is handled once and in id order whatever the request's order. Returns how
 * many distinct ids lead the array.
 */
size_t fsm_jobs_sort_ids(uint64_t *ids, size_t n);

#endif
