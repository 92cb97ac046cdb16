/*
 * acct_sql.c - the accounting database's SQL text, parameters and rows (acct_sql.h).
 *
 * The schema, version 1 (docs/accounting.md), is created by migration step 0 -> 1; every
 * statement of a step is idempotent (IF NOT EXISTS), so a step cut short by a lost
 * connection runs again whole. Steps run under pg_advisory_xact_lock in the transaction
 * that records the new version, so two exporters (an old leader and a new one, or two
 * clusters sharing a database) never migrate at once.
 */
#include "acct_sql.h"

#include "fsm.h"
#include "names.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- schema --------------------------------------------------------------------------- */

const char ACCT_SQL_BEGIN[] = "BEGIN";
const char ACCT_SQL_LOCK[] = "SELECT pg_advisory_xact_lock(" ACCT_SQL_LOCK_KEY ")";
const char ACCT_SQL_HAS_SCHEMA[] = "SELECT to_regclass('spur_schema') IS NOT NULL";
const char ACCT_SQL_VERSION[] = "SELECT version FROM spur_schema WHERE id = 1";
const char ACCT_SQL_COMMIT[] = "COMMIT";
const char ACCT_SQL_ROLLBACK[] = "ROLLBACK";

static const char *const migrate_0_1[] = {
    "CREATE TABLE IF NOT EXISTS spur_schema (id int PRIMARY KEY CHECK (id = 1), "
    "version int NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS spur_export (cluster text PRIMARY KEY, "
    "exported_seq bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS jobs ("
    "cluster text NOT NULL, job_id bigint NOT NULL, "
    "array_job_id bigint NOT NULL DEFAULT 0, array_task_id integer, "
    "name text NOT NULL, user_name text NOT NULL, uid bigint NOT NULL, gid bigint NOT NULL, "
    "account text NOT NULL, partition text NOT NULL, state text NOT NULL, "
    "exit_code integer NOT NULL, exit_signal integer NOT NULL, "
    "nnodes integer NOT NULL, node_list text NOT NULL, "
    "cpus integer NOT NULL, mem_mb bigint NOT NULL, time_limit_min integer NOT NULL, "
    "submit_time timestamptz, eligible_time timestamptz, start_time timestamptz, "
    "end_time timestamptz, "
    "workdir text NOT NULL, restarts integer NOT NULL, reason text NOT NULL, "
    "dependency text NOT NULL, last_seq bigint NOT NULL, "
    "PRIMARY KEY (cluster, job_id))",
    "CREATE INDEX IF NOT EXISTS jobs_user_submit ON jobs (cluster, user_name, submit_time)",
    "CREATE INDEX IF NOT EXISTS jobs_submit ON jobs (cluster, submit_time)",
    "CREATE INDEX IF NOT EXISTS jobs_end ON jobs (cluster, end_time)",
    "CREATE INDEX IF NOT EXISTS jobs_state ON jobs (cluster, state)",
    "CREATE TABLE IF NOT EXISTS job_events (cluster text NOT NULL, seq bigint NOT NULL, "
    "job_id bigint NOT NULL, event text NOT NULL, time timestamptz NOT NULL, "
    "state text NOT NULL, PRIMARY KEY (cluster, seq))",
    "INSERT INTO spur_schema (id, version) VALUES (1, 1) "
    "ON CONFLICT (id) DO UPDATE SET version = 1, updated_at = now()",
};

const char *const *acct_sql_migration(int from, size_t *n)
{
    if (from == 0) {
        *n = sizeof(migrate_0_1) / sizeof(migrate_0_1[0]);
        return migrate_0_1;
    }
    *n = 0;
    return NULL;
}
/* ---- export --------------------------------------------------------------------------- */

/* The statements below are laid out as SQL reads, one clause or column group per line;
 * clang-format would re-break them at every column and make them unreadable. */
/* clang-format off */

#define MS_TO_TS(x) "TIMESTAMPTZ 'epoch' + NULLIF(" x ", 0) * INTERVAL '1 millisecond'"

