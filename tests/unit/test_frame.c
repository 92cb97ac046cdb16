/*
 * test_frame.c - length-prefixed framing (common/frame.c).
 *
 * Pinned here: the big-endian header; frame_parse() at every byte boundary, back to back
 * frames, empty frames, the maximum size, and the refusal of a larger announcement from
 * the header alone; and frame_reader fed a byte at a time or in odd chunks, through
 * frame_reader_feed() and through the space/commit API, with its buffer kept to the size
 * of one frame (compaction) and never grown for a frame it refuses. And the evbuffer
 * adapter (frame_ev.c): a header split across arrivals, the exact limit, a refusal from
 * the header alone with nothing drained, several frames in one buffer and across chains,
 * empty frames, and frames written by frame_ev_add*() read back through frame_parse().
 */
#include "check_run.h"
#include "frame.h"
#include "frame_ev.h"
#include "spur.pb-c.h"

#include <check.h>
#include <event2/buffer.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Header plus payload of a frame whose payload bytes are (seed + i) mod 251. */
static size_t make_frame(uint8_t *out, size_t len, unsigned seed)
{
    frame_put_header(out, (uint32_t)len);
    for (size_t i = 0; i < len; i++)
        out[FRAME_HEADER_LEN + i] = (uint8_t)((seed + i) % 251);
    return FRAME_HEADER_LEN + len;
}

static void assert_payload(const uint8_t *p, size_t len, size_t want_len, unsigned seed)
{
    ck_assert_uint_eq(len, want_len);
    for (size_t i = 0; i < len; i++)
        ck_assert_msg(p[i] == (uint8_t)((seed + i) % 251), "byte %zu of frame %u", i, seed);
}

/* A small deterministic generator, so a failure repeats. */
static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

START_TEST(test_header_codec)
{
    uint8_t h[FRAME_HEADER_LEN];
    frame_put_header(h, 0x01020304u);
    ck_assert_uint_eq(h[0], 0x01);
    ck_assert_uint_eq(h[1], 0x02);
    ck_assert_uint_eq(h[2], 0x03);
    ck_assert_uint_eq(h[3], 0x04);
    ck_assert_uint_eq(frame_get_header(h), 0x01020304u);

    static const uint32_t values[] = {0,       1,           0xff,        0x100,       0xffff,
                                      0x10000, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        frame_put_header(h, values[i]);
        ck_assert_uint_eq(frame_get_header(h), values[i]);
    }
    /* The high bit of the first byte must not sign-extend. */
    const uint8_t hi[FRAME_HEADER_LEN] = {0xff, 0x00, 0x00, 0x01};
    ck_assert_uint_eq(frame_get_header(hi), 0xff000001u);
}
END_TEST

START_TEST(test_parse_every_boundary)
{
    uint8_t buf[64];
    size_t n = make_frame(buf, 5, 7);
    ck_assert_uint_eq(n, 9);
    for (size_t have = 0; have < n; have++) {
        const uint8_t *p = NULL;
        size_t len = 12345, consumed = 12345;
        enum frame_status st = frame_parse(buf, have, 1024, &p, &len, &consumed);
        ck_assert_msg(st == FRAME_NEED_MORE, "%zu bytes: status %d", have, st);
        ck_assert_uint_eq(consumed, 12345); /* nothing consumed */
        if (have >= FRAME_HEADER_LEN)
            ck_assert_uint_eq(len, 5); /* the length is known once the header is */
    }
    const uint8_t *p = NULL;
    size_t len = 0, consumed = 0;
    ck_assert_int_eq(frame_parse(buf, n, 1024, &p, &len, &consumed), FRAME_READY);
    ck_assert_ptr_eq(p, buf + FRAME_HEADER_LEN);
    ck_assert_uint_eq(consumed, 9);
    assert_payload(p, len, 5, 7);
}
END_TEST

