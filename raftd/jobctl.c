/*
 * jobctl.c - the leader's job duties; the contract is in jobctl.h.
 *
 * Data flow, one way per step:
 *
 *   node applied hook --> jobctl_applied: office start/end; fsm_events_take() ->
 *        launches (Launch to each node), kills (Signal terminate), reports applied
 *        (EndedAck), scheduling wanted
 *   agents hooks -----> up: Ping first, then what the node still owes (Launches not
 *                       confirmed, terminates not sent); answers: Pong -> reconcile,
 *                       LaunchReply -> gathering, SignalReply -> never_ran / client;
 *                       Ended push -> the report set
 *   the loop turn ----> on_turn (at most once per turn): one JobsStarted, one
 *                       JobsCompleted, the JobLaunchFailed entries, a scheduler pass
 *   the period -------> heartbeat round (Ping, one NodeHeartbeat), node time-outs,
 *                       tracked jobs checked against the state, a scheduler pass
 *
 * Tracked jobs are the attempts this leader follows: filled by the office-start reconcile
 * and by launch events, checked against the state every period (an attempt the state no
 * longer places is dropped). They are an index and a memory of confirmations; every
 * decision that terminates or fails a job reads the state first.
 *
 * Clocks: mono_ms() for every delay here; wall_ms() only as the time stamped into
 * commands and given to the scheduler (the state's clock is the leader's wall clock).
 */
#include "jobctl.h"

#include "agents.h"
#include "log.h"
#include "names.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_TAG_KILL   0 /* terminate of a tracked attempt: not found -> never_ran */
#define SIG_TAG_ORPHAN 1 /* terminate after a Pong: nothing more to do */
/* A client's signal: tag = SIG_TAG_CLIENT + waiter id. */
#define SIG_TAG_CLIENT 2

/* A node of the state, as the leader watches it. */
struct jnode {
    char name[FSM_NODE_NAME_MAX + 1];
    char address[300];
    bool watched;            /* registered and not DOWN: silence counts */
    uint64_t last_answer_ms; /* mono; 0: none in this office */
    bool answered;           /* since the last heartbeat round */
    uint64_t nr_proposed_ms; /* NodesNotResponding proposed at; 0: not */
    bool seen;               /* still in the state (node sync) */
    bool wrong_agent_logged; /* its address answers as another node (logged once) */
    bool verified;           /* this connection's agent answered a Ping as this node */
};

/* A client's SignalJobRequest waiting for the agents. Owns nothing but its place. */
struct sigwait {
    struct sigwait *next;
    uint64_t id;
    struct api_call *call; /* answered exactly once */
    uint64_t job_id;
    uint32_t remaining;
    char err[200]; /* the first failure */
};

/* A JobLaunchFailed waiting for the loop turn. */
struct launch_fail {
    uint64_t job_id;
    uint32_t attempt;
    char node[FSM_NODE_NAME_MAX + 1];
    char reason[200];
    bool node_fault;
};

struct jobctl {
    struct node *n;        /* borrowed */
    struct node_api *api;  /* borrowed */
    const struct cfg *cfg; /* borrowed */
    struct agents *agents; /* owned */
    struct event *ev_turn; /* owned: the once-per-turn flush */
    struct event *ev_tick; /* owned: the period */

    bool active;
    raft_term office_term;
    uint64_t office_ms;
    uint64_t seq; /* orders Pings and confirmations */
    uint64_t last_round_ms;

    struct jnode *nodes; /* owned */
    size_t nnodes, capnodes;
    struct jobctl_job *jobs; /* owned */
    size_t njobs, capjobs;
    struct jobctl_reports reports;
    struct jobctl_start_list {
        struct jobctl_start {
            uint64_t job_id;
            uint32_t attempt;
            uint64_t due_ms; /* proposed from then on, unless its report came first */
        } *v;
        size_t n, cap;
    } starts;
    struct event *ev_starts; /* owned: the hold of the earliest queued start */
    struct launch_fail *fails;
    size_t nfails, capfails;
    struct sigwait *sigwaits;
    uint64_t next_sigwait;
    struct jobctl_sched sched;
    struct jobctl_stats st;
};

/* ---- pure rules ------------------------------------------------------------------------ */

uint32_t jobctl_cpus_per_node(const Spur__Api__JobSpec *spec, uint32_t nnodes)
{
    uint32_t nn = nnodes ? nnodes : 1;
    uint32_t ntasks = spec && spec->ntasks ? spec->ntasks : 1;
    uint32_t cpt = spec && spec->cpus_per_task ? spec->cpus_per_task : 1;
    uint32_t per = (ntasks + nn - 1) / nn;
    return (per ? per : 1) * cpt;
}

enum jobctl_launch_verdict jobctl_launch_reply(struct jobctl_job *j, uint32_t part, bool ok,
                                               uint64_t seq)
{
    if (part >= j->nparts)
        return JOBCTL_LAUNCH_WAIT;
    struct jobctl_part *p = &j->parts[part];
    p->launch_out = false;
    if (ok && p->confirmed_seq == JOBCTL_UNCONFIRMED)
        p->confirmed_seq = seq;
    if (j->killing || j->failed || j->started)
        return JOBCTL_LAUNCH_WAIT;
    if (!ok) {
        j->failed = true;
        return JOBCTL_LAUNCH_FAILED;
    }
    for (uint32_t i = 0; i < j->nparts; i++)
        if (j->parts[i].confirmed_seq == JOBCTL_UNCONFIRMED)
            return JOBCTL_LAUNCH_WAIT;
    j->started = true;
    return JOBCTL_LAUNCH_STARTED;
}

size_t jobctl_pong_verdicts(const struct jobctl_placed *placed, size_t np,
                            const struct jobctl_seen *seen, size_t ns, uint64_t ping_seq,
                            struct jobctl_verdict *out)
{
    size_t k = 0;
    for (size_t i = 0; i < np; i++) {
        const struct jobctl_placed *p = &placed[i];
        bool listed = false;
        for (size_t s = 0; s < ns && !listed; s++)
            listed = seen[s].job_id == p->job_id && seen[s].attempt == p->attempt;
        /* A launch confirmed after the Ping left may be newer than the agent's list. */
        if (!listed && !p->reported && p->confirmed_seq < ping_seq)
            out[k++] = (struct jobctl_verdict){JOBCTL_LOST, p->job_id, p->attempt};
    }
    for (size_t s = 0; s < ns; s++) {
        if (seen[s].ended) /* over already; its report ends it in the state */
            continue;
        bool placed_here = false;
        for (size_t i = 0; i < np && !placed_here; i++)
            placed_here =
                placed[i].job_id == seen[s].job_id && placed[i].attempt == seen[s].attempt;
        if (!placed_here)
            out[k++] = (struct jobctl_verdict){JOBCTL_TERMINATE, seen[s].job_id, seen[s].attempt};
    }
    return k;
}

bool jobctl_node_silent(uint64_t now_ms, uint64_t office_ms, uint64_t last_answer_ms,
                        uint32_t timeout_s)
{
    uint64_t from = last_answer_ms > office_ms ? last_answer_ms : office_ms;
    return now_ms >= from && now_ms - from >= (uint64_t)timeout_s * 1000;
}

static struct jobctl_report *report_find(const struct jobctl_reports *r, uint64_t job_id,
                                         uint32_t attempt, const char *node)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].rep.job_id == job_id && r->v[i].rep.attempt == attempt &&
            strcmp(r->v[i].node_buf, node) == 0)
            return &r->v[i];
    return NULL;
}