const char ACCT_SQL_HWM_INIT[] =
    "INSERT INTO spur_export (cluster) VALUES ($1) ON CONFLICT (cluster) DO NOTHING";
const char ACCT_SQL_HWM_GET[] = "SELECT exported_seq FROM spur_export WHERE cluster = $1";

const char ACCT_SQL_UPSERT_JOBS[] =
    "INSERT INTO jobs (cluster, job_id, array_job_id, array_task_id, name, user_name, uid, "
        "gid, account, partition, state, exit_code, exit_signal, nnodes, node_list, cpus, "
        "mem_mb, time_limit_min, submit_time, eligible_time, start_time, end_time, workdir, "
        "restarts, reason, dependency, last_seq) "
    "SELECT $1, u.job_id, u.array_job_id, u.array_task_id, u.name, u.user_name, u.uid, "
        "u.gid, u.account, u.partition, u.state, u.exit_code, u.exit_signal, u.nnodes, "
        "u.node_list, u.cpus, u.mem_mb, u.time_limit_min, "
        MS_TO_TS("u.submit_ms") ", " MS_TO_TS("u.eligible_ms") ", "
        MS_TO_TS("u.start_ms") ", " MS_TO_TS("u.end_ms") ", "
        "u.workdir, u.restarts, u.reason, u.dependency, u.last_seq "
    "FROM unnest($2::bigint[], $3::bigint[], $4::integer[], $5::text[], $6::text[], "
        "$7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::text[], $12::integer[], "
        "$13::integer[], $14::integer[], $15::text[], $16::integer[], $17::bigint[], "
        "$18::integer[], $19::bigint[], $20::bigint[], $21::bigint[], $22::bigint[], "
        "$23::text[], $24::integer[], $25::text[], $26::text[], $27::bigint[]) "
    "AS u(job_id, array_job_id, array_task_id, name, user_name, uid, gid, account, "
        "partition, state, exit_code, exit_signal, nnodes, node_list, cpus, mem_mb, "
        "time_limit_min, submit_ms, eligible_ms, start_ms, end_ms, workdir, restarts, "
        "reason, dependency, last_seq) "
    "ON CONFLICT (cluster, job_id) DO UPDATE SET "
        "array_job_id = EXCLUDED.array_job_id, array_task_id = EXCLUDED.array_task_id, "
        "name = EXCLUDED.name, user_name = EXCLUDED.user_name, uid = EXCLUDED.uid, "
        "gid = EXCLUDED.gid, account = EXCLUDED.account, partition = EXCLUDED.partition, "
        "state = EXCLUDED.state, exit_code = EXCLUDED.exit_code, "
        "exit_signal = EXCLUDED.exit_signal, nnodes = EXCLUDED.nnodes, "
        "node_list = EXCLUDED.node_list, cpus = EXCLUDED.cpus, mem_mb = EXCLUDED.mem_mb, "
        "time_limit_min = EXCLUDED.time_limit_min, submit_time = EXCLUDED.submit_time, "
        "eligible_time = EXCLUDED.eligible_time, start_time = EXCLUDED.start_time, "
        "end_time = EXCLUDED.end_time, workdir = EXCLUDED.workdir, "
        "restarts = EXCLUDED.restarts, reason = EXCLUDED.reason, "
        "dependency = EXCLUDED.dependency, last_seq = EXCLUDED.last_seq "
    "WHERE jobs.last_seq < EXCLUDED.last_seq";

const char ACCT_SQL_INSERT_EVENTS[] =
    "INSERT INTO job_events (cluster, seq, job_id, event, time, state) "
    "SELECT $1, u.seq, u.job_id, u.event, " MS_TO_TS("u.time_ms") ", u.state "
    "FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]) "
    "AS u(seq, job_id, event, time_ms, state) "
    "ON CONFLICT (cluster, seq) DO NOTHING";

const char ACCT_SQL_ADVANCE[] =
    "INSERT INTO spur_export (cluster, exported_seq) VALUES ($1, $2::bigint) "
    "ON CONFLICT (cluster) DO UPDATE SET "
        "exported_seq = GREATEST(spur_export.exported_seq, EXCLUDED.exported_seq), "
        "updated_at = now()";

