/*
 * acct.c - the leader's accounting: exporter and sacct (acct.h for the guarantees).
 *
 * Two libpq connections, each a struct pgc driven by one libevent event on its socket:
 *
 *   exporter  connect -> schema (BEGIN; pg_advisory_xact_lock; does spur_schema exist;
 *             its version; the migration steps; COMMIT) -> high-water mark -> batches.
 *             A batch is one pipeline: BEGIN, upsert jobs, insert job_events, advance
 *             spur_export, COMMIT, sync; five statements whatever its size (acct_sql.h).
 *   query     connected on first use and kept; sacct requests one at a time (FIFO), each
 *             with its own deadline; a deadline that passes while its query runs drops
 *             the connection (the only way to stop waiting for it without blocking).
 *
 * A pgc "unit" is a list of statements sent in pipeline mode and closed by a sync; its
 * callback runs once, when the sync's result arrives or at the first error (the
 * connection is then finished: any error drops it). Results are kept by statement.
 */
#include "acct.h"

#include "acct_sql.h"
#include "fsm.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RETRY_MIN_MS     100
#define BATCH_GAP_MS     50 /* a partial batch waits this long after the last one */
#define QUERY_DEFAULT_MS 10000
#define TRIM_RETRY_MS    5000  /* a trim not seen applied by then may be proposed again */
#define UNIT_MAX         16    /* statements in one unit */
#define PGC_CONNECT_S    "10"  /* a connection (TCP, TLS, authentication) takes at most this */
#define PGC_UNIT_S       "120" /* a unit's answer (a batch, sacct's SELECT) at most this */

static const char NO_DB_WARNING[] = "accounting storage is not configured: showing only the "
                                    "jobs the controller still holds";

struct acct;
struct pgc;
typedef void (*pgc_done_fn)(struct pgc *p, const char *err, enum acct_err kind);

/* One connection. Ownership: owns conn, ev and the results of the unit in flight. */
struct pgc {
    struct acct *A;
    const char *name; /* "exporter", "query" */
    PGconn *conn;
    struct event *ev;
    int fd;
    bool connecting, ready;
    bool in_unit;
    int nstmt; /* statements of the unit in flight */
    int nres;  /* results received */
    PGresult *res[UNIT_MAX];
    pgc_done_fn done;       /* the unit's (or the connect's) callback */
    pgc_done_fn lost;       /* an error with no unit in flight (the server went away) */
    struct event *deadline; /* a connect or a unit that takes too long fails */
    void (*on_ready)(struct pgc *p);
};

struct qwait {
    struct qwait *next;
    struct acct *A;
    struct api_call *call;
    Spur__Api__Request *req; /* borrowed from call */
    struct event *timer;
    bool sent;
};

enum exp_state { E_OFF, E_STANDBY, E_CONNECTING, E_SCHEMA, E_IDLE, E_EXPORTING, E_RETRY };

struct acct {
    struct node *n;        /* borrowed */
    struct node_api *api;  /* borrowed */
    const struct cfg *cfg; /* borrowed */
    bool configured;
    char *password; /* from accounting.password_file; owned */
    struct pgc exp, qry;
    enum exp_state st;
    raft_term term;
    uint64_t hwm;
    int schema_version;
    struct acct_sql_batch batch;
    Spur__Fsm__AcctRecord **recs; /* decoded records of the batch in flight */
    size_t nrecs;
    uint64_t trim_seq; /* trim in flight through this, 0: none */
    uint64_t trim_ms;
    struct event *ev_retry, *ev_pump;
    uint64_t next_batch_ms; /* a partial batch waits until then (BATCH_GAP_MS after the last) */
    uint64_t backoff_ms;
    uint64_t rng;
    uint64_t retry_at_ms;
    char last_err[256];
    char status[320];
    struct qwait *qhead, *qtail;
    struct acct_stats s;
};

const char *acct_err_name(enum acct_err e)
{
    static const char *const names[] = {"connect", "auth", "schema", "query"};
    return (unsigned)e < ACCT_NERR ? names[e] : "query";
}

/* ---- a connection --------------------------------------------------------------------- */

static void pgc_clear_results(struct pgc *p)
{
    for (int i = 0; i < p->nres; i++)
        PQclear(p->res[i]);
    p->nres = 0;
    p->nstmt = 0;
    p->in_unit = false;
}

static void pgc_close(struct pgc *p)
{
    pgc_clear_results(p);
    if (p->deadline)
        evtimer_del(p->deadline);
    if (p->ev) {
        event_free(p->ev);
        p->ev = NULL;
    }
    if (p->conn) {
        PQfinish(p->conn);
        p->conn = NULL;
    }
    p->fd = -1;
    p->connecting = p->ready = false;
}

/* The connection's error as one line: libpq's messages span lines (newline, tab). */
static void one_line(char *dst, size_t len, const char *msg)
{
    const char *s = msg && *msg ? msg : "unknown error";
    size_t k = 0;
    bool space = false;
    for (; *s && k + 1 < len; s++) {
        bool ctl = (unsigned char)*s < 0x20 || *s == ' ';
        if (ctl) {
            space = k > 0;
            continue;
        }
        if (space && k + 2 < len)
            dst[k++] = ' ';
        space = false;
        dst[k++] = *s;
    }
    dst[k] = '\0';
}

