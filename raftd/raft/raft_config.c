/*
 * raft_config.c - cluster configurations (voters, learners, addresses) and their byte
 * encoding (declared in raft.h).
 *
 * The encoding is the data of every RAFT_ENTRY_CONFIG entry and travels in snapshot
 * metadata, so it is stored on disk and must stay stable:
 *
 *     u8 version = 1 | u8 count | count x ( u32 id LE | u8 role | u8 addr_len | addr bytes )
 *
 * Decoding trusts nothing: it checks the version, that ids are non-zero, strictly
 * increasing (hence unique), roles known, addresses free of NUL and within bounds, that no
 * byte is left over, and that at least one voter exists. A configuration in memory always
 * keeps its members sorted by id, so equal configurations encode to equal bytes and every
 * founding member of a bootstrap produces the identical first entry.
 */
#include "raft.h"

#include <string.h>

#define CONFIG_VERSION 1

int raft_config_encode(const struct raft_config *c, uint8_t *out, size_t cap)
{
    size_t need = 2, pos = 0;
    uint32_t i;

    if (c->n > RAFT_MAX_MEMBERS)
        return RAFT_EINVAL;
    for (i = 0; i < c->n; i++)
        need += 6 + strnlen(c->members[i].address, RAFT_MAX_ADDRESS);
    if (out == NULL && cap == 0)
        return (int)need;
    if (cap < need)
        return RAFT_EINVAL;
    out[pos++] = CONFIG_VERSION;
    out[pos++] = (uint8_t)c->n;
    for (i = 0; i < c->n; i++) {
        const struct raft_member *m = &c->members[i];
        size_t alen = strnlen(m->address, RAFT_MAX_ADDRESS);

        out[pos++] = (uint8_t)(m->id & 0xff);
        out[pos++] = (uint8_t)((m->id >> 8) & 0xff);
        out[pos++] = (uint8_t)((m->id >> 16) & 0xff);
        out[pos++] = (uint8_t)((m->id >> 24) & 0xff);
        out[pos++] = m->role;
        out[pos++] = (uint8_t)alen;
        memcpy(out + pos, m->address, alen);
        pos += alen;
    }
    return (int)pos;
}

int raft_config_decode(const uint8_t *data, size_t len, struct raft_config *c)
{
    size_t pos = 2;
    uint32_t i, n, voters = 0;
    raft_id prev = 0;

    if (data == NULL || len < 2 || data[0] != CONFIG_VERSION)
        return RAFT_EINVAL;
    n = data[1];
    if (n == 0 || n > RAFT_MAX_MEMBERS)
        return RAFT_EINVAL;
    memset(c, 0, sizeof(*c));
    for (i = 0; i < n; i++) {
        struct raft_member *m = &c->members[i];
        size_t alen;

        if (len - pos < 6)
            return RAFT_EINVAL;
        m->id = (raft_id)data[pos] | (raft_id)data[pos + 1] << 8 | (raft_id)data[pos + 2] << 16 |
                (raft_id)data[pos + 3] << 24;
        m->role = data[pos + 4];
        alen = data[pos + 5];
        pos += 6;
        if (m->id == 0 || m->id <= prev)
            return RAFT_EINVAL;
        if (m->role != RAFT_MEMBER_VOTER && m->role != RAFT_MEMBER_LEARNER)
            return RAFT_EINVAL;
        if (len - pos < alen || memchr(data + pos, 0, alen) != NULL)
            return RAFT_EINVAL;
        memcpy(m->address, data + pos, alen);
        m->address[alen] = '\0';
        pos += alen;
        prev = m->id;
        if (m->role == RAFT_MEMBER_VOTER)
            voters++;
    }
    if (pos != len || voters == 0)
        return RAFT_EINVAL;
    c->n = n;
    return RAFT_OK;
}

const struct raft_member *raft_config_find(const struct raft_config *c, raft_id id)
{
    uint32_t i;

    for (i = 0; i < c->n; i++)
        if (c->members[i].id == id)
            return &c->members[i];
    return NULL;
}

int raft_config_add(struct raft_config *c, raft_id id, int role, const char *address)
{
    uint32_t i, pos;
    size_t alen = address != NULL ? strlen(address) : 0;

    if (id == 0 || (role != RAFT_MEMBER_VOTER && role != RAFT_MEMBER_LEARNER) ||
        alen > RAFT_MAX_ADDRESS)
        return RAFT_EINVAL;
    if (raft_config_find(c, id) != NULL || c->n >= RAFT_MAX_MEMBERS)
        return RAFT_EINVAL;
    for (pos = 0; pos < c->n && c->members[pos].id < id; pos++)
        ;
    for (i = c->n; i > pos; i--)
        c->members[i] = c->members[i - 1];
    memset(&c->members[pos], 0, sizeof(c->members[pos]));
    c->members[pos].id = id;
    c->members[pos].role = (uint8_t)role;
    if (alen > 0)
        memcpy(c->members[pos].address, address, alen);
    c->n++;
    return RAFT_OK;
}

int raft_config_remove(struct raft_config *c, raft_id id)
{
    uint32_t i;

    for (i = 0; i < c->n; i++) {
        if (c->members[i].id != id)
            continue;
        for (; i + 1 < c->n; i++)
            c->members[i] = c->members[i + 1];
        c->n--;
        return RAFT_OK;
    }
    return RAFT_EINVAL;
}

uint32_t raft_config_voters(const struct raft_config *c)
{
    uint32_t i, v = 0;

    for (i = 0; i < c->n; i++)
        if (c->members[i].role == RAFT_MEMBER_VOTER)
            v++;
    return v;
}
