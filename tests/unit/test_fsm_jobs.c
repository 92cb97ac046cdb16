/*
 * test_fsm_jobs.c - the job-table helpers squeue and scancel share (raftd/fsm/fsm_jobs.c).
 *
 * Pinned: fsm_jobs_sort_ids() leaves each named id once, ascending, whatever the order
 * and repeats of the request; fsm_job_filter_match() lets a job through only when every
 * non-empty list holds its value, an empty list (and a zeroed filter) matching any job.
 */
#include "check_run.h"
#include "fsm_jobs.h"

#include <check.h>
#include <stdint.h>

START_TEST(test_sort_ids)
{
    static const struct {
        uint64_t in[6];
        size_t n;
        uint64_t want[6];
        size_t nwant;
    } t[] = {
        {{0}, 0, {0}, 0},
        {{7}, 1, {7}, 1},
        {{5, 3, 5, 1, 3}, 5, {1, 3, 5}, 3},
        {{9, 9, 9}, 3, {9}, 1},
        {{4, 3, 2, 1}, 4, {1, 2, 3, 4}, 4},
        {{UINT64_MAX, 0, UINT64_MAX, 2, 0, 1}, 6, {0, 1, 2, UINT64_MAX}, 4},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        uint64_t ids[6];
        for (size_t k = 0; k < t[i].n; k++)
            ids[k] = t[i].in[k];
        ck_assert_uint_eq(fsm_jobs_sort_ids(ids, t[i].n), t[i].nwant);
        for (size_t k = 0; k < t[i].nwant; k++)
            ck_assert_uint_eq(ids[k], t[i].want[k]);
    }
}
END_TEST

START_TEST(test_filter_match)
{
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    spec.name = "build";
    struct fsm_job *job = fsm_job_new(&spec, "alice", "batch");
    ck_assert_ptr_nonnull(job);
    job->state = SPUR__API__JOB_STATE__JOB_RUNNING;

    char *alice_bob[] = {"bob", "alice"}, *bob[] = {"bob"}, *null_name[] = {NULL};
    char *batch[] = {"batch"}, *debug[] = {"debug"}, *build[] = {"test", "build"};
    Spur__Api__JobState running[] = {SPUR__API__JOB_STATE__JOB_PENDING,
                                     SPUR__API__JOB_STATE__JOB_RUNNING};
    Spur__Api__JobState pending[] = {SPUR__API__JOB_STATE__JOB_PENDING};

    const struct fsm_job_filter none = {0};
    ck_assert(fsm_job_filter_match(job, &none));
    const struct {
        struct fsm_job_filter flt;
        bool want;
    } t[] = {
        {{.users = alice_bob, .n_users = 2}, true},
        {{.users = bob, .n_users = 1}, false},
        {{.users = null_name, .n_users = 1}, false}, /* a NULL string is "" */
        {{.states = running, .n_states = 2}, true},
        {{.states = pending, .n_states = 1}, false},
        {{.names = build, .n_names = 2}, true},
        {{.names = bob, .n_names = 1}, false},
        {{.partitions = batch, .n_partitions = 1}, true},
        {{.partitions = debug, .n_partitions = 1}, false},
        /* every given list must match */
        {{.users = alice_bob,
          .n_users = 2,
          .states = running,
          .n_states = 2,
          .names = build,
          .n_names = 2,
          .partitions = batch,
          .n_partitions = 1},
         true},
        {{.users = alice_bob,
          .n_users = 2,
          .states = running,
          .n_states = 2,
          .names = build,
          .n_names = 2,
          .partitions = debug,
          .n_partitions = 1},
         false},
        /* a list with a count of 0 is no filter, whatever it points to */
        {{.users = bob, .n_users = 0, .partitions = debug, .n_partitions = 0}, true},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        ck_assert_msg(fsm_job_filter_match(job, &t[i].flt) == t[i].want, "case %zu", i);
    fsm_job_free(job);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fsm_jobs");
    TCase *tc = tcase_create("filters");
    tcase_add_test(tc, test_sort_ids);
    tcase_add_test(tc, test_filter_match);
    suite_add_tcase(s, tc);
    return check_run(s);
}
