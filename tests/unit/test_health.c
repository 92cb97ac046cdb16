/*
 * test_health.c - probe answers and the seqlocked shared page (supervisor/health.c).
 *
 * health_eval() is checked against the table of DESIGN.md section 5 row by row, including
 * the priorities between conditions (dead > stalled > stopping > starting > noleader > ok)
 * and the stall boundary, and then over every combination of its inputs for the rules
 * that hold everywhere. The shared page is checked for a plain round trip and for a reader
 * racing a writer in another process: each snapshot the reader gets must be one the writer
 * published, never a mix of two.
 */
#include "check_run.h"
#include "health.h"
#include "status.h"

#include <check.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS    1000000ull
#define STALL (3000 * MS)
#define T0    (1000000 * MS) /* an arbitrary monotonic time of the last frame */

/* ---- the table ---------------------------------------------------------------------- */

struct row {
    const char *what;
    uint32_t state, stopping, phase, leader, latched;
    uint64_t age; /* now - last frame */
    int hz_code;
    const char *hz_word;
    int rz_code;
    const char *rz_word;
};

#define ALIVE   WORKER_ALIVE
#define NOFRAME WORKER_NOFRAME
#define DEAD    WORKER_DEAD
#define RUN     STATUS_PHASE_RUNNING
#define START   STATUS_PHASE_STARTING
#define STOP    STATUS_PHASE_STOPPING
#define UNK     STATUS_PHASE_UNKNOWN

static const struct row rows[] = {
    /* what, worker state, stopping, phase, leader, latched, age; healthz; readyz */
    {"serving", ALIVE, 0, RUN, 1, 0, 10 * MS, 200, "ok", 200, "ok"},
    {"serving, frame this instant", ALIVE, 0, RUN, 7, 0, 0, 200, "ok", 200, "ok"},
    {"no leader known", ALIVE, 0, RUN, 0, 0, 10 * MS, 200, "ok", 503, "noleader"},
    {"replaying the log", ALIVE, 0, START, 1, 0, 10 * MS, 200, "ok", 503, "starting"},
    {"phase unknown", ALIVE, 0, UNK, 1, 0, 10 * MS, 200, "ok", 503, "starting"},
    {"worker stopping", ALIVE, 0, STOP, 1, 0, 10 * MS, 200, "ok", 503, "stopping"},
    {"SIGTERM received", ALIVE, 1, RUN, 1, 0, 10 * MS, 200, "ok", 503, "stopping"},
    {"no frame yet", NOFRAME, 0, UNK, 0, 0, 10 * MS, 200, "starting", 503, "starting"},
    {"no frame yet, stale fields", NOFRAME, 0, RUN, 1, 0, 10 * MS, 200, "starting", 503,
     "starting"},
    {"no frame yet, just short of stall", NOFRAME, 0, UNK, 0, 0, STALL - 1, 200, "starting", 503,
     "starting"},
    {"no frame for the stall timeout", NOFRAME, 0, UNK, 0, 0, STALL, 503, "stalled", 503,
     "stalled"},
    {"frames fresh just short of stall", ALIVE, 0, RUN, 1, 0, STALL - 1, 200, "ok", 200, "ok"},
    {"frames stopped exactly the timeout", ALIVE, 0, RUN, 1, 0, STALL, 503, "stalled", 503,
     "stalled"},
    {"frames stopped long ago", ALIVE, 0, RUN, 1, 0, 3600000 * MS, 503, "stalled", 503, "stalled"},
    {"stall latched, frames fresh", ALIVE, 0, RUN, 1, 1, 0, 503, "stalled", 503, "stalled"},
    {"worker dead", DEAD, 0, RUN, 1, 0, 10 * MS, 503, "dead", 503, "dead"},
    {"worker dead before any frame", DEAD, 0, UNK, 0, 0, 0, 503, "dead", 503, "dead"},
    /* Priorities: each condition against the one just below it. */
    {"dead beats stalled", DEAD, 0, RUN, 1, 0, STALL, 503, "dead", 503, "dead"},
    {"dead beats latched stall", DEAD, 0, RUN, 1, 1, 0, 503, "dead", 503, "dead"},
    {"dead beats stopping", DEAD, 1, STOP, 1, 0, 0, 503, "dead", 503, "dead"},
    {"stalled beats stopping", ALIVE, 1, RUN, 1, 0, STALL, 503, "stalled", 503, "stalled"},
    {"latched beats stopping", ALIVE, 1, STOP, 1, 1, 0, 503, "stalled", 503, "stalled"},
    {"stopping beats starting", ALIVE, 1, START, 1, 0, 0, 200, "ok", 503, "stopping"},
    {"stopping beats no frame", NOFRAME, 1, UNK, 0, 0, 0, 200, "starting", 503, "stopping"},
    {"stopping beats noleader", ALIVE, 1, RUN, 0, 0, 0, 200, "ok", 503, "stopping"},
    {"worker stopping beats noleader", ALIVE, 0, STOP, 0, 0, 0, 200, "ok", 503, "stopping"},
    {"starting beats noleader", ALIVE, 0, START, 0, 0, 0, 200, "ok", 503, "starting"},
};

