/*
 * status.c - WorkerStatus frames; see status.h.
 */
#include "status.h"

#include "frame.h"
#include "names.h"
#include "status.pb-c.h"

#include <string.h>

const char *status_phase_name(enum status_phase p)
{
    switch (p) {
    case STATUS_PHASE_STARTING:
        return "starting";
    case STATUS_PHASE_RUNNING:
        return "running";
    case STATUS_PHASE_STOPPING:
        return "stopping";
    default:
        return "unknown";
    }
}

const char *status_role_name(enum status_role r)
{
    return names_role((int)r);
}

int status_encode(const struct worker_status *s, uint8_t *buf, size_t cap)
{
    Spur__Status__WorkerStatus m = SPUR__STATUS__WORKER_STATUS__INIT;
    m.seq = s->seq;
    m.phase = (Spur__Status__Phase)s->phase;
    m.node_id = s->node_id;
    m.role = (Spur__Status__Role)s->role;
    m.term = s->term;
    m.leader_id = s->leader_id;
    m.commit_index = s->commit_index;
    m.applied_index = s->applied_index;
    m.pid = s->pid;
    size_t n = spur__status__worker_status__get_packed_size(&m);
    if (n > STATUS_MAX_PAYLOAD || cap < FRAME_HEADER_LEN + n)
        return -1;
    spur__status__worker_status__pack(&m, buf + FRAME_HEADER_LEN);
    frame_put_header(buf, (uint32_t)n);
    return (int)(FRAME_HEADER_LEN + n);
}

/*
 * A fixed arena instead of malloc: a status message has no repeated or string fields, so
 * protobuf-c needs one allocation of the message struct, and the decoder must not touch
 * the heap on the supervisor's hot path.
 */
struct arena {
    uint8_t mem[512] __attribute__((aligned(16)));
    size_t used;
};

static void *arena_alloc(void *data, size_t size)
{
    struct arena *a = data;
    size = (size + 15) & ~(size_t)15;
    if (a->used + size > sizeof(a->mem))
        return NULL;
    void *p = a->mem + a->used;
    a->used += size;
    return p;
}

static void arena_free(void *data, void *ptr)
{
    (void)data;
    (void)ptr;
}

int status_decode(const uint8_t *payload, size_t len, struct worker_status *s)
{
    struct arena a = {.used = 0};
    ProtobufCAllocator alloc = {.alloc = arena_alloc, .free = arena_free, .allocator_data = &a};

    if (len > STATUS_MAX_PAYLOAD)
        return -1;
    Spur__Status__WorkerStatus *m = spur__status__worker_status__unpack(&alloc, len, payload);
    if (m == NULL)
        return -1;
    int ok = (int)m->phase >= 0 && (int)m->phase <= STATUS_PHASE_STOPPING && (int)m->role >= 0 &&
             (int)m->role <= STATUS_ROLE_PRECANDIDATE;
    if (ok) {
        memset(s, 0, sizeof(*s));
        s->seq = m->seq;
        s->phase = (enum status_phase)m->phase;
        s->node_id = m->node_id;
        s->role = (enum status_role)m->role;
        s->term = m->term;
        s->leader_id = m->leader_id;
        s->commit_index = m->commit_index;
        s->applied_index = m->applied_index;
        s->pid = m->pid;
    }
    spur__status__worker_status__free_unpacked(m, &alloc);
    return ok ? 0 : -1;
}
