/*
 * fsm_cmd.c - one function per command: check everything, then change the state.
 * See fsm_cmd.h; the rules are written out in docs/state-machine.md.
 */
#include "fsm_cmd.h"

#include "fsm_acct.h"
#include "fsm_events.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PB_STR(s) ((s) != NULL ? (s) : "")

#define C_OK        SPUR__API__CODE__CODE_OK
#define C_INVALID   SPUR__API__CODE__CODE_INVALID
#define C_NOT_FOUND SPUR__API__CODE__CODE_NOT_FOUND
#define C_CONFLICT  SPUR__API__CODE__CODE_CONFLICT
#define C_TOO_LARGE SPUR__API__CODE__CODE_TOO_LARGE
#define C_DENIED    SPUR__API__CODE__CODE_DENIED

/* The first command version whose caller is checked against a job's owner. */
#define OWNERSHIP_VERSION 2u
/* The first command version whose submits carry dependencies. */
#define DEPS_VERSION 4u

#define JS_PENDING       SPUR__API__JOB_STATE__JOB_PENDING
#define JS_RUNNING       SPUR__API__JOB_STATE__JOB_RUNNING
#define JS_COMPLETING    SPUR__API__JOB_STATE__JOB_COMPLETING
#define JS_CONFIGURING   SPUR__API__JOB_STATE__JOB_CONFIGURING
#define JS_OUT_OF_MEMORY SPUR__API__JOB_STATE__JOB_OUT_OF_MEMORY

/* A failed launch puts the job back with this back-off, doubling per restart, capped. */
#define LAUNCH_BACKOFF_MS     10000u
#define LAUNCH_BACKOFF_MAX_MS 600000u
/* Failed launches in a row that drain a node. */
#define LAUNCH_FAILURES_DRAIN 3u

/* ---- results -------------------------------------------------------------------------- */

void fsm_cmd_result_init(struct fsm_cmd_result *r)
{
    memset(r, 0, sizeof(*r));
    r->code = C_OK;
}

void fsm_cmd_result_free(struct fsm_cmd_result *r)
{
    free(r->cancelled.v);
    free(r->not_found.v);
    free(r->already_done.v);
    free(r->denied.v);
    fsm_cmd_result_init(r);
}

void fsm_cmd_fail(struct fsm_cmd_result *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof(r->error), fmt, ap);
    va_end(ap);
    r->code = code;
    r->kind = FSM_RES_NONE;
}

static void done(struct fsm_cmd_result *r)
{
    r->code = C_OK;
    r->kind = FSM_RES_DONE;
}

static int idlist_push(struct fsm_idlist *l, uint64_t id)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        uint64_t *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return 0;
}

int fsm_cmd_result_pack(const struct fsm_cmd_result *r, uint8_t **out, size_t *len)
{
    Spur__Api__Response resp = SPUR__API__RESPONSE__INIT;
    Spur__Api__Empty empty = SPUR__API__EMPTY__INIT;
    Spur__Api__SubmitJobResponse submit = SPUR__API__SUBMIT_JOB_RESPONSE__INIT;
    Spur__Api__CancelJobsResponse cancel = SPUR__API__CANCEL_JOBS_RESPONSE__INIT;

    resp.code = (Spur__Api__Code)r->code;
    resp.error = (char *)r->error;
    switch (r->kind) {
    case FSM_RES_NONE:
        break;
    case FSM_RES_DONE:
        resp.result_case = SPUR__API__RESPONSE__RESULT_DONE;
        resp.done = &empty;
        break;
    case FSM_RES_SUBMIT:
        submit.job_id = r->job_id;
        resp.result_case = SPUR__API__RESPONSE__RESULT_SUBMIT_JOB;
        resp.submit_job = &submit;
        break;
    case FSM_RES_CANCEL:
        cancel.n_cancelled = r->cancelled.n;
        cancel.cancelled = r->cancelled.v;
        cancel.n_not_found = r->not_found.n;
        cancel.not_found = r->not_found.v;
        cancel.n_already_done = r->already_done.n;
        cancel.already_done = r->already_done.v;
        cancel.n_denied = r->denied.n;
        cancel.denied = r->denied.v;
        resp.result_case = SPUR__API__RESPONSE__RESULT_CANCEL_JOBS;
        resp.cancel_jobs = &cancel;
        break;
    }
    size_t n = spur__api__response__get_packed_size(&resp);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        return FSM_ENOMEM;
    *len = spur__api__response__pack(&resp, buf);
    *out = buf;
    return FSM_OK;
}

/* ---- checks shared by several commands -------------------------------------------------- */

/* A text field: at most max bytes (else TOO_LARGE) and no control characters (INVALID). */
static bool check_text(struct fsm_cmd_result *r, const char *what, const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max) {
        fsm_cmd_fail(r, C_TOO_LARGE, "%s is %zu bytes; the limit is %zu", what, n, max);
        return false;
    }
    if (!fsm_text_ok(s, max)) {
        fsm_cmd_fail(r, C_INVALID, "%s holds a control character", what);
        return false;
    }
    return true;
}

static struct fsm_job *find_job(struct fsm *f, uint64_t id, struct fsm_cmd_result *r)
{
    if (id == 0) {
        fsm_cmd_fail(r, C_INVALID, "job id 0 is not valid");
        return NULL;
    }
    struct fsm_job *job = fsm_jobs_find(&f->jobs, id);
    if (job == NULL)
        fsm_cmd_fail(r, C_NOT_FOUND, "job %" PRIu64 " does not exist", id);
    return job;
}

static struct fsm_node *find_node(struct fsm *f, const char *name, struct fsm_cmd_result *r)
{
    struct fsm_node *node = fsm_nodes_find(&f->nodes, name);
    if (node == NULL)
        fsm_cmd_fail(r, C_NOT_FOUND, "node \"%.64s\" does not exist", name);
    return node;
}

/*
 * Whether the command's caller may act on this job: an operator, or the job's owner (the
 * same uid). Commands older than OWNERSHIP_VERSION carry no trustworthy caller and apply
 * as they did when written, so replaying an old log gives the state it gave then.
 */
static bool may_touch(const Spur__Fsm__Command *cmd, const struct fsm_job *job)
{
    return cmd->version < OWNERSHIP_VERSION || cmd->caller_operator || cmd->caller_uid == job->uid;
}

/* find_job(), then the ownership rule: NULL with r set (DENIED) for another's job. */
static struct fsm_job *find_own_job(struct fsm *f, const Spur__Fsm__Command *cmd, uint64_t id,
                                    struct fsm_cmd_result *r)
{
    struct fsm_job *job = find_job(f, id, r);
    if (job != NULL && !may_touch(cmd, job)) {
        fsm_cmd_fail(r, C_DENIED, FSM_DENIED_MSG);
        return NULL;
    }
    return job;
}

/* ---- job endings and requeues ------------------------------------------------------------ */

/*
 * Every change accounting keeps (a job accepted, RUNNING, final, back to PENDING) calls
 * this once, after the change: the outbox gets the job's row as it is now.
 */
static int acct_record(struct fsm *f, const struct fsm_job *job, enum fsm_acct_event event)
{
    return fsm_acct_record(f, job, event);
}

/* The one way a job reaches a final state. FSM_OK or FSM_ENOMEM (the outbox record). */
static int finish_job(struct fsm *f, struct fsm_job *job, int state, int end_reason)
{
    job->end_ms = f->now_ms;
    job->end_reason = (uint8_t)end_reason;
    job->held = false;
    fsm_jobs_set_state(&f->jobs, job, state);
    fsm_ev_schedule(&f->ev);
    return acct_record(f, job, FSM_ACCT_END);
}

