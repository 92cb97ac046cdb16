/*
 * fsm_snap.c - snapshot writer and reader, one record at a time. See fsm_snap.h.
 */
#include "fsm_snap.h"

#include "buf.h"

#include "fsm_cmd.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PB_STR(s) ((s) != NULL ? (s) : "")

enum {
    F_HEADER = 1,
    F_NODE = 2,
    F_SESSION = 3,
    F_JOB = 4,
    F_ACCT = 5,
};

/* ---- writer ------------------------------------------------------------------------------ */

static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

/* Append msg as a length-delimited field: tag, length, packed bytes. */
static int put_record(struct buf *b, uint32_t field, const ProtobufCMessage *msg)
{
    size_t size = protobuf_c_message_get_packed_size(msg);
    if (!buf_reserve(b, 20 + size))
        return -1;
    uint8_t *at = (uint8_t *)b->p;
    b->len += put_varint(at + b->len, ((uint64_t)field << 3) | 2u);
    b->len += put_varint(at + b->len, size);
    b->len += protobuf_c_message_pack(msg, at + b->len);
    return 0;
}

static int write_header(const struct fsm *f, struct buf *b)
{
    size_t n = f->nodes.nparts;
    Spur__Api__Partition *parts = calloc(n ? n : 1, sizeof(*parts));
    Spur__Api__Partition **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    int rc = -1;
    if (parts != NULL && ptrs != NULL) {
        for (size_t i = 0; i < n; i++) {
            fsm_part_fill(&f->nodes.parts[i], &parts[i]);
            ptrs[i] = &parts[i];
        }
        Spur__Fsm__SnapshotHeader h = SPUR__FSM__SNAPSHOT_HEADER__INIT;
        h.format_version = FSM_SNAPSHOT_VERSION;
        h.last_applied = f->last_applied;
        h.next_job_id = f->next_job_id;
        h.log_time_ms = f->now_ms;
        h.finished_job_retention_s = f->retention_s;
        h.max_script_bytes = f->max_script_bytes;
        h.accounting = f->acct.enabled;
        h.next_acct_seq = f->acct.next_seq;
        h.n_partitions = n;
        h.partitions = ptrs;
        rc = put_record(b, F_HEADER, &h.base);
    }
    free(parts);
    free(ptrs);
    return rc;
}

static int write_node(const struct fsm_node *node, struct buf *b)
{
    static char empty[] = "";
    Spur__Fsm__NodeRecord r = SPUR__FSM__NODE_RECORD__INIT;
    r.name = node->name;
    r.address = node->address;
    r.cpus = node->cpus;
    r.mem_mb = node->mem_mb;
    r.n_features = node->nfeatures;
    r.features = node->features;
    r.registered = node->registered;
    r.down = node->down;
    r.drain = node->drain;
    r.reason = node->reason != NULL ? node->reason : empty;
    r.reason_time_ms = node->reason_time_ms;
    r.reason_user = node->reason_user != NULL ? node->reason_user : empty;
    r.reason_uid = node->reason_uid;
    r.last_seen_ms = node->last_seen_ms;
    r.launch_failures = node->launch_failures;
    r.not_responding = node->not_responding;
    return put_record(b, F_NODE, &r.base);
}

static int write_session(const struct fsm_sess *s, struct buf *b)
{
    Spur__Fsm__SessionRecord r = SPUR__FSM__SESSION_RECORD__INIT;
    r.client_id = s->client_id;
    r.last_seq = s->last_seq;
    r.last_index = s->last_index;
    r.last_ms = s->last_ms;
    r.response.data = s->resp;
    r.response.len = s->resp_len;
    return put_record(b, F_SESSION, &r.base);
}

/* done flags as protobuf booleans, in a scratch array reused across jobs */
struct flags {
    protobuf_c_boolean *v;
    size_t cap;
};

