/*
 * chan.c - the cluster-key handshake and the per-frame MAC; protocol and contract in
 * chan.h, messages in proto/auth.proto.
 *
 * Encodings this file fixes (both ends must agree byte for byte):
 *   - field(x)  = u32 big-endian length of x, then x. Every string that goes into a MAC
 *     or the KDF is a field, so no two different tuples encode to the same bytes.
 *   - T         = field("spur-chan-1") field(cluster) field(role_i) field(role_r)
 *                 field(key_id) field(nonce_i) field(nonce_r) field(ids_i) field(ids_r)
 *     where ids_i and ids_r are the key ids of each side's hello, concatenated in their
 *     order. With them every field of both hellos is in T (version and the empty ones are
 *     checked), so no change to a hello, not even to the list of keys the responder did
 *     not choose, leaves the proofs valid.
 *   - proof_r   = HMAC-SHA-256(key, field("responder") T)
 *     proof_i   = HMAC-SHA-256(key, field("initiator") T)
 *   - k_ir      = HKDF-SHA-256(ikm key, salt nonce_i nonce_r, info field("spur-chan-1 i->r") T)
 *     k_ri      = the same with "spur-chan-1 r->i"; 32 bytes each.
 *   - frame tag = HMAC-SHA-256(k_dir, u64 big-endian seq, inner payload)[0..16)
 *
 * Checks, in the order a hello meets them: the magic and CHAN_MAX_HELLO, the protobuf,
 * the version (first, so a later version may change the rest), the size of every field,
 * the cluster, then the key. Every refusal leaves c->why in words for the operator and
 * puts the channel in CHAN_S_FAILED, after which every call returns CHAN_STATE. Text the
 * peer sent (its cluster name, its refusal) is reduced to printable ASCII before it goes
 * into c->why.
 *
 * Per frame the cost is one HMAC: each direction keeps an EVP_MAC_CTX keyed once at the
 * end of the handshake, and each frame works on an EVP_MAC_CTX_dup() of it (the HMAC's
 * inner and outer key blocks are already hashed in the copy), so no key schedule and no
 * provider fetch runs per frame.
 */
#include "chan.h"

#include "auth.pb-c.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAN_PROTO_LABEL "spur-chan-1"
#define CHAN_PROOF_LEN   32
#define CHAN_KEY_LEN     32
#define CHAN_MAX_KEY_IDS 8   /* more ids than any keyring holds: refused */
#define CHAN_MAX_ERROR   300 /* a refusal's text is cut to this */
#define CHAN_CLUSTER_MAX 127 /* sizeof(c->cluster) - 1 */

static const uint8_t chan_magic[CHAN_MAGIC_LEN] = {0x00, 'S', 'C', '1'};

struct chan_mac {
    EVP_MAC_CTX *keyed; /* keyed with k_dir; never finalised, only duplicated */
};

const char *chan_rc_name(enum chan_rc rc)
{
    switch (rc) {
    case CHAN_OK:
        return "ok";
    case CHAN_BAD_FRAME:
        return "bad_frame";
    case CHAN_BAD_VERSION:
        return "bad_version";
    case CHAN_OTHER_CLUSTER:
        return "other_cluster";
    case CHAN_NO_COMMON_KEY:
        return "no_common_key";
    case CHAN_BAD_PROOF:
        return "bad_proof";
    case CHAN_REFUSED:
        return "refused";
    case CHAN_BAD_MAC:
        return "bad_mac";
    case CHAN_REPLAY:
        return "replay";
    case CHAN_GAP:
        return "gap";
    case CHAN_STATE:
        return "state";
    case CHAN_NOMEM:
        return "nomem";
    case CHAN_CRYPTO:
        return "crypto";
    }
    return "unknown";
}

/* ---- small helpers ---------------------------------------------------------------- */

static void put_be64(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t get_be64(const uint8_t in[8])
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | in[i];
    return v;
}

static void hex(char *out, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    out[2 * n] = '\0';
}

