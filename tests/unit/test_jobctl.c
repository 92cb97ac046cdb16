/*
 * test_jobctl.c - the leader's job rules (raftd/jobctl.h, the pure part), table-driven:
 * the Pong reconcile (lost / terminate / nothing, with the "launch confirmed before this
 * Ping" condition), the node time-out with the leadership grace, the launch gathering
 * (every node confirms -> started once; the first refusal -> failed once), the report
 * set (batching, de-duplication while in flight, expiry), the scheduler's debounce,
 * the CPUs a Launch gives each node, and who may signal a job (scancel -s).
 */
#include "check_run.h"
#include "jobctl.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define U JOBCTL_UNCONFIRMED

/* ---- Pong reconcile ---------------------------------------------------------------------- */

struct pong_row {
    const char *what;
    int np; /* 0 or 1 placed entry */
    struct jobctl_placed placed;
    int ns; /* 0 or 1 seen entry */
    struct jobctl_seen seen;
    uint64_t ping_seq;
    int nv; /* expected verdicts, in order */
    struct jobctl_verdict v[2];
};

static const struct pong_row pong_rows[] = {
    {"confirmed before the Ping, not listed, not reported: lost",
     1,
     {7, 1, 3, false},
     0,
     {0},
     5,
     1,
     {{JOBCTL_LOST, 7, 1}}},
    {"confirmed after the Ping left: the list may predate it",
     1,
     {7, 1, 6, false},
     0,
     {0},
     5,
     0,
     {{0}}},
    {"confirmed just as the Ping left (same seq is after)",
     1,
     {7, 1, 5, false},
     0,
     {0},
     5,
     0,
     {{0}}},
    {"never confirmed by this leader: a Launch may be on its way",
     1,
     {7, 1, U, false},
     0,
     {0},
     5,
     0,
     {{0}}},
    {"RUNNING at office start (seq 0), not listed: lost",
     1,
     {7, 2, 0, false},
     0,
     {0},
     1,
     1,
     {{JOBCTL_LOST, 7, 2}}},
    {"not listed but its report is queued or applied", 1, {7, 1, 3, true}, 0, {0}, 5, 0, {{0}}},
    {"listed with the same attempt: nothing", 1, {7, 1, 3, false}, 1, {7, 1, false}, 5, 0, {{0}}},
    {"listed as ended (report unacknowledged): nothing",
     1,
     {7, 1, 3, false},
     1,
     {7, 1, true},
     5,
     0,
     {{0}}},
    {"the agent runs an older attempt: that one terminated, the new one lost",
     1,
     {7, 2, 3, false},
     1,
     {7, 1, false},
     5,
     2,
     {{JOBCTL_LOST, 7, 2}, {JOBCTL_TERMINATE, 7, 1}}},
    {"the agent runs a job the state does not place here: terminate",
     0,
     {0},
     1,
     {9, 4, false},
     5,
     1,
     {{JOBCTL_TERMINATE, 9, 4}}},
    {"an ended job the state does not place here: nothing to kill",
     0,
     {0},
     1,
     {9, 4, true},
     5,
     0,
     {{0}}},
    {"nothing placed, nothing running", 0, {0}, 0, {0}, 5, 0, {{0}}},
};

START_TEST(test_pong_table)
{
    const struct pong_row *r = &pong_rows[_i];
    struct jobctl_verdict out[4];
    memset(out, 0, sizeof(out));
    size_t n =
        jobctl_pong_verdicts(&r->placed, (size_t)r->np, &r->seen, (size_t)r->ns, r->ping_seq, out);
    ck_assert_msg(n == (size_t)r->nv, "%s: %zu verdicts, want %d", r->what, n, r->nv);
    for (int i = 0; i < r->nv; i++) {
        ck_assert_msg(out[i].what == r->v[i].what && out[i].job_id == r->v[i].job_id &&
                          out[i].attempt == r->v[i].attempt,
                      "%s: verdict %d is (%d, %llu, %u)", r->what, i, out[i].what,
                      (unsigned long long)out[i].job_id, out[i].attempt);
    }
}
END_TEST

/* Several jobs on one node at once: each judged on its own. */
START_TEST(test_pong_many)
{
    struct jobctl_placed placed[] = {
        {1, 1, 2, false}, /* listed */
        {2, 1, 2, false}, /* missing: lost */
        {3, 1, 9, false}, /* missing, confirmed after the Ping */
        {4, 3, 2, true},  /* missing, reported */
    };
    struct jobctl_seen seen[] = {{1, 1, false}, {5, 1, false}, {6, 2, true}};
    struct jobctl_verdict out[7];
    size_t n = jobctl_pong_verdicts(placed, 4, seen, 3, 4, out);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(out[0].what, JOBCTL_LOST);
    ck_assert_uint_eq(out[0].job_id, 2);
    ck_assert_int_eq(out[1].what, JOBCTL_TERMINATE);
    ck_assert_uint_eq(out[1].job_id, 5);
}
END_TEST