static void pgc_fail(struct pgc *p, const char *err, enum acct_err kind)
{
    char msg[256];
    one_line(msg, sizeof(msg), err);
    pgc_done_fn done = p->done ? p->done : p->lost;
    p->done = NULL;
    pgc_close(p);
    if (done)
        done(p, msg, kind);
}

static void on_pgc_event(evutil_socket_t fd, short what, void *arg);
static void pgc_fail(struct pgc *p, const char *err, enum acct_err kind);

/*
 * libpq does not enforce connect_timeout for PQconnectPoll, and a server behind a
 * partition may never answer a batch: both are bounded here.
 */
static void on_pgc_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct pgc *p = arg;
    (void)fd;
    (void)what;
    if (p->connecting)
        pgc_fail(p, "no connection within " PGC_CONNECT_S " s", ACCT_ERR_CONNECT);
    else if (p->in_unit)
        pgc_fail(p, "no answer within " PGC_UNIT_S " s", ACCT_ERR_QUERY);
}

static void pgc_set_deadline(struct pgc *p, int secs)
{
    if (p->deadline == NULL)
        p->deadline = evtimer_new(p->A->n->base, on_pgc_deadline, p);
    if (p->deadline == NULL)
        return; /* out of memory: unbounded, as libpq itself would be */
    struct timeval tv = {secs, 0};
    evtimer_add(p->deadline, &tv);
}

static int pgc_arm(struct pgc *p, short what)
{
    int fd = PQsocket(p->conn);
    if (fd < 0)
        return -1;
    if (p->ev && (fd != p->fd || event_get_events(p->ev) != what)) {
        event_free(p->ev);
        p->ev = NULL;
    }
    if (p->ev == NULL) {
        p->ev = event_new(p->A->n->base, fd, what, on_pgc_event, p);
        if (p->ev == NULL)
            return -1;
    }
    p->fd = fd;
    return event_add(p->ev, NULL);
}

/* Defaults first; database_url (expanded) overrides them; the password file's wins. */
static const char *kw[] = {"application_name", "connect_timeout", "dbname", "password", NULL};

static void pgc_connect(struct pgc *p, pgc_done_fn failed, void (*on_ready)(struct pgc *p))
{
    struct acct *A = p->A;
    pgc_close(p);
    const char *vals[] = {"spurctld", "10", A->cfg->accounting.database_url, A->password, NULL};
    const char *const *keys = kw;
    if (A->password == NULL)
        vals[3] = NULL; /* ends the list there: libpq's own PGPASSFILE / ~/.pgpass */
    p->done = failed;
    p->on_ready = on_ready;
    p->conn = PQconnectStartParams(keys, vals, 1);
    if (p->conn == NULL) {
        pgc_fail(p, "out of memory", ACCT_ERR_CONNECT);
        return;
    }
    if (PQstatus(p->conn) == CONNECTION_BAD) {
        pgc_fail(p, PQerrorMessage(p->conn), ACCT_ERR_CONNECT);
        return;
    }
    p->connecting = true;
    pgc_set_deadline(p, atoi(PGC_CONNECT_S));
    if (pgc_arm(p, EV_WRITE) != 0)
        pgc_fail(p, "cannot watch the connection's socket", ACCT_ERR_CONNECT);
}

static void pgc_connect_step(struct pgc *p)
{
    PostgresPollingStatusType r = PQconnectPoll(p->conn);
    if (r == PGRES_POLLING_FAILED) {
        enum acct_err kind = PQconnectionNeedsPassword(p->conn) ||
                                     strstr(PQerrorMessage(p->conn), "authentication") != NULL
                                 ? ACCT_ERR_AUTH
                                 : ACCT_ERR_CONNECT;
        pgc_fail(p, PQerrorMessage(p->conn), kind);
        return;
    }
    if (r == PGRES_POLLING_OK) {
        p->connecting = false;
        if (PQsetnonblocking(p->conn, 1) != 0 || PQenterPipelineMode(p->conn) != 1 ||
            pgc_arm(p, EV_READ | EV_PERSIST) != 0) {
            pgc_fail(p, PQerrorMessage(p->conn), ACCT_ERR_CONNECT);
            return;
        }
        p->ready = true;
        p->done = NULL;
        if (p->deadline)
            evtimer_del(p->deadline);
        if (p->on_ready)
            p->on_ready(p);
        return;
    }
    /* The socket may change while connecting (another address, SSL retry). */
    if (pgc_arm(p, r == PGRES_POLLING_READING ? EV_READ : EV_WRITE) != 0)
        pgc_fail(p, "cannot watch the connection's socket", ACCT_ERR_CONNECT);
}

static void pgc_flush(struct pgc *p)
{
    int r = PQflush(p->conn);
    if (r < 0) {
        pgc_fail(p, PQerrorMessage(p->conn), ACCT_ERR_QUERY);
        return;
    }
    short want = EV_READ | EV_PERSIST | (r == 1 ? EV_WRITE : 0);
    if (pgc_arm(p, want) != 0)
        pgc_fail(p, "cannot watch the connection's socket", ACCT_ERR_QUERY);
}

