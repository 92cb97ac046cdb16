/*
 * test_sacct.c - sacct's pure half (client/fmt_sacct.c): options into the query and the
 * output settings, Slurm's time forms, the field list, the table (widths, '+' truncation,
 * justification, the dash line), -n, -p/-P, the default/-l/-b columns, the batch step
 * rows, ExitCode/Elapsed/Timelimit forms, the filters, and --json parsed back (jansson).
 * TZ=UTC is set first, so every local time is pinned.
 */
#include "check_run.h"
#include "fmt_sacct.h"

#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOW_MS      1700000000000ull /* 2023-11-14T22:13:20 UTC */
#define MIDNIGHT_MS 1699920000000ull /* 2023-11-14T00:00:00 UTC */
#define JS(x)       SPUR__API__JOB_STATE__JOB_##x

static char err[512];

static int parse(struct sacct_opts *o, const char *const *args)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"sacct";
    for (size_t i = 0; args[i] != NULL && argc < 31; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    return sacct_parse_args(argc, argv, NOW_MS, o, err, sizeof(err));
}
#define PARSE(o, ...) parse((o), (const char *const[]){__VA_ARGS__, NULL})

static uint64_t t(const char *s)
{
    uint64_t ms = 0;
    ck_assert_msg(sacct_parse_time(s, NOW_MS, &ms, err, sizeof(err)) == 0, "%s: %s", s, err);
    return ms;
}

static void bad_time(const char *s)
{
    uint64_t ms;
    ck_assert_msg(sacct_parse_time(s, NOW_MS, &ms, err, sizeof(err)) == -1, "%s accepted", s);
    ck_assert_ptr_nonnull(strstr(err, "Invalid time specification"));
}

START_TEST(test_time_formats)
{
    ck_assert_uint_eq(t("now"), NOW_MS);
    ck_assert_uint_eq(t("now-1hours"), NOW_MS - 3600000);
    ck_assert_uint_eq(t("now+30"), NOW_MS + 30000);
    ck_assert_uint_eq(t("now-2days"), NOW_MS - 2 * 86400000ull);
    ck_assert_uint_eq(t("now-1weeks"), NOW_MS - 7 * 86400000ull);
    ck_assert_uint_eq(t("now-5min"), NOW_MS - 300000);
    ck_assert_uint_eq(t("today"), MIDNIGHT_MS);
    ck_assert_uint_eq(t("midnight"), MIDNIGHT_MS);
    ck_assert_uint_eq(t("noon"), MIDNIGHT_MS + 12 * 3600000ull);
    ck_assert_uint_eq(t("teatime"), MIDNIGHT_MS + 16 * 3600000ull);
    ck_assert_uint_eq(t("tomorrow"), MIDNIGHT_MS + 86400000ull);
    ck_assert_uint_eq(t("10:30"), MIDNIGHT_MS + 37800000ull);
    ck_assert_uint_eq(t("10:30:15"), MIDNIGHT_MS + 37815000ull);
    ck_assert_uint_eq(t("2:00pm"), MIDNIGHT_MS + 14 * 3600000ull);
    ck_assert_uint_eq(t("12:00AM"), MIDNIGHT_MS);
    ck_assert_uint_eq(t("2023-11-01"), 1698796800000ull);
    ck_assert_uint_eq(t("2023-11-01T08:00"), 1698796800000ull + 8 * 3600000ull);
    ck_assert_uint_eq(t("2023-11-01T08:00:05"), 1698796800000ull + 8 * 3600000ull + 5000);
    ck_assert_uint_eq(t("1101"), 1698796800000ull);
    ck_assert_uint_eq(t("110123"), 1698796800000ull);
    ck_assert_uint_eq(t("11/01"), 1698796800000ull);
    ck_assert_uint_eq(t("11/01/23"), 1698796800000ull);
    ck_assert_uint_eq(t("11.01.23"), 1698796800000ull);
    ck_assert_uint_eq(t("11/01-08:00"), 1698796800000ull + 8 * 3600000ull);
    /* No year: the last such date, never a future one. */
    ck_assert_uint_eq(t("12/25"), 1671926400000ull); /* 2022-12-25 */
    ck_assert_uint_eq(t("@1700000000"), NOW_MS);
    const char *bad[] = {
        "",     "yesterdayish",    "25:00",  "10:61", "13/01", "2023-13-01", "2023-1-1",
        "now+", "now-3fortnights", "11/01x", "nowx",  "@",     "1:2:3:4",    "13:00pm",
        NULL};
    for (size_t i = 0; bad[i] != NULL; i++)
        bad_time(bad[i]);
}
END_TEST

