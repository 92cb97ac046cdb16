/*
 * chan_ev.c - sealed frames on libevent evbuffers; contract in chan_ev.h.
 *
 * Reading is frame_ev_take() (the one reader of frame headers) followed by chan_open() on
 * the whole payload; the trailer stays at the end of the malloc'd buffer, past *len, and
 * is freed with it. The limit the caller gives is the inner payload's: the frame may be
 * CHAN_TRAILER_LEN longer.
 *
 * Writing makes room for the whole frame (header, inner payload, trailer) before it seals:
 * sealing spends a sequence number, so it must only happen once nothing can fail any
 * more. A spent number with no frame on the wire would make every later frame a gap.
 */
#include "chan_ev.h"

#include "frame_ev.h"

#include <event2/buffer.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Sealed messages this large get a buffer of their own, as in frame_ev.c. */
#define CHAN_EV_OWN_BUFFER_MIN (64 * 1024)

int chan_ev_take(struct chan *c, struct evbuffer *in, size_t max_payload, uint8_t **payload,
                 size_t *len, enum chan_rc *rc)
{
    *rc = CHAN_OK;
    size_t max =
        max_payload > SIZE_MAX - CHAN_TRAILER_LEN ? SIZE_MAX : max_payload + CHAN_TRAILER_LEN;
    uint8_t *p = NULL;
    size_t n = 0;
    enum frame_status st = frame_ev_take(in, max, &p, &n);
    if (st != FRAME_READY) {
        if (st == FRAME_TOO_BIG)
            *len = n > CHAN_TRAILER_LEN ? n - CHAN_TRAILER_LEN : 0;
        return st;
    }
    size_t inner = 0;
    enum chan_rc r = chan_open(c, p, n, &inner);
    if (r != CHAN_OK) {
        free(p);
        *rc = r;
        return CHAN_EV_REFUSED;
    }
    *payload = p;
    *len = inner;
    return FRAME_READY;
}

int chan_ev_add(struct chan *c, struct evbuffer *out, const void *payload, size_t len)
{
    if (len > UINT32_MAX - CHAN_TRAILER_LEN)
        return -1;
    uint8_t hdr[FRAME_HEADER_LEN], trailer[CHAN_TRAILER_LEN];
    frame_put_header(hdr, (uint32_t)(len + CHAN_TRAILER_LEN));
    /* Room for all of it first: after this none of the adds allocates, so none fails. */
    if (evbuffer_expand(out, FRAME_HEADER_LEN + len + CHAN_TRAILER_LEN) != 0)
        return -1;
    if (chan_seal(c, payload, len, trailer) != CHAN_OK)
        return -1;
    if (evbuffer_add(out, hdr, sizeof(hdr)) != 0 ||
        (len > 0 && evbuffer_add(out, payload, len) != 0) ||
        evbuffer_add(out, trailer, sizeof(trailer)) != 0)
        return -1;
    return 0;
}

static void free_packed(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    free(arg);
}

int chan_ev_add_message(struct chan *c, struct evbuffer *out, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > UINT32_MAX - CHAN_TRAILER_LEN)
        return -1;
    size_t total = FRAME_HEADER_LEN + n + CHAN_TRAILER_LEN;
    if (n >= CHAN_EV_OWN_BUFFER_MIN) {
        /* A large message in an exact buffer the evbuffer references (see frame_ev.c). */
        uint8_t *p = malloc(total);
        if (p == NULL)
            return -1;
        frame_put_header(p, (uint32_t)(n + CHAN_TRAILER_LEN));
        protobuf_c_message_pack(msg, p + FRAME_HEADER_LEN);
        if (chan_seal(c, p + FRAME_HEADER_LEN, n, p + FRAME_HEADER_LEN + n) != CHAN_OK) {
            free(p);
            return -1;
        }
        if (evbuffer_add_reference(out, p, total, free_packed, p) != 0) {
            free(p); /* only a frozen buffer refuses; the stream is unusable then */
            return -1;
        }
        return 0;
    }
    struct evbuffer_iovec v;
    if (evbuffer_reserve_space(out, (ev_ssize_t)total, &v, 1) != 1)
        return -1;
    uint8_t *p = v.iov_base;
    frame_put_header(p, (uint32_t)(n + CHAN_TRAILER_LEN));
    protobuf_c_message_pack(msg, p + FRAME_HEADER_LEN);
    if (chan_seal(c, p + FRAME_HEADER_LEN, n, p + FRAME_HEADER_LEN + n) != CHAN_OK)
        return -1; /* reserved space never committed is simply not added */
    v.iov_len = total;
    return evbuffer_commit_space(out, &v, 1) == 0 ? 0 : -1;
}

int chan_ev_add_raw(struct evbuffer *out, const void *payload, size_t len)
{
    return frame_ev_add(out, payload, len);
}
