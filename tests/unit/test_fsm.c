/*
 * test_fsm.c - the replicated state machine (raftd/fsm/).
 *
 * Pinned here: apply of every command, valid and invalid (each refusal names its problem,
 * carries its code and leaves the state unchanged); job states and pending reasons; node
 * states through drain / resume / down and through running jobs; partitions and settings
 * from the configuration; exactly-once sessions (a retry gives the first answer and no
 * second job, a stale seq is refused, expiry and eviction follow the log); retention by
 * log time; garbage entries and garbage snapshots never crash a replica; snapshots round
 * trip bit for bit and a failed restore leaves the state alone; and a random log replayed
 * on a fresh state machine, or on one restored mid-way, ends in the same bytes. Among
 * the internals: the job filter and the id sort that squeue and scancel share.
 */
#include "cfg.h"
#include "check_run.h"
#include "controller.h"
#include "fsm.h"
#include "fsm_drive.h"
#include "fsm_jobs.h"
#include "fsm_map.h"
#include "fsm_state.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define C_OK        SPUR__API__CODE__CODE_OK
#define C_INVALID   SPUR__API__CODE__CODE_INVALID
#define C_NOT_FOUND SPUR__API__CODE__CODE_NOT_FOUND
#define C_CONFLICT  SPUR__API__CODE__CODE_CONFLICT
#define C_TOO_LARGE SPUR__API__CODE__CODE_TOO_LARGE

#define J_PENDING    SPUR__API__JOB_STATE__JOB_PENDING
#define J_RUNNING    SPUR__API__JOB_STATE__JOB_RUNNING
#define J_COMPLETING SPUR__API__JOB_STATE__JOB_COMPLETING
#define J_COMPLETED  SPUR__API__JOB_STATE__JOB_COMPLETED
#define J_FAILED     SPUR__API__JOB_STATE__JOB_FAILED
#define J_CANCELLED  SPUR__API__JOB_STATE__JOB_CANCELLED
#define J_TIMEOUT    SPUR__API__JOB_STATE__JOB_TIMEOUT
#define J_NODE_FAIL  SPUR__API__JOB_STATE__JOB_NODE_FAIL

#define N_IDLE      SPUR__API__NODE_STATE__NODE_IDLE
#define N_ALLOCATED SPUR__API__NODE_STATE__NODE_ALLOCATED
#define N_MIXED     SPUR__API__NODE_STATE__NODE_MIXED
#define N_DOWN      SPUR__API__NODE_STATE__NODE_DOWN
#define N_DRAINED   SPUR__API__NODE_STATE__NODE_DRAINED
#define N_DRAINING  SPUR__API__NODE_STATE__NODE_DRAINING
#define N_UNKNOWN   SPUR__API__NODE_STATE__NODE_UNKNOWN

static char SCRIPT[] = "#!/bin/sh\necho hello\n";

/* A state machine under test and the log time of the next entry. */
struct t {
    struct fsm *f;
    uint64_t now;
};

/* ---- driving it ------------------------------------------------------------------------ */

/* Encode, apply at the next index, return the reply's response (caller frees). */
static Spur__Api__Response *run_as(struct t *t, uint64_t client, uint64_t seq,
                                   Spur__Fsm__Command *c)
{
    c->client_id = client;
    c->seq = seq;
    return fsm_drive_apply(t->f, c, t->now);
}

static Spur__Api__Response *run(struct t *t, Spur__Fsm__Command *c)
{
    return run_as(t, 0, 0, c);
}

/* Apply and check the code and (when given) a piece of the error line. */
static Spur__Api__Response *expect_resp(struct t *t, Spur__Fsm__Command *c, int code,
                                        const char *err_part)
{
    Spur__Api__Response *r = run(t, c);
    ck_assert_msg((int)r->code == code, "code %d, want %d (error \"%s\")", r->code, code, r->error);
    if (code == C_OK)
        ck_assert_str_eq(r->error, "");
    else
        ck_assert_msg(r->error[0] != '\0', "an error without a message");
    if (err_part != NULL)
        ck_assert_msg(strstr(r->error, err_part) != NULL, "error \"%s\" lacks \"%s\"", r->error,
                      err_part);
    return r;
}

static void expect(struct t *t, Spur__Fsm__Command *c, int code, const char *err_part)
{
    spur__api__response__free_unpacked(expect_resp(t, c, code, err_part), NULL);
}

static void spec_init(Spur__Api__JobSpec *s)
{
    spur__api__job_spec__init(s);
    s->script.data = (uint8_t *)SCRIPT;
    s->script.len = strlen(SCRIPT);
    s->name = "job";
}

/* Submit; returns the new job id, or 0 when the submit was refused with code. */
static uint64_t submit_expect(struct t *t, Spur__Api__JobSpec *s, int code, const char *err)
{
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = s;
    Spur__Api__Response *r = expect_resp(t, &c, code, err);
    uint64_t id = 0;
    if (code == C_OK) {
        ck_assert_int_eq(r->result_case, SPUR__API__RESPONSE__RESULT_SUBMIT_JOB);
        id = r->submit_job->job_id;
        ck_assert_uint_ne(id, 0);
    }
    spur__api__response__free_unpacked(r, NULL);
    return id;
}

static uint64_t submit(struct t *t, Spur__Api__JobSpec *s)
{
    return submit_expect(t, s, C_OK, NULL);
}

static uint64_t submit_plain(struct t *t)
{
    Spur__Api__JobSpec s;
    spec_init(&s);
    return submit(t, &s);
}

enum job_op { OP_CANCEL, OP_HOLD, OP_RELEASE };

static void job_op(struct t *t, enum job_op op, uint64_t id, int code, const char *err)
{
    Spur__Api__JobIdRequest q = SPUR__API__JOB_ID_REQUEST__INIT;
    q.job_id = id;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    switch (op) {
    case OP_CANCEL:
        c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOB;
        c.cancel_job = &q;
        break;
    case OP_HOLD:
        c.op_case = SPUR__FSM__COMMAND__OP_HOLD_JOB;
        c.hold_job = &q;
        break;
    case OP_RELEASE:
        c.op_case = SPUR__FSM__COMMAND__OP_RELEASE_JOB;
        c.release_job = &q;
        break;
    }
    expect(t, &c, code, err);
}

static void update_node(struct t *t, const char *name, const char *state, const char *reason,
                        int code, const char *err)
{
    Spur__Api__UpdateNodeRequest u = SPUR__API__UPDATE_NODE_REQUEST__INIT;
    u.name = (char *)name;
    u.state = (char *)state;
    u.reason = (char *)(reason ? reason : "");
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_UPDATE_NODE;
    c.update_node = &u;
    expect(t, &c, code, err);
}

static void register_node(struct t *t, const char *name, uint32_t cpus, uint64_t mem, int code,
                          const char *err)
{
    static char *features[] = {"fast", "ssd"};
    Spur__Api__RegisterNodeRequest q = SPUR__API__REGISTER_NODE_REQUEST__INIT;
    q.name = (char *)name;
    q.address = "10.0.0.1:6818";
    q.cpus = cpus;
    q.mem_mb = mem;
    q.n_features = 2;
    q.features = features;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
    c.register_node = &q;
    expect(t, &c, code, err);
}

static void start_job(struct t *t, uint64_t id, char **nodes, size_t n, int code, const char *err)
{
    Spur__Fsm__JobStarted js = SPUR__FSM__JOB_STARTED__INIT;
    js.job_id = id;
    js.n_nodes = n;
    js.nodes = nodes;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOB_STARTED;
    c.job_started = &js;
    expect(t, &c, code, err);
}

static void complete_job(struct t *t, uint64_t id, const char *node, int exit_code, bool timed_out,
                         int code, const char *err)
{
    Spur__Fsm__JobCompleted jc = SPUR__FSM__JOB_COMPLETED__INIT;
    jc.job_id = id;
    jc.node = (char *)node;
    jc.exit_code = exit_code;
    jc.timed_out = timed_out;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_JOB_COMPLETED;
    c.job_completed = &jc;
    expect(t, &c, code, err);
}

static void tick(struct t *t)
{
    Spur__Fsm__Tick tk = SPUR__FSM__TICK__INIT;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_TICK;
    c.tick = &tk;
    expect(t, &c, C_OK, NULL);
}

static void set_settings(struct t *t, uint32_t retention_s, uint32_t max_script, int code,
                         const char *err)
{
    Spur__Fsm__SetSettings s = SPUR__FSM__SET_SETTINGS__INIT;
    s.finished_job_retention_s = retention_s;
    s.max_script_bytes = max_script;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_SETTINGS;
    c.set_settings = &s;
    expect(t, &c, code, err);
}

/*
 * The standard partitions: batch (ALL, default), small (n1 n2; 2 nodes, 60 min, 4 CPUs,
 * 1000 MiB per node), gpu (g1 g2, never registered), closed (down).
 */
static void set_std_partitions(struct t *t)
{
    static char *small_nodes[] = {"n1", "n2"};
    static char *gpu_nodes[] = {"g1", "g2"};
    Spur__Api__Partition p[4];
    Spur__Api__Partition *pp[4];
    for (int i = 0; i < 4; i++) {
        spur__api__partition__init(&p[i]);
        p[i].up = true;
        pp[i] = &p[i];
    }
    p[0].name = "batch";
    p[0].nodes_expr = "ALL";
    p[0].is_default = true;
    p[1].name = "small";
    p[1].nodes_expr = "n1,n2";
    p[1].n_nodes = 2;
    p[1].nodes = small_nodes;
    p[1].max_nodes = 2;
    p[1].max_time_min = 60;
    p[1].max_cpus_per_node = 4;
    p[1].max_mem_mb_per_node = 1000;
    p[2].name = "gpu";
    p[2].nodes_expr = "g1,g2";
    p[2].n_nodes = 2;
    p[2].nodes = gpu_nodes;
    p[3].name = "closed";
    p[3].nodes_expr = "ALL";
    p[3].up = false;
    Spur__Fsm__SetPartitions sp = SPUR__FSM__SET_PARTITIONS__INIT;
    sp.n_partitions = 4;
    sp.partitions = pp;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_PARTITIONS;
    c.set_partitions = &sp;
    expect(t, &c, C_OK, NULL);
}

static void t_init_bare(struct t *t, const struct fsm_limits *lim)
{
    t->f = fsm_new(lim);
    ck_assert_ptr_nonnull(t->f);
    t->now = 1000000;
}

/* Partitions as above and nodes n1..n4 with 8 CPUs and 16000 MiB each. */
static void t_init(struct t *t)
{
    t_init_bare(t, NULL);
    set_std_partitions(t);
    register_node(t, "n1", 8, 16000, C_OK, NULL);
    register_node(t, "n2", 8, 16000, C_OK, NULL);
    register_node(t, "n3", 8, 16000, C_OK, NULL);
    register_node(t, "n4", 8, 16000, C_OK, NULL);
}

static void t_free(struct t *t)
{
    fsm_free(t->f);
    t->f = NULL;
}

/* ---- looking at it -------------------------------------------------------------------- */

struct jobview {
    struct fsm_read rd;
    Spur__Api__Job *job; /* NULL when the job is not held */
};

static void view_job(struct t *t, uint64_t id, struct jobview *v)
{
    ck_assert_int_eq(fsm_get_job(t->f, id, &v->rd), FSM_OK);
    v->job = NULL;
    if (v->rd.resp.code == C_OK) {
        ck_assert_int_eq(v->rd.resp.result_case, SPUR__API__RESPONSE__RESULT_JOBS);
        ck_assert_uint_eq(v->rd.resp.jobs->n_jobs, 1);
        v->job = v->rd.resp.jobs->jobs[0];
    }
}

static void check_job(struct t *t, uint64_t id, int state, const char *reason)
{
    struct jobview v;
    view_job(t, id, &v);
    ck_assert_msg(v.job != NULL, "job %llu missing: %s", (unsigned long long)id, v.rd.resp.error);
    ck_assert_msg((int)v.job->state == state, "job %llu state %d, want %d", (unsigned long long)id,
                  v.job->state, state);
    if (reason != NULL)
        ck_assert_str_eq(v.job->reason, reason);
    fsm_read_free(&v.rd);
}

static bool job_exists(struct t *t, uint64_t id)
{
    struct jobview v;
    view_job(t, id, &v);
    bool exists = v.job != NULL;
    if (!exists)
        ck_assert_int_eq(v.rd.resp.code, C_NOT_FOUND);
    fsm_read_free(&v.rd);
    return exists;
}

static int node_state(struct t *t, const char *name, uint32_t *alloc_cpus, char *reason,
                      size_t reasonlen)
{
    char *names[] = {(char *)name};
    Spur__Api__GetNodesRequest q = SPUR__API__GET_NODES_REQUEST__INIT;
    q.n_names = 1;
    q.names = names;
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_nodes(t->f, &q, &rd), FSM_OK);
    ck_assert_int_eq(rd.resp.code, C_OK);
    ck_assert_uint_eq(rd.resp.nodes->n_nodes, 1);
    const Spur__Api__Node *n = rd.resp.nodes->nodes[0];
    int st = n->state;
    if (alloc_cpus != NULL)
        *alloc_cpus = n->alloc_cpus;
    if (reason != NULL)
        snprintf(reason, reasonlen, "%s", n->reason);
    fsm_read_free(&rd);
    return st;
}

static void snapshot(struct fsm *f, uint8_t **b, size_t *n)
{
    fsm_drive_snapshot(f, b, n);
}

static void assert_same_snapshot(struct fsm *a, struct fsm *b)
{
    ck_assert_msg(fsm_drive_same(a, b), "snapshots differ");
}

/* Packed answer of a read, for comparing two states' answers. */
static uint8_t *packed_read(struct fsm *f, Spur__Api__Request *req, size_t *len)
{
    struct fsm_read rd;
    ck_assert_int_eq(fsm_read(f, req, &rd), FSM_OK);
    *len = spur__api__response__get_packed_size(&rd.resp);
    uint8_t *b = malloc(*len + 1);
    ck_assert_ptr_nonnull(b);
    spur__api__response__pack(&rd.resp, b);
    fsm_read_free(&rd);
    return b;
}

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* ---- jobs -------------------------------------------------------------------------------- */

