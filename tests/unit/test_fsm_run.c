/*
 * test_fsm_run.c - the job lifecycle with node agents in the replicated state machine
 * (raftd/fsm/fsm_cmd.c, fsm_events.c; docs/state-machine.md "Running jobs").
 *
 * Pinned here: JobsAllocated places a job CONFIGURING (attempt + 1, resources charged)
 * only where it still fits, and skips the rest; JobsStarted makes it RUNNING; each
 * outcome of the reports (exit code, signal, OOM, time limit, cancel, lost node) ends
 * the job in its state with its reason; the fast path (a report before RUNNING); reports
 * and starts that must change nothing (another attempt, a part already done, a finished
 * or requeued job) leave the snapshot bytes exactly as a Tick would; a failed launch
 * requeues with the doubling back-off and drains a node after 3 in a row, a successful
 * start resets the count; a node that stops answering goes DOWN, its jobs NODE_FAIL or
 * requeue, and its agent's registration clears only that; cancel of a configuring job;
 * pending reasons; a snapshot with a job in every state round trips bit for bit; the
 * leader's events are recorded only while enabled and never change the state; and random
 * lifecycle logs end in the same bytes on a leader and a restored follower, with node
 * allocations that always equal what a restore recomputes from the jobs.
 */
#include "check_run.h"
#include "fsm.h"
#include "fsm_deps.h"
#include "fsm_drive.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C_OK        SPUR__API__CODE__CODE_OK
#define C_INVALID   SPUR__API__CODE__CODE_INVALID
#define C_NOT_FOUND SPUR__API__CODE__CODE_NOT_FOUND
#define C_CONFLICT  SPUR__API__CODE__CODE_CONFLICT

#define J(x) SPUR__API__JOB_STATE__JOB_##x
#define N(x) SPUR__API__NODE_STATE__NODE_##x

static char SCRIPT[] = "#!/bin/sh\ntrue\n";

struct t {
    struct fsm *f;
    uint64_t now;
};

/* ---- driving it ---------------------------------------------------------------------- */

/* Apply c at the next index with the current time; returns the code (error copied). */
static int run_err(struct t *t, Spur__Fsm__Command *c, char *err, size_t errlen)
{
    Spur__Api__Response *resp = fsm_drive_apply(t->f, c, t->now);
    int code = (int)resp->code;
    if (err != NULL)
        snprintf(err, errlen, "%s", resp->error);
    spur__api__response__free_unpacked(resp, NULL);
    return code;
}

static void run_ok(struct t *t, Spur__Fsm__Command *c)
{
    char err[256];
    int code = run_err(t, c, err, sizeof(err));
    ck_assert_msg(code == C_OK, "code %d: %s", code, err);
}

static void snapshot(struct fsm *f, uint8_t **b, size_t *n)
{
    fsm_drive_snapshot(f, b, n);
}

static void tick_cmd(Spur__Fsm__Command *c, Spur__Fsm__Tick *tk)
{
    spur__fsm__tick__init(tk);
    spur__fsm__command__init(c);
    c->op_case = SPUR__FSM__COMMAND__OP_TICK;
    c->tick = tk;
}

/*
 * Apply c, which must be answered code and change nothing: a twin restored from the
 * state before applies a Tick at the same index and time, and the two snapshots must be
 * the same bytes.
 */
static void expect_no_change(struct t *t, Spur__Fsm__Command *c, int code)
{
    uint8_t *before;
    size_t nb;
    snapshot(t->f, &before, &nb);
    struct fsm *twin = fsm_new(NULL);
    char err[256];
    ck_assert_int_eq(fsm_restore(twin, before, nb, err, sizeof(err)), FSM_OK);
    free(before);
    ck_assert_int_eq(run_err(t, c, err, sizeof(err)), code);
    struct t tt = {.f = twin, .now = t->now};
    Spur__Fsm__Command tc;
    Spur__Fsm__Tick tk;
    tick_cmd(&tc, &tk);
    run_ok(&tt, &tc);
    ck_assert_msg(fsm_drive_same(t->f, twin), "the command changed the state");
    fsm_free(twin);
}

static void tick(struct t *t)
{
    Spur__Fsm__Command c;
    Spur__Fsm__Tick tk;
    tick_cmd(&c, &tk);
    run_ok(t, &c);
}

static void register_node(struct t *t, const char *name, uint32_t cpus, bool from_agent)
{
    Spur__Api__RegisterNodeRequest q = SPUR__API__REGISTER_NODE_REQUEST__INIT;
    q.name = (char *)name;
    q.address = "127.0.0.1:6818";
    q.cpus = cpus;
    q.mem_mb = 8000;
    q.from_agent = from_agent;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
    c.register_node = &q;
    run_ok(t, &c);
}

static void update_node(struct t *t, const char *name, const char *state, const char *reason)
{
    Spur__Api__UpdateNodeRequest u = SPUR__API__UPDATE_NODE_REQUEST__INIT;
    u.name = (char *)name;
    u.state = (char *)state;
    u.reason = (char *)reason;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_UPDATE_NODE;
    c.update_node = &u;
    run_ok(t, &c);
}

/* Partitions batch (ALL, default) and pair (n1 n2) with this state and time limit. */
static void set_parts(struct t *t, bool pair_up, uint32_t pair_max_min)
{
    static char *pair_nodes[] = {"n1", "n2"};
    Spur__Api__Partition p[2], *pp[2] = {&p[0], &p[1]};
    for (int i = 0; i < 2; i++)
        spur__api__partition__init(&p[i]);
    p[0].name = "batch";
    p[0].nodes_expr = "ALL";
    p[0].is_default = true;
    p[0].up = true;
    p[1].name = "pair";
    p[1].nodes_expr = "n1,n2";
    p[1].n_nodes = 2;
    p[1].nodes = pair_nodes;
    p[1].max_time_min = pair_max_min;
    p[1].up = pair_up;
    Spur__Fsm__SetPartitions sp = SPUR__FSM__SET_PARTITIONS__INIT;
    sp.n_partitions = 2;
    sp.partitions = pp;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_PARTITIONS;
    c.set_partitions = &sp;
    run_ok(t, &c);
}

/* The partitions above (pair at most 30 min) and nodes n1..n3 with 4 CPUs each. */
static void t_init(struct t *t, bool pair_up)
{
    t->f = fsm_new(NULL);
    ck_assert_ptr_nonnull(t->f);
    t->now = 5000000;
    set_parts(t, pair_up, 30);
    register_node(t, "n1", 4, true);
    register_node(t, "n2", 4, true);
    register_node(t, "n3", 4, true);
}

static void t_free(struct t *t)
{
    fsm_free(t->f);
}

struct job_opts {
    uint32_t nodes;
    uint32_t cpus; /* per task, one task per node */
    const char *partition;
    bool requeue;
    bool hold;
    uint32_t time_limit_min;
    const char *dependency;
    bool kill_invalid;
    const char *name; /* NULL: "run" */
};

static uint64_t submit(struct t *t, const struct job_opts *o)
{
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    s.script.data = (uint8_t *)SCRIPT;
    s.script.len = strlen(SCRIPT);
    s.name = "run";
    if (o != NULL) {
        s.nodes = o->nodes;
        s.cpus_per_task = o->cpus;
        s.partition = (char *)o->partition;
        s.requeue = o->requeue;
        s.hold = o->hold;
        s.time_limit_min = o->time_limit_min;
        s.dependency = (char *)o->dependency;
        s.kill_on_invalid_dep = o->kill_invalid;
        if (o->name != NULL)
            s.name = (char *)o->name;
    }
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    Spur__Api__Response *resp = fsm_drive_apply(t->f, &c, t->now);
    ck_assert_msg(resp->code == C_OK, "submit: %s", resp->error);
    uint64_t id = resp->submit_job->job_id;
    spur__api__response__free_unpacked(resp, NULL);
    return id;
}

/* A JobsAllocated entry of up to 4 allocations of up to 3 nodes each. */
struct alloc {
    uint64_t id;
    const char *nodes[3];
};

static int allocate_n(struct t *t, const struct alloc *v, size_t n)
{
    Spur__Fsm__Allocation a[4], *ap[4];
    char *names[4][3];
    ck_assert_uint_le(n, 4);
    for (size_t i = 0; i < n; i++) {
        spur__fsm__allocation__init(&a[i]);
        a[i].job_id = v[i].id;
        size_t k = 0;
        while (k < 3 && v[i].nodes[k] != NULL) {
            names[i][k] = (char *)v[i].nodes[k];
            k++;
        }
        a[i].n_nodes = k;
        a[i].nodes = names[i];
        ap[i] = &a[i];
    }
    Spur__Fsm__JobsAllocated ja = SPUR__FSM__JOBS_ALLOCATED__INIT;
    ja.n_allocations = n;
    ja.allocations = ap;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOBS_ALLOCATED;
    c.jobs_allocated = &ja;
    return run_err(t, &c, NULL, 0);
}

static void allocate(struct t *t, uint64_t id, const char *n1, const char *n2)
{
    struct alloc a = {id, {n1, n2, NULL}};
    ck_assert_int_eq(allocate_n(t, &a, 1), C_OK);
}

static void jobs_started_cmd(Spur__Fsm__Command *c, Spur__Fsm__JobsStarted *js,
                             Spur__Fsm__JobStart *st, Spur__Fsm__JobStart **sp, uint64_t id,
                             uint32_t attempt)
{
    spur__fsm__job_start__init(st);
    st->job_id = id;
    st->attempt = attempt;
    *sp = st;
    spur__fsm__jobs_started__init(js);
    js->n_starts = 1;
    js->starts = sp;
    spur__fsm__command__init(c);
    c->op_case = SPUR__FSM__COMMAND__OP_JOBS_STARTED;
    c->jobs_started = js;
}

static void started(struct t *t, uint64_t id, uint32_t attempt)
{
    Spur__Fsm__Command c;
    Spur__Fsm__JobsStarted js;
    Spur__Fsm__JobStart st, *sp;
    jobs_started_cmd(&c, &js, &st, &sp, id, attempt);
    run_ok(t, &c);
}

struct rep {
    uint64_t id;
    const char *node;
    uint32_t attempt;
    int exit_code;
    int signal;
    bool oom;
    bool timed_out;
    bool lost;
    bool never_ran;
};

