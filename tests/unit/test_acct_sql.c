/*
 * test_acct_sql.c - the accounting database's SQL parameters and rows (raftd/acct_sql.c).
 *
 * Pinned: text-array literals escape quotes and backslashes and keep commas, braces, the
 * word NULL and non-ASCII text as data, turn bytes that are not UTF-8 into U+FFFD and
 * write SQL NULL bare; a batch's parameters (one array per column, one upsert per job
 * from its newest record, every record an event, the batch's max seq); sacct's
 * parameters (limit + 1, the cap); a row parses back into an AcctJob and a malformed
 * one is refused; job state names both ways.
 */
#include "acct_sql.h"
#include "check_run.h"
#include "fsm.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define JS(x) SPUR__API__JOB_STATE__JOB_##x

static char *arr_of(const char *const *items, size_t n)
{
    struct acct_sql_arr a;
    acct_sql_arr_init(&a);
    for (size_t i = 0; i < n; i++)
        acct_sql_arr_text(&a, items[i]);
    return acct_sql_arr_take(&a);
}

START_TEST(test_array_escaping)
{
    struct {
        const char *in, *out;
    } t[] = {
        {"plain", "{\"plain\"}"},
        {"", "{\"\"}"},
        {"a\"b", "{\"a\\\"b\"}"},
        {"back\\slash", "{\"back\\\\slash\"}"},
        {"a,b", "{\"a,b\"}"},
        {"{x}", "{\"{x}\"}"},
        {"NULL", "{\"NULL\"}"},
        {" sp ", "{\" sp \"}"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "{\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}"},
        {"bad\xff", "{\"bad\xef\xbf\xbd\"}"},                   /* not UTF-8 */
        {"cut\xc3", "{\"cut\xef\xbf\xbd\"}"},                   /* a sequence cut short */
        {"over\xc0\xaf", "{\"over\xef\xbf\xbd\xef\xbf\xbd\"}"}, /* overlong '/' */
        {"sur\xed\xa0\x80", "{\"sur\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"}"}, /* a surrogate */
        {"tab\tnl\n", "{\"tab\tnl\n\"}"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        const char *in[] = {t[i].in};
        char *s = arr_of(in, 1);
        ck_assert_ptr_nonnull(s);
        ck_assert_msg(strcmp(s, t[i].out) == 0, "case %zu: %s", i, s);
        free(s);
    }
    const char *mix[] = {"x", NULL, "y"};
    char *s = arr_of(mix, 3);
    ck_assert_str_eq(s, "{\"x\",NULL,\"y\"}");
    free(s);
    s = arr_of(NULL, 0);
    ck_assert_str_eq(s, "{}");
    free(s);
    struct acct_sql_arr a;
    acct_sql_arr_init(&a);
    acct_sql_arr_u64(&a, UINT64_MAX);
    acct_sql_arr_i64(&a, -5);
    acct_sql_arr_null(&a);
    s = acct_sql_arr_take(&a);
    ck_assert_str_eq(s, "{18446744073709551615,-5,NULL}");
    free(s);
}
END_TEST

START_TEST(test_state_names)
{
    for (int st = JS(PENDING); st <= JS(CONFIGURING); st++) {
        const char *name = acct_sql_state_name(st);
        ck_assert_int_eq(acct_sql_state_parse(name), st);
    }
    ck_assert_str_eq(acct_sql_state_name(JS(OUT_OF_MEMORY)), "OUT_OF_MEMORY");
    ck_assert_str_eq(acct_sql_state_name(JS(NODE_FAIL)), "NODE_FAIL");
    ck_assert_str_eq(acct_sql_state_name(JS(CANCELLED)), "CANCELLED");
    ck_assert_int_eq(acct_sql_state_parse("COMPLETED"), JS(COMPLETED));
    ck_assert_int_eq(acct_sql_state_parse("BOGUS"), -1);
    ck_assert_int_eq(acct_sql_state_parse(""), -1);
    ck_assert_str_eq(acct_sql_event_name(FSM_ACCT_SUBMIT), "submit");
    ck_assert_str_eq(acct_sql_event_name(FSM_ACCT_START), "start");
    ck_assert_str_eq(acct_sql_event_name(FSM_ACCT_END), "end");
    ck_assert_str_eq(acct_sql_event_name(FSM_ACCT_REQUEUE), "requeue");
    ck_assert_str_eq(acct_sql_event_name(99), "unknown");
}
END_TEST

static void mk_job(Spur__Api__AcctJob *j, uint64_t id, int state, const char *name)
{
    spur__api__acct_job__init(j);
    j->job_id = id;
    j->name = (char *)name;
    j->user = (char *)"alice";
    j->uid = 1000;
    j->gid = 100;
    j->account = (char *)"";
    j->partition = (char *)"debug";
    j->state = state;
    j->nnodes = 1;
    j->cpus = 2;
    j->submit_time_ms = 1700000000123;
    j->workdir = (char *)"/home/alice";
}

START_TEST(test_batch_params)
{
    Spur__Api__AcctJob j1, j1b, j2;
    mk_job(&j1, 7, JS(PENDING), "a,\"b\"");
    mk_job(&j2, 8, JS(PENDING), "two");
    mk_job(&j1b, 7, JS(RUNNING), "a,\"b\"");
    char *nodes[] = {(char *)"n1", (char *)"n2"};
    j1b.node_list = nodes;
    j1b.n_node_list = 2;
    j1b.start_time_ms = 1700000001000;
    Spur__Fsm__AcctRecord r[3];
    Spur__Fsm__AcctRecord *rp[3];
    Spur__Api__AcctJob *jobs[3] = {&j1, &j2, &j1b};
    uint32_t events[3] = {FSM_ACCT_SUBMIT, FSM_ACCT_SUBMIT, FSM_ACCT_START};
    for (int i = 0; i < 3; i++) {
        spur__fsm__acct_record__init(&r[i]);
        r[i].seq = 11 + (uint64_t)i;
        r[i].event = events[i];
        r[i].time_ms = 1700000000000 + (uint64_t)i;
        r[i].job = jobs[i];
        rp[i] = &r[i];
    }
    struct acct_sql_batch b;
    ck_assert_int_eq(acct_sql_batch_build("c1", rp, 3, &b), 0);
    ck_assert_uint_eq(b.max_seq, 13);
    ck_assert_uint_eq(b.njobs, 2);
    ck_assert_int_eq(b.jobs.n, ACCT_SQL_JOB_PARAMS);
    ck_assert_str_eq(b.jobs.values[0], "c1");
    /* Job 7 once, from its newest record (seq 13, RUNNING), after job 8. */
    ck_assert_str_eq(b.jobs.values[1], "{8,7}");
    ck_assert_str_eq(b.jobs.values[3], "{NULL,NULL}"); /* array_task_id: not an array */
    ck_assert_str_eq(b.jobs.values[4], "{\"two\",\"a,\\\"b\\\"\"}");
    ck_assert_str_eq(b.jobs.values[10], "{\"PENDING\",\"RUNNING\"}");
    ck_assert_str_eq(b.jobs.values[14], "{\"\",\"n1,n2\"}");
    ck_assert_str_eq(b.jobs.values[18], "{1700000000123,1700000000123}");
    ck_assert_str_eq(b.jobs.values[20], "{0,1700000001000}"); /* start: 0 is NULL in SQL */
    ck_assert_str_eq(b.jobs.values[26], "{12,13}");           /* last_seq: the record's seq */
    ck_assert_int_eq(b.events.n, ACCT_SQL_EVENT_PARAMS);
    ck_assert_str_eq(b.events.values[1], "{11,12,13}");
    ck_assert_str_eq(b.events.values[2], "{7,8,7}");
    ck_assert_str_eq(b.events.values[3], "{\"submit\",\"submit\",\"start\"}");
    ck_assert_str_eq(b.events.values[4], "{1700000000000,1700000000001,1700000000002}");
    ck_assert_str_eq(b.events.values[5], "{\"PENDING\",\"PENDING\",\"RUNNING\"}");
    ck_assert_int_eq(b.advance.n, 2);
    ck_assert_str_eq(b.advance.values[0], "c1");
    ck_assert_str_eq(b.advance.values[1], "13");
    acct_sql_batch_free(&b);
    ck_assert_ptr_null(b.jobs.values[0]);
    /* The statements take exactly the parameters built. */
    ck_assert_ptr_nonnull(strstr(ACCT_SQL_UPSERT_JOBS, "$27::bigint[]"));
    ck_assert_ptr_null(strstr(ACCT_SQL_UPSERT_JOBS, "$28"));
    ck_assert_ptr_nonnull(strstr(ACCT_SQL_UPSERT_JOBS, "WHERE jobs.last_seq < EXCLUDED.last_seq"));
    ck_assert_ptr_nonnull(strstr(ACCT_SQL_INSERT_EVENTS, "$6::text[]"));
    ck_assert_ptr_null(strstr(ACCT_SQL_INSERT_EVENTS, "$7"));
}
END_TEST

START_TEST(test_query_params)
{
    Spur__Api__AcctQueryRequest q = SPUR__API__ACCT_QUERY_REQUEST__INIT;
    uint64_t ids[] = {3, 4};
    char *users[] = {(char *)"bob"};
    Spur__Api__JobState states[] = {JS(FAILED), JS(TIMEOUT)};
    q.job_ids = ids;
    q.n_job_ids = 2;
    q.users = users;
    q.n_users = 1;
    q.states = states;
    q.n_states = 2;
    q.start_ms = 5;
    q.limit = 10;
    struct acct_sql_params p;
    ck_assert_int_eq(acct_sql_query_params("c1", &q, &p), 0);
    ck_assert_int_eq(p.n, ACCT_SQL_QUERY_PARAMS);
    ck_assert_str_eq(p.values[0], "c1");
    ck_assert_str_eq(p.values[1], "{3,4}");
    ck_assert_str_eq(p.values[2], "{\"bob\"}");
    ck_assert_str_eq(p.values[3], "{\"FAILED\",\"TIMEOUT\"}");
    ck_assert_str_eq(p.values[4], "5");
    ck_assert_str_eq(p.values[5], "0");
    ck_assert_str_eq(p.values[6], "{}");
    ck_assert_str_eq(p.values[9], "11"); /* one more than the limit: truncated? */
    acct_sql_params_free(&p);
    q.limit = 0;
    ck_assert_uint_eq(acct_sql_limit(&q), ACCT_SQL_MAX_LIMIT);
    q.limit = ACCT_SQL_MAX_LIMIT + 1;
    ck_assert_uint_eq(acct_sql_limit(&q), ACCT_SQL_MAX_LIMIT);
    ck_assert_ptr_nonnull(strstr(ACCT_SQL_QUERY, "$10::bigint"));
}
END_TEST

START_TEST(test_parse_row)
{
    const char *v[ACCT_SQL_NCOLS] = {"42",
                                     "0",
                                     "0",
                                     "my job",
                                     "alice",
                                     "1000",
                                     "100",
                                     "acct",
                                     "debug",
                                     "OUT_OF_MEMORY",
                                     "137",
                                     "9",
                                     "2",
                                     "n1,n2",
                                     "4",
                                     "2048",
                                     "60",
                                     "1700000000123",
                                     "1700000000123",
                                     "1700000001000",
                                     "0",
                                     "/home/alice",
                                     "1",
                                     "OutOfMemory",
                                     "",
                                     "99"};
    Spur__Api__AcctJob j;
    char why[128] = "";
    ck_assert_int_eq(acct_sql_parse_row(v, ACCT_SQL_NCOLS, &j, why, sizeof(why)), 0);
    ck_assert_uint_eq(j.job_id, 42);
    ck_assert_str_eq(j.name, "my job");
    ck_assert_str_eq(j.user, "alice");
    ck_assert_uint_eq(j.uid, 1000);
    ck_assert_int_eq(j.state, JS(OUT_OF_MEMORY));
    ck_assert_int_eq(j.exit_code, 137);
    ck_assert_int_eq(j.exit_signal, 9);
    ck_assert_uint_eq(j.n_node_list, 2);
    ck_assert_str_eq(j.node_list[0], "n1");
    ck_assert_str_eq(j.node_list[1], "n2");
    ck_assert_uint_eq(j.mem_mb, 2048);
    ck_assert_uint_eq(j.submit_time_ms, 1700000000123);
    ck_assert_uint_eq(j.start_time_ms, 1700000001000);
    ck_assert_uint_eq(j.end_time_ms, 0);
    ck_assert_str_eq(j.reason, "OutOfMemory");
    ck_assert_str_eq(j.dependency, "");
    ck_assert_uint_eq(j.last_seq, 99);
    acct_sql_job_free(&j, false);

    v[13] = ""; /* no nodes */
    ck_assert_int_eq(acct_sql_parse_row(v, ACCT_SQL_NCOLS, &j, why, sizeof(why)), 0);
    ck_assert_uint_eq(j.n_node_list, 0);
    acct_sql_job_free(&j, false);

    const char *bad[][2] = {{"0", "-1"}, {"5", "x"}, {"9", "WEIRD"}, {"10", "99999999999"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *w[ACCT_SQL_NCOLS];
        memcpy(w, v, sizeof(w));
        w[atoi(bad[i][0])] = bad[i][1];
        ck_assert_int_eq(acct_sql_parse_row(w, ACCT_SQL_NCOLS, &j, why, sizeof(why)), -1);
        ck_assert_ptr_nonnull(strstr(why, "column"));
        ck_assert_ptr_null(j.node_list);
    }
    ck_assert_int_eq(acct_sql_parse_row(v, 3, &j, why, sizeof(why)), -1);
}
END_TEST

START_TEST(test_migration)
{
    size_t n = 0;
    const char *const *st = acct_sql_migration(0, &n);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_ge(n, 8);
    /* Every table of schema version 1, and the last statement records version 1. */
    const char *tables[] = {"spur_schema (", "spur_export (", "jobs (", "job_events ("};
    for (size_t t = 0; t < 4; t++) {
        bool found = false;
        for (size_t i = 0; i < n; i++)
            found = found || strstr(st[i], tables[t]) != NULL;
        ck_assert_msg(found, "no CREATE for %s", tables[t]);
    }
    ck_assert_ptr_nonnull(strstr(st[n - 1], "VALUES (1, 1)"));
    ck_assert_ptr_null(acct_sql_migration(1, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_nonnull(strstr(ACCT_SQL_LOCK, "7310593858020254001"));
}
END_TEST

static Suite *acct_sql_suite(void)
{
    Suite *s = suite_create("acct_sql");
    check_case(s, "sql",
               (const TTest *[]){test_array_escaping, test_state_names, test_batch_params,
                                 test_query_params, test_parse_row, test_migration, NULL});
    return s;
}

int main(void)
{
    return check_run(acct_sql_suite());
}