START_TEST(test_submit_valid)
{
    struct t t;
    t_init(&t);
    uint64_t a = submit_plain(&t);
    uint64_t b = submit_plain(&t);
    ck_assert_uint_eq(a, 1);
    ck_assert_uint_eq(b, 2);

    struct jobview v;
    view_job(&t, a, &v);
    ck_assert_ptr_nonnull(v.job);
    ck_assert_int_eq(v.job->state, J_PENDING);
    ck_assert_str_eq(v.job->reason, "None");           /* eligible: nodes are free */
    ck_assert_str_eq(v.job->spec->partition, "batch"); /* the default, resolved */
    ck_assert_str_eq(v.job->spec->user, "alice");      /* the request's user */
    ck_assert_uint_eq(v.job->spec->nodes, 1);
    ck_assert_uint_eq(v.job->spec->ntasks, 1);
    ck_assert_uint_eq(v.job->spec->cpus_per_task, 1);
    ck_assert_uint_eq(v.job->spec->time_limit_min, 0); /* batch: unlimited */
    ck_assert_uint_eq(v.job->submit_time_ms, t.now);
    ck_assert_uint_eq(v.job->eligible_time_ms, t.now);
    ck_assert_uint_eq(v.job->spec->script.len, strlen(SCRIPT)); /* get_job: full */
    ck_assert_int_eq(memcmp(v.job->spec->script.data, SCRIPT, strlen(SCRIPT)), 0);
    fsm_read_free(&v.rd);

    /* A time limit of 0 takes the partition's; ntasks defaults to one per node. */
    Spur__Api__JobSpec s;
    spec_init(&s);
    s.partition = "small";
    s.nodes = 2;
    s.cpus_per_task = 2;
    s.mem_mb = 1000;
    char *env[] = {"A=1", "PATH=/bin"};
    s.n_env = 2;
    s.env = env;
    uint64_t c = submit(&t, &s);
    view_job(&t, c, &v);
    ck_assert_uint_eq(v.job->spec->time_limit_min, 60);
    ck_assert_uint_eq(v.job->spec->ntasks, 2);
    ck_assert_uint_eq(v.job->spec->n_env, 2);
    ck_assert_str_eq(v.job->spec->env[1], "PATH=/bin");
    fsm_read_free(&v.rd);

    /* Bigger than every node: pending for Resources. */
    spec_init(&s);
    s.cpus_per_task = 16;
    uint64_t d = submit(&t, &s);
    check_job(&t, d, J_PENDING, "Resources");
    /* A partition whose nodes never registered: no node to ask for. */
    spec_init(&s);
    s.partition = "gpu";
    check_job(&t, submit(&t, &s), J_PENDING, "ReqNodeNotAvail");

    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.jobs, 5);
    ck_assert_uint_eq(st.jobs_by_state[J_PENDING], 5);
    ck_assert_uint_eq(st.next_job_id, 6);
    t_free(&t);
}
END_TEST

START_TEST(test_submit_invalid)
{
    struct t t;
    t_init(&t);
    Spur__Api__JobSpec s;
    uint8_t *snap_before;
    size_t snap_len;
    submit_plain(&t); /* job 1 */

    spec_init(&s);
    s.script.len = 0;
    submit_expect(&t, &s, C_INVALID, "the job has no script");

    static uint8_t big[(1u << 20) + 1];
    memset(big, 'x', sizeof(big));
    spec_init(&s);
    s.script.data = big;
    s.script.len = sizeof(big);
    submit_expect(&t, &s, C_TOO_LARGE, "the job script is 1048577 bytes; the limit is 1048576");

    /* Refusals of a plain spec with a few fields changed (0 / NULL: left as spec_init()). */
    static const struct refused_spec {
        const char *partition;
        uint32_t time_limit_min, nodes, ntasks, cpus_per_task;
        uint64_t mem_mb;
        const char *name;
        int code;
        const char *error;
    } refused[] = {
        {"nope", 0, 0, 0, 0, 0, NULL, C_NOT_FOUND, "partition \"nope\" does not exist"},
        {"small", 120, 0, 0, 0, 0, NULL, C_INVALID,
         "time limit 120 min exceeds partition small's max 60 min"},
        {"small", 0, 3, 0, 0, 0, NULL, C_INVALID, "3 nodes exceed partition small's max 2 nodes"},
        {"small", 0, 0, 3, 2, 0, NULL, C_INVALID, "6 CPUs per node exceed partition small's max 4"},
        {"small", 0, 0, 0, 0, 1001, NULL, C_INVALID,
         "1001 MiB of memory per node exceeds partition small"},
        {NULL, 0, 4, 2, 0, 0, NULL, C_INVALID, "2 tasks on 4 nodes"},
        {"closed", 0, 0, 0, 0, 0, NULL, C_CONFLICT, "partition closed is down"},
        {NULL, 0, 0, 0, 0, 0, "bad\nname", C_INVALID, "the job name holds a control character"},
        {NULL, 0, 70000, 70000, 0, 0, NULL, C_INVALID, "70000 nodes requested"},
        {NULL, 0, 0, 0, 2000000, 0, NULL, C_INVALID, "2000000 CPUs per node requested"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        const struct refused_spec *r = &refused[i];
        spec_init(&s);
        if (r->partition != NULL)
            s.partition = (char *)r->partition;
        if (r->name != NULL)
            s.name = (char *)r->name;
        s.time_limit_min = r->time_limit_min;
        s.nodes = r->nodes;
        s.ntasks = r->ntasks;
        s.cpus_per_task = r->cpus_per_task;
        s.mem_mb = r->mem_mb;
        submit_expect(&t, &s, r->code, r->error);
    }

    /* Refusals of sizes and lists. */
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    spec_init(&s);
    s.name = longname;
    submit_expect(&t, &s, C_TOO_LARGE, "the job name is 299 bytes; the limit is 256");

    char longpath[5000];
    memset(longpath, '/', sizeof(longpath) - 1);
    longpath[sizeof(longpath) - 1] = '\0';
    spec_init(&s);
    s.workdir = longpath;
    submit_expect(&t, &s, C_TOO_LARGE, "the working directory is 4999 bytes");

    char *env[] = {"GOOD=1", "=bad"};
    spec_init(&s);
    s.n_env = 2;
    s.env = env;
    submit_expect(&t, &s, C_INVALID, "environment entry 2 is not NAME=value");

    /* No user anywhere. */
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    spec_init(&s);
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    c.user = "";
    uint8_t *buf;
    size_t len;
    c.time_ms = t.now;
    ck_assert_int_eq(fsm_encode_command(&c, &buf, &len), FSM_OK);
    struct fsm_reply reply;
    ck_assert_int_eq(fsm_apply(t.f, fsm_last_applied(t.f) + 1, buf, len, &reply), FSM_OK);
    ck_assert_int_eq(reply.resp->code, C_INVALID);
    ck_assert_str_eq(reply.resp->error, "the job has no user");
    fsm_reply_clear(&reply);
    free(buf);

    /* None of the refusals made a job or used an id. */
    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.jobs, 1);
    ck_assert_uint_eq(st.next_job_id, 2);
    ck_assert_uint_eq(st.rejected, 16);
    ck_assert_uint_eq(submit_plain(&t), 2);

    /* A refusal leaves the state bit for bit as it was (but for the applied index). */
    snapshot(t.f, &snap_before, &snap_len);
    struct t u;
    t_init_bare(&u, NULL);
    char err[FSM_ERR_MAX];
    ck_assert_int_eq(fsm_restore(u.f, snap_before, snap_len, err, sizeof(err)), FSM_OK);
    spec_init(&s);
    s.partition = "nope";
    u.now = t.now;
    submit_expect(&u, &s, C_NOT_FOUND, NULL);
    Spur__Fsm__Command tk = SPUR__FSM__COMMAND__INIT;
    Spur__Fsm__Tick tick_msg = SPUR__FSM__TICK__INIT;
    tk.op_case = SPUR__FSM__COMMAND__OP_TICK;
    tk.tick = &tick_msg;
    expect(&t, &tk, C_OK, NULL); /* same index and time on the untouched one */
    assert_same_snapshot(t.f, u.f);
    free(snap_before);
    t_free(&u);
    t_free(&t);
}
END_TEST

START_TEST(test_no_default_partition)
{
    struct t t;
    t_init_bare(&t, NULL);
    Spur__Api__JobSpec s;
    spec_init(&s);
    submit_expect(&t, &s, C_NOT_FOUND, "no default partition is configured");
    s.partition = "batch";
    submit_expect(&t, &s, C_NOT_FOUND, "partition \"batch\" does not exist");
    t_free(&t);
}
END_TEST

START_TEST(test_cancel)
{
    struct t t;
    t_init(&t);
    uint64_t id = submit_plain(&t);
    t.now += 5000;
    job_op(&t, OP_CANCEL, id, C_OK, NULL);
    struct jobview v;
    view_job(&t, id, &v);
    ck_assert_int_eq(v.job->state, J_CANCELLED);
    ck_assert_uint_eq(v.job->end_time_ms, t.now);
    ck_assert_str_eq(v.job->reason, "None");
    fsm_read_free(&v.rd);
    job_op(&t, OP_CANCEL, id, C_CONFLICT, "job 1 already finished (CANCELLED)");
    job_op(&t, OP_CANCEL, 99, C_NOT_FOUND, "job 99 does not exist");
    job_op(&t, OP_CANCEL, 0, C_INVALID, "job id 0 is not valid");
    t_free(&t);
}
END_TEST

START_TEST(test_hold_release)
{
    struct t t;
    t_init(&t);
    uint64_t id = submit_plain(&t);
    job_op(&t, OP_HOLD, id, C_OK, NULL);
    struct jobview v;
    view_job(&t, id, &v);
    ck_assert(v.job->held);
    ck_assert_str_eq(v.job->reason, "JobHeldUser");
    ck_assert_uint_eq(v.job->eligible_time_ms, 0);
    fsm_read_free(&v.rd);
    job_op(&t, OP_HOLD, id, C_OK, NULL); /* holding a held job changes nothing */

    t.now += 7000;
    job_op(&t, OP_RELEASE, id, C_OK, NULL);
    view_job(&t, id, &v);
    ck_assert(!v.job->held);
    ck_assert_str_eq(v.job->reason, "None");
    ck_assert_uint_eq(v.job->eligible_time_ms, t.now);
    fsm_read_free(&v.rd);

    /* Submitted held. */
    Spur__Api__JobSpec s;
    spec_init(&s);
    s.hold = true;
    uint64_t h = submit(&t, &s);
    check_job(&t, h, J_PENDING, "JobHeldUser");

    /* Only pending jobs can be held or released. */
    job_op(&t, OP_CANCEL, id, C_OK, NULL);
    job_op(&t, OP_HOLD, id, C_CONFLICT, "job 1 is not pending (CANCELLED)");
    job_op(&t, OP_RELEASE, id, C_CONFLICT, "is not pending");
    job_op(&t, OP_HOLD, 42, C_NOT_FOUND, "job 42 does not exist");
    job_op(&t, OP_RELEASE, 0, C_INVALID, NULL);
    t_free(&t);
}
END_TEST

/* scancel with filters by an operator (root): the filters alone decide. */
static Spur__Api__Response *cancel_jobs(struct t *t, Spur__Api__CancelJobsRequest *q)
{
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOBS;
    c.cancel_jobs = q;
    c.user = "root";
    c.caller_operator = true;
    return run(t, &c);
}

START_TEST(test_cancel_jobs_filters)
{
    struct t t;
    t_init(&t);
    Spur__Api__JobSpec s;
    const char *users[] = {"alice", "bob", "bob", "carol", "bob"};
    for (int i = 0; i < 5; i++) {
        spec_init(&s);
        s.name = i == 4 ? "special" : "job";
        Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
        c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
        c.submit_job = &s;
        c.user = (char *)users[i];
        spur__api__response__free_unpacked(run(&t, &c), NULL); /* jobs 1..5 */
    }
    job_op(&t, OP_CANCEL, 3, C_OK, NULL); /* bob's job 3 already cancelled */

    /* Nothing selected at all is refused. */
    Spur__Api__CancelJobsRequest q = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    Spur__Api__Response *r = cancel_jobs(&t, &q);
    ck_assert_int_eq(r->code, C_INVALID);
    ck_assert_str_eq(r->error, "no jobs selected: give job ids or a filter");
    spur__api__response__free_unpacked(r, NULL);

    /* -u bob -n special: job 5 only. */
    char *bob[] = {"bob"};
    char *special[] = {"special"};
    q.n_users = 1;
    q.users = bob;
    q.n_names = 1;
    q.names = special;
    r = cancel_jobs(&t, &q);
    ck_assert_int_eq(r->code, C_OK);
    ck_assert_uint_eq(r->cancel_jobs->n_cancelled, 1);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[0], 5);
    spur__api__response__free_unpacked(r, NULL);

    /* Ids, repeated and out of order: one missing, one done, two cancelled, sorted. */
    uint64_t ids[] = {4, 9, 3, 1, 4};
    Spur__Api__CancelJobsRequest qi = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    qi.n_ids = 5;
    qi.ids = ids;
    r = cancel_jobs(&t, &qi);
    ck_assert_int_eq(r->code, C_OK);
    ck_assert_uint_eq(r->cancel_jobs->n_cancelled, 2);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[0], 1);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[1], 4);
    ck_assert_uint_eq(r->cancel_jobs->n_not_found, 1);
    ck_assert_uint_eq(r->cancel_jobs->not_found[0], 9);
    ck_assert_uint_eq(r->cancel_jobs->n_already_done, 1);
    ck_assert_uint_eq(r->cancel_jobs->already_done[0], 3);
    spur__api__response__free_unpacked(r, NULL);

    /* By state: only job 2 is still pending. */
    Spur__Api__JobState pend[] = {J_PENDING};
    Spur__Api__CancelJobsRequest qs = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    qs.n_states = 1;
    qs.states = pend;
    r = cancel_jobs(&t, &qs);
    ck_assert_uint_eq(r->cancel_jobs->n_cancelled, 1);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[0], 2);
    spur__api__response__free_unpacked(r, NULL);

    Spur__Api__JobState bogus[] = {(Spur__Api__JobState)42};
    qs.states = bogus;
    r = cancel_jobs(&t, &qs);
    ck_assert_int_eq(r->code, C_INVALID);
    spur__api__response__free_unpacked(r, NULL);

    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.jobs_by_state[J_CANCELLED], 5);
    ck_assert_uint_eq(st.jobs_by_state[J_PENDING], 0);
    t_free(&t);
}
END_TEST

/* ---- ownership: who may act on a job (command version 2) --------------------------------- */

#define C_DENIED SPUR__API__CODE__CODE_DENIED

static Spur__Api__Caller caller_of(const char *user, uint32_t uid, bool op)
{
    Spur__Api__Caller c = SPUR__API__CALLER__INIT;
    c.user = (char *)user;
    c.uid = uid;
    c.gid = uid + 50;
    c.operator_ = op;
    c.method = "socket";
    return c;
}

/* A request from who, the worker's way: fsm_encode_request(), applied; the response. */
static Spur__Api__Response *request_as(struct t *t, Spur__Api__Caller *who, Spur__Api__Request *req)
{
    req->caller = who;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fsm_encode_request(req, t->now, &buf, &len), FSM_OK);
    struct fsm_reply reply;
    ck_assert_int_eq(fsm_apply(t->f, fsm_last_applied(t->f) + 1, buf, len, &reply), FSM_OK);
    free(buf);
    ck_assert_ptr_nonnull(reply.resp);
    Spur__Api__Response *r = reply.resp;
    reply.resp = NULL;
    return r;
}

