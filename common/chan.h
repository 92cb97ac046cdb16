/*
 * chan.h - authenticated channels between members of one cluster: a mutual proof of the
 * cluster key, then a MAC on every frame. Pure: no I/O, no clock; randomness from
 * RAND_bytes(). Used on every connection between replicas (peer port), from the
 * forwarder and from agents to the client API, and from the leader to spurd. The
 * libevent adapter is chan_ev.h; the blocking client (spurclient.c) uses this directly.
 *
 * The handshake (proto/auth.proto), three frames, initiator I (who dialled) and responder R:
 *
 *     I -> R  Hello{version, cluster, role_i, key ids of I (current first), nonce_i}
 *     R -> I  Hello{version, cluster, role_r, key ids of R, nonce_r, key_id, proof_r}
 *             (or Hello{error}: R refuses and closes; I logs the reason)
 *     I -> R  Proof{proof_i}
 *
 *   key     = the first key in I's list that R holds (keyring.h); none: R refuses,
 *             "no common cluster key (ours: ID, theirs: ID)", on both sides' logs
 *   T       = transcript: "spur-chan-1" | cluster | role_i | role_r | key_id | nonce_i |
 *             nonce_r | key ids of I | key ids of R, each field length-prefixed (chan.c),
 *             so a hello altered in any field, the key lists included, fails the proofs
 *   proof_r = HMAC-SHA-256(key, "responder" | T),  proof_i = HMAC-SHA-256(key, "initiator" | T)
 *   k_ir, k_ri = HKDF-SHA-256(key, salt = nonce_i | nonce_r, info = "spur-chan-1 i->r" | T
 *             and "spur-chan-1 r->i" | T), 32 bytes each: one key per direction, so a
 *             frame reflected back to its sender does not verify.
 *
 * Both nonces are 32 fresh random bytes, so a recorded handshake or frame of another
 * connection never verifies on a new one. I may send sealed frames right after its Proof;
 * R accepts none before it has checked the Proof, and sends none before either.
 *
 * Frames after the handshake: frame.h's frames whose payload is
 *
 *     +-----------------+------------------+---------------------------------------+
 *     | inner payload   | seq: u64, big end| tag: first 16 bytes of HMAC-SHA-256(   |
 *     |                 |                  |   k_dir, seq | inner payload)        |
 *     +-----------------+------------------+---------------------------------------+
 *
 * The sequence numbers of each direction are 0, 1, 2, ...; the receiver accepts exactly
 * the next one, so a frame replayed, dropped, reordered or spliced from another
 * connection is refused (CHAN_REPLAY, CHAN_GAP, CHAN_BAD_MAC), and the caller closes the
 * connection. HMAC and HKDF are OpenSSL's (EVP_MAC, EVP_KDF), never hand-written.
 *
 * Ownership: struct chan is the caller's (embedded); chan_free() releases its OpenSSL
 * contexts and wipes its keys. It borrows the keyring, which must outlive it. Messages
 * chan_*() produce are malloc'd, the caller's to free.
 */
#ifndef SPUR_CHAN_H
#define SPUR_CHAN_H

#include "clusterkey.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHAN_VERSION 1
#define CHAN_MAGIC_LEN 4   /* "\0SC1": the first bytes of a handshake frame's payload */
#define CHAN_NONCE_LEN 32
#define CHAN_TAG_LEN 16
#define CHAN_SEQ_LEN 8
#define CHAN_TRAILER_LEN (CHAN_SEQ_LEN + CHAN_TAG_LEN)
#define CHAN_MAX_HELLO 1024 /* a handshake frame is refused above this */
#define CHAN_ROLE_MAX 16

enum chan_side { CHAN_INITIATOR, CHAN_RESPONDER };

