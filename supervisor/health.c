/*
 * health.c - probe answers as a pure function, and the seqlocked shared page; see health.h.
 */
#include "health.h"

#include "status.h"
#include "util.h"

#include <sched.h>
#include <stddef.h>
#include <sys/mman.h>

void health_eval(const struct health_inputs *in, uint64_t now_ns, struct health_answer *healthz,
                 struct health_answer *readyz)
{
    int stalled = in->stall_latched ||
                  (now_ns > in->last_frame_ns && now_ns - in->last_frame_ns >= in->stall_ns);

    if (in->worker_state == WORKER_DEAD) {
        *healthz = (struct health_answer){503, "dead"};
        *readyz = *healthz;
        return;
    }
    if (stalled) {
        *healthz = (struct health_answer){503, "stalled"};
        *readyz = *healthz;
        return;
    }
    if (in->worker_state == WORKER_NOFRAME)
        *healthz = (struct health_answer){200, "starting"};
    else
        *healthz = (struct health_answer){200, "ok"};

    if (in->stopping || in->phase == STATUS_PHASE_STOPPING)
        *readyz = (struct health_answer){503, "stopping"};
    else if (in->worker_state == WORKER_NOFRAME || in->phase != STATUS_PHASE_RUNNING)
        *readyz = (struct health_answer){503, "starting"};
    else if (in->leader_id == 0)
        *readyz = (struct health_answer){503, "noleader"};
    else
        *readyz = (struct health_answer){200, "ok"};
}

struct health_shm *health_shm_create(void)
{
    void *p = mmap(NULL, sizeof(struct health_shm), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    return p; /* anonymous mappings are zero-filled */
}

void health_shm_publish(struct health_shm *shm, const struct health_inputs *in)
{
    uint32_t s = atomic_load_explicit(&shm->seq, memory_order_relaxed);
    atomic_store_explicit(&shm->seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&shm->worker_state, in->worker_state, memory_order_relaxed);
    atomic_store_explicit(&shm->stopping, in->stopping, memory_order_relaxed);
    atomic_store_explicit(&shm->phase, in->phase, memory_order_relaxed);
    atomic_store_explicit(&shm->leader_id, in->leader_id, memory_order_relaxed);
    atomic_store_explicit(&shm->stall_latched, in->stall_latched, memory_order_relaxed);
    atomic_store_explicit(&shm->last_frame_ns, in->last_frame_ns, memory_order_relaxed);
    atomic_store_explicit(&shm->stall_ns, in->stall_ns, memory_order_relaxed);
    atomic_store_explicit(&shm->seq, s + 2, memory_order_release);
}

static void read_fields(struct health_shm *shm, struct health_inputs *out)
{
    out->worker_state = atomic_load_explicit(&shm->worker_state, memory_order_relaxed);
    out->stopping = atomic_load_explicit(&shm->stopping, memory_order_relaxed);
    out->phase = atomic_load_explicit(&shm->phase, memory_order_relaxed);
    out->leader_id = atomic_load_explicit(&shm->leader_id, memory_order_relaxed);
    out->stall_latched = atomic_load_explicit(&shm->stall_latched, memory_order_relaxed);
    out->last_frame_ns = atomic_load_explicit(&shm->last_frame_ns, memory_order_relaxed);
    out->stall_ns = atomic_load_explicit(&shm->stall_ns, memory_order_relaxed);
}

/*
 * A live writer finishes an update in well under a microsecond unless it is preempted in
 * the middle of one, so while the sequence is odd the reader gives the CPU away, and it
 * keeps trying for up to READ_PATIENCE_NS: long enough to outlast a preemption on a busy
 * node, short enough for a probe. Only a writer stopped or killed inside an update (or
 * one publishing without pause, which the supervisor never does) outlasts it.
 */
#define READ_PATIENCE_NS (100ull * 1000000ull)

void health_shm_read(struct health_shm *shm, struct health_inputs *out)
{
    uint64_t deadline = 0;
    for (;;) {
        uint32_t s1 = atomic_load_explicit(&shm->seq, memory_order_acquire);
        if ((s1 & 1u) == 0) {
            read_fields(shm, out);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&shm->seq, memory_order_relaxed) == s1)
                return;
        } else {
            sched_yield();
        }
        uint64_t now = mono_ns();
        if (deadline == 0)
            deadline = now + READ_PATIENCE_NS;
        else if (now > deadline)
            break;
    }
    /*
     * The writer is stuck inside an update (it was SIGSTOPped or killed mid-write). Use
     * what is there; if it says alive, the stall rule will catch the frozen timestamps.
     */
    read_fields(shm, out);
}

uint64_t health_own_pause_ns(uint64_t before_ns, uint64_t after_ns, uint64_t timeout_ns)
{
    if (after_ns <= before_ns)
        return 0;
    uint64_t took = after_ns - before_ns;
    if (took <= timeout_ns + (uint64_t)HEALTH_PAUSE_MIN_MS * 1000000ull)
        return 0;
    return took;
}
