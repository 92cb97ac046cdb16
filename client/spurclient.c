/*
 * spurclient.c - blocking client for the client API; contract in spurclient.h.
 */
#include "spurclient.h"

#include "frame.h"
#include "netaddr.h"
#include "strv.h"
#include "util.h"
#include "wire.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct spurclient {
    char **hosts;
    size_t nhosts;
    size_t cur; /* index of the host to try first */
    char *cluster_name;
    char *user;
    uint32_t timeout_ms;
    uint32_t max_frame;
    uint64_t client_id;
    uint64_t seq;
    uint64_t next_request_id;
    int fd;              /* connection, -1 when none */
    char fd_target[300]; /* host:port the connection goes to */
    struct frame_reader rd; /* bytes read from fd, not yet taken as frames; emptied with it */
    char last_ok[300];
    char leader[300];    /* the leader's address as last reported, tried first */
};

static uint64_t random_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = (uint64_t)getpid() << 32 ^ mono_ns();
    return v ? v : 1;
}

char **spurclient_hosts_parse(const char *list, size_t *n)
{
    size_t cap = 4, k = 0;
    char **v = calloc(cap + 1, sizeof(char *));
    char *copy = strdup(list ? list : "");
    if (v == NULL || copy == NULL) {
        free(v);
        free(copy);
        *n = 0;
        return NULL;
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (k == cap) {
            char **nv = realloc(v, (cap * 2 + 1) * sizeof(char *));
            if (nv == NULL)
                break;
            v = nv;
            cap *= 2;
        }
        v[k++] = strdup(t);
    }
    v[k] = NULL;
    free(copy);
    *n = k;
    return v;
}

void spurclient_hosts_free(char **v, size_t n)
{
    strv_free(v, n);
}

struct spurclient *spurclient_new(const struct spurclient_options *o)
{
    struct spurclient *c = calloc(1, sizeof(*c));
    if (c == NULL || o->nhosts == 0)
        goto fail;
    c->hosts = calloc(o->nhosts, sizeof(char *));
    if (c->hosts == NULL)
        goto fail;
    for (size_t i = 0; i < o->nhosts; i++) {
        c->hosts[i] = strdup(o->hosts[i]);
        if (c->hosts[i] == NULL)
            goto fail;
        c->nhosts++;
    }
    /* "": not known yet; the first answer names it (learn_cluster()). */
    c->cluster_name = strdup(o->cluster_name ? o->cluster_name : "");
    const char *user = o->user;
    if (user == NULL) {
        struct passwd *pw = getpwuid(getuid());
        user = pw ? pw->pw_name : "unknown";
    }
    c->user = strdup(user);
    if (c->cluster_name == NULL || c->user == NULL)
        goto fail;
    c->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
    c->max_frame = o->max_frame ? o->max_frame : SPUR_DEFAULT_MAX_FRAME;
    frame_reader_init(&c->rd, c->max_frame);
    c->client_id = random_u64();
    c->next_request_id = random_u64() >> 16;
    c->fd = -1;
    return c;
fail:
    spurclient_free(c);
    return NULL;
}

static void disconnect(struct spurclient *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->fd_target[0] = '\0';
    frame_reader_free(&c->rd); /* what was read belongs to that connection */
}

void spurclient_free(struct spurclient *c)
{
    if (c == NULL)
        return;
    disconnect(c);
    spurclient_hosts_free(c->hosts, c->nhosts);
    free(c->cluster_name);
    free(c->user);
    free(c);
}

const char *spurclient_current_host(const struct spurclient *c)
{
    return c->last_ok[0] ? c->last_ok : NULL;
}

uint32_t spurclient_set_timeout(struct spurclient *c, uint32_t timeout_ms)
{
    uint32_t old = c->timeout_ms;
    c->timeout_ms = timeout_ms ? timeout_ms : 10000;
    return old;
}

uint64_t spurclient_client_id(const struct spurclient *c)
{
    return c->client_id;
}

const char *spurclient_cluster_name(const struct spurclient *c)
{
    return c->cluster_name[0] ? c->cluster_name : NULL;
}

/* Take the cluster name a replica's answer carries, the first time one does. */
static int adopt_cluster(struct spurclient *c, const spurclient_response *r)
{
    if (c->cluster_name[0] != '\0' || r->cluster_name == NULL || r->cluster_name[0] == '\0')
        return 0;
    char *name = strdup(r->cluster_name);
    if (name == NULL)
        return -1;
    free(c->cluster_name);
    c->cluster_name = name;
    return 0;
}

