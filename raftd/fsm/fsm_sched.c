/*
 * fsm_sched.c - the scheduler pass: which pending jobs start now, and on which nodes
 * (fsm.h, fsm_sched_pass()).
 *
 * What a pass guarantees
 *
 *   - Pure and deterministic. It reads the state and the options only; nodes are walked
 *     in the state's name order, pending jobs in priority order (eligible time, then id),
 *     nothing iterates a hash table, so the same state and options give the same result
 *     on any machine.
 *   - Never over-allocates: a job is placed only on usable nodes (fsm_node_usable()) of
 *     its partition whose free CPUs and memory, after what this pass already placed, hold
 *     its per-node share. Apply checks each allocation again anyway.
 *   - Priority: a job that can start now starts, unless an earlier job holds a
 *     reservation it would delay. A job that cannot start (and is within the first
 *     max_reservations such jobs) gets a reservation: the earliest time T at which, as
 *     running jobs end at start + time limit (CONFIGURING jobs not yet started count from
 *     now; an overdue job counts as ending now; unlimited jobs never end) and earlier
 *     reservations come and go, enough nodes of its partition hold its share for its
 *     whole time limit. Those nodes' shares are reserved from T to T + its limit.
 *   - Backfill (EASY, with max_reservations reservations): a later job starts now on a
 *     node only when it fits the node's free resources and, at every instant until it
 *     ends (now + its limit; an unlimited job never ends), the node still holds every
 *     reservation made on it. So a short job passes a long blocked one when it ends
 *     before the reservation starts or leaves the reserved amount free, and a long job
 *     never delays a reservation.
 *   - Jobs that can never start under their partition as it is (down, too many nodes,
 *     no time limit or too long a one under a limited partition, a per-node size over
 *     the partition's) are passed over: they neither start nor reserve.
 *   - Node choice: the lowest names first among the nodes that fit (no best fit: lowest
 *     first packs jobs onto the start of the name order, which keeps large contiguous
 *     free ranges at the end, and is what an operator can predict by reading sinfo).
 *
 * Mechanics and cost
 *
 *   One walk over the jobs in id order collects the pending ones and the placed ones
 *   (RUNNING, COMPLETING, CONFIGURING). Pending jobs whose eligible time is their submit
 *   time are already in priority order (the log clock never goes back and ids grow with
 *   it); the few others (released, requeued, backed off) are sorted and merged in, so the
 *   ordering costs O(n + k log k). Each node keeps its free CPUs and memory now, and - only
 *   once the first reservation is needed - a timeline: the changes to what it has free,
 *   sorted by time (running and just-placed jobs ending, reservations starting and
 *   ending). A node without reservations needs no timeline walk to take a job now.
 *
 *   A memo remembers job shapes that cannot start: (partition, nodes, CPUs, memory) when
 *   too few nodes have that much free, and the same with the time limit when enough have
 *   it free but the reservations keep them. Within a pass free resources only shrink and
 *   reservations are only added, so a shape refused once stays refused, and a queue of
 *   100,000 jobs with a few shapes costs one lookup per job after the first of each. A
 *   partition cursor skips the leading nodes with no free CPU, and the pass stops once no
 *   usable node has a free CPU (every job needs at least one).
 *
 *   The earliest time for a reservation is found by stepping t from now: each node of the
 *   partition gives the earliest start >= t at which its timeline holds the share for
 *   the job's whole limit; the N-th smallest of those becomes the next t, until N nodes
 *   can start at t itself (no instant in between can have N nodes: fewer than N become
 *   free before it). The steps are bounded (SCHED_MAX_STEPS); a job that finds no time
 *   within them gets no reservation.
 *
 * Ownership: struct pass and everything in it live for one fsm_sched_pass() call; the
 * result owns its allocation array and (priv) one array of node name pointers borrowed
 * from the state.
 */
#include "fsm_state.h"

#include <stdlib.h>
#include <string.h>

#define SCHED_DEFAULT_RESERVATIONS 32
#define SCHED_DEFAULT_ALLOCATIONS  10000
#define SCHED_MAX_STEPS            256
#define NEVER                      UINT64_MAX

#define JS_PENDING     SPUR__API__JOB_STATE__JOB_PENDING
#define JS_RUNNING     SPUR__API__JOB_STATE__JOB_RUNNING
#define JS_COMPLETING  SPUR__API__JOB_STATE__JOB_COMPLETING
#define JS_CONFIGURING SPUR__API__JOB_STATE__JOB_CONFIGURING

