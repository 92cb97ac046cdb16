/*
 * test_fsm_acct.c - the accounting outbox of the replicated state machine
 * (raftd/fsm/fsm_acct.c; docs/state-machine.md "Accounting outbox").
 *
 * Pinned here: the records of a job's whole life (submit, start through JobsAllocated and
 * JobsStarted, completion) with the row's fields; a cancel of a pending job, a requeue
 * after a lost node, a node failure, a time limit, and both kinds of failed launch;
 * nothing recorded while accounting is off (and what was recorded stays when it is
 * turned off); AcctTrim partial, whole, beyond the end and replayed; the snapshot round
 * trip with the outbox byte for byte; a format 1 snapshot restores with an empty outbox;
 * a corrupt outbox (seq out of order, at or over the next seq, a record that does not
 * decode) is refused and leaves the state alone; fsm_acct_query's filters, limit and the
 * merge (a purged job answered from its outbox record, a held job from the state); and
 * two replicas of the same entries hold the same record bytes.
 */
#include "check_run.h"
#include "fsm.h"
#include "fsm_drive.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C_OK SPUR__API__CODE__CODE_OK
#define J(x) SPUR__API__JOB_STATE__JOB_##x

static char SCRIPT[] = "#!/bin/sh\ntrue\n";

struct t {
    struct fsm *f;
    uint64_t now;
};

/* ---- driving ---------------------------------------------------------------------------- */

static void run_ok(struct t *t, Spur__Fsm__Command *c)
{
    t->now += 1000;
    Spur__Api__Response *r = fsm_drive_apply(t->f, c, t->now);
    ck_assert_msg(r->code == C_OK, "code %d: %s", r->code, r->error);
    spur__api__response__free_unpacked(r, NULL);
}

static void settings(struct t *t, uint32_t retention_s, bool accounting)
{
    Spur__Fsm__SetSettings s = SPUR__FSM__SET_SETTINGS__INIT;
    s.finished_job_retention_s = retention_s;
    s.max_script_bytes = 1u << 20;
    s.accounting = accounting;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_SETTINGS;
    c.set_settings = &s;
    run_ok(t, &c);
}

static void register_node(struct t *t, const char *name)
{
    Spur__Api__RegisterNodeRequest q = SPUR__API__REGISTER_NODE_REQUEST__INIT;
    q.name = (char *)name;
    q.address = "10.0.0.1:6818";
    q.cpus = 8;
    q.mem_mb = 16000;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
    c.register_node = &q;
    run_ok(t, &c);
}

/* batch (ALL, default) and other (ALL); nodes n1, n2; accounting as given. */
static void t_init(struct t *t, bool accounting)
{
    t->f = fsm_new(NULL);
    ck_assert_ptr_nonnull(t->f);
    t->now = 1000000;
    Spur__Api__Partition p[2], *pp[2];
    for (int i = 0; i < 2; i++) {
        spur__api__partition__init(&p[i]);
        p[i].up = true;
        p[i].nodes_expr = "ALL";
        pp[i] = &p[i];
    }
    p[0].name = "batch";
    p[0].is_default = true;
    p[1].name = "other";
    Spur__Fsm__SetPartitions sp = SPUR__FSM__SET_PARTITIONS__INIT;
    sp.n_partitions = 2;
    sp.partitions = pp;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_PARTITIONS;
    c.set_partitions = &sp;
    run_ok(t, &c);
    register_node(t, "n1");
    register_node(t, "n2");
    settings(t, 86400, accounting);
}

static void t_free(struct t *t)
{
    fsm_free(t->f);
    t->f = NULL;
}

struct job_opts {
    const char *name;
    const char *user; /* "alice" when NULL */
    const char *partition;
    const char *account;
    uint32_t ntasks;
    uint32_t cpus_per_task;
    bool requeue;
};

static uint64_t submit(struct t *t, const struct job_opts *o)
{
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    s.script.data = (uint8_t *)SCRIPT;
    s.script.len = strlen(SCRIPT);
    s.name = (char *)(o && o->name ? o->name : "job");
    s.partition = (char *)(o && o->partition ? o->partition : "");
    s.account = (char *)(o && o->account ? o->account : "");
    s.workdir = "/home/w";
    s.ntasks = o ? o->ntasks : 0;
    s.cpus_per_task = o ? o->cpus_per_task : 0;
    s.requeue = o && o->requeue;
    s.mem_mb = 100;
    s.time_limit_min = 30;
    s.uid = 1001;
    s.gid = 100;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    c.user = (char *)(o && o->user ? o->user : "alice");
    t->now += 1000;
    Spur__Api__Response *r = fsm_drive_apply(t->f, &c, t->now);
    ck_assert_msg(r->code == C_OK, "submit: %s", r->error);
    ck_assert_int_eq(r->result_case, SPUR__API__RESPONSE__RESULT_SUBMIT_JOB);
    uint64_t id = r->submit_job->job_id;
    spur__api__response__free_unpacked(r, NULL);
    return id;
}

static void cancel(struct t *t, uint64_t id)
{
    Spur__Api__JobIdRequest q = SPUR__API__JOB_ID_REQUEST__INIT;
    q.job_id = id;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOB;
    c.cancel_job = &q;
    c.caller_operator = true; /* the jobs belong to uid 1001 */
    run_ok(t, &c);
}

/* Place and start in one step (JobStarted). */
static void start_direct(struct t *t, uint64_t id, const char *node)
{
    char *nodes[1] = {(char *)node};
    Spur__Fsm__JobStarted js = SPUR__FSM__JOB_STARTED__INIT;
    js.job_id = id;
    js.n_nodes = 1;
    js.nodes = nodes;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOB_STARTED;
    c.job_started = &js;
    run_ok(t, &c);
}

/* JobsAllocated on one node: CONFIGURING, attempt 1. */
static void allocate(struct t *t, uint64_t id, const char *node)
{
    char *nodes[1] = {(char *)node};
    Spur__Fsm__Allocation a = SPUR__FSM__ALLOCATION__INIT;
    a.job_id = id;
    a.n_nodes = 1;
    a.nodes = nodes;
    Spur__Fsm__Allocation *ap[1] = {&a};
    Spur__Fsm__JobsAllocated ja = SPUR__FSM__JOBS_ALLOCATED__INIT;
    ja.n_allocations = 1;
    ja.allocations = ap;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOBS_ALLOCATED;
    c.jobs_allocated = &ja;
    run_ok(t, &c);
}

