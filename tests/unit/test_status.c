/*
 * test_status.c - WorkerStatus frames (common/status.c).
 *
 * Pinned here: encode/decode round trips for every phase and role and for extreme values;
 * the frame header written by status_encode(); truncation at every length (only a cut at
 * a field boundary may decode, and then to exactly the fields before the cut); oversized
 * and garbage payloads; enum values outside the known ones refused; a refused decode
 * leaving the caller's struct alone; and encoding into a buffer that is too small.
 *
 * Payloads are built by hand with a small protobuf writer below rather than with the
 * generated code, so the test does not share the code under test's view of the format.
 */
#include "check_run.h"
#include "frame.h"
#include "status.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- a minimal protobuf writer ------------------------------------------------------ */

struct pb {
    uint8_t b[2048];
    size_t n;
};

static void pb_varint(struct pb *p, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        p->b[p->n++] = byte | (v ? 0x80 : 0);
    } while (v);
}

static void pb_field_varint(struct pb *p, unsigned field, uint64_t v)
{
    pb_varint(p, (uint64_t)field << 3 | 0);
    pb_varint(p, v);
}

static void pb_field_bytes(struct pb *p, unsigned field, size_t len, uint8_t fill)
{
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, len);
    memset(p->b + p->n, fill, len);
    p->n += len;
}

static struct worker_status sample(void)
{
    struct worker_status s = {
        .seq = 0xfedcba9876543210ull,
        .phase = STATUS_PHASE_RUNNING,
        .node_id = 3,
        .role = STATUS_ROLE_LEADER,
        .term = 0xffffffffffffffffull,
        .leader_id = 0xffffffffu,
        .commit_index = 123456789012ull,
        .applied_index = 123456789011ull,
        .pid = 4242,
    };
    return s;
}

static void assert_status_eq(const struct worker_status *a, const struct worker_status *b)
{
    ck_assert_uint_eq(a->seq, b->seq);
    ck_assert_int_eq(a->phase, b->phase);
    ck_assert_uint_eq(a->node_id, b->node_id);
    ck_assert_int_eq(a->role, b->role);
    ck_assert_uint_eq(a->term, b->term);
    ck_assert_uint_eq(a->leader_id, b->leader_id);
    ck_assert_uint_eq(a->commit_index, b->commit_index);
    ck_assert_uint_eq(a->applied_index, b->applied_index);
    ck_assert_uint_eq(a->pid, b->pid);
}

/* Encode s, check the frame header, decode the payload back into *out. */
static int round_trip(const struct worker_status *s, struct worker_status *out)
{
    uint8_t buf[STATUS_MAX_FRAME];
    int n = status_encode(s, buf, sizeof(buf));
    ck_assert_int_ge(n, FRAME_HEADER_LEN);
    ck_assert_uint_eq(frame_get_header(buf), (uint32_t)n - FRAME_HEADER_LEN);
    return status_decode(buf + FRAME_HEADER_LEN, (size_t)n - FRAME_HEADER_LEN, out);
}

START_TEST(test_round_trip)
{
    struct worker_status s = sample(), d;
    memset(&d, 0xa5, sizeof(d));
    ck_assert_int_eq(round_trip(&s, &d), 0);
    assert_status_eq(&s, &d);

    /* Every phase and role. */
    for (int ph = STATUS_PHASE_UNKNOWN; ph <= STATUS_PHASE_STOPPING; ph++) {
        for (int ro = STATUS_ROLE_UNKNOWN; ro <= STATUS_ROLE_PRECANDIDATE; ro++) {
            s.phase = (enum status_phase)ph;
            s.role = (enum status_role)ro;
            s.seq = (uint64_t)(ph * 10 + ro);
            ck_assert_int_eq(round_trip(&s, &d), 0);
            assert_status_eq(&s, &d);
        }
    }
}
END_TEST

START_TEST(test_round_trip_zero)
{
    /* All defaults encode to an empty payload, which decodes to all zeros. */
    struct worker_status z, d;
    memset(&z, 0, sizeof(z));
    memset(&d, 0xa5, sizeof(d));
    uint8_t buf[STATUS_MAX_FRAME];
    ck_assert_int_eq(status_encode(&z, buf, sizeof(buf)), FRAME_HEADER_LEN);
    ck_assert_uint_eq(frame_get_header(buf), 0);
    ck_assert_int_eq(status_decode(buf + FRAME_HEADER_LEN, 0, &d), 0);
    assert_status_eq(&z, &d);
}
END_TEST

