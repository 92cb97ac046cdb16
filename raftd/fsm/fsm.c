/*
 * fsm.c - the state machine's public face: the apply pipeline (decode, log clock, session
 * expiry, retention, deduplication, the command, the session record), the encoders the
 * worker proposes with, and thin wrappers over reads and snapshots. See fsm.h.
 */
#include "fsm.h"

#include "fsm_arena.h"
#include "fsm_cmd.h"
#include "fsm_query.h"
#include "fsm_snap.h"
#include "fsm_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PB_STR(s) ((s) != NULL ? (s) : "")

void fsm_limits_default(struct fsm_limits *lim)
{
    lim->max_script_bytes = 1u << 20;
    lim->finished_job_retention_s = 86400;
    lim->session_ttl_ms = 3600u * 1000u;
    lim->max_sessions = 65536;
    lim->max_jobs = 1000000;
}

struct fsm *fsm_new(const struct fsm_limits *lim)
{
    struct fsm *f = malloc(sizeof(*f));
    if (f == NULL)
        return NULL;
    fsm_state_init(f, lim);
    return f;
}

void fsm_free(struct fsm *f)
{
    if (f == NULL)
        return;
    fsm_state_free(f);
    free(f);
}

uint64_t fsm_last_applied(const struct fsm *f)
{
    return f->last_applied;
}

uint64_t fsm_log_time_ms(const struct fsm *f)
{
    return f->now_ms;
}

/* ---- apply ------------------------------------------------------------------------------- */

void fsm_reply_clear(struct fsm_reply *reply)
{
    if (reply == NULL)
        return;
    if (reply->resp != NULL)
        spur__api__response__free_unpacked(reply->resp, NULL);
    memset(reply, 0, sizeof(*reply));
}

/* Hand a packed response to the reply (as a decoded tree the caller owns). */
static int give_reply(struct fsm_reply *reply, const uint8_t *bytes, size_t len)
{
    if (reply == NULL)
        return FSM_OK;
    reply->resp = spur__api__response__unpack(NULL, len, bytes);
    return reply->resp != NULL ? FSM_OK : FSM_ENOMEM;
}

/* Reply with a result that no session records (bad entries, stale requests). */
static int reply_result(struct fsm_reply *reply, const struct fsm_cmd_result *r)
{
    if (reply == NULL)
        return FSM_OK;
    uint8_t *bytes;
    size_t len;
    if (fsm_cmd_result_pack(r, &bytes, &len) != FSM_OK)
        return FSM_ENOMEM;
    int rc = give_reply(reply, bytes, len);
    free(bytes);
    return rc;
}

/* Time-driven upkeep before each entry: the log clock, session expiry, retention. */
static void advance(struct fsm *f, uint64_t time_ms)
{
    if (time_ms > f->now_ms)
        f->now_ms = time_ms;
    f->ctr.expired_sessions +=
        fsm_sess_expire(&f->sess, f->now_ms, f->lim.session_ttl_ms, f->lim.max_sessions);
    uint64_t keep_ms = (uint64_t)f->retention_s * 1000u;
    if (f->now_ms >= keep_ms)
        f->ctr.purged_jobs += fsm_jobs_purge(&f->jobs, f->now_ms - keep_ms);
}

static int apply_command(struct fsm *f, uint64_t index, const Spur__Fsm__Command *cmd,
                         struct fsm_reply *reply)
{
    struct fsm_cmd_result r;
    fsm_cmd_result_init(&r);
    if (reply != NULL) {
        reply->client_id = cmd->client_id;
        reply->seq = cmd->seq;
    }
    advance(f, cmd->time_ms);

    struct fsm_sess *s = cmd->client_id != 0 ? fsm_sess_find(&f->sess, cmd->client_id) : NULL;
    if (s != NULL && cmd->seq == s->last_seq) {
        f->ctr.duplicates++;
        fsm_sess_touch(&f->sess, s, index, f->now_ms);
        if (reply != NULL)
            reply->duplicate = true;
        return give_reply(reply, s->resp, s->resp_len);
    }
    if (s != NULL && cmd->seq < s->last_seq) {
        f->ctr.rejected++;
        fsm_cmd_fail(&r, SPUR__API__CODE__CODE_INVALID,
                     "stale request: seq %" PRIu64 " of client %" PRIu64
                     " is older than its last write (%" PRIu64 ")",
                     cmd->seq, cmd->client_id, s->last_seq);
        return reply_result(reply, &r);
    }

