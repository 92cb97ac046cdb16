/*
 * test_transport.c - Raft peer connections (raftd/transport.c) on a real event loop.
 *
 * Transports listen on 127.0.0.1 at ports the kernel chose free, all in one event_base
 * driven by bounded loops with a deadline. Pinned here: two replicas of one cluster
 * exchange handshakes and each sees the other up; one of another cluster is refused both
 * ways and counted; two replicas holding different cluster keys never come up and count
 * auth refusals both ways; a message sent from one arrives decoded at the other, and the
 * bytes it took are counted on both sides (header and seal trailer included); a frame
 * announcing more than the limit closes the connection from its header alone and is
 * counted as a bad frame; a peer the test plays by hand (test_chanpeer.h) that proves the
 * key is heard, and one bit flipped in a sealed frame it sends closes the connection
 * before the message reaches the core.
 */
#include "check_run.h"
#include "frame.h"
#include "raft_wire.h"
#include "test_chanpeer.h"
#include "test_loop.h"
#include "transport.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME 65536

/* What one transport's callbacks saw. */
struct seen {
    unsigned up, down;
    raft_id last_up;
    unsigned messages;
    struct raft_msg last; /* scalars only: entries point into freed memory after the call */
};

static void on_message(void *arg, const struct raft_msg *m)
{
    struct seen *s = arg;
    s->messages++;
    s->last = *m;
    s->last.entries = NULL;
}

static void on_peer(void *arg, const struct transport_peer_info *info, bool up)
{
    struct seen *s = arg;
    if (up) {
        s->up++;
        s->last_up = info->id;
    } else {
        s->down++;
    }
}

struct node {
    struct transport *t;
    struct seen seen;
    struct keyring kr; /* outlives t */
    char addr[64];
};

/* A transport of id in cluster, holding the key made of key_fill bytes. */
static void node_start_key(struct test_loop *l, struct node *n, raft_id id, const char *cluster,
                           uint8_t key_fill)
{
    memset(n, 0, sizeof(*n));
    test_keyring(&n->kr, key_fill);
    snprintf(n->addr, sizeof(n->addr), "127.0.0.1:%u", test_free_port());
    struct transport_options o = {
        .self = id,
        .keyring = &n->kr,
        .cluster_name = cluster,
        .listen = n->addr,
        .api_address = "127.0.0.1:1",
        .max_frame = MAX_FRAME,
        .seed = id,
    };
    struct transport_callbacks cb = {.on_message = on_message, .on_peer = on_peer, .arg = &n->seen};
    char why[256] = "";
    n->t = transport_new(l->base, &o, &cb, why, sizeof(why));
    ck_assert_msg(n->t != NULL, "transport_new: %s", why);
}

static void node_start(struct test_loop *l, struct node *n, raft_id id, const char *cluster)
{
    node_start_key(l, n, id, cluster, 0x5a);
}

/* Connect a and b both ways and wait until each has the other up. */
static void pair(struct test_loop *l, struct node *a, raft_id ida, struct node *b, raft_id idb)
{
    ck_assert_int_eq(transport_set_peer(a->t, idb, b->addr), 0);
    ck_assert_int_eq(transport_set_peer(b->t, ida, a->addr), 0);
    uint64_t deadline = test_now_ms() + 5000;
    while (test_now_ms() < deadline &&
           !(transport_peer_connected(a->t, idb) && transport_peer_connected(b->t, ida)))
        test_loop_run(l, 10);
    ck_assert(transport_peer_connected(a->t, idb));
    ck_assert(transport_peer_connected(b->t, ida));
}

/* Two replicas of "spur", ids 1 and 2, connected both ways. */
static void start_pair(struct test_loop *l, struct node *a, struct node *b)
{
    test_loop_init(l);
    node_start(l, a, 1, "spur");
    node_start(l, b, 2, "spur");
    pair(l, a, 1, b, 2);
}

START_TEST(test_handshake_accepted)
{
    struct test_loop l;
    struct node a, b;
    start_pair(&l, &a, &b);
    /* Each saw the other come up (on both connections) and learned its API address. */
    ck_assert_uint_ge(a.seen.up, 1);
    ck_assert_uint_eq(a.seen.last_up, 2);
    ck_assert_uint_ge(b.seen.up, 1);
    ck_assert_uint_eq(b.seen.last_up, 1);
    ck_assert_str_eq(transport_peer_api(a.t, 2), "127.0.0.1:1");
    struct transport_stats st;
    transport_get_stats(a.t, &st);
    ck_assert_uint_eq(st.refused, 0);
    ck_assert_uint_eq(st.auth_refused, 0);
    ck_assert_uint_eq(st.bad_frames, 0);
    ck_assert(!transport_peer_connected(a.t, 3)); /* never named */
    transport_free(a.t);
    transport_free(b.t);
    test_loop_free(&l);
}
END_TEST

