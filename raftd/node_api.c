/*
 * node_api.c - client requests on a replica: what is answered here, what goes through
 * the log, what waits for a ReadIndex, what is forwarded to the leader.
 *
 *   Ping, RaftStatus             answered at once from this replica's own view
 *   job/node writes              leader: batched into one proposal per loop turn, answered
 *                                when applied; follower: forwarded to the leader
 *   membership, transfer         leader only (forwarded from followers); answered when the
 *                                configuration entry is applied / the leader has moved
 *   job/node/partition reads     linearizable by default: ReadIndex through the core (which
 *                                asks the leader when this is a follower), served once
 *                                applied >= the read index; with local_read, answered at
 *                                once from local state and marked stale
 *
 * Before any of that, node_api_permit() (see node_api.h): a request without a proved
 * caller other than a Ping is answered UNAUTHENTICATED, an operator-only one from a user
 * DENIED (and logged). A follower forwards a write with its caller as it came (the
 * forwarder packs the request whole), so the leader encodes the caller who asked.
 *
 * Every request gets exactly one answer: the result, an error, or TIMEOUT when its
 * deadline (the client's timeout_ms, less a margin, at most 60 s) passes first. A TIMEOUT
 * on a write means "unknown": the entry may still commit, and a retry with the same
 * (client_id, seq) is answered from the session table instead of applied twice.
 */
#include "node_api.h"

#include "log.h"
#include "util.h"

#include "spur_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TIMEOUT_MS 10000
#define MAX_TIMEOUT_MS 60000
#define SWEEP_MS 100

/* A client waiting for its proposal (a command or a membership change) to be applied. */
struct prop_waiter {
    struct prop_waiter *next;
    uint64_t index;
    uint64_t term;
    uint64_t deadline_ms;
    struct api_call *call;
    int kind; /* WAIT_FSM, WAIT_CHANGE */
};

enum { WAIT_FSM = 1, WAIT_CHANGE = 2 };

/* A client waiting for a linearizable read, or for a transfer to finish. */
struct read_waiter {
    struct read_waiter *next;
    uint64_t read_id;
    uint64_t index; /* set once the core released the read */
    bool released;
    uint64_t deadline_ms;
    struct api_call *call;
    Spur__Api__Request *req; /* borrowed from the call */
};

/* A proposal queued for the next batch. */
struct pending_prop {
    uint8_t *data; /* owned; fsm command bytes */
    size_t len;
    struct api_call *call; /* NULL for internal proposals */
    uint64_t deadline_ms;
    void (*refused)(void *arg); /* internal proposals: told when the core refuses */
    void *refused_arg;
};

/* Ownership: see node_api.h. The waiter lists own their nodes, not the calls' requests. */
struct node_api {
    struct node *n;          /* borrowed */
    struct forwarder *fwd;   /* borrowed */
    struct prop_waiter *props_head, *props_tail; /* sorted by index */
    struct read_waiter *reads;
    struct read_waiter *transfers; /* waiting for leadership to move */
    struct pending_prop *batch;
    size_t nbatch, capbatch;
    struct event *ev_flush;
    struct event *ev_sweep;
    struct node_api_stats stats;
    node_api_op_fn signal_fn; /* SignalJobRequest on the leader; NULL: none */
    void *signal_arg;
    node_api_op_fn acct_fn; /* AcctQueryRequest on the leader; NULL: none */
    node_api_status_fn acct_status_fn;
    void *acct_arg;
};

static void on_flush(evutil_socket_t fd, short what, void *arg);
static void on_sweep(evutil_socket_t fd, short what, void *arg);

struct node_api *node_api_new(struct node *n, struct forwarder *fwd)
{
    struct node_api *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->n = n;
    a->fwd = fwd;
    a->ev_flush = event_new(n->base, -1, 0, on_flush, a);
    a->ev_sweep = event_new(n->base, -1, EV_PERSIST, on_sweep, a);
    if (a->ev_flush == NULL || a->ev_sweep == NULL) {
        node_api_free(a);
        return NULL;
    }
    struct timeval tv = {0, SWEEP_MS * 1000};
    event_add(a->ev_sweep, &tv);
    return a;
}

void node_api_free(struct node_api *a)
{
    if (a == NULL)
        return;
    node_api_fail_all(a, "this replica is shutting down");
    if (a->ev_flush)
        event_free(a->ev_flush);
    if (a->ev_sweep)
        event_free(a->ev_sweep);
    free(a->batch);
    free(a);
}