static uint64_t submit_by(struct t *t, Spur__Api__Caller *who)
{
    Spur__Api__JobSpec s;
    spec_init(&s);
    Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
    sj.spec = &s;
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
    req.submit_job = &sj;
    Spur__Api__Response *r = request_as(t, who, &req);
    ck_assert_int_eq(r->code, C_OK);
    uint64_t id = r->submit_job->job_id;
    spur__api__response__free_unpacked(r, NULL);
    return id;
}

/* cancel / hold / release of id by who; checks the code (and the denial's exact line). */
static void job_op_by(struct t *t, Spur__Api__Caller *who, enum job_op op, uint64_t id, int code)
{
    Spur__Api__JobIdRequest q = SPUR__API__JOB_ID_REQUEST__INIT;
    q.job_id = id;
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    switch (op) {
    case OP_CANCEL:
        req.op_case = SPUR__API__REQUEST__OP_CANCEL_JOB;
        req.cancel_job = &q;
        break;
    case OP_HOLD:
        req.op_case = SPUR__API__REQUEST__OP_HOLD_JOB;
        req.hold_job = &q;
        break;
    case OP_RELEASE:
        req.op_case = SPUR__API__REQUEST__OP_RELEASE_JOB;
        req.release_job = &q;
        break;
    }
    Spur__Api__Response *r = request_as(t, who, &req);
    ck_assert_msg((int)r->code == code, "op %d of job %llu by %s: code %d (\"%s\"), want %d", op,
                  (unsigned long long)id, who->user, r->code, r->error, code);
    if (code == C_DENIED)
        ck_assert_str_eq(r->error, "Access/permission denied");
    spur__api__response__free_unpacked(r, NULL);
}

static void check_held(struct t *t, uint64_t id, int state, bool held)
{
    struct jobview v;
    view_job(t, id, &v);
    ck_assert_ptr_nonnull(v.job);
    ck_assert_int_eq(v.job->state, state);
    ck_assert_int_eq(v.job->held, held);
    fsm_read_free(&v.rd);
}

START_TEST(test_owner_rules)
{
    struct t t;
    t_init(&t);
    Spur__Api__Caller alice = caller_of("alice", 1001, false);
    Spur__Api__Caller bob = caller_of("bob", 1002, false);
    Spur__Api__Caller root = caller_of("root", 0, true);
    Spur__Api__Caller admin = caller_of("admin", 1500, true); /* controller.admin_users */
    uint64_t a = submit_by(&t, &alice);
    uint64_t b = submit_by(&t, &bob);

    /* bob may not touch alice's job: each refusal leaves it exactly as it was. */
    job_op_by(&t, &bob, OP_HOLD, a, C_DENIED);
    check_held(&t, a, J_PENDING, false);
    job_op_by(&t, &bob, OP_CANCEL, a, C_DENIED);
    check_held(&t, a, J_PENDING, false);
    /* A job that does not exist is not found for anyone (no ownership to decide). */
    job_op_by(&t, &bob, OP_CANCEL, 99, C_NOT_FOUND);

    /* An operator may: admin holds it; bob still may not release it; its owner may. */
    job_op_by(&t, &admin, OP_HOLD, a, C_OK);
    check_held(&t, a, J_PENDING, true);
    job_op_by(&t, &bob, OP_RELEASE, a, C_DENIED);
    check_held(&t, a, J_PENDING, true);
    job_op_by(&t, &alice, OP_RELEASE, a, C_OK);
    check_held(&t, a, J_PENDING, false);

    /* The owner holds and cancels their own; root cancels bob's. */
    job_op_by(&t, &alice, OP_HOLD, a, C_OK);
    check_held(&t, a, J_PENDING, true);
    job_op_by(&t, &alice, OP_CANCEL, a, C_OK);
    check_job(&t, a, J_CANCELLED, NULL);
    job_op_by(&t, &alice, OP_CANCEL, b, C_DENIED);
    check_held(&t, b, J_PENDING, false);
    job_op_by(&t, &root, OP_CANCEL, b, C_OK);
    check_job(&t, b, J_CANCELLED, NULL);

    /* Ownership is the uid: the same name with another uid is someone else. */
    Spur__Api__Caller alice2 = caller_of("alice", 2001, false);
    uint64_t c = submit_by(&t, &alice);
    job_op_by(&t, &alice2, OP_CANCEL, c, C_DENIED);
    check_held(&t, c, J_PENDING, false);
    t_free(&t);
}
END_TEST

/* Submitted as the caller, whatever the spec says (user, uid, gid). */
START_TEST(test_submit_forged_spec)
{
    struct t t;
    t_init(&t);
    Spur__Api__Caller alice = caller_of("alice", 1001, false);
    Spur__Api__JobSpec s;
    spec_init(&s);
    s.user = "root";
    s.uid = 0;
    s.gid = 0;
    Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
    sj.spec = &s;
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
    req.submit_job = &sj;
    req.user = "root"; /* what the client claims */
    Spur__Api__Response *r = request_as(&t, &alice, &req);
    ck_assert_int_eq(r->code, C_OK);
    uint64_t id = r->submit_job->job_id;
    spur__api__response__free_unpacked(r, NULL);
    /* The client's spec is not modified by the encoder (a shallow copy). */
    ck_assert_str_eq(s.user, "root");
    ck_assert_uint_eq(s.uid, 0);
    struct jobview v;
    view_job(&t, id, &v);
    ck_assert_str_eq(v.job->spec->user, "alice");
    ck_assert_uint_eq(v.job->spec->uid, 1001);
    ck_assert_uint_eq(v.job->spec->gid, 1051);
    fsm_read_free(&v.rd);
    /* And it is alice's: another user may not cancel it, alice may. */
    Spur__Api__Caller other = caller_of("mallory", 1003, false);
    job_op_by(&t, &other, OP_CANCEL, id, C_DENIED);
    job_op_by(&t, &alice, OP_CANCEL, id, C_OK);
    t_free(&t);
}
END_TEST

/* A write without a proved caller is never encoded (never taken for an operator's). */
START_TEST(test_encode_needs_caller)
{
    Spur__Api__Request w = SPUR__API__REQUEST__INIT;
    int writes[] = {SPUR__API__REQUEST__OP_CANCEL_JOB,  SPUR__API__REQUEST__OP_CANCEL_JOBS,
                    SPUR__API__REQUEST__OP_HOLD_JOB,    SPUR__API__REQUEST__OP_RELEASE_JOB,
                    SPUR__API__REQUEST__OP_UPDATE_NODE, SPUR__API__REQUEST__OP_REGISTER_NODE,
                    SPUR__API__REQUEST__OP_SUBMIT_JOB};
    uint8_t *buf = NULL;
    size_t len = 0;
    for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
        w.op_case = (Spur__Api__Request__OpCase)writes[i];
        w.user = "root"; /* Request.user is only a claim */
        ck_assert_int_eq(fsm_encode_request(&w, 1, &buf, &len), FSM_EINVAL);
        ck_assert_ptr_null(buf);
    }
    /* With one, the command carries it and this build's version. */
    Spur__Api__Caller bob = caller_of("bob", 1002, false);
    w.caller = &bob;
    w.op_case = SPUR__API__REQUEST__OP_CANCEL_JOB;
    ck_assert_int_eq(fsm_encode_request(&w, 1, &buf, &len), FSM_OK);
    Spur__Fsm__Command *c = spur__fsm__command__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(c->version, FSM_COMMAND_VERSION);
    ck_assert_str_eq(c->user, "bob");
    ck_assert_uint_eq(c->caller_uid, 1002);
    ck_assert(!c->caller_operator);
    spur__fsm__command__free_unpacked(c, NULL);
    free(buf);
    bob.operator_ = true;
    ck_assert_int_eq(fsm_encode_request(&w, 1, &buf, &len), FSM_OK);
    c = spur__fsm__command__unpack(NULL, len, buf);
    ck_assert(c->caller_operator);
    spur__fsm__command__free_unpacked(c, NULL);
    free(buf);
}
END_TEST

/* A version 1 entry (a log written before ownership) applies as it did: no check. */
START_TEST(test_v1_command_unchecked)
{
    struct t t;
    t_init(&t);
    Spur__Api__Caller alice = caller_of("alice", 1001, false);
    uint64_t a = submit_by(&t, &alice);
    uint64_t b = submit_by(&t, &alice);
    uint64_t c = submit_by(&t, &alice);
    enum job_op ops[] = {OP_HOLD, OP_RELEASE, OP_CANCEL};
    for (size_t i = 0; i < 3; i++) {
        Spur__Api__JobIdRequest q = SPUR__API__JOB_ID_REQUEST__INIT;
        q.job_id = a;
        Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
        cmd.version = 1;
        cmd.user = "bob";
        cmd.caller_uid = 1002; /* not the owner, not an operator */
        if (ops[i] == OP_HOLD) {
            cmd.op_case = SPUR__FSM__COMMAND__OP_HOLD_JOB;
            cmd.hold_job = &q;
        } else if (ops[i] == OP_RELEASE) {
            cmd.op_case = SPUR__FSM__COMMAND__OP_RELEASE_JOB;
            cmd.release_job = &q;
        } else {
            cmd.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOB;
            cmd.cancel_job = &q;
        }
        expect(&t, &cmd, C_OK, NULL);
        /* The same command at version 2 is refused. */
        cmd.version = 2;
        q.job_id = b;
        expect(&t, &cmd, C_DENIED, "Access/permission denied");
    }
    check_job(&t, a, J_CANCELLED, NULL);
    check_held(&t, b, J_PENDING, false);

    /* cancel_jobs: a v1 "-u alice" by bob cancels alice's jobs, as it did then. */
    char *users[] = {"alice"};
    Spur__Api__CancelJobsRequest q = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    q.n_users = 1;
    q.users = users;
    Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
    cmd.version = 1;
    cmd.user = "bob";
    cmd.caller_uid = 1002;
    cmd.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOBS;
    cmd.cancel_jobs = &q;
    Spur__Api__Response *r = expect_resp(&t, &cmd, C_OK, NULL);
    ck_assert_uint_eq(r->cancel_jobs->n_cancelled, 2);
    ck_assert_uint_eq(r->cancel_jobs->n_denied, 0);
    spur__api__response__free_unpacked(r, NULL);
    check_job(&t, b, J_CANCELLED, NULL);
    check_job(&t, c, J_CANCELLED, NULL);
    t_free(&t);
}
END_TEST

static Spur__Api__Response *cancel_jobs_by(struct t *t, Spur__Api__Caller *who,
                                           Spur__Api__CancelJobsRequest *q)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    req.op_case = SPUR__API__REQUEST__OP_CANCEL_JOBS;
    req.cancel_jobs = q;
    return request_as(t, who, &req);
}

/* scancel with filters by a user reaches only their jobs; others' named by id are denied. */
START_TEST(test_cancel_jobs_ownership)
{
    struct t t;
    t_init(&t);
    Spur__Api__Caller alice = caller_of("alice", 1001, false);
    Spur__Api__Caller bob = caller_of("bob", 1002, false);
    Spur__Api__Caller root = caller_of("root", 0, true);
    uint64_t a1 = submit_by(&t, &alice), a2 = submit_by(&t, &alice);
    uint64_t b1 = submit_by(&t, &bob), b2 = submit_by(&t, &bob), b3 = submit_by(&t, &bob);

    /* Ids, mixed: bob's own cancelled, alice's denied (and untouched), a missing one. */
    uint64_t ids[] = {a1, b1, 99};
    Spur__Api__CancelJobsRequest qi = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    qi.n_ids = 3;
    qi.ids = ids;
    Spur__Api__Response *r = cancel_jobs_by(&t, &bob, &qi);
    ck_assert_int_eq(r->code, C_OK);
    ck_assert_uint_eq(r->cancel_jobs->n_cancelled, 1);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[0], b1);
    ck_assert_uint_eq(r->cancel_jobs->n_denied, 1);
    ck_assert_uint_eq(r->cancel_jobs->denied[0], a1);
    ck_assert_uint_eq(r->cancel_jobs->n_not_found, 1);
    ck_assert_uint_eq(r->cancel_jobs->not_found[0], 99);
    spur__api__response__free_unpacked(r, NULL);
    check_job(&t, a1, J_PENDING, NULL);
    check_job(&t, b1, J_CANCELLED, NULL);

    /* -u alice by bob: refused whole, nothing cancelled. So is -u bob,alice. */
    char *u_alice[] = {"alice"};
    char *u_both[] = {"bob", "alice"};
    Spur__Api__CancelJobsRequest qu = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    qu.n_users = 1;
    qu.users = u_alice;
    r = cancel_jobs_by(&t, &bob, &qu);
    ck_assert_int_eq(r->code, C_DENIED);
    ck_assert_str_eq(r->error, "Access/permission denied");
    spur__api__response__free_unpacked(r, NULL);
    qu.n_users = 2;
    qu.users = u_both;
    r = cancel_jobs_by(&t, &bob, &qu);
    ck_assert_int_eq(r->code, C_DENIED);
    spur__api__response__free_unpacked(r, NULL);
    check_job(&t, a1, J_PENDING, NULL);
    check_job(&t, a2, J_PENDING, NULL);
    check_job(&t, b2, J_PENDING, NULL);

    /* -t PENDING by alice (no -u): only alice's pending jobs, bob's stay. */
    Spur__Api__JobState pend[] = {J_PENDING};
    Spur__Api__CancelJobsRequest qs = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    qs.n_states = 1;
    qs.states = pend;
    r = cancel_jobs_by(&t, &alice, &qs);
    ck_assert_int_eq(r->code, C_OK);
    ck_assert_uint_eq(r->cancel_jobs->n_cancelled, 2);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[0], a1);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[1], a2);
    ck_assert_uint_eq(r->cancel_jobs->n_denied, 0);
    spur__api__response__free_unpacked(r, NULL);
    check_job(&t, b2, J_PENDING, NULL);
    check_job(&t, b3, J_PENDING, NULL);

    /* -u bob -t PENDING by bob himself: his own. */
    char *u_bob[] = {"bob"};
    qs.n_users = 1;
    qs.users = u_bob;
    uint64_t b2ids[] = {b2};
    qs.n_ids = 1;
    qs.ids = b2ids;
    r = cancel_jobs_by(&t, &bob, &qs);
    ck_assert_int_eq(r->code, C_OK);
    ck_assert_uint_eq(r->cancel_jobs->n_cancelled, 1);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[0], b2);
    spur__api__response__free_unpacked(r, NULL);

    /* An operator's -u bob: bob's last one. */
    qu.n_users = 1;
    qu.users = u_bob;
    r = cancel_jobs_by(&t, &root, &qu);
    ck_assert_int_eq(r->code, C_OK);
    ck_assert_uint_eq(r->cancel_jobs->n_cancelled, 1);
    ck_assert_uint_eq(r->cancel_jobs->cancelled[0], b3);
    spur__api__response__free_unpacked(r, NULL);
    t_free(&t);
}
END_TEST

/* ---- nodes ------------------------------------------------------------------------------ */

