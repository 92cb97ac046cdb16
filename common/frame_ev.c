/*
 * frame_ev.c - frames on libevent evbuffers; contract in frame_ev.h.
 *
 * Reading copies at most the four header bytes out to learn the length (frame_parse()
 * decides: too big, not yet whole, or whole), and only then allocates the payload and
 * drains the frame. Writing reserves room for the whole frame before adding any of it,
 * which is what makes a failed append leave the buffer as it was.
 */
#include "frame_ev.h"

#include <event2/buffer.h>
#include <stdlib.h>

enum frame_status frame_ev_take(struct evbuffer *in, size_t max_payload, uint8_t **payload,
                                size_t *len)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    ev_ssize_t got = evbuffer_copyout(in, hdr, sizeof(hdr));
    if (got < (ev_ssize_t)sizeof(hdr))
        return FRAME_NEED_MORE;
    /*
     * The header alone: frame_parse() refuses an oversized announcement, and otherwise says
     * NEED_MORE (or READY for an empty frame) with the announced length in n.
     */
    const uint8_t *unused = NULL;
    size_t n = 0, consumed = 0;
    enum frame_status st = frame_parse(hdr, sizeof(hdr), max_payload, &unused, &n, &consumed);
    if (st == FRAME_TOO_BIG) {
        *len = n;
        return FRAME_TOO_BIG;
    }
    if (evbuffer_get_length(in) - FRAME_HEADER_LEN < n)
        return FRAME_NEED_MORE;
    uint8_t *body = malloc(n ? n : 1);
    if (body == NULL)
        return FRAME_NOMEM;
    if (evbuffer_drain(in, FRAME_HEADER_LEN) != 0 ||
        (n > 0 && evbuffer_remove(in, body, n) != (ev_ssize_t)n)) {
        free(body); /* only a frozen buffer refuses; the stream is unusable then */
        return FRAME_NOMEM;
    }
    *payload = body;
    *len = n;
    return FRAME_READY;
}

int frame_ev_add(struct evbuffer *out, const void *payload, size_t len)
{
    if (len > UINT32_MAX)
        return -1;
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_put_header(hdr, (uint32_t)len);
    /* Room for all of it first: after this, neither add allocates, so neither fails. */
    if (evbuffer_expand(out, FRAME_HEADER_LEN + len) != 0)
        return -1;
    if (evbuffer_add(out, hdr, sizeof(hdr)) != 0)
        return -1;
    if (len > 0 && evbuffer_add(out, payload, len) != 0)
        return -1;
    return 0;
}

/* Packed replies this large get a buffer of their own (see frame_ev_add_message). */
#define FRAME_EV_OWN_BUFFER_MIN (64 * 1024)

static void free_packed(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    free(arg);
}

int frame_ev_add_message(struct evbuffer *out, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > UINT32_MAX)
        return -1;
    if (n >= FRAME_EV_OWN_BUFFER_MIN) {
        /*
         * A large reply (a page of jobs, a snapshot chunk) in the evbuffer's own memory
         * would sit in a chunk rounded up to a power of two, up to twice its size: pack it
         * into an exact buffer instead and let the evbuffer reference it, one append.
         */
        uint8_t *p = malloc(FRAME_HEADER_LEN + n);
        if (p == NULL)
            return -1;
        frame_put_header(p, (uint32_t)n);
        protobuf_c_message_pack(msg, p + FRAME_HEADER_LEN);
        if (evbuffer_add_reference(out, p, FRAME_HEADER_LEN + n, free_packed, p) != 0) {
            free(p);
            return -1;
        }
        return 0;
    }
    struct evbuffer_iovec v;
    if (evbuffer_reserve_space(out, (ev_ssize_t)(FRAME_HEADER_LEN + n), &v, 1) != 1)
        return -1;
    uint8_t *p = v.iov_base;
    frame_put_header(p, (uint32_t)n);
    protobuf_c_message_pack(msg, p + FRAME_HEADER_LEN);
    v.iov_len = FRAME_HEADER_LEN + n;
    return evbuffer_commit_space(out, &v, 1) == 0 ? 0 : -1;
}
