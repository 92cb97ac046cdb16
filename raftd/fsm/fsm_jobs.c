/*
 * fsm_jobs.c - job records, the id map, the id-ordered array and the finished list.
 * See fsm_jobs.h.
 */
#include "fsm_jobs.h"

#include "names.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define PB_STR(s) ((s) != NULL ? (s) : "")

static const char *const end_reason_names[FSM_END_NREASONS] = {
    "None",
    "NonZeroExitCode",
    "TimeLimit",
    "NodeFail",
    "OutOfMemory",
    "JobLaunchFailure",
    "DependencyNeverSatisfied",
};

const char *fsm_job_state_name(int state)
{
    return names_job_state_name(state);
}

const char *fsm_end_reason_name(int reason)
{
    if (reason < 0 || reason >= FSM_END_NREASONS)
        return "None";
    return end_reason_names[reason];
}

bool fsm_job_state_final(int state)
{
    return (state >= SPUR__API__JOB_STATE__JOB_COMPLETED &&
            state <= SPUR__API__JOB_STATE__JOB_NODE_FAIL) ||
           state == SPUR__API__JOB_STATE__JOB_OUT_OF_MEMORY;
}

bool fsm_job_state_placed(int state)
{
    return state == SPUR__API__JOB_STATE__JOB_CONFIGURING ||
           state == SPUR__API__JOB_STATE__JOB_RUNNING ||
           state == SPUR__API__JOB_STATE__JOB_COMPLETING;
}

uint64_t fsm_job_cpus_per_node(const struct fsm_job *job)
{
    uint32_t nodes = job->nodes ? job->nodes : 1;
    uint64_t tasks_per_node = ((uint64_t)job->ntasks + nodes - 1) / nodes;
    return tasks_per_node * job->cpus_per_task;
}

/* ---- one job ------------------------------------------------------------------------ */

/* Copy s (NUL included) to *at and advance it; returns the copy. */
static char *put_str(char **at, const char *s)
{
    size_t n = strlen(s) + 1;
    char *dst = *at;
    memcpy(dst, s, n);
    *at += n;
    return dst;
}

struct fsm_job *fsm_job_new(const Spur__Api__JobSpec *spec, const char *user, const char *partition)
{
    const char *strs[] = {
        PB_STR(spec->name),    partition, PB_STR(spec->stdout_path), PB_STR(spec->stderr_path),
        PB_STR(spec->workdir), user,      PB_STR(spec->account)};
    size_t nstr = sizeof(strs) / sizeof(strs[0]);
    size_t nenv = spec->n_env;
    size_t script_len = spec->script.data != NULL ? spec->script.len : 0;

    /* Blob: env pointers first (aligned at the start), then strings, then the script. */
    size_t bytes = nenv * sizeof(char *);
    for (size_t i = 0; i < nstr; i++)
        bytes += strlen(strs[i]) + 1;
    for (size_t i = 0; i < nenv; i++)
        bytes += strlen(PB_STR(spec->env[i])) + 1;
    bytes += script_len;

    struct fsm_job *job = calloc(1, sizeof(*job));
    if (job == NULL)
        return NULL;
    job->blob = malloc(bytes ? bytes : 1);
    if (job->blob == NULL) {
        free(job);
        return NULL;
    }
    job->env = (char **)job->blob;
    char *at = (char *)job->blob + nenv * sizeof(char *);
    job->name = put_str(&at, strs[0]);
    job->partition = put_str(&at, strs[1]);
    job->stdout_path = put_str(&at, strs[2]);
    job->stderr_path = put_str(&at, strs[3]);
    job->workdir = put_str(&at, strs[4]);
    job->user = put_str(&at, strs[5]);
    job->account = put_str(&at, strs[6]);
    for (size_t i = 0; i < nenv; i++)
        job->env[i] = put_str(&at, PB_STR(spec->env[i]));
    job->script = (uint8_t *)at;
    if (script_len > 0)
        memcpy(at, spec->script.data, script_len);
    job->nenv = (uint32_t)nenv;
    job->script_len = (uint32_t)script_len;
    job->hold_requested = spec->hold;
    job->requeue = spec->requeue;
    job->uid = spec->uid;
    job->gid = spec->gid;
    return job;
}

static size_t blob_bytes(const struct fsm_job *job)
{
    /* The script ends the blob. */
    return (size_t)(job->script - (uint8_t *)job->blob) + job->script_len;
}

