/*
 * test_chan.c - the cluster-key handshake and sealed frames (common/chan.c) and their
 * evbuffer adapter (common/chan_ev.c).
 *
 * Pinned here: a full handshake leaves both sides established on the same key with each
 * other's role, and frames flow both ways; a responder without a common key refuses
 * (NO_COMMON_KEY, naming both sides' ids) and the initiator logs the refusal (REFUSED,
 * "refused by peer: ..."); a key with the right id but other bytes is caught by the proof
 * (BAD_PROOF) on either side; another cluster, another version, every field of the wrong
 * size, a hello over CHAN_MAX_HELLO are refused; one flipped bit anywhere in any of the
 * three handshake frames, or any truncation of them, keeps the channel from being
 * established; a responder that drops the initiator's newer key is caught; sealed frames
 * replayed, skipped, reflected back to their sender, taken from another connection,
 * altered or cut are refused; rotation picks the first key of the initiator's list that
 * the responder holds. And chan_ev: handshake and sealed frames through evbuffers, small
 * and large messages, a tampered frame refused and drained, partial frames waited for.
 */
#include "auth.pb-c.h"
#include "chan.h"
#include "chan_ev.h"
#include "check_run.h"
#include "frame_ev.h"

#include <check.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLUSTER "spur"

/* A key of 32 bytes (seed + 3i). */
static struct clusterkey key_of(unsigned seed)
{
    uint8_t b[32];
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(seed + 3 * i);
    struct clusterkey k;
    char err[256];
    ck_assert_int_eq(clusterkey_from_bytes(&k, b, sizeof(b), "test", err, sizeof(err)), 0);
    return k;
}

static void ring(struct keyring *kr, const struct clusterkey *a, const struct clusterkey *b)
{
    memset(kr, 0, sizeof(*kr));
    ck_assert_int_eq(keyring_add(kr, a), 0);
    if (b != NULL)
        ck_assert_int_eq(keyring_add(kr, b), 0);
}

/* The three handshake frames of one run, for the tests that tamper with them. */
struct hs {
    struct chan i, r;
    uint8_t *h1, *h2, *p;
    size_t h1len, h2len, plen;
};

static void hs_free(struct hs *h)
{
    chan_free(&h->i);
    chan_free(&h->r);
    free(h->h1);
    free(h->h2);
    free(h->p);
    memset(h, 0, sizeof(*h));
}

/* A whole handshake between kri and krr; both must end established. */
static void handshake(struct hs *h, const struct keyring *kri, const struct keyring *krr)
{
    memset(h, 0, sizeof(*h));
    ck_assert_int_eq(chan_init(&h->i, CHAN_INITIATOR, kri, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&h->r, CHAN_RESPONDER, krr, CLUSTER, "controller"), 0);
    ck_assert_int_eq(chan_hello(&h->i, &h->h1, &h->h1len), CHAN_OK);
    ck_assert(chan_is_handshake(h->h1, h->h1len));
    enum chan_rc rc = chan_take_hello(&h->r, h->h1, h->h1len, &h->h2, &h->h2len);
    ck_assert_msg(rc == CHAN_OK, "responder: %s: %s", chan_rc_name(rc), chan_why(&h->r));
    ck_assert(!chan_established(&h->r));
    rc = chan_take_hello(&h->i, h->h2, h->h2len, &h->p, &h->plen);
    ck_assert_msg(rc == CHAN_OK, "initiator: %s: %s", chan_rc_name(rc), chan_why(&h->i));
    ck_assert(chan_established(&h->i));
    rc = chan_take_proof(&h->r, h->p, h->plen);
    ck_assert_msg(rc == CHAN_OK, "proof: %s: %s", chan_rc_name(rc), chan_why(&h->r));
    ck_assert(chan_established(&h->r));
}

/* Seal p into a malloc'd payload (inner | trailer). */
static uint8_t *seal(struct chan *c, const void *p, size_t len, size_t *outlen)
{
    uint8_t *out = malloc(len + CHAN_TRAILER_LEN);
    ck_assert_ptr_nonnull(out);
    if (len > 0)
        memcpy(out, p, len);
    ck_assert_int_eq(chan_seal(c, out, len, out + len), CHAN_OK);
    *outlen = len + CHAN_TRAILER_LEN;
    return out;
}

static void assert_open(struct chan *c, uint8_t *f, size_t flen, const void *want, size_t wlen)
{
    size_t inner = 99;
    enum chan_rc rc = chan_open(c, f, flen, &inner);
    ck_assert_msg(rc == CHAN_OK, "open: %s: %s", chan_rc_name(rc), chan_why(c));
    ck_assert_uint_eq(inner, wlen);
    if (wlen > 0)
        ck_assert_mem_eq(f, want, wlen);
}

/*
 * Rebuild a hello frame after edit() changed its decoded message. edit() works on a
 * shallow copy (with its own copy of the key id array), so it may point fields at static
 * data without the decoded message freeing them.
 */
static uint8_t *edit_hello(const uint8_t *f, size_t flen, void (*edit)(Spur__Auth__ChanHello *),
                           size_t *outlen)
{
    ck_assert(chan_is_handshake(f, flen));
    Spur__Auth__ChanHello *m =
        spur__auth__chan_hello__unpack(NULL, flen - CHAN_MAGIC_LEN, f + CHAN_MAGIC_LEN);
    ck_assert_ptr_nonnull(m);
    Spur__Auth__ChanHello copy = *m;
    ProtobufCBinaryData ids[16];
    ck_assert_uint_le(m->n_key_ids, 16);
    memcpy(ids, m->key_ids, m->n_key_ids * sizeof(ids[0]));
    copy.key_ids = ids;
    edit(&copy);
    size_t n = spur__auth__chan_hello__get_packed_size(&copy);
    uint8_t *out = malloc(CHAN_MAGIC_LEN + n);
    ck_assert_ptr_nonnull(out);
    memcpy(out, f, CHAN_MAGIC_LEN);
    spur__auth__chan_hello__pack(&copy, out + CHAN_MAGIC_LEN);
    spur__auth__chan_hello__free_unpacked(m, NULL);
    *outlen = CHAN_MAGIC_LEN + n;
    return out;
}

