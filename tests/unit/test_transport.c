/*
 * test_transport.c - Raft peer connections (raftd/transport.c) on a real event loop.
 *
 * Transports listen on 127.0.0.1 at ports the kernel chose free, all in one event_base
 * driven by bounded loops with a deadline. Pinned here: two replicas of one cluster
 * exchange handshakes and each sees the other up; one of another cluster is refused both
 * ways and counted; a message sent from one arrives decoded at the other, and the bytes
 * it took are counted on both sides (header included); a frame announcing more than the
 * limit closes the connection from its header alone and is counted as a bad frame.
 */
#include "check_run.h"
#include "frame.h"
#include "raft_wire.h"
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
    char addr[64];
};

static void node_start(struct test_loop *l, struct node *n, raft_id id, const char *cluster)
{
    memset(n, 0, sizeof(*n));
    snprintf(n->addr, sizeof(n->addr), "127.0.0.1:%u", test_free_port());
    struct transport_options o = {
        .self = id,
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
    } while (test_now_ms() < deadline && (sa.refused < 2 || sx.refused < 2));
    /* Each refuses the other's inbound handshake and the answer to its own dial. */
    ck_assert_uint_ge(sa.refused, 2);
    ck_assert_uint_ge(sx.refused, 2);
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
    /* What the frame will weigh: the encoding plus the header. */
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
    ck_assert_uint_eq(a1.bytes_sent - a0.bytes_sent, FRAME_HEADER_LEN + enclen);
    ck_assert_uint_eq(b1.bytes_received - b0.bytes_received, FRAME_HEADER_LEN + enclen);
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
    ck_assert_uint_eq(b1.bytes_received - b0.bytes_received, 2 * (FRAME_HEADER_LEN + enclen));
    ck_assert_uint_eq(b1.bad_frames, 0);
    transport_free(a.t);
    transport_free(b.t);
    test_loop_free(&l);
}
END_TEST

START_TEST(test_oversized_frame_closes)
{
    struct test_loop l;
    test_loop_init(&l);
    struct node b;
    node_start(&l, &b, 2, "spur");
    int fd = test_connect(b.addr);
    test_loop_run(&l, 50); /* accepted */
    /* The transport allows max_frame plus 64 KiB of envelope; one byte more is refused. */
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_put_header(hdr, MAX_FRAME + 65536 + 1);
    ck_assert_int_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    ck_assert(test_closed_by_peer(&l, fd, 3000));
    struct transport_stats st;
    transport_get_stats(b.t, &st);
    ck_assert_uint_eq(st.bad_frames, 1);
    ck_assert_uint_eq(st.bytes_received, 0); /* refused from the header: nothing taken */
    close(fd);

    /* An announcement at the limit is not refused: the connection waits for the rest. */
    fd = test_connect(b.addr);
    test_loop_run(&l, 50);
    frame_put_header(hdr, MAX_FRAME + 65536);
    ck_assert_int_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
    ck_assert(!test_closed_by_peer(&l, fd, 300));
    transport_get_stats(b.t, &st);
    ck_assert_uint_eq(st.bad_frames, 1);
    close(fd);

    /* Garbage of a sane size: an undecodable handshake, refused and closed. */
    fd = test_connect(b.addr);
    test_loop_run(&l, 50);
    uint8_t junk[FRAME_HEADER_LEN + 5] = {0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff};
    ck_assert_int_eq(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
    ck_assert(test_closed_by_peer(&l, fd, 3000));
    transport_get_stats(b.t, &st);
    ck_assert_uint_eq(st.bad_frames, 2);
    ck_assert_uint_eq(st.refused, 1);
    ck_assert_uint_eq(st.bytes_received, sizeof(junk));
    close(fd);
    transport_free(b.t);
    test_loop_free(&l);
}
END_TEST

static Suite *transport_suite(void)
{
    Suite *s = suite_create("transport");
    TCase *tc = check_case(s, "loopback",
                           (const TTest *[]){test_handshake_accepted, test_other_cluster_refused,
                                             test_message_arrives_and_bytes_count,
                                             test_oversized_frame_closes, NULL});
    tcase_set_timeout(tc, 30);
    return s;
}

int main(void)
{
    return check_run(transport_suite());
}
