/*
 * bench_sched.c - the scheduler pass (fsm_sched_pass(), raftd/fsm/fsm_sched.c) over a
 * large state, printed as a table.
 *
 *     build/bench/sched/bench_sched [--pending 100000] [--nodes 1000] [--runs 10]
 *
 * Every state is built through fsm_apply() as the replicas build theirs: SetPartitions
 * (batch: ALL, the default; short: the first quarter of the nodes, 60 minutes at most;
 * wide: the second half), RegisterNode for each node (32 CPUs, 128 GiB), then jobs
 * submitted and, for the running share, placed by a pass and started with JobStarted,
 * then the pending queue submitted. Shapes are a fixed pseudo-random mix: mostly 1-node
 * jobs of 1 to 8 CPUs, some with memory, some 2-8 node jobs, a few of 16-64 nodes; time
 * limits of 10 minutes to 4 hours, some unlimited. Scenarios:
 *
 *   - idle: no job runs, the pass places up to its max_allocations (10,000);
 *   - busy: about 90% of the CPUs run jobs, the pass fills the rest and reserves;
 *   - full: every CPU runs a job (the pass stops at once);
 *   - frag: full, then one single-CPU job ends on each node that runs one, and every
 *     queued job needs at least 2 CPUs per task: no job fits, the pass looks at the whole
 *     queue (the memo's worst case).
 *
 * Each scenario times `runs` passes over the same state (a pass changes nothing) and
 * prints pending, nodes, running, allocations, reservations, jobs tested and the pass
 * time p50 and max. Timings on a shared machine are indications, not pass/fail material
 * (bench/README.md).
 */
#include "fsm.h"
#include "fsm_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bench {
    struct fsm *f;
    uint64_t now;
    uint64_t seed;
    uint32_t min_cpus; /* per task, for the jobs submitted from now on; 0: none */
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_sched: %s\n", what);
    exit(1);
}

static uint64_t rnd(struct bench *b)
{
    b->seed = b->seed * 6364136223846793005ull + 1442695040888963407ull;
    return b->seed >> 33;
}

static void apply(struct bench *b, Spur__Fsm__Command *c)
{
    b->now += 1;
    c->time_ms = b->now;
    c->user = "bench";
    uint8_t *buf;
    size_t len;
    if (fsm_encode_command(c, &buf, &len) != FSM_OK)
        die("encode failed");
    struct fsm_reply reply;
    if (fsm_apply(b->f, fsm_last_applied(b->f) + 1, buf, len, &reply) != FSM_OK)
        die("apply failed");
    if (reply.resp->code != SPUR__API__CODE__CODE_OK)
        die(reply.resp->error);
    fsm_reply_clear(&reply);
    free(buf);
}

static void setup(struct bench *b, size_t nnodes)
{
    char **names = calloc(nnodes, sizeof(*names));
    if (names == NULL)
        die("out of memory");
    for (size_t i = 0; i < nnodes; i++) {
        names[i] = malloc(32);
        if (names[i] == NULL)
            die("out of memory");
        snprintf(names[i], 32, "cn%04zu", i);
    }
    Spur__Api__Partition p[3];
    Spur__Api__Partition *pp[3] = {&p[0], &p[1], &p[2]};
    for (int i = 0; i < 3; i++) {
        spur__api__partition__init(&p[i]);
        p[i].up = true;
    }
    p[0].name = "batch";
    p[0].nodes_expr = "ALL";
    p[0].is_default = true;
    p[1].name = "short";
    p[1].nodes_expr = "the first quarter";
    p[1].nodes = names;
    p[1].n_nodes = nnodes / 4;
    p[1].max_time_min = 60;
    p[2].name = "wide";
    p[2].nodes_expr = "the second half";
    p[2].nodes = names + nnodes / 2;
    p[2].n_nodes = nnodes - nnodes / 2;
    Spur__Fsm__SetPartitions sp = SPUR__FSM__SET_PARTITIONS__INIT;
    sp.n_partitions = 3;
    sp.partitions = pp;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SET_PARTITIONS;
    c.set_partitions = &sp;
    apply(b, &c);
    for (size_t i = 0; i < nnodes; i++) {
        Spur__Api__RegisterNodeRequest q = SPUR__API__REGISTER_NODE_REQUEST__INIT;
        q.name = names[i];
        q.address = "10.2.0.1:6818";
        q.cpus = 32;
        q.mem_mb = 131072;
        Spur__Fsm__Command rc = SPUR__FSM__COMMAND__INIT;
        rc.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
        rc.register_node = &q;
        apply(b, &rc);
        free(names[i]);
    }
    free(names);
}