/* Printable ASCII (space included), at most max bytes. */
static bool printable(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

/* Copy of text from a peer: printable ASCII only, cut to max bytes. */
static void clean_copy(char *dst, size_t dstlen, const char *src, size_t max)
{
    size_t n = 0;
    for (; src[n] != '\0' && n < max && n + 1 < dstlen; n++) {
        unsigned char ch = (unsigned char)src[n];
        dst[n] = (ch >= 0x20 && ch <= 0x7e) ? (char)ch : '?';
    }
    dst[n] = '\0';
}

static enum chan_rc fail(struct chan *c, enum chan_rc rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum chan_rc fail(struct chan *c, enum chan_rc rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
    c->state = CHAN_S_FAILED;
    return rc;
}

/* The transcript T, and the label-prefixed buffers built from it. */
struct tbuf {
    uint8_t b[768];
    size_t n;
};

static void t_field(struct tbuf *t, const void *p, size_t len)
{
    /* The fields are bounded (cluster 127, roles 15, ids 8, nonces 32): never full. */
    if (len > sizeof(t->b) - 4 - t->n)
        len = 0;
    t->b[t->n++] = (uint8_t)(len >> 24);
    t->b[t->n++] = (uint8_t)(len >> 16);
    t->b[t->n++] = (uint8_t)(len >> 8);
    t->b[t->n++] = (uint8_t)len;
    memcpy(t->b + t->n, p, len);
    t->n += len;
}

static void t_str(struct tbuf *t, const char *s)
{
    t_field(t, s, strlen(s));
}

/* field(ids) of a key id list. */
static void t_ids(struct tbuf *t, const uint8_t *const *ids, size_t n)
{
    uint8_t all[CHAN_MAX_KEY_IDS * CLUSTERKEY_ID_LEN];
    if (n > CHAN_MAX_KEY_IDS)
        n = CHAN_MAX_KEY_IDS; /* cannot happen: hellos with more are refused */
    for (size_t i = 0; i < n; i++)
        memcpy(all + i * CLUSTERKEY_ID_LEN, ids[i], CLUSTERKEY_ID_LEN);
    t_field(t, all, n * CLUSTERKEY_ID_LEN);
}

/*
 * The key ids of the peer's hello, which T binds; ours come from the keyring. Pointers
 * into the decoded hello, valid while it is.
 */
struct peer_ids {
    const uint8_t *id[CHAN_MAX_KEY_IDS];
    size_t n;
};

/* label | T into t. Needs c->key, both nonces and both roles. */
static void labelled_transcript(const struct chan *c, const struct peer_ids *peer,
                                const char *label, struct tbuf *t)
{
    const uint8_t *ours[CLUSTERKEY_MAX_KEYS];
    for (size_t i = 0; i < c->kr->n; i++)
        ours[i] = c->kr->keys[i].id;
    const char *role_i = c->side == CHAN_INITIATOR ? c->role : c->peer_role;
    const char *role_r = c->side == CHAN_INITIATOR ? c->peer_role : c->role;
    t->n = 0;
    t_str(t, label);
    t_str(t, CHAN_PROTO_LABEL);
    t_str(t, c->cluster);
    t_str(t, role_i);
    t_str(t, role_r);
    t_field(t, c->key->id, CLUSTERKEY_ID_LEN);
    t_field(t, c->nonce_i, CHAN_NONCE_LEN);
    t_field(t, c->nonce_r, CHAN_NONCE_LEN);
    if (c->side == CHAN_INITIATOR) {
        t_ids(t, ours, c->kr->n);
        t_ids(t, peer->id, peer->n);
    } else {
        t_ids(t, peer->id, peer->n);
        t_ids(t, ours, c->kr->n);
    }
}

static EVP_MAC_CTX *hmac_keyed(const uint8_t *key, size_t keylen)
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (mac == NULL)
        return NULL;
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac); /* the context holds its own reference */
    if (ctx == NULL)
        return NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    if (EVP_MAC_init(ctx, key, keylen, params) != 1) {
        EVP_MAC_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* HMAC-SHA-256(key, data) into out[32]. Returns 0 or -1. */
static int hmac_once(const uint8_t *key, size_t keylen, const uint8_t *data, size_t len,
                     uint8_t out[32])
{
    EVP_MAC_CTX *ctx = hmac_keyed(key, keylen);
    if (ctx == NULL)
        return -1;
    size_t outl = 0;
    int ok = EVP_MAC_update(ctx, data, len) == 1 && EVP_MAC_final(ctx, out, &outl, 32) == 1 &&
             outl == 32;
    EVP_MAC_CTX_free(ctx);
    return ok ? 0 : -1;
}

static int make_proof(const struct chan *c, const struct peer_ids *peer, const char *label,
                      uint8_t out[CHAN_PROOF_LEN])
{
    struct tbuf t;
    labelled_transcript(c, peer, label, &t);
    int rc = hmac_once(c->key->bytes, c->key->len, t.b, t.n, out);
    OPENSSL_cleanse(&t, sizeof(t));
    return rc;
}

/* One direction's MAC context from HKDF(key, nonce_i|nonce_r, label|T). */
static struct chan_mac *derive_mac(const struct chan *c, const struct peer_ids *peer,
                                   const char *label)
{
    struct tbuf info;
    labelled_transcript(c, peer, label, &info);
    uint8_t salt[2 * CHAN_NONCE_LEN];
    memcpy(salt, c->nonce_i, CHAN_NONCE_LEN);
    memcpy(salt + CHAN_NONCE_LEN, c->nonce_r, CHAN_NONCE_LEN);
    uint8_t k[CHAN_KEY_LEN];
    struct chan_mac *m = NULL;

    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kctx = kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
    EVP_KDF_free(kdf);
    if (kctx != NULL) {
        char digest[] = "SHA256";
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)c->key->bytes,
                                              c->key->len),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt, sizeof(salt)),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.b, info.n),
            OSSL_PARAM_construct_end()};
        if (EVP_KDF_derive(kctx, k, sizeof(k), params) == 1) {
            m = malloc(sizeof(*m));
            if (m != NULL) {
                m->keyed = hmac_keyed(k, sizeof(k));
                if (m->keyed == NULL) {
                    free(m);
                    m = NULL;
                }
            }
        }
        EVP_KDF_CTX_free(kctx);
    }
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(&info, sizeof(info));
    return m;
}