static void started(struct t *t, uint64_t id, uint32_t attempt)
{
    Spur__Fsm__JobStart st = SPUR__FSM__JOB_START__INIT;
    st.job_id = id;
    st.attempt = attempt;
    Spur__Fsm__JobStart *sp[1] = {&st};
    Spur__Fsm__JobsStarted js = SPUR__FSM__JOBS_STARTED__INIT;
    js.n_starts = 1;
    js.starts = sp;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOBS_STARTED;
    c.jobs_started = &js;
    run_ok(t, &c);
}

static void report(struct t *t, uint64_t id, const char *node, int exit_code, bool timed_out)
{
    Spur__Fsm__JobCompleted jc = SPUR__FSM__JOB_COMPLETED__INIT;
    jc.job_id = id;
    jc.node = (char *)node;
    jc.exit_code = exit_code;
    jc.timed_out = timed_out;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOB_COMPLETED;
    c.job_completed = &jc;
    run_ok(t, &c);
}

static void launch_failed(struct t *t, uint64_t id, uint32_t attempt, const char *node,
                          bool node_fault)
{
    Spur__Fsm__JobLaunchFailed lf = SPUR__FSM__JOB_LAUNCH_FAILED__INIT;
    lf.job_id = id;
    lf.attempt = attempt;
    lf.node = (char *)node;
    lf.reason = "no spool";
    lf.node_fault = node_fault;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOB_LAUNCH_FAILED;
    c.job_launch_failed = &lf;
    run_ok(t, &c);
}

static void node_down(struct t *t, const char *name)
{
    Spur__Api__UpdateNodeRequest u = SPUR__API__UPDATE_NODE_REQUEST__INIT;
    u.name = (char *)name;
    u.state = "down";
    u.reason = "broken";
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_UPDATE_NODE;
    c.update_node = &u;
    run_ok(t, &c);
}

static void trim(struct t *t, uint64_t through)
{
    uint8_t *buf;
    size_t len;
    t->now += 1000;
    ck_assert_int_eq(fsm_encode_acct_trim(through, t->now, &buf, &len), FSM_OK);
    struct fsm_reply reply;
    ck_assert_int_eq(fsm_apply(t->f, fsm_last_applied(t->f) + 1, buf, len, &reply), FSM_OK);
    free(buf);
    ck_assert_ptr_nonnull(reply.resp);
    ck_assert_int_eq(reply.resp->code, C_OK);
    ck_assert_int_eq(reply.resp->result_case, SPUR__API__RESPONSE__RESULT_DONE);
    fsm_reply_clear(&reply);
}

static void tick(struct t *t, uint64_t advance_ms)
{
    uint8_t *buf;
    size_t len;
    t->now += advance_ms;
    ck_assert_int_eq(fsm_encode_tick(t->now, &buf, &len), FSM_OK);
    ck_assert_int_eq(fsm_apply(t->f, fsm_last_applied(t->f) + 1, buf, len, NULL), FSM_OK);
    free(buf);
}

/* ---- looking ---------------------------------------------------------------------------- */

static size_t nrecords(struct t *t)
{
    struct fsm_acct_stats st;
    fsm_acct_get_stats(t->f, &st);
    return st.records;
}

/* The i-th record (0: oldest) decoded; the caller frees it. */
static Spur__Fsm__AcctRecord *record_at(struct t *t, size_t i)
{
    struct fsm_acct_view v[64];
    size_t n = fsm_acct_records(t->f, 0, v, 64);
    ck_assert_uint_lt(i, n);
    Spur__Fsm__AcctRecord *r = spur__fsm__acct_record__unpack(NULL, v[i].len, v[i].bytes);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(r->job);
    ck_assert_uint_eq(r->seq, v[i].seq);
    ck_assert_uint_eq(r->time_ms, v[i].time_ms);
    ck_assert_uint_eq(r->job->last_seq, r->seq);
    return r;
}

/* The newest record: its event, job, state and reason. */
static void expect_last(struct t *t, uint32_t event, uint64_t job_id, int state, const char *reason)
{
    size_t n = nrecords(t);
    ck_assert_uint_gt(n, 0);
    Spur__Fsm__AcctRecord *r = record_at(t, n - 1);
    ck_assert_uint_eq(r->event, event);
    ck_assert_uint_eq(r->job->job_id, job_id);
    ck_assert_msg((int)r->job->state == state, "state %d, want %d", r->job->state, state);
    ck_assert_uint_eq(r->time_ms, fsm_log_time_ms(t->f));
    if (reason != NULL)
        ck_assert_str_eq(r->job->reason, reason);
    spur__fsm__acct_record__free_unpacked(r, NULL);
}

static void snap(struct fsm *f, uint8_t **b, size_t *n)
{
    ck_assert_int_eq(fsm_snapshot(f, b, n), FSM_OK);
}

/* ---- the records of a job's life --------------------------------------------------------- */