START_TEST(test_other_cluster_refused)
{
    struct test_loop l;
    test_loop_init(&l);
    struct node a, x;
    node_start(&l, &a, 1, "spur");
    node_start(&l, &x, 2, "elsewhere");
    ck_assert_int_eq(transport_set_peer(a.t, 2, x.addr), 0);
    ck_assert_int_eq(transport_set_peer(x.t, 1, a.addr), 0);
    struct transport_stats sa, sx;
    uint64_t deadline = test_now_ms() + 5000;
    do {
        test_loop_run(&l, 20);
        transport_get_stats(a.t, &sa);
        transport_get_stats(x.t, &sx);
    } while (test_now_ms() < deadline &&
             (sa.refused < 1 || sx.refused < 1 || sa.auth_refused < 1 || sx.auth_refused < 1));
    /*
     * The cluster name is in the key proof's hello, so each refuses the other's inbound
     * hello (a refusal of the other cluster) and has its own dial refused by the peer.
     */
    ck_assert_uint_ge(sa.refused, 1);
    ck_assert_uint_ge(sx.refused, 1);
    ck_assert_uint_ge(sa.auth_refused, 1);
    ck_assert_uint_ge(sx.auth_refused, 1);
    ck_assert(!transport_peer_connected(a.t, 2));
    ck_assert(!transport_peer_connected(x.t, 1));
    ck_assert_uint_eq(a.seen.up, 0);
    ck_assert_uint_eq(x.seen.up, 0);
    /* Nothing is sent to a peer that is not up: dropped and counted. */
    struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .from = 1, .to = 2, .term = 3};
    transport_send(a.t, &m);
    test_loop_run(&l, 50);
    ck_assert_uint_eq(x.seen.messages, 0);
    transport_get_stats(a.t, &sa);
    ck_assert_uint_ge(sa.dropped, 1);
    transport_free(a.t);
    transport_free(x.t);
    test_loop_free(&l);
}
END_TEST

START_TEST(test_other_key_refused)
{
    struct test_loop l;
    test_loop_init(&l);
    struct node a, b;
    node_start_key(&l, &a, 1, "spur", 0x11);
    node_start_key(&l, &b, 2, "spur", 0x22);
    ck_assert_int_eq(transport_set_peer(a.t, 2, b.addr), 0);
    ck_assert_int_eq(transport_set_peer(b.t, 1, a.addr), 0);
    struct transport_stats sa, sb;
    uint64_t deadline = test_now_ms() + 5000;
    do {
        test_loop_run(&l, 20);
        transport_get_stats(a.t, &sa);
        transport_get_stats(b.t, &sb);
    } while (test_now_ms() < deadline && (sa.auth_refused < 2 || sb.auth_refused < 2));
    /* Each refuses the other's hello (no common key) and is refused on its own dial. */
    ck_assert_uint_ge(sa.auth_refused, 2);
    ck_assert_uint_ge(sb.auth_refused, 2);
    ck_assert_uint_eq(sa.refused, 0);
    ck_assert_uint_eq(sb.refused, 0);
    /* More time changes nothing: they never come up, and nothing reaches either core. */
    test_loop_run(&l, 300);
    ck_assert(!transport_peer_connected(a.t, 2));
    ck_assert(!transport_peer_connected(b.t, 1));
    ck_assert_uint_eq(a.seen.up, 0);
    ck_assert_uint_eq(b.seen.up, 0);
    struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .from = 1, .to = 2, .term = 3};
    transport_send(a.t, &m);
    test_loop_run(&l, 50);
    ck_assert_uint_eq(b.seen.messages, 0);
    transport_free(a.t);
    transport_free(b.t);
    test_loop_free(&l);
}
END_TEST

