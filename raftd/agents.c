/*
 * agents.c - the leader's agent connections; contract in agents.h.
 *
 * One struct aconn per node, in a list (a cluster has at most a few thousand nodes and
 * each lookup is a handful of string compares). A connection is in one of five phases:
 *
 *     DIAL --resolved, connect started--> CONNECTING --connected, hello sent--> PROVING
 *       ^                                                                          |
 *       |                                                   the agent proved the key
 *       |                                                                          v
 *       +------ the back-off timer ------  WAIT  <--- failure or close ---------- UP
 *
 * In PROVING the frames are the three plain key-proof frames (chan.h); from UP on every
 * frame is sealed and opened through chan_ev.h.
 *
 * The waiting requests of a connection are a FIFO (the agent answers in order), each
 * found again by its id. The sweep timer closes a connection whose oldest request is past
 * its deadline. A failure fails the waiting requests (answer() with reply NULL), calls
 * down() when the connection was up, and arms the back-off timer.
 *
 * Callbacks may call back into this module (send, set, remove): a connection being
 * called back for is marked busy and freed only once the callback returns.
 */
#include "agents.h"

#include "chan.h"
#include "chan_ev.h"
#include "frame_ev.h"
#include "log.h"
#include "util.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define SWEEP_MS 250

enum phase { PH_DIAL, PH_CONNECTING, PH_PROVING, PH_UP, PH_WAIT };

/* A request waiting for its answer; owns nothing. */
struct areq {
    struct areq *next;
    uint64_t id;
    uint64_t deadline_ms;
    Spur__Agent__Msg__BodyCase kind;
    uint64_t job_id;
    uint32_t attempt;
    uint64_t tag;
};

/* Ownership: see agents.h. */
struct aconn {
    struct agents *a;
    struct aconn *next;
    char node[128];
    char address[300];
    enum phase phase;
    struct bufferevent *bev;
    struct chan ch; /* set up for each connection; valid while bev is */
    struct resolver_wait rw;
    struct event *retry;
    uint32_t backoff_ms;
    bool logged_failing; /* the current run of failures is logged */
    bool doomed;         /* removed while a callback ran: free once it returns */
    int busy;            /* callbacks running for this connection */
    struct areq *head, *tail;
    uint32_t npending;
};

struct agents {
    struct event_base *base;
    struct resolver *res;
    struct agents_options o;
    struct agents_hooks h;
    struct aconn *conns;
    struct event *sweep;
    uint64_t next_id;
    uint64_t rng;
    struct agents_stats st;
};

static void dial(struct aconn *c);

static struct aconn *find(const struct agents *a, const char *node)
{
    for (struct aconn *c = a->conns; c; c = c->next)
        if (strcmp(c->node, node) == 0)
            return c;
    return NULL;
}

/* Tell the owner how request r ended (reply, or NULL with err), and free r. */
static void answer_and_free(struct aconn *c, struct areq *r, const Spur__Agent__Msg *reply,
                            const char *err)
{
    struct agents_answer ans = {.node = c->node,
                                .id = r->id,
                                .kind = r->kind,
                                .job_id = r->job_id,
                                .attempt = r->attempt,
                                .tag = r->tag,
                                .reply = reply,
                                .err = err};
    free(r);
    c->a->h.answer(c->a->h.arg, &ans);
}

static void drop_requests(struct aconn *c, const char *why)
{
    struct areq *r = c->head;
    c->head = c->tail = NULL;
    c->npending = 0;
    while (r) {
        struct areq *nx = r->next;
        if (why && !c->doomed)
            answer_and_free(c, r, NULL, why);
        else
            free(r);
        r = nx;
    }
}

static void close_socket(struct aconn *c)
{
    resolver_cancel(&c->rw);
    if (c->bev) {
        bufferevent_free(c->bev);
        chan_free(&c->ch);
    }
    c->bev = NULL;
}

static void conn_free(struct aconn *c)
{
    close_socket(c);
    if (c->phase == PH_UP)
        c->a->st.connected--;
    drop_requests(c, NULL);
    if (c->retry)
        event_free(c->retry);
    free(c);
}

