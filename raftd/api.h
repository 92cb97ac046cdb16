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
 * Ownership: struct api_call owns the decoded request and its raw bytes until
 * api_reply(). Replies are packed here; the caller keeps ownership of the response
 * message it passes in.
 */
#ifndef SPUR_API_H
#define SPUR_API_H

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
};

struct api_server *api_new(struct event_base *base, const struct api_options *o,
                           api_dispatch_fn dispatch, void *arg, char *why, size_t whylen);
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
};
void api_get_stats(const struct api_server *s, struct api_stats *out);

#endif