/* One change to what a node has free, at time t. */
struct sched_ev {
    uint64_t t;
    int64_t dc;
    int64_t dm;
};

/* A node as the pass sees it. ev is owned (NULL until the timeline is built). */
struct sched_node {
    const struct fsm_node *node;
    bool usable;
    int64_t fc; /* CPUs free now, after this pass's placements */
    int64_t fm; /* memory free now (MiB) */
    struct sched_ev *ev;
    uint32_t nev, cap;
    uint32_t nclaims; /* reservations on this node */
};

/* A partition's nodes as ascending node indices (name order). idx is owned. */
struct sched_part {
    const struct fsm_part *p;
    uint32_t *idx;
    size_t n;
    size_t first; /* idx[0..first) have no free CPU */
};

/* One pending job, in priority order. */
struct sched_pend {
    uint64_t elig;
    uint64_t id;
    const struct fsm_job *job;
};

/* A placement made by this pass: nodes[off .. off + n) of struct pass.picked. */
struct sched_placed {
    uint64_t job_id;
    size_t off;
    uint32_t n;
    uint64_t cpus, mem;
    uint64_t end; /* NEVER: unlimited */
};

/*
 * A memo entry: a job shape that cannot start now (kind 1: too few nodes have it free;
 * 2: enough have it free, but reservations keep them; both are valid for the rest of the
 * pass), or that found no reservation time (kind 3: reservations only take capacity away,
 * so a later job of that shape would find none either).
 */
struct sched_memo_ent {
    uint64_t cpus, mem, dur;
    uint32_t part, nodes;
    uint8_t kind; /* 0: empty slot */
};

struct sched_memo {
    struct sched_memo_ent *e; /* owned */
    size_t cap, n;
};

struct pass {
    const struct fsm *f;
    uint64_t now;
    struct sched_node *nodes; /* owned, f->nodes order */
    size_t nn;
    struct sched_part *parts; /* owned, configuration order */
    size_t np;
    int64_t free_cpus;                  /* over usable nodes */
    const struct fsm_job **placed_jobs; /* owned array; RUNNING, COMPLETING, CONFIGURING */
    size_t nplaced_jobs, cap_placed_jobs;
    bool timeline;
    struct sched_placed *placed; /* owned; this pass's allocations */
    size_t nplaced, cap_placed;
    uint32_t *picked; /* owned; node indices of the allocations */
    size_t npicked, cap_picked;
    uint32_t *scratch; /* owned; nn entries */
    uint64_t *times;   /* owned; nn entries */
    struct sched_memo memo;
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *nv = realloc(*v, c * size);
    if (nv == NULL)
        return -1;
    *v = nv;
    *cap = c;
    return 0;
}

/* ---- setting up ---------------------------------------------------------------------- */

/* Index of the node named name in f->nodes, or -1. */
static long node_index(const struct fsm *f, const char *name)
{
    size_t lo = 0, hi = f->nodes.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->nodes.v[mid]->name, name);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int setup_nodes(struct pass *ps)
{
    const struct fsm *f = ps->f;
    ps->nn = f->nodes.n;
    ps->nodes = calloc(ps->nn ? ps->nn : 1, sizeof(*ps->nodes));
    ps->scratch = calloc(ps->nn ? ps->nn : 1, sizeof(*ps->scratch));
    ps->times = calloc(ps->nn ? ps->nn : 1, sizeof(*ps->times));
    if (ps->nodes == NULL || ps->scratch == NULL || ps->times == NULL)
        return -1;
    for (size_t i = 0; i < ps->nn; i++) {
        const struct fsm_node *node = f->nodes.v[i];
        struct sched_node *sn = &ps->nodes[i];
        sn->node = node;
        sn->usable = fsm_node_usable(node);
        sn->fc = node->cpus > node->alloc_cpus ? (int64_t)(node->cpus - node->alloc_cpus) : 0;
        sn->fm =
            node->mem_mb > node->alloc_mem_mb ? (int64_t)(node->mem_mb - node->alloc_mem_mb) : 0;
        if (sn->usable)
            ps->free_cpus += sn->fc;
    }
    ps->np = f->nodes.nparts;
    ps->parts = calloc(ps->np ? ps->np : 1, sizeof(*ps->parts));
    if (ps->parts == NULL)
        return -1;
    for (size_t k = 0; k < ps->np; k++) {
        const struct fsm_part *p = &f->nodes.parts[k];
        struct sched_part *sp = &ps->parts[k];
        sp->p = p;
        size_t want = p->all ? ps->nn : p->nnodes;
        sp->idx = malloc((want ? want : 1) * sizeof(*sp->idx));
        if (sp->idx == NULL)
            return -1;
        if (p->all) {
            for (size_t i = 0; i < ps->nn; i++)
                sp->idx[i] = (uint32_t)i;
            sp->n = ps->nn;
            continue;
        }
        for (size_t i = 0; i < p->nnodes; i++) {
            long at = node_index(f, p->nodes[i]);
            if (at >= 0)
                sp->idx[sp->n++] = (uint32_t)at;
        }
        qsort(sp->idx, sp->n, sizeof(*sp->idx), cmp_u32);
    }
    return 0;
}