START_TEST(test_full_handshake)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct hs h;
    handshake(&h, &kr, &kr);
    ck_assert_str_eq(h.i.peer_role, "controller");
    ck_assert_str_eq(h.r.peer_role, "replica");
    ck_assert_str_eq(chan_key_id(&h.i), a.id_hex);
    ck_assert_str_eq(chan_key_id(&h.r), a.id_hex);
    ck_assert_str_eq(chan_why(&h.i), "");
    ck_assert(!chan_is_handshake((const uint8_t *)"\0SC", 3));
    ck_assert(!chan_is_handshake((const uint8_t *)"\0SC2", 4));

    /* Frames both ways, in turn and in runs, empty ones too. */
    for (int n = 0; n < 20; n++) {
        char msg[64];
        int len = snprintf(msg, sizeof(msg), "frame %d from the initiator", n);
        size_t flen;
        uint8_t *f = seal(&h.i, msg, n % 5 == 0 ? 0 : (size_t)len, &flen);
        assert_open(&h.r, f, flen, msg, n % 5 == 0 ? 0 : (size_t)len);
        free(f);
        for (int k = 0; k < n % 3; k++) {
            f = seal(&h.r, "reply", 5, &flen);
            assert_open(&h.i, f, flen, "reply", 5);
            free(f);
        }
    }
    ck_assert_uint_eq(h.i.send_seq, 20);
    ck_assert_uint_eq(h.r.recv_seq, 20);
    hs_free(&h);
}
END_TEST

START_TEST(test_wrong_key)
{
    struct clusterkey a = key_of(1), b = key_of(2);
    struct keyring kri, krr;
    ring(&kri, &a, NULL);
    ring(&krr, &b, NULL);
    struct chan i, r;
    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kri, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &krr, CLUSTER, "replica"), 0);
    uint8_t *h1, *h2, *p;
    size_t h1len, h2len, plen;
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    ck_assert_int_eq(chan_take_hello(&r, h1, h1len, &h2, &h2len), CHAN_NO_COMMON_KEY);
    char want[128];
    snprintf(want, sizeof(want), "no common cluster key (ours: %s, theirs: %s)", b.id_hex,
             a.id_hex);
    ck_assert_str_eq(chan_why(&r), want);
    ck_assert_ptr_nonnull(h2); /* the refusal, for the initiator's log */
    ck_assert_int_eq(chan_take_hello(&i, h2, h2len, &p, &plen), CHAN_REFUSED);
    ck_assert_ptr_null(p);
    snprintf(want, sizeof(want),
             "refused by peer: no common cluster key (the responder's: %s, yours: %s)", b.id_hex,
             a.id_hex);
    ck_assert_str_eq(chan_why(&i), want);
    ck_assert(!chan_established(&i));
    ck_assert(!chan_established(&r));
    /* Failed channels stay failed. */
    uint8_t t[CHAN_TRAILER_LEN];
    ck_assert_int_eq(chan_seal(&i, (const uint8_t *)"x", 1, t), CHAN_STATE);
    ck_assert_int_eq(chan_take_proof(&r, h1, h1len), CHAN_STATE);
    free(h1);
    free(h2);
    chan_free(&i);
    chan_free(&r);
}
END_TEST

START_TEST(test_forged_proof)
{
    /* A key that claims a's id but has other bytes: only the proofs can tell. */
    struct clusterkey a = key_of(1), fake = key_of(7);
    memcpy(fake.id, a.id, CLUSTERKEY_ID_LEN);
    memcpy(fake.id_hex, a.id_hex, sizeof(a.id_hex));
    struct keyring real, forged;
    ring(&real, &a, NULL);
    ring(&forged, &fake, NULL);

    for (int side = 0; side < 2; side++) {
        struct chan i, r;
        ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, side ? &forged : &real, CLUSTER, "agent"),
                         0);
        ck_assert_int_eq(
            chan_init(&r, CHAN_RESPONDER, side ? &real : &forged, CLUSTER, "controller"), 0);
        uint8_t *h1, *h2, *p;
        size_t h1len, h2len, plen;
        ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
        ck_assert_int_eq(chan_take_hello(&r, h1, h1len, &h2, &h2len), CHAN_OK);
        ck_assert_int_eq(chan_take_hello(&i, h2, h2len, &p, &plen), CHAN_BAD_PROOF);
        char want[128];
        snprintf(want, sizeof(want), "peer did not prove the cluster key %s (wrong key file?)",
                 a.id_hex);
        ck_assert_str_eq(chan_why(&i), want);
        ck_assert(!chan_established(&i));
        free(h1);
        free(h2);
        chan_free(&i);
        chan_free(&r);
    }

    /* The responder's side: an initiator that sends a proof it did not compute. */
    struct hs h;
    memset(&h, 0, sizeof(h));
    ck_assert_int_eq(chan_init(&h.i, CHAN_INITIATOR, &real, CLUSTER, "agent"), 0);
    ck_assert_int_eq(chan_init(&h.r, CHAN_RESPONDER, &real, CLUSTER, "controller"), 0);
    ck_assert_int_eq(chan_hello(&h.i, &h.h1, &h.h1len), CHAN_OK);
    ck_assert_int_eq(chan_take_hello(&h.r, h.h1, h.h1len, &h.h2, &h.h2len), CHAN_OK);
    ck_assert_int_eq(chan_take_hello(&h.i, h.h2, h.h2len, &h.p, &h.plen), CHAN_OK);
    h.p[h.plen - 1] ^= 0x01;
    ck_assert_int_eq(chan_take_proof(&h.r, h.p, h.plen), CHAN_BAD_PROOF);
    ck_assert_ptr_nonnull(strstr(chan_why(&h.r), "peer did not prove the cluster key"));
    ck_assert(!chan_established(&h.r));
    size_t flen, inner;
    uint8_t *f = seal(&h.i, "x", 1, &flen);
    ck_assert_int_eq(chan_open(&h.r, f, flen, &inner), CHAN_STATE);
    free(f);
    hs_free(&h);
}
END_TEST

