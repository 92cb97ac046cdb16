/*
 * fsm_query.c - read answers, borrowed from the state and built in an arena.
 * See fsm_query.h.
 */
#include "fsm_query.h"

#include "fsm_arena.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PB_STR(s) ((s) != NULL ? (s) : "")

static char empty_str[] = "";

/* Start an answer: an arena in out->priv and a response saying OK. */
static struct fsm_arena *begin(struct fsm_read *out)
{
    memset(out, 0, sizeof(*out));
    spur__api__response__init(&out->resp);
    out->resp.error = empty_str;
    struct fsm_arena *a = malloc(sizeof(*a));
    if (a == NULL)
        return NULL;
    fsm_arena_init(a);
    out->priv = a;
    return a;
}

void fsm_query_free(struct fsm_read *out)
{
    struct fsm_arena *a = out->priv;
    if (a != NULL) {
        fsm_arena_free(a);
        free(a);
    }
    memset(out, 0, sizeof(*out));
}

/* Answer with an error; the message lives in the arena. FSM_OK or FSM_ENOMEM. */
static int fail(struct fsm_read *out, struct fsm_arena *a, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct fsm_read *out, struct fsm_arena *a, int code, const char *fmt, ...)
{
    char *msg = fsm_arena_alloc(a, FSM_ERR_MAX, 1);
    if (msg == NULL)
        return FSM_ENOMEM;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, FSM_ERR_MAX, fmt, ap);
    va_end(ap);
    out->resp.code = (Spur__Api__Code)code;
    out->resp.error = msg;
    out->resp.result_case = SPUR__API__RESPONSE__RESULT__NOT_SET;
    return FSM_OK;
}

static int nomem(struct fsm_read *out)
{
    fsm_query_free(out);
    return FSM_ENOMEM;
}

/* ---- jobs ------------------------------------------------------------------------------------ */

/* FSM_OK, or FSM_ENOMEM (the arena could not hold the dependency text). */
static int fill_job(const struct fsm *f, const struct fsm_job *job, Spur__Api__Job *out,
                    Spur__Api__JobSpec *spec, bool full, struct fsm_fit_cache *cache,
                    struct fsm_arena *a)
{
    spur__api__job__init(out);
    fsm_job_fill_spec(job, spec, full);
    out->id = job->id;
    out->spec = spec;
    out->state = (Spur__Api__JobState)job->state;
    out->reason = (char *)fsm_state_job_reason(f, job, cache);
    out->submit_time_ms = job->submit_ms;
    out->start_time_ms = job->start_ms;
    out->end_time_ms = job->end_ms;
    out->eligible_time_ms = job->eligible_ms;
    out->exit_code = job->exit_code;
    out->exit_signal = job->exit_signal;
    out->held = job->held;
    out->attempt = job->attempt;
    out->restarts = job->restarts;
    out->batch_host = empty_str;
    if (job->run != NULL) {
        out->n_node_list = job->run->n;
        out->node_list = job->run->nodes;
        if (job->run->n > 0)
            out->batch_host = job->run->nodes[0];
    }
    out->dependency = empty_str;
    if (job->deps != NULL) {
        size_t cap = (size_t)job->deps->n * 48 + 32; /* "afternotok:<20 digits>(unfulfilled)," */
        char *text = fsm_arena_alloc(a, cap, 1);
        if (text == NULL)
            return FSM_ENOMEM;
        bool waits = job->deps->singleton && job->state == SPUR__API__JOB_STATE__JOB_PENDING &&
                     fsm_state_singleton_busy(f, job);
        fsm_deps_format(job->deps, waits, text, cap);
        out->dependency = text;
    }
    return FSM_OK;
}

/*
 * The jobs an answer lists, in id order: those named by id (each once), or all; only
 * the ones every filter lets through. Returns the count, with *v in the arena.
 */
