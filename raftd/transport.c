/*
 * transport.c - Raft peer connections on libevent; contract in transport.h.
 *
 * Per peer: one outbound connection we dial and write our messages on, and any number of
 * inbound connections the peer dialled, which we read. Both first run the cluster-key
 * handshake (chan.h), then exchange a sealed Handshake frame each way. A connection is
 * "up" once both handshakes are exchanged and checked.
 *
 *   dial -> connected -> ChanHello -> read ChanHello -> ChanProof -> send Handshake
 *        -> read Handshake -> check -> up -> pump queue
 *   accept -> read ChanHello -> ChanHello (or a refusal, flushed, then close)
 *        -> read ChanProof -> read Handshake -> check -> send Handshake -> up -> read
 *
 * The three key-proof frames are plain frames (frame_ev.h, at most CHAN_MAX_HELLO bytes);
 * every frame after them is sealed and opened through chan_ev.h, which checks its MAC and
 * sequence number before the payload is looked at. A frame's length over the limit closes
 * the connection before any allocation. The queue per peer has two lanes; the pump moves
 * control frames into the socket buffer freely and bulk frames only while the socket
 * buffer holds less than BULK_WATERMARK bytes, so that a heartbeat queued behind a
 * snapshot transfer waits for at most one chunk.
 */
#include "transport.h"

#include "cfg.h"
#include "chan.h"
#include "chan_ev.h"
#include "frame_ev.h"
#include "listener.h"
#include "log.h"
#include "netaddr.h"
#include "raft_wire.h"
#include "resolver.h"
#include "util.h"
#include "wire.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BULK_BYTES (64 * 1024)        /* an APPEND above this rides the bulk lane */
#define BULK_WATERMARK (128 * 1024)   /* bulk frames enter the socket below this */
#define CONTROL_WATERMARK (8u << 20)  /* stop pumping control frames above this */
#define QUEUE_MAX_FRAMES 8192
#define QUEUE_MAX_BYTES (64u << 20)
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define HANDSHAKE_TIMEOUT_S 5

/*
 * Ownership, from the top:
 *   - struct transport owns its listener, its resolver (lent to the forwarder through
 *     transport_resolver()), the copies of the cluster name and API address, every peer
 *     on its peers list and every inbound connection on its inbound list. The event base
 *     and the callbacks' arg are the caller's. opt is a copy whose strings point at
 *     t->cluster_name and t->api_address; opt.listen is not kept.
 *   - struct tpeer owns its outbound connection (out), the frames on both lanes of its
 *     queue, its redial timer and its resolver wait. t is its owner, not a reference.
 *   - struct tconn owns its bufferevent (and through it the socket, BEV_OPT_CLOSE_ON_FREE,
 *     and both of its evbuffers) and its channel (ch: OpenSSL contexts and session keys,
 *     released and wiped by tconn_free()); the channel borrows the transport's keyring,
 *     which the caller keeps for the transport's life. An outbound one belongs to its
 *     peer (peer->out); an inbound one to the transport's inbound list, and its peer
 *     pointer, set after the handshake, is borrowed.
 *   - struct tframe owns its payload, from transport_encode() until it is copied into a
 *     socket buffer (put_frame()) or dropped; the caller of transport_encode() owns the
 *     frame until transport_send_frame() or transport_frame_free().
 *   - A received frame is a malloc'd copy (frame_ev_take(), chan_ev_take()) freed as
 *     soon as it is decoded; a decoded message lives until the receive callback returns.
 */
struct tframe {
    struct tframe *next;
    raft_id to;
    uint8_t type;
    bool bulk;
    size_t len;       /* bytes on the wire, header and seal trailer included: what the
                         queue limits count */
    uint8_t *payload; /* owned, malloc'd: len - FRAME_HEADER_LEN - CHAN_TRAILER_LEN bytes,
                         sealed when put into the socket buffer */
};

struct tconn;

struct tpeer {
    struct transport *t;
    raft_id id;
    char address[RAFT_MAX_ADDRESS + 1];
    struct tconn *out;       /* our dialled connection, NULL when none */
    bool up;                 /* outbound handshake complete */
    struct tframe *ctl_head, *ctl_tail, *bulk_head, *bulk_tail;
    size_t qframes, qbytes;
    uint32_t backoff_ms;
    struct event *ev_redial;
    struct resolver_wait rw; /* while the address's name is being looked up */
    bool refused_logged;
    bool down_logged;
    struct transport_peer_info info;
    struct tpeer *next;
};

struct tconn {
    struct transport *t;
    struct bufferevent *bev;
    struct tpeer *peer;  /* outbound: the peer dialled; inbound: set after the handshake */
    bool outbound;
    bool handshaken; /* the Raft Handshake too; the channel is established first */
    raft_id remote_id;
    char remote[80];
    struct chan ch;      /* the cluster-key channel; owned, set up by tconn_new() */
    struct tconn *next;  /* inbound list */
};

