/*
 * server.c - the leaders' connections to spurd; contract in server.h.
 *
 * Every request is answered before the next frame is read, so answers go out in the
 * order the requests came, as agent.proto promises. The only work done outside a
 * request is server_push_ended(), called by main when a monitor's report appears.
 *
 * A connection starts with the key proof (chan.h, responder): the leader's hello, our
 * hello (or a refusal, flushed, then close), the leader's proof. Those three are plain
 * frames of at most CHAN_MAX_HELLO bytes; every frame after them is opened and sealed
 * through chan_ev.h.
 */
#include "server.h"

#include "chan.h"
#include "chan_ev.h"
#include "frame_ev.h"
#include "listener.h"
#include "log.h"
#include "monitor.h"
#include "netaddr.h"
#include "util.h"

#include "spur_build.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPUR_AGENT_PROTOCOL 1
#define SERVER_OUT_MAX      (64u << 20) /* a leader this far behind in reading is dropped */
#define SERVER_MAX_CONNS    64          /* leaders, old and new; the oldest goes first */
#define SERVER_FINISH_S     10          /* a closing connection's output must go in this */

/* Ownership: the bufferevent (and the socket it closes) and the channel while open. */
struct conn {
    struct server *srv;
    struct bufferevent *bev;
    struct chan ch; /* responder, role "agent" */
    struct conn *prev, *next;
    uint64_t term; /* the last Ping's term; 0: no Ping yet */
    bool pinged;
    bool closing; /* an Error is queued: close once it is flushed */
    char peer[64];
};

struct server {
    struct server_conf c;
    struct evconnlistener *listener;
    struct conn *head;
    unsigned nconns;
    uint64_t last_ping_ms;
    char last_refusal[320]; /* host and reason of the last refusal logged, and when */
    uint64_t last_refusal_ms;
};

static void conn_close(struct conn *c)
{
    struct server *s = c->srv;
    bufferevent_free(c->bev);
    chan_free(&c->ch);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    free(c);
}

/*
 * No more reading or sending on c: it closes once its output is flushed, or when the peer
 * has not taken it within SERVER_FINISH_S (a peer that stopped reading).
 */
static void conn_finish(struct conn *c)
{
    struct timeval tv = {SERVER_FINISH_S, 0};
    c->closing = true;
    bufferevent_disable(c->bev, EV_READ);
    bufferevent_set_timeouts(c->bev, NULL, &tv);
}

static void send_msg(struct conn *c, Spur__Agent__Msg *m)
{
    if (c->closing)
        return;
    m->protocol_version = SPUR_AGENT_PROTOCOL;
    m->cluster_name = (char *)c->srv->c.cluster_name;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (chan_ev_add_message(&c->ch, out, &m->base) != 0) {
        log_event(LOG_ERROR, "agent", "out of memory packing a message; closing the connection",
                  "peer=%s", c->peer);
        conn_finish(c);
        return;
    }
    if (evbuffer_get_length(out) > SERVER_OUT_MAX) {
        /* Reports are sent again on the next connection: nothing is lost by dropping. */
        log_event(LOG_WARN, "agent", "leader does not read its answers; dropping the connection",
                  "peer=%s queued=%zu", c->peer, evbuffer_get_length(out));
        evbuffer_drain(out, evbuffer_get_length(out));
        conn_finish(c);
    }
}

/* An Error naming the problem, then the connection closes once it is flushed. */
static void send_error(struct conn *c, uint64_t id, const char *why)
{
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    Spur__Agent__Error e = SPUR__AGENT__ERROR__INIT;
    e.error = (char *)why;
    m.id = id;
    m.body_case = SPUR__AGENT__MSG__BODY_ERROR;
    m.error = &e;
    log_event(LOG_WARN, "agent", "refused a frame; closing the connection", "peer=%s error=%s",
              c->peer, log_q(why));
    send_msg(c, &m);
    conn_finish(c);
}

/* One report, as the spool holds it, pushed as Msg{id 0, ended}. */
static void send_ended(struct conn *c, const struct spool_job *j)
{
    Spur__Agent__Ended *e = spur__agent__ended__unpack(NULL, j->ended_len, j->ended);
    if (e == NULL)
        return; /* spool_read_ended() decoded it once: only memory can fail here */
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    m.body_case = SPUR__AGENT__MSG__BODY_ENDED;
    m.ended = e;
    send_msg(c, &m);
    spur__agent__ended__free_unpacked(e, NULL);
}