static void mac_free(struct chan_mac *m)
{
    if (m == NULL)
        return;
    EVP_MAC_CTX_free(m->keyed); /* OpenSSL wipes the key blocks */
    free(m);
}

/* Both directions; on the initiator send = i->r, on the responder send = r->i. */
static enum chan_rc derive_keys(struct chan *c, const struct peer_ids *peer)
{
    struct chan_mac *ir = derive_mac(c, peer, CHAN_PROTO_LABEL " i->r");
    struct chan_mac *ri = derive_mac(c, peer, CHAN_PROTO_LABEL " r->i");
    if (ir == NULL || ri == NULL) {
        mac_free(ir);
        mac_free(ri);
        return fail(c, CHAN_CRYPTO, "cannot derive the session keys: OpenSSL failed");
    }
    c->send = c->side == CHAN_INITIATOR ? ir : ri;
    c->recv = c->side == CHAN_INITIATOR ? ri : ir;
    c->send_seq = 0;
    c->recv_seq = 0;
    return CHAN_OK;
}

/* The tag of (seq, p) under m into tag[32]. Returns 0 or -1. */
static int frame_tag(const struct chan_mac *m, uint64_t seq, const uint8_t *p, size_t len,
                     uint8_t tag[32])
{
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(m->keyed);
    if (ctx == NULL)
        return -1;
    uint8_t s[CHAN_SEQ_LEN];
    put_be64(s, seq);
    size_t outl = 0;
    int ok = EVP_MAC_update(ctx, s, sizeof(s)) == 1 &&
             (len == 0 || EVP_MAC_update(ctx, p, len) == 1) &&
             EVP_MAC_final(ctx, tag, &outl, 32) == 1 && outl == 32;
    EVP_MAC_CTX_free(ctx);
    return ok ? 0 : -1;
}

/* ---- messages ----------------------------------------------------------------------- */

/* magic | packed hello, malloc'd. */
static enum chan_rc pack_hello(const Spur__Auth__ChanHello *h, uint8_t **out, size_t *outlen)
{
    size_t n = spur__auth__chan_hello__get_packed_size(h);
    uint8_t *p = malloc(CHAN_MAGIC_LEN + n);
    if (p == NULL)
        return CHAN_NOMEM;
    memcpy(p, chan_magic, CHAN_MAGIC_LEN);
    spur__auth__chan_hello__pack(h, p + CHAN_MAGIC_LEN);
    *out = p;
    *outlen = CHAN_MAGIC_LEN + n;
    return CHAN_OK;
}

/* Our key ids, for a hello (points into the keyring). */
static void our_key_ids(const struct chan *c, ProtobufCBinaryData ids[CLUSTERKEY_MAX_KEYS],
                        Spur__Auth__ChanHello *h)
{
    for (size_t i = 0; i < c->kr->n; i++) {
        ids[i].data = (uint8_t *)c->kr->keys[i].id;
        ids[i].len = CLUSTERKEY_ID_LEN;
    }
    h->n_key_ids = c->kr->n;
    h->key_ids = ids;
}

/*
 * Responder: a hello carrying text, to send before closing. Best effort: when it cannot be
 * made (out of memory), *out stays NULL and the caller just closes.
 */