static int select_jobs(const struct fsm *f, const Spur__Api__GetJobsRequest *q, struct fsm_arena *a,
                       const struct fsm_job ***v, size_t *n)
{
    struct fsm_job_filter flt = {0}; /* no request: every job */
    if (q != NULL)
        flt = (struct fsm_job_filter){
            .users = q->users,
            .n_users = q->n_users,
            .states = q->states,
            .n_states = q->n_states,
            .names = q->names,
            .n_names = q->n_names,
            .partitions = q->partitions,
            .n_partitions = q->n_partitions,
        };
    size_t max = q != NULL && q->n_ids > 0 ? q->n_ids : f->jobs.count;
    const struct fsm_job **sel = fsm_arena_alloc(a, max ? max : 1, sizeof(*sel));
    if (sel == NULL)
        return FSM_ENOMEM;
    size_t k = 0;
    if (q != NULL && q->n_ids > 0) {
        uint64_t *ids = fsm_arena_alloc(a, q->n_ids, sizeof(*ids));
        if (ids == NULL)
            return FSM_ENOMEM;
        memcpy(ids, q->ids, q->n_ids * sizeof(*ids));
        size_t nids = fsm_jobs_sort_ids(ids, q->n_ids);
        for (size_t i = 0; i < nids; i++) {
            const struct fsm_job *job = fsm_jobs_find(&f->jobs, ids[i]);
            if (job != NULL && fsm_job_filter_match(job, &flt))
                sel[k++] = job;
        }
    } else {
        for (size_t i = 0; i < f->jobs.norder; i++) {
            const struct fsm_job *job = f->jobs.order[i];
            if (job != NULL && fsm_job_filter_match(job, &flt))
                sel[k++] = job;
        }
    }
    *v = sel;
    *n = k;
    return FSM_OK;
}

int fsm_query_jobs(const struct fsm *f, const Spur__Api__GetJobsRequest *req, struct fsm_read *out)
{
    struct fsm_arena *a = begin(out);
    if (a == NULL)
        return nomem(out);
    /*
     * A state this build does not know matches no job, so the answer would be an empty
     * list that looks like "no such jobs": refuse it instead, as CancelJobs does.
     */
    for (size_t s = 0; req != NULL && s < req->n_states; s++) {
        int st = (int)req->states[s];
        if (st <= 0 || st >= FSM_JOB_NSTATES)
            return fail(out, a, SPUR__API__CODE__CODE_INVALID, "unknown job state %d in the filter",
                        st)
                       ? nomem(out)
                       : FSM_OK;
    }
    const struct fsm_job **sel;
    size_t n;
    if (select_jobs(f, req, a, &sel, &n) != FSM_OK)
        return nomem(out);
    bool full = req != NULL && req->include_script;
    Spur__Api__JobsResponse *jr = fsm_arena_alloc(a, 1, sizeof(*jr));
    Spur__Api__Job **ptrs = fsm_arena_alloc(a, n ? n : 1, sizeof(*ptrs));
    Spur__Api__Job *jobs = fsm_arena_alloc(a, n ? n : 1, sizeof(*jobs));
    Spur__Api__JobSpec *specs = fsm_arena_alloc(a, n ? n : 1, sizeof(*specs));
    struct fsm_fit_cache *cache = fsm_arena_alloc(a, 1, sizeof(*cache));
    if (jr == NULL || ptrs == NULL || jobs == NULL || specs == NULL || cache == NULL)
        return nomem(out);
    spur__api__jobs_response__init(jr);
    /*
     * Paging: sel is in id order. Skip to after_id, then take jobs until the count limit
     * or the byte budget (the replica's frame limit, less room for the envelope) is
     * reached; at least one job always fits a page, so paging always makes progress.
     */
    size_t i = 0, k = 0;
    uint64_t after = req != NULL ? req->after_id : 0;
    size_t limit = req != NULL && req->limit > 0 ? req->limit : SIZE_MAX;
    size_t budget = req != NULL && req->max_bytes > 0 ? req->max_bytes : SIZE_MAX;
    size_t used = 0;
    while (i < n && after > 0 && sel[i]->id <= after)
        i++;
    for (; i < n && k < limit; i++) {
        if (fill_job(f, sel[i], &jobs[k], &specs[k], full, cache, a) != FSM_OK)
            return nomem(out);
        size_t sz = spur__api__job__get_packed_size(&jobs[k]) + 8; /* tag and length */
        if (k > 0 && used + sz > budget)
            break;
        used += sz;
        ptrs[k] = &jobs[k];
        k++;
    }
    if (i < n) {
        jr->more = true;
        jr->next_after_id = sel[i - 1]->id;
    }
    jr->n_jobs = k;
    jr->jobs = ptrs;
    out->resp.result_case = SPUR__API__RESPONSE__RESULT_JOBS;
    out->resp.jobs = jr;
    return FSM_OK;
}