START_TEST(test_parse_back_to_back)
{
    uint8_t buf[128];
    size_t n = make_frame(buf, 10, 1);
    n += make_frame(buf + n, 0, 2);
    n += make_frame(buf + n, 3, 3);
    const uint8_t *p;
    size_t len, consumed, off = 0;

    ck_assert_int_eq(frame_parse(buf + off, n - off, 64, &p, &len, &consumed), FRAME_READY);
    assert_payload(p, len, 10, 1);
    ck_assert_uint_eq(consumed, 14);
    off += consumed;
    ck_assert_int_eq(frame_parse(buf + off, n - off, 64, &p, &len, &consumed), FRAME_READY);
    ck_assert_uint_eq(len, 0); /* a zero-length frame is a frame */
    ck_assert_uint_eq(consumed, 4);
    off += consumed;
    ck_assert_int_eq(frame_parse(buf + off, n - off, 64, &p, &len, &consumed), FRAME_READY);
    assert_payload(p, len, 3, 3);
    off += consumed;
    ck_assert_uint_eq(off, n);
    ck_assert_int_eq(frame_parse(buf + off, n - off, 64, &p, &len, &consumed), FRAME_NEED_MORE);
}
END_TEST

START_TEST(test_parse_max_size)
{
    enum { MAX = 100 };
    uint8_t buf[FRAME_HEADER_LEN + MAX + 1];
    const uint8_t *p;
    size_t len, consumed;

    size_t n = make_frame(buf, MAX, 9);
    ck_assert_int_eq(frame_parse(buf, n, MAX, &p, &len, &consumed), FRAME_READY);
    assert_payload(p, len, MAX, 9);

    /* One byte over: refused from the header alone, before any payload is there. */
    make_frame(buf, MAX + 1, 9);
    len = 0;
    ck_assert_int_eq(frame_parse(buf, FRAME_HEADER_LEN, MAX, &p, &len, &consumed), FRAME_TOO_BIG);
    ck_assert_uint_eq(len, MAX + 1);
    ck_assert_int_eq(frame_parse(buf, sizeof(buf), MAX, &p, &len, &consumed), FRAME_TOO_BIG);

    /* The largest announcement the header can hold. */
    frame_put_header(buf, 0xffffffffu);
    ck_assert_int_eq(frame_parse(buf, FRAME_HEADER_LEN, MAX, &p, &len, &consumed), FRAME_TOO_BIG);
    ck_assert_uint_eq(len, 0xffffffffu);
    /* A limit of zero still lets empty frames through. */
    frame_put_header(buf, 0);
    ck_assert_int_eq(frame_parse(buf, FRAME_HEADER_LEN, 0, &p, &len, &consumed), FRAME_READY);
    frame_put_header(buf, 1);
    ck_assert_int_eq(frame_parse(buf, FRAME_HEADER_LEN, 0, &p, &len, &consumed), FRAME_TOO_BIG);
}
END_TEST

/* ---- frame_reader ------------------------------------------------------------------- */

/* The stream: frames of these lengths, payload seeds equal to their index. */
static const size_t stream_lens[] = {5, 0, 1, 300, 0, 0, 17, 1000, 2, 255, 256, 257, 4};
#define NSTREAM (sizeof(stream_lens) / sizeof(stream_lens[0]))

static uint8_t *make_stream(size_t *total)
{
    size_t n = 0;
    for (size_t i = 0; i < NSTREAM; i++)
        n += FRAME_HEADER_LEN + stream_lens[i];
    uint8_t *s = malloc(n);
    ck_assert_ptr_nonnull(s);
    size_t off = 0;
    for (size_t i = 0; i < NSTREAM; i++)
        off += make_frame(s + off, stream_lens[i], (unsigned)i);
    *total = n;
    return s;
}

/* Take every complete frame out of r, checking each against the stream. */
static void drain(struct frame_reader *r, size_t *got)
{
    const uint8_t *p;
    size_t len;
    enum frame_status st;
    while ((st = frame_reader_next(r, &p, &len)) == FRAME_READY) {
        ck_assert_uint_lt(*got, NSTREAM);
        assert_payload(p, len, stream_lens[*got], (unsigned)*got);
        (*got)++;
    }
    ck_assert_int_eq(st, FRAME_NEED_MORE);
}

