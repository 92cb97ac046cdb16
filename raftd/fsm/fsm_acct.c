/*
 * fsm_acct.c - the accounting outbox: records appended at apply, trimmed by AcctTrim,
 * listed for the exporter and merged with the held jobs for sacct. See fsm_acct.h.
 */
#include "fsm_acct.h"

#include "fsm_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PB_STR(s) ((s) != NULL ? (s) : "")

/* sacct's cap when the query gives no limit (fsm.h). */
#define ACCT_QUERY_CAP 100000u

static char empty_str[] = "";

void fsm_acct_init(struct fsm_acct *a)
{
    memset(a, 0, sizeof(*a));
    a->next_seq = 1;
}

void fsm_acct_free(struct fsm_acct *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[a->first + i]);
    free(a->v);
    fsm_acct_init(a);
}

/* Room for one more record at the end: slide the live part down or grow. 0 or -1. */
static int make_room(struct fsm_acct *a)
{
    if (a->first + a->n < a->cap)
        return 0;
    if (a->first > 0 && a->first >= a->cap / 2) {
        memmove(a->v, a->v + a->first, a->n * sizeof(*a->v));
        a->first = 0;
        return 0;
    }
    size_t cap = a->cap ? a->cap * 2 : 64;
    struct fsm_acct_rec **v = realloc(a->v, cap * sizeof(*v));
    if (v == NULL)
        return -1;
    a->v = v;
    a->cap = cap;
    return 0;
}

static void push(struct fsm_acct *a, struct fsm_acct_rec *r)
{
    a->v[a->first + a->n] = r;
    a->n++;
    a->bytes += r->len;
}

/* ---- rows ------------------------------------------------------------------------------ */

void fsm_acct_fill_row(const struct fsm *f, const struct fsm_job *job, Spur__Api__AcctJob *row,
                       struct fsm_fit_cache *cache)
{
    spur__api__acct_job__init(row);
    row->job_id = job->id;
    row->name = job->name;
    row->user = job->user;
    row->uid = job->uid;
    row->gid = job->gid;
    row->account = job->account;
    row->partition = job->partition;
    row->state = (Spur__Api__JobState)job->state;
    row->exit_code = job->exit_code;
    row->exit_signal = job->exit_signal;
    /* Requested until placed; then what the (last) allocation holds. */
    row->nnodes = job->nodes;
    row->cpus = (uint32_t)((uint64_t)job->ntasks * job->cpus_per_task);
    if (job->run != NULL) {
        row->nnodes = job->run->n;
        row->n_node_list = job->run->n;
        row->node_list = job->run->nodes;
        row->cpus = (uint32_t)(fsm_job_cpus_per_node(job) * job->run->n);
    }
    row->mem_mb = job->mem_mb;
    row->time_limit_min = job->time_limit_min;
    row->submit_time_ms = job->submit_ms;
    row->eligible_time_ms = job->eligible_ms;
    row->start_time_ms = job->start_ms;
    row->end_time_ms = job->end_ms;
    row->workdir = job->workdir;
    row->restarts = job->restarts;
    /* One job on its own (a record at apply) must not walk every job: see fsm_state.h. */
    row->reason = cache != NULL ? (char *)fsm_state_job_reason(f, job, cache)
                                : (char *)fsm_state_job_reason_one(f, job);
    row->dependency = empty_str;
    row->last_seq = 0;
}

int fsm_acct_record(struct fsm *f, const struct fsm_job *job, enum fsm_acct_event event)
{
    struct fsm_acct *a = &f->acct;
    if (!a->enabled)
        return FSM_OK;
    Spur__Fsm__AcctRecord rec = SPUR__FSM__ACCT_RECORD__INIT;
    Spur__Api__AcctJob row;
    fsm_acct_fill_row(f, job, &row, NULL);
    row.last_seq = a->next_seq;
    rec.seq = a->next_seq;
    rec.event = (uint32_t)event;
    rec.time_ms = f->now_ms;
    rec.job = &row;
    size_t len = spur__fsm__acct_record__get_packed_size(&rec);
    if (make_room(a) != 0)
        return FSM_ENOMEM;
    struct fsm_acct_rec *r = malloc(sizeof(*r) + len);
    if (r == NULL)
        return FSM_ENOMEM;
    r->seq = rec.seq;
    r->time_ms = rec.time_ms;
    r->job_id = job->id;
    r->event = rec.event;
    r->len = spur__fsm__acct_record__pack(&rec, r->bytes);
    push(a, r);
    a->next_seq++;
    return FSM_OK;
}