void node_api_set_signal_handler(struct node_api *a, node_api_op_fn fn, void *arg)
{
    a->signal_fn = fn;
    a->signal_arg = arg;
}

void node_api_set_acct_handler(struct node_api *a, node_api_op_fn query,
                               node_api_status_fn status, void *arg)
{
    a->acct_fn = query;
    a->acct_status_fn = status;
    a->acct_arg = arg;
}

void node_api_get_stats(const struct node_api *a, struct node_api_stats *out)
{
    *out = a->stats;
}

static uint64_t deadline_of(const Spur__Api__Request *req)
{
    uint64_t t = req->timeout_ms ? req->timeout_ms : DEFAULT_TIMEOUT_MS;
    if (t > MAX_TIMEOUT_MS)
        t = MAX_TIMEOUT_MS;
    /* Answer a little before the client gives up, so it hears "timed out" from us. */
    t = t > 400 ? t - t / 10 : t;
    return node_now_ms() + t;
}

static const char *role_word(const struct node *n)
{
    if (n->raft == NULL)
        return "none";
    return node_role_name(n->role);
}

static void reply_unavailable(struct node *n, struct api_call *call)
{
    const char *hint = node_leader_api(n);
    if (n->leader != 0)
        api_reply_error(call, SPUR__API__CODE__CODE_UNAVAILABLE, n->leader, hint,
                        "not the Raft leader; the leader is node %u", n->leader);
    else
        api_reply_error(call, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL,
                        "not the Raft leader, and no leader is known (election or no quorum)");
}

/* Fill the leader fields every reply carries. */
static void leader_fields(struct node *n, Spur__Api__Response *r)
{
    const char *hint = node_leader_api(n);
    r->leader_id = n->leader;
    r->leader_hint = (char *)(hint ? hint : "");
}

/* The answer of an operation that returns nothing but success. */
static void reply_done(struct node *n, struct api_call *call)
{
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    Spur__Api__Empty done = SPUR__API__EMPTY__INIT;
    r.result_case = SPUR__API__RESPONSE__RESULT_DONE;
    r.done = &done;
    leader_fields(n, &r);
    api_reply(call, &r);
}

/* ---- forwarding ------------------------------------------------------------------- */

static void on_forwarded(void *arg, Spur__Api__Response *resp, const char *err)
{
    struct api_call *call = arg;
    if (resp == NULL) {
        api_reply_error(call, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL, "%s", err);
        return;
    }
    api_reply(call, resp);
}

/* Forward to the leader, or answer UNAVAILABLE when that is not possible. */
static void forward_or_refuse(struct node_api *a, struct api_call *call, Spur__Api__Request *req)
{
    struct node *n = a->n;
    const char *addr = node_leader_api(n);
    if (n->leader == 0 || n->leader == n->id || addr == NULL || addr[0] == '\0' ||
        req->hops > 0) {
        reply_unavailable(n, call);
        return;
    }
    uint64_t left = deadline_of(req) - node_now_ms();
    if (forwarder_send(a->fwd, addr, req, (uint32_t)left, on_forwarded, call) != 0) {
        reply_unavailable(n, call);
        return;
    }
    a->stats.forwarded++;
}

/* ---- proposals -------------------------------------------------------------------- */

static void add_prop_waiter(struct node_api *a, struct api_call *call, uint64_t index,
                            uint64_t term, int kind, uint64_t deadline)
{
    struct prop_waiter *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    w->index = index;
    w->term = term;
    w->kind = kind;
    w->call = call;
    w->deadline_ms = deadline;
    /* Proposals get increasing indexes, so the list stays sorted by appending. */
    if (a->props_tail)
        a->props_tail->next = w;
    else
        a->props_head = w;
    a->props_tail = w;
}

static void queue_proposal(struct node_api *a, uint8_t *data, size_t len, struct api_call *call,
                           uint64_t deadline_ms, void (*refused)(void *), void *refused_arg)
{
    if (a->nbatch == a->capbatch) {
        size_t ncap = a->capbatch ? a->capbatch * 2 : 64;
        struct pending_prop *nb = realloc(a->batch, ncap * sizeof(*nb));
        if (nb == NULL) {
            free(data);
            if (call)
                api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
            return;
        }
        a->batch = nb;
        a->capbatch = ncap;
    }
    a->batch[a->nbatch++] = (struct pending_prop){.data = data,
                                                  .len = len,
                                                  .call = call,
                                                  .deadline_ms = deadline_ms,
                                                  .refused = refused,
                                                  .refused_arg = refused_arg};
    if (a->nbatch == 1)
        event_active(a->ev_flush, EV_TIMEOUT, 0);
}

