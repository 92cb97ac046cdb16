/*
 * test_resolver.c - the non-blocking resolver (raftd/resolver.c).
 *
 * The pure parts (cache policy, TTL clamp, back-off, hosts-file match) are called
 * directly. The I/O shell is driven on a real event loop against a tiny DNS server that
 * the test itself plays on a UDP socket on 127.0.0.1 (a free port the kernel chose),
 * named in a resolv.conf written for the test: so the test sees every packet the resolver
 * sends, can check that literals and hosts-file names send none, that two callers of one
 * name share one lookup, and can answer when it likes (or never).
 */
#include "check_run.h"
#include "resolver.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- pure parts ----------------------------------------------------------------------- */

START_TEST(test_ttl_clamp)
{
    ck_assert_uint_eq(resolver_ttl_ms(0), RESOLVER_TTL_MIN_MS);
    ck_assert_uint_eq(resolver_ttl_ms(1), 1000);
    ck_assert_uint_eq(resolver_ttl_ms(30), 30000);
    ck_assert_uint_eq(resolver_ttl_ms(300), 300000);
    ck_assert_uint_eq(resolver_ttl_ms(301), RESOLVER_TTL_MAX_MS);
    ck_assert_uint_eq(resolver_ttl_ms(UINT32_MAX), RESOLVER_TTL_MAX_MS);
}
END_TEST

START_TEST(test_backoff_delay_range)
{
    for (uint64_t rnd = 0; rnd < 1000; rnd += 7) {
        uint32_t d = resolver_backoff_delay(400, rnd * 2654435761u);
        ck_assert_uint_ge(d, 300);
        ck_assert_uint_le(d, 500);
    }
    /* out-of-range back-offs are clamped before the jitter */
    ck_assert_uint_ge(resolver_backoff_delay(0, 0), RESOLVER_BACKOFF_MIN_MS * 3 / 4);
    ck_assert_uint_le(resolver_backoff_delay(UINT32_MAX, UINT64_MAX),
                      RESOLVER_BACKOFF_MAX_MS * 5 / 4);
}
END_TEST

static struct resolver_policy fresh_policy(void)
{
    struct resolver_policy p;
    memset(&p, 0, sizeof(p));
    p.backoff_ms = RESOLVER_BACKOFF_MIN_MS;
    return p;
}

START_TEST(test_policy_empty_looks_up_then_joins)
{
    struct resolver_policy p = fresh_policy();
    ck_assert_int_eq(resolver_policy_decide(&p, 1000), RESOLVER_LOOKUP);
    p.in_flight = true;
    /* a second asker waits for the running lookup instead of starting one */
    ck_assert_int_eq(resolver_policy_decide(&p, 1000), RESOLVER_JOIN);
}
END_TEST

START_TEST(test_policy_dns_answer_expires_with_ttl)
{
    struct resolver_policy p = fresh_policy();
    p.in_flight = true;
    resolver_policy_answered(&p, 1000, false, 30);
    ck_assert(!p.in_flight);
    ck_assert_int_eq(resolver_policy_decide(&p, 1000), RESOLVER_USE);
    ck_assert_int_eq(resolver_policy_decide(&p, 30999), RESOLVER_USE);
    ck_assert_int_eq(resolver_policy_decide(&p, 31000), RESOLVER_LOOKUP);
    /* while the refresh runs, a fresh-less answer makes askers wait for it */
    p.in_flight = true;
    ck_assert_int_eq(resolver_policy_decide(&p, 31000), RESOLVER_JOIN);
}
END_TEST

START_TEST(test_policy_stable_never_expires)
{
    struct resolver_policy p = fresh_policy();
    resolver_policy_answered(&p, 1000, true, 0);
    ck_assert_int_eq(resolver_policy_decide(&p, UINT64_MAX - 1), RESOLVER_USE);
    /* a refused connection says nothing about what the operator wrote */
    resolver_policy_connect_failed(&p, 1000000);
    ck_assert_int_eq(resolver_policy_decide(&p, 1000001), RESOLVER_USE);
}
END_TEST