/*
 * Every part of the job is done: decide how it ended. A cancel wins over every outcome;
 * then the memory limit, the time limit, an exit code or signal.
 */
static int conclude_job(struct fsm *f, struct fsm_job *job)
{
    if (job->cancel_requested)
        return finish_job(f, job, SPUR__API__JOB_STATE__JOB_CANCELLED, FSM_END_NONE);
    if (job->oom)
        return finish_job(f, job, JS_OUT_OF_MEMORY, FSM_END_OUT_OF_MEMORY);
    if (job->timed_out)
        return finish_job(f, job, SPUR__API__JOB_STATE__JOB_TIMEOUT, FSM_END_TIME_LIMIT);
    if (job->exit_code != 0 || job->exit_signal != 0)
        return finish_job(f, job, SPUR__API__JOB_STATE__JOB_FAILED, FSM_END_NONZERO_EXIT);
    return finish_job(f, job, SPUR__API__JOB_STATE__JOB_COMPLETED, FSM_END_NONE);
}

static void release_all(struct fsm *f, struct fsm_job *job)
{
    for (uint32_t k = 0; job->run != NULL && k < job->run->n; k++)
        fsm_state_release_part(f, job, k);
}

/* The outcome of an attempt, cleared when a new attempt is placed or the job requeued. */
static void clear_outcome(struct fsm_job *job)
{
    job->exit_code = 0;
    job->exit_signal = 0;
    job->oom = false;
    job->timed_out = false;
}

/*
 * Back to PENDING: the attempt's parts released and killed wherever they still run, the
 * run dropped (the attempt number stays; the next placement adds one), restarts + 1.
 */
static int requeue_job(struct fsm *f, struct fsm_job *job, uint64_t eligible_ms)
{
    if (fsm_ev_kill(&f->ev, job) != 0)
        return FSM_ENOMEM;
    release_all(f, job);
    fsm_jobs_clear_run(&f->jobs, job);
    clear_outcome(job);
    job->start_ms = 0;
    job->restarts++;
    job->eligible_ms = eligible_ms;
    fsm_jobs_set_state(&f->jobs, job, JS_PENDING);
    fsm_ev_schedule(&f->ev);
    return acct_record(f, job, FSM_ACCT_REQUEUE);
}

/*
 * A placed job lost one of its nodes (the node went down, stopped answering, or its agent
 * no longer knows the attempt): requeued with --requeue, else NODE_FAIL; either way the
 * other nodes must kill the attempt.
 */
static int lose_job(struct fsm *f, struct fsm_job *job)
{
    if (job->requeue)
        return requeue_job(f, job, f->now_ms);
    if (fsm_ev_kill(&f->ev, job) != 0)
        return FSM_ENOMEM;
    release_all(f, job);
    return finish_job(f, job, SPUR__API__JOB_STATE__JOB_NODE_FAIL, FSM_END_NODE_FAIL);
}

/*
 * The part of a placed job on its i-th node is over without an outcome of its own (the
 * node was lost, the launch there failed or never happened). A cancelled job just counts
 * the part done and ends CANCELLED with its last part; any other loses the node.
 */
static int part_lost(struct fsm *f, struct fsm_job *job, uint32_t i)
{
    if (!job->cancel_requested)
        return lose_job(f, job);
    fsm_state_release_part(f, job, i);
    fsm_ev_schedule(&f->ev);
    if (job->run->ndone == job->run->n)
        return conclude_job(f, job);
    return FSM_OK;
}

/*
 * Cancel a job that is not finished: a pending one ends CANCELLED now; a placed one is
 * marked, goes COMPLETING, its agents are told to end it (a kill event), and it ends
 * CANCELLED when its nodes report.
 */
static int cancel_active(struct fsm *f, struct fsm_job *job)
{
    if (job->state == JS_PENDING)
        return finish_job(f, job, SPUR__API__JOB_STATE__JOB_CANCELLED, FSM_END_NONE);
    job->cancel_requested = true;
    if (job->state == JS_RUNNING || job->state == JS_CONFIGURING)
        fsm_jobs_set_state(&f->jobs, job, JS_COMPLETING);
    return fsm_ev_kill(&f->ev, job) == 0 ? FSM_OK : FSM_ENOMEM;
}

/* The index of node in a placed job's run, or run->n. */
static uint32_t run_index(const struct fsm_job *job, const char *node)
{
    uint32_t i = 0;
    while (i < job->run->n && strcmp(job->run->nodes[i], node) != 0)
        i++;
    return i;
}

/* Every placed job with an unfinished part on node loses it (see part_lost()). */
static int jobs_lost_on(struct fsm *f, const struct fsm_node *node)
{
    if (node->njobs == 0)
        return FSM_OK;
    for (size_t i = 0; i < f->jobs.norder; i++) {
        struct fsm_job *job = f->jobs.order[i];
        if (job == NULL || job->run == NULL || !fsm_job_state_placed(job->state))
            continue;
        uint32_t k = run_index(job, node->name);
        if (k == job->run->n || job->run->done[k])
            continue;
        if (part_lost(f, job, k) != FSM_OK)
            return FSM_ENOMEM;
    }
    return FSM_OK;
}

/* ---- jobs --------------------------------------------------------------------------------- */

static bool check_spec_strings(struct fsm_cmd_result *r, const Spur__Api__JobSpec *s)
{
    if (!check_text(r, "the job name", PB_STR(s->name), FSM_JOB_NAME_MAX) ||
        !check_text(r, "the stdout path", PB_STR(s->stdout_path), FSM_PATH_MAX) ||
        !check_text(r, "the stderr path", PB_STR(s->stderr_path), FSM_PATH_MAX) ||
        !check_text(r, "the working directory", PB_STR(s->workdir), FSM_PATH_MAX))
        return false;
    if (s->n_env > FSM_ENV_MAX_ENTRIES) {
        fsm_cmd_fail(r, C_TOO_LARGE, "the environment has %zu entries; the limit is %d", s->n_env,
                     FSM_ENV_MAX_ENTRIES);
        return false;
    }
    size_t env_bytes = 0;
    for (size_t i = 0; i < s->n_env; i++) {
        const char *e = PB_STR(s->env[i]);
        const char *eq = strchr(e, '=');
        if (eq == NULL || eq == e) {
            fsm_cmd_fail(r, C_INVALID, "environment entry %zu is not NAME=value", i + 1);
            return false;
        }
        env_bytes += strlen(e) + 1;
    }
    if (env_bytes > FSM_ENV_MAX_BYTES) {
        fsm_cmd_fail(r, C_TOO_LARGE, "the environment is %zu bytes; the limit is %u", env_bytes,
                     FSM_ENV_MAX_BYTES);
        return false;
    }
    return true;
}

/*
 * The dependency of a submit, parsed and judged against the jobs it names as they are
 * now, into *out. A job that is not held (purged, or never submitted) meets its entry,
 * as Slurm 22.05 lifts such a dependency; bad syntax is refused with Slurm's words, "Job
 * dependency problem". r->code stays C_OK unless refused. FSM_OK or FSM_ENOMEM.
 */