void node_api_propose_internal(struct node_api *a, uint8_t *data, size_t len,
                               void (*refused)(void *arg), void *arg)
{
    queue_proposal(a, data, len, NULL, 0, refused, arg);
}

/*
 * Propose everything queued in this loop turn as one batch: one step, one persist request,
 * one round of AppendEntries for all of them.
 */
static void flush(struct node_api *a)
{
    struct node *n = a->n;
    size_t cnt = a->nbatch;
    if (cnt == 0)
        return;
    struct raft_proposal *props = calloc(cnt, sizeof(*props));
    if (props == NULL) {
        for (size_t i = 0; i < cnt; i++) {
            if (a->batch[i].call)
                api_reply_error(a->batch[i].call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL,
                                "out of memory");
            free(a->batch[i].data);
        }
        a->nbatch = 0;
        return;
    }
    for (size_t i = 0; i < cnt; i++) {
        props[i].data = a->batch[i].data;
        props[i].len = (uint32_t)a->batch[i].len;
    }
    struct raft_event ev = {.type = RAFT_EV_PROPOSE, .now = node_now_ms()};
    ev.propose.entries = props;
    ev.propose.n = (uint32_t)cnt;
    raft_index first = 0;
    raft_term term = 0;
    a->nbatch = 0; /* proposals made while stepping start a new batch */
    struct pending_prop *batch = a->batch;
    a->batch = NULL;
    a->capbatch = 0;
    int rc = node_step(n, &ev, &first, &term);
    char busy[160] = "";
    if (rc == RAFT_EBUSY && n->raft != NULL) {
        /* BUSY: nothing was appended, so a retry cannot apply anything twice */
        struct raft_status rs;
        raft_get_status(n->raft, &rs);
        if (rs.transferee != 0)
            snprintf(busy, sizeof(busy), "leadership is being handed over to node %u",
                     rs.transferee);
        else
            snprintf(busy, sizeof(busy),
                     "%llu bytes of writes wait to commit (raft.max_uncommitted_bytes is %u)",
                     (unsigned long long)rs.uncommitted_bytes,
                     n->cfg->raft.max_uncommitted_bytes);
    }
    for (size_t i = 0; i < cnt; i++) {
        struct api_call *call = batch[i].call;
        free(batch[i].data);
        if (call == NULL) {
            /* A refused internal proposal (partitions, settings): its owner proposes again. */
            if (rc != RAFT_OK && batch[i].refused)
                batch[i].refused(batch[i].refused_arg);
            continue;
        }
        if (rc == RAFT_OK) {
            a->stats.proposals++;
            add_prop_waiter(a, call, first + i, term, WAIT_FSM, batch[i].deadline_ms);
        } else if (rc == RAFT_ENOTLEADER) {
            reply_unavailable(n, call);
        } else if (rc == RAFT_EINVAL) {
            api_reply_error(call, SPUR__API__CODE__CODE_TOO_LARGE, 0, NULL,
                            "the request is too large to replicate");
        } else if (rc == RAFT_EBUSY) {
            api_reply_error(call, SPUR__API__CODE__CODE_BUSY, n->leader, NULL,
                            "the leader cannot take more writes now: %s; not applied, retry "
                            "later",
                            busy[0] ? busy : raft_rc_name(rc));
        } else {
            api_reply_error(call, SPUR__API__CODE__CODE_BUSY, n->leader, NULL,
                            "the leader cannot take more writes now (%s); retry",
                            raft_rc_name(rc));
        }
    }
    free(batch);
    free(props);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    flush(arg);
}