int jobctl_reports_add(struct jobctl_reports *r, const Spur__Fsm__JobCompleted *rep)
{
    const char *node = rep->node ? rep->node : "";
    if (strlen(node) > FSM_NODE_NAME_MAX)
        return -1;
    if (report_find(r, rep->job_id, rep->attempt, node))
        return 0;
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64;
        struct jobctl_report *nv = realloc(r->v, nc * sizeof(*nv));
        if (nv == NULL)
            return -1;
        r->v = nv;
        r->cap = nc;
    }
    struct jobctl_report *e = &r->v[r->n++];
    memset(e, 0, sizeof(*e));
    e->rep = *rep;
    e->rep.node = NULL; /* set at take: the array moves */
    snprintf(e->node_buf, sizeof(e->node_buf), "%s", node);
    return 1;
}

static void report_drop(struct jobctl_reports *r, size_t i)
{
    r->v[i] = r->v[--r->n];
}

void jobctl_reports_applied(struct jobctl_reports *r, uint64_t job_id, uint32_t attempt,
                            const char *node)
{
    struct jobctl_report *e = report_find(r, job_id, attempt, node);
    if (e)
        report_drop(r, (size_t)(e - r->v));
}

bool jobctl_reports_has(const struct jobctl_reports *r, uint64_t job_id, uint32_t attempt,
                        const char *node)
{
    return report_find(r, job_id, attempt, node) != NULL;
}

void jobctl_reports_expire(struct jobctl_reports *r, uint64_t now_ms, uint64_t age_ms)
{
    for (size_t i = r->n; i-- > 0;)
        if (r->v[i].proposed_ms != 0 && now_ms - r->v[i].proposed_ms >= age_ms)
            report_drop(r, i);
}

size_t jobctl_reports_take(struct jobctl_reports *r, uint64_t now_ms, Spur__Fsm__JobCompleted **out,
                           size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n && k < max; i++) {
        struct jobctl_report *e = &r->v[i];
        if (e->proposed_ms != 0)
            continue;
        e->proposed_ms = now_ms ? now_ms : 1;
        e->rep.node = e->node_buf;
        out[k++] = &e->rep;
    }
    return k;
}

void jobctl_reports_free(struct jobctl_reports *r)
{
    free(r->v);
    memset(r, 0, sizeof(*r));
}

bool jobctl_sched_due(const struct jobctl_sched *s, uint64_t now_ms)
{
    if (s->in_flight > 0)
        return false;
    if (s->last_end_ms == 0)
        return true;
    if (now_ms < s->last_end_ms + 3 * s->last_dur_ms)
        return false;
    return s->wanted || now_ms - s->last_end_ms >= JOBCTL_PERIOD_MS;
}

/* ---- small helpers --------------------------------------------------------------------- */

static void turn_soon(struct jobctl *jc)
{
    event_active(jc->ev_turn, EV_TIMEOUT, 0);
}

static void propose(struct jobctl *jc, Spur__Fsm__Command *cmd, void (*refused)(void *))
{
    uint8_t *data = NULL;
    size_t len = 0;
    cmd->time_ms = wall_ms();
    if (fsm_encode_command(cmd, &data, &len) != FSM_OK) {
        log_event(LOG_ERROR, "jobctl", "cannot encode a command: out of memory", NULL);
        return;
    }
    node_api_propose_internal(jc->api, data, len, refused, jc);
}

static struct jnode *node_find(struct jobctl *jc, const char *name)
{
    for (size_t i = 0; i < jc->nnodes; i++)
        if (strcmp(jc->nodes[i].name, name) == 0)
            return &jc->nodes[i];
    return NULL;
}

/*
 * Connected, and its agent answered a Ping of this connection as this node: only then do
 * launches and signals go to it (a wrong address must not start or kill anything).
 */
static bool node_ready(struct jobctl *jc, const char *name)
{
    const struct jnode *nd = node_find(jc, name);
    return nd != NULL && nd->verified && agents_is_up(jc->agents, name);
}

static struct jobctl_job *job_find(struct jobctl *jc, uint64_t job_id)
{
    for (size_t i = 0; i < jc->njobs; i++)
        if (jc->jobs[i].job_id == job_id)
            return &jc->jobs[i];
    return NULL;
}

static int part_index(const struct jobctl_job *j, const char *node)
{
    for (uint32_t i = 0; i < j->nparts; i++)
        if (strcmp(j->parts[i].node, node) == 0)
            return (int)i;
    return -1;
}

static void job_drop(struct jobctl *jc, struct jobctl_job *j)
{
    free(j->parts);
    *j = jc->jobs[--jc->njobs];
}

/* Track (job, attempt) on node_list, replacing an older attempt. NULL: out of memory. */
static struct jobctl_job *job_track(struct jobctl *jc, uint64_t job_id, uint32_t attempt,
                                    char *const *node_list, size_t n)
{
    struct jobctl_job *j = job_find(jc, job_id);
    if (j && j->attempt == attempt)
        return j;
    if (j)
        job_drop(jc, j);
    if (jc->njobs == jc->capjobs) {
        size_t nc = jc->capjobs ? jc->capjobs * 2 : 64;
        struct jobctl_job *nv = realloc(jc->jobs, nc * sizeof(*nv));
        if (nv == NULL)
            return NULL;
        jc->jobs = nv;
        jc->capjobs = nc;
    }
    struct jobctl_part *parts = calloc(n ? n : 1, sizeof(*parts));
    if (parts == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        snprintf(parts[i].node, sizeof(parts[i].node), "%s", node_list[i]);
        parts[i].confirmed_seq = JOBCTL_UNCONFIRMED;
    }
    j = &jc->jobs[jc->njobs++];
    *j = (struct jobctl_job){
        .job_id = job_id, .attempt = attempt, .nparts = (uint32_t)n, .parts = parts};
    return j;
}

/*
 * The parts the leader follows: the batch host only. Slurm runs a batch script once, on
 * the first node of the allocation, and holds the others for it (the state machine ends
 * the job on the batch host's report), so only that node is launched, confirmed,
 * reconciled and signalled.
 */
static size_t batch_parts(const Spur__Api__Job *job)
{
    return job->n_node_list > 0 ? 1 : 0;
}

static bool placed_state(Spur__Api__JobState s)
{
    return s == SPUR__API__JOB_STATE__JOB_CONFIGURING || s == SPUR__API__JOB_STATE__JOB_RUNNING ||
           s == SPUR__API__JOB_STATE__JOB_COMPLETING;
}

static bool job_on_node(const Spur__Api__Job *job, const char *node)
{
    for (size_t i = 0; i < job->n_node_list; i++)
        if (strcmp(job->node_list[i], node) == 0)
            return true;
    return false;
}

/* fsm_get_jobs() of these ids (states: any). FSM_OK or FSM_ENOMEM. */
static int read_jobs(const struct jobctl *jc, uint64_t *ids, size_t n, struct fsm_read *out)
{
    Spur__Api__GetJobsRequest q = SPUR__API__GET_JOBS_REQUEST__INIT;
    q.ids = ids;
    q.n_ids = n;
    return fsm_get_jobs(jc->n->fsm, &q, out);
}

static size_t read_njobs(const struct fsm_read *rd, Spur__Api__Job ***jobs)
{
    if (rd->resp.code != SPUR__API__CODE__CODE_OK ||
        rd->resp.result_case != SPUR__API__RESPONSE__RESULT_JOBS || rd->resp.jobs == NULL) {
        *jobs = NULL;
        return 0;
    }
    *jobs = rd->resp.jobs->jobs;
    return rd->resp.jobs->n_jobs;
}

/* ---- talking to agents ------------------------------------------------------------------ */