START_TEST(test_reader_fresh)
{
    struct frame_reader r;
    const uint8_t *p;
    size_t len;
    frame_reader_init(&r, 64);
    ck_assert_uint_eq(frame_reader_buffered(&r), 0);
    /* Nothing buffered and no buffer yet: just "need more". */
    ck_assert_int_eq(frame_reader_next(&r, &p, &len), FRAME_NEED_MORE);
    ck_assert_ptr_null(r.buf);
    frame_reader_free(&r);
    frame_reader_free(&r); /* idempotent */
}
END_TEST

START_TEST(test_reader_byte_by_byte)
{
    size_t total, got = 0;
    uint8_t *s = make_stream(&total);
    struct frame_reader r;
    frame_reader_init(&r, 1000);
    for (size_t i = 0; i < total; i++) {
        ck_assert_int_eq(frame_reader_feed(&r, s + i, 1), 0);
        drain(&r, &got);
    }
    ck_assert_uint_eq(got, NSTREAM);
    ck_assert_uint_eq(frame_reader_buffered(&r), 0);
    /* One frame at a time is all the buffer ever needs to hold. */
    ck_assert_uint_le(r.cap, FRAME_HEADER_LEN + 1000 + 4096);
    frame_reader_free(&r);
    free(s);
}
END_TEST

START_TEST(test_reader_random_chunks)
{
    size_t total;
    uint8_t *s = make_stream(&total);
    for (uint32_t seed = 1; seed <= 200; seed++) {
        uint32_t st = seed * 2654435761u;
        size_t got = 0, off = 0;
        struct frame_reader r;
        frame_reader_init(&r, 1000);
        while (off < total) {
            size_t n = 1 + rnd(&st) % 700;
            if (n > total - off)
                n = total - off;
            ck_assert_int_eq(frame_reader_feed(&r, s + off, n), 0);
            off += n;
            if (rnd(&st) % 4 != 0) /* sometimes let several chunks pile up */
                drain(&r, &got);
        }
        drain(&r, &got);
        ck_assert_uint_eq(got, NSTREAM);
        ck_assert_uint_eq(frame_reader_buffered(&r), 0);
        frame_reader_free(&r);
    }
    free(s);
}
END_TEST

START_TEST(test_reader_whole_stream_at_once)
{
    size_t total, got = 0;
    uint8_t *s = make_stream(&total);
    struct frame_reader r;
    frame_reader_init(&r, 1000);
    ck_assert_int_eq(frame_reader_feed(&r, s, total), 0);
    ck_assert_uint_eq(frame_reader_buffered(&r), total);
    drain(&r, &got);
    ck_assert_uint_eq(got, NSTREAM);
    frame_reader_free(&r);
    free(s);
}
END_TEST

START_TEST(test_reader_space_commit)
{
    /* The way the supervisor reads: ask for space, read into it, commit, take frames. */
    size_t total, got = 0, off = 0;
    uint8_t *s = make_stream(&total);
    struct frame_reader r;
    frame_reader_init(&r, 1000);
    while (off < total) {
        uint8_t *p;
        size_t space;
        ck_assert_int_eq(frame_reader_space(&r, 16, &p, &space), 0);
        ck_assert_uint_ge(space, 1);
        /* A read of at most 16 bytes, like a short read(2) would return. */
        size_t n = space < 16 ? space : 16;
        if (n > total - off)
            n = total - off;
        memcpy(p, s + off, n);
        frame_reader_commit(&r, n);
        off += n;
        drain(&r, &got);
    }
    ck_assert_uint_eq(got, NSTREAM);
    frame_reader_free(&r);
    free(s);
}
END_TEST

START_TEST(test_reader_space_covers_started_frame)
{
    /* Once a header is buffered, the space offered lets one read finish that frame. */
    uint8_t frame[FRAME_HEADER_LEN + 900];
    make_frame(frame, 900, 3);
    struct frame_reader r;
    uint8_t *p;
    size_t space, len;
    const uint8_t *payload;
    frame_reader_init(&r, 1000);
    ck_assert_int_eq(frame_reader_feed(&r, frame, FRAME_HEADER_LEN + 10), 0);
    ck_assert_int_eq(frame_reader_space(&r, 1, &p, &space), 0);
    ck_assert_uint_ge(space, 890);
    memcpy(p, frame + FRAME_HEADER_LEN + 10, 890);
    frame_reader_commit(&r, 890);
    ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_READY);
    assert_payload(payload, len, 900, 3);
    ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_NEED_MORE);
    frame_reader_free(&r);
}
END_TEST