START_TEST(test_node_updates)
{
    struct t t;
    t_init(&t);
    char reason[64];
    ck_assert_int_eq(node_state(&t, "n1", NULL, NULL, 0), N_IDLE);
    update_node(&t, "n1", "drain", "", C_INVALID, "a reason is required to drain a node");
    update_node(&t, "n1", "down", NULL, C_INVALID, "a reason is required to down a node");
    update_node(&t, "n1", "sideways", "x", C_INVALID, "unknown node state \"sideways\"");
    update_node(&t, "zz", "drain", "x", C_NOT_FOUND, "node \"zz\" does not exist");
    update_node(&t, "n1", "resume", NULL, C_CONFLICT, "is not down, drained or draining");
    ck_assert_int_eq(node_state(&t, "n1", NULL, NULL, 0), N_IDLE);

    update_node(&t, "n1", "DRAIN", "disk swap", C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "n1", NULL, reason, sizeof(reason)), N_DRAINED);
    ck_assert_str_eq(reason, "disk swap");
    update_node(&t, "n1", "resume", NULL, C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "n1", NULL, reason, sizeof(reason)), N_IDLE);
    ck_assert_str_eq(reason, "");

    update_node(&t, "n2", "down", "power", C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "n2", NULL, NULL, 0), N_DOWN);
    update_node(&t, "n2", "idle", NULL, C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "n2", NULL, NULL, 0), N_IDLE);

    /* Draining nodes take no new work: a one-node job on small waits while both drain. */
    update_node(&t, "n1", "drain", "a", C_OK, NULL);
    update_node(&t, "n2", "drain", "b", C_OK, NULL);
    Spur__Api__JobSpec s;
    spec_init(&s);
    s.partition = "small";
    uint64_t id = submit(&t, &s);
    check_job(&t, id, J_PENDING, "ReqNodeNotAvail");
    update_node(&t, "n2", "undrain", NULL, C_OK, NULL);
    check_job(&t, id, J_PENDING, "None");
    update_node(&t, "n2", "undrain", NULL, C_CONFLICT, "is not drained or draining");

    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.nodes, 6); /* n1..n4 and the placeholders g1, g2 */
    ck_assert_uint_eq(st.nodes_by_state[N_DRAINED], 1);
    ck_assert_uint_eq(st.nodes_by_state[N_IDLE], 3);
    ck_assert_uint_eq(st.nodes_by_state[N_UNKNOWN], 2);
    t_free(&t);
}
END_TEST

START_TEST(test_register_node)
{
    struct t t;
    t_init(&t);
    /* g1 is a placeholder named by partition gpu. */
    ck_assert_int_eq(node_state(&t, "g1", NULL, NULL, 0), N_UNKNOWN);
    register_node(&t, "g1", 64, 512000, C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "g1", NULL, NULL, 0), N_IDLE);
    register_node(&t, "bad name", 4, 0, C_INVALID, "node name \"bad name\" is not 1 to 64");
    register_node(&t, "n9", 0, 0, C_INVALID, "0 CPUs");
    register_node(&t, "n9", 2, 100, C_OK, NULL);
    register_node(&t, "n9", 4, 200, C_OK, NULL); /* re-registration updates */

    char *names[] = {"n9"};
    Spur__Api__GetNodesRequest q = SPUR__API__GET_NODES_REQUEST__INIT;
    q.n_names = 1;
    q.names = names;
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_nodes(t.f, &q, &rd), FSM_OK);
    const Spur__Api__Node *n = rd.resp.nodes->nodes[0];
    ck_assert_uint_eq(n->cpus, 4);
    ck_assert_uint_eq(n->mem_mb, 200);
    ck_assert_str_eq(n->address, "10.0.0.1:6818");
    ck_assert_uint_eq(n->n_features, 2);
    ck_assert_str_eq(n->features[1], "ssd");
    ck_assert_uint_eq(n->last_seen_ms, t.now);
    ck_assert_uint_eq(n->n_partitions, 2); /* batch (ALL) and closed (ALL) */
    ck_assert_str_eq(n->partitions[0], "batch");
    fsm_read_free(&rd);

    /* A down node stays down when it registers again: an operator's mark wins. */
    update_node(&t, "n9", "down", "broken", C_OK, NULL);
    register_node(&t, "n9", 4, 200, C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "n9", NULL, NULL, 0), N_DOWN);

    /* Heartbeats: known registered nodes only. */
    Spur__Fsm__NodeHeartbeat hb = SPUR__FSM__NODE_HEARTBEAT__INIT;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_NODE_HEARTBEAT;
    c.node_heartbeat = &hb;
    hb.name = "g2";
    expect(&t, &c, C_CONFLICT, "node \"g2\" has not registered");
    hb.name = "nx";
    expect(&t, &c, C_NOT_FOUND, NULL);
    hb.name = "n1";
    t.now += 1234;
    expect(&t, &c, C_OK, NULL);
    names[0] = "n1";
    ck_assert_int_eq(fsm_get_nodes(t.f, &q, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.nodes->nodes[0]->last_seen_ms, t.now);
    fsm_read_free(&rd);
    t_free(&t);
}
END_TEST

START_TEST(test_running_jobs)
{
    struct t t;
    t_init(&t);
    uint32_t alloc;
    Spur__Api__JobSpec s;
    spec_init(&s);
    s.nodes = 2;
    s.ntasks = 4;
    s.cpus_per_task = 2; /* 4 CPUs on each of 2 nodes */
    s.mem_mb = 100;
    uint64_t a = submit(&t, &s);
    char *n12[] = {"n1", "n2"};
    char *n1only[] = {"n1"};
    char *n11[] = {"n1", "n1"};
    char *nx[] = {"n1", "zz"};
    start_job(&t, a, n1only, 1, C_INVALID, "needs 2 nodes, not 1");
    start_job(&t, a, n11, 2, C_INVALID, "named twice");
    start_job(&t, a, nx, 2, C_NOT_FOUND, "node \"zz\" does not exist");
    start_job(&t, 77, n12, 2, C_NOT_FOUND, NULL);
    t.now += 100;
    start_job(&t, a, n12, 2, C_OK, NULL);
    start_job(&t, a, n12, 2, C_CONFLICT, "is not pending (RUNNING)");
    struct jobview v;
    view_job(&t, a, &v);
    ck_assert_int_eq(v.job->state, J_RUNNING);
    ck_assert_uint_eq(v.job->start_time_ms, t.now);
    ck_assert_uint_eq(v.job->n_node_list, 2);
    ck_assert_str_eq(v.job->node_list[1], "n2");
    fsm_read_free(&v.rd);
    ck_assert_int_eq(node_state(&t, "n1", &alloc, NULL, 0), N_MIXED);
    ck_assert_uint_eq(alloc, 4);

    /* Fill n1: a second 4-CPU job makes it ALLOCATED; a third does not fit. */
    spec_init(&s);
    s.ntasks = 4;
    uint64_t b = submit(&t, &s);
    start_job(&t, b, n1only, 1, C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "n1", &alloc, NULL, 0), N_ALLOCATED);
    ck_assert_uint_eq(alloc, 8);
    uint64_t c = submit(&t, &s);
    start_job(&t, c, n1only, 1, C_CONFLICT, "cannot take job");

    /* Drain of an allocated node: DRAINING until its jobs end, then DRAINED. */
    update_node(&t, "n1", "drain", "maintenance", C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "n1", NULL, NULL, 0), N_DRAINING);
    complete_job(&t, b, "n2", 0, false, C_INVALID, "does not run on node \"n2\"");
    complete_job(&t, b, "n1", 0, false, C_OK, NULL);
    check_job(&t, b, J_COMPLETED, "None");
    complete_job(&t, b, "n1", 0, false, C_OK, NULL); /* a finished job: acked, no change */
    check_job(&t, b, J_COMPLETED, "None");
    ck_assert_int_eq(node_state(&t, "n1", NULL, NULL, 0), N_DRAINING); /* job a is there */

    /* Job a: one node reports (COMPLETING), the other fails it. */
    complete_job(&t, a, "n2", 3, false, C_OK, NULL);
    check_job(&t, a, J_COMPLETING, "None");
    complete_job(&t, a, "n2", 0, false, C_OK, NULL); /* a duplicate: acked, no change */
    check_job(&t, a, J_COMPLETING, "None");
    complete_job(&t, a, "n1", 0, false, C_OK, NULL);
    view_job(&t, a, &v);
    ck_assert_int_eq(v.job->state, J_FAILED);
    ck_assert_int_eq(v.job->exit_code, 3);
    ck_assert_str_eq(v.job->reason, "NonZeroExitCode");
    fsm_read_free(&v.rd);
    ck_assert_int_eq(node_state(&t, "n1", &alloc, NULL, 0), N_DRAINED);
    ck_assert_uint_eq(alloc, 0);
    ck_assert_int_eq(node_state(&t, "n2", &alloc, NULL, 0), N_IDLE);

    /* Timeout. */
    start_job(&t, c, (char *[]){"n3"}, 1, C_OK, NULL);
    complete_job(&t, c, "n3", 0, true, C_OK, NULL);
    check_job(&t, c, J_TIMEOUT, "TimeLimit");

    /* Cancel while running: COMPLETING until the node reports, then CANCELLED. */
    uint64_t d = submit(&t, &s);
    start_job(&t, d, (char *[]){"n3"}, 1, C_OK, NULL);
    job_op(&t, OP_CANCEL, d, C_OK, NULL);
    check_job(&t, d, J_COMPLETING, NULL);
    job_op(&t, OP_CANCEL, d, C_OK, NULL); /* still being stopped: fine */
    complete_job(&t, d, "n3", 137, false, C_OK, NULL);
    check_job(&t, d, J_CANCELLED, "None");

    /* A node going down fails the jobs on it and frees their other nodes. */
    spec_init(&s);
    s.nodes = 2;
    uint64_t e = submit(&t, &s);
    char *n34[] = {"n3", "n4"};
    start_job(&t, e, n34, 2, C_OK, NULL);
    ck_assert_int_eq(node_state(&t, "n4", NULL, NULL, 0), N_MIXED);
    t.now += 10;
    update_node(&t, "n3", "down", "kernel panic", C_OK, NULL);
    view_job(&t, e, &v);
    ck_assert_int_eq(v.job->state, J_NODE_FAIL);
    ck_assert_str_eq(v.job->reason, "NodeFail");
    ck_assert_uint_eq(v.job->end_time_ms, t.now);
    fsm_read_free(&v.rd);
    ck_assert_int_eq(node_state(&t, "n4", &alloc, NULL, 0), N_IDLE);
    ck_assert_uint_eq(alloc, 0);
    start_job(&t, submit(&t, &s), n34, 2, C_CONFLICT, "node \"n3\" cannot take job");

    /* Held jobs and jobs outside the partition's nodes cannot start. */
    spec_init(&s);
    s.hold = true;
    start_job(&t, submit(&t, &s), (char *[]){"n4"}, 1, C_CONFLICT, "is held");
    spec_init(&s);
    s.partition = "small";
    start_job(&t, submit(&t, &s), (char *[]){"n4"}, 1, C_CONFLICT, "not in partition small");
    t_free(&t);
}
END_TEST

/* ---- partitions and settings -------------------------------------------------------------- */

static void set_partitions(struct t *t, Spur__Api__Partition **pp, size_t n, int code,
                           const char *err)
{
    Spur__Fsm__SetPartitions sp = SPUR__FSM__SET_PARTITIONS__INIT;
    sp.n_partitions = n;
    sp.partitions = pp;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_PARTITIONS;
    c.set_partitions = &sp;
    expect(t, &c, code, err);
}

START_TEST(test_partitions)
{
    struct t t;
    t_init(&t);
    Spur__Api__Partition p[2];
    Spur__Api__Partition *pp[2] = {&p[0], &p[1]};
    for (int i = 0; i < 2; i++) {
        spur__api__partition__init(&p[i]);
        p[i].nodes_expr = "ALL";
        p[i].up = true;
    }
    p[0].name = "a";
    p[1].name = "a";
    set_partitions(&t, pp, 2, C_INVALID, "partition \"a\" is listed twice");
    p[1].name = "b";
    p[0].is_default = p[1].is_default = true;
    set_partitions(&t, pp, 2, C_INVALID, "2 partitions are marked default");
    p[1].is_default = false;
    p[1].name = "bad name";
    set_partitions(&t, pp, 2, C_INVALID, "partition name \"bad name\"");
    char *dup[] = {"x1", "x1"};
    p[1].name = "b";
    p[1].nodes_expr = "x1,x1";
    p[1].n_nodes = 2;
    p[1].nodes = dup;
    set_partitions(&t, pp, 2, C_INVALID, "names node \"x1\" twice");

    /* The refusals left the standard partitions in place. */
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_partitions(t.f, NULL, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.partitions->n_partitions, 4);
    const Spur__Api__Partition *batch = rd.resp.partitions->partitions[0];
    ck_assert_str_eq(batch->name, "batch");
    ck_assert(batch->is_default);
    ck_assert_str_eq(batch->nodes_expr, "ALL");
    ck_assert_uint_eq(batch->n_nodes, 6); /* ALL: every node, by name */
    ck_assert_str_eq(batch->nodes[0], "g1");
    ck_assert_str_eq(rd.resp.partitions->partitions[1]->name, "small");
    ck_assert_uint_eq(rd.resp.partitions->partitions[1]->max_time_min, 60);
    fsm_read_free(&rd);

    /* Replace: none marked default makes the first the default; g1, g2 placeholders go. */
    char *one[] = {"n1"};
    p[0].is_default = false;
    p[1].nodes_expr = "n1";
    p[1].n_nodes = 1;
    p[1].nodes = one;
    set_partitions(&t, pp, 2, C_OK, NULL);
    ck_assert_int_eq(fsm_get_partitions(t.f, NULL, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.partitions->n_partitions, 2);
    ck_assert(rd.resp.partitions->partitions[0]->is_default);
    ck_assert(!rd.resp.partitions->partitions[1]->is_default);
    fsm_read_free(&rd);
    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.nodes, 4);

    char *names[] = {"nope"};
    Spur__Api__GetPartitionsRequest q = SPUR__API__GET_PARTITIONS_REQUEST__INIT;
    q.n_names = 1;
    q.names = names;
    ck_assert_int_eq(fsm_get_partitions(t.f, &q, &rd), FSM_OK);
    ck_assert_int_eq(rd.resp.code, C_NOT_FOUND);
    ck_assert_str_eq(rd.resp.error, "partition \"nope\" does not exist");
    fsm_read_free(&rd);

    /* A pending job whose partition goes away waits with PartitionConfig. */
    Spur__Api__JobSpec s;
    spec_init(&s);
    s.partition = "b";
    uint64_t id = submit(&t, &s);
    p[1].name = "c";
    set_partitions(&t, pp, 2, C_OK, NULL);
    check_job(&t, id, J_PENDING, "PartitionConfig");
    /* And one whose partition goes down, PartitionDown. */
    spec_init(&s);
    s.partition = "a";
    id = submit(&t, &s);
    p[0].up = false;
    set_partitions(&t, pp, 2, C_OK, NULL);
    check_job(&t, id, J_PENDING, "PartitionDown");
    t_free(&t);
}
END_TEST