/* Send a unit: n statements (params[i] may be NULL: none), then a sync. */
static void pgc_send(struct pgc *p, const char *const *sql,
                     const struct acct_sql_params *const *params, int n, pgc_done_fn done)
{
    pgc_clear_results(p);
    p->done = done;
    p->in_unit = true;
    p->nstmt = n;
    for (int i = 0; i < n; i++) {
        const struct acct_sql_params *pp = params ? params[i] : NULL;
        if (PQsendQueryParams(p->conn, sql[i], pp ? pp->n : 0, NULL,
                              pp ? (const char *const *)pp->values : NULL, NULL, NULL, 0) != 1) {
            pgc_fail(p, PQerrorMessage(p->conn), ACCT_ERR_QUERY);
            return;
        }
    }
    if (PQpipelineSync(p->conn) != 1) {
        pgc_fail(p, PQerrorMessage(p->conn), ACCT_ERR_QUERY);
        return;
    }
    pgc_set_deadline(p, atoi(PGC_UNIT_S));
    pgc_flush(p);
}

/* Read what arrived; finish the unit at its sync or its first error. */
static void pgc_read(struct pgc *p)
{
    if (PQconsumeInput(p->conn) != 1) {
        pgc_fail(p, PQerrorMessage(p->conn), p->in_unit ? ACCT_ERR_QUERY : ACCT_ERR_CONNECT);
        return;
    }
    int nulls = 0;
    while (p->conn && p->in_unit && !PQisBusy(p->conn)) {
        PGresult *r = PQgetResult(p->conn);
        if (r == NULL) {
            if (++nulls > 1)
                break; /* nothing more queued */
            continue;
        }
        nulls = 0;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            pgc_done_fn done = p->done;
            p->done = NULL;
            p->in_unit = false;
            if (p->deadline)
                evtimer_del(p->deadline);
            if (done)
                done(p, NULL, ACCT_ERR_QUERY); /* results stay until the next unit */
            return;
        }
        if (st == PGRES_FATAL_ERROR || st == PGRES_PIPELINE_ABORTED || st == PGRES_BAD_RESPONSE ||
            p->nres >= UNIT_MAX) {
            char msg[256];
            const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            one_line(msg, sizeof(msg), PQresultErrorMessage(r));
            enum acct_err kind =
                state != NULL && strncmp(state, "28", 2) == 0 ? ACCT_ERR_AUTH : ACCT_ERR_QUERY;
            PQclear(r);
            pgc_fail(p, msg, kind);
            return;
        }
        p->res[p->nres++] = r;
    }
    if (!p->in_unit && p->conn) {
        /* Idle: a NOTICE or the server closing the connection. */
        if (PQstatus(p->conn) == CONNECTION_BAD)
            pgc_fail(p, PQerrorMessage(p->conn), ACCT_ERR_CONNECT);
    }
}

static void on_pgc_event(evutil_socket_t fd, short what, void *arg)
{
    struct pgc *p = arg;
    (void)fd;
    if (p->connecting) {
        pgc_connect_step(p);
        return;
    }
    if (!p->ready)
        return;
    if (what & EV_WRITE) {
        pgc_flush(p);
        if (p->conn == NULL)
            return;
    }
    if (what & EV_READ)
        pgc_read(p);
}

/* ---- status --------------------------------------------------------------------------- */

static bool leading(const struct acct *A)
{
    const struct node *n = A->n;
    return n->raft != NULL && n->role == RAFT_LEADER && !n->stopping &&
           n->applied >= n->leader_noop_index;
}

static const char *exporter_word(struct acct *A)
{
    switch (A->st) {
    case E_OFF:
        return "off";
    case E_STANDBY:
        return "standby";
    case E_CONNECTING:
    case E_SCHEMA:
        return "connecting";
    case E_IDLE:
        return "idle";
    case E_EXPORTING:
        return "exporting";
    case E_RETRY: {
        uint64_t now = mono_ms();
        snprintf(A->status, sizeof(A->status), "retrying in %llu ms: %s",
                 (unsigned long long)(A->retry_at_ms > now ? A->retry_at_ms - now : 0),
                 A->last_err);
        return A->status;
    }
    }
    return "off";
}

void acct_get_stats(const struct acct *A, struct acct_stats *out)
{
    *out = A->s;
    out->configured = A->configured;
    out->database_up = A->st == E_IDLE || A->st == E_EXPORTING;
    out->exporter = exporter_word((struct acct *)A);
    out->exported_seq = A->hwm;
}

void acct_fill_status(void *arg, Spur__Api__RaftStatusResponse *s)
{
    struct acct *A = arg;
    struct fsm_acct_stats fs;
    fsm_acct_get_stats(A->n->fsm, &fs);
    s->acct_enabled = fs.enabled;
    s->acct_outbox_records = fs.records;
    s->acct_outbox_oldest_ms = fs.oldest_ms;
    s->acct_exporter = (char *)exporter_word(A);
    s->acct_exported_seq = A->hwm;
}

/* ---- the exporter --------------------------------------------------------------------- */

static void exp_start(struct acct *A);
static void exp_pump(struct acct *A);

