/*
 * raft_wire.h - Raft messages to and from proto/raft.proto bytes (protobuf-c).
 *
 * Guarantees:
 *   - Decoding trusts nothing. A frame that does not parse, carries another protocol version
 *     or cluster name, an unknown message or entry type, fields a type does not use,
 *     inconsistent snapshot offsets or more entries than RAFT_WIRE_MAX_ENTRIES is refused
 *     with a distinct raft_wire_rc (raft_wire_rc_name() gives a word for the log line), and
 *     nothing is allocated for it. The core validates again what it receives.
 *   - A decoded message owns its memory: all entry bytes live in one raft_buf (the core
 *     takes references on it, so the shell may free the decoded message right after
 *     raft_step()), the snapshot chunk in another; raft_wire_msg_free() releases the rest.
 *   - Entry indexes are not on the wire: entry i of an APPEND is index + 1 + i.
 *   - Encoding never fails for a message the core produced, except out of memory.
 */
#ifndef SPUR_RAFT_WIRE_H
#define SPUR_RAFT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "raft.h"

#define RAFT_WIRE_VERSION          1
#define RAFT_WIRE_MAX_ENTRIES      65536
#define RAFT_WIRE_MAX_CLUSTER_NAME 63

enum raft_wire_rc {
    RAFT_WIRE_OK = 0,
    RAFT_WIRE_EPARSE = -1,   /* not a Message / Handshake */
    RAFT_WIRE_EVERSION = -2, /* protocol_version differs */
    RAFT_WIRE_ECLUSTER = -3, /* cluster_name differs */
    RAFT_WIRE_ETYPE = -4,    /* unknown message or entry type */
    RAFT_WIRE_EFIELDS = -5,  /* fields inconsistent with the type */
    RAFT_WIRE_ESIZE = -6,    /* a count or size out of bounds */
    RAFT_WIRE_ENOMEM = -7,
};
const char *raft_wire_rc_name(int rc);

/* A decoded message: `msg` is what raft_step() takes. */
struct raft_wire_msg {
    struct raft_msg msg;
    struct raft_entry *entries; /* owned; msg.entries points here */
    struct raft_buf *data;      /* entry bytes (one reference) */
    struct raft_buf *snap;      /* snapshot chunk bytes and config (one reference) */
};

/*
 * Encode m for the cluster `cluster`. On success *out is a malloc'd buffer of *len bytes
 * whose first `headroom` bytes are left free for the caller (a frame header), the
 * encoding following them; free() it when done.
 */
int raft_wire_encode(const struct raft_msg *m, const char *cluster, size_t headroom, uint8_t **out,
                     size_t *len);
/* Decode and validate; on success *out must be released with raft_wire_msg_free(). */
int raft_wire_decode(const uint8_t *buf, size_t len, const char *cluster,
                     struct raft_wire_msg *out);
void raft_wire_msg_free(struct raft_wire_msg *m);

/* The first frame of a peer connection. */
struct raft_wire_handshake {
    char cluster_name[RAFT_WIRE_MAX_CLUSTER_NAME + 1];
    uint32_t protocol_version;
    raft_id node_id;
    bool has_cluster;          /* the sender already has Raft state */
    struct raft_config config; /* its configuration when has_cluster (n may be 0) */
    char api_address[RAFT_MAX_ADDRESS + 1]; /* the sender's client API, "" when unknown */
};
int raft_wire_handshake_encode(const struct raft_wire_handshake *h, size_t headroom, uint8_t **out,
                               size_t *len);
/* Parses and checks sizes; comparing name and version is the caller's decision. */
int raft_wire_handshake_decode(const uint8_t *buf, size_t len, struct raft_wire_handshake *h);

#endif