static int write_job(const struct fsm_job *job, struct buf *b, struct flags *fl)
{
    Spur__Fsm__JobRecord r = SPUR__FSM__JOB_RECORD__INIT;
    Spur__Api__JobSpec spec;
    fsm_job_fill_spec(job, &spec, true);
    r.id = job->id;
    r.spec = &spec;
    r.state = (Spur__Api__JobState)job->state;
    r.submit_time_ms = job->submit_ms;
    r.start_time_ms = job->start_ms;
    r.end_time_ms = job->end_ms;
    r.eligible_time_ms = job->eligible_ms;
    r.held = job->held;
    r.exit_code = job->exit_code;
    r.end_reason = job->end_reason;
    r.cancel_requested = job->cancel_requested;
    r.timed_out = job->timed_out;
    r.attempt = job->attempt;
    r.restarts = job->restarts;
    r.exit_signal = job->exit_signal;
    r.oom = job->oom;
    Spur__Fsm__JobDep dv[FSM_DEPS_MAX], *dp[FSM_DEPS_MAX];
    if (job->deps != NULL) {
        uint32_t n = job->deps->n <= FSM_DEPS_MAX ? job->deps->n : FSM_DEPS_MAX;
        for (uint32_t i = 0; i < n; i++) {
            spur__fsm__job_dep__init(&dv[i]);
            dv[i].job_id = job->deps->d[i].job_id;
            dv[i].type = job->deps->d[i].type;
            dv[i].state = job->deps->d[i].state;
            dp[i] = &dv[i];
        }
        r.n_deps = n;
        r.deps = dp;
        r.deps_any = job->deps->any;
        r.deps_singleton = job->deps->singleton;
        r.deps_kill_invalid = job->deps->kill_invalid;
    }
    if (job->run != NULL) {
        uint32_t n = job->run->n;
        if (n > fl->cap) {
            protobuf_c_boolean *v = realloc(fl->v, n * sizeof(*v));
            if (v == NULL)
                return -1;
            fl->v = v;
            fl->cap = n;
        }
        for (uint32_t i = 0; i < n; i++)
            fl->v[i] = job->run->done[i];
        r.n_node_list = n;
        r.node_list = job->run->nodes;
        r.n_node_done = n;
        r.node_done = fl->v;
    }
    return put_record(b, F_JOB, &r.base);
}

/* An outbox record is kept packed: its bytes go out as they are. */
static int write_acct(const struct fsm_acct_rec *r, struct buf *b)
{
    if (!buf_reserve(b, 20 + r->len))
        return -1;
    uint8_t *at = (uint8_t *)b->p;
    b->len += put_varint(at + b->len, ((uint64_t)F_ACCT << 3) | 2u);
    b->len += put_varint(at + b->len, r->len);
    memcpy(at + b->len, r->bytes, r->len);
    b->len += r->len;
    return 0;
}

int fsm_snap_write(const struct fsm *f, uint8_t **bytes, size_t *len)
{
    struct buf b;
    struct flags fl = {0};
    buf_init(&b);
    /* About 100 bytes per job beyond its strings and script. */
    size_t guess = f->jobs.bytes + f->sess.bytes + f->jobs.count * 100 + f->nodes.n * 256 +
                   f->acct.bytes + f->acct.n * 8 + 4096;
    int rc = buf_reserve(&b, guess) ? 0 : -1;
    if (rc == 0)
        rc = write_header(f, &b);
    for (size_t i = 0; rc == 0 && i < f->nodes.n; i++)
        rc = write_node(f->nodes.v[i], &b);
    for (const struct fsm_sess *s = f->sess.oldest; rc == 0 && s != NULL; s = s->next)
        rc = write_session(s, &b);
    for (size_t i = 0; rc == 0 && i < f->jobs.norder; i++)
        if (f->jobs.order[i] != NULL)
            rc = write_job(f->jobs.order[i], &b, &fl);
    for (size_t i = 0; rc == 0 && i < f->acct.n; i++)
        rc = write_acct(fsm_acct_at(&f->acct, i), &b);
    free(fl.v);
    if (rc != 0) {
        buf_free(&b);
        return FSM_ENOMEM;
    }
    *bytes = (uint8_t *)b.p; /* the caller's now: free() */
    *len = b.len;
    return FSM_OK;
}

/* ---- reader ------------------------------------------------------------------------------- */

struct reader {
    struct fsm *f;
    char *err;
    size_t errlen;
    Spur__Fsm__SnapshotHeader *header; /* owned until the end of the read */
    const char *last_node;             /* name of the previous node record */
    uint64_t last_session_index;
    uint64_t last_job_id;
    size_t nsessions;
};