static void refusal(struct chan *c, const char *text, uint8_t **out, size_t *outlen)
{
    Spur__Auth__ChanHello h = SPUR__AUTH__CHAN_HELLO__INIT;
    ProtobufCBinaryData ids[CLUSTERKEY_MAX_KEYS];
    char msg[CHAN_MAX_ERROR + 1];
    clean_copy(msg, sizeof(msg), text, CHAN_MAX_ERROR);
    h.version = CHAN_VERSION;
    h.cluster_name = c->cluster;
    h.role = c->role;
    our_key_ids(c, ids, &h);
    h.error = msg;
    if (pack_hello(&h, out, outlen) != CHAN_OK) {
        *out = NULL;
        *outlen = 0;
    }
}

/* The hello after the magic, or NULL (c->why says why). */
static Spur__Auth__ChanHello *unpack_hello(struct chan *c, const uint8_t *payload, size_t len)
{
    if (len > CHAN_MAX_HELLO) {
        fail(c, CHAN_BAD_FRAME, "handshake frame of %zu bytes, more than %d", len, CHAN_MAX_HELLO);
        return NULL;
    }
    if (!chan_is_handshake(payload, len)) {
        fail(c, CHAN_BAD_FRAME, "not a handshake frame (no chan magic)");
        return NULL;
    }
    Spur__Auth__ChanHello *h =
        spur__auth__chan_hello__unpack(NULL, len - CHAN_MAGIC_LEN, payload + CHAN_MAGIC_LEN);
    if (h == NULL)
        fail(c, CHAN_BAD_FRAME, "undecodable hello");
    return h;
}

/*
 * The fields every hello has: cluster, role, key ids, nonce. Returns CHAN_OK or
 * CHAN_BAD_FRAME with c->why (not yet failed: the responder still answers).
 */
static enum chan_rc check_common(struct chan *c, const Spur__Auth__ChanHello *h)
{
    if (!printable(h->cluster_name, CHAN_CLUSTER_MAX)) {
        snprintf(c->why, sizeof(c->why), "bad hello: cluster name not printable or over %d bytes",
                 CHAN_CLUSTER_MAX);
        return CHAN_BAD_FRAME;
    }
    if (h->role[0] == '\0' || !printable(h->role, CHAN_ROLE_MAX - 1)) {
        snprintf(c->why, sizeof(c->why), "bad hello: role empty, not printable or over %d bytes",
                 CHAN_ROLE_MAX - 1);
        return CHAN_BAD_FRAME;
    }
    if (h->n_key_ids == 0 || h->n_key_ids > CHAN_MAX_KEY_IDS) {
        snprintf(c->why, sizeof(c->why), "bad hello: %zu key ids (want 1 to %d)", h->n_key_ids,
                 CHAN_MAX_KEY_IDS);
        return CHAN_BAD_FRAME;
    }
    for (size_t i = 0; i < h->n_key_ids; i++)
        if (h->key_ids[i].len != CLUSTERKEY_ID_LEN) {
            snprintf(c->why, sizeof(c->why), "bad hello: key id of %zu bytes (want %d)",
                     h->key_ids[i].len, CLUSTERKEY_ID_LEN);
            return CHAN_BAD_FRAME;
        }
    if (h->nonce.len != CHAN_NONCE_LEN) {
        snprintf(c->why, sizeof(c->why), "bad hello: nonce of %zu bytes (want %d)", h->nonce.len,
                 CHAN_NONCE_LEN);
        return CHAN_BAD_FRAME;
    }
    return CHAN_OK;
}

/* "a1b2...,c3d4..." of a hello's key ids (checked to be CLUSTERKEY_ID_LEN each). */
static void hello_ids(const Spur__Auth__ChanHello *h, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < h->n_key_ids && used + 2 * CLUSTERKEY_ID_LEN + 2 <= outlen; i++) {
        if (i > 0)
            out[used++] = ',';
        hex(out + used, h->key_ids[i].data, CLUSTERKEY_ID_LEN);
        used += 2 * CLUSTERKEY_ID_LEN;
    }
}

static void hello_peer_ids(const Spur__Auth__ChanHello *h, struct peer_ids *peer)
{
    peer->n = h->n_key_ids <= CHAN_MAX_KEY_IDS ? h->n_key_ids : CHAN_MAX_KEY_IDS;
    for (size_t i = 0; i < peer->n; i++)
        peer->id[i] = h->key_ids[i].data;
}

/* ---- the API ------------------------------------------------------------------------ */