/* Field by field: the struct has padding that a memcmp would trip over. */
static bool inputs_equal(const struct health_inputs *a, const struct health_inputs *b)
{
    return a->worker_state == b->worker_state && a->stopping == b->stopping &&
           a->phase == b->phase && a->leader_id == b->leader_id &&
           a->stall_latched == b->stall_latched && a->last_frame_ns == b->last_frame_ns &&
           a->stall_ns == b->stall_ns;
}

static struct health_inputs inputs_of(const struct row *r, uint64_t *now)
{
    struct health_inputs in = {
        .worker_state = r->state,
        .stopping = r->stopping,
        .phase = r->phase,
        .leader_id = r->leader,
        .stall_latched = r->latched,
        .last_frame_ns = T0,
        .stall_ns = STALL,
    };
    *now = T0 + r->age;
    return in;
}

START_TEST(test_table)
{
    const struct row *r = &rows[_i];
    uint64_t now;
    struct health_inputs in = inputs_of(r, &now);
    struct health_answer hz = {0, NULL}, rz = {0, NULL};
    health_eval(&in, now, &hz, &rz);
    ck_assert_msg(hz.code == r->hz_code && hz.word && strcmp(hz.word, r->hz_word) == 0,
                  "%s: healthz %d %s, want %d %s", r->what, hz.code, hz.word, r->hz_code,
                  r->hz_word);
    ck_assert_msg(rz.code == r->rz_code && rz.word && strcmp(rz.word, r->rz_word) == 0,
                  "%s: readyz %d %s, want %d %s", r->what, rz.code, rz.word, r->rz_code,
                  r->rz_word);
}
END_TEST

/* A live, running worker that knows leader leader_id, its last frame read at T0. */
static struct health_inputs running_with_leader(uint32_t leader_id)
{
    struct health_inputs in = {.worker_state = ALIVE,
                               .phase = RUN,
                               .leader_id = leader_id,
                               .last_frame_ns = T0,
                               .stall_ns = STALL};
    return in;
}

START_TEST(test_clock_behind_last_frame)
{
    /*
     * The responder's clock read can come out a little before the supervisor's stamp of the
     * last frame; that is a fresh frame, not a wrapped-around stall.
     */
    struct health_inputs in = running_with_leader(1);
    struct health_answer hz, rz;
    health_eval(&in, T0 - 5 * MS, &hz, &rz);
    ck_assert_str_eq(hz.word, "ok");
    ck_assert_str_eq(rz.word, "ok");
    health_eval(&in, 0, &hz, &rz);
    ck_assert_str_eq(hz.word, "ok");
}
END_TEST

START_TEST(test_pure)
{
    /* Same inputs, same answers; the inputs are not touched. */
    struct health_inputs in = running_with_leader(2);
    struct health_inputs copy = in;
    struct health_answer a1, b1, a2, b2;
    health_eval(&in, T0 + MS, &a1, &b1);
    health_eval(&in, T0 + MS, &a2, &b2);
    ck_assert_int_eq(a1.code, a2.code);
    ck_assert_str_eq(a1.word, a2.word);
    ck_assert_int_eq(b1.code, b2.code);
    ck_assert_str_eq(b1.word, b2.word);
    ck_assert(inputs_equal(&in, &copy));
}
END_TEST

/* The word's rank in the priority order: dead > stalled > stopping > starting > noleader > ok. */
static int rank(const char *w)
{
    static const char *const order[] = {"ok",       "noleader", "starting",
                                        "stopping", "stalled",  "dead"};
    for (int i = 0; i < 6; i++)
        if (strcmp(w, order[i]) == 0)
            return i;
    ck_abort_msg("unknown word %s", w);
    return -1;
}

