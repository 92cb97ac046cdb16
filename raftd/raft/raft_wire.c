/*
 * raft_wire.c - the protobuf codec for Raft messages; see raft_wire.h for the guarantees.
 *
 * Decoding runs in three passes so that nothing half-built escapes: protobuf-c unpacks the
 * frame (it checks the wire format), validate() checks what the envelope claims against
 * the type, and only then are the bytes copied out into raft_bufs the core can keep.
 */
#include "raft_wire.h"

#include <stdlib.h>
#include <string.h>

#include "raft.pb-c.h"

const char *raft_wire_rc_name(int rc)
{
    switch (rc) {
    case RAFT_WIRE_OK:
        return "ok";
    case RAFT_WIRE_EPARSE:
        return "unparsable";
    case RAFT_WIRE_EVERSION:
        return "protocol-version";
    case RAFT_WIRE_ECLUSTER:
        return "cluster-name";
    case RAFT_WIRE_ETYPE:
        return "unknown-type";
    case RAFT_WIRE_EFIELDS:
        return "inconsistent-fields";
    case RAFT_WIRE_ESIZE:
        return "size";
    case RAFT_WIRE_ENOMEM:
        return "nomem";
    default:
        return "unknown";
    }
}

static uint8_t *alloc_out(size_t headroom, size_t body, size_t *len)
{
    uint8_t *p = malloc(headroom + body ? headroom + body : 1);

    if (p != NULL)
        *len = headroom + body;
    return p;
}

int raft_wire_encode(const struct raft_msg *m, const char *cluster, size_t headroom, uint8_t **out,
                     size_t *len)
{
    Spur__Raft__Message pm = SPUR__RAFT__MESSAGE__INIT;
    Spur__Raft__SnapshotChunk sc = SPUR__RAFT__SNAPSHOT_CHUNK__INIT;
    Spur__Raft__Entry *ents = NULL, **ptrs = NULL;
    uint32_t i;
    size_t body;

    *out = NULL;
    pm.protocol_version = RAFT_WIRE_VERSION;
    pm.cluster_name = (char *)(cluster ? cluster : "");
    pm.from = m->from;
    pm.to = m->to;
    pm.term = m->term;
    pm.type = (Spur__Raft__MsgType)m->type;
    pm.index = m->index;
    pm.log_term = m->log_term;
    pm.commit = m->commit;
    pm.hint_index = m->hint_index;
    pm.hint_term = m->hint_term;
    pm.ctx = m->ctx;
    pm.reject = m->reject;
    pm.transfer = m->transfer;
    if (m->n_entries > 0) {
        ents = calloc(m->n_entries, sizeof(*ents));
        ptrs = calloc(m->n_entries, sizeof(*ptrs));
        if (ents == NULL || ptrs == NULL) {
            free(ents);
            free(ptrs);
            return RAFT_WIRE_ENOMEM;
        }
        for (i = 0; i < m->n_entries; i++) {
            Spur__Raft__Entry init = SPUR__RAFT__ENTRY__INIT;

            ents[i] = init;
            ents[i].term = m->entries[i].term;
            ents[i].type = (Spur__Raft__EntryType)m->entries[i].type;
            ents[i].data.len = m->entries[i].len;
            ents[i].data.data = (uint8_t *)m->entries[i].data;
            ptrs[i] = &ents[i];
        }
        pm.n_entries = m->n_entries;
        pm.entries = ptrs;
    }
    if (m->type == RAFT_MSG_SNAPSHOT || m->type == RAFT_MSG_SNAPSHOT_RESP) {
        sc.index = m->snap.index;
        sc.term = m->snap.term;
        sc.config.len = m->snap.config_len;
        sc.config.data = (uint8_t *)m->snap.config;
        sc.total = m->snap.total;
        sc.offset = m->snap.offset;
        sc.data.len = m->snap.len;
        sc.data.data = (uint8_t *)m->snap.data;
        sc.done = m->snap.done;
        pm.snapshot = &sc;
    }
    body = spur__raft__message__get_packed_size(&pm);
    *out = alloc_out(headroom, body, len);
    if (*out != NULL)
        spur__raft__message__pack(&pm, *out + headroom);
    free(ents);
    free(ptrs);
    return *out != NULL ? RAFT_WIRE_OK : RAFT_WIRE_ENOMEM;
}

