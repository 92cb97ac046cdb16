/*
 * sim.c - the deterministic simulated cluster; see sim.h for what it models and checks.
 *
 * Event order. Everything that happens at a virtual time is an event in one binary heap
 * ordered by (time, sequence number), so two runs with one seed interleave identically.
 * Events: a message arriving, the head write of a node's disk completing, a node's tick
 * deadline, and (random runs) the chaos clock. A node's update is handled exactly as the
 * shell contract in raft.h says: writes are queued on its disk, immediate messages go to
 * the network, messages that need the write travel with it and leave when it completes.
 *
 * Memory. Messages in flight are deep copies holding references on the raft_bufs of their
 * entries and snapshot chunk; the disk keeps its own references; nothing here points into a
 * core after the step that produced it.
 */
#include "sim.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define SNAP_PAD 1500 /* snapshot data bytes beyond the header, so chunks are exercised */

enum ev_type { EV_DELIVER = 1, EV_DISK, EV_TICK, EV_CHAOS };

struct sim_msg {
    struct sim_msg *next; /* mailbox order (manual mode) */
    struct raft_msg m;
    struct raft_entry *ents;
    uint8_t *cfg;
};

struct event {
    uint64_t at;
    uint64_t seq;
    int type;
    raft_id node;
    uint64_t epoch;
    struct sim_msg *msg;
};

struct write {
    struct write *next;
    uint64_t done_at;
    bool hs;
    raft_term term;
    raft_id vote;
    bool has_snap;
    struct raft_snapshot snap;
    struct raft_entry *ents;
    size_t n;
    struct sim_msg **msgs;
    size_t n_msgs;
};

struct gentry { /* what the cluster knows about one index */
    raft_term committed_term;
    uint64_t committed_hash;
    bool committed;
    bool applied;
    raft_term applied_term;
    uint64_t applied_hash;
    uint64_t chain; /* state machine hash after applying this index */
    bool has_chain;
};

struct lm_slot { /* log matching table: (index, term) -> (data hash, previous term) */
    raft_index index;
    raft_term term;
    uint64_t hash;
    raft_term prev_term;
};

struct node {
    raft_id id;
    bool up;
    struct raft *r;
    uint64_t epoch;
    /* durable */
    raft_term d_term;
    raft_id d_vote;
    struct raft_snapshot d_snap;
    struct raft_entry *d_log;
    size_t d_n, d_cap;
    /* disk */
    struct write *wq, *wq_tail;
    uint64_t disk_free_at;
    bool disk_manual;
    uint32_t disk_delay_max;
    /* state machine */
    raft_index sm_index;
    uint64_t sm_hash;
    /* observed soft state */
    uint8_t role;
    raft_term term;
    raft_id leader;
    raft_index commit;
    raft_index checked_commit;
    uint64_t deadline; /* in the node's own clock */
    uint64_t offset;   /* the node's clock runs this far ahead of virtual time */
    bool paused;
    /* reads */
    bool has_read;
    /* linearizability: for recent reads, the highest index committed anywhere when the
     * read began (a ring keyed by read id) */
    uint64_t floor_id[32];
    raft_index floor_index[32];
    uint32_t floor_next;
    uint64_t read_id;
    raft_index read_index;
    int read_rc;
};

