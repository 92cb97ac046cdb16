/*
 * test_controller.c - the controller's pure halves: the bootstrap rule and the
 * configuration as the state machine takes it.
 */
#include "cfg.h"
#include "check_run.h"
#include "controller.h"
#include "fsm.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/*
 * One bootstrap situation: the members' count, which one decides, and the members that
 * answered empty and running a cluster (lists of ids, ended by 0); what it must decide,
 * and which peer it joins (0 when it does not join).
 */
struct boot_case {
    size_t npeers;
    uint32_t self;
    uint32_t empty[CFG_MAX_PEERS + 1], has_cluster[CFG_MAX_PEERS + 1];
    enum controller_boot want;
    uint32_t want_peer;
};

static const struct boot_case boot_cases[] = {
    /* The only member is a quorum by itself. */
    {1, 1, {0}, {0}, CONTROLLER_BOOT_FOUND, 0},
    /* Three members, nothing heard: one empty replica (itself) is not a quorum. */
    {3, 1, {0}, {0}, CONTROLLER_BOOT_WAIT, 0},
    /* One more empty peer: two of three. */
    {3, 1, {3}, {0}, CONTROLLER_BOOT_FOUND, 0},
    /* Five members: itself and one empty peer are two of five, not three... */
    {5, 3, {1}, {0}, CONTROLLER_BOOT_WAIT, 0},
    /* ...and with another empty peer, three. */
    {5, 3, {1, 5}, {0}, CONTROLLER_BOOT_FOUND, 0},
    /* Four members need three (4 / 2 + 1). */
    {4, 1, {2}, {0}, CONTROLLER_BOOT_WAIT, 0},
    {4, 1, {2, 4}, {0}, CONTROLLER_BOOT_FOUND, 0},
    /* A quorum of empty peers does not matter once one peer runs a cluster. */
    {5, 1, {2, 3}, {4}, CONTROLLER_BOOT_JOIN, 4},
    /* Its own slot never counts as a peer running a cluster. */
    {3, 2, {0}, {2}, CONTROLLER_BOOT_WAIT, 0},
};

START_TEST(test_boot_decision)
{
    const struct boot_case *bc = &boot_cases[_i];
    bool has_cluster[CFG_MAX_PEERS + 1] = {false}, empty[CFG_MAX_PEERS + 1] = {false};
    for (size_t i = 0; bc->empty[i] != 0; i++)
        empty[bc->empty[i]] = true;
    for (size_t i = 0; bc->has_cluster[i] != 0; i++)
        has_cluster[bc->has_cluster[i]] = true;
    uint32_t peer = 0;
    enum controller_boot got =
        controller_boot_decide(bc->npeers, bc->self, has_cluster, empty, &peer);
    ck_assert_msg(got == bc->want, "case %d: decided %d, want %d", _i, (int)got, (int)bc->want);
    ck_assert_msg(peer == bc->want_peer, "case %d: peer %u, want %u", _i, peer, bc->want_peer);
}
END_TEST

START_TEST(test_fsm_conf_follows_the_configuration)
{
    struct cfg c;
    ck_assert_int_eq(cfg_defaults(&c), 0);
    ck_assert_uint_ge(c.npartitions, 1);
    c.partitions[0].max_nodes = 7;
    c.partitions[0].max_time_min = 60;
    c.partitions[0].up = false;
    c.controller.finished_job_retention_s = 123;
    c.controller.max_script_bytes = 4567;
    struct controller_fsm_conf k;
    ck_assert_int_eq(controller_fsm_conf(&c, &k), 0);
    ck_assert_uint_eq(k.n, c.npartitions);
    for (size_t i = 0; i < k.n; i++) {
        ck_assert_str_eq(k.parts[i].name, c.partitions[i].name);
        ck_assert_str_eq(k.parts[i].nodes, c.partitions[i].nodes);
        ck_assert(k.parts[i].is_default == c.partitions[i].is_default);
        ck_assert(k.parts[i].up == c.partitions[i].up);
        ck_assert_uint_eq(k.parts[i].max_nodes, c.partitions[i].max_nodes);
        ck_assert_uint_eq(k.parts[i].max_time_min, c.partitions[i].max_time_min);
        ck_assert_uint_eq(k.parts[i].max_cpus_per_node, c.partitions[i].max_cpus_per_node);
        ck_assert_uint_eq(k.parts[i].max_mem_mb_per_node, c.partitions[i].max_mem_mb_per_node);
    }
    ck_assert_uint_eq(k.settings.finished_job_retention_s, 123);
    ck_assert_uint_eq(k.settings.max_script_bytes, 4567);

    /* The state machine, fed these, agrees it holds them once they are applied. */
    struct fsm *f = fsm_new(NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert(fsm_partitions_differ(f, k.parts, k.n));
    ck_assert(fsm_settings_differ(f, &k.settings));
    uint8_t *buf;
    size_t len;
    char err[FSM_ERR_MAX];
    ck_assert_int_eq(fsm_encode_set_partitions(k.parts, k.n, 1000, &buf, &len, err, sizeof(err)),
                     FSM_OK);
    ck_assert_int_eq(fsm_apply(f, 1, buf, len, NULL), FSM_OK);
    free(buf);
    ck_assert_int_eq(fsm_encode_set_settings(&k.settings, 1000, &buf, &len), FSM_OK);
    ck_assert_int_eq(fsm_apply(f, 2, buf, len, NULL), FSM_OK);
    free(buf);
    ck_assert(!fsm_partitions_differ(f, k.parts, k.n));
    ck_assert(!fsm_settings_differ(f, &k.settings));
    fsm_free(f);
    controller_fsm_conf_free(&k);
    ck_assert_ptr_null(k.parts);
    cfg_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("controller");
    TCase *tc =
        check_case(s, "core", (const TTest *[]){test_fsm_conf_follows_the_configuration, NULL});
    tcase_add_loop_test(tc, test_boot_decision, 0,
                        (int)(sizeof(boot_cases) / sizeof(boot_cases[0])));
    return check_run(s);
}
