/*
 * test_sched.c - the scheduler pass (raftd/fsm/fsm_sched.c) as a pure function over a
 * state built by applying real commands through fsm_apply(): SetPartitions,
 * RegisterNode, UpdateNode, submits, holds and releases, and the old JobStarted for the
 * jobs that run.
 *
 * Pinned here, as a table of scenarios (each names the allocations it expects, in the
 * result's order, with their nodes): FIFO by age; a released job is younger than one
 * submitted after it; backfill lets a short job pass a long blocked one, never lets a
 * long job delay a reservation, lets a job use what a reservation leaves free, and the
 * reservation depth decides which reservations protect; partitions (a down one, nodes
 * outside a partition, max nodes, time, CPUs and memory per node changed after submit);
 * held jobs; down, drained and never registered nodes; the sizes -N, -n, -c and --mem;
 * max_allocations. Beside the table: a job in its back-off waits; the pass stops once no
 * CPU is free; the encoded JobsAllocated names what the result says; two passes, and a
 * pass over a restored snapshot, agree; and random states whose every placement the
 * state machine itself accepts (no over-allocation, only usable nodes of the partition).
 */
#include "check_run.h"
#include "fsm.h"
#include "fsm_state.h"

#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C_OK SPUR__API__CODE__CODE_OK
#define MIN  60000u /* one minute in ms */

static char SCRIPT[] = "#!/bin/sh\ntrue\n";

struct t {
    struct fsm *f;
    uint64_t now;
};

/* ---- driving the state machine ------------------------------------------------------------ */

static void run(struct t *t, Spur__Fsm__Command *c, int code)
{
    t->now += 1000;
    c->time_ms = t->now;
    if (c->user == NULL || c->user[0] == '\0')
        c->user = "alice";
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fsm_encode_command(c, &buf, &len), FSM_OK);
    struct fsm_reply reply;
    ck_assert_int_eq(fsm_apply(t->f, fsm_last_applied(t->f) + 1, buf, len, &reply), FSM_OK);
    free(buf);
    ck_assert_msg((int)reply.resp->code == code, "op %d: code %d, want %d (\"%s\")", c->op_case,
                  reply.resp->code, code, reply.resp->error);
    fsm_reply_clear(&reply);
}

/* A partition as the table gives it; nodes NULL: ALL. */
struct pdef {
    const char *name;
    const char *nodes; /* comma list, or NULL for ALL */
    bool down;
    uint32_t max_nodes, max_time, max_cpus;
    uint64_t max_mem;
};

static void set_parts(struct t *t, const struct pdef *pd, size_t n)
{
    Spur__Api__Partition p[8];
    Spur__Api__Partition *pp[8];
    char *names[8][8];
    char copies[8][128];
    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        spur__api__partition__init(&p[i]);
        pp[i] = &p[i];
        p[i].name = (char *)pd[i].name;
        p[i].up = !pd[i].down;
        p[i].is_default = i == 0;
        p[i].max_nodes = pd[i].max_nodes;
        p[i].max_time_min = pd[i].max_time;
        p[i].max_cpus_per_node = pd[i].max_cpus;
        p[i].max_mem_mb_per_node = pd[i].max_mem;
        if (pd[i].nodes == NULL) {
            p[i].nodes_expr = "ALL";
            continue;
        }
        p[i].nodes_expr = (char *)pd[i].nodes;
        snprintf(copies[i], sizeof(copies[i]), "%s", pd[i].nodes);
        size_t k = 0;
        for (char *tok = strtok(copies[i], ","); tok != NULL && k < 8; tok = strtok(NULL, ","))
            names[i][k++] = tok;
        p[i].nodes = names[i];
        p[i].n_nodes = k;
    }
    Spur__Fsm__SetPartitions sp = SPUR__FSM__SET_PARTITIONS__INIT;
    sp.n_partitions = n;
    sp.partitions = pp;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_PARTITIONS;
    c.set_partitions = &sp;
    run(t, &c, C_OK);
}

static void register_node(struct t *t, const char *name, uint32_t cpus, uint64_t mem)
{
    Spur__Api__RegisterNodeRequest q = SPUR__API__REGISTER_NODE_REQUEST__INIT;
    q.name = (char *)name;
    q.address = "127.0.0.1:6818";
    q.cpus = cpus;
    q.mem_mb = mem;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
    c.register_node = &q;
    run(t, &c, C_OK);
}