int fsm_query_job(const struct fsm *f, uint64_t job_id, struct fsm_read *out)
{
    struct fsm_arena *a = begin(out);
    if (a == NULL)
        return nomem(out);
    if (job_id == 0)
        return fail(out, a, SPUR__API__CODE__CODE_INVALID, "job id 0 is not valid") ? nomem(out)
                                                                                    : FSM_OK;
    const struct fsm_job *job = fsm_jobs_find(&f->jobs, job_id);
    if (job == NULL)
        return fail(out, a, SPUR__API__CODE__CODE_NOT_FOUND, "job %" PRIu64 " does not exist",
                    job_id)
                   ? nomem(out)
                   : FSM_OK;
    Spur__Api__JobsResponse *jr = fsm_arena_alloc(a, 1, sizeof(*jr));
    Spur__Api__Job **ptrs = fsm_arena_alloc(a, 1, sizeof(*ptrs));
    Spur__Api__Job *j = fsm_arena_alloc(a, 1, sizeof(*j));
    Spur__Api__JobSpec *spec = fsm_arena_alloc(a, 1, sizeof(*spec));
    if (jr == NULL || ptrs == NULL || j == NULL || spec == NULL)
        return nomem(out);
    spur__api__jobs_response__init(jr);
    if (fill_job(f, job, j, spec, true, NULL, a) != FSM_OK)
        return nomem(out);
    ptrs[0] = j;
    jr->n_jobs = 1;
    jr->jobs = ptrs;
    out->resp.result_case = SPUR__API__RESPONSE__RESULT_JOBS;
    out->resp.jobs = jr;
    return FSM_OK;
}

/* ---- nodes ----------------------------------------------------------------------------------- */

static int fill_node(const struct fsm *f, const struct fsm_node *node, Spur__Api__Node *out,
                     struct fsm_arena *a)
{
    spur__api__node__init(out);
    out->name = node->name;
    out->address = node->address;
    out->cpus = node->cpus;
    out->mem_mb = node->mem_mb;
    out->n_features = node->nfeatures;
    out->features = node->features;
    out->state = (Spur__Api__NodeState)fsm_node_state(node);
    out->reason = node->reason != NULL ? node->reason : empty_str;
    out->reason_time_ms = node->reason_time_ms;
    out->reason_user = node->reason_user != NULL ? node->reason_user : empty_str;
    out->reason_uid = node->reason_uid;
    out->alloc_cpus = node->alloc_cpus;
    out->alloc_mem_mb = node->alloc_mem_mb;
    out->last_seen_ms = node->last_seen_ms;
    out->launch_failures = node->launch_failures;
    out->not_responding = node->not_responding;
    size_t np = 0;
    for (size_t i = 0; i < f->nodes.nparts; i++)
        if (fsm_part_has_node(&f->nodes.parts[i], node->name))
            np++;
    if (np == 0)
        return FSM_OK;
    out->partitions = fsm_arena_alloc(a, np, sizeof(char *));
    if (out->partitions == NULL)
        return FSM_ENOMEM;
    for (size_t i = 0; i < f->nodes.nparts; i++)
        if (fsm_part_has_node(&f->nodes.parts[i], node->name))
            out->partitions[out->n_partitions++] = f->nodes.parts[i].name;
    return FSM_OK;
}