size_t fsm_acct_trim(struct fsm_acct *a, uint64_t through)
{
    size_t k = 0;
    while (k < a->n && a->v[a->first + k]->seq <= through) {
        a->bytes -= a->v[a->first + k]->len;
        free(a->v[a->first + k]);
        k++;
    }
    a->first += k;
    a->n -= k;
    if (a->n == 0)
        a->first = 0;
    return k;
}

int fsm_acct_restore_record(struct fsm_acct *a, const uint8_t *bytes, size_t len, char *err,
                            size_t errlen)
{
    uint64_t last = a->n > 0 ? fsm_acct_at(a, a->n - 1)->seq : 0;
    Spur__Fsm__AcctRecord *rec = spur__fsm__acct_record__unpack(NULL, len, bytes);
    if (rec == NULL) {
        snprintf(err, errlen, "the outbox record after seq %" PRIu64 " does not decode", last);
        return FSM_EINVAL;
    }
    int rc = FSM_EINVAL;
    if (rec->seq <= last || rec->seq >= a->next_seq)
        snprintf(err, errlen,
                 "outbox record seq %" PRIu64 " is out of order (after %" PRIu64
                 ") or not below the next seq %" PRIu64,
                 rec->seq, last, a->next_seq);
    else if (rec->job == NULL || rec->job->job_id == 0 || rec->job->last_seq != rec->seq)
        snprintf(err, errlen, "outbox record seq %" PRIu64 " has no job row, or one of another seq",
                 rec->seq);
    else if (rec->event < FSM_ACCT_SUBMIT || rec->event > FSM_ACCT_REQUEUE)
        snprintf(err, errlen, "outbox record seq %" PRIu64 " has event %u", rec->seq, rec->event);
    else
        rc = FSM_OK;
    if (rc == FSM_OK) {
        struct fsm_acct_rec *r = NULL;
        if (make_room(a) != 0 || (r = malloc(sizeof(*r) + len)) == NULL) {
            rc = FSM_ENOMEM;
        } else {
            r->seq = rec->seq;
            r->time_ms = rec->time_ms;
            r->job_id = rec->job->job_id;
            r->event = rec->event;
            r->len = len;
            memcpy(r->bytes, bytes, len);
            push(a, r);
        }
    }
    spur__fsm__acct_record__free_unpacked(rec, NULL);
    return rc;
}

/* ---- the public face (fsm.h) ------------------------------------------------------------ */

void fsm_acct_get_stats(const struct fsm *f, struct fsm_acct_stats *out)
{
    const struct fsm_acct *a = &f->acct;
    memset(out, 0, sizeof(*out));
    out->enabled = a->enabled;
    out->records = a->n;
    out->bytes = a->bytes;
    out->next_seq = a->next_seq;
    if (a->n > 0) {
        out->first_seq = fsm_acct_at(a, 0)->seq;
        out->last_seq = fsm_acct_at(a, a->n - 1)->seq;
        out->oldest_ms = fsm_acct_at(a, 0)->time_ms;
    }
}

/* Index of the first record with seq > after (a->n when none). */
static size_t first_after(const struct fsm_acct *a, uint64_t after)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fsm_acct_at(a, mid)->seq <= after)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t fsm_acct_records(const struct fsm *f, uint64_t after_seq, struct fsm_acct_view *out,
                        size_t max)
{
    const struct fsm_acct *a = &f->acct;
    size_t k = 0;
    for (size_t i = first_after(a, after_seq); i < a->n && k < max; i++, k++) {
        const struct fsm_acct_rec *r = fsm_acct_at(a, i);
        out[k] = (struct fsm_acct_view){
            .seq = r->seq, .time_ms = r->time_ms, .bytes = r->bytes, .len = r->len};
    }
    return k;
}