/* The configuration's partitions and settings as the controller hands them over. */
static struct controller_fsm_conf *conf_of(const struct cfg *c, struct controller_fsm_conf *out)
{
    controller_fsm_conf_free(out);
    ck_assert_int_eq(controller_fsm_conf(c, out), 0);
    return out;
}

START_TEST(test_config_sync)
{
    struct t t;
    t_init_bare(&t, NULL);
    struct cfg c;
    struct controller_fsm_conf k = {0};
    ck_assert_int_eq(cfg_defaults(&c), 0);
    conf_of(&c, &k);
    ck_assert(fsm_partitions_differ(t.f, k.parts, k.n));
    conf_of(&c, &k);
    ck_assert(!fsm_settings_differ(t.f, &k.settings)); /* the built-in defaults match cfg's */

    uint8_t *buf;
    size_t len;
    char err[FSM_ERR_MAX];
    conf_of(&c, &k);
    ck_assert_int_eq(fsm_encode_set_partitions(k.parts, k.n, t.now, &buf, &len, err, sizeof(err)),
                     FSM_OK);
    struct fsm_reply reply;
    ck_assert_int_eq(fsm_apply(t.f, 1, buf, len, &reply), FSM_OK);
    ck_assert_int_eq(reply.resp->code, C_OK);
    fsm_reply_clear(&reply);
    free(buf);
    conf_of(&c, &k);
    ck_assert(!fsm_partitions_differ(t.f, k.parts, k.n));

    /* A list with blanks and repeats is cleaned up before it is proposed. */
    char *old = c.partitions[0].nodes;
    c.partitions[0].nodes = " b1, a1 ,,b1,c1";
    conf_of(&c, &k);
    ck_assert(fsm_partitions_differ(t.f, k.parts, k.n));
    conf_of(&c, &k);
    ck_assert_int_eq(fsm_encode_set_partitions(k.parts, k.n, t.now, &buf, &len, err, sizeof(err)),
                     FSM_OK);
    ck_assert_int_eq(fsm_apply(t.f, 2, buf, len, NULL), FSM_OK);
    free(buf);
    conf_of(&c, &k);
    ck_assert(!fsm_partitions_differ(t.f, k.parts, k.n));
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_partitions(t.f, NULL, &rd), FSM_OK);
    const Spur__Api__Partition *p = rd.resp.partitions->partitions[0];
    ck_assert_uint_eq(p->n_nodes, 3);
    ck_assert_str_eq(p->nodes[0], "b1");
    ck_assert_str_eq(p->nodes[1], "a1");
    ck_assert_str_eq(p->nodes[2], "c1");
    fsm_read_free(&rd);

    /* A configuration apply would refuse is refused here, before the log. */
    c.partitions[0].nodes = "ok1,bad/name";
    conf_of(&c, &k);
    ck_assert_int_eq(fsm_encode_set_partitions(k.parts, k.n, t.now, &buf, &len, err, sizeof(err)),
                     FSM_EINVAL);
    ck_assert_msg(strstr(err, "bad/name") != NULL, "%s", err);
    c.partitions[0].nodes = old;

    /* Settings. */
    c.controller.finished_job_retention_s = 30;
    conf_of(&c, &k);
    ck_assert(fsm_settings_differ(t.f, &k.settings));
    conf_of(&c, &k);
    ck_assert_int_eq(fsm_encode_set_settings(&k.settings, t.now, &buf, &len), FSM_OK);
    ck_assert_int_eq(fsm_apply(t.f, 3, buf, len, NULL), FSM_OK);
    free(buf);
    conf_of(&c, &k);
    ck_assert(!fsm_settings_differ(t.f, &k.settings));
    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.finished_job_retention_s, 30);
    controller_fsm_conf_free(&k);
    cfg_free(&c);

    set_settings(&t, 400u * 86400u, 100, C_INVALID, "retention");
    set_settings(&t, 10, 0, C_INVALID, "max script bytes 0");
    set_settings(&t, 10, 100, C_OK, NULL);
    Spur__Api__JobSpec s;
    spec_init(&s);
    static uint8_t script[101];
    memset(script, '#', sizeof(script));
    s.script.data = script;
    s.script.len = sizeof(script);
    submit_expect(&t, &s, C_TOO_LARGE, "the job script is 101 bytes; the limit is 100");
    s.script.len = 100;
    submit(&t, &s);
    t_free(&t);
}
END_TEST

START_TEST(test_retention)
{
    struct t t;
    t_init(&t);
    set_settings(&t, 60, 1u << 20, C_OK, NULL);
    uint64_t a = submit_plain(&t);
    uint64_t b = submit_plain(&t);
    uint64_t end = t.now;
    job_op(&t, OP_CANCEL, a, C_OK, NULL);
    t.now += 30000;
    job_op(&t, OP_CANCEL, b, C_OK, NULL);

    t.now = end + 59999;
    tick(&t);
    ck_assert(job_exists(&t, a));
    t.now = end + 60000; /* a ended exactly 60 s ago: purged before this entry applies */
    tick(&t);
    ck_assert(!job_exists(&t, a));
    ck_assert(job_exists(&t, b));

    /* A leader whose clock lags does not move the log clock back (nor un-purge). */
    t.now = end;
    tick(&t);
    ck_assert_uint_eq(fsm_log_time_ms(t.f), end + 60000);

    /* Longer retention keeps b; shorter purges it, from the next entry on. */
    set_settings(&t, 3600, 1u << 20, C_OK, NULL);
    t.now = end + 100000;
    tick(&t);
    ck_assert(job_exists(&t, b));
    set_settings(&t, 10, 1u << 20, C_OK, NULL);
    ck_assert(job_exists(&t, b));
    tick(&t);
    ck_assert(!job_exists(&t, b));

    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.purged_jobs, 2);
    ck_assert_uint_eq(st.jobs, 0);
    ck_assert_uint_eq(st.jobs_by_state[J_CANCELLED], 0);
    /* Ids are never reused. */
    ck_assert_uint_eq(submit_plain(&t), 3);
    t_free(&t);
}
END_TEST

/* ---- sessions ----------------------------------------------------------------------------- */

static Spur__Api__Response *submit_as(struct t *t, uint64_t client, uint64_t seq, bool *dup)
{
    Spur__Api__JobSpec s;
    spec_init(&s);
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    c.client_id = client;
    c.seq = seq;
    c.time_ms = t->now;
    c.user = "alice";
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fsm_encode_command(&c, &buf, &len), FSM_OK);
    struct fsm_reply reply;
    ck_assert_int_eq(fsm_apply(t->f, fsm_last_applied(t->f) + 1, buf, len, &reply), FSM_OK);
    free(buf);
    ck_assert_uint_eq(reply.client_id, client);
    ck_assert_uint_eq(reply.seq, seq);
    if (dup != NULL)
        *dup = reply.duplicate;
    return reply.resp;
}

static uint64_t submit_id_as(struct t *t, uint64_t client, uint64_t seq, bool *dup)
{
    Spur__Api__Response *r = submit_as(t, client, seq, dup);
    ck_assert_int_eq(r->code, C_OK);
    uint64_t id = r->submit_job->job_id;
    spur__api__response__free_unpacked(r, NULL);
    return id;
}

START_TEST(test_session_dedup)
{
    struct t t;
    t_init(&t);
    bool dup;
    uint64_t a = submit_id_as(&t, 7, 1, &dup);
    ck_assert(!dup);
    uint64_t again = submit_id_as(&t, 7, 1, &dup); /* the retry after a lost reply */
    ck_assert(dup);
    ck_assert_uint_eq(again, a);
    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.jobs, 1);
    ck_assert_uint_eq(st.duplicates, 1);

    uint64_t b = submit_id_as(&t, 7, 2, &dup);
    ck_assert_uint_ne(b, a);
    Spur__Api__Response *r = submit_as(&t, 7, 1, &dup); /* older than the last */
    ck_assert(!dup);
    ck_assert_int_eq(r->code, C_INVALID);
    ck_assert_msg(strstr(r->error, "stale request") != NULL, "%s", r->error);
    spur__api__response__free_unpacked(r, NULL);

    /* Another client's seq 1 is its own. */
    uint64_t c = submit_id_as(&t, 8, 1, &dup);
    ck_assert(!dup);
    ck_assert_uint_ne(c, b);

    /* client 0: no deduplication. */
    submit_id_as(&t, 0, 5, &dup);
    submit_id_as(&t, 0, 5, &dup);
    ck_assert(!dup);
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.jobs, 5);
    ck_assert_uint_eq(st.sessions, 2);

    /* An error answer is remembered too: the retry gets the same error, even though the
     * state has changed since (the partition now exists). */
    Spur__Api__JobSpec s;
    spec_init(&s);
    s.partition = "later";
    Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
    cmd.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    cmd.submit_job = &s;
    r = run_as(&t, 9, 1, &cmd);
    ck_assert_int_eq(r->code, C_NOT_FOUND);
    spur__api__response__free_unpacked(r, NULL);
    Spur__Api__Partition p = SPUR__API__PARTITION__INIT;
    p.name = "later";
    p.nodes_expr = "ALL";
    p.up = true;
    Spur__Api__Partition *pp[] = {&p};
    set_partitions(&t, pp, 1, C_OK, NULL);
    r = run_as(&t, 9, 1, &cmd);
    ck_assert_int_eq(r->code, C_NOT_FOUND);
    ck_assert_str_eq(r->error, "partition \"later\" does not exist");
    spur__api__response__free_unpacked(r, NULL);

    /* Failover: a replica restored from a snapshot answers the retry the same way. */
    uint8_t *snap;
    size_t len;
    snapshot(t.f, &snap, &len);
    struct t u;
    t_init_bare(&u, NULL);
    char err[FSM_ERR_MAX];
    ck_assert_int_eq(fsm_restore(u.f, snap, len, err, sizeof(err)), FSM_OK);
    free(snap);
    u.now = t.now;
    ck_assert_uint_eq(submit_id_as(&u, 7, 2, &dup), b);
    ck_assert(dup);
    fsm_stats(u.f, &st);
    ck_assert_uint_eq(st.jobs, 5);
    t_free(&u);
    t_free(&t);
}
END_TEST

START_TEST(test_session_expiry)
{
    struct fsm_limits lim;
    fsm_limits_default(&lim);
    lim.session_ttl_ms = 10000;
    lim.max_sessions = 3;
    struct t t;
    t_init_bare(&t, &lim);
    set_std_partitions(&t);
    bool dup;

    /* TTL: idle for exactly the TTL is kept, one millisecond more is dropped. */
    uint64_t a = submit_id_as(&t, 1, 1, &dup);
    t.now += 10000;
    ck_assert_uint_eq(submit_id_as(&t, 1, 1, &dup), a);
    ck_assert(dup);
    t.now += 10001; /* the retry refreshed it at the previous time */
    uint64_t a2 = submit_id_as(&t, 1, 1, &dup);
    ck_assert(!dup); /* expired: the retry is a new write (the documented limit) */
    ck_assert_uint_ne(a2, a);

    /* Cap of 3: the least recently used goes. */
    submit_id_as(&t, 2, 1, &dup);
    submit_id_as(&t, 3, 1, &dup);
    submit_id_as(&t, 1, 2, &dup); /* 1 is now the most recent */
    submit_id_as(&t, 4, 1, &dup); /* evicts 2 */
    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.sessions, 3);
    submit_id_as(&t, 3, 1, &dup);
    ck_assert(dup);
    submit_id_as(&t, 2, 1, &dup);
    ck_assert(!dup);
    fsm_stats(t.f, &st);
    ck_assert_uint_eq(st.sessions, 3);
    ck_assert_uint_ge(st.expired_sessions, 3);
    t_free(&t);
}
END_TEST

/* ---- bad input --------------------------------------------------------------------------- */

START_TEST(test_garbage_entries)
{
    struct t t;
    t_init(&t);
    submit_plain(&t);
    uint8_t *ref;
    size_t reflen;
    snapshot(t.f, &ref, &reflen);

    /* Stale index: nothing happens. */
    struct fsm_reply reply;
    uint8_t byte = 0;
    ck_assert_int_eq(fsm_apply(t.f, fsm_last_applied(t.f), &byte, 1, &reply), FSM_ESTALE);
    ck_assert_ptr_null(reply.resp);

    /* Undecodable bytes: rejected, counted, the replica goes on. */
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    ck_assert_int_eq(fsm_apply(t.f, fsm_last_applied(t.f) + 1, junk, sizeof(junk), &reply), FSM_OK);
    ck_assert(reply.bad_entry);
    ck_assert_int_eq(reply.resp->code, C_INVALID);
    ck_assert_msg(strstr(reply.resp->error, "does not decode") != NULL, "%s", reply.resp->error);
    fsm_reply_clear(&reply);

    /* A newer command version. */
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    Spur__Fsm__Tick tk = SPUR__FSM__TICK__INIT;
    c.version = FSM_COMMAND_VERSION + 1;
    c.op_case = SPUR__FSM__COMMAND__OP_TICK;
    c.tick = &tk;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fsm_encode_command(&c, &buf, &len), FSM_OK);
    ck_assert_int_eq(fsm_apply(t.f, fsm_last_applied(t.f) + 1, buf, len, &reply), FSM_OK);
    ck_assert(reply.bad_entry);
    char newer[64];
    snprintf(newer, sizeof(newer), "command version %d", FSM_COMMAND_VERSION + 1);
    ck_assert_msg(strstr(reply.resp->error, newer) != NULL, "%s", reply.resp->error);
    fsm_reply_clear(&reply);
    free(buf);

    /* An empty entry decodes as a command without an operation. */
    ck_assert_int_eq(fsm_apply(t.f, fsm_last_applied(t.f) + 1, NULL, 0, &reply), FSM_OK);
    ck_assert(!reply.bad_entry);
    ck_assert_int_eq(reply.resp->code, C_INVALID);
    fsm_reply_clear(&reply);

    /* Random bytes and mutations of valid commands, with and without a reply. */
    Spur__Api__JobSpec s;
    spec_init(&s);
    Spur__Fsm__Command sub = SPUR__FSM__COMMAND__INIT;
    sub.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    sub.submit_job = &s;
    sub.time_ms = t.now;
    ck_assert_int_eq(fsm_encode_command(&sub, &buf, &len), FSM_OK);
    uint32_t seed = 12345;
    uint8_t tmp[256];
    for (int i = 0; i < 20000; i++) {
        size_t n;
        if (i % 2 == 0) {
            n = rnd(&seed) % sizeof(tmp);
            for (size_t k = 0; k < n; k++)
                tmp[k] = (uint8_t)rnd(&seed);
        } else {
            n = len < sizeof(tmp) ? len : sizeof(tmp);
            memcpy(tmp, buf, n);
            for (int k = 0; k < 3; k++)
                tmp[rnd(&seed) % n] = (uint8_t)rnd(&seed);
            n = rnd(&seed) % (n + 1);
        }
        int rc = fsm_apply(t.f, fsm_last_applied(t.f) + 1, tmp, n, i % 3 ? &reply : NULL);
        ck_assert_int_eq(rc, FSM_OK);
        if (i % 3)
            fsm_reply_clear(&reply);
    }
    free(buf);
    struct fsm_stats st;
    fsm_stats(t.f, &st);
    ck_assert_uint_gt(st.bad_entries, 1000);
    free(ref);
    t_free(&t);
}
END_TEST