static void send_ping(struct jobctl *jc, const char *node)
{
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    Spur__Agent__Ping p = SPUR__AGENT__PING__INIT;
    p.leader_id = jc->n->id;
    p.term = jc->office_term;
    p.node_name = (char *)node;
    m.body_case = SPUR__AGENT__MSG__BODY_PING;
    m.ping = &p;
    uint64_t seq = ++jc->seq;
    agents_request(jc->agents, node, &m, 0, 0, seq, NULL);
}

/* Send part i of j its Launch, built from the state. */
static void send_launch(struct jobctl *jc, struct jobctl_job *j, uint32_t i)
{
    struct jobctl_part *p = &j->parts[i];
    if (j->killing || j->failed || p->launch_out || p->confirmed_seq != JOBCTL_UNCONFIRMED ||
        !node_ready(jc, p->node))
        return;
    struct fsm_read rd;
    if (fsm_get_job(jc->n->fsm, j->job_id, &rd) != FSM_OK)
        return;
    Spur__Api__Job **jobs;
    if (read_njobs(&rd, &jobs) != 1 || jobs[0]->attempt != j->attempt ||
        jobs[0]->state != SPUR__API__JOB_STATE__JOB_CONFIGURING) {
        fsm_read_free(&rd);
        return; /* moved on: the period drops it */
    }
    const Spur__Api__Job *job = jobs[0];
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    Spur__Agent__Launch l = SPUR__AGENT__LAUNCH__INIT;
    l.job_id = job->id;
    l.attempt = job->attempt;
    l.spec = job->spec;
    l.node_list = job->node_list;
    l.n_node_list = job->n_node_list;
    l.node_index = i;
    l.cpus = jobctl_cpus_per_node(job->spec, (uint32_t)job->n_node_list);
    l.mem_mb = job->spec ? job->spec->mem_mb : 0;
    l.time_limit_min = job->spec ? job->spec->time_limit_min : 0;
    l.kill_wait_s = jc->cfg->agent.kill_wait_s;
    l.submit_time_ms = job->submit_time_ms;
    m.body_case = SPUR__AGENT__MSG__BODY_LAUNCH;
    m.launch = &l;
    if (agents_request(jc->agents, p->node, &m, j->job_id, j->attempt, 0, NULL) == 0) {
        p->launch_out = true;
        jc->st.launches++;
    }
    fsm_read_free(&rd);
}

static int send_signal(struct jobctl *jc, const char *node, uint64_t job_id, uint32_t attempt,
                       int32_t sig, bool terminate, uint64_t tag)
{
    if (!node_ready(jc, node))
        return -1;
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    Spur__Agent__Signal s = SPUR__AGENT__SIGNAL__INIT;
    s.job_id = job_id;
    s.attempt = attempt;
    s.signal = sig;
    s.terminate = terminate;
    m.body_case = SPUR__AGENT__MSG__BODY_SIGNAL;
    m.signal = &s;
    return agents_request(jc->agents, node, &m, job_id, attempt, tag, NULL);
}

static void send_kills(struct jobctl *jc, struct jobctl_job *j)
{
    for (uint32_t i = 0; i < j->nparts; i++) {
        struct jobctl_part *p = &j->parts[i];
        if (p->done || p->kill_out)
            continue;
        if (send_signal(jc, p->node, j->job_id, j->attempt, 0, true, SIG_TAG_KILL) == 0)
            p->kill_out = true;
    }
}

/* What a node owes after (re)connecting: its Launches and its terminates. */
static void resend_for_node(struct jobctl *jc, const char *node)
{
    for (size_t k = 0; k < jc->njobs; k++) {
        struct jobctl_job *j = &jc->jobs[k];
        int i = part_index(j, node);
        if (i < 0)
            continue;
        if (j->killing)
            send_kills(jc, j);
        else
            send_launch(jc, j, (uint32_t)i);
    }
}

static void queue_report(struct jobctl *jc, const Spur__Fsm__JobCompleted *rep)
{
    int rc = jobctl_reports_add(&jc->reports, rep);
    if (rc < 0)
        log_event(LOG_WARN, "jobctl", "cannot queue a report", "job=%llu node=%s",
                  (unsigned long long)rep->job_id, log_q(rep->node));
    if (rc > 0)
        turn_soon(jc);
}

static void queue_never_ran(struct jobctl *jc, const char *node, uint64_t job_id, uint32_t attempt)
{
    Spur__Fsm__JobCompleted rep = SPUR__FSM__JOB_COMPLETED__INIT;
    rep.job_id = job_id;
    rep.attempt = attempt;
    rep.node = (char *)node;
    rep.never_ran = true;
    queue_report(jc, &rep);
}

/* ---- agents' hooks ----------------------------------------------------------------------- */

/* What a node owes is sent once its first Pong on the connection says who it is. */
static void on_agent_up(void *arg, const char *node)
{
    struct jobctl *jc = arg;
    struct jnode *nd = node_find(jc, node);
    if (nd)
        nd->verified = false;
    send_ping(jc, node); /* first on every connection */
}

static void on_agent_down(void *arg, const char *node, const char *why)
{
    struct jobctl *jc = arg;
    (void)why;
    struct jnode *nd = node_find(jc, node);
    if (nd)
        nd->verified = false;
    /* Terminates in flight are lost with the connection: send them again on the next. */
    for (size_t k = 0; k < jc->njobs; k++) {
        struct jobctl_job *j = &jc->jobs[k];
        int i = part_index(j, node);
        if (i >= 0 && !j->parts[i].done)
            j->parts[i].kill_out = false;
    }
}

static void drop_start(struct jobctl *jc, uint64_t job_id, uint32_t attempt);

static void on_ended(void *arg, const char *node, const Spur__Agent__Ended *e)
{
    struct jobctl *jc = arg;
    if (e->node && e->node[0] && strcmp(e->node, node) != 0) {
        log_event(LOG_WARN, "jobctl", "report of another node on this node's connection; ignored",
                  "node=%s report_node=%s job=%llu", log_q(node), log_q(e->node),
                  (unsigned long long)e->job_id);
        return;
    }
    jc->st.reports++;
    Spur__Fsm__JobCompleted rep = SPUR__FSM__JOB_COMPLETED__INIT;
    rep.job_id = e->job_id;
    rep.attempt = e->attempt;
    rep.node = (char *)node; /* the connection's node, whatever the report says */
    rep.exit_code = e->exit_code;
    rep.signal = e->signal;
    rep.oom = e->oom;
    rep.timed_out = e->timed_out;
    rep.start_time_ms = e->start_time_ms;
    rep.end_time_ms = e->end_time_ms;
    rep.never_ran = e->never_ran;
    if (!e->never_ran)
        drop_start(jc, e->job_id, e->attempt);
    queue_report(jc, &rep);
}