static int bad(struct reader *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct reader *rd, const char *fmt, ...)
{
    int n = snprintf(rd->err, rd->errlen, "snapshot: ");
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < rd->errlen)
        vsnprintf(rd->err + n, rd->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return FSM_EINVAL;
}

static int get_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*pos >= len)
            return -1;
        uint8_t byte = p[(*pos)++];
        x |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static int read_header(struct reader *rd, const uint8_t *p, size_t len)
{
    Spur__Fsm__SnapshotHeader *h = spur__fsm__snapshot_header__unpack(NULL, len, p);
    if (h == NULL)
        return bad(rd, "the header does not decode");
    rd->header = h;
    if (h->format_version < 1 || h->format_version > FSM_SNAPSHOT_VERSION)
        return bad(rd, "format version %u; this build reads 1 to %d", h->format_version,
                   FSM_SNAPSHOT_VERSION);
    if (h->next_job_id == 0)
        return bad(rd, "the next job id is 0");
    if (h->finished_job_retention_s > FSM_MAX_RETENTION_S || h->max_script_bytes == 0 ||
        h->max_script_bytes > FSM_MAX_SCRIPT_SETTING)
        return bad(rd, "settings out of range (retention %u s, max script %u bytes)",
                   h->finished_job_retention_s, h->max_script_bytes);
    for (size_t i = 0; i < h->n_partitions; i++)
        if (h->partitions[i] == NULL)
            return bad(rd, "partition %zu is empty", i + 1);
    char why[FSM_ERR_MAX];
    if (fsm_nodes_check_parts(h->partitions, h->n_partitions, why, sizeof(why)) != 0)
        return bad(rd, "%s", why);
    struct fsm *f = rd->f;
    f->last_applied = h->last_applied;
    f->next_job_id = h->next_job_id;
    f->now_ms = h->log_time_ms;
    f->retention_s = h->finished_job_retention_s;
    f->max_script_bytes = h->max_script_bytes;
    /* Format 1 had no outbox: accounting off, the first record will be 1. */
    f->acct.enabled = h->format_version >= 2 && h->accounting;
    f->acct.next_seq = h->format_version >= 2 && h->next_acct_seq != 0 ? h->next_acct_seq : 1;
    return FSM_OK;
}

static int node_from_record(struct reader *rd, const Spur__Fsm__NodeRecord *r)
{
    const char *name = PB_STR(r->name);
    if (!fsm_name_ok(name, FSM_NAME_MAX))
        return bad(rd, "node name \"%.64s\" is not valid", name);
    if (rd->last_node != NULL && strcmp(rd->last_node, name) >= 0)
        return bad(rd, "node \"%s\" is out of order or repeated", name);
    if (r->n_features > FSM_MAX_FEATURES || r->cpus > FSM_MAX_CPUS_PER_NODE ||
        !fsm_text_ok(PB_STR(r->address), FSM_ADDRESS_MAX) ||
        !fsm_text_ok(PB_STR(r->reason), FSM_REASON_MAX) ||
        !fsm_text_ok(PB_STR(r->reason_user), FSM_USER_MAX))
        return bad(rd, "node \"%s\" has fields out of range", name);
    if (rd->f->nodes.n >= FSM_MAX_NODES)
        return bad(rd, "more than %d nodes", FSM_MAX_NODES);
    struct fsm_node *node = fsm_nodes_add(&rd->f->nodes, name);
    if (node == NULL || fsm_node_set_identity(node, r->address, r->features, r->n_features) ||
        fsm_node_set_reason_by(node, r->reason, r->reason_time_ms, r->reason_user, r->reason_uid))
        return FSM_ENOMEM;
    node->cpus = r->cpus;
    node->mem_mb = r->mem_mb;
    node->registered = r->registered;
    node->down = r->down;
    node->drain = r->drain;
    node->reason_time_ms = node->reason != NULL ? r->reason_time_ms : 0;
    node->last_seen_ms = r->last_seen_ms;
    node->launch_failures = r->launch_failures;
    node->not_responding = r->not_responding;
    rd->last_node = node->name;
    return FSM_OK;
}

