/*
 * jobctl.h - the leader's job duties: launch, reconcile, watch the nodes, schedule
 * (docs/worker.md, "Running jobs"). The state machine decides what a job's state is;
 * this module, on the leader only, makes the agents do what the state says and turns
 * what the agents report into proposals.
 *
 * What it guarantees
 *
 *   - Only a leader in office acts. Office starts once this replica leads and has applied
 *     its term's no-op (the state is then current): it enables the state machine's events,
 *     reconciles every placed job (CONFIGURING, RUNNING, COMPLETING) from fsm_get_jobs()
 *     and dials every registered node's agent. Office ends with the leadership, the term
 *     or a stop: events off, every connection closed, everything in flight forgotten
 *     (the log and the agents' spools hold what matters; the next leader starts over).
 *   - No job starts twice. A Launch carries the replicated attempt and the agents start
 *     each attempt once; a RUNNING job is never launched again, a CONFIGURING one is
 *     launched again only with the same attempt; a killed attempt is never launched.
 *   - RUNNING only after every agent confirmed: one JobsStarted entry per loop turn for
 *     the attempts whose last confirmation came in; one refusal -> JobLaunchFailed.
 *   - No report is lost, none proposed twice at once: an agent's Ended report becomes one
 *     entry of the loop turn's JobsCompleted unless the same (job, attempt, node) is
 *     already queued or proposed and not applied; the agent gets EndedAck only after the
 *     report applied (fsm events: reported), so it keeps it in its spool until then. A
 *     proposal that never applies is forgotten after JOBCTL_RETRY_MS and the agent's next
 *     push proposes it again.
 *   - Pong reconcile (jobctl_pong_verdicts): a job the state places on the node with an
 *     attempt that the agent neither lists nor has reported, whose launch this leader saw
 *     confirmed before it sent that Ping, is lost (JobCompleted{lost}); a job the agent
 *     runs that the state does not place there with that attempt is terminated.
 *   - Nothing is launched or signalled on a connection before its agent answered a Ping
 *     as the node dialled (Pong.node_name): an address that reaches another node's agent
 *     starts and kills nothing, its answers do not count as the node's, and its reports
 *     (Ended.node) are ignored.
 *   - A node is proposed NodesNotResponding once its agent has not answered for
 *     agent.node_timeout_s counted from the later of this leader's taking office and the
 *     agent's last answer (the grace that lets agents find a new leader).
 *   - The scheduler runs at most once per loop turn, not sooner than 3x the last pass's
 *     duration after it ended, only while no JobsAllocated of ours is unapplied, when the
 *     state says a pass may place more, and at least once a second.
 *
 * The decisions are the pure functions at the end of this header; the rest is the I/O
 * shell that feeds them (agents.h for the connections, node_api for proposals).
 *
 * Ownership: struct jobctl owns its agents, timers, the tracked jobs, the report set and
 * the client signal calls waiting for agents (each answered exactly once, at the latest
 * when office ends or jobctl_free()); it borrows the node, the request path and cfg from
 * the composition root (replica.c), which frees it before them.
 */
#ifndef SPUR_JOBCTL_H
#define SPUR_JOBCTL_H

#include "agent.pb-c.h"
#include "api.h"
#include "cfg.h"
#include "fsm.h"
#include "node.h"
#include "node_api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JOBCTL_RETRY_MS    30000 /* a proposal not applied by then may be made again */
#define JOBCTL_PERIOD_MS   1000  /* the periodic duties (and scheduler pass) */
#define JOBCTL_MAX_BATCH   4096  /* reports or starts in one entry */
/* A confirmed launch waits this long before its JobsStarted: a report within it counts
 * as the start, and the entry is not written (trivial jobs end well within it). */
#define JOBCTL_START_HOLD_MS 20
#define JOBCTL_UNCONFIRMED UINT64_MAX

struct jobctl;

struct jobctl *jobctl_new(struct node *n, struct node_api *api, const struct cfg *cfg);
void jobctl_free(struct jobctl *jc);

/* The node's applied hook (after node_api and the controller). */
void jobctl_applied(struct jobctl *jc, const struct node_applied *a);

/*
 * node_api's hook for SignalJobRequest on the leader (arg: the jobctl). Checked in this
 * order, from the leader's state: the job exists (NOT_FOUND), the caller may signal it
 * (jobctl_may_signal(), else DENIED "Access/permission denied"), it runs (CONFLICT).
 */
void jobctl_signal_job(void *arg, struct api_call *call, Spur__Api__Request *req);

/*
 * Whether the caller may signal a job owned by job_uid: an operator, or the job's owner
 * (the same uid); nobody without a proved caller (NULL). The state machine's rule for
 * cancel, hold and release (raftd/fsm/fsm_cmd.h), here for scancel -s, which is not
 * written to the log.
 */
bool jobctl_may_signal(const Spur__Api__Caller *who, uint32_t job_uid);

struct jobctl_stats {
    bool in_office;
    uint64_t agents_known;
    uint64_t agents_connected;
    uint64_t launches;        /* Launch requests sent */
    uint64_t launch_failures; /* JobLaunchFailed proposed */
    uint64_t starts_folded;   /* JobsStarted not written: the report came within the hold */
    uint64_t reports;         /* Ended reports received from agents */
    uint64_t lost;            /* jobs proposed lost after a Pong */
    uint64_t terminated;      /* jobs an agent ran that the state did not place there */
    uint64_t not_responding;  /* nodes proposed NodesNotResponding */
    uint64_t sched_passes;
    uint64_t sched_allocations;   /* jobs placed by the passes */
    uint64_t sched_last_us;       /* duration of the last pass */
    uint32_t pending_allocations; /* JobsAllocated entries proposed, not applied */
    uint64_t tracked_jobs;
};
void jobctl_get_stats(const struct jobctl *jc, struct jobctl_stats *out);

