/*
 * frame_ev.h - frame.h's frames on libevent evbuffers: the one reader and writer of
 * frames for every bufferevent stream (client API, Raft peers, the forwarder).
 *
 * Guarantees:
 *   - The header layout is frame.c's alone: frame_ev_take() learns the announced length
 *     through frame_parse() on a copy of the first bytes, frame_ev_add*() write it with
 *     frame_put_header().
 *   - A frame announcing more than max_payload bytes is refused from its header alone,
 *     before anything is allocated or drained, even when none of its payload has arrived;
 *     the announced length comes back for the caller's error message. After a refusal the
 *     stream is out of step: the caller closes it.
 *   - A frame is appended whole or not at all, so a write that fails (out of memory)
 *     never leaves a lone header in the output buffer.
 *
 * Ownership: frame_ev_take() hands the caller a malloc'd copy of the payload.
 * frame_ev_add() copies the payload into the evbuffer; frame_ev_add_message() packs the
 * message once, straight into the evbuffer's memory when it is small, and into a buffer
 * of its own that the evbuffer references (and frees once sent) when it is large.
 *
 * Built as its own static library (spurframe_ev) next to spurcommon, so that the static
 * supervisor, which links spurcommon, gains no libevent_extra or protobuf code from it.
 */
#ifndef SPUR_FRAME_EV_H
#define SPUR_FRAME_EV_H

#include "frame.h"

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/*
 * Take the next whole frame out of in. FRAME_READY: the frame is drained and *payload is a
 * malloc'd copy of its *len bytes (at least one byte is allocated, so an empty frame is not
 * NULL), the caller's to free. FRAME_NEED_MORE: nothing is taken. FRAME_TOO_BIG: *len is the
 * announced length; nothing is taken. FRAME_NOMEM: nothing is taken.
 */
enum frame_status frame_ev_take(struct evbuffer *in, size_t max_payload, uint8_t **payload,
                                size_t *len);

/* Append a frame with a copy of payload. Returns 0, or -1 (out of memory, nothing added). */
int frame_ev_add(struct evbuffer *out, const void *payload, size_t len);

/*
 * Append a frame holding msg, packed once with no copy. Returns 0, or -1 (out of memory,
 * or a message over 4 GiB) with nothing added.
 */
int frame_ev_add_message(struct evbuffer *out, const ProtobufCMessage *msg);

#endif
