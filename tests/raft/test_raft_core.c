/*
 * test_raft_core.c - one Check test per rule of the Raft core (raftd/raft/raft.h).
 *
 * Most tests drive a small simulated cluster by hand (tests/raft/sim.h): messages wait in a
 * mailbox until delivered, disks complete at once unless a test makes one manual, and the
 * simulator checks the safety invariants after every step, so each test also ends with
 * "no invariant was violated". Tests named after a rule fail when the rule is broken; the
 * comment above each says which mutation of the core it catches.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/check_run.h"
#include "raft.h"
#include "sim.h"

/* ------------------------------------------------------------------ helpers */

static struct sim *cluster(uint32_t voters, uint32_t spares)
{
    struct sim_config cfg = {.voters = voters, .spares = spares, .seed = 7};

    if (getenv("RAFT_TEST_TRACE"))
        cfg.trace = stderr;
    return sim_new(&cfg);
}

static struct sim *cluster_cfg(struct sim_config *cfg)
{
    if (getenv("RAFT_TEST_TRACE"))
        cfg->trace = stderr;
    return sim_new(cfg);
}

static void no_violation(struct sim *s)
{
    ck_assert_msg(sim_failure(s) == NULL, "invariant violated: %s", sim_failure(s));
}

static struct raft_status status(struct sim *s, raft_id id)
{
    struct raft_status st;

    sim_status(s, id, &st);
    return st;
}

static void elect(struct sim *s, raft_id id)
{
    sim_campaign(s, id);
    sim_stabilize(s);
    ck_assert_uint_eq(sim_leader(s), id);
    ck_assert_uint_eq(status(s, id).role, RAFT_LEADER);
    no_violation(s);
}

/* Let virtual time pass with instant message delivery. */
static void run_for(struct sim *s, uint64_t ms)
{
    uint64_t end = sim_now(s) + ms;

    while (sim_now(s) < end) {
        sim_advance(s, 5);
        sim_stabilize(s);
    }
}

static raft_index propose(struct sim *s, raft_id id, const char *data)
{
    raft_index idx = 0;

    ck_assert_int_eq(sim_propose(s, id, data, &idx), RAFT_OK);
    return idx;
}

/* A message built by hand, for the tests that need exact control. */
struct handmade {
    struct raft_msg m;
    struct raft_entry e[8];
    struct raft_buf *bufs[8];
};

static void hm_append(struct handmade *h, raft_id from, raft_id to, raft_term term, raft_index prev,
                      raft_term prev_term, raft_index commit)
{
    memset(h, 0, sizeof(*h));
    h->m.type = RAFT_MSG_APPEND;
    h->m.from = from;
    h->m.to = to;
    h->m.term = term;
    h->m.index = prev;
    h->m.log_term = prev_term;
    h->m.commit = commit;
    h->m.entries = h->e;
}

static void hm_entry(struct handmade *h, raft_term term, const char *data)
{
    uint32_t i = h->m.n_entries++;

    h->bufs[i] = raft_buf_copy(data, strlen(data));
    h->e[i] = (struct raft_entry){.term = term,
                                  .index = h->m.index + 1 + i,
                                  .type = RAFT_ENTRY_NORMAL,
                                  .len = (uint32_t)strlen(data),
                                  .data = h->bufs[i]->data,
                                  .buf = h->bufs[i]};
}

static void hm_free(struct handmade *h)
{
    uint32_t i;

    for (i = 0; i < h->m.n_entries; i++)
        raft_buf_unref(h->bufs[i]);
}

/* ------------------------------------------------------------------ election */

START_TEST(test_election_one_leader_per_term)
{
    struct sim *s = cluster(3, 0);

    elect(s, 1);
    ck_assert_uint_eq(status(s, 1).term, 2);
    ck_assert_uint_eq(status(s, 2).leader, 1);
    ck_assert_uint_eq(status(s, 3).leader, 1);
    ck_assert_uint_eq(status(s, 2).role, RAFT_FOLLOWER);
    /* a second campaign in the same cluster cannot win while the leader is alive */
    sim_campaign(s, 2);
    sim_stabilize(s);
    ck_assert_uint_eq(sim_leader(s), 1);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_election_timeouts_are_randomized_from_the_seed)
{
    struct raft_options o = {.id = 1, .election_timeout_ms = 1000};
    struct raft_config c = {0};
    struct raft_start st = {.bootstrap = &c};
    struct raft_event tick = {.type = RAFT_EV_TICK, .now = 0};
    struct raft_update u;
    uint64_t seen[8];
    int i, distinct = 0, j;

    raft_config_add(&c, 1, RAFT_MEMBER_VOTER, "a");
    raft_config_add(&c, 2, RAFT_MEMBER_VOTER, "b");
    raft_config_add(&c, 3, RAFT_MEMBER_VOTER, "c");
    for (i = 0; i < 8; i++) {
        struct raft *r;

        o.seed = (uint64_t)i * 7919;
        ck_assert_int_eq(raft_new(&o, &st, 0, &r), RAFT_OK);
        raft_step(r, &tick, &u);
        ck_assert(u.next_deadline >= 1000 && u.next_deadline < 2000);
        seen[i] = u.next_deadline;
        raft_free(r);
    }
    for (i = 0; i < 8; i++) {
        for (j = 0; j < i && seen[j] != seen[i]; j++)
            ;
        if (j == i)
            distinct++;
    }
    ck_assert_int_ge(distinct, 6);
}
END_TEST