static int submit_deps(struct fsm *f, const Spur__Api__JobSpec *s, struct fsm_job_deps **out,
                       struct fsm_cmd_result *r)
{
    char why[160];
    struct fsm_job_deps *d = NULL;
    int prc = fsm_deps_parse(PB_STR(s->dependency), &d, why, sizeof(why));
    if (prc == -2)
        return FSM_ENOMEM;
    if (prc != 0) {
        fsm_cmd_fail(r, C_INVALID, "Job dependency problem: %s", why);
        return FSM_OK;
    }
    if (d == NULL) { /* --kill-on-invalid-dep without a dependency: nothing to keep */
        *out = NULL;
        return FSM_OK;
    }
    for (uint32_t i = 0; i < d->n; i++)
        d->d[i].state = fsm_dep_judge(&d->d[i], fsm_jobs_find(&f->jobs, d->d[i].job_id));
    d->kill_invalid = s->kill_on_invalid_dep;
    fsm_deps_combine(d);
    *out = d;
    return FSM_OK;
}

static int cmd_submit(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r)
{
    const Spur__Api__JobSpec *s = cmd->submit_job;
    if (s == NULL) {
        fsm_cmd_fail(r, C_INVALID, "submit without a job spec");
        return FSM_OK;
    }
    /* The request's user is who asked; the spec's is only a fallback. */
    const char *user = PB_STR(cmd->user)[0] ? cmd->user : PB_STR(s->user);
    if (user[0] == '\0') {
        fsm_cmd_fail(r, C_INVALID, "the job has no user");
        return FSM_OK;
    }
    if (!check_text(r, "the user name", user, FSM_USER_MAX))
        return FSM_OK;
    size_t script_len = s->script.data != NULL ? s->script.len : 0;
    if (script_len == 0) {
        fsm_cmd_fail(r, C_INVALID, "the job has no script");
        return FSM_OK;
    }
    if (script_len > f->max_script_bytes) {
        fsm_cmd_fail(r, C_TOO_LARGE, "the job script is %zu bytes; the limit is %u", script_len,
                     f->max_script_bytes);
        return FSM_OK;
    }
    if (!check_spec_strings(r, s) ||
        !check_text(r, "the account", PB_STR(s->account), FSM_USER_MAX))
        return FSM_OK;

    const struct fsm_part *p;
    const char *pname = PB_STR(s->partition);
    if (pname[0] == '\0') {
        p = fsm_nodes_default_part(&f->nodes);
        if (p == NULL) {
            fsm_cmd_fail(r, C_NOT_FOUND, "no default partition is configured");
            return FSM_OK;
        }
    } else {
        p = fsm_nodes_part(&f->nodes, pname);
        if (p == NULL) {
            fsm_cmd_fail(r, C_NOT_FOUND, "partition \"%.64s\" does not exist", pname);
            return FSM_OK;
        }
    }
    if (!p->up) {
        fsm_cmd_fail(r, C_CONFLICT, "partition %s is down and takes no new jobs", p->name);
        return FSM_OK;
    }

    uint32_t nodes = s->nodes ? s->nodes : 1;
    uint32_t ntasks = s->ntasks ? s->ntasks : nodes;
    uint32_t cpt = s->cpus_per_task ? s->cpus_per_task : 1;
    if (nodes > FSM_MAX_NODES) {
        fsm_cmd_fail(r, C_INVALID, "%u nodes requested; no partition can hold more than %d", nodes,
                     FSM_MAX_NODES);
        return FSM_OK;
    }
    if (ntasks < nodes) {
        fsm_cmd_fail(r, C_INVALID, "%u tasks on %u nodes: each node needs at least one task",
                     ntasks, nodes);
        return FSM_OK;
    }
    if (ntasks > FSM_MAX_TASKS) {
        fsm_cmd_fail(r, C_INVALID, "%u tasks requested; the limit is %u", ntasks, FSM_MAX_TASKS);
        return FSM_OK;
    }
    uint64_t cpn = (((uint64_t)ntasks + nodes - 1) / nodes) * cpt;
    if (cpn > FSM_MAX_CPUS_PER_NODE) {
        fsm_cmd_fail(r, C_INVALID, "%" PRIu64 " CPUs per node requested; the limit is %u", cpn,
                     FSM_MAX_CPUS_PER_NODE);
        return FSM_OK;
    }
    if (s->mem_mb > FSM_MAX_MEM_MB) {
        fsm_cmd_fail(r, C_INVALID,
                     "%" PRIu64 " MiB of memory per node requested; the limit is %llu", s->mem_mb,
                     FSM_MAX_MEM_MB);
        return FSM_OK;
    }
    if (p->max_nodes != 0 && nodes > p->max_nodes) {
        fsm_cmd_fail(r, C_INVALID, "%u nodes exceed partition %s's max %u nodes", nodes, p->name,
                     p->max_nodes);
        return FSM_OK;
    }
    if (p->max_cpus_per_node != 0 && cpn > p->max_cpus_per_node) {
        fsm_cmd_fail(r, C_INVALID, "%" PRIu64 " CPUs per node exceed partition %s's max %u", cpn,
                     p->name, p->max_cpus_per_node);
        return FSM_OK;
    }
    if (p->max_mem_mb_per_node != 0 && s->mem_mb > p->max_mem_mb_per_node) {
        fsm_cmd_fail(r, C_INVALID,
                     "%" PRIu64 " MiB of memory per node exceeds partition %s's max %" PRIu64
                     " MiB",
                     s->mem_mb, p->name, p->max_mem_mb_per_node);
        return FSM_OK;
    }
    uint32_t time_limit = s->time_limit_min;
    if (time_limit == 0) {
        time_limit = p->max_time_min; /* the partition's limit, or unlimited */
    } else if (p->max_time_min != 0 && time_limit > p->max_time_min) {
        fsm_cmd_fail(r, C_INVALID, "time limit %u min exceeds partition %s's max %u min",
                     time_limit, p->name, p->max_time_min);
        return FSM_OK;
    }
    if (f->jobs.count >= f->lim.max_jobs) {
        fsm_cmd_fail(r, C_CONFLICT, "the controller holds %zu jobs, its limit; try again later",
                     f->jobs.count);
        return FSM_OK;
    }

    struct fsm_job_deps *deps = NULL;
    if (cmd->version >= DEPS_VERSION &&
        (PB_STR(s->dependency)[0] != '\0' || s->kill_on_invalid_dep)) {
        int drc = submit_deps(f, s, &deps, r);
        if (drc != FSM_OK || r->code != C_OK)
            return drc;
    }
    struct fsm_job *job = fsm_job_new(s, user, p->name);
    if (job == NULL) {
        free(deps);
        return FSM_ENOMEM;
    }
    job->deps = deps;
    job->id = f->next_job_id;
    job->nodes = nodes;
    job->ntasks = ntasks;
    job->cpus_per_task = cpt;
    job->mem_mb = s->mem_mb;
    job->time_limit_min = time_limit;
    job->state = JS_PENDING;
    job->held = s->hold;
    job->submit_ms = f->now_ms;
    job->eligible_ms = s->hold ? 0 : f->now_ms;
    if (fsm_jobs_add(&f->jobs, job) != 0) {
        fsm_job_free(job);
        return FSM_ENOMEM;
    }
    f->next_job_id++;
    if (!job->held)
        fsm_ev_schedule(&f->ev);
    if (acct_record(f, job, FSM_ACCT_SUBMIT) != FSM_OK)
        return FSM_ENOMEM;
    if (deps != NULL) {
        /* Listed under each job it still waits on; one that cannot be met may end now. */
        for (uint32_t i = 0; i < deps->n && deps->state == FSM_DEP_WAIT; i++)
            if (deps->d[i].state == FSM_DEP_WAIT &&
                fsm_dep_index_add(&f->jobs.deps, deps->d[i].job_id, job->id) != 0)
                return FSM_ENOMEM;
        if (deps->state == FSM_DEP_FAILED && deps->kill_invalid &&
            finish_job(f, job, SPUR__API__JOB_STATE__JOB_CANCELLED, FSM_END_DEPENDENCY) != FSM_OK)
            return FSM_ENOMEM;
    }
    r->code = C_OK;
    r->kind = FSM_RES_SUBMIT;
    r->job_id = job->id;
    return FSM_OK;
}

