/*
 * fuzz_frame.c - frame_reader fed arbitrary bytes in arbitrary chunks.
 *
 * Input layout: byte 0 picks the maximum payload (2^0 .. 2^23 bytes), byte 1 seeds the
 * chunk sizes, the rest is the stream. The stream goes into a reader through the
 * space/commit API, in chunks of 1 to 4096 bytes, and every complete frame is taken out
 * after each chunk. The reference is frame_parse() run over the whole stream at once: the
 * reader must return the same frames, byte for byte, and refuse an oversized frame at the
 * same place, without growing its buffer past one frame plus the read size.
 */
#define FUZZ_NAME "fuzz_frame"
#include "fuzz_check.h"

#include "frame.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHUNK 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max_payload = (size_t)1 << (data[0] % 24);
    uint32_t seed = data[1] * 2654435761u + 1;
    const uint8_t *stream = data + 2;
    size_t len = size - 2;

    /* The reference: frames cut from the whole stream with the pure parser. */
    size_t ref_off = 0;
    int ref_too_big = 0;

    struct frame_reader r;
    frame_reader_init(&r, max_payload);
    size_t fed = 0;
    while (fed < len) {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        size_t chunk = 1 + seed % MAX_CHUNK;
        if (chunk > len - fed)
            chunk = len - fed;

        uint8_t *p;
        size_t space;
        int rc = frame_reader_space(&r, chunk, &p, &space);
        if (rc == FRAME_TOO_BIG)
            break;
        CHECK(rc == 0);
        CHECK(space >= chunk);
        memcpy(p, stream + fed, chunk);
        frame_reader_commit(&r, chunk);
        fed += chunk;
        /* Room for one whole frame plus one read, never more. */
        CHECK(r.cap <= FRAME_HEADER_LEN + max_payload + MAX_CHUNK + 4096);

        const uint8_t *payload;
        size_t plen;
        enum frame_status st;
        while ((st = frame_reader_next(&r, &payload, &plen)) == FRAME_READY) {
            const uint8_t *want;
            size_t wlen, consumed;
            enum frame_status ref =
                frame_parse(stream + ref_off, len - ref_off, max_payload, &want, &wlen, &consumed);
            CHECK(ref == FRAME_READY);
            CHECK(plen == wlen && plen <= max_payload);
            CHECK(memcmp(payload, want, plen) == 0);
            ref_off += consumed;
            CHECK(ref_off <= fed);
        }
        if (st == FRAME_TOO_BIG) {
            CHECK(r.last_len > max_payload);
            ref_too_big = 1;
            break;
        }
        CHECK(st == FRAME_NEED_MORE);
        CHECK(frame_reader_buffered(&r) == fed - ref_off);
    }

    /* Whatever the reference finds next must agree with where the reader stopped. */
    const uint8_t *want;
    size_t wlen = 0, consumed;
    enum frame_status ref =
        frame_parse(stream + ref_off, len - ref_off, max_payload, &want, &wlen, &consumed);
    if (ref_too_big || fed < len)
        CHECK(ref == FRAME_TOO_BIG && wlen == r.last_len);
    else
        CHECK(ref == FRAME_NEED_MORE);
    frame_reader_free(&r);
    return 0;
}