int chan_init(struct chan *c, enum chan_side side, const struct keyring *kr,
              const char *cluster_name, const char *role)
{
    memset(c, 0, sizeof(*c));
    c->side = side;
    c->kr = kr;
    c->state = CHAN_S_FAILED;
    if (kr == NULL || kr->n == 0) {
        snprintf(c->why, sizeof(c->why), "no cluster key loaded");
        return -1;
    }
    if (cluster_name == NULL || !printable(cluster_name, CHAN_CLUSTER_MAX)) {
        snprintf(c->why, sizeof(c->why), "cluster name missing, not printable or over %d bytes",
                 CHAN_CLUSTER_MAX);
        return -1;
    }
    if (role == NULL || role[0] == '\0' || !printable(role, CHAN_ROLE_MAX - 1)) {
        snprintf(c->why, sizeof(c->why), "role missing, not printable or over %d bytes",
                 CHAN_ROLE_MAX - 1);
        return -1;
    }
    snprintf(c->cluster, sizeof(c->cluster), "%s", cluster_name);
    snprintf(c->role, sizeof(c->role), "%s", role);
    c->state = CHAN_S_NEW;
    return 0;
}

void chan_free(struct chan *c)
{
    mac_free(c->send);
    mac_free(c->recv);
    c->send = c->recv = NULL;
    OPENSSL_cleanse(c->nonce_i, sizeof(c->nonce_i));
    OPENSSL_cleanse(c->nonce_r, sizeof(c->nonce_r));
    OPENSSL_cleanse(c->expect_proof, sizeof(c->expect_proof));
    c->key = NULL;
    c->state = CHAN_S_FAILED;
}

bool chan_is_handshake(const uint8_t *payload, size_t len)
{
    return len >= CHAN_MAGIC_LEN && memcmp(payload, chan_magic, CHAN_MAGIC_LEN) == 0;
}

bool chan_established(const struct chan *c)
{
    return c->state == CHAN_S_ESTABLISHED;
}

const char *chan_key_id(const struct chan *c)
{
    return c->key != NULL ? c->key->id_hex : "";
}

const char *chan_why(const struct chan *c)
{
    return c->why;
}

enum chan_rc chan_hello(struct chan *c, uint8_t **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    if (c->side != CHAN_INITIATOR || c->state != CHAN_S_NEW) {
        snprintf(c->why, sizeof(c->why), "chan_hello: not a new initiator");
        return CHAN_STATE;
    }
    if (RAND_bytes(c->nonce_i, CHAN_NONCE_LEN) != 1)
        return fail(c, CHAN_CRYPTO, "no random bytes from OpenSSL");
    Spur__Auth__ChanHello h = SPUR__AUTH__CHAN_HELLO__INIT;
    ProtobufCBinaryData ids[CLUSTERKEY_MAX_KEYS];
    h.version = CHAN_VERSION;
    h.cluster_name = c->cluster;
    h.role = c->role;
    our_key_ids(c, ids, &h);
    h.nonce.data = c->nonce_i;
    h.nonce.len = CHAN_NONCE_LEN;
    if (pack_hello(&h, out, outlen) != CHAN_OK)
        return fail(c, CHAN_NOMEM, "out of memory");
    c->state = CHAN_S_HELLO_SENT;
    return CHAN_OK;
}