static size_t run_bytes(uint32_t n)
{
    return sizeof(struct fsm_job_run) + n * (sizeof(bool) + sizeof(char *));
}

size_t fsm_job_bytes(const struct fsm_job *job)
{
    size_t b = sizeof(*job) + blob_bytes(job) + fsm_deps_bytes(job->deps);
    if (job->run != NULL) {
        b += run_bytes(job->run->n);
        for (uint32_t i = 0; i < job->run->n; i++)
            b += strlen(job->run->nodes[i]) + 1;
    }
    return b;
}

void fsm_job_free(struct fsm_job *job)
{
    if (job == NULL)
        return;
    free(job->run);
    free(job->deps);
    free(job->blob);
    free(job);
}

int fsm_job_set_run(struct fsm_job *job, char *const *nodes, uint32_t n)
{
    /* Header, name pointers, flags, then the names. */
    size_t bytes = sizeof(struct fsm_job_run) + n * sizeof(char *) + n * sizeof(bool);
    for (uint32_t i = 0; i < n; i++)
        bytes += strlen(nodes[i]) + 1;
    struct fsm_job_run *run = calloc(1, bytes);
    if (run == NULL)
        return -1;
    run->n = n;
    run->nodes = (char **)(run + 1);
    run->done = (bool *)(run->nodes + n);
    char *at = (char *)(run->done + n);
    for (uint32_t i = 0; i < n; i++)
        run->nodes[i] = put_str(&at, nodes[i]);
    free(job->run);
    job->run = run;
    return 0;
}

void fsm_job_fill_spec(const struct fsm_job *job, Spur__Api__JobSpec *spec, bool full)
{
    spur__api__job_spec__init(spec);
    spec->name = job->name;
    spec->partition = job->partition;
    spec->nodes = job->nodes;
    spec->ntasks = job->ntasks;
    spec->cpus_per_task = job->cpus_per_task;
    spec->mem_mb = job->mem_mb;
    spec->time_limit_min = job->time_limit_min;
    spec->stdout_path = job->stdout_path;
    spec->stderr_path = job->stderr_path;
    spec->workdir = job->workdir;
    spec->hold = job->hold_requested;
    spec->user = job->user;
    spec->uid = job->uid;
    spec->gid = job->gid;
    spec->requeue = job->requeue;
    spec->account = job->account;
    if (full) {
        spec->script.data = job->script;
        spec->script.len = job->script_len;
        spec->n_env = job->nenv;
        spec->env = job->env;
    }
}

/* ---- the table ------------------------------------------------------------------------ */

void fsm_jobs_init(struct fsm_jobs *j)
{
    memset(j, 0, sizeof(*j));
    fsm_map_init(&j->by_id);
    fsm_dep_index_init(&j->deps);
}

void fsm_jobs_free(struct fsm_jobs *j)
{
    for (size_t i = 0; i < j->norder; i++)
        fsm_job_free(j->order[i]);
    free(j->order);
    fsm_map_free(&j->by_id);
    fsm_dep_index_free(&j->deps);
    fsm_jobs_init(j);
}

struct fsm_job *fsm_jobs_find(const struct fsm_jobs *j, uint64_t id)
{
    return fsm_map_get(&j->by_id, id);
}

/* Drop the NULLs purges left in the ordered array, renumbering slots. */
static void compact(struct fsm_jobs *j)
{
    size_t k = 0;
    for (size_t i = 0; i < j->norder; i++) {
        if (j->order[i] != NULL) {
            j->order[k] = j->order[i];
            j->order[k]->slot = k;
            k++;
        }
    }
    j->norder = k;
}

int fsm_jobs_add(struct fsm_jobs *j, struct fsm_job *job)
{
    if (j->norder == j->cap) {
        if (j->count < j->norder / 2) {
            compact(j);
        } else {
            size_t cap = j->cap ? j->cap * 2 : 1024;
            struct fsm_job **order = realloc(j->order, cap * sizeof(*order));
            if (order == NULL)
                return -1;
            j->order = order;
            j->cap = cap;
        }
    }
    if (fsm_map_put(&j->by_id, job->id, job) != 0)
        return -1;
    job->slot = j->norder;
    j->order[j->norder++] = job;
    j->count++;
    if (job->state < FSM_JOB_NSTATES)
        j->by_state[job->state]++;
    j->bytes += fsm_job_bytes(job);
    return 0;
}