static void write_op(struct node_api *a, struct api_call *call, Spur__Api__Request *req)
{
    struct node *n = a->n;
    if (n->role != RAFT_LEADER) {
        forward_or_refuse(a, call, req);
        return;
    }
    /*
     * The state machine refuses an oversized script when it applies the entry; refusing it
     * here as well spares the log, the disks and the followers a megabyte that would only
     * be thrown away.
     */
    if (req->op_case == SPUR__API__REQUEST__OP_SUBMIT_JOB && req->submit_job != NULL &&
        req->submit_job->spec != NULL &&
        req->submit_job->spec->script.len > fsm_max_script_bytes(n->fsm)) {
        api_reply_error(call, SPUR__API__CODE__CODE_TOO_LARGE, 0, NULL,
                        "the job script is %zu bytes; the limit is %u",
                        req->submit_job->spec->script.len, fsm_max_script_bytes(n->fsm));
        return;
    }
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = fsm_encode_request(req, wall_ms(), &data, &len);
    if (rc == FSM_EINVAL) { /* no caller: the dispatch refuses that first; never encoded */
        api_reply_error(call, SPUR__API__CODE__CODE_UNAUTHENTICATED, 0, NULL, "not authenticated");
        return;
    }
    if (rc != FSM_OK) {
        api_reply_error(call, SPUR__API__CODE__CODE_INVALID, 0, NULL,
                        "the request cannot be encoded as a command");
        return;
    }
    if (len > n->cfg->controller.max_frame_bytes - 1024) {
        free(data);
        api_reply_error(call, SPUR__API__CODE__CODE_TOO_LARGE, 0, NULL,
                        "the request is %zu bytes; the largest the log takes is %u", len,
                        n->cfg->controller.max_frame_bytes - 1024);
        return;
    }
    queue_proposal(a, data, len, call, deadline_of(req), NULL, NULL);
}

static void complete_props(struct node_api *a, const struct raft_entry *e,
                           const struct fsm_reply *reply)
{
    struct node *n = a->n;
    while (a->props_head && a->props_head->index <= e->index) {
        struct prop_waiter *w = a->props_head;
        a->props_head = w->next;
        if (a->props_head == NULL)
            a->props_tail = NULL;
        if (w->index < e->index || w->term != e->term) {
            api_reply_error(w->call, SPUR__API__CODE__CODE_UNAVAILABLE, n->leader,
                            node_leader_api(n),
                            "leadership changed before the request committed; it was not "
                            "applied, retry");
        } else if (w->kind == WAIT_CHANGE) {
            reply_done(n, w->call);
        } else if (reply != NULL && reply->resp != NULL) {
            /* A shallow copy: reply->resp is freed by protobuf-c, and must not own our hint. */
            Spur__Api__Response r = *reply->resp;
            leader_fields(n, &r);
            api_reply(w->call, &r);
        } else {
            api_reply_error(w->call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL,
                            "the state machine gave no answer for entry %llu",
                            (unsigned long long)e->index);
        }
        free(w);
    }
}

/* ---- reads ------------------------------------------------------------------------ */