static void submit_one(struct bench *b)
{
    static char script[] = "#!/bin/sh\ntrue\n";
    static char *parts[] = {"", "", "", "short", "wide"};
    static const uint32_t limits[] = {10, 30, 60, 120, 240, 0};
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    s.name = "bench";
    s.script.data = (uint8_t *)script;
    s.script.len = sizeof(script) - 1;
    s.partition = parts[rnd(b) % 5];
    uint64_t shape = rnd(b) % 100;
    if (shape < 75) {
        s.nodes = 1;
        s.cpus_per_task = 1u << (rnd(b) % 4);
    } else if (shape < 97) {
        s.nodes = 2u << (rnd(b) % 3);
        s.ntasks = s.nodes * (1 + (uint32_t)(rnd(b) % 4));
    } else {
        s.nodes = 16u << (rnd(b) % 3);
    }
    if (s.cpus_per_task < b->min_cpus)
        s.cpus_per_task = b->min_cpus;
    if (rnd(b) % 3 == 0)
        s.mem_mb = 1024u << (rnd(b) % 4);
    s.time_limit_min = limits[rnd(b) % 6];
    if (strcmp(s.partition, "short") == 0 && (s.time_limit_min == 0 || s.time_limit_min > 60))
        s.time_limit_min = 60;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    apply(b, &c);
}

/* CPUs allocated over all nodes. */
static size_t used_cpus(const struct fsm *f)
{
    size_t used = 0;
    for (size_t i = 0; i < f->nodes.n; i++)
        used += f->nodes.v[i]->alloc_cpus;
    return used;
}

/*
 * Submit and start (JobStarted of what a pass places, in its order) until `share` of the
 * CPUs are taken. The jobs a pass placed beyond that stay pending. Returns jobs started.
 */