static int validate(const Spur__Raft__Message *pm, const char *cluster)
{
    size_t i;
    bool want_entries = pm->type == SPUR__RAFT__MSG_TYPE__MSG_APPEND;
    bool want_snap = pm->type == SPUR__RAFT__MSG_TYPE__MSG_SNAPSHOT ||
                     pm->type == SPUR__RAFT__MSG_TYPE__MSG_SNAPSHOT_RESP;

    if (pm->protocol_version != RAFT_WIRE_VERSION)
        return RAFT_WIRE_EVERSION;
    if (strcmp(pm->cluster_name ? pm->cluster_name : "", cluster ? cluster : "") != 0)
        return RAFT_WIRE_ECLUSTER;
    if ((int)pm->type < RAFT_MSG_APPEND || (int)pm->type > RAFT_MSG_TYPE_MAX)
        return RAFT_WIRE_ETYPE;
    if (pm->from == 0 || pm->to == 0 || pm->term == 0)
        return RAFT_WIRE_EFIELDS;
    if ((pm->n_entries > 0 && !want_entries) || (pm->snapshot != NULL && !want_snap) ||
        (pm->snapshot == NULL && pm->type == SPUR__RAFT__MSG_TYPE__MSG_SNAPSHOT))
        return RAFT_WIRE_EFIELDS;
    if (pm->n_entries > RAFT_WIRE_MAX_ENTRIES)
        return RAFT_WIRE_ESIZE;
    if (pm->n_entries > 0 && pm->index > UINT64_MAX - pm->n_entries - 1)
        return RAFT_WIRE_ESIZE;
    for (i = 0; i < pm->n_entries; i++) {
        const Spur__Raft__Entry *e = pm->entries[i];

        if ((int)e->type < RAFT_ENTRY_NORMAL || (int)e->type > RAFT_ENTRY_CONFIG)
            return RAFT_WIRE_ETYPE;
        if (e->term == 0 || e->term > pm->term || e->data.len > UINT32_MAX)
            return RAFT_WIRE_EFIELDS;
    }
    if (pm->snapshot != NULL) {
        const Spur__Raft__SnapshotChunk *c = pm->snapshot;

        if (c->data.len > UINT32_MAX || c->config.len > UINT32_MAX)
            return RAFT_WIRE_ESIZE;
        if (pm->type == SPUR__RAFT__MSG_TYPE__MSG_SNAPSHOT &&
            (c->offset > c->total || c->data.len > c->total - c->offset ||
             c->done != (c->offset + c->data.len == c->total) || c->index == 0 || c->term == 0))
            return RAFT_WIRE_EFIELDS;
    }
    return RAFT_WIRE_OK;
}

int raft_wire_decode(const uint8_t *buf, size_t len, const char *cluster, struct raft_wire_msg *out)
{
    Spur__Raft__Message *pm;
    struct raft_msg *m = &out->msg;
    size_t i, total = 0, off = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    pm = spur__raft__message__unpack(NULL, len, buf);
    if (pm == NULL)
        return RAFT_WIRE_EPARSE;
    rc = validate(pm, cluster);
    if (rc != RAFT_WIRE_OK)
        goto done;
    m->type = (uint8_t)pm->type;
    m->from = pm->from;
    m->to = pm->to;
    m->term = pm->term;
    m->index = pm->index;
    m->log_term = pm->log_term;
    m->commit = pm->commit;
    m->hint_index = pm->hint_index;
    m->hint_term = pm->hint_term;
    m->ctx = pm->ctx;
    m->reject = pm->reject;
    m->transfer = pm->transfer;
    if (pm->n_entries > 0) {
        for (i = 0; i < pm->n_entries; i++)
            total += pm->entries[i]->data.len;
        out->entries = calloc(pm->n_entries, sizeof(*out->entries));
        out->data = raft_buf_new(total);
        if (out->entries == NULL || out->data == NULL) {
            rc = RAFT_WIRE_ENOMEM;
            goto done;
        }
        for (i = 0; i < pm->n_entries; i++) {
            const Spur__Raft__Entry *e = pm->entries[i];
            struct raft_entry *d = &out->entries[i];

            d->term = e->term;
            d->index = pm->index + 1 + i;
            d->type = (uint8_t)e->type;
            d->len = (uint32_t)e->data.len;
            if (d->len > 0) {
                memcpy(out->data->data + off, e->data.data, d->len);
                d->data = out->data->data + off;
                d->buf = out->data;
                off += d->len;
            }
        }
        m->entries = out->entries;
        m->n_entries = (uint32_t)pm->n_entries;
    }
    if (pm->snapshot != NULL) {
        const Spur__Raft__SnapshotChunk *c = pm->snapshot;

        out->snap = raft_buf_new(c->data.len + c->config.len);
        if (out->snap == NULL) {
            rc = RAFT_WIRE_ENOMEM;
            goto done;
        }
        if (c->data.len)
            memcpy(out->snap->data, c->data.data, c->data.len);
        if (c->config.len)
            memcpy(out->snap->data + c->data.len, c->config.data, c->config.len);
        m->snap.index = c->index;
        m->snap.term = c->term;
        m->snap.total = c->total;
        m->snap.offset = c->offset;
        m->snap.done = c->done;
        m->snap.len = (uint32_t)c->data.len;
        m->snap.data = c->data.len ? out->snap->data : NULL;
        m->snap.buf = c->data.len ? out->snap : NULL;
        m->snap.config_len = (uint32_t)c->config.len;
        m->snap.config = c->config.len ? out->snap->data + c->data.len : NULL;
    }
done:
    spur__raft__message__free_unpacked(pm, NULL);
    if (rc != RAFT_WIRE_OK)
        raft_wire_msg_free(out);
    return rc;
}