START_TEST(test_policy_failure_backs_off)
{
    struct resolver_policy p = fresh_policy();
    p.in_flight = true;
    resolver_policy_failed(&p, 1000, 0);
    ck_assert(!p.in_flight);
    ck_assert(p.failing);
    /* nothing to offer during the back-off: refuse at once, send nothing */
    ck_assert_int_eq(resolver_policy_decide(&p, 1000), RESOLVER_REFUSE);
    ck_assert_uint_ge(p.retry_ms, 1000 + RESOLVER_BACKOFF_MIN_MS * 3 / 4);
    ck_assert_uint_le(p.retry_ms, 1000 + RESOLVER_BACKOFF_MIN_MS * 5 / 4);
    ck_assert_int_eq(resolver_policy_decide(&p, p.retry_ms - 1), RESOLVER_REFUSE);
    ck_assert_int_eq(resolver_policy_decide(&p, p.retry_ms), RESOLVER_LOOKUP);

    /* the back-off doubles up to the maximum and stays there */
    uint32_t prev = p.backoff_ms;
    ck_assert_uint_eq(prev, 2 * RESOLVER_BACKOFF_MIN_MS);
    for (int i = 0; i < 20; i++) {
        resolver_policy_failed(&p, 5000, 12345);
        ck_assert_uint_ge(p.backoff_ms, prev);
        ck_assert_uint_le(p.backoff_ms, RESOLVER_BACKOFF_MAX_MS);
        ck_assert_uint_le(p.retry_ms - 5000, RESOLVER_BACKOFF_MAX_MS * 5 / 4);
        prev = p.backoff_ms;
    }
    ck_assert_uint_eq(p.backoff_ms, RESOLVER_BACKOFF_MAX_MS);

    /* an answer ends the failing state and resets the back-off */
    resolver_policy_answered(&p, 9000, false, 10);
    ck_assert(!p.failing);
    ck_assert_uint_eq(p.backoff_ms, RESOLVER_BACKOFF_MIN_MS);
    ck_assert_int_eq(resolver_policy_decide(&p, 9000), RESOLVER_USE);
}
END_TEST

START_TEST(test_policy_failed_refresh_keeps_stale_answer)
{
    struct resolver_policy p = fresh_policy();
    resolver_policy_answered(&p, 1000, false, 5);
    ck_assert_int_eq(resolver_policy_decide(&p, 7000), RESOLVER_LOOKUP);
    p.in_flight = true;
    resolver_policy_failed(&p, 7000, 0);
    ck_assert(p.have_addr);
    /* a DNS outage must not cut a peer whose address did not change */
    ck_assert_int_eq(resolver_policy_decide(&p, 7001), RESOLVER_USE_STALE);
    ck_assert_int_eq(resolver_policy_decide(&p, p.retry_ms), RESOLVER_LOOKUP);
}
END_TEST

START_TEST(test_policy_connect_failure_refreshes_rate_limited)
{
    struct resolver_policy p = fresh_policy();
    resolver_policy_answered(&p, 10000, false, 300);
    /* a failure right after the answer: the answer is new, keep it */
    resolver_policy_connect_failed(&p, 10000 + RESOLVER_REFRESH_MIN_MS - 1);
    ck_assert_int_eq(resolver_policy_decide(&p, 10000 + RESOLVER_REFRESH_MIN_MS), RESOLVER_USE);
    /* later: the pod may have a new IP; look again */
    resolver_policy_connect_failed(&p, 10000 + RESOLVER_REFRESH_MIN_MS);
    ck_assert_int_eq(resolver_policy_decide(&p, 10000 + RESOLVER_REFRESH_MIN_MS), RESOLVER_LOOKUP);
    /* nothing held: nothing to do */
    struct resolver_policy q = fresh_policy();
    resolver_policy_connect_failed(&q, 50000);
    ck_assert_int_eq(resolver_policy_decide(&q, 50000), RESOLVER_LOOKUP);
    ck_assert(!q.have_addr);
}
END_TEST

/* ---- hosts-file match ----------------------------------------------------------------- */

