/*
 * fsm.h - the replicated state machine: jobs, nodes, partitions and client sessions
 * (docs/state-machine.md).
 *
 * What it guarantees
 *
 *   - Deterministic. fsm_apply() is a function of the state and the entry's bytes alone:
 *     no clock, no randomness, no I/O, no iteration over hash tables. Every replica that
 *     applies the same entries from the same starting point (a fresh fsm with the same
 *     limits, or the same snapshot) holds the same state, and fsm_snapshot() of it gives
 *     the same bytes. Time enters only as Command.time_ms, the leader's wall clock stamped
 *     when it proposed the entry; the state keeps a log clock, the largest time_ms applied
 *     so far, so time never runs backwards across leader changes, and every timestamp the
 *     state records (submit, start, end, reason, last use of a session) is that clock.
 *   - Job ids are assigned at apply time from a replicated counter (the first job is 1),
 *     so every replica gives a submitted job the same id and the leader returns it in the
 *     reply. Ids are never reused, not even after a purge.
 *   - Never fails on bad input. A log entry that does not decode is rejected (counted in
 *     fsm_stats.bad_entries, answered with CODE_INVALID) and the replica goes on; a
 *     command that does not fit the state is answered with a code and one line naming
 *     the problem and changes nothing.
 *   - Exactly once. A write carries (client_id, seq). The state keeps, per client, the
 *     last seq and the packed response of that write: the same pair again is answered
 *     with that response and changes nothing; an older seq is refused ("stale request",
 *     CODE_INVALID); client_id 0 is never deduplicated. A session that has not written
 *     for session_ttl_ms of log time is dropped before the next entry applies, and while
 *     there are more than max_sessions the least recently used (by log index) is dropped.
 *   - Retention. Before each entry applies, the finished jobs whose end time lies
 *     finished_job_retention_s or more before the log clock are purged. The retention is
 *     replicated: it changes only through a SetSettings entry.
 *
 * Driving it (the Raft worker)
 *
 *   Writes: fsm_op_kind() tells a write from a read; fsm_encode_request() turns a write
 *   into the bytes of a log entry (stamping time_ms); once the entry commits, every
 *   replica calls fsm_apply() with it, in log order, and the replica that holds the
 *   waiting client sends it the reply's response (after setting request_id and the other
 *   envelope fields). Reads: fsm_read() (or fsm_get_*()) on the current state.
 *   Configuration: when this replica leads, it proposes fsm_encode_set_partitions() when
 *   fsm_partitions_differ() and fsm_encode_set_settings() when fsm_settings_differ(),
 *   and an occasional fsm_encode_tick() lets retention and expiry run on an idle cluster.
 *
 *   The limits given to fsm_new() decide what entries do, so they must be the same on
 *   every replica for the life of the cluster's log: pass NULL (the built-in defaults).
 *   The two configurable ones (max_script_bytes, finished_job_retention_s) are only the
 *   values before the first SetSettings entry; the configuration reaches the state
 *   through the log, never through fsm_new().
 *
 * Ownership and threads
 *
 *   struct fsm owns the whole state. Every buffer an encoder or fsm_snapshot() returns is
 *   malloc'd and belongs to the caller (free()). A reply's response belongs to the caller
 *   (fsm_reply_clear()). A read's response borrows strings from the state: it is valid
 *   until the next fsm_apply() / fsm_restore() / fsm_free(), and fsm_read_free()
 *   releases what the read allocated. Not thread-safe: one thread drives an fsm.
 */
#ifndef SPUR_FSM_H
#define SPUR_FSM_H

#include "fsm.pb-c.h"
#include "spur.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Command.version this build writes; an entry with a larger one is rejected.
 *   1: the first format.
 *   2: the command carries its caller (user, caller_uid, caller_operator, from
 *      Request.caller) and apply enforces job ownership: cancel, cancel_jobs, hold and
 *      release of another user's job by a non-operator are refused (CODE_DENIED). Version
 *      1 entries still apply without that check, so an old log replays as it applied.
 *   3: accounting: SetSettings.accounting turns the outbox on (job events append
 *      AcctRecords), and AcctTrim removes what the exporter wrote. A log of versions 1-2
 *      never turns accounting on, so it replays as it applied.
 *   4: dependencies: JobSpec.dependency and kill_on_invalid_dep are applied (fsm_deps.h).
 *      Earlier entries submit without them, as they applied.
 */