static void update_node(struct t *t, const char *name, const char *state)
{
    Spur__Api__UpdateNodeRequest u = SPUR__API__UPDATE_NODE_REQUEST__INIT;
    u.name = (char *)name;
    u.state = (char *)state;
    u.reason = "test";
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_UPDATE_NODE;
    c.update_node = &u;
    run(t, &c, C_OK);
}

/* A job as the table gives it. */
struct jdef {
    const char *part;   /* NULL: the default */
    uint32_t N, n, c;   /* -N -n -c, 0: default */
    uint64_t mem;       /* --mem */
    uint32_t t;         /* -t minutes, 0: the partition's */
    const char *run_on; /* started at once on these nodes (JobStarted) */
    bool hold;          /* submitted held */
    bool release;       /* held, released after every submit (so younger) */
};

static uint64_t submit(struct t *t, const struct jdef *j)
{
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    s.name = "job";
    s.script.data = (uint8_t *)SCRIPT;
    s.script.len = strlen(SCRIPT);
    s.partition = (char *)(j->part ? j->part : "");
    s.nodes = j->N;
    s.ntasks = j->n;
    s.cpus_per_task = j->c;
    s.mem_mb = j->mem;
    s.time_limit_min = j->t;
    s.hold = j->hold || j->release;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    run(t, &c, C_OK);
    return t->f->next_job_id - 1;
}

static void start_job(struct t *t, uint64_t id, const char *list)
{
    char copy[256];
    char *names[16];
    size_t n = 0;
    snprintf(copy, sizeof(copy), "%s", list);
    for (char *tok = strtok(copy, ","); tok != NULL && n < 16; tok = strtok(NULL, ","))
        names[n++] = tok;
    Spur__Fsm__JobStarted js = SPUR__FSM__JOB_STARTED__INIT;
    js.job_id = id;
    js.n_nodes = n;
    js.nodes = names;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOB_STARTED;
    c.job_started = &js;
    run(t, &c, C_OK);
}

static void release(struct t *t, uint64_t id)
{
    Spur__Api__JobIdRequest q = SPUR__API__JOB_ID_REQUEST__INIT;
    q.job_id = id;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_RELEASE_JOB;
    c.release_job = &q;
    run(t, &c, C_OK);
}

static void complete(struct t *t, uint64_t id, const char *node)
{
    Spur__Fsm__JobCompleted jc = SPUR__FSM__JOB_COMPLETED__INIT;
    jc.job_id = id;
    jc.node = (char *)node;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOB_COMPLETED;
    c.job_completed = &jc;
    run(t, &c, C_OK);
}

static void t_init(struct t *t)
{
    t->f = fsm_new(NULL);
    ck_assert_ptr_nonnull(t->f);
    t->now = 1000000;
}

/* ---- looking at a result ------------------------------------------------------------------ */

/* "id:node,node id:node ..." in the result's order. */
static void describe(const struct fsm_sched_result *r, char *out, size_t size)
{
    size_t w = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->n && w < size; i++) {
        w += (size_t)snprintf(out + w, size - w, "%s%" PRIu64 ":", i ? " " : "", r->v[i].job_id);
        for (uint32_t k = 0; k < r->v[i].nnodes && w < size; k++)
            w += (size_t)snprintf(out + w, size - w, "%s%s", k ? "," : "", r->v[i].nodes[k]);
    }
}

static void pass(struct t *t, uint64_t after_ms, uint32_t max_res, uint32_t max_alloc,
                 struct fsm_sched_result *r)
{
    struct fsm_sched_opts o = {t->now + after_ms, max_res, max_alloc};
    ck_assert_int_eq(fsm_sched_pass(t->f, &o, r), FSM_OK);
}

/* ---- the table ------------------------------------------------------------------------------ */

struct ndef {
    const char *name;
    uint32_t cpus;
    uint64_t mem;
    const char *state; /* NULL: as registered; "down", "drain"; "unregistered" */
};

struct scenario {
    const char *what;
    struct pdef parts[4];
    struct pdef parts_after[4]; /* applied after the submits when set */
    struct ndef nodes[6];
    struct jdef jobs[8]; /* job i gets id i + 1; the list ends at an all-zero entry */
    uint32_t max_res, max_alloc;
    const char *want;    /* describe() of the result */
    int want_res;        /* reservations made; -1: not checked */
    int want_backfilled; /* -1: not checked */
};

