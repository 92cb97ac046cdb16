/*
 * agents.h - the leader's connections to the node agents (spurd, port 6818; the protocol
 * is proto/agent.proto). One connection per agent, dialled by the leader.
 *
 * What it guarantees
 *
 *   - One connection per node name at a time, to the address last given for it
 *     (agents_set). A connection that fails or closes is dialled again after a jittered
 *     exponential back-off (AGENTS_BACKOFF_MIN_MS doubling to AGENTS_BACKOFF_MAX_MS),
 *     reset once the agent has answered something; failures are logged once per change
 *     of outcome (connected, lost), never per attempt.
 *   - Every request (Ping, Launch, Signal) gets a fresh id and ends in exactly one
 *     answer() call: the agent's message with the same id, or a failure (reply NULL, err
 *     set) when its connection closes or the agent does not answer within the time-out
 *     (the connection is then closed: answers come in order, so the ones behind it
 *     would not come either). The one exception: agents_remove(), agents_clear() and
 *     agents_free() drop what waits without calling back, so an owner that is going
 *     away is never called into.
 *   - Bounded: at most max_pending requests wait per agent and at most max_output bytes
 *     wait to be written to it; past either bound a send fails at once (-1) and the
 *     caller decides. Every frame either way is at most max_frame bytes
 *     (controller.max_frame_bytes): a larger one is not sent, and a frame from an agent
 *     announcing more, an undecodable frame, or one of another cluster or protocol
 *     version closes that agent's connection only.
 *   - Every connection proves the cluster key first (common/chan.h: the leader is the
 *     initiator, role "controller"; spurd the responder, role "agent"); up() comes only
 *     once the agent has proved it, and every frame after that is sealed both ways
 *     (chan_ev.h). An agent without a common key, one that fails its proof, or a frame
 *     that does not verify (altered, replayed, out of order) fails the connection like any
 *     other failure (logged once per run of failures, with the reason, and retried with
 *     back-off) and is counted in auth_refused. The connect and the proof must be done
 *     within AGENTS_HANDSHAKE_MS.
 *   - Nothing is written before up(): a send to an agent that is not connected fails.
 *     The owner sends its Ping from up(), so the Ping is the first frame on every
 *     connection after the key proof, as the protocol requires.
 *
 * Mechanics: bufferevents (frames through common/frame_ev.h), names resolved with the
 * worker's shared resolver (resolver.h, never a blocking lookup), one sweep timer for
 * request deadlines, one reconnect timer per connection.
 *
 * Ownership: struct agents owns its connections and its sweep timer; the resolver, the
 * keyring and the event base are borrowed and must outlive it. A connection owns its
 * bufferevent, its channel (wiped when it closes), its resolver wait, its timer and its
 * waiting requests. Messages given to agents_request() and agents_push() are packed at
 * once and stay the caller's; what answer() and ended() receive is valid during the call
 * only.
 */
#ifndef SPUR_AGENTS_H
#define SPUR_AGENTS_H

#include "agent.pb-c.h"
#include "resolver.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPUR_AGENT_PROTOCOL   1
#define AGENTS_MAX_PENDING    1024        /* requests waiting for answers, per agent */
#define AGENTS_MAX_OUTPUT     (16u << 20) /* bytes waiting to be written, per agent */
#define AGENTS_TIMEOUT_MS     15000       /* a request not answered in this time */
#define AGENTS_BACKOFF_MIN_MS 200
#define AGENTS_BACKOFF_MAX_MS 10000
#define AGENTS_HANDSHAKE_MS   5000 /* the connect and the key proof */

struct keyring;

/* One request's end. */
struct agents_answer {
    const char *node;
    uint64_t id;
    Spur__Agent__Msg__BodyCase kind; /* what was asked: PING, LAUNCH or SIGNAL */
    uint64_t job_id;                 /* as given to agents_request() */
    uint32_t attempt;
    uint64_t tag;                  /* the caller's, as given */
    const Spur__Agent__Msg *reply; /* NULL: failed, see err */
    const char *err;
};

struct agents_hooks {
    void (*up)(void *arg, const char *node);                    /* connected */
    void (*down)(void *arg, const char *node, const char *why); /* was up, now closed */
    void (*answer)(void *arg, const struct agents_answer *ans);
    void (*ended)(void *arg, const char *node, const Spur__Agent__Ended *e); /* a push */
    void *arg;
};

struct agents_options {
    uint32_t max_frame;            /* controller.max_frame_bytes */
    const char *cluster_name;      /* borrowed for the life of the agents */
    const struct keyring *keyring; /* the cluster key(s); borrowed likewise; required */
    uint32_t max_pending;          /* 0: AGENTS_MAX_PENDING */
    size_t max_output;             /* 0: AGENTS_MAX_OUTPUT */
    uint32_t timeout_ms;           /* 0: AGENTS_TIMEOUT_MS */
    uint32_t backoff_min_ms;       /* 0: AGENTS_BACKOFF_MIN_MS */
    uint32_t backoff_max_ms;       /* 0: AGENTS_BACKOFF_MAX_MS */
    uint64_t seed;                 /* back-off jitter */
};

struct agents_stats {
    uint64_t connected;    /* connections up now */
    uint64_t connects;     /* connections made */
    uint64_t failures;     /* dials that failed and connections lost */
    uint64_t bad_frames;   /* oversized, undecodable or foreign frames from agents */
    uint64_t timeouts;     /* requests not answered in time */
    uint64_t refused;      /* sends refused: not connected, a bound reached, too large */
    uint64_t auth_refused; /* key proofs failed, frames that did not verify */
};

struct agents;

struct agents *agents_new(struct event_base *base, const struct agents_options *o,
                          struct resolver *res, const struct agents_hooks *h);
void agents_free(struct agents *a);

/*
 * Keep a connection to node at address ("HOST:PORT"): a new node is dialled now, a node
 * whose address changed is closed (down() when it was up) and dialled at the new one.
 * Returns 0, or -1 (address too long, out of memory).
 */
int agents_set(struct agents *a, const char *node, const char *address);
/* Forget node: close its connection without calling back. */
void agents_remove(struct agents *a, const char *node);
/* Forget every node (leadership lost). */
void agents_clear(struct agents *a);

bool agents_is_up(const struct agents *a, const char *node);
bool agents_known(const struct agents *a, const char *node);

/*
 * Send the request m (a Ping, Launch or Signal; its version, cluster name and id are set
 * on a copy) to node. job_id, attempt and tag come back in its answer. Returns 0 with
 * *id set (may be NULL), or -1 when it cannot go now (not connected, a bound, too large,
 * out of memory): answer() is then never called for it.
 */
int agents_request(struct agents *a, const char *node, const Spur__Agent__Msg *m, uint64_t job_id,
                   uint32_t attempt, uint64_t tag, uint64_t *id);
/* Send m with id 0 (an EndedAck): nothing answers it. Returns 0 or -1 as above. */
int agents_push(struct agents *a, const char *node, const Spur__Agent__Msg *m);

void agents_get_stats(const struct agents *a, struct agents_stats *out);

#endif