#define FSM_COMMAND_VERSION 4
/*
 * SnapshotHeader.format_version this build writes; it reads 1 (no outbox), 2 and 3
 * (job records with dependencies).
 */
#define FSM_SNAPSHOT_VERSION 3
/* Longest error line in a reply or from an encoder, NUL included. */
#define FSM_ERR_MAX 256
/* Longest node name (fsm_nodes.h FSM_NAME_MAX). */
#define FSM_NODE_NAME_MAX 64

#define FSM_JOB_NSTATES  11 /* Spur__Api__JobState 0..10 */
#define FSM_NODE_NSTATES 8 /* Spur__Api__NodeState 0..7 */

enum fsm_status {
    FSM_OK = 0,
    FSM_ENOMEM = -1,    /* out of memory; after fsm_apply() the state may be partly
                           changed: the replica must exit and recover from disk */
    FSM_ESTALE = -2,    /* fsm_apply(): index not after fsm_last_applied(); ignored */
    FSM_EINVAL = -3,    /* an encoder or fsm_restore() refused its input (err says why;
                           fsm_encode_request(): the request has no caller) */
    FSM_ENOTWRITE = -4, /* fsm_encode_request(): the request is not a write */
};

struct fsm_limits {
    uint32_t max_script_bytes;         /* until the first SetSettings; default 1 MiB */
    uint32_t finished_job_retention_s; /* until the first SetSettings; default 86400 */
    uint64_t session_ttl_ms;           /* default 3600000 (one hour of log time) */
    uint32_t max_sessions;             /* default 65536 */
    uint32_t max_jobs;                 /* jobs held at once; default 1000000 */
};

struct fsm;

/* The built-in defaults above. */
void fsm_limits_default(struct fsm_limits *lim);
/* A fresh, empty state (no partitions, no nodes, no jobs). NULL limits: the defaults. */
struct fsm *fsm_new(const struct fsm_limits *lim);
void fsm_free(struct fsm *f);

/* Index of the last entry applied (0: none), and the log clock. */
uint64_t fsm_last_applied(const struct fsm *f);
/* The replicated job script limit in force (controller.max_script_bytes via the log). */
uint32_t fsm_max_script_bytes(const struct fsm *f);
uint64_t fsm_log_time_ms(const struct fsm *f);

/* ---- writes --------------------------------------------------------------------------- */

enum fsm_op_kind {
    FSM_OP_OTHER = 0, /* not for the state machine: ping, Raft operations, no op */
    FSM_OP_WRITE = 1, /* submit, cancel(s), hold, release, update node, register node */
    FSM_OP_READ = 2,  /* get jobs / job / nodes / partitions */
};

enum fsm_op_kind fsm_op_kind(const Spur__Api__Request *req);

/*
 * The log entry for a write: Command{version, client_id, seq, time_ms, op} with the
 * request's fields, and the caller the replica proved (Request.caller): user, caller_uid,
 * caller_operator. A submitted JobSpec is encoded with the caller's user, uid and gid in
 * place of whatever the client wrote. Validation happens at apply, on every replica
 * alike. Returns FSM_OK with *out malloc'd, FSM_ENOTWRITE, FSM_EINVAL (a write without a
 * caller: never encoded, never taken for an operator's), or FSM_ENOMEM.
 */
int fsm_encode_request(const Spur__Api__Request *req, uint64_t time_ms, uint8_t **out, size_t *len);
/* Any command (the later job-running ones, tests); version is set if 0. Same returns. */
int fsm_encode_command(const Spur__Fsm__Command *cmd, uint8_t **out, size_t *len);
/* A Tick: advances the log clock only. */
int fsm_encode_tick(uint64_t time_ms, uint8_t **out, size_t *len);

struct fsm_reply {
    Spur__Api__Response *resp; /* owned: code, error and result; envelope fields unset */
    uint64_t client_id;        /* of the command; 0 for internal ones and bad entries */
    uint64_t seq;
    bool duplicate; /* answered from the session table: no effect this time */
    bool bad_entry; /* the entry did not decode */
};