START_TEST(test_other_cluster)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct chan i, r;
    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kr, "blue", "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, "green", "replica"), 0);
    uint8_t *h1, *h2, *p;
    size_t h1len, h2len, plen;
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    ck_assert_int_eq(chan_take_hello(&r, h1, h1len, &h2, &h2len), CHAN_OTHER_CLUSTER);
    ck_assert_str_eq(chan_why(&r), "peer is of cluster \"blue\", we are of \"green\"");
    ck_assert_int_eq(chan_take_hello(&i, h2, h2len, &p, &plen), CHAN_REFUSED);
    ck_assert_str_eq(chan_why(&i),
                     "refused by peer: the responder is of cluster \"green\", you are of \"blue\"");
    free(h1);
    free(h2);
    chan_free(&i);
    chan_free(&r);
}
END_TEST

static void set_version_2(Spur__Auth__ChanHello *m)
{
    m->version = 2;
}

START_TEST(test_version)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    /* An initiator of another version: refused, and told so. */
    struct chan i, r;
    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
    uint8_t *h1, *h2, *p;
    size_t h1len, h2len, plen, vlen;
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    uint8_t *v2 = edit_hello(h1, h1len, set_version_2, &vlen);
    ck_assert_int_eq(chan_take_hello(&r, v2, vlen, &h2, &h2len), CHAN_BAD_VERSION);
    ck_assert_str_eq(chan_why(&r), "peer speaks chan version 2, we speak 1");
    ck_assert_int_eq(chan_take_hello(&i, h2, h2len, &p, &plen), CHAN_REFUSED);
    ck_assert_str_eq(chan_why(&i),
                     "refused by peer: the responder speaks chan version 1, you sent 2");
    free(v2);
    free(h1);
    free(h2);
    chan_free(&i);
    chan_free(&r);

    /* A responder of another version. */
    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    ck_assert_int_eq(chan_take_hello(&r, h1, h1len, &h2, &h2len), CHAN_OK);
    v2 = edit_hello(h2, h2len, set_version_2, &vlen);
    ck_assert_int_eq(chan_take_hello(&i, v2, vlen, &p, &plen), CHAN_BAD_VERSION);
    free(v2);
    free(h1);
    free(h2);
    chan_free(&i);
    chan_free(&r);
}
END_TEST

/* Edits that give one field a wrong size, each refused as a bad frame. */
static uint8_t junk[2048];
static void short_nonce(Spur__Auth__ChanHello *m)
{
    m->nonce.len = CHAN_NONCE_LEN - 1;
}
static void long_nonce(Spur__Auth__ChanHello *m)
{
    m->nonce.data = junk;
    m->nonce.len = CHAN_NONCE_LEN + 1;
}
static void no_nonce(Spur__Auth__ChanHello *m)
{
    m->nonce.len = 0;
}
static void short_key_id(Spur__Auth__ChanHello *m)
{
    m->key_ids[0].len = CLUSTERKEY_ID_LEN - 1;
}
static void long_key_id(Spur__Auth__ChanHello *m)
{
    m->key_ids[0].data = junk;
    m->key_ids[0].len = CLUSTERKEY_ID_LEN + 1;
}
static void no_key_ids(Spur__Auth__ChanHello *m)
{
    m->n_key_ids = 0;
}
static ProtobufCBinaryData many[9];
static void nine_key_ids(Spur__Auth__ChanHello *m)
{
    for (int k = 0; k < 9; k++) {
        many[k].data = junk;
        many[k].len = CLUSTERKEY_ID_LEN;
    }
    many[8] = m->key_ids[0];
    m->key_ids = many;
    m->n_key_ids = 9;
}
static char long_role[] = "sixteen-letters!";
static void role_16(Spur__Auth__ChanHello *m)
{
    m->role = long_role;
}
static char empty[] = "";
static void role_empty(Spur__Auth__ChanHello *m)
{
    m->role = empty;
}
static char ctl_role[] = "rep\nlica";
static void role_control_char(Spur__Auth__ChanHello *m)
{
    m->role = ctl_role;
}
static char cluster_128[129];
static void cluster_long(Spur__Auth__ChanHello *m)
{
    memset(cluster_128, 'c', 128);
    m->cluster_name = cluster_128;
}
static uint8_t some[32];
static void with_proof(Spur__Auth__ChanHello *m)
{
    m->proof.data = some;
    m->proof.len = 32;
}
static void with_key_id(Spur__Auth__ChanHello *m)
{
    m->key_id = m->key_ids[0];
}
static void big_hello(Spur__Auth__ChanHello *m)
{
    /* Over CHAN_MAX_HELLO as a whole, though each field alone would pass. */
    static char err[1100];
    memset(err, 'e', sizeof(err) - 1);
    m->error = err;
}

START_TEST(test_field_sizes_initiator_hello)
{
    static void (*const edits[])(Spur__Auth__ChanHello *) = {
        short_nonce,  long_nonce,   no_nonce,    long_key_id, short_key_id,
        no_key_ids,   nine_key_ids, role_16,     role_empty,  role_control_char,
        cluster_long, with_proof,   with_key_id, big_hello};
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    for (size_t e = 0; e < sizeof(edits) / sizeof(edits[0]); e++) {
        struct chan i, r;
        ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
        ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
        uint8_t *h1, *h2, *bad;
        size_t h1len, h2len, blen;
        ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
        bad = edit_hello(h1, h1len, edits[e], &blen);
        enum chan_rc rc = chan_take_hello(&r, bad, blen, &h2, &h2len);
        ck_assert_msg(rc == CHAN_BAD_FRAME, "edit %zu: %s (%s)", e, chan_rc_name(rc), chan_why(&r));
        ck_assert_ptr_nonnull(h2); /* a refusal naming the fault */
        uint8_t *p;
        size_t plen;
        ck_assert_int_eq(chan_take_hello(&i, h2, h2len, &p, &plen), CHAN_REFUSED);
        ck_assert_msg(strstr(chan_why(&i), "refused by peer: ") == chan_why(&i), "%s",
                      chan_why(&i));
        free(bad);
        free(h1);
        free(h2);
        chan_free(&i);
        chan_free(&r);
    }
}
END_TEST