/* ---- sacct ---------------------------------------------------------------------------- */

#define TS_TO_MS(c) "COALESCE((extract(epoch FROM " c ") * 1000)::bigint, 0)"
#define MS_PARAM(p) "TIMESTAMPTZ 'epoch' + " p "::bigint * INTERVAL '1 millisecond'"

const char ACCT_SQL_QUERY[] =
    "SELECT job_id, array_job_id, COALESCE(array_task_id, 0), name, user_name, uid, gid, "
        "account, partition, state, exit_code, exit_signal, nnodes, node_list, cpus, mem_mb, "
        "time_limit_min, "
        TS_TO_MS("submit_time") ", " TS_TO_MS("eligible_time") ", "
        TS_TO_MS("start_time") ", " TS_TO_MS("end_time") ", "
        "workdir, restarts, reason, dependency, last_seq "
    "FROM jobs WHERE cluster = $1 "
    "AND (cardinality($2::bigint[]) = 0 OR job_id = ANY($2::bigint[])) "
    "AND (cardinality($3::text[]) = 0 OR user_name = ANY($3::text[])) "
    "AND (cardinality($4::text[]) = 0 OR state = ANY($4::text[])) "
    "AND ($5::bigint = 0 OR end_time IS NULL OR end_time >= " MS_PARAM("$5") ") "
    "AND ($6::bigint = 0 OR submit_time < " MS_PARAM("$6") ") "
    "AND (cardinality($7::text[]) = 0 OR partition = ANY($7::text[])) "
    "AND (cardinality($8::text[]) = 0 OR account = ANY($8::text[])) "
    "AND (cardinality($9::text[]) = 0 OR name = ANY($9::text[])) "
    "ORDER BY job_id LIMIT $10::bigint";

/* clang-format on */

/* ---- array literals ------------------------------------------------------------------- */

void acct_sql_arr_init(struct acct_sql_arr *a)
{
    memset(a, 0, sizeof(*a));
}

static void arr_put(struct acct_sql_arr *a, const void *s, size_t n)
{
    if (a->oom)
        return;
    if (a->len + n + 2 > a->cap) { /* room for the closing brace and the NUL */
        size_t cap = a->cap ? a->cap : 64;
        while (cap < a->len + n + 2)
            cap *= 2;
        char *p = realloc(a->p, cap);
        if (p == NULL) {
            a->oom = true;
            return;
        }
        a->p = p;
        a->cap = cap;
    }
    memcpy(a->p + a->len, s, n);
    a->len += n;
}

static void arr_sep(struct acct_sql_arr *a)
{
    arr_put(a, a->n == 0 ? "{" : ",", 1);
    a->n++;
}

/* The length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned min, cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void acct_sql_arr_text(struct acct_sql_arr *a, const char *s)
{
    if (s == NULL) {
        acct_sql_arr_null(a);
        return;
    }
    arr_sep(a);
    arr_put(a, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p == '"' || *p == '\\') {
            arr_put(a, "\\", 1);
            arr_put(a, p, 1);
            p++;
            continue;
        }
        size_t k = utf8_seq(p);
        if (k == 0) {
            arr_put(a, "\xef\xbf\xbd", 3); /* U+FFFD for a byte that is not UTF-8 */
            p++;
        } else {
            arr_put(a, p, k);
            p += k;
        }
    }
    arr_put(a, "\"", 1);
}

void acct_sql_arr_null(struct acct_sql_arr *a)
{
    arr_sep(a);
    arr_put(a, "NULL", 4);
}

void acct_sql_arr_u64(struct acct_sql_arr *a, uint64_t v)
{
    char t[24];
    int k = snprintf(t, sizeof(t), "%" PRIu64, v);
    arr_sep(a);
    arr_put(a, t, (size_t)k);
}

void acct_sql_arr_i64(struct acct_sql_arr *a, int64_t v)
{
    char t[24];
    int k = snprintf(t, sizeof(t), "%" PRId64, v);
    arr_sep(a);
    arr_put(a, t, (size_t)k);
}

