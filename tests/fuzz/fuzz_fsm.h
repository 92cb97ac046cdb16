/*
 * fuzz_fsm.h - what the two state-machine fuzzers (fuzz_fsmsnap, fuzz_fsmcmd) share: a
 * small populated state built through the log, as the worker builds one, and the check
 * that two states are the same replicated state. Include it after fuzz_check.h.
 *
 * The setup log (fuzz_fsm_setup()) applies, at indices 1 to FUZZ_FSM_SETUP_N, with the
 * limits the worker uses (fsm_new(NULL)):
 *   1  SetSettings: retention 600 s, scripts up to 64 KiB, accounting on;
 *   2  SetPartitions: batch (ALL, the default), small (n1,n2; at most 2 nodes, 60 min),
 *      closed (ALL, down);
 *   3-5  RegisterNode n1, n2, n3 (8 CPUs, 16000 MiB), by an operator;
 *   6-8  three submits by alice (uid 1000, client 1): job 1 on one node, job 2 on two,
 *      job 3 held;
 *   9  JobStarted: job 1 RUNNING on n1;  10  JobsAllocated: job 2 CONFIGURING on n2,n3.
 * So fuzzed entries and snapshots can name jobs 1-3 and nodes n1-n3 and reach the
 * commands that need them (the seed corpora do).
 *
 * fuzz_fsm_same(f, g) checks what determinism promises (fsm.h): the same snapshot bytes,
 * and the same answers to every read (jobs with their pending reasons, nodes with their
 * allocations, partitions) and to a scheduler pass. Those are derived data that apply
 * keeps up incrementally and a restore recomputes, so comparing a state with its own
 * snapshot restored checks the two ways agree. fuzz_fsm_advance(f, g) then applies the
 * same two entries to both (the pass's JobsAllocated, when it placed anything, and a Tick
 * a day later, which runs retention and session expiry) and compares them again.
 */
#ifndef SPUR_FUZZ_FSM_H
#define SPUR_FUZZ_FSM_H

#include "fsm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_FSM_T0      1700000000000ull /* the setup log's clock, ms */
#define FUZZ_FSM_SETUP_N 10

struct fuzz_fsm_entry {
    uint8_t *p; /* owned, for the life of the process */
    size_t len;
};

static struct fuzz_fsm_entry fuzz_fsm_log[FUZZ_FSM_SETUP_N];

static void fuzz_fsm_put(size_t i, const Spur__Fsm__Command *c)
{
    CHECK(fsm_encode_command(c, &fuzz_fsm_log[i].p, &fuzz_fsm_log[i].len) == FSM_OK);
}

static void fuzz_fsm_register(size_t i, char *name, char *address)
{
    Spur__Api__RegisterNodeRequest rn = SPUR__API__REGISTER_NODE_REQUEST__INIT;
    rn.name = name;
    rn.address = address;
    rn.cpus = 8;
    rn.mem_mb = 16000;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.time_ms = FUZZ_FSM_T0;
    c.user = "root";
    c.caller_operator = true;
    c.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
    c.register_node = &rn;
    fuzz_fsm_put(i, &c);
}

static void fuzz_fsm_submit(size_t i, uint64_t seq, char *name, uint32_t nodes, bool hold)
{
    static char script[] = "#!/bin/sh\necho hi\n";
    static char *env[] = {"A=1", "PATH=/bin"};
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    s.name = name;
    s.nodes = nodes;
    s.ntasks = nodes * 2;
    s.cpus_per_task = 1;
    s.mem_mb = 1000;
    s.time_limit_min = 10;
    s.hold = hold;
    s.script.data = (uint8_t *)script;
    s.script.len = sizeof(script) - 1;
    s.n_env = 2;
    s.env = env;
    s.user = "alice";
    s.uid = 1000;
    s.gid = 1000;
    s.requeue = nodes > 1;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.client_id = 1;
    c.seq = seq;
    c.time_ms = FUZZ_FSM_T0 + seq;
    c.user = "alice";
    c.caller_uid = 1000;
    c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
    c.submit_job = &s;
    fuzz_fsm_put(i, &c);
}