/* A JobsCompleted entry with one report, in c (the pieces live in the caller's frame). */
struct report_cmd {
    Spur__Fsm__Command c;
    Spur__Fsm__JobsCompleted jcs;
    Spur__Fsm__JobCompleted jc;
    Spur__Fsm__JobCompleted *p;
};

static void report_cmd(struct report_cmd *rc, const struct rep *r)
{
    spur__fsm__job_completed__init(&rc->jc);
    rc->jc.job_id = r->id;
    rc->jc.node = (char *)r->node;
    rc->jc.attempt = r->attempt;
    rc->jc.exit_code = r->exit_code;
    rc->jc.signal = r->signal;
    rc->jc.oom = r->oom;
    rc->jc.timed_out = r->timed_out;
    rc->jc.lost = r->lost;
    rc->jc.never_ran = r->never_ran;
    rc->p = &rc->jc;
    spur__fsm__jobs_completed__init(&rc->jcs);
    rc->jcs.n_reports = 1;
    rc->jcs.reports = &rc->p;
    spur__fsm__command__init(&rc->c);
    rc->c.op_case = SPUR__FSM__COMMAND__OP_JOBS_COMPLETED;
    rc->c.jobs_completed = &rc->jcs;
}

/* The same report as the older single JobCompleted entry. */
static void report_cmd_single(struct report_cmd *rc, const struct rep *r)
{
    report_cmd(rc, r);
    rc->c.op_case = SPUR__FSM__COMMAND__OP_JOB_COMPLETED;
    rc->c.job_completed = &rc->jc;
}

static void report(struct t *t, const struct rep *r)
{
    struct report_cmd rc;
    report_cmd(&rc, r);
    run_ok(t, &rc.c);
}

static void report_no_change(struct t *t, const struct rep *r)
{
    struct report_cmd rc;
    report_cmd(&rc, r);
    expect_no_change(t, &rc.c, C_OK);
}

static void launch_failed_cmd(Spur__Fsm__Command *c, Spur__Fsm__JobLaunchFailed *lf, uint64_t id,
                              uint32_t attempt, const char *node, const char *reason,
                              bool node_fault)
{
    spur__fsm__job_launch_failed__init(lf);
    lf->job_id = id;
    lf->attempt = attempt;
    lf->node = (char *)node;
    lf->reason = (char *)reason;
    lf->node_fault = node_fault;
    spur__fsm__command__init(c);
    c->op_case = SPUR__FSM__COMMAND__OP_JOB_LAUNCH_FAILED;
    c->job_launch_failed = lf;
}

static void launch_failed(struct t *t, uint64_t id, uint32_t attempt, const char *node,
                          const char *reason, bool node_fault)
{
    Spur__Fsm__Command c;
    Spur__Fsm__JobLaunchFailed lf;
    launch_failed_cmd(&c, &lf, id, attempt, node, reason, node_fault);
    run_ok(t, &c);
}

static void not_responding(struct t *t, const char *name)
{
    char *names[] = {(char *)name};
    Spur__Fsm__NodesNotResponding nr = SPUR__FSM__NODES_NOT_RESPONDING__INIT;
    nr.n_names = 1;
    nr.names = names;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_NODES_NOT_RESPONDING;
    c.nodes_not_responding = &nr;
    run_ok(t, &c);
}

static void cancel(struct t *t, uint64_t id)
{
    Spur__Api__JobIdRequest q = SPUR__API__JOB_ID_REQUEST__INIT;
    q.job_id = id;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOB;
    c.cancel_job = &q;
    run_ok(t, &c);
}

/* ---- looking at it ------------------------------------------------------------------- */

struct jv {
    int state;
    char reason[64];
    uint32_t attempt, restarts;
    int32_t exit_code, exit_signal;
    uint64_t start_ms, end_ms, eligible_ms;
    size_t nnodes;
    char batch_host[64];
    bool requeue;
    char account[64];
    char dependency[256];
};

static struct jv job(struct t *t, uint64_t id)
{
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_job(t->f, id, &rd), FSM_OK);
    ck_assert_msg(rd.resp.code == C_OK, "job %llu: %s", (unsigned long long)id, rd.resp.error);
    const Spur__Api__Job *j = rd.resp.jobs->jobs[0];
    struct jv v = {
        .state = (int)j->state,
        .attempt = j->attempt,
        .restarts = j->restarts,
        .exit_code = j->exit_code,
        .exit_signal = j->exit_signal,
        .start_ms = j->start_time_ms,
        .end_ms = j->end_time_ms,
        .eligible_ms = j->eligible_time_ms,
        .nnodes = j->n_node_list,
        .requeue = j->spec->requeue,
    };
    snprintf(v.reason, sizeof(v.reason), "%s", j->reason);
    snprintf(v.batch_host, sizeof(v.batch_host), "%s", j->batch_host);
    snprintf(v.account, sizeof(v.account), "%s", j->spec->account);
    snprintf(v.dependency, sizeof(v.dependency), "%s", j->dependency);
    fsm_read_free(&rd);
    return v;
}

static void check_job(struct t *t, uint64_t id, int state, const char *reason)
{
    struct jv v = job(t, id);
    ck_assert_msg(v.state == state, "job %llu state %d, want %d", (unsigned long long)id, v.state,
                  state);
    if (reason != NULL)
        ck_assert_str_eq(v.reason, reason);
}

struct nv {
    int state;
    uint32_t alloc_cpus;
    char reason[128];
    uint32_t launch_failures;
    bool not_responding;
    uint64_t last_seen_ms;
};

static struct nv node(struct t *t, const char *name)
{
    char *names[] = {(char *)name};
    Spur__Api__GetNodesRequest q = SPUR__API__GET_NODES_REQUEST__INIT;
    q.n_names = 1;
    q.names = names;
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_nodes(t->f, &q, &rd), FSM_OK);
    ck_assert_int_eq(rd.resp.code, C_OK);
    const Spur__Api__Node *n = rd.resp.nodes->nodes[0];
    struct nv v = {
        .state = (int)n->state,
        .alloc_cpus = n->alloc_cpus,
        .launch_failures = n->launch_failures,
        .not_responding = n->not_responding,
        .last_seen_ms = n->last_seen_ms,
    };
    snprintf(v.reason, sizeof(v.reason), "%s", n->reason);
    fsm_read_free(&rd);
    return v;
}

static bool has_ref(const struct fsm_job_ref *v, size_t n, uint64_t id, uint32_t attempt)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].job_id == id && v[i].attempt == attempt)
            return true;
    return false;
}

/* ---- placement and start ----------------------------------------------------------------- */

START_TEST(test_allocate_start_complete)
{
    struct t t;
    t_init(&t, true);
    uint64_t id = submit(&t, &(struct job_opts){.cpus = 2});
    check_job(&t, id, J(PENDING), "None");
    t.now += 10;
    allocate(&t, id, "n2", NULL);
    struct jv v = job(&t, id);
    ck_assert_int_eq(v.state, J(CONFIGURING));
    ck_assert_uint_eq(v.attempt, 1);
    ck_assert_uint_eq(v.start_ms, 0);
    ck_assert_uint_eq(v.nnodes, 1);
    ck_assert_str_eq(v.batch_host, "n2");
    ck_assert_str_eq(v.reason, "None");
    ck_assert_uint_eq(node(&t, "n2").alloc_cpus, 2); /* configuring holds resources */
    ck_assert_int_eq(node(&t, "n2").state, N(MIXED));

    t.now += 10;
    started(&t, id, 1);
    v = job(&t, id);
    ck_assert_int_eq(v.state, J(RUNNING));
    ck_assert_uint_eq(v.start_ms, t.now);

    t.now += 10;
    report(&t, &(struct rep){.id = id, .node = "n2", .attempt = 1});
    v = job(&t, id);
    ck_assert_int_eq(v.state, J(COMPLETED));
    ck_assert_uint_eq(v.end_ms, t.now);
    ck_assert_uint_eq(node(&t, "n2").alloc_cpus, 0);
    ck_assert_int_eq(node(&t, "n2").state, N(IDLE));
    t_free(&t);
}
END_TEST

/* Allocations that must be skipped, each alone in an entry: the entry is OK, no change. */
START_TEST(test_allocation_skipped)
{
    struct t t;
    t_init(&t, false); /* pair is down */
    uint64_t plain = submit(&t, NULL);
    uint64_t held = submit(&t, &(struct job_opts){.hold = true});
    uint64_t two = submit(&t, &(struct job_opts){.nodes = 2});
    uint64_t big = submit(&t, &(struct job_opts){.cpus = 4});
    uint64_t running = submit(&t, NULL);
    allocate(&t, running, "n3", NULL);
    started(&t, running, 1);
    update_node(&t, "n1", "drain", "maintenance");
    static const struct {
        const char *what;
        struct alloc a;
    } cases[] = {
        {"unknown job", {999, {"n2"}}},      {"held job", {0, {"n2"}}},
        {"job not pending", {0, {"n2"}}},    {"too few nodes", {0, {"n2"}}},
        {"a node twice", {0, {"n2", "n2"}}}, {"unknown node", {0, {"zz"}}},
        {"drained node", {0, {"n1"}}},       {"not enough free CPUs", {0, {"n3"}}},
    };
    uint64_t ids[] = {999, held, running, two, two, plain, plain, big};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct alloc a = cases[i].a;
        a.id = ids[i];
        Spur__Fsm__Allocation al = SPUR__FSM__ALLOCATION__INIT, *ap = &al;
        char *names[3];
        size_t k = 0;
        while (k < 3 && a.nodes[k] != NULL) {
            names[k] = (char *)a.nodes[k];
            k++;
        }
        al.job_id = a.id;
        al.n_nodes = k;
        al.nodes = names;
        Spur__Fsm__JobsAllocated ja = SPUR__FSM__JOBS_ALLOCATED__INIT;
        ja.n_allocations = 1;
        ja.allocations = &ap;
        Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
        c.op_case = SPUR__FSM__COMMAND__OP_JOBS_ALLOCATED;
        c.jobs_allocated = &ja;
        struct fsm_stats before, after;
        fsm_stats(t.f, &before);
        expect_no_change(&t, &c, C_OK);
        fsm_stats(t.f, &after);
        ck_assert_msg(after.alloc_skipped == before.alloc_skipped + 1, "%s: not counted",
                      cases[i].what);
    }
    /* One entry, two jobs wanting n2's 4 CPUs: the first is placed, the second skipped. */
    uint64_t a3 = submit(&t, &(struct job_opts){.cpus = 3});
    struct alloc both[] = {{a3, {"n2"}}, {big, {"n2"}}};
    ck_assert_int_eq(allocate_n(&t, both, 2), C_OK);
    check_job(&t, a3, J(CONFIGURING), NULL);
    check_job(&t, big, J(PENDING), "Resources"); /* no node has 4 CPUs free now */
    ck_assert_uint_eq(node(&t, "n2").alloc_cpus, 3);
    t_free(&t);
}
END_TEST