    int rc = fsm_cmd_apply(f, cmd, &r);
    if (rc != FSM_OK) {
        fsm_cmd_result_free(&r);
        return rc;
    }
    if (r.code != SPUR__API__CODE__CODE_OK)
        f->ctr.rejected++;
    uint8_t *bytes;
    size_t len;
    rc = fsm_cmd_result_pack(&r, &bytes, &len);
    fsm_cmd_result_free(&r);
    if (rc != FSM_OK)
        return rc;
    rc = give_reply(reply, bytes, len);
    if (rc == FSM_OK && cmd->client_id != 0 && f->lim.max_sessions > 0) {
        if (fsm_sess_record(&f->sess, cmd->client_id, cmd->seq, index, f->now_ms, bytes, len) !=
            0) {
            free(bytes);
            return FSM_ENOMEM;
        }
        f->ctr.expired_sessions +=
            fsm_sess_expire(&f->sess, f->now_ms, f->lim.session_ttl_ms, f->lim.max_sessions);
        return FSM_OK;
    }
    free(bytes);
    return rc;
}

int fsm_apply(struct fsm *f, uint64_t index, const uint8_t *data, size_t len,
              struct fsm_reply *reply)
{
    if (reply != NULL)
        memset(reply, 0, sizeof(*reply));
    if (index <= f->last_applied)
        return FSM_ESTALE;
    f->last_applied = index;
    f->ctr.applied++;

    Spur__Fsm__Command *cmd = spur__fsm__command__unpack(NULL, len, data);
    if (cmd == NULL || cmd->version > FSM_COMMAND_VERSION) {
        /*
         * Every replica sees the same bytes and rejects them alike, so skipping the entry
         * keeps the replicas equal. The log clock does not move: the time is unknown.
         */
        struct fsm_cmd_result r;
        fsm_cmd_result_init(&r);
        if (cmd == NULL)
            fsm_cmd_fail(&r, SPUR__API__CODE__CODE_INVALID,
                         "log entry %" PRIu64 " does not decode as a command", index);
        else
            fsm_cmd_fail(&r, SPUR__API__CODE__CODE_INVALID,
                         "log entry %" PRIu64 " has command version %u; this build reads up to %d",
                         index, cmd->version, FSM_COMMAND_VERSION);
        if (cmd != NULL)
            spur__fsm__command__free_unpacked(cmd, NULL);
        f->ctr.bad_entries++;
        int rc = reply_result(reply, &r);
        if (reply != NULL)
            reply->bad_entry = true;
        return rc;
    }
    int rc = apply_command(f, index, cmd, reply);
    spur__fsm__command__free_unpacked(cmd, NULL);
    if (rc != FSM_OK)
        fsm_reply_clear(reply);
    return rc;
}

/* ---- encoders ------------------------------------------------------------------------------ */

enum fsm_op_kind fsm_op_kind(const Spur__Api__Request *req)
{
    switch (req->op_case) {
    case SPUR__API__REQUEST__OP_SUBMIT_JOB:
    case SPUR__API__REQUEST__OP_CANCEL_JOB:
    case SPUR__API__REQUEST__OP_CANCEL_JOBS:
    case SPUR__API__REQUEST__OP_HOLD_JOB:
    case SPUR__API__REQUEST__OP_RELEASE_JOB:
    case SPUR__API__REQUEST__OP_UPDATE_NODE:
    case SPUR__API__REQUEST__OP_REGISTER_NODE:
        return FSM_OP_WRITE;
    case SPUR__API__REQUEST__OP_GET_JOBS:
    case SPUR__API__REQUEST__OP_GET_JOB:
    case SPUR__API__REQUEST__OP_GET_NODES:
    case SPUR__API__REQUEST__OP_GET_PARTITIONS:
        return FSM_OP_READ;
    default:
        return FSM_OP_OTHER;
    }
}

int fsm_encode_command(const Spur__Fsm__Command *cmd, uint8_t **out, size_t *len)
{
    Spur__Fsm__Command c = *cmd;
    if (c.version == 0)
        c.version = FSM_COMMAND_VERSION;
    size_t n = spur__fsm__command__get_packed_size(&c);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        return FSM_ENOMEM;
    *len = spur__fsm__command__pack(&c, buf);
    *out = buf;
    return FSM_OK;
}

