/*
 * raft.c - the Raft consensus core (see raft.h for the guarantees and the shell contract).
 *
 * How a step runs. raft_step() records the time, resets the output, dispatches the event
 * and then finish() assembles the update from what the step left behind:
 *   - entries appended in this step (emit_from .. last index) become "entries to persist";
 *   - messages were queued with their entries as an index range and get their pointers
 *     only in finish(), after the log stopped moving, so a realloc or compaction inside the
 *     step can never leave a message pointing at freed memory;
 *   - if the hard state changed, every message of the step moves to msgs_after_persist
 *     (a vote grant, a vote request, and even a one-node leader's first AppendEntries
 *     depend on the new term and vote being durable);
 *   - committed entries are handed out up to min(commit, persisted);
 *   - raft_bufs the step dropped (an old snapshot) are released at the start of the NEXT
 *     step, which is what makes "valid until the next call" true.
 *
 * Roles. A voter of its own configuration runs elections; a learner or a node outside the
 * configuration never does. Pre-vote, check-quorum and leader stickiness are on by default:
 * a node that heard from a leader within the (minimum) election timeout ignores vote and
 * pre-vote requests of a higher term, unless the request carries the transfer flag
 * (TimeoutNow). A leader counts as in lease until check-quorum makes it step down.
 *
 * Followers acknowledge with the highest index that is both durable (persisted) and known
 * to match the current leader's log (leader_match, reset at every new term): a response is
 * sent at once when the AppendEntries needed no new write, otherwise when the shell reports
 * RAFT_EV_PERSISTED.
 */
#include "raft.h"
#include "raft_log.h"
#include "raft_progress.h"

#include <stdlib.h>
#include <string.h>

#define CONFIG_BYTES_MAX (2 + RAFT_MAX_MEMBERS * (6 + RAFT_MAX_ADDRESS))
#define MAX_MSG_ENTRIES  (1u << 20)

enum send_mode { SEND_NORMAL, SEND_PROBE_EMPTY, SEND_COMMIT };

struct read_req {
    uint64_t id;      /* caller's id (local reads) */
    raft_id from;     /* 0: local; else the follower that forwarded it */
    uint64_t token;   /* the follower's token for this attempt */
    raft_index index; /* 0: waiting for the leader's first commit in its term */
    uint64_t round;   /* heartbeat round a quorum must answer */
};

struct fwd_read {
    uint64_t id;
    uint64_t token;
};

/*
 * A snapshot being received. buf grows with the chunks that arrived (never to the total a
 * peer claims up front: a chunk that says "total = 1 GiB" with ten bytes costs ten bytes);
 * buf->len is its capacity, received the bytes filled. buf has one reference, ours, until
 * install_snapshot() hands it to r->snap.
 */
struct snap_rx {
    bool active;
    raft_index index;
    raft_term term;
    uint64_t total;
    uint64_t received;
    struct raft_config config;
    struct raft_buf *buf;
};

#define VEC(T)                                                                                     \
    struct {                                                                                       \
        T *v;                                                                                      \
        size_t n, cap;                                                                             \
    }

struct raft {
    struct raft_options opt;
    raft_id id;
    uint64_t rng;
    uint64_t now;

    /* durable */
    raft_term term;
    raft_id vote;
    struct raft_log log;
    struct raft_snapshot snap; /* latest durable snapshot; snap.data holds one reference */
    uint8_t snap_cfg[CONFIG_BYTES_MAX];
    uint32_t snap_cfg_len;

    /* volatile */
    uint8_t role;
    raft_id leader;
    raft_index commit;
    raft_index applied;
    raft_index persisted;
    raft_index leader_match; /* follower: highest index known to match this term's leader */
    raft_index acked;        /* follower: highest index acknowledged in this term */
    raft_term lost_term;     /* follower: term in which lost_acked was last counted */
    uint64_t uncommitted;    /* leader: bytes of its term's NORMAL entries above commit */
    struct raft_config config;
    raft_index config_index;
    struct raft_progress prs[RAFT_MAX_MEMBERS]; /* parallel to config.members */
    uint8_t votes[RAFT_MAX_MEMBERS];            /* 0 none, 1 granted, 2 rejected */

    uint64_t election_deadline;
    uint64_t leader_heard;
    uint64_t heartbeat_deadline;
    uint64_t quorum_deadline;
    raft_index term_start; /* leader: index of its no-op */
    raft_id transferee;
    uint64_t transfer_deadline;
    uint64_t read_round;
    VEC(struct read_req) reads;
    VEC(struct fwd_read) fwd;
    uint64_t next_token;

    struct snap_rx rx;
    raft_index installing; /* snapshot handed out, waiting for SNAPSHOT_INSTALLED */
    raft_term installing_term;

    /* output of the current step */
    VEC(struct raft_msg) msgs;
    VEC(struct raft_msg) after; /* vote grants: only once the vote is durable */
    VEC(struct raft_read_state) rstates;
    VEC(struct raft_buf *) graveyard;
    raft_index emit_from; /* 0: nothing appended in this step */
    bool hs_dirty;
    bool bcast;
    bool commit_bcast;
    bool out_snapshot;
    raft_term step_term;
    raft_id step_vote;
    uint8_t step_role;
    raft_id step_leader;
    raft_index step_commit;
    struct raft_counters counters;
};

/* ------------------------------------------------------------------ small helpers */

const char *raft_rc_name(int rc)
{
    switch (rc) {
    case RAFT_OK:
        return "ok";
    case RAFT_EINVAL:
        return "invalid";
    case RAFT_ENOMEM:
        return "nomem";
    case RAFT_ENOTLEADER:
        return "not-leader";
    case RAFT_EBUSY:
        return "busy";
    case RAFT_ENOTREADY:
        return "not-ready";
    case RAFT_ESTALE:
        return "stale";
    default:
        return "unknown";
    }
}

const char *raft_msg_type_name(int type)
{
    static const char *names[] = {"?",          "APPEND",         "APPEND_RESP",
                                  "PREVOTE",    "PREVOTE_RESP",   "VOTE",
                                  "VOTE_RESP",  "HEARTBEAT",      "HEARTBEAT_RESP",
                                  "SNAPSHOT",   "SNAPSHOT_RESP",  "TIMEOUT_NOW",
                                  "READ_INDEX", "READ_INDEX_RESP"};

    if (type < 1 || type > RAFT_MSG_TYPE_MAX)
        return "?";
    return names[type];
}

const char *raft_role_name(int role)
{
    switch (role) {
    case RAFT_FOLLOWER:
        return "follower";
    case RAFT_PRECANDIDATE:
        return "precandidate";
    case RAFT_CANDIDATE:
        return "candidate";
    case RAFT_LEADER:
        return "leader";
    case RAFT_LEARNER:
        return "learner";
    default:
        return "?";
    }
}

#define VEC_PUSH(r, vec)                                                                           \
    (((vec).n < (vec).cap || vec_grow((void **)&(vec).v, &(vec).cap, sizeof(*(vec).v)))            \
         ? &(vec).v[(vec).n++]                                                                     \
         : NULL)

static bool vec_grow(void **v, size_t *cap, size_t elem)
{
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(*v, ncap * elem);

    if (p == NULL)
        return false;
    *v = p;
    *cap = ncap;
    return true;
}