static void no_proof(Spur__Auth__ChanHello *m)
{
    m->proof.len = 0;
}
static void short_proof(Spur__Auth__ChanHello *m)
{
    m->proof.len = 31;
}
static void no_chosen_key(Spur__Auth__ChanHello *m)
{
    m->key_id.len = 0;
}
static void short_chosen_key(Spur__Auth__ChanHello *m)
{
    m->key_id.len = CLUSTERKEY_ID_LEN - 1;
}

START_TEST(test_field_sizes_responder_hello)
{
    static void (*const edits[])(Spur__Auth__ChanHello *) = {
        short_nonce, long_nonce,   no_nonce, long_key_id, short_key_id,  no_key_ids,      role_16,
        role_empty,  cluster_long, no_proof, short_proof, no_chosen_key, short_chosen_key};
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    for (size_t e = 0; e < sizeof(edits) / sizeof(edits[0]); e++) {
        struct hs h;
        memset(&h, 0, sizeof(h));
        ck_assert_int_eq(chan_init(&h.i, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
        ck_assert_int_eq(chan_init(&h.r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
        ck_assert_int_eq(chan_hello(&h.i, &h.h1, &h.h1len), CHAN_OK);
        ck_assert_int_eq(chan_take_hello(&h.r, h.h1, h.h1len, &h.h2, &h.h2len), CHAN_OK);
        size_t blen;
        uint8_t *bad = edit_hello(h.h2, h.h2len, edits[e], &blen);
        enum chan_rc rc = chan_take_hello(&h.i, bad, blen, &h.p, &h.plen);
        ck_assert_msg(rc == CHAN_BAD_FRAME, "edit %zu: %s (%s)", e, chan_rc_name(rc),
                      chan_why(&h.i));
        ck_assert_ptr_null(h.p);
        free(bad);
        hs_free(&h);
    }
}
END_TEST

START_TEST(test_oversized_and_garbage)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    static uint8_t big[CHAN_MAX_HELLO + 1];
    memcpy(big, "\0SC1", 4);
    struct chan r;
    uint8_t *out;
    size_t outlen;
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_take_hello(&r, big, sizeof(big), &out, &outlen), CHAN_BAD_FRAME);
    ck_assert_ptr_nonnull(strstr(chan_why(&r), "more than 1024"));
    free(out);
    chan_free(&r);
    /* No magic; undecodable; empty. */
    static const struct {
        const char *b;
        size_t len;
    } cases[] = {{"SC1\0abc", 7}, {"\0SC1\xff\xff\xff", 7}, {"", 0}, {"\0SC", 3}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
        ck_assert_int_eq(
            chan_take_hello(&r, (const uint8_t *)cases[k].b, cases[k].len, &out, &outlen),
            CHAN_BAD_FRAME);
        free(out);
        chan_free(&r);
    }
}
END_TEST

/*
 * Run a handshake in which frame `which` (0: hello, 1: the responder's hello, 2: the
 * proof) is replaced by bytes. Returns true when both sides ended established and agree
 * on the session keys.
 */
static bool tampered_run(const struct keyring *kr, int which, const uint8_t *bytes, size_t len)
{
    struct chan i, r;
    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, kr, CLUSTER, "controller"), 0);
    uint8_t *h1 = NULL, *h2 = NULL, *p = NULL;
    size_t h1len, h2len, plen;
    bool both = false;
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    enum chan_rc rc =
        chan_take_hello(&r, which == 0 ? bytes : h1, which == 0 ? len : h1len, &h2, &h2len);
    if (rc == CHAN_OK) {
        rc = chan_take_hello(&i, which == 1 ? bytes : h2, which == 1 ? len : h2len, &p, &plen);
        if (rc == CHAN_OK) {
            rc = chan_take_proof(&r, which == 2 ? bytes : p, which == 2 ? len : plen);
            if (rc == CHAN_OK) {
                /* Established on both: they must at least agree on the session keys. */
                uint8_t f[4 + CHAN_TRAILER_LEN] = "ping";
                size_t inner;
                ck_assert_int_eq(chan_seal(&i, f, 4, f + 4), CHAN_OK);
                both = chan_open(&r, f, sizeof(f), &inner) == CHAN_OK;
            }
        }
    }
    free(h1);
    free(h2);
    free(p);
    chan_free(&i);
    chan_free(&r);
    return both;
}

/* The frames of one honest run, to tamper with copies of them. */
static void honest_frames(const struct keyring *kr, uint8_t **f, size_t *flen)
{
    struct hs h;
    handshake(&h, kr, kr);
    f[0] = h.h1, flen[0] = h.h1len;
    f[1] = h.h2, flen[1] = h.h2len;
    f[2] = h.p, flen[2] = h.plen;
    h.h1 = h.h2 = h.p = NULL;
    hs_free(&h);
}