static int session_from_record(struct reader *rd, const Spur__Fsm__SessionRecord *r)
{
    if (r->client_id == 0)
        return bad(rd, "a session of client 0");
    if (r->last_index <= rd->last_session_index || r->last_index > rd->f->last_applied)
        return bad(rd,
                   "session of client %" PRIu64 ": last index %" PRIu64
                   " out of order or after the last applied %" PRIu64,
                   r->client_id, r->last_index, rd->f->last_applied);
    if (fsm_sess_find(&rd->f->sess, r->client_id) != NULL)
        return bad(rd, "client %" PRIu64 " has two sessions", r->client_id);
    /* It is answered verbatim later, so it must decode now. */
    Spur__Api__Response *resp =
        spur__api__response__unpack(NULL, r->response.len, r->response.data);
    if (resp == NULL)
        return bad(rd, "the response of client %" PRIu64 " does not decode", r->client_id);
    spur__api__response__free_unpacked(resp, NULL);
    uint8_t *copy = malloc(r->response.len ? r->response.len : 1);
    if (copy == NULL)
        return FSM_ENOMEM;
    if (r->response.len > 0)
        memcpy(copy, r->response.data, r->response.len);
    if (fsm_sess_record(&rd->f->sess, r->client_id, r->last_seq, r->last_index, r->last_ms, copy,
                        r->response.len) != 0) {
        free(copy);
        return FSM_ENOMEM;
    }
    rd->last_session_index = r->last_index;
    rd->nsessions++;
    return FSM_OK;
}

static int check_job_record(struct reader *rd, const Spur__Fsm__JobRecord *r)
{
    const Spur__Api__JobSpec *s = r->spec;
    uint64_t id = r->id;
    if (id == 0 || id <= rd->last_job_id || id >= rd->f->next_job_id)
        return bad(rd, "job %" PRIu64 " is out of order or beyond the id counter", id);
    if (s == NULL)
        return bad(rd, "job %" PRIu64 " has no spec", id);
    if ((int)r->state <= 0 || (int)r->state >= FSM_JOB_NSTATES || r->end_reason >= FSM_END_NREASONS)
        return bad(rd, "job %" PRIu64 " has state %d, end reason %u", id, (int)r->state,
                   r->end_reason);
    if (s->nodes == 0 || s->nodes > FSM_MAX_NODES || s->ntasks < s->nodes ||
        s->ntasks > FSM_MAX_TASKS || s->cpus_per_task == 0 ||
        ((uint64_t)(s->ntasks + s->nodes - 1) / s->nodes) * s->cpus_per_task >
            FSM_MAX_CPUS_PER_NODE ||
        s->mem_mb > FSM_MAX_MEM_MB || s->script.len > UINT32_MAX || s->n_env > UINT32_MAX)
        return bad(rd, "job %" PRIu64 " has counts out of range", id);
    bool active = fsm_job_state_placed((int)r->state);
    if (r->n_node_done != r->n_node_list)
        return bad(rd, "job %" PRIu64 ": %zu nodes but %zu done flags", id, r->n_node_list,
                   r->n_node_done);
    if (r->state == SPUR__API__JOB_STATE__JOB_PENDING && r->n_node_list != 0)
        return bad(rd, "pending job %" PRIu64 " has nodes", id);
    if (active && r->n_node_list != s->nodes)
        return bad(rd, "running job %" PRIu64 " has %zu nodes, not %u", id, r->n_node_list,
                   s->nodes);
    if (!fsm_text_ok(PB_STR(s->account), FSM_USER_MAX))
        return bad(rd, "job %" PRIu64 " has an account out of range", id);
    if (r->n_deps > FSM_DEPS_MAX)
        return bad(rd, "job %" PRIu64 " has %zu dependencies", id, r->n_deps);
    for (size_t i = 0; i < r->n_deps; i++) {
        const Spur__Fsm__JobDep *d = r->deps[i];
        if (d->job_id == 0 || d->job_id >= id || !fsm_dep_type_valid(d->type) ||
            d->state > FSM_DEP_FAILED)
            return bad(rd, "job %" PRIu64 " has a dependency out of range", id);
    }
    for (size_t i = 0; i < r->n_node_list; i++) {
        const char *name = PB_STR(r->node_list[i]);
        if (!fsm_name_ok(name, FSM_NAME_MAX))
            return bad(rd, "job %" PRIu64 " names node \"%.64s\"", id, name);
        /* A placeholder (never registered) never runs anything, and finish() drops the
         * ones no partition names: a part on one would point at no node. */
        const struct fsm_node *node = fsm_nodes_find(&rd->f->nodes, name);
        if (active && !r->node_done[i] && (node == NULL || !node->registered))
            return bad(rd, "running job %" PRIu64 " uses unknown node \"%s\"", id, name);
    }
    return FSM_OK;
}

