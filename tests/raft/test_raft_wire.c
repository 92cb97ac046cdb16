/*
 * test_raft_wire.c - the protobuf codec of Raft messages (raftd/raft/raft_wire.h).
 *
 * Round trips of every message type, refusal of other clusters and versions and of
 * inconsistent fields, and fuzzing: random bytes and bit flips of valid frames are decoded
 * and whatever decodes is fed to a live core, which must neither crash nor misbehave.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/check_run.h"
#include "raft.h"
#include "raft_wire.h"
#include "raft.pb-c.h"

static const char *CLUSTER = "spur";

static struct raft_msg sample(int type, struct raft_entry *ents, struct raft_buf *b, uint8_t *cfg,
                              uint32_t cfg_len)
{
    struct raft_msg m = {.type = (uint8_t)type,
                         .from = 2,
                         .to = 3,
                         .term = 7,
                         .index = 10,
                         .log_term = 6,
                         .commit = 9,
                         .hint_index = 4,
                         .hint_term = 3,
                         .ctx = 99,
                         .reject = true,
                         .transfer = true};

    if (type == RAFT_MSG_APPEND) {
        ents[0] = (struct raft_entry){
            .term = 6, .index = 11, .type = RAFT_ENTRY_NORMAL, .len = 5, .data = b->data, .buf = b};
        ents[1] = (struct raft_entry){.term = 7, .index = 12, .type = RAFT_ENTRY_NOOP};
        ents[2] = (struct raft_entry){
            .term = 7, .index = 13, .type = RAFT_ENTRY_CONFIG, .len = cfg_len, .data = cfg};
        m.entries = ents;
        m.n_entries = 3;
        m.reject = false;
    }
    if (type == RAFT_MSG_SNAPSHOT) {
        m.snap = (struct raft_snapshot_chunk){.index = 40,
                                              .term = 5,
                                              .config = cfg,
                                              .config_len = cfg_len,
                                              .total = 12,
                                              .offset = 7,
                                              .data = b->data,
                                              .len = 5,
                                              .buf = b,
                                              .done = true};
    }
    return m;
}

START_TEST(test_wire_roundtrip_every_type)
{
    struct raft_buf *b = raft_buf_copy("hello", 5);
    struct raft_config c = {0};
    uint8_t cfg[128];
    int cfg_len, t;
    struct raft_entry ents[3];

    raft_config_add(&c, 1, RAFT_MEMBER_VOTER, "a:1");
    cfg_len = raft_config_encode(&c, cfg, sizeof(cfg));
    for (t = 1; t <= RAFT_MSG_TYPE_MAX; t++) {
        struct raft_msg m = sample(t, ents, b, cfg, (uint32_t)cfg_len);
        struct raft_wire_msg d;
        uint8_t *buf;
        size_t len;
        uint32_t i;

        ck_assert_int_eq(raft_wire_encode(&m, CLUSTER, 4, &buf, &len), RAFT_WIRE_OK);
        ck_assert_int_eq(raft_wire_decode(buf + 4, len - 4, CLUSTER, &d), RAFT_WIRE_OK);
        ck_assert_int_eq(d.msg.type, t);
        ck_assert_uint_eq(d.msg.from, 2);
        ck_assert_uint_eq(d.msg.to, 3);
        ck_assert_uint_eq(d.msg.term, 7);
        ck_assert_uint_eq(d.msg.index, 10);
        ck_assert_uint_eq(d.msg.log_term, 6);
        ck_assert_uint_eq(d.msg.commit, 9);
        ck_assert_uint_eq(d.msg.hint_index, 4);
        ck_assert_uint_eq(d.msg.ctx, 99);
        ck_assert(d.msg.transfer);
        ck_assert_uint_eq(d.msg.n_entries, m.n_entries);
        for (i = 0; i < m.n_entries; i++) {
            ck_assert_uint_eq(d.msg.entries[i].index, m.entries[i].index);
            ck_assert_uint_eq(d.msg.entries[i].term, m.entries[i].term);
            ck_assert_int_eq(d.msg.entries[i].type, m.entries[i].type);
            ck_assert_uint_eq(d.msg.entries[i].len, m.entries[i].len);
            if (m.entries[i].len)
                ck_assert_int_eq(memcmp(d.msg.entries[i].data, m.entries[i].data, m.entries[i].len),
                                 0);
        }
        if (t == RAFT_MSG_SNAPSHOT) {
            ck_assert_uint_eq(d.msg.snap.index, 40);
            ck_assert_uint_eq(d.msg.snap.offset, 7);
            ck_assert_uint_eq(d.msg.snap.len, 5);
            ck_assert(d.msg.snap.done);
            ck_assert_int_eq(memcmp(d.msg.snap.data, "hello", 5), 0);
            ck_assert_int_eq(memcmp(d.msg.snap.config, cfg, (size_t)cfg_len), 0);
        }
        raft_wire_msg_free(&d);
        free(buf);
    }
    raft_buf_unref(b);
}
END_TEST

static int decode_pm(Spur__Raft__Message *pm, const char *cluster)
{
    size_t len = spur__raft__message__get_packed_size(pm);
    uint8_t *buf = malloc(len + 1);
    struct raft_wire_msg d;
    int rc;

    spur__raft__message__pack(pm, buf);
    rc = raft_wire_decode(buf, len, cluster, &d);
    if (rc == RAFT_WIRE_OK)
        raft_wire_msg_free(&d);
    free(buf);
    return rc;
}

START_TEST(test_wire_refuses_other_cluster_version_and_bad_fields)
{
    Spur__Raft__Message pm = SPUR__RAFT__MESSAGE__INIT;
    Spur__Raft__Entry e = SPUR__RAFT__ENTRY__INIT, *ep = &e;
    Spur__Raft__SnapshotChunk sc = SPUR__RAFT__SNAPSHOT_CHUNK__INIT;

    pm.protocol_version = RAFT_WIRE_VERSION;
    pm.cluster_name = "spur";
    pm.from = 1;
    pm.to = 2;
    pm.term = 3;
    pm.type = SPUR__RAFT__MSG_TYPE__MSG_HEARTBEAT;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_OK);
    ck_assert_int_eq(decode_pm(&pm, "other"), RAFT_WIRE_ECLUSTER);
    pm.protocol_version = 2;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_EVERSION);
    pm.protocol_version = RAFT_WIRE_VERSION;
    pm.type = 42;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_ETYPE);
    pm.type = SPUR__RAFT__MSG_TYPE__MSG_UNKNOWN;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_ETYPE);
    pm.type = SPUR__RAFT__MSG_TYPE__MSG_HEARTBEAT;
    pm.from = 0;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_EFIELDS);
    pm.from = 1;
    /* entries on a type without entries */
    e.term = 1;
    e.type = SPUR__RAFT__ENTRY_TYPE__ENTRY_NORMAL;
    pm.n_entries = 1;
    pm.entries = &ep;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_EFIELDS);
    pm.type = SPUR__RAFT__MSG_TYPE__MSG_APPEND;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_OK);
    e.type = 9;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_ETYPE);
    e.type = SPUR__RAFT__ENTRY_TYPE__ENTRY_NORMAL;
    e.term = 4; /* newer than the message */
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_EFIELDS);
    e.term = 1;
    pm.index = UINT64_MAX;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_ESIZE);
    pm.index = 0;
    pm.n_entries = 0;
    /* snapshot chunk whose data overruns its total */
    pm.type = SPUR__RAFT__MSG_TYPE__MSG_SNAPSHOT;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_EFIELDS); /* missing chunk */
    pm.snapshot = &sc;
    sc.index = 5;
    sc.term = 1;
    sc.total = 4;
    sc.offset = 2;
    sc.data.len = 3;
    sc.data.data = (uint8_t *)"abc";
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_EFIELDS);
    sc.total = 5;
    sc.done = 1;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_OK);
    sc.done = 0;
    ck_assert_int_eq(decode_pm(&pm, "spur"), RAFT_WIRE_EFIELDS);
}
END_TEST

