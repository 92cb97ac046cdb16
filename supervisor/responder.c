/*
 * responder.c - the health responder process; contract in responder.h.
 *
 * One thread, one epoll set: the listening socket, the worker's pidfd and the client
 * sockets. Connections live in a doubly linked list ordered by last activity, oldest
 * first, which gives both the victim when the cap is reached and a cheap sweep for
 * timeouts (a sweep runs at most every SWEEP_MS and on every wakeup after it is due).
 *
 * A connection moves through conn_progress() on every event: answer the complete requests
 * buffered (http_serve, in order, pipelined ones included), send the answers, and repeat
 * while the answers go out and complete requests remain. Then it waits for exactly one
 * thing, so that level-triggered epoll never wakes it for nothing:
 *   - answers not yet sent (the client is slow to read): only for writability. It does
 *     not read meanwhile, so a client that sends and never reads holds at most IN_MAX
 *     bytes here (plus the kernel's socket buffers), and the idle timeout ends it;
 *   - otherwise: for input. A partial request then runs the header timeout (408), and
 *     an empty buffer the idle timeout.
 * Each wakeup reads at most IN_MAX bytes from a connection, so one client streaming
 * pipelined requests cannot keep the loop from the others.
 */
#include "responder.h"

#include "cfg.h"
#include "health.h"
#include "http.h"
#include "log.h"
#include "netaddr.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define IN_MAX 2048  /* request header limit (above it: 431), and the input buffered */
#define OUT_MAX 1024 /* pending response bytes per connection: several answers */
#define SWEEP_MS 100
#define WAKE_MS 100 /* the longest wait: a later wake-up means we were frozen */

_Static_assert(OUT_MAX >= HTTP_RESPONSE_MAX, "room for at least one response");

struct conn {
    int fd;
    struct conn *prev, *next; /* activity list, oldest at head */
    uint64_t last_active_ms;
    uint64_t request_start_ms; /* when the partial request now buffered started; 0: none */
    uint32_t events;           /* what epoll watches for now */
    size_t in_len;
    size_t out_len;
    size_t out_off;
    bool close_after_write;
    bool peer_closed; /* read EOF: answer what is complete, send, close */
    char in[IN_MAX];
    char out[OUT_MAX];
};

struct responder {
    const struct responder_config *rc;
    int ep;
    struct conn *head, *tail;
    struct conn *closed; /* closed during this batch of events, freed after it */
    uint32_t nconns;
    uint64_t next_sweep_ms;
    bool worker_gone; /* the pidfd became readable: the worker has exited */
    /*
     * Our own pause (health_own_pause_ns): while the page still shows the last frame it
     * showed when we noticed, that frame is taken as excuse_ns younger, the same rule the
     * supervisor applies before it rewrites the page on its next tick.
     */
    uint64_t excuse_ns;
    uint64_t excuse_frame_ns;
};

/* Tags in epoll data for the two non-connection descriptors. */
static char tag_listen, tag_pidfd;

static void list_unlink(struct responder *r, struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        r->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        r->tail = c->prev;
    c->prev = c->next = NULL;
}

static void list_append(struct responder *r, struct conn *c)
{
    c->prev = r->tail;
    c->next = NULL;
    if (r->tail)
        r->tail->next = c;
    else
        r->head = c;
    r->tail = c;
}

static void touch(struct responder *r, struct conn *c, uint64_t now)
{
    c->last_active_ms = now;
    if (r->tail != c) {
        list_unlink(r, c);
        list_append(r, c);
    }
}

/*
 * Close now, free later: the batch of events being handled may still name c (accepting a
 * connection can close the oldest one, whose event comes later in the same batch), so c
 * goes to the closed list, which the loop frees after the batch; its fd is -1 meanwhile.
 */
static void conn_close(struct responder *r, struct conn *c)
{
    list_unlink(r, c);
    close(c->fd); /* also removes it from the epoll set */
    c->fd = -1;
    c->next = r->closed;
    r->closed = c;
    r->nconns--;
}

static void free_closed(struct responder *r)
{
    while (r->closed) {
        struct conn *c = r->closed;
        r->closed = c->next;
        free(c);
    }
}

/* Is the worker gone? Poll the pidfd without waiting; cheap enough for every request. */
static bool worker_exited(struct responder *r)
{
    if (r->worker_gone)
        return true;
    if (r->rc->worker_pidfd < 0)
        return false;
    struct pollfd pfd = {.fd = r->rc->worker_pidfd, .events = POLLIN};
    if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLHUP | POLLERR)))
        r->worker_gone = true;
    return r->worker_gone;
}