/*
 * Apply the committed entry at index (which must be greater than fsm_last_applied()).
 * Returns FSM_OK whatever the command's outcome (the reply carries it), FSM_ESTALE
 * (nothing happened), or FSM_ENOMEM (see enum fsm_status). reply may be NULL (a follower
 * with nobody waiting); otherwise it is filled on FSM_OK and zeroed on errors.
 */
int fsm_apply(struct fsm *f, uint64_t index, const uint8_t *data, size_t len,
              struct fsm_reply *reply);
void fsm_reply_clear(struct fsm_reply *reply);

/* ---- reads ---------------------------------------------------------------------------- */

struct fsm_read {
    Spur__Api__Response resp; /* code, error, result; borrows from the state (see above) */
    void *priv;               /* what the read allocated */
};

/* Dispatch a read request (FSM_OP_READ). Returns FSM_OK or FSM_ENOMEM; not-found and
 * invalid requests are answered in out->resp.code. */
int fsm_read(const struct fsm *f, const Spur__Api__Request *req, struct fsm_read *out);
/* Jobs matching every filter given (OR within one filter), by id. */
int fsm_get_jobs(const struct fsm *f, const Spur__Api__GetJobsRequest *req, struct fsm_read *out);
/* One job with its script and environment; CODE_NOT_FOUND when it is not held. */
int fsm_get_job(const struct fsm *f, uint64_t job_id, struct fsm_read *out);
/* The nodes named (all when none), by name; CODE_NOT_FOUND naming the first missing. */
int fsm_get_nodes(const struct fsm *f, const Spur__Api__GetNodesRequest *req, struct fsm_read *out);
/* The partitions named (all when none), in configuration order. */
int fsm_get_partitions(const struct fsm *f, const Spur__Api__GetPartitionsRequest *req,
                       struct fsm_read *out);
void fsm_read_free(struct fsm_read *out);

/* ---- snapshots -------------------------------------------------------------------------- */

/*
 * The whole state (including sessions, counters, settings and the log clock) as a packed
 * spur.fsm.Snapshot: same state, same bytes. Returns FSM_OK with *bytes malloc'd, or
 * FSM_ENOMEM.
 */
int fsm_snapshot(const struct fsm *f, uint8_t **bytes, size_t *len);
/*
 * Replace the state with a snapshot's. On any failure (FSM_EINVAL with err naming the
 * problem, FSM_ENOMEM) the state is exactly what it was.
 */
int fsm_restore(struct fsm *f, const uint8_t *bytes, size_t len, char *err, size_t errlen);

/* ---- configuration -------------------------------------------------------------------- */

/*
 * What the configuration file asks of the replicated state, as a plain value: the state
 * machine knows nothing of the YAML configuration (common/cfg.h); the controller's policy
 * (raftd/controller.c) fills these from it. The strings are borrowed for the call.
 */
struct fsm_partition_conf {
    const char *name;
    const char *nodes; /* "ALL" or a comma list of node names */
    bool is_default;
    bool up;
    uint32_t max_nodes;           /* 0: no limit, as are the three below */
    uint32_t max_time_min;
    uint32_t max_cpus_per_node;
    uint32_t max_mem_mb_per_node;
};

struct fsm_settings_conf {
    uint32_t finished_job_retention_s;
    uint32_t max_script_bytes;
    bool accounting; /* accounting.database_url is set: keep an outbox of job records */
};

bool fsm_partitions_differ(const struct fsm *f, const struct fsm_partition_conf *parts, size_t n);
bool fsm_settings_differ(const struct fsm *f, const struct fsm_settings_conf *s);
/*
 * SetPartitions with these partitions ("ALL" or a comma list, blanks and repeats
 * dropped). The check apply makes runs here first: FSM_EINVAL with err when the
 * configuration cannot be applied (then log it and do not propose).
 */
int fsm_encode_set_partitions(const struct fsm_partition_conf *parts, size_t n,
                              uint64_t time_ms, uint8_t **out, size_t *len, char *err,
                              size_t errlen);
/* SetSettings with these settings (finished-job retention, largest job script, accounting). */
int fsm_encode_set_settings(const struct fsm_settings_conf *s, uint64_t time_ms, uint8_t **out,
                            size_t *len);