START_TEST(test_options)
{
    struct sacct_opts o;
    ck_assert_int_eq(PARSE(&o, "-j", "42,43", "--jobs=44", "-u", "alice,1000", "-s", "CD,f",
                           "--state=TIMEOUT", "-r", "debug", "-A", "proj", "--name", "a,b", "-X",
                           "-n", "-P", "--json"),
                     0);
    ck_assert_int_eq(o.action, SACCT_RUN);
    ck_assert_uint_eq(o.n_job_ids, 3);
    ck_assert_uint_eq(o.job_ids[2], 44);
    ck_assert_uint_eq(o.n_users, 2);
    ck_assert_str_eq(o.users[1], "1000");
    ck_assert_uint_eq(o.n_states, 3);
    ck_assert_int_eq(o.states[0], JS(COMPLETED));
    ck_assert_int_eq(o.states[1], JS(FAILED));
    ck_assert_int_eq(o.states[2], JS(TIMEOUT));
    ck_assert_str_eq(o.partitions[0], "debug");
    ck_assert_str_eq(o.accounts[0], "proj");
    ck_assert_uint_eq(o.n_names, 2);
    ck_assert(o.allocations && !o.header && o.json);
    ck_assert_int_eq(o.mode, SACCT_PARSABLE2);
    ck_assert_uint_eq(o.start_ms, 0); /* -j given: unbounded */
    ck_assert_str_eq(o.format, SACCT_FORMAT_DEFAULT);
    sacct_opts_free(&o);

    /* Defaults: 00:00 today, no end, the default format, a table with a header. */
    ck_assert_int_eq(PARSE(&o, "-a"), 0);
    ck_assert(o.all_users && o.header && !o.json && !o.allocations);
    ck_assert_uint_eq(o.start_ms, MIDNIGHT_MS);
    ck_assert_uint_eq(o.end_ms, 0);
    ck_assert_int_eq(o.mode, SACCT_TABLE);
    sacct_opts_free(&o);
    /* -s without -S: now. -S/-E given. -p. -l, -b; -o wins over both. */
    ck_assert_int_eq(PARSE(&o, "-s", "R", "-p", "-l"), 0);
    ck_assert_uint_eq(o.start_ms, NOW_MS);
    ck_assert_int_eq(o.mode, SACCT_PARSABLE);
    ck_assert_str_eq(o.format, SACCT_FORMAT_LONG);
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "-S", "2023-11-01", "-E", "now", "-b"), 0);
    ck_assert(o.start_given && o.end_given);
    ck_assert_uint_eq(o.start_ms, 1698796800000ull);
    ck_assert_uint_eq(o.end_ms, NOW_MS);
    ck_assert_str_eq(o.format, SACCT_FORMAT_BRIEF);
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "--starttime=noon", "-l", "--format=jobid,state"), 0);
    ck_assert_str_eq(o.format, "jobid,state");
    sacct_opts_free(&o);
    /* help, usage, version, helpformat */
    ck_assert_int_eq(PARSE(&o, "-h"), 0);
    ck_assert_int_eq(o.action, SACCT_HELP);
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "--usage"), 0);
    ck_assert_int_eq(o.action, SACCT_USAGE);
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "-V"), 0);
    ck_assert_int_eq(o.action, SACCT_VERSION);
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "--helpformat"), 0);
    ck_assert_int_eq(o.action, SACCT_HELPFORMAT);
    sacct_opts_free(&o);
}
END_TEST

static void bad_opts(int rc, const char *msg, const char *const *args)
{
    struct sacct_opts o;
    ck_assert_int_eq(parse(&o, args), rc);
    ck_assert_msg(strstr(err, msg) != NULL, "\"%s\" lacks \"%s\"", err, msg);
}
#define BAD(msg, ...) bad_opts(-1, (msg), (const char *const[]){__VA_ARGS__, NULL})
/* What getopt refuses: -2, printed in its words (as Slurm's sacct does). */
#define BADOPT(msg, ...) bad_opts(-2, (msg), (const char *const[]){__VA_ARGS__, NULL})

