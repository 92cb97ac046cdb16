/*
 * test_spool.c - the agent's spool in a scratch directory: every record round-trips
 * through a close and a reopen (which is what a restart of spurd does), and torn or
 * garbage files are reported (counted in skipped) and skipped, never a crash.
 */
#include "spool.h"

#include "scratch.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[256];
static char dir[512];

static void setup(void)
{
    char d[300];
    scratch_make(d, sizeof(d), base);
    snprintf(dir, sizeof(dir), "%s/spool/d", d); /* parents are made too */
}

static void put_file(const char *rel, const void *data, size_t len)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static bool exists(const char *rel)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    return access(p, F_OK) == 0;
}

/* A Launch of (job_id, attempt) for node n1, with a small script. */
static void make_launch(Spur__Agent__Launch *l, Spur__Api__JobSpec *spec, char **nodes,
                        uint64_t job_id, uint32_t attempt)
{
    spur__agent__launch__init(l);
    spur__api__job_spec__init(spec);
    spec->script.data = (uint8_t *)"#!/bin/sh\ntrue\n";
    spec->script.len = 15;
    spec->user = (char *)"alice";
    nodes[0] = (char *)"n1";
    l->job_id = job_id;
    l->attempt = attempt;
    l->spec = spec;
    l->node_list = nodes;
    l->n_node_list = 1;
    l->cpus = 2;
}

static struct spool_job *create(struct spool *sp, uint64_t job_id, uint32_t attempt)
{
    Spur__Agent__Launch l;
    Spur__Api__JobSpec spec;
    char *nodes[1];
    char err[256];
    struct spool_job *j = NULL;
    make_launch(&l, &spec, nodes, job_id, attempt);
    ck_assert_msg(spool_create(sp, &l, &j, err, sizeof(err)) == 0, "%s", err);
    return j;
}

/* Write an ended report as the monitor does (the spool never writes one itself). */
static void write_ended(uint64_t job_id, uint32_t attempt, int exit_code)
{
    Spur__Agent__Ended e = SPUR__AGENT__ENDED__INIT;
    e.job_id = job_id;
    e.attempt = attempt;
    e.exit_code = exit_code;
    e.node = (char *)"n1";
    uint8_t buf[256];
    size_t n = spur__agent__ended__pack(&e, buf);
    char rel[128];
    snprintf(rel, sizeof(rel), "jobs/%llu.%u/ended", (unsigned long long)job_id, attempt);
    put_file(rel, buf, n);
}