/* ---- reports ------------------------------------------------------------------------------ */

/* One-node jobs, RUNNING, then these reports: the state and reason each ends in. */
START_TEST(test_report_outcomes)
{
    static const struct {
        const char *what;
        bool cancel_first;
        bool requeue;
        struct rep r;
        int state;
        const char *reason;
        int32_t exit_code, exit_signal;
    } cases[] = {
        {"exit 0", false, false, {.exit_code = 0}, J(COMPLETED), "None", 0, 0},
        {"exit 3", false, false, {.exit_code = 3}, J(FAILED), "NonZeroExitCode", 3, 0},
        {"signal 9", false, false, {.signal = 9}, J(FAILED), "NonZeroExitCode", 0, 9},
        {"oom", false, false, {.oom = true, .signal = 9}, J(OUT_OF_MEMORY), "OutOfMemory", 0, 9},
        {"time limit", false, false, {.timed_out = true}, J(TIMEOUT), "TimeLimit", 0, 0},
        {"oom beats the time limit",
         false,
         false,
         {.oom = true, .timed_out = true},
         J(OUT_OF_MEMORY),
         "OutOfMemory",
         0,
         0},
        {"cancel beats exit", true, false, {.exit_code = 143}, J(CANCELLED), "None", 143, 0},
        {"cancel beats timeout", true, false, {.timed_out = true}, J(CANCELLED), "None", 0, 0},
        {"cancel before start", true, false, {.never_ran = true}, J(CANCELLED), "None", 0, 0},
        {"lost", false, false, {.lost = true}, J(NODE_FAIL), "NodeFail", 0, 0},
        {"lost, cancelled", true, false, {.lost = true}, J(CANCELLED), "None", 0, 0},
        {"lost, requeue", false, true, {.lost = true}, J(PENDING), "None", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct t t;
        t_init(&t, true);
        fsm_events_enable(t.f, true);
        uint64_t id = submit(&t, &(struct job_opts){.requeue = cases[i].requeue});
        allocate(&t, id, "n1", NULL);
        started(&t, id, 1);
        if (cases[i].cancel_first)
            cancel(&t, id);
        struct fsm_events ev;
        ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
        fsm_events_free(&ev);
        struct rep r = cases[i].r;
        r.id = id;
        r.node = "n1";
        r.attempt = 1;
        t.now += 1000;
        report(&t, &r);
        struct jv v = job(&t, id);
        ck_assert_msg(v.state == cases[i].state, "%s: state %d, want %d", cases[i].what, v.state,
                      cases[i].state);
        ck_assert_msg(strcmp(v.reason, cases[i].reason) == 0, "%s: reason %s", cases[i].what,
                      v.reason);
        ck_assert_int_eq(v.exit_code, cases[i].exit_code);
        ck_assert_int_eq(v.exit_signal, cases[i].exit_signal);
        ck_assert_uint_eq(node(&t, "n1").alloc_cpus, 0);
        ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
        ck_assert_uint_eq(ev.nreported, 1);
        ck_assert_uint_eq(ev.reported[0].job_id, id);
        ck_assert_str_eq(ev.reported[0].node, "n1");
        ck_assert(ev.schedule);
        if (cases[i].requeue) {
            /* Back in the queue, eligible now, its old attempt to be killed. */
            ck_assert_uint_eq(v.restarts, 1);
            ck_assert_uint_eq(v.attempt, 1);
            ck_assert_uint_eq(v.nnodes, 0);
            ck_assert_uint_eq(v.start_ms, 0);
            ck_assert_uint_eq(v.eligible_ms, t.now);
            ck_assert(has_ref(ev.kill, ev.nkill, id, 1));
            allocate(&t, id, "n2", NULL);
            ck_assert_uint_eq(job(&t, id).attempt, 2);
        } else {
            ck_assert_uint_eq(v.end_ms, t.now);
            ck_assert_uint_eq(v.nnodes, 1); /* a finished job shows where it ran */
        }
        fsm_events_free(&ev);
        t_free(&t);
    }
}
END_TEST

START_TEST(test_fast_path_and_parts)
{
    struct t t;
    t_init(&t, true);
    /* Ended before the leader proposed RUNNING: counts as started, then ended. */
    uint64_t fast = submit(&t, NULL);
    allocate(&t, fast, "n1", NULL);
    t.now += 5;
    report(&t, &(struct rep){.id = fast, .node = "n1", .attempt = 1});
    struct jv v = job(&t, fast);
    ck_assert_int_eq(v.state, J(COMPLETED));
    ck_assert_uint_eq(v.start_ms, t.now);
    /* The late JobsStarted for it changes nothing. */
    Spur__Fsm__Command c;
    Spur__Fsm__JobsStarted js;
    Spur__Fsm__JobStart st, *sp;
    jobs_started_cmd(&c, &js, &st, &sp, fast, 1);
    expect_no_change(&t, &c, C_OK);

    /* Two nodes: COMPLETING after the first part, each part released as it ends. */
    uint64_t two = submit(&t, &(struct job_opts){.nodes = 2, .cpus = 2});
    allocate(&t, two, "n1", "n2");
    started(&t, two, 1);
    report(&t, &(struct rep){.id = two, .node = "n2", .attempt = 1});
    check_job(&t, two, J(COMPLETING), NULL);
    ck_assert_uint_eq(node(&t, "n2").alloc_cpus, 0);
    ck_assert_uint_eq(node(&t, "n1").alloc_cpus, 2);
    report(&t, &(struct rep){.id = two, .node = "n1", .attempt = 1, .exit_code = 2});
    check_job(&t, two, J(FAILED), "NonZeroExitCode");
    ck_assert_int_eq(job(&t, two).exit_code, 2);

    /*
     * The batch script runs on the first node only: its report ends the job and gives
     * back every node, with no report from the others.
     */
    uint64_t batch = submit(&t, &(struct job_opts){.nodes = 2, .cpus = 2});
    allocate(&t, batch, "n1", "n2");
    started(&t, batch, 1);
    report(&t, &(struct rep){.id = batch, .node = "n1", .attempt = 1});
    check_job(&t, batch, J(COMPLETED), "None");
    ck_assert_uint_eq(node(&t, "n1").alloc_cpus, 0);
    ck_assert_uint_eq(node(&t, "n2").alloc_cpus, 0);
    /* A late report of the other node changes nothing. */
    report(&t, &(struct rep){.id = batch, .node = "n2", .attempt = 1, .exit_code = 9});
    ck_assert_int_eq(job(&t, batch).exit_code, 0);

    /* Attempt 0 means the current one (the old single JobCompleted). */
    uint64_t old = submit(&t, NULL);
    allocate(&t, old, "n3", NULL);
    started(&t, old, 1);
    struct report_cmd rc;
    report_cmd_single(&rc, &(struct rep){.id = old, .node = "n3"});
    run_ok(&t, &rc.c);
    check_job(&t, old, J(COMPLETED), "None");
    t_free(&t);
}
END_TEST

/* Reports and starts that must change nothing (the leader acks them all the same). */
START_TEST(test_stale_and_duplicate)
{
    struct t t;
    t_init(&t, true);
    fsm_events_enable(t.f, true);
    uint64_t two = submit(&t, &(struct job_opts){.nodes = 2, .requeue = true});
    allocate(&t, two, "n1", "n2");
    started(&t, two, 1);
    report(&t, &(struct rep){.id = two, .node = "n1", .attempt = 1});
    /* A duplicate of the part already done, and a report of another attempt. */
    report_no_change(&t, &(struct rep){.id = two, .node = "n1", .attempt = 1, .exit_code = 9});
    report_no_change(&t, &(struct rep){.id = two, .node = "n2", .attempt = 7, .exit_code = 9});
    report_no_change(&t, &(struct rep){.id = two, .node = "n2", .attempt = 7, .lost = true});
    /* JobsStarted of another attempt, or of a job already running. */
    Spur__Fsm__Command c;
    Spur__Fsm__JobsStarted js;
    Spur__Fsm__JobStart st, *sp;
    jobs_started_cmd(&c, &js, &st, &sp, two, 2);
    expect_no_change(&t, &c, C_OK);
    uint64_t run1 = submit(&t, &(struct job_opts){.requeue = true});
    allocate(&t, run1, "n3", NULL);
    started(&t, run1, 1);
    jobs_started_cmd(&c, &js, &st, &sp, run1, 1);
    expect_no_change(&t, &c, C_OK);
    /* A launch failure after every agent confirmed, or for another attempt. */
    Spur__Fsm__JobLaunchFailed lf;
    launch_failed_cmd(&c, &lf, run1, 1, "n3", "late", true);
    expect_no_change(&t, &c, C_OK);
    launch_failed_cmd(&c, &lf, run1, 5, "n3", "stale", false);
    expect_no_change(&t, &c, C_OK);
    /* A finished job: every kind of report. */
    report(&t, &(struct rep){.id = two, .node = "n2", .attempt = 1});
    check_job(&t, two, J(COMPLETED), NULL);
    report_no_change(&t, &(struct rep){.id = two, .node = "n2", .attempt = 1});
    report_no_change(&t, &(struct rep){.id = two, .node = "n2", .attempt = 1, .lost = true});
    report_no_change(&t, &(struct rep){.id = two, .node = "n1", .attempt = 1, .oom = true});
    /* A requeued job: its abandoned attempt's reports. */
    not_responding(&t, "n3");
    check_job(&t, run1, J(PENDING), NULL);
    ck_assert_uint_eq(job(&t, run1).attempt, 1); /* kept until the next placement */
    report_no_change(&t, &(struct rep){.id = run1, .node = "n3", .attempt = 1});
    report_no_change(&t, &(struct rep){.id = run1, .node = "n3", .attempt = 1, .never_ran = true});
    /* Every report above was listed for the leader to ack, duplicates included. */
    struct fsm_events ev;
    ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
    ck_assert_uint_eq(ev.nreported, 10);
    fsm_events_free(&ev);
    /* A refused single JobCompleted still changes nothing. */
    struct report_cmd rc;
    report_cmd_single(&rc, &(struct rep){.id = run1, .node = "n3"});
    expect_no_change(&t, &rc.c, C_CONFLICT); /* attempt 0 of a pending job */
    rc.jc.job_id = 4242;
    expect_no_change(&t, &rc.c, C_NOT_FOUND);
    t_free(&t);
}
END_TEST

/* ---- failed launches ---------------------------------------------------------------------- */

START_TEST(test_launch_backoff_and_drain)
{
    struct t t;
    t_init(&t, true);
    fsm_events_enable(t.f, true);
    uint64_t id = submit(&t, NULL);
    /* Back-off 10 s doubling per restart, at most 600 s; the node resumed between. */
    static const uint64_t want_s[] = {10, 20, 40, 80, 160, 320, 600, 600};
    for (uint32_t k = 0; k < 8; k++) {
        allocate(&t, id, "n1", NULL);
        ck_assert_uint_eq(job(&t, id).attempt, k + 1);
        t.now += 7;
        launch_failed(&t, id, k + 1, "n1", "cannot fork", true);
        struct jv v = job(&t, id);
        ck_assert_int_eq(v.state, J(PENDING));
        ck_assert_uint_eq(v.restarts, k + 1);
        ck_assert_uint_eq(v.nnodes, 0);
        ck_assert_msg(v.eligible_ms == t.now + want_s[k] * 1000, "restart %u: eligible +%llu ms",
                      k + 1, (unsigned long long)(v.eligible_ms - t.now));
        ck_assert_str_eq(v.reason, "BeginTime");
        ck_assert_uint_eq(node(&t, "n1").alloc_cpus, 0);
        struct fsm_events ev;
        ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
        ck_assert(has_ref(ev.kill, ev.nkill, id, k + 1));
        fsm_events_free(&ev);
        /* Placing it during its back-off is skipped. */
        struct alloc a = {id, {"n2"}};
        ck_assert_int_eq(allocate_n(&t, &a, 1), C_OK);
        check_job(&t, id, J(PENDING), "BeginTime");
        t.now = v.eligible_ms;
        tick(&t);
        check_job(&t, id, J(PENDING), "None");
        if (node(&t, "n1").state == N(DRAINED))
            update_node(&t, "n1", "resume", "");
    }

    /* Three in a row drain the node, with the agent's words (control characters blanked). */
    uint64_t j2 = submit(&t, NULL);
    for (uint32_t k = 0; k < 3; k++) {
        ck_assert_uint_eq(node(&t, "n2").launch_failures, k);
        allocate(&t, j2, "n2", NULL);
        launch_failed(&t, j2, k + 1, "n2", "spool\nfull", true);
        t.now = job(&t, j2).eligible_ms;
    }
    struct nv n = node(&t, "n2");
    ck_assert_int_eq(n.state, N(DRAINED));
    ck_assert_str_eq(n.reason, "launch failed: spool full");
    ck_assert_uint_eq(n.launch_failures, 3);

    /* A successful start resets the count. */
    uint64_t j3 = submit(&t, NULL);
    allocate(&t, j3, "n3", NULL);
    launch_failed(&t, j3, 1, "n3", "x", true);
    t.now = job(&t, j3).eligible_ms;
    allocate(&t, j3, "n3", NULL);
    launch_failed(&t, j3, 2, "n3", "x", true);
    ck_assert_uint_eq(node(&t, "n3").launch_failures, 2);
    t.now = job(&t, j3).eligible_ms;
    allocate(&t, j3, "n3", NULL);
    started(&t, j3, 3);
    ck_assert_uint_eq(node(&t, "n3").launch_failures, 0);
    ck_assert_int_eq(node(&t, "n3").state, N(MIXED));
    t_free(&t);
}
END_TEST

START_TEST(test_launch_failure_not_node)
{
    struct t t;
    t_init(&t, true);
    fsm_events_enable(t.f, true);
    uint64_t id = submit(&t, &(struct job_opts){.nodes = 2});
    allocate(&t, id, "n1", "n2");
    report(&t, &(struct rep){.id = id, .node = "n2", .attempt = 1}); /* fast on n2 */
    check_job(&t, id, J(COMPLETING), NULL);
    struct fsm_events ev;
    ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
    fsm_events_free(&ev);
    launch_failed(&t, id, 1, "n1", "no such user", false);
    struct jv v = job(&t, id);
    ck_assert_int_eq(v.state, J(FAILED));
    ck_assert_str_eq(v.reason, "JobLaunchFailure");
    ck_assert_uint_eq(node(&t, "n1").alloc_cpus, 0);
    ck_assert_uint_eq(node(&t, "n1").launch_failures, 0);
    ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
    ck_assert(has_ref(ev.kill, ev.nkill, id, 1));
    fsm_events_free(&ev);
    /* A node the job does not run on is refused and changes nothing. */
    uint64_t j2 = submit(&t, NULL);
    allocate(&t, j2, "n3", NULL);
    Spur__Fsm__Command c;
    Spur__Fsm__JobLaunchFailed lf;
    launch_failed_cmd(&c, &lf, j2, 1, "n1", "x", true);
    expect_no_change(&t, &c, C_INVALID);
    t_free(&t);
}
END_TEST

/* ---- nodes that stop answering -------------------------------------------------------------- */

START_TEST(test_not_responding)
{
    struct t t;
    t_init(&t, true);
    fsm_events_enable(t.f, true);
    uint64_t plain = submit(&t, NULL);
    uint64_t rq = submit(&t, &(struct job_opts){.requeue = true});
    uint64_t two = submit(&t, &(struct job_opts){.nodes = 2});
    uint64_t cfg = submit(&t, NULL);
    uint64_t elsewhere = submit(&t, NULL);
    allocate(&t, plain, "n1", NULL);
    started(&t, plain, 1);
    allocate(&t, rq, "n1", NULL);
    started(&t, rq, 1);
    allocate(&t, two, "n1", "n2");
    started(&t, two, 1);
    allocate(&t, cfg, "n1", NULL); /* still configuring */
    allocate(&t, elsewhere, "n3", NULL);
    struct fsm_events ev;
    ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
    fsm_events_free(&ev);
    t.now += 60000;
    not_responding(&t, "n1");
    struct nv n = node(&t, "n1");
    ck_assert_int_eq(n.state, N(DOWN));
    ck_assert_str_eq(n.reason, "Not responding");
    ck_assert(n.not_responding);
    check_job(&t, plain, J(NODE_FAIL), "NodeFail");
    check_job(&t, cfg, J(NODE_FAIL), "NodeFail");
    check_job(&t, two, J(NODE_FAIL), "NodeFail");
    struct jv v = job(&t, rq);
    ck_assert_int_eq(v.state, J(PENDING));
    ck_assert_uint_eq(v.restarts, 1);
    ck_assert_uint_eq(v.eligible_ms, t.now);
    check_job(&t, elsewhere, J(CONFIGURING), NULL);
    ck_assert_uint_eq(node(&t, "n2").alloc_cpus, 0); /* two's other part released */
    ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
    ck_assert(has_ref(ev.kill, ev.nkill, two, 1)); /* n2 must kill its part */
    ck_assert(has_ref(ev.kill, ev.nkill, rq, 1));
    ck_assert(ev.nodes);
    ck_assert(ev.schedule);
    fsm_events_free(&ev);
    /* Again: already down, nothing changes. */
    char *names[] = {"n1", "nobody"};
    Spur__Fsm__NodesNotResponding nr = SPUR__FSM__NODES_NOT_RESPONDING__INIT;
    nr.n_names = 2;
    nr.names = names;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_NODES_NOT_RESPONDING;
    c.nodes_not_responding = &nr;
    expect_no_change(&t, &c, C_OK);
    /* Its agent registers again: back, unless an operator took it down. */
    register_node(&t, "n1", 4, false);
    ck_assert_int_eq(node(&t, "n1").state, N(DOWN)); /* not from the agent: no */
    register_node(&t, "n1", 4, true);
    n = node(&t, "n1");
    ck_assert_int_eq(n.state, N(IDLE));
    ck_assert(!n.not_responding);
    ck_assert_str_eq(n.reason, "");

    update_node(&t, "n2", "down", "bad DIMM");
    not_responding(&t, "n2");
    ck_assert(!node(&t, "n2").not_responding);
    register_node(&t, "n2", 4, true);
    n = node(&t, "n2");
    ck_assert_int_eq(n.state, N(DOWN));
    ck_assert_str_eq(n.reason, "bad DIMM");

    /* An operator's down after not responding is the operator's to clear. */
    not_responding(&t, "n3");
    check_job(&t, elsewhere, J(NODE_FAIL), NULL);
    update_node(&t, "n3", "down", "replace");
    register_node(&t, "n3", 4, true);
    ck_assert_int_eq(node(&t, "n3").state, N(DOWN));

    /* A cancelled job that loses a node ends CANCELLED, not NODE_FAIL. */
    update_node(&t, "n3", "resume", "");
    uint64_t cj = submit(&t, NULL);
    allocate(&t, cj, "n3", NULL);
    started(&t, cj, 1);
    cancel(&t, cj);
    not_responding(&t, "n3");
    check_job(&t, cj, J(CANCELLED), "None");
    t_free(&t);
}
END_TEST

START_TEST(test_heartbeat_names)
{
    struct t t;
    t_init(&t, true);
    uint64_t t0 = t.now;
    t.now += 3000;
    char *names[] = {"n1", "nobody", "n3"};
    Spur__Fsm__NodeHeartbeat hb = SPUR__FSM__NODE_HEARTBEAT__INIT;
    hb.n_names = 3;
    hb.names = names;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_NODE_HEARTBEAT;
    c.node_heartbeat = &hb;
    run_ok(&t, &c);
    ck_assert_uint_eq(node(&t, "n1").last_seen_ms, t.now);
    ck_assert_uint_eq(node(&t, "n2").last_seen_ms, t0);
    ck_assert_uint_eq(node(&t, "n3").last_seen_ms, t.now);

    /*
     * An agent that was only cut off answers the leader's heartbeat again: its node comes
     * back by itself; an operator's down does not.
     */
    char *one[] = {"n1"};
    Spur__Fsm__NodesNotResponding nr = SPUR__FSM__NODES_NOT_RESPONDING__INIT;
    nr.n_names = 1;
    nr.names = one;
    Spur__Fsm__Command d = SPUR__FSM__COMMAND__INIT;
    d.op_case = SPUR__FSM__COMMAND__OP_NODES_NOT_RESPONDING;
    d.nodes_not_responding = &nr;
    run_ok(&t, &d);
    ck_assert_int_eq(node(&t, "n1").state, N(DOWN));
    run_ok(&t, &c);
    struct nv n = node(&t, "n1");
    ck_assert_int_eq(n.state, N(IDLE));
    ck_assert(!n.not_responding);
    ck_assert_str_eq(n.reason, "");
    update_node(&t, "n3", "down", "operator");
    run_ok(&t, &c);
    ck_assert_int_eq(node(&t, "n3").state, N(DOWN));
    t_free(&t);
}
END_TEST

/* ---- cancel ------------------------------------------------------------------------------- */

START_TEST(test_cancel_placed)
{
    struct t t;
    t_init(&t, true);
    fsm_events_enable(t.f, true);
    uint64_t pend = submit(&t, NULL);
    uint64_t cfg = submit(&t, &(struct job_opts){.nodes = 2});
    allocate(&t, cfg, "n1", "n2");
    struct fsm_events ev;
    ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
    ck_assert_uint_eq(ev.nlaunch, 1);
    fsm_events_free(&ev);

    cancel(&t, pend);
    check_job(&t, pend, J(CANCELLED), "None");
    cancel(&t, cfg);
    check_job(&t, cfg, J(COMPLETING), NULL);
    ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
    ck_assert_uint_eq(ev.nkill, 1); /* the pending one needs no agent */
    ck_assert_uint_eq(ev.kill[0].job_id, cfg);
    ck_assert_uint_eq(ev.kill[0].attempt, 1);
    fsm_events_free(&ev);
    /*
     * n2 never had it; the batch host n1's launch fails after the cancel: both parts
     * done, CANCELLED.
     */
    report(&t, &(struct rep){.id = cfg, .node = "n2", .attempt = 1, .never_ran = true});
    check_job(&t, cfg, J(COMPLETING), NULL);
    ck_assert_uint_eq(node(&t, "n2").alloc_cpus, 0);
    launch_failed(&t, cfg, 1, "n1", "cancelled", true);
    struct jv v = job(&t, cfg);
    ck_assert_int_eq(v.state, J(CANCELLED));
    ck_assert_uint_eq(v.start_ms, 0); /* it never ran anywhere */
    ck_assert_uint_eq(node(&t, "n1").launch_failures, 0);
    t_free(&t);
}
END_TEST

/* ---- pending reasons ------------------------------------------------------------------------ */

START_TEST(test_pending_reasons)
{
    struct t t;
    t_init(&t, true);
    uint64_t fill = submit(&t, &(struct job_opts){.cpus = 3});
    allocate(&t, fill, "n1", NULL);
    started(&t, fill, 1);
    /* pair: n1 has 1 CPU free, n2 4. */
    uint64_t held = submit(&t, &(struct job_opts){.partition = "pair", .hold = true});
    uint64_t big1 = submit(&t, &(struct job_opts){.partition = "pair", .nodes = 2, .cpus = 2});
    uint64_t big2 = submit(&t, &(struct job_opts){.partition = "pair", .nodes = 2, .cpus = 2});
    uint64_t small = submit(&t, &(struct job_opts){.partition = "pair", .cpus = 1});
    uint64_t other = submit(&t, &(struct job_opts){.cpus = 4}); /* batch: n2 or n3 fit */
    check_job(&t, held, J(PENDING), "JobHeldUser");
    check_job(&t, big1, J(PENDING), "Resources");
    check_job(&t, big2, J(PENDING), "Priority");
    check_job(&t, small, J(PENDING), "None");
    check_job(&t, other, J(PENDING), "None");
    /* The same in one answer of every job. */
    Spur__Api__GetJobsRequest q = SPUR__API__GET_JOBS_REQUEST__INIT;
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_jobs(t.f, &q, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.jobs->n_jobs, 6);
    ck_assert_str_eq(rd.resp.jobs->jobs[2]->reason, "Resources");
    ck_assert_str_eq(rd.resp.jobs->jobs[3]->reason, "Priority");
    ck_assert_str_eq(rd.resp.jobs->jobs[4]->reason, "None");
    fsm_read_free(&rd);
    /* Order is by eligible time: big1 back from a failed launch goes behind big2. */
    report(&t, &(struct rep){.id = fill, .node = "n1", .attempt = 1});
    allocate(&t, big1, "n1", "n2");
    launch_failed(&t, big1, 1, "n1", "x", true);
    t.now = job(&t, big1).eligible_ms;
    tick(&t);
    uint64_t fill2 = submit(&t, &(struct job_opts){.cpus = 3});
    allocate(&t, fill2, "n1", NULL);
    check_job(&t, big2, J(PENDING), "Resources");
    check_job(&t, big1, J(PENDING), "Priority");
    /* No usable node at all. */
    update_node(&t, "n1", "drain", "a");
    update_node(&t, "n2", "down", "b");
    check_job(&t, big2, J(PENDING), "ReqNodeNotAvail");
    /* Partition changes: a job asking more time than the partition allows now; down. */
    uint64_t tl = submit(&t, &(struct job_opts){.partition = "pair", .time_limit_min = 20});
    uint64_t t5 = submit(&t, &(struct job_opts){.partition = "pair", .time_limit_min = 5});
    set_parts(&t, true, 10);
    check_job(&t, tl, J(PENDING), "PartitionTimeLimit");
    check_job(&t, small, J(PENDING), "PartitionTimeLimit"); /* took 30 min at submit */
    check_job(&t, t5, J(PENDING), "ReqNodeNotAvail");
    set_parts(&t, false, 10);
    check_job(&t, t5, J(PENDING), "PartitionDown");
    check_job(&t, held, J(PENDING), "JobHeldUser");
    t_free(&t);
}
END_TEST

/* ---- snapshots and events ------------------------------------------------------------------- */

/* A state with a job in every state, nodes with failure counts and not responding. */
static void build_every_state(struct t *t)
{
    uint64_t id;
    submit(t, NULL);                             /* PENDING */
    submit(t, &(struct job_opts){.hold = true}); /* held */
    id = submit(t, NULL);
    allocate(t, id, "n1", NULL); /* CONFIGURING */
    id = submit(t, NULL);
    allocate(t, id, "n1", NULL);
    started(t, id, 1); /* RUNNING */
    id = submit(t, &(struct job_opts){.nodes = 2});
    allocate(t, id, "n1", "n2");
    started(t, id, 1);
    report(t, &(struct rep){.id = id, .node = "n2", .attempt = 1}); /* COMPLETING */
    static const struct rep ends[] = {
        {.exit_code = 0}, {.exit_code = 1}, {.timed_out = true}, {.oom = true}, {.lost = true},
    };
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
        id = submit(t, NULL);
        allocate(t, id, "n3", NULL);
        started(t, id, 1);
        struct rep r = ends[i];
        r.id = id;
        r.node = "n3";
        r.attempt = 1;
        report(t, &r);
    }
    id = submit(t, NULL);
    allocate(t, id, "n3", NULL);
    cancel(t, id);
    report(t, &(struct rep){.id = id, .node = "n3", .attempt = 1, .never_ran = true}); /* CA */
    id = submit(t, &(struct job_opts){.requeue = true});
    allocate(t, id, "n2", NULL);
    launch_failed(t, id, 1, "n2", "spool", true); /* back-off, restarts 1 */
    id = submit(t, NULL);
    allocate(t, id, "n3", NULL);
    launch_failed(t, id, 1, "n3", "user", false); /* FAILED JobLaunchFailure */
    register_node(t, "n4", 2, true);
    not_responding(t, "n4");
}

