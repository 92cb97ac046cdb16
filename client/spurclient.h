/*
 * spurclient.h - a small blocking client for the spurctld client API (port 6817).
 *
 * Guarantees:
 *   - Finds a replica: tries the hosts given (SPUR_CONTROLLER, else controller.hosts), the
 *     last one that answered first, rotating on connection failures and timeouts.
 *   - Follows the leader: writes go to the last leader an answer named (a follower would
 *     only forward them); an UNAVAILABLE answer that names the leader's address makes the
 *     next attempt go there; one without a hint moves on to the next host, and after a
 *     full round it waits a little (an election takes about a second) and tries again,
 *     until the call's deadline.
 *   - Exactly-once writes: a request marked as a write gets this client's random 64-bit
 *     id and the next sequence number once, and keeps both across every retry, so a
 *     replica that already applied it answers with the first result.
 *   - Never waits past the deadline; never reads a frame over max_frame bytes.
 *   - The cluster: every request names the cluster in the options. A client given none
 *     (NULL or "") first sends a Ping that names no cluster, the one request a replica
 *     answers without the name, and from then on names the cluster that answer carried,
 *     on every connection: a replica of another cluster later in the host list is still
 *     refused. A Ping call itself goes out without the name and its answer teaches it.
 *
 * Ownership: spurclient_call() returns a response the caller frees with spurclient_response_free().
 * One struct spurclient is one connection, used by one thread at a time.
 */
#ifndef SPUR_SPURCLIENT_H
#define SPUR_SPURCLIENT_H

#include "spur.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef Spur__Api__Request spurclient_request;
typedef Spur__Api__Response spurclient_response;

struct spurclient_options {
    const char *const *hosts; /* "host:port" strings; at least one */
    size_t nhosts;
    const char *cluster_name; /* NULL or "": learn it from the first replica that answers */
    uint32_t timeout_ms; /* per call, across retries; 0: 10000 */
    uint32_t max_frame;  /* 0: 4 MiB */
    const char *user;    /* sent in every request; NULL: the login name */
};

struct spurclient;

struct spurclient *spurclient_new(const struct spurclient_options *o);
void spurclient_free(struct spurclient *c);

/*
 * Send req and wait for its response. write: give it (client_id, seq) for exactly-once
 * (a retry keeps them). Returns 0 with *resp set (any code, including errors the server
 * reported), or -1 when no replica answered in time; err then says why.
 */
int spurclient_call(struct spurclient *c, spurclient_request *req, bool write,
                    spurclient_response **resp, char *err, size_t errlen);
void spurclient_response_free(spurclient_response *r);
/* Change the per-call deadline (0: 10000 ms); returns the previous one. */
uint32_t spurclient_set_timeout(struct spurclient *c, uint32_t timeout_ms);

/* The host:port that answered last, or NULL. */
const char *spurclient_current_host(const struct spurclient *c);
uint64_t spurclient_client_id(const struct spurclient *c);
/* The cluster name requests carry: the one given, or the one learned; NULL: not yet. */
const char *spurclient_cluster_name(const struct spurclient *c);

/* Split "a:1,b:2" into a NULL-terminated vector (caller frees with spurclient_hosts_free). */
char **spurclient_hosts_parse(const char *list, size_t *n);
void spurclient_hosts_free(char **v, size_t n);

#endif