int fsm_jobs_set_run(struct fsm_jobs *j, struct fsm_job *job, char *const *nodes, uint32_t n)
{
    size_t before = fsm_job_bytes(job);
    if (fsm_job_set_run(job, nodes, n) != 0)
        return -1;
    j->bytes = j->bytes - before + fsm_job_bytes(job);
    return 0;
}

void fsm_jobs_clear_run(struct fsm_jobs *j, struct fsm_job *job)
{
    size_t before = fsm_job_bytes(job);
    free(job->run);
    job->run = NULL;
    j->bytes = j->bytes - before + fsm_job_bytes(job);
}

void fsm_jobs_set_state(struct fsm_jobs *j, struct fsm_job *job, int state)
{
    bool was_final = fsm_job_state_final(job->state);
    if ((job->state == SPUR__API__JOB_STATE__JOB_PENDING && state != job->state) ||
        (!was_final && fsm_job_state_final(state)))
        fsm_dep_index_fire(&j->deps, job->id);
    if (job->state < FSM_JOB_NSTATES)
        j->by_state[job->state]--;
    job->state = (uint8_t)state;
    j->by_state[state]++;
    if (!was_final && fsm_job_state_final(state)) {
        job->fin_next = NULL;
        if (j->fin_tail != NULL)
            j->fin_tail->fin_next = job;
        else
            j->fin_head = job;
        j->fin_tail = job;
    }
}

size_t fsm_jobs_purge(struct fsm_jobs *j, uint64_t cutoff_ms)
{
    size_t n = 0;
    while (j->fin_head != NULL && j->fin_head->end_ms <= cutoff_ms) {
        struct fsm_job *job = j->fin_head;
        j->fin_head = job->fin_next;
        if (j->fin_head == NULL)
            j->fin_tail = NULL;
        fsm_map_del(&j->by_id, job->id);
        j->order[job->slot] = NULL;
        j->count--;
        j->by_state[job->state]--;
        j->bytes -= fsm_job_bytes(job);
        fsm_job_free(job);
        n++;
    }
    /* Compact once the holes outnumber the jobs, so a walk stays proportional to them. */
    if (n > 0 && j->norder - j->count > j->count && j->norder > 64)
        compact(j);
    return n;
}

static int cmp_end(const void *a, const void *b)
{
    const struct fsm_job *x = *(const struct fsm_job *const *)a;
    const struct fsm_job *y = *(const struct fsm_job *const *)b;
    if (x->end_ms != y->end_ms)
        return x->end_ms < y->end_ms ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

int fsm_jobs_link_finished(struct fsm_jobs *j)
{
    size_t n = 0;
    for (size_t i = 0; i < j->norder; i++)
        if (j->order[i] != NULL && fsm_job_state_final(j->order[i]->state))
            n++;
    j->fin_head = j->fin_tail = NULL;
    if (n == 0)
        return 0;
    struct fsm_job **v = malloc(n * sizeof(*v));
    if (v == NULL)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < j->norder; i++)
        if (j->order[i] != NULL && fsm_job_state_final(j->order[i]->state))
            v[k++] = j->order[i];
    qsort(v, n, sizeof(*v), cmp_end);
    for (size_t i = 0; i < n; i++)
        v[i]->fin_next = i + 1 < n ? v[i + 1] : NULL;
    j->fin_head = v[0];
    j->fin_tail = v[n - 1];
    free(v);
    return 0;
}

static bool str_in(const char *s, char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, PB_STR(v[i])) == 0)
            return true;
    return false;
}

static bool state_in(int state, const Spur__Api__JobState *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((int)v[i] == state || ((int)v[i] == SPUR__API__JOB_STATE__JOB_RUNNING &&
                                   state == SPUR__API__JOB_STATE__JOB_CONFIGURING))
            return true;
    return false;
}

bool fsm_job_filter_match(const struct fsm_job *job, const struct fsm_job_filter *flt)
{
    return (flt->n_users == 0 || str_in(job->user, flt->users, flt->n_users)) &&
           (flt->n_states == 0 || state_in(job->state, flt->states, flt->n_states)) &&
           (flt->n_names == 0 || str_in(job->name, flt->names, flt->n_names)) &&
           (flt->n_partitions == 0 || str_in(job->partition, flt->partitions, flt->n_partitions));
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : (x > y);
}

size_t fsm_jobs_sort_ids(uint64_t *ids, size_t n)
{
    if (n == 0)
        return 0;
    qsort(ids, n, sizeof(*ids), cmp_u64);
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (ids[i] != ids[k - 1])
            ids[k++] = ids[i];
    return k;
}