/* The rules that hold for any inputs; in->last_frame_ns is T0, the probe comes at T0 + age. */
static void check_combination(const struct health_inputs *in, uint64_t age)
{
    struct health_answer hz, rz;
    health_eval(in, T0 + age, &hz, &rz);
    bool stalled = in->stall_latched || age >= STALL;

    /* healthz: dead, stalled, starting (no frame yet) or ok; 200 for the last two. */
    if (in->worker_state == DEAD)
        ck_assert_str_eq(hz.word, "dead");
    else if (stalled)
        ck_assert_str_eq(hz.word, "stalled");
    else if (in->worker_state == NOFRAME)
        ck_assert_str_eq(hz.word, "starting");
    else
        ck_assert_str_eq(hz.word, "ok");
    ck_assert_int_eq(hz.code, rank(hz.word) <= rank("starting") ? 200 : 503);

    /* readyz: the first condition that holds, by priority; 200 only for ok. */
    if (in->worker_state == DEAD)
        ck_assert_str_eq(rz.word, "dead");
    else if (stalled)
        ck_assert_str_eq(rz.word, "stalled");
    else if (in->stopping || in->phase == STOP)
        ck_assert_str_eq(rz.word, "stopping");
    else if (in->worker_state == NOFRAME || in->phase != RUN)
        ck_assert_str_eq(rz.word, "starting");
    else if (in->leader_id == 0)
        ck_assert_str_eq(rz.word, "noleader");
    else
        ck_assert_str_eq(rz.word, "ok");
    ck_assert_int_eq(rz.code, strcmp(rz.word, "ok") == 0 ? 200 : 503);

    /* Ready implies live; a failing liveness answer is the readiness answer too. */
    if (rz.code == 200)
        ck_assert_str_eq(hz.word, "ok");
    if (hz.code == 503)
        ck_assert_str_eq(rz.word, hz.word);
    ck_assert_int_ge(rank(rz.word), rank(hz.word));
}

START_TEST(test_all_combinations)
{
    /* Every worker state, stopping flag, phase, leader, latch, and ages around the stall. */
    static const uint64_t ages[] = {0, 1, STALL - 1, STALL, STALL + 1};
    enum { NAGES = sizeof(ages) / sizeof(ages[0]), N = 3 * 2 * 4 * 2 * 2 * NAGES };
    for (int i = 0; i < N; i++) {
        int k = i;
        struct health_inputs in = {.last_frame_ns = T0, .stall_ns = STALL};
        uint64_t age = ages[k % NAGES];
        k /= NAGES;
        in.worker_state = (uint32_t)(k % 3);
        k /= 3;
        in.stopping = (uint32_t)(k % 2);
        k /= 2;
        in.phase = (uint32_t)(k % 4);
        k /= 4;
        in.leader_id = (uint32_t)(k % 2);
        k /= 2;
        in.stall_latched = (uint32_t)(k % 2);
        check_combination(&in, age);
    }
}
END_TEST

/* ---- the shared page ---------------------------------------------------------------- */

START_TEST(test_shm_round_trip)
{
    struct health_shm *shm = health_shm_create();
    ck_assert_ptr_nonnull(shm);
    struct health_inputs out;
    memset(&out, 0xa5, sizeof(out));
    health_shm_read(shm, &out);
    /* A new page reads as all zeros. */
    struct health_inputs zero;
    memset(&zero, 0, sizeof(zero));
    ck_assert(inputs_equal(&out, &zero));

    struct health_inputs in = {.worker_state = ALIVE,
                               .stopping = 1,
                               .phase = RUN,
                               .leader_id = 0xfffffffeu,
                               .stall_latched = 1,
                               .last_frame_ns = 0xfedcba9876543210ull,
                               .stall_ns = 0x0123456789abcdefull};
    health_shm_publish(shm, &in);
    memset(&out, 0, sizeof(out));
    health_shm_read(shm, &out);
    ck_assert(inputs_equal(&out, &in));
    /* Each publish moves the sequence by two and leaves it even. */
    ck_assert_uint_eq(atomic_load(&shm->seq), 2);
    health_shm_publish(shm, &zero);
    ck_assert_uint_eq(atomic_load(&shm->seq), 4);
    health_shm_read(shm, &out);
    ck_assert(inputs_equal(&out, &zero));
    ck_assert_int_eq(munmap(shm, sizeof(*shm)), 0);
}
END_TEST