START_TEST(test_wire_handshake_roundtrip)
{
    struct raft_wire_handshake h = {.protocol_version = RAFT_WIRE_VERSION,
                                    .node_id = 3,
                                    .has_cluster = true},
                               d;
    uint8_t *buf;
    size_t len;

    strcpy(h.cluster_name, "spur");
    raft_config_add(&h.config, 1, RAFT_MEMBER_VOTER, "10.0.0.1:6821");
    raft_config_add(&h.config, 4, RAFT_MEMBER_LEARNER, "10.0.0.4:6821");
    ck_assert_int_eq(raft_wire_handshake_encode(&h, 4, &buf, &len), RAFT_WIRE_OK);
    ck_assert_int_eq(raft_wire_handshake_decode(buf + 4, len - 4, &d), RAFT_WIRE_OK);
    ck_assert_str_eq(d.cluster_name, "spur");
    ck_assert_uint_eq(d.node_id, 3);
    ck_assert(d.has_cluster);
    ck_assert_uint_eq(d.config.n, 2);
    ck_assert_int_eq(d.config.members[1].role, RAFT_MEMBER_LEARNER);
    ck_assert_str_eq(d.config.members[1].address, "10.0.0.4:6821");
    ck_assert_int_eq(raft_wire_handshake_decode((const uint8_t *)"\xff\xff\xff", 3, &d),
                     RAFT_WIRE_EPARSE);
    free(buf);
}
END_TEST