#define ONE_PART                                                                                   \
    {                                                                                              \
        {                                                                                          \
            "batch", NULL                                                                          \
        }                                                                                          \
    }

static const struct scenario scenarios[] = {
    {"FIFO by age: the oldest jobs take the nodes, lowest names first",
     ONE_PART,
     {{0}},
     {{"n1", 2, 1000}, {"n2", 2, 1000}},
     {{.c = 2}, {.c = 2}, {.c = 2}},
     0,
     0,
     "1:n1 2:n2",
     0,
     0},
    {"FIFO: a small job does not pass a big one that holds a reservation it would delay",
     ONE_PART,
     {{0}},
     {{"n1", 4, 1000}},
     {{.c = 2, .t = 60, .run_on = "n1"}, {.c = 4}, {.c = 2}},
     0,
     0,
     "",
     1,
     0},
    {"a released job is younger than one submitted after it was",
     ONE_PART,
     {{0}},
     {{"n1", 2, 1000}},
     {{.c = 2, .release = true}, {.c = 2}},
     0,
     0,
     "2:n1",
     0,
     0},
    {"backfill: a short job passes a long blocked one; jobs that would delay it wait",
     ONE_PART,
     {{0}},
     {{"n1", 6, 1000}},
     {{.c = 2, .t = 60, .run_on = "n1"},
      {.c = 6, .t = 60},
      {.c = 2, .t = 120},
      {.c = 2, .t = 30},
      {.c = 2}},
     0,
     0,
     "4:n1",
     3,
     1},
    {"backfill: an unlimited job may use what the reservation leaves free, no more",
     ONE_PART,
     {{0}},
     {{"n1", 8, 1000}},
     {{.c = 4, .t = 60, .run_on = "n1"}, {.c = 6}, {.c = 2}, {.c = 2}},
     0,
     0,
     "3:n1",
     1,
     1},
    {"backfill: a multi-node reservation protects a node that is free now",
     ONE_PART,
     {{0}},
     {{"n1", 4, 1000}, {"n2", 4, 1000}},
     {{.c = 4, .t = 60, .run_on = "n1"}, {.N = 2, .n = 2, .c = 4}, {.c = 4}, {.c = 2, .t = 30}},
     0,
     0,
     "4:n2",
     1,
     1},
    {"two reservations: the second one protects its node too",
     ONE_PART,
     {{0}},
     {{"n1", 4, 1000}, {"n2", 4, 1000}},
     {{.c = 2, .t = 60, .run_on = "n1"},
      {.c = 4, .t = 30, .run_on = "n2"},
      {.c = 4, .t = 60},
      {.c = 4, .t = 60},
      {.c = 2, .t = 90},
      {.c = 2, .t = 30}},
     0,
     0,
     "6:n1",
     3,
     1},
    {"one reservation only (max_reservations 1): the second blocked job is not protected",
     ONE_PART,
     {{0}},
     {{"n1", 4, 1000}, {"n2", 4, 1000}},
     {{.c = 2, .t = 60, .run_on = "n1"},
      {.c = 4, .t = 30, .run_on = "n2"},
      {.c = 4, .t = 60},
      {.c = 4, .t = 60},
      {.c = 2, .t = 90},
      {.c = 2, .t = 30}},
     1,
     0,
     "5:n1",
     1,
     1},
    {"partitions: jobs go only to their partition's nodes; too many nodes never start",
     {{"batch", NULL}, {"p1", "n3"}, {"p2", "n2,n3"}},
     {{0}},
     {{"n1", 2, 1000}, {"n2", 2, 1000}, {"n3", 2, 1000}},
     {{.part = "p1", .N = 2}, {.part = "p1", .c = 2}, {.part = "p2", .c = 2}, {.c = 1}},
     0,
     0,
     "2:n3 3:n2 4:n1",
     0,
     0},
    {"partitions: a partition set down after submit starts nothing",
     {{"batch", NULL}, {"p2", "n2"}},
     {{"batch", NULL}, {"p2", "n2", .down = true}},
     {{"n1", 2, 1000}, {"n2", 2, 1000}},
     {{.part = "p2"}, {.part = "p2"}, {.n = 1}},
     0,
     0,
     "3:n1",
     0,
     0},
    {"partitions: limits lowered after submit keep the jobs over them waiting",
     {{"batch", NULL}, {"p2", "n2,n3"}},
     {{"batch", NULL},
      {"p2", "n2,n3", .max_nodes = 1, .max_time = 10, .max_cpus = 1, .max_mem = 100}},
     {{"n1", 2, 1000}, {"n2", 2, 1000}, {"n3", 2, 1000}},
     {{.part = "p2", .N = 2, .t = 5},
      {.part = "p2", .t = 30},
      {.part = "p2", .c = 2, .t = 5},
      {.part = "p2", .mem = 200, .t = 5},
      {.part = "p2"},
      {.part = "p2", .mem = 50, .t = 5}},
     0,
     0,
     "6:n2",
     0,
     0},
    {"held jobs are skipped",
     ONE_PART,
     {{0}},
     {{"n1", 2, 1000}},
     {{.c = 2, .hold = true}, {.c = 2}},
     0,
     0,
     "2:n1",
     0,
     0},
    {"node states: down, drained and never registered nodes take nothing",
     {{"batch", "n1,n2,n3,n4"}},
     {{0}},
     {{"n1", 4, 1000, "down"},
      {"n2", 4, 1000, "drain"},
      {"n3", 4, 1000, "unregistered"},
      {"n4", 4, 1000}},
     {{.N = 2, .n = 2}, {.c = 4}, {.c = 4}},
     0,
     0,
     "2:n4",
     0,
     0},
    {"sizes: -N -n -c give CPUs per node; --mem is per node",
     ONE_PART,
     {{0}},
     {{"n1", 8, 1000}, {"n2", 8, 1000}, {"n3", 8, 1000}},
     {{.N = 2, .n = 4, .c = 2},
      {.n = 3, .c = 2},
      {.mem = 600},
      {.mem = 600},
      {.mem = 500},
      {.mem = 600}},
     0,
     0,
     "1:n1,n2 2:n3 3:n1 4:n2 5:n3",
     0,
     0},
    {"max_allocations caps the pass, oldest first",
     ONE_PART,
     {{0}},
     {{"n1", 8, 1000}},
     {{.n = 1}, {.n = 1}, {.n = 1}, {.n = 1}},
     0,
     2,
     "1:n1 2:n1",
     0,
     0},
};