int fsm_encode_request(const Spur__Api__Request *req, uint64_t time_ms, uint8_t **out, size_t *len)
{
    /*
     * Who asks decides what apply allows (job ownership), so a write without a proved
     * caller is never encoded: defaulting to anyone, least of all an operator, would let
     * a path that forgot to set it act on every job.
     */
    if (fsm_op_kind(req) != FSM_OP_WRITE)
        return FSM_ENOTWRITE;
    const Spur__Api__Caller *who = req->caller;
    if (who == NULL)
        return FSM_EINVAL;
    /* A missing sub-message is encoded as an empty one, so apply names what is missing. */
    Spur__Api__JobSpec no_spec = SPUR__API__JOB_SPEC__INIT;
    Spur__Api__JobSpec spec; /* a shallow copy: the submitter is the caller */
    Spur__Api__JobIdRequest no_id = SPUR__API__JOB_ID_REQUEST__INIT;
    Spur__Api__CancelJobsRequest no_filter = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    Spur__Api__UpdateNodeRequest no_update = SPUR__API__UPDATE_NODE_REQUEST__INIT;
    Spur__Api__RegisterNodeRequest no_node = SPUR__API__REGISTER_NODE_REQUEST__INIT;

    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.version = FSM_COMMAND_VERSION;
    c.client_id = req->client_id;
    c.seq = req->seq;
    c.time_ms = time_ms;
    c.user = who->user;
    c.caller_uid = who->uid;
    c.caller_operator = who->operator_;
    switch (req->op_case) {
    case SPUR__API__REQUEST__OP_SUBMIT_JOB:
        c.op_case = SPUR__FSM__COMMAND__OP_SUBMIT_JOB;
        /* The job runs as the caller, whatever the client wrote in the spec. */
        spec = req->submit_job != NULL && req->submit_job->spec != NULL ? *req->submit_job->spec
                                                                        : no_spec;
        spec.user = who->user;
        spec.uid = who->uid;
        spec.gid = who->gid;
        c.submit_job = &spec;
        break;
    case SPUR__API__REQUEST__OP_CANCEL_JOB:
        c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOB;
        c.cancel_job = req->cancel_job != NULL ? req->cancel_job : &no_id;
        break;
    case SPUR__API__REQUEST__OP_CANCEL_JOBS:
        c.op_case = SPUR__FSM__COMMAND__OP_CANCEL_JOBS;
        c.cancel_jobs = req->cancel_jobs != NULL ? req->cancel_jobs : &no_filter;
        break;
    case SPUR__API__REQUEST__OP_HOLD_JOB:
        c.op_case = SPUR__FSM__COMMAND__OP_HOLD_JOB;
        c.hold_job = req->hold_job != NULL ? req->hold_job : &no_id;
        break;
    case SPUR__API__REQUEST__OP_RELEASE_JOB:
        c.op_case = SPUR__FSM__COMMAND__OP_RELEASE_JOB;
        c.release_job = req->release_job != NULL ? req->release_job : &no_id;
        break;
    case SPUR__API__REQUEST__OP_UPDATE_NODE:
        c.op_case = SPUR__FSM__COMMAND__OP_UPDATE_NODE;
        c.update_node = req->update_node != NULL ? req->update_node : &no_update;
        break;
    case SPUR__API__REQUEST__OP_REGISTER_NODE:
        c.op_case = SPUR__FSM__COMMAND__OP_REGISTER_NODE;
        c.register_node = req->register_node != NULL ? req->register_node : &no_node;
        break;
    default:
        return FSM_ENOTWRITE;
    }
    return fsm_encode_command(&c, out, len);
}

int fsm_encode_tick(uint64_t time_ms, uint8_t **out, size_t *len)
{
    Spur__Fsm__Tick tick = SPUR__FSM__TICK__INIT;
    Spur__Fsm__Command c = SPUR__FSM__COMMAND__INIT;
    c.time_ms = time_ms;
    c.op_case = SPUR__FSM__COMMAND__OP_TICK;
    c.tick = &tick;
    return fsm_encode_command(&c, out, len);
}

/* ---- configuration ------------------------------------------------------------------------- */

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

struct name_ref {
    const char *s;
    size_t i;
};

static int cmp_name_ref(const void *a, const void *b)
{
    const struct name_ref *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    if (c != 0)
        return c;
    return x->i < y->i ? -1 : (x->i > y->i);
}

/*
 * Split a configured node list ("a, b,c") into names in the arena, blanks and empty items
 * dropped, and every name after its first occurrence dropped. Returns 0 or -1.
 */
