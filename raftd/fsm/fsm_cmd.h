/*
 * fsm_cmd.h - what each command does to the state: validation and transitions
 * (docs/state-machine.md has the rules in prose).
 *
 * Guarantees:
 *   - fsm_cmd_apply() validates a command completely before it changes anything, so a
 *     refused command leaves the state exactly as it was and its result says why in one
 *     line with a Spur__Api__Code. The only exception is running out of memory.
 *   - It reads nothing but the state and the command; every timestamp it records is the
 *     log clock (f->now_ms), which the caller advances before calling.
 *   - It does not deal with sessions, retention or the log clock: fsm.c does, around it.
 *   - Lifecycle reports from the leader (JobsCompleted, JobsStarted, JobLaunchFailed) for
 *     another attempt, a finished job or a part already done are answered OK and change
 *     nothing, so a report sent twice (an agent resends until acked) is harmless. Batch
 *     commands (JobsAllocated, JobsStarted, JobsCompleted, NodesNotResponding) check each
 *     item on its own, as the state is when it applies, skip the ones that no longer fit,
 *     and answer OK.
 *   - As it applies, it records what the leader must do in f->ev (fsm_events.h); nothing
 *     it decides reads that record.
 *   - Accounting (fsm_acct.h): every job event it applies (accepted, RUNNING, a final
 *     state, back to PENDING) appends one outbox record through acct_record(), after the
 *     change, while SetSettings.accounting is on; AcctTrim drops the exported prefix.
 *     Every final state goes through finish_job(), every requeue through requeue_job().
 *   - Job ownership (commands of version >= 2, fsm.h FSM_COMMAND_VERSION): cancel, hold
 *     and release of a job whose uid is not the command's caller_uid, by a caller that is
 *     not an operator, are refused with CODE_DENIED "Access/permission denied" and leave
 *     the job alone. cancel_jobs by a non-operator: a user filter naming anyone but the
 *     caller is refused whole (DENIED); otherwise the filters only reach the caller's own
 *     jobs, and another user's job named by id is listed in denied. Version 1 commands
 *     (logs written before ownership existed) apply as they did then, without the check.
 *
 * Ownership: a struct fsm_cmd_result owns its id lists; fsm_cmd_result_free() frees them.
 */
#ifndef SPUR_FSM_CMD_H
#define SPUR_FSM_CMD_H

#include "fsm_state.h"

struct fsm_idlist {
    uint64_t *v; /* owned */
    size_t n;
    size_t cap;
};

enum fsm_result_kind {
    FSM_RES_NONE = 0,   /* an error: code and error only */
    FSM_RES_DONE = 1,   /* Response.done */
    FSM_RES_SUBMIT = 2, /* Response.submit_job */
    FSM_RES_CANCEL = 3, /* Response.cancel_jobs */
};

struct fsm_cmd_result {
    int code; /* Spur__Api__Code */
    char error[FSM_ERR_MAX];
    enum fsm_result_kind kind;
    uint64_t job_id;
    struct fsm_idlist cancelled;
    struct fsm_idlist not_found;
    struct fsm_idlist already_done;
    struct fsm_idlist denied; /* named by id, another user's (version >= 2) */
};

void fsm_cmd_result_init(struct fsm_cmd_result *r);
void fsm_cmd_result_free(struct fsm_cmd_result *r);
/* Set an error result (code and printf-formatted line). */
void fsm_cmd_fail(struct fsm_cmd_result *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The result as a packed spur.api.Response (code, error, result). FSM_OK or FSM_ENOMEM. */
int fsm_cmd_result_pack(const struct fsm_cmd_result *r, uint8_t **out, size_t *len);

/* Apply one decoded command. Returns FSM_OK (the outcome is in r) or FSM_ENOMEM. */
int fsm_cmd_apply(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r);

/* The error line of an ownership refusal (Slurm's ESLURM_ACCESS_DENIED text). */
#define FSM_DENIED_MSG "Access/permission denied"

/* Validation limits of a job spec (docs/state-machine.md). */
#define FSM_JOB_NAME_MAX       256
#define FSM_USER_MAX           256
#define FSM_PATH_MAX           4096
#define FSM_ENV_MAX_ENTRIES    4096
#define FSM_ENV_MAX_BYTES      (1u << 20)
#define FSM_MAX_TASKS          (1u << 24)
#define FSM_MAX_CPUS_PER_NODE  1000000u
#define FSM_MAX_MEM_MB         (1ull << 40)
#define FSM_MAX_SCRIPT_SETTING (64u << 20)
#define FSM_MAX_RETENTION_S    (365u * 86400u)

#endif