START_TEST(test_whole_life)
{
    struct t t;
    t_init(&t, true);
    struct job_opts o = {.name = "sim", .account = "physics", .ntasks = 2, .cpus_per_task = 3};
    uint64_t id = submit(&t, &o);
    uint64_t submit_ms = t.now;
    ck_assert_uint_eq(nrecords(&t), 1);
    Spur__Fsm__AcctRecord *r = record_at(&t, 0);
    ck_assert_uint_eq(r->seq, 1);
    ck_assert_uint_eq(r->event, FSM_ACCT_SUBMIT);
    ck_assert_uint_eq(r->time_ms, submit_ms);
    const Spur__Api__AcctJob *j = r->job;
    ck_assert_uint_eq(j->job_id, id);
    ck_assert_str_eq(j->name, "sim");
    ck_assert_str_eq(j->user, "alice");
    ck_assert_uint_eq(j->uid, 1001);
    ck_assert_uint_eq(j->gid, 100);
    ck_assert_str_eq(j->account, "physics");
    ck_assert_str_eq(j->partition, "batch");
    ck_assert_int_eq(j->state, J(PENDING));
    ck_assert_str_eq(j->reason, "None"); /* it fits: about to start */
    ck_assert_uint_eq(j->nnodes, 1);
    ck_assert_uint_eq(j->n_node_list, 0);
    ck_assert_uint_eq(j->cpus, 6);
    ck_assert_uint_eq(j->mem_mb, 100);
    ck_assert_uint_eq(j->time_limit_min, 30);
    ck_assert_uint_eq(j->submit_time_ms, submit_ms);
    ck_assert_uint_eq(j->eligible_time_ms, submit_ms);
    ck_assert_uint_eq(j->start_time_ms, 0);
    ck_assert_uint_eq(j->end_time_ms, 0);
    ck_assert_str_eq(j->workdir, "/home/w");
    ck_assert_str_eq(j->dependency, "");
    spur__fsm__acct_record__free_unpacked(r, NULL);

    /* CONFIGURING is not an accounting event; RUNNING is. */
    allocate(&t, id, "n2");
    ck_assert_uint_eq(nrecords(&t), 1);
    started(&t, id, 1);
    ck_assert_uint_eq(nrecords(&t), 2);
    expect_last(&t, FSM_ACCT_START, id, J(RUNNING), "None");
    r = record_at(&t, 1);
    ck_assert_uint_eq(r->seq, 2);
    ck_assert_uint_eq(r->job->start_time_ms, t.now);
    ck_assert_uint_eq(r->job->n_node_list, 1);
    ck_assert_str_eq(r->job->node_list[0], "n2");
    ck_assert_uint_eq(r->job->nnodes, 1);
    ck_assert_uint_eq(r->job->cpus, 6);
    spur__fsm__acct_record__free_unpacked(r, NULL);

    report(&t, id, "n2", 0, false);
    ck_assert_uint_eq(nrecords(&t), 3);
    expect_last(&t, FSM_ACCT_END, id, J(COMPLETED), "None");
    r = record_at(&t, 2);
    ck_assert_uint_eq(r->job->end_time_ms, t.now);
    ck_assert_uint_eq(r->job->exit_code, 0);
    ck_assert_str_eq(r->job->node_list[0], "n2");
    spur__fsm__acct_record__free_unpacked(r, NULL);

    struct fsm_acct_stats st;
    fsm_acct_get_stats(t.f, &st);
    ck_assert(st.enabled);
    ck_assert_uint_eq(st.first_seq, 1);
    ck_assert_uint_eq(st.last_seq, 3);
    ck_assert_uint_eq(st.next_seq, 4);
    ck_assert_uint_eq(st.oldest_ms, submit_ms);
    struct fsm_acct_view v[4];
    ck_assert_uint_eq(fsm_acct_records(t.f, 0, v, 4), 3);
    ck_assert_uint_eq(st.bytes, v[0].len + v[1].len + v[2].len);
    /* after and max. */
    ck_assert_uint_eq(fsm_acct_records(t.f, 1, v, 4), 2);
    ck_assert_uint_eq(v[0].seq, 2);
    ck_assert_uint_eq(fsm_acct_records(t.f, 0, v, 1), 1);
    ck_assert_uint_eq(v[0].seq, 1);
    ck_assert_uint_eq(fsm_acct_records(t.f, 3, v, 4), 0);
    t_free(&t);
}
END_TEST

START_TEST(test_failed_exit_and_direct_start)
{
    struct t t;
    t_init(&t, true);
    uint64_t id = submit(&t, NULL);
    start_direct(&t, id, "n1"); /* JobStarted: placed and RUNNING at once */
    expect_last(&t, FSM_ACCT_START, id, J(RUNNING), NULL);
    report(&t, id, "n1", 3, false);
    expect_last(&t, FSM_ACCT_END, id, J(FAILED), "NonZeroExitCode");
    Spur__Fsm__AcctRecord *r = record_at(&t, 2);
    ck_assert_int_eq(r->job->exit_code, 3);
    spur__fsm__acct_record__free_unpacked(r, NULL);
    ck_assert_uint_eq(nrecords(&t), 3);
    t_free(&t);
}
END_TEST

START_TEST(test_cancel_pending)
{
    struct t t;
    t_init(&t, true);
    uint64_t id = submit(&t, NULL);
    cancel(&t, id);
    ck_assert_uint_eq(nrecords(&t), 2);
    expect_last(&t, FSM_ACCT_END, id, J(CANCELLED), "None");
    Spur__Fsm__AcctRecord *r = record_at(&t, 1);
    ck_assert_uint_eq(r->job->end_time_ms, t.now);
    ck_assert_uint_eq(r->job->start_time_ms, 0);
    spur__fsm__acct_record__free_unpacked(r, NULL);
    t_free(&t);
}
END_TEST

START_TEST(test_cancel_running)
{
    struct t t;
    t_init(&t, true);
    uint64_t id = submit(&t, NULL);
    start_direct(&t, id, "n1");
    cancel(&t, id); /* COMPLETING: not an accounting event */
    ck_assert_uint_eq(nrecords(&t), 2);
    report(&t, id, "n1", 0, false);
    ck_assert_uint_eq(nrecords(&t), 3);
    expect_last(&t, FSM_ACCT_END, id, J(CANCELLED), NULL);
    t_free(&t);
}
END_TEST

