/*
 * acct_sql.h - the accounting database's SQL, pure: the schema and its migrations, the
 * statements the exporter and sacct send, the parameters they take built from outbox
 * records and sacct's question, and the rows they return parsed back into AcctJob
 * (docs/accounting.md). Nothing here talks to a database: acct.c sends what this builds.
 *
 * What it guarantees
 *
 *   - A batch is a fixed number of statements whatever its size: every column travels as
 *     one array parameter (text-format array literals) that the statement unnests, so
 *     500 records cost the same five round-trip-free statements as one.
 *   - Array literals are always well formed: every element is double-quoted with '"' and
 *     '\' escaped (commas, braces, spaces and the word NULL inside a string are data),
 *     NULL is the bare word, and bytes that are not UTF-8 become U+FFFD, so a job name
 *     the database would refuse cannot wedge the export forever.
 *   - A batch holding several records of one job upserts that job once, from the record
 *     with the largest seq (ON CONFLICT DO UPDATE may not touch a row twice in one
 *     statement); job_events gets every record. The upsert only replaces an older row
 *     (jobs.last_seq < EXCLUDED.last_seq), so replaying a batch changes nothing.
 *   - Times travel as integer ms since the epoch (0: NULL) and are turned into
 *     timestamptz by the statement (epoch + ms * 1 ms, exact); rows come back in ms.
 *
 * Ownership: struct acct_sql_params owns its values (acct_sql_params_free). Parsed rows
 * own their strings (acct_sql_job_free). SQL text is static.
 */
#ifndef SPUR_ACCT_SQL_H
#define SPUR_ACCT_SQL_H

#include "fsm.pb-c.h"
#include "spur.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACCT_SQL_SCHEMA_VERSION 1
/* pg_advisory_xact_lock key of the schema migration ('spurctld' schema lock). */
#define ACCT_SQL_LOCK_KEY "7310593858020254001"

/* ---- schema --------------------------------------------------------------------------- */

/* Under the lock, in one transaction: the lock, then whether spur_schema exists. */
extern const char ACCT_SQL_BEGIN[];
extern const char ACCT_SQL_LOCK[];
extern const char ACCT_SQL_HAS_SCHEMA[]; /* one row: t / f */
extern const char ACCT_SQL_VERSION[];    /* zero or one row: the version */
extern const char ACCT_SQL_COMMIT[];
extern const char ACCT_SQL_ROLLBACK[];
/* The statements that take the schema from version from to from + 1 (from 0 .. 0);
 * NULL when there is no such step. The last one records the new version. */
const char *const *acct_sql_migration(int from, size_t *n);

/* ---- export --------------------------------------------------------------------------- */

extern const char ACCT_SQL_HWM_INIT[]; /* $1 cluster */
extern const char ACCT_SQL_HWM_GET[];  /* $1 cluster -> exported_seq */
extern const char ACCT_SQL_UPSERT_JOBS[];
extern const char ACCT_SQL_INSERT_EVENTS[];
extern const char ACCT_SQL_ADVANCE[]; /* $1 cluster, $2 batch max seq */

#define ACCT_SQL_JOB_PARAMS   27 /* cluster + one array per jobs column */
#define ACCT_SQL_EVENT_PARAMS 6  /* cluster, seq, job_id, event, time, state */
#define ACCT_SQL_QUERY_PARAMS 10

/* Text-format parameters for PQsendQueryParams. */
struct acct_sql_params {
    int n;
    char *values[ACCT_SQL_JOB_PARAMS]; /* owned, NUL-terminated; NULL: SQL NULL */
};
void acct_sql_params_free(struct acct_sql_params *p);

/* One batch's parameters, from records in seq order (n >= 1). 0, or -1 out of memory. */
struct acct_sql_batch {
    struct acct_sql_params jobs;    /* ACCT_SQL_UPSERT_JOBS */
    struct acct_sql_params events;  /* ACCT_SQL_INSERT_EVENTS */
    struct acct_sql_params advance; /* ACCT_SQL_ADVANCE */
    uint64_t max_seq;
    size_t njobs; /* distinct jobs upserted */
};
int acct_sql_batch_build(const char *cluster, Spur__Fsm__AcctRecord *const *recs, size_t n,
                         struct acct_sql_batch *out);
void acct_sql_batch_free(struct acct_sql_batch *b);

/* ---- sacct ---------------------------------------------------------------------------- */

/*
 * The SELECT of sacct: every filter of AcctQueryRequest as a parameter (an empty array:
 * no filter), rows by job id, at most limit + 1 (the extra row says "truncated"). Its
 * columns are ACCT_SQL_NCOLS, in the order acct_sql_parse_row() reads.
 */
extern const char ACCT_SQL_QUERY[];
#define ACCT_SQL_NCOLS     26
#define ACCT_SQL_MAX_LIMIT 100000
/* The limit a request asks for, capped: 0 or over the cap -> the cap. */
uint32_t acct_sql_limit(const Spur__Api__AcctQueryRequest *q);
int acct_sql_query_params(const char *cluster, const Spur__Api__AcctQueryRequest *q,
                          struct acct_sql_params *out);

/*
 * One row of ACCT_SQL_QUERY (vals[i] NULL for SQL NULL) into *out (initialised here; its
 * strings owned by it: acct_sql_job_free). 0, or -1 with why (a malformed value, out of
 * memory) and *out left empty.
 */
int acct_sql_parse_row(const char *const *vals, int nvals, Spur__Api__AcctJob *out, char *why,
                       size_t whylen);
/* Free what acct_sql_parse_row() (or a copy) put in j, and j itself when heap is set. */
void acct_sql_job_free(Spur__Api__AcctJob *j, bool heap);

/* ---- names and encoding -------------------------------------------------------------- */

/* A job state as the database stores it ("PENDING", "OUT_OF_MEMORY"); "UNKNOWN" else. */
const char *acct_sql_state_name(int state);
/* Back; -1 when it is not one. */
int acct_sql_state_parse(const char *s);
/* An outbox event (enum fsm_acct_event) as job_events.event: "submit", ...; "unknown". */
const char *acct_sql_event_name(uint32_t event);

/* A text-array literal being built. Ownership: owns p (acct_sql_arr_take hands it over). */
struct acct_sql_arr {
    char *p;
    size_t len, cap;
    size_t n;
    bool oom;
};
void acct_sql_arr_init(struct acct_sql_arr *a);
void acct_sql_arr_text(struct acct_sql_arr *a, const char *s); /* NULL: an SQL NULL */
void acct_sql_arr_null(struct acct_sql_arr *a);
void acct_sql_arr_u64(struct acct_sql_arr *a, uint64_t v);
void acct_sql_arr_i64(struct acct_sql_arr *a, int64_t v);
/* "{...}" to free(), or NULL out of memory; a is left empty. */
char *acct_sql_arr_take(struct acct_sql_arr *a);

#endif
