/*
 * frame.c - length-prefixed frames; format and ownership in frame.h.
 */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

void frame_put_header(uint8_t hdr[FRAME_HEADER_LEN], uint32_t payload_len)
{
    hdr[0] = (uint8_t)(payload_len >> 24);
    hdr[1] = (uint8_t)(payload_len >> 16);
    hdr[2] = (uint8_t)(payload_len >> 8);
    hdr[3] = (uint8_t)payload_len;
}

uint32_t frame_get_header(const uint8_t hdr[FRAME_HEADER_LEN])
{
    return ((uint32_t)hdr[0] << 24) | ((uint32_t)hdr[1] << 16) | ((uint32_t)hdr[2] << 8) |
           (uint32_t)hdr[3];
}

enum frame_status frame_parse(const uint8_t *buf, size_t buflen, size_t max_payload,
                              const uint8_t **payload, size_t *len, size_t *consumed)
{
    if (buflen < FRAME_HEADER_LEN)
        return FRAME_NEED_MORE;
    uint32_t n = frame_get_header(buf);
    *len = n;
    if (n > max_payload)
        return FRAME_TOO_BIG;
    if (buflen - FRAME_HEADER_LEN < n)
        return FRAME_NEED_MORE;
    *payload = buf + FRAME_HEADER_LEN;
    *consumed = FRAME_HEADER_LEN + (size_t)n;
    return FRAME_READY;
}

void frame_reader_init(struct frame_reader *r, size_t max_payload)
{
    memset(r, 0, sizeof(*r));
    r->max_payload = max_payload;
}

void frame_reader_free(struct frame_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    r->cap = r->start = r->end = 0;
}

size_t frame_reader_buffered(const struct frame_reader *r)
{
    return r->end - r->start;
}

/* Move the unconsumed bytes to the front so the buffer never grows past one frame. */
static void compact(struct frame_reader *r)
{
    if (r->start == 0)
        return;
    size_t n = r->end - r->start;
    if (n > 0)
        memmove(r->buf, r->buf + r->start, n);
    r->start = 0;
    r->end = n;
}

static int reserve(struct frame_reader *r, size_t want)
{
    if (r->cap >= want)
        return 0;
    size_t ncap = r->cap ? r->cap : 256;
    while (ncap < want)
        ncap *= 2;
    /* Doubling must not overshoot the largest frame by much: a 4 MiB limit stays ~4 MiB. */
    size_t limit = FRAME_HEADER_LEN + r->max_payload + 4096;
    if (ncap > limit)
        ncap = want > limit ? want : limit;
    uint8_t *nb = realloc(r->buf, ncap);
    if (nb == NULL)
        return FRAME_NOMEM;
    r->buf = nb;
    r->cap = ncap;
    return 0;
}

int frame_reader_space(struct frame_reader *r, size_t min_space, uint8_t **ptr, size_t *space)
{
    compact(r);
    size_t have = r->end;
    size_t want = have + (min_space > 0 ? min_space : 1);

    if (have >= FRAME_HEADER_LEN) {
        uint32_t n = frame_get_header(r->buf);
        if (n > r->max_payload) {
            r->last_len = n;
            return FRAME_TOO_BIG;
        }
        /* Room for the whole of the frame that has begun, so one read can finish it. */
        size_t whole = FRAME_HEADER_LEN + (size_t)n;
        if (whole > want)
            want = whole;
    }
    if (reserve(r, want) != 0)
        return FRAME_NOMEM;
    *ptr = r->buf + r->end;
    *space = r->cap - r->end;
    return 0;
}

void frame_reader_commit(struct frame_reader *r, size_t n)
{
    r->end += n;
}

int frame_reader_feed(struct frame_reader *r, const uint8_t *data, size_t n)
{
    uint8_t *p;
    size_t space;
    int rc = frame_reader_space(r, n, &p, &space);
    if (rc != 0)
        return rc;
    memcpy(p, data, n);
    frame_reader_commit(r, n);
    return 0;
}

enum frame_status frame_reader_next(struct frame_reader *r, const uint8_t **payload, size_t *len)
{
    size_t consumed = 0;
    /* Nothing buffered, perhaps no buffer yet: r->buf + 0 on NULL is undefined behaviour. */
    if (r->end == r->start)
        return FRAME_NEED_MORE;
    enum frame_status st =
        frame_parse(r->buf + r->start, r->end - r->start, r->max_payload, payload, len, &consumed);
    if (st == FRAME_TOO_BIG) {
        r->last_len = *len;
        return st;
    }
    if (st == FRAME_READY) {
        r->start += consumed;
        if (r->start == r->end)
            r->start = r->end = 0;
    }
    return st;
}