START_TEST(test_every_bit_of_the_handshake)
{
    /*
     * The frames of another run, replayed with one bit flipped: a tampered frame of this
     * run's own would say the same of a flip, but replaying frames also shows they do not
     * work on a new run at all (fresh nonces).
     */
    struct clusterkey a = key_of(1), b = key_of(2);
    struct keyring kr;
    ring(&kr, &a, &b);
    uint8_t *f[3];
    size_t flen[3];
    honest_frames(&kr, f, flen);
    for (int which = 0; which < 3; which++)
        ck_assert_msg(!tampered_run(&kr, which, f[which], flen[which]),
                      "frame %d of another run accepted", which);
    free(f[0]);
    free(f[1]);
    free(f[2]);

    /*
     * Now each bit of each frame of the run itself. A flipped hello must be refused where
     * it lands or make the other side's proof fail; nothing may end established.
     */
    honest_frames(&kr, f, flen); /* the frames' lengths: the same in every run */
    free(f[0]);
    free(f[1]);
    free(f[2]);
    for (int which = 0; which < 3; which++) {
        size_t len = flen[which];
        for (size_t byte = 0; byte < len; byte++)
            for (int bit = 0; bit < 8; bit++) {
                /* Run a live handshake, flipping the bit in its own frame. */
                struct chan li, lr;
                ck_assert_int_eq(chan_init(&li, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
                ck_assert_int_eq(chan_init(&lr, CHAN_RESPONDER, &kr, CLUSTER, "controller"), 0);
                uint8_t *h1 = NULL, *h2 = NULL, *p = NULL;
                size_t h1len, h2len, plen;
                bool both = false;
                ck_assert_int_eq(chan_hello(&li, &h1, &h1len), CHAN_OK);
                if (which == 0)
                    h1[byte] ^= (uint8_t)(1u << bit);
                if (chan_take_hello(&lr, h1, h1len, &h2, &h2len) == CHAN_OK) {
                    if (which == 1)
                        h2[byte] ^= (uint8_t)(1u << bit);
                    if (chan_take_hello(&li, h2, h2len, &p, &plen) == CHAN_OK) {
                        if (which == 2)
                            p[byte] ^= (uint8_t)(1u << bit);
                        both = chan_take_proof(&lr, p, plen) == CHAN_OK;
                    }
                }
                ck_assert_msg(!both, "frame %d byte %zu bit %d flipped, yet established", which,
                              byte, bit);
                free(h1);
                free(h2);
                free(p);
                chan_free(&li);
                chan_free(&lr);
            }
    }
}
END_TEST

START_TEST(test_truncated_handshake)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    for (int which = 0; which < 3; which++) {
        for (size_t cut = 0;; cut++) {
            struct chan i, r;
            ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
            ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, CLUSTER, "controller"), 0);
            uint8_t *h1 = NULL, *h2 = NULL, *p = NULL;
            size_t h1len, h2len, plen, full = 0;
            bool both = false;
            ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
            if (which == 0)
                full = h1len, h1len = cut;
            if (chan_take_hello(&r, h1, h1len, &h2, &h2len) == CHAN_OK) {
                if (which == 1)
                    full = h2len, h2len = cut;
                if (chan_take_hello(&i, h2, h2len, &p, &plen) == CHAN_OK) {
                    if (which == 2)
                        full = plen, plen = cut;
                    both = chan_take_proof(&r, p, plen) == CHAN_OK;
                }
            }
            ck_assert_msg(!both, "frame %d cut to %zu bytes, yet established", which, cut);
            free(h1);
            free(h2);
            free(p);
            chan_free(&i);
            chan_free(&r);
            if (cut + 1 >= full)
                break;
        }
    }
}
END_TEST

static void drop_first_id(Spur__Auth__ChanHello *m)
{
    m->key_ids++;
    m->n_key_ids--;
}

START_TEST(test_stripped_newer_key)
{
    /*
     * Someone in between removes the initiator's newer key from its hello, so that the
     * responder settles for the older one: the initiator notices.
     */
    struct clusterkey oldk = key_of(1), newk = key_of(2);
    struct keyring kri, krr;
    ring(&kri, &newk, &oldk);
    ring(&krr, &oldk, &newk);
    struct chan i, r;
    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kri, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &krr, CLUSTER, "replica"), 0);
    uint8_t *h1, *h2, *p, *bad;
    size_t h1len, h2len, plen, blen;
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    bad = edit_hello(h1, h1len, drop_first_id, &blen);
    ck_assert_int_eq(chan_take_hello(&r, bad, blen, &h2, &h2len), CHAN_OK);
    ck_assert_str_eq(chan_key_id(&r), oldk.id_hex);
    ck_assert_int_eq(chan_take_hello(&i, h2, h2len, &p, &plen), CHAN_BAD_FRAME);
    ck_assert_ptr_nonnull(strstr(chan_why(&i), "not the first key we both hold"));
    free(bad);
    free(h1);
    free(h2);
    chan_free(&i);
    chan_free(&r);
}
END_TEST

START_TEST(test_replay_and_gap)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct hs h;
    size_t l0, l1, l2, inner;
    /* Replay. */
    handshake(&h, &kr, &kr);
    uint8_t *f0 = seal(&h.i, "zero", 4, &l0);
    uint8_t *f1 = seal(&h.i, "one", 3, &l1);
    uint8_t *f2 = seal(&h.i, "two", 3, &l2);
    assert_open(&h.r, f0, l0, "zero", 4);
    assert_open(&h.r, f1, l1, "one", 3);
    /* chan_open leaves the buffer as it was: reopen the same bytes. */
    ck_assert_int_eq(chan_open(&h.r, f0, l0, &inner), CHAN_REPLAY);
    ck_assert_str_eq(chan_why(&h.r), "frame sequence 0 replayed (expected 2)");
    ck_assert_int_eq(chan_open(&h.r, f2, l2, &inner), CHAN_STATE); /* closed for good */
    free(f0);
    free(f1);
    free(f2);
    hs_free(&h);

    /* Gap: a frame lost (or held back) in between. */
    handshake(&h, &kr, &kr);
    f0 = seal(&h.r, "zero", 4, &l0);
    f1 = seal(&h.r, "one", 3, &l1);
    f2 = seal(&h.r, "two", 3, &l2);
    assert_open(&h.i, f0, l0, "zero", 4);
    ck_assert_int_eq(chan_open(&h.i, f2, l2, &inner), CHAN_GAP);
    ck_assert_str_eq(chan_why(&h.i), "frame sequence 2 ahead (expected 1: frames lost)");
    free(f0);
    free(f1);
    free(f2);
    hs_free(&h);

    /* Reordered: the second first. */
    handshake(&h, &kr, &kr);
    f0 = seal(&h.i, "zero", 4, &l0);
    f1 = seal(&h.i, "one", 3, &l1);
    ck_assert_int_eq(chan_open(&h.r, f1, l1, &inner), CHAN_GAP);
    free(f0);
    free(f1);
    hs_free(&h);
}
END_TEST