static void on_ping(struct conn *c, uint64_t id, const Spur__Agent__Ping *p)
{
    struct server *s = c->srv;
    struct spool *sp = s->c.spool;
    char err[512];
    if (p->term > sp->term && spool_set_term(sp, p->term, err, sizeof(err)) != 0)
        log_event(LOG_ERROR, "agent", "cannot record the leader's term",
                  "term=%" PRIu64 " error=%s", p->term, log_q(err));
    if (!c->pinged || c->term != p->term)
        log_event(LOG_INFO, "agent", "leader pinged", "peer=%s leader_id=%u term=%" PRIu64, c->peer,
                  p->leader_id, p->term);
    if (p->node_name && p->node_name[0] && strcmp(p->node_name, s->c.node_name) != 0 && !c->pinged)
        log_event(LOG_WARN, "agent", "the leader takes this agent for another node",
                  "peer=%s its_name=%s node=%s", c->peer, log_q(p->node_name),
                  log_q(s->c.node_name));
    c->term = p->term;
    c->pinged = true;
    s->last_ping_ms = mono_ms();

    size_t n = 0;
    for (struct spool_job *j = sp->jobs; j; j = j->next) {
        if (j->ended)
            send_ended(c, j);
        n++;
    }
    Spur__Agent__RunningJob *rj = calloc(n ? n : 1, sizeof(*rj));
    Spur__Agent__RunningJob **rp = calloc(n ? n : 1, sizeof(*rp));
    Spur__Agent__Pong pong = SPUR__AGENT__PONG__INIT;
    pong.node_name = (char *)s->c.node_name;
    pong.cpus = s->c.cpus;
    pong.mem_mb = s->c.mem_mb;
    pong.version = (char *)SPUR_VERSION;
    if (rj != NULL && rp != NULL) {
        size_t i = 0;
        for (struct spool_job *j = sp->jobs; j && i < n; j = j->next, i++) {
            spur__agent__running_job__init(&rj[i]);
            rj[i].job_id = j->job_id;
            rj[i].attempt = j->attempt;
            rj[i].start_time_ms = j->start_time_ms;
            rj[i].ended = j->ended != NULL;
            rp[i] = &rj[i];
        }
        pong.n_running = i;
        pong.running = rp;
    } else {
        /* A Pong without running[] would read as "every job lost": send none at all. */
        log_event(LOG_ERROR, "agent", "out of memory building a Pong; closing", "peer=%s", c->peer);
        free(rj);
        free(rp);
        conn_finish(c);
        return;
    }
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    m.id = id;
    m.body_case = SPUR__AGENT__MSG__BODY_PONG;
    m.pong = &pong;
    send_msg(c, &m);
    free(rj);
    free(rp);
}

static void launch_reply(struct conn *c, uint64_t id, Spur__Agent__LaunchReply *r)
{
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    m.id = id;
    m.body_case = SPUR__AGENT__MSG__BODY_LAUNCH_REPLY;
    m.launch_reply = r;
    send_msg(c, &m);
}

static void launch_refuse(struct conn *c, uint64_t id, const Spur__Agent__Launch *l,
                          bool node_fault, const char *why)
{
    Spur__Agent__LaunchReply r = SPUR__AGENT__LAUNCH_REPLY__INIT;
    r.error = (char *)why;
    r.node_fault = node_fault;
    log_event(LOG_WARN, "agent", "launch refused",
              "job_id=%" PRIu64 " attempt=%u peer=%s "
              "node_fault=%d error=%s",
              l->job_id, l->attempt, c->peer, node_fault, log_q(why));
    launch_reply(c, id, &r);
}