START_TEST(test_snapshot_every_state)
{
    struct t t;
    t_init(&t, true);
    build_every_state(&t);
    struct fsm_stats st;
    fsm_stats(t.f, &st);
    static const int states[] = {J(PENDING),   J(CONFIGURING),  J(RUNNING),   J(COMPLETING),
                                 J(COMPLETED), J(FAILED),       J(CANCELLED), J(TIMEOUT),
                                 J(NODE_FAIL), J(OUT_OF_MEMORY)};
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
        ck_assert_msg(st.jobs_by_state[states[i]] > 0, "no job in state %d", states[i]);
    uint8_t *a;
    size_t na;
    snapshot(t.f, &a, &na);
    struct fsm *g = fsm_new(NULL);
    char err[256];
    ck_assert_msg(fsm_restore(g, a, na, err, sizeof(err)) == FSM_OK, "%s", err);
    uint8_t *b;
    size_t nb;
    snapshot(g, &b, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_msg(memcmp(a, b, na) == 0, "snapshot bytes differ after restore");
    /* Derived data agrees too: allocations (configuring holds resources), reasons. */
    struct t tg = {.f = g, .now = t.now};
    for (int k = 1; k <= 4; k++) {
        char name[8];
        snprintf(name, sizeof(name), "n%d", k);
        struct nv x = node(&t, name), y = node(&tg, name);
        ck_assert_uint_eq(x.alloc_cpus, y.alloc_cpus);
        ck_assert_int_eq(x.state, y.state);
        ck_assert_uint_eq(x.launch_failures, y.launch_failures);
        ck_assert_int_eq(x.not_responding, y.not_responding);
    }
    ck_assert_uint_eq(node(&tg, "n1").alloc_cpus, 3); /* configuring, running, completing */
    ck_assert(node(&tg, "n4").not_responding);
    ck_assert_uint_eq(node(&tg, "n2").launch_failures, 1);
    for (uint64_t id = 1; id < st.next_job_id; id++) {
        struct jv x = job(&t, id), y = job(&tg, id);
        ck_assert_int_eq(x.state, y.state);
        ck_assert_str_eq(x.reason, y.reason);
        ck_assert_uint_eq(x.attempt, y.attempt);
        ck_assert_uint_eq(x.restarts, y.restarts);
        ck_assert_int_eq(x.exit_signal, y.exit_signal);
    }
    free(a);
    free(b);
    fsm_free(g);
    t_free(&t);
}
END_TEST

START_TEST(test_events_only_when_enabled)
{
    struct t t, u;
    t_init(&t, true);
    t_init(&u, true);
    fsm_events_enable(u.f, true);
    struct fsm_events ev;
    /* Off: nothing is recorded, whatever applies. */
    uint64_t id = submit(&t, NULL);
    allocate(&t, id, "n1", NULL);
    ck_assert_int_eq(fsm_events_take(t.f, &ev), FSM_OK);
    ck_assert(ev.nlaunch == 0 && ev.nkill == 0 && ev.nreported == 0);
    ck_assert(ev.alloc_entries == 0 && !ev.schedule && !ev.nodes);
    fsm_events_free(&ev);

    /* On: the same entries on the other state machine. */
    ck_assert_uint_eq(submit(&u, NULL), id);
    ck_assert_int_eq(fsm_events_take(u.f, &ev), FSM_OK);
    ck_assert(ev.schedule);
    ck_assert_uint_eq(ev.nlaunch, 0);
    fsm_events_free(&ev);
    allocate(&u, id, "n1", NULL);
    ck_assert_int_eq(fsm_events_take(u.f, &ev), FSM_OK);
    ck_assert_uint_eq(ev.alloc_entries, 1);
    ck_assert_uint_eq(ev.nlaunch, 1);
    ck_assert_uint_eq(ev.launch[0].job_id, id);
    ck_assert_uint_eq(ev.launch[0].attempt, 1);
    ck_assert(!ev.nodes);
    fsm_events_free(&ev);
    ck_assert_int_eq(fsm_events_take(u.f, &ev), FSM_OK); /* taken: empty */
    ck_assert(ev.nlaunch == 0 && ev.alloc_entries == 0 && !ev.schedule);
    fsm_events_free(&ev);
    register_node(&u, "n9", 2, true);
    ck_assert_int_eq(fsm_events_take(u.f, &ev), FSM_OK);
    ck_assert(ev.nodes);
    fsm_events_free(&ev);
    register_node(&t, "n9", 2, true);

    /* Recording changes nothing in the state: both give the same snapshot. */
    ck_assert_msg(fsm_drive_same(t.f, u.f), "events changed the replicated state");
    /* Turned off, what was recorded is dropped. */
    cancel(&u, id);
    fsm_events_enable(u.f, false);
    ck_assert_int_eq(fsm_events_take(u.f, &ev), FSM_OK);
    ck_assert_uint_eq(ev.nkill, 0);
    fsm_events_free(&ev);
    t_free(&t);
    t_free(&u);
}
END_TEST

START_TEST(test_submit_requeue_account)
{
    struct t t;
    t_init(&t, true);
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    s.script.data = (uint8_t *)SCRIPT;
    s.script.len = strlen(SCRIPT);
    s.requeue = true;
    s.account = "physics";
    s.partition = "pair";
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    run_ok(&t, &c);
    struct jv v = job(&t, 1);
    ck_assert(v.requeue);
    ck_assert_str_eq(v.account, "physics");
    /* The partition's limit is the job's when it asks none. */
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_job(t.f, 1, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.jobs->jobs[0]->spec->time_limit_min, 30);
    fsm_read_free(&rd);
    s.account = "bad\taccount";
    char err[256];
    ck_assert_int_eq(run_err(&t, &c, err, sizeof(err)), C_INVALID);
    ck_assert_str_eq(err, "the account holds a control character");
    t_free(&t);
}
END_TEST

/* ---- random lifecycles ------------------------------------------------------------------- */

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* What the generator needs of a job: attempt, nodes asked, nodes placed on. */
struct pick {
    uint32_t attempt;
    uint32_t nodes;
    size_t nplaced;
    char placed[2][8];
};

static struct pick pick_of(struct fsm *f, uint64_t id)
{
    struct pick p = {0};
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_job(f, id, &rd), FSM_OK);
    if (rd.resp.code == C_OK) {
        const Spur__Api__Job *j = rd.resp.jobs->jobs[0];
        p.attempt = j->attempt;
        p.nodes = j->spec->nodes;
        for (size_t k = 0; k < j->n_node_list && k < 2; k++)
            snprintf(p.placed[p.nplaced++], sizeof(p.placed[0]), "%s", j->node_list[k]);
    }
    fsm_read_free(&rd);
    return p;
}