/* The Pong of the Ping sent at ping_seq: reconcile the node's jobs with the state. */
static void pong(struct jobctl *jc, const char *node, const Spur__Agent__Pong *pg,
                 uint64_t ping_seq)
{
    struct jnode *nd = node_find(jc, node);
    if (pg->node_name && pg->node_name[0] && strcmp(pg->node_name, node) != 0) {
        /* Another node's agent at this node's address: its list says nothing of this node. */
        if (nd && !nd->wrong_agent_logged)
            log_event(LOG_WARN, "jobctl", "the agent at a node's address is another node's",
                      "node=%s agent=%s", log_q(node), log_q(pg->node_name));
        if (nd)
            nd->wrong_agent_logged = true;
        return;
    }
    bool first = false;
    if (nd) {
        nd->wrong_agent_logged = false;
        nd->last_answer_ms = mono_ms();
        nd->answered = true;
        nd->nr_proposed_ms = 0;
        first = !nd->verified;
        nd->verified = true;
    }
    size_t cap = pg->n_running;
    for (size_t k = 0; k < jc->njobs; k++)
        cap += part_index(&jc->jobs[k], node) >= 0;
    uint64_t *ids = calloc(cap ? cap : 1, sizeof(*ids));
    struct jobctl_seen *seen = calloc(pg->n_running ? pg->n_running : 1, sizeof(*seen));
    struct jobctl_placed *placed = calloc(cap ? cap : 1, sizeof(*placed));
    struct jobctl_verdict *verd = calloc(cap + pg->n_running + 1, sizeof(*verd));
    struct fsm_read rd;
    memset(&rd, 0, sizeof(rd));
    bool have_read = false;
    if (ids == NULL || seen == NULL || placed == NULL || verd == NULL)
        goto out;
    size_t nids = 0;
    for (size_t k = 0; k < jc->njobs; k++)
        if (part_index(&jc->jobs[k], node) >= 0)
            ids[nids++] = jc->jobs[k].job_id;
    for (size_t s = 0; s < pg->n_running; s++) {
        seen[s] = (struct jobctl_seen){pg->running[s]->job_id, pg->running[s]->attempt,
                                       pg->running[s]->ended};
        ids[nids++] = pg->running[s]->job_id;
    }
    if (nids == 0)
        goto out;
    if (read_jobs(jc, ids, nids, &rd) != FSM_OK)
        goto out;
    have_read = true;
    Spur__Api__Job **jobs;
    size_t nj = read_njobs(&rd, &jobs), np = 0;
    for (size_t i = 0; i < nj && np < cap; i++) {
        const Spur__Api__Job *job = jobs[i];
        if (!placed_state(job->state) || !job_on_node(job, node))
            continue;
        struct jobctl_placed *p = &placed[np++];
        p->job_id = job->id;
        p->attempt = job->attempt;
        p->confirmed_seq = job->state == SPUR__API__JOB_STATE__JOB_RUNNING ? 0 : JOBCTL_UNCONFIRMED;
        p->reported = jobctl_reports_has(&jc->reports, job->id, job->attempt, node);
        const struct jobctl_job *t = job_find(jc, job->id);
        int pi = t && t->attempt == job->attempt ? part_index(t, node) : -1;
        if (pi >= 0) {
            p->confirmed_seq = t->parts[pi].confirmed_seq;
            p->reported = p->reported || t->parts[pi].done;
        }
    }
    size_t nv = jobctl_pong_verdicts(placed, np, seen, pg->n_running, ping_seq, verd);
    for (size_t v = 0; v < nv; v++) {
        if (verd[v].what == JOBCTL_LOST) {
            jc->st.lost++;
            log_event(LOG_WARN, "jobctl", "job lost: its agent no longer knows it",
                      "job=%llu attempt=%u node=%s", (unsigned long long)verd[v].job_id,
                      verd[v].attempt, log_q(node));
            Spur__Fsm__JobCompleted rep = SPUR__FSM__JOB_COMPLETED__INIT;
            rep.job_id = verd[v].job_id;
            rep.attempt = verd[v].attempt;
            rep.node = (char *)node;
            rep.lost = true;
            queue_report(jc, &rep);
        } else {
            jc->st.terminated++;
            log_event(LOG_WARN, "jobctl", "terminating a job the state does not place here",
                      "job=%llu attempt=%u node=%s", (unsigned long long)verd[v].job_id,
                      verd[v].attempt, log_q(node));
            send_signal(jc, node, verd[v].job_id, verd[v].attempt, 0, true, SIG_TAG_ORPHAN);
        }
    }
out:
    if (have_read)
        fsm_read_free(&rd);
    free(ids);
    free(seen);
    free(placed);
    free(verd);
    if (first)
        resend_for_node(jc, node);
}

/* Every part confirmed: into the loop turn's JobsStarted. */
static void queue_start(struct jobctl *jc, struct jobctl_job *j)
{
    j->start_proposed_ms = mono_ms(); /* queued now; the flush stamps it again */
    if (jc->starts.n == jc->starts.cap) {
        size_t nc = jc->starts.cap ? jc->starts.cap * 2 : 64;
        struct jobctl_start *nv = realloc(jc->starts.v, nc * sizeof(*nv));
        if (nv == NULL)
            return; /* the period proposes it again */
        jc->starts.v = nv;
        jc->starts.cap = nc;
    }
    uint64_t due = mono_ms() + JOBCTL_START_HOLD_MS;
    jc->starts.v[jc->starts.n++] = (struct jobctl_start){j->job_id, j->attempt, due};
    if (!evtimer_pending(jc->ev_starts, NULL)) {
        struct timeval tv = {0, JOBCTL_START_HOLD_MS * 1000};
        evtimer_add(jc->ev_starts, &tv);
    }
}

/*
 * The batch host's report of (job, attempt) arrived: a start still held for it is
 * dropped, since the report itself counts as the start (a job that ends within the hold
 * costs one log entry less: trivial jobs are most of a busy queue).
 */
static void drop_start(struct jobctl *jc, uint64_t job_id, uint32_t attempt)
{
    for (size_t i = 0; i < jc->starts.n; i++) {
        if (jc->starts.v[i].job_id == job_id && jc->starts.v[i].attempt == attempt) {
            memmove(&jc->starts.v[i], &jc->starts.v[i + 1],
                    (jc->starts.n - i - 1) * sizeof(jc->starts.v[0]));
            jc->starts.n--;
            jc->st.starts_folded++;
            return;
        }
    }
}

static void launch_answer(struct jobctl *jc, const struct agents_answer *ans)
{
    struct jobctl_job *j = job_find(jc, ans->job_id);
    int i = j && j->attempt == ans->attempt ? part_index(j, ans->node) : -1;
    if (i < 0)
        return;
    const Spur__Agent__LaunchReply *lr =
        ans->reply && ans->reply->body_case == SPUR__AGENT__MSG__BODY_LAUNCH_REPLY
            ? ans->reply->launch_reply
            : NULL;
    if (lr == NULL) {
        /* No answer, or an Error (a fenced connection): send it again on the next. */
        j->parts[i].launch_out = false;
        if (ans->reply && ans->reply->body_case == SPUR__AGENT__MSG__BODY_ERROR &&
            ans->reply->error)
            log_event(LOG_WARN, "jobctl", "agent refused a launch", "job=%llu node=%s err=%s",
                      (unsigned long long)ans->job_id, log_q(ans->node),
                      log_q(ans->reply->error->error));
        return;
    }
    switch (jobctl_launch_reply(j, (uint32_t)i, lr->ok, ++jc->seq)) {
    case JOBCTL_LAUNCH_STARTED:
        queue_start(jc, j);
        break;
    case JOBCTL_LAUNCH_FAILED:
        if (jc->nfails == jc->capfails) {
            size_t nc = jc->capfails ? jc->capfails * 2 : 16;
            struct launch_fail *nv = realloc(jc->fails, nc * sizeof(*nv));
            if (nv == NULL) {
                j->failed = false;
                return;
            }
            jc->fails = nv;
            jc->capfails = nc;
        }
        struct launch_fail *f = &jc->fails[jc->nfails++];
        memset(f, 0, sizeof(*f));
        f->job_id = j->job_id;
        f->attempt = j->attempt;
        snprintf(f->node, sizeof(f->node), "%s", ans->node);
        snprintf(f->reason, sizeof(f->reason), "%s", lr->error ? lr->error : "");
        f->node_fault = lr->node_fault;
        log_event(LOG_WARN, "jobctl", "launch refused", "job=%llu attempt=%u node=%s err=%s%s",
                  (unsigned long long)j->job_id, j->attempt, log_q(ans->node), log_q(f->reason),
                  f->node_fault ? " node_fault=true" : "");
        turn_soon(jc);
        break;
    default:
        break;
    }
}