/* Pre-vote: an isolated node keeps its term, so it cannot disrupt the cluster on return. */
START_TEST(test_prevote_isolated_node_keeps_its_term)
{
    struct sim *s = cluster(3, 0);

    elect(s, 1);
    sim_isolate(s, 3);
    run_for(s, 2000);
    ck_assert_uint_eq(status(s, 3).term, 2);
    ck_assert_uint_eq(status(s, 3).role, RAFT_PRECANDIDATE);
    sim_heal(s);
    run_for(s, 500);
    ck_assert_uint_eq(sim_leader(s), 1);
    ck_assert_uint_eq(status(s, 1).term, 2);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* The partial-partition outage pattern: node 3 reaches node 2 but not the leader. With
 * pre-vote, check-quorum and stickiness together the leader stays; terms do not move. */
static void partial_partition(bool prevote_only, raft_id *leader, raft_term *term,
                              raft_index *committed)
{
    struct sim_config cfg = {.voters = 3, .seed = 11};
    struct sim *s;
    int i;

    cfg.disable_check_quorum = prevote_only;
    s = cluster_cfg(&cfg);
    elect(s, 1);
    sim_link(s, 1, 3, false);
    sim_link(s, 3, 1, false);
    /* idle: node 3's log stays as up to date as node 2's, the dangerous case */
    for (i = 0; i < 40; i++)
        run_for(s, 100);
    *leader = sim_leader(s);
    *term = status(s, *leader ? *leader : 1).term;
    if (*leader != 0)
        sim_propose(s, *leader, "w", committed);
    run_for(s, 100);
    *committed = status(s, 2).commit >= *committed ? *committed : 0;
    no_violation(s);
    sim_free(s);
}

START_TEST(test_prevote_partial_partition_keeps_leader)
{
    raft_id leader;
    raft_term term;
    raft_index committed;

    partial_partition(false, &leader, &term, &committed);
    ck_assert_uint_eq(leader, 1);
    ck_assert_uint_eq(term, 2);
    ck_assert_uint_gt(committed, 0); /* and it still commits */
}
END_TEST

/* The control experiment: pre-vote alone (no check-quorum, no stickiness) loses the
 * leader under the same partial partition, which is why all three are on by default. */
START_TEST(test_prevote_alone_fails_under_partial_partition)
{
    raft_id leader;
    raft_term term;
    raft_index committed;

    partial_partition(true, &leader, &term, &committed);
    ck_assert_uint_gt(term, 2);
}
END_TEST

START_TEST(test_check_quorum_leader_steps_down)
{
    struct sim *s = cluster(3, 0);

    elect(s, 1);
    sim_isolate(s, 1);
    run_for(s, 400); /* more than two election timeouts */
    ck_assert_uint_ne(status(s, 1).role, RAFT_LEADER);
    ck_assert(sim_leader(s) == 2 || sim_leader(s) == 3);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* Stickiness: a follower that heard from its leader ignores a higher-term vote request. */
START_TEST(test_stickiness_ignores_disruptive_vote)
{
    struct sim *s = cluster(3, 0);
    struct raft_msg m = {.type = RAFT_MSG_VOTE, .from = 3, .to = 2, .term = 9};

    elect(s, 1);
    m.index = status(s, 2).last_index;
    m.log_term = status(s, 2).last_term;
    ck_assert_int_eq(sim_inject(s, 2, &m), RAFT_OK);
    ck_assert_uint_eq(status(s, 2).term, 2);
    ck_assert_int_eq(sim_pending(s, 2, 3), 0);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_new_leader_commits_noop_before_serving_reads)
{
    struct sim *s = cluster(3, 0);
    const struct raft_entry *e;
    uint64_t id;
    raft_index idx;
    int rc;

    sim_campaign(s, 1);
    /* deliver only the election, not the first AppendEntries round */
    while (status(s, 1).role != RAFT_LEADER && sim_deliver(s, 0, 0, false) > 0)
        ;
    ck_assert_uint_eq(status(s, 1).role, RAFT_LEADER);
    e = raft_get_entry(sim_raft(s, 1), status(s, 1).last_index);
    ck_assert_int_eq(e->type, RAFT_ENTRY_NOOP);
    ck_assert_uint_eq(e->term, status(s, 1).term);
    /* a read and a membership change wait for the no-op's commit */
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_ADD_LEARNER, 4), RAFT_ENOTREADY);
    ck_assert_int_eq(sim_read(s, 1, 42), RAFT_OK);
    ck_assert(!sim_last_read(s, 1, &id, &idx, &rc));
    sim_stabilize(s);
    ck_assert(sim_last_read(s, 1, &id, &idx, &rc));
    ck_assert_uint_eq(id, 42);
    ck_assert_int_eq(rc, RAFT_OK);
    ck_assert_uint_ge(idx, e->index);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ persistence contract */

/* Mutation caught: sending vote requests/grants with msgs instead of msgs_after_persist. */
START_TEST(test_vote_and_term_persisted_before_dependent_message)
{
    struct sim *s = cluster(3, 0);

    sim_disk_manual(s, 1, true);
    sim_disk_manual(s, 2, true);
    sim_campaign(s, 1);
    /* pre-votes change no hard state and go at once */
    ck_assert_int_eq(sim_count_queued(s, 1, RAFT_MSG_PREVOTE), 2);
    sim_deliver(s, 1, 0, false);
    sim_deliver(s, 0, 1, false);
    ck_assert_uint_eq(status(s, 1).role, RAFT_CANDIDATE);
    /* the vote requests wait for term 2 and the self-vote to be durable */
    ck_assert_int_eq(sim_count_queued(s, 1, RAFT_MSG_VOTE), 0);
    ck_assert_int_eq(sim_persist(s, 1), 1);
    ck_assert_int_eq(sim_count_queued(s, 1, RAFT_MSG_VOTE), 2);
    sim_deliver(s, 1, 2, false);
    /* node 2 granted, but its grant waits for its own durable vote */
    ck_assert_uint_eq(status(s, 2).vote, 1);
    ck_assert_int_eq(sim_count_queued(s, 2, RAFT_MSG_VOTE_RESP), 0);
    ck_assert_int_ge(sim_persist(s, 2), 1);
    ck_assert_int_eq(sim_count_queued(s, 2, RAFT_MSG_VOTE_RESP), 1);
    sim_deliver(s, 2, 1, false);
    ck_assert_uint_eq(status(s, 1).role, RAFT_LEADER);
    ck_assert_uint_eq(sim_early_sends(s), 0);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* Mutation caught: acknowledging entries that are only in memory. */
START_TEST(test_follower_acks_only_durable_entries)
{
    struct sim *s = cluster(3, 0);
    struct raft_msg ack;
    raft_index idx;

    elect(s, 1);
    sim_disk_manual(s, 2, true);
    idx = propose(s, 1, "x");
    sim_deliver(s, 1, 2, false);
    ck_assert_uint_eq(status(s, 2).last_index, idx);
    ck_assert(!sim_steal(s, 2, 1, RAFT_MSG_APPEND_RESP, &ack) || ack.index < idx);
    sim_persist(s, 2);
    ck_assert(sim_steal(s, 2, 1, RAFT_MSG_APPEND_RESP, &ack));
    ck_assert_uint_eq(ack.index, idx);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* Mutation caught: the leader counting its own unwritten entries (thesis 10.2.1). */
START_TEST(test_leader_counts_itself_only_when_durable)
{
    struct sim *s = cluster(3, 0);
    raft_index idx;

    elect(s, 1);
    sim_isolate(s, 3);
    sim_disk_manual(s, 1, true);
    idx = propose(s, 1, "x");
    /* the AppendEntries left before the leader's own write finished */
    ck_assert_int_ge(sim_pending(s, 1, 2), 1);
    sim_stabilize(s);
    ck_assert_uint_eq(status(s, 2).last_index, idx);
    ck_assert_uint_lt(status(s, 1).commit, idx); /* 2 has it, but the leader does not yet */
    sim_persist(s, 1);
    ck_assert_uint_eq(status(s, 1).commit, idx);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ commit rules */

/* Raft paper Figure 8. Mutation caught: committing an earlier-term entry by counting. */
START_TEST(test_figure8_only_current_term_entries_commit_by_counting)
{
    struct sim_config cfg = {.voters = 5, .seed = 3, .max_msg_bytes = 1};
    struct sim *s;
    struct raft_msg m;
    raft_index k;
    int guard;

    cfg.disable_prevote = true;
    cfg.disable_check_quorum = true;
    s = cluster_cfg(&cfg);
    elect(s, 1); /* term 2 */
    sim_link(s, 1, 3, false);
    sim_link(s, 1, 4, false);
    sim_link(s, 1, 5, false);
    k = propose(s, 1, "xx"); /* (a) reaches S2 only */
    sim_stabilize(s);
    ck_assert_uint_eq(status(s, 2).last_index, k);
    ck_assert_uint_lt(status(s, 1).commit, k);

    /* (b) S1 crashes; S5 wins term 3 with S3, S4 and writes (k, 3), then crashes */
    sim_crash(s, 1);
    sim_heal(s);
    sim_drop(s, 0, 0);
    sim_campaign(s, 5);
    sim_deliver(s, 5, 0, false);
    sim_drop(s, 2, 5);
    sim_deliver(s, 3, 5, false);
    sim_deliver(s, 4, 5, false);
    ck_assert_uint_eq(status(s, 5).role, RAFT_LEADER);
    ck_assert_uint_eq(status(s, 5).term, 3);
    ck_assert_uint_eq(raft_get_term(sim_raft(s, 5), k), 3);
    sim_crash(s, 5);
    sim_drop(s, 0, 0);

    /* (c) S1 restarts and wins term 4 (S2, S3, S4); (k, 2) reaches S3: a majority */
    sim_restart(s, 1);
    for (guard = 0; guard < 5 && status(s, 1).role != RAFT_LEADER; guard++) {
        sim_campaign(s, 1);
        while (status(s, 1).role != RAFT_LEADER && sim_deliver(s, 0, 0, false) > 0)
            ;
    }
    ck_assert_uint_eq(status(s, 1).role, RAFT_LEADER);
    ck_assert_uint_eq(status(s, 1).term, 4);
    sim_link(s, 1, 4, false);
    for (guard = 0; guard < 50 && raft_get_term(sim_raft(s, 3), k) != 2; guard++)
        sim_deliver(s, 0, 0, false);
    ck_assert_uint_eq(raft_get_term(sim_raft(s, 3), k), 2);
    while (sim_steal(s, 3, 1, RAFT_MSG_APPEND_RESP, &m)) {
        sim_inject(s, 1, &m);
    }
    /* (k, 2) sits on S1, S2, S3, yet it is not committed: its term is not the leader's */
    ck_assert_uint_lt(status(s, 1).commit, k);

    /* (d) S1 crashes before its term-4 entry spreads; S5 may win and overwrite (k, 2) */
    sim_crash(s, 1);
    sim_drop(s, 0, 0);
    sim_heal(s);
    sim_restart(s, 5);
    for (guard = 0; guard < 5 && status(s, 5).role != RAFT_LEADER; guard++) {
        sim_campaign(s, 5);
        while (status(s, 5).role != RAFT_LEADER && sim_deliver(s, 0, 0, false) > 0)
            ;
    }
    ck_assert_uint_eq(status(s, 5).role, RAFT_LEADER);
    sim_stabilize(s);
    ck_assert_uint_eq(raft_get_term(sim_raft(s, 3), k), 3);
    ck_assert_uint_ge(status(s, 3).commit, k);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* Mutation caught: truncating on a stale AppendEntries that carries matching entries. */
START_TEST(test_stale_append_after_newer_does_not_truncate)
{
    struct sim *s = cluster(3, 0);
    struct handmade newer, stale;
    raft_index base;

    elect(s, 1);
    base = status(s, 2).last_index;
    hm_append(&newer, 1, 2, 2, base, 2, 0);
    hm_entry(&newer, 2, "a");
    hm_entry(&newer, 2, "b");
    hm_append(&stale, 1, 2, 2, base, 2, 0);
    hm_entry(&stale, 2, "a");
    ck_assert_int_eq(sim_inject(s, 2, &newer.m), RAFT_OK);
    ck_assert_uint_eq(status(s, 2).last_index, base + 2);
    ck_assert_int_eq(sim_inject(s, 2, &stale.m), RAFT_OK);
    ck_assert_uint_eq(status(s, 2).last_index, base + 2);
    hm_free(&newer);
    hm_free(&stale);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* Mutation caught: commit = leaderCommit instead of min(leaderCommit, last new entry). */
START_TEST(test_commit_is_min_of_leader_commit_and_last_new_entry)
{
    struct sim *s = cluster(3, 0);
    struct handmade old, cur;
    raft_index base;

    elect(s, 1); /* term 2 */
    base = status(s, 2).last_index;
    /* node 2 holds (base+1, 2) "x" and a stale (base+2, 2) "y" */
    hm_append(&old, 1, 2, 2, base, 2, 0);
    hm_entry(&old, 2, "x");
    hm_entry(&old, 2, "y");
    sim_inject(s, 2, &old.m);
    /* the leader of term 3 has "x" at base+1 and something else at base+2 */
    hm_append(&cur, 3, 2, 3, base, 2, base + 2);
    hm_entry(&cur, 2, "x");
    sim_inject(s, 2, &cur.m);
    ck_assert_uint_eq(status(s, 2).commit, base + 1);
    hm_free(&old);
    hm_free(&cur);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_conflicting_suffix_is_truncated)
{
    struct sim *s = cluster(3, 0);
    struct handmade old, cur;
    raft_index base;
    const struct raft_entry *e;

    elect(s, 1);
    base = status(s, 2).last_index;
    hm_append(&old, 1, 2, 2, base, 2, 0);
    hm_entry(&old, 2, "x");
    hm_entry(&old, 2, "y");
    sim_inject(s, 2, &old.m);
    hm_append(&cur, 3, 2, 3, base + 1, 2, 0);
    hm_entry(&cur, 3, "z");
    sim_inject(s, 2, &cur.m);
    e = raft_get_entry(sim_raft(s, 2), base + 2);
    ck_assert_uint_eq(e->term, 3);
    ck_assert_int_eq(memcmp(e->data, "z", 1), 0);
    ck_assert_uint_eq(status(s, 2).last_index, base + 2);
    hm_free(&old);
    hm_free(&cur);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ replication */

/* A follower with 40 divergent entries is repaired in a few round trips, not 40. */
START_TEST(test_fast_backtracking_with_conflict_hint)
{
    struct sim *s = cluster(3, 0);
    char buf[16];
    raft_id l;
    int i;

    elect(s, 1);
    sim_isolate(s, 1);
    for (i = 0; i < 40; i++) {
        snprintf(buf, sizeof(buf), "old%d", i);
        propose(s, 1, buf);
    }
    sim_drop(s, 0, 0);
    sim_crash(s, 1);
    sim_heal(s);
    run_for(s, 500);
    l = sim_leader(s);
    ck_assert(l == 2 || l == 3);
    for (i = 0; i < 40; i++) {
        snprintf(buf, sizeof(buf), "new%d", i);
        propose(s, l, buf);
    }
    sim_stabilize(s);
    sim_restart(s, 1);
    run_for(s, 50); /* a heartbeat reaches node 1 */
    ck_assert_uint_eq(status(s, 1).last_index, status(s, l).last_index);
    ck_assert_uint_le(status(s, 1).counters.rejected_appends, 3);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_pipelining_respects_inflight_limit)
{
    struct sim_config cfg = {.voters = 3, .seed = 5, .max_inflight_msgs = 4, .max_msg_bytes = 1};
    struct sim *s = cluster_cfg(&cfg);
    int i;

    elect(s, 1);
    for (i = 0; i < 20; i++)
        propose(s, 1, "e");
    /* nothing delivered yet: at most 4 AppendEntries with entries in flight to node 2 */
    ck_assert_int_le(sim_count_queued(s, 1, RAFT_MSG_APPEND), 2 * 4 + 2);
    ck_assert_int_ge(sim_count_queued(s, 1, RAFT_MSG_APPEND), 2 * 4);
    sim_stabilize(s);
    ck_assert_uint_eq(status(s, 2).last_index, status(s, 1).last_index);
    ck_assert_uint_eq(status(s, 1).commit, status(s, 1).last_index);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_progress_probe_replicate_snapshot)
{
    struct sim *s = cluster(3, 0);
    struct raft_status st;
    int i;

    sim_campaign(s, 1);
    while (status(s, 1).role != RAFT_LEADER && sim_deliver(s, 0, 0, false) > 0)
        ;
    st = status(s, 1);
    ck_assert_uint_eq(st.members[1].progress, 1); /* probe */
    sim_stabilize(s);
    st = status(s, 1);
    ck_assert_uint_eq(st.members[1].progress, 2); /* replicate */
    ck_assert_uint_eq(st.members[1].match, st.last_index);
    sim_isolate(s, 3);
    for (i = 0; i < 10; i++)
        propose(s, 1, "v");
    sim_stabilize(s);
    ck_assert_int_eq(sim_snapshot(s, 1, 0), RAFT_OK);
    sim_heal(s);
    sim_advance(s, 25);
    for (i = 0; i < 10 && status(s, 1).members[2].progress != 3; i++) {
        sim_deliver(s, 1, 3, false);
        sim_deliver(s, 3, 1, false);
    }
    st = status(s, 1);
    ck_assert_uint_eq(st.members[2].progress, 3); /* snapshot */
    sim_stabilize(s);
    run_for(s, 100);
    st = status(s, 1);
    ck_assert_uint_eq(st.members[2].match, st.last_index);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ reads */

START_TEST(test_read_index_on_leader_needs_quorum_round)
{
    struct sim *s = cluster(3, 0);
    uint64_t id;
    raft_index idx, w;
    int rc;

    elect(s, 1);
    w = propose(s, 1, "w");
    sim_stabilize(s);
    ck_assert_int_eq(sim_read(s, 1, 7), RAFT_OK);
    ck_assert(!sim_last_read(s, 1, &id, &idx, &rc)); /* needs the heartbeat round */
    ck_assert_int_eq(sim_count_queued(s, 1, RAFT_MSG_HEARTBEAT), 2);
    sim_deliver(s, 1, 2, false);
    sim_deliver(s, 2, 1, false);
    ck_assert(sim_last_read(s, 1, &id, &idx, &rc));
    ck_assert_uint_eq(id, 7);
    ck_assert_uint_ge(idx, w);
    ck_assert_int_eq(rc, RAFT_OK);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_read_index_through_follower)
{
    struct sim *s = cluster(3, 0);
    uint64_t id;
    raft_index idx, w;
    int rc;

    elect(s, 1);
    w = propose(s, 1, "w");
    sim_stabilize(s);
    ck_assert_int_eq(sim_read(s, 3, 9), RAFT_OK);
    sim_stabilize(s);
    ck_assert(sim_last_read(s, 3, &id, &idx, &rc));
    ck_assert_uint_eq(id, 9);
    ck_assert_int_eq(rc, RAFT_OK);
    ck_assert_uint_ge(idx, w);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* A leader paused (SIGSTOP) while the others elect a new leader and commit must not serve
 * a read at its stale commit index when it resumes. */
START_TEST(test_read_index_after_leader_pause)
{
    struct sim *s = cluster(3, 0);
    uint64_t id;
    raft_index idx, w;
    int rc;

    elect(s, 1);
    sim_pause(s, 1, true);
    run_for(s, 500);
    ck_assert(sim_leader(s) == 2 || sim_leader(s) == 3);
    w = propose(s, sim_leader(s), "after-pause");
    run_for(s, 50);
    ck_assert_uint_ge(status(s, 2).commit, w);
    sim_pause(s, 1, false);
    ck_assert_uint_eq(status(s, 1).role, RAFT_LEADER); /* it does not know yet */
    ck_assert_int_eq(sim_read(s, 1, 5), RAFT_OK);
    sim_stabilize(s);
    if (sim_last_read(s, 1, &id, &idx, &rc)) {
        ck_assert_uint_eq(id, 5);
        ck_assert_int_eq(rc, RAFT_ENOTLEADER);
    }
    ck_assert_uint_ne(status(s, 1).role, RAFT_LEADER);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* A retried read (same caller id) never receives the index of an older attempt. */
START_TEST(test_read_retry_never_reuses_old_index)
{
    struct sim *s = cluster(3, 0);
    struct raft_msg old_resp;
    uint64_t id;
    raft_index idx, w;
    int rc;

    elect(s, 1);
    ck_assert_int_eq(sim_read(s, 2, 77), RAFT_OK);
    sim_deliver(s, 2, 1, false); /* READ_INDEX */
    sim_deliver(s, 1, 0, false); /* heartbeat round */
    sim_deliver(s, 0, 1, false);
    ck_assert(sim_steal(s, 1, 2, RAFT_MSG_READ_INDEX_RESP, &old_resp));
    sim_stabilize(s);
    w = propose(s, 1, "newer");
    sim_stabilize(s);
    ck_assert_uint_lt(old_resp.index, w);
    ck_assert_int_eq(sim_read(s, 2, 77), RAFT_OK); /* the retry */
    sim_inject(s, 2, &old_resp);                   /* the old answer arrives late */
    ck_assert(!sim_last_read(s, 2, &id, &idx, &rc));
    sim_stabilize(s);
    ck_assert(sim_last_read(s, 2, &id, &idx, &rc));
    ck_assert_uint_eq(id, 77);
    ck_assert_int_eq(rc, RAFT_OK);
    ck_assert_uint_ge(idx, w);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ transfer */

START_TEST(test_transfer_leadership_with_timeout_now)
{
    struct sim *s = cluster(3, 0);

    elect(s, 1);
    ck_assert_int_eq(sim_transfer(s, 1, 3), RAFT_OK);
    ck_assert_int_eq(sim_propose(s, 1, "during", NULL), RAFT_EBUSY);
    sim_stabilize(s);
    /* followers were in lease (stickiness), yet the transfer vote wins */
    ck_assert_uint_eq(sim_leader(s), 3);
    ck_assert_uint_eq(status(s, 1).leader, 3);
    propose(s, 3, "after");
    sim_stabilize(s);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_transfer_to_zero_picks_most_up_to_date_voter)
{
    struct sim *s = cluster(3, 0);

    elect(s, 1);
    sim_isolate(s, 2);
    propose(s, 1, "x");
    sim_stabilize(s);
    sim_heal(s);
    ck_assert_int_eq(sim_transfer(s, 1, 0), RAFT_OK);
    sim_stabilize(s);
    ck_assert_uint_eq(sim_leader(s), 3);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_transfer_refused_on_follower)
{
    struct sim *s = cluster(3, 0);

    elect(s, 1);
    ck_assert_int_eq(sim_transfer(s, 2, 3), RAFT_ENOTLEADER);
    ck_assert_int_eq(sim_transfer(s, 1, 1), RAFT_EINVAL);
    ck_assert_int_eq(sim_transfer(s, 1, 9), RAFT_EINVAL);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ snapshots */

START_TEST(test_far_behind_follower_catches_up_from_chunked_snapshot)
{
    struct sim *s = cluster(3, 0);
    struct raft_status st;
    int i, chunks = 0;

    elect(s, 1);
    sim_isolate(s, 3);
    for (i = 0; i < 30; i++)
        propose(s, 1, "payload");
    sim_stabilize(s);
    ck_assert_int_eq(sim_snapshot(s, 1, 0), RAFT_OK);
    st = status(s, 1);
    ck_assert_uint_eq(st.first_index, st.snapshot_index + 1);
    sim_heal(s);
    for (i = 0; i < 200 && status(s, 3).snapshot_index == 0; i++) {
        chunks += sim_count_queued(s, 1, RAFT_MSG_SNAPSHOT);
        sim_advance(s, 5);
        sim_deliver(s, 0, 0, false);
    }
    ck_assert_uint_eq(status(s, 3).snapshot_index, st.snapshot_index);
    ck_assert_int_ge(chunks, 3); /* 1516 bytes in 512-byte chunks */
    sim_stabilize(s);
    run_for(s, 50);
    ck_assert_uint_eq(sim_applied(s, 3), sim_applied(s, 1));
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_follower_that_lost_its_log_is_caught_up_again)
{
    /* A follower restarts on an empty disk: the leader's progress still says it matched
     * up to the end. Its refusals must reset that, or the leader probes match + 1 forever
     * (seen in the real worker as a hot AppendEntries loop). */
    struct sim *s = cluster(3, 0);
    int i;

    elect(s, 1);
    for (i = 0; i < 10; i++)
        propose(s, 1, "before");
    sim_stabilize(s);
    ck_assert_uint_eq(sim_applied(s, 3), sim_applied(s, 1));
    sim_wipe(s, 3);
    sim_restart(s, 3);
    /* Idle: nothing new to send, so only the heartbeat answers can reveal the loss. */
    run_for(s, 500);
    sim_stabilize(s);
    ck_assert_uint_eq(status(s, 3).last_index, status(s, 1).last_index);
    propose(s, 1, "after");
    run_for(s, 200);
    sim_stabilize(s);
    ck_assert_uint_eq(status(s, 3).last_index, status(s, 1).last_index);
    ck_assert_uint_eq(sim_applied(s, 3), sim_applied(s, 1));
    ck_assert_uint_ge(status(s, 1).counters.lost_logs, 1);
    /* and the wiped node itself learned that it lost what it had acknowledged */
    ck_assert_uint_eq(status(s, 3).counters.lost_acked, 1);
    sim_free(s);
}
END_TEST

/*
 * The idle-cluster bug: a follower restarted with its log intact has leader_match 0, so
 * the leader's heartbeats (commit = min(match, commit)) could not move its commit index,
 * and with nothing new to send the leader never sent an AppendEntries: the follower stayed
 * at commit 0 until the next client write. Mutation caught: the heartbeat answer without
 * its "probe me" flag, or a leader ignoring it.
 */
START_TEST(test_restarted_follower_catches_up_on_an_idle_cluster)
{
    struct sim *s = cluster(3, 0);
    raft_index last = 0;
    int i;

    elect(s, 1);
    for (i = 0; i < 5; i++)
        last = propose(s, 1, "job");
    sim_stabilize(s);
    run_for(s, 50);
    ck_assert_uint_eq(status(s, 3).commit, last);
    sim_crash(s, 3);
    sim_restart(s, 3);
    ck_assert_uint_eq(status(s, 3).commit, 0);
    ck_assert_uint_eq(status(s, 3).last_index, last);
    /* no proposal from here on: five heartbeat intervals (20 ms each) */
    run_for(s, 100);
    ck_assert_uint_eq(status(s, 1).last_index, last); /* nothing was written meanwhile */
    ck_assert_uint_eq(status(s, 3).commit, last);
    ck_assert_uint_eq(sim_applied(s, 3), last);
    ck_assert_uint_eq(status(s, 3).counters.lost_acked, 0); /* its log was intact */
    no_violation(s);
    sim_free(s);
}
END_TEST

/* A raw follower (node 2 of {1,2,3}) for the receiver tests, fed hand-made chunks. */
static struct raft *raw_follower(struct raft_config *c)
{
    struct raft_options o = {.id = 2, .seed = 1, .election_timeout_ms = 1000};
    struct raft_start st = {.bootstrap = c};
    struct raft *r;

    memset(c, 0, sizeof(*c));
    raft_config_add(c, 1, RAFT_MEMBER_VOTER, "a");
    raft_config_add(c, 2, RAFT_MEMBER_VOTER, "b");
    raft_config_add(c, 3, RAFT_MEMBER_VOTER, "c");
    ck_assert_int_eq(raft_new(&o, &st, 0, &r), RAFT_OK);
    return r;
}

static int feed_chunk(struct raft *r, struct raft_update *u, const uint8_t *cfgb, int cfglen,
                      uint64_t total, uint64_t offset, const uint8_t *data, uint32_t len)
{
    struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT, .from = 1, .to = 2, .term = 5};
    struct raft_event ev = {.type = RAFT_EV_RECEIVE, .now = 10};

    m.snap.index = 40;
    m.snap.term = 4;
    m.snap.config = cfgb;
    m.snap.config_len = (uint32_t)cfglen;
    m.snap.total = total;
    m.snap.offset = offset;
    m.snap.data = len ? data : NULL;
    m.snap.len = len;
    m.snap.done = offset + len == total;
    ev.msg = &m;
    return raft_step(r, &ev, u);
}

/*
 * The receiver allocates for the bytes that arrived, not for the total a peer claims: a
 * first chunk of 100 bytes that says the snapshot is 1 GiB (the most the node accepts)
 * costs about 100 bytes. Mutation caught: allocating `total` at offset 0 (the old code).
 */
START_TEST(test_snapshot_receiver_grows_with_chunks_not_claimed_total)
{
    struct raft_config c;
    struct raft *r = raw_follower(&c);
    struct raft_update u;
    struct raft_status st;
    uint8_t cfgb[256], data[100];
    int len = raft_config_encode(&c, cfgb, sizeof(cfgb));

    memset(data, 7, sizeof(data));
    ck_assert_int_eq(feed_chunk(r, &u, cfgb, len, 1ull << 30, 0, data, sizeof(data)), RAFT_OK);
    /* acknowledged (after the new term is durable): the next offset is wanted */
    ck_assert_uint_eq(u.n_msgs + u.n_msgs_after_persist, 1);
    ck_assert(!u.msgs_after_persist[0].reject);
    ck_assert_uint_eq(u.msgs_after_persist[0].snap.offset, 100);
    raft_get_status(r, &st);
    ck_assert_uint_le(st.snapshot_rx_bytes, 2 * sizeof(data));
    ck_assert_uint_ge(st.snapshot_rx_bytes, sizeof(data));
    /* the next chunk doubles at most: still nowhere near the claim */
    ck_assert_int_eq(feed_chunk(r, &u, cfgb, len, 1ull << 30, 100, data, sizeof(data)), RAFT_OK);
    raft_get_status(r, &st);
    ck_assert_uint_le(st.snapshot_rx_bytes, 4 * sizeof(data));
    raft_free(r);
}
END_TEST

/* Chunks assemble into exactly the snapshot that was sent, whatever the growth steps. */
START_TEST(test_snapshot_receiver_assembles_chunks_exactly)
{
    struct raft_config c;
    struct raft *r = raw_follower(&c);
    struct raft_update u;
    struct raft_status st;
    uint8_t cfgb[256], data[1000];
    int len = raft_config_encode(&c, cfgb, sizeof(cfgb)), i;
    uint64_t off = 0, prev_cap = 0;
    uint32_t sizes[] = {1, 7, 100, 300, 92, 500};

    for (i = 0; i < (int)sizeof(data); i++)
        data[i] = (uint8_t)(i * 31 + 5);
    for (i = 0; i < 6; i++) {
        ck_assert_int_eq(feed_chunk(r, &u, cfgb, len, sizeof(data), off, data + off, sizes[i]),
                         RAFT_OK);
        off += sizes[i];
        if (off < sizeof(data)) {
            raft_get_status(r, &st);
            ck_assert_uint_ge(st.snapshot_rx_bytes, off);
            ck_assert_uint_le(st.snapshot_rx_bytes,
                              2 * off > sizeof(data) ? sizeof(data) : 2 * off);
            ck_assert_uint_ge(st.snapshot_rx_bytes, prev_cap);
            prev_cap = st.snapshot_rx_bytes;
            ck_assert_ptr_null(u.snapshot);
        }
    }
    ck_assert_uint_eq(off, sizeof(data));
    ck_assert_ptr_nonnull(u.snapshot);
    ck_assert_uint_eq(u.snapshot->index, 40);
    ck_assert_ptr_nonnull(u.snapshot->data);
    ck_assert_uint_eq(u.snapshot->data->len, sizeof(data));
    ck_assert_int_eq(memcmp(u.snapshot->data->data, data, sizeof(data)), 0);
    raft_get_status(r, &st);
    ck_assert_uint_eq(st.snapshot_rx_bytes, 0); /* handed over to the snapshot */
    raft_free(r);
}
END_TEST

START_TEST(test_snapshot_chunk_out_of_order_is_refused)
{
    struct sim *s = cluster(3, 0);
    struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT, .from = 1, .to = 2, .term = 2};
    struct raft_msg resp;
    uint8_t cfgb[256], data[100];
    int len;

    elect(s, 1);
    len = raft_config_encode(raft_get_config(sim_raft(s, 1)), cfgb, sizeof(cfgb));
    memset(data, 1, sizeof(data));
    m.snap.index = 50;
    m.snap.term = 2;
    m.snap.config = cfgb;
    m.snap.config_len = (uint32_t)len;
    m.snap.total = 300;
    m.snap.offset = 100;
    m.snap.data = data;
    m.snap.len = 100;
    ck_assert_int_eq(sim_inject(s, 2, &m), RAFT_OK);
    ck_assert(sim_steal(s, 2, 1, RAFT_MSG_SNAPSHOT_RESP, &resp));
    ck_assert(resp.reject);
    ck_assert_uint_eq(resp.snap.offset, 0);
    ck_assert_uint_eq(status(s, 2).snapshot_index, 0);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ proposal cap */

/*
 * max_uncommitted_bytes (etcd's MaxUncommittedEntriesSize): with followers cut off nothing
 * commits, and proposals are refused with RAFT_EBUSY once the bytes proposed in this term
 * and not committed would pass the cap. Mutations caught: no cap; counting the no-op;
 * refusing when nothing is uncommitted; not releasing bytes at commit.
 */
START_TEST(test_uncommitted_bytes_cap_refuses_with_busy)
{
    struct sim_config cfg = {.voters = 3, .seed = 7, .max_uncommitted_bytes = 20};
    struct sim *s = cluster_cfg(&cfg);
    raft_index idx;
    uint64_t dropped;

    sim_campaign(s, 1);
    /* deliver only the election: the no-op is appended, not committed */
    while (status(s, 1).role != RAFT_LEADER && sim_deliver(s, 0, 0, false) > 0)
        ;
    ck_assert_uint_eq(status(s, 1).role, RAFT_LEADER);
    sim_isolate(s, 1);
    ck_assert_uint_lt(status(s, 1).commit, status(s, 1).last_index); /* the no-op waits */
    ck_assert_uint_eq(status(s, 1).uncommitted_bytes, 0);            /* and does not count */
    ck_assert_int_eq(sim_propose(s, 1, "0123456789", &idx), RAFT_OK);
    ck_assert_int_eq(sim_propose(s, 1, "abcdefghij", &idx), RAFT_OK); /* exactly at the cap */
    ck_assert_uint_eq(status(s, 1).uncommitted_bytes, 20);
    dropped = status(s, 1).counters.dropped_proposals;
    ck_assert_int_eq(sim_propose(s, 1, "x", &idx), RAFT_EBUSY);
    ck_assert_uint_eq(status(s, 1).counters.dropped_proposals, dropped + 1);
    ck_assert_uint_eq(status(s, 1).uncommitted_bytes, 20);
    /* the followers come back: everything commits, the bytes are released */
    sim_heal(s);
    run_for(s, 100);
    ck_assert_uint_eq(sim_leader(s), 1);
    ck_assert_uint_eq(status(s, 1).commit, status(s, 1).last_index);
    ck_assert_uint_eq(status(s, 1).uncommitted_bytes, 0);
    /* with nothing uncommitted, even a proposal larger than the cap goes through */
    ck_assert_int_eq(sim_propose(s, 1, "this entry is over twenty bytes", &idx), RAFT_OK);
    ck_assert_int_eq(sim_propose(s, 1, "y", &idx), RAFT_EBUSY);
    sim_stabilize(s);
    run_for(s, 50);
    ck_assert_uint_ge(status(s, 1).commit, idx);
    ck_assert_int_eq(sim_propose(s, 1, "y", &idx), RAFT_OK);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* A new leader does not count the uncommitted tail it inherited (other leaders' entries). */
START_TEST(test_uncommitted_bytes_skip_an_inherited_tail)
{
    struct sim_config cfg = {.voters = 3, .seed = 7, .max_uncommitted_bytes = 20};
    struct sim *s = cluster_cfg(&cfg);
    raft_index idx;
    int i;

    elect(s, 1);
    ck_assert_int_eq(sim_propose(s, 1, "0123456789abcdef", &idx), RAFT_OK);
    /* node 2 gets the entry, node 3 does not, and no acknowledgement arrives */
    sim_deliver(s, 1, 2, false);
    sim_drop(s, 0, 0);
    sim_isolate(s, 1);
    sim_advance(s, 300); /* leases run out */
    sim_drop(s, 0, 0);
    sim_campaign(s, 2);
    for (i = 0; i < 50 && status(s, 2).role != RAFT_LEADER; i++)
        sim_deliver(s, 0, 0, false);
    ck_assert_uint_eq(status(s, 2).role, RAFT_LEADER);
    sim_isolate(s, 2); /* nothing of the new term commits now */
    ck_assert_uint_lt(status(s, 2).commit, idx);
    ck_assert_ptr_nonnull(raft_get_entry(sim_raft(s, 2), idx));
    ck_assert_uint_eq(status(s, 2).uncommitted_bytes, 0);
    /* had the inherited 16 bytes counted, these 10 would pass the cap of 20 */
    ck_assert_int_eq(sim_propose(s, 2, "0123456789", &idx), RAFT_OK);
    ck_assert_uint_eq(status(s, 2).uncommitted_bytes, 10);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ membership */

START_TEST(test_membership_add_learner_promote_remove)
{
    struct sim *s = cluster(3, 1);
    const struct raft_config *c;

    elect(s, 1);
    ck_assert_uint_eq(status(s, 4).role, RAFT_FOLLOWER); /* empty: waits */
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_ADD_LEARNER, 4), RAFT_OK);
    run_for(s, 100);
    ck_assert_uint_eq(status(s, 4).role, RAFT_LEARNER);
    ck_assert_uint_eq(sim_applied(s, 4), sim_applied(s, 1));
    c = raft_get_config(sim_raft(s, 4));
    ck_assert_str_eq(raft_config_find(c, 4)->address, "node4:6821");
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_PROMOTE, 4), RAFT_OK);
    run_for(s, 100);
    ck_assert_uint_eq(status(s, 4).role, RAFT_FOLLOWER);
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_REMOVE, 3), RAFT_OK);
    run_for(s, 100);
    c = raft_get_config(sim_raft(s, 1));
    ck_assert_uint_eq(c->n, 3);
    ck_assert_ptr_null(raft_config_find(c, 3));
    ck_assert_uint_eq(raft_config_voters(c), 3);
    /* the new voter counts: with 2 down, nothing commits; with 4 up, it does */
    sim_crash(s, 2);
    propose(s, 1, "with-4");
    run_for(s, 100);
    ck_assert_uint_eq(status(s, 1).commit, status(s, 1).last_index);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_second_membership_change_refused_while_pending)
{
    struct sim *s = cluster(3, 2);

    elect(s, 1);
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_ADD_LEARNER, 4), RAFT_OK);
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_ADD_LEARNER, 5), RAFT_EBUSY);
    sim_stabilize(s);
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_ADD_LEARNER, 5), RAFT_OK);
    ck_assert_int_eq(sim_change(s, 2, RAFT_CHANGE_ADD_LEARNER, 5), RAFT_ENOTLEADER);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_removed_leader_steps_down)
{
    struct sim *s = cluster(3, 0);
    raft_index idx;

    elect(s, 1);
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_REMOVE, 1), RAFT_OK);
    idx = status(s, 1).last_index;
    ck_assert_uint_eq(status(s, 1).role, RAFT_LEADER); /* leads until the removal commits */
    sim_stabilize(s);
    ck_assert_uint_ge(status(s, 1).commit, idx);
    ck_assert_uint_ne(status(s, 1).role, RAFT_LEADER);
    run_for(s, 500);
    ck_assert(sim_leader(s) == 2 || sim_leader(s) == 3);
    ck_assert_uint_ne(status(s, 1).role, RAFT_LEADER);
    no_violation(s);
    sim_free(s);
}
END_TEST

