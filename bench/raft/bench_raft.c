/*
 * bench_raft.c - what the Raft core itself costs: entries committed per second in a
 * 3-node cluster whose network and disks are instant, so only the cores' work is timed.
 *
 * The driver is the thinnest shell the contract in raft.h allows: a FIFO of messages
 * whose entries are shallow copies holding raft_buf references (no byte is copied), and
 * a disk that completes every write at once. Each round proposes `depth` batches of 64
 * entries of 256 bytes on the leader and then runs the cluster until it is quiet; entries
 * are counted when the leader hands them out as committed.
 *
 * Allocations are counted by wrapping malloc/calloc/realloc at link time (-Wl,--wrap), the
 * one place this program keeps process-wide counters.
 *
 *   bench_raft [--entries N] [--depth D]     (default: 2,000,000 entries; depths 1, 4, 16)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raft.h"

#define NODES       3
#define BATCH       64
#define ENTRY_BYTES 256

/* ---- allocation counters (link-time wrappers) */
static uint64_t n_allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
    n_allocs++;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    n_allocs++;
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    n_allocs++;
    return __real_realloc(p, n);
}

/* ---- the shell */
struct qmsg {
    struct raft_msg m;
    size_t ent_off; /* into the entry pool */
};

struct bench {
    struct raft *r[NODES];
    uint64_t now;
    struct qmsg *q;
    size_t q_head, q_n, q_cap;
    struct raft_entry *pool;
    size_t pool_n, pool_cap;
    struct {
        int node;
        raft_index index;
        raft_term term;
    } persist[64];
    size_t n_persist;
    uint64_t committed; /* on the leader */
    uint64_t messages;
    raft_id leader;
};

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (p == NULL) {
        fprintf(stderr, "bench_raft: out of memory\n");
        exit(1);
    }
    return p;
}

static void enqueue(struct bench *b, const struct raft_msg *m)
{
    struct qmsg *q;
    uint32_t i;

    if (b->q_head + b->q_n == b->q_cap) {
        if (b->q_head > 0) {
            memmove(b->q, b->q + b->q_head, b->q_n * sizeof(*b->q));
            b->q_head = 0;
        } else {
            b->q_cap = b->q_cap ? b->q_cap * 2 : 256;
            b->q = xrealloc(b->q, b->q_cap * sizeof(*b->q));
        }
    }
    q = &b->q[b->q_head + b->q_n++];
    q->m = *m;
    q->ent_off = b->pool_n;
    if (m->n_entries > 0) {
        if (b->pool_n + m->n_entries > b->pool_cap) {
            b->pool_cap = (b->pool_n + m->n_entries) * 2;
            b->pool = xrealloc(b->pool, b->pool_cap * sizeof(*b->pool));
        }
        memcpy(b->pool + b->pool_n, m->entries, m->n_entries * sizeof(*b->pool));
        for (i = 0; i < m->n_entries; i++)
            raft_buf_ref(m->entries[i].buf);
        b->pool_n += m->n_entries;
    }
    b->messages++;
}

static void handle(struct bench *b, int node, const struct raft_update *u)
{
    size_t i;

    if (u->role == RAFT_LEADER)
        b->leader = (raft_id)(node + 1);
    if (u->n_entries > 0) {
        b->persist[b->n_persist].node = node;
        b->persist[b->n_persist].index = u->entries[u->n_entries - 1].index;
        b->persist[b->n_persist].term = u->entries[u->n_entries - 1].term;
        b->n_persist++;
    }
    for (i = 0; i < u->n_msgs; i++)
        enqueue(b, &u->msgs[i]);
    /* the disk is instant, so "after persist" is now */
    for (i = 0; i < u->n_msgs_after_persist; i++)
        enqueue(b, &u->msgs_after_persist[i]);
    if ((raft_id)(node + 1) == b->leader)
        b->committed += u->n_committed;
}

static void step(struct bench *b, int node, struct raft_event *ev)
{
    struct raft_update u;

    ev->now = b->now;
    raft_step(b->r[node], ev, &u);
    handle(b, node, &u);
}

