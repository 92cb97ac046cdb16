/*
 * fuzz_raftwire.c - raft_wire.c's decoders of the Raft peer protocol fed arbitrary bytes.
 *
 * Input layout: byte 0 picks the mode, the rest is the frame body (what the transport hands
 * the decoder after the frame header). Even: a Message for the cluster "spur"
 * (raft_wire_decode). Odd: a Handshake (raft_wire_handshake_decode). The seeds in
 * corpus/raftwire are the real encoders' output of every kind, behind their mode byte.
 *
 * Whatever the outcome:
 *   - a refusal comes with a known raft_wire_rc (raft_wire_rc_name is not "unknown") and
 *     leaves nothing allocated: the decoded message, or the handshake, is all zeros;
 *   - a decoded message keeps the promises of raft_wire.h: a known type, non-zero from, to
 *     and term, entries only on an APPEND, entry i at index + 1 + i with a term in
 *     1..term, entry and snapshot bytes inside the buffers the message owns, a SNAPSHOT
 *     chunk inside its total;
 *   - the same bytes are refused for another cluster (RAFT_WIRE_ECLUSTER), and so is the
 *     message re-encoded for another cluster;
 *   - re-encoding what decoded (raft_wire_encode, raft_wire_handshake_encode) gives bytes
 *     that decode to the same values, and encoding those values again gives the same bytes;
 *   - a decoded handshake has NUL-terminated names within their bounds and a configuration
 *     as raft_config_add builds it (sorted, unique non-zero ids, known roles). Its
 *     configuration is compared only when has_cluster: the encoder sends it only then,
 *     and the transport reads it only then.
 * Everything is freed, so ASan's leak check covers the decoders' error paths.
 */
#define FUZZ_NAME "fuzz_raftwire"
#include "fuzz_check.h"

#include "raft.h"
#include "raft_wire.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLUSTER  "spur"
#define OTHER    "spur-other"
#define HEADROOM 4 /* as the transport leaves room for its frame header */

static bool all_zero(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return false;
    return true;
}

static bool inside(const uint8_t *p, size_t len, const struct raft_buf *b)
{
    return b != NULL && p >= b->data && len <= b->len && (size_t)(p - b->data) <= b->len - len;
}

static void check_refused(int rc)
{
    CHECK(rc != RAFT_WIRE_OK);
    CHECK(strcmp(raft_wire_rc_name(rc), "unknown") != 0);
}

/* The promises of raft_wire.h about a message that decoded. */
static void check_msg(const struct raft_wire_msg *d)
{
    const struct raft_msg *m = &d->msg;

    CHECK(m->type >= RAFT_MSG_APPEND && m->type <= RAFT_MSG_TYPE_MAX);
    CHECK(m->from != 0 && m->to != 0 && m->term != 0);
    CHECK(m->n_entries <= RAFT_WIRE_MAX_ENTRIES);
    if (m->n_entries > 0) {
        CHECK(m->type == RAFT_MSG_APPEND);
        CHECK(m->entries == d->entries && d->data != NULL);
    } else {
        CHECK(m->entries == NULL && d->entries == NULL);
    }
    for (uint32_t i = 0; i < m->n_entries; i++) {
        const struct raft_entry *e = &m->entries[i];
        CHECK(e->index == m->index + 1 + i);
        CHECK(e->term >= 1 && e->term <= m->term);
        CHECK(e->type >= RAFT_ENTRY_NORMAL && e->type <= RAFT_ENTRY_CONFIG);
        if (e->len > 0)
            CHECK(e->buf == d->data && inside(e->data, e->len, d->data));
        else
            CHECK(e->data == NULL);
    }
    if (m->type == RAFT_MSG_SNAPSHOT) {
        CHECK(d->snap != NULL);
        CHECK(m->snap.index != 0 && m->snap.term != 0);
        CHECK(m->snap.offset <= m->snap.total && m->snap.len <= m->snap.total - m->snap.offset);
        CHECK(m->snap.done == (m->snap.offset + m->snap.len == m->snap.total));
    } else if (m->type != RAFT_MSG_SNAPSHOT_RESP) {
        CHECK(d->snap == NULL);
    }
    if (m->snap.len > 0)
        CHECK(m->snap.buf == d->snap && inside(m->snap.data, m->snap.len, d->snap));
    else
        CHECK(m->snap.data == NULL && m->snap.buf == NULL);
    if (m->snap.config_len > 0)
        CHECK(inside(m->snap.config, m->snap.config_len, d->snap));
    else
        CHECK(m->snap.config == NULL);
}