static void build(struct t *t, const struct scenario *sc)
{
    size_t np = 0;
    while (np < 4 && sc->parts[np].name != NULL)
        np++;
    set_parts(t, sc->parts, np);
    for (size_t i = 0; i < 6 && sc->nodes[i].name != NULL; i++) {
        const struct ndef *nd = &sc->nodes[i];
        if (nd->state != NULL && strcmp(nd->state, "unregistered") == 0)
            continue;
        register_node(t, nd->name, nd->cpus, nd->mem);
        if (nd->state != NULL)
            update_node(t, nd->name, nd->state);
    }
    uint64_t ids[8] = {0};
    for (size_t i = 0; i < 8 && memcmp(&sc->jobs[i], &(struct jdef){0}, sizeof(struct jdef)); i++) {
        const struct jdef *j = &sc->jobs[i];
        ids[i] = submit(t, j);
        ck_assert_uint_eq(ids[i], i + 1);
        if (j->run_on != NULL)
            start_job(t, ids[i], j->run_on);
    }
    for (size_t i = 0; i < 8; i++)
        if (ids[i] != 0 && sc->jobs[i].release)
            release(t, ids[i]);
    size_t na = 0;
    while (na < 4 && sc->parts_after[na].name != NULL)
        na++;
    if (na > 0)
        set_parts(t, sc->parts_after, na);
}

START_TEST(test_scenarios)
{
    const struct scenario *sc = &scenarios[_i];
    struct t t;
    t_init(&t);
    build(&t, sc);
    struct fsm_sched_result r;
    pass(&t, 1000, sc->max_res, sc->max_alloc, &r);
    char got[512];
    describe(&r, got, sizeof(got));
    ck_assert_msg(strcmp(got, sc->want) == 0, "%s: got \"%s\", want \"%s\"", sc->what, got,
                  sc->want);
    if (sc->want_res >= 0)
        ck_assert_msg(r.reservations == (uint64_t)sc->want_res, "%s: %" PRIu64 " reservations",
                      sc->what, r.reservations);
    if (sc->want_backfilled >= 0)
        ck_assert_msg(r.backfilled == (uint64_t)sc->want_backfilled, "%s: %" PRIu64 " backfilled",
                      sc->what, r.backfilled);
    fsm_sched_result_free(&r);
    fsm_free(t.f);
}
END_TEST