/* Responder: the initiator's hello. */
static enum chan_rc responder_take_hello(struct chan *c, const Spur__Auth__ChanHello *h,
                                         uint8_t **out, size_t *outlen)
{
    char ours[64], theirs[8 * (2 * CLUSTERKEY_ID_LEN + 1) + 1];
    char text[CHAN_MAX_ERROR + 1];
    enum chan_rc rc;

    if (h->version != CHAN_VERSION) {
        snprintf(text, sizeof(text), "the responder speaks chan version %d, you sent %u",
                 CHAN_VERSION, h->version);
        rc = fail(c, CHAN_BAD_VERSION, "peer speaks chan version %u, we speak %d", h->version,
                  CHAN_VERSION);
        refusal(c, text, out, outlen);
        return rc;
    }
    rc = check_common(c, h);
    if (rc == CHAN_OK && (h->key_id.len != 0 || h->proof.len != 0 || h->error[0] != '\0')) {
        snprintf(c->why, sizeof(c->why),
                 "bad hello: an initiator's hello with a key, a proof or an error");
        rc = CHAN_BAD_FRAME;
    }
    if (rc != CHAN_OK) {
        c->state = CHAN_S_FAILED;
        refusal(c, c->why, out, outlen);
        return rc;
    }
    if (strcmp(h->cluster_name, c->cluster) != 0) {
        snprintf(text, sizeof(text), "the responder is of cluster \"%s\", you are of \"%s\"",
                 c->cluster, h->cluster_name);
        rc = fail(c, CHAN_OTHER_CLUSTER, "peer is of cluster \"%s\", we are of \"%s\"",
                  h->cluster_name, c->cluster);
        refusal(c, text, out, outlen);
        return rc;
    }
    snprintf(c->peer_role, sizeof(c->peer_role), "%s", h->role);
    /* The first key of the initiator's list that we hold. */
    c->key = NULL;
    for (size_t i = 0; i < h->n_key_ids && c->key == NULL; i++)
        c->key = keyring_find(c->kr, h->key_ids[i].data);
    if (c->key == NULL) {
        keyring_ids(c->kr, ours, sizeof(ours));
        hello_ids(h, theirs, sizeof(theirs));
        snprintf(text, sizeof(text), "no common cluster key (the responder's: %s, yours: %s)", ours,
                 theirs);
        rc = fail(c, CHAN_NO_COMMON_KEY, "no common cluster key (ours: %s, theirs: %s)", ours,
                  theirs);
        refusal(c, text, out, outlen);
        return rc;
    }
    memcpy(c->nonce_i, h->nonce.data, CHAN_NONCE_LEN);
    if (RAND_bytes(c->nonce_r, CHAN_NONCE_LEN) != 1)
        return fail(c, CHAN_CRYPTO, "no random bytes from OpenSSL");

    struct peer_ids peer;
    hello_peer_ids(h, &peer);
    uint8_t proof_r[CHAN_PROOF_LEN];
    if (make_proof(c, &peer, "responder", proof_r) != 0 ||
        make_proof(c, &peer, "initiator", c->expect_proof) != 0)
        return fail(c, CHAN_CRYPTO, "cannot compute the proof: OpenSSL failed");
    rc = derive_keys(c, &peer);
    if (rc != CHAN_OK)
        return rc;

    Spur__Auth__ChanHello r = SPUR__AUTH__CHAN_HELLO__INIT;
    ProtobufCBinaryData ids[CLUSTERKEY_MAX_KEYS];
    r.version = CHAN_VERSION;
    r.cluster_name = c->cluster;
    r.role = c->role;
    our_key_ids(c, ids, &r);
    r.nonce.data = c->nonce_r;
    r.nonce.len = CHAN_NONCE_LEN;
    r.key_id.data = (uint8_t *)c->key->id;
    r.key_id.len = CLUSTERKEY_ID_LEN;
    r.proof.data = proof_r;
    r.proof.len = CHAN_PROOF_LEN;
    rc = pack_hello(&r, out, outlen);
    OPENSSL_cleanse(proof_r, sizeof(proof_r));
    if (rc != CHAN_OK)
        return fail(c, CHAN_NOMEM, "out of memory");
    c->state = CHAN_S_PROOF_WAIT;
    return CHAN_OK;
}

