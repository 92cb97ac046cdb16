/*
 * test_chanpeer.h - the cluster-key channel (common/chan.h) spoken by hand on a raw test
 * socket (test_loop.h), for the tests of the modules that speak it on libevent: the
 * transport, the forwarder, the leader's agent connections and spurd's server. The test
 * plays the other member: it proves the key (or fails to), then seals what it sends and
 * opens what it receives, so a test can also send a frame altered on the way.
 *
 * Keys are made from a fill byte (32 bytes of it): two keyrings with different fill bytes
 * share no key. Frame readers of a sealed stream need CHAN_TRAILER_LEN bytes of room above
 * the inner limit; test_chanpeer_reader_init() gives them that.
 */
#ifndef SPUR_TEST_CHANPEER_H
#define SPUR_TEST_CHANPEER_H

#include "chan.h"
#include "clusterkey.h"
#include "frame.h"
#include "test_loop.h"

#include <check.h>
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A keyring of one key: CLUSTERKEY_GEN_LEN bytes of fill. */
static inline void test_keyring(struct keyring *kr, uint8_t fill)
{
    memset(kr, 0, sizeof(*kr));
    uint8_t bytes[CLUSTERKEY_GEN_LEN];
    memset(bytes, fill, sizeof(bytes));
    struct clusterkey k;
    char err[256] = "";
    ck_assert_msg(clusterkey_from_bytes(&k, bytes, sizeof(bytes), "test", err, sizeof(err)) == 0,
                  "clusterkey_from_bytes: %s", err);
    ck_assert_int_eq(keyring_add(kr, &k), 0);
}

static inline void test_chanpeer_reader_init(struct frame_reader *r, size_t max_inner)
{
    frame_reader_init(r, max_inner + CHAN_TRAILER_LEN);
}

/* Receive one plain frame (a key-proof frame) into a malloc'd copy. 1, 0 closed, -1 late. */
static inline int test_chanpeer_recv_raw(struct test_loop *l, int fd, struct frame_reader *r,
                                         uint8_t **out, size_t *len)
{
    const uint8_t *p = NULL;
    int rc = test_recv_frame(l, fd, r, &p, len, 3000);
    if (rc != 1)
        return rc;
    *out = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(*out);
    memcpy(*out, p, *len);
    return 1;
}

/*
 * Play the responder (role) on an accepted socket. Returns the rc of the step that failed
 * or CHAN_OK once established; a refusal hello is sent before returning the refusal.
 */
static inline enum chan_rc test_chanpeer_accept(struct test_loop *l, int fd, struct frame_reader *r,
                                                struct chan *c, const struct keyring *kr,
                                                const char *role)
{
    ck_assert_int_eq(chan_init(c, CHAN_RESPONDER, kr, "spur", role), 0);
    uint8_t *in = NULL, *out = NULL;
    size_t len = 0, outlen = 0;
    ck_assert_int_eq(test_chanpeer_recv_raw(l, fd, r, &in, &len), 1);
    ck_assert(chan_is_handshake(in, len));
    enum chan_rc rc = chan_take_hello(c, in, len, &out, &outlen);
    free(in);
    if (out != NULL) {
        test_send_frame(fd, out, outlen);
        free(out);
    }
    if (rc != CHAN_OK)
        return rc;
    if (test_chanpeer_recv_raw(l, fd, r, &in, &len) != 1)
        return CHAN_BAD_FRAME;
    rc = chan_take_proof(c, in, len);
    free(in);
    return rc;
}

/* Play the initiator (role) on a connected socket. CHAN_OK once established. */
static inline enum chan_rc test_chanpeer_dial(struct test_loop *l, int fd, struct frame_reader *r,
                                              struct chan *c, const struct keyring *kr,
                                              const char *role)
{
    ck_assert_int_eq(chan_init(c, CHAN_INITIATOR, kr, "spur", role), 0);
    uint8_t *hello = NULL, *in = NULL, *out = NULL;
    size_t len = 0, inlen = 0, outlen = 0;
    ck_assert_int_eq(chan_hello(c, &hello, &len), CHAN_OK);
    test_send_frame(fd, hello, len);
    free(hello);
    if (test_chanpeer_recv_raw(l, fd, r, &in, &inlen) != 1)
        return CHAN_BAD_FRAME;
    enum chan_rc rc = chan_take_hello(c, in, inlen, &out, &outlen);
    free(in);
    if (out != NULL) {
        if (rc == CHAN_OK)
            test_send_frame(fd, out, outlen);
        free(out);
    }
    return rc;
}

/*
 * Seal payload and send it as one frame. flip_at >= 0 flips one bit of that byte of the
 * frame's payload (inner payload and trailer) after sealing: an alteration on the way.
 */
static inline void test_chanpeer_send(struct chan *c, int fd, const void *payload, size_t len,
                                      long flip_at)
{
    uint8_t *buf = malloc(len + CHAN_TRAILER_LEN);
    ck_assert_ptr_nonnull(buf);
    if (len)
        memcpy(buf, payload, len);
    ck_assert_int_eq(chan_seal(c, buf, len, buf + len), CHAN_OK);
    if (flip_at >= 0 && (size_t)flip_at < len + CHAN_TRAILER_LEN)
        buf[flip_at] ^= 0x01;
    test_send_frame(fd, buf, len + CHAN_TRAILER_LEN);
    free(buf);
}

/* Pack msg, seal and send it. */
static inline void test_chanpeer_send_message(struct chan *c, int fd, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(buf);
    protobuf_c_message_pack(msg, buf);
    test_chanpeer_send(c, fd, buf, n, -1);
    free(buf);
}

/*
 * Receive one sealed frame and open it: 1 with *p (into r's buffer, valid until the next
 * call on r) and *len the inner payload; 0 closed; -1 late. A frame that does not open
 * fails the test.
 */
static inline int test_chanpeer_recv(struct test_loop *l, int fd, struct frame_reader *r,
                                     struct chan *c, const uint8_t **p, size_t *len)
{
    size_t n = 0;
    int rc = test_recv_frame(l, fd, r, p, &n, 3000);
    if (rc != 1)
        return rc;
    enum chan_rc orc = chan_open(c, *p, n, len);
    ck_assert_msg(orc == CHAN_OK, "chan_open: %s: %s", chan_rc_name(orc), chan_why(c));
    return 1;
}

#endif