/* ---- node time-out ------------------------------------------------------------------------ */

struct silent_row {
    uint64_t now, office, last;
    uint32_t timeout_s;
    bool silent;
};

static const struct silent_row silent_rows[] = {
    /* never answered: the grace counts from taking office */
    {60999, 1000, 0, 60, false},
    {61000, 1000, 0, 60, true},
    /* an answer after office start moves the count */
    {61000, 1000, 50000, 60, false},
    {109999, 1000, 50000, 60, false},
    {110000, 1000, 50000, 60, true},
    /* an answer older than the office (a previous term) does not shorten the grace */
    {30000, 20000, 500, 10, true},
    {29999, 20000, 500, 10, false},
    /* a clock before both: never silent */
    {10, 20000, 0, 2, false},
};

START_TEST(test_silent_table)
{
    const struct silent_row *r = &silent_rows[_i];
    ck_assert_msg(jobctl_node_silent(r->now, r->office, r->last, r->timeout_s) == r->silent,
                  "row %d: now=%llu office=%llu last=%llu timeout=%u", _i,
                  (unsigned long long)r->now, (unsigned long long)r->office,
                  (unsigned long long)r->last, r->timeout_s);
}
END_TEST

/* ---- launch gathering ---------------------------------------------------------------------- */

static struct jobctl_job job3(void)
{
    struct jobctl_job j = {.job_id = 5, .attempt = 2, .nparts = 3};
    j.parts = calloc(3, sizeof(*j.parts));
    for (int i = 0; i < 3; i++) {
        snprintf(j.parts[i].node, sizeof(j.parts[i].node), "n%d", i);
        j.parts[i].confirmed_seq = U;
        j.parts[i].launch_out = true;
    }
    return j;
}

struct gather_step {
    int part;
    bool ok;
    enum jobctl_launch_verdict want;
};

struct gather_row {
    const char *what;
    bool killing;
    int nsteps;
    struct gather_step s[6];
};

static const struct gather_row gather_rows[] = {
    {"all three confirm: started on the last one",
     false,
     3,
     {{0, true, JOBCTL_LAUNCH_WAIT},
      {1, true, JOBCTL_LAUNCH_WAIT},
      {2, true, JOBCTL_LAUNCH_STARTED}}},
    {"a repeated confirmation (Launch sent again) counts once",
     false,
     5,
     {{0, true, JOBCTL_LAUNCH_WAIT},
      {0, true, JOBCTL_LAUNCH_WAIT},
      {1, true, JOBCTL_LAUNCH_WAIT},
      {2, true, JOBCTL_LAUNCH_STARTED},
      {2, true, JOBCTL_LAUNCH_WAIT}}},
    {"one refusal: failed at once, once; later confirmations change nothing",
     false,
     4,
     {{0, true, JOBCTL_LAUNCH_WAIT},
      {1, false, JOBCTL_LAUNCH_FAILED},
      {2, false, JOBCTL_LAUNCH_WAIT},
      {2, true, JOBCTL_LAUNCH_WAIT}}},
    {"a killed attempt never starts",
     true,
     3,
     {{0, true, JOBCTL_LAUNCH_WAIT}, {1, true, JOBCTL_LAUNCH_WAIT}, {2, true, JOBCTL_LAUNCH_WAIT}}},
    {"a part out of range is ignored", false, 1, {{7, true, JOBCTL_LAUNCH_WAIT}}},
};

START_TEST(test_gather_table)
{
    const struct gather_row *r = &gather_rows[_i];
    struct jobctl_job j = job3();
    j.killing = r->killing;
    for (int k = 0; k < r->nsteps; k++) {
        enum jobctl_launch_verdict v =
            jobctl_launch_reply(&j, (uint32_t)r->s[k].part, r->s[k].ok, 10 + (uint64_t)k);
        ck_assert_msg(v == r->s[k].want, "%s: step %d gave %d", r->what, k, v);
    }
    free(j.parts);
}
END_TEST

/* The sequence of the first confirmation is kept: it decides the Pong's "before". */
START_TEST(test_gather_keeps_first_seq)
{
    struct jobctl_job j = job3();
    jobctl_launch_reply(&j, 1, true, 40);
    jobctl_launch_reply(&j, 1, true, 90);
    ck_assert_uint_eq(j.parts[1].confirmed_seq, 40);
    ck_assert(!j.parts[1].launch_out);
    ck_assert(j.parts[0].launch_out);
    ck_assert_uint_eq(j.parts[0].confirmed_seq, U);
    /* a refusal confirms nothing */
    jobctl_launch_reply(&j, 2, false, 95);
    ck_assert_uint_eq(j.parts[2].confirmed_seq, U);
    ck_assert(j.failed);
    ck_assert(!j.started);
    free(j.parts);
}
END_TEST