static void free_recs(struct acct *A)
{
    for (size_t i = 0; i < A->nrecs; i++)
        spur__fsm__acct_record__free_unpacked(A->recs[i], NULL);
    free(A->recs);
    A->recs = NULL;
    A->nrecs = 0;
    acct_sql_batch_free(&A->batch);
}

static void exp_error(struct acct *A, const char *err, enum acct_err kind)
{
    free_recs(A);
    pgc_close(&A->exp);
    A->s.errors[kind]++;
    uint64_t base = A->backoff_ms ? A->backoff_ms : RETRY_MIN_MS;
    uint64_t max = A->cfg->accounting.retry_max_ms ? A->cfg->accounting.retry_max_ms : 30000;
    if (base > max)
        base = max;
    uint64_t delay = base / 2 + jitter_rand(&A->rng) % (base / 2 + 1);
    A->backoff_ms = base * 2 > max ? max : base * 2;
    char line[256];
    snprintf(line, sizeof(line), "%s: %s", acct_err_name(kind), err);
    if (strcmp(line, A->last_err) != 0) {
        log_event(LOG_WARN, "acct", "export failed; retrying", "reason=%s error=%s retry_ms=%llu",
                  acct_err_name(kind), log_q(err), (unsigned long long)delay);
        snprintf(A->last_err, sizeof(A->last_err), "%s", line);
    }
    A->st = E_RETRY;
    A->retry_at_ms = mono_ms() + delay;
    struct timeval tv = {(time_t)(delay / 1000), (suseconds_t)((delay % 1000) * 1000)};
    evtimer_add(A->ev_retry, &tv);
}

static void exp_failed(struct pgc *p, const char *err, enum acct_err kind)
{
    struct acct *A = p->A;
    if (A->st == E_SCHEMA && kind == ACCT_ERR_QUERY)
        kind = ACCT_ERR_SCHEMA;
    exp_error(A, err, kind);
}

static const char *value(const struct pgc *p, int stmt)
{
    if (stmt >= p->nres || PQntuples(p->res[stmt]) < 1 || PQnfields(p->res[stmt]) < 1 ||
        PQgetisnull(p->res[stmt], 0, 0))
        return NULL;
    return PQgetvalue(p->res[stmt], 0, 0);
}

static void exp_hwm_done(struct pgc *p, const char *err, enum acct_err kind)
{
    struct acct *A = p->A;
    if (err) {
        exp_failed(p, err, kind);
        return;
    }
    const char *v = value(p, 1);
    char *end = NULL;
    unsigned long long hwm = v ? strtoull(v, &end, 10) : 0;
    if (v == NULL || *end != '\0') {
        exp_error(A, "spur_export holds no high-water mark for this cluster", ACCT_ERR_SCHEMA);
        return;
    }
    A->hwm = hwm;
    A->st = E_IDLE;
    A->last_err[0] = '\0';
    A->backoff_ms = 0;
    const char *host = PQhost(p->conn);
    log_event(LOG_INFO, "acct", "database connected", "host=%s schema_version=%d exported_seq=%llu",
              log_q(host ? host : ""), A->schema_version, hwm);
    exp_pump(A);
}

static void exp_read_hwm(struct acct *A)
{
    struct acct_sql_params c = {.n = 1, .values = {(char *)A->cfg->cluster_name}};
    const char *sql[] = {ACCT_SQL_HWM_INIT, ACCT_SQL_HWM_GET};
    const struct acct_sql_params *pp[] = {&c, &c};
    pgc_send(&A->exp, sql, pp, 2, exp_hwm_done);
}

static void exp_migrated(struct pgc *p, const char *err, enum acct_err kind)
{
    if (err) {
        exp_failed(p, err, kind);
        return;
    }
    exp_read_hwm(p->A);
}

/* The version is known (0: no schema yet): migrate and commit, or refuse a newer one. */
static void exp_have_version(struct acct *A, int v)
{
    A->schema_version = v;
    if (v > ACCT_SQL_SCHEMA_VERSION) {
        char msg[128];
        snprintf(msg, sizeof(msg), "database schema version %d is newer than this build's %d", v,
                 ACCT_SQL_SCHEMA_VERSION);
        if (strstr(A->last_err, msg) == NULL)
            log_event(LOG_ERROR, "acct", msg, NULL);
        exp_error(A, msg, ACCT_ERR_SCHEMA);
        return;
    }
    const char *sql[UNIT_MAX];
    int n = 0;
    for (int from = v; from < ACCT_SQL_SCHEMA_VERSION; from++) {
        size_t k = 0;
        const char *const *st = acct_sql_migration(from, &k);
        for (size_t i = 0; i < k && n < UNIT_MAX - 1; i++)
            sql[n++] = st[i];
    }
    sql[n++] = ACCT_SQL_COMMIT;
    if (v < ACCT_SQL_SCHEMA_VERSION)
        log_event(LOG_INFO, "acct", "migrating the database schema", "from=%d to=%d", v,
                  ACCT_SQL_SCHEMA_VERSION);
    A->schema_version = ACCT_SQL_SCHEMA_VERSION;
    pgc_send(&A->exp, sql, NULL, n, exp_migrated);
}