struct sim {
    struct sim_config cfg;
    uint32_t n;
    uint64_t now;
    uint64_t rng;
    uint64_t seq;
    struct node nodes[SIM_MAX_NODES + 1];
    bool link[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
    struct event *heap;
    size_t heap_n, heap_cap;
    struct sim_msg *mbox, *mbox_tail; /* manual mode */
    bool random_net;
    bool quiet_msgs;
    /* network faults (random mode) */
    uint32_t drop_pct, dup_pct, delay_min, delay_max;
    /* invariants */
    char failure[512];
    bool failed;
    raft_id *leader_of_term;
    size_t n_terms;
    struct gentry *g;
    size_t g_cap;
    raft_index max_committed;
    struct lm_slot *lm;
    size_t lm_cap, lm_n;
    uint64_t early_sends;
    uint64_t steps;
    uint64_t elections;
    uint64_t installs;
    uint64_t crashes;
    uint64_t changes;
    uint64_t reads_ok;
    uint64_t busy;
};

/* ------------------------------------------------------------------ utilities */

static uint64_t rnd(struct sim *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rnd_range(struct sim *s, uint64_t lo, uint64_t hi) /* [lo, hi] */
{
    return lo + (hi > lo ? rnd(s) % (hi - lo + 1) : 0);
}

static bool chance(struct sim *s, uint32_t pct)
{
    return pct > 0 && rnd(s) % 100 < pct;
}

static uint64_t fnv(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 1469598103934665603ULL;
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t entry_hash(const struct raft_entry *e)
{
    return fnv(e->data, e->len) ^ ((uint64_t)e->type << 56);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);

    if (q == NULL) {
        fprintf(stderr, "sim: out of memory\n");
        abort();
    }
    return q;
}

__attribute__((format(printf, 2, 3))) static void trace(struct sim *s, const char *fmt, ...)
{
    va_list ap;

    if (s->cfg.trace == NULL)
        return;
    va_start(ap, fmt);
    vfprintf(s->cfg.trace, fmt, ap);
    va_end(ap);
    fputc('\n', s->cfg.trace);
}

__attribute__((format(printf, 2, 3))) static void fail(struct sim *s, const char *fmt, ...)
{
    va_list ap;
    int len;

    if (s->failed)
        return;
    s->failed = true;
    len = snprintf(s->failure, sizeof(s->failure), "t=%llu: ", (unsigned long long)s->now);
    va_start(ap, fmt);
    vsnprintf(s->failure + len, sizeof(s->failure) - (size_t)len, fmt, ap);
    va_end(ap);
    trace(s, "INVARIANT VIOLATED: %s", s->failure);
}

static struct gentry *gat(struct sim *s, raft_index i)
{
    if (i >= s->g_cap) {
        size_t ncap = s->g_cap ? s->g_cap : 1024;

        while (ncap <= i)
            ncap *= 2;
        s->g = xrealloc(s->g, ncap * sizeof(*s->g));
        memset(s->g + s->g_cap, 0, (ncap - s->g_cap) * sizeof(*s->g));
        s->g_cap = ncap;
    }
    return &s->g[i];
}

/* ------------------------------------------------------------------ messages */

static void fmt_msg(const struct raft_msg *m, char *buf, size_t len)
{
    int o = snprintf(buf, len, "%u->%u %s t=%llu", m->from, m->to, raft_msg_type_name(m->type),
                     (unsigned long long)m->term);
    size_t left;

#define ADD(...)                                                                                   \
    do {                                                                                           \
        left = len > (size_t)o ? len - (size_t)o : 0;                                              \
        if (left > 0)                                                                              \
            o += snprintf(buf + o, left, __VA_ARGS__);                                             \
    } while (0)
    switch (m->type) {
    case RAFT_MSG_APPEND:
        ADD(" prev=%llu/%llu commit=%llu", (unsigned long long)m->index,
            (unsigned long long)m->log_term, (unsigned long long)m->commit);
        if (m->n_entries > 0 && m->n_entries <= 4) {
            uint32_t i;

            ADD(" entries=[");
            for (i = 0; i < m->n_entries; i++) {
                const struct raft_entry *e = &m->entries[i];
                const char *ty = e->type == RAFT_ENTRY_NOOP     ? "noop"
                                 : e->type == RAFT_ENTRY_CONFIG ? "conf"
                                                                : "";
                ADD("%s%llu/%llu%s%s", i ? " " : "", (unsigned long long)e->index,
                    (unsigned long long)e->term, *ty ? ":" : "", ty);
            }
            ADD("]");
        } else if (m->n_entries > 4) {
            ADD(" entries=[%llu..%llu]", (unsigned long long)m->entries[0].index,
                (unsigned long long)m->entries[m->n_entries - 1].index);
        }
        break;
    case RAFT_MSG_APPEND_RESP:
        if (m->reject)
            ADD(" reject index=%llu hint=%llu/%llu", (unsigned long long)m->index,
                (unsigned long long)m->hint_index, (unsigned long long)m->hint_term);
        else
            ADD(" ok index=%llu", (unsigned long long)m->index);
        break;
    case RAFT_MSG_PREVOTE:
    case RAFT_MSG_VOTE:
        ADD(" last=%llu/%llu%s", (unsigned long long)m->index, (unsigned long long)m->log_term,
            m->transfer ? " transfer" : "");
        break;
    case RAFT_MSG_PREVOTE_RESP:
    case RAFT_MSG_VOTE_RESP:
        ADD(" %s", m->reject ? "rejected" : "granted");
        break;
    case RAFT_MSG_HEARTBEAT:
        ADD(" commit=%llu ctx=%llu", (unsigned long long)m->commit, (unsigned long long)m->ctx);
        break;
    case RAFT_MSG_HEARTBEAT_RESP:
        ADD(" ctx=%llu", (unsigned long long)m->ctx);
        break;
    case RAFT_MSG_SNAPSHOT:
        ADD(" snap=%llu/%llu off=%llu len=%u total=%llu%s", (unsigned long long)m->snap.index,
            (unsigned long long)m->snap.term, (unsigned long long)m->snap.offset, m->snap.len,
            (unsigned long long)m->snap.total, m->snap.done ? " done" : "");
        break;
    case RAFT_MSG_SNAPSHOT_RESP:
        ADD(" index=%llu off=%llu%s%s", (unsigned long long)m->index,
            (unsigned long long)m->snap.offset, m->snap.done ? " done" : "",
            m->reject ? " reject" : "");
        break;
    case RAFT_MSG_READ_INDEX:
        ADD(" ctx=%llu", (unsigned long long)m->ctx);
        break;
    case RAFT_MSG_READ_INDEX_RESP:
        ADD(" ctx=%llu index=%llu%s", (unsigned long long)m->ctx, (unsigned long long)m->index,
            m->reject ? " reject" : "");
        break;
    default:
        break;
    }
#undef ADD
}

static struct sim_msg *msg_copy(const struct raft_msg *m)
{
    struct sim_msg *c = calloc(1, sizeof(*c));
    uint32_t i;

    if (c == NULL)
        abort();
    c->m = *m;
    if (m->n_entries > 0) {
        c->ents = xrealloc(NULL, m->n_entries * sizeof(*c->ents));
        memcpy(c->ents, m->entries, m->n_entries * sizeof(*c->ents));
        for (i = 0; i < m->n_entries; i++)
            raft_buf_ref(c->ents[i].buf);
        c->m.entries = c->ents;
    }
    if (m->snap.config_len > 0) {
        c->cfg = xrealloc(NULL, m->snap.config_len);
        memcpy(c->cfg, m->snap.config, m->snap.config_len);
        c->m.snap.config = c->cfg;
    }
    raft_buf_ref(m->snap.buf);
    return c;
}

static void msg_free(struct sim_msg *c)
{
    uint32_t i;

    if (c == NULL)
        return;
    for (i = 0; i < c->m.n_entries; i++)
        raft_buf_unref(c->ents[i].buf);
    raft_buf_unref(c->m.snap.buf);
    free(c->ents);
    free(c->cfg);
    free(c);
}

/* ------------------------------------------------------------------ event heap */

static bool ev_less(const struct event *a, const struct event *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(struct sim *s, struct event ev)
{
    size_t i;

    if (s->heap_n == s->heap_cap) {
        s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 256;
        s->heap = xrealloc(s->heap, s->heap_cap * sizeof(*s->heap));
    }
    ev.seq = s->seq++;
    i = s->heap_n++;
    while (i > 0 && ev_less(&ev, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = ev;
}

static struct event heap_pop(struct sim *s)
{
    struct event top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0;

    for (;;) {
        size_t c = 2 * i + 1;

        if (c >= s->heap_n)
            break;
        if (c + 1 < s->heap_n && ev_less(&s->heap[c + 1], &s->heap[c]))
            c++;
        if (!ev_less(&s->heap[c], &last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_n > 0)
        s->heap[i] = last;
    return top;
}

/* ------------------------------------------------------------------ invariants */

static void check_log_matching(struct sim *s, struct node *nd, const struct raft_entry *e, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        raft_term prev_term = i > 0 ? e[i - 1].term : raft_get_term(nd->r, e[i].index - 1);
        uint64_t h = entry_hash(&e[i]);
        size_t k;

        if (s->lm_n * 2 >= s->lm_cap) {
            struct lm_slot *old = s->lm;
            size_t oldcap = s->lm_cap, j;

            s->lm_cap = s->lm_cap ? s->lm_cap * 2 : 4096;
            s->lm = calloc(s->lm_cap, sizeof(*s->lm));
            if (s->lm == NULL)
                abort();
            for (j = 0; j < oldcap; j++) {
                if (old[j].index == 0)
                    continue;
                k = (old[j].index * 31 + old[j].term) % s->lm_cap;
                while (s->lm[k].index != 0)
                    k = (k + 1) % s->lm_cap;
                s->lm[k] = old[j];
            }
            free(old);
        }
        k = (e[i].index * 31 + e[i].term) % s->lm_cap;
        while (s->lm[k].index != 0 && (s->lm[k].index != e[i].index || s->lm[k].term != e[i].term))
            k = (k + 1) % s->lm_cap;
        if (s->lm[k].index == 0) {
            s->lm[k] = (struct lm_slot){e[i].index, e[i].term, h, prev_term};
            s->lm_n++;
        } else if (s->lm[k].hash != h ||
                   (prev_term != 0 && s->lm[k].prev_term != 0 && s->lm[k].prev_term != prev_term)) {
            fail(s, "log matching: n%u entry %llu/%llu differs from another log's", nd->id,
                 (unsigned long long)e[i].index, (unsigned long long)e[i].term);
        }
    }
}

static void check_leader_complete(struct sim *s, struct node *nd)
{
    struct raft_status st;
    raft_index i;

    raft_get_status(nd->r, &st);
    for (i = st.first_index; i <= s->max_committed; i++) {
        struct gentry *g = gat(s, i);

        if (!g->committed)
            continue;
        if (raft_get_term(nd->r, i) != g->committed_term) {
            fail(s, "leader completeness: n%u leads term %llu without committed %llu/%llu", nd->id,
                 (unsigned long long)st.term, (unsigned long long)i,
                 (unsigned long long)g->committed_term);
            return;
        }
    }
}

static void check_commits(struct sim *s, struct node *nd)
{
    struct raft_status st;
    raft_index i;

    raft_get_status(nd->r, &st);
    if (st.commit <= nd->checked_commit)
        return;
    for (i = nd->checked_commit + 1; i <= st.commit; i++) {
        const struct raft_entry *e = raft_get_entry(nd->r, i);
        struct gentry *g;

        if (e == NULL)
            continue; /* inside the snapshot */
        g = gat(s, i);
        if (!g->committed) {
            g->committed = true;
            g->committed_term = e->term;
            g->committed_hash = entry_hash(e);
            if (i > s->max_committed)
                s->max_committed = i;
        } else if (g->committed_term != e->term || g->committed_hash != entry_hash(e)) {
            fail(s, "committed entry changed: n%u has %llu/%llu, committed was %llu/%llu", nd->id,
                 (unsigned long long)i, (unsigned long long)e->term, (unsigned long long)i,
                 (unsigned long long)g->committed_term);
        }
    }
    nd->checked_commit = st.commit;
}

static void apply_entries(struct sim *s, struct node *nd, const struct raft_entry *e, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        struct gentry *g = gat(s, e[i].index);
        uint64_t h = entry_hash(&e[i]);

        if (e[i].index != nd->sm_index + 1) {
            fail(s, "n%u applies %llu after %llu", nd->id, (unsigned long long)e[i].index,
                 (unsigned long long)nd->sm_index);
            return;
        }
        nd->sm_hash = nd->sm_hash * 1099511628211ULL ^ h ^ e[i].term;
        nd->sm_index = e[i].index;
        if (!g->applied) {
            if (e[i].type == RAFT_ENTRY_CONFIG && e[i].index > 1)
                s->changes++;
            g->applied = true;
            g->applied_term = e[i].term;
            g->applied_hash = h;
        } else if (g->applied_term != e[i].term || g->applied_hash != h) {
            fail(s, "state machine safety: n%u applies %llu/%llu, another node applied %llu/%llu",
                 nd->id, (unsigned long long)e[i].index, (unsigned long long)e[i].term,
                 (unsigned long long)e[i].index, (unsigned long long)g->applied_term);
        }
        if (!g->has_chain) {
            g->has_chain = true;
            g->chain = nd->sm_hash;
        } else if (g->chain != nd->sm_hash) {
            fail(s, "state machine diverged on n%u at %llu", nd->id,
                 (unsigned long long)e[i].index);
        }
    }
}

/* Snapshot data: [index u64][hash u64][padding]. */
static struct raft_buf *sm_snapshot(struct node *nd)
{
    struct raft_buf *b = raft_buf_new(16 + SNAP_PAD);

    if (b == NULL)
        abort();
    memcpy(b->data, &nd->sm_index, 8);
    memcpy(b->data + 8, &nd->sm_hash, 8);
    memset(b->data + 16, (int)(nd->sm_index & 0xff), SNAP_PAD);
    return b;
}

static void sm_restore(struct sim *s, struct node *nd, const struct raft_snapshot *snap)
{
    raft_index idx;
    uint64_t h;

    if (snap == NULL || snap->index == 0) {
        nd->sm_index = 0;
        nd->sm_hash = 0;
        return;
    }
    if (snap->data == NULL || snap->data->len < 16) {
        fail(s, "n%u: snapshot without state", nd->id);
        return;
    }
    memcpy(&idx, snap->data->data, 8);
    memcpy(&h, snap->data->data + 8, 8);
    if (idx != snap->index) {
        fail(s, "n%u: snapshot %llu holds state of %llu", nd->id, (unsigned long long)snap->index,
             (unsigned long long)idx);
        return;
    }
    if (gat(s, idx)->has_chain && gat(s, idx)->chain != h)
        fail(s, "n%u: snapshot %llu differs from the applied state", nd->id,
             (unsigned long long)idx);
    nd->sm_index = idx;
    nd->sm_hash = h;
}

/* ------------------------------------------------------------------ the shell */

static void handle_update(struct sim *s, struct node *nd, const struct raft_update *u);
static void run_until(struct sim *s, uint64_t t);
static void step(struct sim *s, struct node *nd, const struct raft_event *ev, int *rc_out);

static bool durable_has(const struct node *nd, raft_index i, raft_term t)
{
    size_t k;

    if (i <= nd->d_snap.index)
        return true;
    for (k = nd->d_n; k > 0; k--)
        if (nd->d_log[k - 1].index == i)
            return nd->d_log[k - 1].term == t;
    return false;
}

/* The durability contract, checked on every message as it leaves its node. */
static void check_send(struct sim *s, const struct raft_msg *m)
{
    const struct node *nd = &s->nodes[m->from];

    if (m->type == RAFT_MSG_VOTE && (nd->d_term != m->term || nd->d_vote != m->from)) {
        s->early_sends++;
        fail(s, "n%u: vote request for term %llu sent before term and vote were durable", m->from,
             (unsigned long long)m->term);
    }
    if (m->type == RAFT_MSG_VOTE_RESP && !m->reject &&
        (nd->d_term != m->term || nd->d_vote != m->to)) {
        s->early_sends++;
        fail(s, "n%u: vote for n%u in term %llu sent before it was durable", m->from, m->to,
             (unsigned long long)m->term);
    }
    if (m->type == RAFT_MSG_APPEND_RESP && !m->reject && m->index > 0 && nd->up &&
        !durable_has(nd, m->index, raft_get_term(nd->r, m->index))) {
        s->early_sends++;
        fail(s, "n%u: acknowledged %llu before it was durable", m->from,
             (unsigned long long)m->index);
    }
}

static void net_send(struct sim *s, const struct raft_msg *m)
{
    struct sim_msg *c;
    int copies = 1, i;

    if (m->from >= 1 && m->from <= s->n)
        check_send(s, m);

    if (m->to == 0 || m->to > s->n)
        return;
    if (!s->random_net) {
        c = msg_copy(m);
        if (s->mbox_tail)
            s->mbox_tail->next = c;
        else
            s->mbox = c;
        s->mbox_tail = c;
        return;
    }
    if (!s->link[m->from][m->to] || chance(s, s->drop_pct))
        return;
    if (chance(s, s->dup_pct))
        copies = 2;
    for (i = 0; i < copies; i++) {
        struct event ev = {.type = EV_DELIVER, .node = m->to};

        ev.at = s->now + rnd_range(s, s->delay_min, s->delay_max);
        ev.msg = msg_copy(m);
        heap_push(s, ev);
    }
}

static void write_free(struct write *w)
{
    size_t i;

    for (i = 0; i < w->n; i++)
        raft_buf_unref(w->ents[i].buf);
    raft_buf_unref(w->snap.data);
    for (i = 0; i < w->n_msgs; i++)
        msg_free(w->msgs[i]);
    free(w->ents);
    free(w->msgs);
    free(w);
}

static void schedule_disk(struct sim *s, struct node *nd)
{
    struct event ev = {.type = EV_DISK, .node = nd->id, .epoch = nd->epoch};

    if (nd->wq == NULL || nd->disk_manual)
        return;
    ev.at = nd->wq->done_at;
    heap_push(s, ev);
}

static void durable_truncate(struct node *nd, raft_index from)
{
    while (nd->d_n > 0 && nd->d_log[nd->d_n - 1].index >= from)
        raft_buf_unref(nd->d_log[--nd->d_n].buf);
}

/* The head write of nd's disk is done: make it durable, report it, release its messages. */
static void complete_write(struct sim *s, struct node *nd)
{
    struct write *w = nd->wq;
    struct raft_event ev = {.now = s->now};
    size_t i;

    nd->wq = w->next;
    if (nd->wq == NULL)
        nd->wq_tail = NULL;
    if (nd->disk_manual)
        trace(s, "n%u: write done%s%s", nd->id, w->hs ? " (hard state)" : "",
              w->n ? " (entries)" : "");
    if (w->hs) {
        nd->d_term = w->term;
        nd->d_vote = w->vote;
    }
    if (w->has_snap) {
        raft_buf_unref(nd->d_snap.data);
        nd->d_snap = w->snap;
        w->snap.data = NULL;
        durable_truncate(nd, 0);
    }
    if (w->n > 0) {
        raft_index first = w->ents[0].index;
        raft_index base = nd->d_snap.index;
        raft_index dlast = nd->d_n ? nd->d_log[nd->d_n - 1].index : base;

        if (first > dlast + 1)
            fail(s, "n%u: write of %llu leaves a gap after %llu", nd->id, (unsigned long long)first,
                 (unsigned long long)dlast);
        durable_truncate(nd, first);
        if (nd->d_n + w->n > nd->d_cap) {
            nd->d_cap = (nd->d_n + w->n) * 2;
            nd->d_log = xrealloc(nd->d_log, nd->d_cap * sizeof(*nd->d_log));
        }
        for (i = 0; i < w->n; i++) {
            if (w->ents[i].index <= base)
                continue;
            raft_buf_ref(w->ents[i].buf);
            nd->d_log[nd->d_n++] = w->ents[i];
        }
    }
    if (w->has_snap && nd->up) {
        ev.type = RAFT_EV_SNAPSHOT_INSTALLED;
        ev.persisted.index = nd->d_snap.index;
        ev.persisted.term = nd->d_snap.term;
        step(s, nd, &ev, NULL);
    }
    if (w->n > 0 && nd->up) {
        ev.type = RAFT_EV_PERSISTED;
        ev.persisted.index = w->ents[w->n - 1].index;
        ev.persisted.term = w->ents[w->n - 1].term;
        step(s, nd, &ev, NULL);
    }
    for (i = 0; i < w->n_msgs; i++)
        net_send(s, &w->msgs[i]->m);
    write_free(w);
    schedule_disk(s, nd);
}

static void handle_update(struct sim *s, struct node *nd, const struct raft_update *u)
{
    size_t i, k;

    /* invariants over what the step did */
    if (u->role == RAFT_LEADER && nd->role != RAFT_LEADER) {
        struct raft_status st;

        raft_get_status(nd->r, &st);
        if (st.term >= s->n_terms) {
            size_t nt = (st.term + 1) * 2;

            s->leader_of_term = xrealloc(s->leader_of_term, nt * sizeof(raft_id));
            memset(s->leader_of_term + s->n_terms, 0, (nt - s->n_terms) * sizeof(raft_id));
            s->n_terms = nt;
        }
        if (s->leader_of_term[st.term] != 0 && s->leader_of_term[st.term] != nd->id)
            fail(s, "two leaders in term %llu: n%u and n%u", (unsigned long long)st.term,
                 s->leader_of_term[st.term], nd->id);
        s->leader_of_term[st.term] = nd->id;
        s->elections++;
        check_leader_complete(s, nd);
    }
    if (u->soft_changed) {
        struct raft_status st;

        raft_get_status(nd->r, &st);
        if (u->role != nd->role || st.term != nd->term || u->leader != nd->leader)
            trace(s, "n%u: %s term=%llu leader=%u", nd->id, raft_role_name(u->role),
                  (unsigned long long)st.term, u->leader);
        if (st.commit != nd->commit)
            trace(s, "n%u: commit=%llu", nd->id, (unsigned long long)st.commit);
        nd->role = u->role;
        nd->term = st.term;
        nd->leader = u->leader;
        nd->commit = st.commit;
    }
    check_log_matching(s, nd, u->entries, u->n_entries);
    check_commits(s, nd);

    /* 1. writes */
    if (u->hs_changed || u->n_entries > 0 || u->snapshot != NULL || u->n_msgs_after_persist > 0) {
        struct write *w = calloc(1, sizeof(*w));

        if (w == NULL)
            abort();
        w->hs = u->hs_changed;
        w->term = u->term;
        w->vote = u->vote;
        if (u->snapshot != NULL) {
            w->has_snap = true;
            w->snap = *u->snapshot;
            raft_buf_ref(w->snap.data);
        }
        if (u->n_entries > 0) {
            w->n = u->n_entries;
            w->ents = xrealloc(NULL, w->n * sizeof(*w->ents));
            memcpy(w->ents, u->entries, w->n * sizeof(*w->ents));
            for (i = 0; i < w->n; i++)
                raft_buf_ref(w->ents[i].buf);
        }
        if (u->n_msgs_after_persist > 0) {
            w->n_msgs = u->n_msgs_after_persist;
            w->msgs = xrealloc(NULL, w->n_msgs * sizeof(*w->msgs));
            for (i = 0; i < w->n_msgs; i++)
                w->msgs[i] = msg_copy(&u->msgs_after_persist[i]);
        }
        if (nd->disk_manual) {
            char what[160];
            int o = 0;

            what[0] = '\0';
            if (w->hs)
                o += snprintf(what + o, sizeof(what) - (size_t)o, " term=%llu vote=%u",
                              (unsigned long long)w->term, w->vote);
            if (w->n)
                o += snprintf(what + o, sizeof(what) - (size_t)o, " entries=%llu..%llu",
                              (unsigned long long)w->ents[0].index,
                              (unsigned long long)w->ents[w->n - 1].index);
            if (w->has_snap)
                snprintf(what + o, sizeof(what) - (size_t)o, " snapshot=%llu",
                         (unsigned long long)w->snap.index);
            trace(s, "n%u: write queued%s msgs_after=%zu", nd->id, what, w->n_msgs);
        }
        w->done_at = s->now + (nd->disk_delay_max ? rnd_range(s, 0, nd->disk_delay_max) : 0);
        if (w->done_at < nd->disk_free_at)
            w->done_at = nd->disk_free_at;
        nd->disk_free_at = w->done_at;
        if (nd->wq_tail)
            nd->wq_tail->next = w;
        else
            nd->wq = w;
        nd->wq_tail = w;
        if (nd->wq == w)
            schedule_disk(s, nd);
    }
    /* 2. messages */
    for (i = 0; i < u->n_msgs; i++)
        net_send(s, &u->msgs[i]);
    /* 3. snapshot, 4. apply */
    if (u->snapshot != NULL) {
        sm_restore(s, nd, u->snapshot);
        s->installs++;
        trace(s, "n%u: install snapshot %llu/%llu", nd->id, (unsigned long long)u->snapshot->index,
              (unsigned long long)u->snapshot->term);
    }
    apply_entries(s, nd, u->committed, u->n_committed);
    /* 5. reads */
    for (i = 0; i < u->n_reads; i++) {
        nd->has_read = true;
        nd->read_id = u->reads[i].id;
        nd->read_index = u->reads[i].index;
        nd->read_rc = u->reads[i].rc;
        if (u->reads[i].rc == RAFT_OK)
            s->reads_ok++;
        trace(s, "n%u: read id=%llu index=%llu %s", nd->id, (unsigned long long)u->reads[i].id,
              (unsigned long long)u->reads[i].index, raft_rc_name(u->reads[i].rc));
        for (k = 0; k < 32; k++) {
            if (nd->floor_id[k] != u->reads[i].id || u->reads[i].rc != RAFT_OK)
                continue;
            if (u->reads[i].index < nd->floor_index[k])
                fail(s, "n%u: read %llu at index %llu, but %llu was committed before it began",
                     nd->id, (unsigned long long)u->reads[i].id,
                     (unsigned long long)u->reads[i].index, (unsigned long long)nd->floor_index[k]);
        }
    }
    /* 6. deadline */
    if (u->next_deadline != nd->deadline) {
        nd->deadline = u->next_deadline;
        if (u->next_deadline != RAFT_NO_DEADLINE) {
            struct event ev = {.type = EV_TICK, .node = nd->id, .epoch = nd->epoch};
            uint64_t at = u->next_deadline - nd->offset;

            ev.at = u->next_deadline > nd->offset && at > s->now ? at : s->now;
            heap_push(s, ev);
        }
    }
}

static void step(struct sim *s, struct node *nd, const struct raft_event *ev, int *rc_out)
{
    struct raft_update u;
    struct raft_event e = *ev;
    int rc;

    if (!nd->up)
        return;
    e.now = s->now + nd->offset;
    rc = raft_step(nd->r, &e, &u);
    if (++s->steps > 20000000)
        fail(s, "runaway: more than 20M steps");
    if (rc_out != NULL)
        *rc_out = rc;
    handle_update(s, nd, &u);
}

/* ------------------------------------------------------------------ lifecycle */

static void node_start(struct sim *s, struct node *nd, bool bootstrap)
{
    struct raft_options o = {0};
    struct raft_start st = {0};
    struct raft_config boot = {0};
    struct raft_event ev = {.type = RAFT_EV_TICK, .now = s->now};
    uint32_t i;
    int rc;

    o.id = nd->id;
    o.seed = s->cfg.seed * 1000003 + nd->epoch;
    o.election_timeout_ms = s->cfg.election_ms;
    o.heartbeat_ms = s->cfg.heartbeat_ms;
    o.disable_prevote = s->cfg.disable_prevote;
    o.disable_check_quorum = s->cfg.disable_check_quorum;
    o.max_inflight_msgs = s->cfg.max_inflight_msgs;
    o.max_msg_bytes = s->cfg.max_msg_bytes;
    o.snapshot_chunk_bytes = s->cfg.snapshot_chunk_bytes;
    o.max_uncommitted_bytes = s->cfg.max_uncommitted_bytes;
    st.term = nd->d_term;
    st.vote = nd->d_vote;
    st.snapshot = nd->d_snap.index ? &nd->d_snap : NULL;
    st.entries = nd->d_log;
    st.n_entries = nd->d_n;
    if (bootstrap) {
        for (i = 1; i <= s->cfg.voters; i++) {
            char addr[32];

            snprintf(addr, sizeof(addr), "node%u:6821", i);
            raft_config_add(&boot, i, RAFT_MEMBER_VOTER, addr);
        }
        st.bootstrap = &boot;
    }
    rc = raft_new(&o, &st, s->now + nd->offset, &nd->r);
    if (rc != RAFT_OK) {
        fail(s, "n%u: raft_new: %s", nd->id, raft_rc_name(rc));
        return;
    }
    nd->up = true;
    nd->role = 0;
    nd->deadline = 0;
    nd->checked_commit = 0;
    sm_restore(s, nd, st.snapshot);
    step(s, nd, &ev, NULL);
}

static struct sim *sim_create(const struct sim_config *cfg, bool random_net)
{
    struct sim *s = calloc(1, sizeof(*s));
    uint32_t i, j;

    if (s == NULL)
        abort();
    s->cfg = *cfg;
    if (s->cfg.election_ms == 0)
        s->cfg.election_ms = 100;
    if (s->cfg.heartbeat_ms == 0)
        s->cfg.heartbeat_ms = 20;
    if (s->cfg.snapshot_chunk_bytes == 0)
        s->cfg.snapshot_chunk_bytes = 512;
    s->random_net = random_net;
    s->delay_min = 1;
    s->delay_max = 5;
    s->n = cfg->voters + cfg->spares;
    if (s->n > SIM_MAX_NODES)
        s->n = SIM_MAX_NODES;
    s->rng = cfg->seed ^ 0x5bd1e995;
    for (i = 0; i <= SIM_MAX_NODES; i++)
        for (j = 0; j <= SIM_MAX_NODES; j++)
            s->link[i][j] = true;
    for (i = 1; i <= s->n; i++) {
        s->nodes[i].id = i;
        node_start(s, &s->nodes[i], i <= cfg->voters);
    }
    run_until(s, 0); /* the bootstrap writes */
    return s;
}

struct sim *sim_new(const struct sim_config *cfg)
{
    return sim_create(cfg, false);
}

static void node_down(struct sim *s, struct node *nd)
{
    struct write *w;

    raft_free(nd->r);
    nd->r = NULL;
    nd->up = false;
    nd->epoch++;
    while ((w = nd->wq) != NULL) {
        nd->wq = w->next;
        write_free(w);
    }
    nd->wq_tail = NULL;
    nd->disk_free_at = 0;
    nd->deadline = 0;
}

void sim_free(struct sim *s)
{
    uint32_t i;
    struct sim_msg *m;

    if (s == NULL)
        return;
    for (i = 1; i <= s->n; i++) {
        struct node *nd = &s->nodes[i];

        if (nd->up)
            node_down(s, nd);
        durable_truncate(nd, 0);
        free(nd->d_log);
        raft_buf_unref(nd->d_snap.data);
    }
    while (s->heap_n > 0) {
        struct event ev = heap_pop(s);

        msg_free(ev.msg);
    }
    while ((m = s->mbox) != NULL) {
        s->mbox = m->next;
        msg_free(m);
    }
    free(s->heap);
    free(s->leader_of_term);
    free(s->g);
    free(s->lm);
    free(s);
}

void sim_crash(struct sim *s, raft_id id)
{
    if (id == 0 || id > s->n || !s->nodes[id].up)
        return;
    trace(s, "n%u: crash", id);
    node_down(s, &s->nodes[id]);
}

void sim_wipe(struct sim *s, raft_id id)
{
    struct node *nd;
    if (id == 0 || id > s->n)
        return;
    nd = &s->nodes[id];
    if (nd->up)
        node_down(s, nd);
    trace(s, "n%u: disk wiped", id);
    durable_truncate(nd, 0);
    raft_buf_unref(nd->d_snap.data);
    memset(&nd->d_snap, 0, sizeof(nd->d_snap));
    nd->d_term = 0;
    nd->d_vote = 0;
    nd->sm_index = 0;
    nd->sm_hash = 0;
    nd->commit = 0;
    nd->checked_commit = 0;
}

void sim_restart(struct sim *s, raft_id id)
{
    if (id == 0 || id > s->n || s->nodes[id].up)
        return;
    trace(s, "n%u: restart term=%llu log=%zu snapshot=%llu", id,
          (unsigned long long)s->nodes[id].d_term, s->nodes[id].d_n,
          (unsigned long long)s->nodes[id].d_snap.index);
    node_start(s, &s->nodes[id], false);
}

/* ------------------------------------------------------------------ running events */

static void deliver(struct sim *s, struct sim_msg *c)
{
    struct node *nd = &s->nodes[c->m.to];
    struct raft_event ev = {.type = RAFT_EV_RECEIVE, .now = s->now, .msg = &c->m};

    if (s->cfg.trace != NULL && !s->quiet_msgs) {
        char buf[256];

        fmt_msg(&c->m, buf, sizeof(buf));
        trace(s, "%s%s", buf, nd->up ? "" : " (down)");
    }
    step(s, nd, &ev, NULL);
    msg_free(c);
}

static void chaos(struct sim *s);

static void run_event(struct sim *s, struct event *ev)
{
    struct node *nd = ev->node ? &s->nodes[ev->node] : NULL;

    if (ev->at > s->now)
        s->now = ev->at;
    switch (ev->type) {
    case EV_DELIVER:
        deliver(s, ev->msg);
        break;
    case EV_DISK:
        if (nd->up && ev->epoch == nd->epoch && nd->wq != NULL && nd->wq->done_at <= s->now &&
            !nd->disk_manual)
            complete_write(s, nd);
        break;
    case EV_TICK:
        if (nd->up && !nd->paused && ev->epoch == nd->epoch && nd->deadline != RAFT_NO_DEADLINE &&
            nd->deadline <= s->now + nd->offset) {
            struct raft_event tev = {.type = RAFT_EV_TICK, .now = s->now};

            nd->deadline = 0; /* the step re-arms it */
            step(s, nd, &tev, NULL);
        }
        break;
    case EV_CHAOS:
        chaos(s);
        break;
    }
}

/* Run every event due up to time t (inclusive). */
static void run_until(struct sim *s, uint64_t t)
{
    while (s->heap_n > 0 && s->heap[0].at <= t && !s->failed) {
        struct event ev = heap_pop(s);

        run_event(s, &ev);
    }
    if (t > s->now)
        s->now = t;
}

void sim_advance(struct sim *s, uint64_t ms)
{
    run_until(s, s->now + ms);
}

void sim_campaign(struct sim *s, raft_id id)
{
    struct node *nd = &s->nodes[id];
    struct raft_event ev = {.type = RAFT_EV_TICK};

    if (!nd->up)
        return;
    /* Only this node's clock jumps to its deadline (a constant skew from then on); virtual
     * time, and with it every other node's timer, stays where it is. */
    if (nd->deadline != RAFT_NO_DEADLINE && nd->deadline > s->now + nd->offset)
        nd->offset = nd->deadline - s->now;
    step(s, nd, &ev, NULL);
    run_until(s, s->now);
}

static bool match(const struct sim *s, const struct sim_msg *c, raft_id from, raft_id to)
{
    return (from == 0 || c->m.from == from) && (to == 0 || c->m.to == to) &&
           !s->nodes[c->m.to].paused;
}

int sim_deliver(struct sim *s, raft_id from, raft_id to, bool all)
{
    int n = 0, rounds = 0;
    struct sim_msg *batch, *c, **pp;

    do {
        /* take the matching messages queued now, keep the rest in order */
        struct sim_msg *head = NULL, **tail = &head;

        pp = &s->mbox;
        while ((c = *pp) != NULL) {
            if (match(s, c, from, to)) {
                *pp = c->next;
                c->next = NULL;
                *tail = c;
                tail = &c->next;
            } else {
                pp = &c->next;
            }
        }
        s->mbox_tail = NULL;
        for (c = s->mbox; c != NULL; c = c->next)
            s->mbox_tail = c;
        batch = head;
        if (batch == NULL)
            break;
        while ((c = batch) != NULL) {
            batch = c->next;
            c->next = NULL;
            if (!s->link[c->m.from][c->m.to]) {
                if (s->cfg.trace && !s->quiet_msgs) {
                    char buf[256];

                    fmt_msg(&c->m, buf, sizeof(buf));
                    trace(s, "%s (dropped: partition)", buf);
                }
                msg_free(c);
                continue;
            }
            deliver(s, c);
            run_until(s, s->now);
            n++;
        }
    } while (all && ++rounds < 10000 && !s->failed);
    return n;
}

int sim_drop(struct sim *s, raft_id from, raft_id to)
{
    struct sim_msg *c, **pp = &s->mbox;
    int n = 0;

    while ((c = *pp) != NULL) {
        if (match(s, c, from, to)) {
            *pp = c->next;
            if (s->cfg.trace) {
                char buf[256];

                fmt_msg(&c->m, buf, sizeof(buf));
                trace(s, "%s (dropped)", buf);
            }
            msg_free(c);
            n++;
        } else {
            pp = &c->next;
        }
    }
    s->mbox_tail = NULL;
    for (c = s->mbox; c != NULL; c = c->next)
        s->mbox_tail = c;
    return n;
}

int sim_stabilize(struct sim *s)
{
    return sim_deliver(s, 0, 0, true);
}

int sim_pending(const struct sim *s, raft_id from, raft_id to)
{
    const struct sim_msg *c;
    int n = 0;

    for (c = s->mbox; c != NULL; c = c->next)
        if (match(s, c, from, to))
            n++;
    return n;
}

int sim_count_queued(const struct sim *s, raft_id from, int type)
{
    const struct sim_msg *c;
    int n = 0;

    for (c = s->mbox; c != NULL; c = c->next)
        if (c->m.from == from && c->m.type == type)
            n++;
    return n;
}

void sim_link(struct sim *s, raft_id a, raft_id b, bool up)
{
    s->link[a][b] = up;
}

void sim_isolate(struct sim *s, raft_id id)
{
    uint32_t i;

    for (i = 1; i <= s->n; i++) {
        s->link[id][i] = false;
        s->link[i][id] = false;
    }
}

void sim_heal(struct sim *s)
{
    uint32_t i, j;

    for (i = 0; i <= SIM_MAX_NODES; i++)
        for (j = 0; j <= SIM_MAX_NODES; j++)
            s->link[i][j] = true;
}

void sim_disk_manual(struct sim *s, raft_id id, bool manual)
{
    s->nodes[id].disk_manual = manual;
    if (!manual)
        schedule_disk(s, &s->nodes[id]);
}

int sim_persist(struct sim *s, raft_id id)
{
    struct node *nd = &s->nodes[id];
    int n = 0;

    while (nd->wq != NULL) {
        complete_write(s, nd);
        n++;
    }
    run_until(s, s->now);
    return n;
}

void sim_pause(struct sim *s, raft_id id, bool paused)
{
    struct node *nd = &s->nodes[id];

    trace(s, "n%u: %s", id, paused ? "paused" : "resumed");
    nd->paused = paused;
    if (!paused && nd->up && nd->deadline != RAFT_NO_DEADLINE) {
        struct event ev = {.type = EV_TICK, .node = id, .epoch = nd->epoch};

        ev.at = nd->deadline > s->now + nd->offset ? nd->deadline - nd->offset : s->now;
        heap_push(s, ev);
    }
}

bool sim_steal(struct sim *s, raft_id from, raft_id to, int type, struct raft_msg *out)
{
    struct sim_msg *c, **pp = &s->mbox;

    while ((c = *pp) != NULL) {
        if (c->m.from == from && c->m.to == to && c->m.type == type) {
            *pp = c->next;
            *out = c->m;
            out->entries = NULL;
            out->n_entries = 0;
            memset(&out->snap, 0, sizeof(out->snap));
            msg_free(c);
            s->mbox_tail = NULL;
            for (c = s->mbox; c != NULL; c = c->next)
                s->mbox_tail = c;
            return true;
        }
        pp = &c->next;
    }
    return false;
}

bool sim_up(const struct sim *s, raft_id id)
{
    return id >= 1 && id <= s->n && s->nodes[id].up;
}

/* ------------------------------------------------------------------ client operations */

static int client_step(struct sim *s, raft_id id, struct raft_event *ev, struct raft_update *out)
{
    struct node *nd = &s->nodes[id];
    struct raft_update u;
    int rc;

    if (id == 0 || id > s->n || !nd->up)
        return RAFT_ENOTLEADER;
    ev->now = s->now + nd->offset;
    rc = raft_step(nd->r, ev, &u);
    s->steps++;
    if (out != NULL) {
        out->proposed_index = u.proposed_index;
        out->proposed_term = u.proposed_term;
        out->leader = u.leader;
    }
    handle_update(s, nd, &u);
    run_until(s, s->now);
    return rc;
}

/* Bytes of NORMAL entries of the leader's term above its commit index: what the cap
 * counts, recomputed from the log so that the core's own bookkeeping is checked. */
static uint64_t uncommitted_bytes(struct sim *s, raft_id id)
{
    struct raft_status st;
    uint64_t sum = 0;
    raft_index i;

    sim_status(s, id, &st);
    if (st.role != RAFT_LEADER)
        return 0;
    for (i = st.commit + 1; i <= st.last_index; i++) {
        const struct raft_entry *e = raft_get_entry(s->nodes[id].r, i);

        if (e != NULL && e->term == st.term && e->type == RAFT_ENTRY_NORMAL)
            sum += e->len;
    }
    return sum;
}

static void check_proposal_cap(struct sim *s, raft_id id, uint64_t before, bool transfer,
                               uint32_t len, int rc)
{
    uint64_t cap = s->cfg.max_uncommitted_bytes, after;
    struct raft_status st;

    if (cap == 0 || id == 0 || id > s->n || !s->nodes[id].up)
        return;
    if (rc == RAFT_EBUSY) {
        s->busy++;
        /* the other EBUSY of a proposal: a leadership transfer was running */
        if (!transfer && (before == 0 || before + len <= cap))
            fail(s, "n%u: proposal of %u bytes refused with %llu of %llu bytes uncommitted", id,
                 len, (unsigned long long)before, (unsigned long long)cap);
        return;
    }
    if (rc != RAFT_OK)
        return;
    after = uncommitted_bytes(s, id);
    sim_status(s, id, &st);
    if (st.role == RAFT_LEADER && st.uncommitted_bytes != after)
        fail(s, "n%u: the core counts %llu uncommitted bytes, its log holds %llu", id,
             (unsigned long long)st.uncommitted_bytes, (unsigned long long)after);
    if (after > cap && before > 0)
        fail(s, "n%u: %llu uncommitted bytes after a proposal, cap %llu", id,
             (unsigned long long)after, (unsigned long long)cap);
}

int sim_propose(struct sim *s, raft_id id, const char *data, raft_index *index)
{
    struct raft_proposal p = {.data = data, .len = (uint32_t)strlen(data)};
    struct raft_event ev = {.type = RAFT_EV_PROPOSE};
    struct raft_update out = {0};
    uint64_t before = 0;
    bool transfer = false;
    int rc;

    ev.propose.entries = &p;
    ev.propose.n = 1;
    if (s->cfg.max_uncommitted_bytes != 0 && id != 0 && id <= s->n && s->nodes[id].up) {
        struct raft_status st;

        sim_status(s, id, &st);
        before = uncommitted_bytes(s, id);
        transfer = st.transferee != 0;
    }
    rc = client_step(s, id, &ev, &out);
    check_proposal_cap(s, id, before, transfer, p.len, rc);
    if (rc == RAFT_OK)
        trace(s, "n%u: propose %s -> %llu/%llu", id, data, (unsigned long long)out.proposed_index,
              (unsigned long long)out.proposed_term);
    else
        trace(s, "n%u: propose %s -> %s leader=%u", id, data, raft_rc_name(rc), out.leader);
    if (index != NULL)
        *index = out.proposed_index;
    return rc;
}

int sim_read(struct sim *s, raft_id id, uint64_t read_id)
{
    struct raft_event ev = {.type = RAFT_EV_READ, .read_id = read_id};
    int rc;

    /* linearizability: the read must see every entry committed before it began */
    struct node *nd = &s->nodes[id];

    nd->floor_id[nd->floor_next % 32] = read_id;
    nd->floor_index[nd->floor_next % 32] = s->max_committed;
    nd->floor_next++;
    rc = client_step(s, id, &ev, NULL);

    trace(s, "n%u: read request id=%llu -> %s", id, (unsigned long long)read_id, raft_rc_name(rc));
    return rc;
}

int sim_transfer(struct sim *s, raft_id id, raft_id target)
{
    struct raft_event ev = {.type = RAFT_EV_TRANSFER, .target = target};
    int rc = client_step(s, id, &ev, NULL);

    trace(s, "n%u: transfer to %u -> %s", id, target, raft_rc_name(rc));
    return rc;
}

int sim_change(struct sim *s, raft_id id, int type, raft_id target)
{
    struct raft_event ev = {.type = RAFT_EV_CHANGE};
    struct raft_update out = {0};
    char addr[32];
    int rc;

    snprintf(addr, sizeof(addr), "node%u:6821", target);
    ev.change.type = (uint8_t)type;
    ev.change.id = target;
    ev.change.address = addr;
    rc = client_step(s, id, &ev, &out);
    if (rc == RAFT_OK)
        trace(s, "n%u: change %s %u -> ok index=%llu", id,
              type == RAFT_CHANGE_ADD_LEARNER ? "add-learner"
              : type == RAFT_CHANGE_PROMOTE   ? "promote"
                                              : "remove",
              target, (unsigned long long)out.proposed_index);
    else
        trace(s, "n%u: change %s %u -> %s", id,
              type == RAFT_CHANGE_ADD_LEARNER ? "add-learner"
              : type == RAFT_CHANGE_PROMOTE   ? "promote"
                                              : "remove",
              target, raft_rc_name(rc));
    return rc;
}

int sim_snapshot(struct sim *s, raft_id id, raft_index trailing)
{
    struct node *nd = &s->nodes[id];
    struct raft_event ev = {.type = RAFT_EV_SNAPSHOT_TAKEN};
    struct raft_snapshot snap = {0};
    struct raft_buf *data;
    int rc;

    if (!nd->up || nd->sm_index == 0)
        return RAFT_EINVAL;
    if (raft_snapshot_meta(nd->r, nd->sm_index, &snap.term, &snap.config) != RAFT_OK)
        return RAFT_ESTALE;
    data = sm_snapshot(nd);
    snap.index = nd->sm_index;
    snap.data = data;
    /* the application's snapshot is durable before it tells the core */
    raft_buf_unref(nd->d_snap.data);
    nd->d_snap = snap;
    raft_buf_ref(data);
    {
        size_t k = 0, i;

        for (i = 0; i < nd->d_n; i++) {
            if (nd->d_log[i].index <= snap.index)
                raft_buf_unref(nd->d_log[i].buf);
            else
                nd->d_log[k++] = nd->d_log[i];
        }
        nd->d_n = k;
    }
    ev.snapshot.index = snap.index;
    ev.snapshot.data = data;
    ev.snapshot.trailing = trailing;
    rc = client_step(s, id, &ev, NULL);
    raft_buf_unref(data);
    trace(s, "n%u: snapshot at %llu -> %s", id, (unsigned long long)snap.index, raft_rc_name(rc));
    return rc;
}

int sim_inject(struct sim *s, raft_id to, const struct raft_msg *m)
{
    struct raft_event ev = {.type = RAFT_EV_RECEIVE, .msg = m};

    return client_step(s, to, &ev, NULL);
}

/* ------------------------------------------------------------------ inspection */

const char *sim_failure(const struct sim *s)
{
    return s->failed ? s->failure : NULL;
}

uint64_t sim_now(const struct sim *s)
{
    return s->now;
}

void sim_set_trace(struct sim *s, FILE *t)
{
    s->cfg.trace = t;
}

void sim_trace_messages(struct sim *s, bool on)
{
    s->quiet_msgs = !on;
}

uint32_t sim_nodes(const struct sim *s)
{
    return s->n;
}

struct raft *sim_raft(struct sim *s, raft_id id)
{
    return id >= 1 && id <= s->n && s->nodes[id].up ? s->nodes[id].r : NULL;
}

void sim_status(struct sim *s, raft_id id, struct raft_status *st)
{
    memset(st, 0, sizeof(*st));
    if (sim_raft(s, id) != NULL)
        raft_get_status(s->nodes[id].r, st);
}

raft_id sim_leader(struct sim *s)
{
    raft_id best = 0;
    raft_term bt = 0;
    uint32_t i;

    for (i = 1; i <= s->n; i++) {
        struct raft_status st;

        if (!s->nodes[i].up)
            continue;
        raft_get_status(s->nodes[i].r, &st);
        if (st.role == RAFT_LEADER && st.term >= bt) {
            best = i;
            bt = st.term;
        }
    }
    return best;
}

raft_index sim_applied(const struct sim *s, raft_id id)
{
    return s->nodes[id].sm_index;
}

bool sim_last_read(struct sim *s, raft_id id, uint64_t *read_id, raft_index *index, int *rc)
{
    struct node *nd = &s->nodes[id];

    if (!nd->has_read)
        return false;
    nd->has_read = false;
    *read_id = nd->read_id;
    *index = nd->read_index;
    *rc = nd->read_rc;
    return true;
}

uint64_t sim_early_sends(const struct sim *s)
{
    return s->early_sends;
}

void sim_print_status(struct sim *s, FILE *out)
{
    uint32_t i;

    for (i = 1; i <= s->n; i++) {
        struct raft_status st;

        if (!s->nodes[i].up) {
            fprintf(out, "n%u: down\n", i);
            continue;
        }
        raft_get_status(s->nodes[i].r, &st);
        fprintf(out, "n%u: %s term=%llu leader=%u commit=%llu applied=%llu last=%llu/%llu\n", i,
                raft_role_name(st.role), (unsigned long long)st.term, st.leader,
                (unsigned long long)st.commit, (unsigned long long)s->nodes[i].sm_index,
                (unsigned long long)st.last_index, (unsigned long long)st.last_term);
    }
}

void sim_print_log(struct sim *s, raft_id id, FILE *out)
{
    struct raft_status st;
    raft_index i;

    if (!sim_up(s, id)) {
        fprintf(out, "n%u: down\n", id);
        return;
    }
    raft_get_status(s->nodes[id].r, &st);
    fprintf(out, "n%u log: snapshot=%llu/%llu", id, (unsigned long long)st.snapshot_index,
            (unsigned long long)st.snapshot_term);
    for (i = st.first_index; i <= st.last_index; i++) {
        const struct raft_entry *e = raft_get_entry(s->nodes[id].r, i);

        fprintf(out, " %llu/%llu", (unsigned long long)i, (unsigned long long)e->term);
        if (e->type == RAFT_ENTRY_NOOP)
            fprintf(out, ":noop");
        else if (e->type == RAFT_ENTRY_CONFIG)
            fprintf(out, ":conf");
        else
            fprintf(out, ":%.*s", (int)e->len, (const char *)e->data);
    }
    fputc('\n', out);
}

/* ------------------------------------------------------------------ random runs */

static raft_id random_up_node(struct sim *s)
{
    uint32_t tries;

    for (tries = 0; tries < 16; tries++) {
        raft_id id = (raft_id)rnd_range(s, 1, s->n);

        if (s->nodes[id].up)
            return id;
    }
    return 0;
}

static void chaos_partition(struct sim *s)
{
    uint32_t kind = (uint32_t)rnd_range(s, 0, 3), i, j;

    sim_heal(s);
    if (kind == 0) { /* symmetric: split in two groups */
        uint32_t mask = (uint32_t)rnd(s);

        for (i = 1; i <= s->n; i++)
            for (j = 1; j <= s->n; j++)
                if (((mask >> i) & 1) != ((mask >> j) & 1))
                    s->link[i][j] = false;
        trace(s, "chaos: partition mask=%x", mask & 0x3fe);
    } else if (kind == 1) { /* asymmetric: one node's outbound or inbound cut */
        raft_id x = (raft_id)rnd_range(s, 1, s->n);
        bool out = chance(s, 50);

        for (i = 1; i <= s->n; i++) {
            if (out)
                s->link[x][i] = false;
            else
                s->link[i][x] = false;
        }
        trace(s, "chaos: n%u %s cut", x, out ? "outbound" : "inbound");
    } else if (kind == 2) { /* partial: a node loses some peers only */
        raft_id x = (raft_id)rnd_range(s, 1, s->n);

        for (i = 1; i <= s->n; i++) {
            if (i != x && chance(s, 50)) {
                s->link[x][i] = false;
                s->link[i][x] = false;
            }
        }
        trace(s, "chaos: n%u partially cut", x);
    } else {
        trace(s, "chaos: network healed");
    }
}

static void chaos(struct sim *s)
{
    struct event next = {.type = EV_CHAOS};
    raft_id id, leader = sim_leader(s);
    uint32_t i;
    char data[32];

    /* client traffic: most ticks propose something on the leader */
    if (leader != 0 && chance(s, 70)) {
        snprintf(data, sizeof(data), "v%llu", (unsigned long long)s->seq);
        sim_propose(s, leader, data, NULL);
    }
    if (chance(s, 2))
        chaos_partition(s);
    if (chance(s, 2)) {
        s->drop_pct = (uint32_t)rnd_range(s, 0, 10);
        s->dup_pct = (uint32_t)rnd_range(s, 0, 5);
        s->delay_max = (uint32_t)rnd_range(s, 1, 20);
        trace(s, "chaos: drop=%u%% dup=%u%% delay<=%ums", s->drop_pct, s->dup_pct, s->delay_max);
    }
    if (chance(s, 2)) {
        /* crash a leader right after it proposed: the Figure 8 pattern */
        id = chance(s, 50) ? sim_leader(s) : random_up_node(s);
        if (id != 0) {
            sim_crash(s, id);
            s->crashes++;
        }
    }
    for (i = 1; i <= s->n; i++)
        if (!s->nodes[i].up && chance(s, 3))
            sim_restart(s, i);
    if (chance(s, 2)) {
        id = random_up_node(s);
        if (id != 0 && s->nodes[id].sm_index > 0)
            sim_snapshot(s, id, rnd_range(s, 0, 5));
    }
    leader = sim_leader(s);
    if (leader != 0 && chance(s, 1)) {
        sim_read(s, leader, s->seq);
    }
    leader = sim_leader(s);
    if (leader != 0 && chance(s, 1)) {
        /* membership: spare nodes join as learners, get promoted; voters get removed */
        const struct raft_config *c = raft_get_config(s->nodes[leader].r);
        raft_id target = (raft_id)rnd_range(s, 1, s->n);
        const struct raft_member *mb = raft_config_find(c, target);

        if (mb == NULL)
            sim_change(s, leader, RAFT_CHANGE_ADD_LEARNER, target);
        else if (mb->role == RAFT_MEMBER_LEARNER)
            sim_change(s, leader, RAFT_CHANGE_PROMOTE, target);
        else if (raft_config_voters(c) > 3)
            sim_change(s, leader, RAFT_CHANGE_REMOVE, target);
    }
    leader = sim_leader(s);
    if (leader != 0 && chance(s, 1))
        sim_transfer(s, leader, 0);
    for (i = 1; i <= s->n; i++)
        s->nodes[i].disk_delay_max =
            (uint32_t)(chance(s, 1) ? rnd_range(s, 0, 8) : s->nodes[i].disk_delay_max);
    next.at = s->now + 5;
    heap_push(s, next);
}

static void drain_chaos(struct sim *s)
{
    size_t i, k = 0;

    for (i = 0; i < s->heap_n; i++)
        if (s->heap[i].type != EV_CHAOS)
            s->heap[k++] = s->heap[i];
    s->heap_n = k;
    /* restore the heap property */
    {
        struct event *v = s->heap;
        size_t n = s->heap_n;

        s->heap = NULL;
        s->heap_n = s->heap_cap = 0;
        for (i = 0; i < n; i++)
            heap_push(s, v[i]);
        free(v);
    }
}

static bool is_member(const struct raft_status *st, raft_id id)
{
    uint32_t k;

    for (k = 0; k < st->n_members; k++)
        if (st->members[k].id == id)
            return true;
    return false;
}

/*
 * Idle catch-up: with no proposals at all, a follower that restarts (its log intact, its
 * volatile commit index back at its snapshot) must reach the leader's commit index within
 * a few heartbeats, carried by heartbeats and the probe they trigger; a replica that
 * waited for the next client write could not serve a linearizable read meanwhile.
 */
static void check_idle_catch_up(struct sim *s)
{
    raft_id leader = sim_leader(s), f = 0;
    struct raft_status lst, fst;
    uint64_t until;
    uint32_t k;

    if (leader == 0)
        return;
    sim_status(s, leader, &lst);
    for (k = 1; k <= s->n && f == 0; k++) {
        sim_status(s, k, &fst);
        if (k != leader && s->nodes[k].up && is_member(&lst, k))
            f = k;
    }
    if (f == 0)
        return;
    trace(s, "run: idle catch-up of n%u (leader n%u commit=%llu)", f, leader,
          (unsigned long long)lst.commit);
    sim_crash(s, f);
    sim_restart(s, f);
    until = s->now + 10ull * s->cfg.heartbeat_ms + 2ull * s->cfg.election_ms;
    while (!s->failed && s->now < until) {
        run_until(s, s->now + 5);
        sim_status(s, f, &fst);
        if (fst.commit >= lst.commit && sim_applied(s, f) >= lst.commit)
            return;
    }
    if (!s->failed)
        fail(s,
             "liveness: restarted follower n%u stayed at commit %llu on an idle cluster "
             "(leader commit %llu)",
             f, (unsigned long long)fst.commit, (unsigned long long)lst.commit);
}

void sim_run(uint32_t voters, uint64_t seed, uint64_t chaos_ms, FILE *tr,
             struct sim_run_result *res)
{
    struct sim_config cfg = {0};
    struct sim *s;
    struct event ev = {.type = EV_CHAOS};
    raft_id leader;
    raft_index target = 0;
    uint64_t deadline;
    uint32_t i;
    bool committed = false;

    memset(res, 0, sizeof(*res));
    cfg.voters = voters;
    cfg.spares = voters + 2 <= SIM_MAX_NODES ? 2 : 0;
    cfg.seed = seed;
    cfg.trace = tr;
    cfg.max_inflight_msgs = 8;
    cfg.max_msg_bytes = 64;
    /* every other seed with a small proposal cap: a few entries, so partitions hit it */
    cfg.max_uncommitted_bytes = seed % 2 ? 40 : 0;
    s = sim_create(&cfg, true);
    trace(s, "run: seed=%llu voters=%u spares=%u chaos=%llums", (unsigned long long)seed, voters,
          cfg.spares, (unsigned long long)chaos_ms);
    ev.at = 1;
    heap_push(s, ev);
    run_until(s, chaos_ms);

    /* heal: network whole, every node up, disks quick; then demand progress */
    drain_chaos(s);
    sim_heal(s);
    s->drop_pct = s->dup_pct = 0;
    s->delay_max = 5;
    for (i = 1; i <= s->n; i++) {
        if (!s->nodes[i].up)
            sim_restart(s, i);
        s->nodes[i].disk_delay_max = 2;
    }
    trace(s, "run: healed");
    deadline = s->now + 20ull * s->cfg.election_ms;
    while (!s->failed && s->now < deadline) {
        run_until(s, s->now + 10);
        leader = sim_leader(s);
        if (leader == 0)
            continue;
        if (target == 0) {
            if (sim_propose(s, leader, "final", &target) != RAFT_OK)
                target = 0;
            continue;
        }
        {
            struct raft_status st;

            raft_get_status(s->nodes[leader].r, &st);
            if (st.commit >= target && raft_get_term(s->nodes[leader].r, target) != 0) {
                committed = true;
                break;
            }
            if (raft_get_term(s->nodes[leader].r, target) == 0 || st.role != RAFT_LEADER)
                target = 0; /* overwritten by a new leader: propose again */
        }
    }
    if (!s->failed && !committed)
        fail(s, "liveness: no commit within %llums after healing (leader=%u)",
             (unsigned long long)(20ull * s->cfg.election_ms), sim_leader(s));
    /* convergence: every voter and learner of the leader's configuration applies it */
    if (!s->failed) {
        uint64_t until = s->now + 40ull * s->cfg.election_ms;
        bool all = false;

        while (!s->failed && s->now < until && !all) {
            const struct raft_config *c;
            uint32_t k;

            run_until(s, s->now + 10);
            leader = sim_leader(s);
            if (leader == 0)
                continue;
            c = raft_get_config(s->nodes[leader].r);
            all = true;
            for (k = 0; k < c->n; k++)
                if (s->nodes[c->members[k].id].sm_index < target)
                    all = false;
        }
        if (!all && !s->failed)
            fail(s, "liveness: members did not all apply %llu", (unsigned long long)target);
    }
    if (!s->failed)
        check_idle_catch_up(s);
    res->ok = !s->failed;
    if (s->failed)
        snprintf(res->failure, sizeof(res->failure), "%s", s->failure);
    res->steps = s->steps;
    res->commits = s->max_committed;
    res->elections = s->elections;
    res->snapshots = s->installs;
    res->crashes = s->crashes;
    res->changes = s->changes;
    res->reads = s->reads_ok;
    res->busy = s->busy;
    if (s->cfg.trace)
        sim_print_status(s, s->cfg.trace);
    sim_free(s);
}