static void on_launch(struct conn *c, uint64_t id, const Spur__Agent__Launch *l)
{
    struct server *s = c->srv;
    struct spool *sp = s->c.spool;
    char why[600];
    if (l->job_id == 0 || l->attempt == 0 || l->spec == NULL || l->node_index >= l->n_node_list) {
        launch_refuse(c, id, l, false,
                      "malformed launch: job id, attempt, spec and this "
                      "node's place in node_list are required");
        return;
    }
    if (c->term < sp->term) {
        snprintf(why, sizeof(why),
                 "stale leader: this connection's term %" PRIu64
                 " is below the highest term seen, %" PRIu64,
                 c->term, sp->term);
        launch_refuse(c, id, l, false, why);
        return;
    }
    if (strcmp(l->node_list[l->node_index], s->c.node_name) != 0) {
        snprintf(why, sizeof(why), "launch for node %s, this agent is node %s",
                 l->node_list[l->node_index], s->c.node_name);
        launch_refuse(c, id, l, false, why);
        return;
    }
    switch (spool_launch_check(sp, l->job_id, l->attempt)) {
    case SPOOL_LAUNCH_FINISHED:
        snprintf(why, sizeof(why),
                 "attempt %u of job %" PRIu64 " has ended here or was "
                 "superseded by a later attempt",
                 l->attempt, l->job_id);
        launch_refuse(c, id, l, false, why);
        return;
    case SPOOL_LAUNCH_PRESENT: {
        const struct spool_job *j = spool_find(sp, l->job_id, l->attempt);
        Spur__Agent__LaunchReply r = SPUR__AGENT__LAUNCH_REPLY__INIT;
        r.ok = true;
        r.already = true;
        r.start_time_ms = j ? j->start_time_ms : 0;
        launch_reply(c, id, &r);
        return;
    }
    case SPOOL_LAUNCH_NEW:
        break;
    }
    if (monitor_check_user(l, why, sizeof(why)) != 0) {
        launch_refuse(c, id, l, false, why);
        return;
    }
    struct spool_job *j;
    if (spool_create(sp, l, &j, why, sizeof(why)) != 0) {
        launch_refuse(c, id, l, true, why);
        return;
    }
    pid_t pid;
    if (monitor_spawn(s->c.mon, j->dirfd, l, &pid, why, sizeof(why)) != 0) {
        char err[512];
        /* Never started: forget it, and never start it here later either. */
        if (spool_remove(sp, j, err, sizeof(err)) != 0)
            log_event(LOG_ERROR, "agent", "cannot forget a launch that failed", "error=%s",
                      log_q(err));
        launch_refuse(c, id, l, true, why);
        return;
    }
    j->pid = pid;
    log_event(LOG_INFO, "agent", "job started",
              "job_id=%" PRIu64 " attempt=%u monitor_pid=%ld "
              "user=%s",
              l->job_id, l->attempt, (long)pid, log_q(l->spec->user));
    Spur__Agent__LaunchReply r = SPUR__AGENT__LAUNCH_REPLY__INIT;
    r.ok = true;
    r.start_time_ms = j->start_time_ms;
    launch_reply(c, id, &r);
}

static void on_signal(struct conn *c, uint64_t id, const Spur__Agent__Signal *sg)
{
    struct spool *sp = c->srv->c.spool;
    Spur__Agent__SignalReply r = SPUR__AGENT__SIGNAL_REPLY__INIT;
    char err[512] = "";
    struct spool_job *j = spool_find(sp, sg->job_id, sg->attempt);
    if (j == NULL) {
        if (sg->terminate && sg->attempt != 0 &&
            spool_tombstone(sp, sg->job_id, sg->attempt, err, sizeof(err)) != 0) {
            r.error = err;
            log_event(LOG_ERROR, "agent", "cannot tombstone a terminated attempt",
                      "job_id=%" PRIu64 " attempt=%u error=%s", sg->job_id, sg->attempt,
                      log_q(err));
        }
    } else if (j->ended != NULL) {
        r.found = true;
        r.ended = true;
    } else if (sg->signal < 0 || sg->signal >= NSIG || (sg->signal == 0 && !sg->terminate)) {
        r.found = true;
        snprintf(err, sizeof(err), "signal %d is not a signal to send", sg->signal);
        r.error = err;
    } else {
        r.found = true;
        int rc = monitor_signal(j->dirfd, sg->signal, sg->terminate, err, sizeof(err));
        if (rc < 0)
            r.error = err;
        log_event(LOG_INFO, "agent", sg->terminate ? "job terminated" : "job signalled",
                  "job_id=%" PRIu64 " attempt=%u signal=%s result=%s", j->job_id, j->attempt,
                  signal_name(sg->signal),
                  rc == 0   ? "sent"
                  : rc == 1 ? "monitor_gone"
                            : "error");
    }
    Spur__Agent__Msg m = SPUR__AGENT__MSG__INIT;
    m.id = id;
    m.body_case = SPUR__AGENT__MSG__BODY_SIGNAL_REPLY;
    m.signal_reply = &r;
    send_msg(c, &m);
}