static void exp_version_done(struct pgc *p, const char *err, enum acct_err kind)
{
    if (err) {
        exp_failed(p, err, kind);
        return;
    }
    const char *v = value(p, 0);
    exp_have_version(p->A, v ? atoi(v) : 0);
}

static void exp_locked(struct pgc *p, const char *err, enum acct_err kind)
{
    if (err) {
        exp_failed(p, err, kind);
        return;
    }
    const char *has = value(p, 2);
    if (has != NULL && has[0] == 't') {
        const char *sql[] = {ACCT_SQL_VERSION};
        pgc_send(p, sql, NULL, 1, exp_version_done);
    } else {
        exp_have_version(p->A, 0);
    }
}

static void exp_connected(struct pgc *p)
{
    struct acct *A = p->A;
    A->st = E_SCHEMA;
    const char *sql[] = {ACCT_SQL_BEGIN, ACCT_SQL_LOCK, ACCT_SQL_HAS_SCHEMA};
    pgc_send(p, sql, NULL, 3, exp_locked);
}

static void exp_start(struct acct *A)
{
    A->st = E_CONNECTING;
    pgc_connect(&A->exp, exp_failed, exp_connected);
}

static void exp_stop(struct acct *A, const char *why)
{
    bool was = A->st != E_OFF && A->st != E_STANDBY;
    free_recs(A);
    pgc_close(&A->exp);
    evtimer_del(A->ev_retry);
    A->st = A->configured ? E_STANDBY : E_OFF;
    A->trim_seq = 0;
    A->backoff_ms = 0;
    A->last_err[0] = '\0';
    if (was)
        log_event(LOG_INFO, "acct", "exporter stopped", "why=%s", log_q(why));
}

static void trim_refused(void *arg)
{
    struct acct *A = arg;
    A->trim_seq = 0;
}

/* Propose AcctTrim through the mark when the outbox still holds what it covers. */
static void maybe_trim(struct acct *A)
{
    struct fsm_acct_stats fs;
    fsm_acct_get_stats(A->n->fsm, &fs);
    if (A->trim_seq != 0 && (fs.records == 0 || fs.first_seq > A->trim_seq))
        A->trim_seq = 0; /* applied */
    if (A->trim_seq != 0 && mono_ms() - A->trim_ms < TRIM_RETRY_MS)
        return;
    if (fs.records == 0 || fs.first_seq > A->hwm || A->hwm == 0)
        return;
    uint8_t *data = NULL;
    size_t len = 0;
    if (fsm_encode_acct_trim(A->hwm, wall_ms(), &data, &len) != FSM_OK)
        return; /* out of memory: the next wake tries again */
    A->trim_seq = A->hwm;
    A->trim_ms = mono_ms();
    node_api_propose_internal(A->api, data, len, trim_refused, A);
}

static void exp_batch_done(struct pgc *p, const char *err, enum acct_err kind)
{
    struct acct *A = p->A;
    if (err) {
        exp_failed(p, err, kind);
        return;
    }
    A->hwm = A->batch.max_seq;
    A->s.batches++;
    A->s.exported_records += A->nrecs;
    A->s.last_export_ms = wall_ms();
    log_event(LOG_DEBUG, "acct", "exported", "records=%zu jobs=%zu exported_seq=%llu", A->nrecs,
              A->batch.njobs, (unsigned long long)A->hwm);
    free_recs(A);
    pgc_clear_results(p);
    A->st = E_IDLE;
    maybe_trim(A);
    A->next_batch_ms = mono_ms() + BATCH_GAP_MS;
    event_active(A->ev_pump, EV_TIMEOUT, 0); /* the next batch, on a fresh loop turn */
}