char *acct_sql_arr_take(struct acct_sql_arr *a)
{
    if (a->n == 0)
        arr_put(a, "{", 1);
    arr_put(a, "}", 1);
    char *p = NULL;
    if (!a->oom) {
        a->p[a->len] = '\0';
        p = a->p;
    } else {
        free(a->p);
    }
    acct_sql_arr_init(a);
    return p;
}

/* ---- names ---------------------------------------------------------------------------- */

const char *acct_sql_state_name(int state)
{
    return names_job_state_name(state);
}

int acct_sql_state_parse(const char *s)
{
    int st = names_job_state_parse(s);
    return st > 0 ? st : -1;
}

const char *acct_sql_event_name(uint32_t event)
{
    switch (event) {
    case FSM_ACCT_SUBMIT:
        return "submit";
    case FSM_ACCT_START:
        return "start";
    case FSM_ACCT_END:
        return "end";
    case FSM_ACCT_REQUEUE:
        return "requeue";
    default:
        return "unknown";
    }
}

/* ---- parameters ----------------------------------------------------------------------- */

void acct_sql_params_free(struct acct_sql_params *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->values[i]);
    memset(p, 0, sizeof(*p));
}

void acct_sql_batch_free(struct acct_sql_batch *b)
{
    acct_sql_params_free(&b->jobs);
    acct_sql_params_free(&b->events);
    acct_sql_params_free(&b->advance);
}

static int64_t clamp_i32(uint64_t v)
{
    return v > INT32_MAX ? INT32_MAX : (int64_t)v;
}