/* Decode junk and mutated frames; feed what decodes to a core. Nothing may crash. */
START_TEST(test_wire_fuzz_decode_and_step)
{
    struct raft_options o = {.id = 3, .seed = 1};
    struct raft_config c = {0};
    struct raft_start st = {.bootstrap = &c};
    struct raft *r;
    struct raft_buf *b = raft_buf_copy("hello", 5);
    uint8_t cfg[128];
    int cfg_len, t, i, decoded = 0;
    struct raft_entry ents[3];
    uint64_t x = 0x9e3779b97f4a7c15ULL;

    raft_config_add(&c, 1, RAFT_MEMBER_VOTER, "a");
    raft_config_add(&c, 2, RAFT_MEMBER_VOTER, "b");
    raft_config_add(&c, 3, RAFT_MEMBER_VOTER, "c");
    cfg_len = raft_config_encode(&c, cfg, sizeof(cfg));
    ck_assert_int_eq(raft_new(&o, &st, 0, &r), RAFT_OK);
    for (i = 0; i < 30000; i++) {
        struct raft_msg m = sample(1 + i % RAFT_MSG_TYPE_MAX, ents, b, cfg, (uint32_t)cfg_len);
        struct raft_wire_msg d;
        struct raft_event ev = {.type = RAFT_EV_RECEIVE, .now = (uint64_t)i};
        struct raft_update u;
        uint8_t *buf;
        size_t len, k, flips;

        raft_wire_encode(&m, CLUSTER, 0, &buf, &len);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        flips = 1 + x % 4;
        for (k = 0; k < flips && len > 0; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[x % len] ^= (uint8_t)(1u << ((x >> 20) % 8));
        }
        if (i % 7 == 0)
            len = x % (len + 1); /* truncated */
        t = raft_wire_decode(buf, len, CLUSTER, &d);
        if (t == RAFT_WIRE_OK) {
            decoded++;
            ev.msg = &d.msg;
            raft_step(r, &ev, &u);
            raft_wire_msg_free(&d);
        }
        free(buf);
    }
    for (i = 0; i < 5000; i++) { /* plain random bytes */
        uint8_t junk[64];
        struct raft_wire_msg d;
        int k;

        for (k = 0; k < 64; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            junk[k] = (uint8_t)x;
        }
        if (raft_wire_decode(junk, (size_t)(x % 64), CLUSTER, &d) == RAFT_WIRE_OK)
            raft_wire_msg_free(&d);
    }
    ck_assert_int_gt(decoded, 100);
    raft_free(r);
    raft_buf_unref(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("raft-wire");
    TCase *tc = check_case(s, "wire",
                           (const TTest *[]){test_wire_roundtrip_every_type,
                                             test_wire_refuses_other_cluster_version_and_bad_fields,
                                             test_wire_handshake_roundtrip,
                                             test_wire_fuzz_decode_and_step, NULL});
    tcase_set_timeout(tc, 120);
    return check_run(s);
}