static int split_nodes(struct fsm_arena *a, const char *list, char ***out, size_t *n)
{
    size_t max = 1;
    for (const char *p = list; *p; p++)
        max += *p == ',';
    char **v = fsm_arena_alloc(a, max, sizeof(*v));
    if (v == NULL)
        return -1;
    size_t k = 0;
    const char *p = list;
    while (*p) {
        while (is_blank(*p))
            p++;
        const char *start = p;
        while (*p && *p != ',')
            p++;
        const char *end = p;
        while (end > start && is_blank(end[-1]))
            end--;
        if (end > start) {
            char *s = fsm_arena_alloc(a, (size_t)(end - start) + 1, 1);
            if (s == NULL)
                return -1;
            memcpy(s, start, (size_t)(end - start));
            v[k++] = s;
        }
        if (*p == ',')
            p++;
    }
    /* Drop repeats, keeping first occurrences in order: sort (name, position), mark. */
    struct name_ref *refs = fsm_arena_alloc(a, k ? k : 1, sizeof(*refs));
    bool *drop = fsm_arena_alloc(a, k ? k : 1, sizeof(*drop));
    if (refs == NULL || drop == NULL)
        return -1;
    for (size_t i = 0; i < k; i++)
        refs[i] = (struct name_ref){v[i], i};
    qsort(refs, k, sizeof(*refs), cmp_name_ref);
    for (size_t i = 1; i < k; i++)
        if (strcmp(refs[i - 1].s, refs[i].s) == 0)
            drop[refs[i].i] = true;
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        if (!drop[i])
            v[m++] = v[i];
    *out = v;
    *n = m;
    return 0;
}

/* The configuration's partitions as SetPartitions carries them, in the arena. */
static int conf_partitions(struct fsm_arena *a, const struct fsm_partition_conf *cp, size_t n,
                           Spur__Api__Partition ***out)
{
    Spur__Api__Partition **v = fsm_arena_alloc(a, n ? n : 1, sizeof(*v));
    Spur__Api__Partition *parts = fsm_arena_alloc(a, n ? n : 1, sizeof(*parts));
    if (v == NULL || parts == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        Spur__Api__Partition *p = &parts[i];
        spur__api__partition__init(p);
        p->name = (char *)PB_STR(cp[i].name);
        p->nodes_expr = (char *)PB_STR(cp[i].nodes);
        p->is_default = cp[i].is_default;
        p->up = cp[i].up;
        p->max_nodes = cp[i].max_nodes;
        p->max_time_min = cp[i].max_time_min;
        p->max_cpus_per_node = cp[i].max_cpus_per_node;
        p->max_mem_mb_per_node = cp[i].max_mem_mb_per_node;
        if (strcasecmp(p->nodes_expr, "ALL") != 0 &&
            split_nodes(a, p->nodes_expr, &p->nodes, &p->n_nodes) != 0)
            return -1;
        v[i] = p;
    }
    *out = v;
    return 0;
}

bool fsm_partitions_differ(const struct fsm *f, const struct fsm_partition_conf *conf, size_t n)
{
    struct fsm_arena a;
    fsm_arena_init(&a);
    Spur__Api__Partition **parts;
    bool differ = true;
    if (conf_partitions(&a, conf, n, &parts) == 0)
        differ = !fsm_nodes_parts_equal(&f->nodes, parts, n);
    fsm_arena_free(&a);
    return differ;
}

bool fsm_settings_differ(const struct fsm *f, const struct fsm_settings_conf *s)
{
    return f->retention_s != s->finished_job_retention_s ||
           f->max_script_bytes != s->max_script_bytes || f->acct.enabled != s->accounting;
}

int fsm_encode_set_partitions(const struct fsm_partition_conf *conf, size_t n,
                              uint64_t time_ms, uint8_t **out, size_t *len, char *err,
                              size_t errlen)
{
    struct fsm_arena a;
    fsm_arena_init(&a);
    Spur__Api__Partition **parts;
    int rc = FSM_ENOMEM;
    if (conf_partitions(&a, conf, n, &parts) == 0) {
        if (fsm_nodes_check_parts(parts, n, err, errlen) != 0) {
            rc = FSM_EINVAL;
        } else {
            Spur__Fsm__SetPartitions sp = SPUR__FSM__SET_PARTITIONS__INIT;
            sp.n_partitions = n;
            sp.partitions = parts;
            Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
            cmd.time_ms = time_ms;
            cmd.op_case = SPUR__FSM__COMMAND__OP_SET_PARTITIONS;
            cmd.set_partitions = &sp;
            rc = fsm_encode_command(&cmd, out, len);
        }
    }
    fsm_arena_free(&a);
    return rc;
}

int fsm_encode_set_settings(const struct fsm_settings_conf *conf, uint64_t time_ms, uint8_t **out,
                            size_t *len)
{
    Spur__Fsm__SetSettings s = SPUR__FSM__SET_SETTINGS__INIT;
    s.finished_job_retention_s = conf->finished_job_retention_s;
    s.max_script_bytes = conf->max_script_bytes;
    s.accounting = conf->accounting;
    Spur__Fsm__Command cmd = SPUR__FSM__COMMAND__INIT;
    cmd.time_ms = time_ms;
    cmd.op_case = SPUR__FSM__COMMAND__OP_SET_SETTINGS;
    cmd.set_settings = &s;
    return fsm_encode_command(&cmd, out, len);
}