static void reply_done(struct jobctl *jc, struct api_call *call)
{
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    Spur__Api__Empty done = SPUR__API__EMPTY__INIT;
    const char *hint = node_leader_api(jc->n);
    r.result_case = SPUR__API__RESPONSE__RESULT_DONE;
    r.done = &done;
    r.leader_id = jc->n->leader;
    r.leader_hint = (char *)(hint ? hint : "");
    api_reply(call, &r);
}

static void sigwait_finish(struct jobctl *jc, struct sigwait *w)
{
    for (struct sigwait **pp = &jc->sigwaits; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    if (w->err[0])
        api_reply_error(w->call, SPUR__API__CODE__CODE_UNAVAILABLE, jc->n->leader, NULL,
                        "signal of job %llu: %s", (unsigned long long)w->job_id, w->err);
    else
        reply_done(jc, w->call);
    free(w);
}

static void signal_answer(struct jobctl *jc, const struct agents_answer *ans)
{
    const Spur__Agent__SignalReply *sr =
        ans->reply && ans->reply->body_case == SPUR__AGENT__MSG__BODY_SIGNAL_REPLY
            ? ans->reply->signal_reply
            : NULL;
    if (ans->tag >= SIG_TAG_CLIENT) {
        struct sigwait *w = jc->sigwaits;
        while (w && w->id != ans->tag - SIG_TAG_CLIENT)
            w = w->next;
        if (w == NULL)
            return;
        if (w->err[0] == '\0' && (sr == NULL || !sr->found || (sr->error && sr->error[0])))
            snprintf(w->err, sizeof(w->err), "node %s: %s", ans->node,
                     sr == NULL   ? (ans->err ? ans->err : "no answer")
                     : !sr->found ? "the job does not run there"
                                  : sr->error);
        if (--w->remaining == 0)
            sigwait_finish(jc, w);
        return;
    }
    if (ans->tag == SIG_TAG_ORPHAN)
        return;
    struct jobctl_job *j = job_find(jc, ans->job_id);
    int i = j && j->attempt == ans->attempt ? part_index(j, ans->node) : -1;
    if (sr == NULL) {
        if (i >= 0)
            j->parts[i].kill_out = false; /* sent again on the next connection */
        return;
    }
    /* The agent never had this attempt: its part is over without having run. */
    if (!sr->found)
        queue_never_ran(jc, ans->node, ans->job_id, ans->attempt);
}

static void on_answer(void *arg, const struct agents_answer *ans)
{
    struct jobctl *jc = arg;
    if (!jc->active)
        return;
    switch (ans->kind) {
    case SPUR__AGENT__MSG__BODY_PING:
        if (ans->reply && ans->reply->body_case == SPUR__AGENT__MSG__BODY_PONG && ans->reply->pong)
            pong(jc, ans->node, ans->reply->pong, ans->tag);
        break;
    case SPUR__AGENT__MSG__BODY_LAUNCH:
        launch_answer(jc, ans);
        break;
    case SPUR__AGENT__MSG__BODY_SIGNAL:
        signal_answer(jc, ans);
        break;
    default:
        break;
    }
}

/* ---- the state's side ------------------------------------------------------------------- */

/* The nodes of the state: dial those with an address, forget those gone. */
static void sync_nodes(struct jobctl *jc)
{
    Spur__Api__GetNodesRequest q = SPUR__API__GET_NODES_REQUEST__INIT;
    struct fsm_read rd;
    if (fsm_get_nodes(jc->n->fsm, &q, &rd) != FSM_OK)
        return;
    for (size_t i = 0; i < jc->nnodes; i++)
        jc->nodes[i].seen = false;
    size_t nn =
        rd.resp.code == SPUR__API__CODE__CODE_OK && rd.resp.nodes ? rd.resp.nodes->n_nodes : 0;
    for (size_t i = 0; i < nn; i++) {
        const Spur__Api__Node *sn = rd.resp.nodes->nodes[i];
        if (sn->name == NULL || strlen(sn->name) > FSM_NODE_NAME_MAX)
            continue;
        struct jnode *nd = node_find(jc, sn->name);
        if (nd == NULL) {
            if (jc->nnodes == jc->capnodes) {
                size_t nc = jc->capnodes ? jc->capnodes * 2 : 16;
                struct jnode *nv = realloc(jc->nodes, nc * sizeof(*nv));
                if (nv == NULL)
                    break;
                jc->nodes = nv;
                jc->capnodes = nc;
            }
            nd = &jc->nodes[jc->nnodes++];
            memset(nd, 0, sizeof(*nd));
            snprintf(nd->name, sizeof(nd->name), "%s", sn->name);
        }
        nd->seen = true;
        const char *addr = sn->address ? sn->address : "";
        /*
         * A node DOWN already (not responding, or by an operator) is not timed out again,
         * nor one configured and never registered. A registered node without an address
         * is watched like the others: no agent can answer for it, so it goes DOWN as a
         * node whose slurmd never answers does.
         */
        bool was = nd->watched;
        nd->watched = sn->state != SPUR__API__NODE_STATE__NODE_DOWN &&
                      sn->state != SPUR__API__NODE_STATE__NODE_UNKNOWN;
        if (nd->watched && !was) /* registered, or back: its grace starts now */
            nd->last_answer_ms = mono_ms();
        if (!nd->watched)
            nd->nr_proposed_ms = 0;
        if (strcmp(nd->address, addr) != 0) {
            snprintf(nd->address, sizeof(nd->address), "%s", addr);
            if (addr[0] != '\0')
                agents_set(jc->agents, nd->name, addr);
            else
                agents_remove(jc->agents, nd->name);
        }
    }
    for (size_t i = jc->nnodes; i-- > 0;) {
        if (!jc->nodes[i].seen) {
            agents_remove(jc->agents, jc->nodes[i].name);
            jc->nodes[i] = jc->nodes[--jc->nnodes];
        }
    }
    fsm_read_free(&rd);
}

/* Office start: every placed job, from the state. */
static void reconcile_all(struct jobctl *jc)
{
    Spur__Api__GetJobsRequest q = SPUR__API__GET_JOBS_REQUEST__INIT;
    Spur__Api__JobState states[] = {SPUR__API__JOB_STATE__JOB_CONFIGURING,
                                    SPUR__API__JOB_STATE__JOB_RUNNING,
                                    SPUR__API__JOB_STATE__JOB_COMPLETING};
    q.states = states;
    q.n_states = sizeof(states) / sizeof(states[0]);
    struct fsm_read rd;
    if (fsm_get_jobs(jc->n->fsm, &q, &rd) != FSM_OK)
        return;
    Spur__Api__Job **jobs;
    size_t nj = read_njobs(&rd, &jobs);
    for (size_t i = 0; i < nj; i++) {
        const Spur__Api__Job *job = jobs[i];
        struct jobctl_job *j =
            job_track(jc, job->id, job->attempt, job->node_list, batch_parts(job));
        if (j == NULL)
            break;
        if (job->state == SPUR__API__JOB_STATE__JOB_RUNNING ||
            (job->state == SPUR__API__JOB_STATE__JOB_COMPLETING && job->start_time_ms != 0)) {
            j->started = true;
            for (uint32_t p = 0; p < j->nparts; p++)
                j->parts[p].confirmed_seq = 0;
        }
        /*
         * A CONFIGURING job is launched again once its agents connect (same attempt:
         * idempotent). A COMPLETING one is terminated on its nodes: a cancel's signals may
         * have been lost with the old leader, and a job some of whose parts ended is
         * ending anyway (agents answer a terminate for what ended with found and ended).
         */
        j->killing = job->state == SPUR__API__JOB_STATE__JOB_COMPLETING;
    }
    log_event(LOG_INFO, "jobctl", "leader in office: placed jobs reconciled", "term=%llu jobs=%zu",
              (unsigned long long)jc->office_term, nj);
    fsm_read_free(&rd);
}

/* The tracked attempts against the state: drop what it no longer places; a JobsStarted
 * that did not apply is proposed again. */
static void check_tracked(struct jobctl *jc)
{
    if (jc->njobs == 0)
        return;
    uint64_t *ids = calloc(jc->njobs, sizeof(*ids));
    if (ids == NULL)
        return;
    for (size_t k = 0; k < jc->njobs; k++)
        ids[k] = jc->jobs[k].job_id;
    struct fsm_read rd;
    if (read_jobs(jc, ids, jc->njobs, &rd) != FSM_OK) {
        free(ids);
        return;
    }
    Spur__Api__Job **jobs;
    size_t nj = read_njobs(&rd, &jobs);
    uint64_t now = mono_ms();
    for (size_t k = jc->njobs; k-- > 0;) {
        struct jobctl_job *j = &jc->jobs[k];
        const Spur__Api__Job *job = NULL;
        for (size_t i = 0; i < nj && job == NULL; i++)
            if (jobs[i]->id == j->job_id)
                job = jobs[i];
        if (job == NULL || job->attempt != j->attempt || !placed_state(job->state)) {
            job_drop(jc, j);
            continue;
        }
        /* A JobsStarted that did not apply: propose it again. */
        if (job->state == SPUR__API__JOB_STATE__JOB_CONFIGURING && j->started &&
            j->start_proposed_ms != 0 && now - j->start_proposed_ms >= JOBCTL_RETRY_MS)
            queue_start(jc, j);
    }
    fsm_read_free(&rd);
    free(ids);
}

static void on_launch_event(struct jobctl *jc, const struct fsm_job_ref *ref)
{
    struct fsm_read rd;
    if (fsm_get_job(jc->n->fsm, ref->job_id, &rd) != FSM_OK)
        return;
    Spur__Api__Job **jobs;
    if (read_njobs(&rd, &jobs) == 1 && jobs[0]->attempt == ref->attempt) {
        struct jobctl_job *j =
            job_track(jc, ref->job_id, ref->attempt, jobs[0]->node_list, batch_parts(jobs[0]));
        fsm_read_free(&rd);
        for (uint32_t i = 0; j && i < j->nparts; i++)
            send_launch(jc, j, i);
        return;
    }
    fsm_read_free(&rd);
}

static void on_kill_event(struct jobctl *jc, const struct fsm_job_ref *ref)
{
    struct jobctl_job *j = job_find(jc, ref->job_id);
    if (j && j->attempt == ref->attempt) {
        j->killing = true;
        send_kills(jc, j);
        return;
    }
    /* Not followed here (placed and ended within one step): the state's node list. */
    struct fsm_read rd;
    if (fsm_get_job(jc->n->fsm, ref->job_id, &rd) != FSM_OK)
        return;
    Spur__Api__Job **jobs;
    if (read_njobs(&rd, &jobs) == 1)
        for (size_t i = 0; i < jobs[0]->n_node_list; i++)
            send_signal(jc, jobs[0]->node_list[i], ref->job_id, ref->attempt, 0, true,
                        SIG_TAG_ORPHAN);
    fsm_read_free(&rd);
}

static void on_reported_event(struct jobctl *jc, const struct fsm_report_ref *r)
{
    jobctl_reports_applied(&jc->reports, r->job_id, r->attempt, r->node);
    struct jobctl_job *j = job_find(jc, r->job_id);
    int i = j && j->attempt == r->attempt ? part_index(j, r->node) : -1;
    if (i >= 0)
        j->parts[i].done = true;
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    Spur__Agent__EndedAck ack = SPUR__AGENT__ENDED_ACK__INIT;
    ack.job_id = r->job_id;
    ack.attempt = r->attempt;
    m.body_case = SPUR__AGENT__MSG__BODY_ENDED_ACK;
    m.ended_ack = &ack;
    agents_push(jc->agents, r->node, &m); /* not connected: it pushes again, we ack again */
}

static void take_events(struct jobctl *jc)
{
    struct fsm_events ev;
    if (fsm_events_take(jc->n->fsm, &ev) != FSM_OK)
        return;
    if (ev.nodes)
        sync_nodes(jc);
    for (size_t i = 0; i < ev.nreported; i++)
        on_reported_event(jc, &ev.reported[i]);
    for (size_t i = 0; i < ev.nkill; i++)
        on_kill_event(jc, &ev.kill[i]);
    for (size_t i = 0; i < ev.nlaunch; i++)
        on_launch_event(jc, &ev.launch[i]);
    if (ev.alloc_entries > 0)
        jc->sched.in_flight =
            jc->sched.in_flight > ev.alloc_entries ? jc->sched.in_flight - ev.alloc_entries : 0;
    if (ev.schedule || ev.alloc_entries > 0) {
        jc->sched.wanted = true;
        turn_soon(jc);
    }
    fsm_events_free(&ev);
}

/* ---- office ----------------------------------------------------------------------------- */

static void fail_sigwaits(struct jobctl *jc, const char *why)
{
    while (jc->sigwaits) {
        struct sigwait *w = jc->sigwaits;
        jc->sigwaits = w->next;
        api_reply_error(w->call, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL, "%s", why);
        free(w);
    }
}

static void forget_all(struct jobctl *jc)
{
    agents_clear(jc->agents);
    for (size_t k = 0; k < jc->njobs; k++)
        free(jc->jobs[k].parts);
    jc->njobs = 0;
    jc->nnodes = 0;
    jobctl_reports_free(&jc->reports);
    jc->starts.n = 0;
    jc->nfails = 0;
    memset(&jc->sched, 0, sizeof(jc->sched));
}

static void leave_office(struct jobctl *jc, const char *why)
{
    if (!jc->active)
        return;
    jc->active = false;
    fsm_events_enable(jc->n->fsm, false);
    evtimer_del(jc->ev_tick);
    evtimer_del(jc->ev_starts);
    fail_sigwaits(jc, why);
    forget_all(jc);
    log_event(LOG_INFO, "jobctl", "leader duties stopped", "term=%llu why=%s",
              (unsigned long long)jc->office_term, log_q(why));
}

static void take_office(struct jobctl *jc)
{
    struct node *n = jc->n;
    jc->active = true;
    jc->office_term = n->term;
    jc->office_ms = mono_ms();
    jc->last_round_ms = jc->office_ms;
    fsm_events_enable(n->fsm, true);
    struct fsm_events ev; /* anything recorded before is covered by the reconcile */
    if (fsm_events_take(n->fsm, &ev) == FSM_OK)
        fsm_events_free(&ev);
    sync_nodes(jc);
    reconcile_all(jc);
    jc->sched.wanted = true;
    struct timeval tv = {JOBCTL_PERIOD_MS / 1000, (JOBCTL_PERIOD_MS % 1000) * 1000};
    evtimer_add(jc->ev_tick, &tv);
    turn_soon(jc);
}

void jobctl_applied(struct jobctl *jc, const struct node_applied *a)
{
    struct node *n = jc->n;
    bool lead = n->raft != NULL && n->role == RAFT_LEADER && !n->stopping;
    if (!lead) {
        leave_office(jc, n->stopping ? "stopping" : "no longer the leader");
        return;
    }
    if (jc->active && jc->office_term != n->term)
        leave_office(jc, "a new term");
    if (n->applied < n->leader_noop_index)
        return; /* the state is not current yet */
    if (!jc->active) {
        take_office(jc);
        return;
    }
    if (a->state_moved)
        take_events(jc);
}

/* ---- the loop turn and the period ------------------------------------------------------ */

static void alloc_refused(void *arg)
{
    struct jobctl *jc = arg;
    jc->sched.in_flight = 0;
}

static void schedule_pass(struct jobctl *jc)
{
    uint64_t now = mono_ms();
    if (!jobctl_sched_due(&jc->sched, now))
        return;
    struct fsm_sched_opts o = {.now_ms = wall_ms()};
    struct fsm_sched_result res;
    memset(&res, 0, sizeof(res));
    uint64_t t0 = mono_ns();
    int rc = fsm_sched_pass(jc->n->fsm, &o, &res);
    uint64_t dur_ns = mono_ns() - t0;
    jc->sched.wanted = false;
    jc->sched.last_end_ms = mono_ms();
    jc->sched.last_dur_ms = dur_ns / 1000000;
    jc->st.sched_passes++;
    jc->st.sched_last_us = dur_ns / 1000;
    if (rc != FSM_OK) {
        log_event(LOG_ERROR, "jobctl", "scheduler pass failed: out of memory", NULL);
        return;
    }
    if (res.n > 0) {
        uint8_t *data = NULL;
        size_t len = 0;
        if (fsm_encode_allocations(&res, wall_ms(), &data, &len) == FSM_OK) {
            jc->sched.in_flight++;
            jc->st.sched_allocations += res.n;
            node_api_propose_internal(jc->api, data, len, alloc_refused, jc);
        }
    }
    fsm_sched_result_free(&res);
}

static void flush_starts(struct jobctl *jc)
{
    uint64_t now = mono_ms();
    /* The queue is in due order: propose the due prefix, keep the rest held. */
    size_t due = 0;
    while (due < jc->starts.n && jc->starts.v[due].due_ms <= now)
        due++;
    for (size_t off = 0; off < due; off += JOBCTL_MAX_BATCH) {
        size_t cnt = due - off;
        if (cnt > JOBCTL_MAX_BATCH)
            cnt = JOBCTL_MAX_BATCH;
        Spur__Fsm__JobStart *v = calloc(cnt, sizeof(*v));
        Spur__Fsm__JobStart **pv = calloc(cnt, sizeof(*pv));
        if (v == NULL || pv == NULL) {
            free(v);
            free(pv);
            break;
        }
        for (size_t i = 0; i < cnt; i++) {
            spur__fsm__job_start__init(&v[i]);
            v[i].job_id = jc->starts.v[off + i].job_id;
            v[i].attempt = jc->starts.v[off + i].attempt;
            pv[i] = &v[i];
            struct jobctl_job *j = job_find(jc, v[i].job_id);
            if (j && j->attempt == v[i].attempt)
                j->start_proposed_ms = now;
        }
        Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
        Spur__Fsm__JobsStarted js = SPUR__FSM__JOBS_STARTED__INIT;
        js.starts = pv;
        js.n_starts = cnt;
        cmd.op_case = SPUR__FSM__COMMAND__OP_JOBS_STARTED;
        cmd.jobs_started = &js;
        propose(jc, &cmd, NULL);
        free(v);
        free(pv);
    }
    if (due > 0) {
        memmove(jc->starts.v, jc->starts.v + due, (jc->starts.n - due) * sizeof(jc->starts.v[0]));
        jc->starts.n -= due;
    }
    if (jc->starts.n > 0 && !evtimer_pending(jc->ev_starts, NULL)) {
        uint64_t wait = jc->starts.v[0].due_ms > now ? jc->starts.v[0].due_ms - now : 0;
        struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
        evtimer_add(jc->ev_starts, &tv);
    }
}

static void on_starts_due(evutil_socket_t fd, short what, void *arg)
{
    struct jobctl *jc = arg;
    (void)fd;
    (void)what;
    if (jc->active)
        flush_starts(jc);
}

static void flush_reports(struct jobctl *jc)
{
    Spur__Fsm__JobCompleted **v = calloc(JOBCTL_MAX_BATCH, sizeof(*v));
    if (v == NULL)
        return;
    for (unsigned guard = 0; guard < 64; guard++) {
        size_t cnt = jobctl_reports_take(&jc->reports, mono_ms(), v, JOBCTL_MAX_BATCH);
        if (cnt == 0)
            break;
        Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
        Spur__Fsm__JobsCompleted jcmp = SPUR__FSM__JOBS_COMPLETED__INIT;
        jcmp.reports = v;
        jcmp.n_reports = cnt;
        cmd.op_case = SPUR__FSM__COMMAND__OP_JOBS_COMPLETED;
        cmd.jobs_completed = &jcmp;
        propose(jc, &cmd, NULL);
    }
    free(v);
}

static void flush_fails(struct jobctl *jc)
{
    for (size_t i = 0; i < jc->nfails; i++) {
        struct launch_fail *f = &jc->fails[i];
        Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
        Spur__Fsm__JobLaunchFailed lf = SPUR__FSM__JOB_LAUNCH_FAILED__INIT;
        lf.job_id = f->job_id;
        lf.attempt = f->attempt;
        lf.node = f->node;
        lf.reason = f->reason;
        lf.node_fault = f->node_fault;
        cmd.op_case = SPUR__FSM__COMMAND__OP_JOB_LAUNCH_FAILED;
        cmd.job_launch_failed = &lf;
        propose(jc, &cmd, NULL);
        jc->st.launch_failures++;
    }
    jc->nfails = 0;
}

static void on_turn(evutil_socket_t fd, short what, void *arg)
{
    struct jobctl *jc = arg;
    (void)fd;
    (void)what;
    if (!jc->active)
        return;
    flush_fails(jc);
    flush_starts(jc);
    flush_reports(jc);
    schedule_pass(jc);
}

/* A command that is a list of node names: NodeHeartbeat or NodesNotResponding. */
static void propose_names(struct jobctl *jc, Spur__Fsm__Command__OpCase op, char **names, size_t n)
{
    Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
    Spur__Fsm__NodeHeartbeat hb = SPUR__FSM__NODE_HEARTBEAT__INIT;
    Spur__Fsm__NodesNotResponding nr = SPUR__FSM__NODES_NOT_RESPONDING__INIT;
    cmd.op_case = op;
    if (op == SPUR__FSM__COMMAND__OP_NODE_HEARTBEAT) {
        hb.names = names;
        hb.n_names = n;
        cmd.node_heartbeat = &hb;
    } else {
        nr.names = names;
        nr.n_names = n;
        cmd.nodes_not_responding = &nr;
    }
    propose(jc, &cmd, NULL);
}

/* One heartbeat round: the answered nodes into the log, a Ping to every agent. */
static void heartbeat_round(struct jobctl *jc)
{
    char **names = calloc(jc->nnodes ? jc->nnodes : 1, sizeof(*names));
    if (names == NULL)
        return;
    size_t k = 0;
    for (size_t i = 0; i < jc->nnodes; i++) {
        if (jc->nodes[i].answered)
            names[k++] = jc->nodes[i].name;
        jc->nodes[i].answered = false;
    }
    if (k > 0)
        propose_names(jc, SPUR__FSM__COMMAND__OP_NODE_HEARTBEAT, names, k);
    free(names);
    for (size_t i = 0; i < jc->nnodes; i++)
        if (agents_is_up(jc->agents, jc->nodes[i].name))
            send_ping(jc, jc->nodes[i].name);
}

static void check_silent(struct jobctl *jc)
{
    uint64_t now = mono_ms();
    char **names = calloc(jc->nnodes ? jc->nnodes : 1, sizeof(*names));
    if (names == NULL)
        return;
    size_t k = 0;
    for (size_t i = 0; i < jc->nnodes; i++) {
        struct jnode *nd = &jc->nodes[i];
        if (!nd->watched || (nd->nr_proposed_ms && now - nd->nr_proposed_ms < JOBCTL_RETRY_MS))
            continue;
        if (!jobctl_node_silent(now, jc->office_ms, nd->last_answer_ms,
                                jc->cfg->agent.node_timeout_s))
            continue;
        nd->nr_proposed_ms = now;
        names[k++] = nd->name;
        log_event(LOG_WARN, "jobctl", "node not responding", "node=%s silent_s=%u", log_q(nd->name),
                  jc->cfg->agent.node_timeout_s);
    }
    if (k > 0) {
        propose_names(jc, SPUR__FSM__COMMAND__OP_NODES_NOT_RESPONDING, names, k);
        jc->st.not_responding += k;
    }
    free(names);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct jobctl *jc = arg;
    (void)fd;
    (void)what;
    if (!jc->active)
        return;
    uint64_t now = mono_ms();
    if (now - jc->last_round_ms >= (uint64_t)jc->cfg->agent.heartbeat_s * 1000) {
        jc->last_round_ms = now;
        heartbeat_round(jc);
    }
    check_silent(jc);
    jobctl_reports_expire(&jc->reports, now, JOBCTL_RETRY_MS);
    check_tracked(jc);
    turn_soon(jc); /* the periodic scheduler pass */
    struct timeval tv = {JOBCTL_PERIOD_MS / 1000, (JOBCTL_PERIOD_MS % 1000) * 1000};
    evtimer_add(jc->ev_tick, &tv);
}

/* ---- client signals ---------------------------------------------------------------------- */

bool jobctl_may_signal(const Spur__Api__Caller *who, uint32_t job_uid)
{
    return who != NULL && (who->operator_ || who->uid == job_uid);
}

void jobctl_signal_job(void *arg, struct api_call *call, Spur__Api__Request *req)
{
    struct jobctl *jc = arg;
    const Spur__Api__SignalJobRequest *sr = req->signal_job;
    if (sr == NULL || sr->job_id == 0 || sr->signal <= 0 || sr->signal >= 65) {
        api_reply_error(call, SPUR__API__CODE__CODE_INVALID, 0, NULL,
                        "signal-job needs a job id and a signal number 1-64");
        return;
    }
    if (!jc->active) {
        api_reply_error(call, SPUR__API__CODE__CODE_UNAVAILABLE, jc->n->leader, NULL,
                        "the leader is taking office; retry");
        return;
    }
    struct fsm_read rd;
    if (fsm_get_job(jc->n->fsm, sr->job_id, &rd) != FSM_OK) {
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    Spur__Api__Job **jobs;
    if (read_njobs(&rd, &jobs) != 1) {
        fsm_read_free(&rd);
        api_reply_error(call, SPUR__API__CODE__CODE_NOT_FOUND, 0, NULL, "no job %llu",
                        (unsigned long long)sr->job_id);
        return;
    }
    const Spur__Api__Job *job = jobs[0];
    if (!jobctl_may_signal(req->caller, job->spec != NULL ? job->spec->uid : 0)) {
        fsm_read_free(&rd);
        log_event(LOG_INFO, "jobctl", "permission denied", "user=%s uid=%u op=signal_job job=%llu",
                  log_q(req->caller != NULL && req->caller->user != NULL ? req->caller->user : ""),
                  req->caller != NULL ? req->caller->uid : 0, (unsigned long long)sr->job_id);
        api_reply_error(call, SPUR__API__CODE__CODE_DENIED, 0, NULL, "Access/permission denied");
        return;
    }
    if (job->state != SPUR__API__JOB_STATE__JOB_RUNNING || job->n_node_list == 0) {
        api_reply_error(call, SPUR__API__CODE__CODE_CONFLICT, 0, NULL,
                        "job %llu is not running (%s)", (unsigned long long)sr->job_id,
                        names_job_state_name(job->state));
        fsm_read_free(&rd);
        return;
    }
    struct sigwait *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        fsm_read_free(&rd);
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    w->id = ++jc->next_sigwait;
    w->call = call;
    w->job_id = job->id;
    w->next = jc->sigwaits;
    jc->sigwaits = w;
    w->remaining = 1; /* held while sending, so an answer cannot finish it early */
    for (size_t i = 0; i < batch_parts(job); i++) {
        const char *node = job->node_list[i];
        if (send_signal(jc, node, job->id, job->attempt, sr->signal, false,
                        SIG_TAG_CLIENT + w->id) == 0) {
            w->remaining++;
        } else if (w->err[0] == '\0') {
            snprintf(w->err, sizeof(w->err), "the agent of node %s is not connected", node);
        }
    }
    fsm_read_free(&rd);
    if (--w->remaining == 0)
        sigwait_finish(jc, w);
}

/* ---- life ------------------------------------------------------------------------------ */

struct jobctl *jobctl_new(struct node *n, struct node_api *api, const struct cfg *cfg)
{
    struct jobctl *jc = calloc(1, sizeof(*jc));
    if (jc == NULL)
        return NULL;
    jc->n = n;
    jc->api = api;
    jc->cfg = cfg;
    struct agents_options ao = {
        .max_frame = cfg->controller.max_frame_bytes,
        .cluster_name = cfg->cluster_name,
        .keyring = n->kr,
        .seed = mono_ns() ^ ((uint64_t)n->id << 32),
    };
    struct agents_hooks h = {.up = on_agent_up,
                             .down = on_agent_down,
                             .answer = on_answer,
                             .ended = on_ended,
                             .arg = jc};
    jc->agents = agents_new(n->base, &ao, transport_resolver(n->tr), &h);
    jc->ev_turn = event_new(n->base, -1, 0, on_turn, jc);
    jc->ev_tick = evtimer_new(n->base, on_tick, jc);
    jc->ev_starts = evtimer_new(n->base, on_starts_due, jc);
    if (jc->agents == NULL || jc->ev_turn == NULL || jc->ev_tick == NULL ||
        jc->ev_starts == NULL) {
        jobctl_free(jc);
        return NULL;
    }
    return jc;
}

void jobctl_free(struct jobctl *jc)
{
    if (jc == NULL)
        return;
    fail_sigwaits(jc, "this replica is shutting down");
    if (jc->agents)
        forget_all(jc);
    agents_free(jc->agents);
    if (jc->ev_turn)
        event_free(jc->ev_turn);
    if (jc->ev_tick)
        event_free(jc->ev_tick);
    if (jc->ev_starts)
        event_free(jc->ev_starts);
    free(jc->nodes);
    free(jc->jobs);
    free(jc->starts.v);
    free(jc->fails);
    free(jc);
}

void jobctl_get_stats(const struct jobctl *jc, struct jobctl_stats *out)
{
    *out = jc->st;
    struct agents_stats as;
    agents_get_stats(jc->agents, &as);
    out->in_office = jc->active;
    out->agents_connected = as.connected;
    out->agents_known = jc->nnodes;
    out->pending_allocations = jc->sched.in_flight;
    out->tracked_jobs = jc->njobs;
}