START_TEST(test_reader_compacts)
{
    /*
     * An endless run of 14-byte frames fed in 9-byte chunks: a partial frame is always
     * left behind the consumed ones, so the reader must move it to the front rather than
     * grow. The buffer stays at its first size.
     */
    struct frame_reader r;
    frame_reader_init(&r, 64);
    uint8_t frame[FRAME_HEADER_LEN + 10];
    size_t n = make_frame(frame, 10, 5);
    size_t pos = 0, frames = 0;
    for (int i = 0; i < 20000; i++) {
        uint8_t chunk[9];
        for (size_t k = 0; k < sizeof(chunk); k++, pos++)
            chunk[k] = frame[pos % n];
        ck_assert_int_eq(frame_reader_feed(&r, chunk, sizeof(chunk)), 0);
        const uint8_t *p;
        size_t len;
        while (frame_reader_next(&r, &p, &len) == FRAME_READY) {
            assert_payload(p, len, 10, 5);
            frames++;
        }
        ck_assert_uint_lt(frame_reader_buffered(&r), n);
    }
    ck_assert_uint_eq(frames, pos / n);
    ck_assert_uint_le(r.cap, 256);
    frame_reader_free(&r);
}
END_TEST

START_TEST(test_reader_max_size)
{
    enum { MAX = 4096 };
    static uint8_t frame[FRAME_HEADER_LEN + MAX + 1];
    struct frame_reader r;
    const uint8_t *p;
    size_t len;

    /* Exactly the maximum is accepted, a byte at a time. */
    size_t n = make_frame(frame, MAX, 11);
    frame_reader_init(&r, MAX);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(frame_reader_feed(&r, frame + i, 1), 0);
    ck_assert_int_eq(frame_reader_next(&r, &p, &len), FRAME_READY);
    assert_payload(p, len, MAX, 11);
    ck_assert_uint_le(r.cap, FRAME_HEADER_LEN + MAX + 4096);
    frame_reader_free(&r);
}
END_TEST

/* A reader that has seen a header announcing `announced` bytes under a limit of max. */
static void check_refused_before_allocation(size_t max, uint32_t announced)
{
    struct frame_reader r;
    uint8_t hdr[FRAME_HEADER_LEN];
    uint8_t *p;
    size_t space, len;
    const uint8_t *payload;

    frame_put_header(hdr, announced);
    frame_reader_init(&r, max);
    ck_assert_int_eq(frame_reader_feed(&r, hdr, sizeof(hdr)), 0);
    size_t cap_after_header = r.cap;
    ck_assert_uint_le(cap_after_header, 256);

    ck_assert_int_eq(frame_reader_next(&r, &payload, &len), FRAME_TOO_BIG);
    ck_assert_uint_eq(len, announced);
    ck_assert_uint_eq(r.last_len, announced);
    /* Asking for room to read the payload is refused too, and grows nothing. */
    ck_assert_int_eq(frame_reader_space(&r, 4096, &p, &space), FRAME_TOO_BIG);
    ck_assert_int_eq(frame_reader_feed(&r, hdr, 1), FRAME_TOO_BIG);
    ck_assert_uint_eq(r.cap, cap_after_header);
    ck_assert_uint_eq(r.last_len, announced);
    frame_reader_free(&r);
}

START_TEST(test_reader_refuses_before_allocation)
{
    check_refused_before_allocation(1000, 1001);
    check_refused_before_allocation(4u << 20, (4u << 20) + 1);
    check_refused_before_allocation(4u << 20, 0xffffffffu);
    check_refused_before_allocation(512, 0x80000000u);
    check_refused_before_allocation(0, 1);
}
END_TEST

