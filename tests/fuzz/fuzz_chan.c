/*
 * fuzz_chan.c - chan.c's handshake and sealed frames fed arbitrary bytes.
 *
 * Input layout: byte 0 picks what the rest is, the rest is split at the 16-bit big-endian
 * length in bytes 1-2 into a first and a second part:
 *   0  an initiator's hello to a fresh responder, then the second part as its proof;
 *   1  a responder's hello to an initiator that sent its own hello, then (if that got
 *      through) nothing more;
 *   2  after an honest handshake: the first part as the initiator's proof instead of the
 *      real one;
 *   3  after an honest handshake: both parts as sealed frames, to each side; and both
 *      parts sealed by the honest sides, which must open to themselves.
 * No input may establish a channel or open a frame without the key (the nonces are fresh
 * random bytes, so even a recorded handshake fails), every refusal must leave the channel
 * failed with a reason, and a responder that refuses a hello must have a reply to send.
 */
#define FUZZ_NAME "fuzz_chan"
#include "fuzz_check.h"

#include "chan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The key of the seed corpus (tests/fuzz/corpus/chan), 32 bytes. */
#define FUZZ_KEY "spur-fuzz-key-0123456789abcdef!!"

static void make_ring(struct keyring *kr)
{
    struct clusterkey k;
    char err[256];
    memset(kr, 0, sizeof(*kr));
    CHECK(clusterkey_from_bytes(&k, FUZZ_KEY, 32, "fuzz", err, sizeof(err)) == 0);
    CHECK(keyring_add(kr, &k) == 0);
}

static void check_failed(const struct chan *c, enum chan_rc rc)
{
    CHECK(rc != CHAN_OK);
    CHECK(!chan_established(c));
    CHECK(chan_why(c)[0] != '\0');
    CHECK(strcmp(chan_rc_name(rc), "unknown") != 0);
}

/* An honest handshake; the proof is left for the caller in *p when p != NULL. */
static void honest(struct chan *i, struct chan *r, const struct keyring *kr, uint8_t **p,
                   size_t *plen)
{
    uint8_t *h1, *h2, *pr;
    size_t h1len, h2len, prlen;
    CHECK(chan_init(i, CHAN_INITIATOR, kr, "spur", "replica") == 0);
    CHECK(chan_init(r, CHAN_RESPONDER, kr, "spur", "controller") == 0);
    CHECK(chan_hello(i, &h1, &h1len) == CHAN_OK);
    CHECK(chan_take_hello(r, h1, h1len, &h2, &h2len) == CHAN_OK);
    CHECK(chan_take_hello(i, h2, h2len, &pr, &prlen) == CHAN_OK);
    free(h1);
    free(h2);
    if (p != NULL) {
        *p = pr;
        *plen = prlen;
        return;
    }
    CHECK(chan_take_proof(r, pr, prlen) == CHAN_OK);
    free(pr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    int mode = data[0] % 4;
    size_t split = ((size_t)data[1] << 8) | data[2];
    const uint8_t *a = data + 3;
    size_t alen = size - 3 < split ? size - 3 : split;
    const uint8_t *b = a + alen;
    size_t blen = size - 3 - alen;

    struct keyring kr;
    make_ring(&kr);
    struct chan i, r;
    uint8_t *out = NULL;
    size_t outlen = 0;
    enum chan_rc rc;

    switch (mode) {
    case 0:
        CHECK(chan_init(&r, CHAN_RESPONDER, &kr, "spur", "controller") == 0);
        rc = chan_take_hello(&r, a, alen, &out, &outlen);
        if (rc == CHAN_OK) {
            CHECK(out != NULL && chan_is_handshake(out, outlen) && outlen <= CHAN_MAX_HELLO);
            CHECK(!chan_established(&r));
            CHECK(strcmp(chan_key_id(&r), kr.keys[0].id_hex) == 0);
            check_failed(&r, chan_take_proof(&r, b, blen));
        } else {
            check_failed(&r, rc);
            if (rc != CHAN_NOMEM && rc != CHAN_CRYPTO)
                CHECK(out != NULL && chan_is_handshake(out, outlen));
        }
        free(out);
        chan_free(&r);
        break;
    case 1: {
        CHECK(chan_init(&i, CHAN_INITIATOR, &kr, "spur", "replica") == 0);
        uint8_t *h1;
        size_t h1len;
        CHECK(chan_hello(&i, &h1, &h1len) == CHAN_OK);
        free(h1);
        rc = chan_take_hello(&i, a, alen, &out, &outlen);
        check_failed(&i, rc);
        CHECK(out == NULL);
        chan_free(&i);
        break;
    }
    case 2: {
        uint8_t *p;
        size_t plen;
        honest(&i, &r, &kr, &p, &plen);
        rc = chan_take_proof(&r, a, alen);
        if (alen == plen && memcmp(a, p, plen) == 0)
            CHECK(rc == CHAN_OK); /* cannot happen: the proof has fresh nonces in it */
        else
            check_failed(&r, rc);
        free(p);
        chan_free(&i);
        chan_free(&r);
        break;
    }
    default: {
        honest(&i, &r, &kr, NULL, NULL);
        size_t inner = 0;
        check_failed(&r, chan_open(&r, a, alen, &inner));
        check_failed(&i, chan_open(&i, b, blen, &inner));
        chan_free(&i);
        chan_free(&r);
        /* The same bytes sealed honestly open, both ways. */
        honest(&i, &r, &kr, NULL, NULL);
        uint8_t *f = malloc(alen + CHAN_TRAILER_LEN);
        CHECK(f != NULL);
        if (alen > 0)
            memcpy(f, a, alen);
        CHECK(chan_seal(&i, f, alen, f + alen) == CHAN_OK);
        CHECK(chan_open(&r, f, alen + CHAN_TRAILER_LEN, &inner) == CHAN_OK);
        CHECK(inner == alen && (alen == 0 || memcmp(f, a, alen) == 0));
        CHECK(chan_seal(&r, f, alen, f + alen) == CHAN_OK);
        CHECK(chan_open(&i, f, alen + CHAN_TRAILER_LEN, &inner) == CHAN_OK);
        /* ... and once only. */
        check_failed(&i, chan_open(&i, f, alen + CHAN_TRAILER_LEN, &inner));
        free(f);
        chan_free(&i);
        chan_free(&r);
        break;
    }
    }
    keyring_wipe(&kr);
    return 0;
}