static bool same_bytes(const uint8_t *a, const uint8_t *b, size_t len)
{
    return len == 0 || memcmp(a, b, len) == 0;
}

static void check_same_msg(const struct raft_msg *a, const struct raft_msg *b)
{
    CHECK(a->type == b->type && a->from == b->from && a->to == b->to && a->term == b->term);
    CHECK(a->index == b->index && a->log_term == b->log_term && a->commit == b->commit);
    CHECK(a->hint_index == b->hint_index && a->hint_term == b->hint_term && a->ctx == b->ctx);
    CHECK(a->reject == b->reject && a->transfer == b->transfer);
    CHECK(a->n_entries == b->n_entries);
    for (uint32_t i = 0; i < a->n_entries; i++) {
        const struct raft_entry *x = &a->entries[i], *y = &b->entries[i];
        CHECK(x->term == y->term && x->index == y->index && x->type == y->type);
        CHECK(x->len == y->len && same_bytes(x->data, y->data, x->len));
    }
    CHECK(a->snap.index == b->snap.index && a->snap.term == b->snap.term);
    CHECK(a->snap.total == b->snap.total && a->snap.offset == b->snap.offset);
    CHECK(a->snap.done == b->snap.done);
    CHECK(a->snap.len == b->snap.len && same_bytes(a->snap.data, b->snap.data, a->snap.len));
    CHECK(a->snap.config_len == b->snap.config_len &&
          same_bytes(a->snap.config, b->snap.config, a->snap.config_len));
}

static void fuzz_msg(const uint8_t *buf, size_t len)
{
    struct raft_wire_msg d, d2, d3;
    uint8_t *enc, *enc2;
    size_t enc_len, enc2_len;
    int rc = raft_wire_decode(buf, len, CLUSTER, &d);

    if (rc != RAFT_WIRE_OK) {
        check_refused(rc);
        CHECK(all_zero(&d, sizeof(d)));
        return;
    }
    check_msg(&d);

    /* A wrong cluster name is refused, and it is the name that is refused. */
    check_refused(rc = raft_wire_decode(buf, len, OTHER, &d2));
    CHECK(rc == RAFT_WIRE_ECLUSTER && all_zero(&d2, sizeof(d2)));
    CHECK(raft_wire_decode(buf, len, NULL, &d2) == RAFT_WIRE_ECLUSTER);

    /* Re-encoded, it decodes to the same values; encoded again, to the same bytes. */
    CHECK(raft_wire_encode(&d.msg, CLUSTER, HEADROOM, &enc, &enc_len) == RAFT_WIRE_OK);
    CHECK(enc_len >= HEADROOM);
    CHECK(raft_wire_decode(enc + HEADROOM, enc_len - HEADROOM, CLUSTER, &d2) == RAFT_WIRE_OK);
    check_msg(&d2);
    check_same_msg(&d.msg, &d2.msg);
    CHECK(raft_wire_encode(&d2.msg, CLUSTER, HEADROOM, &enc2, &enc2_len) == RAFT_WIRE_OK);
    CHECK(enc2_len == enc_len && memcmp(enc + HEADROOM, enc2 + HEADROOM, enc_len - HEADROOM) == 0);
    free(enc2);

    /* The same values sent by a replica of another cluster are refused. */
    CHECK(raft_wire_encode(&d.msg, OTHER, 0, &enc2, &enc2_len) == RAFT_WIRE_OK);
    CHECK(raft_wire_decode(enc2, enc2_len, CLUSTER, &d3) == RAFT_WIRE_ECLUSTER);
    CHECK(all_zero(&d3, sizeof(d3)));
    CHECK(raft_wire_decode(enc2, enc2_len, OTHER, &d3) == RAFT_WIRE_OK);
    check_same_msg(&d.msg, &d3.msg);
    raft_wire_msg_free(&d3);
    free(enc2);

    free(enc);
    raft_wire_msg_free(&d2);
    raft_wire_msg_free(&d);
    CHECK(all_zero(&d, sizeof(d)));
}