/*
 * One random lifecycle command against the live state, encoded into *bytes (the caller
 * applies it). Attempts are mostly the job's current one, sometimes another.
 */
static void random_command(struct t *t, uint32_t *seed, uint8_t **bytes, size_t *len)
{
    static char *nodes[] = {"n1", "n2", "n3", "n4", "zz"};
    static char *reasons[] = {"spool full", "no such user\n"};
    struct fsm_stats fs;
    fsm_stats(t->f, &fs);
    /* Mostly one of the latest jobs (the active ones), sometimes any id at all. */
    uint64_t id = rnd(seed) % 4 == 0 || fs.next_job_id <= 8 ? 1 + rnd(seed) % (fs.next_job_id + 1)
                                                            : fs.next_job_id - 1 - rnd(seed) % 8;
    struct pick jp = pick_of(t->f, id);
    uint32_t attempt = jp.attempt;
    /* A node of the job's mostly, any node sometimes. */
    char *its_node = jp.nplaced > 0 && rnd(seed) % 5 != 0 ? jp.placed[rnd(seed) % jp.nplaced]
                                                          : nodes[rnd(seed) % 5];
    uint32_t r = rnd(seed) % 10;
    attempt = r == 0 ? attempt + 1 : r == 1 ? 0 : r == 2 && attempt > 0 ? attempt - 1 : attempt;

    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    Spur__Fsm__Allocation al = SPUR__FSM__ALLOCATION__INIT, *alp = &al;
    Spur__Fsm__JobsAllocated ja = SPUR__FSM__JOBS_ALLOCATED__INIT;
    Spur__Fsm__JobStart st = SPUR__FSM__JOB_START__INIT, *stp = &st;
    Spur__Fsm__JobsStarted js = SPUR__FSM__JOBS_STARTED__INIT;
    Spur__Fsm__JobCompleted jc = SPUR__FSM__JOB_COMPLETED__INIT, *jcp = &jc;
    Spur__Fsm__JobsCompleted jcs = SPUR__FSM__JOBS_COMPLETED__INIT;
    Spur__Fsm__JobLaunchFailed lf = SPUR__FSM__JOB_LAUNCH_FAILED__INIT;
    Spur__Fsm__NodesNotResponding nr = SPUR__FSM__NODES_NOT_RESPONDING__INIT;
    Spur__Api__RegisterNodeRequest rn = SPUR__API__REGISTER_NODE_REQUEST__INIT;
    Spur__Api__UpdateNodeRequest un = SPUR__API__UPDATE_NODE_REQUEST__INIT;
    Spur__Api__JobIdRequest jid = SPUR__API__JOB_ID_REQUEST__INIT;
    char *pick[2], *one[1];
    uint32_t what = rnd(seed) % 100;
    if (what < 12) {
        s.script.data = (uint8_t *)SCRIPT;
        s.script.len = strlen(SCRIPT);
        s.nodes = 1 + rnd(seed) % 2;
        s.cpus_per_task = 1 + rnd(seed) % 3;
        s.requeue = rnd(seed) % 2;
        c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
        c.submit_job = &s;
    } else if (what < 35) {
        al.job_id = id;
        al.n_nodes = jp.nodes > 0 && rnd(seed) % 8 != 0 ? jp.nodes : 1 + rnd(seed) % 2;
        uint32_t first = rnd(seed) % 4;
        for (size_t k = 0; k < al.n_nodes; k++)
            pick[k] = rnd(seed) % 10 == 0 ? nodes[rnd(seed) % 5] : nodes[(first + k) % 4];
        al.nodes = pick;
        ja.n_allocations = 1;
        ja.allocations = &alp;
        c.op_case = SPUR__FSM__COMMAND__OP_JOBS_ALLOCATED;
        c.jobs_allocated = &ja;
    } else if (what < 47) {
        st.job_id = id;
        st.attempt = attempt;
        js.n_starts = 1;
        js.starts = &stp;
        c.op_case = SPUR__FSM__COMMAND__OP_JOBS_STARTED;
        c.jobs_started = &js;
    } else if (what < 75) {
        jc.job_id = id;
        jc.attempt = attempt;
        jc.node = its_node;
        jc.exit_code = rnd(seed) % 4 == 0 ? 2 : 0;
        jc.signal = rnd(seed) % 8 == 0 ? 9 : 0;
        jc.oom = rnd(seed) % 10 == 0;
        jc.timed_out = rnd(seed) % 10 == 0;
        jc.lost = rnd(seed) % 12 == 0;
        jc.never_ran = rnd(seed) % 12 == 0;
        jcs.n_reports = 1;
        jcs.reports = &jcp;
        c.op_case = SPUR__FSM__COMMAND__OP_JOBS_COMPLETED;
        c.jobs_completed = &jcs;
    } else if (what < 80) {
        lf.job_id = id;
        lf.attempt = attempt;
        lf.node = its_node;
        lf.reason = reasons[rnd(seed) % 2];
        lf.node_fault = rnd(seed) % 3 != 0;
        c.op_case = SPUR__FSM__COMMAND__OP_JOB_LAUNCH_FAILED;
        c.job_launch_failed = &lf;
    } else if (what < 82) {
        one[0] = nodes[rnd(seed) % 5];
        nr.n_names = 1;
        nr.names = one;
        c.op_case = SPUR__FSM__COMMAND__OP_NODES_NOT_RESPONDING;
        c.nodes_not_responding = &nr;
    } else if (what < 87) {
        rn.name = nodes[rnd(seed) % 4];
        rn.cpus = 4;
        rn.from_agent = rnd(seed) % 4 != 0;
        c.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
        c.register_node = &rn;
    } else if (what < 90) {
        static char *verbs[] = {"down", "resume", "drain", "undrain", "resume", "undrain"};
        un.name = nodes[rnd(seed) % 4];
        un.state = verbs[rnd(seed) % 6];
        un.reason = "op";
        c.op_case = SPUR__FSM__COMMAND__OP_UPDATE_NODE;
        c.update_node = &un;
    } else if (what < 95) {
        jid.job_id = id;
        c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOB;
        c.cancel_job = &jid;
    } else {
        Spur__Fsm__Tick tk = SPUR__FSM__TICK__INIT;
        c.op_case = SPUR__FSM__COMMAND__OP_TICK;
        c.tick = &tk;
        t->now += 60000;
        c.time_ms = t->now;
        c.user = "alice";
        ck_assert_int_eq(fsm_encode_command(&c, bytes, len), FSM_OK);
        return;
    }
    t->now += rnd(seed) % 20000;
    c.time_ms = t->now;
    c.user = "alice";
    ck_assert_int_eq(fsm_encode_command(&c, bytes, len), FSM_OK);
}