static int64_t clamp_i64(uint64_t v)
{
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

/* The job's node list as the column keeps it: "n1,n2". NULL out of memory. */
static char *join_nodes(const Spur__Api__AcctJob *j)
{
    size_t len = 1;
    for (size_t i = 0; i < j->n_node_list; i++)
        len += strlen(str_or_empty(j->node_list[i])) + 1;
    char *s = malloc(len);
    if (s == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < j->n_node_list; i++) {
        const char *n = str_or_empty(j->node_list[i]);
        if (i > 0)
            s[k++] = ',';
        size_t l = strlen(n);
        memcpy(s + k, n, l);
        k += l;
    }
    s[k] = '\0';
    return s;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static char *u64_str(uint64_t v)
{
    char t[24];
    snprintf(t, sizeof(t), "%" PRIu64, v);
    return dup_str(t);
}

/* Columns of jobs after cluster, in ACCT_SQL_UPSERT_JOBS's order. */
enum {
    C_JOB_ID,
    C_ARRAY_JOB_ID,
    C_ARRAY_TASK_ID,
    C_NAME,
    C_USER,
    C_UID,
    C_GID,
    C_ACCOUNT,
    C_PARTITION,
    C_STATE,
    C_EXIT_CODE,
    C_EXIT_SIGNAL,
    C_NNODES,
    C_NODE_LIST,
    C_CPUS,
    C_MEM_MB,
    C_TIME_LIMIT,
    C_SUBMIT,
    C_ELIGIBLE,
    C_START,
    C_END,
    C_WORKDIR,
    C_RESTARTS,
    C_REASON,
    C_DEPENDENCY,
    C_LAST_SEQ,
    C_NCOLS
};
_Static_assert(C_NCOLS + 1 == ACCT_SQL_JOB_PARAMS, "one parameter per column and the cluster");
_Static_assert(C_NCOLS == ACCT_SQL_NCOLS, "the query returns every column but the cluster");

static bool add_job(struct acct_sql_arr *col, const Spur__Api__AcctJob *j, uint64_t seq)
{
    acct_sql_arr_u64(&col[C_JOB_ID], j->job_id);
    acct_sql_arr_i64(&col[C_ARRAY_JOB_ID], clamp_i64(j->array_job_id));
    if (j->array_job_id != 0)
        acct_sql_arr_i64(&col[C_ARRAY_TASK_ID], clamp_i32(j->array_task_id));
    else
        acct_sql_arr_null(&col[C_ARRAY_TASK_ID]);
    acct_sql_arr_text(&col[C_NAME], str_or_empty(j->name));
    acct_sql_arr_text(&col[C_USER], str_or_empty(j->user));
    acct_sql_arr_u64(&col[C_UID], j->uid);
    acct_sql_arr_u64(&col[C_GID], j->gid);
    acct_sql_arr_text(&col[C_ACCOUNT], str_or_empty(j->account));
    acct_sql_arr_text(&col[C_PARTITION], str_or_empty(j->partition));
    acct_sql_arr_text(&col[C_STATE], acct_sql_state_name(j->state));
    acct_sql_arr_i64(&col[C_EXIT_CODE], j->exit_code);
    acct_sql_arr_i64(&col[C_EXIT_SIGNAL], j->exit_signal);
    acct_sql_arr_i64(&col[C_NNODES], clamp_i32(j->nnodes));
    char *nodes = join_nodes(j);
    if (nodes == NULL)
        return false;
    acct_sql_arr_text(&col[C_NODE_LIST], nodes);
    free(nodes);
    acct_sql_arr_i64(&col[C_CPUS], clamp_i32(j->cpus));
    acct_sql_arr_i64(&col[C_MEM_MB], clamp_i64(j->mem_mb));
    acct_sql_arr_i64(&col[C_TIME_LIMIT], clamp_i32(j->time_limit_min));
    acct_sql_arr_i64(&col[C_SUBMIT], clamp_i64(j->submit_time_ms));
    acct_sql_arr_i64(&col[C_ELIGIBLE], clamp_i64(j->eligible_time_ms));
    acct_sql_arr_i64(&col[C_START], clamp_i64(j->start_time_ms));
    acct_sql_arr_i64(&col[C_END], clamp_i64(j->end_time_ms));
    acct_sql_arr_text(&col[C_WORKDIR], str_or_empty(j->workdir));
    acct_sql_arr_i64(&col[C_RESTARTS], clamp_i32(j->restarts));
    acct_sql_arr_text(&col[C_REASON], str_or_empty(j->reason));
    acct_sql_arr_text(&col[C_DEPENDENCY], str_or_empty(j->dependency));
    /* The record's seq is the row's version, whatever the embedded copy says. */
    acct_sql_arr_i64(&col[C_LAST_SEQ], clamp_i64(seq));
    return true;
}

/* Whether record i is the newest of its job in the batch (recs are in seq order). */
static bool newest_of_job(Spur__Fsm__AcctRecord *const *recs, size_t n, size_t i)
{
    uint64_t id = recs[i]->job->job_id;
    for (size_t k = i + 1; k < n; k++)
        if (recs[k]->job != NULL && recs[k]->job->job_id == id)
            return false;
    return true;
}

int acct_sql_batch_build(const char *cluster, Spur__Fsm__AcctRecord *const *recs, size_t n,
                         struct acct_sql_batch *out)
{
    memset(out, 0, sizeof(*out));
    struct acct_sql_arr col[C_NCOLS];
    struct acct_sql_arr ev[5];
    for (int c = 0; c < C_NCOLS; c++)
        acct_sql_arr_init(&col[c]);
    for (int c = 0; c < 5; c++)
        acct_sql_arr_init(&ev[c]);
    bool ok = true;
    /*
     * The newest-of-its-job test is quadratic in the batch; a batch is accounting.
     * batch_size records (500 by default), so this is at most a few hundred thousand
     * comparisons per transaction, far below the round trip it rides on.
     */
    for (size_t i = 0; i < n && ok; i++) {
        const Spur__Fsm__AcctRecord *r = recs[i];
        if (r->seq > out->max_seq)
            out->max_seq = r->seq;
        if (r->job == NULL)
            continue; /* nothing to write; its seq still counts as exported */
        acct_sql_arr_i64(&ev[0], clamp_i64(r->seq));
        acct_sql_arr_u64(&ev[1], r->job->job_id);
        acct_sql_arr_text(&ev[2], acct_sql_event_name(r->event));
        acct_sql_arr_i64(&ev[3], clamp_i64(r->time_ms));
        acct_sql_arr_text(&ev[4], acct_sql_state_name(r->job->state));
        if (newest_of_job(recs, n, i)) {
            ok = add_job(col, r->job, r->seq);
            out->njobs++;
        }
    }
    out->jobs.n = ACCT_SQL_JOB_PARAMS;
    out->events.n = ACCT_SQL_EVENT_PARAMS;
    out->advance.n = 2;
    out->jobs.values[0] = dup_str(cluster);
    out->events.values[0] = dup_str(cluster);
    out->advance.values[0] = dup_str(cluster);
    out->advance.values[1] = u64_str(out->max_seq);
    ok = ok && out->jobs.values[0] && out->events.values[0] && out->advance.values[0] &&
         out->advance.values[1];
    for (int c = 0; c < C_NCOLS; c++) {
        out->jobs.values[1 + c] = acct_sql_arr_take(&col[c]);
        ok = ok && out->jobs.values[1 + c] != NULL;
    }
    for (int c = 0; c < 5; c++) {
        out->events.values[1 + c] = acct_sql_arr_take(&ev[c]);
        ok = ok && out->events.values[1 + c] != NULL;
    }
    if (!ok) {
        acct_sql_batch_free(out);
        return -1;
    }
    return 0;
}

uint32_t acct_sql_limit(const Spur__Api__AcctQueryRequest *q)
{
    return q->limit == 0 || q->limit > ACCT_SQL_MAX_LIMIT ? ACCT_SQL_MAX_LIMIT : q->limit;
}

static char *text_array(char *const *v, size_t n)
{
    struct acct_sql_arr a;
    acct_sql_arr_init(&a);
    for (size_t i = 0; i < n; i++)
        acct_sql_arr_text(&a, str_or_empty(v[i]));
    return acct_sql_arr_take(&a);
}

int acct_sql_query_params(const char *cluster, const Spur__Api__AcctQueryRequest *q,
                          struct acct_sql_params *out)
{
    memset(out, 0, sizeof(*out));
    out->n = ACCT_SQL_QUERY_PARAMS;
    struct acct_sql_arr a;
    acct_sql_arr_init(&a);
    for (size_t i = 0; i < q->n_job_ids; i++)
        acct_sql_arr_i64(&a, clamp_i64(q->job_ids[i]));
    out->values[1] = acct_sql_arr_take(&a);
    for (size_t i = 0; i < q->n_states; i++)
        acct_sql_arr_text(&a, acct_sql_state_name(q->states[i]));
    out->values[3] = acct_sql_arr_take(&a);
    out->values[0] = dup_str(cluster);
    out->values[2] = text_array(q->users, q->n_users);
    out->values[4] = u64_str((uint64_t)clamp_i64(q->start_ms));
    out->values[5] = u64_str((uint64_t)clamp_i64(q->end_ms));
    out->values[6] = text_array(q->partitions, q->n_partitions);
    out->values[7] = text_array(q->accounts, q->n_accounts);
    out->values[8] = text_array(q->names, q->n_names);
    out->values[9] = u64_str((uint64_t)acct_sql_limit(q) + 1);
    for (int i = 0; i < out->n; i++) {
        if (out->values[i] == NULL) {
            acct_sql_params_free(out);
            return -1;
        }
    }
    return 0;
}

/* ---- rows ----------------------------------------------------------------------------- */

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (s == NULL) {
        *out = 0;
        return 0;
    }
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_i32(const char *s, int32_t *out)
{
    if (s == NULL) {
        *out = 0;
        return 0;
    }
    if (*s == '\0' || *s == ' ')
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < INT32_MIN || v > INT32_MAX)
        return -1;
    *out = (int32_t)v;
    return 0;
}

static int split_nodes(const char *s, Spur__Api__AcctJob *j)
{
    if (s == NULL || *s == '\0')
        return 0;
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    j->node_list = calloc(n, sizeof(char *));
    if (j->node_list == NULL)
        return -1;
    const char *p = s;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        char *d = malloc(l + 1);
        if (d == NULL)
            return -1;
        memcpy(d, p, l);
        d[l] = '\0';
        j->node_list[j->n_node_list++] = d;
        if (c == NULL)
            break;
        p = c + 1;
    }
    return 0;
}