static const char *ip_of(const struct sockaddr_storage *a, char *buf, size_t len)
{
    const void *src = a->ss_family == AF_INET6
                          ? (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr
                          : (const void *)&((const struct sockaddr_in *)a)->sin_addr;
    return inet_ntop(a->ss_family, src, buf, (socklen_t)len);
}

static const char *HOSTS = "# The following lines are desirable for IPv4 capable hosts\n"
                           "127.0.0.1\tlocalhost\n"
                           "127.0.1.1  node-a.example node-a   # this host\n"
                           "  10.0.0.7 Spurctld-1.spurctld.default.svc spurctld-1\n"
                           "10.0.0.8 spurctld-10\n"
                           "::1 localhost ip6-localhost\n"
                           "fe00::1 ip6-localnet\n"
                           "not-an-address bogus-name\n"
                           "10.0.0.9 # commented-out-name\n"
                           "10.0.0.7 spurctld-1\n" /* a duplicate is reported once */
                           "10.0.0.11 trailing-dot.example.\n"
                           "10.0.0.12 no-newline-at-end";

START_TEST(test_hosts_match)
{
    struct sockaddr_storage out[8];
    char ip[64];
    size_t n = resolver_hosts_match(HOSTS, "localhost", out, 8);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(ip_of(&out[0], ip, sizeof(ip)), "127.0.0.1");
    ck_assert_str_eq(ip_of(&out[1], ip, sizeof(ip)), "::1");
    ck_assert_uint_eq(((struct sockaddr_in *)&out[0])->sin_port, 0);

    /* aliases, case, a trailing dot on either side */
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "node-a", out, 8), 1);
    ck_assert_str_eq(ip_of(&out[0], ip, sizeof(ip)), "127.0.1.1");
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "SPURCTLD-1.spurctld.default.svc.", out, 8), 1);
    ck_assert_str_eq(ip_of(&out[0], ip, sizeof(ip)), "10.0.0.7");
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "spurctld-1", out, 8), 1);
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "trailing-dot.example", out, 8), 1);
    ck_assert_str_eq(ip_of(&out[0], ip, sizeof(ip)), "10.0.0.11");
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "no-newline-at-end", out, 8), 1);
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "ip6-localnet", out, 8), 1);
    ck_assert_str_eq(ip_of(&out[0], ip, sizeof(ip)), "fe00::1");

    /* whole names only; comments and bad addresses are not entries */
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "spurctld", out, 8), 0);
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "spurctld-1.spurctld", out, 8), 0);
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "commented-out-name", out, 8), 0);
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "bogus-name", out, 8), 0);
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "this", out, 8), 0);
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "", out, 8), 0);
    ck_assert_uint_eq(resolver_hosts_match("", "localhost", out, 8), 0);

    /* the caller's limit holds */
    ck_assert_uint_eq(resolver_hosts_match(HOSTS, "localhost", out, 1), 1);
}
END_TEST

START_TEST(test_hosts_long_line)
{
    /* a line longer than the parser's buffer is cut, and the next line still counts */
    size_t len = 5000;
    char *text = malloc(len + 64);
    ck_assert_ptr_nonnull(text);
    memset(text, 'x', len);
    memcpy(text, "10.1.1.1 ", 9);
    snprintf(text + len, 64, "\n10.1.1.2 after-long-line\n");
    struct sockaddr_storage out[2];
    char ip[64];
    ck_assert_uint_eq(resolver_hosts_match(text, "after-long-line", out, 2), 1);
    ck_assert_str_eq(ip_of(&out[0], ip, sizeof(ip)), "10.1.1.2");
    free(text);
}
END_TEST

/* ---- the shell against a DNS server played by the test --------------------------------- */

struct fake_dns {
    int fd;
    uint16_t port;
    char dir[64];
    char resolv[96];
    char hosts[96];
};

