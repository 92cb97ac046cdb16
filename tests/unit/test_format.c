/*
 * test_format.c - text forms of jobs, nodes and partitions: the client modules that were
 * client/format.c (names, units, hostlist, job_filter, table through fmt_squeue and
 * fmt_sinfo, fmt_show, fmt_json, scontrol_args). The table engine alone is in test_table.c.
 *
 * Pinned here, byte for byte where a script could parse it:
 *   - job state codes and names both ways, state lists ("all", bad names); node state
 *     names for sinfo and scontrol, and sinfo -t matching ("drain" = drained+draining).
 *   - durations (squeue's M:SS / H:MM:SS / D-HH:MM:SS and scontrol's HH:MM:SS), limits,
 *     timestamps (TZ=UTC), memory sizes, stdout/stderr pattern expansion.
 *   - host lists: compression (ranges, padding, prefixes, duplicates, natural order) and
 *     expansion (ranges, padding, suffixes, the errors, the size cap), round trips.
 *   - job id lists, the % format parser (widths, '.', '-', '#', literals, errors).
 *   - squeue: Slurm's default header and rows (truncation, right alignment, reasons in
 *     parentheses), custom formats with every field, widths, UTF-8-safe truncation,
 *     filters and squeue's order.
 *   - sinfo: default partition view grouped by state (default partition starred, empty
 *     partition, node listed only by its own partitions field), -N, -R, %C/%F, hiding
 *     empty partitions.
 *   - scontrol show job/node/partition records, JSON objects, and the update / create
 *     argument parsers with Slurm's refusals.
 */
#include "check_run.h"
#include "fmt.h"
#include "fmt_json.h"
#include "fmt_show.h"
#include "fmt_sinfo.h"
#include "fmt_squeue.h"
#include "hostlist.h"
#include "job_filter.h"
#include "names.h"
#include "scontrol_args.h"
#include "strv.h"
#include "table.h"
#include "units.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOW_MS 1700000000000ull /* 2023-11-14T22:13:20 UTC */
#define JS(x)  SPUR__API__JOB_STATE__JOB_##x
#define NS(x)  SPUR__API__NODE_STATE__NODE_##x

static char err[512];

/* ---- output capture ------------------------------------------------------------------ */

struct cap {
    char *buf;
    size_t len;
    FILE *f;
};

static FILE *cap_open(struct cap *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    ck_assert_ptr_nonnull(c->f);
    return c->f;
}

static const char *cap_text(struct cap *c)
{
    fclose(c->f);
    return c->buf;
}

#define ASSERT_ERR_HAS(needle)                                                                     \
    do {                                                                                           \
        if (strstr(err, (needle)) == NULL)                                                         \
            ck_abort_msg("error \"%s\" does not contain \"%s\"", err, (needle));                   \
    } while (0)

/* ---- fixtures ------------------------------------------------------------------------ */

struct tjob {
    Spur__Api__Job job;
    Spur__Api__JobSpec spec;
    char *nodes[4];
};

static void tjob(struct tjob *t, uint64_t id, const char *name, const char *user,
                 const char *partition, int state)
{
    Spur__Api__Job j = SPUR__API__JOB__INIT;
    Spur__Api__JobSpec s = SPUR__API__JOB_SPEC__INIT;
    t->job = j;
    t->spec = s;
    t->job.id = id;
    t->job.spec = &t->spec;
    t->job.state = (Spur__Api__JobState)state;
    t->spec.name = (char *)name;
    t->spec.user = (char *)user;
    t->spec.partition = (char *)partition;
}

static void tjob_nodes(struct tjob *t, const char *a, const char *b)
{
    size_t n = 0;
    if (a)
        t->nodes[n++] = (char *)a;
    if (b)
        t->nodes[n++] = (char *)b;
    t->job.node_list = t->nodes;
    t->job.n_node_list = n;
}

/* Job A: running for 65 s on n1,n2. Job B: pending and held. */
static struct tjob A, B;

static void make_jobs(void)
{
    tjob(&A, 42, "averyverylongname", "alice", "debug", JS(RUNNING));
    tjob_nodes(&A, "n1", "n2");
    A.spec.uid = 1000;
    A.spec.time_limit_min = 120;
    A.spec.ntasks = 4;
    A.spec.cpus_per_task = 2;
    A.spec.mem_mb = 1536;
    A.spec.workdir = "/home/alice";
    A.job.submit_time_ms = NOW_MS - 100000;
    A.job.start_time_ms = NOW_MS - 65000;

    tjob(&B, 7, "held", "bob", "debug", JS(PENDING));
    B.job.held = true;
    B.spec.nodes = 3;
}

static const struct fmt_ctx ctx = {.now_ms = NOW_MS};

static char *render_squeue(const char *format, fmt_job *const *jobs, size_t n, bool header)
{
    struct table_spec spec;
    ck_assert_msg(fmt_squeue_spec_parse(format, &spec, err, sizeof(err)) == 0, "%s", err);
    struct cap c;
    fmt_squeue(cap_open(&c), &spec, jobs, n, header, &ctx);
    cap_text(&c);
    table_spec_free(&spec);
    return c.buf;
}

/* ---- states -------------------------------------------------------------------------- */