static size_t fill(struct bench *b, double share, size_t total_cpus)
{
    size_t running = 0;
    size_t want = (size_t)(share * (double)total_cpus);
    size_t used = used_cpus(b->f);
    for (int round = 0; round < 256 && used < want; round++) {
        for (int i = 0; i < 2000; i++)
            submit_one(b);
        struct fsm_sched_opts o = {b->now, 0, 0};
        struct fsm_sched_result r;
        if (fsm_sched_pass(b->f, &o, &r) != FSM_OK)
            die("pass failed");
        for (size_t i = 0; i < r.n && used < want; i++) {
            const struct fsm_job *job = fsm_jobs_find(&b->f->jobs, r.v[i].job_id);
            size_t cpus = (size_t)fsm_job_cpus_per_node(job) * r.v[i].nnodes;
            if (used + cpus > want && share < 1.0)
                continue;
            Spur__Fsm__JobStarted js = SPUR__FSM__JOB_STARTED__INIT;
            js.job_id = r.v[i].job_id;
            js.n_nodes = r.v[i].nnodes;
            js.nodes = (char **)r.v[i].nodes;
            Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
            c.op_case = SPUR__FSM__COMMAND__OP_JOB_STARTED;
            c.job_started = &js;
            apply(b, &c);
            running++;
            used += cpus;
        }
        bool none = r.n == 0;
        fsm_sched_result_free(&r);
        if (none && share >= 1.0) {
            /* Fragments no queued shape fits: single-CPU jobs take them. */
            for (int i = 0; i < 64; i++) {
                Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
                static char script[] = "#!/bin/sh\ntrue\n";
                s.name = "filler";
                s.script.data = (uint8_t *)script;
                s.script.len = sizeof(script) - 1;
                s.partition = "";
                Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
                c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
                c.submit_job = &s;
                apply(b, &c);
            }
        }
    }
    return running;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * On a full cluster: end one single-CPU part on each node that has one, so one CPU is
 * free on many nodes while every job queued from now on needs at least two per task.
 */
static size_t fragment(struct bench *b)
{
    size_t ended = 0;
    bool *hit = calloc(b->f->nodes.n, sizeof(*hit));
    if (hit == NULL)
        die("out of memory");
    for (size_t k = 0; k < b->f->jobs.norder; k++) {
        const struct fsm_job *job = b->f->jobs.order[k];
        if (job == NULL || job->state != SPUR__API__JOB_STATE__JOB_RUNNING || job->run->n != 1 ||
            fsm_job_cpus_per_node(job) != 1)
            continue;
        const struct fsm_node *node = fsm_nodes_find(&b->f->nodes, job->run->nodes[0]);
        size_t at = 0;
        while (b->f->nodes.v[at] != node)
            at++;
        if (hit[at])
            continue;
        hit[at] = true;
        Spur__Fsm__JobCompleted jc = SPUR__FSM__JOB_COMPLETED__INIT;
        jc.job_id = job->id;
        jc.node = job->run->nodes[0];
        Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
        c.op_case = SPUR__FSM__COMMAND__OP_JOB_COMPLETED;
        c.job_completed = &jc;
        apply(b, &c);
        ended++;
    }
    free(hit);
    b->min_cpus = 2;
    return ended;
}

static void scenario(const char *name, size_t npending, size_t nnodes, double share, bool frag,
                     int runs)
{
    struct bench b = {fsm_new(NULL), 1700000000000ull, 12345, 0};
    if (b.f == NULL)
        die("out of memory");
    setup(&b, nnodes);
    size_t running = share > 0 ? fill(&b, share, nnodes * 32) : 0;
    if (frag)
        running -= fragment(&b);
    struct fsm_stats st;
    fsm_stats(b.f, &st);
    while (st.jobs_by_state[SPUR__API__JOB_STATE__JOB_PENDING] < npending) {
        submit_one(&b);
        st.jobs_by_state[SPUR__API__JOB_STATE__JOB_PENDING]++;
    }
    fsm_stats(b.f, &st);
    double *ms = calloc((size_t)runs, sizeof(*ms));
    if (ms == NULL)
        die("out of memory");
    struct fsm_sched_result r = {0};
    for (int i = 0; i < runs; i++) {
        fsm_sched_result_free(&r);
        struct fsm_sched_opts o = {b.now + 1000, 0, 0};
        double t0 = now_ms();
        if (fsm_sched_pass(b.f, &o, &r) != FSM_OK)
            die("pass failed");
        ms[i] = now_ms() - t0;
    }
    qsort(ms, (size_t)runs, sizeof(*ms), cmp_double);
    printf("%-6s %8" PRIu64 " %6zu %8zu %7zu %6" PRIu64 " %8" PRIu64 " %9.2f %9.2f\n", name,
           st.jobs_by_state[SPUR__API__JOB_STATE__JOB_PENDING], nnodes, running, r.n,
           r.reservations, r.jobs_tested, ms[runs / 2], ms[runs - 1]);
    fflush(stdout);
    fsm_sched_result_free(&r);
    free(ms);
    fsm_free(b.f);
}

int main(int argc, char **argv)
{
    size_t pending = 100000, nodes = 1000;
    int runs = 10;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--pending") == 0 && i + 1 < argc)
            pending = (size_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc)
            nodes = (size_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_sched [--pending N] [--nodes N] [--runs N]\n");
            return 64;
        }
    }
    if (nodes < 8 || nodes > 60000 || runs < 1 || runs > 1000)
        die("--nodes takes 8 to 60000, --runs 1 to 1000");
    printf("%-6s %8s %6s %8s %7s %6s %8s %9s %9s\n", "state", "pending", "nodes", "running",
           "allocs", "resv", "tested", "p50_ms", "max_ms");
    scenario("idle", pending, nodes, 0, false, runs);
    scenario("busy", pending, nodes, 0.9, false, runs);
    scenario("full", pending, nodes, 1.0, false, runs);
    scenario("frag", pending, nodes, 1.0, true, runs);
    return 0;
}