/* The entries of the setup log, encoded once. */
static void fuzz_fsm_build_log(void)
{
    if (fuzz_fsm_log[0].p != NULL)
        return;
    struct fsm_settings_conf sc = {600, 64u << 10, true};
    CHECK(fsm_encode_set_settings(&sc, FUZZ_FSM_T0, &fuzz_fsm_log[0].p, &fuzz_fsm_log[0].len) ==
          FSM_OK);
    struct fsm_partition_conf pc[3] = {
        {"batch", "ALL", true, true, 0, 0, 0, 0},
        {"small", "n1, n2", false, true, 2, 60, 0, 0},
        {"closed", "ALL", false, false, 0, 0, 0, 0},
    };
    char err[FSM_ERR_MAX];
    CHECK(fsm_encode_set_partitions(pc, 3, FUZZ_FSM_T0, &fuzz_fsm_log[1].p, &fuzz_fsm_log[1].len,
                                    err, sizeof(err)) == FSM_OK);
    fuzz_fsm_register(2, "n1", "n1:6818");
    fuzz_fsm_register(3, "n2", "n2:6818");
    fuzz_fsm_register(4, "n3", "10.0.0.3:6818");
    fuzz_fsm_submit(5, 1, "one", 1, false);
    fuzz_fsm_submit(6, 2, "two", 2, false);
    fuzz_fsm_submit(7, 3, "held", 1, true);

    char *n1[] = {"n1"}, *n23[] = {"n2", "n3"};
    Spur__Fsm__JobStarted js = SPUR__FSM__JOB_STARTED__INIT;
    js.job_id = 1;
    js.n_nodes = 1;
    js.nodes = n1;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.time_ms = FUZZ_FSM_T0 + 1000;
    c.op_case = SPUR__FSM__COMMAND__OP_JOB_STARTED;
    c.job_started = &js;
    fuzz_fsm_put(8, &c);

    Spur__Fsm__Allocation al = SPUR__FSM__ALLOCATION__INIT;
    al.job_id = 2;
    al.n_nodes = 2;
    al.nodes = n23;
    Spur__Fsm__Allocation *alp[] = {&al};
    Spur__Fsm__JobsAllocated ja = SPUR__FSM__JOBS_ALLOCATED__INIT;
    ja.n_allocations = 1;
    ja.allocations = alp;
    c.op_case = SPUR__FSM__COMMAND__OP_JOBS_ALLOCATED;
    c.jobs_allocated = &ja;
    fuzz_fsm_put(9, &c);
}

/* A fresh state (the worker's limits) with the setup log applied, every entry accepted. */
static struct fsm *fuzz_fsm_setup(void)
{
    fuzz_fsm_build_log();
    struct fsm *f = fsm_new(NULL);
    CHECK(f != NULL);
    for (size_t i = 0; i < FUZZ_FSM_SETUP_N; i++) {
        struct fsm_reply r;
        CHECK(fsm_apply(f, i + 1, fuzz_fsm_log[i].p, fuzz_fsm_log[i].len, &r) == FSM_OK);
        CHECK(r.resp != NULL && r.resp->code == SPUR__API__CODE__CODE_OK);
        fsm_reply_clear(&r);
    }
    struct fsm_stats st;
    fsm_stats(f, &st);
    CHECK(st.jobs == 3 && st.nodes == 3 && st.partitions == 3);
    CHECK(st.jobs_by_state[SPUR__API__JOB_STATE__JOB_RUNNING] == 1);
    CHECK(st.jobs_by_state[SPUR__API__JOB_STATE__JOB_CONFIGURING] == 1);
    return f;
}

static void fuzz_fsm_same_snapshot(const struct fsm *f, const struct fsm *g)
{
    uint8_t *a, *b;
    size_t alen, blen;
    CHECK(fsm_snapshot(f, &a, &alen) == FSM_OK);
    CHECK(fsm_snapshot(g, &b, &blen) == FSM_OK);
    CHECK(alen == blen && memcmp(a, b, alen) == 0);
    free(a);
    free(b);
}

/* The packed answer to one of the three reads of everything (which: 0 jobs, 1 nodes, 2
 * partitions). */