static void on_ended_ack(struct conn *c, const Spur__Agent__EndedAck *a)
{
    struct spool *sp = c->srv->c.spool;
    if (a->attempt == 0)
        return;
    struct spool_job *j = spool_find(sp, a->job_id, a->attempt);
    if (j == NULL)
        return; /* acknowledged before: nothing left to do */
    if (j->ended == NULL) {
        log_event(LOG_WARN, "agent", "ack of a report not sent; ignored",
                  "job_id=%" PRIu64 " attempt=%u peer=%s", a->job_id, a->attempt, c->peer);
        return;
    }
    char err[512];
    if (spool_remove(sp, j, err, sizeof(err)) != 0)
        log_event(LOG_ERROR, "agent", "cannot forget an acknowledged report",
                  "job_id=%" PRIu64 " attempt=%u error=%s", a->job_id, a->attempt, log_q(err));
    else
        log_event(LOG_DEBUG, "agent", "report acknowledged", "job_id=%" PRIu64 " attempt=%u",
                  a->job_id, a->attempt);
}

static void handle_frame(struct conn *c, const uint8_t *body, size_t len)
{
    struct server *s = c->srv;
    char why[300];
    Spur__Agent__Msg *m = spur__agent__msg__unpack(NULL, len, body);
    if (m == NULL) {
        send_error(c, 0, "frame does not decode as a spur.agent.Msg");
        return;
    }
    if (m->protocol_version != SPUR_AGENT_PROTOCOL) {
        snprintf(why, sizeof(why), "agent protocol version %u, this agent speaks %u",
                 m->protocol_version, SPUR_AGENT_PROTOCOL);
        send_error(c, m->id, why);
    } else if (m->cluster_name == NULL || strcmp(m->cluster_name, s->c.cluster_name) != 0) {
        snprintf(why, sizeof(why),
                 "message of cluster \"%.100s\", this agent belongs to "
                 "cluster \"%.100s\"",
                 m->cluster_name ? m->cluster_name : "", s->c.cluster_name);
        send_error(c, m->id, why);
    } else {
        switch (m->body_case) {
        case SPUR__AGENT__MSG__BODY_PING:
            on_ping(c, m->id, m->ping);
            break;
        case SPUR__AGENT__MSG__BODY_LAUNCH:
            on_launch(c, m->id, m->launch);
            break;
        case SPUR__AGENT__MSG__BODY_SIGNAL:
            on_signal(c, m->id, m->signal);
            break;
        case SPUR__AGENT__MSG__BODY_ENDED_ACK:
            on_ended_ack(c, m->ended_ack);
            break;
        default:
            snprintf(why, sizeof(why),
                     "message of type %d is not one an agent takes "
                     "(Ping, Launch, Signal, EndedAck)",
                     (int)m->body_case);
            send_error(c, m->id, why);
            break;
        }
    }
    spur__agent__msg__free_unpacked(m, NULL);
}

/* One warn line for a refused connection, at most once a minute per host and reason. */
static void log_refusal(struct conn *c, const char *why)
{
    struct server *s = c->srv;
    char host[64];
    snprintf(host, sizeof(host), "%s", c->peer);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0'; /* the source port changes on every retry */
    char key[sizeof(s->last_refusal)];
    snprintf(key, sizeof(key), "%s|%.250s", host, why);
    uint64_t now = mono_ms();
    if (strcmp(key, s->last_refusal) != 0 || now - s->last_refusal_ms >= 60000) {
        snprintf(s->last_refusal, sizeof(s->last_refusal), "%s", key);
        s->last_refusal_ms = now;
        log_event(LOG_WARN, "agent", "leader connection refused", "peer=%s why=%s", c->peer,
                  log_q(why));
    }
}

/*
 * The peer failed the key proof or sent a frame that does not verify: log it, then close
 * once what is queued (a refusal hello) is sent.
 */
static void refuse(struct conn *c, const char *why)
{
    log_refusal(c, why);
    conn_finish(c);
}

/* One key-proof frame from `in`. Returns 1 when one was taken, 0 when more bytes are
 * needed, -1 when the connection was refused. */