/* http_probe_fn: the answer of a probe route, read fresh for every request. */
static void probe_answer(void *arg, enum http_route route, int *code, const char **word)
{
    struct responder *r = arg;
    struct health_inputs in;
    struct health_answer hz, rz;
    health_shm_read(r->rc->shm, &in);
    if (r->excuse_ns != 0) {
        if (in.last_frame_ns == r->excuse_frame_ns)
            in.last_frame_ns += r->excuse_ns;
        else
            r->excuse_ns = 0; /* the supervisor has run since: its page is current */
    }
    if (worker_exited(r))
        in.worker_state = WORKER_DEAD;
    health_eval(&in, mono_ns(), &hz, &rz);
    const struct health_answer *a = route == HTTP_ROUTE_READYZ ? &rz : &hz;
    *code = a->code;
    *word = a->word; /* a static string of health.c */
}

/* Send what is pending. Returns 1 when all is sent, 0 when the socket is full, -1 on error. */
static int send_pending(struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        c->out_off += (size_t)w;
    }
    c->out_off = c->out_len = 0;
    return 1;
}

/* Make epoll watch for what the connection waits for; see the header comment. */
static int watch(struct responder *r, struct conn *c, uint32_t want)
{
    if (c->events == want)
        return 0;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    if (epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        return -1;
    c->events = want;
    return 0;
}

/*
 * Answer, send, repeat while that makes progress; then choose what to wait for.
 * Returns -1 when the connection is to be closed now.
 */
static int conn_progress(struct responder *r, struct conn *c, uint64_t now)
{
    bool partial = false;
    for (;;) {
        if (!c->close_after_write && c->in_len > 0) {
            struct http_serve_result res;
            http_serve(c->in, c->in_len, IN_MAX, c->out + c->out_len, OUT_MAX - c->out_len,
                       probe_answer, r, &res);
            c->out_len += res.produced;
            if (res.close) {
                c->close_after_write = true;
                c->in_len = 0; /* what follows a closing request is never answered */
            } else if (res.consumed > 0) {
                memmove(c->in, c->in + res.consumed, c->in_len - res.consumed);
                c->in_len -= res.consumed;
                c->request_start_ms = 0; /* a new request starts with what is left */
            }
            partial = res.partial;
        }
        int sent = send_pending(c);
        if (sent < 0)
            return -1;
        if (sent == 0)
            return watch(r, c, EPOLLOUT); /* not reading meanwhile: input stays bounded */
        if (c->close_after_write)
            return -1;
        if (c->in_len == 0 || partial)
            break;
        /* Everything went out and complete requests remain: answer the next ones. */
    }
    if (c->peer_closed)
        return -1; /* all answered and sent; a partial request can never complete now */
    if (c->in_len > 0 && c->request_start_ms == 0)
        c->request_start_ms = now;
    return watch(r, c, EPOLLIN | EPOLLRDHUP);
}

/* Read once (at most the free part of the buffer), then make progress. -1: close. */
static int on_readable(struct responder *r, struct conn *c, uint64_t now)
{
    while (c->in_len < IN_MAX) { /* full: conn_progress answers or refuses it (431) */
        ssize_t n = recv(c->fd, c->in + c->in_len, IN_MAX - c->in_len, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            break;
        }
        if (n == 0) {
            c->peer_closed = true; /* answer what it sent, then close */
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        return -1;
    }
    return conn_progress(r, c, now);
}

static void accept_all(struct responder *r, uint64_t now)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(r->rc->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                /* Out of descriptors: free the oldest connection and retry next wakeup. */
                if (r->head)
                    conn_close(r, r->head);
            }
            return;
        }
        if (r->nconns >= r->rc->max_connections && r->head)
            conn_close(r, r->head); /* the least recently active gives way */
        struct conn *c = malloc(sizeof(*c));
        if (c == NULL) {
            close(fd);
            return;
        }
        memset(c, 0, offsetof(struct conn, in));
        c->fd = fd;
        c->last_active_ms = now;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->events = EPOLLIN | EPOLLRDHUP;
        struct epoll_event ev = {.events = c->events, .data.ptr = c};
        if (epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        list_append(r, c);
        r->nconns++;
    }
}

/*
 * Close connections past their deadlines. A connection with answers still to send is on
 * the idle clock (the client is not reading); one with a partial request and nothing to
 * send is on the header clock and hears 408 first, which cannot interleave with another
 * answer since none is pending.
 */
static void sweep(struct responder *r, uint64_t now)
{
    struct conn *c = r->head, *next;
    for (; c; c = next) {
        next = c->next;
        bool header_clock = c->out_len == 0 && c->request_start_ms != 0;
        if (header_clock && now - c->request_start_ms >= r->rc->header_timeout_ms) {
            char buf[HTTP_RESPONSE_MAX];
            size_t n =
                http_format_response(buf, sizeof(buf), 408, "request timeout\n", false, false, false);
            ssize_t w = send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w; /* best effort: the connection closes either way */
            conn_close(r, c);
        } else if (!header_clock && now - c->last_active_ms >= r->rc->idle_timeout_ms) {
            conn_close(r, c);
        }
    }
    r->next_sweep_ms = now + SWEEP_MS;
}