/* ---- beside the table ----------------------------------------------------------------------- */

static void tick(struct t *t)
{
    Spur__Fsm__Tick tk = SPUR__FSM__TICK__INIT;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_TICK;
    c.tick = &tk;
    run(t, &c, C_OK);
}

/*
 * A job in its launch back-off (eligible time after now) waits, and once the clock
 * passes it, it queues by that eligible time (behind a job submitted after it). The
 * back-off is set on the job directly: the command that sets it (JobLaunchFailed)
 * belongs to the lifecycle's apply.
 */
START_TEST(test_backoff_waits)
{
    struct t t;
    t_init(&t);
    set_parts(&t, (struct pdef[]){{"batch", NULL}}, 1);
    register_node(&t, "n1", 2, 1000);
    register_node(&t, "n2", 2, 1000);
    uint64_t a = submit(&t, &(struct jdef){.c = 2});
    ck_assert_uint_eq(submit(&t, &(struct jdef){.c = 2}), 2);
    struct fsm_job *job = fsm_jobs_find(&t.f->jobs, a);
    job->eligible_ms = t.now + 10000;
    struct fsm_sched_result r;
    char got[128];
    pass(&t, 0, 0, 0, &r);
    describe(&r, got, sizeof(got));
    ck_assert_str_eq(got, "2:n1");
    fsm_sched_result_free(&r);
    pass(&t, 20000, 0, 0, &r);
    describe(&r, got, sizeof(got));
    ck_assert_str_eq(got, "2:n1 1:n2");
    fsm_sched_result_free(&r);
    /* The pass goes by the log clock when it is ahead of the leader's. */
    job->eligible_ms = t.now + 500;
    struct fsm_sched_opts o = {1, 0, 0};
    ck_assert_int_eq(fsm_sched_pass(t.f, &o, &r), FSM_OK);
    describe(&r, got, sizeof(got));
    ck_assert_str_eq(got, "2:n1");
    fsm_sched_result_free(&r);
    tick(&t); /* the log clock passes the back-off */
    ck_assert_int_eq(fsm_sched_pass(t.f, &o, &r), FSM_OK);
    describe(&r, got, sizeof(got));
    ck_assert_str_eq(got, "2:n1 1:n2");
    fsm_sched_result_free(&r);
    fsm_free(t.f);
}
END_TEST

/* Once no usable node has a free CPU the pass stops looking; a full queue costs nothing. */
START_TEST(test_stops_when_full)
{
    struct t t;
    t_init(&t);
    set_parts(&t, (struct pdef[]){{"batch", NULL}}, 1);
    register_node(&t, "n1", 2, 1000);
    for (int i = 0; i < 20; i++)
        submit(&t, &(struct jdef){0});
    struct fsm_sched_result r;
    pass(&t, 0, 0, 0, &r);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_uint_eq(r.jobs_tested, 2);
    fsm_sched_result_free(&r);
    /*
     * Blocked jobs stack reservations on the one node that can ever hold them (one after
     * another, each for its limit), and a small job still finds the other node.
     */
    struct t u;
    t_init(&u);
    set_parts(&u, (struct pdef[]){{"batch", NULL}}, 1);
    register_node(&u, "n1", 3, 1000);
    register_node(&u, "n2", 2, 1000);
    for (int i = 0; i < 20; i++)
        submit(&u, &(struct jdef){.c = 3, .t = 10});
    submit(&u, &(struct jdef){.c = 1, .t = 5});
    pass(&u, 0, 0, 0, &r);
    char got[128];
    describe(&r, got, sizeof(got));
    ck_assert_str_eq(got, "1:n1 21:n2");
    ck_assert_uint_eq(r.jobs_tested, 21);
    ck_assert_uint_eq(r.reservations, 19);
    ck_assert_uint_eq(r.backfilled, 1);
    fsm_sched_result_free(&r);
    fsm_free(t.f);
    fsm_free(u.f);
}
END_TEST

