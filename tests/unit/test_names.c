/*
 * test_names.c - the name tables of common/names.c.
 *
 * Pinned: every job state, node state and role has its exact printed forms (the strings
 * scripts, dashboards and the metrics read), each parses back to its value in any case,
 * and values outside the enums (and the unspecified 0) get the documented fallbacks.
 */
#include "check_run.h"
#include "names.h"
#include "spur.pb-c.h"
#include "status.h"

#include <check.h>
#include <ctype.h>
#include <string.h>

#define JS(x) SPUR__API__JOB_STATE__JOB_##x
#define NS(x) SPUR__API__NODE_STATE__NODE_##x

static void lower(char *dst, const char *src, size_t cap)
{
    size_t i = 0;
    for (; src[i] && i + 1 < cap; i++)
        dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

START_TEST(test_job_states)
{
    static const struct {
        int st;
        const char *code, *name, *label;
    } t[] = {
        {JS(PENDING), "PD", "PENDING", "pending"},
        {JS(RUNNING), "R", "RUNNING", "running"},
        {JS(COMPLETING), "CG", "COMPLETING", "completing"},
        {JS(COMPLETED), "CD", "COMPLETED", "completed"},
        {JS(FAILED), "F", "FAILED", "failed"},
        {JS(CANCELLED), "CA", "CANCELLED", "cancelled"},
        {JS(TIMEOUT), "TO", "TIMEOUT", "timeout"},
        {JS(NODE_FAIL), "NF", "NODE_FAIL", "node_fail"},
        {JS(OUT_OF_MEMORY), "OOM", "OUT_OF_MEMORY", "out_of_memory"},
        {JS(CONFIGURING), "CF", "CONFIGURING", "configuring"},
    };
    ck_assert_uint_eq(sizeof(t) / sizeof(t[0]), NAMES_JOB_NSTATES - 1);
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char low[32];
        ck_assert_str_eq(names_job_state_code(t[i].st), t[i].code);
        ck_assert_str_eq(names_job_state_name(t[i].st), t[i].name);
        ck_assert_str_eq(names_job_state_label(t[i].st), t[i].label);
        ck_assert_int_eq(names_job_state_parse(t[i].code), t[i].st);
        ck_assert_int_eq(names_job_state_parse(t[i].name), t[i].st);
        lower(low, t[i].name, sizeof(low));
        ck_assert_int_eq(names_job_state_parse(low), t[i].st);
        lower(low, t[i].code, sizeof(low));
        ck_assert_int_eq(names_job_state_parse(low), t[i].st);
    }
    ck_assert_int_eq(names_job_state_parse("Canceled"), JS(CANCELLED));
}
END_TEST

START_TEST(test_job_state_fallbacks)
{
    const int bad[] = {JS(STATE_UNSPECIFIED), -1, NAMES_JOB_NSTATES, 1000};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_str_eq(names_job_state_code(bad[i]), "?");
        ck_assert_str_eq(names_job_state_name(bad[i]), "UNKNOWN");
        ck_assert_str_eq(names_job_state_label(bad[i]), "unknown");
    }
    ck_assert_int_eq(names_job_state_parse("UNKNOWN"), -1);
    ck_assert_int_eq(names_job_state_parse("?"), -1);
    ck_assert_int_eq(names_job_state_parse(""), -1);
    ck_assert_int_eq(names_job_state_parse("PENDINGX"), -1);
}
END_TEST

START_TEST(test_node_states)
{
    static const struct {
        int st;
        const char *compact, *lng, *sc;
    } t[] = {
        {NS(IDLE), "idle", "idle", "IDLE"},
        {NS(ALLOCATED), "alloc", "allocated", "ALLOCATED"},
        {NS(MIXED), "mix", "mixed", "MIXED"},
        {NS(DOWN), "down", "down", "DOWN"},
        {NS(DRAINED), "drain", "drained", "IDLE+DRAIN"},
        {NS(DRAINING), "drng", "draining", "MIXED+DRAIN"},
        {NS(UNKNOWN), "unk", "unknown", "UNKNOWN"},
    };
    ck_assert_uint_eq(sizeof(t) / sizeof(t[0]), NAMES_NODE_NSTATES - 1);
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        char up[32];
        ck_assert_str_eq(names_node_state_compact(t[i].st), t[i].compact);
        ck_assert_str_eq(names_node_state_long(t[i].st), t[i].lng);
        ck_assert_str_eq(names_node_state_scontrol(t[i].st, false), t[i].sc);
        ck_assert_int_eq(names_node_state_parse(t[i].compact), t[i].st);
        ck_assert_int_eq(names_node_state_parse(t[i].lng), t[i].st);
        size_t k = 0;
        for (; t[i].lng[k]; k++)
            up[k] = (char)toupper((unsigned char)t[i].lng[k]);
        up[k] = '\0';
        ck_assert_int_eq(names_node_state_parse(up), t[i].st);
    }
    /* Only a draining node changes with its allocation. */
    ck_assert_str_eq(names_node_state_scontrol(NS(DRAINING), true), "ALLOCATED+DRAIN");
    ck_assert_str_eq(names_node_state_scontrol(NS(DRAINED), true), "IDLE+DRAIN");
    ck_assert_str_eq(names_node_state_scontrol(NS(ALLOCATED), true), "ALLOCATED");
}
END_TEST

START_TEST(test_node_state_fallbacks)
{
    const int bad[] = {NS(STATE_UNSPECIFIED), -1, NAMES_NODE_NSTATES, 1000};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_str_eq(names_node_state_compact(bad[i]), "unk");
        ck_assert_str_eq(names_node_state_long(bad[i]), "unknown");
        ck_assert_str_eq(names_node_state_scontrol(bad[i], false), "UNKNOWN");
        ck_assert_str_eq(names_node_state_scontrol(bad[i], true), "UNKNOWN");
    }
    ck_assert_int_eq(names_node_state_parse("sleepy"), -1);
    ck_assert_int_eq(names_node_state_parse(""), -1);
    ck_assert_int_eq(names_node_state_parse("IDLE+DRAIN"), -1);
}
END_TEST

START_TEST(test_roles)
{
    static const struct {
        enum status_role r;
        const char *name;
    } t[] = {
        {STATUS_ROLE_FOLLOWER, "follower"},
        {STATUS_ROLE_CANDIDATE, "candidate"},
        {STATUS_ROLE_LEADER, "leader"},
        {STATUS_ROLE_LEARNER, "learner"},
        {STATUS_ROLE_PRECANDIDATE, "precandidate"},
    };
    ck_assert_uint_eq(sizeof(t) / sizeof(t[0]), NAMES_NROLES - 1);
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        ck_assert_str_eq(names_role((int)t[i].r), t[i].name);
        /* status.c prints through the same table. */
        ck_assert_str_eq(status_role_name(t[i].r), t[i].name);
    }
    const int bad[] = {STATUS_ROLE_UNKNOWN, -1, NAMES_NROLES, 99};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_str_eq(names_role(bad[i]), "unknown");
}
END_TEST

static Suite *names_suite(void)
{
    Suite *s = suite_create("names");
    check_case(s, "tables",
               (const TTest *[]){test_job_states, test_job_state_fallbacks, test_node_states,
                                 test_node_state_fallbacks, test_roles, NULL});
    return s;
}

int main(void)
{
    return check_run(names_suite());
}
