/*
 * acct.h - accounting on the leader (docs/accounting.md): the exporter that moves the
 * replicated outbox into PostgreSQL, and the answer to sacct (Request.acct_query).
 *
 * What it guarantees
 *
 *   - Only a leader in office exports (this replica leads, its term's no-op applied, not
 *     stopping); a change of term or leadership closes the connection ("exporter
 *     stopped"). A new leader reads the high-water mark (spur_export.exported_seq) from
 *     the database and sends only records with seq > it, so nothing is written twice and
 *     nothing skipped: a batch is one transaction that advances the mark with the rows.
 *   - After a COMMIT the outbox is trimmed through the mark (AcctTrim, one in flight;
 *     proposed again while the outbox still holds seq <= mark).
 *   - The loop never blocks on the database: libpq non-blocking connect (PQconnectPoll on
 *     PQsocket events), pipeline mode, reads and writes on socket readiness only.
 *   - Every error (connect, auth, schema, query) is logged once per change of error,
 *     counted, drops the connection and retries after a back-off (100 ms doubling to
 *     accounting.retry_max_ms, jittered), forever; the controller keeps scheduling.
 *   - Every sacct call handed to acct_query() is answered exactly once: from the
 *     database merged with the state ("database"), from the state alone ("state": no
 *     database configured; "state-only": the database failed or did not answer in the
 *     request's time, warning says why), or UNAVAILABLE when leadership ends or acct is
 *     freed while it waits.
 *
 * Ownership: struct acct owns its two connections, timers and the waiting sacct calls;
 * it borrows the node, the request path and cfg from replica.c, which frees it before
 * them (and while the API server still exists).
 */
#ifndef SPUR_ACCT_H
#define SPUR_ACCT_H

#include "api.h"
#include "cfg.h"
#include "node.h"
#include "node_api.h"

#include <stdbool.h>
#include <stdint.h>

struct acct;

struct acct *acct_new(struct node *n, struct node_api *api, const struct cfg *cfg);
void acct_free(struct acct *a);

/* The node's applied hook (after jobctl): follows leadership, wakes the exporter. */
void acct_applied(struct acct *a, const struct node_applied *ap);

/* node_api's handler for Request.acct_query on the leader (arg: the acct). */
void acct_query(void *arg, struct api_call *call, Spur__Api__Request *req);

/* Fill RaftStatusResponse's acct_* fields (arg: the acct); strings borrowed from it. */
void acct_fill_status(void *arg, Spur__Api__RaftStatusResponse *s);

enum acct_err { ACCT_ERR_CONNECT, ACCT_ERR_AUTH, ACCT_ERR_SCHEMA, ACCT_ERR_QUERY, ACCT_NERR };
const char *acct_err_name(enum acct_err e); /* "connect", "auth", "schema", "query" */

struct acct_stats {
    bool configured;       /* accounting.database_url is set */
    bool database_up;      /* the exporter is connected with the schema checked */
    const char *exporter;  /* as RaftStatusResponse.acct_exporter; borrowed */
    uint64_t exported_seq; /* the mark as last seen */
    uint64_t exported_records;
    uint64_t batches;
    uint64_t errors[ACCT_NERR];
    uint64_t last_export_ms; /* wall clock of the last COMMIT, 0: never */
    uint64_t queries;
    uint64_t query_errors;
};
void acct_get_stats(const struct acct *a, struct acct_stats *out);

#endif
