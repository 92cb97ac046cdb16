/*
 * fsm_state.c - struct fsm's lifetime, pending reasons, node allocation. See fsm_state.h.
 */
#include "fsm_state.h"

#include <string.h>

void fsm_state_init(struct fsm *f, const struct fsm_limits *lim)
{
    memset(f, 0, sizeof(*f));
    if (lim != NULL)
        f->lim = *lim;
    else
        fsm_limits_default(&f->lim);
    f->next_job_id = 1;
    f->retention_s = f->lim.finished_job_retention_s;
    f->max_script_bytes = f->lim.max_script_bytes;
    fsm_jobs_init(&f->jobs);
    fsm_nodes_init(&f->nodes);
    fsm_sess_init(&f->sess);
    fsm_acct_init(&f->acct);
}

void fsm_state_free(struct fsm *f)
{
    fsm_jobs_free(&f->jobs);
    fsm_nodes_free(&f->nodes);
    fsm_sess_free(&f->sess);
    fsm_acct_free(&f->acct);
    fsm_evrec_free(&f->ev);
}

/* Whether node has cpus and mem_mb free for one more job part now. */
static bool node_fits(const struct fsm_node *node, uint64_t cpus, uint64_t mem_mb)
{
    if (!fsm_node_usable(node))
        return false;
    uint64_t free_cpus = node->cpus > node->alloc_cpus ? node->cpus - node->alloc_cpus : 0;
    uint64_t free_mem = node->mem_mb > node->alloc_mem_mb ? node->mem_mb - node->alloc_mem_mb : 0;
    return free_cpus >= cpus && (mem_mb == 0 || free_mem >= mem_mb);
}

/* Whether at least `nodes` nodes of the partition could take a part of this size now. */
static bool partition_fits(const struct fsm *f, const struct fsm_part *p, uint32_t nodes,
                           uint64_t cpus, uint64_t mem_mb)
{
    uint32_t found = 0;
    if (p->all) {
        for (size_t i = 0; i < f->nodes.n && found < nodes; i++)
            if (node_fits(f->nodes.v[i], cpus, mem_mb))
                found++;
    } else {
        for (size_t i = 0; i < p->nnodes && found < nodes; i++) {
            const struct fsm_node *node = fsm_nodes_find(&f->nodes, p->nodes[i]);
            if (node != NULL && node_fits(node, cpus, mem_mb))
                found++;
        }
    }
    return found >= nodes;
}

static bool cached_fits(const struct fsm *f, const struct fsm_part *p, uint32_t nodes,
                        uint64_t cpus, uint64_t mem_mb, struct fsm_fit_cache *cache)
{
    if (cache == NULL)
        return partition_fits(f, p, nodes, cpus, mem_mb);
    uint64_t h = (uint64_t)(uintptr_t)p * 31u + nodes;
    h = h * 0x9e3779b97f4a7c15ull + cpus;
    h = h * 0x9e3779b97f4a7c15ull + mem_mb;
    h ^= h >> 29;
    size_t i = (size_t)(h % FSM_FIT_CACHE);
    if (cache->e[i].part == p && cache->e[i].nodes == nodes && cache->e[i].cpus == cpus &&
        cache->e[i].mem_mb == mem_mb)
        return cache->e[i].fits;
    bool fits = partition_fits(f, p, nodes, cpus, mem_mb);
    cache->e[i].part = p;
    cache->e[i].nodes = nodes;
    cache->e[i].cpus = cpus;
    cache->e[i].mem_mb = mem_mb;
    cache->e[i].fits = fits;
    return fits;
}

/* Where a pending job stands before jobs are compared with each other. */
enum line {
    L_HELD,
    L_DEPENDENCY, /* waits on other jobs, or on a singleton of its name */
    L_DEP_NEVER,  /* its dependency can never be met */
    L_BEGIN_TIME,
    L_PART_GONE,
    L_PART_DOWN,
    L_NODE_LIMIT,
    L_TIME_LIMIT,
    L_PART_CONFIG,
    L_NOT_AVAIL,
    L_FITS,
    L_BLOCKED, /* in line, does not fit now: Resources or Priority */
};