void raft_wire_msg_free(struct raft_wire_msg *m)
{
    free(m->entries);
    raft_buf_unref(m->data);
    raft_buf_unref(m->snap);
    memset(m, 0, sizeof(*m));
}

int raft_wire_handshake_encode(const struct raft_wire_handshake *h, size_t headroom, uint8_t **out,
                               size_t *len)
{
    Spur__Raft__Handshake ph = SPUR__RAFT__HANDSHAKE__INIT;
    Spur__Raft__Configuration pc = SPUR__RAFT__CONFIGURATION__INIT;
    Spur__Raft__Member pmem[RAFT_MAX_MEMBERS], *ptrs[RAFT_MAX_MEMBERS];
    uint32_t i, n = h->config.n <= RAFT_MAX_MEMBERS ? h->config.n : RAFT_MAX_MEMBERS;
    size_t body;

    ph.cluster_name = (char *)h->cluster_name;
    ph.protocol_version = h->protocol_version;
    ph.node_id = h->node_id;
    ph.has_cluster = h->has_cluster;
    ph.api_address = (char *)h->api_address;
    for (i = 0; i < n; i++) {
        Spur__Raft__Member init = SPUR__RAFT__MEMBER__INIT;

        pmem[i] = init;
        pmem[i].id = h->config.members[i].id;
        pmem[i].voter = h->config.members[i].role == RAFT_MEMBER_VOTER;
        pmem[i].address = (char *)h->config.members[i].address;
        ptrs[i] = &pmem[i];
    }
    if (h->has_cluster) {
        pc.n_members = n;
        pc.members = ptrs;
        ph.config = &pc;
    }
    body = spur__raft__handshake__get_packed_size(&ph);
    *out = alloc_out(headroom, body, len);
    if (*out == NULL)
        return RAFT_WIRE_ENOMEM;
    spur__raft__handshake__pack(&ph, *out + headroom);
    return RAFT_WIRE_OK;
}

int raft_wire_handshake_decode(const uint8_t *buf, size_t len, struct raft_wire_handshake *h)
{
    Spur__Raft__Handshake *ph = spur__raft__handshake__unpack(NULL, len, buf);
    int rc = RAFT_WIRE_OK;
    size_t i;

    memset(h, 0, sizeof(*h));
    if (ph == NULL)
        return RAFT_WIRE_EPARSE;
    if (strlen(ph->cluster_name) > RAFT_WIRE_MAX_CLUSTER_NAME) {
        rc = RAFT_WIRE_ESIZE;
        goto done;
    }
    strcpy(h->cluster_name, ph->cluster_name);
    h->protocol_version = ph->protocol_version;
    h->node_id = ph->node_id;
    h->has_cluster = ph->has_cluster;
    if (ph->api_address != NULL) {
        if (strlen(ph->api_address) > RAFT_MAX_ADDRESS) {
            rc = RAFT_WIRE_ESIZE;
            goto done;
        }
        strcpy(h->api_address, ph->api_address);
    }
    if (ph->config != NULL) {
        if (ph->config->n_members > RAFT_MAX_MEMBERS) {
            rc = RAFT_WIRE_ESIZE;
            goto done;
        }
        for (i = 0; i < ph->config->n_members; i++) {
            const Spur__Raft__Member *mb = ph->config->members[i];

            if (raft_config_add(&h->config, mb->id,
                                mb->voter ? RAFT_MEMBER_VOTER : RAFT_MEMBER_LEARNER,
                                mb->address) != RAFT_OK) {
                rc = RAFT_WIRE_EFIELDS;
                goto done;
            }
        }
    }
done:
    spur__raft__handshake__free_unpacked(ph, NULL);
    if (rc != RAFT_WIRE_OK)
        memset(h, 0, sizeof(*h));
    return rc;
}