static int cmd_cancel(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r)
{
    const Spur__Api__JobIdRequest *req = cmd->cancel_job;
    struct fsm_job *job = find_own_job(f, cmd, req != NULL ? req->job_id : 0, r);
    if (job == NULL)
        return FSM_OK;
    if (fsm_job_state_final(job->state)) {
        fsm_cmd_fail(r, C_CONFLICT, "job %" PRIu64 " already finished (%s)", job->id,
                     fsm_job_state_name(job->state));
        return FSM_OK;
    }
    if (cancel_active(f, job) != FSM_OK)
        return FSM_ENOMEM;
    done(r);
    return FSM_OK;
}

/*
 * A non-operator's user filter may name only the caller (scancel -u X of someone else's
 * jobs is Slurm's "Access/permission denied"). Version 1 commands are not checked.
 */
static bool users_filter_allowed(const Spur__Fsm__Command *cmd,
                                 const Spur__Api__CancelJobsRequest *q)
{
    if (cmd->version < OWNERSHIP_VERSION || cmd->caller_operator)
        return true;
    for (size_t i = 0; i < q->n_users; i++)
        if (strcmp(PB_STR(q->users[i]), PB_STR(cmd->user)) != 0)
            return false;
    return true;
}

static int cmd_cancel_jobs(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r)
{
    const Spur__Api__CancelJobsRequest *q = cmd->cancel_jobs;
    if (q == NULL || (q->n_ids == 0 && q->n_users == 0 && q->n_states == 0 && q->n_names == 0 &&
                      q->n_partitions == 0)) {
        fsm_cmd_fail(r, C_INVALID, "no jobs selected: give job ids or a filter");
        return FSM_OK;
    }
    for (size_t i = 0; i < q->n_states; i++) {
        if ((int)q->states[i] <= 0 || (int)q->states[i] >= FSM_JOB_NSTATES) {
            fsm_cmd_fail(r, C_INVALID, "unknown job state %d in the filter", (int)q->states[i]);
            return FSM_OK;
        }
    }
    if (!users_filter_allowed(cmd, q)) {
        fsm_cmd_fail(r, C_DENIED, FSM_DENIED_MSG);
        return FSM_OK;
    }
    /* The non-id filters of scancel: each given filter must match. */
    const struct fsm_job_filter flt = {
        .users = q->users,
        .n_users = q->n_users,
        .states = q->states,
        .n_states = q->n_states,
        .names = q->names,
        .n_names = q->n_names,
        .partitions = q->partitions,
        .n_partitions = q->n_partitions,
    };
    r->kind = FSM_RES_CANCEL;
    if (q->n_ids > 0) {
        uint64_t *ids = malloc(q->n_ids * sizeof(*ids));
        if (ids == NULL)
            return FSM_ENOMEM;
        memcpy(ids, q->ids, q->n_ids * sizeof(*ids));
        size_t nids = fsm_jobs_sort_ids(ids, q->n_ids);
        int rc = FSM_OK;
        for (size_t i = 0; i < nids && rc == FSM_OK; i++) {
            struct fsm_job *job = fsm_jobs_find(&f->jobs, ids[i]);
            if (job == NULL) {
                rc = idlist_push(&r->not_found, ids[i]);
            } else if (!fsm_job_filter_match(job, &flt)) {
                continue; /* named, but another filter excludes it: left alone */
            } else if (!may_touch(cmd, job)) {
                rc = idlist_push(&r->denied, ids[i]);
            } else if (fsm_job_state_final(job->state)) {
                rc = idlist_push(&r->already_done, ids[i]);
            } else {
                rc = idlist_push(&r->cancelled, ids[i]);
                if (rc == 0 && cancel_active(f, job) != FSM_OK)
                    rc = -1;
            }
        }
        free(ids);
        return rc == 0 ? FSM_OK : FSM_ENOMEM;
    }
    for (size_t i = 0; i < f->jobs.norder; i++) {
        struct fsm_job *job = f->jobs.order[i];
        /* A filter reaches only the jobs the caller may touch: its own, unless an operator. */
        if (job == NULL || fsm_job_state_final(job->state) || !fsm_job_filter_match(job, &flt) ||
            !may_touch(cmd, job))
            continue;
        if (idlist_push(&r->cancelled, job->id) != 0 || cancel_active(f, job) != FSM_OK)
            return FSM_ENOMEM;
    }
    return FSM_OK;
}

static struct fsm_job *find_pending(struct fsm *f, const Spur__Fsm__Command *cmd,
                                    const Spur__Api__JobIdRequest *req, struct fsm_cmd_result *r)
{
    struct fsm_job *job = find_own_job(f, cmd, req != NULL ? req->job_id : 0, r);
    if (job != NULL && job->state != JS_PENDING) {
        fsm_cmd_fail(r, C_CONFLICT, "job %" PRIu64 " is not pending (%s)", job->id,
                     fsm_job_state_name(job->state));
        return NULL;
    }
    return job;
}

static int cmd_hold(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r)
{
    struct fsm_job *job = find_pending(f, cmd, cmd->hold_job, r);
    if (job == NULL)
        return FSM_OK;
    job->held = true;
    job->eligible_ms = 0;
    fsm_ev_schedule(&f->ev); /* a reservation it held may go to another job */
    done(r);
    return FSM_OK;
}

static int cmd_release(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r)
{
    struct fsm_job *job = find_pending(f, cmd, cmd->release_job, r);
    if (job == NULL)
        return FSM_OK;
    if (job->held) {
        job->held = false;
        job->eligible_ms = f->now_ms;
        fsm_ev_schedule(&f->ev);
    }
    done(r);
    return FSM_OK;
}

/* ---- nodes -------------------------------------------------------------------------------- */

static bool check_reason(struct fsm_cmd_result *r, const char *reason, const char *verb)
{
    if (reason[0] == '\0') {
        fsm_cmd_fail(r, C_INVALID, "a reason is required to %s a node", verb);
        return false;
    }
    return check_text(r, "the reason", reason, FSM_REASON_MAX);
}