static uint8_t *fuzz_fsm_read(const struct fsm *f, int which, size_t *len)
{
    struct fsm_read rd;
    Spur__Api__GetJobsRequest jr = SPUR__API__GET_JOBS_REQUEST__INIT;
    Spur__Api__GetNodesRequest nr = SPUR__API__GET_NODES_REQUEST__INIT;
    Spur__Api__GetPartitionsRequest pr = SPUR__API__GET_PARTITIONS_REQUEST__INIT;
    jr.include_script = true;
    if (which == 0)
        CHECK(fsm_get_jobs(f, &jr, &rd) == FSM_OK);
    else if (which == 1)
        CHECK(fsm_get_nodes(f, &nr, &rd) == FSM_OK);
    else
        CHECK(fsm_get_partitions(f, &pr, &rd) == FSM_OK);
    CHECK(rd.resp.code == SPUR__API__CODE__CODE_OK);
    size_t n = spur__api__response__get_packed_size(&rd.resp);
    uint8_t *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    *len = spur__api__response__pack(&rd.resp, p);
    CHECK(*len == n);
    fsm_read_free(&rd);
    return p;
}

static void fuzz_fsm_pass(const struct fsm *f, struct fsm_sched_result *r)
{
    struct fsm_sched_opts o = {.now_ms = fsm_log_time_ms(f)};
    CHECK(fsm_sched_pass(f, &o, r) == FSM_OK);
}

static void fuzz_fsm_same(const struct fsm *f, const struct fsm *g)
{
    fuzz_fsm_same_snapshot(f, g);
    for (int which = 0; which < 3; which++) {
        size_t alen, blen;
        uint8_t *a = fuzz_fsm_read(f, which, &alen), *b = fuzz_fsm_read(g, which, &blen);
        CHECK(alen == blen && memcmp(a, b, alen) == 0);
        free(a);
        free(b);
    }
    struct fsm_stats x, y;
    fsm_stats(f, &x);
    fsm_stats(g, &y);
    CHECK(x.jobs == y.jobs && x.nodes == y.nodes && x.partitions == y.partitions &&
          x.sessions == y.sessions && x.next_job_id == y.next_job_id);
    CHECK(memcmp(x.jobs_by_state, y.jobs_by_state, sizeof(x.jobs_by_state)) == 0);
    CHECK(memcmp(x.nodes_by_state, y.nodes_by_state, sizeof(x.nodes_by_state)) == 0);
    CHECK(x.job_bytes == y.job_bytes && x.session_bytes == y.session_bytes);
    struct fsm_sched_result r, s;
    fuzz_fsm_pass(f, &r);
    fuzz_fsm_pass(g, &s);
    CHECK(r.n == s.n && r.jobs_tested == s.jobs_tested && r.reservations == s.reservations &&
          r.backfilled == s.backfilled);
    for (size_t i = 0; i < r.n; i++) {
        CHECK(r.v[i].job_id == s.v[i].job_id && r.v[i].nnodes == s.v[i].nnodes);
        for (uint32_t k = 0; k < r.v[i].nnodes; k++)
            CHECK(strcmp(r.v[i].nodes[k], s.v[i].nodes[k]) == 0);
    }
    fsm_sched_result_free(&r);
    fsm_sched_result_free(&s);
}

/* Apply the entry at the next index to both; it must be accepted alike. */
static void fuzz_fsm_apply_both(struct fsm *f, struct fsm *g, const uint8_t *p, size_t len)
{
    uint64_t index = fsm_last_applied(f) + 1;
    struct fsm_reply a, b;
    CHECK(fsm_apply(f, index, p, len, &a) == FSM_OK);
    CHECK(fsm_apply(g, index, p, len, &b) == FSM_OK);
    CHECK(a.resp != NULL && b.resp != NULL && !a.bad_entry && !b.bad_entry);
    CHECK(a.resp->code == b.resp->code);
    fsm_reply_clear(&a);
    fsm_reply_clear(&b);
}

static void fuzz_fsm_advance(struct fsm *f, struct fsm *g)
{
    CHECK(fsm_last_applied(f) == fsm_last_applied(g));
    if (fsm_last_applied(f) > UINT64_MAX - 2)
        return;
    uint64_t now = fsm_log_time_ms(f);
    uint64_t later = now <= UINT64_MAX - 86400000u ? now + 86400000u : UINT64_MAX;
    struct fsm_sched_result r;
    fuzz_fsm_pass(f, &r);
    uint8_t *p;
    size_t len;
    if (r.n > 0) {
        CHECK(fsm_encode_allocations(&r, now, &p, &len) == FSM_OK);
        fuzz_fsm_apply_both(f, g, p, len);
        free(p);
    }
    fsm_sched_result_free(&r);
    CHECK(fsm_encode_tick(later, &p, &len) == FSM_OK);
    fuzz_fsm_apply_both(f, g, p, len);
    free(p);
    fuzz_fsm_same(f, g);
}

#endif
