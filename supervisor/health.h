/*
 * health.h - what the probes answer, as a pure function, and the shared page that carries
 * its inputs from the supervisor to the health responder.
 *
 * Guarantees:
 *   - health_eval() is the only place that decides a probe answer (DESIGN.md section 5).
 *     It reads no clock and no socket; the caller passes "now". Priority, highest first:
 *     dead > stalled > stopping > starting > noleader > ok.
 *   - The supervisor is the only writer of struct health_shm; the responder only reads.
 *     Writes go through a sequence lock, so a reader never sees half of an update (say, a
 *     new phase with an old leader). The reader never blocks on the writer: while an
 *     update is in progress it yields and retries, for at most 100 ms (a writer preempted
 *     mid-update), and only a writer stopped inside an update makes it use what is there.
 *   - Stall is computed by the reader from last_frame_ns and its own monotonic clock, so a
 *     worker whose frames stop is reported stalled on time even if the supervisor's own
 *     timer is late; "dead" is written by the supervisor before it does anything else.
 *
 * The page is an anonymous MAP_SHARED mapping made before any fork, so both processes see
 * the same memory and no descriptor is involved.
 */
#ifndef SPUR_HEALTH_H
#define SPUR_HEALTH_H

#include <stdatomic.h>
#include <stdint.h>

enum worker_state {
    WORKER_NOFRAME = 0, /* started, no valid status frame yet */
    WORKER_ALIVE = 1,   /* frames arrive */
    WORKER_DEAD = 2,    /* pipe EOF, exited, or being killed */
};

/* A consistent copy of the inputs. */
struct health_inputs {
    uint32_t worker_state;  /* enum worker_state */
    uint32_t stopping;      /* SIGTERM/SIGINT received by the supervisor */
    uint32_t phase;         /* enum status_phase of the last frame */
    uint32_t leader_id;     /* 0: no leader known */
    uint32_t stall_latched; /* the supervisor has begun killing a stalled worker */
    uint64_t last_frame_ns; /* CLOCK_MONOTONIC of the last frame; worker start before one */
    uint64_t stall_ns;      /* supervisor.stall_timeout_ms in ns */
};

struct health_answer {
    int code;         /* 200 or 503 */
    const char *word; /* "ok", "starting", "noleader", "stopping", "stalled", "dead" */
};

void health_eval(const struct health_inputs *in, uint64_t now_ns, struct health_answer *healthz,
                 struct health_answer *readyz);

/*
 * A process whose own wait came back this much later than it asked for was not running
 * (SIGSTOP of the whole replica, a frozen VM): the worker most likely was not either, and
 * the time is not held against it. Both the supervisor (its 20 ms tick) and the responder
 * (its idle wake-up) apply the rule, so neither a kill nor a "stalled" answer follows a
 * freeze of the whole replica.
 */
#define HEALTH_PAUSE_MIN_MS 250

/*
 * How long the caller was not running, given the monotonic time it last woke (before the
 * work and the wait that followed), the time it woke now, and the wait's own timeout: the
 * whole time between the two wakes when the second came more than HEALTH_PAUSE_MIN_MS
 * later than the timeout allows, else 0.
 */
uint64_t health_own_pause_ns(uint64_t before_ns, uint64_t after_ns, uint64_t timeout_ns);

struct health_shm {
    _Atomic uint32_t seq; /* odd while the writer is inside an update */
    _Atomic uint32_t worker_state;
    _Atomic uint32_t stopping;
    _Atomic uint32_t phase;
    _Atomic uint32_t leader_id;
    _Atomic uint32_t stall_latched;
    _Atomic uint64_t last_frame_ns;
    _Atomic uint64_t stall_ns;
    _Atomic int32_t worker_pid;
};

/* Map a zeroed page shared with future children; NULL on failure (errno set). */
struct health_shm *health_shm_create(void);
/* Writer side: copy *in into the page under the sequence lock. */
void health_shm_publish(struct health_shm *shm, const struct health_inputs *in);
/* Reader side: a consistent snapshot (or what is there after 100 ms of retries). */
void health_shm_read(struct health_shm *shm, struct health_inputs *out);

#endif