static bool part_has_usable(const struct fsm *f, const struct fsm_part *p,
                            struct fsm_fit_cache *cache)
{
    size_t pi = (size_t)(p - f->nodes.parts);
    if (cache->usable[pi] != 0)
        return cache->usable[pi] == 1;
    bool any = false;
    if (p->all) {
        for (size_t i = 0; i < f->nodes.n && !any; i++)
            any = fsm_node_usable(f->nodes.v[i]);
    } else {
        for (size_t i = 0; i < p->nnodes && !any; i++) {
            const struct fsm_node *node = fsm_nodes_find(&f->nodes, p->nodes[i]);
            any = node != NULL && fsm_node_usable(node);
        }
    }
    cache->usable[pi] = any ? 1 : 2;
    return any;
}

static enum line job_line(const struct fsm *f, const struct fsm_job *job,
                          struct fsm_fit_cache *cache, const struct fsm_part **part)
{
    if (job->held)
        return L_HELD;
    if (job->deps != NULL) {
        if (job->deps->state == FSM_DEP_WAIT)
            return L_DEPENDENCY;
        if (job->deps->state == FSM_DEP_FAILED)
            return L_DEP_NEVER;
        if (job->deps->singleton && fsm_state_singleton_busy(f, job))
            return L_DEPENDENCY;
    }
    if (job->eligible_ms > f->now_ms)
        return L_BEGIN_TIME;
    const struct fsm_part *p = fsm_nodes_part(&f->nodes, job->partition);
    *part = p;
    if (p == NULL)
        return L_PART_GONE;
    if (!p->up)
        return L_PART_DOWN;
    if (p->max_nodes != 0 && job->nodes > p->max_nodes)
        return L_NODE_LIMIT;
    if (p->max_time_min != 0 && (job->time_limit_min == 0 || job->time_limit_min > p->max_time_min))
        return L_TIME_LIMIT;
    uint64_t cpus = fsm_job_cpus_per_node(job);
    if ((p->max_cpus_per_node != 0 && cpus > p->max_cpus_per_node) ||
        (p->max_mem_mb_per_node != 0 && job->mem_mb > p->max_mem_mb_per_node))
        return L_PART_CONFIG;
    if (!part_has_usable(f, p, cache))
        return L_NOT_AVAIL;
    if (cached_fits(f, p, job->nodes, cpus, job->mem_mb, cache))
        return L_FITS;
    return L_BLOCKED;
}

static bool key_before(uint64_t e1, uint64_t id1, uint64_t e2, uint64_t id2)
{
    return e1 != e2 ? e1 < e2 : id1 < id2;
}

/* One walk: the first blocked pending job of each partition. */
static void find_blocked(const struct fsm *f, struct fsm_fit_cache *cache)
{
    cache->blocked_known = true;
    for (size_t i = 0; i < f->jobs.norder; i++) {
        const struct fsm_job *job = f->jobs.order[i];
        if (job == NULL || job->state != SPUR__API__JOB_STATE__JOB_PENDING)
            continue;
        const struct fsm_part *p = NULL;
        if (job_line(f, job, cache, &p) != L_BLOCKED)
            continue;
        size_t pi = (size_t)(p - f->nodes.parts);
        if (!cache->blocked[pi].any ||
            key_before(job->eligible_ms, job->id, cache->blocked[pi].eligible_ms,
                       cache->blocked[pi].id)) {
            cache->blocked[pi].any = true;
            cache->blocked[pi].eligible_ms = job->eligible_ms;
            cache->blocked[pi].id = job->id;
        }
    }
}

static const char *pending_reason(const struct fsm *f, const struct fsm_job *job,
                                  struct fsm_fit_cache *cache)
{
    const struct fsm_part *p = NULL;
    switch (job_line(f, job, cache, &p)) {
    case L_HELD:
        return "JobHeldUser";
    case L_DEPENDENCY:
        return "Dependency";
    case L_DEP_NEVER:
        return "DependencyNeverSatisfied";
    case L_BEGIN_TIME:
        return "BeginTime";
    case L_PART_GONE:
    case L_PART_CONFIG:
        return "PartitionConfig";
    case L_PART_DOWN:
        return "PartitionDown";
    case L_NODE_LIMIT:
        return "PartitionNodeLimit";
    case L_TIME_LIMIT:
        return "PartitionTimeLimit";
    case L_NOT_AVAIL:
        return "ReqNodeNotAvail";
    case L_FITS:
        return "None";
    case L_BLOCKED:
        break;
    }
    if (!cache->blocked_known)
        find_blocked(f, cache);
    size_t pi = (size_t)(p - f->nodes.parts);
    if (cache->blocked[pi].any && key_before(cache->blocked[pi].eligible_ms, cache->blocked[pi].id,
                                             job->eligible_ms, job->id))
        return "Priority";
    return "Resources";
}