START_TEST(test_message_arrives_and_bytes_count)
{
    struct test_loop l;
    struct node a, b;
    start_pair(&l, &a, &b);
    test_loop_run(&l, 50); /* let the handshakes settle */

    struct transport_stats a0, b0, a1, b1;
    transport_get_stats(a.t, &a0);
    transport_get_stats(b.t, &b0);
    struct raft_msg m = {
        .type = RAFT_MSG_HEARTBEAT, .from = 1, .to = 2, .term = 7, .commit = 41, .ctx = 0xabcdef};
    /* What the frame will weigh: the encoding plus the header and the seal's trailer. */
    uint8_t *enc = NULL;
    size_t enclen = 0;
    ck_assert_int_eq(raft_wire_encode(&m, "spur", 0, &enc, &enclen), RAFT_WIRE_OK);
    free(enc);
    transport_send(a.t, &m);
    ck_assert(test_loop_until(&l, &b.seen.messages, 1, 3000));
    ck_assert_uint_eq(b.seen.messages, 1);
    ck_assert_uint_eq(b.seen.last.type, RAFT_MSG_HEARTBEAT);
    ck_assert_uint_eq(b.seen.last.from, 1);
    ck_assert_uint_eq(b.seen.last.to, 2);
    ck_assert_uint_eq(b.seen.last.term, 7);
    ck_assert_uint_eq(b.seen.last.commit, 41);
    ck_assert_uint_eq(b.seen.last.ctx, 0xabcdef);
    transport_get_stats(a.t, &a1);
    transport_get_stats(b.t, &b1);
    size_t wire = FRAME_HEADER_LEN + enclen + CHAN_TRAILER_LEN;
    ck_assert_uint_eq(a1.bytes_sent - a0.bytes_sent, wire);
    ck_assert_uint_eq(b1.bytes_received - b0.bytes_received, wire);
    ck_assert_uint_eq(a1.sent_by_type[RAFT_MSG_HEARTBEAT] - a0.sent_by_type[RAFT_MSG_HEARTBEAT], 1);
    ck_assert_uint_eq(
        b1.received_by_type[RAFT_MSG_HEARTBEAT] - b0.received_by_type[RAFT_MSG_HEARTBEAT], 1);

    /* The same through the two-step path (encode now, send later). */
    m.term = 8;
    struct tframe *f = transport_encode(a.t, &m);
    ck_assert_ptr_nonnull(f);
    transport_send_frame(a.t, f);
    ck_assert(test_loop_until(&l, &b.seen.messages, 2, 3000));
    ck_assert_uint_eq(b.seen.messages, 2);
    ck_assert_uint_eq(b.seen.last.term, 8);
    transport_get_stats(b.t, &b1);
    ck_assert_uint_eq(b1.bytes_received - b0.bytes_received, 2 * wire);
    ck_assert_uint_eq(b1.bad_frames, 0);
    ck_assert_uint_eq(b1.auth_refused, 0);
    transport_free(a.t);
    transport_free(b.t);
    test_loop_free(&l);
}
END_TEST

/* A raw connection to n that proved n's key (the test is the initiator). */
static int dial_proved(struct test_loop *l, struct node *n, struct chan *c, struct frame_reader *r)
{
    int fd = test_connect(n->addr);
    test_loop_run(l, 50); /* accepted */
    test_chanpeer_reader_init(r, MAX_FRAME + 65536);
    ck_assert_int_eq(test_chanpeer_dial(l, fd, r, c, &n->kr, "replica"), CHAN_OK);
    test_loop_run(l, 50); /* the proof checked */
    return fd;
}