/* Node answers of two states, packed: allocations and states must agree. */
static void assert_same_nodes(struct fsm *a, struct fsm *b)
{
    Spur__Api__GetNodesRequest q = SPUR__API__GET_NODES_REQUEST__INIT;
    struct fsm_read ra, rb;
    ck_assert_int_eq(fsm_get_nodes(a, &q, &ra), FSM_OK);
    ck_assert_int_eq(fsm_get_nodes(b, &q, &rb), FSM_OK);
    size_t na = spur__api__response__get_packed_size(&ra.resp);
    size_t nb = spur__api__response__get_packed_size(&rb.resp);
    uint8_t *x = malloc(na + 1), *y = malloc(nb + 1);
    ck_assert(x != NULL && y != NULL);
    spur__api__response__pack(&ra.resp, x);
    spur__api__response__pack(&rb.resp, y);
    ck_assert_msg(na == nb && memcmp(x, y, na) == 0, "node answers differ");
    free(x);
    free(y);
    fsm_read_free(&ra);
    fsm_read_free(&rb);
}

/*
 * A random lifecycle log applied to a leader (events on, taken after every entry) and a
 * follower (off); half way the follower is replaced by a restore of its own snapshot.
 * Both end in the same bytes, and every so often the leader's node allocations equal
 * those a restore recomputes from the jobs (so the running accounting never drifts).
 */