static void unlink_conn(struct aconn *c)
{
    for (struct aconn **pp = &c->a->conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            return;
        }
    }
}

/* The connection failed or closed: fail what waits, tell the owner, retry later. */
static void conn_fail(struct aconn *c, const char *why)
{
    struct agents *a = c->a;
    bool was_up = c->phase == PH_UP;
    close_socket(c);
    if (was_up) {
        a->st.connected--;
        log_event(LOG_WARN, "agents", "agent connection lost", "node=%s address=%s why=%s",
                  log_q(c->node), log_q(c->address), log_q(why));
        c->logged_failing = true;
    } else if (!c->logged_failing) {
        c->logged_failing = true;
        log_event(LOG_WARN, "agents", "cannot reach agent; retrying with back-off",
                  "node=%s address=%s why=%s", log_q(c->node), log_q(c->address), log_q(why));
    }
    a->st.failures++;
    resolver_failed(a->res, c->address);
    c->phase = PH_WAIT;
    uint32_t b = c->backoff_ms;
    uint32_t delay = b / 2 + (uint32_t)(jitter_rand(&a->rng) % (b / 2 + 1));
    c->backoff_ms = b * 2 > a->o.backoff_max_ms ? a->o.backoff_max_ms : b * 2;
    struct timeval tv = {delay / 1000, (delay % 1000) * 1000};
    evtimer_add(c->retry, &tv);
    c->busy++;
    drop_requests(c, why);
    if (was_up && a->h.down && !c->doomed)
        a->h.down(a->h.arg, c->node, why);
    c->busy--;
}

/* After a callback: free a connection that was removed meanwhile. */
static bool settle(struct aconn *c)
{
    if (c->busy == 0 && c->doomed) {
        conn_free(c);
        return true;
    }
    return c->doomed;
}

static bool msg_ok(const struct agents *a, const Spur__Agent__Msg *m)
{
    return m->protocol_version == SPUR_AGENT_PROTOCOL && m->cluster_name != NULL &&
           strcmp(m->cluster_name, a->o.cluster_name) == 0;
}

static void deliver(struct aconn *c, const Spur__Agent__Msg *m)
{
    struct agents *a = c->a;
    /* The agent answered: it works, so the next failure starts the back-off afresh. */
    c->backoff_ms = a->o.backoff_min_ms;
    c->logged_failing = false;
    if (m->id == 0) {
        if (m->body_case == SPUR__AGENT__MSG__BODY_ENDED && m->ended && a->h.ended)
            a->h.ended(a->h.arg, c->node, m->ended);
        return;
    }
    struct areq **pp = &c->head, *prev = NULL;
    while (*pp && (*pp)->id != m->id) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    struct areq *r = *pp;
    if (r == NULL)
        return; /* an answer to a request already failed: nothing waits for it */
    *pp = r->next;
    if (c->tail == r)
        c->tail = prev;
    c->npending--;
    answer_and_free(c, r, m, NULL);
}

/* The agent proved the key: the connection is up, the owner sends its Ping now. */
static void conn_up(struct aconn *c)
{
    struct agents *a = c->a;
    c->phase = PH_UP;
    a->st.connected++;
    a->st.connects++;
    bufferevent_set_timeouts(c->bev, NULL, NULL);
    log_event(LOG_INFO, "agents", "agent connected", "node=%s address=%s key_id=%s", log_q(c->node),
              log_q(c->address), chan_key_id(&c->ch));
    if (a->h.up)
        a->h.up(a->h.arg, c->node);
}

/*
 * PROVING: take the agent's hello from `in`, send our proof. Returns true once the
 * connection is up; false when more bytes are needed or it failed (conn_fail() ran).
 */
