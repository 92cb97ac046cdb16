/*
 * test_raft_sim.c - the Raft core in a deterministic simulated cluster, over many seeds.
 *
 *   test_raft_sim                     Check suite: RAFT_SIM_SEEDS seeds (default 2000),
 *                                     3, 5 and 7 voters in turn (seed % 3)
 *   test_raft_sim --first F --count N the Check suite over seeds [F, F+N)
 *   test_raft_sim --seed S [--voters V] [--chaos MS]
 *                                     one run with its readable trace on stdout
 *   test_raft_sim --soak N [--first F] [--chaos MS]
 *                                     N seeds without Check, a summary line per 100
 *
 * Every run: chaos_ms of virtual time with partitions (symmetric, asymmetric, partial),
 * message loss, duplication, reordering, crashes that lose unwritten state, restarts,
 * snapshots, membership changes and transfers; then the network heals and the run must
 * elect a leader, commit a proposal and have every member apply it within bounded virtual
 * time. Safety invariants are checked after every step (see sim.h).
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

static uint64_t first_seed = 0;
static uint64_t n_seeds = 2000;
static uint64_t chaos_ms = 3000;

static uint32_t voters_for(uint64_t seed)
{
    static const uint32_t sizes[] = {3, 5, 7};

    return sizes[seed % 3];
}

START_TEST(test_sim_seed)
{
    uint64_t seed = first_seed + (uint64_t)_i;
    struct sim_run_result res;

    sim_run(voters_for(seed), seed, chaos_ms, NULL, &res);
    ck_assert_msg(res.ok,
                  "seed %" PRIu64 " (voters %u) failed: %s\n  reproduce: %s --seed %" PRIu64, seed,
                  voters_for(seed), res.failure, "test_raft_sim", seed);
    ck_assert_msg(res.elections > 0, "seed %" PRIu64 ": no leader ever elected", seed);
}
END_TEST

/* The cap property is not vacuous: over a few capped (odd) seeds, proposals are refused. */
START_TEST(test_sim_cap_refuses_some_proposals)
{
    uint64_t busy = 0, seed;
    struct sim_run_result res;

    for (seed = first_seed | 1; seed < (first_seed | 1) + 40; seed += 2) {
        sim_run(voters_for(seed), seed, chaos_ms, NULL, &res);
        ck_assert_msg(res.ok, "seed %" PRIu64 " failed: %s", seed, res.failure);
        busy += res.busy;
    }
    ck_assert_uint_gt(busy, 0);
}
END_TEST

static int run_check(void)
{
    Suite *s = suite_create("raft-sim");
    TCase *tc = tcase_create("seeds");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_sim_seed, 0, (int)n_seeds);
    if (first_seed == 0)
        tcase_add_test(tc, test_sim_cap_refuses_some_proposals);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

static int run_one(uint64_t seed, uint32_t voters)
{
    struct sim_run_result res;

    sim_run(voters ? voters : voters_for(seed), seed, chaos_ms, stdout, &res);
    printf("seed=%" PRIu64 " %s steps=%" PRIu64 " commit=%" PRIu64 " elections=%" PRIu64
           " snapshots=%" PRIu64 " crashes=%" PRIu64 " changes=%" PRIu64 " reads=%" PRIu64
           " busy=%" PRIu64 "%s%s\n",
           seed, res.ok ? "ok" : "FAILED", res.steps, res.commits, res.elections, res.snapshots,
           res.crashes, res.changes, res.reads, res.busy, res.ok ? "" : " ",
           res.ok ? "" : res.failure);
    return res.ok ? 0 : 1;
}

static int run_soak(void)
{
    uint64_t i, fails = 0, steps = 0, commits = 0, snaps = 0, changes = 0, crashes = 0, reads = 0,
                elections = 0, busy = 0;
    clock_t t0 = clock();

    for (i = 0; i < n_seeds; i++) {
        uint64_t seed = first_seed + i;
        struct sim_run_result res;

        sim_run(voters_for(seed), seed, chaos_ms, NULL, &res);
        steps += res.steps;
        commits += res.commits;
        snaps += res.snapshots;
        changes += res.changes;
        crashes += res.crashes;
        reads += res.reads;
        busy += res.busy;
        elections += res.elections;
        if (!res.ok) {
            fails++;
            printf("FAILED seed=%" PRIu64 " voters=%u: %s\n", seed, voters_for(seed), res.failure);
        }
        if ((i + 1) % 100 == 0 || i + 1 == n_seeds)
            printf("soak: %" PRIu64 "/%" PRIu64 " seeds, %" PRIu64 " failed, %" PRIu64
                   " steps, %" PRIu64 " commits, %" PRIu64 " elections, %" PRIu64
                   " crashes, %" PRIu64 " snapshot installs, %" PRIu64 " config changes, %" PRIu64
                   " reads, %" PRIu64 " busy, %.1fs\n",
                   i + 1, n_seeds, fails, steps, commits, elections, crashes, snaps, changes, reads,
                   busy, (double)(clock() - t0) / CLOCKS_PER_SEC);
        fflush(stdout);
    }
    return fails == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *env = getenv("RAFT_SIM_SEEDS");
    int i, soak = 0, one = 0;
    uint64_t seed = 0;
    uint32_t voters = 0;

    if (env != NULL)
        n_seeds = strtoull(env, NULL, 10);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
            one = 1;
        } else if (!strcmp(argv[i], "--voters") && i + 1 < argc) {
            voters = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--chaos") && i + 1 < argc) {
            chaos_ms = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--first") && i + 1 < argc) {
            first_seed = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            n_seeds = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--soak") && i + 1 < argc) {
            n_seeds = strtoull(argv[++i], NULL, 10);
            soak = 1;
        } else {
            fprintf(stderr,
                    "usage: %s [--first F --count N] | --seed S [--voters V] [--chaos MS] |"
                    " --soak N [--first F] [--chaos MS]\n",
                    argv[0]);
            return 64;
        }
    }
    if (one)
        return run_one(seed, voters);
    if (soak)
        return run_soak();
    return run_check();
}