enum chan_rc {
    CHAN_OK = 0,
    CHAN_BAD_FRAME = -1,     /* undecodable, truncated, no magic, a field of the wrong size */
    CHAN_BAD_VERSION = -2,   /* another CHAN_VERSION */
    CHAN_OTHER_CLUSTER = -3, /* the hello names another cluster */
    CHAN_NO_COMMON_KEY = -4, /* no key both hold */
    CHAN_BAD_PROOF = -5,     /* the peer does not hold the key it claims */
    CHAN_REFUSED = -6,       /* the responder refused (its error is in chan_why()) */
    CHAN_BAD_MAC = -7,       /* a frame altered, forged, or sealed under another key */
    CHAN_REPLAY = -8,        /* a sequence number already seen */
    CHAN_GAP = -9,           /* a sequence number ahead of the next one */
    CHAN_STATE = -10,        /* called out of order (e.g. chan_open() before the handshake) */
    CHAN_NOMEM = -11,
    CHAN_CRYPTO = -12,       /* OpenSSL failed */
};
const char *chan_rc_name(enum chan_rc rc);

enum chan_state {
    CHAN_S_NEW = 0,       /* initiator: hello not made yet; responder: waiting for hello */
    CHAN_S_HELLO_SENT,    /* initiator: waiting for the responder's hello */
    CHAN_S_PROOF_WAIT,    /* responder: its hello sent, waiting for the proof */
    CHAN_S_ESTABLISHED,
    CHAN_S_FAILED,
};

struct chan_mac; /* OpenSSL state, chan.c's */

struct chan {
    enum chan_side side;
    enum chan_state state;
    const struct keyring *kr; /* borrowed */
    char cluster[128];
    char role[CHAN_ROLE_MAX];      /* ours */
    char peer_role[CHAN_ROLE_MAX]; /* theirs, once known */
    uint8_t nonce_i[CHAN_NONCE_LEN], nonce_r[CHAN_NONCE_LEN];
    const struct clusterkey *key; /* the key chosen, once known */
    uint8_t expect_proof[32];     /* responder: the initiator's proof it waits for */
    struct chan_mac *send, *recv;
    uint64_t send_seq, recv_seq;
    char why[256]; /* the last failure in words, for the caller's log line */
};

/* Set up c. role: "replica", "agent" or "controller". Returns 0, or -1 (c->why). */
int chan_init(struct chan *c, enum chan_side side, const struct keyring *kr,
              const char *cluster_name, const char *role);
void chan_free(struct chan *c);

/* True when payload starts with the handshake magic. */
bool chan_is_handshake(const uint8_t *payload, size_t len);

/* Initiator: the first hello (a frame payload, malloc'd). */
enum chan_rc chan_hello(struct chan *c, uint8_t **out, size_t *outlen);
/*
 * Both sides: take the peer's hello.
 *   Responder: on CHAN_OK *out is its own hello with its proof; on a refusal the rc says
 *   why and *out, when not NULL, is a hello carrying the error, to send before closing.
 *   Initiator: on CHAN_OK *out is the Proof to send; the channel is then established.
 */
enum chan_rc chan_take_hello(struct chan *c, const uint8_t *payload, size_t len, uint8_t **out,
                             size_t *outlen);
/* Responder: take the initiator's proof; CHAN_OK: established. */
enum chan_rc chan_take_proof(struct chan *c, const uint8_t *payload, size_t len);

bool chan_established(const struct chan *c);
/* The key id in hex of the key in use, or "" before one is chosen. */
const char *chan_key_id(const struct chan *c);
const char *chan_why(const struct chan *c);

/* Seal: the trailer for the next frame whose inner payload is p[0..len). */
enum chan_rc chan_seal(struct chan *c, const uint8_t *p, size_t len,
                       uint8_t trailer[CHAN_TRAILER_LEN]);
/*
 * Open one received payload (inner | trailer): CHAN_OK with *inner_len the length of the
 * inner payload, which starts at payload; any other rc: refuse it and close.
 */
enum chan_rc chan_open(struct chan *c, const uint8_t *payload, size_t len, size_t *inner_len);

#endif