/* ---- snapshots ------------------------------------------------------------------------------- */

/* A state with something of everything: jobs in every state, nodes in every state. */
static void build_rich_state(struct t *t)
{
    t_init(t);
    bool dup;
    Spur__Api__JobSpec s;
    for (int i = 0; i < 20; i++)
        submit_id_as(t, 100 + (uint64_t)(i % 4), (uint64_t)i + 1, &dup);
    spec_init(&s);
    s.hold = true;
    char *env[] = {"X=1"};
    s.n_env = 1;
    s.env = env;
    submit(t, &s);
    job_op(t, OP_CANCEL, 1, C_OK, NULL);
    job_op(t, OP_HOLD, 2, C_OK, NULL);
    start_job(t, 3, (char *[]){"n1"}, 1, C_OK, NULL);
    start_job(t, 4, (char *[]){"n2"}, 1, C_OK, NULL);
    start_job(t, 5, (char *[]){"n2"}, 1, C_OK, NULL);
    complete_job(t, 4, "n2", 0, false, C_OK, NULL);
    complete_job(t, 5, "n2", 2, false, C_OK, NULL);
    spec_init(&s);
    s.nodes = 2;
    uint64_t two = submit(t, &s);
    start_job(t, two, (char *[]){"n3", "n4"}, 2, C_OK, NULL);
    complete_job(t, two, "n4", 0, false, C_OK, NULL); /* not the batch host: COMPLETING */
    job_op(t, OP_CANCEL, two, C_OK, NULL);
    update_node(t, "n1", "drain", "draining with a job", C_OK, NULL);
    update_node(t, "n2", "drain", "drained", C_OK, NULL);
    register_node(t, "n5", 2, 10, C_OK, NULL);
    update_node(t, "n5", "down", "dead", C_OK, NULL);
    set_settings(t, 7200, 4096, C_OK, NULL);
    t->now += 1000;
}

START_TEST(test_snapshot_roundtrip)
{
    struct t t;
    build_rich_state(&t);
    uint8_t *snap;
    size_t len;
    snapshot(t.f, &snap, &len);

    struct t u;
    t_init_bare(&u, NULL);
    char err[FSM_ERR_MAX] = "";
    ck_assert_int_eq(fsm_restore(u.f, snap, len, err, sizeof(err)), FSM_OK);
    assert_same_snapshot(t.f, u.f);
    ck_assert_uint_eq(fsm_last_applied(u.f), fsm_last_applied(t.f));
    ck_assert_uint_eq(fsm_log_time_ms(u.f), fsm_log_time_ms(t.f));

    /* Same answers to reads (derived data rebuilt: allocations, reasons, counts). */
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__GetJobsRequest gj = SPUR__API__GET_JOBS_REQUEST__INIT;
    gj.include_script = true;
    Spur__Api__GetNodesRequest gn = SPUR__API__GET_NODES_REQUEST__INIT;
    for (int k = 0; k < 2; k++) {
        if (k == 0) {
            req.op_case = SPUR__API__REQUEST__OP_GET_JOBS;
            req.get_jobs = &gj;
        } else {
            req.op_case = SPUR__API__REQUEST__OP_GET_NODES;
            req.get_nodes = &gn;
        }
        size_t la, lb;
        uint8_t *ra = packed_read(t.f, &req, &la);
        uint8_t *rb = packed_read(u.f, &req, &lb);
        ck_assert_uint_eq(la, lb);
        ck_assert_int_eq(memcmp(ra, rb, la), 0);
        free(ra);
        free(rb);
    }
    struct fsm_stats sa, sb;
    fsm_stats(t.f, &sa);
    fsm_stats(u.f, &sb);
    ck_assert_int_eq(memcmp(sa.jobs_by_state, sb.jobs_by_state, sizeof(sa.jobs_by_state)), 0);
    ck_assert_int_eq(memcmp(sa.nodes_by_state, sb.nodes_by_state, sizeof(sa.nodes_by_state)), 0);
    ck_assert_uint_eq(sb.sessions, 4);
    ck_assert_uint_eq(sb.finished_job_retention_s, 7200);
    ck_assert_uint_eq(sb.nodes_by_state[N_DRAINING], 1);
    ck_assert_uint_eq(sb.nodes_by_state[N_DRAINED], 1);
    ck_assert_uint_eq(sb.nodes_by_state[N_DOWN], 1);

    /* Both go on identically. */
    job_op(&t, OP_CANCEL, 3, C_OK, NULL);
    u.now = t.now;
    job_op(&u, OP_CANCEL, 3, C_OK, NULL);
    complete_job(&t, 3, "n1", 0, false, C_OK, NULL);
    complete_job(&u, 3, "n1", 0, false, C_OK, NULL);
    assert_same_snapshot(t.f, u.f);
    ck_assert_int_eq(node_state(&u, "n1", NULL, NULL, 0), N_DRAINED);

    free(snap);
    t_free(&u);
    t_free(&t);
}
END_TEST

START_TEST(test_restore_failure_keeps_state)
{
    struct t t;
    build_rich_state(&t);
    uint8_t *snap;
    size_t len;
    snapshot(t.f, &snap, &len);

    struct t u;
    t_init(&u);
    submit_plain(&u);
    uint8_t *before;
    size_t before_len;
    snapshot(u.f, &before, &before_len);
    char err[FSM_ERR_MAX];

    /* Truncated. */
    ck_assert_int_eq(fsm_restore(u.f, snap, len - 3, err, sizeof(err)), FSM_EINVAL);
    ck_assert_msg(strncmp(err, "snapshot: ", 10) == 0, "%s", err);
    /* Empty: no header. */
    ck_assert_int_eq(fsm_restore(u.f, snap, 0, err, sizeof(err)), FSM_EINVAL);
    ck_assert_str_eq(err, "snapshot: no header");
    /* A newer format. */
    Spur__Fsm__SnapshotHeader h = SPUR__FSM__SNAPSHOT_HEADER__INIT;
    h.format_version = FSM_SNAPSHOT_VERSION + 1;
    h.next_job_id = 1;
    h.max_script_bytes = 10;
    uint8_t hb[64];
    hb[0] = (1 << 3) | 2;
    hb[1] = (uint8_t)spur__fsm__snapshot_header__pack(&h, hb + 2);
    ck_assert_int_eq(fsm_restore(u.f, hb, 2u + hb[1], err, sizeof(err)), FSM_EINVAL);
    char newer_fmt[64];
    snprintf(newer_fmt, sizeof(newer_fmt), "format version %d;", FSM_SNAPSHOT_VERSION + 1);
    ck_assert_msg(strstr(err, newer_fmt) != NULL, "%s", err);

    /* Random corruption: never a crash; a failure never touches the state; whatever is
     * accepted is a usable state. */
    uint8_t *mut = malloc(len);
    ck_assert_ptr_nonnull(mut);
    uint32_t seed = 99;
    int failed = 0;
    for (int i = 0; i < 2000; i++) {
        memcpy(mut, snap, len);
        int flips = 1 + (int)(rnd(&seed) % 4);
        for (int k = 0; k < flips; k++)
            mut[rnd(&seed) % len] = (uint8_t)rnd(&seed);
        size_t mlen = i % 5 == 0 ? rnd(&seed) % len : len;
        uint8_t *now;
        size_t now_len;
        if (fsm_restore(u.f, mut, mlen, err, sizeof(err)) != FSM_OK) {
            failed++;
            snapshot(u.f, &now, &now_len);
            ck_assert_uint_eq(now_len, before_len);
            ck_assert_int_eq(memcmp(now, before, before_len), 0);
            free(now);
            continue;
        }
        snapshot(u.f, &now, &now_len);
        free(now);
        struct fsm_read rd;
        ck_assert_int_eq(fsm_get_jobs(u.f, NULL, &rd), FSM_OK);
        fsm_read_free(&rd);
        ck_assert_int_eq(fsm_get_nodes(u.f, NULL, &rd), FSM_OK);
        fsm_read_free(&rd);
        u.now = fsm_log_time_ms(u.f) + 1;
        tick(&u);
        submit_plain(&u);
        ck_assert_int_eq(fsm_restore(u.f, before, before_len, err, sizeof(err)), FSM_OK);
    }
    ck_assert_int_gt(failed, 100);

    free(mut);
    free(before);
    free(snap);
    t_free(&u);
    t_free(&t);
}
END_TEST

/* Append msg to b as the snapshot writer does: tag of field, length, packed bytes. */
static size_t put_snap_record(uint8_t *b, size_t at, unsigned field, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    ck_assert_uint_lt(n, 128);
    b[at++] = (uint8_t)(field << 3 | 2);
    b[at++] = (uint8_t)n;
    return at + protobuf_c_message_pack(msg, b + at);
}

/*
 * A running job on a node that never registered (a placeholder, here one no partition
 * names) was accepted, but finish() then dropped the node: the state had a running job
 * on no node, and its own snapshot was refused (found by fuzz_fsmsnap). Refused now; the
 * same snapshot with the node registered restores, and so does its snapshot.
 */
START_TEST(test_restore_job_on_placeholder)
{
    char *n1[] = {"n1"};
    protobuf_c_boolean done[] = {false};
    Spur__Api__Partition part = SPUR__API__PARTITION__INIT;
    part.name = "batch";
    part.nodes_expr = "ALL";
    part.is_default = true;
    part.up = true;
    Spur__Api__Partition *parts[] = {&part};
    Spur__Fsm__SnapshotHeader h = SPUR__FSM__SNAPSHOT_HEADER__INIT;
    h.format_version = FSM_SNAPSHOT_VERSION;
    h.last_applied = 10;
    h.next_job_id = 2;
    h.max_script_bytes = 100;
    h.n_partitions = 1;
    h.partitions = parts;
    Spur__Fsm__NodeRecord node = SPUR__FSM__NODE_RECORD__INIT;
    node.name = "n1";
    node.cpus = 8;
    node.mem_mb = 1000;
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    spec.partition = "batch";
    spec.nodes = 1;
    spec.ntasks = 1;
    spec.cpus_per_task = 1;
    Spur__Fsm__JobRecord job = SPUR__FSM__JOB_RECORD__INIT;
    job.id = 1;
    job.spec = &spec;
    job.state = SPUR__API__JOB_STATE__JOB_RUNNING;
    job.n_node_list = 1;
    job.node_list = n1;
    job.n_node_done = 1;
    job.node_done = done;
    job.attempt = 1;

    char err[FSM_ERR_MAX];
    struct fsm *f = fsm_new(NULL);
    ck_assert_ptr_nonnull(f);
    for (int registered = 0; registered < 2; registered++) {
        node.registered = registered;
        uint8_t b[512];
        size_t len = put_snap_record(b, 0, 1, &h.base);
        len = put_snap_record(b, len, 2, &node.base);
        len = put_snap_record(b, len, 4, &job.base);
        int rc = fsm_restore(f, b, len, err, sizeof(err));
        if (!registered) {
            ck_assert_int_eq(rc, FSM_EINVAL);
            ck_assert_msg(strstr(err, "uses unknown node \"n1\"") != NULL, "%s", err);
            continue;
        }
        ck_assert_msg(rc == FSM_OK, "%s", err);
        uint8_t *again;
        size_t again_len;
        snapshot(f, &again, &again_len);
        ck_assert_int_eq(fsm_restore(f, again, again_len, err, sizeof(err)), FSM_OK);
        free(again);
    }
    fsm_free(f);
}
END_TEST

/*
 * A drain by a caller whose name holds a control character recorded that name as who set
 * the reason, which the snapshot reader refuses: the state's own snapshot did not restore
 * (found by fuzz_fsmcmd). The drain applies as before; the name is not kept.
 */
START_TEST(test_reason_user_not_text)
{
    struct t t;
    t_init(&t);
    const char *users[] = {"ro\vt", "alice"};
    const char *nodes[] = {"n1", "n2"};
    for (int i = 0; i < 2; i++) {
        Spur__Api__UpdateNodeRequest u = SPUR__API__UPDATE_NODE_REQUEST__INIT;
        u.name = (char *)nodes[i];
        u.state = "drain";
        u.reason = "disk";
        Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
        c.user = (char *)users[i];
        c.caller_uid = 1000;
        c.caller_operator = true;
        c.op_case = SPUR__FSM__COMMAND__OP_UPDATE_NODE;
        c.update_node = &u;
        expect(&t, &c, C_OK, NULL);
    }
    uint8_t *snap;
    size_t len;
    snapshot(t.f, &snap, &len);
    char err[FSM_ERR_MAX];
    struct fsm *g = fsm_new(NULL);
    ck_assert_ptr_nonnull(g);
    ck_assert_msg(fsm_restore(g, snap, len, err, sizeof(err)) == FSM_OK, "%s", err);
    struct fsm_read rd;
    ck_assert_int_eq(fsm_get_nodes(g, NULL, &rd), FSM_OK);
    for (size_t i = 0; i < rd.resp.nodes->n_nodes; i++) {
        const Spur__Api__Node *n = rd.resp.nodes->nodes[i];
        if (strcmp(n->name, "n1") == 0 || strcmp(n->name, "n2") == 0) {
            ck_assert_str_eq(n->reason, "disk");
            ck_assert_str_eq(n->reason_user, strcmp(n->name, "n1") == 0 ? "" : "alice");
        }
    }
    fsm_read_free(&rd);
    fsm_free(g);
    free(snap);
    t_free(&t);
}
END_TEST

/* ---- determinism --------------------------------------------------------------------------- */

struct log {
    uint8_t **e;
    size_t *len;
    size_t n;
};

static void log_push(struct log *l, uint8_t *bytes, size_t len)
{
    l->e = realloc(l->e, (l->n + 1) * sizeof(*l->e));
    l->len = realloc(l->len, (l->n + 1) * sizeof(*l->len));
    ck_assert(l->e != NULL && l->len != NULL);
    l->e[l->n] = bytes;
    l->len[l->n] = len;
    l->n++;
}

static void log_free(struct log *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i]);
    free(l->e);
    free(l->len);
}

/*
 * A random but plausible log, generated against a live state machine (so job and node
 * commands often hit real jobs) and applied to it as it is written.
 */
