/*
 * fsm_deps.h - job dependencies (sbatch -d/--dependency): the list a job waits on as
 * parsed from Slurm's syntax, the state of each entry judged from the job it names, the
 * index from a job to the jobs waiting on it, and Slurm's text of what is still awaited.
 *
 * Guarantees:
 *   - An entry goes from WAIT to MET or FAILED once and never back: it is judged when the
 *     job it names starts (after:) or ends (every type), and a named job that is no
 *     longer held (purged after its retention) meets it, as in Slurm. So a dependency's
 *     outcome never depends on when it is looked at, only on the log.
 *   - The entries together are MET, FAILED (can never be met) or WAIT: with ',' every
 *     entry must be met and one failed entry fails the list; with '?' one met entry
 *     suffices and the list fails only when every entry has failed. As in Slurm, one '?'
 *     anywhere makes the whole list "any of", and a (type, job) pair named twice is kept
 *     once.
 *   - singleton is not an entry: it is judged when the scheduler places the job (no other
 *     job of the same user and name may be placed), so it never fails.
 *   - The index is derived state: rebuilt from the jobs after a snapshot restore. Its map
 *     is walked only to free and count it; what apply does follows the order of the ids
 *     queued in it and of the waiters in each list, which only the log decides.
 *
 * Ownership: a job owns its struct fsm_job_deps (one allocation); the index owns its
 * waiter lists and its queue.
 */
#ifndef SPUR_FSM_DEPS_H
#define SPUR_FSM_DEPS_H

#include "fsm_map.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fsm_job;

/* The numbers are in snapshots: never renumbered. */
enum fsm_dep_type {
    FSM_DEP_AFTER = 1,      /* after: the named job started or was cancelled */
    FSM_DEP_AFTERANY = 2,   /* afterany: it ended, however */
    FSM_DEP_AFTEROK = 3,    /* afterok: it ended COMPLETED (exit code 0) */
    FSM_DEP_AFTERNOTOK = 4, /* afternotok: it ended in any other final state */
};

enum fsm_dep_state {
    FSM_DEP_WAIT = 0,
    FSM_DEP_MET = 1,
    FSM_DEP_FAILED = 2,
};

/* Entries per job; Slurm has no limit, but a list this long is a mistake. */
#define FSM_DEPS_MAX 128
/* The longest dependency text accepted. */
#define FSM_DEPS_TEXT_MAX 4096

struct fsm_dep {
    uint64_t job_id;
    uint8_t type;  /* enum fsm_dep_type */
    uint8_t state; /* enum fsm_dep_state */
};

struct fsm_job_deps {
    uint32_t n;
    bool any;          /* '?' separated: one met entry suffices */
    bool singleton;    /* singleton was named */
    bool kill_invalid; /* --kill-on-invalid-dep=yes: cancelled once the list fails */
    uint8_t state;     /* of the entries together (enum fsm_dep_state); MET when n == 0 */
    struct fsm_dep d[];
};

/*
 * Parse Slurm's dependency text ("afterok:12:13,afterany:14", "afterok:12?afternotok:13",
 * "singleton", ...) into *out (NULL for an empty text). The entries are all WAIT; the
 * caller judges them. Returns 0, -1 with a message in err (bad syntax, a type this build
 * does not have, too many entries) or -2 (no memory).
 */
int fsm_deps_parse(const char *text, struct fsm_job_deps **out, char *err, size_t errlen);
/* A copy with n entries (all WAIT) to fill, or NULL (no memory). */
struct fsm_job_deps *fsm_deps_new(uint32_t n);
size_t fsm_deps_bytes(const struct fsm_job_deps *d);
/* Whether t is one of enum fsm_dep_type. */
bool fsm_dep_type_valid(uint32_t t);

/* The state of entry e given the job it names (NULL: no longer held, which meets it). */
uint8_t fsm_dep_judge(const struct fsm_dep *e, const struct fsm_job *target);
/* Recompute d->state from the entries and return it. */
uint8_t fsm_deps_combine(struct fsm_job_deps *d);

/*
 * Slurm's text of what the job still waits on, as squeue %E and scontrol's Dependency=
 * show it: the entries not met, "afterok:12(unfulfilled)" or "(failed)", joined by ',' or
 * '?', and "singleton(unfulfilled)" when singleton_waits (the caller's judgement); "" when
 * nothing is awaited. The text is truncated to fit n bytes (n > 0). Returns the length.
 */
size_t fsm_deps_format(const struct fsm_job_deps *d, bool singleton_waits, char *buf, size_t n);

/* ---- the index: job id -> the jobs whose entries name it ------------------------------------ */

struct fsm_dep_index {
    struct fsm_map by_target; /* job id -> struct fsm_dep_waiters (owned) */
    uint64_t *fired;          /* owned queue: named jobs that started or ended, in order */
    size_t nfired;
    size_t cap_fired;
    bool lost; /* a fire could not be queued (no memory): judge every waiting job */
};

struct fsm_dep_waiters {
    uint32_t n;
    uint32_t cap;
    uint64_t ids[];
};

void fsm_dep_index_init(struct fsm_dep_index *x);
void fsm_dep_index_free(struct fsm_dep_index *x);
/* Record that job waiter has an entry naming target. 0 or -1 (no memory). */
int fsm_dep_index_add(struct fsm_dep_index *x, uint64_t target, uint64_t waiter);
/* The jobs waiting on target, or NULL; with take, removed from the index (caller frees). */
struct fsm_dep_waiters *fsm_dep_index_get(struct fsm_dep_index *x, uint64_t target, bool take);
/*
 * Job id started or ended: queued when some job waits on it (cheap otherwise). A queue
 * that cannot grow sets lost.
 */
void fsm_dep_index_fire(struct fsm_dep_index *x, uint64_t id);
size_t fsm_dep_index_bytes(const struct fsm_dep_index *x);

#endif