/* Refusals already logged, so that a peer retrying forever is logged once a minute. */
#define REFUSAL_SLOTS 16
#define REFUSAL_RELOG_MS 60000
struct refusal {
    char key[256]; /* what, remote host, claimed id, reason */
    uint64_t last_ms;
    uint64_t suppressed;
};

struct transport {
    struct event_base *base;
    struct refusal refusals[REFUSAL_SLOTS];
    unsigned refusal_next;
    struct transport_options opt;
    char *cluster_name;
    char *api_address;
    struct transport_callbacks cb;
    struct evconnlistener *listener;
    struct resolver *res; /* owned; the forwarder borrows it (transport_resolver) */
    struct tpeer *peers;
    struct tconn *inbound;
    bool has_cluster;
    struct raft_config config;
    uint64_t rng; /* jitter_rand() state: reconnect back-off jitter, the resolver's seed */
    struct transport_stats stats;
};

/* ---- small helpers ---------------------------------------------------------------- */

static struct tpeer *peer_find(const struct transport *t, raft_id id)
{
    for (struct tpeer *p = t->peers; p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

void transport_frame_free(struct tframe *f)
{
    if (f) {
        free(f->payload);
        free(f);
    }
}

static void queue_clear(struct tpeer *p)
{
    struct tframe *lists[2] = {p->ctl_head, p->bulk_head};
    for (int i = 0; i < 2; i++) {
        while (lists[i]) {
            struct tframe *f = lists[i];
            lists[i] = f->next;
            p->t->stats.dropped++;
            transport_frame_free(f);
        }
    }
    p->ctl_head = p->ctl_tail = p->bulk_head = p->bulk_tail = NULL;
    p->qframes = p->qbytes = 0;
}

/*
 * Log a refusal (msg) unless the same one (msg, host, claimed id, reason) was logged in the
 * last minute; then say how many were not logged.
 */
static void log_limited(struct transport *t, const char *msg, const char *remote, raft_id claimed,
                        const char *why)
{
    char key[256];
    char host[80];
    snprintf(host, sizeof(host), "%s", remote);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0'; /* the source port changes on every retry */
    snprintf(key, sizeof(key), "%.40s|%s|%u|%.120s", msg, host, claimed, why);
    uint64_t now = mono_ms();
    for (unsigned i = 0; i < REFUSAL_SLOTS; i++) {
        struct refusal *r = &t->refusals[i];
        if (strcmp(r->key, key) != 0)
            continue;
        if (now - r->last_ms < REFUSAL_RELOG_MS) {
            r->suppressed++;
            return;
        }
        log_event(LOG_ERROR, "transport", msg, "from=%s claimed_id=%u why=%s repeats=%llu", remote,
                  claimed, log_q(why), (unsigned long long)r->suppressed);
        r->last_ms = now;
        r->suppressed = 0;
        return;
    }
    struct refusal *r = &t->refusals[t->refusal_next++ % REFUSAL_SLOTS];
    snprintf(r->key, sizeof(r->key), "%s", key);
    r->last_ms = now;
    r->suppressed = 0;
    log_event(LOG_ERROR, "transport", msg, "from=%s claimed_id=%u why=%s", remote, claimed,
              log_q(why));
}

static void log_refusal(struct transport *t, const char *remote, raft_id claimed, const char *why)
{
    log_limited(t, "incoming peer refused", remote, claimed, why);
}

/* ---- connections and their channels ------------------------------------------------ */

/* A connection with its channel set up (side: who dialled). NULL: out of memory. */
static struct tconn *tconn_new(struct transport *t, enum chan_side side)
{
    struct tconn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->t = t;
    if (chan_init(&c->ch, side, t->opt.keyring, t->cluster_name, "replica") != 0) {
        log_event(LOG_ERROR, "transport", "cannot set up a channel", "why=%s",
                  log_q(chan_why(&c->ch)));
        chan_free(&c->ch);
        free(c);
        return NULL;
    }
    return c;
}

static void tconn_free(struct tconn *c)
{
    if (c->bev)
        bufferevent_free(c->bev);
    chan_free(&c->ch);
    free(c);
}

/* Count a failed key proof or a frame that did not verify under the right heading. */
static void count_chan_failure(struct transport *t, enum chan_rc rc)
{
    if (rc == CHAN_BAD_FRAME)
        t->stats.bad_frames++;
    if (rc == CHAN_OTHER_CLUSTER || rc == CHAN_BAD_VERSION)
        t->stats.refused++; /* the same refusals the Raft Handshake makes */
    else
        t->stats.auth_refused++;
}

/*
 * Run the key proof on c with the frames buffered in `in` (plain frames, at most
 * CHAN_MAX_HELLO bytes). What the channel answers (the responder's hello or refusal, the
 * initiator's proof) is appended to c's output. Returns 1 once the channel is established
 * (sealed frames may follow in `in`), 0 when more bytes are needed, -1 when it failed:
 * why says why, *replied whether a refusal waits in the output (flush it, then close).
 */
static int chan_handshake(struct transport *t, struct tconn *c, struct evbuffer *in, bool *replied,
                          char *why, size_t whylen)
{
    *replied = false;
    while (!chan_established(&c->ch)) {
        uint8_t *body = NULL;
        size_t len = 0;
        enum frame_status st = frame_ev_take(in, CHAN_MAX_HELLO, &body, &len);
        if (st == FRAME_NEED_MORE)
            return 0;
        if (st == FRAME_TOO_BIG) {
            t->stats.bad_frames++;
            t->stats.auth_refused++;
            snprintf(why, whylen, "a key-proof frame of %zu bytes, over the %u-byte limit", len,
                     (unsigned)CHAN_MAX_HELLO);
            return -1;
        }
        if (st != FRAME_READY) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        t->stats.bytes_received += FRAME_HEADER_LEN + len;
        uint8_t *out = NULL;
        size_t outlen = 0;
        enum chan_rc rc;
        if (c->ch.side == CHAN_RESPONDER && c->ch.state == CHAN_S_PROOF_WAIT)
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
            count_chan_failure(t, rc);
            snprintf(why, whylen, "%s", chan_why(&c->ch));
            *replied = out != NULL && added == 0;
            return -1;
        }
        if (added != 0) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
    }
    return 1;
}

/*
 * Take and open the next sealed frame of an established channel. Returns 1 with *body
 * (malloc'd, the caller frees it) and *len, 0 when more bytes are needed, -1 when the
 * frame is over the limit or memory is short, -2 when it did not verify (MAC, sequence:
 * counted in auth_refused); why then says which. Every case but 0 and 1 closes.
 */
static int next_sealed(struct transport *t, struct tconn *c, struct evbuffer *in, uint8_t **body,
                       size_t *len, char *why, size_t whylen)
{
    enum chan_rc rc = CHAN_OK;
    /* The inner payload's limit, as before the seal; the trailer comes on top. */
    size_t limit = (size_t)t->opt.max_frame + 65536;
    switch (chan_ev_take(&c->ch, in, limit, body, len, &rc)) {
    case FRAME_READY:
        t->stats.bytes_received += FRAME_HEADER_LEN + *len + CHAN_TRAILER_LEN;
        return 1;
    case FRAME_NEED_MORE:
        return 0;
    case FRAME_TOO_BIG:
        t->stats.bad_frames++;
        snprintf(why, whylen, "frame over the size limit");
        return -1;
    case CHAN_EV_REFUSED:
        count_chan_failure(t, rc);
        snprintf(why, whylen, "%s", chan_why(&c->ch));
        return -2;
    default:
        snprintf(why, whylen, "out of memory");
        return -1;
    }
}

/* ---- handshakes ------------------------------------------------------------------- */

/* Our Handshake, sealed, on c's established channel. */
static int send_handshake(struct transport *t, struct tconn *c)
{
    struct raft_wire_handshake h;
    memset(&h, 0, sizeof(h));
    snprintf(h.cluster_name, sizeof(h.cluster_name), "%s", t->cluster_name);
    h.protocol_version = RAFT_WIRE_VERSION;
    h.node_id = t->opt.self;
    h.has_cluster = t->has_cluster;
    if (t->has_cluster)
        h.config = t->config;
    snprintf(h.api_address, sizeof(h.api_address), "%s", t->api_address);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (raft_wire_handshake_encode(&h, 0, &buf, &len) != RAFT_WIRE_OK)
        return -1;
    int rc = chan_ev_add(&c->ch, bufferevent_get_output(c->bev), buf, len);
    free(buf);
    return rc;
}

/* Check a peer's handshake. Returns 0, or -1 with why filled. */
static int check_handshake(struct transport *t, const struct raft_wire_handshake *h,
                           raft_id expected, char *why, size_t whylen)
{
    if (strcmp(h->cluster_name, t->cluster_name) != 0) {
        snprintf(why, whylen, "peer belongs to cluster \"%s\", this is \"%s\"", h->cluster_name,
                 t->cluster_name);
        return -1;
    }
    if (h->protocol_version != RAFT_WIRE_VERSION) {
        snprintf(why, whylen, "peer speaks protocol version %u, this replica %u",
                 h->protocol_version, RAFT_WIRE_VERSION);
        return -1;
    }
    if (h->node_id == 0 || h->node_id == t->opt.self) {
        snprintf(why, whylen, "peer claims node id %u, which is %s", h->node_id,
                 h->node_id == 0 ? "invalid" : "this replica's own id");
        return -1;
    }
    if (expected != 0 && h->node_id != expected) {
        snprintf(why, whylen, "peer says it is node %u, but this address belongs to node %u",
                 h->node_id, expected);
        return -1;
    }
    return 0;
}

static void fill_info(struct transport *t, struct transport_peer_info *info,
                      const struct raft_wire_handshake *h)
{
    memset(info, 0, sizeof(*info));
    info->id = h->node_id;
    info->has_cluster = h->has_cluster;
    for (uint32_t i = 0; i < h->config.n; i++)
        if (h->config.members[i].id == t->opt.self)
            info->lists_us = true;
    snprintf(info->api_address, sizeof(info->api_address), "%s", h->api_address);
}

/* ---- outbound connections ------------------------------------------------------------ */

static void schedule_redial(struct tpeer *p);
static void pump(struct tpeer *p);

/* Close the outbound connection; quiet: the caller logged why already. */
static void out_close_ex(struct tpeer *p, const char *why, bool quiet)
{
    struct tconn *c = p->out;
    if (c == NULL)
        return;
    bool was_up = p->up;
    p->out = NULL;
    p->up = false;
    tconn_free(c);
    queue_clear(p);
    if (was_up) {
        if (!quiet)
            log_event(LOG_WARN, "transport", "peer connection lost", "peer=%u addr=%s why=%s",
                      p->id, log_q(p->address), log_q(why));
        if (p->t->cb.on_peer)
            p->t->cb.on_peer(p->t->cb.arg, &p->info, false);
    } else if (!p->down_logged && !quiet) {
        p->down_logged = true;
        log_event(LOG_INFO, "transport", "peer not reachable yet; retrying",
                  "peer=%u addr=%s why=%s", p->id, log_q(p->address), log_q(why));
    }
    schedule_redial(p);
}

static void out_close(struct tpeer *p, const char *why)
{
    out_close_ex(p, why, false);
}

/*
 * The connection failed in a way a changed address could explain (refused, timed out,
 * closed, the wrong node answering): tell the resolver, so that the redial looks the name
 * up again (a restarted pod keeps its name, not its IP), then close.
 */
static void out_fail(struct tpeer *p, const char *why)
{
    resolver_failed(p->t->res, p->address);
    out_close(p, why);
}

/* Decode and check a handshake frame (frees body). Returns 0, or -1 with why filled. */
static int take_handshake(struct transport *t, uint8_t *body, size_t len, raft_id expected,
                          struct raft_wire_handshake *h, int *wire_rc, char *why, size_t whylen)
{
    *wire_rc = raft_wire_handshake_decode(body, len, h);
    free(body);
    if (*wire_rc != RAFT_WIRE_OK) {
        t->stats.bad_frames++;
        snprintf(why, whylen, "undecodable handshake (%s)", raft_wire_rc_name(*wire_rc));
        return -1;
    }
    return check_handshake(t, h, expected, why, whylen);
}

/*
 * Decode one message frame of a handshaken connection (frees body) and hand it to the
 * core when it comes from the peer the connection was handshaken with, is addressed to
 * this replica and has a known type; any other message is counted as a bad frame and
 * dropped. Both directions of a connection deliver through here. Returns RAFT_WIRE_OK, or
 * the decoder's code for a frame that did not decode (counted too): the caller closes.
 */
static int deliver_message(struct transport *t, uint8_t *body, size_t len, raft_id from)
{
    struct raft_wire_msg m;
    int rc = raft_wire_decode(body, len, t->cluster_name, &m);
    free(body);
    if (rc != RAFT_WIRE_OK) {
        t->stats.bad_frames++;
        return rc;
    }
    if (m.msg.from == from && m.msg.to == t->opt.self && m.msg.type <= RAFT_MSG_TYPE_MAX) {
        t->stats.received_by_type[m.msg.type]++;
        t->cb.on_message(t->cb.arg, &m.msg);
    } else {
        t->stats.bad_frames++;
    }
    raft_wire_msg_free(&m);
    return RAFT_WIRE_OK;
}

static void out_read(struct bufferevent *bev, void *arg)
{
    struct tconn *c = arg;
    struct tpeer *p = c->peer;
    struct transport *t = c->t;
    struct evbuffer *in = bufferevent_get_input(bev);
    char why[300];
    if (!chan_established(&c->ch)) {
        bool replied;
        int hs = chan_handshake(t, c, in, &replied, why, sizeof(why));
        if (hs == 0)
            return;
        if (hs < 0) {
            /* Once per peer until it comes up: a peer retrying forever is one line. */
            if (!p->refused_logged) {
                p->refused_logged = true;
                log_event(LOG_ERROR, "transport", "peer refused", "peer=%u addr=%s why=%s", p->id,
                          log_q(p->address), log_q(why));
            }
            /* Another host may answer at a reused address: look the name up again. */
            resolver_failed(t->res, p->address);
            out_close_ex(p, why, true);
            return;
        }
        /* Our proof is queued; the channel is ours to seal on: the Raft Handshake next. */
        if (send_handshake(t, c) != 0) {
            out_close(p, "cannot encode the handshake");
            return;
        }
    }
    while (p->out == c) {
        uint8_t *body = NULL;
        size_t len = 0;
        int fr = next_sealed(t, c, in, &body, &len, why, sizeof(why));
        if (fr == 0)
            return;
        if (fr == -2) {
            log_limited(t, "peer frame refused; closing", p->address, p->id, why);
            out_close_ex(p, why, true);
            return;
        }
        if (fr < 0) {
            out_close(p, why);
            return;
        }
        if (!c->handshaken) {
            struct raft_wire_handshake h;
            int rc;
            if (take_handshake(t, body, len, p->id, &h, &rc, why, sizeof(why)) != 0) {
                t->stats.refused++;
                if (!p->refused_logged) {
                    p->refused_logged = true;
                    log_event(LOG_ERROR, "transport", "peer refused", "peer=%u addr=%s why=%s",
                              p->id, log_q(p->address), log_q(why));
                }
                out_fail(p, why);
                return;
            }
            c->handshaken = true;
            p->up = true;
            p->refused_logged = false;
            p->down_logged = false;
            p->backoff_ms = BACKOFF_MIN_MS;
            struct timeval wt = {HANDSHAKE_TIMEOUT_S, 0};
            bufferevent_set_timeouts(bev, NULL, &wt); /* up: silence is no failure now */
            fill_info(t, &p->info, &h);
            log_event(LOG_INFO, "transport", "peer connected",
                      "peer=%u addr=%s has_cluster=%d api=%s key_id=%s", p->id, log_q(p->address),
                      h.has_cluster ? 1 : 0, log_q(h.api_address[0] ? h.api_address : "-"),
                      chan_key_id(&c->ch));
            if (t->cb.on_peer)
                t->cb.on_peer(t->cb.arg, &p->info, true);
            if (p->out == c)
                pump(p);
            continue;
        }
        /* Peers send on their own connections; a message here is accepted all the same. */
        if (deliver_message(t, body, len, p->id) != RAFT_WIRE_OK) {
            out_close(p, "undecodable message");
            return;
        }
    }
}

static void out_write(struct bufferevent *bev, void *arg)
{
    struct tconn *c = arg;
    (void)bev;
    if (c->peer && c->peer->out == c && c->peer->up)
        pump(c->peer);
}

static void out_event(struct bufferevent *bev, short what, void *arg)
{
    struct tconn *c = arg;
    struct tpeer *p = c->peer;
    if (what & BEV_EVENT_CONNECTED) {
        int one = 1;
        setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* The key proof comes first: our hello, plain; nothing else before it is done. */
        uint8_t *hello = NULL;
        size_t len = 0;
        if (chan_hello(&c->ch, &hello, &len) != CHAN_OK ||
            chan_ev_add_raw(bufferevent_get_output(bev), hello, len) != 0) {
            free(hello);
            out_close(p, "cannot make the key-proof hello");
            return;
        }
        free(hello);
        return;
    }
    char why[160];
    if (what & BEV_EVENT_EOF)
        snprintf(why, sizeof(why), "closed by the peer");
    else if (what & BEV_EVENT_TIMEOUT)
        snprintf(why, sizeof(why), "handshake timed out");
    else
        snprintf(why, sizeof(why), "%s", evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    out_fail(p, why);
}

/* Open the outbound connection to an address the resolver gave. */
static void connect_to(struct tpeer *p, const struct sockaddr_storage *ss, socklen_t sl)
{
    struct transport *t = p->t;
    struct tconn *c = tconn_new(t, CHAN_INITIATOR);
    if (c == NULL) {
        schedule_redial(p);
        return;
    }
    c->peer = p;
    c->outbound = true;
    c->bev = bufferevent_socket_new(t->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL) {
        tconn_free(c);
        schedule_redial(p);
        return;
    }
    bufferevent_setcb(c->bev, out_read, out_write, out_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    /* Until the peer is up, both ways: the key proof and the Handshake must not stall. */
    struct timeval hs = {HANDSHAKE_TIMEOUT_S, 0};
    bufferevent_set_timeouts(c->bev, &hs, &hs);
    bufferevent_setwatermark(c->bev, EV_WRITE, BULK_WATERMARK / 2, 0);
    p->out = c;
    if (bufferevent_socket_connect(c->bev, (const struct sockaddr *)ss, (int)sl) != 0)
        out_fail(p, "connect failed");
}

static void resolve_failed(struct tpeer *p, const char *err)
{
    /* The resolver logs the name's trouble once per change; this says which peer waits. */
    if (!p->down_logged) {
        p->down_logged = true;
        log_event(LOG_INFO, "transport", "peer address does not resolve yet; retrying",
                  "peer=%u addr=%s why=%s", p->id, log_q(p->address), log_q(err));
    }
    schedule_redial(p);
}

/* The resolver's answer for a lookup that was still running when dial() asked. */
static void on_resolved(void *arg, bool ok, const struct sockaddr_storage *ss, socklen_t sl,
                        const char *err)
{
    struct tpeer *p = arg;
    if (p->out != NULL || p->address[0] == '\0')
        return;
    if (!ok) {
        resolve_failed(p, err);
        return;
    }
    connect_to(p, ss, sl);
}

/*
 * Dial the peer. Its address is resolved first, without blocking: at once for an IP
 * literal, a hosts-file name or a cached answer, otherwise on_resolved() continues when
 * the lookup ends, and meanwhile the loop goes on (heartbeats, clients, status frames).
 */
static void dial(struct tpeer *p)
{
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char err[400];
    if (p->out != NULL || p->address[0] == '\0' || p->rw.entry != NULL)
        return;
    switch (resolver_resolve(p->t->res, p->address, &ss, &sl, &p->rw, on_resolved, p, err,
                             sizeof(err))) {
    case RESOLVER_OK:
        connect_to(p, &ss, sl);
        break;
    case RESOLVER_PENDING:
        break;
    default:
        resolve_failed(p, err);
        break;
    }
}

static void on_redial(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    dial(arg);
}

static void schedule_redial(struct tpeer *p)
{
    if (p->ev_redial == NULL || p->address[0] == '\0')
        return;
    uint32_t b = p->backoff_ms ? p->backoff_ms : BACKOFF_MIN_MS;
    /* +-25 % jitter so that peers restarted together do not dial in lockstep */
    uint32_t jitter = (uint32_t)(jitter_rand(&p->t->rng) % (b / 2 + 1));
    uint32_t wait = b - b / 4 + jitter;
    struct timeval tv = {wait / 1000, (wait % 1000) * 1000};
    evtimer_add(p->ev_redial, &tv);
    p->backoff_ms = b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
}

/* ---- sending ---------------------------------------------------------------------- */

static struct tframe *lane_pop(struct tframe **head, struct tframe **tail)
{
    struct tframe *f = *head;
    *head = f->next;
    if (*head == NULL)
        *tail = NULL;
    return f;
}

/* Hand a frame taken off the queue to the socket buffer, and count it. */
static void put_frame(struct tpeer *p, struct tframe *f)
{
    p->qframes--;
    p->qbytes -= f->len;
    struct evbuffer *out = bufferevent_get_output(p->out->bev);
    /* Sealed here, in the order frames enter the socket: the sequence numbers follow it. */
    if (chan_ev_add(&p->out->ch, out, f->payload, f->len - FRAME_HEADER_LEN - CHAN_TRAILER_LEN) ==
        0) {
        p->t->stats.bytes_sent += f->len;
        p->t->stats.sent_by_type[f->type]++;
    } else {
        p->t->stats.dropped++; /* out of memory; Raft sends it again */
    }
    transport_frame_free(f);
}

static void pump(struct tpeer *p)
{
    if (p->out == NULL || !p->up)
        return;
    struct evbuffer *out = bufferevent_get_output(p->out->bev);
    while (p->ctl_head && evbuffer_get_length(out) < CONTROL_WATERMARK)
        put_frame(p, lane_pop(&p->ctl_head, &p->ctl_tail));
    while (p->ctl_head == NULL && p->bulk_head && evbuffer_get_length(out) < BULK_WATERMARK)
        put_frame(p, lane_pop(&p->bulk_head, &p->bulk_tail));
}

struct tframe *transport_encode(struct transport *t, const struct raft_msg *m)
{
    struct tframe *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    size_t n = 0;
    if (raft_wire_encode(m, t->cluster_name, 0, &f->payload, &n) != RAFT_WIRE_OK) {
        free(f);
        t->stats.dropped++;
        return NULL;
    }
    f->len = FRAME_HEADER_LEN + n + CHAN_TRAILER_LEN;
    f->to = m->to;
    f->type = m->type <= RAFT_MSG_TYPE_MAX ? m->type : 0;
    f->bulk = m->type == RAFT_MSG_SNAPSHOT ||
              (m->type == RAFT_MSG_APPEND && FRAME_HEADER_LEN + n > BULK_BYTES);
    return f;
}

void transport_send_frame(struct transport *t, struct tframe *f)
{
    if (f == NULL)
        return;
    struct tpeer *p = peer_find(t, f->to);
    if (p == NULL || !p->up || p->qframes >= QUEUE_MAX_FRAMES ||
        p->qbytes + f->len > QUEUE_MAX_BYTES) {
        t->stats.dropped++;
        transport_frame_free(f);
        return;
    }
    if (f->bulk) {
        if (p->bulk_tail)
            p->bulk_tail->next = f;
        else
            p->bulk_head = f;
        p->bulk_tail = f;
    } else {
        if (p->ctl_tail)
            p->ctl_tail->next = f;
        else
            p->ctl_head = f;
        p->ctl_tail = f;
    }
    p->qframes++;
    p->qbytes += f->len;
    pump(p);
}

void transport_send(struct transport *t, const struct raft_msg *m)
{
    struct tpeer *p = peer_find(t, m->to);
    if (p == NULL || !p->up) {
        t->stats.dropped++; /* no need to encode what cannot go */
        return;
    }
    transport_send_frame(t, transport_encode(t, m));
}

/* ---- inbound connections ------------------------------------------------------------ */

static void in_close(struct tconn *c)
{
    struct transport *t = c->t;
    for (struct tconn **pp = &t->inbound; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    tconn_free(c);
}

static void in_flushed(struct bufferevent *bev, void *arg);
static void in_event(struct bufferevent *bev, short what, void *arg);

/* Read no more; close once what is queued (a refusal) has left. */
static void in_linger(struct tconn *c)
{
    bufferevent_disable(c->bev, EV_READ);
    bufferevent_setcb(c->bev, NULL, in_flushed, in_event, c);
}

static void in_read(struct bufferevent *bev, void *arg)
{
    struct tconn *c = arg;
    struct transport *t = c->t;
    struct evbuffer *in = bufferevent_get_input(bev);
    char why[300];
    if (!chan_established(&c->ch)) {
        bool replied;
        int hs = chan_handshake(t, c, in, &replied, why, sizeof(why));
        if (hs == 0)
            return;
        if (hs < 0) {
            log_refusal(t, c->remote, 0, why);
            /* A refusal hello tells the dialler why (no common key, other cluster). */
            if (replied)
                in_linger(c);
            else
                in_close(c);
            return;
        }
    }
    for (;;) {
        uint8_t *body = NULL;
        size_t len = 0;
        int fr = next_sealed(t, c, in, &body, &len, why, sizeof(why));
        if (fr == 0)
            return;
        if (fr == -2) {
            log_limited(t, "peer frame refused; closing", c->remote, c->remote_id, why);
            in_close(c);
            return;
        }
        if (fr < 0) {
            log_event(LOG_WARN, "transport", "bad frame from a peer; closing", "from=%s why=%s",
                      c->remote, log_q(why));
            in_close(c);
            return;
        }
        if (!c->handshaken) {
            struct raft_wire_handshake h;
            int rc;
            if (take_handshake(t, body, len, 0, &h, &rc, why, sizeof(why)) != 0) {
                t->stats.refused++;
                log_refusal(t, c->remote, rc == RAFT_WIRE_OK ? h.node_id : 0, why);
                /*
                 * Tell the peer who we are before closing, so its own check names the
                 * mismatch in its log instead of seeing a bare disconnect. A frame that did
                 * not decode gets no answer.
                 */
                if (rc == RAFT_WIRE_OK && send_handshake(t, c) == 0) {
                    in_linger(c);
                    return;
                }
                in_close(c);
                return;
            }
            c->handshaken = true;
            c->remote_id = h.node_id;
            bufferevent_set_timeouts(bev, NULL, NULL);
            if (send_handshake(t, c) != 0) {
                in_close(c);
                return;
            }
            struct transport_peer_info info;
            fill_info(t, &info, &h);
            struct tpeer *p = peer_find(t, h.node_id);
            if (p != NULL)
                p->info = info;
            if (t->cb.on_peer)
                t->cb.on_peer(t->cb.arg, &info, true);
            continue;
        }
        int rc = deliver_message(t, body, len, c->remote_id);
        if (rc != RAFT_WIRE_OK) {
            log_event(LOG_WARN, "transport", "undecodable message from a peer; closing",
                      "from=%s peer=%u why=%s", c->remote, c->remote_id, raft_wire_rc_name(rc));
            in_close(c);
            return;
        }
    }
}

/* Write callback of a refused connection: close once our refusal has left. */
static void in_flushed(struct bufferevent *bev, void *arg)
{
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        in_close(arg);
}

static void in_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    in_close(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int sl,
                      void *arg)
{
    struct transport *t = arg;
    (void)sl;
    struct tconn *c = tconn_new(t, CHAN_RESPONDER);
    if (c == NULL) {
        evutil_closesocket(fd);
        return;
    }
    char host[64] = "?";
    uint16_t port = 0;
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
        port = ntohs(((struct sockaddr_in *)sa)->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, host, sizeof(host));
        port = ntohs(((struct sockaddr_in6 *)sa)->sin6_port);
    }
    snprintf(c->remote, sizeof(c->remote), "%s:%u", host, port);
    c->bev = listener_wrap(l, fd, true);
    if (c->bev == NULL) {
        tconn_free(c);
        return;
    }
    bufferevent_setcb(c->bev, in_read, NULL, in_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    struct timeval hs = {HANDSHAKE_TIMEOUT_S, 0};
    bufferevent_set_timeouts(c->bev, &hs, NULL);
    c->next = t->inbound;
    t->inbound = c;
}

/* ---- peers and state ---------------------------------------------------------------- */

int transport_set_peer(struct transport *t, raft_id id, const char *address)
{
    if (id == 0 || id == t->opt.self)
        return -1;
    struct tpeer *p = peer_find(t, id);
    if (address == NULL || address[0] == '\0') {
        if (p == NULL)
            return 0;
        out_close(p, "removed");
        evtimer_del(p->ev_redial);
        resolver_cancel(&p->rw);
        p->address[0] = '\0';
        return 0;
    }
    if (p != NULL && strcmp(p->address, address) == 0)
        return 0;
    if (p == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL)
            return -1;
        p->t = t;
        p->id = id;
        p->backoff_ms = BACKOFF_MIN_MS;
        p->ev_redial = evtimer_new(t->base, on_redial, p);
        if (p->ev_redial == NULL) {
            free(p);
            return -1;
        }
        p->next = t->peers;
        t->peers = p;
    } else {
        evtimer_del(p->ev_redial);
        if (p->out)
            out_close(p, "address changed");
        evtimer_del(p->ev_redial);
        resolver_cancel(&p->rw);
    }
    snprintf(p->address, sizeof(p->address), "%s", address);
    p->backoff_ms = BACKOFF_MIN_MS;
    dial(p);
    return 0;
}

void transport_set_local_state(struct transport *t, bool has_cluster,
                               const struct raft_config *config)
{
    t->has_cluster = has_cluster;
    if (config)
        t->config = *config;
    else
        memset(&t->config, 0, sizeof(t->config));
}

bool transport_peer_connected(const struct transport *t, raft_id id)
{
    const struct tpeer *p = peer_find(t, id);
    return p != NULL && p->up;
}

const char *transport_peer_api(const struct transport *t, raft_id id)
{
    const struct tpeer *p = peer_find(t, id);
    if (p == NULL || p->info.api_address[0] == '\0')
        return NULL;
    return p->info.api_address;
}

struct resolver *transport_resolver(struct transport *t)
{
    return t->res;
}

void transport_get_stats(const struct transport *t, struct transport_stats *out)
{
    *out = t->stats;
}

/* ---- life cycle --------------------------------------------------------------------- */

struct transport *transport_new(struct event_base *base, const struct transport_options *o,
                                const struct transport_callbacks *cb, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (netaddr_listen(o->listen, &ss, &sl, why, whylen) != 0)
        return NULL;
    if (o->keyring == NULL || o->keyring->n == 0) {
        snprintf(why, whylen, "no cluster key to prove to peers");
        return NULL;
    }
    struct transport *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    t->base = base;
    t->opt = *o;
    t->cluster_name = strdup(o->cluster_name);
    t->api_address = strdup(o->api_address ? o->api_address : "");
    t->opt.cluster_name = t->cluster_name;
    t->opt.api_address = t->api_address;
    t->opt.listen = NULL;
    t->cb = *cb;
    t->rng = o->seed | 1;
    if (t->cluster_name == NULL || t->api_address == NULL) {
        snprintf(why, whylen, "out of memory");
        transport_free(t);
        return NULL;
    }
    struct resolver_options ro = {.seed = jitter_rand(&t->rng)};
    t->res = resolver_new(base, &ro, why, whylen);
    if (t->res == NULL) {
        transport_free(t);
        return NULL;
    }
    char what[300];
    snprintf(what, sizeof(what), "raft.listen %s", o->listen);
    t->listener = listener_bind(base, &ss, sl, 128, on_accept, t, what, why, whylen);
    if (t->listener == NULL) {
        transport_free(t);
        return NULL;
    }
    return t;
}

void transport_free(struct transport *t)
{
    if (t == NULL)
        return;
    while (t->inbound)
        in_close(t->inbound);
    while (t->peers) {
        struct tpeer *p = t->peers;
        t->peers = p->next;
        if (p->out) {
            tconn_free(p->out);
            p->out = NULL;
        }
        queue_clear(p);
        event_free(p->ev_redial);
        resolver_cancel(&p->rw);
        free(p);
    }
    resolver_free(t->res); /* after the peers: their waits are cancelled */
    if (t->listener) /* NULL: transport_new() failed before binding */
        evconnlistener_free(t->listener);
    free(t->cluster_name);
    free(t->api_address);
    free(t);
}
