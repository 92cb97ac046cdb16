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
 *   - Hosts: "host:port", "[v6]:port", or a Unix socket of the client API: "unix:/path"
 *     or an absolute path. On a socket the kernel tells the replica who we are
 *     (SO_PEERCRED), so nothing is sent to prove it.
 *   - Credentials (users on TCP): the first request of every new TCP connection that is
 *     not a Ping carries Request.credential: the token (SPUR_JWT) when one is given, else
 *     a MUNGE credential made with munge_encode() for that connection alone, payload
 *     exactly "spur:<cluster_name>" (MUNGE credentials are single-use: munged refuses a
 *     replay, so every connection gets a fresh one). Pings never carry one: a replica
 *     answers them unauthenticated, and the unnamed Ping is how the name for the payload
 *     is learned. Later requests on the connection carry none. When no credential can be
 *     made (no token, munge_encode() fails) the call fails at once, without a request:
 *     "not authenticated: no credential for HOST: munge: WHY; set SPUR_JWT (scontrol
 *     token) or use the local socket PATH". A MUNGE credential is wiped and freed as soon
 *     as its request is packed; the token copy is wiped by spurclient_free().
 *   - A client on a Unix socket stays on it (the replica forwards writes to the leader):
 *     it goes to a leader hint's TCP address only when it can prove itself there (a
 *     token, or a MUNGE credential that can be made); otherwise it retries the socket, or
 *     the next host, as for an answer without a hint.
 *   - Cluster-key mode (keyring set: agents): every connection first does chan.h's
 *     handshake as CHAN_INITIATOR with the role given, then every request is sealed and
 *     every answer opened on that channel; a frame that does not open closes the
 *     connection. No user credential is sent. A replica that refuses the handshake (no
 *     common key, another cluster) fails the call at once with the reason it gave.
 *     Needs the cluster name (spurclient_new() returns NULL without one).
 *   - An UNAUTHENTICATED answer closes the connection, so the next call proves itself
 *     again with a fresh credential.
 *
 * Ownership: spurclient_call() returns a response the caller frees with spurclient_response_free().
 * One struct spurclient is one connection, used by one thread at a time.
 */
#ifndef SPUR_SPURCLIENT_H
#define SPUR_SPURCLIENT_H

#include "clusterkey.h"
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
    uint32_t timeout_ms;      /* per call, across retries; 0: 10000 */
    uint32_t max_frame;       /* 0: 4 MiB */
    const char *user;         /* sent in every request; NULL: the login name */
    /* Users on TCP (see Credentials above); all copied. Zero values: no credential. */
    const char *token;        /* NULL or "": none; else sent as Credential.token */
    bool munge;               /* no token: a MUNGE credential per connection */
    const char *munge_socket; /* munged's socket; NULL or "": libmunge's default */
    const char *local_socket; /* named in the "no credential" error; NULL or "": none */
    /* Cluster-key mode (agents): keyring borrowed, must outlive the client. */
    const struct keyring *keyring; /* NULL: a user client */
    const char *role;              /* chan.h role of this side, e.g. "agent" */
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

/* True when host names a Unix socket ("unix:/path" or "/path"); *path is then set. */
bool spurclient_host_is_unix(const char *host, const char **path);

/* Split "a:1,b:2" into a NULL-terminated vector (caller frees with spurclient_hosts_free). */
char **spurclient_hosts_parse(const char *list, size_t *n);
void spurclient_hosts_free(char **v, size_t n);

#endif