/* ---- running jobs: the scheduler and what the leader must do --------------------------- */

/*
 * The scheduler: one pass over the state, pure (reads the state and opts only; same
 * state, same opts, same result). Pending jobs in priority order (age: eligible time,
 * then id), each placed on the usable nodes of its partition that have its CPUs and
 * memory free now, honouring holds, partition state and limits, node states and sizes
 * (-N, -n, -c, --mem). Backfill: the first max_reservations jobs that cannot start get a
 * reservation at the earliest time enough nodes free up (from running jobs' start plus
 * time limit); a later job starts now only when it fits and does not delay any
 * reservation (it ends before the reservation starts, or uses no reserved resources).
 * Jobs still in their launch back-off (eligible time after now) wait.
 * The result becomes one JobsAllocated entry (fsm_encode_allocations); apply checks
 * each allocation again, so a stale pass can never over-allocate a node.
 */
struct fsm_sched_opts {
    uint64_t now_ms;           /* the leader's clock; the pass uses max(now, log clock) */
    uint32_t max_reservations; /* backfill depth; 0: 32 */
    uint32_t max_allocations;  /* per pass; 0: 10000 */
};

struct fsm_sched_alloc {
    uint64_t job_id;
    uint32_t nnodes;
    const char *const *nodes; /* borrowed from the state until the next apply */
};

struct fsm_sched_result {
    struct fsm_sched_alloc *v; /* owned */
    size_t n;
    uint64_t jobs_tested;   /* pending jobs looked at */
    uint64_t reservations;  /* backfill reservations made */
    uint64_t backfilled;    /* jobs started ahead of a reservation */
    void *priv;             /* owned: node name arrays */
};

int fsm_sched_pass(const struct fsm *f, const struct fsm_sched_opts *o,
                   struct fsm_sched_result *out);
void fsm_sched_result_free(struct fsm_sched_result *r);
/* The JobsAllocated entry of a pass (n > 0). FSM_OK with *out malloc'd, or FSM_ENOMEM. */
int fsm_encode_allocations(const struct fsm_sched_result *r, uint64_t time_ms, uint8_t **out,
                           size_t *len);

/*
 * What the entries applied since the last fsm_events_take() ask of the leader: recorded
 * only while enabled (the leader enables it when it takes office and does one full
 * reconcile from fsm_get_jobs(); followers leave it off and record nothing). Not part of
 * the replicated state; nothing in apply reads it.
 */
struct fsm_job_ref {
    uint64_t job_id;
    uint32_t attempt;
};

/* One node's report of a job, applied (whatever its effect): the leader acks it. */
struct fsm_report_ref {
    uint64_t job_id;
    uint32_t attempt;
    char node[FSM_NODE_NAME_MAX + 1];
};

struct fsm_events {
    struct fsm_job_ref *launch; /* owned; became CONFIGURING: send Launch to its nodes */
    size_t nlaunch;
    struct fsm_job_ref *kill;   /* owned; must end on its nodes (a cancel of a placed job,
                                   a failed launch's other nodes, a requeue, a purge) */
    size_t nkill;
    struct fsm_report_ref *reported; /* owned; JobCompleted reports applied (any outcome,
                                        duplicates and stale attempts included) */
    size_t nreported;
    uint32_t alloc_entries; /* JobsAllocated entries applied (placed or skipped) */
    bool schedule; /* the queue or free resources changed: a pass may place more */
    bool nodes;    /* a node registered, changed address, went down or came back */
};

void fsm_events_enable(struct fsm *f, bool on);
/* Move what was recorded to out (zeroed first). FSM_OK or FSM_ENOMEM (nothing moved). */
int fsm_events_take(struct fsm *f, struct fsm_events *out);
void fsm_events_free(struct fsm_events *ev);

/* ---- accounting: the outbox (docs/accounting.md) ----------------------------------------- */

