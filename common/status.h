/*
 * status.h - the worker -> supervisor status frame (DESIGN.md section 6), in C terms.
 *
 * On the pipe a frame is frame.h's 4-byte big-endian length followed by a protobuf
 * spur.status.WorkerStatus. This module turns one into the other and nothing more; the
 * supervisor decides what a frame means, the worker decides when to send one.
 *
 * Decoding is strict: a payload over STATUS_MAX_PAYLOAD, bytes protobuf-c cannot parse, or
 * an enum value outside the known ones is refused, so a corrupted pipe can never make the
 * supervisor believe a phase or a leader that the worker did not send.
 */
#ifndef SPUR_STATUS_H
#define SPUR_STATUS_H

#include <stddef.h>
#include <stdint.h>

#define STATUS_MAX_PAYLOAD 512
#define STATUS_MAX_FRAME (4 + STATUS_MAX_PAYLOAD)

/* Values match proto/status.proto. */
enum status_phase {
    STATUS_PHASE_UNKNOWN = 0,
    STATUS_PHASE_STARTING = 1,
    STATUS_PHASE_RUNNING = 2,
    STATUS_PHASE_STOPPING = 3,
};

enum status_role {
    STATUS_ROLE_UNKNOWN = 0,
    STATUS_ROLE_FOLLOWER = 1,
    STATUS_ROLE_CANDIDATE = 2,
    STATUS_ROLE_LEADER = 3,
    STATUS_ROLE_LEARNER = 4,
    STATUS_ROLE_PRECANDIDATE = 5,
};

struct worker_status {
    uint64_t seq;
    enum status_phase phase;
    uint32_t node_id;
    enum status_role role;
    uint64_t term;
    uint32_t leader_id; /* 0: none known */
    uint64_t commit_index;
    uint64_t applied_index;
    uint32_t pid;
};

const char *status_phase_name(enum status_phase p);
const char *status_role_name(enum status_role r);

/*
 * Encode s as one whole frame (header included) into buf. Returns the frame length, or
 * -1 if cap is too small.
 */
int status_encode(const struct worker_status *s, uint8_t *buf, size_t cap);
/* Decode one payload (without the header). Returns 0, or -1 for anything malformed. */
int status_decode(const uint8_t *payload, size_t len, struct worker_status *s);

#endif