/* ---- reads and snapshots ----------------------------------------------------------------- */

int fsm_read(const struct fsm *f, const Spur__Api__Request *req, struct fsm_read *out)
{
    switch (req->op_case) {
    case SPUR__API__REQUEST__OP_GET_JOBS:
        return fsm_query_jobs(f, req->get_jobs, out);
    case SPUR__API__REQUEST__OP_GET_JOB:
        return fsm_query_job(f, req->get_job != NULL ? req->get_job->job_id : 0, out);
    case SPUR__API__REQUEST__OP_GET_NODES:
        return fsm_query_nodes(f, req->get_nodes, out);
    case SPUR__API__REQUEST__OP_GET_PARTITIONS:
        return fsm_query_partitions(f, req->get_partitions, out);
    default: {
        /* Not a read: say so, with nothing allocated. */
        static char msg[] = "not a read request";
        memset(out, 0, sizeof(*out));
        spur__api__response__init(&out->resp);
        out->resp.code = SPUR__API__CODE__CODE_INVALID;
        out->resp.error = msg;
        return FSM_OK;
    }
    }
}

int fsm_get_jobs(const struct fsm *f, const Spur__Api__GetJobsRequest *req, struct fsm_read *out)
{
    return fsm_query_jobs(f, req, out);
}

int fsm_get_job(const struct fsm *f, uint64_t job_id, struct fsm_read *out)
{
    return fsm_query_job(f, job_id, out);
}

int fsm_get_nodes(const struct fsm *f, const Spur__Api__GetNodesRequest *req, struct fsm_read *out)
{
    return fsm_query_nodes(f, req, out);
}

int fsm_get_partitions(const struct fsm *f, const Spur__Api__GetPartitionsRequest *req,
                       struct fsm_read *out)
{
    return fsm_query_partitions(f, req, out);
}

void fsm_read_free(struct fsm_read *out)
{
    fsm_query_free(out);
}

int fsm_snapshot(const struct fsm *f, uint8_t **bytes, size_t *len)
{
    return fsm_snap_write(f, bytes, len);
}

int fsm_restore(struct fsm *f, const uint8_t *bytes, size_t len, char *err, size_t errlen)
{
    struct fsm fresh;
    int rc = fsm_snap_read(&fresh, &f->lim, bytes, len, err, errlen);
    if (rc != FSM_OK) {
        fsm_state_free(&fresh);
        return rc;
    }
    fresh.ctr = f->ctr; /* this process's counters go on */
    /*
     * So does the leader's event record; the state changed wholesale, so a scheduler pass
     * and a look at the nodes are due (the leader reconciles its jobs on its own).
     */
    fresh.ev = f->ev;
    memset(&f->ev, 0, sizeof(f->ev));
    fsm_ev_schedule(&fresh.ev);
    fsm_ev_nodes(&fresh.ev);
    fsm_state_free(f);
    *f = fresh;
    return FSM_OK;
}

uint32_t fsm_max_script_bytes(const struct fsm *f)
{
    return f->max_script_bytes;
}

/* ---- stats ---------------------------------------------------------------------------------- */

void fsm_stats(const struct fsm *f, struct fsm_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->last_applied = f->last_applied;
    out->log_time_ms = f->now_ms;
    out->next_job_id = f->next_job_id;
    out->jobs = f->jobs.count;
    for (int i = 0; i < FSM_JOB_NSTATES; i++)
        out->jobs_by_state[i] = f->jobs.by_state[i];
    out->nodes = f->nodes.n;
    for (size_t i = 0; i < f->nodes.n; i++) {
        int st = fsm_node_state(f->nodes.v[i]);
        if (st >= 0 && st < FSM_NODE_NSTATES)
            out->nodes_by_state[st]++;
    }
    out->partitions = f->nodes.nparts;
    out->sessions = f->sess.count;
    out->finished_job_retention_s = f->retention_s;
    out->max_script_bytes = f->max_script_bytes;
    out->job_bytes = f->jobs.bytes;
    out->session_bytes = f->sess.bytes;
    out->applied = f->ctr.applied;
    out->bad_entries = f->ctr.bad_entries;
    out->rejected = f->ctr.rejected;
    out->duplicates = f->ctr.duplicates;
    out->purged_jobs = f->ctr.purged_jobs;
    out->expired_sessions = f->ctr.expired_sessions;
    out->alloc_skipped = f->ctr.alloc_skipped;
}