START_TEST(test_random_lifecycle)
{
    uint32_t seed = 0x9e3779b9u + (uint32_t)_i * 7919u;
    struct t lead, fol;
    t_init(&lead, true);
    t_init(&fol, true);
    register_node(&lead, "n4", 4, true);
    register_node(&fol, "n4", 4, true);
    fsm_events_enable(lead.f, true);
    const size_t n = 1500;
    for (size_t i = 0; i < n; i++) {
        uint8_t *bytes;
        size_t len;
        random_command(&lead, &seed, &bytes, &len);
        uint64_t index = fsm_last_applied(lead.f) + 1;
        ck_assert_int_eq(fsm_apply(lead.f, index, bytes, len, NULL), FSM_OK);
        ck_assert_int_eq(fsm_apply(fol.f, index, bytes, len, NULL), FSM_OK);
        free(bytes);
        struct fsm_events ev;
        ck_assert_int_eq(fsm_events_take(lead.f, &ev), FSM_OK);
        fsm_events_free(&ev);
        if (i == n / 2 || i % 100 == 99) {
            uint8_t *snap;
            size_t slen;
            snapshot(fol.f, &snap, &slen);
            struct fsm *g = fsm_new(NULL);
            char err[256];
            ck_assert_msg(fsm_restore(g, snap, slen, err, sizeof(err)) == FSM_OK, "%s", err);
            free(snap);
            assert_same_nodes(lead.f, g);
            if (i == n / 2) {
                fsm_free(fol.f);
                fol.f = g;
            } else {
                fsm_free(g);
            }
        }
    }
    ck_assert_msg(fsm_drive_same(lead.f, fol.f), "leader and follower differ");
    /* The log really ran jobs through their lives. */
    struct fsm_stats st;
    fsm_stats(lead.f, &st);
    ck_assert_uint_gt(st.jobs_by_state[J(COMPLETED)] + st.jobs_by_state[J(FAILED)], 0);
    ck_assert_uint_gt(st.jobs_by_state[J(NODE_FAIL)] + st.jobs_by_state[J(CANCELLED)], 0);
    t_free(&lead);
    t_free(&fol);
}
END_TEST

/* ---- dependencies ------------------------------------------------------------------------- */

/* A submit with this dependency text, refused with code and a message containing part. */
static void submit_refused(struct t *t, const char *dep, int code, const char *part)
{
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    s.script.data = (uint8_t *)SCRIPT;
    s.script.len = strlen(SCRIPT);
    s.dependency = (char *)dep;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    Spur__Api__Response *resp = fsm_drive_apply(t->f, &c, t->now);
    ck_assert_msg((int)resp->code == code && strstr(resp->error, part) != NULL,
                  "\"%s\": code %d \"%s\", want %d \"%s\"", dep, (int)resp->code, resp->error, code,
                  part);
    spur__api__response__free_unpacked(resp, NULL);
}

static uint64_t submit_dep(struct t *t, const char *dep)
{
    struct job_opts o = {.dependency = dep};
    return submit(t, &o);
}

/* Run a placed-able job to its end on n1 with this exit code. */
static void run_to_end(struct t *t, uint64_t id, int exit_code)
{
    allocate(t, id, "n1", NULL);
    uint32_t attempt = job(t, id).attempt;
    started(t, id, attempt);
    report(t, &(struct rep){.id = id, .node = "n1", .attempt = attempt, .exit_code = exit_code});
}

/* Whether a scheduler pass now would place job id. */
static bool sched_places(struct t *t, uint64_t id)
{
    struct fsm_sched_opts o = {.now_ms = t->now};
    struct fsm_sched_result r;
    ck_assert_int_eq(fsm_sched_pass(t->f, &o, &r), FSM_OK);
    bool found = false;
    for (size_t i = 0; i < r.n; i++)
        found |= r.v[i].job_id == id;
    fsm_sched_result_free(&r);
    return found;
}