int fsm_encode_acct_trim(uint64_t through_seq, uint64_t time_ms, uint8_t **out, size_t *len)
{
    Spur__Fsm__AcctTrim t = SPUR__FSM__ACCT_TRIM__INIT;
    t.through_seq = through_seq;
    Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
    cmd.time_ms = time_ms;
    cmd.op_case = SPUR__FSM__COMMAND__OP_ACCT_TRIM;
    cmd.acct_trim = &t;
    return fsm_encode_command(&cmd, out, len);
}

/* ---- sacct from the state --------------------------------------------------------------- */

static bool str_in(const char *s, char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(PB_STR(s), PB_STR(v[i])) == 0)
            return true;
    return false;
}

static bool state_in(int st, const Spur__Api__JobState *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int want = (int)v[i];
        /* RUNNING lets CONFIGURING through, as squeue's filter does. */
        if (want == st || (want == SPUR__API__JOB_STATE__JOB_RUNNING &&
                           st == SPUR__API__JOB_STATE__JOB_CONFIGURING))
            return true;
    }
    return false;
}

static bool id_in(uint64_t id, const uint64_t *sorted, size_t n)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && sorted[lo] == id;
}

/* Every filter of q that is given holds for row (ids: sorted, distinct). */
static bool row_matches(const Spur__Api__AcctJob *row, const Spur__Api__AcctQueryRequest *q,
                        const uint64_t *ids, size_t nids)
{
    if (q == NULL)
        return true;
    if (nids > 0 && !id_in(row->job_id, ids, nids))
        return false;
    if (q->n_users > 0 && !str_in(row->user, q->users, q->n_users))
        return false;
    if (q->n_states > 0 && !state_in((int)row->state, q->states, q->n_states))
        return false;
    if (q->start_ms != 0 && row->end_time_ms != 0 && row->end_time_ms < q->start_ms)
        return false;
    if (q->end_ms != 0 && row->submit_time_ms >= q->end_ms)
        return false;
    if (q->n_partitions > 0 && !str_in(row->partition, q->partitions, q->n_partitions))
        return false;
    if (q->n_accounts > 0 && !str_in(row->account, q->accounts, q->n_accounts))
        return false;
    if (q->n_names > 0 && !str_in(row->name, q->names, q->n_names))
        return false;
    return true;
}

/* A deep copy of row the result owns (packed and decoded again). NULL: no memory. */
static Spur__Api__AcctJob *own_row(const Spur__Api__AcctJob *row)
{
    size_t n = spur__api__acct_job__get_packed_size(row);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        return NULL;
    spur__api__acct_job__pack(row, buf);
    Spur__Api__AcctJob *copy = spur__api__acct_job__unpack(NULL, n, buf);
    free(buf);
    return copy;
}

/* The newest outbox record of a job the state no longer holds. */
struct orphan {
    uint64_t job_id;
    size_t idx; /* into the outbox */
};

static int cmp_orphan(const void *x, const void *y)
{
    const struct orphan *a = x, *b = y;
    if (a->job_id != b->job_id)
        return a->job_id < b->job_id ? -1 : 1;
    return a->idx > b->idx ? -1 : (a->idx < b->idx); /* newest first */
}

/* The outbox jobs not held, by id, newest record of each. *v malloc'd. 0 or -1. */
static int collect_orphans(const struct fsm *f, struct orphan **v, size_t *n)
{
    const struct fsm_acct *a = &f->acct;
    struct orphan *o = malloc((a->n ? a->n : 1) * sizeof(*o));
    if (o == NULL)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct fsm_acct_rec *r = fsm_acct_at(a, i);
        if (fsm_jobs_find(&f->jobs, r->job_id) == NULL)
            o[k++] = (struct orphan){r->job_id, i};
    }
    qsort(o, k, sizeof(*o), cmp_orphan);
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        if (m == 0 || o[m - 1].job_id != o[i].job_id)
            o[m++] = o[i];
    *v = o;
    *n = m;
    return 0;
}