START_TEST(test_reader_refusal_after_good_frames)
{
    /* A good frame, then a header over the limit in the same chunk. */
    uint8_t buf[64];
    size_t n = make_frame(buf, 8, 4);
    frame_put_header(buf + n, 1u << 30);
    n += FRAME_HEADER_LEN;
    struct frame_reader r;
    const uint8_t *p;
    size_t len;
    frame_reader_init(&r, 32);
    ck_assert_int_eq(frame_reader_feed(&r, buf, n), 0);
    ck_assert_int_eq(frame_reader_next(&r, &p, &len), FRAME_READY);
    assert_payload(p, len, 8, 4);
    ck_assert_int_eq(frame_reader_next(&r, &p, &len), FRAME_TOO_BIG);
    ck_assert_uint_eq(len, 1u << 30);
    ck_assert_uint_le(r.cap, 256);
    frame_reader_free(&r);
}
END_TEST

/* ---- the evbuffer adapter (frame_ev.c) ------------------------------------------------ */

START_TEST(test_ev_split_header)
{
    uint8_t frame[64];
    size_t n = make_frame(frame, 20, 3);
    struct evbuffer *in = evbuffer_new();
    uint8_t *p = NULL;
    size_t len = 0;
    /* One byte at a time: nothing is taken (nor drained) until the last byte is there. */
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(frame_ev_take(in, 1024, &p, &len), FRAME_NEED_MORE);
        ck_assert_uint_eq(evbuffer_get_length(in), i);
        evbuffer_add(in, frame + i, 1);
    }
    ck_assert_int_eq(frame_ev_take(in, 1024, &p, &len), FRAME_READY);
    assert_payload(p, len, 20, 3);
    ck_assert_uint_eq(evbuffer_get_length(in), 0);
    free(p);
    ck_assert_int_eq(frame_ev_take(in, 1024, &p, &len), FRAME_NEED_MORE);
    evbuffer_free(in);
}
END_TEST

START_TEST(test_ev_exact_limit)
{
    enum { MAX = 1000 };
    uint8_t *frame = malloc(FRAME_HEADER_LEN + MAX + 1);
    struct evbuffer *in = evbuffer_new();
    uint8_t *p = NULL;
    size_t len = 0;
    evbuffer_add(in, frame, make_frame(frame, MAX, 9));
    ck_assert_int_eq(frame_ev_take(in, MAX, &p, &len), FRAME_READY);
    assert_payload(p, len, MAX, 9);
    free(p);
    /* One byte more is refused, though it is all there. */
    evbuffer_add(in, frame, make_frame(frame, MAX + 1, 9));
    ck_assert_int_eq(frame_ev_take(in, MAX, &p, &len), FRAME_TOO_BIG);
    ck_assert_uint_eq(len, MAX + 1);
    ck_assert_uint_eq(evbuffer_get_length(in), FRAME_HEADER_LEN + MAX + 1);
    evbuffer_free(in);
    free(frame);
}
END_TEST

START_TEST(test_ev_refused_before_payload)
{
    struct evbuffer *in = evbuffer_new();
    uint8_t hdr[FRAME_HEADER_LEN];
    uint8_t *p = (uint8_t *)"untouched";
    size_t len = 0;
    /* Three bytes of a huge announcement: not known yet. */
    frame_put_header(hdr, 0xfffffff0u);
    evbuffer_add(in, hdr, 3);
    ck_assert_int_eq(frame_ev_take(in, 4096, &p, &len), FRAME_NEED_MORE);
    /* The fourth: refused at once, no payload byte has come, nothing is drained. */
    evbuffer_add(in, hdr + 3, 1);
    ck_assert_int_eq(frame_ev_take(in, 4096, &p, &len), FRAME_TOO_BIG);
    ck_assert_uint_eq(len, 0xfffffff0u);
    ck_assert_uint_eq(evbuffer_get_length(in), FRAME_HEADER_LEN);
    ck_assert_str_eq((const char *)p, "untouched");
    /* Asked again, the same answer: the caller is the one to close. */
    ck_assert_int_eq(frame_ev_take(in, 4096, &p, &len), FRAME_TOO_BIG);
    evbuffer_free(in);
}
END_TEST