bool fsm_state_singleton_busy(const struct fsm *f, const struct fsm_job *job)
{
    for (size_t i = 0; i < f->jobs.norder; i++) {
        const struct fsm_job *o = f->jobs.order[i];
        if (o == NULL || o == job || o->uid != job->uid || strcmp(o->name, job->name) != 0 ||
            strcmp(o->user, job->user) != 0)
            continue;
        if (fsm_job_state_placed(o->state))
            return true;
        if (o->id < job->id && o->state == SPUR__API__JOB_STATE__JOB_PENDING && !o->held &&
            o->deps != NULL && o->deps->singleton && o->deps->state == FSM_DEP_MET)
            return true;
    }
    return false;
}

const char *fsm_state_pending_reason(const struct fsm *f, const struct fsm_job *job,
                                     struct fsm_fit_cache *cache)
{
    if (cache != NULL)
        return pending_reason(f, job, cache);
    struct fsm_fit_cache own; /* about 12 KiB: one call's worth */
    memset(&own, 0, sizeof(own));
    return pending_reason(f, job, &own);
}

/*
 * Whether another blocked pending job of p comes before job (by eligible time, then id):
 * the Priority test of pending_reason() without its walk of every job. It looks from the
 * newest job back and stops at the first one found, so a burst of submits to a full
 * partition costs O(1) each (the job before is such a job), not O(jobs).
 */
static bool blocked_before(const struct fsm *f, const struct fsm_job *job, const struct fsm_part *p,
                           struct fsm_fit_cache *cache)
{
    for (size_t i = f->jobs.norder; i-- > 0;) {
        const struct fsm_job *o = f->jobs.order[i];
        if (o == NULL || o == job || o->state != SPUR__API__JOB_STATE__JOB_PENDING ||
            !key_before(o->eligible_ms, o->id, job->eligible_ms, job->id))
            continue;
        const struct fsm_part *op = NULL;
        if (job_line(f, o, cache, &op) == L_BLOCKED && op == p)
            return true;
    }
    return false;
}

const char *fsm_state_job_reason_one(const struct fsm *f, const struct fsm_job *job)
{
    if (job->state != SPUR__API__JOB_STATE__JOB_PENDING)
        return fsm_state_job_reason(f, job, NULL);
    struct fsm_fit_cache own;
    memset(&own, 0, sizeof(own));
    const struct fsm_part *p = NULL;
    if (job_line(f, job, &own, &p) != L_BLOCKED)
        return pending_reason(f, job, &own);
    return blocked_before(f, job, p, &own) ? "Priority" : "Resources";
}

const char *fsm_state_job_reason(const struct fsm *f, const struct fsm_job *job,
                                 struct fsm_fit_cache *cache)
{
    if (job->state == SPUR__API__JOB_STATE__JOB_PENDING)
        return fsm_state_pending_reason(f, job, cache);
    if (fsm_job_state_final(job->state))
        return fsm_end_reason_name(job->end_reason);
    return "None";
}

void fsm_state_alloc_job(struct fsm *f, const struct fsm_job *job)
{
    uint64_t cpus = fsm_job_cpus_per_node(job);
    for (uint32_t i = 0; i < job->run->n; i++) {
        if (job->run->done[i])
            continue;
        struct fsm_node *node = fsm_nodes_find(&f->nodes, job->run->nodes[i]);
        if (node == NULL)
            continue;
        node->alloc_cpus += (uint32_t)cpus;
        node->alloc_mem_mb += job->mem_mb;
        node->njobs++;
    }
}

void fsm_state_release_part(struct fsm *f, struct fsm_job *job, uint32_t i)
{
    if (job->run == NULL || i >= job->run->n || job->run->done[i])
        return;
    job->run->done[i] = true;
    job->run->ndone++;
    struct fsm_node *node = fsm_nodes_find(&f->nodes, job->run->nodes[i]);
    if (node == NULL)
        return;
    uint64_t cpus = fsm_job_cpus_per_node(job);
    node->alloc_cpus = node->alloc_cpus > cpus ? node->alloc_cpus - (uint32_t)cpus : 0;
    node->alloc_mem_mb = node->alloc_mem_mb > job->mem_mb ? node->alloc_mem_mb - job->mem_mb : 0;
    if (node->njobs > 0)
        node->njobs--;
}