/* The JobsAllocated entry, decoded, names the jobs and nodes of the result, in order. */
START_TEST(test_encode_allocations)
{
    struct t t;
    t_init(&t);
    set_parts(&t, (struct pdef[]){{"batch", NULL}}, 1);
    register_node(&t, "a1", 4, 1000);
    register_node(&t, "a2", 4, 1000);
    register_node(&t, "a3", 4, 1000);
    submit(&t, &(struct jdef){.N = 2, .n = 2, .c = 3});
    submit(&t, &(struct jdef){.c = 2});
    submit(&t, &(struct jdef){.N = 2, .n = 2});
    struct fsm_sched_result r;
    pass(&t, 0, 0, 0, &r);
    char got[128];
    describe(&r, got, sizeof(got));
    ck_assert_str_eq(got, "1:a1,a2 2:a3 3:a1,a2");
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fsm_encode_allocations(&r, 4242, &buf, &len), FSM_OK);
    Spur__Fsm__Command *c = spur__fsm__command__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->op_case, SPUR__FSM__COMMAND__OP_JOBS_ALLOCATED);
    ck_assert_uint_eq(c->version, FSM_COMMAND_VERSION);
    ck_assert_uint_eq(c->time_ms, 4242);
    ck_assert_uint_eq(c->client_id, 0);
    ck_assert_uint_eq(c->jobs_allocated->n_allocations, r.n);
    for (size_t i = 0; i < r.n; i++) {
        const Spur__Fsm__Allocation *a = c->jobs_allocated->allocations[i];
        ck_assert_uint_eq(a->job_id, r.v[i].job_id);
        ck_assert_uint_eq(a->n_nodes, r.v[i].nnodes);
        for (size_t k = 0; k < a->n_nodes; k++)
            ck_assert_str_eq(a->nodes[k], r.v[i].nodes[k]);
    }
    spur__fsm__command__free_unpacked(c, NULL);
    free(buf);
    struct fsm_sched_result empty = {0};
    ck_assert_int_eq(fsm_encode_allocations(&empty, 1, &buf, &len), FSM_EINVAL);
    fsm_sched_result_free(&r);
    fsm_free(t.f);
}
END_TEST

static bool results_equal(const struct fsm_sched_result *a, const struct fsm_sched_result *b)
{
    if (a->n != b->n || a->reservations != b->reservations || a->backfilled != b->backfilled ||
        a->jobs_tested != b->jobs_tested)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        if (a->v[i].job_id != b->v[i].job_id || a->v[i].nnodes != b->v[i].nnodes)
            return false;
        for (uint32_t k = 0; k < a->v[i].nnodes; k++)
            if (strcmp(a->v[i].nodes[k], b->v[i].nodes[k]) != 0)
                return false;
    }
    return true;
}

/* A small deterministic generator (the tests own their seeds). */
static uint64_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/*
 * A random cluster: 3 partitions over 12 nodes of 1-8 CPUs, some down or draining, and
 * 60 jobs of random shapes and limits, some held.
 */
static void random_state(struct t *t, uint64_t seed)
{
    set_parts(t,
              (struct pdef[]){{"batch", NULL},
                              {"even", "r00,r02,r04,r06,r08,r10"},
                              {"short", "r05,r01,r03,r00,r04,r02", .max_time = 30}},
              3);
    for (int i = 0; i < 12; i++) {
        char name[8];
        snprintf(name, sizeof(name), "r%02d", i);
        register_node(t, name, 1 + (uint32_t)rnd(&seed) % 8, 1000 + 500 * (rnd(&seed) % 4));
        if (rnd(&seed) % 8 == 0)
            update_node(t, name, rnd(&seed) % 2 ? "down" : "drain");
    }
    static const char *parts[] = {NULL, "even", "short"};
    for (int i = 0; i < 60; i++) {
        struct jdef j = {0};
        j.part = parts[rnd(&seed) % 3];
        j.N = 1 + (uint32_t)(rnd(&seed) % 4 == 0 ? rnd(&seed) % 3 : 0);
        j.n = j.N * (1 + (uint32_t)rnd(&seed) % 2);
        j.c = 1 + (uint32_t)rnd(&seed) % 3;
        j.mem = rnd(&seed) % 3 == 0 ? 100 * (1 + rnd(&seed) % 10) : 0;
        j.t = j.part != NULL && strcmp(j.part, "short") == 0 ? 1 + (uint32_t)rnd(&seed) % 30
              : rnd(&seed) % 4 == 0                          ? 0
                                                             : 1 + (uint32_t)rnd(&seed) % 120;
        j.hold = rnd(&seed) % 10 == 0;
        submit(t, &j);
    }
}