void spurclient_response_free(spurclient_response *r)
{
    if (r)
        spur__api__response__free_unpacked(r, NULL);
}

static int remaining_ms(uint64_t deadline)
{
    uint64_t now = mono_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Split host:port (brackets for IPv6) and connect before the deadline. */
static int dial(const char *target, uint64_t deadline, char *err, size_t errlen)
{
    /* The configuration's grammar (netaddr): a port is 1..65535, and nothing follows it. */
    char host[256], port[8];
    uint16_t portnum;
    if (netaddr_split_hostport(target, host, sizeof(host), &portnum) != 0) {
        snprintf(err, errlen, "%s: not HOST:PORT", target);
        return -1;
    }
    snprintf(port, sizeof(port), "%u", (unsigned)portnum);

    struct addrinfo hints = {
        .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "%s: cannot resolve: %s", target, gai_strerror(gai));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int r = poll(&p, 1, remaining_ms(deadline));
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
                break;
            snprintf(err, errlen, "%s: connect: %s", target,
                     r == 0 ? "timed out" : strerror(soerr ? soerr : errno));
        } else {
            snprintf(err, errlen, "%s: connect: %s", target, strerror(errno));
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
}

static int send_all(int fd, const uint8_t *p, size_t n, uint64_t deadline)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            if (poll(&pf, 1, remaining_ms(deadline)) <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            continue;
        }
        return -1;
    }
    return 0;
}

/*
 * Read what the socket has into the frame reader, waiting for it until the deadline.
 * Returns 0, 1 with errno set (ECONNRESET at end of stream, ETIMEDOUT), or the reader's
 * FRAME_TOO_BIG (a buffered header announces more than max_frame) or FRAME_NOMEM.
 */
static int read_some(struct spurclient *c, uint64_t deadline)
{
    uint8_t *p = NULL;
    size_t space = 0;
    int rc = frame_reader_space(&c->rd, 4096, &p, &space);
    if (rc != 0)
        return rc;
    for (;;) {
        ssize_t r = recv(c->fd, p, space, 0);
        if (r > 0) {
            frame_reader_commit(&c->rd, (size_t)r);
            return 0;
        }
        if (r == 0) {
            errno = ECONNRESET;
            return 1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            struct pollfd pf = {.fd = c->fd, .events = POLLIN};
            if (poll(&pf, 1, remaining_ms(deadline)) <= 0) {
                errno = ETIMEDOUT;
                return 1;
            }
            continue;
        }
        return 1;
    }
}

static int receive(struct spurclient *c, const spurclient_request *req, uint64_t deadline,
                   spurclient_response **resp, char *err, size_t errlen);

/* One exchange on the current connection. Returns 0 with *resp, or -1 with err. */
static int exchange(struct spurclient *c, spurclient_request *req, uint64_t deadline,
                    spurclient_response **resp, char *err, size_t errlen)
{
    size_t n = spur__api__request__get_packed_size(req);
    if (n > c->max_frame) {
        snprintf(err, errlen, "request of %zu bytes is over the %u-byte frame limit", n,
                 c->max_frame);
        return -2;
    }
    uint8_t *buf = malloc(FRAME_HEADER_LEN + n);
    if (buf == NULL) {
        snprintf(err, errlen, "out of memory");
        return -2;
    }
    frame_put_header(buf, (uint32_t)n);
    spur__api__request__pack(req, buf + FRAME_HEADER_LEN);
    int rc = send_all(c->fd, buf, FRAME_HEADER_LEN + n, deadline);
    free(buf);
    if (rc != 0) {
        /*
         * A replica that refuses the frame (over its size limit) answers and closes the
         * connection before it has read the rest, so the send fails with a reset. Its
         * answer may still be waiting here, and says more than the reset does.
         */
        int e = errno;
        if (receive(c, req, deadline, resp, err, errlen) == 0)
            return 0;
        snprintf(err, errlen, "%s: send: %s", c->fd_target, strerror(e));
        return -1;
    }
    return receive(c, req, deadline, resp, err, errlen);
}

/*
 * Read frames until the answer to req. Returns 0 with *resp, -1 (connection or frame
 * trouble: try elsewhere), or -2 (give up) with err.
 */