START_TEST(test_ev_several_frames)
{
    /* Frames of 0..40 bytes back to back, added in pieces of 7 bytes (many chains). */
    static uint8_t stream[41 * (FRAME_HEADER_LEN + 40)];
    size_t total = 0;
    for (unsigned i = 0; i <= 40; i++)
        total += make_frame(stream + total, i, i);
    struct evbuffer *in = evbuffer_new();
    for (size_t off = 0; off < total; off += 7) {
        struct evbuffer *piece = evbuffer_new();
        evbuffer_add(piece, stream + off, total - off < 7 ? total - off : 7);
        evbuffer_add_buffer(in, piece);
        evbuffer_free(piece);
    }
    for (unsigned i = 0; i <= 40; i++) {
        uint8_t *p = NULL;
        size_t len = 99;
        ck_assert_int_eq(frame_ev_take(in, 40, &p, &len), FRAME_READY);
        ck_assert_ptr_nonnull(p);
        assert_payload(p, len, i, i);
        free(p);
    }
    uint8_t *p = NULL;
    size_t len = 0;
    ck_assert_int_eq(frame_ev_take(in, 40, &p, &len), FRAME_NEED_MORE);
    ck_assert_uint_eq(evbuffer_get_length(in), 0);
    evbuffer_free(in);
}
END_TEST

START_TEST(test_ev_zero_length)
{
    struct evbuffer *b = evbuffer_new();
    ck_assert_int_eq(frame_ev_add(b, NULL, 0), 0);
    ck_assert_int_eq(frame_ev_add(b, "", 0), 0);
    ck_assert_uint_eq(evbuffer_get_length(b), 2 * FRAME_HEADER_LEN);
    for (int i = 0; i < 2; i++) {
        uint8_t *p = NULL;
        size_t len = 99;
        ck_assert_int_eq(frame_ev_take(b, 0, &p, &len), FRAME_READY);
        ck_assert_uint_eq(len, 0);
        ck_assert_ptr_nonnull(p); /* the caller frees what it is given, empty or not */
        free(p);
    }
    ck_assert_uint_eq(evbuffer_get_length(b), 0);
    evbuffer_free(b);
}
END_TEST

/* A large message takes the referenced-buffer path: the same bytes, one frame, in order. */
START_TEST(test_ev_add_large_message)
{
    struct evbuffer *b = evbuffer_new();
    ck_assert_int_eq(frame_ev_add(b, "x", 1), 0);
    static char name[200 * 1024];
    memset(name, 'n', sizeof(name) - 1);
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    req.request_id = 42;
    req.cluster_name = name;
    req.op_case = SPUR__API__REQUEST__OP_PING;
    req.ping = &ping;
    size_t packed = spur__api__request__get_packed_size(&req);
    ck_assert_uint_gt(packed, 64 * 1024);
    ck_assert_int_eq(frame_ev_add_message(b, &req.base), 0);
    ck_assert_int_eq(frame_ev_add(b, "yz", 2), 0);
    ck_assert_uint_eq(evbuffer_get_length(b), 3 * FRAME_HEADER_LEN + 1 + packed + 2);

    uint8_t *p = NULL;
    size_t len = 0;
    ck_assert_int_eq(frame_ev_take(b, 1u << 20, &p, &len), FRAME_READY);
    ck_assert_uint_eq(len, 1);
    free(p);
    ck_assert_int_eq(frame_ev_take(b, 1u << 20, &p, &len), FRAME_READY);
    ck_assert_uint_eq(len, packed);
    Spur__Api__Request *back = spur__api__request__unpack(NULL, len, p);
    ck_assert_ptr_nonnull(back);
    ck_assert_uint_eq(back->request_id, 42);
    ck_assert_uint_eq(strlen(back->cluster_name), sizeof(name) - 1);
    spur__api__request__free_unpacked(back, NULL);
    free(p);
    ck_assert_int_eq(frame_ev_take(b, 1u << 20, &p, &len), FRAME_READY);
    ck_assert_uint_eq(len, 2);
    ck_assert_mem_eq(p, "yz", 2);
    free(p);
    ck_assert_uint_eq(evbuffer_get_length(b), 0);
    evbuffer_free(b);
}
END_TEST