START_TEST(test_reflected_and_foreign)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct hs h, h2;
    size_t l, inner;
    /* Reflected: the initiator's frame sent back to it (same sequence number 0). */
    handshake(&h, &kr, &kr);
    uint8_t *f = seal(&h.i, "reflect me", 10, &l);
    ck_assert_int_eq(chan_open(&h.i, f, l, &inner), CHAN_BAD_MAC);
    ck_assert_str_eq(chan_why(&h.i), "frame MAC does not verify (altered or forged)");
    free(f);
    hs_free(&h);
    /* And the responder's. */
    handshake(&h, &kr, &kr);
    f = seal(&h.r, "reflect me", 10, &l);
    ck_assert_int_eq(chan_open(&h.r, f, l, &inner), CHAN_BAD_MAC);
    free(f);
    hs_free(&h);

    /* From another connection between the same two, same key, same sequence number. */
    handshake(&h, &kr, &kr);
    handshake(&h2, &kr, &kr);
    size_t l2;
    f = seal(&h.i, "elsewhere", 9, &l);
    uint8_t *f2 = seal(&h2.r, "elsewhere", 9, &l2);
    ck_assert_int_eq(chan_open(&h2.r, f, l, &inner), CHAN_BAD_MAC);
    ck_assert_int_eq(chan_open(&h.i, f2, l2, &inner), CHAN_BAD_MAC);
    free(f);
    free(f2);
    hs_free(&h);
    hs_free(&h2);
}
END_TEST

START_TEST(test_sealed_frame_tampered)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    const char *msg = "a frame of the Raft log";
    size_t mlen = strlen(msg);
    size_t flen = mlen + CHAN_TRAILER_LEN;
    for (size_t byte = 0; byte < flen; byte++)
        for (int bit = 0; bit < 8; bit++) {
            struct hs h;
            handshake(&h, &kr, &kr);
            size_t l, inner;
            uint8_t *f = seal(&h.i, msg, mlen, &l);
            f[byte] ^= (uint8_t)(1u << bit);
            enum chan_rc rc = chan_open(&h.r, f, l, &inner);
            ck_assert_msg(rc == CHAN_BAD_MAC, "byte %zu bit %d: %s", byte, bit, chan_rc_name(rc));
            free(f);
            hs_free(&h);
        }
    /* Cut: shorter than a trailer is a bad frame; anything else a bad MAC. */
    for (size_t cut = 0; cut < flen; cut++) {
        struct hs h;
        handshake(&h, &kr, &kr);
        size_t l, inner;
        uint8_t *f = seal(&h.i, msg, mlen, &l);
        enum chan_rc rc = chan_open(&h.r, f, cut, &inner);
        ck_assert_int_eq(rc, cut < CHAN_TRAILER_LEN ? CHAN_BAD_FRAME : CHAN_BAD_MAC);
        free(f);
        hs_free(&h);
    }
}
END_TEST

/* The key both sides settled on for initiator ring kri and responder ring krr. */
static const char *settled(const struct keyring *kri, const struct keyring *krr, char *out)
{
    struct hs h;
    handshake(&h, kri, krr);
    ck_assert_str_eq(chan_key_id(&h.i), chan_key_id(&h.r));
    strcpy(out, chan_key_id(&h.i));
    /* And the frames go through under it. */
    size_t l;
    uint8_t *f = seal(&h.i, "k", 1, &l);
    assert_open(&h.r, f, l, "k", 1);
    free(f);
    hs_free(&h);
    return out;
}

START_TEST(test_rotation)
{
    struct clusterkey oldk = key_of(1), newk = key_of(2);
    struct keyring new_old, old_new, old_only, new_only;
    ring(&new_old, &newk, &oldk);
    ring(&old_new, &oldk, &newk);
    ring(&old_only, &oldk, NULL);
    ring(&new_only, &newk, NULL);
    char got[32];
    /* The initiator's order decides. */
    ck_assert_str_eq(settled(&new_old, &old_new, got), newk.id_hex);
    ck_assert_str_eq(settled(&old_new, &new_old, got), oldk.id_hex);
    ck_assert_str_eq(settled(&old_only, &new_old, got), oldk.id_hex);
    ck_assert_str_eq(settled(&new_old, &old_only, got), oldk.id_hex);
    ck_assert_str_eq(settled(&new_only, &old_new, got), newk.id_hex);
    ck_assert_str_eq(settled(&old_new, &new_only, got), newk.id_hex);

    /* No overlap at all. */
    struct chan i, r;
    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &new_only, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &old_only, CLUSTER, "replica"), 0);
    uint8_t *h1, *h2;
    size_t h1len, h2len;
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    ck_assert_int_eq(chan_take_hello(&r, h1, h1len, &h2, &h2len), CHAN_NO_COMMON_KEY);
    free(h1);
    free(h2);
    chan_free(&i);
    chan_free(&r);
}
END_TEST