START_TEST(test_oversized_frame_closes)
{
    struct test_loop l;
    test_loop_init(&l);
    struct node b;
    node_start(&l, &b, 2, "spur");
    struct transport_stats st;

    /* Before the key is proved only a key-proof frame is taken: one byte more is refused. */
    int fd = test_connect(b.addr);
    test_loop_run(&l, 50);
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_put_header(hdr, CHAN_MAX_HELLO + 1);
    ck_assert_int_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    ck_assert(test_closed_by_peer(&l, fd, 3000));
    transport_get_stats(b.t, &st);
    ck_assert_uint_eq(st.bad_frames, 1);
    ck_assert_uint_eq(st.bytes_received, 0); /* refused from the header: nothing taken */
    close(fd);

    /*
     * Once proved, the transport allows max_frame plus 64 KiB of envelope, plus the seal's
     * trailer; one byte more is refused from the header.
     */
    struct chan c;
    struct frame_reader r;
    fd = dial_proved(&l, &b, &c, &r);
    transport_get_stats(b.t, &st);
    uint64_t before = st.bytes_received;
    frame_put_header(hdr, MAX_FRAME + 65536 + CHAN_TRAILER_LEN + 1);
    ck_assert_int_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    ck_assert(test_closed_by_peer(&l, fd, 3000));
    transport_get_stats(b.t, &st);
    ck_assert_uint_eq(st.bad_frames, 2);
    ck_assert_uint_eq(st.bytes_received, before);
    close(fd);
    chan_free(&c);
    frame_reader_free(&r);

    /* An announcement at the limit is not refused: the connection waits for the rest. */
    fd = dial_proved(&l, &b, &c, &r);
    frame_put_header(hdr, MAX_FRAME + 65536 + CHAN_TRAILER_LEN);
    ck_assert_int_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    ck_assert(!test_closed_by_peer(&l, fd, 300));
    transport_get_stats(b.t, &st);
    ck_assert_uint_eq(st.bad_frames, 2);
    close(fd);
    chan_free(&c);
    frame_reader_free(&r);

    /* Garbage of a sane size: an undecodable key-proof hello, refused and closed. */
    fd = test_connect(b.addr);
    test_loop_run(&l, 50);
    transport_get_stats(b.t, &st);
    before = st.bytes_received;
    uint8_t junk[FRAME_HEADER_LEN + 5] = {0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff};
    ck_assert_int_eq(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
    ck_assert(test_closed_by_peer(&l, fd, 3000));
    transport_get_stats(b.t, &st);
    ck_assert_uint_eq(st.bad_frames, 3);
    ck_assert_uint_eq(st.auth_refused, 2); /* the oversized hello and this one */
    ck_assert_uint_eq(st.refused, 0);
    ck_assert_uint_eq(st.bytes_received - before, sizeof(junk));
    ck_assert_uint_eq(b.seen.up, 0);
    close(fd);
    transport_free(b.t);
    test_loop_free(&l);
}
END_TEST

/* Our Raft Handshake as node 1 of "spur", sealed on c. */
static void send_sealed_handshake(struct chan *c, int fd)
{
    struct raft_wire_handshake h;
    memset(&h, 0, sizeof(h));
    snprintf(h.cluster_name, sizeof(h.cluster_name), "spur");
    h.protocol_version = RAFT_WIRE_VERSION;
    h.node_id = 1;
    uint8_t *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(raft_wire_handshake_encode(&h, 0, &buf, &len), RAFT_WIRE_OK);
    test_chanpeer_send(c, fd, buf, len, -1);
    free(buf);
}

/*
 * A peer that proved the key and sent its sealed Handshake is up and answered with the
 * transport's own sealed Handshake; a heartbeat with one bit flipped (in the payload, then
 * in the trailer) closes the connection, is counted, and never reaches the core; the same
 * heartbeat unaltered is delivered.
 */
START_TEST(test_flipped_bit_closes)
{
    struct test_loop l;
    test_loop_init(&l);
    struct node b;
    node_start(&l, &b, 2, "spur");
    struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .from = 1, .to = 2, .term = 5};
    uint8_t *enc = NULL;
    size_t enclen = 0;
    ck_assert_int_eq(raft_wire_encode(&m, "spur", 0, &enc, &enclen), RAFT_WIRE_OK);
    long flips[] = {-1, 3, (long)enclen + CHAN_SEQ_LEN + 2, (long)enclen + 1};
    for (unsigned i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
        struct chan c;
        struct frame_reader r;
        int fd = dial_proved(&l, &b, &c, &r);
        send_sealed_handshake(&c, fd);
        ck_assert(test_loop_until(&l, &b.seen.up, i + 1, 3000));
        const uint8_t *p = NULL;
        size_t len = 0;
        ck_assert_int_eq(test_chanpeer_recv(&l, fd, &r, &c, &p, &len), 1);
        struct raft_wire_handshake h;
        ck_assert_int_eq(raft_wire_handshake_decode(p, len, &h), RAFT_WIRE_OK);
        ck_assert_uint_eq(h.node_id, 2);
        unsigned before = b.seen.messages;
        struct transport_stats st0, st;
        transport_get_stats(b.t, &st0);
        test_chanpeer_send(&c, fd, enc, enclen, flips[i]);
        if (flips[i] < 0) {
            ck_assert(test_loop_until(&l, &b.seen.messages, before + 1, 3000));
            ck_assert_uint_eq(b.seen.last.term, 5);
            ck_assert(!test_closed_by_peer(&l, fd, 100));
        } else {
            ck_assert_msg(test_closed_by_peer(&l, fd, 3000), "flip at %ld not refused", flips[i]);
            ck_assert_uint_eq(b.seen.messages, before);
            transport_get_stats(b.t, &st);
            ck_assert_uint_eq(st.auth_refused - st0.auth_refused, 1);
        }
        close(fd);
        chan_free(&c);
        frame_reader_free(&r);
    }
    free(enc);
    transport_free(b.t);
    test_loop_free(&l);
}
END_TEST

static Suite *transport_suite(void)
{
    Suite *s = suite_create("transport");
    TCase *tc =
        check_case(s, "loopback",
                   (const TTest *[]){test_handshake_accepted, test_other_cluster_refused,
                                     test_other_key_refused, test_message_arrives_and_bytes_count,
                                     test_oversized_frame_closes, test_flipped_bit_closes, NULL});
    tcase_set_timeout(tc, 30);
    return s;
}

int main(void)
{
    return check_run(transport_suite());
}