static int cmp_pend(const void *a, const void *b)
{
    const struct sched_pend *x = a, *y = b;
    if (x->elig != y->elig)
        return x->elig < y->elig ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static bool pend_before(const struct sched_pend *x, const struct sched_pend *y)
{
    return cmp_pend(x, y) < 0;
}

static bool job_placed(const struct fsm_job *job)
{
    return job->run != NULL && (job->state == JS_RUNNING || job->state == JS_COMPLETING ||
                                job->state == JS_CONFIGURING);
}

/*
 * The pending jobs that may run now, in priority order, into *out (*n of them), and the
 * placed jobs into ps->placed_jobs.
 */
static int collect_jobs(struct pass *ps, struct sched_pend **out, size_t *n)
{
    const struct fsm_jobs *jobs = &ps->f->jobs;
    size_t npend = (size_t)jobs->by_state[JS_PENDING];
    struct sched_pend *inorder = malloc((npend ? npend : 1) * sizeof(*inorder));
    struct sched_pend *other = malloc((npend ? npend : 1) * sizeof(*other));
    if (inorder == NULL || other == NULL) {
        free(inorder);
        free(other);
        return -1;
    }
    size_t ni = 0, no = 0;
    for (size_t k = 0; k < jobs->norder; k++) {
        const struct fsm_job *job = jobs->order[k];
        if (job == NULL)
            continue;
        if (job_placed(job)) {
            if (grow((void **)&ps->placed_jobs, &ps->cap_placed_jobs, ps->nplaced_jobs + 1,
                     sizeof(*ps->placed_jobs)) != 0)
                goto nomem;
            ps->placed_jobs[ps->nplaced_jobs++] = job;
            continue;
        }
        if (job->state != JS_PENDING || job->held || job->eligible_ms > ps->now)
            continue;
        /* Waiting on other jobs, or on a singleton of its name (rare: one walk each). */
        if (job->deps != NULL && (job->deps->state != FSM_DEP_MET ||
                                  (job->deps->singleton && fsm_state_singleton_busy(ps->f, job))))
            continue;
        if (ni + no >= npend)
            break; /* the counts say there are no more (cannot happen) */
        struct sched_pend pe = {job->eligible_ms, job->id, job};
        /* Eligible since submit and not before the last in-order one: already in order. */
        if (job->eligible_ms == job->submit_ms && (ni == 0 || !pend_before(&pe, &inorder[ni - 1])))
            inorder[ni++] = pe;
        else
            other[no++] = pe;
    }
    qsort(other, no, sizeof(*other), cmp_pend);
    struct sched_pend *all = malloc((ni + no ? ni + no : 1) * sizeof(*all));
    if (all == NULL)
        goto nomem;
    size_t a = 0, b = 0, w = 0;
    while (a < ni || b < no) {
        if (b == no || (a < ni && pend_before(&inorder[a], &other[b])))
            all[w++] = inorder[a++];
        else
            all[w++] = other[b++];
    }
    free(inorder);
    free(other);
    *out = all;
    *n = w;
    return 0;
nomem:
    free(inorder);
    free(other);
    return -1;
}

/* ---- timelines ----------------------------------------------------------------------- */

/* Insert an event keeping ev sorted by time (after those at the same time). */
static int ev_insert(struct sched_node *sn, uint64_t t, int64_t dc, int64_t dm)
{
    size_t cap = sn->cap;
    if (grow((void **)&sn->ev, &cap, (size_t)sn->nev + 1, sizeof(*sn->ev)) != 0)
        return -1;
    sn->cap = (uint32_t)cap;
    uint32_t at = sn->nev;
    while (at > 0 && sn->ev[at - 1].t > t)
        at--;
    memmove(&sn->ev[at + 1], &sn->ev[at], (sn->nev - at) * sizeof(*sn->ev));
    sn->ev[at] = (struct sched_ev){t, dc, dm};
    sn->nev++;
    return 0;
}

static int cmp_ev(const void *a, const void *b)
{
    const struct sched_ev *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static uint64_t job_end(const struct fsm_job *job, uint64_t now)
{
    if (job->time_limit_min == 0)
        return NEVER;
    uint64_t start = job->start_ms ? job->start_ms : now;
    uint64_t end = start + (uint64_t)job->time_limit_min * 60000u;
    return end > now ? end : now;
}

/*
 * The release events of the placed jobs and of this pass's placements so far, on the
 * usable nodes. Built once, on the first reservation; later placements add theirs.
 */
static int build_timeline(struct pass *ps)
{
    for (size_t k = 0; k < ps->nplaced_jobs; k++) {
        const struct fsm_job *job = ps->placed_jobs[k];
        uint64_t end = job_end(job, ps->now);
        if (end == NEVER)
            continue;
        int64_t c = (int64_t)fsm_job_cpus_per_node(job), m = (int64_t)job->mem_mb;
        for (uint32_t i = 0; i < job->run->n; i++) {
            if (job->run->done[i])
                continue;
            long at = node_index(ps->f, job->run->nodes[i]);
            if (at < 0 || !ps->nodes[at].usable)
                continue;
            struct sched_node *sn = &ps->nodes[at];
            size_t cap = sn->cap;
            if (grow((void **)&sn->ev, &cap, (size_t)sn->nev + 1, sizeof(*sn->ev)) != 0)
                return -1;
            sn->cap = (uint32_t)cap;
            sn->ev[sn->nev++] = (struct sched_ev){end, c, m};
        }
    }
    for (size_t i = 0; i < ps->nn; i++)
        if (ps->nodes[i].nev > 1)
            qsort(ps->nodes[i].ev, ps->nodes[i].nev, sizeof(struct sched_ev), cmp_ev);
    for (size_t k = 0; k < ps->nplaced; k++) {
        const struct sched_placed *pl = &ps->placed[k];
        if (pl->end == NEVER)
            continue;
        for (uint32_t i = 0; i < pl->n; i++)
            if (ev_insert(&ps->nodes[ps->picked[pl->off + i]], pl->end, (int64_t)pl->cpus,
                          (int64_t)pl->mem) != 0)
                return -1;
    }
    ps->timeline = true;
    return 0;
}

static bool level_holds(int64_t lc, int64_t lm, uint64_t c, uint64_t m)
{
    return lc >= (int64_t)c && (m == 0 || lm >= (int64_t)m);
}

/*
 * Whether a job taking (c, m) now on this node, until end, leaves every reservation on
 * it whole: what the node has free stays >= (c, m) at every change before end. The
 * caller checked the free amount now.
 */
static bool window_ok(const struct sched_node *sn, uint64_t c, uint64_t m, uint64_t end)
{
    int64_t lc = sn->fc, lm = sn->fm;
    for (uint32_t k = 0; k < sn->nev && sn->ev[k].t < end;) {
        uint64_t t = sn->ev[k].t;
        for (; k < sn->nev && sn->ev[k].t == t; k++) {
            lc += sn->ev[k].dc;
            lm += sn->ev[k].dm;
        }
        if (!level_holds(lc, lm, c, m))
            return false;
    }
    return true;
}

/*
 * The earliest s >= t0 at which the node's timeline holds (c, m) throughout
 * [s, s + dur), or NEVER. The free amount is piecewise constant between events.
 */
static uint64_t earliest_start(const struct sched_node *sn, uint64_t now, uint64_t t0, uint64_t c,
                               uint64_t m, uint64_t dur)
{
    int64_t lc = sn->fc, lm = sn->fm;
    uint64_t seg_start = now;
    uint64_t s = NEVER;
    uint32_t k = 0;
    for (;;) {
        uint64_t seg_end = k < sn->nev ? sn->ev[k].t : NEVER;
        if (seg_end > t0 || k == sn->nev) {
            if (s != NEVER && dur != NEVER && s + dur <= seg_start)
                return s;
            if (level_holds(lc, lm, c, m)) {
                if (s == NEVER)
                    s = seg_start > t0 ? seg_start : t0;
            } else {
                s = NEVER;
            }
        }
        if (k == sn->nev)
            return s;
        uint64_t t = sn->ev[k].t;
        for (; k < sn->nev && sn->ev[k].t == t; k++) {
            lc += sn->ev[k].dc;
            lm += sn->ev[k].dm;
        }
        seg_start = t;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * Reserve (c, m) for dur on nnodes nodes of sp from the earliest time they all can hold
 * it. Returns 1 when reserved, 0 when no such time was found, -1 out of memory.
 */
static int reserve(struct pass *ps, const struct sched_part *sp, uint32_t nnodes, uint64_t c,
                   uint64_t m, uint64_t dur)
{
    if (!ps->timeline && build_timeline(ps) != 0)
        return -1;
    uint64_t t = ps->now;
    for (int step = 0; step < SCHED_MAX_STEPS; step++) {
        size_t nt = 0;
        for (size_t k = 0; k < sp->n; k++) {
            const struct sched_node *sn = &ps->nodes[sp->idx[k]];
            if (!sn->usable)
                continue;
            uint64_t e = earliest_start(sn, ps->now, t, c, m, dur);
            if (e != NEVER)
                ps->times[nt++] = e;
        }
        if (nt < nnodes)
            return 0;
        qsort(ps->times, nt, sizeof(*ps->times), cmp_u64);
        uint64_t at = ps->times[nnodes - 1];
        if (at != t) {
            t = at;
            continue;
        }
        uint32_t got = 0;
        for (size_t k = 0; k < sp->n && got < nnodes; k++) {
            struct sched_node *sn = &ps->nodes[sp->idx[k]];
            if (!sn->usable || earliest_start(sn, ps->now, t, c, m, dur) != t)
                continue;
            if (ev_insert(sn, t, -(int64_t)c, -(int64_t)m) != 0)
                return -1;
            if (dur != NEVER && ev_insert(sn, t + dur, (int64_t)c, (int64_t)m) != 0)
                return -1;
            sn->nclaims++;
            got++;
        }
        return 1;
    }
    return 0;
}

/* ---- the memo ------------------------------------------------------------------------ */

static size_t memo_slot(const struct sched_memo *mo, const struct sched_memo_ent *k)
{
    uint64_t h = (uint64_t)k->part * 0x9e3779b97f4a7c15ull + k->nodes;
    h = (h ^ k->cpus) * 0x9e3779b97f4a7c15ull;
    h = (h ^ k->mem) * 0x9e3779b97f4a7c15ull;
    h = (h ^ k->dur ^ k->kind) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    return (size_t)(h & (mo->cap - 1));
}

static bool memo_same(const struct sched_memo_ent *a, const struct sched_memo_ent *b)
{
    return a->kind == b->kind && a->part == b->part && a->nodes == b->nodes && a->cpus == b->cpus &&
           a->mem == b->mem && a->dur == b->dur;
}

static bool memo_has(const struct sched_memo *mo, const struct sched_memo_ent *k)
{
    if (mo->cap == 0)
        return false;
    for (size_t i = memo_slot(mo, k);; i = (i + 1) & (mo->cap - 1)) {
        if (mo->e[i].kind == 0)
            return false;
        if (memo_same(&mo->e[i], k))
            return true;
    }
}

static int memo_add(struct sched_memo *mo, const struct sched_memo_ent *k)
{
    if ((mo->n + 1) * 2 > mo->cap) {
        struct sched_memo old = *mo;
        mo->cap = old.cap ? old.cap * 2 : 256;
        mo->e = calloc(mo->cap, sizeof(*mo->e));
        if (mo->e == NULL) {
            *mo = old;
            return -1;
        }
        mo->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.e[i].kind != 0 && memo_add(mo, &old.e[i]) != 0)
                return -1;
        free(old.e);
    }
    size_t i = memo_slot(mo, k);
    while (mo->e[i].kind != 0)
        i = (i + 1) & (mo->cap - 1);
    mo->e[i] = *k;
    mo->n++;
    return 0;
}

/* ---- one job ------------------------------------------------------------------------- */

/* Whether the partition as it is lets this job run at all (see fsm_state_pending_reason). */
static bool part_allows(const struct fsm_part *p, const struct fsm_job *job, uint64_t cpus)
{
    if (!p->up)
        return false;
    if (p->max_nodes != 0 && job->nodes > p->max_nodes)
        return false;
    if (p->max_time_min != 0 && (job->time_limit_min == 0 || job->time_limit_min > p->max_time_min))
        return false;
    if (p->max_cpus_per_node != 0 && cpus > p->max_cpus_per_node)
        return false;
    if (p->max_mem_mb_per_node != 0 && job->mem_mb > p->max_mem_mb_per_node)
        return false;
    return true;
}

static struct sched_part *find_part(struct pass *ps, const char *name, uint32_t *index)
{
    for (size_t k = 0; k < ps->np; k++) {
        if (strcmp(ps->parts[k].p->name, name) == 0) {
            *index = (uint32_t)k;
            return &ps->parts[k];
        }
    }
    return NULL;
}

/* Charge a placement on the chosen nodes (ps->scratch[0..n)) and record it. */
static int place(struct pass *ps, const struct fsm_job *job, uint32_t n, uint64_t c, uint64_t m,
                 uint64_t end)
{
    if (grow((void **)&ps->placed, &ps->cap_placed, ps->nplaced + 1, sizeof(*ps->placed)) != 0 ||
        grow((void **)&ps->picked, &ps->cap_picked, ps->npicked + n, sizeof(*ps->picked)) != 0)
        return -1;
    ps->placed[ps->nplaced++] = (struct sched_placed){job->id, ps->npicked, n, c, m, end};
    for (uint32_t i = 0; i < n; i++) {
        uint32_t at = ps->scratch[i];
        struct sched_node *sn = &ps->nodes[at];
        sn->fc -= (int64_t)c;
        sn->fm -= (int64_t)m;
        ps->free_cpus -= (int64_t)c;
        ps->picked[ps->npicked++] = at;
        if (ps->timeline && end != NEVER && ev_insert(sn, end, (int64_t)c, (int64_t)m) != 0)
            return -1;
    }
    return 0;
}

/*
 * Look at one pending job: place it now, or reserve for it, or pass it over.
 * Returns 0 or -1 (out of memory).
 */
static int consider(struct pass *ps, const struct fsm_job *job, uint32_t max_res,
                    struct fsm_sched_result *out)
{
    uint32_t pi;
    struct sched_part *sp = find_part(ps, job->partition, &pi);
    uint64_t c = fsm_job_cpus_per_node(job), m = job->mem_mb;
    if (sp == NULL || !part_allows(sp->p, job, c) || job->nodes > sp->n)
        return 0;
    uint64_t dur = job->time_limit_min ? (uint64_t)job->time_limit_min * 60000u : NEVER;
    uint64_t end = dur == NEVER ? NEVER : ps->now + dur;
    struct sched_memo_ent nofit = {c, m, 0, pi, job->nodes, 1};
    struct sched_memo_ent blocked = {c, m, dur, pi, job->nodes, 2};

    bool refused =
        memo_has(&ps->memo, &nofit) || (out->reservations > 0 && memo_has(&ps->memo, &blocked));
    if (!refused) {
        while (sp->first < sp->n && ps->nodes[sp->idx[sp->first]].fc <= 0)
            sp->first++;
        uint32_t got = 0, fit_free = 0;
        for (size_t k = sp->first; k < sp->n && got < job->nodes; k++) {
            const struct sched_node *sn = &ps->nodes[sp->idx[k]];
            if (!sn->usable || !level_holds(sn->fc, sn->fm, c, m))
                continue;
            fit_free++;
            if (sn->nclaims > 0 && !window_ok(sn, c, m, end))
                continue;
            ps->scratch[got++] = sp->idx[k];
        }
        if (got == job->nodes) {
            if (place(ps, job, got, c, m, end) != 0)
                return -1;
            if (out->reservations > 0)
                out->backfilled++;
            return 0;
        }
        if (memo_add(&ps->memo, fit_free < job->nodes ? &nofit : &blocked) != 0)
            return -1;
    }
    struct sched_memo_ent never = {c, m, dur, pi, job->nodes, 3};
    if (out->reservations >= max_res || memo_has(&ps->memo, &never))
        return 0;
    int rc = reserve(ps, sp, job->nodes, c, m, dur);
    if (rc < 0 || (rc == 0 && memo_add(&ps->memo, &never) != 0))
        return -1;
    out->reservations += (uint64_t)rc;
    return 0;
}

/* ---- the pass ------------------------------------------------------------------------ */

static void pass_free(struct pass *ps)
{
    if (ps->nodes != NULL)
        for (size_t i = 0; i < ps->nn; i++)
            free(ps->nodes[i].ev);
    free(ps->nodes);
    if (ps->parts != NULL)
        for (size_t k = 0; k < ps->np; k++)
            free(ps->parts[k].idx);
    free(ps->parts);
    free(ps->placed_jobs);
    free(ps->placed);
    free(ps->picked);
    free(ps->scratch);
    free(ps->times);
    free(ps->memo.e);
}

/* The result from this pass's placements: names borrowed from the state. */
static int fill_result(struct pass *ps, struct fsm_sched_result *out)
{
    out->v = calloc(ps->nplaced ? ps->nplaced : 1, sizeof(*out->v));
    const char **names = malloc((ps->npicked ? ps->npicked : 1) * sizeof(*names));
    if (out->v == NULL || names == NULL) {
        free(names);
        return -1;
    }
    for (size_t i = 0; i < ps->npicked; i++)
        names[i] = ps->nodes[ps->picked[i]].node->name;
    for (size_t k = 0; k < ps->nplaced; k++) {
        out->v[k].job_id = ps->placed[k].job_id;
        out->v[k].nnodes = ps->placed[k].n;
        out->v[k].nodes = names + ps->placed[k].off;
    }
    out->n = ps->nplaced;
    out->priv = names;
    return 0;
}

int fsm_sched_pass(const struct fsm *f, const struct fsm_sched_opts *o,
                   struct fsm_sched_result *out)
{
    memset(out, 0, sizeof(*out));
    uint32_t max_res = o->max_reservations ? o->max_reservations : SCHED_DEFAULT_RESERVATIONS;
    uint32_t max_alloc = o->max_allocations ? o->max_allocations : SCHED_DEFAULT_ALLOCATIONS;
    struct pass ps = {.f = f, .now = o->now_ms > f->now_ms ? o->now_ms : f->now_ms};
    struct sched_pend *pend = NULL;
    size_t npend = 0;
    if (setup_nodes(&ps) != 0)
        goto nomem;
    /* With no free CPU on a usable node nothing can be placed, and the reservations are
     * only computed for jobs the loop below considers: skip the walk over every job (with
     * tens of thousands pending and no room, it was most of the leader's time). */
    if (ps.free_cpus > 0 && collect_jobs(&ps, &pend, &npend) != 0)
        goto nomem;
    for (size_t k = 0; k < npend && ps.nplaced < max_alloc && ps.free_cpus > 0; k++) {
        out->jobs_tested++;
        if (consider(&ps, pend[k].job, max_res, out) != 0)
            goto nomem;
    }
    if (fill_result(&ps, out) != 0)
        goto nomem;
    free(pend);
    pass_free(&ps);
    return FSM_OK;
nomem:
    free(pend);
    pass_free(&ps);
    fsm_sched_result_free(out);
    return FSM_ENOMEM;
}

void fsm_sched_result_free(struct fsm_sched_result *r)
{
    free(r->v);
    free(r->priv);
    memset(r, 0, sizeof(*r));
}

int fsm_encode_allocations(const struct fsm_sched_result *r, uint64_t time_ms, uint8_t **out,
                           size_t *len)
{
    if (r->n == 0)
        return FSM_EINVAL;
    Spur__Fsm__Allocation *a = calloc(r->n, sizeof(*a));
    Spur__Fsm__Allocation **ap = calloc(r->n, sizeof(*ap));
    if (a == NULL || ap == NULL) {
        free(a);
        free(ap);
        return FSM_ENOMEM;
    }
    for (size_t i = 0; i < r->n; i++) {
        spur__fsm__allocation__init(&a[i]);
        a[i].job_id = r->v[i].job_id;
        a[i].n_nodes = r->v[i].nnodes;
        a[i].nodes = (char **)r->v[i].nodes; /* read only by the packer */
        ap[i] = &a[i];
    }
    Spur__Fsm__JobsAllocated ja = SPUR__FSM__JOBS_ALLOCATED__INIT;
    ja.n_allocations = r->n;
    ja.allocations = ap;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.time_ms = time_ms;
    c.op_case = SPUR__FSM__COMMAND__OP_JOBS_ALLOCATED;
    c.jobs_allocated = &ja;
    int rc = fsm_encode_command(&c, out, len);
    free(a);
    free(ap);
    return rc;
}
