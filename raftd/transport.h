/*
 * transport.h - Raft peer connections (port 6821).
 *
 * Each replica dials every peer it knows and sends its messages on that connection; it
 * receives on the connections peers dial to it. Every connection first proves the cluster
 * key both ways (common/chan.h: the dialler is the initiator, the acceptor the responder,
 * both of role "replica"); then a Handshake frame goes in both directions
 * (proto/raft.proto): cluster name, protocol version, node id, whether the sender already
 * runs a cluster and with which members, and the address of its client API.
 *
 * Guarantees:
 *   - Nothing reaches the Raft core, and nothing of ours is sent, before the peer proved
 *     that it holds a key of our keyring. The Handshake and every message after it are
 *     sealed (chan_ev.h): a frame altered, forged, replayed, reordered or dropped on the
 *     way closes the connection. A peer without a common key, one that cannot prove the
 *     key it claims, and a frame that does not verify are refused with one log line naming
 *     the remote address and the reason (rate-limited like every refusal), and counted in
 *     auth_refused. The acceptor answers a dialler without a common key with a refusal
 *     hello before it closes, so the dialler's log says "refused by peer: no common cluster
 *     key (ours: X, theirs: Y)". The handshake time-out covers the key proof too.
 *   - A peer of another cluster, of another protocol version, or claiming an id that does
 *     not fit the address dialled is refused; the refusal is logged once per peer and
 *     address, not on every retry. Garbage (undecodable frames, frames over the size
 *     limit, checked before anything is allocated) closes the connection and is counted;
 *     it never reaches the Raft core.
 *   - Sending never blocks the loop: messages queue per peer, in two lanes. Control
 *     messages (votes, heartbeats, responses, small appends) always go before bulk ones
 *     (snapshot chunks, large appends), and bulk frames are handed to the socket only
 *     while its buffer is nearly empty, so a snapshot transfer never delays a heartbeat
 *     by more than one chunk. A peer whose queue is full loses new messages (Raft
 *     retries) and the drop is counted.
 *   - Reconnection uses jittered exponential back-off (50 ms doubling to 2 s).
 *   - A peer address that names a host is resolved without blocking the loop
 *     (resolver.h): while its lookup runs, that peer simply has no connection yet and
 *     everything else goes on. A dial that fails (refused, timed out, closed, or the wrong
 *     node answering) makes the next dial look the name up again, so a peer that comes
 *     back under the same name with a new IP is found.
 *
 * Ownership: messages handed to transport_send() are encoded at once; the caller keeps
 * its message. Received messages are decoded into memory that lives until the receive
 * callback returns.
 */
#ifndef SPUR_TRANSPORT_H
#define SPUR_TRANSPORT_H

#include "raft.h"
#include "resolver.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

/* What a peer told about itself in its handshake. */
struct transport_peer_info {
    raft_id id;
    bool has_cluster;          /* it has Raft state */
    bool lists_us;             /* its configuration includes our id (when has_cluster) */
    char api_address[300];     /* its client API, "" when unknown */
};

struct transport_callbacks {
    /* A decoded message from a peer; valid during the call. */
    void (*on_message)(void *arg, const struct raft_msg *m);
    /* A peer finished its handshake (up) or its connections all closed (down). */
    void (*on_peer)(void *arg, const struct transport_peer_info *info, bool up);
    void *arg;
};

struct keyring;

struct transport_options {
    raft_id self;
    const struct keyring *keyring; /* the cluster key(s); borrowed, outlives the transport */
    const char *cluster_name;
    const char *listen;      /* raft.listen */
    const char *api_address; /* what we announce for our client API */
    uint32_t max_frame;      /* controller.max_frame_bytes */
    uint64_t seed;           /* back-off jitter */
};

struct transport;

struct transport *transport_new(struct event_base *base, const struct transport_options *o,
                                const struct transport_callbacks *cb, char *why, size_t whylen);
void transport_free(struct transport *t);

/* Add or update (address changed) a peer to dial; address NULL or "" forgets it. */
int transport_set_peer(struct transport *t, raft_id id, const char *address);
/* What our handshakes say about our own state; call when it changes. */
void transport_set_local_state(struct transport *t, bool has_cluster,
                               const struct raft_config *config);

/* Encode and queue m for m->to. Drops it (counted) when the peer is unknown or backed up. */
void transport_send(struct transport *t, const struct raft_msg *m);

/*
 * The same in two steps, for messages that must wait (Raft's "send after persist"): encode
 * now, while the core's message is valid, and send later. transport_send_frame() takes
 * ownership; transport_frame_free() drops a frame that will not be sent.
 */
struct tframe;
struct tframe *transport_encode(struct transport *t, const struct raft_msg *m);
void transport_send_frame(struct transport *t, struct tframe *f);
void transport_frame_free(struct tframe *f);

/*
 * The transport's resolver, for the other diallers of this worker (the forwarder) to share
 * its cache. Owned by the transport; valid until transport_free(), so free its borrowers
 * first.
 */
struct resolver *transport_resolver(struct transport *t);

bool transport_peer_connected(const struct transport *t, raft_id id);
/* The peer's client API address from its handshake, or NULL. */
const char *transport_peer_api(const struct transport *t, raft_id id);

struct transport_stats {
    uint64_t sent_by_type[RAFT_MSG_TYPE_MAX + 1];
    uint64_t received_by_type[RAFT_MSG_TYPE_MAX + 1];
    uint64_t dropped;          /* queue full or peer unknown */
    uint64_t refused;          /* handshakes refused (other cluster, version, id) */
    uint64_t auth_refused;     /* key proofs failed (no common key, bad proof) or frames
                                  that did not verify (MAC, sequence): connection closed */
    uint64_t bad_frames;       /* undecodable or oversized */
    uint64_t bytes_sent;       /* message frames, header and seal trailer included */
    uint64_t bytes_received;   /* every frame, header and seal trailer included */
};
void transport_get_stats(const struct transport *t, struct transport_stats *out);

#endif