static int cmd_update_node(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r)
{
    const Spur__Api__UpdateNodeRequest *u = cmd->update_node;
    /* Who set a reason is kept only as text the snapshot reader takes back. */
    const char *who = fsm_text_ok(PB_STR(cmd->user), FSM_USER_MAX) ? PB_STR(cmd->user) : "";
    uint32_t who_uid = cmd->caller_uid;
    if (u == NULL) {
        fsm_cmd_fail(r, C_INVALID, "update without a node");
        return FSM_OK;
    }
    struct fsm_node *node = find_node(f, PB_STR(u->name), r);
    if (node == NULL)
        return FSM_OK;
    const char *st = PB_STR(u->state);
    const char *reason = PB_STR(u->reason);
    if (strcasecmp(st, "drain") == 0) {
        if (!check_reason(r, reason, "drain"))
            return FSM_OK;
        if (fsm_node_set_reason_by(node, reason, f->now_ms, who, who_uid) != 0)
            return FSM_ENOMEM;
        node->drain = true;
    } else if (strcasecmp(st, "down") == 0) {
        if (!check_reason(r, reason, "down"))
            return FSM_OK;
        if (fsm_node_set_reason_by(node, reason, f->now_ms, who, who_uid) != 0)
            return FSM_ENOMEM;
        node->down = true;
        node->not_responding = false; /* an operator's down: only an operator clears it */
        fsm_ev_nodes(&f->ev);
        if (jobs_lost_on(f, node) != FSM_OK)
            return FSM_ENOMEM;
    } else if (strcasecmp(st, "resume") == 0 || strcasecmp(st, "idle") == 0) {
        if (!node->down && !node->drain) {
            fsm_cmd_fail(r, C_CONFLICT, "node \"%s\" is not down, drained or draining", node->name);
            return FSM_OK;
        }
        node->down = false;
        node->drain = false;
        node->not_responding = false;
        node->launch_failures = 0;
        fsm_node_set_reason(node, NULL, 0);
        fsm_ev_nodes(&f->ev);
        fsm_ev_schedule(&f->ev);
    } else if (strcasecmp(st, "undrain") == 0) {
        if (!node->drain) {
            fsm_cmd_fail(r, C_CONFLICT, "node \"%s\" is not drained or draining", node->name);
            return FSM_OK;
        }
        node->drain = false;
        node->launch_failures = 0;
        if (!node->down)
            fsm_node_set_reason(node, NULL, 0);
        fsm_ev_schedule(&f->ev);
    } else {
        fsm_cmd_fail(r, C_INVALID, "unknown node state \"%.32s\"; use drain, resume, down or idle",
                     st);
        return FSM_OK;
    }
    done(r);
    return FSM_OK;
}

/*
 * The node's agent answers again (it registered, or answered the leader's heartbeat):
 * undo what NodesNotResponding did, and only that (Slurm's ReturnToService=1 for a node
 * that stopped responding). An operator's down or drain stays.
 */
static void node_answers_again(struct fsm *f, struct fsm_node *node)
{
    if (!node->not_responding)
        return;
    node->not_responding = false;
    node->down = false;
    if (!node->drain)
        fsm_node_set_reason(node, NULL, 0);
    fsm_ev_nodes(&f->ev);
    fsm_ev_schedule(&f->ev);
}

static int cmd_register_node(struct fsm *f, const Spur__Api__RegisterNodeRequest *q,
                             struct fsm_cmd_result *r)
{
    if (q == NULL) {
        fsm_cmd_fail(r, C_INVALID, "register without a node");
        return FSM_OK;
    }
    const char *name = PB_STR(q->name);
    if (!fsm_name_ok(name, FSM_NAME_MAX)) {
        fsm_cmd_fail(r, C_INVALID,
                     "node name \"%.64s\" is not 1 to %d letters, digits, '.', '-' or '_'", name,
                     FSM_NAME_MAX);
        return FSM_OK;
    }
    if (q->cpus == 0 || q->cpus > FSM_MAX_CPUS_PER_NODE) {
        fsm_cmd_fail(r, C_INVALID, "node \"%s\": %u CPUs; a node has 1 to %u", name, q->cpus,
                     FSM_MAX_CPUS_PER_NODE);
        return FSM_OK;
    }
    if (q->mem_mb > FSM_MAX_MEM_MB) {
        fsm_cmd_fail(r, C_INVALID, "node \"%s\": %" PRIu64 " MiB of memory is over the limit", name,
                     q->mem_mb);
        return FSM_OK;
    }
    if (!check_text(r, "the node address", PB_STR(q->address), FSM_ADDRESS_MAX))
        return FSM_OK;
    if (q->n_features > FSM_MAX_FEATURES) {
        fsm_cmd_fail(r, C_TOO_LARGE, "node \"%s\" has %zu features; the limit is %d", name,
                     q->n_features, FSM_MAX_FEATURES);
        return FSM_OK;
    }
    for (size_t i = 0; i < q->n_features; i++) {
        if (!fsm_name_ok(PB_STR(q->features[i]), FSM_NAME_MAX)) {
            fsm_cmd_fail(r, C_INVALID, "node \"%s\": feature \"%.64s\" is not a valid name", name,
                         PB_STR(q->features[i]));
            return FSM_OK;
        }
    }
    struct fsm_node *node = fsm_nodes_find(&f->nodes, name);
    if (node == NULL) {
        if (f->nodes.n >= FSM_MAX_NODES) {
            fsm_cmd_fail(r, C_CONFLICT, "the controller holds %d nodes, its limit", FSM_MAX_NODES);
            return FSM_OK;
        }
        node = fsm_nodes_add(&f->nodes, name);
        if (node == NULL)
            return FSM_ENOMEM;
    }
    if (fsm_node_set_identity(node, q->address, q->features, q->n_features) != 0)
        return FSM_ENOMEM;
    node->cpus = q->cpus;
    node->mem_mb = q->mem_mb;
    node->registered = true;
    node->last_seen_ms = f->now_ms;
    if (q->from_agent)
        node_answers_again(f, node);
    fsm_ev_nodes(&f->ev);
    fsm_ev_schedule(&f->ev);
    done(r);
    return FSM_OK;
}

/*
 * The agents that answered the leader: names[] (unknown or unregistered names skipped),
 * and the single name of older entries, which must exist.
 */
static int cmd_heartbeat(struct fsm *f, const Spur__Fsm__NodeHeartbeat *h, struct fsm_cmd_result *r)
{
    if (h != NULL && h->n_names > 0) {
        for (size_t i = 0; i < h->n_names; i++) {
            struct fsm_node *n = fsm_nodes_find(&f->nodes, PB_STR(h->names[i]));
            if (n != NULL && n->registered) {
                n->last_seen_ms = f->now_ms;
                node_answers_again(f, n);
            }
        }
        struct fsm_node *n = fsm_nodes_find(&f->nodes, PB_STR(h->name));
        if (n != NULL && n->registered)
            n->last_seen_ms = f->now_ms;
        done(r);
        return FSM_OK;
    }
    struct fsm_node *node = find_node(f, h != NULL ? PB_STR(h->name) : "", r);
    if (node == NULL)
        return FSM_OK;
    if (!node->registered) {
        fsm_cmd_fail(r, C_CONFLICT, "node \"%s\" has not registered", node->name);
        return FSM_OK;
    }
    node->last_seen_ms = f->now_ms;
    done(r);
    return FSM_OK;
}

/* ---- configuration ---------------------------------------------------------------------- */

static int cmd_set_partitions(struct fsm *f, const Spur__Fsm__SetPartitions *sp,
                              struct fsm_cmd_result *r)
{
    size_t n = sp != NULL ? sp->n_partitions : 0;
    Spur__Api__Partition *const *parts = sp != NULL ? sp->partitions : NULL;
    for (size_t i = 0; i < n; i++) {
        if (parts[i] == NULL) {
            fsm_cmd_fail(r, C_INVALID, "partition %zu is empty", i + 1);
            return FSM_OK;
        }
    }
    if (fsm_nodes_check_parts(parts, n, r->error, sizeof(r->error)) != 0) {
        r->code = C_INVALID;
        return FSM_OK;
    }
    if (fsm_nodes_set_parts(&f->nodes, parts, n) != 0)
        return FSM_ENOMEM;
    fsm_ev_schedule(&f->ev);
    done(r);
    return FSM_OK;
}