static void make_log(struct t *t, uint32_t seed, size_t n, struct log *l)
{
    static char *users[] = {"alice", "bob", "carol"};
    static char *parts[] = {"", "batch", "small", "gpu", "nope", "closed"};
    static char *nodes[] = {"n1", "n2", "n3", "n4", "n5", "g1"};
    static char *states[] = {"drain", "resume", "down", "idle", "undrain", "bogus"};
    static char *names[] = {"a", "b", "c"};
    static uint8_t script[400];
    memset(script, '#', sizeof(script));
    uint64_t seqs[6] = {0};

    for (size_t i = 0; i < n; i++) {
        Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
        Spur__Api__JobSpec s;
        Spur__Api__JobIdRequest jid = SPUR__API__JOB_ID_REQUEST__INIT;
        Spur__Api__CancelJobsRequest cj = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
        Spur__Api__UpdateNodeRequest un = SPUR__API__UPDATE_NODE_REQUEST__INIT;
        Spur__Api__RegisterNodeRequest rn = SPUR__API__REGISTER_NODE_REQUEST__INIT;
        Spur__Fsm__SetSettings ss = SPUR__FSM__SET_SETTINGS__INIT;
        Spur__Fsm__JobStarted js = SPUR__FSM__JOB_STARTED__INIT;
        Spur__Fsm__JobCompleted jc = SPUR__FSM__JOB_COMPLETED__INIT;
        Spur__Fsm__NodeHeartbeat hb = SPUR__FSM__NODE_HEARTBEAT__INIT;
        Spur__Fsm__Tick tk = SPUR__FSM__TICK__INIT;
        Spur__Fsm__AcctTrim at = SPUR__FSM__ACCT_TRIM__INIT;
        Spur__Api__JobState st[1];
        char *pick_nodes[4];
        char *one_user[1];

        /* Time mostly moves on; sometimes a new leader's clock is behind. */
        uint32_t dt = rnd(&seed) % 100;
        t->now = dt < 5 ? t->now - 2000 : t->now + dt * 97;
        uint64_t next_id;
        {
            struct fsm_stats fs;
            fsm_stats(t->f, &fs);
            next_id = fs.next_job_id;
        }
        uint64_t some_job = 1 + rnd(&seed) % (next_id + 1);
        uint32_t what = rnd(&seed) % 100;
        if (what < 35) {
            spec_init(&s);
            s.partition = parts[rnd(&seed) % 6];
            s.nodes = rnd(&seed) % 3;
            s.ntasks = rnd(&seed) % 5;
            s.cpus_per_task = rnd(&seed) % 4;
            s.time_limit_min = rnd(&seed) % 90;
            s.mem_mb = rnd(&seed) % 3 * 500;
            s.hold = rnd(&seed) % 8 == 0;
            s.name = names[rnd(&seed) % 3];
            s.script.data = script;
            s.script.len = rnd(&seed) % 20 == 0 ? 0 : 1 + rnd(&seed) % sizeof(script);
            c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
            c.submit_job = &s;
        } else if (what < 45) {
            jid.job_id = some_job;
            c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOB;
            c.cancel_job = &jid;
        } else if (what < 48) {
            one_user[0] = users[rnd(&seed) % 3];
            cj.n_users = 1;
            cj.users = one_user;
            st[0] = (Spur__Api__JobState)(1 + rnd(&seed) % 3);
            cj.n_states = 1;
            cj.states = st;
            c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOBS;
            c.cancel_jobs = &cj;
        } else if (what < 53) {
            jid.job_id = some_job;
            c.op_case = SPUR__FSM__COMMAND__OP_HOLD_JOB;
            c.hold_job = &jid;
        } else if (what < 58) {
            jid.job_id = some_job;
            c.op_case = SPUR__FSM__COMMAND__OP_RELEASE_JOB;
            c.release_job = &jid;
        } else if (what < 62) {
            un.name = nodes[rnd(&seed) % 6];
            un.state = states[rnd(&seed) % 6];
            un.reason = rnd(&seed) % 4 ? "because" : "";
            c.op_case = SPUR__FSM__COMMAND__OP_UPDATE_NODE;
            c.update_node = &un;
        } else if (what < 64) {
            rn.name = nodes[rnd(&seed) % 6];
            rn.cpus = rnd(&seed) % 10;
            rn.mem_mb = rnd(&seed) % 4000;
            c.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
            c.register_node = &rn;
        } else if (what < 65) {
            ss.finished_job_retention_s = rnd(&seed) % 120;
            ss.max_script_bytes = 100 + rnd(&seed) % 400;
            ss.accounting = rnd(&seed) % 5 != 0; /* mostly on: the outbox is replayed */
            c.op_case = SPUR__FSM__COMMAND__OP_SET_SETTINGS;
            c.set_settings = &ss;
        } else if (what < 80) {
            js.job_id = some_job;
            size_t k = 1 + rnd(&seed) % 2;
            for (size_t m = 0; m < k; m++)
                pick_nodes[m] = nodes[rnd(&seed) % 6];
            js.n_nodes = k;
            js.nodes = pick_nodes;
            c.op_case = SPUR__FSM__COMMAND__OP_JOB_STARTED;
            c.job_started = &js;
        } else if (what < 93) {
            jc.job_id = some_job;
            jc.node = nodes[rnd(&seed) % 6];
            jc.exit_code = rnd(&seed) % 4 == 0 ? 1 : 0;
            jc.timed_out = rnd(&seed) % 10 == 0;
            c.op_case = SPUR__FSM__COMMAND__OP_JOB_COMPLETED;
            c.job_completed = &jc;
        } else if (what < 95) {
            hb.name = nodes[rnd(&seed) % 6];
            c.op_case = SPUR__FSM__COMMAND__OP_NODE_HEARTBEAT;
            c.node_heartbeat = &hb;
        } else if (what < 96) {
            /* The exporter's trims: some short of the end, some beyond it, some replayed. */
            struct fsm_acct_stats as;
            fsm_acct_get_stats(t->f, &as);
            at.through_seq = rnd(&seed) % (as.next_seq + 5);
            c.op_case = SPUR__FSM__COMMAND__OP_ACCT_TRIM;
            c.acct_trim = &at;
        } else if (what < 97) {
            c.op_case = SPUR__FSM__COMMAND__OP_TICK;
            c.tick = &tk;
        }
        /* else: what >= 97 leaves the op unset, or becomes garbage below */

        uint8_t *bytes;
        size_t len;
        if (what >= 98) {
            len = 1 + rnd(&seed) % 40;
            bytes = malloc(len);
            ck_assert_ptr_nonnull(bytes);
            for (size_t k = 0; k < len; k++)
                bytes[k] = (uint8_t)rnd(&seed);
        } else {
            uint32_t who = rnd(&seed) % 6; /* client 0: no session */
            c.client_id = who;
            if (who != 0) {
                uint32_t r = rnd(&seed) % 20;
                if (r == 0 && seqs[who] > 1)
                    c.seq = seqs[who] - 1; /* stale */
                else if (r < 4)
                    c.seq = seqs[who]; /* a retry */
                else
                    c.seq = ++seqs[who];
            }
            c.time_ms = t->now;
            /* The caller, as fsm_encode_request() writes it: a submit runs as its caller
             * (uid 1000 + user), some callers are operators, some entries are version 1
             * (unchecked), so denials and old entries are replayed too. */
            uint32_t u = rnd(&seed) % 3;
            c.user = users[u];
            c.caller_uid = 1000 + u;
            c.caller_operator = rnd(&seed) % 6 == 0;
            c.version = rnd(&seed) % 10 == 0 ? 1 : 0;
            if (c.op_case == SPUR__FSM__COMMAND__OP_SUBMIT_JOB) {
                s.user = c.user;
                s.uid = c.caller_uid;
                s.gid = c.caller_uid;
            }
            ck_assert_int_eq(fsm_encode_command(&c, &bytes, &len), FSM_OK);
        }
        log_push(l, bytes, len);
        ck_assert_int_eq(fsm_apply(t->f, fsm_last_applied(t->f) + 1, bytes, len, NULL), FSM_OK);
    }
}

START_TEST(test_deterministic_replay)
{
    /* A writes the log while applying it. B and C start from A's starting state (t_init
     * is itself deterministic, so a second one gives the same bytes). */
    struct t a;
    t_init(&a);
    uint64_t setup_entries = fsm_last_applied(a.f);
    struct log l = {0};
    struct t start;
    t_init(&start);
    uint8_t *setup_snap;
    size_t setup_len;
    snapshot(start.f, &setup_snap, &setup_len);
    assert_same_snapshot(start.f, a.f);
    t_free(&start);

    make_log(&a, (uint32_t)(_i + 1) * 2654435761u, 4000, &l);

    /* B applies every entry with replies; C without replies (a follower), through a
     * snapshot and restore half way. */
    struct fsm *b = fsm_new(NULL);
    struct fsm *c = fsm_new(NULL);
    char err[FSM_ERR_MAX];
    ck_assert_int_eq(fsm_restore(b, setup_snap, setup_len, err, sizeof(err)), FSM_OK);
    ck_assert_int_eq(fsm_restore(c, setup_snap, setup_len, err, sizeof(err)), FSM_OK);
    free(setup_snap);

    size_t denied = 0;
    for (size_t i = 0; i < l.n; i++) {
        uint64_t idx = setup_entries + 1 + i;
        struct fsm_reply rb;
        ck_assert_int_eq(fsm_apply(b, idx, l.e[i], l.len[i], &rb), FSM_OK);
        denied += rb.resp != NULL && rb.resp->code == SPUR__API__CODE__CODE_DENIED;
        fsm_reply_clear(&rb);
        ck_assert_int_eq(fsm_apply(c, idx, l.e[i], l.len[i], NULL), FSM_OK);
        if (i == l.n / 2) {
            uint8_t *mid;
            size_t midlen;
            snapshot(c, &mid, &midlen);
            fsm_free(c);
            c = fsm_new(NULL);
            ck_assert_int_eq(fsm_restore(c, mid, midlen, err, sizeof(err)), FSM_OK);
            free(mid);
        }
    }
    assert_same_snapshot(a.f, b);
    assert_same_snapshot(a.f, c);

    /* The log exercised what it should. */
    struct fsm_stats st;
    fsm_stats(b, &st);
    ck_assert_uint_gt(st.duplicates, 50);
    ck_assert_uint_gt(st.bad_entries, 5);
    ck_assert_uint_gt(st.jobs_by_state[J_PENDING] + st.jobs_by_state[J_RUNNING], 0);
    ck_assert_uint_gt(st.rejected, 100);
    ck_assert_uint_gt(denied, 10); /* ownership refusals replay alike too */
    struct fsm_acct_stats as;
    fsm_acct_get_stats(b, &as);
    ck_assert_uint_gt(as.next_seq, 200); /* the outbox was on for much of the log */
    /* An outbox record's reason (one job on its own) is the reason squeue shows. */
    size_t pending = 0;
    for (size_t i = 0; i < b->jobs.norder; i++) {
        const struct fsm_job *job = b->jobs.order[i];
        if (job == NULL)
            continue;
        pending += job->state == J_PENDING;
        ck_assert_str_eq(fsm_state_job_reason_one(b, job), fsm_state_job_reason(b, job, NULL));
    }
    ck_assert_uint_gt(pending, 0);

    fsm_free(b);
    fsm_free(c);
    log_free(&l);
    t_free(&a);
}
END_TEST

START_TEST(test_replies_deterministic)
{
    /* The same entries give the same reply bytes on two replicas. */
    struct t a, b;
    t_init(&a);
    t_init(&b);
    struct log l = {0};
    make_log(&a, 777, 1500, &l);
    struct t c;
    t_init(&c);
    uint64_t base = fsm_last_applied(b.f);
    for (size_t i = 0; i < l.n; i++) {
        struct fsm_reply rb, rc;
        ck_assert_int_eq(fsm_apply(b.f, base + 1 + i, l.e[i], l.len[i], &rb), FSM_OK);
        ck_assert_int_eq(fsm_apply(c.f, base + 1 + i, l.e[i], l.len[i], &rc), FSM_OK);
        size_t nb = spur__api__response__get_packed_size(rb.resp);
        size_t nc = spur__api__response__get_packed_size(rc.resp);
        ck_assert_uint_eq(nb, nc);
        uint8_t *pb = malloc(nb + 1), *pc = malloc(nc + 1);
        spur__api__response__pack(rb.resp, pb);
        spur__api__response__pack(rc.resp, pc);
        ck_assert_int_eq(memcmp(pb, pc, nb), 0);
        ck_assert_int_eq(rb.duplicate, rc.duplicate);
        free(pb);
        free(pc);
        fsm_reply_clear(&rb);
        fsm_reply_clear(&rc);
    }
    assert_same_snapshot(a.f, b.f);
    assert_same_snapshot(b.f, c.f);
    log_free(&l);
    t_free(&a);
    t_free(&b);
    t_free(&c);
}
END_TEST

/* ---- the worker's side: requests in, reads out ------------------------------------------- */