static void exp_pump(struct acct *A)
{
    if (A->st != E_IDLE)
        return;
    /*
     * The database says more was exported than this state ever recorded: another cluster
     * of the same cluster_name writes there (a cluster made anew over an old database), or
     * this leader has not applied its log yet. Trimming through that mark would drop
     * records the database does not have, so nothing is trimmed or sent; the retry reads
     * the mark again (docs/accounting.md, "One cluster_name, one cluster").
     */
    struct fsm_acct_stats fs;
    fsm_acct_get_stats(A->n->fsm, &fs);
    if (A->hwm >= fs.next_seq) {
        char err[200];
        snprintf(err, sizeof(err),
                 "the database's high-water mark %llu is beyond the last record this cluster "
                 "made (%llu): is another cluster named %s writing to it?",
                 (unsigned long long)A->hwm, (unsigned long long)(fs.next_seq - 1),
                 A->cfg->cluster_name);
        exp_error(A, err, ACCT_ERR_SCHEMA);
        return;
    }
    maybe_trim(A);
    size_t max = A->cfg->accounting.batch_size ? A->cfg->accounting.batch_size : 500;
    /* Seqs are consecutive, so those after the mark are last_seq - mark (trimmed: none). */
    uint64_t waiting = fs.records > 0 && fs.last_seq > A->hwm ? fs.last_seq - A->hwm : 0;
    if (waiting == 0)
        return;
    /*
     * Right after a batch, a partial one waits a moment for more records: under load the
     * database then gets fewer, larger transactions (its cost per record is what slows the
     * machine), and an idle cluster's records still go out within BATCH_GAP_MS.
     */
    uint64_t now = mono_ms();
    if (waiting < max && now < A->next_batch_ms) {
        if (!evtimer_pending(A->ev_pump, NULL)) {
            uint64_t d = A->next_batch_ms - now;
            struct timeval tv = {(time_t)(d / 1000), (suseconds_t)((d % 1000) * 1000)};
            evtimer_add(A->ev_pump, &tv);
        }
        return;
    }
    if (waiting < max)
        max = (size_t)waiting;
    struct fsm_acct_view *v = calloc(max, sizeof(*v));
    if (v == NULL)
        return;
    size_t n = fsm_acct_records(A->n->fsm, A->hwm, v, max);
    if (n == 0) {
        free(v);
        return;
    }
    A->recs = calloc(n, sizeof(*A->recs));
    if (A->recs == NULL) {
        free(v);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        A->recs[i] = spur__fsm__acct_record__unpack(NULL, v[i].len, v[i].bytes);
        if (A->recs[i] == NULL) {
            free(v);
            exp_error(A, "an outbox record does not decode", ACCT_ERR_QUERY);
            return;
        }
        A->nrecs++;
    }
    free(v);
    if (acct_sql_batch_build(A->cfg->cluster_name, A->recs, A->nrecs, &A->batch) != 0) {
        free_recs(A);
        return;
    }
    A->st = E_EXPORTING;
    const char *sql[] = {ACCT_SQL_BEGIN, ACCT_SQL_UPSERT_JOBS, ACCT_SQL_INSERT_EVENTS,
                         ACCT_SQL_ADVANCE, ACCT_SQL_COMMIT};
    const struct acct_sql_params *pp[] = {NULL, &A->batch.jobs, &A->batch.events, &A->batch.advance,
                                          NULL};
    pgc_send(&A->exp, sql, pp, 5, exp_batch_done);
}

static void on_pump(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    exp_pump(arg);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct acct *A = arg;
    (void)fd;
    (void)what;
    if (A->st == E_RETRY && leading(A))
        exp_start(A);
}

/* ---- sacct ---------------------------------------------------------------------------- */

static void qwait_unlink(struct acct *A, struct qwait *w)
{
    struct qwait *prev = NULL;
    for (struct qwait *x = A->qhead; x; prev = x, x = x->next) {
        if (x == w) {
            if (prev)
                prev->next = w->next;
            else
                A->qhead = w->next;
            if (A->qtail == w)
                A->qtail = prev;
            break;
        }
    }
    if (w->timer)
        event_free(w->timer);
    free(w);
}

static int cmp_job(const void *a, const void *b)
{
    const Spur__Api__AcctJob *x = *(Spur__Api__AcctJob *const *)a;
    const Spur__Api__AcctJob *y = *(Spur__Api__AcctJob *const *)b;
    return x->job_id < y->job_id ? -1 : x->job_id > y->job_id;
}