static int cmd_set_settings(struct fsm *f, const Spur__Fsm__SetSettings *s,
                            struct fsm_cmd_result *r)
{
    if (s == NULL) {
        fsm_cmd_fail(r, C_INVALID, "settings without values");
        return FSM_OK;
    }
    if (s->finished_job_retention_s > FSM_MAX_RETENTION_S) {
        fsm_cmd_fail(r, C_INVALID, "finished job retention %u s is over the limit of %u s",
                     s->finished_job_retention_s, FSM_MAX_RETENTION_S);
        return FSM_OK;
    }
    if (s->max_script_bytes == 0 || s->max_script_bytes > FSM_MAX_SCRIPT_SETTING) {
        fsm_cmd_fail(r, C_INVALID, "max script bytes %u is not between 1 and %u",
                     s->max_script_bytes, FSM_MAX_SCRIPT_SETTING);
        return FSM_OK;
    }
    f->retention_s = s->finished_job_retention_s;
    f->max_script_bytes = s->max_script_bytes;
    /* Absent (false) in entries before version 3: an old log never turns it on. */
    f->acct.enabled = s->accounting;
    done(r);
    return FSM_OK;
}

/* The exporter wrote everything through through_seq: those records leave the outbox. */
static int cmd_acct_trim(struct fsm *f, const Spur__Fsm__AcctTrim *t, struct fsm_cmd_result *r)
{
    fsm_acct_trim(&f->acct, t != NULL ? t->through_seq : 0);
    done(r);
    return FSM_OK;
}

/* ---- running jobs: placement, start, reports, failed launches, lost nodes ---------------- */

/*
 * Whether job (PENDING, not held) may be placed on these nodes now: exactly job->nodes
 * distinct, existing nodes of its partition (which is up), each usable with the job's
 * CPUs and memory free. false with r set to the reason otherwise.
 */
static bool check_placement(struct fsm *f, const struct fsm_job *job, char *const *nodes, size_t n,
                            struct fsm_cmd_result *r)
{
    if (job->state != JS_PENDING) {
        fsm_cmd_fail(r, C_CONFLICT, "job %" PRIu64 " is not pending (%s)", job->id,
                     fsm_job_state_name(job->state));
        return false;
    }
    if (job->held) {
        fsm_cmd_fail(r, C_CONFLICT, "job %" PRIu64 " is held", job->id);
        return false;
    }
    if (n != job->nodes) {
        fsm_cmd_fail(r, C_INVALID, "job %" PRIu64 " needs %u nodes, not %zu", job->id, job->nodes,
                     n);
        return false;
    }
    const struct fsm_part *p = fsm_nodes_part(&f->nodes, job->partition);
    if (p != NULL && !p->up) {
        fsm_cmd_fail(r, C_CONFLICT, "partition %s is down", p->name);
        return false;
    }
    uint64_t cpus = fsm_job_cpus_per_node(job);
    for (size_t i = 0; i < n; i++) {
        const char *name = PB_STR(nodes[i]);
        const struct fsm_node *node = find_node(f, name, r);
        if (node == NULL)
            return false;
        for (size_t k = 0; k < i; k++) {
            if (strcmp(name, PB_STR(nodes[k])) == 0) {
                fsm_cmd_fail(r, C_INVALID, "node \"%s\" is named twice", name);
                return false;
            }
        }
        if (p == NULL || !fsm_part_has_node(p, name)) {
            fsm_cmd_fail(r, C_CONFLICT, "node \"%s\" is not in partition %s", name, job->partition);
            return false;
        }
        uint64_t free_cpus = node->cpus > node->alloc_cpus ? node->cpus - node->alloc_cpus : 0;
        uint64_t free_mem =
            node->mem_mb > node->alloc_mem_mb ? node->mem_mb - node->alloc_mem_mb : 0;
        if (!fsm_node_usable(node) || free_cpus < cpus || (job->mem_mb && free_mem < job->mem_mb)) {
            fsm_cmd_fail(r, C_CONFLICT, "node \"%s\" cannot take job %" PRIu64 " now", name,
                         job->id);
            return false;
        }
    }
    return true;
}

/* Place a checked job: a new attempt on these nodes, charged, in state (CONFIGURING or
 * RUNNING). */
static int place_job(struct fsm *f, struct fsm_job *job, char *const *nodes, size_t n, int state)
{
    if (fsm_jobs_set_run(&f->jobs, job, nodes, (uint32_t)n) != 0)
        return FSM_ENOMEM;
    job->attempt++;
    clear_outcome(job);
    fsm_jobs_set_state(&f->jobs, job, state);
    fsm_state_alloc_job(f, job);
    return FSM_OK;
}

/* The agents of the job's nodes started it: those nodes' failure counts start over. */
static void launch_succeeded(struct fsm *f, struct fsm_job *job)
{
    job->start_ms = f->now_ms;
    for (uint32_t i = 0; i < job->run->n; i++) {
        struct fsm_node *node = fsm_nodes_find(&f->nodes, job->run->nodes[i]);
        if (node != NULL)
            node->launch_failures = 0;
    }
}

/* Place and start in one step, without agents (tests, benches). */
static int cmd_job_started(struct fsm *f, const Spur__Fsm__JobStarted *js, struct fsm_cmd_result *r)
{
    struct fsm_job *job = find_job(f, js != NULL ? js->job_id : 0, r);
    if (job == NULL || !check_placement(f, job, js->nodes, js->n_nodes, r))
        return FSM_OK;
    if (place_job(f, job, js->nodes, js->n_nodes, JS_RUNNING) != FSM_OK)
        return FSM_ENOMEM;
    job->start_ms = f->now_ms;
    if (acct_record(f, job, FSM_ACCT_START) != FSM_OK)
        return FSM_ENOMEM;
    done(r);
    return FSM_OK;
}

/* The job's dependency lets it start now (met, and no singleton of its name runs). */
static bool deps_allow(const struct fsm *f, const struct fsm_job *job)
{
    if (job->deps == NULL)
        return true;
    if (job->deps->state != FSM_DEP_MET)
        return false;
    return !job->deps->singleton || !fsm_state_singleton_busy(f, job);
}

/* A scheduler pass: each allocation that still fits places its job (CONFIGURING). */
static int cmd_jobs_allocated(struct fsm *f, const Spur__Fsm__JobsAllocated *ja,
                              struct fsm_cmd_result *r)
{
    size_t n = ja != NULL ? ja->n_allocations : 0;
    for (size_t i = 0; i < n; i++) {
        const Spur__Fsm__Allocation *a = ja->allocations[i];
        struct fsm_cmd_result why;
        fsm_cmd_result_init(&why);
        struct fsm_job *job = a != NULL ? fsm_jobs_find(&f->jobs, a->job_id) : NULL;
        if (job == NULL || job->eligible_ms > f->now_ms || !deps_allow(f, job) ||
            !check_placement(f, job, a->nodes, a->n_nodes, &why)) {
            /* Stale (the state moved since the pass): the next pass looks again. */
            f->ctr.alloc_skipped++;
            fsm_ev_schedule(&f->ev);
            continue;
        }
        if (place_job(f, job, a->nodes, a->n_nodes, JS_CONFIGURING) != FSM_OK ||
            fsm_ev_launch(&f->ev, job) != 0)
            return FSM_ENOMEM;
    }
    done(r);
    return FSM_OK;
}