/* ---- reports ---------------------------------------------------------------------------- */

static Spur__Fsm__JobCompleted rep(uint64_t job, uint32_t attempt, const char *node, int code)
{
    Spur__Fsm__JobCompleted r = SPUR__FSM__JOB_COMPLETED__INIT;
    r.job_id = job;
    r.attempt = attempt;
    r.node = (char *)node;
    r.exit_code = code;
    return r;
}

START_TEST(test_reports_batch_and_dedup)
{
    struct jobctl_reports rs = {0};
    Spur__Fsm__JobCompleted a = rep(1, 1, "n1", 3), a2 = rep(1, 1, "n1", 9), b = rep(1, 1, "n2", 0),
                            c = rep(1, 2, "n1", 0);
    ck_assert_int_eq(jobctl_reports_add(&rs, &a), 1);
    ck_assert_int_eq(jobctl_reports_add(&rs, &a2), 0); /* same part queued: not twice */
    ck_assert_int_eq(jobctl_reports_add(&rs, &b), 1);
    ck_assert_int_eq(jobctl_reports_add(&rs, &c), 1); /* another attempt is another part */
    ck_assert(jobctl_reports_has(&rs, 1, 1, "n2"));
    ck_assert(!jobctl_reports_has(&rs, 1, 3, "n2"));
    Spur__Fsm__JobCompleted *out[8];
    /* one loop turn's batch, bounded by max */
    ck_assert_uint_eq(jobctl_reports_take(&rs, 1000, out, 2), 2);
    ck_assert_str_eq(out[0]->node, "n1");
    ck_assert_int_eq(out[0]->exit_code, 3); /* the first report kept */
    ck_assert_str_eq(out[1]->node, "n2");
    ck_assert_uint_eq(jobctl_reports_take(&rs, 1000, out, 8), 1);
    ck_assert_uint_eq(out[0]->attempt, 2);
    ck_assert_uint_eq(jobctl_reports_take(&rs, 1001, out, 8), 0); /* all in flight */
    /* in flight, pushed again: not proposed twice */
    ck_assert_int_eq(jobctl_reports_add(&rs, &a), 0);
    ck_assert_uint_eq(jobctl_reports_take(&rs, 1002, out, 8), 0);
    /* applied: gone; a later push (the ack was lost) is proposed again, and harmlessly */
    jobctl_reports_applied(&rs, 1, 1, "n1");
    ck_assert(!jobctl_reports_has(&rs, 1, 1, "n1"));
    ck_assert_int_eq(jobctl_reports_add(&rs, &a), 1);
    ck_assert_uint_eq(jobctl_reports_take(&rs, 5000, out, 8), 1);
    /* a proposal that never applied is forgotten after the age; n2's (at 1000) goes first */
    jobctl_reports_expire(&rs, 5000, 4000);
    ck_assert(!jobctl_reports_has(&rs, 1, 1, "n2"));
    ck_assert(!jobctl_reports_has(&rs, 1, 2, "n1"));
    ck_assert(jobctl_reports_has(&rs, 1, 1, "n1"));
    ck_assert_int_eq(jobctl_reports_add(&rs, &b), 1);
    /* a queued report is never expired */
    jobctl_reports_expire(&rs, 100000, 4000);
    ck_assert(jobctl_reports_has(&rs, 1, 1, "n2"));
    ck_assert_uint_eq(jobctl_reports_take(&rs, 100000, out, 8), 1);
    ck_assert_str_eq(out[0]->node, "n2");
    /* a node name the state could not hold */
    char longname[FSM_NODE_NAME_MAX + 8];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    Spur__Fsm__JobCompleted bad = rep(2, 1, longname, 0);
    ck_assert_int_eq(jobctl_reports_add(&rs, &bad), -1);
    jobctl_reports_free(&rs);
}
END_TEST

/* Many reports: every one proposed exactly once across batches. */
START_TEST(test_reports_many)
{
    struct jobctl_reports rs = {0};
    char node[16];
    for (uint64_t i = 1; i <= 300; i++) {
        snprintf(node, sizeof(node), "n%llu", (unsigned long long)(i % 7));
        Spur__Fsm__JobCompleted r = rep(i, 1, node, 0);
        ck_assert_int_eq(jobctl_reports_add(&rs, &r), 1);
        ck_assert_int_eq(jobctl_reports_add(&rs, &r), 0);
    }
    Spur__Fsm__JobCompleted *out[128];
    bool seen[301] = {false};
    size_t total = 0;
    for (int turn = 0; turn < 10; turn++) {
        size_t n = jobctl_reports_take(&rs, 10 + (uint64_t)turn, out, 128);
        for (size_t k = 0; k < n; k++) {
            ck_assert(!seen[out[k]->job_id]);
            seen[out[k]->job_id] = true;
        }
        total += n;
    }
    ck_assert_uint_eq(total, 300);
    jobctl_reports_free(&rs);
}
END_TEST