/* The job row of an outbox record, owned by the caller. NULL: no memory (or undecodable). */
static Spur__Api__AcctJob *row_of_record(const struct fsm_acct_rec *r)
{
    Spur__Fsm__AcctRecord *rec = spur__fsm__acct_record__unpack(NULL, r->len, r->bytes);
    if (rec == NULL)
        return NULL;
    Spur__Api__AcctJob *row = own_row(rec->job);
    spur__fsm__acct_record__free_unpacked(rec, NULL);
    return row;
}

/* Add a matching row (copied) unless the limit is reached: then only mark truncated. */
static int take(struct fsm_acct_result *out, size_t limit, const Spur__Api__AcctJob *row)
{
    if (out->n >= limit) {
        out->truncated = true;
        return 0;
    }
    Spur__Api__AcctJob *copy = own_row(row);
    if (copy == NULL)
        return -1;
    out->jobs[out->n++] = copy;
    return 0;
}

int fsm_acct_query(const struct fsm *f, const Spur__Api__AcctQueryRequest *q,
                   struct fsm_acct_result *out)
{
    memset(out, 0, sizeof(*out));
    size_t limit = q != NULL && q->limit > 0 ? q->limit : ACCT_QUERY_CAP;
    if (limit > ACCT_QUERY_CAP)
        limit = ACCT_QUERY_CAP;
    uint64_t *ids = NULL;
    size_t nids = 0;
    struct orphan *orph = NULL;
    size_t norph = 0;
    struct fsm_fit_cache *cache = calloc(1, sizeof(*cache));
    size_t most = f->jobs.count + f->acct.n;
    out->jobs = malloc((limit < most ? limit : most ? most : 1) * sizeof(*out->jobs));
    if (cache == NULL || out->jobs == NULL || collect_orphans(f, &orph, &norph) != 0)
        goto nomem;
    if (q != NULL && q->n_job_ids > 0) {
        ids = malloc(q->n_job_ids * sizeof(*ids));
        if (ids == NULL)
            goto nomem;
        memcpy(ids, q->job_ids, q->n_job_ids * sizeof(*ids));
        nids = fsm_jobs_sort_ids(ids, q->n_job_ids);
    }
    /* Merge by id: held jobs (in id order) and the outbox-only ones (sorted). */
    size_t i = 0, k = 0;
    while ((i < f->jobs.norder || k < norph) && !out->truncated) {
        const struct fsm_job *job = NULL;
        while (i < f->jobs.norder && (job = f->jobs.order[i]) == NULL)
            i++;
        if (job != NULL && (k == norph || job->id < orph[k].job_id)) {
            i++;
            Spur__Api__AcctJob row;
            fsm_acct_fill_row(f, job, &row, cache);
            if (row_matches(&row, q, ids, nids) && take(out, limit, &row) != 0)
                goto nomem;
        } else if (k < norph) {
            Spur__Api__AcctJob *row = row_of_record(fsm_acct_at(&f->acct, orph[k].idx));
            k++;
            if (row == NULL)
                goto nomem;
            if (row_matches(row, q, ids, nids)) {
                if (out->n >= limit) {
                    out->truncated = true;
                } else {
                    out->jobs[out->n++] = row;
                    row = NULL;
                }
            }
            if (row != NULL)
                spur__api__acct_job__free_unpacked(row, NULL);
        }
    }
    free(cache);
    free(ids);
    free(orph);
    return FSM_OK;
nomem:
    free(cache);
    free(ids);
    free(orph);
    fsm_acct_result_free(out);
    return FSM_ENOMEM;
}

void fsm_acct_result_free(struct fsm_acct_result *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n; i++)
        spur__api__acct_job__free_unpacked(r->jobs[i], NULL);
    free(r->jobs);
    memset(r, 0, sizeof(*r));
}