/*
 * While the replicated setting `accounting` is on (SetSettings, version 3), each job event
 * that accounting keeps appends one AcctRecord (proto/fsm.proto) to the outbox, at apply,
 * deterministically: seq is a replicated counter (the first record is 1, never reused),
 * time_ms the log clock, job the job's AcctJob row after the event (no script, no
 * environment). The outbox is part of the snapshot. AcctTrim{through_seq} drops every
 * record with seq <= through_seq (a trim beyond the last record drops them all and is
 * not an error; one that drops nothing changes nothing). Turning accounting off stops
 * appending; the records already there stay until trimmed.
 */
enum fsm_acct_event {
    FSM_ACCT_SUBMIT = 1,  /* accepted: PENDING (or held) */
    FSM_ACCT_START = 2,   /* RUNNING on its nodes (start time, node list, allocated CPUs) */
    FSM_ACCT_END = 3,     /* a final state: COMPLETED, FAILED, CANCELLED, TIMEOUT, ... */
    FSM_ACCT_REQUEUE = 4, /* back to PENDING (requeue after a node failure, failed launch) */
};

/* One record of the outbox, borrowed from the state until the next apply/restore/free. */
struct fsm_acct_view {
    uint64_t seq;
    uint64_t time_ms;
    const uint8_t *bytes; /* the packed spur.fsm.AcctRecord */
    size_t len;
};

struct fsm_acct_stats {
    bool enabled;        /* the replicated setting */
    uint64_t records;    /* in the outbox */
    size_t bytes;        /* their packed size */
    uint64_t first_seq;  /* oldest record's seq, 0: empty */
    uint64_t last_seq;   /* newest record's seq, 0: empty */
    uint64_t oldest_ms;  /* oldest record's time_ms, 0: empty */
    uint64_t next_seq;   /* what the next record gets */
};

void fsm_acct_get_stats(const struct fsm *f, struct fsm_acct_stats *out);
/* Up to max records with seq > after_seq, in seq order, into out[]; returns how many. */
size_t fsm_acct_records(const struct fsm *f, uint64_t after_seq, struct fsm_acct_view *out,
                        size_t max);
/* The AcctTrim entry. FSM_OK with *out malloc'd, or FSM_ENOMEM. */
int fsm_encode_acct_trim(uint64_t through_seq, uint64_t time_ms, uint8_t **out, size_t *len);

/*
 * sacct from the replicated state: every job held (pending, running, and finished ones not
 * yet purged) and, for jobs no longer held, the newest outbox record of each, that matches
 * q (AcctQueryRequest's rules: every filter given must hold; start_ms: not ended before it;
 * end_ms: submitted before it), as AcctJob rows by job id, at most limit (0: 100000),
 * truncated set when more matched. The rows and their strings belong to out (free with
 * fsm_acct_result_free).
 */
struct fsm_acct_result {
    Spur__Api__AcctJob **jobs;
    size_t n;
    bool truncated;
    void *priv;
};
int fsm_acct_query(const struct fsm *f, const Spur__Api__AcctQueryRequest *q,
                   struct fsm_acct_result *out);
void fsm_acct_result_free(struct fsm_acct_result *r);
/* ---- metrics ------------------------------------------------------------------------------ */

struct fsm_stats {
    uint64_t last_applied;
    uint64_t log_time_ms;
    uint64_t next_job_id;
    uint64_t jobs;
    uint64_t jobs_by_state[FSM_JOB_NSTATES]; /* index: Spur__Api__JobState */
    uint64_t nodes;
    uint64_t nodes_by_state[FSM_NODE_NSTATES]; /* index: Spur__Api__NodeState */
    uint64_t partitions;
    uint64_t sessions;
    uint32_t finished_job_retention_s;
    uint32_t max_script_bytes;
    size_t job_bytes;     /* held by job records */
    size_t session_bytes; /* responses held by sessions */
    /* Counted by this process since fsm_new() (not replicated, not in snapshots): */
    uint64_t applied;     /* entries applied */
    uint64_t bad_entries; /* entries that did not decode, or of a newer version */
    uint64_t rejected;    /* commands answered with an error code */
    uint64_t duplicates;  /* writes answered from a session */
    uint64_t purged_jobs;
    uint64_t expired_sessions; /* expired or evicted */
    uint64_t alloc_skipped;    /* JobsAllocated allocations that no longer fit at apply */
};

void fsm_stats(const struct fsm *f, struct fsm_stats *out);

#endif