START_TEST(test_shm_shared_with_child)
{
    /* The page is made before fork and both sides see each other's writes. */
    struct health_shm *shm = health_shm_create();
    ck_assert_ptr_nonnull(shm);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct health_inputs in = {.worker_state = DEAD,
                                   .phase = STOP,
                                   .leader_id = 5,
                                   .last_frame_ns = 77,
                                   .stall_ns = 88};
        health_shm_publish(shm, &in);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct health_inputs out;
    health_shm_read(shm, &out);
    ck_assert_uint_eq(out.worker_state, DEAD);
    ck_assert_uint_eq(out.leader_id, 5);
    ck_assert_uint_eq(out.last_frame_ns, 77);
    munmap(shm, sizeof(*shm));
}
END_TEST

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Inputs whose every field is derived from k, so a mix of two publishes shows. */
static struct health_inputs derived(uint32_t k)
{
    struct health_inputs in = {
        .worker_state = k % 3,
        .stopping = (k >> 1) & 1,
        .phase = k % 4,
        .leader_id = k,
        .stall_latched = (k >> 2) & 1,
        .last_frame_ns = (uint64_t)k * 1000003ull,
        .stall_ns = ~(uint64_t)k,
    };
    return in;
}

/*
 * Put the calling process on the which-th CPU it may use, when there are two, so reader
 * and writer really run at once; on one CPU the yields below interleave them instead.
 */
static void pin_to_cpu(int which)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2)
        return;
    int seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (seen++ == which) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof(one), &one);
            return;
        }
    }
}

START_TEST(test_shm_reader_races_writer)
{
    /*
     * A child publishes derived(1), derived(2), ... with a pause of a few hundred
     * nanoseconds between publishes (far more often than the supervisor ever does) until
     * the parent has taken READS snapshots, so reads overlap updates all the time. Every
     * snapshot must be exactly one derived(k), and k must never go back.
     */
    enum { READS = 200000 };
    struct health_shm *shm = health_shm_create();
    ck_assert_ptr_nonnull(shm);
    _Atomic uint32_t *stop =
        mmap(NULL, sizeof(*stop), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(stop, MAP_FAILED);
    struct health_inputs first = derived(1);
    health_shm_publish(shm, &first);

    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pin_to_cpu(1);
        uint32_t x = 2463534242u;
        for (uint32_t k = 2; !atomic_load_explicit(stop, memory_order_relaxed) && k < 0xfffffff0u;
             k++) {
            struct health_inputs in = derived(k);
            health_shm_publish(shm, &in);
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            for (volatile uint32_t spin = x % 256; spin > 0; spin--)
                ;
        }
        _exit(0);
    }

    pin_to_cpu(0);
    /* Start reading once the writer runs (the first publish left the sequence at 2). */
    for (int i = 0; atomic_load(&shm->seq) == 2; i++) {
        ck_assert_msg(i < 10000000, "the writer never started");
        sched_yield();
    }
    /*
     * Read until READS snapshots have shown at least 1000 different publishes, so a busy
     * machine that keeps the writer off the CPU for a while cannot make the test vacuous.
     */
    uint32_t last = 1, distinct = 0;
    uint64_t give_up = now_ms() + 10000;
    for (unsigned long reads = 1; reads <= READS || distinct < 1000; reads++) {
        struct health_inputs out;
        health_shm_read(shm, &out);
        uint32_t k = out.leader_id;
        struct health_inputs want = derived(k);
        if (!inputs_equal(&out, &want) || k < last) {
            atomic_store(stop, 1);
            waitpid(pid, NULL, 0);
            ck_abort_msg("read %lu: leader_id %u (previous %u) with state %u stopping %u "
                         "phase %u latched %u last_frame %llu stall %llu: not one publish",
                         reads, k, last, out.worker_state, out.stopping, out.phase,
                         out.stall_latched, (unsigned long long)out.last_frame_ns,
                         (unsigned long long)out.stall_ns);
        }
        if (k != last)
            distinct++;
        last = k;
        /* Should both processes share one CPU, let the writer in now and then. */
        if (reads % 100 == 0) {
            sched_yield();
            if (now_ms() > give_up)
                break;
        }
    }
    atomic_store(stop, 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The race must have happened for the test to mean anything. */
    ck_assert_msg(distinct >= 1000, "the reader saw only %u publishes in 10 s", distinct);
    munmap((void *)stop, sizeof(*stop));
    munmap(shm, sizeof(*shm));
}
END_TEST

/*
 * Begin an update by hand, the way a writer inside health_shm_publish() leaves the page
 * when it is preempted: the sequence odd and the first fields already new.
 */
static void begin_update(struct health_shm *shm, const struct health_inputs *in)
{
    atomic_fetch_add(&shm->seq, 1);
    atomic_store(&shm->worker_state, in->worker_state);
    atomic_store(&shm->stopping, in->stopping);
    atomic_store(&shm->phase, in->phase);
}

static void finish_update(struct health_shm *shm, const struct health_inputs *in)
{
    atomic_store(&shm->leader_id, in->leader_id);
    atomic_store(&shm->stall_latched, in->stall_latched);
    atomic_store(&shm->last_frame_ns, in->last_frame_ns);
    atomic_store(&shm->stall_ns, in->stall_ns);
    atomic_fetch_add(&shm->seq, 1);
}

START_TEST(test_own_pause)
{
    const uint64_t ms = 1000000ull;
    /* On time, or late by scheduling noise: not a pause. */
    ck_assert_uint_eq(health_own_pause_ns(1000 * ms, 1100 * ms, 100 * ms), 0);
    ck_assert_uint_eq(health_own_pause_ns(1000 * ms, 1000 * ms + 350 * ms, 100 * ms), 0);
    /* Woken early by an event: not a pause. */
    ck_assert_uint_eq(health_own_pause_ns(1000 * ms, 1001 * ms, 100 * ms), 0);
    /* Back far later than asked: the whole time since before the wait is excused. */
    ck_assert_uint_eq(health_own_pause_ns(1000 * ms, 1000 * ms + 351 * ms, 100 * ms), 351 * ms);
    ck_assert_uint_eq(health_own_pause_ns(1000 * ms, 9000 * ms, 0), 8000 * ms);
    /* A clock that did not move forward is never a pause. */
    ck_assert_uint_eq(health_own_pause_ns(1000 * ms, 900 * ms, 0), 0);
}
END_TEST

/* A new page that holds one, with an update to two begun by a writer and not finished. */
static struct health_shm *shm_mid_update(const struct health_inputs *one,
                                         const struct health_inputs *two)
{
    struct health_shm *shm = health_shm_create();
    ck_assert_ptr_nonnull(shm);
    health_shm_publish(shm, one);
    begin_update(shm, two);
    return shm;
}

START_TEST(test_shm_writer_preempted_mid_update)
{
    /* The writer stalls 20 ms inside an update; the reader must wait it out, not mix. */
    struct health_inputs one = derived(1), two = derived(2), out;
    struct health_shm *shm = shm_mid_update(&one, &two);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        usleep(20000);
        finish_update(shm, &two);
        _exit(0);
    }
    health_shm_read(shm, &out);
    ck_assert_msg(inputs_equal(&out, &two), "got leader %u state %u: half an update", out.leader_id,
                  out.worker_state);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    munmap(shm, sizeof(*shm));
}
END_TEST