static void serve_read(struct node_api *a, struct api_call *call, Spur__Api__Request *req,
                       bool stale)
{
    struct node *n = a->n;
    struct fsm_read rd;
    memset(&rd, 0, sizeof(rd));
    if (req->op_case == SPUR__API__REQUEST__OP_GET_JOBS && req->get_jobs != NULL) {
        /* A page never outgrows the frame: leave room for the envelope. */
        uint32_t budget = n->cfg->controller.max_frame_bytes - 16384;
        if (req->get_jobs->max_bytes == 0 || req->get_jobs->max_bytes > budget)
            req->get_jobs->max_bytes = budget;
    }
    if (fsm_read(n->fsm, req, &rd) != FSM_OK) {
        fsm_read_free(&rd);
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    rd.resp.stale = stale;
    leader_fields(n, &rd.resp);
    api_reply(call, &rd.resp);
    fsm_read_free(&rd);
    a->stats.reads_served++;
    if (stale)
        a->stats.stale_reads++;
}

static void read_op(struct node_api *a, struct api_call *call, Spur__Api__Request *req)
{
    struct node *n = a->n;
    if (req->local_read) {
        serve_read(a, call, req, true);
        return;
    }
    if (n->raft == NULL) {
        reply_unavailable(n, call);
        return;
    }
    struct read_waiter *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    w->read_id = node_new_read_id(n);
    w->call = call;
    w->req = req;
    w->deadline_ms = deadline_of(req);
    w->next = a->reads;
    a->reads = w;
    struct raft_event ev = {.type = RAFT_EV_READ, .now = node_now_ms()};
    ev.read_id = w->read_id;
    int rc = node_step(n, &ev, NULL, NULL);
    if (rc != RAFT_OK) {
        /* Not registered with the core: answer now. */
        for (struct read_waiter **pp = &a->reads; *pp; pp = &(*pp)->next) {
            if (*pp == w) {
                *pp = w->next;
                break;
            }
        }
        if (rc == RAFT_ENOTLEADER)
            reply_unavailable(n, call);
        else
            api_reply_error(call, SPUR__API__CODE__CODE_BUSY, n->leader, node_leader_api(n),
                            "cannot start a linearizable read now (%s); retry",
                            raft_rc_name(rc));
        free(w);
    }
}

static void reads_released(struct node_api *a, const struct raft_read_state *rs, size_t nrs)
{
    struct node *n = a->n;
    for (size_t i = 0; i < nrs; i++) {
        for (struct read_waiter **pp = &a->reads; *pp; pp = &(*pp)->next) {
            struct read_waiter *w = *pp;
            if (w->read_id != rs[i].id)
                continue;
            if (rs[i].rc != RAFT_OK) {
                *pp = w->next;
                reply_unavailable(n, w->call);
                free(w);
            } else {
                w->released = true;
                w->index = rs[i].index;
            }
            break;
        }
    }
}

static void serve_ready_reads(struct node_api *a)
{
    struct node *n = a->n;
    struct read_waiter **pp = &a->reads;
    while (*pp) {
        struct read_waiter *w = *pp;
        if (w->released && n->applied >= w->index) {
            *pp = w->next;
            serve_read(a, w->call, w->req, false);
            free(w);
        } else {
            pp = &w->next;
        }
    }
}

/* ---- cluster operations ------------------------------------------------------------ */

static void reply_ping(struct node *n, struct api_call *call)
{
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    Spur__Api__PingResponse p = SPUR__API__PING_RESPONSE__INIT;
    p.node_id = n->id;
    p.role = (char *)role_word(n);
    p.term = n->term;
    p.version = (char *)SPUR_VERSION;
    r.result_case = SPUR__API__RESPONSE__RESULT_PING;
    r.ping = &p;
    leader_fields(n, &r);
    api_reply(call, &r);
}

static void reply_status(struct node_api *a, struct node *n, struct api_call *call)
{
    Spur__Api__Response r = SPUR__API__RESPONSE__INIT;
    Spur__Api__RaftStatusResponse s = SPUR__API__RAFT_STATUS_RESPONSE__INIT;
    Spur__Api__RaftMember mem[RAFT_MAX_MEMBERS];
    Spur__Api__RaftMember *memp[RAFT_MAX_MEMBERS];
    struct raft_status rs;
    memset(&rs, 0, sizeof(rs));
    s.node_id = n->id;
    s.cluster_name = n->cfg->cluster_name;
    s.role = (char *)role_word(n);
    if (n->raft) {
        raft_get_status(n->raft, &rs);
        const struct raft_config *c = raft_get_config(n->raft);
        s.term = rs.term;
        s.leader_id = rs.leader;
        s.commit_index = rs.commit;
        s.applied_index = n->applied;
        s.last_index = rs.last_index;
        s.snapshot_index = rs.snapshot_index;
        for (uint32_t i = 0; c && i < c->n && i < RAFT_MAX_MEMBERS; i++) {
            Spur__Api__RaftMember *m = &mem[i];
            spur__api__raft_member__init(m);
            m->id = c->members[i].id;
            m->address = (char *)c->members[i].address;
            m->voter = c->members[i].role == RAFT_MEMBER_VOTER;
            for (uint32_t k = 0; k < rs.n_members; k++)
                if (rs.members[k].id == m->id)
                    m->match_index = rs.members[k].match;
            if (m->id == n->id) {
                m->connected = true;
                m->api_address = n->api_address;
                if (rs.role == RAFT_LEADER)
                    m->match_index = rs.persisted;
            } else {
                m->connected = transport_peer_connected(n->tr, m->id);
                const char *api = transport_peer_api(n->tr, m->id);
                m->api_address = (char *)(api ? api : "");
            }
            memp[i] = m;
            s.n_members = i + 1;
        }
        s.members = memp;
    }
    if (a->acct_status_fn)
        a->acct_status_fn(a->acct_arg, &s);
    r.result_case = SPUR__API__RESPONSE__RESULT_RAFT_STATUS;
    r.raft_status = &s;
    leader_fields(n, &r);
    api_reply(call, &r);
}

static void membership_op(struct node_api *a, struct api_call *call, Spur__Api__Request *req)
{
    struct node *n = a->n;
    if (n->role != RAFT_LEADER) {
        forward_or_refuse(a, call, req);
        return;
    }
    struct raft_event ev = {.type = RAFT_EV_CHANGE, .now = node_now_ms()};
    const char *what;
    switch (req->op_case) {
    case SPUR__API__REQUEST__OP_ADD_LEARNER:
        if (req->add_learner->id == 0 || req->add_learner->address == NULL ||
            req->add_learner->address[0] == '\0' ||
            strlen(req->add_learner->address) > RAFT_MAX_ADDRESS) {
            api_reply_error(call, SPUR__API__CODE__CODE_INVALID, 0, NULL,
                            "add-learner needs a non-zero id and a HOST:PORT address");
            return;
        }
        ev.change.type = RAFT_CHANGE_ADD_LEARNER;
        ev.change.id = req->add_learner->id;
        ev.change.address = req->add_learner->address;
        what = "add learner";
        break;
    case SPUR__API__REQUEST__OP_PROMOTE:
        ev.change.type = RAFT_CHANGE_PROMOTE;
        ev.change.id = req->promote->id;
        what = "promote";
        break;
    default:
        ev.change.type = RAFT_CHANGE_REMOVE;
        ev.change.id = req->remove->id;
        what = "remove";
        break;
    }
    raft_index idx = 0;
    raft_term term = 0;
    int rc = node_step(n, &ev, &idx, &term);
    switch (rc) {
    case RAFT_OK:
        log_event(LOG_INFO, "raftd", "membership change proposed", "change=%s id=%u index=%llu",
                  log_q(what), ev.change.id, (unsigned long long)idx);
        add_prop_waiter(a, call, idx, term, WAIT_CHANGE, deadline_of(req));
        break;
    case RAFT_ENOTLEADER:
        reply_unavailable(n, call);
        break;
    case RAFT_EBUSY:
        api_reply_error(call, SPUR__API__CODE__CODE_BUSY, n->leader, NULL,
                        "%s refused: another membership change is still pending", what);
        break;
    case RAFT_ENOTREADY:
        api_reply_error(call, SPUR__API__CODE__CODE_UNAVAILABLE, n->leader, NULL,
                        "%s refused: the new leader has not committed an entry of its term yet; "
                        "retry",
                        what);
        break;
    default:
        api_reply_error(call, SPUR__API__CODE__CODE_CONFLICT, n->leader, NULL,
                        "%s of node %u refused: %s", what, ev.change.id,
                        rc == RAFT_EINVAL ? "no such member, or not allowed in this state"
                                          : raft_rc_name(rc));
        break;
    }
}

static void transfer_op(struct node_api *a, struct api_call *call, Spur__Api__Request *req)
{
    struct node *n = a->n;
    if (n->role != RAFT_LEADER) {
        forward_or_refuse(a, call, req);
        return;
    }
    uint32_t target = req->transfer_leader->target_id;
    if (target == n->id) {
        reply_done(n, call);
        return;
    }
    struct raft_event ev = {.type = RAFT_EV_TRANSFER, .now = node_now_ms()};
    ev.target = target;
    int rc = node_step(n, &ev, NULL, NULL);
    if (rc != RAFT_OK) {
        api_reply_error(call, rc == RAFT_EBUSY ? SPUR__API__CODE__CODE_BUSY
                                               : SPUR__API__CODE__CODE_CONFLICT,
                        n->leader, NULL, "transfer to %u refused: %s", target,
                        rc == RAFT_EINVAL ? "not a voter of this cluster" : raft_rc_name(rc));
        return;
    }
    if (n->role != RAFT_LEADER) { /* moved within the step */
        reply_done(n, call);
        return;
    }
    struct read_waiter *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        api_reply_error(call, SPUR__API__CODE__CODE_INTERNAL, 0, NULL, "out of memory");
        return;
    }
    w->call = call;
    w->req = req;
    w->index = target;
    uint64_t max = 2ull * n->cfg->raft.election_timeout_ms + 1000;
    w->deadline_ms = node_now_ms() + max;
    w->next = a->transfers;
    a->transfers = w;
}

