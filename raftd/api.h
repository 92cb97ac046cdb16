/*
 * api.h - the client API listener (port 6817): frames in, requests out, replies back.
 *
 * Guarantees:
 *   - A frame over max_frame bytes is refused before anything is allocated for it: the
 *     client gets a TOO_LARGE reply and the connection is closed (the stream is out of
 *     step after it). An undecodable frame gets INVALID and the connection is closed. A
 *     request of another cluster or protocol version gets REFUSED naming both, and is
 *     logged once per connection. A request with no cluster name is refused the same way,
 *     except a Ping: a client that was given only an address asks with a Ping and learns
 *     the name from the reply (every reply carries it). None of these reach the
 *     dispatcher.
 *   - Rules that depend on the request alone are checked here, before the dispatcher, so
 *     they hold for every client (the CLI, the client library, a hand-made frame) and are
 *     never part of a log entry's outcome: a submission whose script breaks the batch
 *     script rule (common/jobscript.h) gets INVALID with the message sbatch prints. Only
 *     what depends on the state (limits, partitions) is left to the state machine.
 *   - Every request handed to the dispatcher is answered exactly once through
 *     api_reply(): the call stays valid until then even if its connection closes
 *     meanwhile (the reply is then dropped). The server never blocks: a client that does
 *     not read its replies stops being read from once 16 MiB are waiting for it.
 *   - Connections are capped (api_options.max_conns); past the cap the oldest idle
 *     connection is closed.
 *
 * Who asks (raftd/auth.h computes the identities):
 *   - Two listeners feed the same server: TCP (listen) and, when socket_path is set, a
 *     local Unix socket (mode 0666: the kernel says who connects, SO_PEERCRED, so anyone
 *     may). A local connection is authenticated at accept, method "socket". The socket's
 *     directory is made (0755) when missing; a socket file left by a dead replica is
 *     removed (only a socket nobody answers on); a live one is never taken (api_open()
 *     fails, EXIT_CANTCREAT, "another replica serves socket X"). api_free() removes it.
 *   - A TCP connection starts unauthenticated. Its first frame decides what it is: a
 *     payload that starts with the chan magic (chan.h) is a cluster member, which must
 *     complete the handshake as CHAN_RESPONDER role "controller" under the keyring; every
 *     later frame is opened (MAC and sequence checked) and every reply sealed. A failed
 *     handshake or frame closes the connection with one log line (rate-limited per
 *     remote) naming chan_why(). Anything else is a user, who proves identity with
 *     Request.credential: a token (token.h, the wall clock), or a MUNGE credential
 *     (unless auth.munge is "off"; decoded on auth.h's thread: the connection is not read
 *     until the answer, a full queue is answered UNAVAILABLE "authentication busy").
 *   - On a user connection not authenticated yet, a request without a valid credential
 *     gets CODE_UNAUTHENTICATED "not authenticated", whatever failed (the log says why, at
 *     info, rate-limited per remote); the connection stays, unauthenticated, and may try
 *     again. A Ping is answered anyway: it is dispatched with req->caller NULL.
 *   - Every other request reaches the dispatcher with req->caller set, never NULL:
 *     on a user connection the connection's identity, replacing whatever the client
 *     wrote; on a member connection the caller the request carries (forwarded by a
 *     replica), else {"spur:<role>", 0, 0, operator, "<role>"}. req->user is set to the
 *     caller's user, req->credential is dropped, and api_call_bytes() are the request
 *     packed again with these changes, so a forwarded request carries its caller.
 *   - A TokenRequest (scontrol token) is answered here (auth_token_answer()), never
 *     dispatched or forwarded.
 *
 * Ownership: struct api_call owns the decoded request and its raw bytes until
 * api_reply(). Replies are packed here; the caller keeps ownership of the response
 * message it passes in. The options' strings and keyring are borrowed and must outlive
 * the server.
 */
#ifndef SPUR_API_H
#define SPUR_API_H

#include "auth.h"
#include "spur.pb-c.h"

#include <event2/event.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct api_server;
struct api_call;

typedef void (*api_dispatch_fn)(void *arg, struct api_call *call, Spur__Api__Request *req);

struct api_options {
    const char *listen;       /* "host:port", "[v6]:port" */
    uint32_t max_frame;       /* controller.max_frame_bytes */
    const char *cluster_name;
    uint32_t node_id;         /* served_by in replies */
    uint32_t max_conns;       /* 0: 4096 */
    const char *socket_path;  /* controller.socket; NULL or "": no local socket */
    /*
     * The auth settings (controller.admin_*, auth.*) and auth.kr, the keyring (NULL: no
     * tokens and no members). auth.cluster_name is ignored (cluster_name above counts);
     * auth.munge NULL counts as "off".
     */
    struct auth_policy auth;
};

/*
 * Bind the listeners and start the MUNGE thread. Returns 0 with *out, or an exit code
 * with why: EXIT_OSERR (a bind, the thread), EXIT_CANTCREAT (the socket's directory, a
 * live replica on the socket, a file there that is not a socket).
 */
int api_open(struct event_base *base, const struct api_options *o, api_dispatch_fn dispatch,
             void *arg, struct api_server **out, char *why, size_t whylen);
/* api_open() returning the server, or NULL with why. */
struct api_server *api_new(struct event_base *base, const struct api_options *o,
                           api_dispatch_fn dispatch, void *arg, char *why, size_t whylen);
/* Close every connection, join the MUNGE thread, remove the socket. */
void api_free(struct api_server *s);

/*
 * Answer and release call. The envelope (protocol version, request id, served_by, cluster
 * name) is set on a copy; resp itself is not changed and stays the caller's. May be called from any callback on the loop thread, later than dispatch.
 */
void api_reply(struct api_call *call, const Spur__Api__Response *resp);
/* Answer with an error code and a one-line message (printf format). */
void api_reply_error(struct api_call *call, Spur__Api__Code code, uint32_t leader_id,
                     const char *leader_hint, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/*
 * The rules a request must meet whatever the state (see above). Returns 0, or -1 with a
 * one-line message in msg. Pure; exposed for unit tests.
 */
int api_check_request(const Spur__Api__Request *req, char *msg, size_t msglen);
/* The raw request frame payload, for forwarding it unchanged. */
const uint8_t *api_call_bytes(const struct api_call *call, size_t *len);
/* True when the client has gone: work for it may be skipped (the call still needs a reply). */
bool api_call_abandoned(const struct api_call *call);

/* Counters for metrics. */
struct api_stats {
    uint64_t requests;
    uint64_t refused;     /* other cluster or version */
    uint64_t bad_frames;  /* undecodable or over the limit */
    uint64_t connections; /* open now */
    uint64_t auth_ok[AUTH_NMETHODS];     /* connections authenticated, by method */
    uint64_t auth_failures[AUTH_NFAILS]; /* refused credentials and members, by reason */
};
void api_get_stats(const struct api_server *s, struct api_stats *out);

#endif