/* Same state, same result; and the same again on a state restored from a snapshot. */
START_TEST(test_deterministic)
{
    for (uint64_t seed = 1; seed <= 20; seed++) {
        struct t t;
        t_init(&t);
        random_state(&t, seed);
        struct fsm_sched_result a, b, c;
        pass(&t, 0, 0, 0, &a);
        pass(&t, 0, 0, 0, &b);
        ck_assert_msg(results_equal(&a, &b), "seed %" PRIu64, seed);
        uint8_t *snap;
        size_t len;
        ck_assert_int_eq(fsm_snapshot(t.f, &snap, &len), FSM_OK);
        struct fsm *g = fsm_new(NULL);
        char err[FSM_ERR_MAX];
        ck_assert_int_eq(fsm_restore(g, snap, len, err, sizeof(err)), FSM_OK);
        struct fsm_sched_opts o = {t.now, 0, 0};
        ck_assert_int_eq(fsm_sched_pass(g, &o, &c), FSM_OK);
        ck_assert_msg(results_equal(&a, &c), "seed %" PRIu64 " after restore", seed);
        ck_assert_uint_gt(a.n, 0);
        free(snap);
        fsm_free(g);
        fsm_sched_result_free(&a);
        fsm_sched_result_free(&b);
        fsm_sched_result_free(&c);
        fsm_free(t.f);
    }
}
END_TEST

/*
 * Random clusters over several rounds: every placement of every pass is applied as a
 * JobStarted, which the state machine refuses unless each node is usable, in the job's
 * partition, and has the job's CPUs and memory free (so the pass never over-allocates,
 * and never picks a node twice). Between rounds some running parts finish and time
 * moves. After a pass that made no reservation, no waiting job fits now (nothing but a
 * reservation may keep a fitting job out).
 */
START_TEST(test_random_placements_apply)
{
    uint64_t placed = 0;
    for (uint64_t seed = 100; seed < 140; seed++) {
        struct t t;
        t_init(&t);
        random_state(&t, seed);
        uint64_t s = seed;
        for (int round = 0; round < 6; round++) {
            struct fsm_sched_result r;
            pass(&t, 0, 0, 0, &r);
            for (size_t i = 0; i < r.n; i++) {
                char list[256] = "";
                size_t w = 0;
                for (uint32_t k = 0; k < r.v[i].nnodes; k++)
                    w += (size_t)snprintf(list + w, sizeof(list) - w, "%s%s", k ? "," : "",
                                          r.v[i].nodes[k]);
                start_job(&t, r.v[i].job_id, list);
            }
            placed += r.n;
            if (r.reservations == 0 && r.n < 10000) {
                /* Nothing reserved: every job left waiting must not fit now. */
                struct fsm_fit_cache cache = {0};
                for (size_t k = 0; k < t.f->jobs.norder; k++) {
                    const struct fsm_job *job = t.f->jobs.order[k];
                    if (job == NULL || job->state != SPUR__API__JOB_STATE__JOB_PENDING || job->held)
                        continue;
                    const char *why = fsm_state_pending_reason(t.f, job, &cache);
                    ck_assert_msg(strcmp(why, "None") != 0,
                                  "seed %" PRIu64 ": job %" PRIu64 " fits but was not placed", seed,
                                  job->id);
                }
            }
            fsm_sched_result_free(&r);
            /* Finish about a third of the running parts. */
            for (size_t k = 0; k < t.f->jobs.norder; k++) {
                struct fsm_job *job = t.f->jobs.order[k];
                if (job == NULL || job->run == NULL || fsm_job_state_final(job->state))
                    continue;
                for (uint32_t n = 0; n < job->run->n; n++)
                    if (!job->run->done[n] && rnd(&s) % 3 == 0)
                        complete(&t, job->id, job->run->nodes[n]);
            }
            t.now += 5 * MIN;
        }
        fsm_free(t.f);
    }
    ck_assert_uint_gt(placed, 400);
}
END_TEST

static Suite *sched_suite(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = check_case(s, "table", (const TTest *[]){NULL});
    tcase_add_loop_test(tc, test_scenarios, 0, (int)(sizeof(scenarios) / sizeof(scenarios[0])));
    check_case(s, "pass",
               (const TTest *[]){test_backoff_waits, test_stops_when_full, test_encode_allocations,
                                 test_deterministic, test_random_placements_apply, NULL});
    return s;
}

int main(void)
{
    return check_run(sched_suite());
}