static int receive(struct spurclient *c, const spurclient_request *req, uint64_t deadline,
                   spurclient_response **resp, char *err, size_t errlen)
{
    for (;;) {
        const uint8_t *payload = NULL;
        size_t len = 0;
        int st = frame_reader_next(&c->rd, &payload, &len);
        if (st == FRAME_NEED_MORE) {
            st = read_some(c, deadline);
            if (st == 0)
                continue;
            if (st == 1) {
                if (frame_reader_buffered(&c->rd) < FRAME_HEADER_LEN)
                    snprintf(err, errlen, "%s: no answer: %s", c->fd_target, strerror(errno));
                else
                    snprintf(err, errlen, "%s: answer cut short: %s", c->fd_target,
                             strerror(errno));
                return -1;
            }
        }
        if (st == FRAME_TOO_BIG) {
            /* Every replica would give the same answer: asking the next one only costs. */
            snprintf(err, errlen,
                     "%s: answer of %u bytes is over the %u-byte limit "
                     "(controller.max_frame_bytes)",
                     c->fd_target, (uint32_t)c->rd.last_len, c->max_frame);
            return -2;
        }
        if (st != FRAME_READY) {
            snprintf(err, errlen, "out of memory");
            return -2;
        }
        spurclient_response *r = spur__api__response__unpack(NULL, len, payload);
        if (r == NULL) {
            snprintf(err, errlen, "%s: undecodable answer", c->fd_target);
            return -1;
        }
        /*
         * request_id 0 with an error: the replica could not read a request (too large,
         * undecodable) and closes the connection; that is the answer to the one in
         * flight. Any other id is an answer to an earlier, abandoned request: skip it.
         */
        if (r->request_id != req->request_id &&
            !(r->request_id == 0 && r->code != SPUR__API__CODE__CODE_OK)) {
            spurclient_response_free(r);
            continue;
        }
        if (r->protocol_version != SPUR_PROTOCOL_VERSION &&
            r->code != SPUR__API__CODE__CODE_REFUSED) {
            snprintf(err, errlen, "%s: speaks protocol version %u, this client %u", c->fd_target,
                     r->protocol_version, SPUR_PROTOCOL_VERSION);
            spurclient_response_free(r);
            return -2;
        }
        *resp = r;
        return 0;
    }
}

/*
 * A client that was not told its cluster's name asks the replica with a Ping that names
 * none (the only request a replica answers without one) and keeps the name the answer
 * carries. Every later request, on this or any other connection, names that cluster, so
 * a replica of another cluster further down the host list still refuses it.
 * Returns 0 (learned), 1 with *refusal set (the replica refused: that is the call's
 * answer), -1 (connection trouble: try elsewhere) or -2 (give up), with err.
 */
static int learn_cluster(struct spurclient *c, uint64_t deadline, spurclient_response **refusal,
                         char *err, size_t errlen)
{
    Spur__Api__Request ping_req = SPUR__API__REQUEST__INIT;
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    ping_req.protocol_version = SPUR_PROTOCOL_VERSION;
    ping_req.cluster_name = (char *)"";
    ping_req.user = c->user;
    ping_req.request_id = ++c->next_request_id;
    ping_req.timeout_ms = (uint32_t)remaining_ms(deadline);
    ping_req.op_case = SPUR__API__REQUEST__OP_PING;
    ping_req.ping = &ping;
    spurclient_response *r = NULL;
    int rc = exchange(c, &ping_req, deadline, &r, err, errlen);
    if (rc != 0)
        return rc;
    if (r->code == SPUR__API__CODE__CODE_OK && r->cluster_name && r->cluster_name[0]) {
        rc = adopt_cluster(c, r);
        spurclient_response_free(r);
        if (rc != 0) {
            snprintf(err, errlen, "out of memory");
            return -2;
        }
        return 0;
    }
    if (r->code == SPUR__API__CODE__CODE_OK) {
        snprintf(err, errlen, "%s: the answer names no cluster", c->fd_target);
        spurclient_response_free(r);
        return -1;
    }
    *refusal = r;
    return 1;
}