START_TEST(test_decode_hand_built)
{
    /* The field numbers of proto/status.proto, written independently of protobuf-c. */
    struct pb p = {.n = 0};
    pb_field_varint(&p, 1, 77);  /* seq */
    pb_field_varint(&p, 2, 2);   /* phase RUNNING */
    pb_field_varint(&p, 3, 2);   /* node_id */
    pb_field_varint(&p, 4, 1);   /* role FOLLOWER */
    pb_field_varint(&p, 5, 9);   /* term */
    pb_field_varint(&p, 6, 3);   /* leader_id */
    pb_field_varint(&p, 7, 100); /* commit_index */
    pb_field_varint(&p, 8, 99);  /* applied_index */
    pb_field_varint(&p, 9, 555); /* pid */
    struct worker_status d;
    ck_assert_int_eq(status_decode(p.b, p.n, &d), 0);
    ck_assert_uint_eq(d.seq, 77);
    ck_assert_int_eq(d.phase, STATUS_PHASE_RUNNING);
    ck_assert_uint_eq(d.node_id, 2);
    ck_assert_int_eq(d.role, STATUS_ROLE_FOLLOWER);
    ck_assert_uint_eq(d.term, 9);
    ck_assert_uint_eq(d.leader_id, 3);
    ck_assert_uint_eq(d.commit_index, 100);
    ck_assert_uint_eq(d.applied_index, 99);
    ck_assert_uint_eq(d.pid, 555);

    /* Fields in another order, and a field repeated (last one wins): still valid. */
    p.n = 0;
    pb_field_varint(&p, 9, 1);
    pb_field_varint(&p, 1, 5);
    pb_field_varint(&p, 1, 6);
    ck_assert_int_eq(status_decode(p.b, p.n, &d), 0);
    ck_assert_uint_eq(d.seq, 6);
    ck_assert_uint_eq(d.pid, 1);
    ck_assert_int_eq(d.phase, STATUS_PHASE_UNKNOWN);

    /* A small unknown field (a newer worker) is skipped. */
    p.n = 0;
    pb_field_varint(&p, 1, 8);
    pb_field_bytes(&p, 15, 10, 'x');
    ck_assert_int_eq(status_decode(p.b, p.n, &d), 0);
    ck_assert_uint_eq(d.seq, 8);
}
END_TEST

/* s with only its first k fields (in proto/status.proto's field order) set, the rest zero. */
static struct worker_status first_fields(const struct worker_status *s, int k)
{
    struct worker_status p;
    memset(&p, 0, sizeof(p));
    if (k >= 1)
        p.seq = s->seq;
    if (k >= 2)
        p.phase = s->phase;
    if (k >= 3)
        p.node_id = s->node_id;
    if (k >= 4)
        p.role = s->role;
    if (k >= 5)
        p.term = s->term;
    if (k >= 6)
        p.leader_id = s->leader_id;
    if (k >= 7)
        p.commit_index = s->commit_index;
    if (k >= 8)
        p.applied_index = s->applied_index;
    if (k >= 9)
        p.pid = s->pid;
    return p;
}

START_TEST(test_truncated_every_length)
{
    /*
     * A cut inside a field must be refused. A cut between fields is a shorter valid
     * message, and must decode to exactly the fields before the cut.
     */
    struct worker_status s = sample();
    uint8_t full[STATUS_MAX_FRAME];
    int n = status_encode(&s, full, sizeof(full));
    ck_assert_int_gt(n, FRAME_HEADER_LEN);
    size_t plen = (size_t)n - FRAME_HEADER_LEN;
    const uint8_t *payload = full + FRAME_HEADER_LEN;

    /* Field boundaries: the encoding of fields 1..k is a prefix of the whole encoding. */
    size_t bound[10];
    struct worker_status partial[10];
    partial[0] = first_fields(&s, 0);
    bound[0] = 0;
    for (int k = 1; k <= 9; k++) {
        partial[k] = first_fields(&s, k);
        uint8_t tmp[STATUS_MAX_FRAME];
        int m = status_encode(&partial[k], tmp, sizeof(tmp));
        ck_assert_int_gt(m, FRAME_HEADER_LEN);
        bound[k] = (size_t)m - FRAME_HEADER_LEN;
        ck_assert_mem_eq(tmp + FRAME_HEADER_LEN, payload, bound[k]);
    }
    ck_assert_uint_eq(bound[9], plen);

    size_t ok = 0;
    for (size_t len = 0; len <= plen; len++) {
        /* A copy of exactly len bytes, so ASan sees any read past the cut. */
        uint8_t *cut = malloc(len ? len : 1);
        ck_assert_ptr_nonnull(cut);
        memcpy(cut, payload, len);
        struct worker_status d;
        int rc = status_decode(cut, len, &d);
        int k = -1;
        for (int j = 0; j <= 9; j++)
            if (bound[j] == len)
                k = j;
        if (k < 0) {
            ck_assert_msg(rc == -1, "a cut at %zu bytes (inside a field) decoded", len);
        } else {
            ck_assert_msg(rc == 0, "a cut at the field boundary %zu was refused", len);
            assert_status_eq(&partial[k], &d);
            ok++;
        }
        free(cut);
    }
    ck_assert_uint_eq(ok, 10);
}
END_TEST