static bool has_id(const struct fsm_acct_result *r, uint64_t id)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->jobs[mid]->job_id == id)
            return true;
        if (r->jobs[mid]->job_id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/*
 * Answer from the state, merged with the database's rows when db is set (dbn rows by
 * id, db_truncated: more matched): a job the state holds is shown as the state has it
 * (or not at all when the state's row fails the filters).
 */
static void answer(struct acct *A, struct api_call *call, const Spur__Api__AcctQueryRequest *q,
                   Spur__Api__AcctJob **db, size_t dbn, bool db_truncated, const char *source,
                   const char *warning)
{
    struct fsm_acct_result st, known;
    memset(&known, 0, sizeof(known));
    if (fsm_acct_query(A->n->fsm, q, &st) != FSM_OK) {
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    qsort(st.jobs, st.n, sizeof(*st.jobs), cmp_job);
    uint64_t *ids = NULL;
    if (dbn > 0) {
        ids = malloc(dbn * sizeof(*ids));
        Spur__Api__AcctQueryRequest kq = SPUR__API__ACCT_QUERY_REQUEST__INIT;
        if (ids != NULL) {
            for (size_t i = 0; i < dbn; i++)
                ids[i] = db[i]->job_id;
            kq.job_ids = ids;
            kq.n_job_ids = dbn;
            kq.limit = ACCT_SQL_MAX_LIMIT;
        }
        if (ids == NULL || fsm_acct_query(A->n->fsm, &kq, &known) != FSM_OK) {
            free(ids);
            fsm_acct_result_free(&st);
            api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
            return;
        }
        qsort(known.jobs, known.n, sizeof(*known.jobs), cmp_job);
    }
    size_t limit = acct_sql_limit(q);
    Spur__Api__AcctJob **out = malloc((st.n + dbn + 1) * sizeof(*out));
    if (out == NULL) {
        free(ids);
        fsm_acct_result_free(&st);
        fsm_acct_result_free(&known);
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    size_t k = 0, i = 0, j = 0;
    while (i < st.n || j < dbn) {
        if (j < dbn && has_id(&known, db[j]->job_id)) {
            j++;
            continue;
        }
        if (j >= dbn || (i < st.n && st.jobs[i]->job_id <= db[j]->job_id))
            out[k++] = st.jobs[i++];
        else
            out[k++] = db[j++];
    }
    bool truncated = st.truncated || db_truncated || k > limit;
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    Spur__Api__AcctQueryResponse ar = SPUR__API__ACCT_QUERY_RESPONSE__INIT;
    ar.jobs = out;
    ar.n_jobs = k > limit ? limit : k;
    ar.source = (char *)source;
    ar.warning = (char *)(warning ? warning : "");
    ar.truncated = truncated;
    r.result_case = SPUR__API__RESPONSE__RESULT_ACCT_QUERY;
    r.acct_query = &ar;
    r.leader_id = A->n->leader;
    api_reply(call, &r);
    free(out);
    free(ids);
    fsm_acct_result_free(&st);
    fsm_acct_result_free(&known);
}

static void q_next(struct acct *A);

/* Finish the head: answer from the state with a warning, count the error. */
static void q_fail_head(struct acct *A, const char *why)
{
    struct qwait *w = A->qhead;
    if (w == NULL)
        return;
    char warn[320];
    snprintf(warn, sizeof(warn),
             "the accounting database could not be read (%s): showing only "
             "the jobs the controller still holds",
             why);
    A->s.query_errors++;
    answer(A, w->call, w->req->acct_query, NULL, 0, false, "state-only", warn);
    qwait_unlink(A, w);
}

static void q_failed(struct pgc *p, const char *err, enum acct_err kind)
{
    struct acct *A = p->A;
    (void)kind;
    log_event(LOG_WARN, "acct", "sacct query failed", "error=%s", log_q(err));
    q_fail_head(A, err);
    q_next(A);
}

/* The idle query connection went away: the next sacct connects again. */
static void q_lost(struct pgc *p, const char *err, enum acct_err kind)
{
    (void)kind;
    log_event(LOG_INFO, "acct", "sacct connection closed", "error=%s", log_q(err));
    q_next(p->A);
}

static void q_done(struct pgc *p, const char *err, enum acct_err kind)
{
    struct acct *A = p->A;
    if (err) {
        q_failed(p, err, kind);
        return;
    }
    struct qwait *w = A->qhead;
    PGresult *res = p->nres > 0 ? p->res[0] : NULL;
    int rows = res ? PQntuples(res) : 0;
    int cols = res ? PQnfields(res) : 0;
    Spur__Api__AcctJob **db = rows > 0 ? calloc((size_t)rows, sizeof(*db)) : NULL;
    size_t n = 0;
    char why[128] = "";
    bool bad = rows > 0 && db == NULL;
    const char *vals[ACCT_SQL_NCOLS];
    for (int r = 0; r < rows && !bad; r++) {
        for (int c = 0; c < cols && c < ACCT_SQL_NCOLS; c++)
            vals[c] = PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
        db[n] = malloc(sizeof(**db));
        if (db[n] == NULL || acct_sql_parse_row(vals, cols, db[n], why, sizeof(why)) != 0) {
            free(db[n]);
            bad = true;
            break;
        }
        n++;
    }
    pgc_clear_results(p);
    if (bad) {
        for (size_t i = 0; i < n; i++)
            acct_sql_job_free(db[i], true);
        free(db);
        q_fail_head(A, why[0] ? why : "out of memory");
        q_next(A);
        return;
    }
    uint32_t limit = acct_sql_limit(w->req->acct_query);
    bool trunc = n > limit;
    answer(A, w->call, w->req->acct_query, db, trunc ? limit : n, trunc, "database", NULL);
    for (size_t i = 0; i < n; i++)
        acct_sql_job_free(db[i], true);
    free(db);
    qwait_unlink(A, w);
    q_next(A);
}

static void q_send_head(struct pgc *p)
{
    struct acct *A = p->A;
    struct qwait *w = A->qhead;
    if (w == NULL || w->sent)
        return;
    struct acct_sql_params params;
    if (acct_sql_query_params(A->cfg->cluster_name, w->req->acct_query, &params) != 0) {
        q_fail_head(A, "out of memory");
        q_next(A);
        return;
    }
    w->sent = true;
    const char *sql[] = {ACCT_SQL_QUERY};
    const struct acct_sql_params *pp[] = {&params};
    pgc_send(p, sql, pp, 1, q_done); /* libpq copies the parameters */
    acct_sql_params_free(&params);
}

static void q_next(struct acct *A)
{
    struct pgc *p = &A->qry;
    if (A->qhead == NULL || A->qhead->sent)
        return;
    if (p->ready && !p->in_unit)
        q_send_head(p);
    else if (!p->connecting && !p->ready)
        pgc_connect(p, q_failed, q_send_head);
}

static void on_q_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct qwait *w = arg;
    struct acct *A = w->A;
    (void)fd;
    (void)what;
    char why[96];
    uint32_t ms = w->req->timeout_ms ? w->req->timeout_ms : QUERY_DEFAULT_MS;
    snprintf(why, sizeof(why), "no answer within %u ms", ms);
    if (w == A->qhead && (w->sent || A->qry.connecting)) {
        A->qry.done = NULL;
        pgc_close(&A->qry); /* the only way to stop waiting for it */
    }
    if (w != A->qhead) { /* still queued: answer it in place */
        char warn[320];
        snprintf(warn, sizeof(warn),
                 "the accounting database could not be read (%s): showing "
                 "only the jobs the controller still holds",
                 why);
        A->s.query_errors++;
        answer(A, w->call, w->req->acct_query, NULL, 0, false, "state-only", warn);
        qwait_unlink(A, w);
        return;
    }
    q_fail_head(A, why);
    q_next(A);
}

void acct_query(void *arg, struct api_call *call, Spur__Api__Request *req)
{
    struct acct *A = arg;
    if (req->acct_query == NULL) {
        api_reply_error(call, SPUR__API__CODE__CODE_INVALID, 0, NULL, "acct-query: no question");
        return;
    }
    A->s.queries++;
    if (!A->configured) {
        answer(A, call, req->acct_query, NULL, 0, false, "state", NO_DB_WARNING);
        return;
    }
    struct qwait *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    w->A = A;
    w->call = call;
    w->req = req;
    w->timer = evtimer_new(A->n->base, on_q_timeout, w);
    if (w->timer == NULL) {
        free(w);
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    /* The client's own time, less a margin for the answer to travel back. */
    uint32_t ms = req->timeout_ms ? req->timeout_ms : QUERY_DEFAULT_MS;
    if (ms > 60000)
        ms = 60000;
    uint32_t wait = ms > 1000 ? ms - ms / 10 : ms / 2;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)((wait % 1000) * 1000)};
    evtimer_add(w->timer, &tv);
    if (A->qtail)
        A->qtail->next = w;
    else
        A->qhead = w;
    A->qtail = w;
    q_next(A);
}

static void fail_queries(struct acct *A, const char *why)
{
    A->qry.done = NULL;
    pgc_close(&A->qry);
    while (A->qhead) {
        struct qwait *w = A->qhead;
        api_reply_error(w->call, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL, "%s", why);
        qwait_unlink(A, w);
    }
}

/* ---- lifetime ------------------------------------------------------------------------- */

/* The first line of accounting.password_file, or NULL (logged) when it cannot be read. */
static char *read_password(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_event(LOG_WARN, "acct", "password file cannot be read", "path=%s error=%s", log_q(path),
                  log_q(strerror(errno)));
        return NULL;
    }
    /* Owner and group may read it (a Kubernetes Secret is root:fsGroup 0440); others not. */
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & 007) != 0) {
        log_event(LOG_ERROR, "acct", "password file is readable by others; not using it",
                  "path=%s mode=%04o hint=%s", log_q(path), (unsigned)(st.st_mode & 07777),
                  log_q("chmod 640"));
        close(fd);
        return NULL;
    }
    char buf[1024];
    ssize_t k = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (k < 0)
        k = 0;
    buf[k] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    char *p = strdup(buf);
    explicit_bzero(buf, sizeof(buf));
    return p;
}

