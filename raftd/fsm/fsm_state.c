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
}

void fsm_state_free(struct fsm *f)
{
    fsm_jobs_free(&f->jobs);
    fsm_nodes_free(&f->nodes);
    fsm_sess_free(&f->sess);
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

const char *fsm_state_pending_reason(const struct fsm *f, const struct fsm_job *job,
                                     struct fsm_fit_cache *cache)
{
    if (job->held)
        return "JobHeldUser";
    const struct fsm_part *p = fsm_nodes_part(&f->nodes, job->partition);
    if (p == NULL)
        return "PartitionConfig";
    if (!p->up)
        return "PartitionDown";
    if (p->max_nodes != 0 && job->nodes > p->max_nodes)
        return "PartitionNodeLimit";
    if (p->max_time_min != 0 && (job->time_limit_min == 0 || job->time_limit_min > p->max_time_min))
        return "PartitionTimeLimit";
    uint64_t cpus = fsm_job_cpus_per_node(job);
    if ((p->max_cpus_per_node != 0 && cpus > p->max_cpus_per_node) ||
        (p->max_mem_mb_per_node != 0 && job->mem_mb > p->max_mem_mb_per_node))
        return "PartitionConfig";
    if (!cached_fits(f, p, job->nodes, cpus, job->mem_mb, cache))
        return "Resources";
    return "None";
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
