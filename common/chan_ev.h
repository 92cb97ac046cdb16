/*
 * chan_ev.h - chan.h's channels on libevent evbuffers, next to frame_ev.h: the one place
 * where libevent streams of cluster members seal and open frames.
 *
 * Guarantees:
 *   - chan_ev_add_message() packs msg once, seals it and appends one frame (inner payload
 *     and trailer), whole or not at all.
 *   - chan_ev_take() takes the next whole frame and opens it: FRAME_READY with the inner
 *     payload (the trailer removed) only when the MAC and sequence number verify; a frame
 *     that does not is drained and reported through *rc (CHAN_BAD_MAC, CHAN_REPLAY, ...),
 *     with the return FRAME_NOMEM-like value CHAN_EV_REFUSED: the caller logs chan_why()
 *     and closes the connection.
 *   - chan_ev_add_raw() appends a handshake payload (chan_hello() and friends) as a frame.
 *
 * Ownership as in frame_ev.h: chan_ev_take() hands the caller a malloc'd payload.
 */
#ifndef SPUR_CHAN_EV_H
#define SPUR_CHAN_EV_H

#include "chan.h"
#include "frame.h"

#include <protobuf-c/protobuf-c.h>

struct evbuffer;

#define CHAN_EV_REFUSED (-3) /* a frame.h enum frame_status value of its own */

/*
 * Returns an enum frame_status or CHAN_EV_REFUSED (then *rc says why). max_payload is the
 * inner payload's limit (the frame may be CHAN_TRAILER_LEN longer); on FRAME_TOO_BIG *len
 * is the announced inner length, comparable with max_payload.
 */
int chan_ev_take(struct chan *c, struct evbuffer *in, size_t max_payload, uint8_t **payload,
                 size_t *len, enum chan_rc *rc);
/* Returns 0, or -1 (out of memory or a crypto failure; nothing added). */
int chan_ev_add_message(struct chan *c, struct evbuffer *out, const ProtobufCMessage *msg);
/* Seal and append bytes already packed. Returns 0 or -1 (nothing added). */
int chan_ev_add(struct chan *c, struct evbuffer *out, const void *payload, size_t len);
/* Append a handshake payload as one frame (not sealed). Returns 0 or -1. */
int chan_ev_add_raw(struct evbuffer *out, const void *payload, size_t len);

#endif
