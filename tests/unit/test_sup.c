/*
 * test_sup.c - the supervisor's pure decisions (supervisor/sup.c).
 *
 * Pinned here: which start-up exit codes of the worker spurctld passes through as its own
 * (exactly 64, 65, 73 and 78, DESIGN.md section 4; everything else, 70 and 71 included,
 * becomes 70), and the stall clock that does not hold the supervisor's own pause against
 * the worker (sup_silence_origin()). The event loop around them is tested with real
 * processes in tests/integration/test_supervisor.py and test_pid1.py.
 */
#include "check_run.h"
#include "sup.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#define MS 1000000ull
#define PAUSE (250 * MS)

/*
 * Start-up exit codes and whether spurctld passes them through as its own (1) or restarts
 * the worker (0). The first four are the contract's; a restart may help with the rest:
 * internal error, OS failure (a port still in use), and anything outside the contract's
 * four, including the rest of sysexits' 64-78.
 */
static const struct startup_code_case {
    int code;
    int final;
} startup_codes[] = {
    {64, 1}, {65, 1}, {73, 1}, {78, 1}, {70, 0}, {71, 0}, {0, 0}, {1, 0}, {66, 0}, {77, 0},
};

START_TEST(test_startup_code_verdict)
{
    const struct startup_code_case *c = &startup_codes[_i];
    ck_assert_msg(sup_startup_code_is_final(c->code) == c->final, "exit code %d: want %d", c->code,
                  c->final);
}
END_TEST

START_TEST(test_startup_codes_only_four_final)
{
    int finals = 0;
    for (int code = -1; code <= 256; code++) {
        int f = sup_startup_code_is_final(code);
        ck_assert(f == 0 || f == 1);
        finals += f;
    }
    ck_assert_int_eq(finals, 4);
}
END_TEST

START_TEST(test_silence_counts_while_supervisor_runs)
{
    /* Regular ticks every 20 ms, worker silent for 5 s: every millisecond counts. */
    uint64_t frame = 1000 * MS, paused = 99;
    uint64_t run = frame;
    for (uint64_t now = frame + 20 * MS; now <= frame + 5000 * MS; now += 20 * MS) {
        ck_assert_uint_eq(sup_silence_origin(frame, run, now, PAUSE, &paused), frame);
        ck_assert_uint_eq(paused, 0);
        run = now;
    }
    /* A late tick below the pause threshold (a busy node) still counts in full. */
    ck_assert_uint_eq(sup_silence_origin(frame, run, run + PAUSE, PAUSE, &paused), frame);
    ck_assert_uint_eq(paused, 0);
}
END_TEST

START_TEST(test_whole_replica_pause_is_excused)
{
    /* Last frame at 1000 ms, our last tick at 1030 ms, then frozen until 6030 ms. */
    uint64_t frame = 1000 * MS, run = 1030 * MS, now = 6030 * MS, paused = 0;
    uint64_t origin = sup_silence_origin(frame, run, now, PAUSE, &paused);
    ck_assert_uint_eq(paused, 5000 * MS);
    ck_assert_uint_eq(origin, 6000 * MS);
    /* What still counts is the silence we witnessed before the freeze: 30 ms. */
    ck_assert_uint_eq(now - origin, 30 * MS);
}
END_TEST

START_TEST(test_pause_right_after_a_frame)
{
    /* A frame read later than our last tick: that read is the last sign we ran. */
    uint64_t frame = 2000 * MS, run = 1990 * MS, now = 9000 * MS, paused = 0;
    uint64_t origin = sup_silence_origin(frame, run, now, PAUSE, &paused);
    ck_assert_uint_eq(paused, 7000 * MS);
    ck_assert_uint_eq(origin, now);
}
END_TEST

START_TEST(test_stalled_worker_still_killed_after_a_pause)
{
    /*
     * The worker had been silent 1400 ms (kill at 1500) when everything froze: after the
     * freeze the old silence still counts, so the kill comes 100 ms of our running later,
     * not a whole window later.
     */
    uint64_t frame = 1000 * MS, run = 2400 * MS, now = 12400 * MS, paused = 0;
    uint64_t origin = sup_silence_origin(frame, run, now, PAUSE, &paused);
    ck_assert_uint_eq(now - origin, 1400 * MS);
    uint64_t later = now + 100 * MS;
    ck_assert_uint_eq(sup_silence_origin(origin, now, later, PAUSE, &paused), origin);
    ck_assert_uint_eq(paused, 0);
    ck_assert_uint_eq(later - origin, 1500 * MS);
}
END_TEST

START_TEST(test_clock_not_advanced)
{
    uint64_t paused = 7;
    ck_assert_uint_eq(sup_silence_origin(500 * MS, 600 * MS, 600 * MS, PAUSE, &paused),
                      500 * MS);
    ck_assert_uint_eq(paused, 0);
    /* now before "seen" (a frame stamped after this tick's clock read): no pause. */
    ck_assert_uint_eq(sup_silence_origin(700 * MS, 600 * MS, 650 * MS, PAUSE, &paused),
                      700 * MS);
    ck_assert_uint_eq(paused, 0);
}
END_TEST

static Suite *sup_suite(void)
{
    Suite *s = suite_create("sup");
    TCase *tc =
        check_case(s, "startup", (const TTest *[]){test_startup_codes_only_four_final, NULL});
    tcase_add_loop_test(tc, test_startup_code_verdict, 0,
                        (int)(sizeof(startup_codes) / sizeof(startup_codes[0])));
    check_case(s, "stall_clock",
               (const TTest *[]){
                   test_silence_counts_while_supervisor_runs, test_whole_replica_pause_is_excused,
                   test_pause_right_after_a_frame, test_stalled_worker_still_killed_after_a_pause,
                   test_clock_not_advanced, NULL});
    return s;
}

int main(void)
{
    return check_run(sup_suite());
}