static bool terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

static void check_handshake(const struct raft_wire_handshake *h)
{
    CHECK(terminated(h->cluster_name, sizeof(h->cluster_name)));
    CHECK(terminated(h->api_address, sizeof(h->api_address)));
    CHECK(h->config.n <= RAFT_MAX_MEMBERS);
    for (uint32_t i = 0; i < h->config.n; i++) {
        const struct raft_member *mb = &h->config.members[i];
        CHECK(mb->id != 0 && (i == 0 || h->config.members[i - 1].id < mb->id));
        CHECK(mb->role == RAFT_MEMBER_VOTER || mb->role == RAFT_MEMBER_LEARNER);
        CHECK(terminated(mb->address, sizeof(mb->address)));
    }
}

static void check_same_handshake(const struct raft_wire_handshake *a,
                                 const struct raft_wire_handshake *b)
{
    CHECK(strcmp(a->cluster_name, b->cluster_name) == 0);
    CHECK(a->protocol_version == b->protocol_version && a->node_id == b->node_id);
    CHECK(a->has_cluster == b->has_cluster);
    CHECK(strcmp(a->api_address, b->api_address) == 0);
    if (!a->has_cluster) {
        CHECK(b->config.n == 0);
        return;
    }
    CHECK(a->config.n == b->config.n);
    for (uint32_t i = 0; i < a->config.n; i++) {
        const struct raft_member *x = &a->config.members[i], *y = &b->config.members[i];
        CHECK(x->id == y->id && x->role == y->role && strcmp(x->address, y->address) == 0);
    }
}

static void fuzz_handshake(const uint8_t *buf, size_t len)
{
    struct raft_wire_handshake *h = malloc(sizeof(*h)), *h2 = malloc(sizeof(*h2));
    uint8_t *enc, *enc2;
    size_t enc_len, enc2_len;
    int rc;

    CHECK(h != NULL && h2 != NULL);
    rc = raft_wire_handshake_decode(buf, len, h);
    if (rc != RAFT_WIRE_OK) {
        check_refused(rc);
        CHECK(all_zero(h, sizeof(*h)));
        goto out;
    }
    check_handshake(h);
    CHECK(raft_wire_handshake_encode(h, HEADROOM, &enc, &enc_len) == RAFT_WIRE_OK);
    CHECK(enc_len >= HEADROOM);
    CHECK(raft_wire_handshake_decode(enc + HEADROOM, enc_len - HEADROOM, h2) == RAFT_WIRE_OK);
    check_handshake(h2);
    check_same_handshake(h, h2);
    CHECK(raft_wire_handshake_encode(h2, HEADROOM, &enc2, &enc2_len) == RAFT_WIRE_OK);
    CHECK(enc2_len == enc_len && memcmp(enc + HEADROOM, enc2 + HEADROOM, enc_len - HEADROOM) == 0);
    free(enc2);
    free(enc);
out:
    free(h);
    free(h2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % 2 == 0)
        fuzz_msg(data + 1, size - 1);
    else
        fuzz_handshake(data + 1, size - 1);
    return 0;
}