static void open_ok(struct spool *sp)
{
    char err[512];
    ck_assert_msg(spool_open(sp, dir, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(test_fresh_spool_is_made_private_and_empty)
{
    struct spool sp;
    open_ok(&sp);
    struct stat st;
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0700);
    ck_assert(exists("jobs") && exists("tombstones"));
    ck_assert_uint_eq(sp.term, 0);
    ck_assert_ptr_null(sp.jobs);
    ck_assert_uint_eq(sp.skipped, 0);
    spool_close(&sp);
}
END_TEST

START_TEST(test_term_only_grows_and_survives_reopen)
{
    struct spool sp;
    char err[256];
    open_ok(&sp);
    ck_assert_int_eq(spool_set_term(&sp, 7, err, sizeof(err)), 0);
    ck_assert_int_eq(spool_set_term(&sp, 3, err, sizeof(err)), 0);
    ck_assert_uint_eq(sp.term, 7);
    spool_close(&sp);
    open_ok(&sp);
    ck_assert_uint_eq(sp.term, 7);
    ck_assert_uint_eq(sp.skipped, 0);
    spool_close(&sp);
}
END_TEST

START_TEST(test_created_attempt_is_listed_after_reopen_with_its_launch)
{
    struct spool sp;
    open_ok(&sp);
    struct spool_job *j = create(&sp, 42, 3);
    ck_assert_ptr_nonnull(j->launch);
    ck_assert(j->start_time_ms > 0);
    ck_assert(exists("jobs/42.3/launch"));
    ck_assert_int_eq(spool_launch_check(&sp, 42, 3), SPOOL_LAUNCH_PRESENT);
    spool_close(&sp);

    open_ok(&sp);
    ck_assert_uint_eq(sp.njobs, 1);
    j = spool_find(&sp, 42, 0);
    ck_assert_ptr_nonnull(j);
    ck_assert_uint_eq(j->attempt, 3);
    ck_assert_ptr_nonnull(j->launch);
    ck_assert_uint_eq(j->launch->cpus, 2);
    ck_assert_str_eq(j->launch->spec->user, "alice");
    ck_assert_uint_eq(j->launch->spec->script.len, 15);
    ck_assert_uint_eq(j->pid, 0); /* not this process's child */
    ck_assert_ptr_null(j->ended);
    ck_assert_int_eq(spool_launch_check(&sp, 42, 3), SPOOL_LAUNCH_PRESENT);
    ck_assert_int_eq(spool_launch_check(&sp, 42, 2), SPOOL_LAUNCH_FINISHED);
    ck_assert_int_eq(spool_launch_check(&sp, 42, 4), SPOOL_LAUNCH_NEW);
    ck_assert_int_eq(spool_launch_check(&sp, 43, 1), SPOOL_LAUNCH_NEW);
    spool_close(&sp);
}
END_TEST

START_TEST(test_ended_report_is_read_then_ack_removes_and_tombstones)
{
    struct spool sp;
    char err[256];
    open_ok(&sp);
    struct spool_job *j = create(&sp, 5, 1);
    ck_assert_int_eq(spool_read_ended(&sp, j, err, sizeof(err)), 0);
    write_ended(5, 1, 3);
    ck_assert_int_eq(spool_read_ended(&sp, j, err, sizeof(err)), 1);
    ck_assert_ptr_nonnull(j->ended);
    Spur__Agent__Ended *e = spur__agent__ended__unpack(NULL, j->ended_len, j->ended);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->exit_code, 3);
    spur__agent__ended__free_unpacked(e, NULL);
    spool_close(&sp);

    open_ok(&sp); /* the report is found again at start */
    j = spool_find(&sp, 5, 1);
    ck_assert_ptr_nonnull(j);
    ck_assert_ptr_nonnull(j->ended);
    ck_assert_int_eq(spool_remove(&sp, j, err, sizeof(err)), 0);
    ck_assert(!exists("jobs/5.1"));
    ck_assert_ptr_null(spool_find(&sp, 5, 1));
    ck_assert_int_eq(spool_launch_check(&sp, 5, 1), SPOOL_LAUNCH_FINISHED);
    spool_close(&sp);

    open_ok(&sp);
    ck_assert_uint_eq(sp.njobs, 0);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 5), 1);
    ck_assert_int_eq(spool_launch_check(&sp, 5, 1), SPOOL_LAUNCH_FINISHED);
    ck_assert_int_eq(spool_launch_check(&sp, 5, 2), SPOOL_LAUNCH_NEW);
    spool_close(&sp);
}
END_TEST

START_TEST(test_tombstone_covers_every_lower_attempt_and_persists)
{
    struct spool sp;
    char err[256];
    open_ok(&sp);
    ck_assert_int_eq(spool_tombstone(&sp, 9, 4, err, sizeof(err)), 0);
    ck_assert_int_eq(spool_tombstone(&sp, 9, 2, err, sizeof(err)), 0); /* lower: no change */
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 9), 4);
    spool_close(&sp);
    open_ok(&sp);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 9), 4);
    ck_assert_int_eq(spool_launch_check(&sp, 9, 1), SPOOL_LAUNCH_FINISHED);
    ck_assert_int_eq(spool_launch_check(&sp, 9, 4), SPOOL_LAUNCH_FINISHED);
    ck_assert_int_eq(spool_launch_check(&sp, 9, 5), SPOOL_LAUNCH_NEW);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 10), 0);
    spool_close(&sp);
}
END_TEST

START_TEST(test_tombstones_are_bounded_to_the_newest)
{
    struct spool sp;
    char err[256];
    open_ok(&sp);
    ck_assert_uint_eq(sp.tomb_keep, SPOOL_TOMB_KEEP);
    sp.tomb_keep = 400; /* the rule at a size a test can fsync through quickly */
    /* Past the compaction point (1.25 x keep) once: the oldest jobs go, the newest stay. */
    uint64_t n = 500 + 10;
    for (uint64_t id = 1; id <= n; id++)
        ck_assert_int_eq(spool_tombstone(&sp, id, 1, err, sizeof(err)), 0);
    ck_assert_uint_eq(sp.tomb_lines, 400 + 10);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 1), 0);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 100), 0);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 101), 1);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, n), 1);
    spool_close(&sp);
    open_ok(&sp);
    ck_assert_uint_eq(sp.tomb_lines, 410);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 100), 0);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 101), 1);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, n), 1);
    ck_assert_uint_eq(sp.skipped, 0);
    spool_close(&sp);
}
END_TEST