static void leader_changed(struct node_api *a)
{
    struct node *n = a->n;
    /* Transfers waiting here are over once another replica is known to lead; until then
     * they wait (or reach their deadline in the sweep). */
    if (n->role == RAFT_LEADER || n->leader == 0 || n->leader == n->id)
        return;
    while (a->transfers) {
        struct read_waiter *w = a->transfers;
        a->transfers = w->next;
        reply_done(n, w->call);
        free(w);
    }
}

/*
 * The node's applied hook, once per step: the entries applied (answer their proposals),
 * the reads released (serve those the applied index has reached), a change of leader
 * (transfers waiting here are over).
 */
void node_api_applied(struct node_api *a, const struct node_applied *ap)
{
    for (size_t i = 0; i < ap->n_entries; i++)
        complete_props(a, ap->entries[i].entry, ap->entries[i].reply);
    if (ap->n_reads > 0)
        reads_released(a, ap->reads, ap->n_reads); /* skips ids it does not wait for */
    if (ap->n_reads > 0 || ap->state_moved)
        serve_ready_reads(a);
    if (ap->leadership_changed)
        leader_changed(a);
}

/*
 * An operation another part of the worker serves on the leader (fn, given at set-up: the
 * job duties' scancel -s, accounting's sacct): a follower forwards it, a replica built
 * without that part says so.
 */