static int job_from_record(struct reader *rd, const Spur__Fsm__JobRecord *r)
{
    int rc = check_job_record(rd, r);
    if (rc != FSM_OK)
        return rc;
    const Spur__Api__JobSpec *s = r->spec;
    struct fsm_job *job = fsm_job_new(s, PB_STR(s->user), PB_STR(s->partition));
    if (job == NULL)
        return FSM_ENOMEM;
    job->id = r->id;
    job->nodes = s->nodes;
    job->ntasks = s->ntasks;
    job->cpus_per_task = s->cpus_per_task;
    job->mem_mb = s->mem_mb;
    job->time_limit_min = s->time_limit_min;
    job->state = (uint8_t)r->state;
    job->submit_ms = r->submit_time_ms;
    job->start_ms = r->start_time_ms;
    job->end_ms = r->end_time_ms;
    job->eligible_ms = r->eligible_time_ms;
    job->held = r->held;
    job->exit_code = r->exit_code;
    job->end_reason = (uint8_t)r->end_reason;
    job->cancel_requested = r->cancel_requested;
    job->timed_out = r->timed_out;
    job->attempt = r->attempt;
    job->restarts = r->restarts;
    job->exit_signal = r->exit_signal;
    job->oom = r->oom;
    if (r->n_node_list > 0) {
        if (fsm_job_set_run(job, r->node_list, (uint32_t)r->n_node_list) != 0) {
            fsm_job_free(job);
            return FSM_ENOMEM;
        }
        for (size_t i = 0; i < r->n_node_list; i++) {
            job->run->done[i] = r->node_done[i] != 0;
            job->run->ndone += job->run->done[i];
        }
    }
    if (r->n_deps > 0 || r->deps_singleton) {
        job->deps = fsm_deps_new((uint32_t)r->n_deps);
        if (job->deps == NULL) {
            fsm_job_free(job);
            return FSM_ENOMEM;
        }
        job->deps->n = (uint32_t)r->n_deps;
        for (size_t i = 0; i < r->n_deps; i++) {
            job->deps->d[i].job_id = r->deps[i]->job_id;
            job->deps->d[i].type = (uint8_t)r->deps[i]->type;
            job->deps->d[i].state = (uint8_t)r->deps[i]->state;
        }
        job->deps->any = r->deps_any;
        job->deps->singleton = r->deps_singleton;
        job->deps->kill_invalid = r->deps_kill_invalid;
        fsm_deps_combine(job->deps);
    }
    if (fsm_jobs_add(&rd->f->jobs, job) != 0) {
        fsm_job_free(job);
        return FSM_ENOMEM;
    }
    rd->last_job_id = job->id;
    /* The index is derived: a waiting job is listed under each job it still waits on. */
    if (job->deps != NULL && job->state == SPUR__API__JOB_STATE__JOB_PENDING &&
        job->deps->state == FSM_DEP_WAIT) {
        for (uint32_t i = 0; i < job->deps->n; i++)
            if (job->deps->d[i].state == FSM_DEP_WAIT &&
                fsm_dep_index_add(&rd->f->jobs.deps, job->deps->d[i].job_id, job->id) != 0)
                return FSM_ENOMEM;
    }
    return FSM_OK;
}