struct acct *acct_new(struct node *n, struct node_api *api, const struct cfg *cfg)
{
    struct acct *A = calloc(1, sizeof(*A));
    if (A == NULL)
        return NULL;
    A->n = n;
    A->api = api;
    A->cfg = cfg;
    A->configured = cfg->accounting.database_url && cfg->accounting.database_url[0] != '\0';
    A->exp = (struct pgc){.A = A, .name = "exporter", .fd = -1, .lost = exp_failed};
    A->qry = (struct pgc){.A = A, .name = "query", .fd = -1, .lost = q_lost};
    A->st = A->configured ? E_STANDBY : E_OFF;
    A->rng = mono_ns() ^ ((uint64_t)getpid() << 32);
    A->ev_retry = evtimer_new(n->base, on_retry, A);
    A->ev_pump = event_new(n->base, -1, 0, on_pump, A);
    if (A->ev_retry == NULL || A->ev_pump == NULL) {
        acct_free(A);
        return NULL;
    }
    if (A->configured && cfg->accounting.password_file && cfg->accounting.password_file[0])
        A->password = read_password(cfg->accounting.password_file);
    return A;
}

void acct_free(struct acct *A)
{
    if (A == NULL)
        return;
    fail_queries(A, "this replica is shutting down");
    exp_stop(A, "shutting down");
    if (A->exp.deadline)
        event_free(A->exp.deadline);
    if (A->qry.deadline)
        event_free(A->qry.deadline);
    if (A->ev_retry)
        event_free(A->ev_retry);
    if (A->ev_pump)
        event_free(A->ev_pump);
    if (A->password) {
        explicit_bzero(A->password, strlen(A->password));
        free(A->password);
    }
    free(A);
}

void acct_applied(struct acct *A, const struct node_applied *ap)
{
    if (!A->configured)
        return;
    bool lead = leading(A);
    if (!lead || (A->st != E_STANDBY && A->term != A->n->term)) {
        if (A->st != E_STANDBY) {
            const char *why = lead ? "a new term" : "no longer the leader";
            exp_stop(A, why);
            fail_queries(A, "this replica is no longer the leader; retry");
        }
        if (!lead)
            return;
    }
    if (A->st == E_STANDBY) {
        A->term = A->n->term;
        exp_start(A);
        return;
    }
    if (ap->state_moved && A->st == E_IDLE)
        exp_pump(A);
    else if (ap->state_moved && A->trim_seq != 0)
        maybe_trim(A);
}