static bool prove(struct aconn *c, struct evbuffer *in)
{
    struct agents *a = c->a;
    uint8_t *body = NULL;
    size_t len = 0;
    enum frame_status st = frame_ev_take(in, CHAN_MAX_HELLO, &body, &len);
    if (st == FRAME_NEED_MORE)
        return false;
    if (st != FRAME_READY) {
        a->st.auth_refused++;
        conn_fail(c, st == FRAME_TOO_BIG ? "the agent's key-proof frame is over the limit"
                                         : "out of memory");
        return false;
    }
    uint8_t *out = NULL;
    size_t outlen = 0;
    enum chan_rc rc = chan_take_hello(&c->ch, body, len, &out, &outlen);
    free(body);
    if (rc != CHAN_OK) {
        free(out);
        a->st.auth_refused++;
        char why[300];
        snprintf(why, sizeof(why), "%s", chan_why(&c->ch));
        conn_fail(c, why);
        return false;
    }
    int added = chan_ev_add_raw(bufferevent_get_output(c->bev), out, outlen);
    free(out);
    if (added != 0) {
        conn_fail(c, "out of memory");
        return false;
    }
    conn_up(c);
    return true;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct aconn *c = arg;
    struct agents *a = c->a;
    struct evbuffer *in = bufferevent_get_input(bev);
    c->busy++;
    if (c->phase == PH_PROVING && !c->doomed && c->bev == bev)
        prove(c, in);
    while (c->phase == PH_UP && !c->doomed && c->bev == bev) {
        uint8_t *body = NULL;
        size_t len = 0;
        enum chan_rc crc = CHAN_OK;
        int st = chan_ev_take(&c->ch, in, a->o.max_frame, &body, &len, &crc);
        if (st == FRAME_NEED_MORE)
            break;
        if (st != FRAME_READY) {
            char why[300];
            if (st == FRAME_TOO_BIG)
                snprintf(why, sizeof(why), "a frame of %zu bytes, over the limit of %u", len,
                         a->o.max_frame);
            else if (st == CHAN_EV_REFUSED)
                snprintf(why, sizeof(why), "%s", chan_why(&c->ch));
            else
                snprintf(why, sizeof(why), "out of memory");
            a->st.bad_frames += st == FRAME_TOO_BIG;
            a->st.auth_refused += st == CHAN_EV_REFUSED;
            conn_fail(c, why);
            break;
        }
        Spur__Agent__Msg *m = spur__agent__msg__unpack(NULL, len, body);
        free(body);
        if (m == NULL || !msg_ok(a, m)) {
            a->st.bad_frames++;
            conn_fail(c, m == NULL ? "undecodable frame"
                                   : "a frame of another cluster or protocol version");
            if (m)
                spur__agent__msg__free_unpacked(m, NULL);
            break;
        }
        deliver(c, m);
        spur__agent__msg__free_unpacked(m, NULL);
    }
    c->busy--;
    settle(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct aconn *c = arg;
    if (what & BEV_EVENT_CONNECTED) {
        int one = 1;
        setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* The key proof first; up() once the agent has proved the key. */
        c->phase = PH_PROVING;
        uint8_t *hello = NULL;
        size_t len = 0;
        c->busy++;
        if (chan_hello(&c->ch, &hello, &len) != CHAN_OK ||
            chan_ev_add_raw(bufferevent_get_output(bev), hello, len) != 0)
            conn_fail(c, "cannot make the key-proof hello");
        free(hello);
        c->busy--;
        settle(c);
        return;
    }
    char why[160];
    int e = EVUTIL_SOCKET_ERROR();
    if (what & BEV_EVENT_EOF)
        snprintf(why, sizeof(why), "connection closed");
    else if (what & BEV_EVENT_TIMEOUT)
        snprintf(why, sizeof(why), "no key proof from the agent in %u ms", AGENTS_HANDSHAKE_MS);
    else
        snprintf(why, sizeof(why), "%s", evutil_socket_error_to_string(e));
    c->busy++;
    conn_fail(c, why);
    c->busy--;
    settle(c);
}

static void start_connect(struct aconn *c, const struct sockaddr_storage *ss, socklen_t sl)
{
    struct agents *a = c->a;
    if (chan_init(&c->ch, CHAN_INITIATOR, a->o.keyring, a->o.cluster_name, "controller") != 0) {
        char why[300];
        snprintf(why, sizeof(why), "%s", chan_why(&c->ch));
        chan_free(&c->ch);
        conn_fail(c, why);
        return;
    }
    c->bev = bufferevent_socket_new(a->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL) {
        chan_free(&c->ch);
        conn_fail(c, "out of memory");
        return;
    }
    bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    struct timeval hs = {AGENTS_HANDSHAKE_MS / 1000, (AGENTS_HANDSHAKE_MS % 1000) * 1000};
    bufferevent_set_timeouts(c->bev, &hs, &hs);
    c->phase = PH_CONNECTING;
    if (bufferevent_socket_connect(c->bev, (const struct sockaddr *)ss, (int)sl) != 0)
        conn_fail(c, "connect failed");
}

static void on_resolved(void *arg, bool ok, const struct sockaddr_storage *ss, socklen_t sl,
                        const char *err)
{
    struct aconn *c = arg;
    c->busy++;
    if (!ok)
        conn_fail(c, err);
    else
        start_connect(c, ss, sl);
    c->busy--;
    settle(c);
}

static void dial(struct aconn *c)
{
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char err[400];
    c->phase = PH_DIAL;
    int rc =
        resolver_resolve(c->a->res, c->address, &ss, &sl, &c->rw, on_resolved, c, err, sizeof(err));
    if (rc == RESOLVER_FAILED)
        conn_fail(c, err);
    else if (rc == RESOLVER_OK)
        start_connect(c, &ss, sl);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct aconn *c = arg;
    (void)fd;
    (void)what;
    c->busy++;
    dial(c);
    c->busy--;
    settle(c);
}

int agents_set(struct agents *a, const char *node, const char *address)
{
    if (strlen(node) >= sizeof(((struct aconn *)0)->node) ||
        strlen(address) >= sizeof(((struct aconn *)0)->address))
        return -1;
    struct aconn *c = find(a, node);
    if (c && strcmp(c->address, address) == 0)
        return 0;
    if (c) {
        /* Moved: the old connection goes (its requests fail), the new address is dialled. */
        snprintf(c->address, sizeof(c->address), "%s", address);
        c->busy++;
        if (c->phase == PH_UP || c->phase == PH_PROVING || c->phase == PH_CONNECTING ||
            c->phase == PH_DIAL)
            conn_fail(c, "the node's address changed");
        evtimer_del(c->retry);
        c->backoff_ms = a->o.backoff_min_ms;
        if (!c->doomed)
            dial(c);
        c->busy--;
        settle(c);
        return 0;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -1;
    c->a = a;
    snprintf(c->node, sizeof(c->node), "%s", node);
    snprintf(c->address, sizeof(c->address), "%s", address);
    c->backoff_ms = a->o.backoff_min_ms;
    c->retry = evtimer_new(a->base, on_retry, c);
    if (c->retry == NULL) {
        free(c);
        return -1;
    }
    c->next = a->conns;
    a->conns = c;
    c->busy++;
    dial(c);
    c->busy--;
    settle(c);
    return 0;
}

void agents_remove(struct agents *a, const char *node)
{
    struct aconn *c = find(a, node);
    if (c == NULL)
        return;
    unlink_conn(c);
    c->doomed = true;
    if (c->busy == 0) {
        conn_free(c);
    } else {
        /* Freed when the running callback returns; stop it doing anything more. */
        close_socket(c);
        evtimer_del(c->retry);
    }
}

void agents_clear(struct agents *a)
{
    while (a->conns)
        agents_remove(a, a->conns->node);
}

bool agents_is_up(const struct agents *a, const char *node)
{
    const struct aconn *c = find(a, node);
    return c != NULL && c->phase == PH_UP;
}

bool agents_known(const struct agents *a, const char *node)
{
    return find(a, node) != NULL;
}

/* Pack m (with the envelope set on a copy) into c's output. 0 or -1. */
static int send_msg(struct agents *a, struct aconn *c, const Spur__Agent__Msg *m, uint64_t id)
{
    if (c == NULL || c->phase != PH_UP || c->bev == NULL) {
        a->st.refused++;
        return -1;
    }
    Spur__Agent__Msg copy = *m;
    copy.protocol_version = SPUR_AGENT_PROTOCOL;
    copy.cluster_name = (char *)a->o.cluster_name;
    copy.id = id;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    size_t size = spur__agent__msg__get_packed_size(&copy);
    if (size > a->o.max_frame || evbuffer_get_length(out) + size > a->o.max_output ||
        chan_ev_add_message(&c->ch, out, &copy.base) != 0) {
        a->st.refused++;
        return -1;
    }
    return 0;
}

int agents_request(struct agents *a, const char *node, const Spur__Agent__Msg *m, uint64_t job_id,
                   uint32_t attempt, uint64_t tag, uint64_t *id)
{
    struct aconn *c = find(a, node);
    if (c == NULL || c->npending >= a->o.max_pending) {
        a->st.refused++;
        return -1;
    }
    struct areq *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -1;
    r->id = ++a->next_id;
    if (send_msg(a, c, m, r->id) != 0) {
        free(r);
        return -1;
    }
    r->deadline_ms = mono_ms() + a->o.timeout_ms;
    r->kind = m->body_case;
    r->job_id = job_id;
    r->attempt = attempt;
    r->tag = tag;
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->npending++;
    if (id)
        *id = r->id;
    return 0;
}

int agents_push(struct agents *a, const char *node, const Spur__Agent__Msg *m)
{
    return send_msg(a, find(a, node), m, 0);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    struct agents *a = arg;
    uint64_t now = mono_ms();
    (void)fd;
    (void)what;
    /* A callback may change the list: restart the walk after each failure. */
    for (unsigned guard = 0; guard < 100000; guard++) {
        struct aconn *late = NULL;
        for (struct aconn *c = a->conns; c && late == NULL; c = c->next)
            if (c->phase == PH_UP && c->head && now >= c->head->deadline_ms)
                late = c;
        if (late == NULL)
            return;
        char why[96];
        snprintf(why, sizeof(why), "no answer from the agent in %u ms", a->o.timeout_ms);
        a->st.timeouts++;
        late->busy++;
        conn_fail(late, why);
        late->busy--;
        settle(late);
    }
}

struct agents *agents_new(struct event_base *base, const struct agents_options *o,
                          struct resolver *res, const struct agents_hooks *h)
{
    if (res == NULL || h == NULL || h->answer == NULL || o->cluster_name == NULL ||
        o->keyring == NULL || o->keyring->n == 0)
        return NULL;
    struct agents *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->base = base;
    a->res = res;
    a->o = *o;
    a->h = *h;
    if (a->o.max_pending == 0)
        a->o.max_pending = AGENTS_MAX_PENDING;
    if (a->o.max_output == 0)
        a->o.max_output = AGENTS_MAX_OUTPUT;
    if (a->o.timeout_ms == 0)
        a->o.timeout_ms = AGENTS_TIMEOUT_MS;
    if (a->o.backoff_min_ms == 0)
        a->o.backoff_min_ms = AGENTS_BACKOFF_MIN_MS;
    if (a->o.backoff_max_ms < a->o.backoff_min_ms)
        a->o.backoff_max_ms = a->o.backoff_min_ms > AGENTS_BACKOFF_MAX_MS ? a->o.backoff_min_ms
                                                                          : AGENTS_BACKOFF_MAX_MS;
    a->rng = o->seed | 1;
    a->sweep = event_new(base, -1, EV_PERSIST, on_sweep, a);
    if (a->sweep == NULL) {
        free(a);
        return NULL;
    }
    struct timeval tv = {0, SWEEP_MS * 1000};
    event_add(a->sweep, &tv);
    return a;
}

void agents_free(struct agents *a)
{
    if (a == NULL)
        return;
    agents_clear(a);
    event_free(a->sweep);
    free(a);
}

void agents_get_stats(const struct agents *a, struct agents_stats *out)
{
    *out = a->st;
}