int spurclient_call(struct spurclient *c, spurclient_request *req, bool write,
                    spurclient_response **resp, char *err, size_t errlen)
{
    uint64_t deadline = mono_ms() + c->timeout_ms;
    char hint[300] = "";
    bool hint_used = false;
    /*
     * Writes go straight to the leader when one is known: a follower would only forward
     * them. Reads stay with the replica chosen (a local read must be answered by it).
     */
    if (write && c->leader[0])
        snprintf(hint, sizeof(hint), "%s", c->leader);
    size_t idx = c->cur;
    size_t misses = 0;
    uint32_t backoff = 10; /* ms; doubles to 250: an election or hand-over takes 0.05-2 s */
    spurclient_response *last = NULL;
    char lasterr[400] = "no replica tried";

    req->protocol_version = SPUR_PROTOCOL_VERSION;
    req->cluster_name = c->cluster_name;
    req->user = req->user && req->user[0] ? req->user : c->user;
    req->request_id = ++c->next_request_id;
    if (write && req->client_id == 0) {
        req->client_id = c->client_id;
        req->seq = ++c->seq;
    }
    if (req->timeout_ms == 0)
        req->timeout_ms = c->timeout_ms;
    *resp = NULL;

    while (remaining_ms(deadline) > 0) {
        const char *target = hint[0] ? hint : c->hosts[idx % c->nhosts];
        if (c->fd < 0 || strcmp(c->fd_target, target) != 0) {
            disconnect(c);
            c->fd = dial(target, deadline, lasterr, sizeof(lasterr));
            if (c->fd < 0) {
                if (strcmp(target, c->leader) == 0)
                    c->leader[0] = '\0'; /* gone: find the leader again */
                hint[0] = '\0';
                goto next_host;
            }
            snprintf(c->fd_target, sizeof(c->fd_target), "%s", target);
        }
        spurclient_response *r = NULL;
        int rc = 0;
        /* A Ping may go without the name (and its answer brings it); nothing else may. */
        if (c->cluster_name[0] == '\0' && req->op_case != SPUR__API__REQUEST__OP_PING)
            rc = learn_cluster(c, deadline, &r, lasterr, sizeof(lasterr));
        req->cluster_name = c->cluster_name;
        if (rc == 0) {
            /* Leave room for the server's own time-out to come back as an answer. */
            req->timeout_ms = (uint32_t)remaining_ms(deadline);
            rc = exchange(c, req, deadline, &r, lasterr, sizeof(lasterr));
        } else if (rc == 1) {
            rc = 0; /* the replica's refusal of the Ping is the answer to this call */
        }
        if (rc == -2) {
            /* A definite failure (see receive()): say it as it is. */
            disconnect(c);
            spurclient_response_free(last);
            snprintf(err, errlen, "%s", lasterr);
            return -1;
        }
        if (rc != 0) {
            disconnect(c);
            hint[0] = '\0';
            goto next_host;
        }
        snprintf(c->last_ok, sizeof(c->last_ok), "%s", c->fd_target);
        if (r->code == SPUR__API__CODE__CODE_UNAVAILABLE ||
            r->code == SPUR__API__CODE__CODE_TIMEOUT) {
            spurclient_response_free(last);
            last = r;
            if (r->leader_hint && r->leader_hint[0] && !hint_used &&
                strcmp(r->leader_hint, c->fd_target) != 0) {
                snprintf(hint, sizeof(hint), "%s", r->leader_hint);
                hint_used = true;
                continue;
            }
            hint[0] = '\0';
            goto next_host;
        }
        if (r->code == SPUR__API__CODE__CODE_OK && adopt_cluster(c, r) != 0) {
            spurclient_response_free(r);
            spurclient_response_free(last);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        /* Any other answer, success or a definite error, is the answer. */
        for (size_t i = 0; i < c->nhosts; i++)
            if (strcmp(c->hosts[i], c->fd_target) == 0)
                c->cur = i;
        if (r->leader_hint && r->leader_hint[0] && r->leader_id != 0)
            snprintf(c->leader, sizeof(c->leader), "%s", r->leader_hint);
        if (r->request_id != req->request_id)
            disconnect(c); /* the replica closes after such an answer (receive()) */
        spurclient_response_free(last);
        *resp = r;
        return 0;
    next_host:
        idx++;
        if (++misses % c->nhosts == 0) {
            /* A whole round without an answer: an election may be running. */
            int left = remaining_ms(deadline);
            struct timespec ts = {0, (long)(backoff < (uint32_t)left ? backoff : (uint32_t)left) *
                                         1000000L};
            nanosleep(&ts, NULL);
            backoff = backoff * 2 > 250 ? 250 : backoff * 2;
            hint_used = false;
        }
    }
    if (last != NULL) {
        *resp = last; /* the last "not the leader" or time-out answer says more than we can */
        return 0;
    }
    snprintf(err, errlen, "no replica answered within %u ms: %s", c->timeout_ms, lasterr);
    return -1;
}