int fsm_query_nodes(const struct fsm *f, const Spur__Api__GetNodesRequest *req,
                    struct fsm_read *out)
{
    struct fsm_arena *a = begin(out);
    if (a == NULL)
        return nomem(out);
    size_t nnames = req != NULL ? req->n_names : 0;
    size_t n = nnames > 0 ? nnames : f->nodes.n;
    const struct fsm_node **sel = fsm_arena_alloc(a, n ? n : 1, sizeof(*sel));
    if (sel == NULL)
        return nomem(out);
    if (nnames > 0) {
        for (size_t i = 0; i < nnames; i++) {
            sel[i] = fsm_nodes_find(&f->nodes, PB_STR(req->names[i]));
            if (sel[i] == NULL)
                return fail(out, a, SPUR__API__CODE__CODE_NOT_FOUND,
                            "node \"%.64s\" does not exist", PB_STR(req->names[i]))
                           ? nomem(out)
                           : FSM_OK;
        }
    } else {
        for (size_t i = 0; i < n; i++)
            sel[i] = f->nodes.v[i];
    }
    Spur__Api__NodesResponse *nr = fsm_arena_alloc(a, 1, sizeof(*nr));
    Spur__Api__Node **ptrs = fsm_arena_alloc(a, n ? n : 1, sizeof(*ptrs));
    Spur__Api__Node *nodes = fsm_arena_alloc(a, n ? n : 1, sizeof(*nodes));
    if (nr == NULL || ptrs == NULL || nodes == NULL)
        return nomem(out);
    spur__api__nodes_response__init(nr);
    for (size_t i = 0; i < n; i++) {
        if (fill_node(f, sel[i], &nodes[i], a) != FSM_OK)
            return nomem(out);
        ptrs[i] = &nodes[i];
    }
    nr->n_nodes = n;
    nr->nodes = ptrs;
    out->resp.result_case = SPUR__API__RESPONSE__RESULT_NODES;
    out->resp.nodes = nr;
    return FSM_OK;
}

/* ---- partitions -------------------------------------------------------------------------------
 */

static int fill_partition(const struct fsm *f, const struct fsm_part *p, Spur__Api__Partition *out,
                          struct fsm_arena *a)
{
    fsm_part_fill(p, out);
    if (!p->all || f->nodes.n == 0)
        return FSM_OK;
    /* "ALL": every node the state knows, by name. */
    out->nodes = fsm_arena_alloc(a, f->nodes.n, sizeof(char *));
    if (out->nodes == NULL)
        return FSM_ENOMEM;
    for (size_t i = 0; i < f->nodes.n; i++)
        out->nodes[i] = f->nodes.v[i]->name;
    out->n_nodes = f->nodes.n;
    return FSM_OK;
}

int fsm_query_partitions(const struct fsm *f, const Spur__Api__GetPartitionsRequest *req,
                         struct fsm_read *out)
{
    struct fsm_arena *a = begin(out);
    if (a == NULL)
        return nomem(out);
    size_t nnames = req != NULL ? req->n_names : 0;
    size_t n = nnames > 0 ? nnames : f->nodes.nparts;
    const struct fsm_part **sel = fsm_arena_alloc(a, n ? n : 1, sizeof(*sel));
    if (sel == NULL)
        return nomem(out);
    for (size_t i = 0; i < n; i++) {
        if (nnames == 0) {
            sel[i] = &f->nodes.parts[i];
            continue;
        }
        sel[i] = fsm_nodes_part(&f->nodes, PB_STR(req->names[i]));
        if (sel[i] == NULL)
            return fail(out, a, SPUR__API__CODE__CODE_NOT_FOUND,
                        "partition \"%.64s\" does not exist", PB_STR(req->names[i]))
                       ? nomem(out)
                       : FSM_OK;
    }
    Spur__Api__PartitionsResponse *pr = fsm_arena_alloc(a, 1, sizeof(*pr));
    Spur__Api__Partition **ptrs = fsm_arena_alloc(a, n ? n : 1, sizeof(*ptrs));
    Spur__Api__Partition *parts = fsm_arena_alloc(a, n ? n : 1, sizeof(*parts));
    if (pr == NULL || ptrs == NULL || parts == NULL)
        return nomem(out);
    spur__api__partitions_response__init(pr);
    for (size_t i = 0; i < n; i++) {
        if (fill_partition(f, sel[i], &parts[i], a) != FSM_OK)
            return nomem(out);
        ptrs[i] = &parts[i];
    }
    pr->n_partitions = n;
    pr->partitions = ptrs;
    out->resp.result_case = SPUR__API__RESPONSE__RESULT_PARTITIONS;
    out->resp.partitions = pr;
    return FSM_OK;
}