/* Initiator: the responder's hello (or its refusal). */
static enum chan_rc initiator_take_hello(struct chan *c, const Spur__Auth__ChanHello *h,
                                         uint8_t **out, size_t *outlen)
{
    char text[CHAN_MAX_ERROR + 1];
    if (h->error[0] != '\0') {
        clean_copy(text, sizeof(text), h->error, CHAN_MAX_ERROR);
        return fail(c, CHAN_REFUSED, "refused by peer: %s", text);
    }
    if (h->version != CHAN_VERSION)
        return fail(c, CHAN_BAD_VERSION, "peer speaks chan version %u, we speak %d", h->version,
                    CHAN_VERSION);
    enum chan_rc rc = check_common(c, h);
    if (rc != CHAN_OK) {
        c->state = CHAN_S_FAILED;
        return rc;
    }
    if (h->key_id.len != CLUSTERKEY_ID_LEN)
        return fail(c, CHAN_BAD_FRAME, "bad hello: chosen key id of %zu bytes (want %d)",
                    h->key_id.len, CLUSTERKEY_ID_LEN);
    if (h->proof.len != CHAN_PROOF_LEN)
        return fail(c, CHAN_BAD_FRAME, "bad hello: proof of %zu bytes (want %d)", h->proof.len,
                    CHAN_PROOF_LEN);
    if (strcmp(h->cluster_name, c->cluster) != 0) {
        clean_copy(text, sizeof(text), h->cluster_name, CHAN_CLUSTER_MAX);
        return fail(c, CHAN_OTHER_CLUSTER, "peer is of cluster \"%s\", we are of \"%s\"", text,
                    c->cluster);
    }
    char chosen[2 * CLUSTERKEY_ID_LEN + 1], ours[64];
    hex(chosen, h->key_id.data, CLUSTERKEY_ID_LEN);
    c->key = keyring_find(c->kr, h->key_id.data);
    if (c->key == NULL) {
        keyring_ids(c->kr, ours, sizeof(ours));
        return fail(c, CHAN_NO_COMMON_KEY,
                    "peer chose cluster key %s, which we do not hold (ours: %s)", chosen, ours);
    }
    /*
     * The responder must have chosen the first of our keys that it lists: anything else is
     * a broken peer, or someone in between who removed our newer key from our hello.
     */
    const struct clusterkey *first = NULL;
    for (size_t i = 0; i < c->kr->n && first == NULL; i++)
        for (size_t j = 0; j < h->n_key_ids; j++)
            if (memcmp(c->kr->keys[i].id, h->key_ids[j].data, CLUSTERKEY_ID_LEN) == 0) {
                first = &c->kr->keys[i];
                break;
            }
    if (first != c->key)
        return fail(c, CHAN_BAD_FRAME,
                    "peer chose cluster key %s, not the first key we both hold (%s)", chosen,
                    first != NULL ? first->id_hex : "none");
    snprintf(c->peer_role, sizeof(c->peer_role), "%s", h->role);
    memcpy(c->nonce_r, h->nonce.data, CHAN_NONCE_LEN);

    struct peer_ids peer;
    hello_peer_ids(h, &peer);
    uint8_t want[CHAN_PROOF_LEN], proof_i[CHAN_PROOF_LEN];
    if (make_proof(c, &peer, "responder", want) != 0)
        return fail(c, CHAN_CRYPTO, "cannot compute the proof: OpenSSL failed");
    int same = CRYPTO_memcmp(want, h->proof.data, CHAN_PROOF_LEN) == 0;
    OPENSSL_cleanse(want, sizeof(want));
    if (!same)
        return fail(c, CHAN_BAD_PROOF, "peer did not prove the cluster key %s (wrong key file?)",
                    c->key->id_hex);
    if (make_proof(c, &peer, "initiator", proof_i) != 0)
        return fail(c, CHAN_CRYPTO, "cannot compute the proof: OpenSSL failed");
    rc = derive_keys(c, &peer);
    if (rc != CHAN_OK) {
        OPENSSL_cleanse(proof_i, sizeof(proof_i));
        return rc;
    }
    Spur__Auth__ChanProof p = SPUR__AUTH__CHAN_PROOF__INIT;
    p.proof.data = proof_i;
    p.proof.len = CHAN_PROOF_LEN;
    size_t n = spur__auth__chan_proof__get_packed_size(&p);
    uint8_t *buf = malloc(CHAN_MAGIC_LEN + n);
    if (buf == NULL) {
        OPENSSL_cleanse(proof_i, sizeof(proof_i));
        return fail(c, CHAN_NOMEM, "out of memory");
    }
    memcpy(buf, chan_magic, CHAN_MAGIC_LEN);
    spur__auth__chan_proof__pack(&p, buf + CHAN_MAGIC_LEN);
    OPENSSL_cleanse(proof_i, sizeof(proof_i));
    *out = buf;
    *outlen = CHAN_MAGIC_LEN + n;
    c->why[0] = '\0';
    c->state = CHAN_S_ESTABLISHED;
    return CHAN_OK;
}

enum chan_rc chan_take_hello(struct chan *c, const uint8_t *payload, size_t len, uint8_t **out,
                             size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    bool want = c->side == CHAN_RESPONDER ? c->state == CHAN_S_NEW : c->state == CHAN_S_HELLO_SENT;
    if (!want) {
        snprintf(c->why, sizeof(c->why), "a hello out of turn");
        c->state = CHAN_S_FAILED;
        return CHAN_STATE;
    }
    Spur__Auth__ChanHello *h = unpack_hello(c, payload, len);
    if (h == NULL) {
        if (c->side == CHAN_RESPONDER)
            refusal(c, c->why, out, outlen);
        return CHAN_BAD_FRAME;
    }
    enum chan_rc rc = c->side == CHAN_RESPONDER ? responder_take_hello(c, h, out, outlen)
                                                : initiator_take_hello(c, h, out, outlen);
    spur__auth__chan_hello__free_unpacked(h, NULL);
    return rc;
}