/* Decode one record of the given field and fold it into the state. */
static int read_record(struct reader *rd, uint32_t field, const uint8_t *p, size_t len)
{
    int rc = FSM_OK;
    switch (field) {
    case F_HEADER:
        return read_header(rd, p, len);
    case F_NODE: {
        Spur__Fsm__NodeRecord *r = spur__fsm__node_record__unpack(NULL, len, p);
        if (r == NULL)
            return bad(rd, "node record %zu does not decode", rd->f->nodes.n + 1);
        rc = node_from_record(rd, r);
        spur__fsm__node_record__free_unpacked(r, NULL);
        return rc;
    }
    case F_SESSION: {
        Spur__Fsm__SessionRecord *r = spur__fsm__session_record__unpack(NULL, len, p);
        if (r == NULL)
            return bad(rd, "session record %zu does not decode", rd->nsessions + 1);
        rc = session_from_record(rd, r);
        spur__fsm__session_record__free_unpacked(r, NULL);
        return rc;
    }
    case F_JOB: {
        Spur__Fsm__JobRecord *r = spur__fsm__job_record__unpack(NULL, len, p);
        if (r == NULL)
            return bad(rd, "the job record after job %" PRIu64 " does not decode", rd->last_job_id);
        rc = job_from_record(rd, r);
        spur__fsm__job_record__free_unpacked(r, NULL);
        return rc;
    }
    case F_ACCT: {
        if (rd->header->format_version < 2)
            return bad(rd, "an outbox record in a format %u snapshot", rd->header->format_version);
        char why[FSM_ERR_MAX];
        rc = fsm_acct_restore_record(&rd->f->acct, p, len, why, sizeof(why));
        return rc == FSM_EINVAL ? bad(rd, "%s", why) : rc;
    }
    default:
        return FSM_OK; /* a field a later build added: nothing this build needs */
    }
}

/*
 * Derived data: partitions (with placeholders), the finished list, node allocations
 * (every placed job's unfinished parts: CONFIGURING holds resources as RUNNING does).
 */
static int finish(struct reader *rd)
{
    struct fsm *f = rd->f;
    if (fsm_nodes_set_parts(&f->nodes, rd->header->partitions, rd->header->n_partitions) != 0)
        return FSM_ENOMEM;
    if (fsm_jobs_link_finished(&f->jobs) != 0)
        return FSM_ENOMEM;
    for (size_t i = 0; i < f->jobs.norder; i++) {
        const struct fsm_job *job = f->jobs.order[i];
        if (job != NULL && job->run != NULL && fsm_job_state_placed(job->state))
            fsm_state_alloc_job(f, job);
    }
    return FSM_OK;
}

static int skip_field(const uint8_t *p, size_t len, size_t *pos, unsigned wt)
{
    uint64_t v;
    switch (wt) {
    case 0:
        return get_varint(p, len, pos, &v);
    case 1:
        if (len - *pos < 8)
            return -1;
        *pos += 8;
        return 0;
    case 5:
        if (len - *pos < 4)
            return -1;
        *pos += 4;
        return 0;
    default:
        return -1;
    }
}

int fsm_snap_read(struct fsm *out, const struct fsm_limits *lim, const uint8_t *bytes, size_t len,
                  char *err, size_t errlen)
{
    fsm_state_init(out, lim);
    struct reader rd = {.f = out, .err = err, .errlen = errlen};
    uint32_t last_field = 0;
    size_t pos = 0;
    int rc = FSM_OK;
    while (rc == FSM_OK && pos < len) {
        uint64_t tag, rlen;
        if (get_varint(bytes, len, &pos, &tag) != 0) {
            rc = bad(&rd, "truncated at byte %zu", pos);
            break;
        }
        uint64_t field = tag >> 3;
        unsigned wt = (unsigned)(tag & 7);
        if (field == 0 || field > UINT32_MAX) {
            rc = bad(&rd, "field number %" PRIu64 " at byte %zu", field, pos);
            break;
        }
        if (wt != 2) {
            if (skip_field(bytes, len, &pos, wt) != 0)
                rc = bad(&rd, "malformed field %" PRIu64 " at byte %zu", field, pos);
            continue;
        }
        if (get_varint(bytes, len, &pos, &rlen) != 0 || rlen > len - pos) {
            rc = bad(&rd, "record of field %" PRIu64 " overruns the end", field);
            break;
        }
        if (field < last_field || (field == F_HEADER && rd.header != NULL) ||
            (field != F_HEADER && rd.header == NULL && field <= F_ACCT)) {
            rc = bad(&rd, "records out of order (field %" PRIu64 " after %u)", field, last_field);
            break;
        }
        last_field = (uint32_t)field;
        rc = read_record(&rd, (uint32_t)field, bytes + pos, (size_t)rlen);
        pos += (size_t)rlen;
    }
    if (rc == FSM_OK && rd.header == NULL)
        rc = bad(&rd, "no header");
    if (rc == FSM_OK)
        rc = finish(&rd);
    if (rd.header != NULL)
        spur__fsm__snapshot_header__free_unpacked(rd.header, NULL);
    return rc;
}