/* Every agent confirmed the launch of (job, attempt): RUNNING. Anything else: ignored. */
static int cmd_jobs_started(struct fsm *f, const Spur__Fsm__JobsStarted *js,
                            struct fsm_cmd_result *r)
{
    size_t n = js != NULL ? js->n_starts : 0;
    for (size_t i = 0; i < n; i++) {
        const Spur__Fsm__JobStart *st = js->starts[i];
        struct fsm_job *job = st != NULL ? fsm_jobs_find(&f->jobs, st->job_id) : NULL;
        if (job == NULL || job->run == NULL || job->attempt != st->attempt)
            continue;
        if (job->state == JS_CONFIGURING) {
            launch_succeeded(f, job);
            fsm_jobs_set_state(&f->jobs, job, JS_RUNNING);
            if (acct_record(f, job, FSM_ACCT_START) != FSM_OK)
                return FSM_ENOMEM;
        } else if (job->state == JS_COMPLETING && job->start_ms == 0) {
            launch_succeeded(f, job); /* cancelled or ended while configuring */
        }
    }
    done(r);
    return FSM_OK;
}

/*
 * One node's report of a job. A report for a finished job, another attempt, an abandoned
 * attempt (the job is pending again) or a part already done is answered OK and changes
 * nothing, so the leader acks it to the agent. The other refusals are the single
 * JobCompleted's of before: unknown job (NOT_FOUND), attempt 0 for a job not placed
 * (CONFLICT), a node the job does not run on (INVALID).
 */
static int apply_report(struct fsm *f, const Spur__Fsm__JobCompleted *jc, struct fsm_cmd_result *r)
{
    if (fsm_ev_reported(&f->ev, jc->job_id, jc->attempt, PB_STR(jc->node)) != 0)
        return FSM_ENOMEM;
    struct fsm_job *job = find_job(f, jc->job_id, r);
    if (job == NULL)
        return FSM_OK;
    done(r);
    if (fsm_job_state_final(job->state) || (jc->attempt != 0 && jc->attempt != job->attempt))
        return FSM_OK;
    if (!fsm_job_state_placed(job->state) || job->run == NULL) {
        if (jc->attempt == 0)
            fsm_cmd_fail(r, C_CONFLICT, "job %" PRIu64 " is not running (%s)", job->id,
                         fsm_job_state_name(job->state));
        return FSM_OK;
    }
    const char *name = PB_STR(jc->node);
    uint32_t i = run_index(job, name);
    if (i == job->run->n) {
        fsm_cmd_fail(r, C_INVALID, "job %" PRIu64 " does not run on node \"%.64s\"", job->id, name);
        return FSM_OK;
    }
    if (job->run->done[i])
        return FSM_OK;
    if (jc->lost)
        return part_lost(f, job, i);
    if (job->state == JS_CONFIGURING && !jc->never_ran) {
        /* Ended before the leader proposed RUNNING: it did start. */
        if (job->start_ms == 0)
            job->start_ms = f->now_ms;
        struct fsm_node *node = fsm_nodes_find(&f->nodes, name);
        if (node != NULL)
            node->launch_failures = 0;
        fsm_jobs_set_state(&f->jobs, job, JS_RUNNING);
        if (acct_record(f, job, FSM_ACCT_START) != FSM_OK)
            return FSM_ENOMEM;
    }
    fsm_state_release_part(f, job, i);
    fsm_ev_schedule(&f->ev);
    if (!jc->never_ran) {
        if (jc->exit_code != 0 && job->exit_code == 0)
            job->exit_code = jc->exit_code;
        if (jc->signal != 0 && job->exit_signal == 0)
            job->exit_signal = jc->signal;
        job->oom |= jc->oom;
        job->timed_out |= jc->timed_out;
    }
    /*
     * The batch script runs on the first node only (Slurm's batch host); the others are
     * held for it. Its report ends the job: every other part is released with it.
     */
    if (i == 0)
        release_all(f, job);
    if (job->run->ndone == job->run->n)
        return conclude_job(f, job);
    if (job->state == JS_RUNNING || job->state == JS_CONFIGURING)
        fsm_jobs_set_state(&f->jobs, job, JS_COMPLETING);
    return FSM_OK;
}

static int cmd_job_completed(struct fsm *f, const Spur__Fsm__JobCompleted *jc,
                             struct fsm_cmd_result *r)
{
    if (jc == NULL) {
        fsm_cmd_fail(r, C_INVALID, "job id 0 is not valid");
        return FSM_OK;
    }
    return apply_report(f, jc, r);
}

/* A batch of reports: each applies as a JobCompleted; one that is refused changes nothing. */
static int cmd_jobs_completed(struct fsm *f, const Spur__Fsm__JobsCompleted *jc,
                              struct fsm_cmd_result *r)
{
    size_t n = jc != NULL ? jc->n_reports : 0;
    for (size_t i = 0; i < n; i++) {
        if (jc->reports[i] == NULL)
            continue;
        struct fsm_cmd_result one;
        fsm_cmd_result_init(&one);
        if (apply_report(f, jc->reports[i], &one) != FSM_OK)
            return FSM_ENOMEM;
    }
    done(r);
    return FSM_OK;
}