START_TEST(test_deps_parse)
{
    static const struct {
        const char *text;
        uint32_t n;
        bool any, singleton;
    } good[] = {
        {"afterok:7", 1, false, false},
        {"afterok:7:8,afterany:9", 3, false, false},
        {"after:1?afternotok:2", 2, true, false},
        {"singleton", 0, false, true},
        {"afterok:3,singleton", 1, false, true},
        {"afterok:1,afterok:2?afterany:3", 3, true, false},    /* one '?': any of, as Slurm */
        {"afterok:4:4,afterok:4,afterany:4", 2, false, false}, /* a pair once */
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct fsm_job_deps *d = NULL;
        char err[160] = "";
        ck_assert_msg(fsm_deps_parse(good[i].text, &d, err, sizeof(err)) == 0, "%s: %s",
                      good[i].text, err);
        ck_assert_ptr_nonnull(d);
        ck_assert_uint_eq(d->n, good[i].n);
        ck_assert(d->any == good[i].any && d->singleton == good[i].singleton);
        ck_assert_uint_eq(d->state, good[i].n == 0 ? FSM_DEP_MET : FSM_DEP_WAIT);
        free(d);
    }
    static const struct {
        const char *text, *part;
    } bad[] = {
        {"afterok", "not a dependency"},
        {"afterok:", "missing"},
        {"afterok:1,,afterok:2", "empty item"},
        {"aftercorr:1", "not supported"},
        {"afterok:x1", "not a job id"},
        {"afterok:0", "not a job id"},
        {"after:1+10", "delay"},
        {"afterok:5_3", "array"},
        {"afterok:123456789012345678901234", "too large"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct fsm_job_deps *d = NULL;
        char err[160] = "";
        ck_assert_int_eq(fsm_deps_parse(bad[i].text, &d, err, sizeof(err)), -1);
        ck_assert_ptr_null(d);
        ck_assert_msg(strstr(err, bad[i].part) != NULL, "%s: \"%s\"", bad[i].text, err);
    }
    struct fsm_job_deps *d = NULL;
    char err[160];
    ck_assert_int_eq(fsm_deps_parse("", &d, err, sizeof(err)), 0);
    ck_assert_ptr_null(d);
}
END_TEST

START_TEST(test_deps_lifecycle)
{
    struct t t;
    t_init(&t, true);
    uint64_t a = submit(&t, NULL);
    char dep[64];
    snprintf(dep, sizeof(dep), "afterok:%llu", (unsigned long long)a);
    uint64_t ok = submit_dep(&t, dep);
    snprintf(dep, sizeof(dep), "afternotok:%llu", (unsigned long long)a);
    uint64_t notok = submit_dep(&t, dep);
    snprintf(dep, sizeof(dep), "after:%llu", (unsigned long long)a);
    uint64_t after = submit_dep(&t, dep);
    snprintf(dep, sizeof(dep), "afterany:%llu", (unsigned long long)a);
    uint64_t any = submit_dep(&t, dep);
    struct job_opts ko = {.dependency = dep, .kill_invalid = true};
    snprintf(dep, sizeof(dep), "afternotok:%llu", (unsigned long long)a);
    uint64_t killed = submit(&t, &ko);

    check_job(&t, ok, J(PENDING), "Dependency");
    struct jv v = job(&t, ok);
    snprintf(dep, sizeof(dep), "afterok:%llu(unfulfilled)", (unsigned long long)a);
    ck_assert_str_eq(v.dependency, dep);
    ck_assert(!sched_places(&t, ok));
    ck_assert(sched_places(&t, a));
    /* An allocation of a waiting job is stale and skipped. */
    allocate(&t, ok, "n2", NULL);
    check_job(&t, ok, J(PENDING), "Dependency");

    /* a starts: after: is met; the others still wait. */
    t.now += 1000;
    allocate(&t, a, "n1", NULL);
    started(&t, a, 1);
    check_job(&t, after, J(PENDING), "None");
    ck_assert_str_eq(job(&t, after).dependency, "");
    ck_assert_uint_eq(job(&t, after).eligible_ms, t.now);
    check_job(&t, any, J(PENDING), "Dependency");
    check_job(&t, killed, J(PENDING), "Dependency");

    /* a completes: afterok and afterany met, afternotok failed (one killed). */
    t.now += 1000;
    report(&t, &(struct rep){.id = a, .node = "n1", .attempt = 1});
    check_job(&t, a, J(COMPLETED), NULL);
    check_job(&t, ok, J(PENDING), "None");
    check_job(&t, any, J(PENDING), "None");
    check_job(&t, notok, J(PENDING), "DependencyNeverSatisfied");
    snprintf(dep, sizeof(dep), "afternotok:%llu(failed)", (unsigned long long)a);
    ck_assert_str_eq(job(&t, notok).dependency, dep);
    ck_assert(!sched_places(&t, notok));
    check_job(&t, killed, J(CANCELLED), "DependencyNeverSatisfied");
    ck_assert(sched_places(&t, ok));

    /* A dependency on a job that ended already is judged at submit. */
    snprintf(dep, sizeof(dep), "afternotok:%llu", (unsigned long long)a);
    uint64_t late = submit_dep(&t, dep);
    check_job(&t, late, J(PENDING), "DependencyNeverSatisfied");
    snprintf(dep, sizeof(dep), "afterok:%llu", (unsigned long long)a);
    check_job(&t, submit_dep(&t, dep), J(PENDING), "None");
    /* One that would end now is cancelled at once. */
    ko.dependency = "afternotok:1";
    check_job(&t, submit(&t, &ko), J(CANCELLED), "DependencyNeverSatisfied");

    /* A job not held (never submitted here) meets its entry, as in Slurm. */
    uint64_t ghost = submit_dep(&t, "afterok:999");
    check_job(&t, ghost, J(PENDING), "None");
    ck_assert_str_eq(job(&t, ghost).dependency, "");
    /* Refused: bad syntax. */
    submit_refused(&t, "afterlunch:1", C_INVALID, "Job dependency problem");
    submit_refused(&t, "afterok:1,,afterok:2", C_INVALID, "Job dependency problem");
    t_free(&t);
}
END_TEST

/* afternotok runs only on failure; '?' needs one; a chain of afterok runs in order. */
START_TEST(test_deps_failure_any_chain)
{
    struct t t;
    t_init(&t, true);
    uint64_t a = submit(&t, NULL);
    uint64_t b = submit(&t, NULL);
    char dep[96];
    snprintf(dep, sizeof(dep), "afternotok:%llu", (unsigned long long)a);
    uint64_t on_fail = submit_dep(&t, dep);
    snprintf(dep, sizeof(dep), "afterok:%llu", (unsigned long long)a);
    uint64_t on_ok = submit_dep(&t, dep);
    snprintf(dep, sizeof(dep), "afterok:%llu?afterok:%llu", (unsigned long long)a,
             (unsigned long long)b);
    uint64_t either = submit_dep(&t, dep);
    snprintf(dep, sizeof(dep), "afterok:%llu:%llu", (unsigned long long)a, (unsigned long long)b);
    uint64_t both = submit_dep(&t, dep);
    run_to_end(&t, a, 3);
    check_job(&t, a, J(FAILED), NULL);
    check_job(&t, on_fail, J(PENDING), "None");
    check_job(&t, on_ok, J(PENDING), "DependencyNeverSatisfied");
    check_job(&t, either, J(PENDING), "Dependency"); /* b may still succeed */
    check_job(&t, both, J(PENDING), "DependencyNeverSatisfied");
    run_to_end(&t, b, 0);
    check_job(&t, either, J(PENDING), "None");

    /* A chain: each link waits for the one before. */
    uint64_t chain[5];
    chain[0] = submit(&t, NULL);
    for (int i = 1; i < 5; i++) {
        snprintf(dep, sizeof(dep), "afterok:%llu", (unsigned long long)chain[i - 1]);
        chain[i] = submit_dep(&t, dep);
    }
    for (int i = 0; i < 5; i++) {
        for (int k = i + 1; k < 5; k++)
            check_job(&t, chain[k], J(PENDING), "Dependency");
        ck_assert(sched_places(&t, chain[i]));
        run_to_end(&t, chain[i], 0);
        check_job(&t, chain[i], J(COMPLETED), NULL);
    }
    /* A cancelled link fails the rest of an afterok chain, and kill-on-invalid cascades. */
    uint64_t k0 = submit(&t, NULL);
    snprintf(dep, sizeof(dep), "afterok:%llu", (unsigned long long)k0);
    struct job_opts ko = {.dependency = dep, .kill_invalid = true};
    uint64_t k1 = submit(&t, &ko);
    snprintf(dep, sizeof(dep), "afterok:%llu", (unsigned long long)k1);
    uint64_t k2 = submit(&t, &ko);
    snprintf(dep, sizeof(dep), "afterany:%llu", (unsigned long long)k2);
    uint64_t k3 = submit_dep(&t, dep);
    cancel(&t, k0);
    check_job(&t, k1, J(CANCELLED), "DependencyNeverSatisfied");
    check_job(&t, k2, J(CANCELLED), "DependencyNeverSatisfied");
    check_job(&t, k3, J(PENDING), "None");
    t_free(&t);
}
END_TEST

/* singleton: one job of a user and name placed at a time, the lowest id first. */
START_TEST(test_deps_singleton)
{
    struct t t;
    t_init(&t, true);
    struct job_opts o = {.name = "solo", .dependency = "singleton"};
    uint64_t s1 = submit(&t, &o);
    uint64_t s2 = submit(&t, &o);
    struct job_opts plain = {.name = "solo"};
    uint64_t p = submit(&t, &plain);
    check_job(&t, s1, J(PENDING), "None");
    ck_assert_str_eq(job(&t, s1).dependency, ""); /* nothing blocks it: Slurm's (null) */
    check_job(&t, s2, J(PENDING), "Dependency");
    ck_assert_str_eq(job(&t, s2).dependency, "singleton(unfulfilled)");
    ck_assert(sched_places(&t, s1));
    ck_assert(!sched_places(&t, s2));
    ck_assert(sched_places(&t, p)); /* not a singleton itself */
    allocate(&t, p, "n2", NULL);
    /* p of the same name runs: s1 waits too, and an allocation of it is skipped. */
    check_job(&t, s1, J(PENDING), "Dependency");
    allocate(&t, s1, "n1", NULL);
    check_job(&t, s1, J(PENDING), "Dependency");
    report(&t, &(struct rep){.id = p, .node = "n2", .attempt = 1, .never_ran = true});
    check_job(&t, s1, J(PENDING), "None");
    run_to_end(&t, s1, 0);
    check_job(&t, s2, J(PENDING), "None");
    ck_assert_str_eq(job(&t, s1).dependency, "");
    ck_assert(sched_places(&t, s2));
    t_free(&t);
}
END_TEST

/* Waiting dependencies survive a snapshot: a restored twin goes on in the same bytes. */
START_TEST(test_deps_snapshot)
{
    struct t t;
    t_init(&t, true);
    uint64_t a = submit(&t, NULL);
    uint64_t b = submit(&t, NULL);
    char dep[96];
    snprintf(dep, sizeof(dep), "afterok:%llu,afterany:%llu", (unsigned long long)a,
             (unsigned long long)b);
    uint64_t w = submit_dep(&t, dep);
    snprintf(dep, sizeof(dep), "afternotok:%llu?after:%llu", (unsigned long long)a,
             (unsigned long long)b);
    struct job_opts ko = {.dependency = dep, .kill_invalid = true, .name = "x"};
    uint64_t w2 = submit(&t, &ko);
    struct job_opts so = {.dependency = "singleton", .name = "x"};
    uint64_t w3 = submit(&t, &so);
    run_to_end(&t, b, 0); /* one entry of w met before the snapshot */

    uint8_t *snap;
    size_t n;
    snapshot(t.f, &snap, &n);
    struct t u = {.f = fsm_new(NULL), .now = t.now};
    ck_assert_ptr_nonnull(u.f);
    char err[256];
    ck_assert_msg(fsm_restore(u.f, snap, n, err, sizeof(err)) == FSM_OK, "%s", err);
    free(snap);
    ck_assert(fsm_drive_same(t.f, u.f));
    check_job(&u, w, J(PENDING), "Dependency");
    snprintf(dep, sizeof(dep), "afterok:%llu(unfulfilled)", (unsigned long long)a);
    ck_assert_str_eq(job(&u, w).dependency, dep);
    check_job(&u, w2, J(PENDING), "None");
    check_job(&u, w3, J(PENDING), "None");
    struct t *both[2] = {&t, &u};
    for (int i = 0; i < 2; i++) {
        both[i]->now += 1000;
        run_to_end(both[i], a, 0);
        check_job(both[i], w, J(PENDING), "None");
    }
    ck_assert(fsm_drive_same(t.f, u.f));
    t_free(&t);
    t_free(&u);
}
END_TEST

static Suite *fsm_run_suite(void)
{
    Suite *s = suite_create("fsm_run");
    check_case(s, "placement",
               (const TTest *[]){test_allocate_start_complete, test_allocation_skipped,
                                 test_submit_requeue_account, NULL});
    check_case(s, "reports",
               (const TTest *[]){test_report_outcomes, test_fast_path_and_parts,
                                 test_stale_and_duplicate, NULL});
    check_case(
        s, "launch",
        (const TTest *[]){test_launch_backoff_and_drain, test_launch_failure_not_node, NULL});
    check_case(s, "nodes", (const TTest *[]){test_not_responding, test_heartbeat_names, NULL});
    check_case(s, "cancel", (const TTest *[]){test_cancel_placed, test_pending_reasons, NULL});
    check_case(s, "state",
               (const TTest *[]){test_snapshot_every_state, test_events_only_when_enabled, NULL});
    check_case(s, "deps",
               (const TTest *[]){test_deps_parse, test_deps_lifecycle, test_deps_failure_any_chain,
                                 test_deps_singleton, test_deps_snapshot, NULL});
    TCase *tc = check_case(s, "random", (const TTest *[]){NULL});
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_random_lifecycle, 0, 4);
    return s;
}

int main(void)
{
    return check_run(fsm_run_suite());
}