/* Run until no write and no message is left. */
static void drain(struct bench *b)
{
    while (b->n_persist > 0 || b->q_n > 0) {
        while (b->n_persist > 0) {
            struct raft_event ev = {.type = RAFT_EV_PERSISTED};
            int node = b->persist[0].node;

            ev.persisted.index = b->persist[0].index;
            ev.persisted.term = b->persist[0].term;
            memmove(b->persist, b->persist + 1, --b->n_persist * sizeof(b->persist[0]));
            step(b, node, &ev);
        }
        if (b->q_n > 0) {
            struct qmsg q = b->q[b->q_head++];
            struct raft_event ev = {.type = RAFT_EV_RECEIVE, .msg = &q.m};
            uint32_t i;

            b->q_n--;
            q.m.entries = q.m.n_entries ? b->pool + q.ent_off : NULL;
            step(b, (int)q.m.to - 1, &ev);
            for (i = 0; i < q.m.n_entries; i++)
                raft_buf_unref(b->pool[q.ent_off + i].buf);
            if (b->q_n == 0) {
                b->q_head = 0;
                b->pool_n = 0;
            }
        }
    }
}

static void setup(struct bench *b)
{
    struct raft_config c = {0};
    struct raft_start st = {.bootstrap = &c};
    struct raft_event tick = {.type = RAFT_EV_TICK};
    int i;

    memset(b, 0, sizeof(*b));
    for (i = 1; i <= NODES; i++)
        raft_config_add(&c, (raft_id)i, RAFT_MEMBER_VOTER, "bench");
    for (i = 0; i < NODES; i++) {
        struct raft_options o = {.id = (raft_id)(i + 1), .seed = 42};

        if (raft_new(&o, &st, 0, &b->r[i]) != RAFT_OK) {
            fprintf(stderr, "bench_raft: raft_new failed\n");
            exit(1);
        }
        step(b, i, &tick);
    }
    drain(b);
    b->now = 5000; /* node 1's election timer fires first: it is ticked first */
    step(b, 0, &tick);
    drain(b);
    if (b->leader != 1) {
        fprintf(stderr, "bench_raft: no leader\n");
        exit(1);
    }
}

static void teardown(struct bench *b)
{
    int i;

    for (i = 0; i < NODES; i++)
        raft_free(b->r[i]);
    free(b->q);
    free(b->pool);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void run(uint64_t target, int depth)
{
    struct bench b;
    struct raft_proposal props[BATCH];
    static uint8_t payload[BATCH][ENTRY_BYTES];
    uint64_t allocs0, msgs0, start_commit, snap_every = 100000, next_snap;
    double t0, t1;
    int i;

    for (i = 0; i < BATCH; i++) {
        memset(payload[i], 'a' + i % 26, ENTRY_BYTES);
        props[i].data = payload[i];
        props[i].len = ENTRY_BYTES;
    }
    setup(&b);
    start_commit = b.committed;
    next_snap = snap_every;
    allocs0 = n_allocs;
    msgs0 = b.messages;
    t0 = now_s();
    while (b.committed - start_commit < target) {
        for (i = 0; i < depth; i++) {
            struct raft_event ev = {.type = RAFT_EV_PROPOSE};

            ev.propose.entries = props;
            ev.propose.n = BATCH;
            step(&b, 0, &ev);
        }
        drain(&b);
        /* keep memory flat like a real worker: compact every 100k entries on each node */
        if (b.committed >= next_snap) {
            int k;

            for (k = 0; k < NODES; k++) {
                struct raft_status st;
                struct raft_event ev = {.type = RAFT_EV_SNAPSHOT_TAKEN};

                raft_get_status(b.r[k], &st);
                ev.snapshot.index = st.applied;
                ev.snapshot.trailing = 1000;
                ev.snapshot.data = NULL;
                step(&b, k, &ev);
            }
            next_snap += snap_every;
        }
    }
    t1 = now_s();
    {
        uint64_t n = b.committed - start_commit;
        double secs = t1 - t0;

        printf("| %5d | %10llu | %12.0f | %8.1f | %10.3f | %8.2f |\n", depth, (unsigned long long)n,
               (double)n / secs, secs * 1e9 / (double)n, (double)(n_allocs - allocs0) / (double)n,
               (double)(b.messages - msgs0) / ((double)n / BATCH));
    }
    teardown(&b);
}

int main(int argc, char **argv)
{
    uint64_t entries = 2000000;
    int depth = 0, i;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--entries") && i + 1 < argc)
            entries = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
            depth = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--entries N] [--depth D]\n", argv[0]);
            return 64;
        }
    }
    printf("Raft core, 3 nodes, instant network and disk, batches of %d x %d-byte entries\n", BATCH,
           ENTRY_BYTES);
    printf("(entries counted when the leader hands them out as committed; one core)\n\n");
    printf("| depth | entries    | entries/s    | ns/entry | allocs/ent | msgs/batch |\n");
    printf("|-------|------------|--------------|----------|------------|------------|\n");
    if (depth > 0) {
        run(entries, depth);
    } else {
        run(entries, 1);
        run(entries, 4);
        run(entries, 16);
    }
    return 0;
}