START_TEST(test_out_of_order_calls)
{
    struct clusterkey a = key_of(1);
    struct keyring kr, none;
    ring(&kr, &a, NULL);
    memset(&none, 0, sizeof(none));
    struct chan c;
    ck_assert_int_eq(chan_init(&c, CHAN_INITIATOR, &none, CLUSTER, "replica"), -1);
    ck_assert_ptr_nonnull(strstr(chan_why(&c), "no cluster key"));
    ck_assert_int_eq(chan_init(&c, CHAN_INITIATOR, &kr, CLUSTER, "sixteen-letters!"), -1);
    ck_assert_int_eq(chan_init(&c, CHAN_INITIATOR, &kr, CLUSTER, ""), -1);
    ck_assert_int_eq(chan_init(&c, CHAN_INITIATOR, &kr, "a\nb", "replica"), -1);
    ck_assert_int_eq(chan_init(&c, CHAN_INITIATOR, &kr, CLUSTER, "fifteen-letters"), 0);
    chan_free(&c);

    struct chan i, r;
    uint8_t *h1, *h2, *p, t[CHAN_TRAILER_LEN];
    size_t h1len, h2len, plen, inner;
    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
    ck_assert_str_eq(chan_key_id(&i), "");
    ck_assert_int_eq(chan_hello(&r, &h1, &h1len), CHAN_STATE); /* responders do not */
    ck_assert_int_eq(chan_seal(&i, t, 0, t), CHAN_STATE);      /* not yet */
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    ck_assert_int_eq(chan_hello(&i, &h2, &h2len), CHAN_STATE); /* once */
    ck_assert_int_eq(chan_take_hello(&r, h1, h1len, &h2, &h2len), CHAN_OK);
    /* The responder seals nothing before the proof. */
    ck_assert_int_eq(chan_seal(&r, t, 0, t), CHAN_STATE);
    ck_assert_int_eq(chan_take_hello(&i, h2, h2len, &p, &plen), CHAN_OK);
    /* The initiator may send right after its proof; the responder takes none before it. */
    size_t l;
    uint8_t *f = seal(&i, "early", 5, &l);
    ck_assert_int_eq(chan_take_proof(&r, p, plen), CHAN_OK);
    assert_open(&r, f, l, "early", 5);
    free(f);
    ck_assert_int_eq(chan_take_proof(&r, p, plen), CHAN_STATE); /* once */
    free(h1);
    free(h2);
    free(p);
    chan_free(&i);
    chan_free(&r);

    ck_assert_int_eq(chan_init(&i, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_hello(&i, &h1, &h1len), CHAN_OK);
    ck_assert_int_eq(chan_take_hello(&r, h1, h1len, &h2, &h2len), CHAN_OK);
    ck_assert_int_eq(chan_open(&r, t, sizeof(t), &inner), CHAN_STATE);
    ck_assert(!chan_established(&r));
    free(h1);
    free(h2);
    chan_free(&i);
    chan_free(&r);
}
END_TEST

static char ugly[] = "bad\nthing \x1b[31m\"quoted\"";
static void ugly_error(Spur__Auth__ChanHello *m)
{
    m->error = ugly;
}

START_TEST(test_refusal_text_cleaned)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct hs h;
    memset(&h, 0, sizeof(h));
    ck_assert_int_eq(chan_init(&h.i, CHAN_INITIATOR, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_init(&h.r, CHAN_RESPONDER, &kr, CLUSTER, "replica"), 0);
    ck_assert_int_eq(chan_hello(&h.i, &h.h1, &h.h1len), CHAN_OK);
    ck_assert_int_eq(chan_take_hello(&h.r, h.h1, h.h1len, &h.h2, &h.h2len), CHAN_OK);
    size_t blen;
    uint8_t *bad = edit_hello(h.h2, h.h2len, ugly_error, &blen);
    ck_assert_int_eq(chan_take_hello(&h.i, bad, blen, &h.p, &h.plen), CHAN_REFUSED);
    ck_assert_str_eq(chan_why(&h.i), "refused by peer: bad?thing ?[31m\"quoted\"");
    free(bad);
    hs_free(&h);
}
END_TEST

/* ---- chan_ev ------------------------------------------------------------------------ */

/* Move the next whole frame of from into a malloc'd payload (a handshake frame). */
static uint8_t *take_raw(struct evbuffer *from, size_t *len)
{
    uint8_t *p = NULL;
    ck_assert_int_eq(frame_ev_take(from, CHAN_MAX_HELLO, &p, len), FRAME_READY);
    return p;
}

/* A handshake through two evbuffers, i->r and r->i. */
static void ev_handshake(struct chan *i, struct chan *r, const struct keyring *kr,
                         struct evbuffer *ir, struct evbuffer *ri)
{
    uint8_t *m, *got;
    size_t mlen, glen;
    ck_assert_int_eq(chan_init(i, CHAN_INITIATOR, kr, CLUSTER, "agent"), 0);
    ck_assert_int_eq(chan_init(r, CHAN_RESPONDER, kr, CLUSTER, "controller"), 0);
    ck_assert_int_eq(chan_hello(i, &m, &mlen), CHAN_OK);
    ck_assert_int_eq(chan_ev_add_raw(ir, m, mlen), 0);
    free(m);
    got = take_raw(ir, &glen);
    ck_assert_int_eq(chan_take_hello(r, got, glen, &m, &mlen), CHAN_OK);
    free(got);
    ck_assert_int_eq(chan_ev_add_raw(ri, m, mlen), 0);
    free(m);
    got = take_raw(ri, &glen);
    ck_assert_int_eq(chan_take_hello(i, got, glen, &m, &mlen), CHAN_OK);
    free(got);
    ck_assert_int_eq(chan_ev_add_raw(ir, m, mlen), 0);
    free(m);
    got = take_raw(ir, &glen);
    ck_assert_int_eq(chan_take_proof(r, got, glen), CHAN_OK);
    free(got);
}

START_TEST(test_ev_roundtrip)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct evbuffer *ir = evbuffer_new(), *ri = evbuffer_new();
    struct chan i, r;
    ev_handshake(&i, &r, &kr, ir, ri);

    /* Raw bytes, a small message and a large one (its own buffer), in one buffer. */
    ck_assert_int_eq(chan_ev_add(&i, ir, "hello", 5), 0);
    ck_assert_int_eq(chan_ev_add(&i, ir, "", 0), 0);
    static uint8_t blob[200000];
    for (size_t k = 0; k < sizeof(blob); k++)
        blob[k] = (uint8_t)(k * 31);
    Spur__Auth__ChanProof small = SPUR__AUTH__CHAN_PROOF__INIT,
                          large = SPUR__AUTH__CHAN_PROOF__INIT;
    small.proof.data = blob;
    small.proof.len = 100;
    large.proof.data = blob;
    large.proof.len = sizeof(blob);
    ck_assert_int_eq(chan_ev_add_message(&i, ir, &small.base), 0);
    ck_assert_int_eq(chan_ev_add_message(&i, ir, &large.base), 0);

    uint8_t *p;
    size_t len;
    enum chan_rc rc;
    ck_assert_int_eq(chan_ev_take(&r, ir, 1 << 20, &p, &len, &rc), FRAME_READY);
    ck_assert_uint_eq(len, 5);
    ck_assert_mem_eq(p, "hello", 5);
    free(p);
    ck_assert_int_eq(chan_ev_take(&r, ir, 1 << 20, &p, &len, &rc), FRAME_READY);
    ck_assert_uint_eq(len, 0);
    free(p);
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(chan_ev_take(&r, ir, 1 << 20, &p, &len, &rc), FRAME_READY);
        Spur__Auth__ChanProof *m = spur__auth__chan_proof__unpack(NULL, len, p);
        ck_assert_ptr_nonnull(m);
        ck_assert_uint_eq(m->proof.len, k == 0 ? 100 : sizeof(blob));
        ck_assert_mem_eq(m->proof.data, blob, m->proof.len);
        spur__auth__chan_proof__free_unpacked(m, NULL);
        free(p);
    }
    ck_assert_int_eq(chan_ev_take(&r, ir, 1 << 20, &p, &len, &rc), FRAME_NEED_MORE);
    ck_assert_uint_eq(evbuffer_get_length(ir), 0);

    /* The limit is the inner payload's: exactly max passes, max + 1 is refused unread. */
    ck_assert_int_eq(chan_ev_add(&r, ri, blob, 1000), 0);
    ck_assert_int_eq(chan_ev_take(&i, ri, 999, &p, &len, &rc), FRAME_TOO_BIG);
    ck_assert_uint_eq(len, 1000);
    ck_assert_int_eq(chan_ev_take(&i, ri, 1000, &p, &len, &rc), FRAME_READY);
    ck_assert_uint_eq(len, 1000);
    free(p);

    /* A frame arriving a byte at a time is waited for. */
    struct evbuffer *tmp = evbuffer_new();
    ck_assert_int_eq(chan_ev_add(&r, tmp, "slow", 4), 0);
    size_t total = evbuffer_get_length(tmp);
    for (size_t k = 0; k < total; k++) {
        ck_assert_int_eq(chan_ev_take(&i, ri, 100, &p, &len, &rc), FRAME_NEED_MORE);
        ck_assert_int_eq(evbuffer_remove_buffer(tmp, ri, 1), 1);
    }
    ck_assert_int_eq(chan_ev_take(&i, ri, 100, &p, &len, &rc), FRAME_READY);
    ck_assert_mem_eq(p, "slow", 4);
    free(p);
    evbuffer_free(tmp);

    chan_free(&i);
    chan_free(&r);
    evbuffer_free(ir);
    evbuffer_free(ri);
}
END_TEST

