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

struct peers {
    bool has_cluster[CFG_MAX_PEERS + 1];
    bool empty[CFG_MAX_PEERS + 1];
};

static enum controller_boot decide(size_t npeers, uint32_t self, const struct peers *p,
                                   uint32_t *peer)
{
    *peer = 0;
    return controller_boot_decide(npeers, self, p->has_cluster, p->empty, peer);
}

START_TEST(test_boot_alone_founds)
{
    struct peers p;
    memset(&p, 0, sizeof(p));
    uint32_t peer;
    /* The only member is a quorum by itself. */
    ck_assert_int_eq(decide(1, 1, &p, &peer), CONTROLLER_BOOT_FOUND);
}
END_TEST

START_TEST(test_boot_waits_for_a_quorum)
{
    struct peers p;
    memset(&p, 0, sizeof(p));
    uint32_t peer;
    /* Three members, nothing heard: one empty replica (itself) is not a quorum. */
    ck_assert_int_eq(decide(3, 1, &p, &peer), CONTROLLER_BOOT_WAIT);
    /* One more empty peer: two of three. */
    p.empty[3] = true;
    ck_assert_int_eq(decide(3, 1, &p, &peer), CONTROLLER_BOOT_FOUND);
    /* Five members: itself and one empty peer are two of five, not three. */
    memset(&p, 0, sizeof(p));
    p.empty[1] = true;
    ck_assert_int_eq(decide(5, 3, &p, &peer), CONTROLLER_BOOT_WAIT);
    p.empty[5] = true;
    ck_assert_int_eq(decide(5, 3, &p, &peer), CONTROLLER_BOOT_FOUND);
    /* Four members need three (4 / 2 + 1). */
    memset(&p, 0, sizeof(p));
    p.empty[2] = true;
    ck_assert_int_eq(decide(4, 1, &p, &peer), CONTROLLER_BOOT_WAIT);
    p.empty[4] = true;
    ck_assert_int_eq(decide(4, 1, &p, &peer), CONTROLLER_BOOT_FOUND);
}
END_TEST

START_TEST(test_boot_joins_a_running_cluster)
{
    struct peers p;
    memset(&p, 0, sizeof(p));
    uint32_t peer;
    /* A quorum of empty peers does not matter once one peer runs a cluster. */
    p.empty[2] = true;
    p.empty[3] = true;
    p.has_cluster[4] = true;
    ck_assert_int_eq(decide(5, 1, &p, &peer), CONTROLLER_BOOT_JOIN);
    ck_assert_uint_eq(peer, 4);
    /* Its own slot never counts as a peer running a cluster. */
    memset(&p, 0, sizeof(p));
    p.has_cluster[2] = true;
    ck_assert_int_eq(decide(3, 2, &p, &peer), CONTROLLER_BOOT_WAIT);
    ck_assert_uint_eq(peer, 0);
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
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_boot_alone_founds);
    tcase_add_test(tc, test_boot_waits_for_a_quorum);
    tcase_add_test(tc, test_boot_joins_a_running_cluster);
    tcase_add_test(tc, test_fsm_conf_follows_the_configuration);
    suite_add_tcase(s, tc);
    return check_run(s);
}