static void leader_op(struct node_api *a, struct api_call *call, Spur__Api__Request *req,
                      node_api_op_fn fn, void *arg, const char *what)
{
    if (a->n->role != RAFT_LEADER) {
        forward_or_refuse(a, call, req);
        return;
    }
    if (fn == NULL) {
        api_reply_error(call, SPUR__API__CODE__CODE_INVALID, 0, NULL,
                        "%s not supported by this replica", what);
        return;
    }
    fn(arg, call, req);
}

/* ---- permissions -------------------------------------------------------------------- */

int node_api_permit(const Spur__Api__Request *req)
{
    const Spur__Api__Caller *who = req->caller;
    if (who == NULL)
        return req->op_case == SPUR__API__REQUEST__OP_PING ? SPUR__API__CODE__CODE_OK
                                                           : SPUR__API__CODE__CODE_UNAUTHENTICATED;
    if (who->operator_)
        return SPUR__API__CODE__CODE_OK;
    switch (req->op_case) {
    case SPUR__API__REQUEST__OP_UPDATE_NODE:
    case SPUR__API__REQUEST__OP_TRANSFER_LEADER:
    case SPUR__API__REQUEST__OP_ADD_LEARNER:
    case SPUR__API__REQUEST__OP_PROMOTE:
    case SPUR__API__REQUEST__OP_REMOVE:
        return SPUR__API__CODE__CODE_DENIED;
    case SPUR__API__REQUEST__OP_REGISTER_NODE:
        return who->method != NULL && strcmp(who->method, "agent") == 0
                   ? SPUR__API__CODE__CODE_OK
                   : SPUR__API__CODE__CODE_DENIED;
    case SPUR__API__REQUEST__OP_TOKEN: {
        const char *for_user =
            req->token != NULL && req->token->username != NULL ? req->token->username : "";
        return for_user[0] == '\0' || (who->user != NULL && strcmp(for_user, who->user) == 0)
                   ? SPUR__API__CODE__CODE_OK
                   : SPUR__API__CODE__CODE_DENIED;
    }
    default:
        return SPUR__API__CODE__CODE_OK;
    }
}

/* The request's operation by its field name ("update_node"), for log lines. */
static const char *op_name(const Spur__Api__Request *req)
{
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(
        &spur__api__request__descriptor, (unsigned)req->op_case);
    return fd != NULL ? fd->name : "none";
}

/* Answer a request node_api_permit() refused. true when it did. */
static bool refuse_unpermitted(struct api_call *call, const Spur__Api__Request *req)
{
    int code = node_api_permit(req);
    if (code == SPUR__API__CODE__CODE_OK)
        return false;
    if (code == SPUR__API__CODE__CODE_UNAUTHENTICATED) {
        api_reply_error(call, SPUR__API__CODE__CODE_UNAUTHENTICATED, 0, NULL, "not authenticated");
        return true;
    }
    log_event(LOG_INFO, "raftd", "permission denied", "user=%s uid=%u op=%s",
              log_q(req->caller->user != NULL ? req->caller->user : ""), req->caller->uid,
              op_name(req));
    api_reply_error(call, SPUR__API__CODE__CODE_DENIED, 0, NULL, "Access/permission denied");
    return true;
}

/* ---- dispatch ----------------------------------------------------------------------- */