START_TEST(test_oversized)
{
    struct worker_status d;
    struct pb p = {.n = 0};
    pb_field_varint(&p, 1, 1);
    pb_field_bytes(&p, 15, STATUS_MAX_PAYLOAD, 0);
    ck_assert_uint_gt(p.n, STATUS_MAX_PAYLOAD);
    ck_assert_int_eq(status_decode(p.b, p.n, &d), -1);

    /* One byte over the limit, made of well-formed fields (seq sent 256 times, last wins). */
    p.n = 0;
    pb_field_varint(&p, 1, 200); /* three bytes */
    while (p.n < STATUS_MAX_PAYLOAD + 1)
        pb_field_varint(&p, 1, 5); /* two bytes each */
    ck_assert_uint_eq(p.n, STATUS_MAX_PAYLOAD + 1);
    ck_assert_int_eq(status_decode(p.b, p.n, &d), -1);
}
END_TEST

struct garbage_case {
    const char *what;
    uint8_t bytes[16];
    size_t len;
};

static const struct garbage_case garbage[] = {
    {"a lone continuation byte", {0xff}, 1},
    {"tag without a value", {0x08}, 1},
    {"varint cut short", {0x08, 0x80}, 2},
    {"field number 0", {0x00, 0x01}, 2},
    {"wire type 6", {0x0e, 0x01}, 2},
    {"wire type 7", {0x0f, 0x01}, 2},
    {"length past the end", {0x7a, 0x05, 'a', 'b'}, 4},
    {"varint longer than 10 bytes",
     {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
     12},
    {"fixed64 cut short", {0x79, 1, 2, 3}, 4},
    {"fixed32 cut short", {0x7d, 1, 2}, 3},
    {"start group", {0x0b}, 1},
    {"text", {'h', 'e', 'l', 'l', 'o'}, 5},
    {"seq as a length-delimited field", {0x0a, 0x01, 0x00}, 3},
    {"phase as fixed32", {0x15, 0x01, 0x00, 0x00, 0x00}, 5},
};

START_TEST(test_garbage)
{
    const struct garbage_case *g = &garbage[_i];
    struct worker_status d;
    /* On the heap with the exact length, so ASan catches a read past the end. */
    uint8_t *b = malloc(g->len);
    ck_assert_ptr_nonnull(b);
    memcpy(b, g->bytes, g->len);
    ck_assert_msg(status_decode(b, g->len, &d) == -1, "%s: decoded", g->what);
    free(b);
}
END_TEST

START_TEST(test_random_bytes_do_not_crash)
{
    /* Whatever decodes must carry known enum values. */
    uint32_t x = 12345;
    for (int i = 0; i < 20000; i++) {
        uint8_t b[64];
        size_t len = 1 + (size_t)(i % 64);
        for (size_t k = 0; k < len; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b[k] = (uint8_t)x;
        }
        struct worker_status d;
        if (status_decode(b, len, &d) == 0) {
            ck_assert_int_le(d.phase, STATUS_PHASE_STOPPING);
            ck_assert_int_le(d.role, STATUS_ROLE_PRECANDIDATE);
        }
    }
}
END_TEST

START_TEST(test_enum_range)
{
    struct worker_status d;
    struct pb p;
    /* The last known values are accepted... */
    p.n = 0;
    pb_field_varint(&p, 2, STATUS_PHASE_STOPPING);
    pb_field_varint(&p, 4, STATUS_ROLE_PRECANDIDATE);
    ck_assert_int_eq(status_decode(p.b, p.n, &d), 0);
    ck_assert_int_eq(d.phase, STATUS_PHASE_STOPPING);
    ck_assert_int_eq(d.role, STATUS_ROLE_PRECANDIDATE);

    /* ...one past them, negatives and huge values are not. */
    static const uint64_t bad_phase[] = {4,
                                         5,
                                         100,
                                         0x7fffffff,
                                         0xffffffffffffffffull /* -1 */,
                                         0xffffffff80000000ull /* INT32_MIN */};
    static const uint64_t bad_role[] = {
        6, 7, 100, 0x7fffffff, 0xffffffffffffffffull, 0xffffffff80000000ull};
    for (size_t i = 0; i < sizeof(bad_phase) / sizeof(bad_phase[0]); i++) {
        p.n = 0;
        pb_field_varint(&p, 2, bad_phase[i]);
        ck_assert_msg(status_decode(p.b, p.n, &d) == -1, "phase %llu accepted",
                      (unsigned long long)bad_phase[i]);
    }
    for (size_t i = 0; i < sizeof(bad_role) / sizeof(bad_role[0]); i++) {
        p.n = 0;
        pb_field_varint(&p, 4, bad_role[i]);
        ck_assert_msg(status_decode(p.b, p.n, &d) == -1, "role %llu accepted",
                      (unsigned long long)bad_role[i]);
    }

    /* The same through status_encode: it sends what it is given; decode refuses it. */
    struct worker_status s = sample();
    s.phase = (enum status_phase)4;
    ck_assert_int_eq(round_trip(&s, &d), -1);
    s = sample();
    s.role = (enum status_role)6;
    ck_assert_int_eq(round_trip(&s, &d), -1);
}
END_TEST

START_TEST(test_refused_decode_leaves_struct)
{
    /* A refused frame must not leave a half-updated status behind. */
    struct worker_status before = sample(), d = sample();
    struct pb p = {.n = 0};
    pb_field_varint(&p, 1, 1);
    pb_field_varint(&p, 6, 9);
    pb_field_varint(&p, 2, 7); /* bad phase after good fields */
    ck_assert_int_eq(status_decode(p.b, p.n, &d), -1);
    assert_status_eq(&before, &d);
    const uint8_t junk[] = {0x08, 0x80};
    ck_assert_int_eq(status_decode(junk, sizeof(junk), &d), -1);
    assert_status_eq(&before, &d);
}
END_TEST

START_TEST(test_encode_small_buffer)
{
    struct worker_status s = sample();
    uint8_t buf[STATUS_MAX_FRAME + 8];
    int n = status_encode(&s, buf, sizeof(buf));
    ck_assert_int_gt(n, FRAME_HEADER_LEN);
    for (size_t cap = 0; cap < (size_t)n; cap++) {
        memset(buf, 0xee, sizeof(buf));
        ck_assert_int_eq(status_encode(&s, buf, cap), -1);
        for (size_t i = 0; i < sizeof(buf); i++)
            ck_assert_msg(buf[i] == 0xee, "cap %zu: byte %zu written", cap, i);
    }
    ck_assert_int_eq(status_encode(&s, buf, (size_t)n), n);
}
END_TEST

START_TEST(test_names)
{
    ck_assert_str_eq(status_phase_name(STATUS_PHASE_STARTING), "starting");
    ck_assert_str_eq(status_phase_name(STATUS_PHASE_RUNNING), "running");
    ck_assert_str_eq(status_phase_name(STATUS_PHASE_STOPPING), "stopping");
    ck_assert_str_eq(status_phase_name(STATUS_PHASE_UNKNOWN), "unknown");
    ck_assert_str_eq(status_phase_name((enum status_phase)99), "unknown");
    ck_assert_str_eq(status_role_name(STATUS_ROLE_FOLLOWER), "follower");
    ck_assert_str_eq(status_role_name(STATUS_ROLE_CANDIDATE), "candidate");
    ck_assert_str_eq(status_role_name(STATUS_ROLE_LEADER), "leader");
    ck_assert_str_eq(status_role_name(STATUS_ROLE_LEARNER), "learner");
    ck_assert_str_eq(status_role_name(STATUS_ROLE_PRECANDIDATE), "precandidate");
    ck_assert_str_eq(status_role_name(STATUS_ROLE_UNKNOWN), "unknown");
    ck_assert_str_eq(status_role_name((enum status_role) - 1), "unknown");
}
END_TEST

static Suite *status_suite(void)
{
    Suite *s = suite_create("status");
    TCase *tc = check_case(s, "codec",
                           (const TTest *[]){test_round_trip, test_round_trip_zero,
                                             test_decode_hand_built, test_truncated_every_length,
                                             test_oversized, test_random_bytes_do_not_crash,
                                             test_enum_range, test_refused_decode_leaves_struct,
                                             test_encode_small_buffer, test_names, NULL});
    tcase_add_loop_test(tc, test_garbage, 0, (int)(sizeof(garbage) / sizeof(garbage[0])));
    return s;
}

int main(void)
{
    return check_run(status_suite());
}