enum chan_rc chan_take_proof(struct chan *c, const uint8_t *payload, size_t len)
{
    if (c->side != CHAN_RESPONDER || c->state != CHAN_S_PROOF_WAIT) {
        snprintf(c->why, sizeof(c->why), "a proof out of turn");
        c->state = CHAN_S_FAILED;
        return CHAN_STATE;
    }
    if (len > CHAN_MAX_HELLO)
        return fail(c, CHAN_BAD_FRAME, "handshake frame of %zu bytes, more than %d", len,
                    CHAN_MAX_HELLO);
    if (!chan_is_handshake(payload, len))
        return fail(c, CHAN_BAD_FRAME, "not a handshake frame (no chan magic)");
    Spur__Auth__ChanProof *p =
        spur__auth__chan_proof__unpack(NULL, len - CHAN_MAGIC_LEN, payload + CHAN_MAGIC_LEN);
    if (p == NULL)
        return fail(c, CHAN_BAD_FRAME, "undecodable proof");
    enum chan_rc rc = CHAN_OK;
    if (p->proof.len != CHAN_PROOF_LEN)
        rc =
            fail(c, CHAN_BAD_FRAME, "bad proof: %zu bytes (want %d)", p->proof.len, CHAN_PROOF_LEN);
    else if (CRYPTO_memcmp(p->proof.data, c->expect_proof, CHAN_PROOF_LEN) != 0)
        rc = fail(c, CHAN_BAD_PROOF, "peer did not prove the cluster key %s (wrong key file?)",
                  c->key->id_hex);
    spur__auth__chan_proof__free_unpacked(p, NULL);
    OPENSSL_cleanse(c->expect_proof, sizeof(c->expect_proof));
    if (rc != CHAN_OK)
        return rc;
    c->why[0] = '\0';
    c->state = CHAN_S_ESTABLISHED;
    return CHAN_OK;
}

enum chan_rc chan_seal(struct chan *c, const uint8_t *p, size_t len,
                       uint8_t trailer[CHAN_TRAILER_LEN])
{
    if (c->state != CHAN_S_ESTABLISHED) {
        snprintf(c->why, sizeof(c->why), "chan_seal before the handshake ended");
        return CHAN_STATE;
    }
    if (c->send_seq == UINT64_MAX)
        return fail(c, CHAN_STATE, "send sequence exhausted");
    uint8_t tag[32];
    if (frame_tag(c->send, c->send_seq, p, len, tag) != 0)
        return fail(c, CHAN_CRYPTO, "cannot compute a frame MAC: OpenSSL failed");
    put_be64(trailer, c->send_seq);
    memcpy(trailer + CHAN_SEQ_LEN, tag, CHAN_TAG_LEN);
    c->send_seq++;
    return CHAN_OK;
}

enum chan_rc chan_open(struct chan *c, const uint8_t *payload, size_t len, size_t *inner_len)
{
    if (c->state != CHAN_S_ESTABLISHED) {
        snprintf(c->why, sizeof(c->why), "a sealed frame before the handshake ended");
        c->state = CHAN_S_FAILED;
        return CHAN_STATE;
    }
    if (len < CHAN_TRAILER_LEN)
        return fail(c, CHAN_BAD_FRAME, "sealed frame of %zu bytes, shorter than its trailer", len);
    size_t n = len - CHAN_TRAILER_LEN;
    const uint8_t *trailer = payload + n;
    uint64_t seq = get_be64(trailer);
    uint8_t tag[32];
    /*
     * The MAC first: only an authentic frame's sequence number is worth a word, so a forged
     * one reads "does not verify", a replayed authentic one "replayed".
     */
    if (frame_tag(c->recv, seq, payload, n, tag) != 0)
        return fail(c, CHAN_CRYPTO, "cannot compute a frame MAC: OpenSSL failed");
    if (CRYPTO_memcmp(tag, trailer + CHAN_SEQ_LEN, CHAN_TAG_LEN) != 0)
        return fail(c, CHAN_BAD_MAC, "frame MAC does not verify (altered or forged)");
    if (seq < c->recv_seq)
        return fail(c, CHAN_REPLAY, "frame sequence %llu replayed (expected %llu)",
                    (unsigned long long)seq, (unsigned long long)c->recv_seq);
    if (seq > c->recv_seq)
        return fail(c, CHAN_GAP, "frame sequence %llu ahead (expected %llu: frames lost)",
                    (unsigned long long)seq, (unsigned long long)c->recv_seq);
    c->recv_seq++;
    *inner_len = n;
    return CHAN_OK;
}