/* The agent's words, made a node reason: control characters blanked, cut to fit. */
static int drain_for_launch(struct fsm *f, struct fsm_node *node, const char *why)
{
    char reason[FSM_REASON_MAX + 1];
    snprintf(reason, sizeof(reason), "launch failed: %s", why[0] ? why : "unknown error");
    for (char *c = reason; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    if (fsm_node_set_reason(node, reason, f->now_ms) != 0)
        return FSM_ENOMEM;
    node->drain = true;
    return FSM_OK;
}

static uint64_t launch_backoff_ms(uint32_t restarts)
{
    uint64_t ms = LAUNCH_BACKOFF_MS;
    for (uint32_t k = 1; k < restarts && ms < LAUNCH_BACKOFF_MAX_MS; k++)
        ms *= 2;
    return ms < LAUNCH_BACKOFF_MAX_MS ? ms : LAUNCH_BACKOFF_MAX_MS;
}

/*
 * An agent refused the launch of (job, attempt). node_fault: the job goes back to the
 * queue with a back-off and the node's failure count grows (drained at 3). Otherwise the
 * job cannot run anywhere: FAILED, JobLaunchFailure. A report for another attempt, a job
 * no longer configuring or a part already done changes nothing; for a job cancelled while
 * configuring it only marks the part done.
 */
static int cmd_job_launch_failed(struct fsm *f, const Spur__Fsm__JobLaunchFailed *lf,
                                 struct fsm_cmd_result *r)
{
    struct fsm_job *job = find_job(f, lf != NULL ? lf->job_id : 0, r);
    if (job == NULL)
        return FSM_OK;
    done(r);
    if (!fsm_job_state_placed(job->state) || job->run == NULL ||
        (lf->attempt != 0 && lf->attempt != job->attempt))
        return FSM_OK;
    const char *name = PB_STR(lf->node);
    uint32_t i = run_index(job, name);
    if (i == job->run->n) {
        fsm_cmd_fail(r, C_INVALID, "job %" PRIu64 " does not run on node \"%.64s\"", job->id, name);
        return FSM_OK;
    }
    if (job->run->done[i])
        return FSM_OK;
    if (job->cancel_requested)
        return part_lost(f, job, i);
    if (job->state == JS_RUNNING)
        return FSM_OK; /* every agent had confirmed: this refusal is late news */
    if (!lf->node_fault) {
        if (fsm_ev_kill(&f->ev, job) != 0)
            return FSM_ENOMEM;
        release_all(f, job);
        return finish_job(f, job, SPUR__API__JOB_STATE__JOB_FAILED, FSM_END_LAUNCH_FAILED);
    }
    struct fsm_node *node = fsm_nodes_find(&f->nodes, name);
    if (node != NULL) {
        node->launch_failures++;
        if (node->launch_failures >= LAUNCH_FAILURES_DRAIN && !node->drain &&
            drain_for_launch(f, node, PB_STR(lf->reason)) != FSM_OK)
            return FSM_ENOMEM;
    }
    return requeue_job(f, job, f->now_ms + launch_backoff_ms(job->restarts + 1));
}

/*
 * The leader's agent timeout: each named, registered node not already down goes DOWN
 * ("Not responding", marked not_responding so its agent's next registration undoes it);
 * its jobs lose the node. Unknown names are skipped.
 */
static int cmd_nodes_not_responding(struct fsm *f, const Spur__Fsm__NodesNotResponding *nr,
                                    struct fsm_cmd_result *r)
{
    size_t n = nr != NULL ? nr->n_names : 0;
    for (size_t i = 0; i < n; i++) {
        struct fsm_node *node = fsm_nodes_find(&f->nodes, PB_STR(nr->names[i]));
        if (node == NULL || !node->registered || node->down)
            continue;
        if (!node->drain && fsm_node_set_reason(node, "Not responding", f->now_ms) != 0)
            return FSM_ENOMEM;
        node->down = true;
        node->not_responding = true;
        fsm_ev_nodes(&f->ev);
        if (jobs_lost_on(f, node) != FSM_OK)
            return FSM_ENOMEM;
    }
    done(r);
    return FSM_OK;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

/* ---- dependencies ------------------------------------------------------------------------- */

/*
 * Judge again the entries of a job that waits on others. Met: it becomes eligible now (its
 * EligibleTime, as in Slurm) unless held. Failed: it stays pending as
 * DependencyNeverSatisfied, or with --kill-on-invalid-dep=yes ends CANCELLED.
 */
static int judge_waiting(struct fsm *f, struct fsm_job *job)
{
    if (job == NULL || job->state != JS_PENDING || job->deps == NULL ||
        job->deps->state != FSM_DEP_WAIT)
        return FSM_OK;
    struct fsm_job_deps *d = job->deps;
    for (uint32_t i = 0; i < d->n; i++)
        d->d[i].state = fsm_dep_judge(&d->d[i], fsm_jobs_find(&f->jobs, d->d[i].job_id));
    switch (fsm_deps_combine(d)) {
    case FSM_DEP_MET:
        if (!job->held) {
            if (job->eligible_ms < f->now_ms)
                job->eligible_ms = f->now_ms;
            fsm_ev_schedule(&f->ev);
        }
        return FSM_OK;
    case FSM_DEP_FAILED:
        if (d->kill_invalid)
            return finish_job(f, job, SPUR__API__JOB_STATE__JOB_CANCELLED, FSM_END_DEPENDENCY);
        return FSM_OK;
    default:
        return FSM_OK;
    }
}

/*
 * The jobs that started or ended in this entry and that others wait on (queued by
 * fsm_jobs_set_state): judge their waiters, in the order the log made them; a waiter
 * that ends in turn is queued behind. A job that ended leaves the index.
 */
static int settle_deps(struct fsm *f)
{
    struct fsm_dep_index *x = &f->jobs.deps;
    int rc = FSM_OK;
    for (size_t i = 0; i < x->nfired && rc == FSM_OK; i++) {
        uint64_t t = x->fired[i];
        const struct fsm_job *tj = fsm_jobs_find(&f->jobs, t);
        bool final = tj == NULL || fsm_job_state_final(tj->state);
        struct fsm_dep_waiters *w = fsm_dep_index_get(x, t, final);
        for (uint32_t k = 0; w != NULL && k < w->n && rc == FSM_OK; k++)
            rc = judge_waiting(f, fsm_jobs_find(&f->jobs, w->ids[k]));
        if (final)
            free(w);
    }
    x->nfired = 0;
    if (rc == FSM_OK && x->lost) {
        /* A start or end went unqueued (no memory): judge every waiting job instead. */
        x->lost = false;
        for (size_t i = 0; i < f->jobs.norder && rc == FSM_OK; i++)
            rc = judge_waiting(f, f->jobs.order[i]);
        if (rc == FSM_OK && (x->nfired > 0 || x->lost))
            return settle_deps(f);
    }
    return rc;
}

static int apply_op(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r);

int fsm_cmd_apply(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r)
{
    int rc = apply_op(f, cmd, r);
    if (rc == FSM_OK && (f->jobs.deps.nfired > 0 || f->jobs.deps.lost))
        rc = settle_deps(f);
    return rc;
}

static int apply_op(struct fsm *f, const Spur__Fsm__Command *cmd, struct fsm_cmd_result *r)
{
    switch (cmd->op_case) {
    case SPUR__FSM__COMMAND__OP_SUBMIT_JOB:
        return cmd_submit(f, cmd, r);
    case SPUR__FSM__COMMAND__OP_CANCEL_JOB:
        return cmd_cancel(f, cmd, r);
    case SPUR__FSM__COMMAND__OP_CANCEL_JOBS:
        return cmd_cancel_jobs(f, cmd, r);
    case SPUR__FSM__COMMAND__OP_HOLD_JOB:
        return cmd_hold(f, cmd, r);
    case SPUR__FSM__COMMAND__OP_RELEASE_JOB:
        return cmd_release(f, cmd, r);
    case SPUR__FSM__COMMAND__OP_UPDATE_NODE:
        return cmd_update_node(f, cmd, r);
    case SPUR__FSM__COMMAND__OP_REGISTER_NODE:
        return cmd_register_node(f, cmd->register_node, r);
    case SPUR__FSM__COMMAND__OP_SET_PARTITIONS:
        return cmd_set_partitions(f, cmd->set_partitions, r);
    case SPUR__FSM__COMMAND__OP_SET_SETTINGS:
        return cmd_set_settings(f, cmd->set_settings, r);
    case SPUR__FSM__COMMAND__OP_TICK:
        done(r);
        return FSM_OK;
    case SPUR__FSM__COMMAND__OP_JOB_STARTED:
        return cmd_job_started(f, cmd->job_started, r);
    case SPUR__FSM__COMMAND__OP_JOB_COMPLETED:
        return cmd_job_completed(f, cmd->job_completed, r);
    case SPUR__FSM__COMMAND__OP_NODE_HEARTBEAT:
        return cmd_heartbeat(f, cmd->node_heartbeat, r);
    case SPUR__FSM__COMMAND__OP_JOBS_ALLOCATED:
        fsm_ev_alloc_entry(&f->ev);
        return cmd_jobs_allocated(f, cmd->jobs_allocated, r);
    case SPUR__FSM__COMMAND__OP_JOBS_STARTED:
        return cmd_jobs_started(f, cmd->jobs_started, r);
    case SPUR__FSM__COMMAND__OP_JOBS_COMPLETED:
        return cmd_jobs_completed(f, cmd->jobs_completed, r);
    case SPUR__FSM__COMMAND__OP_JOB_LAUNCH_FAILED:
        return cmd_job_launch_failed(f, cmd->job_launch_failed, r);
    case SPUR__FSM__COMMAND__OP_NODES_NOT_RESPONDING:
        return cmd_nodes_not_responding(f, cmd->nodes_not_responding, r);
    case SPUR__FSM__COMMAND__OP_ACCT_TRIM:
        return cmd_acct_trim(f, cmd->acct_trim, r);
    case SPUR__FSM__COMMAND__OP__NOT_SET:
    default:
        fsm_cmd_fail(r, C_INVALID, "log entry without an operation (or one this build lacks)");
        return FSM_OK;
    }
}