static void parent_check(const struct responder_config *rc)
{
    if (getppid() != rc->parent_pid)
        _exit(0); /* the supervisor is gone: nothing we say would be true any more */
}

void responder_main(const struct responder_config *rc)
{
    struct responder r = {.rc = rc};
    struct epoll_event evs[64];

    prctl(PR_SET_NAME, "spurctld-health", 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    parent_check(rc);

    r.ep = epoll_create1(EPOLL_CLOEXEC);
    if (r.ep < 0) {
        log_event(LOG_ERROR, "health", "epoll_create1 failed", "err=\"%s\"", strerror(errno));
        _exit(EXIT_OSERR);
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tag_listen};
    if (epoll_ctl(r.ep, EPOLL_CTL_ADD, rc->listen_fd, &ev) < 0) {
        log_event(LOG_ERROR, "health", "cannot watch the listening socket", "err=\"%s\"",
                  strerror(errno));
        _exit(EXIT_OSERR);
    }
    if (rc->worker_pidfd >= 0) {
        struct epoll_event pev = {.events = EPOLLIN, .data.ptr = &tag_pidfd};
        epoll_ctl(r.ep, EPOLL_CTL_ADD, rc->worker_pidfd, &pev);
    }
    r.next_sweep_ms = mono_ms() + SWEEP_MS;
    /*
     * When this loop last woke. A freeze shows as a wake that comes too late after the
     * previous one, wherever in the loop it struck: inside epoll_wait, or while answering
     * a probe (then the wait itself starts after the thaw and looks on time).
     */
    uint64_t last_wake_ns = mono_ns();

    for (;;) {
        uint64_t now = mono_ms();
        /* Wake at least every WAKE_MS, so that a late wake-up tells us we were frozen. */
        int timeout = WAKE_MS;
        if (r.nconns > 0 && r.next_sweep_ms < now + WAKE_MS)
            timeout = (int)(r.next_sweep_ms > now ? r.next_sweep_ms - now : 0);
        int n = epoll_wait(r.ep, evs, 64, timeout);
        if (n < 0 && errno != EINTR) {
            log_event(LOG_ERROR, "health", "epoll_wait failed", "err=\"%s\"", strerror(errno));
            _exit(EXIT_OSERR);
        }
        uint64_t wake_ns = mono_ns();
        uint64_t paused =
            health_own_pause_ns(last_wake_ns, wake_ns, (uint64_t)timeout * 1000000ull);
        last_wake_ns = wake_ns;
        if (paused != 0) {
            struct health_inputs in;
            health_shm_read(rc->shm, &in);
            if (r.excuse_ns == 0 || in.last_frame_ns != r.excuse_frame_ns) {
                r.excuse_ns = 0;
                r.excuse_frame_ns = in.last_frame_ns;
            }
            r.excuse_ns += paused;
        }
        now = mono_ms();
        parent_check(rc);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &tag_listen) {
                accept_all(&r, now);
            } else if (p == &tag_pidfd) {
                /* Remember, and stop watching: a readable pidfd stays readable. */
                r.worker_gone = true;
                epoll_ctl(r.ep, EPOLL_CTL_DEL, rc->worker_pidfd, NULL);
            } else {
                /*
                 * Waiting to send (EPOLLOUT, or an error): send and go on. Waiting for
                 * input: read once and go on. An error or hang-up surfaces in send/recv.
                 */
                struct conn *c = p;
                if (c->fd < 0)
                    continue; /* closed earlier in this batch */
                touch(&r, c, now);
                int st = c->events & EPOLLOUT ? conn_progress(&r, c, now)
                                               : on_readable(&r, c, now);
                if (st < 0)
                    conn_close(&r, c);
            }
        }
        if (now >= r.next_sweep_ms)
            sweep(&r, now);
        free_closed(&r);
    }
}

int responder_listen(const char *bind_to, uint32_t port, char *why, size_t whylen)
{
    char addr[80];
    struct sockaddr_storage ss;
    socklen_t sl;
    int one = 1, zero = 0;

    if (netaddr_bind(bind_to, port, &ss, &sl, why, whylen) != 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && ss.ss_family == AF_INET6 && strcmp(bind_to, "all") == 0 &&
        (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)) {
        /* No IPv6 on this host: "all" means every IPv4 address then. */
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        memset(&ss, 0, sizeof(ss));
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        sl = sizeof(*s4);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    }
    netaddr_format(&ss, addr, sizeof(addr));
    if (fd < 0) {
        snprintf(why, whylen, "%s: socket: %s", addr, strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
        int e = errno;
        close(fd);
        snprintf(why, whylen, "%s: bind: %s", addr, strerror(e));
        return -1;
    }
    if (listen(fd, 1024) < 0) {
        int e = errno;
        close(fd);
        snprintf(why, whylen, "%s: listen: %s", addr, strerror(e));
        return -1;
    }
    return fd;
}