START_TEST(test_requeue_and_node_fail)
{
    struct t t;
    t_init(&t, true);
    struct job_opts rq = {.requeue = true};
    uint64_t a = submit(&t, &rq);
    uint64_t b = submit(&t, NULL);
    start_direct(&t, a, "n1");
    start_direct(&t, b, "n1");
    ck_assert_uint_eq(nrecords(&t), 4);
    node_down(&t, "n1");
    /* a goes back to the queue, b ends NODE_FAIL, in id order. */
    ck_assert_uint_eq(nrecords(&t), 6);
    Spur__Fsm__AcctRecord *r = record_at(&t, 4);
    ck_assert_uint_eq(r->event, FSM_ACCT_REQUEUE);
    ck_assert_uint_eq(r->job->job_id, a);
    ck_assert_int_eq(r->job->state, J(PENDING));
    ck_assert_uint_eq(r->job->restarts, 1);
    ck_assert_uint_eq(r->job->n_node_list, 0);
    ck_assert_uint_eq(r->job->start_time_ms, 0);
    spur__fsm__acct_record__free_unpacked(r, NULL);
    expect_last(&t, FSM_ACCT_END, b, J(NODE_FAIL), "NodeFail");
    /* The requeued job runs again elsewhere and completes: start, end. */
    start_direct(&t, a, "n2");
    expect_last(&t, FSM_ACCT_START, a, J(RUNNING), NULL);
    report(&t, a, "n2", 0, false);
    expect_last(&t, FSM_ACCT_END, a, J(COMPLETED), NULL);
    r = record_at(&t, 7);
    ck_assert_uint_eq(r->job->restarts, 1);
    ck_assert_str_eq(r->job->node_list[0], "n2");
    spur__fsm__acct_record__free_unpacked(r, NULL);
    t_free(&t);
}
END_TEST

START_TEST(test_timeout)
{
    struct t t;
    t_init(&t, true);
    uint64_t id = submit(&t, NULL);
    start_direct(&t, id, "n1");
    report(&t, id, "n1", 0, true);
    expect_last(&t, FSM_ACCT_END, id, J(TIMEOUT), "TimeLimit");
    ck_assert_uint_eq(nrecords(&t), 3);
    t_free(&t);
}
END_TEST

START_TEST(test_launch_failure)
{
    struct t t;
    t_init(&t, true);
    /* The node's fault: back to the queue with a back-off. */
    uint64_t a = submit(&t, NULL);
    allocate(&t, a, "n1");
    launch_failed(&t, a, 1, "n1", true);
    ck_assert_uint_eq(nrecords(&t), 2);
    expect_last(&t, FSM_ACCT_REQUEUE, a, J(PENDING), "BeginTime");
    /* The job's fault: it ends FAILED. */
    uint64_t b = submit(&t, NULL);
    allocate(&t, b, "n2");
    launch_failed(&t, b, 1, "n2", false);
    ck_assert_uint_eq(nrecords(&t), 4);
    expect_last(&t, FSM_ACCT_END, b, J(FAILED), "JobLaunchFailure");
    t_free(&t);
}
END_TEST

START_TEST(test_off_records_nothing)
{
    struct t t;
    t_init(&t, false);
    uint64_t id = submit(&t, NULL);
    start_direct(&t, id, "n1");
    report(&t, id, "n1", 0, false);
    cancel(&t, submit(&t, NULL));
    struct fsm_acct_stats st;
    fsm_acct_get_stats(t.f, &st);
    ck_assert(!st.enabled);
    ck_assert_uint_eq(st.records, 0);
    ck_assert_uint_eq(st.bytes, 0);
    ck_assert_uint_eq(st.first_seq, 0);
    ck_assert_uint_eq(st.oldest_ms, 0);
    ck_assert_uint_eq(st.next_seq, 1);

    /* fsm_settings_differ() sees the setting; on, then off: the records stay. */
    struct fsm_settings_conf conf = {
        .finished_job_retention_s = 86400, .max_script_bytes = 1u << 20, .accounting = false};
    ck_assert(!fsm_settings_differ(t.f, &conf));
    conf.accounting = true;
    ck_assert(fsm_settings_differ(t.f, &conf));
    uint8_t *buf;
    size_t len;
    t.now += 1000;
    ck_assert_int_eq(fsm_encode_set_settings(&conf, t.now, &buf, &len), FSM_OK);
    ck_assert_int_eq(fsm_apply(t.f, fsm_last_applied(t.f) + 1, buf, len, NULL), FSM_OK);
    free(buf);
    ck_assert(!fsm_settings_differ(t.f, &conf));
    submit(&t, NULL);
    ck_assert_uint_eq(nrecords(&t), 1);
    settings(&t, 86400, false);
    submit(&t, NULL);
    fsm_acct_get_stats(t.f, &st);
    ck_assert(!st.enabled);
    ck_assert_uint_eq(st.records, 1);
    ck_assert_uint_eq(st.next_seq, 2);
    t_free(&t);
}
END_TEST

/* A version 2 SetSettings (written before accounting) leaves it off. */
START_TEST(test_v2_settings_leave_it_off)
{
    struct t t;
    t_init(&t, false);
    Spur__Fsm__SetSettings s = SPUR__FSM__SET_SETTINGS__INIT;
    s.finished_job_retention_s = 100;
    s.max_script_bytes = 1000;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.version = 2;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_SETTINGS;
    c.set_settings = &s;
    run_ok(&t, &c);
    submit(&t, NULL);
    ck_assert_uint_eq(nrecords(&t), 0);
    struct fsm_stats fs;
    fsm_stats(t.f, &fs);
    ck_assert_uint_eq(fs.finished_job_retention_s, 100);
    t_free(&t);
}
END_TEST

