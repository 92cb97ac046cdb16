/*
 * frame.h - length-prefixed frames, the one framing every stream in spurctld uses
 * (status pipe, client API, Raft peers; DESIGN.md sections 6 and 9). Streams on libevent
 * bufferevents read and write them through frame_ev.h; the others (the status pipe, the
 * client library) through frame_reader below.
 *
 *     +----------------------+---------------------------+
 *     | length: u32, big end | payload: length bytes     |
 *     +----------------------+---------------------------+
 *
 * The length counts the payload only. A reader learns the length from the first four
 * bytes and refuses it before allocating anything when it exceeds the stream's maximum;
 * after such a refusal the stream is out of step and must be closed.
 *
 * frame_reader owns one heap buffer that grows to at most 4 + max_payload + 4096 bytes. It does no
 * I/O: the caller asks for space, reads into it, commits what it read and then takes
 * frames out one by one. A returned payload points into the buffer and stays valid until
 * the next call on the reader.
 */
#ifndef SPUR_FRAME_H
#define SPUR_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define FRAME_HEADER_LEN 4

enum frame_status {
    FRAME_NEED_MORE = 0, /* no complete frame buffered yet */
    FRAME_READY = 1,     /* *payload / *len hold one frame */
    FRAME_TOO_BIG = -1,  /* the announced length exceeds the maximum: close the stream */
    FRAME_NOMEM = -2,    /* allocation failed */
};

void frame_put_header(uint8_t hdr[FRAME_HEADER_LEN], uint32_t payload_len);
uint32_t frame_get_header(const uint8_t hdr[FRAME_HEADER_LEN]);

/*
 * Pure parse of the front of a buffer: FRAME_READY with the payload and the bytes the
 * frame occupies in *consumed, FRAME_NEED_MORE, or FRAME_TOO_BIG (then *len holds the
 * announced length, for the error message). Once the header is whole, *len holds the
 * announced length on FRAME_NEED_MORE too, so a reader that has only the header (the
 * evbuffer adapter, frame_ev.h) learns from here how much to wait for.
 */
enum frame_status frame_parse(const uint8_t *buf, size_t buflen, size_t max_payload,
                              const uint8_t **payload, size_t *len, size_t *consumed);

struct frame_reader {
    uint8_t *buf;       /* owned; NULL until the first frame_reader_space() */
    size_t cap;         /* allocated bytes */
    size_t start;       /* first unconsumed byte */
    size_t end;         /* one past the last buffered byte */
    size_t max_payload; /* frames above this are refused */
    size_t last_len;    /* announced length of the refused frame after FRAME_TOO_BIG */
};

void frame_reader_init(struct frame_reader *r, size_t max_payload);
void frame_reader_free(struct frame_reader *r);
/*
 * Room to read into: at least min_space bytes unless the buffered frame needs fewer to be
 * complete. Returns FRAME_NOMEM or FRAME_TOO_BIG (the buffered header announces a frame
 * over the limit), else 0 with *space set.
 */
int frame_reader_space(struct frame_reader *r, size_t min_space, uint8_t **ptr, size_t *space);
void frame_reader_commit(struct frame_reader *r, size_t n);
/* Append bytes that came from elsewhere (tests, fuzzers). Returns 0 or FRAME_NOMEM/TOO_BIG. */
int frame_reader_feed(struct frame_reader *r, const uint8_t *data, size_t n);
enum frame_status frame_reader_next(struct frame_reader *r, const uint8_t **payload, size_t *len);
size_t frame_reader_buffered(const struct frame_reader *r);

#endif