static void fake_dns_start(struct fake_dns *d, const char *hosts_text, const char *opts)
{
    memset(d, 0, sizeof(d[0]));
    d->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(d->fd, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(d->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    socklen_t sl = sizeof(sa);
    ck_assert_int_eq(getsockname(d->fd, (struct sockaddr *)&sa, &sl), 0);
    d->port = ntohs(sa.sin_port);
    snprintf(d->dir, sizeof(d->dir), "/tmp/test_resolver.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->dir));
    snprintf(d->resolv, sizeof(d->resolv), "%s/resolv.conf", d->dir);
    snprintf(d->hosts, sizeof(d->hosts), "%s/hosts", d->dir);
    FILE *f = fopen(d->resolv, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "nameserver 127.0.0.1:%u\n%s", d->port, opts ? opts : "");
    fclose(f);
    f = fopen(d->hosts, "w");
    ck_assert_ptr_nonnull(f);
    fputs(hosts_text, f);
    fclose(f);
}

static void fake_dns_stop(struct fake_dns *d)
{
    close(d->fd);
    unlink(d->resolv);
    unlink(d->hosts);
    rmdir(d->dir);
}

struct query {
    uint8_t pkt[512];
    size_t len;
    size_t qend; /* end of the question section */
    char name[256];
    uint16_t qtype;
    struct sockaddr_in from;
};

/* Read one query if one is waiting; 1, or 0 when there is none. */
static int fake_dns_recv(struct fake_dns *d, struct query *q)
{
    socklen_t fl = sizeof(q->from);
    ssize_t n = recvfrom(d->fd, q->pkt, sizeof(q->pkt), 0, (struct sockaddr *)&q->from, &fl);
    if (n < 0) {
        ck_assert(errno == EAGAIN || errno == EWOULDBLOCK);
        return 0;
    }
    ck_assert_int_gt(n, 12);
    q->len = (size_t)n;
    size_t i = 12, o = 0;
    while (i < q->len && q->pkt[i] != 0) {
        size_t l = q->pkt[i++];
        ck_assert_uint_le(i + l, q->len);
        if (o)
            q->name[o++] = '.';
        for (size_t k = 0; k < l; k++)
            q->name[o++] = (char)q->pkt[i + k];
        i += l;
    }
    q->name[o] = '\0';
    i++;
    ck_assert_uint_le(i + 4, q->len);
    q->qtype = (uint16_t)(q->pkt[i] << 8 | q->pkt[i + 1]);
    q->qend = i + 4;
    return 1;
}

/* Answer q: for an A query with ipv4 (NULL: NXDOMAIN), an AAAA query with no records. */
static void fake_dns_answer(struct fake_dns *d, const struct query *q, const char *ipv4,
                            uint32_t ttl)
{
    uint8_t r[600];
    memcpy(r, q->pkt, q->qend);
    r[2] = 0x81;                       /* response, recursion desired */
    r[3] = ipv4 == NULL ? 0x83 : 0x80; /* recursion available; NXDOMAIN or no error */
    r[6] = r[7] = 0;
    r[8] = r[9] = r[10] = r[11] = 0;
    size_t n = q->qend;
    if (ipv4 != NULL && q->qtype == 1) {
        r[7] = 1;
        const uint8_t rr[] = {0xc0,
                              0x0c,
                              0,
                              1,
                              0,
                              1,
                              (uint8_t)(ttl >> 24),
                              (uint8_t)(ttl >> 16),
                              (uint8_t)(ttl >> 8),
                              (uint8_t)ttl,
                              0,
                              4};
        memcpy(r + n, rr, sizeof(rr));
        n += sizeof(rr);
        ck_assert_int_eq(inet_pton(AF_INET, ipv4, r + n), 1);
        n += 4;
    }
    ck_assert_int_eq(sendto(d->fd, r, n, 0, (const struct sockaddr *)&q->from, sizeof(q->from)),
                     (ssize_t)n);
}

struct waiter {
    struct resolver_wait w;
    int calls;
    bool ok;
    char ip[64];
    uint16_t port;
    char err[400];
};

static void on_done(void *arg, bool ok, const struct sockaddr_storage *ss, socklen_t sl,
                    const char *err)
{
    struct waiter *wt = arg;
    (void)sl;
    wt->calls++;
    wt->ok = ok;
    if (ok) {
        ip_of(ss, wt->ip, sizeof(wt->ip));
        wt->port = ntohs(ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)ss)->sin6_port
                                                   : ((const struct sockaddr_in *)ss)->sin_port);
    } else {
        snprintf(wt->err, sizeof(wt->err), "%s", err);
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Turn the loop for about ms milliseconds, collecting queries into qs (up to max). */
static size_t pump(struct event_base *base, struct fake_dns *d, struct query *qs, size_t max,
                   unsigned ms)
{
    size_t n = 0;
    uint64_t end = now_ms() + ms;
    do {
        event_base_loop(base, EVLOOP_NONBLOCK);
        struct query q;
        while (fake_dns_recv(d, &q)) {
            ck_assert_uint_lt(n, max);
            qs[n++] = q;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    } while (now_ms() < end);
    return n;
}

/* resolver_resolve() on behalf of waiter w, whose on_done() records a later answer. */
static int resolve_for(struct resolver *r, const char *hostport, struct waiter *w,
                       struct sockaddr_storage *ss, socklen_t *sl, char *err, size_t errlen)
{
    return resolver_resolve(r, hostport, ss, sl, &w->w, on_done, w, err, errlen);
}

/* Answer both queries of one lookup (qs[0] and qs[1], its A and AAAA) alike. */
static void answer_lookup(struct fake_dns *d, const struct query qs[2], const char *ipv4,
                          uint32_t ttl)
{
    fake_dns_answer(d, &qs[0], ipv4, ttl);
    fake_dns_answer(d, &qs[1], ipv4, ttl);
}

static struct resolver *make(struct event_base *base, struct fake_dns *d)
{
    struct resolver_options o = {.resolv_conf = d->resolv, .hosts_file = d->hosts, .seed = 7};
    char why[256];
    struct resolver *r = resolver_new(base, &o, why, sizeof(why));
    ck_assert_msg(r != NULL, "%s", why);
    return r;
}

START_TEST(test_literals_and_hosts_send_nothing)
{
    struct fake_dns d;
    fake_dns_start(&d, "127.0.0.1 localhost\n10.9.8.7 peer-in-hosts\n", NULL);
    struct event_base *base = event_base_new();
    struct resolver *r = make(base, &d);
    struct waiter wt;
    memset(&wt, 0, sizeof(wt));
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char err[400], ip[64];

    ck_assert_int_eq(resolve_for(r, "10.1.2.3:6821", &wt, &ss, &sl, err, sizeof(err)), RESOLVER_OK);
    ck_assert_str_eq(ip_of(&ss, ip, sizeof(ip)), "10.1.2.3");
    ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 6821);
    ck_assert_uint_eq(sl, sizeof(struct sockaddr_in));
    ck_assert_int_eq(resolve_for(r, "[::1]:6817", &wt, &ss, &sl, err, sizeof(err)), RESOLVER_OK);
    ck_assert_str_eq(ip_of(&ss, ip, sizeof(ip)), "::1");
    ck_assert_uint_eq(sl, sizeof(struct sockaddr_in6));
    ck_assert_int_eq(resolve_for(r, "localhost:6821", &wt, &ss, &sl, err, sizeof(err)),
                     RESOLVER_OK);
    ck_assert_str_eq(ip_of(&ss, ip, sizeof(ip)), "127.0.0.1");
    ck_assert_int_eq(resolve_for(r, "PEER-IN-HOSTS:1", &wt, &ss, &sl, err, sizeof(err)),
                     RESOLVER_OK);
    ck_assert_str_eq(ip_of(&ss, ip, sizeof(ip)), "10.9.8.7");
    /* a hosts entry stays good after a failed connection: still no packet */
    resolver_failed(r, "peer-in-hosts:1");
    ck_assert_int_eq(resolve_for(r, "peer-in-hosts:2", &wt, &ss, &sl, err, sizeof(err)),
                     RESOLVER_OK);
    ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 2);
    ck_assert_int_eq(resolve_for(r, "no port", &wt, &ss, &sl, err, sizeof(err)), RESOLVER_FAILED);

    struct query qs[4];
    ck_assert_uint_eq(pump(base, &d, qs, 4, 100), 0);
    ck_assert_int_eq(wt.calls, 0);
    resolver_free(r);
    event_base_free(base);
    fake_dns_stop(&d);
}
END_TEST

START_TEST(test_one_lookup_per_name_and_cache)
{
    struct fake_dns d;
    fake_dns_start(&d, "", NULL);
    struct event_base *base = event_base_new();
    struct resolver *r = make(base, &d);
    struct waiter a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char err[400], ip[64];

    ck_assert_int_eq(resolve_for(r, "slow.test:6821", &a, &ss, &sl, err, sizeof(err)),
                     RESOLVER_PENDING);
    ck_assert_int_eq(resolve_for(r, "SLOW.test:6817", &b, &ss, &sl, err, sizeof(err)),
                     RESOLVER_PENDING);
    struct query qs[8];
    size_t n = pump(base, &d, qs, 8, 150);
    /* one A and one AAAA query, not one pair per caller */
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(qs[0].qtype + qs[1].qtype, 1 + 28);
    ck_assert_int_eq(strcasecmp(qs[0].name, "slow.test"), 0);
    ck_assert_int_eq(a.calls + b.calls, 0);
    /* the answer can take as long as it likes: nobody is called before it */
    ck_assert_uint_eq(pump(base, &d, qs + 2, 6, 200), 0);
    ck_assert_int_eq(a.calls + b.calls, 0);
    answer_lookup(&d, qs, "10.20.30.40", 60);
    pump(base, &d, qs + 2, 6, 100);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_int_eq(b.calls, 1);
    ck_assert(a.ok && b.ok);
    ck_assert_str_eq(a.ip, "10.20.30.40");
    ck_assert_uint_eq(a.port, 6821);
    ck_assert_uint_eq(b.port, 6817);
    ck_assert_ptr_null(a.w.entry);

    /* cached: answered at once, no packet */
    ck_assert_int_eq(resolve_for(r, "slow.test:1", &a, &ss, &sl, err, sizeof(err)), RESOLVER_OK);
    ck_assert_str_eq(ip_of(&ss, ip, sizeof(ip)), "10.20.30.40");
    ck_assert_uint_eq(pump(base, &d, qs, 8, 50), 0);

    /* a cancelled waiter is not called; the other is */
    struct query q2[8];
    struct waiter c, e;
    memset(&c, 0, sizeof(c));
    memset(&e, 0, sizeof(e));
    ck_assert_int_eq(resolve_for(r, "other.test:5", &c, &ss, &sl, err, sizeof(err)),
                     RESOLVER_PENDING);
    ck_assert_int_eq(resolve_for(r, "other.test:6", &e, &ss, &sl, err, sizeof(err)),
                     RESOLVER_PENDING);
    resolver_cancel(&c.w);
    resolver_cancel(&c.w); /* twice is harmless */
    n = pump(base, &d, q2, 8, 100);
    ck_assert_uint_eq(n, 2);
    answer_lookup(&d, q2, "10.0.0.5", 60);
    pump(base, &d, q2, 8, 100);
    ck_assert_int_eq(c.calls, 0);
    ck_assert_int_eq(e.calls, 1);
    ck_assert_str_eq(e.ip, "10.0.0.5");

    resolver_free(r);
    event_base_free(base);
    fake_dns_stop(&d);
}
END_TEST

START_TEST(test_failure_backs_off_and_connect_failure_refreshes)
{
    struct fake_dns d;
    fake_dns_start(&d, "", NULL);
    struct event_base *base = event_base_new();
    struct resolver *r = make(base, &d);
    struct waiter a;
    memset(&a, 0, sizeof(a));
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char err[400];
    struct query qs[8];

    ck_assert_int_eq(resolve_for(r, "gone.test:1", &a, &ss, &sl, err, sizeof(err)),
                     RESOLVER_PENDING);
    ck_assert_uint_eq(pump(base, &d, qs, 8, 100), 2);
    answer_lookup(&d, qs, NULL, 0);
    pump(base, &d, qs + 2, 6, 50);
    ck_assert_int_eq(a.calls, 1);
    ck_assert(!a.ok);
    ck_assert_msg(strstr(a.err, "gone.test") != NULL, "%s", a.err);
    ck_assert_msg(strstr(a.err, "not exist") != NULL, "%s", a.err); /* evdns's NXDOMAIN */

    /* in back-off: refused at once, nothing sent */
    ck_assert_int_eq(resolve_for(r, "gone.test:1", &a, &ss, &sl, err, sizeof(err)),
                     RESOLVER_FAILED);
    ck_assert_msg(strstr(err, "gone.test") != NULL, "%s", err);
    ck_assert_uint_eq(pump(base, &d, qs, 8, 20), 0);
    /* after the back-off (at most 125 ms for the first) a new lookup goes out */
    pump(base, &d, qs, 8, (RESOLVER_BACKOFF_MIN_MS * 5 / 4) + 20);
    ck_assert_int_eq(resolve_for(r, "gone.test:1", &a, &ss, &sl, err, sizeof(err)),
                     RESOLVER_PENDING);
    ck_assert_uint_eq(pump(base, &d, qs, 8, 100), 2);
    answer_lookup(&d, qs, "10.1.1.1", 300);
    pump(base, &d, qs + 2, 6, 50);
    ck_assert_int_eq(a.calls, 2);
    ck_assert(a.ok);
    ck_assert_str_eq(a.ip, "10.1.1.1");

    /* the pod restarted: once the answer is a second old, a failed connect re-resolves */
    resolver_failed(r, "gone.test:1");
    ck_assert_int_eq(resolve_for(r, "gone.test:1", &a, &ss, &sl, err, sizeof(err)), RESOLVER_OK);
    pump(base, &d, qs, 8, RESOLVER_REFRESH_MIN_MS + 50);
    resolver_failed(r, "gone.test:1");
    ck_assert_int_eq(resolve_for(r, "gone.test:1", &a, &ss, &sl, err, sizeof(err)),
                     RESOLVER_PENDING);
    ck_assert_uint_eq(pump(base, &d, qs, 8, 100), 2);
    answer_lookup(&d, qs, "10.1.1.2", 300);
    pump(base, &d, qs + 2, 6, 50);
    ck_assert_int_eq(a.calls, 3);
    ck_assert_str_eq(a.ip, "10.1.1.2");

    resolver_free(r);
    event_base_free(base);
    fake_dns_stop(&d);
}
END_TEST

START_TEST(test_free_with_lookup_running)
{
    /* A server that never answers: freeing the resolver then drops the query (ASan: no leak). */
    struct fake_dns d;
    fake_dns_start(&d, "", "options timeout:30 attempts:1\n");
    struct event_base *base = event_base_new();
    struct resolver *r = make(base, &d);
    struct waiter a;
    memset(&a, 0, sizeof(a));
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char err[400];
    struct query qs[8];
    ck_assert_int_eq(resolve_for(r, "never.test:1", &a, &ss, &sl, err, sizeof(err)),
                     RESOLVER_PENDING);
    ck_assert_uint_eq(pump(base, &d, qs, 8, 100), 2);
    resolver_free(r);
    ck_assert_ptr_null(a.w.entry);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(a.calls, 0);
    event_base_free(base);
    fake_dns_stop(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("resolver");
    check_case(s, "pure",
               (const TTest *[]){
                   test_ttl_clamp, test_backoff_delay_range, test_policy_empty_looks_up_then_joins,
                   test_policy_dns_answer_expires_with_ttl, test_policy_stable_never_expires,
                   test_policy_failure_backs_off, test_policy_failed_refresh_keeps_stale_answer,
                   test_policy_connect_failure_refreshes_rate_limited, test_hosts_match,
                   test_hosts_long_line, NULL});
    TCase *io = check_case(s, "loop",
                           (const TTest *[]){test_literals_and_hosts_send_nothing,
                                             test_one_lookup_per_name_and_cache,
                                             test_failure_backs_off_and_connect_failure_refreshes,
                                             test_free_with_lookup_running, NULL});
    tcase_set_timeout(io, 30);
    return s;
}

int main(void)
{
    return check_run(suite());
}