START_TEST(test_trim)
{
    struct t t;
    t_init(&t, true);
    for (int i = 0; i < 5; i++)
        submit(&t, NULL);
    ck_assert_uint_eq(nrecords(&t), 5);
    trim(&t, 2);
    struct fsm_acct_stats st;
    fsm_acct_get_stats(t.f, &st);
    ck_assert_uint_eq(st.records, 3);
    ck_assert_uint_eq(st.first_seq, 3);
    ck_assert_uint_eq(st.last_seq, 5);
    struct fsm_acct_view v[8];
    ck_assert_uint_eq(fsm_acct_records(t.f, 0, v, 8), 3);
    ck_assert_uint_eq(v[0].seq, 3);
    ck_assert_uint_eq(st.bytes, v[0].len + v[1].len + v[2].len);

    /* Replayed (a new leader trims what is already gone): nothing changes but the index
     * and the clock, exactly as a Tick. */
    struct t u;
    uint8_t *s1, *s2;
    size_t n1, n2;
    snap(t.f, &s1, &n1);
    u.f = fsm_new(NULL);
    char err[FSM_ERR_MAX];
    ck_assert_int_eq(fsm_restore(u.f, s1, n1, err, sizeof(err)), FSM_OK);
    u.now = t.now;
    trim(&t, 2);
    trim(&t, 1);
    tick(&u, 1000);
    tick(&u, 1000);
    free(s1);
    snap(t.f, &s2, &n2);
    uint8_t *s3;
    size_t n3;
    snap(u.f, &s3, &n3);
    ck_assert_uint_eq(n2, n3);
    ck_assert(memcmp(s2, s3, n2) == 0);
    free(s2);
    free(s3);
    fsm_free(u.f);

    /* Beyond the end: everything goes, the counter stays. */
    trim(&t, 1000);
    fsm_acct_get_stats(t.f, &st);
    ck_assert_uint_eq(st.records, 0);
    ck_assert_uint_eq(st.bytes, 0);
    ck_assert_uint_eq(st.first_seq, 0);
    ck_assert_uint_eq(st.next_seq, 6);
    submit(&t, NULL);
    fsm_acct_get_stats(t.f, &st);
    ck_assert_uint_eq(st.first_seq, 6);
    /* All, exactly. */
    submit(&t, NULL);
    trim(&t, 7);
    ck_assert_uint_eq(nrecords(&t), 0);
    t_free(&t);
}
END_TEST

/* Many records, trimmed in steps while more arrive: the ring keeps order and counts. */
START_TEST(test_trim_churn)
{
    struct t t;
    t_init(&t, true);
    uint64_t trimmed = 0;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 7; i++)
            cancel(&t, submit(&t, NULL));
        struct fsm_acct_stats st;
        fsm_acct_get_stats(t.f, &st);
        trimmed = st.last_seq - (uint64_t)(round % 5);
        trim(&t, trimmed);
        fsm_acct_get_stats(t.f, &st);
        ck_assert_uint_eq(st.records, (uint64_t)(round % 5));
        struct fsm_acct_view v[8];
        size_t n = fsm_acct_records(t.f, 0, v, 8);
        ck_assert_uint_eq(n, st.records);
        size_t bytes = 0;
        for (size_t k = 0; k < n; k++) {
            ck_assert_uint_eq(v[k].seq, trimmed + 1 + k);
            bytes += v[k].len;
        }
        ck_assert_uint_eq(bytes, st.bytes);
    }
    t_free(&t);
}
END_TEST

/* ---- snapshots --------------------------------------------------------------------------- */

/* A state with jobs in several states and an outbox of 8 records, the first 2 trimmed. */
static void build_outbox(struct t *t)
{
    t_init(t, true);
    uint64_t a = submit(t, NULL);
    uint64_t b = submit(t, NULL);
    uint64_t c = submit(t, NULL);
    start_direct(t, a, "n1");
    start_direct(t, b, "n2");
    report(t, b, "n2", 1, false);
    cancel(t, c);
    trim(t, 2);
    submit(t, NULL);
}

START_TEST(test_snapshot_roundtrip)
{
    struct t t;
    build_outbox(&t);
    struct fsm_acct_stats st;
    fsm_acct_get_stats(t.f, &st);
    ck_assert_uint_eq(st.records, 6);
    uint8_t *s1;
    size_t n1;
    snap(t.f, &s1, &n1);
    struct fsm *g = fsm_new(NULL);
    char err[FSM_ERR_MAX];
    ck_assert_int_eq(fsm_restore(g, s1, n1, err, sizeof(err)), FSM_OK);
    uint8_t *s2;
    size_t n2;
    snap(g, &s2, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(memcmp(s1, s2, n1) == 0);
    struct fsm_acct_stats gs;
    fsm_acct_get_stats(g, &gs);
    ck_assert_mem_eq(&st, &gs, sizeof(st));
    struct fsm_acct_view v1[8], v2[8];
    ck_assert_uint_eq(fsm_acct_records(t.f, 0, v1, 8), 6);
    ck_assert_uint_eq(fsm_acct_records(g, 0, v2, 8), 6);
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(v1[i].len, v2[i].len);
        ck_assert(memcmp(v1[i].bytes, v2[i].bytes, v1[i].len) == 0);
    }
    /* The header says what is in force. */
    ck_assert_uint_gt(s1[1], 0);
    Spur__Fsm__Snapshot *whole = spur__fsm__snapshot__unpack(NULL, n1, s1);
    ck_assert_ptr_nonnull(whole);
    ck_assert_uint_eq(whole->n_acct, 6);
    ck_assert_uint_eq(whole->acct[0]->seq, 3);
    ck_assert_ptr_nonnull(whole->header);
    ck_assert_uint_eq(whole->header->format_version, FSM_SNAPSHOT_VERSION);
    ck_assert(whole->header->accounting);
    ck_assert_uint_eq(whole->header->next_acct_seq, 9);
    spur__fsm__snapshot__free_unpacked(whole, NULL);
    /* Both go on alike: the next record is 9 on each. */
    struct t u = {.f = g, .now = t.now};
    submit(&t, NULL);
    submit(&u, NULL);
    fsm_acct_get_stats(g, &gs);
    ck_assert_uint_eq(gs.last_seq, 9);
    ck_assert(fsm_drive_same(t.f, g));
    free(s1);
    free(s2);
    fsm_free(g);
    t_free(&t);
}
END_TEST

/* Top-level records of a snapshot: (field, bytes) in order. */
struct rec {
    uint32_t field;
    const uint8_t *p;
    size_t len;
};

static uint64_t varint(const uint8_t *p, size_t *pos)
{
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
}

static size_t split(const uint8_t *p, size_t len, struct rec *out, size_t max)
{
    size_t pos = 0, n = 0;
    while (pos < len && n < max) {
        uint64_t tag = varint(p, &pos);
        uint64_t l = varint(p, &pos);
        ck_assert_uint_eq(tag & 7, 2);
        out[n++] = (struct rec){(uint32_t)(tag >> 3), p + pos, (size_t)l};
        pos += l;
    }
    ck_assert_uint_eq(pos, len);
    return n;
}

struct out {
    uint8_t *p;
    size_t len;
};