START_TEST(test_requests_and_reads)
{
    struct t t;
    t_init(&t);

    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    ck_assert_int_eq(fsm_op_kind(&req), FSM_OP_OTHER);
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    req.op_case = SPUR__API__REQUEST__OP_PING;
    req.ping = &ping;
    ck_assert_int_eq(fsm_op_kind(&req), FSM_OP_OTHER);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(fsm_encode_request(&req, 1, &buf, &len), FSM_ENOTWRITE);

    /* A submit request, encoded by the worker's path and applied. */
    Spur__Api__JobSpec s;
    spec_init(&s);
    s.name = "from-request";
    s.user = "mallory"; /* the proved caller wins over the spec and Request.user */
    Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
    sj.spec = &s;
    req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
    req.submit_job = &sj;
    req.client_id = 55;
    req.seq = 1;
    req.user = "mallory";
    Spur__Api__Caller bob_caller = SPUR__API__CALLER__INIT;
    bob_caller.user = "bob";
    bob_caller.uid = 1001;
    bob_caller.gid = 1001;
    bob_caller.method = "socket";
    req.caller = &bob_caller;
    ck_assert_int_eq(fsm_op_kind(&req), FSM_OP_WRITE);
    ck_assert_int_eq(fsm_encode_request(&req, t.now + 5, &buf, &len), FSM_OK);
    struct fsm_reply reply;
    ck_assert_int_eq(fsm_apply(t.f, fsm_last_applied(t.f) + 1, buf, len, &reply), FSM_OK);
    free(buf);
    ck_assert_int_eq(reply.resp->code, C_OK);
    ck_assert_uint_eq(reply.client_id, 55);
    uint64_t id = reply.resp->submit_job->job_id;
    fsm_reply_clear(&reply);
    struct jobview v;
    view_job(&t, id, &v);
    ck_assert_str_eq(v.job->spec->user, "bob");
    ck_assert_str_eq(v.job->spec->name, "from-request");
    ck_assert_uint_eq(v.job->submit_time_ms, t.now + 5);
    fsm_read_free(&v.rd);

    /* Every write op maps; a missing sub-message is applied as an empty one. */
    Spur__Api__Request w = SPUR__API__REQUEST__INIT;
    Spur__Api__Caller root = SPUR__API__CALLER__INIT;
    root.user = "root";
    root.operator_ = true;
    root.method = "socket";
    w.caller = &root;
    int writes[] = {SPUR__API__REQUEST__OP_CANCEL_JOB,  SPUR__API__REQUEST__OP_CANCEL_JOBS,
                    SPUR__API__REQUEST__OP_HOLD_JOB,    SPUR__API__REQUEST__OP_RELEASE_JOB,
                    SPUR__API__REQUEST__OP_UPDATE_NODE, SPUR__API__REQUEST__OP_REGISTER_NODE,
                    SPUR__API__REQUEST__OP_SUBMIT_JOB};
    for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
        w.op_case = (Spur__Api__Request__OpCase)writes[i];
        w.submit_job = NULL;
        ck_assert_int_eq(fsm_op_kind(&w), FSM_OP_WRITE);
        ck_assert_int_eq(fsm_encode_request(&w, t.now, &buf, &len), FSM_OK);
        ck_assert_int_eq(fsm_apply(t.f, fsm_last_applied(t.f) + 1, buf, len, &reply), FSM_OK);
        ck_assert_msg(reply.resp->code != C_OK, "op %d without a body was accepted", writes[i]);
        fsm_reply_clear(&reply);
        free(buf);
    }

    /* Reads through fsm_read(). */
    bool dup;
    submit_id_as(&t, 1, 1, &dup); /* alice, "job" */
    Spur__Api__JobSpec s2;
    spec_init(&s2);
    s2.partition = "small";
    uint64_t small_id = submit(&t, &s2);
    Spur__Api__GetJobsRequest gj = SPUR__API__GET_JOBS_REQUEST__INIT;
    Spur__Api__Request r = SPUR__API__REQUEST__INIT;
    r.op_case = SPUR__API__REQUEST__OP_GET_JOBS;
    r.get_jobs = &gj;
    ck_assert_int_eq(fsm_op_kind(&r), FSM_OP_READ);
    struct fsm_read rd;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.jobs->n_jobs, 3);
    ck_assert_uint_eq(rd.resp.jobs->jobs[0]->id, id);
    ck_assert_uint_eq(rd.resp.jobs->jobs[0]->spec->script.len, 0); /* not asked for */
    fsm_read_free(&rd);

    char *bob[] = {"bob"};
    gj.n_users = 1;
    gj.users = bob;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.jobs->n_jobs, 1);
    fsm_read_free(&rd);
    gj.n_users = 0;
    char *small[] = {"small"};
    gj.n_partitions = 1;
    gj.partitions = small;
    gj.include_script = true;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.jobs->n_jobs, 1);
    ck_assert_uint_eq(rd.resp.jobs->jobs[0]->id, small_id);
    ck_assert_uint_eq(rd.resp.jobs->jobs[0]->spec->script.len, strlen(SCRIPT));
    fsm_read_free(&rd);
    gj.n_partitions = 0;
    uint64_t ids[] = {small_id, 999, id, small_id};
    gj.n_ids = 4;
    gj.ids = ids;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.jobs->n_jobs, 2); /* by id, once each, missing left out */
    ck_assert_uint_eq(rd.resp.jobs->jobs[0]->id, id);
    ck_assert_uint_eq(rd.resp.jobs->jobs[1]->id, small_id);
    fsm_read_free(&rd);
    Spur__Api__JobState running[] = {J_RUNNING};
    gj.n_ids = 0;
    gj.n_states = 1;
    gj.states = running;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.jobs->n_jobs, 0);
    fsm_read_free(&rd);
    /*
     * A state this build does not know is refused, not answered with an empty list that
     * reads as "no such jobs"; so is UNSPECIFIED, and one bad value among good ones.
     */
    Spur__Api__JobState unknown[][2] = {{(Spur__Api__JobState)42, J_PENDING},
                                        {J_PENDING, (Spur__Api__JobState)FSM_JOB_NSTATES},
                                        {(Spur__Api__JobState)0, J_PENDING},
                                        {(Spur__Api__JobState)-1, J_PENDING}};
    const char *unknown_msg[] = {
        "unknown job state 42 in the filter", "unknown job state 11 in the filter",
        "unknown job state 0 in the filter", "unknown job state -1 in the filter"};
    for (size_t u = 0; u < 4; u++) {
        gj.n_states = 2;
        gj.states = unknown[u];
        ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
        ck_assert_int_eq(rd.resp.code, C_INVALID);
        ck_assert_str_eq(rd.resp.error, unknown_msg[u]);
        ck_assert_int_eq(rd.resp.result_case, SPUR__API__RESPONSE__RESULT__NOT_SET);
        fsm_read_free(&rd);
    }
    /* Every known state is accepted: the filter naming them all lets every job through. */
    gj.n_states = 0;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    size_t all_jobs = rd.resp.jobs->n_jobs;
    ck_assert_uint_ge(all_jobs, 2);
    fsm_read_free(&rd);
    Spur__Api__JobState every[FSM_JOB_NSTATES - 1];
    for (int k = 1; k < FSM_JOB_NSTATES; k++)
        every[k - 1] = (Spur__Api__JobState)k;
    gj.n_states = FSM_JOB_NSTATES - 1;
    gj.states = every;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_int_eq(rd.resp.code, C_OK);
    ck_assert_uint_eq(rd.resp.jobs->n_jobs, all_jobs);
    fsm_read_free(&rd);
    gj.n_states = 0;

    Spur__Api__JobIdRequest gid = SPUR__API__JOB_ID_REQUEST__INIT;
    gid.job_id = 4242;
    r.op_case = SPUR__API__REQUEST__OP_GET_JOB;
    r.get_job = &gid;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_int_eq(rd.resp.code, C_NOT_FOUND);
    ck_assert_str_eq(rd.resp.error, "job 4242 does not exist");
    fsm_read_free(&rd);

    char *nn[] = {"n2", "nope"};
    Spur__Api__GetNodesRequest gn = SPUR__API__GET_NODES_REQUEST__INIT;
    gn.n_names = 2;
    gn.names = nn;
    r.op_case = SPUR__API__REQUEST__OP_GET_NODES;
    r.get_nodes = &gn;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_int_eq(rd.resp.code, C_NOT_FOUND);
    ck_assert_str_eq(rd.resp.error, "node \"nope\" does not exist");
    fsm_read_free(&rd);
    gn.n_names = 0;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_uint_eq(rd.resp.nodes->n_nodes, 6);
    ck_assert_str_eq(rd.resp.nodes->nodes[0]->name, "g1"); /* by name */
    ck_assert_int_eq(rd.resp.nodes->nodes[0]->state, N_UNKNOWN);
    ck_assert_str_eq(rd.resp.nodes->nodes[2]->name, "n1");
    ck_assert_uint_eq(rd.resp.nodes->nodes[2]->n_partitions, 3); /* batch, small, closed */
    fsm_read_free(&rd);

    r.op_case = SPUR__API__REQUEST__OP_PING;
    ck_assert_int_eq(fsm_read(t.f, &r, &rd), FSM_OK);
    ck_assert_int_eq(rd.resp.code, C_INVALID);
    fsm_read_free(&rd);
    t_free(&t);
}
END_TEST

START_TEST(test_log_clock)
{
    struct t t;
    t_init(&t);
    uint64_t t0 = t.now;
    uint64_t a = submit_plain(&t);
    t.now = t0 - 50000; /* a new leader with a slow clock */
    uint64_t b = submit_plain(&t);
    struct jobview v;
    view_job(&t, b, &v);
    ck_assert_uint_eq(v.job->submit_time_ms, t0);
    fsm_read_free(&v.rd);
    job_op(&t, OP_CANCEL, a, C_OK, NULL);
    view_job(&t, a, &v);
    ck_assert_uint_ge(v.job->end_time_ms, v.job->submit_time_ms);
    fsm_read_free(&v.rd);
    ck_assert_uint_eq(fsm_log_time_ms(t.f), t0);
    t_free(&t);
}
END_TEST

/* ---- internals ------------------------------------------------------------------------- */

START_TEST(test_map_churn)
{
    /* Sequential keys (job ids) and random ones, inserted, deleted and re-inserted in a
     * random order, checked against a plain array after every phase. */
    enum { N = 20000 };
    static uint64_t keys[N];
    static bool present[N];
    struct fsm_map m;
    fsm_map_init(&m);
    uint32_t seed = 4242;
    for (size_t i = 0; i < N; i++)
        keys[i] = i < N / 2 ? i + 1 : ((uint64_t)rnd(&seed) << 32 | rnd(&seed)) | 1;
    ck_assert_int_eq(fsm_map_put(&m, 0, &m), -1); /* key 0 is refused */
    for (int round = 0; round < 6; round++) {
        for (size_t k = 0; k < N; k++) {
            size_t i = rnd(&seed) % N;
            if (present[i]) {
                ck_assert_ptr_eq(fsm_map_del(&m, keys[i]), &keys[i]);
                present[i] = false;
            } else {
                ck_assert_int_eq(fsm_map_put(&m, keys[i], &keys[i]), 0);
                present[i] = true;
            }
        }
        size_t count = 0;
        for (size_t i = 0; i < N; i++) {
            ck_assert_ptr_eq(fsm_map_get(&m, keys[i]), present[i] ? &keys[i] : NULL);
            count += present[i];
        }
        ck_assert_uint_eq(m.count, count);
        ck_assert_uint_le(m.count * 2, m.cap);
    }
    ck_assert_ptr_null(fsm_map_del(&m, 0));
    fsm_map_free(&m);
}
END_TEST

/*
 * The job-table helpers squeue and scancel share: fsm_jobs_sort_ids() leaves each named id
 * once, ascending, whatever the order and repeats of the request.
 */
START_TEST(test_jobs_sort_ids)
{
    static const struct {
        uint64_t in[6];
        size_t n;
        uint64_t want[6];
        size_t nwant;
    } t[] = {
        {{0}, 0, {0}, 0},
        {{7}, 1, {7}, 1},
        {{5, 3, 5, 1, 3}, 5, {1, 3, 5}, 3},
        {{9, 9, 9}, 3, {9}, 1},
        {{4, 3, 2, 1}, 4, {1, 2, 3, 4}, 4},
        {{UINT64_MAX, 0, UINT64_MAX, 2, 0, 1}, 6, {0, 1, 2, UINT64_MAX}, 4},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        uint64_t ids[6];
        for (size_t k = 0; k < t[i].n; k++)
            ids[k] = t[i].in[k];
        ck_assert_uint_eq(fsm_jobs_sort_ids(ids, t[i].n), t[i].nwant);
        for (size_t k = 0; k < t[i].nwant; k++)
            ck_assert_uint_eq(ids[k], t[i].want[k]);
    }
}
END_TEST

/*
 * fsm_job_filter_match() lets a job through only when every non-empty list holds its
 * value; an empty list (a zeroed filter included) matches any job.
 */
START_TEST(test_job_filter_match)
{
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    spec.name = "build";
    struct fsm_job *job = fsm_job_new(&spec, "alice", "batch");
    ck_assert_ptr_nonnull(job);
    job->state = SPUR__API__JOB_STATE__JOB_RUNNING;

    char *alice_bob[] = {"bob", "alice"}, *bob[] = {"bob"}, *null_name[] = {NULL};
    char *batch[] = {"batch"}, *debug[] = {"debug"}, *build[] = {"test", "build"};
    Spur__Api__JobState running[] = {SPUR__API__JOB_STATE__JOB_PENDING,
                                     SPUR__API__JOB_STATE__JOB_RUNNING};
    Spur__Api__JobState pending[] = {SPUR__API__JOB_STATE__JOB_PENDING};

    const struct fsm_job_filter none = {0};
    ck_assert(fsm_job_filter_match(job, &none));
    const struct {
        struct fsm_job_filter flt;
        bool want;
    } one[] = {
        {{.users = alice_bob, .n_users = 2}, true},
        {{.users = bob, .n_users = 1}, false},
        {{.users = null_name, .n_users = 1}, false}, /* a NULL string is "" */
        {{.states = running, .n_states = 2}, true},
        {{.states = pending, .n_states = 1}, false},
        {{.names = build, .n_names = 2}, true},
        {{.names = bob, .n_names = 1}, false},
        {{.partitions = batch, .n_partitions = 1}, true},
        {{.partitions = debug, .n_partitions = 1}, false},
        /* a list with a count of 0 is no filter, whatever it points to */
        {{.users = bob, .n_users = 0, .partitions = debug, .n_partitions = 0}, true},
    };
    for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++)
        ck_assert_msg(fsm_job_filter_match(job, &one[i].flt) == one[i].want, "case %zu", i);

    /*
     * Every given list must match: all four do; with any one of them swapped for a list
     * of the same length without the job's value, the job is left out.
     */
    char *carol_bob[] = {"carol", "bob"}, *test_lint[] = {"test", "lint"};
    Spur__Api__JobState done[] = {SPUR__API__JOB_STATE__JOB_PENDING,
                                  SPUR__API__JOB_STATE__JOB_COMPLETED};
    const struct fsm_job_filter all = {.users = alice_bob, .n_users = 2, .states = running,
                                       .n_states = 2, .names = build, .n_names = 2,
                                       .partitions = batch, .n_partitions = 1};
    ck_assert(fsm_job_filter_match(job, &all));
    struct fsm_job_filter miss[4] = {all, all, all, all};
    miss[0].users = carol_bob;
    miss[1].states = done;
    miss[2].names = test_lint;
    miss[3].partitions = debug;
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(!fsm_job_filter_match(job, &miss[i]), "miss %zu", i);
    fsm_job_free(job);
}
END_TEST

static Suite *fsm_suite(void)
{
    Suite *s = suite_create("fsm");
    check_case(s, "jobs",
               (const TTest *[]){test_submit_valid, test_submit_invalid, test_no_default_partition,
                                 test_cancel, test_hold_release, test_cancel_jobs_filters,
                                 test_log_clock, NULL});
    check_case(s, "ownership",
               (const TTest *[]){test_owner_rules, test_submit_forged_spec,
                                 test_encode_needs_caller, test_v1_command_unchecked,
                                 test_cancel_jobs_ownership, NULL});
    check_case(s, "nodes",
               (const TTest *[]){test_node_updates, test_register_node, test_running_jobs, NULL});
    check_case(s, "config",
               (const TTest *[]){test_partitions, test_config_sync, test_retention, NULL});
    check_case(s, "sessions", (const TTest *[]){test_session_dedup, test_session_expiry, NULL});
    check_case(s, "internals",
               (const TTest *[]){test_map_churn, test_jobs_sort_ids, test_job_filter_match, NULL});
    TCase *tc = check_case(s, "robustness",
                           (const TTest *[]){test_garbage_entries, test_restore_failure_keeps_state,
                                             test_restore_job_on_placeholder,
                                             test_reason_user_not_text, NULL});
    tcase_set_timeout(tc, 120);
    tc = check_case(s, "snapshot",
                    (const TTest *[]){test_snapshot_roundtrip, test_replies_deterministic,
                                      test_requests_and_reads, NULL});
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_deterministic_replay, 0, 3);
    return s;
}

int main(void)
{
    return check_run(fsm_suite());
}
