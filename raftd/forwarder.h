/*
 * forwarder.h - writes received by a follower, passed on to the leader's client API.
 *
 * A follower that cannot propose forwards the client's request to the leader over a
 * member's connection to its client API (one per leader address, multiplexed by request
 * id) and relays the answer. Guarantees:
 *   - The connection proves the cluster key first (common/chan.h: initiator, role
 *     "replica"; the client API is the responder, role "controller"), and every request
 *     and answer after that is sealed (chan_ev.h). Requests given before the proof is done
 *     wait, packed but not sealed, and are sealed in order once it is. A leader that does
 *     not share a key, cannot prove its key or sends a frame that does not verify fails
 *     every request of that connection with an error naming the address and the reason
 *     ("refused by peer: no common cluster key (...)"), logged once a minute at most.
 *   - The request keeps its caller (Request.caller, set by the API layer of this replica):
 *     the leader believes it because the connection proved the key.
 *   - Every forwarded request ends in exactly one callback: the leader's answer, or an
 *     error (connection failed or closed, time-out) with a message naming the address.
 *   - A request is forwarded once: it goes out with hops = 1 and a replica never forwards
 *     a request whose hops is already non-zero, so two replicas that each believe the
 *     other leads cannot bounce a request between them.
 *   - The request keeps the client's (client_id, seq), so the leader's session table
 *     deduplicates a forwarded write exactly as a direct one.
 *   - Never blocks: resolving the leader's name (resolver.h), connecting and sending are
 *     asynchronous; at most FORWARD_MAX_PENDING requests wait per connection, beyond that
 *     new ones fail at once. A name that failed to resolve lately (in its back-off) makes
 *     forwarder_send() fail at once rather than queue behind a lookup that is not running.
 */
#ifndef SPUR_FORWARDER_H
#define SPUR_FORWARDER_H

#include "resolver.h"
#include "spur.pb-c.h"

#include <event2/event.h>
#include <stdint.h>

#define FORWARD_MAX_PENDING 8192
#define FORWARD_HANDSHAKE_S 5 /* the connect and the key proof must be done in this */

struct keyring;

struct forwarder;

/*
 * resp is the leader's answer (owned by the forwarder, valid during the call) or NULL with
 * err set.
 */
typedef void (*forward_cb)(void *arg, Spur__Api__Response *resp, const char *err);

/*
 * res (the transport's resolver) and kr (the cluster key(s)) are borrowed and must outlive
 * the forwarder; cluster_name is copied.
 */
struct forwarder *forwarder_new(struct event_base *base, uint32_t max_frame, struct resolver *res,
                                const struct keyring *kr, const char *cluster_name);
void forwarder_free(struct forwarder *f); /* pending callbacks get an error first */

/*
 * Send a copy of req (hops set to 1, a fresh request id) to the client API at address.
 * Returns 0, or -1 when it cannot even be queued (cb is not called then).
 */
int forwarder_send(struct forwarder *f, const char *address, const Spur__Api__Request *req,
                   uint32_t timeout_ms, forward_cb cb, void *arg);

#endif