/* ---- pure rules ------------------------------------------------------------------------ */

/* CPUs a job gets on each of its nnodes nodes: ceil(ntasks / nnodes) * cpus_per_task. */
uint32_t jobctl_cpus_per_node(const Spur__Api__JobSpec *spec, uint32_t nnodes);

/* One part of a tracked job: the job's attempt on one node. */
struct jobctl_part {
    char node[FSM_NODE_NAME_MAX + 1];
    uint64_t confirmed_seq; /* this leader's sequence when the agent confirmed the launch;
                               0: confirmed before office (RUNNING at office start);
                               JOBCTL_UNCONFIRMED: not yet */
    bool launch_out;        /* a Launch is on its way, unanswered */
    bool kill_out;          /* a terminate is on its way or was confirmed */
    bool done;              /* its report applied */
};

/* A placed attempt this leader follows. Ownership: owns parts. */
struct jobctl_job {
    uint64_t job_id;
    uint32_t attempt;
    uint32_t nparts;
    struct jobctl_part *parts;
    bool started;               /* every part confirmed (or RUNNING in the state) */
    bool failed;                /* a part refused; JobLaunchFailed queued */
    bool killing;               /* must end: never launched again, terminate its parts */
    uint64_t start_proposed_ms; /* JobsStarted queued or proposed at (mono); 0: not */
};

enum jobctl_launch_verdict {
    JOBCTL_LAUNCH_WAIT = 0, /* more confirmations to come, or already decided */
    JOBCTL_LAUNCH_STARTED,  /* this was the last confirmation: propose JobsStarted */
    JOBCTL_LAUNCH_FAILED,   /* the first refusal: propose JobLaunchFailed */
};

/* An agent answered the Launch of part (ok: started or already running), at seq. */
enum jobctl_launch_verdict jobctl_launch_reply(struct jobctl_job *j, uint32_t part, bool ok,
                                               uint64_t seq);

/* A job as the state places it on the node a Pong came from, with what this leader knows. */
struct jobctl_placed {
    uint64_t job_id;
    uint32_t attempt;       /* the state's current attempt */
    uint64_t confirmed_seq; /* as in jobctl_part */
    bool reported;          /* a report of this part is queued, proposed or applied */
};

/* One entry of Pong.running. */
struct jobctl_seen {
    uint64_t job_id;
    uint32_t attempt;
    bool ended;
};

enum jobctl_verdict_kind { JOBCTL_LOST = 1, JOBCTL_TERMINATE = 2 };

struct jobctl_verdict {
    enum jobctl_verdict_kind what;
    uint64_t job_id;
    uint32_t attempt;
};

/*
 * The Pong reconcile for one node: placed (every job the state places there with an
 * unfinished part) against seen (the agent's running list), for the Ping sent at
 * ping_seq. Writes at most np + ns verdicts to out and returns how many.
 */
size_t jobctl_pong_verdicts(const struct jobctl_placed *placed, size_t np,
                            const struct jobctl_seen *seen, size_t ns, uint64_t ping_seq,
                            struct jobctl_verdict *out);

/* Silent past the timeout, counted from the later of office start and the last answer. */
bool jobctl_node_silent(uint64_t now_ms, uint64_t office_ms, uint64_t last_answer_ms,
                        uint32_t timeout_s);

/* The report set: what is queued for the next JobsCompleted or proposed and not applied. */
struct jobctl_report {
    Spur__Fsm__JobCompleted rep; /* node points at node_buf */
    char node_buf[FSM_NODE_NAME_MAX + 1];
    uint64_t proposed_ms; /* 0: queued, not proposed yet */
};

struct jobctl_reports {
    struct jobctl_report *v; /* owned */
    size_t n, cap;
};

/* Add a report. 1: added (queued); 0: the same part is already queued or in flight;
 * -1: out of memory or a node name too long. */
int jobctl_reports_add(struct jobctl_reports *r, const Spur__Fsm__JobCompleted *rep);
/* The report of (job, attempt, node) applied: drop it. */
void jobctl_reports_applied(struct jobctl_reports *r, uint64_t job_id, uint32_t attempt,
                            const char *node);
/* Has (job, attempt, node) been queued or proposed? */
bool jobctl_reports_has(const struct jobctl_reports *r, uint64_t job_id, uint32_t attempt,
                        const char *node);
/* Forget proposals older than age_ms (they will be proposed again when pushed again). */
void jobctl_reports_expire(struct jobctl_reports *r, uint64_t now_ms, uint64_t age_ms);
/* The queued reports, at most max, marked proposed at now_ms; returns how many (ptrs into r). */
size_t jobctl_reports_take(struct jobctl_reports *r, uint64_t now_ms, Spur__Fsm__JobCompleted **out,
                           size_t max);
void jobctl_reports_free(struct jobctl_reports *r);

/* The scheduler's debounce. */
struct jobctl_sched {
    bool wanted;          /* the state said a pass may place more */
    uint64_t last_end_ms; /* when the last pass ended (mono), 0: none yet */
    uint64_t last_dur_ms; /* how long it took */
    uint32_t in_flight;   /* JobsAllocated entries proposed, not applied */
};

bool jobctl_sched_due(const struct jobctl_sched *s, uint64_t now_ms);

#endif