static void put_varint(struct out *o, uint64_t v)
{
    while (v >= 0x80) {
        o->p[o->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    o->p[o->len++] = (uint8_t)v;
}

static void put(struct out *o, uint32_t field, const uint8_t *p, size_t len)
{
    put_varint(o, ((uint64_t)field << 3) | 2);
    put_varint(o, len);
    memcpy(o->p + o->len, p, len);
    o->len += len;
}

/* The snapshot's header with these format fields, packed into buf. */
static size_t header_with(const struct rec *h, uint8_t *buf, uint32_t format, bool accounting,
                          uint64_t next_acct_seq)
{
    Spur__Fsm__SnapshotHeader *hd = spur__fsm__snapshot_header__unpack(NULL, h->len, h->p);
    ck_assert_ptr_nonnull(hd);
    hd->format_version = format;
    hd->accounting = accounting;
    hd->next_acct_seq = next_acct_seq;
    size_t n = spur__fsm__snapshot_header__pack(hd, buf);
    spur__fsm__snapshot_header__free_unpacked(hd, NULL);
    return n;
}

START_TEST(test_restore_format1)
{
    /* A build of format 1 wrote no outbox and no accounting fields. */
    struct t t;
    t_init(&t, false);
    uint64_t id = submit(&t, NULL);
    start_direct(&t, id, "n1");
    uint8_t *s;
    size_t n;
    snap(t.f, &s, &n);
    struct rec r[32];
    size_t nr = split(s, n, r, 32);
    ck_assert_uint_eq(r[0].field, 1);
    struct out o = {malloc(n + 64), 0};
    uint8_t hb[4096];
    size_t hl = header_with(&r[0], hb, 1, false, 0);
    put(&o, 1, hb, hl);
    for (size_t i = 1; i < nr; i++)
        put(&o, r[i].field, r[i].p, r[i].len);

    struct t u;
    t_init(&u, true); /* accounting on, one record: the restore replaces it all */
    submit(&u, NULL);
    char err[FSM_ERR_MAX];
    ck_assert_int_eq(fsm_restore(u.f, o.p, o.len, err, sizeof(err)), FSM_OK);
    struct fsm_acct_stats st;
    fsm_acct_get_stats(u.f, &st);
    ck_assert(!st.enabled);
    ck_assert_uint_eq(st.records, 0);
    ck_assert_uint_eq(st.next_seq, 1);
    /* Everything else came through: it writes the state's format 2 bytes. */
    ck_assert(fsm_drive_same(t.f, u.f));
    /* A format 2 snapshot with next_acct_seq 0 reads it as 1. */
    o.len = 0;
    hl = header_with(&r[0], hb, 2, false, 0);
    put(&o, 1, hb, hl);
    for (size_t i = 1; i < nr; i++)
        put(&o, r[i].field, r[i].p, r[i].len);
    ck_assert_int_eq(fsm_restore(u.f, o.p, o.len, err, sizeof(err)), FSM_OK);
    fsm_acct_get_stats(u.f, &st);
    ck_assert_uint_eq(st.next_seq, 1);
    free(o.p);
    free(s);
    t_free(&u);
    t_free(&t);
}
END_TEST

/* Restore must fail with err holding want, and leave f as it was. */
static void expect_refused(struct fsm *f, const struct out *o, const char *want)
{
    uint8_t *before, *after;
    size_t nb, na;
    snap(f, &before, &nb);
    char err[FSM_ERR_MAX] = "";
    ck_assert_int_eq(fsm_restore(f, o->p, o->len, err, sizeof(err)), FSM_EINVAL);
    ck_assert_msg(strstr(err, want) != NULL, "error \"%s\" lacks \"%s\"", err, want);
    ck_assert_msg(strncmp(err, "snapshot: ", 10) == 0, "%s", err);
    snap(f, &after, &na);
    ck_assert_uint_eq(nb, na);
    ck_assert(memcmp(before, after, nb) == 0);
    free(before);
    free(after);
}

START_TEST(test_restore_corrupt_outbox)
{
    struct t t;
    build_outbox(&t);
    uint8_t *s;
    size_t n;
    snap(t.f, &s, &n);
    struct rec r[64];
    size_t nr = split(s, n, r, 64);
    size_t first_acct = 0;
    while (first_acct < nr && r[first_acct].field != 5)
        first_acct++;
    ck_assert_uint_eq(nr - first_acct, 6);
    struct out o = {malloc(n + 256), 0};
    uint8_t hb[4096];

    struct t victim;
    t_init(&victim, true);
    submit(&victim, NULL);

    /* Two records swapped: seq out of order. */
    for (size_t i = 0; i < nr; i++) {
        size_t k = i == first_acct ? i + 1 : i == first_acct + 1 ? first_acct : i;
        put(&o, r[k].field, r[k].p, r[k].len);
    }
    expect_refused(victim.f, &o, "out of order");

    /* A record repeated. */
    o.len = 0;
    for (size_t i = 0; i < nr; i++) {
        put(&o, r[i].field, r[i].p, r[i].len);
        if (i == first_acct)
            put(&o, r[i].field, r[i].p, r[i].len);
    }
    expect_refused(victim.f, &o, "out of order");

    /* A record at the next seq the header announces. */
    o.len = 0;
    size_t hl = header_with(&r[0], hb, 2, true, 8);
    put(&o, 1, hb, hl);
    for (size_t i = 1; i < nr; i++)
        put(&o, r[i].field, r[i].p, r[i].len);
    expect_refused(victim.f, &o, "not below the next seq 8");

    /* A record that does not decode. */
    o.len = 0;
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    for (size_t i = 0; i < nr; i++) {
        if (i == first_acct + 2)
            put(&o, 5, junk, sizeof(junk));
        else
            put(&o, r[i].field, r[i].p, r[i].len);
    }
    expect_refused(victim.f, &o, "does not decode");

    /* A record whose row is of another seq. */
    Spur__Fsm__AcctRecord *ar =
        spur__fsm__acct_record__unpack(NULL, r[first_acct].len, r[first_acct].p);
    ck_assert_ptr_nonnull(ar);
    ar->job->last_seq = ar->seq + 1;
    uint8_t rb[4096];
    size_t rl = spur__fsm__acct_record__pack(ar, rb);
    ar->job->last_seq = ar->seq;
    ar->event = 9;
    uint8_t eb[4096];
    size_t el = spur__fsm__acct_record__pack(ar, eb);
    spur__fsm__acct_record__free_unpacked(ar, NULL);
    o.len = 0;
    for (size_t i = 0; i < nr; i++)
        if (i == first_acct)
            put(&o, 5, rb, rl);
        else
            put(&o, r[i].field, r[i].p, r[i].len);
    expect_refused(victim.f, &o, "another seq");
    /* An event this build does not know. */
    o.len = 0;
    for (size_t i = 0; i < nr; i++)
        if (i == first_acct)
            put(&o, 5, eb, el);
        else
            put(&o, r[i].field, r[i].p, r[i].len);
    expect_refused(victim.f, &o, "event 9");

    /* Outbox records in a format 1 snapshot. */
    o.len = 0;
    hl = header_with(&r[0], hb, 1, false, 0);
    put(&o, 1, hb, hl);
    for (size_t i = 1; i < nr; i++)
        put(&o, r[i].field, r[i].p, r[i].len);
    expect_refused(victim.f, &o, "format 1");

    /* An outbox record before the jobs. */
    o.len = 0;
    for (size_t i = 0; i < first_acct; i++) {
        if (r[i].field == 4 && (i == 0 || r[i - 1].field != 4))
            put(&o, 5, r[first_acct].p, r[first_acct].len);
        put(&o, r[i].field, r[i].p, r[i].len);
    }
    expect_refused(victim.f, &o, "out of order");

    /* The untouched bytes still restore. */
    char err[FSM_ERR_MAX];
    ck_assert_int_eq(fsm_restore(victim.f, s, n, err, sizeof(err)), FSM_OK);
    ck_assert(fsm_drive_same(t.f, victim.f));
    free(o.p);
    free(s);
    t_free(&victim);
    t_free(&t);
}
END_TEST

/* ---- sacct from the state ---------------------------------------------------------------- */

static void query(struct t *t, const Spur__Api__AcctQueryRequest *q, struct fsm_acct_result *res)
{
    ck_assert_int_eq(fsm_acct_query(t->f, q, res), FSM_OK);
    for (size_t i = 1; i < res->n; i++)
        ck_assert_uint_lt(res->jobs[i - 1]->job_id, res->jobs[i]->job_id);
}

/* The ids answered, as a string "1,3,4" (buf). */
static const char *ids_of(const struct fsm_acct_result *res, char *buf, size_t len)
{
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < res->n; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? "," : "",
                                 (unsigned long long)res->jobs[i]->job_id);
    return buf;
}

static const char *answer(struct t *t, const Spur__Api__AcctQueryRequest *q, bool *truncated)
{
    static char buf[256];
    struct fsm_acct_result res;
    query(t, q, &res);
    ids_of(&res, buf, sizeof(buf));
    if (truncated != NULL)
        *truncated = res.truncated;
    fsm_acct_result_free(&res);
    return buf;
}

START_TEST(test_query_filters_and_merge)
{
    struct t t;
    t_init(&t, true);
    settings(&t, 60, true); /* finished jobs purged a minute after they end */
    struct job_opts bob = {.user = "bob", .name = "sim", .account = "physics"};
    struct job_opts other = {.partition = "other", .name = "post"};
    uint64_t j1 = submit(&t, NULL);   /* alice, batch: completes, purged */
    uint64_t j2 = submit(&t, &bob);   /* bob: cancelled, purged, trimmed */
    uint64_t j3 = submit(&t, &other); /* alice, other: runs */
    uint64_t j4 = submit(&t, NULL);   /* alice: pending */
    start_direct(&t, j1, "n1");
    report(&t, j1, "n1", 0, false);
    uint64_t j1_end = t.now;
    cancel(&t, j2);
    start_direct(&t, j3, "n2");
    tick(&t, 120000); /* j1 and j2 are purged; their records stay */
    struct fsm_stats fs;
    fsm_stats(t.f, &fs);
    ck_assert_uint_eq(fs.jobs, 2);
    ck_assert_uint_eq(fs.purged_jobs, 2);
    uint64_t j5 = submit(&t, &bob); /* bob: pending, after the purge */

    Spur__Api__AcctQueryRequest q = SPUR__API__ACCT_QUERY_REQUEST__INIT;
    ck_assert_str_eq(answer(&t, &q, NULL), "1,2,3,4,5");
    ck_assert_str_eq(answer(&t, NULL, NULL), "1,2,3,4,5");

    /* The purged job is answered from its newest record. */
    struct fsm_acct_result res;
    query(&t, &q, &res);
    ck_assert_uint_eq(res.n, 5);
    ck_assert(!res.truncated);
    ck_assert_int_eq(res.jobs[0]->state, J(COMPLETED));
    ck_assert_uint_eq(res.jobs[0]->end_time_ms, j1_end);
    ck_assert_uint_ne(res.jobs[0]->last_seq, 0);
    ck_assert_str_eq(res.jobs[0]->node_list[0], "n1");
    ck_assert_int_eq(res.jobs[1]->state, J(CANCELLED));
    ck_assert_int_eq(res.jobs[2]->state, J(RUNNING));
    ck_assert_str_eq(res.jobs[2]->partition, "other");
    ck_assert_int_eq(res.jobs[3]->state, J(PENDING));
    ck_assert_str_eq(res.jobs[4]->user, "bob");
    ck_assert_str_eq(res.jobs[4]->account, "physics");
    fsm_acct_result_free(&res);
    ck_assert_ptr_null(res.jobs);

    /* Filters: each given must hold; OR within one. */
    char *bob_only[] = {"bob"};
    q.n_users = 1;
    q.users = bob_only;
    ck_assert_str_eq(answer(&t, &q, NULL), "2,5");
    q.n_users = 0;
    Spur__Api__JobState st[2] = {J(PENDING), J(COMPLETED)};
    q.n_states = 2;
    q.states = st;
    ck_assert_str_eq(answer(&t, &q, NULL), "1,4,5");
    q.n_users = 1;
    ck_assert_str_eq(answer(&t, &q, NULL), "5");
    q.n_users = 0;
    q.n_states = 0;
    char *parts[] = {"other"};
    q.n_partitions = 1;
    q.partitions = parts;
    ck_assert_str_eq(answer(&t, &q, NULL), "3");
    q.n_partitions = 0;
    char *accts[] = {"physics"};
    q.n_accounts = 1;
    q.accounts = accts;
    ck_assert_str_eq(answer(&t, &q, NULL), "2,5");
    q.n_accounts = 0;
    char *names[] = {"post", "sim"};
    q.n_names = 2;
    q.names = names;
    ck_assert_str_eq(answer(&t, &q, NULL), "2,3,5");
    q.n_names = 0;
    uint64_t ids[] = {j5, j1, 99, j1};
    q.n_job_ids = 4;
    q.job_ids = ids;
    ck_assert_str_eq(answer(&t, &q, NULL), "1,5");
    q.n_job_ids = 0;
    /* -S: not ended before; -E: submitted before. */
    q.start_ms = j1_end + 1;
    ck_assert_str_eq(answer(&t, &q, NULL), "2,3,4,5");
    q.start_ms = 0;
    q.end_ms = j1_end; /* j1..j4 were submitted before it, j5 after */
    ck_assert_str_eq(answer(&t, &q, NULL), "1,2,3,4");
    q.end_ms = 0;
    /* A limit. */
    bool truncated = false;
    q.limit = 3;
    ck_assert_str_eq(answer(&t, &q, &truncated), "1,2,3");
    ck_assert(truncated);
    q.limit = 5;
    ck_assert_str_eq(answer(&t, &q, &truncated), "1,2,3,4,5");
    ck_assert(!truncated);
    q.limit = 0;

    /* Once exported (trimmed), a purged job is the database's to answer. */
    struct fsm_acct_stats as;
    fsm_acct_get_stats(t.f, &as);
    trim(&t, as.last_seq);
    ck_assert_str_eq(answer(&t, &q, NULL), "3,4,5");
    (void)j4;
    t_free(&t);
}
END_TEST

/* The newest record of a purged job wins over its older ones. */
START_TEST(test_query_newest_record)
{
    struct t t;
    t_init(&t, true);
    settings(&t, 10, true);
    uint64_t a = submit(&t, NULL);
    start_direct(&t, a, "n1");
    report(&t, a, "n1", 2, false);
    tick(&t, 60000);
    ck_assert_uint_eq(nrecords(&t), 3);
    struct fsm_acct_result res;
    query(&t, NULL, &res);
    ck_assert_uint_eq(res.n, 1);
    ck_assert_int_eq(res.jobs[0]->state, J(FAILED));
    ck_assert_int_eq(res.jobs[0]->exit_code, 2);
    ck_assert_uint_eq(res.jobs[0]->last_seq, 3);
    fsm_acct_result_free(&res);
    /* With accounting off and nothing recorded, only the held jobs. */
    t_free(&t);
    t_init(&t, false);
    submit(&t, NULL);
    query(&t, NULL, &res);
    ck_assert_uint_eq(res.n, 1);
    ck_assert_uint_eq(res.jobs[0]->last_seq, 0);
    fsm_acct_result_free(&res);
    t_free(&t);
}
END_TEST

/* Jobs that wait for resources: the first Resources, the ones after it Priority. */
START_TEST(test_pending_reasons)
{
    struct t t;
    t_init(&t, true);
    struct job_opts big = {.ntasks = 1, .cpus_per_task = 8};
    uint64_t a = submit(&t, &big);
    start_direct(&t, a, "n1");
    uint64_t b = submit(&t, &big);
    start_direct(&t, b, "n2"); /* both nodes full */
    uint64_t c = submit(&t, &big);
    expect_last(&t, FSM_ACCT_SUBMIT, c, J(PENDING), "Resources");
    uint64_t d = submit(&t, &big);
    expect_last(&t, FSM_ACCT_SUBMIT, d, J(PENDING), "Priority");
    struct job_opts other = {.partition = "other", .ntasks = 1, .cpus_per_task = 8};
    uint64_t e = submit(&t, &other); /* another partition: first in its line */
    expect_last(&t, FSM_ACCT_SUBMIT, e, J(PENDING), "Resources");
    t_free(&t);
}
END_TEST

/* ---- determinism ------------------------------------------------------------------------- */

START_TEST(test_replicas_same_records)
{
    struct t a, b;
    build_outbox(&a);
    build_outbox(&b);
    struct fsm_acct_view va[16], vb[16];
    size_t na = fsm_acct_records(a.f, 0, va, 16);
    size_t nb = fsm_acct_records(b.f, 0, vb, 16);
    ck_assert_uint_eq(na, nb);
    ck_assert_uint_gt(na, 0);
    for (size_t i = 0; i < na; i++) {
        ck_assert_uint_eq(va[i].len, vb[i].len);
        ck_assert(memcmp(va[i].bytes, vb[i].bytes, va[i].len) == 0);
    }
    ck_assert(fsm_drive_same(a.f, b.f));
    t_free(&a);
    t_free(&b);
}
END_TEST

static Suite *acct_suite(void)
{
    Suite *s = suite_create("fsm_acct");
    const TTest *const life[] = {test_whole_life,
                                 test_failed_exit_and_direct_start,
                                 test_cancel_pending,
                                 test_cancel_running,
                                 test_requeue_and_node_fail,
                                 test_timeout,
                                 test_launch_failure,
                                 test_off_records_nothing,
                                 test_v2_settings_leave_it_off,
                                 NULL};
    const TTest *const trims[] = {test_trim, test_trim_churn, NULL};
    const TTest *const snaps[] = {test_snapshot_roundtrip, test_restore_format1,
                                  test_restore_corrupt_outbox, NULL};
    const TTest *const queries[] = {test_query_filters_and_merge, test_query_newest_record,
                                    test_pending_reasons, test_replicas_same_records, NULL};
    check_case(s, "records", life);
    check_case(s, "trim", trims);
    check_case(s, "snapshot", snaps);
    check_case(s, "query", queries);
    return s;
}

int main(void)
{
    return check_run(acct_suite());
}