/* What the writers produce is frame.h's format: read back with the pure parser. */
START_TEST(test_ev_add_matches_parse)
{
    struct evbuffer *b = evbuffer_new();
    uint8_t payload[300];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)((5 + i) % 251);
    ck_assert_int_eq(frame_ev_add(b, payload, sizeof(payload)), 0);
    ck_assert_int_eq(frame_ev_add(b, payload, 17), 0);

    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    req.protocol_version = 7;
    req.request_id = 0x1122334455667788ull;
    req.cluster_name = (char *)"spur";
    req.op_case = SPUR__API__REQUEST__OP_PING;
    req.ping = &ping;
    size_t packed = spur__api__request__get_packed_size(&req);
    ck_assert_int_eq(frame_ev_add_message(b, &req.base), 0);

    size_t n = evbuffer_get_length(b);
    ck_assert_uint_eq(n, 3 * FRAME_HEADER_LEN + sizeof(payload) + 17 + packed);
    const uint8_t *all = evbuffer_pullup(b, -1);
    const uint8_t *p = NULL;
    size_t len = 0, used = 0, off = 0;
    ck_assert_int_eq(frame_parse(all, n, 1024, &p, &len, &used), FRAME_READY);
    assert_payload(p, len, sizeof(payload), 5);
    off += used;
    ck_assert_int_eq(frame_parse(all + off, n - off, 1024, &p, &len, &used), FRAME_READY);
    assert_payload(p, len, 17, 5);
    off += used;
    ck_assert_int_eq(frame_parse(all + off, n - off, 1024, &p, &len, &used), FRAME_READY);
    ck_assert_uint_eq(len, packed);
    ck_assert_uint_eq(off + used, n);
    Spur__Api__Request *back = spur__api__request__unpack(NULL, len, p);
    ck_assert_ptr_nonnull(back);
    ck_assert_uint_eq(back->protocol_version, 7);
    ck_assert_uint_eq(back->request_id, 0x1122334455667788ull);
    ck_assert_str_eq(back->cluster_name, "spur");
    ck_assert_int_eq(back->op_case, SPUR__API__REQUEST__OP_PING);
    spur__api__request__free_unpacked(back, NULL);
    evbuffer_free(b);
}
END_TEST

/* A frame added behind bytes already waiting does not disturb them. */
START_TEST(test_ev_add_appends)
{
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, "xy", 2);
    ck_assert_int_eq(frame_ev_add(b, "abc", 3), 0);
    ck_assert_uint_eq(evbuffer_get_length(b), 2 + FRAME_HEADER_LEN + 3);
    uint8_t got[9];
    evbuffer_remove(b, got, sizeof(got));
    ck_assert_int_eq(memcmp(got, "xy\0\0\0\3abc", 9), 0);
    evbuffer_free(b);
}
END_TEST

static Suite *frame_suite(void)
{
    Suite *s = suite_create("frame");
    check_case(s, "parse",
               (const TTest *[]){test_header_codec, test_parse_every_boundary,
                                 test_parse_back_to_back, test_parse_max_size, NULL});

    check_case(s, "reader",
               (const TTest *[]){test_reader_fresh, test_reader_byte_by_byte,
                                 test_reader_random_chunks, test_reader_whole_stream_at_once,
                                 test_reader_space_commit, test_reader_space_covers_started_frame,
                                 test_reader_compacts, test_reader_max_size,
                                 test_reader_refuses_before_allocation,
                                 test_reader_refusal_after_good_frames, NULL});

    check_case(s, "evbuffer",
               (const TTest *[]){test_ev_split_header, test_ev_exact_limit,
                                 test_ev_refused_before_payload, test_ev_several_frames,
                                 test_ev_zero_length, test_ev_add_matches_parse,
                                 test_ev_add_large_message, test_ev_add_appends, NULL});
    return s;
}

int main(void)
{
    return check_run(frame_suite());
}