START_TEST(test_option_errors)
{
    BAD("Invalid job id x", "-j", "42,x");
    BAD("Invalid job state specified: BOGUS", "-s", "R,BOGUS");
    BAD("Invalid job state specified: all", "-s", "all");
    BAD("Invalid time specification: soon", "-S", "soon");
    BAD("Invalid time specification: 99:99", "-E", "99:99");
    BAD("requested is after end time", "-S", "now", "-E", "now-1hours");
    BADOPT("option requires an argument -- 'j'", "-j");
    BADOPT("option '--format' requires an argument", "--format");
    BADOPT("invalid option -- 'Z'", "-Z");
    BADOPT("unrecognized option '--bogus'", "--bogus");
    BAD("unexpected argument 'extra'", "extra");
}
END_TEST

START_TEST(test_fields_parse)
{
    struct sacct_cols c;
    ck_assert_int_eq(sacct_cols_parse("jobid,JOBNAME%30,State%-5,exitcode", &c, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(c.n, 4);
    ck_assert_int_eq(c.v[0].width, -12);
    ck_assert_int_eq(c.v[1].width, 30);
    ck_assert_int_eq(c.v[2].width, -5);
    ck_assert_int_eq(c.v[3].width, 8);
    sacct_cols_free(&c);
    const char *every = "JobID,JobIDRaw,JobName,Partition,Account,AllocCPUS,AllocNodes,NNodes,"
                        "NodeList,State,ExitCode,DerivedExitCode,Elapsed,ElapsedRaw,Start,End,"
                        "Submit,Eligible,Timelimit,TimelimitRaw,User,UID,Group,GID,WorkDir,"
                        "Reason,ReqCPUS,ReqMem,ReqNodes,Cluster,Restarts";
    ck_assert_int_eq(sacct_cols_parse(every, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(c.n, 31);
    sacct_cols_free(&c);
    ck_assert_int_eq(sacct_cols_parse(SACCT_FORMAT_LONG, &c, err, sizeof(err)), 0);
    sacct_cols_free(&c);
    ck_assert_int_eq(sacct_cols_parse("JobID,Bogus", &c, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "Invalid field requested: \"Bogus\"");
    ck_assert_int_eq(sacct_cols_parse("JobName%x", &c, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "Invalid field requested: \"JobName%x\"");
    ck_assert_int_eq(sacct_cols_parse("JobName%", &c, err, sizeof(err)), -1);
    ck_assert_int_eq(sacct_cols_parse("", &c, err, sizeof(err)), -1);
}
END_TEST

/* ---- jobs and output ----------------------------------------------------------------- */

static char *nodes2[] = {(char *)"n1", (char *)"n2"};

static void job_init(sacct_job *j, uint64_t id, const char *name, int state)
{
    spur__api__acct_job__init(j);
    j->job_id = id;
    j->name = (char *)name;
    j->user = (char *)"alice";
    j->uid = 1000;
    j->gid = 100;
    j->account = (char *)"proj";
    j->partition = (char *)"debug";
    j->state = state;
    j->cpus = 4;
    j->nnodes = 2;
    j->mem_mb = 4096;
    j->time_limit_min = 90;
    j->submit_time_ms = NOW_MS - 7200000;
    j->eligible_time_ms = NOW_MS - 7200000;
    j->workdir = (char *)"/home/alice";
    if (state != JS(PENDING)) {
        j->start_time_ms = NOW_MS - 3600000;
        j->n_node_list = 2;
        j->node_list = nodes2;
    }
}

static char *render(const char *format, const sacct_job *const *jobs, size_t n, bool allocations,
                    enum sacct_mode mode, bool header)
{
    struct sacct_cols c;
    ck_assert_int_eq(sacct_cols_parse(format, &c, err, sizeof(err)), 0);
    struct sacct_row *rows;
    size_t nrows;
    ck_assert_int_eq(sacct_rows(jobs, n, allocations, &rows, &nrows), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    struct sacct_ctx ctx = {.now_ms = NOW_MS, .cluster = "c1"};
    sacct_print(f, &c, rows, nrows, mode, header, &ctx);
    fclose(f);
    free(rows);
    sacct_cols_free(&c);
    return buf;
}

START_TEST(test_default_table)
{
    sacct_job a, b;
    job_init(&a, 42, "a-very-long-job-name", JS(COMPLETED));
    a.end_time_ms = NOW_MS - 60000;
    job_init(&b, 43, "wait", JS(PENDING));
    const sacct_job *jobs[] = {&a, &b};
    char *out = render(SACCT_FORMAT_DEFAULT, jobs, 2, false, SACCT_TABLE, true);
    ck_assert_str_eq(
        out, "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n"
             "------------ ---------- ---------- ---------- ---------- ---------- -------- \n"
             "42           a-very-lo+      debug       proj          4  COMPLETED      0:0 \n"
             "42.batch          batch                  proj          4  COMPLETED      0:0 \n"
             "43                 wait      debug       proj          0    PENDING      0:0 \n");
    free(out);
    /* -X: no batch rows; -n: no header. */
    out = render(SACCT_FORMAT_DEFAULT, jobs, 2, true, SACCT_TABLE, false);
    ck_assert_str_eq(
        out, "42           a-very-lo+      debug       proj          4  COMPLETED      0:0 \n"
             "43                 wait      debug       proj          0    PENDING      0:0 \n");
    free(out);
    /* -b */
    out = render(SACCT_FORMAT_BRIEF, jobs, 1, true, SACCT_TABLE, true);
    ck_assert_str_eq(out, "JobID             State ExitCode \n"
                          "------------ ---------- -------- \n"
                          "42            COMPLETED      0:0 \n");
    free(out);
    /* -l: its header names, in order. */
    out = render(SACCT_FORMAT_LONG, jobs, 1, true, SACCT_PARSABLE2, true);
    ck_assert_str_eq(out,
                     "JobID|JobIDRaw|JobName|Partition|AllocCPUS|Elapsed|State|ExitCode|ReqMem|"
                     "ReqCPUS|AllocNodes|NNodes|NodeList|Submit|Start|End|Timelimit|User|"
                     "Account\n"
                     "42|42|a-very-long-job-name|debug|4|00:59:00|COMPLETED|0:0|4G|4|2|2|"
                     "n[1-2]|2023-11-14T20:13:20|2023-11-14T21:13:20|2023-11-14T22:12:20|"
                     "01:30:00|alice|proj\n");
    free(out);
}
END_TEST

START_TEST(test_widths_and_parsable)
{
    sacct_job a;
    job_init(&a, 7, "exactly10c", JS(RUNNING));
    const sacct_job *jobs[] = {&a};
    /* A value exactly as wide as its column is not cut; %N right-, %-N left-justifies;
     * the header is cut without '+'. */
    char *out = render("JobName,JobName%4,JobName%-12,State%3", jobs, 1, true, SACCT_TABLE, true);
    ck_assert_str_eq(out, "   JobName JobN JobName      Sta \n"
                          "---------- ---- ------------ --- \n"
                          "exactly10c exa+ exactly10c   RU+ \n");
    free(out);
    out = render("JobID,JobName,State", jobs, 1, false, SACCT_PARSABLE, true);
    ck_assert_str_eq(out, "JobID|JobName|State|\n7|exactly10c|RUNNING|\n7.batch|batch|RUNNING|\n");
    free(out);
    out = render("JobID,JobName,State", jobs, 1, false, SACCT_PARSABLE2, false);
    ck_assert_str_eq(out, "7|exactly10c|RUNNING\n7.batch|batch|RUNNING\n");
    free(out);
}
END_TEST

START_TEST(test_values)
{
    sacct_job a;
    job_init(&a, 9, "x", JS(FAILED));
    a.exit_code = 2;
    a.exit_signal = 9;
    a.end_time_ms = a.start_time_ms + (2 * 86400 + 3 * 3600 + 4 * 60 + 5) * 1000ull;
    a.time_limit_min = 0;
    a.restarts = 3;
    a.reason = (char *)"NonZeroExitCode";
    const sacct_job *jobs[] = {&a};
    char *out = render("ExitCode,DerivedExitCode,Elapsed,ElapsedRaw,Timelimit,TimelimitRaw,"
                       "Restarts,Reason,UID,GID,Group,Cluster,ReqNodes,WorkDir",
                       jobs, 1, false, SACCT_PARSABLE2, false);
    ck_assert_str_eq(out,
                     "2:9|2:9|2-03:04:05|183845|UNLIMITED|UNLIMITED|3|NonZeroExitCode|1000|100|"
                     "100|c1|2|/home/alice\n"
                     "2:9||2-03:04:05|183845||||||||c1||\n");
    free(out);
    /* Running: elapsed to now, End Unknown; pending: Start Unknown, no nodes, Elapsed 0. */
    sacct_job r, p;
    job_init(&r, 10, "r", JS(RUNNING));
    job_init(&p, 11, "p", JS(PENDING));
    r.array_job_id = 5;
    r.array_task_id = 2;
    const sacct_job *two[] = {&r, &p};
    out = render("JobID,JobIDRaw,Elapsed,End,Start,NodeList,AllocNodes,State", two, 2, false,
                 SACCT_PARSABLE2, false);
    ck_assert_str_eq(out, "5_2|10|01:00:00|Unknown|2023-11-14T21:13:20|n[1-2]|2|RUNNING\n"
                          "5_2.batch|10.batch|01:00:00|Unknown|2023-11-14T21:13:20|n1|1|RUNNING\n"
                          "11|11|00:00:00|Unknown|Unknown|None assigned|0|PENDING\n");
    free(out);
    /* Cancelled reads CANCELLED (Slurm's "by <uid>" is not known). */
    sacct_job c;
    job_init(&c, 12, "c", JS(CANCELLED));
    const sacct_job *one[] = {&c};
    out = render("State%20", one, 1, true, SACCT_TABLE, false);
    ck_assert_str_eq(out, "           CANCELLED \n");
    free(out);
}
END_TEST

START_TEST(test_filters)
{
    sacct_job a, b;
    job_init(&a, 42, "a", JS(COMPLETED));
    a.end_time_ms = NOW_MS - 60000;
    job_init(&b, 43, "b", JS(PENDING));
    b.user = (char *)"bob";
    b.uid = 1001;
    b.partition = (char *)"big";
    struct sacct_opts o;
    ck_assert_int_eq(PARSE(&o, "-s", "CD", "-S", "midnight"), 0);
    ck_assert(sacct_job_matches(&a, &o));
    ck_assert(!sacct_job_matches(&b, &o));
    sacct_opts_free(&o);
    /* -s without -S is "now": a job that ended before now does not match. */
    ck_assert_int_eq(PARSE(&o, "-s", "CD,PD"), 0);
    ck_assert(!sacct_job_matches(&a, &o));
    ck_assert(sacct_job_matches(&b, &o));
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "-u", "1001"), 0);
    ck_assert(!sacct_job_matches(&a, &o));
    ck_assert(sacct_job_matches(&b, &o));
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "-u", "alice", "-r", "debug", "-A", "proj", "--name", "a"), 0);
    ck_assert(sacct_job_matches(&a, &o));
    ck_assert(!sacct_job_matches(&b, &o));
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "-j", "43"), 0);
    ck_assert(!sacct_job_matches(&a, &o));
    ck_assert(sacct_job_matches(&b, &o));
    sacct_opts_free(&o);
    /* -S after the end of a: only b (not ended); -E before b's submission: neither. */
    ck_assert_int_eq(PARSE(&o, "-a", "-S", "now-30"), 0);
    ck_assert(!sacct_job_matches(&a, &o));
    ck_assert(sacct_job_matches(&b, &o));
    sacct_opts_free(&o);
    ck_assert_int_eq(PARSE(&o, "-a", "-S", "2023-11-01", "-E", "now-3hours"), 0);
    ck_assert(!sacct_job_matches(&a, &o));
    ck_assert(!sacct_job_matches(&b, &o));
    sacct_opts_free(&o);
}
END_TEST

START_TEST(test_json)
{
    sacct_job a, b;
    job_init(&a, 42, "a", JS(FAILED));
    a.exit_code = 1;
    a.end_time_ms = NOW_MS - 60000;
    job_init(&b, 43, "b\"q", JS(PENDING));
    const sacct_job *jobs[] = {&a, &b};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct sacct_ctx ctx = {.now_ms = NOW_MS, .cluster = "c1"};
    sacct_print_json(f, jobs, 2, false, "state", "accounting storage is not configured", &ctx);
    fclose(f);
    json_error_t je;
    json_t *root = json_loads(buf, 0, &je);
    ck_assert_msg(root != NULL, "%s: %s", je.text, buf);
    ck_assert(json_is_object(json_object_get(root, "meta")));
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(root, "meta"), "plugin"), "type")),
                     "openapi/dbv0.0.38");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(root, "meta"), "spur"), "source")),
                     "state");
    ck_assert_uint_eq(json_array_size(json_object_get(root, "errors")), 0);
    json_t *warn = json_object_get(root, "warnings");
    ck_assert_uint_eq(json_array_size(warn), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(warn, 0), "description")),
                     "accounting storage is not configured");
    json_t *js = json_object_get(root, "jobs");
    ck_assert_uint_eq(json_array_size(js), 2);
    json_t *j0 = json_array_get(js, 0), *j1 = json_array_get(js, 1);
    ck_assert_int_eq(json_integer_value(json_object_get(j0, "job_id")), 42);
    ck_assert_str_eq(json_string_value(json_object_get(j0, "name")), "a");
    ck_assert_str_eq(json_string_value(json_object_get(j1, "name")), "b\"q");
    ck_assert_str_eq(json_string_value(json_object_get(j0, "user")), "alice");
    ck_assert_str_eq(json_string_value(json_object_get(j0, "group")), "100");
    ck_assert_str_eq(json_string_value(json_object_get(j0, "account")), "proj");
    ck_assert_str_eq(json_string_value(json_object_get(j0, "partition")), "debug");
    ck_assert_str_eq(json_string_value(json_object_get(j0, "cluster")), "c1");
    ck_assert_str_eq(json_string_value(json_object_get(j0, "nodes")), "n[1-2]");
    ck_assert_int_eq(json_integer_value(json_object_get(j0, "allocation_nodes")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j0, "required"), "CPUs")),
                     4);
    json_t *st = json_object_get(j0, "state");
    ck_assert_str_eq(json_string_value(json_object_get(st, "current")), "FAILED");
    ck_assert_str_eq(json_string_value(json_object_get(st, "reason")), "None");
    json_t *ec = json_object_get(j0, "exit_code");
    ck_assert_str_eq(json_string_value(json_object_get(ec, "status")), "FAILED");
    ck_assert_int_eq(json_integer_value(json_object_get(ec, "return_code")), 1);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(ec, "signal"), "signal_id")), 0);
    json_t *tm = json_object_get(j0, "time");
    ck_assert_int_eq(json_integer_value(json_object_get(tm, "submission")),
                     (NOW_MS - 7200000) / 1000);
    ck_assert_int_eq(json_integer_value(json_object_get(tm, "eligible")),
                     (NOW_MS - 7200000) / 1000);
    ck_assert_int_eq(json_integer_value(json_object_get(tm, "start")), (NOW_MS - 3600000) / 1000);
    ck_assert_int_eq(json_integer_value(json_object_get(tm, "end")), (NOW_MS - 60000) / 1000);
    ck_assert_int_eq(json_integer_value(json_object_get(tm, "elapsed")), 3540);
    ck_assert_int_eq(json_integer_value(json_object_get(tm, "limit")), 90);
    json_t *steps = json_object_get(j0, "steps");
    ck_assert_uint_eq(json_array_size(steps), 1);
    json_t *s0 = json_array_get(steps, 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(s0, "step"), "id")),
                     "42.batch");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(s0, "step"), "name")),
                     "batch");
    ck_assert_uint_eq(json_array_size(json_object_get(j1, "steps")), 0); /* never started */
    ck_assert_str_eq(json_string_value(json_object_get(j1, "nodes")), "None assigned");
    json_decref(root);
    free(buf);
}
END_TEST

static Suite *sacct_suite(void)
{
    Suite *s = suite_create("sacct");
    check_case(s, "options",
               (const TTest *[]){test_time_formats, test_options, test_option_errors,
                                 test_fields_parse, NULL});
    check_case(s, "output",
               (const TTest *[]){test_default_table, test_widths_and_parsable, test_values,
                                 test_filters, test_json, NULL});
    return s;
}

int main(void)
{
    setenv("TZ", "UTC", 1);
    tzset();
    return check_run(sacct_suite());
}