START_TEST(test_learner_replicates_but_never_votes_or_campaigns)
{
    struct sim *s = cluster(3, 1);
    raft_index w;

    elect(s, 1);
    ck_assert_int_eq(sim_change(s, 1, RAFT_CHANGE_ADD_LEARNER, 4), RAFT_OK);
    run_for(s, 100);
    sim_isolate(s, 4);
    run_for(s, 1000);
    ck_assert_uint_eq(status(s, 4).role, RAFT_LEARNER);
    ck_assert_uint_eq(status(s, 4).term, 2);
    sim_heal(s);
    /* with two voters down, the learner does not make a quorum */
    sim_crash(s, 2);
    sim_crash(s, 3);
    w = propose(s, 1, "x");
    run_for(s, 60);
    ck_assert_uint_lt(status(s, 1).commit, w);
    ck_assert_uint_eq(status(s, 4).last_index, w);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ bootstrap and start */

START_TEST(test_bootstrap_founders_write_identical_first_entry)
{
    struct sim *s = cluster(3, 0);
    const struct raft_entry *a = raft_get_entry(sim_raft(s, 1), 1);
    const struct raft_entry *b = raft_get_entry(sim_raft(s, 2), 1);
    struct raft_config c;

    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(a->type, RAFT_ENTRY_CONFIG);
    ck_assert_uint_eq(a->term, 1);
    ck_assert_uint_eq(a->len, b->len);
    ck_assert_int_eq(memcmp(a->data, b->data, a->len), 0);
    ck_assert_int_eq(raft_config_decode(a->data, a->len, &c), RAFT_OK);
    ck_assert_uint_eq(raft_config_voters(&c), 3);
    sim_free(s);
}
END_TEST

START_TEST(test_empty_node_without_bootstrap_waits_as_follower)
{
    struct sim *s = cluster(3, 1);
    struct raft_status st;

    run_for(s, 2000);
    st = status(s, 4);
    ck_assert_uint_eq(st.role, RAFT_FOLLOWER);
    ck_assert_uint_eq(st.term, 0);
    ck_assert_uint_eq(st.last_index, 0);
    ck_assert_uint_eq(st.n_members, 0);
    ck_assert_int_eq(sim_propose(s, 4, "x", NULL), RAFT_ENOTLEADER);
    sim_free(s);
}
END_TEST

START_TEST(test_single_voter_elects_itself_at_first_tick)
{
    struct sim *s = cluster(1, 0);
    raft_index w;

    sim_advance(s, 1);
    ck_assert_uint_eq(status(s, 1).role, RAFT_LEADER);
    w = propose(s, 1, "solo");
    ck_assert_uint_eq(status(s, 1).commit, w);
    ck_assert_uint_eq(sim_applied(s, 1), w);
    sim_free(s);
}
END_TEST

START_TEST(test_restart_recovers_config_and_log)
{
    struct sim *s = cluster(3, 1);
    raft_index w;

    elect(s, 1);
    sim_change(s, 1, RAFT_CHANGE_ADD_LEARNER, 4);
    w = propose(s, 1, "kept");
    sim_stabilize(s);
    sim_crash(s, 2);
    sim_restart(s, 2);
    ck_assert_uint_eq(status(s, 2).last_index, w);
    ck_assert_ptr_nonnull(raft_config_find(raft_get_config(sim_raft(s, 2)), 4));
    sim_snapshot(s, 3, 0);
    sim_crash(s, 3);
    sim_restart(s, 3);
    ck_assert_ptr_nonnull(raft_config_find(raft_get_config(sim_raft(s, 3)), 4));
    ck_assert_uint_eq(status(s, 3).snapshot_index, sim_applied(s, 3));
    no_violation(s);
    sim_free(s);
}
END_TEST

/* A restart hands ~1,000,000 entries to raft_new: it must be linear and cheap. */
START_TEST(test_restart_with_a_million_entries_is_cheap)
{
    enum { N = 1000000 };
    struct raft_entry *e = malloc(N * sizeof(*e));
    struct raft_buf *buf = raft_buf_new((size_t)N * 8);
    struct raft_config c = {0};
    uint8_t cb[64];
    struct raft_buf *cbuf;
    struct raft_options o = {.id = 1, .seed = 1};
    struct raft_start st = {.term = 5, .vote = 1};
    struct raft *r;
    struct raft_status rs;
    struct timespec t0, t1;
    double ms;
    size_t i;
    int len;

    raft_config_add(&c, 1, RAFT_MEMBER_VOTER, "a");
    raft_config_add(&c, 2, RAFT_MEMBER_VOTER, "b");
    len = raft_config_encode(&c, cb, sizeof(cb));
    cbuf = raft_buf_copy(cb, (size_t)len);
    e[0] = (struct raft_entry){.term = 1,
                               .index = 1,
                               .type = RAFT_ENTRY_CONFIG,
                               .len = (uint32_t)len,
                               .data = cbuf->data,
                               .buf = cbuf};
    for (i = 1; i < N; i++)
        e[i] = (struct raft_entry){.term = 1 + i / 100000,
                                   .index = i + 1,
                                   .type = RAFT_ENTRY_NORMAL,
                                   .len = 8,
                                   .data = buf->data + i * 8,
                                   .buf = buf};
    st.entries = e;
    st.n_entries = N;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(raft_new(&o, &st, 0, &r), RAFT_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    raft_get_status(r, &rs);
    ck_assert_uint_eq(rs.last_index, N);
    ck_assert_uint_eq(rs.n_members, 2);
    fprintf(stderr, "raft_new with %d entries: %.1f ms\n", N, ms);
    ck_assert_msg(ms < 3000, "raft_new took %.0f ms", ms);
    raft_free(r);
    raft_buf_unref(buf);
    raft_buf_unref(cbuf);
    free(e);
}
END_TEST

START_TEST(test_start_rejects_inconsistent_state)
{
    struct raft_options o = {.id = 1};
    struct raft_entry e[2] = {{.term = 2, .index = 1, .type = RAFT_ENTRY_NOOP},
                              {.term = 1, .index = 2, .type = RAFT_ENTRY_NOOP}};
    struct raft_start st = {.term = 2, .entries = e, .n_entries = 2};
    struct raft *r;

    ck_assert_int_eq(raft_new(&o, &st, 0, &r), RAFT_EINVAL); /* terms go down */
    e[1].term = 2;
    e[1].index = 3;
    ck_assert_int_eq(raft_new(&o, &st, 0, &r), RAFT_EINVAL); /* gap */
    o.id = 0;
    ck_assert_int_eq(raft_new(&o, NULL, 0, &r), RAFT_EINVAL);
}
END_TEST

/* ------------------------------------------------------------------ robustness */

START_TEST(test_propose_on_follower_returns_not_leader_with_hint)
{
    struct sim *s = cluster(3, 0);
    struct raft_proposal p = {.data = "x", .len = 1};
    struct raft_event ev = {.type = RAFT_EV_PROPOSE};
    struct raft_update u;

    elect(s, 1);
    ev.propose.entries = &p;
    ev.propose.n = 1;
    ck_assert_int_eq(raft_step(sim_raft(s, 2), &ev, &u), RAFT_ENOTLEADER);
    ck_assert_uint_eq(u.leader, 1);
    sim_free(s);
}
END_TEST

START_TEST(test_invalid_messages_are_rejected_and_counted)
{
    struct sim *s = cluster(3, 0);
    struct raft_msg bad[8];
    struct raft_entry e = {.term = 9, .index = 3, .type = RAFT_ENTRY_NORMAL, .len = 4};
    struct raft_entry conf = {
        .term = 2, .index = 3, .type = RAFT_ENTRY_CONFIG, .len = 3, .data = (const uint8_t *)"zzz"};
    int i;

    elect(s, 1);
    memset(bad, 0, sizeof(bad));
    bad[0] = (struct raft_msg){.type = 99, .from = 1, .to = 2, .term = 2};
    bad[1] = (struct raft_msg){.type = RAFT_MSG_APPEND, .from = 0, .to = 2, .term = 2};
    bad[2] = (struct raft_msg){.type = RAFT_MSG_APPEND,
                               .from = 1,
                               .to = 2,
                               .term = 2,
                               .index = 2,
                               .log_term = 2,
                               .n_entries = 3,
                               .entries = NULL};
    bad[3] = (struct raft_msg){.type = RAFT_MSG_APPEND,
                               .from = 1,
                               .to = 2,
                               .term = 2,
                               .index = 2,
                               .log_term = 2,
                               .n_entries = 1,
                               .entries = &e};
    bad[4] = (struct raft_msg){.type = RAFT_MSG_APPEND,
                               .from = 1,
                               .to = 2,
                               .term = 2,
                               .index = 2,
                               .log_term = 2,
                               .n_entries = 1,
                               .entries = &conf};
    bad[5] = (struct raft_msg){
        .type = RAFT_MSG_VOTE, .from = 3, .to = 2, .term = 3, .index = 5, .log_term = 0};
    bad[6] = (struct raft_msg){.type = RAFT_MSG_SNAPSHOT, .from = 1, .to = 2, .term = 2};
    bad[6].snap.index = 9;
    bad[6].snap.term = 2;
    bad[6].snap.total = 10;
    bad[6].snap.offset = 8;
    bad[6].snap.len = 5;
    bad[7] = (struct raft_msg){.type = RAFT_MSG_HEARTBEAT, .from = 1, .to = 3, .term = 2};
    for (i = 0; i < 8; i++)
        ck_assert_int_eq(sim_inject(s, 2, &bad[i]), RAFT_EINVAL);
    ck_assert_int_eq(sim_inject(s, 2, NULL), RAFT_EINVAL);
    ck_assert_uint_eq(status(s, 2).counters.invalid_msgs, 9);
    ck_assert_uint_eq(status(s, 2).term, 2);
    no_violation(s);
    sim_free(s);
}
END_TEST

/* Random messages, well-formed and not, thrown at every node in every role. */
START_TEST(test_random_messages_never_crash)
{
    struct sim *s = cluster(3, 1);
    uint64_t x = 88172645463325252ULL;
    struct raft_entry ents[4];
    uint8_t junk[64];
    int i, k;

    elect(s, 1);
    memset(junk, 0xab, sizeof(junk));
    for (i = 0; i < 20000; i++) {
        struct raft_msg m;
        raft_id to;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memset(&m, 0, sizeof(m));
        m.type = (uint8_t)(x % 15);
        m.from = (raft_id)((x >> 8) % 5);
        to = (raft_id)(1 + (x >> 12) % 4);
        m.to = (x >> 15) % 8 ? to : to + 1;
        m.term = (x >> 18) % 5;
        m.index = (x >> 21) % 12;
        m.log_term = (x >> 25) % 5;
        m.commit = (x >> 28) % 14;
        m.reject = (x >> 32) & 1;
        m.ctx = (x >> 33) % 4;
        m.hint_index = (x >> 35) % 20;
        m.hint_term = (x >> 40) % 5;
        m.transfer = (x >> 44) & 1;
        if (m.type == RAFT_MSG_APPEND && ((x >> 45) & 1)) {
            m.n_entries = (uint32_t)((x >> 46) % 4);
            for (k = 0; k < (int)m.n_entries; k++)
                ents[k] = (struct raft_entry){.term = m.log_term + (uint64_t)k / 2,
                                              .index = m.index + 1 + (uint64_t)k,
                                              .type = (uint8_t)(1 + (x >> 50) % 3),
                                              .len = (uint32_t)((x >> 52) % 8),
                                              .data = junk};
            m.entries = ents;
        }
        if (m.type == RAFT_MSG_SNAPSHOT) {
            m.snap.index = (x >> 46) % 30;
            m.snap.term = (x >> 50) % 4;
            m.snap.total = (x >> 53) % 64;
            m.snap.offset = (x >> 56) % 64;
            m.snap.len = (uint32_t)((x >> 59) % 32);
            m.snap.data = junk;
            m.snap.done = (x >> 63) & 1;
            m.snap.config = junk;
            m.snap.config_len = (uint32_t)((x >> 40) % 16);
        }
        sim_inject(s, to, &m);
        if (i % 500 == 0) {
            sim_drop(s, 0, 0);
            run_for(s, 30);
        }
    }
    /* the real cluster is still able to make progress afterwards */
    sim_drop(s, 0, 0);
    run_for(s, 2000);
    ck_assert_uint_ne(sim_leader(s), 0);
    sim_free(s);
}
END_TEST

/* ------------------------------------------------------------------ small modules */

START_TEST(test_config_encoding_roundtrip_and_rejects_garbage)
{
    struct raft_config c = {0}, d;
    uint8_t buf[512];
    int len, i;

    ck_assert_int_eq(raft_config_add(&c, 7, RAFT_MEMBER_VOTER, "h7:6821"), RAFT_OK);
    ck_assert_int_eq(raft_config_add(&c, 2, RAFT_MEMBER_LEARNER, "h2:6821"), RAFT_OK);
    ck_assert_int_eq(raft_config_add(&c, 2, RAFT_MEMBER_VOTER, "dup"), RAFT_EINVAL);
    ck_assert_int_eq(raft_config_add(&c, 0, RAFT_MEMBER_VOTER, "zero"), RAFT_EINVAL);
    ck_assert_uint_eq(c.members[0].id, 2); /* kept sorted */
    len = raft_config_encode(&c, buf, sizeof(buf));
    ck_assert_int_gt(len, 0);
    ck_assert_int_eq(raft_config_encode(&c, NULL, 0), len);
    ck_assert_int_eq(raft_config_decode(buf, (size_t)len, &d), RAFT_OK);
    ck_assert_uint_eq(d.n, 2);
    ck_assert_str_eq(d.members[1].address, "h7:6821");
    ck_assert_int_eq(raft_config_decode(buf, (size_t)len - 1, &d), RAFT_EINVAL);
    buf[0] = 9;
    ck_assert_int_eq(raft_config_decode(buf, (size_t)len, &d), RAFT_EINVAL);
    for (i = 0; i < 2000; i++) { /* never crash on junk */
        uint8_t junk[40];
        int k;

        for (k = 0; k < 40; k++)
            junk[k] = (uint8_t)((i * 31 + k * 17) ^ (i >> 3));
        junk[0] = 1;
        raft_config_decode(junk, (size_t)(i % 40), &d);
    }
    ck_assert_int_eq(raft_config_remove(&c, 7), RAFT_OK);
    ck_assert_uint_eq(raft_config_voters(&c), 0);
    ck_assert_int_eq(raft_config_encode(&c, buf, sizeof(buf)) > 0, 1);
    ck_assert_int_eq(raft_config_decode(buf, 2 + 6 + 7, &d), RAFT_EINVAL); /* no voter */
}
END_TEST

START_TEST(test_buf_refcount)
{
    struct raft_buf *b = raft_buf_copy("abc", 3);

    raft_buf_ref(b);
    raft_buf_unref(b);
    ck_assert_int_eq(memcmp(b->data, "abc", 3), 0);
    raft_buf_unref(b);
    raft_buf_ref(NULL);
    raft_buf_unref(NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("raft-core");
    TCase *tc;

#define ADD(name, fn)                                                                              \
    do {                                                                                           \
        tc = tcase_create(name);                                                                   \
        tcase_set_timeout(tc, 60);                                                                 \
        tcase_add_test(tc, fn);                                                                    \
        suite_add_tcase(s, tc);                                                                    \
    } while (0)
    ADD("election", test_election_one_leader_per_term);
    ADD("election", test_election_timeouts_are_randomized_from_the_seed);
    ADD("prevote", test_prevote_isolated_node_keeps_its_term);
    ADD("prevote", test_prevote_partial_partition_keeps_leader);
    ADD("prevote", test_prevote_alone_fails_under_partial_partition);
    ADD("check-quorum", test_check_quorum_leader_steps_down);
    ADD("stickiness", test_stickiness_ignores_disruptive_vote);
    ADD("noop", test_new_leader_commits_noop_before_serving_reads);
    ADD("persist", test_vote_and_term_persisted_before_dependent_message);
    ADD("persist", test_follower_acks_only_durable_entries);
    ADD("persist", test_leader_counts_itself_only_when_durable);
    ADD("commit", test_figure8_only_current_term_entries_commit_by_counting);
    ADD("commit", test_stale_append_after_newer_does_not_truncate);
    ADD("commit", test_commit_is_min_of_leader_commit_and_last_new_entry);
    ADD("commit", test_conflicting_suffix_is_truncated);
    ADD("replication", test_fast_backtracking_with_conflict_hint);
    ADD("replication", test_pipelining_respects_inflight_limit);
    ADD("replication", test_progress_probe_replicate_snapshot);
    ADD("read", test_read_index_on_leader_needs_quorum_round);
    ADD("read", test_read_index_through_follower);
    ADD("read", test_read_index_after_leader_pause);
    ADD("read", test_read_retry_never_reuses_old_index);
    ADD("transfer", test_transfer_leadership_with_timeout_now);
    ADD("transfer", test_transfer_to_zero_picks_most_up_to_date_voter);
    ADD("transfer", test_transfer_refused_on_follower);
    ADD("snapshot", test_far_behind_follower_catches_up_from_chunked_snapshot);
    ADD("snapshot", test_follower_that_lost_its_log_is_caught_up_again);
    ADD("snapshot", test_snapshot_chunk_out_of_order_is_refused);
    ADD("snapshot", test_snapshot_receiver_grows_with_chunks_not_claimed_total);
    ADD("snapshot", test_snapshot_receiver_assembles_chunks_exactly);
    ADD("replication", test_restarted_follower_catches_up_on_an_idle_cluster);
    ADD("cap", test_uncommitted_bytes_cap_refuses_with_busy);
    ADD("cap", test_uncommitted_bytes_skip_an_inherited_tail);
    ADD("membership", test_membership_add_learner_promote_remove);
    ADD("membership", test_second_membership_change_refused_while_pending);
    ADD("membership", test_removed_leader_steps_down);
    ADD("membership", test_learner_replicates_but_never_votes_or_campaigns);
    ADD("start", test_bootstrap_founders_write_identical_first_entry);
    ADD("start", test_empty_node_without_bootstrap_waits_as_follower);
    ADD("start", test_single_voter_elects_itself_at_first_tick);
    ADD("start", test_restart_recovers_config_and_log);
    ADD("start", test_restart_with_a_million_entries_is_cheap);
    ADD("start", test_start_rejects_inconsistent_state);
    ADD("robustness", test_propose_on_follower_returns_not_leader_with_hint);
    ADD("robustness", test_invalid_messages_are_rejected_and_counted);
    ADD("robustness", test_random_messages_never_crash);
    ADD("modules", test_config_encoding_roundtrip_and_rejects_garbage);
    ADD("modules", test_buf_refcount);
#undef ADD
    return s;
}

int main(void)
{
    return check_run(suite());
}