void node_api_dispatch(void *arg, struct api_call *call, Spur__Api__Request *req)
{
    struct node_api *a = arg;
    struct node *n = a->n;
    if (refuse_unpermitted(call, req))
        return;
    if (n->stopping && (n->role == RAFT_LEADER || n->raft == NULL)) {
        /*
         * Handing leadership over: no new proposals here. Once it has moved, a stopping
         * replica keeps forwarding and reading for its last moments, so clients that still
         * reach it do not lose time.
         */
        api_reply_error(call, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL,
                        "this replica is shutting down and handing leadership over; retry");
        return;
    }
    switch (req->op_case) {
    case SPUR__API__REQUEST__OP_PING:
        reply_ping(n, call);
        return;
    case SPUR__API__REQUEST__OP_RAFT_STATUS:
        reply_status(a, n, call);
        return;
    case SPUR__API__REQUEST__OP_TRANSFER_LEADER:
        transfer_op(a, call, req);
        return;
    case SPUR__API__REQUEST__OP_ADD_LEARNER:
    case SPUR__API__REQUEST__OP_PROMOTE:
    case SPUR__API__REQUEST__OP_REMOVE:
        membership_op(a, call, req);
        return;
    case SPUR__API__REQUEST__OP_SIGNAL_JOB:
        leader_op(a, call, req, a->signal_fn, a->signal_arg, "signalling jobs is");
        return;
    case SPUR__API__REQUEST__OP_ACCT_QUERY:
        leader_op(a, call, req, a->acct_fn, a->acct_arg, "accounting queries are");
        return;
    default:
        break;
    }
    switch (fsm_op_kind(req)) {
    case FSM_OP_WRITE:
        write_op(a, call, req);
        return;
    case FSM_OP_READ:
        read_op(a, call, req);
        return;
    default:
        api_reply_error(call, SPUR__API__CODE__CODE_INVALID, 0, NULL,
                        "unknown or empty operation");
        return;
    }
}

/* ---- deadlines ---------------------------------------------------------------------- */

static void timeout_reply(struct node *n, struct api_call *call, bool write)
{
    api_reply_error(call, SPUR__API__CODE__CODE_TIMEOUT, n->leader, node_leader_api(n),
                    write ? "no answer in time; the write may still be applied (a retry with "
                            "the same request is not applied twice)"
                          : "no answer in time (no quorum?)");
}

static void sweep(struct node_api *a)
{
    struct node *n = a->n;
    uint64_t now = node_now_ms();
    /* Proposals: expire in place (the list must stay sorted by index). */
    struct prop_waiter **pp = &a->props_head;
    struct prop_waiter *prev = NULL;
    while (*pp) {
        struct prop_waiter *w = *pp;
        if (now >= w->deadline_ms) {
            *pp = w->next;
            if (a->props_tail == w)
                a->props_tail = prev;
            timeout_reply(n, w->call, true);
            free(w);
        } else {
            prev = w;
            pp = &w->next;
        }
    }
    struct read_waiter **rp = &a->reads;
    while (*rp) {
        struct read_waiter *w = *rp;
        if (now >= w->deadline_ms) {
            *rp = w->next;
            timeout_reply(n, w->call, false);
            free(w);
        } else {
            rp = &w->next;
        }
    }
    rp = &a->transfers;
    while (*rp) {
        struct read_waiter *w = *rp;
        if (now >= w->deadline_ms) {
            *rp = w->next;
            api_reply_error(w->call, SPUR__API__CODE__CODE_TIMEOUT, n->leader,
                            node_leader_api(n), "leadership did not move in time");
            free(w);
        } else {
            rp = &w->next;
        }
    }
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    sweep(arg);
}

void node_api_fail_all(struct node_api *a, const char *why)
{
    for (size_t i = 0; i < a->nbatch; i++) {
        if (a->batch[i].call)
            api_reply_error(a->batch[i].call, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL, "%s",
                            why);
        free(a->batch[i].data);
    }
    a->nbatch = 0;
    while (a->props_head) {
        struct prop_waiter *w = a->props_head;
        a->props_head = w->next;
        api_reply_error(w->call, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL,
                        "%s; the write may still be applied (a retry is not applied twice)", why);
        free(w);
    }
    a->props_tail = NULL;
    struct read_waiter *lists[2] = {a->reads, a->transfers};
    a->reads = a->transfers = NULL;
    for (int k = 0; k < 2; k++) {
        while (lists[k]) {
            struct read_waiter *w = lists[k];
            lists[k] = w->next;
            api_reply_error(w->call, SPUR__API__CODE__CODE_UNAVAILABLE, 0, NULL, "%s", why);
            free(w);
        }
    }
}

size_t node_api_waiting(const struct node_api *a)
{
    size_t k = a->nbatch;
    for (const struct prop_waiter *w = a->props_head; w; w = w->next)
        k++;
    for (const struct read_waiter *w = a->reads; w; w = w->next)
        k++;
    return k;
}