START_TEST(test_garbage_is_reported_and_skipped)
{
    struct spool sp;
    char err[256];
    open_ok(&sp);
    ck_assert_int_eq(spool_tombstone(&sp, 3, 1, err, sizeof(err)), 0);
    create(&sp, 6, 1);
    create(&sp, 7, 1);
    spool_close(&sp);

    put_file("term", "banana\n", 7);
    put_file("tombstones", "3.1\nnot a line\n4.x\n8.2", 22); /* the last line is torn */
    char d[600];
    snprintf(d, sizeof(d), "%s/jobs/junk", dir);
    ck_assert_int_eq(mkdir(d, 0700), 0);
    put_file("jobs/6.1/launch", "\xff\xff\xff", 3);
    put_file("jobs/7.1/ended", "\x08", 1);
    snprintf(d, sizeof(d), "%s/jobs/8.1", dir); /* died before its launch record */
    ck_assert_int_eq(mkdir(d, 0700), 0);

    open_ok(&sp);
    /* term, tombstones, junk/, 6.1's launch, 7.1's ended: five reports. */
    ck_assert_uint_eq(sp.skipped, 5);
    ck_assert_uint_eq(sp.term, 0);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 3), 1);
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 8), 0);
    struct spool_job *j6 = spool_find(&sp, 6, 1);
    ck_assert_ptr_nonnull(j6); /* still present: its attempt never starts again */
    ck_assert_ptr_null(j6->launch);
    ck_assert_int_eq(spool_launch_check(&sp, 6, 1), SPOOL_LAUNCH_PRESENT);
    struct spool_job *j7 = spool_find(&sp, 7, 1);
    ck_assert_ptr_nonnull(j7);
    ck_assert(j7->ended_bad);
    ck_assert_ptr_null(j7->ended);
    ck_assert_ptr_null(spool_find(&sp, 8, 1));
    ck_assert(!exists("jobs/8.1")); /* never started: removed */
    ck_assert(exists("jobs/junk")); /* left for an operator */
    spool_close(&sp);

    open_ok(&sp); /* the tombstones were rewritten clean */
    ck_assert_uint_eq(spool_tomb_attempt(&sp, 3), 1);
    ck_assert_uint_eq(sp.skipped, 4);
    spool_close(&sp);
}
END_TEST

START_TEST(test_spool_below_a_file_fails_with_the_path)
{
    struct spool sp;
    char err[512], parent[600], path[700];
    snprintf(parent, sizeof(parent), "%s.file", dir);
    char *slash = strrchr(parent, '/');
    ck_assert_ptr_nonnull(slash);
    char pdir[600];
    snprintf(pdir, sizeof(pdir), "%.*s", (int)(slash - parent), parent);
    ck_assert_int_eq(mkdir(pdir, 0700), 0);
    FILE *f = fopen(parent, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/spool", parent);
    ck_assert_int_eq(spool_open(&sp, path, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, path) != NULL && strstr(err, "cannot create") != NULL, "%s", err);
}
END_TEST

static Suite *spool_suite(void)
{
    Suite *s = suite_create("spool");
    TCase *tc =
        check_case(s, "spool",
                   (const TTest *[]){test_fresh_spool_is_made_private_and_empty,
                                     test_term_only_grows_and_survives_reopen,
                                     test_created_attempt_is_listed_after_reopen_with_its_launch,
                                     test_ended_report_is_read_then_ack_removes_and_tombstones,
                                     test_tombstone_covers_every_lower_attempt_and_persists,
                                     test_tombstones_are_bounded_to_the_newest,
                                     test_garbage_is_reported_and_skipped,
                                     test_spool_below_a_file_fails_with_the_path, NULL});
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    return s;
}

int main(void)
{
    return scratch_run(spool_suite(), base, sizeof(base), "spool");
}