START_TEST(test_ev_tampered_refused)
{
    struct clusterkey a = key_of(1);
    struct keyring kr;
    ring(&kr, &a, NULL);
    struct evbuffer *ir = evbuffer_new(), *ri = evbuffer_new();
    struct chan i, r;
    ev_handshake(&i, &r, &kr, ir, ri);
    ck_assert_int_eq(chan_ev_add(&i, ir, "payload", 7), 0);
    ck_assert_int_eq(chan_ev_add(&i, ir, "next", 4), 0);
    /* Flip a byte of the first frame's payload in place. */
    uint8_t *front = evbuffer_pullup(ir, 8);
    front[FRAME_HEADER_LEN + 2] ^= 0x20;
    uint8_t *p = NULL;
    size_t len;
    enum chan_rc rc;
    ck_assert_int_eq(chan_ev_take(&r, ir, 100, &p, &len, &rc), CHAN_EV_REFUSED);
    ck_assert_int_eq(rc, CHAN_BAD_MAC);
    ck_assert_ptr_nonnull(strstr(chan_why(&r), "does not verify"));
    /* Drained: only the second frame is left; the channel is closed for it. */
    ck_assert_uint_eq(evbuffer_get_length(ir), FRAME_HEADER_LEN + 4 + CHAN_TRAILER_LEN);
    ck_assert_int_eq(chan_ev_take(&r, ir, 100, &p, &len, &rc), CHAN_EV_REFUSED);
    ck_assert_int_eq(rc, CHAN_STATE);

    /* Sealed frames on a channel not yet established are refused too. */
    struct chan fresh;
    ck_assert_int_eq(chan_init(&fresh, CHAN_RESPONDER, &kr, CLUSTER, "controller"), 0);
    ck_assert_int_eq(chan_ev_add(&fresh, ri, "x", 1), -1);
    ck_assert_uint_eq(evbuffer_get_length(ri), 0); /* nothing added */
    ck_assert_int_eq(chan_ev_add(&i, ri, "x", 1), 0);
    ck_assert_int_eq(chan_ev_take(&fresh, ri, 100, &p, &len, &rc), CHAN_EV_REFUSED);
    ck_assert_int_eq(rc, CHAN_STATE);
    chan_free(&fresh);

    chan_free(&i);
    chan_free(&r);
    evbuffer_free(ir);
    evbuffer_free(ri);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("chan");
    check_case(s, "handshake",
               (const TTest *[]){test_full_handshake, test_wrong_key, test_forged_proof,
                                 test_other_cluster, test_version, test_field_sizes_initiator_hello,
                                 test_field_sizes_responder_hello, test_oversized_and_garbage,
                                 test_stripped_newer_key, test_rotation, test_out_of_order_calls,
                                 test_refusal_text_cleaned, NULL});
    TCase *slow = check_case(
        s, "tamper",
        (const TTest *[]){test_every_bit_of_the_handshake, test_truncated_handshake, NULL});
    tcase_set_timeout(slow, 120);
    check_case(s, "frames",
               (const TTest *[]){test_replay_and_gap, test_reflected_and_foreign,
                                 test_sealed_frame_tampered, NULL});
    check_case(s, "chan_ev", (const TTest *[]){test_ev_roundtrip, test_ev_tampered_refused, NULL});
    return check_run(s);
}