/* ---- scheduler debounce ---------------------------------------------------------------- */

struct sched_row {
    struct jobctl_sched s;
    uint64_t now;
    bool due;
};

static const struct sched_row sched_rows[] = {
    /* no pass yet: run */
    {{false, 0, 0, 0}, 5, true},
    /* our JobsAllocated not applied yet: never, however wanted */
    {{true, 0, 0, 1}, 5, false},
    {{true, 1000, 10, 1}, 99999, false},
    /* wanted: not sooner than 3x the last pass's duration after it */
    {{true, 1000, 10, 0}, 1029, false},
    {{true, 1000, 10, 0}, 1030, true},
    {{true, 1000, 400, 0}, 2199, false},
    {{true, 1000, 400, 0}, 2200, true},
    /* not wanted: the periodic pass once a second */
    {{false, 1000, 10, 0}, 1999, false},
    {{false, 1000, 10, 0}, 2000, true},
    /* a pass slower than a third of the period stretches the period too */
    {{false, 1000, 500, 0}, 2000, false},
    {{false, 1000, 500, 0}, 2500, true},
};

START_TEST(test_sched_table)
{
    const struct sched_row *r = &sched_rows[_i];
    ck_assert_msg(jobctl_sched_due(&r->s, r->now) == r->due, "row %d", _i);
}
END_TEST

/* ---- the Launch's CPUs ---------------------------------------------------------------- */

struct cpus_row {
    uint32_t ntasks, cpt, nnodes, want;
};

static const struct cpus_row cpus_rows[] = {
    {0, 0, 1, 1},                /* defaults: one task, one CPU */
    {4, 2, 2, 4}, {5, 1, 2, 3},  /* ceil(5/2) */
    {1, 1, 2, 1},                /* fewer tasks than nodes: one each */
    {8, 0, 3, 3}, {3, 4, 0, 12}, /* no node list: as one node */
};

START_TEST(test_cpus_table)
{
    const struct cpus_row *r = &cpus_rows[_i];
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    spec.ntasks = r->ntasks;
    spec.cpus_per_task = r->cpt;
    ck_assert_uint_eq(jobctl_cpus_per_node(&spec, r->nnodes), r->want);
}
END_TEST

/* ---- scancel -s: who may signal ----------------------------------------------------------- */

struct sig_row {
    const char *what;
    bool has_caller;
    uint32_t uid;
    bool op;
    uint32_t job_uid;
    bool want;
};

static const struct sig_row sig_rows[] = {
    {"the owner", true, 1001, false, 1001, true},
    {"another user: denied", true, 1002, false, 1001, false},
    {"an operator, any job", true, 1500, true, 1001, true},
    {"root as operator", true, 0, true, 1001, true},
    {"uid 0 without the operator flag, another's job", true, 0, false, 1001, false},
    {"no caller: nobody", false, 1001, true, 1001, false},
};

START_TEST(test_signal_permission)
{
    const struct sig_row *r = &sig_rows[_i];
    Spur__Api__Caller c = SPUR__API__CALLER__INIT;
    c.user = "someone";
    c.uid = r->uid;
    c.operator_ = r->op;
    c.method = "munge";
    bool got = jobctl_may_signal(r->has_caller ? &c : NULL, r->job_uid);
    ck_assert_msg(got == r->want, "%s: %d, want %d", r->what, got, r->want);
}
END_TEST

#define ROWS(a) (int)(sizeof(a) / sizeof((a)[0]))

static Suite *jobctl_suite(void)
{
    Suite *s = suite_create("jobctl");
    TCase *tc = tcase_create("rules");
    tcase_add_loop_test(tc, test_pong_table, 0, ROWS(pong_rows));
    tcase_add_test(tc, test_pong_many);
    tcase_add_loop_test(tc, test_silent_table, 0, ROWS(silent_rows));
    tcase_add_loop_test(tc, test_gather_table, 0, ROWS(gather_rows));
    tcase_add_test(tc, test_gather_keeps_first_seq);
    tcase_add_test(tc, test_reports_batch_and_dedup);
    tcase_add_test(tc, test_reports_many);
    tcase_add_loop_test(tc, test_sched_table, 0, ROWS(sched_rows));
    tcase_add_loop_test(tc, test_cpus_table, 0, ROWS(cpus_rows));
    tcase_add_loop_test(tc, test_signal_permission, 0, ROWS(sig_rows));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(jobctl_suite());
}