/* splitmix64: small, good enough for spreading election timeouts, and seedable. */
static uint64_t rng_next(struct raft *r)
{
    uint64_t z = (r->rng += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void reset_election_timer(struct raft *r)
{
    uint64_t et = r->opt.election_timeout_ms;

    r->election_deadline = r->now + et + rng_next(r) % et;
}

static int member_pos(const struct raft *r, raft_id id)
{
    uint32_t i;

    for (i = 0; i < r->config.n; i++)
        if (r->config.members[i].id == id)
            return (int)i;
    return -1;
}

static bool is_voter(const struct raft *r, raft_id id)
{
    int p = member_pos(r, id);

    return p >= 0 && r->config.members[p].role == RAFT_MEMBER_VOTER;
}

static uint32_t quorum(const struct raft *r)
{
    return raft_config_voters(&r->config) / 2 + 1;
}

static bool in_lease(const struct raft *r)
{
    if (r->opt.disable_check_quorum)
        return false;
    if (r->role == RAFT_LEADER)
        return true;
    return r->leader != 0 && r->now - r->leader_heard < r->opt.election_timeout_ms;
}

static void bury(struct raft *r, struct raft_buf *b)
{
    struct raft_buf **slot;

    if (b == NULL)
        return;
    slot = VEC_PUSH(r, r->graveyard);
    if (slot != NULL)
        *slot = b;
    else
        raft_buf_unref(b); /* cannot defer: release now (only happens out of memory) */
}

static struct raft_msg *new_msg(struct raft *r, int type, raft_id to)
{
    struct raft_msg *m = VEC_PUSH(r, r->msgs);

    if (m == NULL)
        return NULL; /* out of memory: the message is lost, which Raft tolerates */
    memset(m, 0, sizeof(*m));
    m->type = (uint8_t)type;
    m->from = r->id;
    m->to = to;
    m->term = r->term;
    return m;
}

static void push_read_state(struct raft *r, uint64_t id, raft_index index, int rc)
{
    struct raft_read_state *s = VEC_PUSH(r, r->rstates);

    if (s != NULL)
        *s = (struct raft_read_state){.id = id, .index = index, .rc = rc};
}

/* ------------------------------------------------------------------ configuration */

/* The configuration in force at index: the last CONFIG entry in (base, index], else the
 * snapshot's. */
static int config_at(const struct raft *r, raft_index index, struct raft_config *c, raft_index *at)
{
    raft_index i;

    for (i = index; i > r->log.base; i--) {
        const struct raft_entry *e = raft_log_get(&r->log, i);

        if (e != NULL && e->type == RAFT_ENTRY_CONFIG) {
            if (at != NULL)
                *at = i;
            return raft_config_decode(e->data, e->len, c);
        }
    }
    *c = r->snap.config;
    if (at != NULL)
        *at = 0;
    return RAFT_OK;
}

static bool self_voter(const struct raft *r)
{
    return is_voter(r, r->id);
}

/* Make prs[] follow config.members[], keeping the progress of members that stay. */
static void rebuild_progress(struct raft *r, const struct raft_config *old_cfg,
                             struct raft_progress *old)
{
    uint32_t i, j;
    raft_index next = raft_log_last(&r->log) + 1;

    for (i = 0; i < r->config.n; i++) {
        raft_id id = r->config.members[i].id;
        bool found = false;

        for (j = 0; j < old_cfg->n; j++) {
            if (old_cfg->members[j].id == id && old[j].ring != NULL) {
                r->prs[i] = old[j];
                old[j].ring = NULL;
                found = true;
                break;
            }
        }
        if (!found) {
            if (raft_progress_init(&r->prs[i], id, next, r->opt.max_inflight_msgs) != RAFT_OK)
                r->prs[i].ring = NULL; /* a member without progress is skipped by the leader */
            r->prs[i].recent_active = true;
        }
        r->votes[i] = 0;
    }
    for (j = 0; j < old_cfg->n; j++)
        raft_progress_free(&old[j]);
}

static void set_config(struct raft *r, const struct raft_config *c, raft_index at)
{
    static const struct raft_progress zero;
    struct raft_config old_cfg = r->config;
    struct raft_progress old[RAFT_MAX_MEMBERS];
    bool was_voter = self_voter(r);
    uint32_t i;

    for (i = 0; i < old_cfg.n; i++) {
        old[i] = r->prs[i];
        r->prs[i] = zero;
    }
    r->config = *c;
    r->config_index = at;
    rebuild_progress(r, &old_cfg, old);
    if (!was_voter && self_voter(r) && r->role == RAFT_FOLLOWER)
        reset_election_timer(r);
}

static struct raft_progress *progress_of(struct raft *r, raft_id id)
{
    int p = member_pos(r, id);

    if (p < 0 || r->prs[p].ring == NULL)
        return NULL;
    return &r->prs[p];
}

/* After the log lost its tail, fall back to the configuration still in it. */
static void config_after_truncate(struct raft *r)
{
    struct raft_config c;
    raft_index at;

    if (r->config_index <= raft_log_last(&r->log))
        return;
    if (config_at(r, raft_log_last(&r->log), &c, &at) == RAFT_OK)
        set_config(r, &c, at);
}

/* ------------------------------------------------------------------ reads */

static void fail_local_and_forwarded_reads(struct raft *r)
{
    size_t i;

    for (i = 0; i < r->reads.n; i++) {
        struct read_req *q = &r->reads.v[i];

        if (q->from == 0) {
            push_read_state(r, q->id, 0, RAFT_ENOTLEADER);
        } else {
            struct raft_msg *m = new_msg(r, RAFT_MSG_READ_INDEX_RESP, q->from);

            if (m != NULL) {
                m->ctx = q->token;
                m->reject = true;
            }
        }
    }
    r->reads.n = 0;
}

static void fail_forwarded_reads(struct raft *r)
{
    size_t i;

    for (i = 0; i < r->fwd.n; i++)
        push_read_state(r, r->fwd.v[i].id, 0, RAFT_ENOTLEADER);
    r->fwd.n = 0;
}

static void broadcast_heartbeat(struct raft *r);

/* Release reads whose round a quorum of voters answered. */
static void check_reads(struct raft *r)
{
    uint64_t acks[RAFT_MAX_MEMBERS];
    uint32_t i, n = 0, q = quorum(r);
    uint64_t safe;
    size_t k, keep = 0;

    if (r->reads.n == 0)
        return;
    for (i = 0; i < r->config.n; i++) {
        if (r->config.members[i].role != RAFT_MEMBER_VOTER)
            continue;
        acks[n++] = r->config.members[i].id == r->id ? r->read_round : r->prs[i].read_ack;
    }
    /* the q-th highest answer is a round a quorum has reached */
    for (i = 0; i < n; i++)
        for (k = i + 1; k < n; k++)
            if (acks[k] > acks[i]) {
                uint64_t t = acks[i];
                acks[i] = acks[k];
                acks[k] = t;
            }
    safe = n >= q ? acks[q - 1] : 0;
    for (k = 0; k < r->reads.n; k++) {
        struct read_req *rq = &r->reads.v[k];

        if (rq->index == 0 || rq->round > safe) {
            r->reads.v[keep++] = *rq;
            continue;
        }
        if (rq->from == 0) {
            push_read_state(r, rq->id, rq->index, RAFT_OK);
        } else {
            struct raft_msg *m = new_msg(r, RAFT_MSG_READ_INDEX_RESP, rq->from);

            if (m != NULL) {
                m->ctx = rq->token;
                m->index = rq->index;
            }
        }
    }
    r->reads.n = keep;
}

/* Give reads that waited for the term's first commit their index and a round. */
static void start_waiting_reads(struct raft *r)
{
    size_t k;
    bool any = false;

    if (r->commit < r->term_start)
        return;
    for (k = 0; k < r->reads.n; k++) {
        if (r->reads.v[k].index != 0)
            continue;
        if (!any)
            r->read_round++;
        any = true;
        r->reads.v[k].index = r->commit;
        r->reads.v[k].round = r->read_round;
    }
    if (any) {
        broadcast_heartbeat(r);
        check_reads(r);
    }
}

static int leader_read(struct raft *r, uint64_t id, raft_id from, uint64_t token)
{
    struct read_req *q;

    if (r->reads.n >= r->opt.max_pending_reads)
        return RAFT_EBUSY;
    q = VEC_PUSH(r, r->reads);
    if (q == NULL)
        return RAFT_ENOMEM;
    *q = (struct read_req){.id = id, .from = from, .token = token};
    if (r->commit < r->term_start)
        return RAFT_OK; /* waits for the no-op (start_waiting_reads) */
    q->index = r->commit;
    q->round = ++r->read_round;
    broadcast_heartbeat(r);
    check_reads(r);
    return RAFT_OK;
}

/* ------------------------------------------------------------------ role changes */

static void become_follower(struct raft *r, raft_term term, raft_id leader)
{
    if (r->role == RAFT_LEADER) {
        /* answered in the old term, so nobody mistakes us for the new term's leader */
        fail_local_and_forwarded_reads(r);
        r->transferee = 0;
    }
    if (term > r->term) {
        r->term = term;
        r->vote = 0;
        r->leader_match = 0;
        r->acked = 0;
    }
    if (leader != r->leader || term != r->step_term)
        fail_forwarded_reads(r);
    r->role = RAFT_FOLLOWER;
    r->leader = leader;
    if (leader != 0)
        r->leader_heard = r->now;
    reset_election_timer(r);
}

static struct raft_msg *send_vote_request(struct raft *r, raft_id to, bool pre, bool transfer)
{
    struct raft_msg *m = new_msg(r, pre ? RAFT_MSG_PREVOTE : RAFT_MSG_VOTE, to);

    if (m == NULL)
        return NULL;
    if (pre)
        m->term = r->term + 1;
    m->index = raft_log_last(&r->log);
    m->log_term = raft_log_last_term(&r->log);
    m->transfer = transfer;
    return m;
}

static void become_leader(struct raft *r);

/* Count a vote; returns 1 won, -1 lost, 0 undecided. */
static int poll(struct raft *r, raft_id from, bool granted)
{
    uint32_t i, yes = 0, no = 0, q = quorum(r), voters = raft_config_voters(&r->config);
    int p = member_pos(r, from);

    if (p >= 0 && r->config.members[p].role == RAFT_MEMBER_VOTER && r->votes[p] == 0)
        r->votes[p] = granted ? 1 : 2;
    for (i = 0; i < r->config.n; i++) {
        if (r->config.members[i].role != RAFT_MEMBER_VOTER)
            continue;
        if (r->votes[i] == 1)
            yes++;
        else if (r->votes[i] == 2)
            no++;
    }
    if (yes >= q)
        return 1;
    if (no > voters - q)
        return -1;
    return 0;
}

static void campaign(struct raft *r, bool pre, bool transfer)
{
    uint32_t i;
    int won;

    if (!self_voter(r))
        return;
    if (r->role == RAFT_LEADER)
        return;
    memset(r->votes, 0, sizeof(r->votes));
    if (r->leader != 0)
        fail_forwarded_reads(r);
    r->leader = 0;
    if (pre) {
        r->role = RAFT_PRECANDIDATE;
    } else {
        r->term++;
        r->vote = r->id;
        r->role = RAFT_CANDIDATE;
        r->leader_match = 0;
        r->acked = 0;
    }
    reset_election_timer(r);
    won = poll(r, r->id, true);
    if (won == 1) {
        if (pre)
            campaign(r, false, transfer);
        else
            become_leader(r);
        return;
    }
    for (i = 0; i < r->config.n; i++) {
        const struct raft_member *mb = &r->config.members[i];

        if (mb->role == RAFT_MEMBER_VOTER && mb->id != r->id)
            send_vote_request(r, mb->id, pre, transfer);
    }
}

static int append_local(struct raft *r, int type, struct raft_buf *buf, const uint8_t *data,
                        uint32_t len);

static void become_leader(struct raft *r)
{
    uint32_t i;
    raft_index last = raft_log_last(&r->log);

    r->role = RAFT_LEADER;
    r->leader = r->id;
    r->transferee = 0;
    r->reads.n = 0;
    /* Entries of earlier terms were proposed by other leaders: they do not count (etcd). */
    r->uncommitted = 0;
    for (i = 0; i < r->config.n; i++) {
        struct raft_progress *pr = &r->prs[i];

        if (pr->ring == NULL)
            continue;
        pr->match = 0;
        pr->next = last + 1;
        raft_progress_probe(pr);
        pr->next = last + 1;
        pr->recent_active = true;
        pr->read_ack = 0;
    }
    r->heartbeat_deadline = r->now + r->opt.heartbeat_ms;
    r->quorum_deadline = r->now + r->opt.election_timeout_ms;
    if (append_local(r, RAFT_ENTRY_NOOP, NULL, NULL, 0) != RAFT_OK) {
        /* Without its no-op a leader could never serve reads: give the term up. */
        become_follower(r, r->term, 0);
        return;
    }
    r->term_start = raft_log_last(&r->log);
}

/* ------------------------------------------------------------------ leader: replication */

/*
 * The bytes of this term's NORMAL entries in (from, to] are committed now: they no longer
 * count against max_uncommitted_bytes. Exactly the entries propose() counted (every NORMAL
 * entry of the leader's term was proposed here, in this term), so the sum never goes
 * below zero; the clamp only guards the invariant.
 */
static void release_uncommitted(struct raft *r, raft_index from, raft_index to)
{
    raft_index i;

    for (i = from + 1; i <= to && r->uncommitted > 0; i++) {
        const struct raft_entry *e = raft_log_get(&r->log, i);

        if (e == NULL || e->term != r->term || e->type != RAFT_ENTRY_NORMAL)
            continue;
        r->uncommitted = e->len < r->uncommitted ? r->uncommitted - e->len : 0;
    }
}

static bool maybe_commit(struct raft *r)
{
    raft_index m[RAFT_MAX_MEMBERS], q_index;
    uint32_t i, k, n = 0, q = quorum(r);

    for (i = 0; i < r->config.n; i++) {
        if (r->config.members[i].role != RAFT_MEMBER_VOTER)
            continue;
        m[n++] = r->config.members[i].id == r->id ? r->persisted : r->prs[i].match;
    }
    if (n < q)
        return false;
    for (i = 0; i < n; i++)
        for (k = i + 1; k < n; k++)
            if (m[k] > m[i]) {
                raft_index t = m[i];
                m[i] = m[k];
                m[k] = t;
            }
    q_index = m[q - 1];
    /* Figure 8: only an entry of the current term commits by counting replicas. */
    if (q_index <= r->commit || raft_log_term(&r->log, q_index) != r->term)
        return false;
    release_uncommitted(r, r->commit, q_index);
    r->commit = q_index;
    return true;
}

static void send_snapshot_chunk(struct raft *r, struct raft_progress *pr)
{
    struct raft_msg *m;
    uint64_t total = r->snap.data ? r->snap.data->len : 0, len;

    if (r->snap.index == 0)
        return;
    if (pr->state != RAFT_PR_SNAPSHOT || pr->snap_index != r->snap.index)
        raft_progress_snapshot(pr, r->snap.index);
    if (pr->snap_offset > total)
        pr->snap_offset = 0;
    len = total - pr->snap_offset;
    if (len > r->opt.snapshot_chunk_bytes)
        len = r->opt.snapshot_chunk_bytes;
    m = new_msg(r, RAFT_MSG_SNAPSHOT, pr->id);
    if (m == NULL)
        return;
    m->snap.index = r->snap.index;
    m->snap.term = r->snap.term;
    m->snap.config = r->snap_cfg;
    m->snap.config_len = r->snap_cfg_len;
    m->snap.total = total;
    m->snap.offset = pr->snap_offset;
    m->snap.len = (uint32_t)len;
    m->snap.data = len ? r->snap.data->data + pr->snap_offset : NULL;
    m->snap.buf = len ? r->snap.data : NULL;
    m->snap.done = pr->snap_offset + len == total;
    pr->snap_sent_ms = r->now;
}

static void send_append(struct raft *r, struct raft_progress *pr, enum send_mode mode)
{
    raft_index last = raft_log_last(&r->log), prev, i;
    raft_term prev_term;
    uint64_t bytes = 0;
    uint32_t n = 0;
    struct raft_msg *m;

    if (r->role != RAFT_LEADER || pr == NULL || pr->id == r->id)
        return;
    if (pr->state == RAFT_PR_SNAPSHOT)
        return;
    if (pr->state == RAFT_PR_PROBE && pr->probe_sent)
        return;
    if (pr->state == RAFT_PR_REPLICATE &&
        (raft_progress_paused(pr, r->opt.max_inflight_bytes) || pr->next > last)) {
        if (mode == SEND_NORMAL || (mode == SEND_COMMIT && pr->sent_commit >= r->commit))
            return;
        m = new_msg(r, RAFT_MSG_APPEND, pr->id);
        if (m == NULL)
            return;
        /* COMMIT: prev = match always matches, so reordering cannot cause a rejection.
         * PROBE_EMPTY: prev = next - 1 makes a follower that lost messages say so. */
        m->index = mode == SEND_COMMIT ? pr->match : pr->next - 1;
        m->log_term = raft_log_term(&r->log, m->index);
        m->commit = r->commit;
        if (m->log_term == 0 && m->index > 0)
            r->msgs.n--; /* compacted away; the next probe will switch to a snapshot */
        else             /* what the follower may commit from it: min(commit, last index in it) */
            pr->sent_commit = m->index < r->commit ? m->index : r->commit;
        return;
    }
    prev = pr->next - 1;
    prev_term = raft_log_term(&r->log, prev);
    if (prev < r->log.base || (prev > 0 && prev_term == 0)) {
        send_snapshot_chunk(r, pr);
        return;
    }
    for (i = pr->next; i <= last; i++) {
        const struct raft_entry *e = raft_log_get(&r->log, i);

        if (n > 0 && bytes + e->len > r->opt.max_msg_bytes)
            break;
        bytes += e->len;
        n++;
        if (n >= MAX_MSG_ENTRIES)
            break;
    }
    m = new_msg(r, RAFT_MSG_APPEND, pr->id);
    if (m == NULL)
        return;
    m->index = prev;
    m->log_term = prev_term;
    m->commit = r->commit;
    m->n_entries = n; /* entries pointer is set in finish() */
    pr->sent_commit = prev + n < r->commit ? prev + n : r->commit;
    if (pr->state == RAFT_PR_PROBE)
        pr->probe_sent = true;
    else if (n > 0)
        raft_progress_sent(pr, prev + n, bytes);
}

static void broadcast_heartbeat(struct raft *r)
{
    uint32_t i;

    if (r->role != RAFT_LEADER)
        return;
    for (i = 0; i < r->config.n; i++) {
        struct raft_progress *pr = &r->prs[i];
        struct raft_msg *m;

        if (pr->id == r->id || pr->ring == NULL)
            continue;
        m = new_msg(r, RAFT_MSG_HEARTBEAT, pr->id);
        if (m == NULL)
            return;
        m->commit = pr->match < r->commit ? pr->match : r->commit;
        m->ctx = r->read_round;
    }
}

static void send_timeout_now(struct raft *r, raft_id to)
{
    new_msg(r, RAFT_MSG_TIMEOUT_NOW, to);
}

static void leader_after_commit(struct raft *r)
{
    r->commit_bcast = true;
    start_waiting_reads(r);
    /* A leader whose removal committed steps down; it is no voter any more and will not
     * campaign again. */
    if (r->config_index <= r->commit && !self_voter(r)) {
        uint32_t i;

        for (i = 0; i < r->config.n; i++) /* let the others learn the commit first */
            send_append(r, &r->prs[i], SEND_COMMIT);
        become_follower(r, r->term, 0);
    }
}

static int append_local(struct raft *r, int type, struct raft_buf *buf, const uint8_t *data,
                        uint32_t len)
{
    struct raft_entry e = {.term = r->term,
                           .index = raft_log_last(&r->log) + 1,
                           .type = (uint8_t)type,
                           .len = len,
                           .data = len ? data : NULL,
                           .buf = len ? buf : NULL};
    int rc = raft_log_append(&r->log, &e, 1);

    if (rc != RAFT_OK)
        return rc;
    if (r->emit_from == 0)
        r->emit_from = e.index;
    r->bcast = true;
    return RAFT_OK;
}

/* ------------------------------------------------------------------ follower side */

static void respond_append(struct raft *r, raft_id to, raft_index index)
{
    struct raft_msg *m = new_msg(r, RAFT_MSG_APPEND_RESP, to);

    if (m != NULL)
        m->index = index;
    if (index > r->acked)
        r->acked = index;
}

static raft_index ack_index(const struct raft *r)
{
    if (r->installing)
        return 0;
    return r->leader_match < r->persisted ? r->leader_match : r->persisted;
}

/* Scan back from index for the last entry whose term is <= term (the conflict hint). */
static raft_index find_conflict_by_term(const struct raft_log *l, raft_index index, raft_term term)
{
    if (index > raft_log_last(l))
        index = raft_log_last(l);
    while (index > l->base && raft_log_term(l, index) > term)
        index--;
    return index;
}

static void apply_appended_config(struct raft *r, const struct raft_entry *e, size_t n)
{
    size_t i;

    for (i = n; i > 0; i--) {
        struct raft_config c;

        if (e[i - 1].type != RAFT_ENTRY_CONFIG)
            continue;
        if (raft_config_decode(e[i - 1].data, e[i - 1].len, &c) == RAFT_OK)
            set_config(r, &c, e[i - 1].index);
        return;
    }
}

static void handle_append(struct raft *r, const struct raft_msg *m)
{
    raft_index prev = m->index, last_new, idx;
    raft_term prev_term = m->log_term;
    const struct raft_entry *ents = m->entries;
    size_t n = m->n_entries, i;
    struct raft_msg *resp;

    if (r->installing)
        return; /* the leader retries after the snapshot is durable */
    if (prev < r->log.base) {
        /* Everything up to base is in our snapshot and committed, hence matching. */
        size_t skip = (size_t)(r->log.base - prev);

        if (skip >= n) {
            respond_append(r, m->from, ack_index(r));
            return;
        }
        ents += skip;
        n -= skip;
        prev = r->log.base;
        prev_term = r->log.base_term;
    }
    if (raft_log_term(&r->log, prev) != prev_term || prev > raft_log_last(&r->log)) {
        r->counters.rejected_appends++;
        resp = new_msg(r, RAFT_MSG_APPEND_RESP, m->from);
        if (resp != NULL) {
            resp->reject = true;
            resp->index = m->index;
            resp->hint_index = find_conflict_by_term(&r->log, prev, prev_term);
            resp->hint_term = raft_log_term(&r->log, resp->hint_index);
        }
        return;
    }
    /* Skip what already matches; a stale or duplicated message stops here. */
    for (i = 0; i < n; i++) {
        idx = ents[i].index;
        if (idx > raft_log_last(&r->log))
            break;
        if (raft_log_term(&r->log, idx) != ents[i].term) {
            if (idx <= r->commit) {
                /* A leader may never contradict a committed entry: refuse it. */
                r->counters.invalid_msgs++;
                return;
            }
            if (raft_log_reserve(&r->log, n - i) != RAFT_OK)
                return;
            raft_log_truncate(&r->log, idx);
            if (r->persisted >= idx)
                r->persisted = idx - 1;
            if (r->emit_from >= idx)
                r->emit_from = 0;
            config_after_truncate(r);
            break;
        }
    }
    if (i < n) {
        if (raft_log_append(&r->log, ents + i, n - i) != RAFT_OK)
            return; /* out of memory: no answer; the leader will retry */
        if (r->emit_from == 0 || r->emit_from > ents[i].index)
            r->emit_from = ents[i].index;
        apply_appended_config(r, ents + i, n - i);
    }
    last_new = prev + n;
    if (last_new > r->leader_match)
        r->leader_match = last_new;
    /* commit = min(leaderCommit, index of the last new entry) */
    idx = m->commit < last_new ? m->commit : last_new;
    if (idx > r->commit)
        r->commit = idx;
    if (ack_index(r) >= last_new || i == n)
        respond_append(r, m->from, ack_index(r));
    /* else the acknowledgement goes when the shell reports the write durable */
}

/*
 * A heartbeat carries min(the follower's match, the leader's commit): an index this node
 * acknowledged to this leader in this term. The node takes it only up to leader_match,
 * what it knows matches the leader's log in this term; after a restart leader_match is 0
 * although the log on disk still matches, and then the answer says so (reject), so that
 * the leader probes it and the next AppendEntries re-establishes the match and brings the
 * commit index, without waiting for a client write.
 *
 * The same index also tells whether this node lost what it acknowledged: an
 * acknowledgement is sent only for durable entries, and within one term a leader never
 * asks a follower to drop entries it acknowledged, so a log that now ends below that index
 * lost them (a wiped state dir, writes that were not synced). Counted once per term.
 */
static void handle_heartbeat(struct raft *r, const struct raft_msg *m)
{
    struct raft_msg *resp;
    raft_index c = m->commit < r->leader_match ? m->commit : r->leader_match;

    if (c > r->commit)
        r->commit = c;
    if (!r->installing && m->commit > raft_log_last(&r->log) && r->lost_term != r->term) {
        r->lost_term = r->term;
        r->counters.lost_acked++;
    }
    resp = new_msg(r, RAFT_MSG_HEARTBEAT_RESP, m->from);
    if (resp != NULL) {
        resp->ctx = m->ctx;
        /* How much log is durable here: lets a leader notice a follower that lost it. */
        resp->index = r->persisted;
        resp->reject = m->commit > r->leader_match && !r->installing;
    }
}

static void respond_snapshot(struct raft *r, raft_id to, raft_index index, uint64_t offset,
                             bool done, bool reject)
{
    struct raft_msg *m = new_msg(r, RAFT_MSG_SNAPSHOT_RESP, to);

    if (m == NULL)
        return;
    m->index = index;
    m->snap.index = index;
    m->snap.offset = offset;
    m->snap.done = done;
    m->reject = reject;
}

static void set_snapshot(struct raft *r, raft_index index, raft_term term,
                         const struct raft_config *c, struct raft_buf *data)
{
    int len;

    bury(r, r->snap.data);
    r->snap.index = index;
    r->snap.term = term;
    r->snap.config = *c;
    r->snap.data = data;
    len = raft_config_encode(c, r->snap_cfg, sizeof(r->snap_cfg));
    r->snap_cfg_len = len > 0 ? (uint32_t)len : 0;
}

static void install_snapshot(struct raft *r)
{
    struct snap_rx *rx = &r->rx;

    set_snapshot(r, rx->index, rx->term, &rx->config, rx->buf);
    rx->buf = NULL;
    rx->active = false;
    raft_log_reset(&r->log, rx->index, rx->term);
    r->emit_from = 0;
    if (r->commit < rx->index)
        r->commit = rx->index;
    r->applied = rx->index;
    r->persisted = rx->index;
    if (r->leader_match < rx->index)
        r->leader_match = rx->index;
    set_config(r, &r->snap.config, 0);
    r->installing = rx->index;
    r->installing_term = rx->term;
    r->out_snapshot = true;
}

/*
 * Make room for `need` bytes (need <= rx->total, checked by validate_msg): at least
 * double the capacity so that N chunks cost O(log N) reallocations, but never beyond the
 * total, and never ahead of the bytes that really arrived by more than that doubling.
 * When the last chunk is in, the buffer is exactly total bytes, as raft_buf.len must be.
 */
static int rx_reserve(struct snap_rx *rx, uint64_t need)
{
    uint64_t cap = rx->buf ? rx->buf->len : 0, want;
    struct raft_buf *nb;

    if (need == rx->total) {
        if (rx->buf != NULL && cap == rx->total)
            return RAFT_OK;
        want = rx->total; /* the last chunk: exactly the snapshot's size */
    } else {
        if (need <= cap)
            return RAFT_OK;
        want = cap * 2 > need ? cap * 2 : need;
        if (want > rx->total)
            want = rx->total;
    }
    if (want > SIZE_MAX - sizeof(struct raft_buf))
        return RAFT_ENOMEM;
    nb = rx->buf ? raft_buf_resize(rx->buf, (size_t)want) : raft_buf_new((size_t)want);
    if (nb == NULL)
        return RAFT_ENOMEM;
    rx->buf = nb;
    return RAFT_OK;
}

static void handle_snapshot(struct raft *r, const struct raft_msg *m)
{
    const struct raft_snapshot_chunk *c = &m->snap;
    struct snap_rx *rx = &r->rx;

    if (r->installing)
        return;
    if (c->index <= r->snap.index ||
        (raft_log_term(&r->log, c->index) == c->term && c->index <= r->persisted)) {
        /* We hold it already: durable in our snapshot or in our log. */
        if (c->index > r->snap.index) {
            if (r->leader_match < c->index)
                r->leader_match = c->index;
            if (r->commit < c->index)
                r->commit = c->index;
        }
        respond_snapshot(r, m->from, c->index, c->total, true, false);
        return;
    }
    if (c->offset == 0) {
        struct raft_config cfg;

        if (raft_config_decode(c->config, c->config_len, &cfg) != RAFT_OK) {
            r->counters.invalid_msgs++;
            return;
        }
        raft_buf_unref(rx->buf);
        memset(rx, 0, sizeof(*rx));
        rx->config = cfg;
        rx->active = true;
        rx->index = c->index;
        rx->term = c->term;
        rx->total = c->total;
    } else if (!rx->active || rx->index != c->index || rx->term != c->term ||
               rx->total != c->total || rx->received != c->offset) {
        bool same = rx->active && rx->index == c->index && rx->term == c->term;

        respond_snapshot(r, m->from, c->index, same ? rx->received : 0, false, true);
        return;
    }
    if (rx_reserve(rx, c->offset + c->len) != RAFT_OK)
        return; /* out of memory: no answer; the leader resends after a silence */
    if (c->len > 0)
        memcpy(rx->buf->data + c->offset, c->data, c->len);
    rx->received = c->offset + c->len;
    if (!c->done) {
        respond_snapshot(r, m->from, c->index, rx->received, false, false);
        return;
    }
    install_snapshot(r); /* the answer goes after RAFT_EV_SNAPSHOT_INSTALLED */
}

/* ------------------------------------------------------------------ leader side */

static void handle_append_resp(struct raft *r, struct raft_progress *pr, const struct raft_msg *m)
{
    raft_index last = raft_log_last(&r->log);

    if (m->reject) {
        raft_index k, next;

        if (pr->state == RAFT_PR_SNAPSHOT)
            return;
        if (pr->state == RAFT_PR_REPLICATE && m->index <= pr->match)
            return; /* stale */
        if (pr->state == RAFT_PR_PROBE && m->index != pr->next - 1)
            return; /* answer to an older probe */
        k = m->hint_index < m->index ? m->hint_index : m->index;
        if (k > last)
            k = last;
        while (k > r->log.base && raft_log_term(&r->log, k) > m->hint_term)
            k--;
        if (k == r->log.base && k > 0 && r->log.base_term > m->hint_term)
            k--; /* it lacks even our snapshot point: next probe sends the snapshot */
        next = k + 1;
        if (next > m->index)
            next = m->index;
        if (next <= pr->match) {
            /*
             * It refuses an index it acknowledged before: it has lost its log (a replica
             * restarted on an empty disk). Forget what it acknowledged - a lower match only
             * makes commits wait for others - and probe from where it says it is, or this
             * exchange would repeat forever at match + 1.
             */
            r->counters.lost_logs++;
            pr->match = next - 1;
        }
        raft_progress_probe(pr);
        pr->next = next;
        send_append(r, pr, SEND_NORMAL);
        return;
    }
    if (m->index > last)
        return; /* acknowledges more than we have: ignore */
    if (raft_progress_ack(pr, m->index) && maybe_commit(r))
        leader_after_commit(r);
    if (r->role != RAFT_LEADER)
        return;
    raft_progress_free_to(pr, m->index);
    if (pr->state == RAFT_PR_PROBE && m->index >= pr->match)
        raft_progress_replicate(pr);
    else if (pr->state == RAFT_PR_SNAPSHOT && pr->match >= pr->snap_index)
        raft_progress_probe(pr);
    if (r->transferee == pr->id && pr->match == last)
        send_timeout_now(r, pr->id);
    /* keep the pipeline full; with nothing new, still tell it a newer commit index */
    send_append(r, pr, SEND_COMMIT);
}

static void handle_heartbeat_resp(struct raft *r, struct raft_progress *pr,
                                  const struct raft_msg *m)
{
    if (m->ctx > pr->read_ack && m->ctx <= r->read_round) {
        pr->read_ack = m->ctx;
        check_reads(r);
    }
    switch (pr->state) {
    case RAFT_PR_PROBE:
        pr->probe_sent = false;
        send_append(r, pr, SEND_PROBE_EMPTY);
        break;
    case RAFT_PR_REPLICATE:
        if (m->reject || m->index < pr->match) {
            /*
             * It has less durable log than it acknowledged: it may have restarted on an
             * empty disk, or this answer is older than its latest acknowledgement. Or it
             * restarted with its log and no longer knows that its log matches ours
             * (reject), so it cannot take our commit index. A probe tells which and
             * brings the commit; a refusal resets match (handle_append_resp). Without this
             * an idle leader would never notice, as it has nothing new to send.
             */
            raft_progress_probe(pr);
            send_append(r, pr, SEND_NORMAL);
            break;
        }
        if (raft_progress_paused(pr, r->opt.max_inflight_bytes))
            raft_progress_free_first(pr);
        if (pr->match < raft_log_last(&r->log))
            send_append(r, pr, SEND_PROBE_EMPTY);
        break;
    case RAFT_PR_SNAPSHOT:
        if (r->now - pr->snap_sent_ms >= 2 * (uint64_t)r->opt.heartbeat_ms)
            send_snapshot_chunk(r, pr);
        break;
    }
}

static void handle_snapshot_resp(struct raft *r, struct raft_progress *pr, const struct raft_msg *m)
{
    uint64_t total = r->snap.data ? r->snap.data->len : 0;

    if (!m->reject && m->snap.done) {
        /* installed and durable (possibly an older snapshot than the one we send now) */
        if (m->index <= raft_log_last(&r->log) && raft_progress_ack(pr, m->index) &&
            maybe_commit(r))
            leader_after_commit(r);
        if (r->role != RAFT_LEADER)
            return;
        if (pr->state == RAFT_PR_SNAPSHOT)
            raft_progress_probe(pr);
        send_append(r, pr, SEND_NORMAL);
        return;
    }
    if (pr->state != RAFT_PR_SNAPSHOT || m->index != pr->snap_index || m->index != r->snap.index)
        return;
    if (m->reject) {
        pr->snap_offset = m->snap.offset <= total ? m->snap.offset : 0;
        send_snapshot_chunk(r, pr);
        return;
    }
    if (m->snap.offset > pr->snap_offset && m->snap.offset < total) {
        pr->snap_offset = m->snap.offset;
        send_snapshot_chunk(r, pr);
    }
}

/* ------------------------------------------------------------------ message validation */

static int validate_entries(const struct raft *r, const struct raft_msg *m)
{
    uint32_t i;
    raft_term prev_term = m->log_term;

    if (m->n_entries > MAX_MSG_ENTRIES || (m->n_entries > 0 && m->entries == NULL))
        return RAFT_EINVAL;
    if (m->index > UINT64_MAX - 1 - m->n_entries)
        return RAFT_EINVAL;
    for (i = 0; i < m->n_entries; i++) {
        const struct raft_entry *e = &m->entries[i];

        if (e->index != m->index + 1 + i || e->term == 0 || e->term > m->term ||
            e->term < prev_term)
            return RAFT_EINVAL;
        if (e->type < RAFT_ENTRY_NORMAL || e->type > RAFT_ENTRY_CONFIG)
            return RAFT_EINVAL;
        if (e->len > r->opt.max_entry_bytes || (e->len > 0 && e->data == NULL))
            return RAFT_EINVAL;
        if (e->type == RAFT_ENTRY_CONFIG) {
            struct raft_config c;

            if (raft_config_decode(e->data, e->len, &c) != RAFT_OK)
                return RAFT_EINVAL;
        }
        prev_term = e->term;
    }
    return RAFT_OK;
}

static int validate_msg(const struct raft *r, const struct raft_msg *m)
{
    if (m == NULL || m->type < 1 || m->type > RAFT_MSG_TYPE_MAX)
        return RAFT_EINVAL;
    if (m->from == 0 || m->from == r->id || m->to != r->id || m->term == 0)
        return RAFT_EINVAL;
    if (m->type != RAFT_MSG_APPEND && m->n_entries != 0)
        return RAFT_EINVAL;
    switch (m->type) {
    case RAFT_MSG_APPEND:
        if ((m->index == 0) != (m->log_term == 0) || m->log_term > m->term)
            return RAFT_EINVAL;
        return validate_entries(r, m);
    case RAFT_MSG_PREVOTE:
    case RAFT_MSG_VOTE:
        if ((m->index == 0) != (m->log_term == 0) || m->log_term > m->term)
            return RAFT_EINVAL;
        return RAFT_OK;
    case RAFT_MSG_SNAPSHOT: {
        const struct raft_snapshot_chunk *c = &m->snap;

        if (c->index == 0 || c->term == 0 || c->term > m->term)
            return RAFT_EINVAL;
        if (c->total > r->opt.max_snapshot_bytes || c->offset > c->total ||
            c->len > c->total - c->offset || (c->len > 0 && c->data == NULL))
            return RAFT_EINVAL;
        if (c->done != (c->offset + c->len == c->total))
            return RAFT_EINVAL;
        if (c->config_len > CONFIG_BYTES_MAX || (c->config_len > 0 && c->config == NULL))
            return RAFT_EINVAL;
        if (c->offset == 0) {
            struct raft_config cfg;

            if (raft_config_decode(c->config, c->config_len, &cfg) != RAFT_OK)
                return RAFT_EINVAL;
        }
        return RAFT_OK;
    }
    default:
        return RAFT_OK;
    }
}

/* ------------------------------------------------------------------ receive */

static void handle_vote_request(struct raft *r, const struct raft_msg *m)
{
    bool pre = m->type == RAFT_MSG_PREVOTE;
    raft_term last_term = raft_log_last_term(&r->log);
    bool up_to_date =
        m->log_term > last_term || (m->log_term == last_term && m->index >= raft_log_last(&r->log));
    bool can_vote =
        r->vote == m->from || (r->vote == 0 && r->leader == 0) || (pre && m->term > r->term);
    struct raft_msg *resp = new_msg(r, pre ? RAFT_MSG_PREVOTE_RESP : RAFT_MSG_VOTE_RESP, m->from);

    if (resp == NULL)
        return;
    if (can_vote && up_to_date) {
        if (pre) {
            resp->term = m->term;
        } else {
            /* A grant, even a repeated one (a duplicated request), waits for the vote to be
             * durable: move it to the after-persist list. */
            struct raft_msg grant = *resp, *slot;

            r->msgs.n--;
            slot = VEC_PUSH(r, r->after);
            if (slot != NULL)
                *slot = grant;
            r->vote = m->from;
            reset_election_timer(r);
        }
    } else {
        resp->reject = true;
    }
}

static void handle_vote_resp(struct raft *r, const struct raft_msg *m)
{
    bool pre = m->type == RAFT_MSG_PREVOTE_RESP;
    int won;

    if ((pre && r->role != RAFT_PRECANDIDATE) || (!pre && r->role != RAFT_CANDIDATE))
        return;
    won = poll(r, m->from, !m->reject);
    if (won == 1) {
        if (pre)
            campaign(r, false, false);
        else
            become_leader(r);
    } else if (won == -1) {
        become_follower(r, r->term, 0);
    }
}

static void handle_timeout_now(struct raft *r, const struct raft_msg *m)
{
    if (m->from != r->leader || r->role == RAFT_LEADER)
        return;
    campaign(r, false, true);
}

static void handle_read_index(struct raft *r, const struct raft_msg *m)
{
    if (r->role != RAFT_LEADER || leader_read(r, 0, m->from, m->ctx) != RAFT_OK) {
        struct raft_msg *resp = new_msg(r, RAFT_MSG_READ_INDEX_RESP, m->from);

        if (resp != NULL) {
            resp->ctx = m->ctx;
            resp->reject = true;
        }
    }
}

static void handle_read_index_resp(struct raft *r, const struct raft_msg *m)
{
    size_t i;

    if (m->from != r->leader)
        return;
    for (i = 0; i < r->fwd.n; i++) {
        if (r->fwd.v[i].token != m->ctx)
            continue;
        push_read_state(r, r->fwd.v[i].id, m->reject ? 0 : m->index,
                        m->reject ? RAFT_ENOTLEADER : RAFT_OK);
        r->fwd.v[i] = r->fwd.v[--r->fwd.n];
        return;
    }
}

static int receive(struct raft *r, const struct raft_msg *m)
{
    struct raft_progress *pr;
    int t;

    if (validate_msg(r, m) != RAFT_OK) {
        r->counters.invalid_msgs++;
        return RAFT_EINVAL;
    }
    t = m->type;
    if (m->term > r->term) {
        bool vote_req = t == RAFT_MSG_PREVOTE || t == RAFT_MSG_VOTE;

        if (vote_req && !m->transfer && in_lease(r))
            return RAFT_OK; /* stickiness: a leader we heard from recently is alive */
        if (t == RAFT_MSG_PREVOTE || (t == RAFT_MSG_PREVOTE_RESP && !m->reject)) {
            /* a pre-vote never changes terms */
        } else if (t == RAFT_MSG_APPEND || t == RAFT_MSG_HEARTBEAT || t == RAFT_MSG_SNAPSHOT ||
                   t == RAFT_MSG_TIMEOUT_NOW) {
            become_follower(r, m->term, m->from);
        } else {
            become_follower(r, m->term, 0);
        }
    } else if (m->term < r->term) {
        r->counters.stale_msgs++;
        if (t == RAFT_MSG_APPEND || t == RAFT_MSG_HEARTBEAT || t == RAFT_MSG_SNAPSHOT) {
            /* tell a deposed leader about the newer term */
            struct raft_msg *resp = new_msg(r, RAFT_MSG_APPEND_RESP, m->from);

            if (resp != NULL) {
                resp->reject = true;
                resp->index = m->index;
            }
        } else if (t == RAFT_MSG_PREVOTE || t == RAFT_MSG_VOTE) {
            struct raft_msg *resp = new_msg(
                r, t == RAFT_MSG_PREVOTE ? RAFT_MSG_PREVOTE_RESP : RAFT_MSG_VOTE_RESP, m->from);

            if (resp != NULL)
                resp->reject = true;
        }
        return RAFT_OK;
    }

    switch (t) {
    case RAFT_MSG_PREVOTE:
    case RAFT_MSG_VOTE:
        handle_vote_request(r, m);
        return RAFT_OK;
    case RAFT_MSG_PREVOTE_RESP:
        if (!m->reject && m->term != r->term + 1)
            return RAFT_OK;
        /* fall through */
    case RAFT_MSG_VOTE_RESP:
        handle_vote_resp(r, m);
        return RAFT_OK;
    case RAFT_MSG_READ_INDEX_RESP:
        if (r->role == RAFT_FOLLOWER)
            handle_read_index_resp(r, m);
        return RAFT_OK;
    case RAFT_MSG_APPEND:
    case RAFT_MSG_HEARTBEAT:
    case RAFT_MSG_SNAPSHOT:
    case RAFT_MSG_TIMEOUT_NOW:
        if (r->role == RAFT_LEADER) {
            r->counters.invalid_msgs++; /* two leaders in one term cannot be */
            return RAFT_EINVAL;
        }
        if (r->role != RAFT_FOLLOWER || r->leader != m->from)
            become_follower(r, r->term, m->from);
        r->leader_heard = r->now;
        reset_election_timer(r);
        if (t == RAFT_MSG_APPEND)
            handle_append(r, m);
        else if (t == RAFT_MSG_HEARTBEAT)
            handle_heartbeat(r, m);
        else if (t == RAFT_MSG_SNAPSHOT)
            handle_snapshot(r, m);
        else
            handle_timeout_now(r, m);
        return RAFT_OK;
    case RAFT_MSG_READ_INDEX:
        handle_read_index(r, m);
        return RAFT_OK;
    default:
        break;
    }
    /* responses to a leader */
    if (r->role != RAFT_LEADER) {
        r->counters.stale_msgs++;
        return RAFT_OK;
    }
    pr = progress_of(r, m->from);
    if (pr == NULL) {
        r->counters.unknown_sender++;
        return RAFT_OK;
    }
    pr->recent_active = true;
    if (t == RAFT_MSG_APPEND_RESP)
        handle_append_resp(r, pr, m);
    else if (t == RAFT_MSG_HEARTBEAT_RESP)
        handle_heartbeat_resp(r, pr, m);
    else if (t == RAFT_MSG_SNAPSHOT_RESP)
        handle_snapshot_resp(r, pr, m);
    return RAFT_OK;
}

/* ------------------------------------------------------------------ other events */

static void tick(struct raft *r)
{
    if (r->role == RAFT_LEADER) {
        if (r->now >= r->heartbeat_deadline) {
            broadcast_heartbeat(r);
            r->heartbeat_deadline = r->now + r->opt.heartbeat_ms;
        }
        if (r->transferee != 0 && r->now >= r->transfer_deadline)
            r->transferee = 0;
        if (!r->opt.disable_check_quorum && r->now >= r->quorum_deadline) {
            uint32_t i, active = 0;

            for (i = 0; i < r->config.n; i++) {
                if (r->config.members[i].role != RAFT_MEMBER_VOTER)
                    continue;
                if (r->config.members[i].id == r->id || r->prs[i].recent_active)
                    active++;
                r->prs[i].recent_active = false;
            }
            r->quorum_deadline = r->now + r->opt.election_timeout_ms;
            if (active < quorum(r))
                become_follower(r, r->term, 0); /* check-quorum: we may be cut off */
        }
        return;
    }
    if (self_voter(r) && r->now >= r->election_deadline)
        campaign(r, !r->opt.disable_prevote, false);
}

static int propose(struct raft *r, const struct raft_event *ev, struct raft_update *u)
{
    const struct raft_proposal *p = ev->propose.entries;
    uint32_t n = ev->propose.n, i;
    uint64_t total = 0, off = 0;
    struct raft_buf *buf;
    raft_index first = raft_log_last(&r->log) + 1;

    if (r->role != RAFT_LEADER)
        return RAFT_ENOTLEADER;
    if (r->transferee != 0) {
        r->counters.dropped_proposals++;
        return RAFT_EBUSY;
    }
    if (n == 0 || p == NULL || n > MAX_MSG_ENTRIES)
        return RAFT_EINVAL;
    for (i = 0; i < n; i++) {
        if (p[i].len > r->opt.max_entry_bytes || (p[i].len > 0 && p[i].data == NULL))
            return RAFT_EINVAL;
        total += p[i].len;
    }
    /* etcd's rule: with nothing uncommitted anything allowed goes, so progress is certain */
    if (r->uncommitted > 0 && total > 0 &&
        (r->uncommitted >= r->opt.max_uncommitted_bytes ||
         total > r->opt.max_uncommitted_bytes - r->uncommitted)) {
        r->counters.dropped_proposals++;
        return RAFT_EBUSY;
    }
    if (raft_log_reserve(&r->log, n) != RAFT_OK)
        return RAFT_ENOMEM;
    buf = raft_buf_new((size_t)total);
    if (buf == NULL)
        return RAFT_ENOMEM;
    for (i = 0; i < n; i++) {
        struct raft_entry *e = &r->log.e[r->log.n++];

        if (p[i].len)
            memcpy(buf->data + off, p[i].data, p[i].len);
        e->term = r->term;
        e->index = first + i;
        e->type = RAFT_ENTRY_NORMAL;
        e->len = p[i].len;
        e->data = p[i].len ? buf->data + off : NULL;
        e->buf = p[i].len ? buf : NULL;
        if (p[i].len)
            raft_buf_ref(buf);
        off += p[i].len;
    }
    raft_buf_unref(buf); /* the creator's reference; the entries hold theirs */
    r->uncommitted += total;
    if (r->emit_from == 0)
        r->emit_from = first;
    r->bcast = true;
    u->proposed_index = first;
    u->proposed_term = r->term;
    return RAFT_OK;
}

static void on_persisted(struct raft *r, raft_index index, raft_term term)
{
    if (r->installing || index <= r->persisted || index > raft_log_last(&r->log) ||
        raft_log_term(&r->log, index) != term)
        return; /* stale report: the entry was replaced since */
    r->persisted = index;
    if (r->role == RAFT_LEADER) {
        if (maybe_commit(r))
            leader_after_commit(r);
    } else if (r->leader != 0 && ack_index(r) > r->acked) {
        respond_append(r, r->leader, ack_index(r));
    }
}

static int snapshot_taken(struct raft *r, const struct raft_event *ev)
{
    raft_index idx = ev->snapshot.index, upto;
    struct raft_config c;
    raft_term t;

    if (idx <= r->snap.index)
        return RAFT_ESTALE;
    if (idx > r->applied || idx <= r->log.base)
        return RAFT_EINVAL;
    t = raft_log_term(&r->log, idx);
    if (config_at(r, idx, &c, NULL) != RAFT_OK)
        return RAFT_EINVAL;
    raft_buf_ref(ev->snapshot.data);
    set_snapshot(r, idx, t, &c, ev->snapshot.data);
    upto = idx > ev->snapshot.trailing ? idx - ev->snapshot.trailing : 0;
    if (upto > r->log.base)
        raft_log_compact(&r->log, upto);
    return RAFT_OK;
}

static int snapshot_installed(struct raft *r, raft_index index, raft_term term)
{
    if (r->installing == 0 || r->installing != index || r->installing_term != term)
        return RAFT_ESTALE;
    r->installing = 0;
    if (r->leader != 0 && r->role != RAFT_LEADER) {
        respond_snapshot(r, r->leader, index, 0, true, false);
        if (index > r->acked)
            r->acked = index;
    }
    return RAFT_OK;
}

static int read_request(struct raft *r, uint64_t id)
{
    struct fwd_read *f;
    struct raft_msg *m;
    size_t i;

    if (r->role == RAFT_LEADER)
        return leader_read(r, id, 0, 0);
    if (r->leader == 0 || r->role != RAFT_FOLLOWER)
        return RAFT_ENOTLEADER;
    for (i = 0; i < r->fwd.n; i++) {
        if (r->fwd.v[i].id == id) { /* a retry replaces the old attempt */
            r->fwd.v[i] = r->fwd.v[--r->fwd.n];
            break;
        }
    }
    if (r->fwd.n >= r->opt.max_pending_reads)
        return RAFT_EBUSY;
    f = VEC_PUSH(r, r->fwd);
    if (f == NULL)
        return RAFT_ENOMEM;
    f->id = id;
    f->token = ++r->next_token;
    m = new_msg(r, RAFT_MSG_READ_INDEX, r->leader);
    if (m != NULL)
        m->ctx = f->token;
    return RAFT_OK;
}

static int transfer(struct raft *r, raft_id target)
{
    struct raft_progress *pr;

    if (r->role != RAFT_LEADER)
        return RAFT_ENOTLEADER;
    if (r->transferee != 0)
        return r->transferee == target ? RAFT_OK : RAFT_EBUSY;
    if (target == 0) {
        uint32_t i;
        raft_index best = 0;

        for (i = 0; i < r->config.n; i++) {
            const struct raft_member *mb = &r->config.members[i];

            if (mb->role == RAFT_MEMBER_VOTER && mb->id != r->id && r->prs[i].ring != NULL &&
                (target == 0 || r->prs[i].match > best)) {
                target = mb->id;
                best = r->prs[i].match;
            }
        }
    }
    if (target == 0 || target == r->id || !is_voter(r, target))
        return RAFT_EINVAL;
    pr = progress_of(r, target);
    if (pr == NULL)
        return RAFT_EINVAL;
    r->transferee = target;
    r->transfer_deadline = r->now + r->opt.election_timeout_ms;
    if (pr->match == raft_log_last(&r->log))
        send_timeout_now(r, target);
    else
        send_append(r, pr, SEND_NORMAL);
    return RAFT_OK;
}

static int change(struct raft *r, const struct raft_event *ev, struct raft_update *u)
{
    struct raft_config c = r->config;
    const struct raft_member *mb = raft_config_find(&c, ev->change.id);
    uint8_t bytes[CONFIG_BYTES_MAX];
    struct raft_buf *buf;
    int len, rc;

    if (r->role != RAFT_LEADER)
        return RAFT_ENOTLEADER;
    if (r->commit < r->term_start)
        return RAFT_ENOTREADY; /* the leader must first commit an entry of its term */
    if (r->transferee != 0 || r->config_index > r->commit)
        return RAFT_EBUSY; /* one change at a time */
    switch (ev->change.type) {
    case RAFT_CHANGE_ADD_LEARNER:
        rc = raft_config_add(&c, ev->change.id, RAFT_MEMBER_LEARNER, ev->change.address);
        break;
    case RAFT_CHANGE_PROMOTE:
        if (mb == NULL || mb->role != RAFT_MEMBER_LEARNER)
            return RAFT_EINVAL;
        c.members[mb - c.members].role = RAFT_MEMBER_VOTER;
        rc = RAFT_OK;
        break;
    case RAFT_CHANGE_REMOVE:
        if (mb == NULL)
            return RAFT_EINVAL;
        rc = raft_config_remove(&c, ev->change.id);
        if (rc == RAFT_OK && raft_config_voters(&c) == 0)
            rc = RAFT_EINVAL;
        break;
    default:
        rc = RAFT_EINVAL;
    }
    if (rc != RAFT_OK)
        return rc;
    len = raft_config_encode(&c, bytes, sizeof(bytes));
    if (len < 0)
        return RAFT_EINVAL;
    buf = raft_buf_copy(bytes, (size_t)len);
    if (buf == NULL)
        return RAFT_ENOMEM;
    rc = append_local(r, RAFT_ENTRY_CONFIG, buf, buf->data, (uint32_t)len);
    raft_buf_unref(buf);
    if (rc != RAFT_OK)
        return rc;
    set_config(r, &c, raft_log_last(&r->log));
    u->proposed_index = raft_log_last(&r->log);
    u->proposed_term = r->term;
    if (maybe_commit(r)) /* e.g. removing an unreachable voter lowers the quorum */
        leader_after_commit(r);
    return RAFT_OK;
}

/* ------------------------------------------------------------------ step and finish */

static uint8_t public_role(const struct raft *r)
{
    if (r->role == RAFT_FOLLOWER) {
        int p = member_pos(r, r->id);

        if (p >= 0 && r->config.members[p].role == RAFT_MEMBER_LEARNER)
            return RAFT_LEARNER;
    }
    return r->role;
}

static void resolve_entries(struct raft *r, struct raft_msg *v, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        struct raft_msg *m = &v[i];
        const struct raft_entry *e;

        if (m->type != RAFT_MSG_APPEND || m->from != r->id || m->n_entries == 0)
            continue;
        e = raft_log_get(&r->log, m->index + 1);
        if (e == NULL || raft_log_last(&r->log) < m->index + m->n_entries)
            m->n_entries = 0; /* the log moved within this step: send without entries */
        m->entries = m->n_entries ? e : NULL;
    }
}

static void finish(struct raft *r, struct raft_update *u)
{
    raft_index limit;
    size_t i;

    if (r->role == RAFT_LEADER && (r->bcast || r->commit_bcast)) {
        for (i = 0; i < r->config.n; i++) {
            struct raft_progress *pr = &r->prs[i];

            if (pr->ring == NULL || pr->id == r->id)
                continue;
            send_append(r, pr, r->commit_bcast ? SEND_COMMIT : SEND_NORMAL);
        }
    }
    resolve_entries(r, r->msgs.v, r->msgs.n);

    u->hs_changed = r->hs_dirty || r->term != r->step_term || r->vote != r->step_vote;
    u->term = r->term;
    u->vote = r->vote;
    if (r->emit_from != 0 && r->emit_from <= raft_log_last(&r->log)) {
        u->entries = raft_log_get(&r->log, r->emit_from);
        u->n_entries = (size_t)(raft_log_last(&r->log) - r->emit_from + 1);
    }
    if (r->out_snapshot)
        u->snapshot = &r->snap;
    if (u->hs_changed) {
        for (i = 0; i < r->msgs.n; i++) {
            struct raft_msg *slot = VEC_PUSH(r, r->after);

            if (slot != NULL)
                *slot = r->msgs.v[i];
        }
        r->msgs.n = 0;
    }
    u->msgs = r->msgs.v;
    u->n_msgs = r->msgs.n;
    u->msgs_after_persist = r->after.v;
    u->n_msgs_after_persist = r->after.n;
    limit = r->commit < r->persisted ? r->commit : r->persisted;
    if (!r->installing && limit > r->applied) {
        u->committed = raft_log_get(&r->log, r->applied + 1);
        u->n_committed = (size_t)(limit - r->applied);
        r->applied = limit;
    }
    u->reads = r->rstates.v;
    u->n_reads = r->rstates.n;
    if (r->role == RAFT_LEADER) {
        u->next_deadline = r->heartbeat_deadline;
        if (!r->opt.disable_check_quorum && r->quorum_deadline < u->next_deadline)
            u->next_deadline = r->quorum_deadline;
        if (r->transferee != 0 && r->transfer_deadline < u->next_deadline)
            u->next_deadline = r->transfer_deadline;
    } else if (self_voter(r)) {
        u->next_deadline = r->election_deadline;
    } else {
        u->next_deadline = RAFT_NO_DEADLINE;
    }
    u->role = public_role(r);
    u->leader = r->leader;
    u->soft_changed = u->role != r->step_role || r->leader != r->step_leader ||
                      r->term != r->step_term || r->commit != r->step_commit;
    r->hs_dirty = false;
}

int raft_step(struct raft *r, const struct raft_event *ev, struct raft_update *u)
{
    size_t i;
    int rc = RAFT_OK;

    memset(u, 0, sizeof(*u));
    for (i = 0; i < r->graveyard.n; i++)
        raft_buf_unref(r->graveyard.v[i]);
    r->graveyard.n = 0;
    r->msgs.n = 0;
    r->after.n = 0;
    r->rstates.n = 0;
    r->emit_from = r->hs_dirty ? r->emit_from : 0;
    r->bcast = false;
    r->commit_bcast = false;
    r->out_snapshot = false;
    r->step_term = r->term;
    r->step_vote = r->vote;
    r->step_role = public_role(r);
    r->step_leader = r->leader;
    r->step_commit = r->commit;
    if (ev == NULL) {
        finish(r, u);
        return RAFT_EINVAL;
    }
    if (ev->now > r->now)
        r->now = ev->now;

    switch (ev->type) {
    case RAFT_EV_TICK:
        tick(r);
        break;
    case RAFT_EV_RECEIVE:
        rc = receive(r, ev->msg);
        break;
    case RAFT_EV_PROPOSE:
        rc = propose(r, ev, u);
        break;
    case RAFT_EV_PERSISTED:
        on_persisted(r, ev->persisted.index, ev->persisted.term);
        break;
    case RAFT_EV_SNAPSHOT_TAKEN:
        rc = snapshot_taken(r, ev);
        break;
    case RAFT_EV_SNAPSHOT_INSTALLED:
        rc = snapshot_installed(r, ev->persisted.index, ev->persisted.term);
        break;
    case RAFT_EV_READ:
        rc = read_request(r, ev->read_id);
        break;
    case RAFT_EV_TRANSFER:
        rc = transfer(r, ev->target);
        break;
    case RAFT_EV_CHANGE:
        rc = change(r, ev, u);
        break;
    default:
        rc = RAFT_EINVAL;
    }
    /* A leader whose log grew or whose commit moved tells the others in finish(). */
    if (r->role == RAFT_LEADER && r->commit > r->step_commit)
        r->commit_bcast = true;
    finish(r, u);
    return rc;
}

/* ------------------------------------------------------------------ lifecycle, queries */

static void apply_defaults(struct raft_options *o)
{
    if (o->election_timeout_ms == 0)
        o->election_timeout_ms = 1000;
    if (o->heartbeat_ms == 0)
        o->heartbeat_ms = 100;
    if (o->max_inflight_msgs == 0)
        o->max_inflight_msgs = 256;
    if (o->max_inflight_bytes == 0)
        o->max_inflight_bytes = 16u << 20;
    if (o->max_msg_bytes == 0)
        o->max_msg_bytes = 1u << 20;
    if (o->max_entry_bytes == 0)
        o->max_entry_bytes = 1u << 20;
    if (o->snapshot_chunk_bytes == 0)
        o->snapshot_chunk_bytes = 1u << 20;
    if (o->max_snapshot_bytes == 0)
        o->max_snapshot_bytes = 1ull << 30;
    if (o->max_pending_reads == 0)
        o->max_pending_reads = 4096;
    if (o->max_uncommitted_bytes == 0)
        o->max_uncommitted_bytes = 64ull << 20;
}

static int load(struct raft *r, const struct raft_start *st)
{
    raft_index base = 0;
    raft_term base_term = 0, prev;
    struct raft_config c;
    raft_index at;
    size_t i;

    if (st->snapshot != NULL && st->snapshot->index > 0) {
        const struct raft_snapshot *s = st->snapshot;

        if (s->term == 0 || raft_config_voters(&s->config) == 0)
            return RAFT_EINVAL;
        base = s->index;
        base_term = s->term;
        raft_buf_ref(s->data);
        set_snapshot(r, s->index, s->term, &s->config, s->data);
        r->graveyard.n = 0; /* nothing to release: the old snapshot was empty */
    }
    raft_log_reset(&r->log, base, base_term);
    prev = base_term;
    for (i = 0; i < st->n_entries; i++) {
        const struct raft_entry *e = &st->entries[i];

        if (e->index != base + 1 + i || e->term == 0 || e->term < prev ||
            e->type < RAFT_ENTRY_NORMAL || e->type > RAFT_ENTRY_CONFIG ||
            (e->len > 0 && e->data == NULL))
            return RAFT_EINVAL;
        prev = e->term;
    }
    if (raft_log_append(&r->log, st->entries, st->n_entries) != RAFT_OK)
        return RAFT_ENOMEM;
    if (st->vote != 0 && st->term == 0)
        return RAFT_EINVAL;
    r->term = st->term;
    r->vote = st->vote;
    if (raft_log_last_term(&r->log) > r->term) {
        /* entries of a term whose hard state never reached the disk: adopt the term,
         * without a vote */
        r->term = raft_log_last_term(&r->log);
        r->vote = 0;
        r->hs_dirty = true;
    }
    r->commit = r->applied = base;
    r->persisted = raft_log_last(&r->log);
    if (config_at(r, raft_log_last(&r->log), &c, &at) != RAFT_OK)
        return RAFT_EINVAL;
    set_config(r, &c, at);

    if (st->bootstrap != NULL && r->term == 0 && base == 0 && st->n_entries == 0) {
        uint8_t bytes[CONFIG_BYTES_MAX];
        struct raft_buf *buf;
        int len, rc;

        len = raft_config_encode(st->bootstrap, bytes, sizeof(bytes));
        if (len < 0 || raft_config_decode(bytes, (size_t)len, &c) != RAFT_OK)
            return RAFT_EINVAL;
        buf = raft_buf_copy(bytes, (size_t)len);
        if (buf == NULL)
            return RAFT_ENOMEM;
        r->term = 1;
        rc = append_local(r, RAFT_ENTRY_CONFIG, buf, buf->data, (uint32_t)len);
        raft_buf_unref(buf);
        if (rc != RAFT_OK)
            return rc;
        r->hs_dirty = true;
        set_config(r, &c, 1);
    }
    return RAFT_OK;
}

int raft_new(const struct raft_options *opt, const struct raft_start *st, uint64_t now,
             struct raft **out)
{
    struct raft *r;
    static const struct raft_start empty;
    int rc;

    *out = NULL;
    if (opt == NULL || opt->id == 0)
        return RAFT_EINVAL;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return RAFT_ENOMEM;
    r->opt = *opt;
    apply_defaults(&r->opt);
    r->id = opt->id;
    r->rng = opt->seed ^ ((uint64_t)opt->id * 0x2545f4914f6cdd1dULL);
    r->now = now;
    r->role = RAFT_FOLLOWER;
    raft_log_init(&r->log);
    rc = load(r, st != NULL ? st : &empty);
    if (rc != RAFT_OK) {
        raft_free(r);
        return rc;
    }
    reset_election_timer(r);
    /* A sole voter need not wait for anyone: it campaigns at its first tick. */
    if (self_voter(r) && raft_config_voters(&r->config) == 1)
        r->election_deadline = now;
    r->step_term = r->term;
    *out = r;
    return RAFT_OK;
}

void raft_free(struct raft *r)
{
    uint32_t i;

    if (r == NULL)
        return;
    for (i = 0; i < r->graveyard.n; i++)
        raft_buf_unref(r->graveyard.v[i]);
    for (i = 0; i < r->config.n; i++)
        raft_progress_free(&r->prs[i]);
    raft_buf_unref(r->snap.data);
    raft_buf_unref(r->rx.buf);
    raft_log_free(&r->log);
    free(r->msgs.v);
    free(r->after.v);
    free(r->rstates.v);
    free(r->graveyard.v);
    free(r->reads.v);
    free(r->fwd.v);
    free(r);
}

void raft_get_status(const struct raft *r, struct raft_status *st)
{
    uint32_t i;

    memset(st, 0, sizeof(*st));
    st->id = r->id;
    st->role = public_role(r);
    st->term = r->term;
    st->vote = r->vote;
    st->leader = r->leader;
    st->commit = r->commit;
    st->applied = r->applied;
    st->persisted = r->persisted;
    st->first_index = r->log.base + 1;
    st->last_index = raft_log_last(&r->log);
    st->last_term = raft_log_last_term(&r->log);
    st->snapshot_index = r->snap.index;
    st->snapshot_term = r->snap.term;
    st->config_index = r->config_index;
    st->transferee = r->role == RAFT_LEADER ? r->transferee : 0;
    st->uncommitted_bytes = r->role == RAFT_LEADER ? r->uncommitted : 0;
    st->snapshot_rx_bytes = r->rx.buf ? r->rx.buf->len : 0;
    st->n_members = r->config.n;
    for (i = 0; i < r->config.n; i++) {
        struct raft_member_status *ms = &st->members[i];

        ms->id = r->config.members[i].id;
        ms->role = r->config.members[i].role;
        if (r->role == RAFT_LEADER) {
            ms->match = ms->id == r->id ? r->persisted : r->prs[i].match;
            ms->next = ms->id == r->id ? raft_log_last(&r->log) + 1 : r->prs[i].next;
            ms->progress = ms->id == r->id ? RAFT_PR_REPLICATE : r->prs[i].state;
        }
    }
    st->counters = r->counters;
}

const struct raft_config *raft_get_config(const struct raft *r)
{
    return &r->config;
}

int raft_snapshot_meta(const struct raft *r, raft_index index, raft_term *term,
                       struct raft_config *config)
{
    if (index < r->snap.index || index > r->applied || index < r->log.base)
        return RAFT_EINVAL;
    *term = raft_log_term(&r->log, index);
    if (*term == 0)
        return RAFT_EINVAL;
    return config_at(r, index, config, NULL);
}

const struct raft_entry *raft_get_entry(const struct raft *r, raft_index index)
{
    return raft_log_get(&r->log, index);
}

raft_term raft_get_term(const struct raft *r, raft_index index)
{
    return raft_log_term(&r->log, index);
}