static int prove_step(struct conn *c, struct evbuffer *in)
{
    uint8_t *body = NULL;
    size_t len = 0;
    enum frame_status st = frame_ev_take(in, CHAN_MAX_HELLO, &body, &len);
    if (st == FRAME_NEED_MORE)
        return 0;
    if (st != FRAME_READY) {
        refuse(c, st == FRAME_TOO_BIG ? "a key-proof frame over the size limit" : "out of memory");
        return -1;
    }
    uint8_t *out = NULL;
    size_t outlen = 0;
    enum chan_rc rc;
    if (c->ch.state == CHAN_S_PROOF_WAIT)
        rc = chan_take_proof(&c->ch, body, len);
    else
        rc = chan_take_hello(&c->ch, body, len, &out, &outlen);
    free(body);
    int added = 0;
    if (out != NULL) {
        added = chan_ev_add_raw(bufferevent_get_output(c->bev), out, outlen);
        free(out);
    }
    if (rc != CHAN_OK) {
        refuse(c, chan_why(&c->ch));
        return -1;
    }
    if (added != 0) {
        refuse(c, "out of memory");
        return -1;
    }
    if (chan_established(&c->ch)) {
        bufferevent_set_timeouts(c->bev, NULL, NULL);
        log_event(LOG_DEBUG, "agent", "leader proved the cluster key", "peer=%s key_id=%s", c->peer,
                  chan_key_id(&c->ch));
    }
    return 1;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    while (!c->closing) {
        if (!chan_established(&c->ch)) {
            if (prove_step(c, in) <= 0)
                break;
            continue;
        }
        uint8_t *body = NULL;
        size_t len = 0;
        enum chan_rc crc = CHAN_OK;
        int st = chan_ev_take(&c->ch, in, c->srv->c.max_frame, &body, &len, &crc);
        if (st == FRAME_NEED_MORE)
            break;
        if (st == CHAN_EV_REFUSED) {
            refuse(c, chan_why(&c->ch));
            break;
        }
        if (st == FRAME_TOO_BIG) {
            char why[120];
            snprintf(why, sizeof(why), "frame of %zu bytes is over the %u-byte limit", len,
                     c->srv->c.max_frame);
            send_error(c, 0, why);
            break;
        }
        if (st != FRAME_READY) { /* out of memory */
            conn_finish(c);
            break;
        }
        handle_frame(c, body, len);
        free(body);
    }
    if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        conn_close(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        conn_close(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if ((what & BEV_EVENT_TIMEOUT) && !chan_established(&c->ch) && !c->closing) {
        char why[96];
        snprintf(why, sizeof(why), "no key proof in %d s", SERVER_HANDSHAKE_S);
        log_refusal(c, why);
    } else if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        log_event(LOG_DEBUG, "agent", "connection closed", "peer=%s", c->peer);
    }
    conn_close(c);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int sl,
                      void *arg)
{
    struct server *s = arg;
    if (s->nconns >= SERVER_MAX_CONNS) {
        struct conn *old = s->head;
        while (old->next)
            old = old->next;
        log_event(LOG_WARN, "agent", "too many connections; closing the oldest", "peer=%s",
                  old->peer);
        conn_close(old);
    }
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        return;
    }
    c->srv = s;
    if (chan_init(&c->ch, CHAN_RESPONDER, s->c.keyring, s->c.cluster_name, "agent") != 0) {
        log_event(LOG_ERROR, "agent", "cannot set up a channel", "why=%s", log_q(chan_why(&c->ch)));
        chan_free(&c->ch);
        free(c);
        evutil_closesocket(fd);
        return;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, sa, (size_t)sl < sizeof(ss) ? (size_t)sl : sizeof(ss));
    netaddr_format(&ss, c->peer, sizeof(c->peer));
    c->bev = listener_wrap(l, fd, true);
    if (c->bev == NULL) {
        chan_free(&c->ch);
        free(c);
        return;
    }
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    struct timeval hs = {SERVER_HANDSHAKE_S, 0};
    bufferevent_set_timeouts(c->bev, &hs, NULL); /* the key proof must not stall */
    c->next = s->head;                           /* newest first */
    if (s->head)
        s->head->prev = c;
    s->head = c;
    s->nconns++;
}

struct server *server_new(struct event_base *base, const struct server_conf *c, char *err,
                          size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (c->keyring == NULL || c->keyring->n == 0) {
        snprintf(err, errlen, "%s: no cluster key to prove to leaders", c->listen);
        return NULL;
    }
    if (netaddr_listen(c->listen, &ss, &sl, err, errlen) != 0)
        return NULL;
    struct server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "%s: out of memory", c->listen);
        return NULL;
    }
    s->c = *c;
    s->listener = listener_bind(base, &ss, sl, 64, on_accept, s, c->listen, err, errlen);
    if (s->listener == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

void server_free(struct server *s)
{
    if (s == NULL)
        return;
    while (s->head)
        conn_close(s->head);
    evconnlistener_free(s->listener);
    free(s);
}

void server_push_ended(struct server *s, const struct spool_job *j)
{
    if (j->ended == NULL)
        return;
    for (struct conn *c = s->head, *next; c; c = next) {
        next = c->next;
        if (!c->pinged || c->closing)
            continue;
        send_ended(c, j);
        if (c->closing && evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
            conn_close(c);
    }
}

uint64_t server_last_ping_ms(const struct server *s)
{
    return s->last_ping_ms;
}
