/*
 * bench_chan.c - what the cluster-key channel costs per frame (chan.h): nanoseconds for
 * one chan_seal() plus one chan_open() of the same frame, for Raft-sized frames (a 200-byte
 * heartbeat or vote, 4 KiB, a 64 KiB batch of entries), and the cost of a whole handshake.
 *
 * Two reference columns per size show where the time goes, computed here with OpenSSL
 * directly: two HMAC-SHA-256 over the same bytes with a keyed context duplicated per MAC,
 * and with one context re-initialised per MAC (EVP_MAC_init with a NULL key, which keeps
 * the key: what chan.c does, being the cheaper of the two for small frames).
 *
 *   bench_chan [--seconds S]     (default 0.5 s per row)
 */
#include "chan.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_chan: %s\n", what);
    exit(1);
}

static void handshake(struct chan *i, struct chan *r, const struct keyring *kr)
{
    uint8_t *h1, *h2, *p;
    size_t h1len, h2len, plen;
    if (chan_init(i, CHAN_INITIATOR, kr, "spur", "replica") != 0 ||
        chan_init(r, CHAN_RESPONDER, kr, "spur", "replica") != 0 ||
        chan_hello(i, &h1, &h1len) != CHAN_OK ||
        chan_take_hello(r, h1, h1len, &h2, &h2len) != CHAN_OK ||
        chan_take_hello(i, h2, h2len, &p, &plen) != CHAN_OK ||
        chan_take_proof(r, p, plen) != CHAN_OK)
        die("handshake failed");
    free(h1);
    free(h2);
    free(p);
}

/* ns per seal+open of a len-byte frame. */
static double time_chan(const struct keyring *kr, size_t len, double seconds)
{
    struct chan i, r;
    handshake(&i, &r, kr);
    uint8_t *f = calloc(1, len + CHAN_TRAILER_LEN);
    if (f == NULL)
        die("out of memory");
    uint64_t n = 0;
    double t0 = now_s(), t;
    do {
        for (int k = 0; k < 64; k++) {
            size_t inner;
            if (chan_seal(&i, f, len, f + len) != CHAN_OK ||
                chan_open(&r, f, len + CHAN_TRAILER_LEN, &inner) != CHAN_OK)
                die("seal/open failed");
        }
        n += 64;
        t = now_s() - t0;
    } while (t < seconds);
    free(f);
    chan_free(&i);
    chan_free(&r);
    return t * 1e9 / (double)n;
}

static EVP_MAC_CTX *keyed(void)
{
    static const uint8_t key[32] = {1, 2, 3};
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
    EVP_MAC_free(mac);
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (ctx == NULL || EVP_MAC_init(ctx, key, sizeof(key), params) != 1)
        die("EVP_MAC setup failed");
    return ctx;
}

/* ns per two HMACs of len bytes; dup: duplicate a keyed context, else re-init one. */
static double time_hmac(size_t len, int dup, double seconds)
{
    EVP_MAC_CTX *base = keyed();
    uint8_t *buf = calloc(1, len + 8), out[32];
    if (buf == NULL)
        die("out of memory");
    uint64_t n = 0;
    double t0 = now_s(), t;
    do {
        for (int k = 0; k < 128; k++) {
            size_t outl;
            EVP_MAC_CTX *c = base;
            if (dup)
                c = EVP_MAC_CTX_dup(base);
            else if (EVP_MAC_init(base, NULL, 0, NULL) != 1)
                die("EVP_MAC_init failed");
            if (c == NULL || EVP_MAC_update(c, buf, 8) != 1 ||
                EVP_MAC_update(c, buf + 8, len) != 1 || EVP_MAC_final(c, out, &outl, 32) != 1)
                die("HMAC failed");
            if (dup)
                EVP_MAC_CTX_free(c);
        }
        n += 64; /* 128 MACs = 64 seal+open pairs */
        t = now_s() - t0;
    } while (t < seconds);
    free(buf);
    EVP_MAC_CTX_free(base);
    return t * 1e9 / (double)n;
}

int main(int argc, char **argv)
{
    double seconds = 0.5;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--seconds") == 0 && a + 1 < argc) {
            seconds = atof(argv[++a]);
        } else {
            fprintf(stderr, "usage: %s [--seconds S]\n", argv[0]);
            return 64;
        }
    }
    uint8_t kb[32];
    for (int k = 0; k < 32; k++)
        kb[k] = (uint8_t)(k * 13 + 7);
    struct clusterkey key;
    struct keyring kr;
    char err[256];
    memset(&kr, 0, sizeof(kr));
    if (clusterkey_from_bytes(&key, kb, sizeof(kb), "bench", err, sizeof(err)) != 0 ||
        keyring_add(&kr, &key) != 0)
        die(err);

    static const size_t sizes[] = {200, 4096, 65536};
    printf(
        "cluster-key channel: one chan_seal() + one chan_open() of the same frame, one core\n\n");
    printf("| frame    | chan seal+open ns | MB/s   | 2 HMAC, ctx dup ns | 2 HMAC, re-init ns |\n");
    printf("|----------|-------------------|--------|--------------------|--------------------|\n");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        double c = time_chan(&kr, sizes[s], seconds);
        double d = time_hmac(sizes[s], 1, seconds);
        double r = time_hmac(sizes[s], 0, seconds);
        printf("| %6zu B | %17.0f | %6.0f | %18.0f | %18.0f |\n", sizes[s], c,
               (double)sizes[s] / c * 1e3, d, r);
    }

    uint64_t n = 0;
    double t0 = now_s(), t;
    do {
        struct chan i, r;
        handshake(&i, &r, &kr);
        chan_free(&i);
        chan_free(&r);
        n++;
        t = now_s() - t0;
    } while (t < seconds);
    printf("\nwhole handshake (both sides, 3 frames): %.1f us\n", t * 1e6 / (double)n);
    keyring_wipe(&kr);
    return 0;
}