START_TEST(test_shm_writer_stuck_mid_update)
{
    /* A writer that never finishes must not hang the reader: it returns, and soon. */
    struct health_inputs one = derived(1), two = derived(2), out;
    struct health_shm *shm = shm_mid_update(&one, &two);
    uint64_t t0 = now_ms();
    health_shm_read(shm, &out);
    uint64_t took = now_ms() - t0;
    ck_assert_msg(took < 2000, "the reader waited %llu ms", (unsigned long long)took);
    /* What it returns is what the page holds. */
    ck_assert_uint_eq(out.worker_state, two.worker_state);
    ck_assert_uint_eq(out.leader_id, one.leader_id);
    munmap(shm, sizeof(*shm));
}
END_TEST

static Suite *health_suite(void)
{
    Suite *s = suite_create("health");
    TCase *tc = check_case(
        s, "eval",
        (const TTest *[]){test_clock_behind_last_frame, test_pure, test_all_combinations, NULL});
    tcase_add_loop_test(tc, test_table, 0, (int)(sizeof(rows) / sizeof(rows[0])));

    tc = check_case(s, "shm",
                    (const TTest *[]){test_shm_round_trip, test_shm_shared_with_child,
                                      test_shm_reader_races_writer,
                                      test_shm_writer_preempted_mid_update,
                                      test_shm_writer_stuck_mid_update, test_own_pause, NULL});
    tcase_set_timeout(tc, 60);
    return s;
}

int main(void)
{
    return check_run(health_suite());
}