START_TEST(test_job_states)
{
    static const struct {
        int st;
        const char *code, *name;
    } t[] = {
        {JS(PENDING), "PD", "PENDING"},       {JS(RUNNING), "R", "RUNNING"},
        {JS(COMPLETING), "CG", "COMPLETING"}, {JS(COMPLETED), "CD", "COMPLETED"},
        {JS(FAILED), "F", "FAILED"},          {JS(CANCELLED), "CA", "CANCELLED"},
        {JS(TIMEOUT), "TO", "TIMEOUT"},       {JS(NODE_FAIL), "NF", "NODE_FAIL"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        ck_assert_str_eq(names_job_state_code(t[i].st), t[i].code);
        ck_assert_str_eq(names_job_state_name(t[i].st), t[i].name);
        ck_assert_int_eq(names_job_state_parse(t[i].code), t[i].st);
        ck_assert_int_eq(names_job_state_parse(t[i].name), t[i].st);
    }
    ck_assert_int_eq(names_job_state_parse("pd"), JS(PENDING));
    ck_assert_int_eq(names_job_state_parse("Running"), JS(RUNNING));
    ck_assert_int_eq(names_job_state_parse("canceled"), JS(CANCELLED));
    ck_assert_int_eq(names_job_state_parse("bogus"), -1);
    ck_assert_int_eq(names_job_state_parse(""), -1);
    ck_assert_str_eq(names_job_state_code(0), "?");
    ck_assert_str_eq(names_job_state_name(99), "UNKNOWN");
    ck_assert(job_filter_state_active(JS(COMPLETING)));
    ck_assert(!job_filter_state_active(JS(COMPLETED)));

    int st[8];
    size_t n;
    bool all;
    ck_assert_int_eq(job_filter_states_parse("PD,running,R", st, 8, &n, &all, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 2); /* R twice counts once */
    ck_assert_int_eq(st[0], JS(PENDING));
    ck_assert_int_eq(st[1], JS(RUNNING));
    ck_assert(!all);
    ck_assert_int_eq(job_filter_states_parse("all", st, 8, &n, &all, err, sizeof(err)), 0);
    ck_assert(all);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(job_filter_states_parse("R,ALL", st, 8, &n, &all, err, sizeof(err)), 0);
    ck_assert(all);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(job_filter_states_parse("PD,sleepy", st, 8, &n, &all, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "Invalid job state specified: sleepy");
    ck_assert_int_eq(job_filter_states_parse("", st, 8, &n, &all, err, sizeof(err)), -1);
    ASSERT_ERR_HAS("Invalid job state specified");
}
END_TEST

START_TEST(test_node_states)
{
    static const struct {
        int st;
        const char *compact, *lng, *sc;
    } t[] = {
        {NS(IDLE), "idle", "idle", "IDLE"},
        {NS(ALLOCATED), "alloc", "allocated", "ALLOCATED"},
        {NS(MIXED), "mix", "mixed", "MIXED"},
        {NS(DOWN), "down", "down", "DOWN"},
        {NS(DRAINED), "drain", "drained", "IDLE+DRAIN"},
        {NS(DRAINING), "drng", "draining", "MIXED+DRAIN"},
        {NS(UNKNOWN), "unk", "unknown", "UNKNOWN"},
        {NS(STATE_UNSPECIFIED), "unk", "unknown", "UNKNOWN"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        Spur__Api__Node n = SPUR__API__NODE__INIT;
        n.state = (Spur__Api__NodeState)t[i].st;
        n.cpus = 4;
        n.alloc_cpus = 2;
        ck_assert_str_eq(names_node_state_compact((int)n.state), t[i].compact);
        ck_assert_str_eq(names_node_state_long((int)n.state), t[i].lng);
        ck_assert_str_eq(fmt_show_node_state(&n), t[i].sc);
    }
    Spur__Api__Node full = SPUR__API__NODE__INIT;
    full.state = NS(DRAINING);
    full.cpus = full.alloc_cpus = 8;
    ck_assert_str_eq(fmt_show_node_state(&full), "ALLOCATED+DRAIN");

    ck_assert_int_eq(fmt_sinfo_state_matches("drain", NS(DRAINED)), 1);
    ck_assert_int_eq(fmt_sinfo_state_matches("DRAIN", NS(DRAINING)), 1);
    ck_assert_int_eq(fmt_sinfo_state_matches("drain", NS(IDLE)), 0);
    ck_assert_int_eq(fmt_sinfo_state_matches("drained", NS(DRAINING)), 0);
    ck_assert_int_eq(fmt_sinfo_state_matches("drng", NS(DRAINING)), 1);
    ck_assert_int_eq(fmt_sinfo_state_matches("alloc", NS(ALLOCATED)), 1);
    ck_assert_int_eq(fmt_sinfo_state_matches("Allocated", NS(ALLOCATED)), 1);
    ck_assert_int_eq(fmt_sinfo_state_matches("mix", NS(IDLE)), 0);
    ck_assert_int_eq(fmt_sinfo_state_matches("sleepy", NS(IDLE)), -1);
}
END_TEST

/* ---- values -------------------------------------------------------------------------- */

START_TEST(test_durations)
{
    static const struct {
        uint64_t s;
        const char *sq, *hms;
    } t[] = {
        {0, "0:00", "00:00:00"},
        {5, "0:05", "00:00:05"},
        {59, "0:59", "00:00:59"},
        {61, "1:01", "00:01:01"},
        {3599, "59:59", "00:59:59"},
        {3600, "1:00:00", "01:00:00"},
        {86399, "23:59:59", "23:59:59"},
        {86400, "1-00:00:00", "1-00:00:00"},
        {90061, "1-01:01:01", "1-01:01:01"},
        {100 * 86400 + 7, "100-00:00:07", "100-00:00:07"},
    };
    char b[64];
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        units_duration(b, sizeof(b), t[i].s);
        ck_assert_str_eq(b, t[i].sq);
        units_duration_hms(b, sizeof(b), t[i].s);
        ck_assert_str_eq(b, t[i].hms);
    }
    units_limit(b, sizeof(b), 0, "UNLIMITED", false);
    ck_assert_str_eq(b, "UNLIMITED");
    units_limit(b, sizeof(b), 0, "infinite", true);
    ck_assert_str_eq(b, "infinite");
    units_limit(b, sizeof(b), 30, "x", false);
    ck_assert_str_eq(b, "30:00");
    units_limit(b, sizeof(b), 30, "x", true);
    ck_assert_str_eq(b, "00:30:00");
    units_limit(b, sizeof(b), 1440, "x", false);
    ck_assert_str_eq(b, "1-00:00:00");
    units_limit(b, sizeof(b), 4294967295u, "x", false);
    ck_assert_str_eq(b, "2982616-04:15:00");
}
END_TEST

START_TEST(test_timestamps_and_memory)
{
    char b[64];
    units_timestamp(b, sizeof(b), NOW_MS, "N/A");
    ck_assert_str_eq(b, "2023-11-14T22:13:20");
    units_timestamp(b, sizeof(b), NOW_MS + 999, "N/A"); /* milliseconds are cut, not rounded */
    ck_assert_str_eq(b, "2023-11-14T22:13:20");
    units_timestamp(b, sizeof(b), 0, "Unknown");
    ck_assert_str_eq(b, "Unknown");
    units_timestamp(b, sizeof(b), 1000, "N/A");
    ck_assert_str_eq(b, "1970-01-01T00:00:01");

    static const struct {
        uint64_t mb;
        const char *s;
    } m[] = {{0, "0"},     {1, "1M"},       {512, "512M"},      {1024, "1G"},   {1536, "1536M"},
             {4096, "4G"}, {1048576, "1T"}, {1049600, "1025G"}, {3145728, "3T"}};
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        units_mem(b, sizeof(b), m[i].mb);
        ck_assert_str_eq(b, m[i].s);
    }
}
END_TEST

START_TEST(test_expand_path)
{
    make_jobs();
    char *s = fmt_expand_path(&A.job, "%x-%j.%u.out");
    ck_assert_str_eq(s, "/home/alice/averyverylongname-42.alice.out");
    free(s);
    s = fmt_expand_path(&A.job, "/abs/%j/%N/100%%/%A");
    ck_assert_str_eq(s, "/abs/42/n1/100%/%A");
    free(s);
    s = fmt_expand_path(&B.job, "rel-%N-%j%"); /* no workdir, no node yet, trailing % */
    ck_assert_str_eq(s, "rel--7%");
    free(s);
    A.spec.workdir = "/home/alice/"; /* no doubled slash */
    s = fmt_expand_path(&A.job, "o");
    ck_assert_str_eq(s, "/home/alice/o");
    free(s);
}
END_TEST

/* ---- lists --------------------------------------------------------------------------- */

static char *compress(const char *const *names, size_t n)
{
    char *s = hostlist_compress((char *const *)names, n);
    ck_assert_ptr_nonnull(s);
    return s;
}

#define ASSERT_COMPRESS(want, ...)                                                                 \
    do {                                                                                           \
        const char *in_[] = {__VA_ARGS__};                                                         \
        char *got_ = compress(in_, sizeof(in_) / sizeof(in_[0]));                                  \
        ck_assert_str_eq(got_, (want));                                                            \
        free(got_);                                                                                \
    } while (0)

START_TEST(test_hostlist_compress)
{
    ASSERT_COMPRESS("n[1-3]", "n1", "n2", "n3");
    ASSERT_COMPRESS("n1", "n1");
    ASSERT_COMPRESS("n[1,3]", "n3", "n1");
    ASSERT_COMPRESS("n[1-3,5,7-8]", "n8", "n2", "n5", "n1", "n7", "n3");
    ASSERT_COMPRESS("n[9-10]", "n10", "n9");
    ASSERT_COMPRESS("n[01-02,10]", "n02", "n10", "n01");
    ASSERT_COMPRESS("n[08-10]", "n09", "n08", "n10");
    ASSERT_COMPRESS("n1,n01", "n01", "n1");
    ASSERT_COMPRESS("n1", "n1", "n1", "n1");
    ASSERT_COMPRESS("a[1-2],b2,login", "login", "b2", "a2", "a1");
    ASSERT_COMPRESS("login", "login", "login");
    ASSERT_COMPRESS("gpu-node[1-2]", "gpu-node2", "gpu-node1");
    ASSERT_COMPRESS("x,x1", "x1", "x");
    /* Too many digits to be a number: left alone. */
    ASSERT_COMPRESS("n1234567890123456789", "n1234567890123456789");
    char *empty = hostlist_compress(NULL, 0);
    ck_assert_str_eq(empty, "");
    free(empty);
}
END_TEST

static void assert_expand(const char *expr, const char *joined)
{
    char **v;
    size_t n;
    ck_assert_msg(hostlist_expand(expr, &v, &n, err, sizeof(err)) == 0, "%s: %s", expr, err);
    char buf[1024] = "";
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(buf, " ");
        strcat(buf, v[i]);
    }
    ck_assert_ptr_null(v[n]);
    ck_assert_str_eq(buf, joined);
    strv_free(v, n);
}

/* scontrol show hostlist: Slurm's unsorted form, runs of one prefix in the order given. */
START_TEST(test_hostlist_compress_ordered)
{
    char *v[] = {"n1", "n2", "n3", "m01", "m02", "n5", "login"};
    char *s = hostlist_compress_ordered(v, 5);
    ck_assert_str_eq(s, "n[1-3],m[01-02]");
    free(s);
    s = hostlist_compress_ordered(v, 7);
    ck_assert_str_eq(s, "n[1-3],m[01-02],n5,login");
    free(s);
    s = hostlist_compress(v, 7); /* sorted: hostlistsorted */
    ck_assert_str_eq(s, "login,m[01-02],n[1-3,5]");
    free(s);
    s = hostlist_compress_ordered(v, 0);
    ck_assert_str_eq(s, "");
    free(s);
}
END_TEST

START_TEST(test_hostlist_expand)
{
    assert_expand("n[1-3]", "n1 n2 n3");
    assert_expand("n[01-03,7]", "n01 n02 n03 n7");
    assert_expand("n[8-10]", "n8 n9 n10");
    assert_expand("n[098-101]", "n098 n099 n100 n101");
    assert_expand("a,b[1-2]", "a b1 b2");
    assert_expand("n[1-2]-ib", "n1-ib n2-ib");
    assert_expand("n[5]", "n5");
    assert_expand("solo", "solo");
    assert_expand("a,,b,", "a b");
    assert_expand("", "");

    static const char *const bad[] = {"n[3-1]",      "n[1-",    "n[a]",  "n]",     "n[]",
                                      "n[1-2][3-4]", "n[1,]x]", "n[-2]", "n[1-x]", "[1-2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char **v = NULL;
        size_t n = 0;
        ck_assert_msg(hostlist_expand(bad[i], &v, &n, err, sizeof(err)) == -1, "%s accepted",
                      bad[i]);
        ASSERT_ERR_HAS("invalid host list");
        ASSERT_ERR_HAS(bad[i]);
    }
    char **v = NULL;
    size_t n = 0;
    ck_assert_int_eq(hostlist_expand("n[0-70000]", &v, &n, err, sizeof(err)), -1);
    ASSERT_ERR_HAS("more than 65536");
    ck_assert_int_eq(hostlist_expand("n[1-40000],m[1-40000]", &v, &n, err, sizeof(err)), -1);
    ASSERT_ERR_HAS("more than 65536");
}
END_TEST

START_TEST(test_hostlist_round_trip)
{
    static const char *const exprs[] = {"n[1-3,5,7-8]", "n[01-02,10]", "a[1-2],b2,login",
                                        "node[001-128]"};
    for (size_t i = 0; i < sizeof(exprs) / sizeof(exprs[0]); i++) {
        char **v;
        size_t n;
        ck_assert_int_eq(hostlist_expand(exprs[i], &v, &n, err, sizeof(err)), 0);
        char *back = hostlist_compress(v, n);
        ck_assert_str_eq(back, exprs[i]);
        free(back);
        strv_free(v, n);
    }
}
END_TEST

START_TEST(test_job_ids)
{
    uint64_t *ids = NULL;
    size_t n = 0;
    ck_assert_int_eq(job_filter_ids_parse("42,43", &ids, &n, err, sizeof(err)), 0);
    ck_assert_int_eq(job_filter_ids_parse("7", &ids, &n, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(ids[0], 42);
    ck_assert_uint_eq(ids[1], 43);
    ck_assert_uint_eq(ids[2], 7);
    static const char *const bad[] = {
        "0", "abc", "42.1", "42_3", "-1", "+4", " 4", "", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(job_filter_ids_parse(bad[i], &ids, &n, err, sizeof(err)) == -1, "'%s'",
                      bad[i]);
        ASSERT_ERR_HAS("Invalid job id");
    }
    ck_assert_uint_eq(n, 3);
    /* A list with one bad word adds nothing. */
    ck_assert_int_eq(job_filter_ids_parse("12,x", &ids, &n, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "Invalid job id x");
    ck_assert_uint_eq(n, 3);
    free(ids);
}
END_TEST

/* ---- format strings ------------------------------------------------------------------ */

START_TEST(test_spec_parse)
{
    struct table_spec s;
    ck_assert_int_eq(fmt_squeue_spec_parse("a%%b%.5i c%-20j%#u%N", &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(s.n, 6);
    ck_assert_int_eq(s.fields[0].type, 0);
    ck_assert_str_eq(s.fields[0].text, "a%b");
    ck_assert_int_eq(s.fields[1].type, 'i');
    ck_assert_int_eq(s.fields[1].width, 5);
    ck_assert(s.fields[1].right);
    ck_assert_str_eq(s.fields[2].text, " c");
    ck_assert_int_eq(s.fields[3].type, 'j');
    ck_assert_int_eq(s.fields[3].width, 20);
    ck_assert(!s.fields[3].right);
    ck_assert(s.fields[4].auto_width);
    ck_assert_int_eq(s.fields[5].width, -1);
    table_spec_free(&s);

    const char *ok[] = {FMT_SQUEUE_DEFAULT, FMT_SQUEUE_LONG, "%%", "plain text"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ck_assert_int_eq(fmt_squeue_spec_parse(ok[i], &s, err, sizeof(err)), 0);
        table_spec_free(&s);
    }
    const char *sok[] = {FMT_SINFO_DEFAULT, FMT_SINFO_NODE, FMT_SINFO_LONG, FMT_SINFO_SUMMARIZE,
                         FMT_SINFO_REASONS};
    for (size_t i = 0; i < sizeof(sok) / sizeof(sok[0]); i++) {
        ck_assert_int_eq(fmt_sinfo_spec_parse(sok[i], &s, err, sizeof(err)), 0);
        table_spec_free(&s);
    }

    /* Every letter of Slurm's squeue -o and sinfo -o parses (squeue(1), sinfo(1)). */
    const char *letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    for (const char *l = letters; *l; l++) {
        char f[4] = {'%', *l, '\0'};
        ck_assert_int_eq(fmt_squeue_spec_parse(f, &s, err, sizeof(err)), 0);
        ck_assert_uint_eq(s.n, 1);
        ck_assert_int_eq(s.fields[0].type, *l);
        table_spec_free(&s);
        ck_assert_int_eq(fmt_sinfo_spec_parse(f, &s, err, sizeof(err)), 0);
        ck_assert_uint_eq(s.n, 1);
        /* Slurm's sinfo knows no i j J k K q Q W x y: the field stays as text. */
        if (strchr("ijJkKqQWxy", *l) != NULL) {
            ck_assert_int_eq(s.fields[0].type, 0);
            ck_assert_str_eq(s.fields[0].text, f);
        } else {
            ck_assert_int_eq(s.fields[0].type, *l);
        }
        table_spec_free(&s);
    }
    ck_assert_int_eq(fmt_squeue_spec_parse("%i %!", &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "invalid field \"%!\" in format \"%i %!\"");
    ck_assert_int_eq(fmt_squeue_spec_parse("%.10", &s, err, sizeof(err)), -1);
    ASSERT_ERR_HAS("format ends inside the field \"%.10\"");
    ck_assert_int_eq(fmt_squeue_spec_parse("%", &s, err, sizeof(err)), -1);
    ck_assert_int_eq(fmt_squeue_spec_parse("", &s, err, sizeof(err)), -1);
    ASSERT_ERR_HAS("empty format");
    ck_assert_int_eq(fmt_sinfo_spec_parse("%.8j%P", &s, err, sizeof(err)), 0);
    ck_assert_uint_eq(s.n, 2);
    ck_assert_str_eq(s.fields[0].text, "%.8j");
    ck_assert_int_eq(s.fields[1].type, 'P');
    table_spec_free(&s);
    ck_assert_int_eq(fmt_squeue_spec_parse("%99999i", &s, err, sizeof(err)), -1);
    ASSERT_ERR_HAS("too large");
}
END_TEST

/* ---- squeue -------------------------------------------------------------------------- */

START_TEST(test_squeue_default)
{
    make_jobs();
    fmt_job *jobs[] = {&B.job, &A.job};
    char *out = render_squeue(FMT_SQUEUE_DEFAULT, jobs, 2, true);
    ck_assert_str_eq(out, "             JOBID PARTITION     NAME     USER ST       TIME  NODES "
                          "NODELIST(REASON)\n"
                          "                 7     debug     held      bob PD       0:00      3 "
                          "(JobHeldUser)\n"
                          "                42     debug averyver    alice  R       1:05      2 "
                          "n[1-2]\n");
    free(out);
    out = render_squeue(FMT_SQUEUE_DEFAULT, jobs, 2, false);
    ck_assert_ptr_null(strstr(out, "JOBID"));
    ck_assert_ptr_nonnull(strstr(out, "(JobHeldUser)"));
    free(out);
    out = render_squeue(FMT_SQUEUE_DEFAULT, jobs, 0, true);
    ck_assert_str_eq(out, "             JOBID PARTITION     NAME     USER ST       TIME  NODES "
                          "NODELIST(REASON)\n");
    free(out);
    out = render_squeue(FMT_SQUEUE_LONG, jobs + 1, 1, true);
    ck_assert_str_eq(out, "             JOBID PARTITION     NAME     USER    STATE       TIME "
                          "TIME_LIMI  NODES NODELIST(REASON)\n"
                          "                42     debug averyver    alice  RUNNING       1:05   "
                          "2:00:00      2 n[1-2]\n");
    free(out);
}
END_TEST

START_TEST(test_squeue_all_fields)
{
    make_jobs();
    fmt_job *jobs[] = {&A.job, &B.job};
    char *out = render_squeue("%i|%j|%T|%l|%L|%C|%c|%m|%V|%S|%e|%r|%N|%D|%U|%B|%Z|%A|%P|%u|%t|%M",
                              jobs, 2, true);
    ck_assert_str_eq(out,
                     "JOBID|NAME|STATE|TIME_LIMIT|TIME_LEFT|CPUS|MIN_CPUS|MIN_MEMORY|SUBMIT_TIME|"
                     "START_TIME|END_TIME|REASON|NODELIST|NODES|UID|EXEC_HOST|WORK_DIR|JOBID|"
                     "PARTITION|USER|ST|TIME\n"
                     "42|averyverylongname|RUNNING|2:00:00|1:58:55|8|2|1536M|2023-11-14T22:11:40|"
                     "2023-11-14T22:12:15|N/A|None|n[1-2]|2|1000|n1|/home/alice|42|debug|alice|R|"
                     "1:05\n"
                     "7|held|PENDING|UNLIMITED|UNLIMITED|1|1|0|N/A|N/A|N/A|JobHeldUser||3|0|n/a||7|"
                     "debug|bob|PD|0:00\n");
    free(out);
}
END_TEST

/* squeue -S, as Slurm's: field letters, '-' descending, the id breaking ties. */
START_TEST(test_squeue_sort)
{
    make_jobs();
    static struct tjob C;
    tjob(&C, 9, "held", "carol", "batch", JS(PENDING));
    fmt_job *v[3] = {&A.job, &B.job, &C.job};
    ck_assert_int_eq(fmt_squeue_sort(v, 3, "i", &ctx, err, sizeof(err)), 0);
    ck_assert(v[0] == &B.job && v[1] == &C.job && v[2] == &A.job); /* 7 9 42 */
    ck_assert_int_eq(fmt_squeue_sort(v, 3, "-i", &ctx, err, sizeof(err)), 0);
    ck_assert(v[0] == &A.job && v[1] == &C.job && v[2] == &B.job);
    ck_assert_int_eq(fmt_squeue_sort(v, 3, "P,-u", &ctx, err, sizeof(err)), 0);
    ck_assert(v[0] == &C.job && v[1] == &B.job && v[2] == &A.job); /* batch; debug: bob, alice */
    ck_assert_int_eq(fmt_squeue_sort(v, 3, "+j", &ctx, err, sizeof(err)), 0);
    ck_assert(v[0] == &A.job && v[1] == &B.job && v[2] == &C.job); /* averyv.., held 7, held 9 */
    /* Time used by value (65 s before 0 s descending), not as text. */
    ck_assert_int_eq(fmt_squeue_sort(v, 3, "-M,i", &ctx, err, sizeof(err)), 0);
    ck_assert(v[0] == &A.job && v[1] == &B.job && v[2] == &C.job);
    /* The letters Slurm does not sort by, and what is not a letter. */
    ck_assert_int_eq(fmt_squeue_sort(v, 3, "i,Z", &ctx, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "Invalid sort specification: Z");
    ck_assert_int_eq(fmt_squeue_sort(NULL, 0, "%i", NULL, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "Invalid sort specification: %");
    ck_assert_int_eq(fmt_squeue_sort(NULL, 0, "ij", NULL, err, sizeof(err)), -1);
    ck_assert_int_eq(fmt_squeue_sort(NULL, 0, "P,t,-p", NULL, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_squeue_widths)
{
    make_jobs();
    fmt_job *jobs[] = {&A.job, &B.job};
    char *out = render_squeue("[%-6i][%.6i][%3j][%.3j][%#u]", jobs, 2, true);
    ck_assert_str_eq(out, "[JOBID ][ JOBID][NAM][NAM][USER ]\n"
                          "[42    ][    42][ave][ave][alice]\n"
                          "[7     ][     7][hel][hel][bob  ]\n");
    free(out);
    /* Truncation never splits a UTF-8 sequence: "h\xc3\xa9llo" cut at 2 bytes is "h". */
    B.spec.name = "h\xc3\xa9llo";
    fmt_job *one[] = {&B.job};
    out = render_squeue("[%2j][%.3j][%4j]", one, 1, false);
    ck_assert_str_eq(out, "[h ][h\xc3\xa9][h\xc3\xa9l]\n");
    free(out);
}
END_TEST

START_TEST(test_squeue_reasons_and_times)
{
    struct tjob f, cd, ca, pd, done;
    tjob(&f, 1, "f", "u", "p", JS(FAILED));
    f.job.reason = "NonZeroExitCode";
    tjob_nodes(&f, "n3", NULL);
    tjob(&cd, 2, "cd", "u", "p", JS(COMPLETED));
    cd.job.reason = "whatever";
    tjob_nodes(&cd, "n3", NULL);
    tjob(&ca, 3, "ca", "u", "p", JS(CANCELLED));
    tjob_nodes(&ca, "n4", NULL);
    tjob(&pd, 4, "pd", "u", "p", JS(PENDING));
    pd.job.reason = "Resources";
    pd.spec.time_limit_min = 5;
    /* A finished job's time is end - start, not now - start. */
    tjob(&done, 5, "done", "u", "p", JS(COMPLETED));
    done.job.start_time_ms = NOW_MS - 7200000;
    done.job.end_time_ms = NOW_MS - 3600000;
    done.spec.time_limit_min = 5;
    fmt_job *jobs[] = {&f.job, &cd.job, &ca.job, &pd.job, &done.job};
    char *out = render_squeue("%i %R %M %L", jobs, 5, false);
    ck_assert_str_eq(out, "1 (NonZeroExitCode) 0:00 UNLIMITED\n"
                          "2 n3 0:00 UNLIMITED\n"
                          "3 n4 0:00 UNLIMITED\n"
                          "4 (Resources) 0:00 5:00\n"
                          "5  1:00:00 0:00\n");
    free(out);
}
END_TEST

START_TEST(test_filters_and_order)
{
    make_jobs();
    struct tjob c, d;
    tjob(&c, 3, "other", "alice", "batch", JS(COMPLETED));
    tjob(&d, 1, "held", "carol", "debug", JS(RUNNING));
    uint64_t ids[] = {42, 3};
    char *users[] = {"alice"};
    int states[] = {JS(RUNNING)};
    char *parts[] = {"debug"};
    char *names[] = {"held"};
    struct job_filter none = {0};
    ck_assert(job_filter_matches(&A.job, &none));
    struct job_filter byid = {.ids = ids, .nids = 2};
    ck_assert(job_filter_matches(&A.job, &byid));
    ck_assert(job_filter_matches(&c.job, &byid));
    ck_assert(!job_filter_matches(&B.job, &byid));
    struct job_filter byuser = {.users = users, .nusers = 1};
    ck_assert(job_filter_matches(&c.job, &byuser));
    ck_assert(!job_filter_matches(&B.job, &byuser));
    struct job_filter bystate = {.states = states, .nstates = 1};
    ck_assert(job_filter_matches(&A.job, &bystate));
    ck_assert(!job_filter_matches(&c.job, &bystate));
    struct job_filter all = {.ids = ids,
                             .nids = 2,
                             .users = users,
                             .nusers = 1,
                             .states = states,
                             .nstates = 1,
                             .partitions = parts,
                             .npartitions = 1};
    ck_assert(job_filter_matches(&A.job, &all));
    ck_assert(!job_filter_matches(&c.job, &all)); /* completed, and in batch */
    struct job_filter byname = {.names = names, .nnames = 1};
    ck_assert(job_filter_matches(&B.job, &byname));
    ck_assert(job_filter_matches(&d.job, &byname));
    ck_assert(!job_filter_matches(&A.job, &byname));
    /* A job without a spec matches only empty-string filters. */
    Spur__Api__Job bare = SPUR__API__JOB__INIT;
    ck_assert(!job_filter_matches(&bare, &byuser));

    /* Partition, then state (pending first), then id. */
    fmt_job *jobs[] = {&A.job, &c.job, &d.job, &B.job};
    job_filter_sort(jobs, 4);
    ck_assert_uint_eq(jobs[0]->id, 3);  /* batch */
    ck_assert_uint_eq(jobs[1]->id, 7);  /* debug, pending */
    ck_assert_uint_eq(jobs[2]->id, 1);  /* debug, running, lower id */
    ck_assert_uint_eq(jobs[3]->id, 42); /* debug, running */
    /* A configuring job sorts with the running ones (Slurm's base state), by id. */
    d.job.state = SPUR__API__JOB_STATE__JOB_CONFIGURING; /* job 1 */
    job_filter_sort(jobs, 4);
    ck_assert_uint_eq(jobs[2]->id, 1);
    ck_assert_uint_eq(jobs[3]->id, 42);
    ck_assert(job_filter_state_active(d.job.state));
}
END_TEST

/* ---- sinfo --------------------------------------------------------------------------- */

static Spur__Api__Node nodes_[6];
static Spur__Api__Partition parts_[3];
static char *debug_nodes[] = {"n1", "n2", "n3", "n4", "n10"};
static char *batch_part[] = {"batch"};
static char *n4_parts[] = {"debug"};
static char *n4_features[] = {"ssd", "big"};

static void make_cluster(void)
{
    static const char *names[] = {"n10", "n4", "n3", "n2", "n1", "n5"};
    static const int states[] = {NS(IDLE), NS(DRAINED), NS(ALLOCATED),
                                 NS(IDLE), NS(IDLE),    NS(IDLE)};
    for (int i = 0; i < 6; i++) {
        Spur__Api__Node n = SPUR__API__NODE__INIT;
        nodes_[i] = n;
        nodes_[i].name = (char *)names[i];
        nodes_[i].state = (Spur__Api__NodeState)states[i];
        nodes_[i].cpus = 4;
        nodes_[i].mem_mb = 8000;
    }
    nodes_[2].alloc_cpus = 4;  /* n3 */
    nodes_[1].reason = "disk"; /* n4 */
    nodes_[1].reason_time_ms = NOW_MS;
    nodes_[1].reason_user = "alice";
    nodes_[1].reason_uid = 1000;
    nodes_[1].address = "10.0.0.4:6818";
    nodes_[1].last_seen_ms = NOW_MS;
    nodes_[1].partitions = n4_parts;
    nodes_[1].n_partitions = 1;
    nodes_[1].features = n4_features;
    nodes_[1].n_features = 2;
    nodes_[5].partitions = batch_part; /* n5: only its own field names the partition */
    nodes_[5].n_partitions = 1;

    for (int i = 0; i < 3; i++) {
        Spur__Api__Partition p = SPUR__API__PARTITION__INIT;
        parts_[i] = p;
    }
    parts_[0].name = "debug";
    parts_[0].is_default = true;
    parts_[0].up = true;
    parts_[0].nodes = debug_nodes;
    parts_[0].n_nodes = 5;
    parts_[1].name = "gpu";
    parts_[1].up = false;
    parts_[1].max_time_min = 60;
    parts_[2].name = "batch";
    parts_[2].up = true;
}

static char *render_sinfo(const char *format, const struct fmt_sinfo_opts *o)
{
    fmt_partition *p[] = {&parts_[0], &parts_[1], &parts_[2]};
    fmt_node *n[] = {&nodes_[0], &nodes_[1], &nodes_[2], &nodes_[3], &nodes_[4], &nodes_[5]};
    struct table_spec spec;
    ck_assert_msg(fmt_sinfo_spec_parse(format, &spec, err, sizeof(err)) == 0, "%s", err);
    struct cap c;
    fmt_sinfo(cap_open(&c), &spec, p, 3, n, 6, o, &ctx);
    cap_text(&c);
    table_spec_free(&spec);
    return c.buf;
}

START_TEST(test_sinfo_default)
{
    make_cluster();
    struct fmt_sinfo_opts o = {.header = true};
    char *out = render_sinfo(FMT_SINFO_DEFAULT, &o);
    ck_assert_str_eq(out, "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
                          "debug*       up   infinite      3   idle n[1-2,10]\n"
                          "debug*       up   infinite      1  alloc n3\n"
                          "debug*       up   infinite      1  drain n4\n"
                          "gpu        down    1:00:00      0    n/a \n"
                          "batch        up   infinite      1   idle n5\n");
    free(out);
    /* With a node filter on, partitions left without nodes are not shown. */
    o.hide_empty = true;
    o.header = false;
    out = render_sinfo(FMT_SINFO_DEFAULT, &o);
    ck_assert_ptr_null(strstr(out, "gpu"));
    ck_assert_ptr_nonnull(strstr(out, "batch"));
    free(out);
}
END_TEST

START_TEST(test_sinfo_node_view)
{
    make_cluster();
    struct fmt_sinfo_opts o = {.header = true, .node_view = true};
    char *out = render_sinfo(FMT_SINFO_NODE, &o);
    ck_assert_str_eq(out, "NODELIST  NODES PARTITION STATE \n"
                          "n1            1 debug*    idle  \n"
                          "n2            1 debug*    idle  \n"
                          "n3            1 debug*    alloc \n"
                          "n4            1 debug*    drain \n"
                          "n5            1 batch     idle  \n"
                          "n10           1 debug*    idle  \n");
    free(out);
    /* A node in no partition still shows, with n/a. */
    nodes_[5].n_partitions = 0;
    o.header = false;
    out = render_sinfo("%N %P %a %l", &o);
    ck_assert_ptr_nonnull(strstr(out, "\nn5 n/a n/a n/a\n"));
    free(out);
}
END_TEST

START_TEST(test_sinfo_reasons_and_counts)
{
    make_cluster();
    struct fmt_sinfo_opts o = {.header = true, .reasons = true};
    char *out = render_sinfo(FMT_SINFO_REASONS, &o);
    ck_assert_str_eq(out, "REASON               USER      TIMESTAMP           NODELIST\n"
                          "disk                 alice     2023-11-14T22:13:20 n4\n");
    free(out);
    /* -R -l, as Slurm 22.05 prints it: the uid with the user, and the state. */
    out = render_sinfo(FMT_SINFO_REASONS_LONG, &o);
    ck_assert_str_eq(out, "REASON               USER         TIMESTAMP           STATE  NODELIST\n"
                          "disk                 alice(1000)  2023-11-14T22:13:20 drain  n4\n");
    free(out);

    struct fmt_sinfo_opts plain = {.header = false};
    out = render_sinfo("%R %C %F", &plain);
    ck_assert_str_eq(out, "debug 4/12/4/20 1/3/1/5\n"
                          "gpu 0/0/0/0 0/0/0/0\n"
                          "batch 0/4/0/4 0/1/0/1\n");
    free(out);

    /* Node attributes split lines only when they differ. */
    out = render_sinfo("%R|%c|%m|%f|%E|%D|%N|%o", &plain);
    ck_assert_str_eq(out, "debug|4|8000|(null)|none|4|n[1-3,10]|n[1-3,10]\n"
                          "debug|4|8000|ssd,big|disk|1|n4|10.0.0.4:6818\n"
                          "gpu|0|0|(null)|none|0||\n"
                          "batch|4|8000|(null)|none|1|n5|n5\n");
    free(out);

    struct fmt_sinfo_opts sum = {.header = true};
    out = render_sinfo(FMT_SINFO_SUMMARIZE, &sum);
    ck_assert_str_eq(out, "PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST\n"
                          "debug*       up   infinite          1/3/1/5 n[1-4,10]\n"
                          "gpu        down    1:00:00          0/0/0/0 \n"
                          "batch        up   infinite          0/1/0/1 n5\n");
    free(out);
}
END_TEST

START_TEST(test_sinfo_many_nodes)
{
    /*
     * 3000 nodes, listed by the partition in reverse: n1-n1000 and n2001-n3000 idle,
     * n1001-n2000 allocated. Two lines, in the order of the first node of each.
     */
    enum { NN = 3000 };
    static Spur__Api__Node many[NN];
    static fmt_node *ptrs[NN];
    static char names[NN][8];
    static char *listed[NN];
    for (int i = 0; i < NN; i++) {
        Spur__Api__Node n = SPUR__API__NODE__INIT;
        many[i] = n;
        snprintf(names[i], sizeof(names[i]), "n%d", i + 1);
        many[i].name = names[i];
        many[i].cpus = 2;
        many[i].state = i >= 1000 && i < 2000 ? NS(ALLOCATED) : NS(IDLE);
        ptrs[i] = &many[i];
        listed[NN - 1 - i] = names[i];
    }
    Spur__Api__Partition p = SPUR__API__PARTITION__INIT;
    p.name = "all";
    p.up = true;
    p.nodes = listed;
    p.n_nodes = NN;
    fmt_partition *pp[] = {&p};
    struct table_spec spec;
    ck_assert_int_eq(fmt_sinfo_spec_parse("%R %D %t %N %C", &spec, err, sizeof(err)), 0);
    struct fmt_sinfo_opts o = {.header = false};
    struct cap c;
    fmt_sinfo(cap_open(&c), &spec, pp, 1, ptrs, NN, &o, &ctx);
    ck_assert_str_eq(cap_text(&c), "all 2000 idle n[1-1000,2001-3000] 0/4000/0/4000\n"
                                   "all 1000 alloc n[1001-2000] 0/2000/0/2000\n");
    free(c.buf);
    table_spec_free(&spec);

    char *hl = hostlist_compress(listed, NN);
    ck_assert_str_eq(hl, "n[1-3000]");
    free(hl);
}
END_TEST

/* ---- scontrol show ------------------------------------------------------------------- */

static const char *fake_group(uint32_t gid, void *arg)
{
    (void)arg;
    return gid == 100 ? "users" : NULL;
}

START_TEST(test_show_job)
{
    struct tjob t;
    tjob(&t, 42, "test", "alice", "debug", JS(RUNNING));
    tjob_nodes(&t, "n1", "n2");
    t.spec.uid = 1000;
    t.spec.gid = 100;
    t.spec.time_limit_min = 120;
    t.spec.ntasks = 4;
    t.spec.cpus_per_task = 2;
    t.spec.mem_mb = 2048;
    t.spec.workdir = "/home/alice";
    t.spec.stdout_path = "out-%j.txt";
    t.job.submit_time_ms = NOW_MS - 4000000;
    t.job.start_time_ms = NOW_MS - 3661000;
    t.spec.requeue = true;
    t.spec.account = "physics";
    t.job.restarts = 2;
    t.job.exit_code = 3;
    t.job.exit_signal = 15;
    t.job.batch_host = "n2";
    struct fmt_ctx gctx = {.now_ms = NOW_MS, .group_name = fake_group};
    struct cap c;
    fmt_show_job(cap_open(&c), &t.job, &gctx);
    ck_assert_str_eq(cap_text(&c), "JobId=42 JobName=test\n"
                                   "   UserId=alice(1000) GroupId=users(100)\n"
                                   "   Account=physics QOS=(null)\n"
                                   "   JobState=RUNNING Reason=None Dependency=(null)\n"
                                   "   Requeue=1 Restarts=2 BatchFlag=1 Reboot=0 ExitCode=3:15\n"
                                   "   RunTime=01:01:01 TimeLimit=02:00:00 TimeMin=N/A\n"
                                   "   SubmitTime=2023-11-14T21:06:40 "
                                   "EligibleTime=2023-11-14T21:06:40\n"
                                   "   StartTime=2023-11-14T21:12:19 EndTime=Unknown "
                                   "Deadline=N/A\n"
                                   "   Partition=debug\n"
                                   "   NodeList=n[1-2]\n"
                                   "   BatchHost=n2\n"
                                   "   NumNodes=2 NumCPUs=8 NumTasks=4 CPUs/Task=2\n"
                                   "   MinMemoryNode=2G\n"
                                   "   WorkDir=/home/alice\n"
                                   "   StdErr=/home/alice/out-42.txt\n"
                                   "   StdIn=/dev/null\n"
                                   "   StdOut=/home/alice/out-42.txt\n"
                                   "\n");
    free(c.buf);

    /* Pending, held, no group name known, a separate stderr, an exit by signal. */
    struct tjob p;
    tjob(&p, 7, "w", "bob", "", JS(PENDING));
    p.job.held = true;
    p.spec.gid = 5;
    p.spec.uid = 5;
    p.spec.workdir = "/w";
    p.spec.stdout_path = "/abs/o";
    p.spec.stderr_path = "e-%x";
    p.job.exit_code = -9;
    fmt_show_job(cap_open(&c), &p.job, &gctx);
    ck_assert_str_eq(cap_text(&c), "JobId=7 JobName=w\n"
                                   "   UserId=bob(5) GroupId=5(5)\n"
                                   "   Account=(null) QOS=(null)\n"
                                   "   JobState=PENDING Reason=JobHeldUser Dependency=(null)\n"
                                   "   Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:9\n"
                                   "   RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A\n"
                                   "   SubmitTime=Unknown EligibleTime=Unknown\n"
                                   "   StartTime=Unknown EndTime=Unknown Deadline=N/A\n"
                                   "   Partition=(null)\n"
                                   "   NodeList=(null)\n"
                                   "   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1\n"
                                   "   MinMemoryNode=0\n"
                                   "   WorkDir=/w\n"
                                   "   StdErr=/w/e-w\n"
                                   "   StdIn=/dev/null\n"
                                   "   StdOut=/abs/o\n"
                                   "\n");
    free(c.buf);
}
END_TEST

START_TEST(test_show_node_and_partition)
{
    make_cluster();
    struct cap c;
    fmt_show_node(cap_open(&c), &nodes_[1], &ctx);
    ck_assert_str_eq(cap_text(&c), "NodeName=n4\n"
                                   "   CPUAlloc=0 CPUTot=4\n"
                                   "   AvailableFeatures=ssd,big\n"
                                   "   ActiveFeatures=ssd,big\n"
                                   "   NodeAddr=10.0.0.4:6818 NodeHostName=n4\n"
                                   "   RealMemory=8000 AllocMem=0\n"
                                   "   State=IDLE+DRAIN\n"
                                   "   Partitions=debug\n"
                                   "   LastSeenTime=2023-11-14T22:13:20\n"
                                   "   Reason=disk [2023-11-14T22:13:20]\n"
                                   "\n");
    free(c.buf);
    fmt_show_node(cap_open(&c), &nodes_[4], &ctx);
    ck_assert_str_eq(cap_text(&c), "NodeName=n1\n"
                                   "   CPUAlloc=0 CPUTot=4\n"
                                   "   AvailableFeatures=(null)\n"
                                   "   ActiveFeatures=(null)\n"
                                   "   NodeAddr=n1 NodeHostName=n1\n"
                                   "   RealMemory=8000 AllocMem=0\n"
                                   "   State=IDLE\n"
                                   "   Partitions=(null)\n"
                                   "   LastSeenTime=None\n"
                                   "\n");
    free(c.buf);

    fmt_show_partition(cap_open(&c), &parts_[1], &ctx);
    ck_assert_str_eq(cap_text(&c),
                     "PartitionName=gpu\n"
                     "   Default=NO\n"
                     "   MaxNodes=UNLIMITED MaxTime=01:00:00 MaxCPUsPerNode=UNLIMITED "
                     "MaxMemPerNode=UNLIMITED\n"
                     "   Nodes=(null)\n"
                     "   State=DOWN TotalNodes=0\n"
                     "\n");
    free(c.buf);
    parts_[0].max_nodes = 4;
    parts_[0].max_cpus_per_node = 16;
    parts_[0].max_mem_mb_per_node = 64000;
    fmt_show_partition(cap_open(&c), &parts_[0], &ctx);
    ck_assert_str_eq(cap_text(&c), "PartitionName=debug\n"
                                   "   Default=YES\n"
                                   "   MaxNodes=4 MaxTime=UNLIMITED MaxCPUsPerNode=16 "
                                   "MaxMemPerNode=64000\n"
                                   "   Nodes=n[1-4,10]\n"
                                   "   State=UP TotalNodes=5\n"
                                   "\n");
    free(c.buf);
    parts_[2].nodes_expr = "ALL";
    fmt_show_partition(cap_open(&c), &parts_[2], &ctx);
    ck_assert_ptr_nonnull(strstr(cap_text(&c), "   Nodes=ALL\n"));
    free(c.buf);
}
END_TEST

/* ---- JSON ---------------------------------------------------------------------------- */

START_TEST(test_json_objects)
{
    make_jobs();
    make_cluster();
    struct cap c;
    struct json j;
    json_init(&j, cap_open(&c));
    json_arr_begin(&j);
    fmt_json_job(&j, &B.job);
    json_arr_end(&j);
    ck_assert_str_eq(cap_text(&c),
                     "[{\"job_id\":7,\"name\":\"held\",\"user\":\"bob\",\"uid\":0,\"gid\":0,"
                     "\"partition\":\"debug\",\"state\":\"PENDING\",\"state_code\":\"PD\","
                     "\"reason\":\"JobHeldUser\",\"held\":true,\"nodes\":3,\"ntasks\":1,"
                     "\"cpus_per_task\":1,\"cpus\":1,\"mem_mb\":0,\"time_limit_min\":0,"
                     "\"node_list\":[],\"submit_time_ms\":0,\"eligible_time_ms\":0,"
                     "\"start_time_ms\":0,\"end_time_ms\":0,\"exit_code\":0,\"exit_signal\":0,"
                     "\"attempt\":0,\"restarts\":0,\"batch_host\":\"\",\"requeue\":false,"
                     "\"account\":\"\",\"workdir\":\"\",\"stdout\":\"\",\"stderr\":\"\"}]");
    free(c.buf);

    /* A placed, requeued job: its attempt, restarts, batch host, requeue and account. */
    B.job.attempt = 3;
    B.job.restarts = 2;
    B.job.exit_code = 1;
    B.job.exit_signal = 9;
    B.job.batch_host = "n4";
    B.spec.requeue = true;
    B.spec.account = "chem";
    json_init(&j, cap_open(&c));
    fmt_json_job(&j, &B.job);
    ck_assert_ptr_nonnull(strstr(cap_text(&c), "\"exit_code\":1,\"exit_signal\":9,\"attempt\":3,"
                                               "\"restarts\":2,\"batch_host\":\"n4\","
                                               "\"requeue\":true,\"account\":\"chem\","));
    free(c.buf);

    json_init(&j, cap_open(&c));
    fmt_json_node(&j, &nodes_[1]);
    ck_assert_str_eq(cap_text(&c),
                     "{\"name\":\"n4\",\"address\":\"10.0.0.4:6818\",\"state\":\"drained\","
                     "\"state_code\":\"drain\",\"cpus\":4,\"alloc_cpus\":0,\"mem_mb\":8000,"
                     "\"alloc_mem_mb\":0,\"features\":[\"ssd\",\"big\"],\"partitions\":["
                     "\"debug\"],\"reason\":\"disk\",\"reason_time_ms\":1700000000000,"
                     "\"last_seen_ms\":1700000000000}");
    free(c.buf);

    json_init(&j, cap_open(&c));
    fmt_json_partition(&j, &parts_[1]);
    ck_assert_str_eq(cap_text(&c),
                     "{\"name\":\"gpu\",\"default\":false,\"state\":\"DOWN\",\"nodes\":[],"
                     "\"nodes_expr\":\"\",\"max_nodes\":0,\"max_time_min\":60,"
                     "\"max_cpus_per_node\":0,\"max_mem_mb_per_node\":0}");
    free(c.buf);

    /* Strings from the server are escaped. */
    A.spec.name = "a\"b\n";
    json_init(&j, cap_open(&c));
    fmt_json_job(&j, &A.job);
    ck_assert_ptr_nonnull(strstr(cap_text(&c), "\"name\":\"a\\\"b\\n\""));
    ck_assert_ptr_nonnull(strstr(c.buf, "\"node_list\":[\"n1\",\"n2\"]"));
    free(c.buf);
}
END_TEST

/* An array of two objects: it opens with first, the two meet at join, and it closes. */
static void assert_two_objects(struct cap *c, const char *first, const char *join)
{
    const char *t = cap_text(c);
    ck_assert_int_eq(strncmp(t, first, strlen(first)), 0);
    ck_assert_ptr_nonnull(strstr(t, join));
    ck_assert_str_eq(t + strlen(t) - 2, "}]");
    free(c->buf);
}

/* The arrays of squeue --json, sinfo --json and scontrol show --json. */
START_TEST(test_json_arrays)
{
    make_jobs();
    make_cluster();
    struct cap c;
    struct json j;
    json_init(&j, cap_open(&c));
    fmt_json_jobs(&j, NULL, 0);
    fmt_json_nodes(&j, NULL, 0);
    fmt_json_partitions(&j, NULL, 0);
    ck_assert_str_eq(cap_text(&c), "[],[],[]");
    free(c.buf);

    /* The objects in the order given, one array. */
    fmt_job *jobs[] = {&B.job, &A.job};
    json_init(&j, cap_open(&c));
    fmt_json_jobs(&j, jobs, 2);
    assert_two_objects(&c, "[{\"job_id\":7,", "\"stderr\":\"\"},{\"job_id\":42,");

    fmt_node *nodes[] = {&nodes_[1], &nodes_[4]};
    json_init(&j, cap_open(&c));
    fmt_json_nodes(&j, nodes, 2);
    assert_two_objects(&c, "[{\"name\":\"n4\",",
                       "\"last_seen_ms\":1700000000000},{\"name\":\"n1\",");

    fmt_partition *parts[] = {&parts_[1], &parts_[2]};
    json_init(&j, cap_open(&c));
    fmt_json_partitions(&j, parts, 2);
    assert_two_objects(&c, "[{\"name\":\"gpu\",",
                       "\"max_mem_mb_per_node\":0},{\"name\":\"batch\",");
}
END_TEST

/* ---- scontrol update / create -------------------------------------------------------- */

/* A command line scontrol refuses, and its error line: whole, or a part of it. */
struct refusal {
    int argc;
    char *argv[4];
    const char *msg;
    bool whole;
};

static void assert_refused_as(const struct refusal *r)
{
    if (r->whole)
        ck_assert_str_eq(err, r->msg);
    else
        ASSERT_ERR_HAS(r->msg);
}

START_TEST(test_node_update)
{
    struct scontrol_args_update u;
    char *drain[] = {"NodeName=n[1-2]", "State=DRAIN", "Reason=disk failing"};
    ck_assert_int_eq(scontrol_args_update_parse(3, drain, &u, err, sizeof(err)), 0);
    ck_assert_str_eq(u.nodes, "n[1-2]");
    ck_assert_str_eq(u.state, "drain");
    ck_assert_str_eq(u.reason, "disk failing");
    scontrol_args_update_free(&u);
    char *resume[] = {"nodename=n1", "state=resume"};
    ck_assert_int_eq(scontrol_args_update_parse(2, resume, &u, err, sizeof(err)), 0);
    ck_assert_str_eq(u.state, "resume");
    ck_assert_ptr_null(u.reason);
    scontrol_args_update_free(&u);
    char *any_case[] = {"STATE=Idle", "REASON=", "NODENAME=x"};
    ck_assert_int_eq(scontrol_args_update_parse(3, any_case, &u, err, sizeof(err)), 0);
    ck_assert_str_eq(u.state, "idle");
    scontrol_args_update_free(&u);

    static const struct refusal bad[] = {
        {2,
         {"NodeName=n1", "State=DRAIN"},
         "You must specify a reason when DOWNING or DRAINING a node. Request denied",
         true},
        {3, {"NodeName=n1", "State=down", "Reason="}, "You must specify a reason", false},
        {2, {"NodeName=n1", "State=sleepy"}, "Invalid node state specified: sleepy", true},
        {3,
         {"NodeName=n1", "State=idle", "Weight=3"},
         "Update of this parameter is not supported: Weight=3",
         true},
        {1, {"State=idle"}, "NodeName=", false},
        {1, {"NodeName=n1"}, "State=", false},
        {2, {"NodeName=n1", "idle"}, "\"idle\"", false},
        {2, {"JobId=4", "TimeLimit=5"}, "only nodes", false},
        {2, {"NodeName=", "State=idle"}, "needs a node name", false},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(scontrol_args_update_parse(bad[i].argc, bad[i].argv, &u, err, sizeof(err)),
                         -1);
        assert_refused_as(&bad[i]);
    }
}
END_TEST

START_TEST(test_node_create)
{
    struct scontrol_args_create n;
    char *full[] = {"node",           "NodeName=c1",     "CPUs=8",
                    "RealMemory=16G", "Features=gpu,ib", "NodeAddr=c1.example:6818"};
    ck_assert_int_eq(scontrol_args_create_parse(6, full, &n, err, sizeof(err)), 0);
    ck_assert_str_eq(n.name, "c1");
    ck_assert_uint_eq(n.cpus, 8);
    ck_assert_uint_eq(n.mem_mb, 16384);
    ck_assert_uint_eq(n.nfeatures, 2);
    ck_assert_str_eq(n.features[1], "ib");
    ck_assert_str_eq(n.address, "c1.example:6818");
    scontrol_args_create_free(&n);
    /* Slurm's own spelling, without "node". */
    char *slurm_spelling[] = {"nodename=c2", "cpus=1", "realmemory=1000"};
    ck_assert_int_eq(scontrol_args_create_parse(3, slurm_spelling, &n, err, sizeof(err)), 0);
    ck_assert_str_eq(n.address, "");
    ck_assert_uint_eq(n.nfeatures, 0);
    ck_assert_ptr_null(n.features[0]);
    ck_assert_uint_eq(n.mem_mb, 1000);
    scontrol_args_create_free(&n);

    static const struct refusal bad[] = {
        {2, {"NodeName=c1", "RealMemory=1"}, "CPUs= is required", true},
        {2, {"NodeName=c1", "CPUs=1"}, "RealMemory= is required", true},
        {2, {"CPUs=1", "RealMemory=1"}, "NodeName= is required", true},
        {3, {"NodeName=c1", "CPUs=0", "RealMemory=1"}, "CPUs=0", false},
        {3, {"NodeName=c1", "CPUs=2", "RealMemory=lots"}, "RealMemory=lots", false},
        {3, {"NodeName=c[1-2]", "CPUs=2", "RealMemory=1"}, "one node name", false},
        {4,
         {"NodeName=c1", "CPUs=2", "RealMemory=1", "Gres=gpu:1"},
         "Invalid parameter for create node: Gres=gpu:1",
         true},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(scontrol_args_create_parse(bad[i].argc, bad[i].argv, &n, err, sizeof(err)),
                         -1);
        assert_refused_as(&bad[i]);
    }
}
END_TEST

static Suite *format_suite(void)
{
    Suite *s = suite_create("format");
    check_case(s, "values",
               (const TTest *[]){test_job_states, test_node_states, test_durations,
                                 test_timestamps_and_memory, test_expand_path,
                                 test_hostlist_compress, test_hostlist_compress_ordered,
                                 test_hostlist_expand, test_hostlist_round_trip, test_job_ids,
                                 test_spec_parse, NULL});

    check_case(s, "tables",
               (const TTest *[]){test_squeue_default, test_squeue_all_fields, test_squeue_widths,
                                 test_squeue_sort, test_squeue_reasons_and_times,
                                 test_filters_and_order, test_sinfo_default, test_sinfo_node_view,
                                 test_sinfo_reasons_and_counts, test_sinfo_many_nodes, NULL});

    check_case(s, "records",
               (const TTest *[]){test_show_job, test_show_node_and_partition, test_json_objects,
                                 test_json_arrays, test_node_update, test_node_create, NULL});
    return s;
}

int main(void)
{
    /* Timestamps print in local time: pin the zone so the expected strings hold. */
    setenv("TZ", "UTC0", 1);
    tzset();
    return check_run(format_suite());
}