void acct_sql_job_free(Spur__Api__AcctJob *j, bool heap)
{
    if (j == NULL)
        return;
    char **strs[] = {&j->name,    &j->user,   &j->account,   &j->partition,
                     &j->workdir, &j->reason, &j->dependency};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        if (*strs[i] != protobuf_c_empty_string)
            free(*strs[i]);
        *strs[i] = NULL;
    }
    for (size_t i = 0; i < j->n_node_list; i++)
        free(j->node_list[i]);
    free(j->node_list);
    j->node_list = NULL;
    j->n_node_list = 0;
    if (heap)
        free(j);
}

int acct_sql_parse_row(const char *const *vals, int nvals, Spur__Api__AcctJob *out, char *why,
                       size_t whylen)
{
    spur__api__acct_job__init(out);
    out->name = out->user = out->account = out->partition = out->workdir = out->reason =
        out->dependency = NULL;
    if (nvals != ACCT_SQL_NCOLS) {
        snprintf(why, whylen, "a row of %d columns, not %d", nvals, ACCT_SQL_NCOLS);
        goto empty;
    }
    const char *bad = NULL;
    uint64_t u;
    int32_t i32;
#define U64(col, field, max)                                                                       \
    do {                                                                                           \
        if (parse_u64(vals[col], max, &u) != 0)                                                    \
            bad = #field;                                                                          \
        else                                                                                       \
            out->field = u;                                                                        \
    } while (0)
#define I32(col, field)                                                                            \
    do {                                                                                           \
        if (parse_i32(vals[col], &i32) != 0)                                                       \
            bad = #field;                                                                          \
        else                                                                                       \
            out->field = i32;                                                                      \
    } while (0)
    U64(C_JOB_ID, job_id, UINT64_MAX);
    U64(C_ARRAY_JOB_ID, array_job_id, UINT64_MAX);
    U64(C_ARRAY_TASK_ID, array_task_id, UINT32_MAX);
    U64(C_UID, uid, UINT32_MAX);
    U64(C_GID, gid, UINT32_MAX);
    I32(C_EXIT_CODE, exit_code);
    I32(C_EXIT_SIGNAL, exit_signal);
    U64(C_NNODES, nnodes, UINT32_MAX);
    U64(C_CPUS, cpus, UINT32_MAX);
    U64(C_MEM_MB, mem_mb, UINT64_MAX);
    U64(C_TIME_LIMIT, time_limit_min, UINT32_MAX);
    U64(C_SUBMIT, submit_time_ms, UINT64_MAX);
    U64(C_ELIGIBLE, eligible_time_ms, UINT64_MAX);
    U64(C_START, start_time_ms, UINT64_MAX);
    U64(C_END, end_time_ms, UINT64_MAX);
    U64(C_RESTARTS, restarts, UINT32_MAX);
    U64(C_LAST_SEQ, last_seq, UINT64_MAX);
#undef U64
#undef I32
    int st = acct_sql_state_parse(vals[C_STATE] ? vals[C_STATE] : "");
    if (st < 0)
        bad = "state";
    else
        out->state = (Spur__Api__JobState)st;
    if (bad != NULL) {
        snprintf(why, whylen, "column %s: not a valid value", bad);
        goto empty;
    }
    struct {
        int col;
        char **dst;
    } strs[] = {{C_NAME, &out->name},
                {C_USER, &out->user},
                {C_ACCOUNT, &out->account},
                {C_PARTITION, &out->partition},
                {C_WORKDIR, &out->workdir},
                {C_REASON, &out->reason},
                {C_DEPENDENCY, &out->dependency}};
    for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]); k++) {
        *strs[k].dst = dup_str(vals[strs[k].col] ? vals[strs[k].col] : "");
        if (*strs[k].dst == NULL)
            goto oom;
    }
    if (split_nodes(vals[C_NODE_LIST], out) != 0)
        goto oom;
    return 0;
oom:
    snprintf(why, whylen, "out of memory");
    acct_sql_job_free(out, false);
empty:
    spur__api__acct_job__init(out);
    return -1;
}
