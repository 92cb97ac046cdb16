/*
 * resolver.c - asynchronous, cached name resolution on libevent's evdns; contract in
 * resolver.h.
 *
 * One struct resolver_entry per name (without the port: "spurctld-1.spurctld:6821" and
 * "spurctld-1.spurctld:6817" share one entry). An entry holds the last good answer, the
 * policy state (resolver_policy), and while a lookup runs, the waiters and what the two
 * queries (A and AAAA, sent together) have brought so far. The lookup ends when both
 * queries have answered, each bounded by evdns's timeout and attempts; then every waiter is
 * called back, in order, from the loop.
 *
 * Why evdns_base_resolve_ipv4/ipv6 and not evdns_getaddrinfo: the former report the
 * records' TTL, which the cache needs; and in libevent 2.1 a getaddrinfo request still
 * running when its evdns base is freed can only be finished by running the event loop once
 * more (its callbacks are deferred), which a worker that is shutting down does not do, so
 * its memory would leak. The plain requests are dropped without a callback by
 * evdns_base_free(base, 0). The price is reading the hosts file here (evdns consults it
 * only in evdns_getaddrinfo): a small local file, read when a name is first asked for and
 * before each DNS lookup, never per connection.
 *
 * An entry is freed only while no lookup for it runs, so an evdns callback never sees a
 * freed entry; resolver_free() frees the evdns base (dropping running queries without
 * callbacks) before it frees the entries.
 */
#include "resolver.h"

#include "cfg.h"
#include "log.h"
#include "netaddr.h"
#include "util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <event2/dns.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HOSTS_MAX_BYTES (1u << 20) /* a hosts file larger than this is not read */
#define NAME_MAX_LEN    255

/* ---- pure parts ----------------------------------------------------------------------- */

uint32_t resolver_ttl_ms(uint32_t ttl_s)
{
    uint64_t ms = (uint64_t)ttl_s * 1000u;
    if (ms < RESOLVER_TTL_MIN_MS)
        return RESOLVER_TTL_MIN_MS;
    if (ms > RESOLVER_TTL_MAX_MS)
        return RESOLVER_TTL_MAX_MS;
    return (uint32_t)ms;
}

uint32_t resolver_backoff_delay(uint32_t b, uint64_t rnd)
{
    if (b < RESOLVER_BACKOFF_MIN_MS)
        b = RESOLVER_BACKOFF_MIN_MS;
    if (b > RESOLVER_BACKOFF_MAX_MS)
        b = RESOLVER_BACKOFF_MAX_MS;
    /* +-25 %, so that replicas that lost DNS together do not retry in lockstep */
    return b - b / 4 + (uint32_t)(rnd % (b / 2 + 1));
}

enum resolver_action resolver_policy_decide(const struct resolver_policy *p, uint64_t now_ms)
{
    if (p->have_addr && (p->stable || now_ms < p->expires_ms))
        return RESOLVER_USE;
    if (p->in_flight)
        return RESOLVER_JOIN;
    if (p->failing && now_ms < p->retry_ms)
        return p->have_addr ? RESOLVER_USE_STALE : RESOLVER_REFUSE;
    return RESOLVER_LOOKUP;
}

void resolver_policy_answered(struct resolver_policy *p, uint64_t now_ms, bool stable,
                              uint32_t ttl_s)
{
    p->have_addr = true;
    p->stable = stable;
    p->in_flight = false;
    p->failing = false;
    p->answered_ms = now_ms;
    p->expires_ms = stable ? UINT64_MAX : now_ms + resolver_ttl_ms(ttl_s);
    p->retry_ms = 0;
    p->backoff_ms = RESOLVER_BACKOFF_MIN_MS;
}

void resolver_policy_failed(struct resolver_policy *p, uint64_t now_ms, uint64_t rnd)
{
    uint32_t b = p->backoff_ms ? p->backoff_ms : RESOLVER_BACKOFF_MIN_MS;
    p->in_flight = false;
    p->failing = true;
    p->retry_ms = now_ms + resolver_backoff_delay(b, rnd);
    p->backoff_ms = b * 2 > RESOLVER_BACKOFF_MAX_MS ? RESOLVER_BACKOFF_MAX_MS : b * 2;
    /* A stale answer stays (have_addr): used while the refresh keeps failing. */
}

void resolver_policy_connect_failed(struct resolver_policy *p, uint64_t now_ms)
{
    /*
     * Hosts-file answers are what the operator wrote; a refused connection says nothing
     * about them. A DNS answer is dropped from "fresh", but not more often than once per
     * RESOLVER_REFRESH_MIN_MS: a peer that is merely down must not turn every redial into
     * a DNS query.
     */
    if (!p->have_addr || p->stable)
        return;
    if (now_ms - p->answered_ms < RESOLVER_REFRESH_MIN_MS)
        return;
    if (p->expires_ms > now_ms)
        p->expires_ms = now_ms;
}

/* Fill ss (port 0) from an address token of a hosts file; 0, or -1 when it is none. */
static int hosts_addr(const char *tok, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, tok, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, tok, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        return 0;
    }
    return -1;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr)) == 0;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

static size_t add_addr(struct sockaddr_storage *out, size_t n, size_t max,
                       const struct sockaddr_storage *a)
{
    if (n >= max)
        return n;
    for (size_t i = 0; i < n; i++)
        if (same_addr(&out[i], a))
            return n;
    out[n] = *a;
    return n + 1;
}

size_t resolver_hosts_match(const char *text, const char *name, struct sockaddr_storage *out,
                            size_t max)
{
    char want[NAME_MAX_LEN + 1];
    size_t wl = strlen(name);
    if (wl == 0 || wl > NAME_MAX_LEN)
        return 0;
    memcpy(want, name, wl + 1);
    if (want[wl - 1] == '.')
        want[--wl] = '\0';
    size_t n = 0;
    const char *line = text;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        if (len >= sizeof(buf))
            len = sizeof(buf) - 1; /* an absurd line is cut, not a reason to stop */
        memcpy(buf, line, len);
        buf[len] = '\0';
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        char *tok = strtok_r(buf, " \t\r\f\v", &save);
        struct sockaddr_storage a;
        if (tok && hosts_addr(tok, &a) == 0) {
            while ((tok = strtok_r(NULL, " \t\r\f\v", &save)) != NULL) {
                size_t tl = strlen(tok);
                if (tl > 1 && tok[tl - 1] == '.')
                    tok[--tl] = '\0';
                if (strcasecmp(tok, want) == 0) {
                    n = add_addr(out, n, max, &a);
                    break;
                }
            }
        }
        line = end ? end + 1 : NULL;
    }
    return n;
}

/* ---- the cache ------------------------------------------------------------------------ */

struct resolver_entry {
    struct resolver *r;
    struct resolver_entry *next;
    char name[NAME_MAX_LEN + 1];
    struct resolver_policy pol;
    struct sockaddr_storage addrs[RESOLVER_MAX_ADDRS]; /* the answer held, port 0 */
    size_t naddrs;
    unsigned rr;           /* which of them the next connection uses */
    uint64_t last_used_ms; /* for eviction */
    /* the running lookup */
    int pending; /* queries (A, AAAA) not answered yet */
    struct sockaddr_storage got[RESOLVER_MAX_ADDRS];
    size_t ngot;
    uint32_t got_ttl;
    int err4, err6;                /* DNS_ERR_* of each query */
    struct resolver_wait *waiters; /* in the order they came */
    char last_err[120];            /* why the last lookup failed */
    /* what was logged last, so that a retry repeating it stays quiet */
    char logged[160];
};

struct resolver {
    struct event_base *base;
    struct evdns_base *dns;
    char *hosts_file;
    struct resolver_entry *entries;
    size_t nentries;
    uint64_t rng; /* jitter_rand() state: retry jitter */
};

static void format_ip(const struct sockaddr_storage *a, char *out, size_t outlen)
{
    const void *src = a->ss_family == AF_INET6
                          ? (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr
                          : (const void *)&((const struct sockaddr_in *)a)->sin_addr;
    if (inet_ntop(a->ss_family, src, out, (socklen_t)outlen) == NULL)
        snprintf(out, outlen, "?");
}

/* The cached address to use, with port; the entry must have one. */
static void entry_addr(const struct resolver_entry *e, uint16_t port, struct sockaddr_storage *ss,
                       socklen_t *sl)
{
    *ss = e->addrs[e->rr % e->naddrs];
    if (ss->ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
        *sl = sizeof(struct sockaddr_in6);
    } else {
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
        *sl = sizeof(struct sockaddr_in);
    }
}

static struct resolver_entry *entry_find(struct resolver *r, const char *name)
{
    for (struct resolver_entry *e = r->entries; e; e = e->next)
        if (strcasecmp(e->name, name) == 0)
            return e;
    return NULL;
}

static void entry_unlink_free(struct resolver *r, struct resolver_entry *e)
{
    for (struct resolver_entry **pp = &r->entries; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    }
    r->nentries--;
    free(e);
}

/*
 * A new entry for name, evicting the least recently used idle one when the cache is
 * full. NULL when memory is short or every entry is busy.
 */
static struct resolver_entry *entry_new(struct resolver *r, const char *name)
{
    if (r->nentries >= RESOLVER_MAX_NAMES) {
        struct resolver_entry *victim = NULL;
        for (struct resolver_entry *e = r->entries; e; e = e->next)
            if (!e->pol.in_flight && e->waiters == NULL &&
                (victim == NULL || e->last_used_ms < victim->last_used_ms))
                victim = e;
        if (victim == NULL)
            return NULL;
        entry_unlink_free(r, victim);
    }
    struct resolver_entry *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->r = r;
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->pol.backoff_ms = RESOLVER_BACKOFF_MIN_MS;
    e->next = r->entries;
    r->entries = e;
    r->nentries++;
    return e;
}

/* Log "what" unless it is what this entry logged last. */
static bool log_changed(struct resolver_entry *e, const char *what)
{
    if (strcmp(e->logged, what) == 0)
        return false;
    snprintf(e->logged, sizeof(e->logged), "%s", what);
    return true;
}

/* Read the hosts file and look name up in it; fills e->addrs and returns true on a match. */
static bool hosts_lookup(struct resolver *r, struct resolver_entry *e)
{
    FILE *f = fopen(r->hosts_file, "re");
    if (f == NULL)
        return false; /* no hosts file: every name goes to DNS */
    char *text = malloc(HOSTS_MAX_BYTES + 1);
    if (text == NULL) {
        fclose(f);
        return false;
    }
    size_t len = fread(text, 1, HOSTS_MAX_BYTES, f);
    fclose(f);
    text[len] = '\0';
    struct sockaddr_storage found[RESOLVER_MAX_ADDRS];
    size_t n = resolver_hosts_match(text, e->name, found, RESOLVER_MAX_ADDRS);
    free(text);
    if (n == 0)
        return false;
    memcpy(e->addrs, found, n * sizeof(found[0]));
    e->naddrs = n;
    e->rr = 0;
    resolver_policy_answered(&e->pol, mono_ms(), true, 0);
    char ip[INET6_ADDRSTRLEN];
    format_ip(&e->addrs[0], ip, sizeof(ip));
    char what[160];
    snprintf(what, sizeof(what), "hosts %s", ip);
    if (log_changed(e, what))
        log_event(LOG_INFO, "resolver", "name found in the hosts file", "name=%s addr=%s",
                  log_q(e->name), ip);
    return true;
}

static const char *lookup_error(const struct resolver_entry *e)
{
    /* "no such name" or a timeout says more than the other family's "no records" */
    int err = e->err4 != DNS_ERR_NODATA && e->err4 != DNS_ERR_NONE ? e->err4 : e->err6;
    if (err == DNS_ERR_NODATA || err == DNS_ERR_NONE)
        return "no A or AAAA records";
    return evdns_err_to_string(err);
}

/* Call back the waiters of the lookup that just ended, from its answer or stale one. */
static void serve_waiters(struct resolver_entry *e, const char *why)
{
    /*
     * One at a time from the head: a callback may cancel another waiter (its owner
     * closing) or ask again; the list stays consistent throughout. A callback that starts
     * a new lookup (in_flight again) leaves the rest waiting for that one.
     */
    while (e->waiters && !e->pol.in_flight) {
        struct resolver_wait *w = e->waiters;
        e->waiters = w->next;
        w->next = NULL;
        w->entry = NULL;
        if (e->pol.have_addr) {
            struct sockaddr_storage ss;
            socklen_t sl;
            entry_addr(e, w->port, &ss, &sl);
            w->cb(w->arg, true, &ss, sl, NULL);
        } else {
            char err[400];
            snprintf(err, sizeof(err), "%s does not resolve: %s", e->name, why);
            w->cb(w->arg, false, NULL, 0, err);
        }
    }
}

static void lookup_finished(struct resolver_entry *e)
{
    struct resolver *r = e->r;
    uint64_t now = mono_ms();
    char what[160];
    if (e->ngot > 0) {
        /*
         * IPv4 addresses first, whichever query answered first, so that the address used
         * does not depend on packet timing.
         */
        struct sockaddr_storage sorted[RESOLVER_MAX_ADDRS];
        size_t k = 0;
        for (int fam = 0; fam < 2; fam++)
            for (size_t i = 0; i < e->ngot; i++)
                if ((e->got[i].ss_family == AF_INET) == (fam == 0))
                    sorted[k++] = e->got[i];
        memcpy(e->got, sorted, k * sizeof(sorted[0]));
        bool changed = e->naddrs != e->ngot;
        for (size_t i = 0; !changed && i < e->ngot; i++)
            changed = !same_addr(&e->addrs[i], &e->got[i]);
        memcpy(e->addrs, e->got, e->ngot * sizeof(e->got[0]));
        e->naddrs = e->ngot;
        if (changed)
            e->rr = 0;
        resolver_policy_answered(&e->pol, now, false, e->got_ttl);
        char ip[INET6_ADDRSTRLEN];
        format_ip(&e->addrs[e->rr % e->naddrs], ip, sizeof(ip));
        snprintf(what, sizeof(what), "dns %s", ip);
        if (log_changed(e, what))
            log_event(LOG_INFO, "resolver", "name resolved", "name=%s addr=%s addrs=%zu ttl_s=%u",
                      log_q(e->name), ip, e->naddrs, e->got_ttl);
        serve_waiters(e, NULL);
        return;
    }
    const char *why = lookup_error(e);
    snprintf(e->last_err, sizeof(e->last_err), "%s", why);
    resolver_policy_failed(&e->pol, now, jitter_rand(&r->rng));
    snprintf(what, sizeof(what), "fail %s", why);
    if (log_changed(e, what)) {
        char ip[INET6_ADDRSTRLEN] = "none";
        if (e->pol.have_addr)
            format_ip(&e->addrs[e->rr % e->naddrs], ip, sizeof(ip));
        log_event(LOG_WARN, "resolver", "name does not resolve; retrying with back-off",
                  "name=%s why=%s keeping=%s", log_q(e->name), log_q(why), ip);
    }
    serve_waiters(e, why);
}

/*
 * One query's answer. The family comes from which query it is (want), not from the
 * callback's type, which evdns leaves 0 on errors.
 */
static void on_answer(struct resolver_entry *e, char want, int result, char type, int count,
                      int ttl, void *addresses)
{
    if (want == DNS_IPv4_A)
        e->err4 = result;
    else
        e->err6 = result;
    if (result == DNS_ERR_NONE && addresses != NULL && type == want) {
        for (int i = 0; i < count; i++) {
            struct sockaddr_storage a;
            memset(&a, 0, sizeof(a));
            if (type == DNS_IPv4_A) {
                a.ss_family = AF_INET;
                memcpy(&((struct sockaddr_in *)&a)->sin_addr, (const uint8_t *)addresses + 4 * i,
                       4);
            } else if (type == DNS_IPv6_AAAA) {
                a.ss_family = AF_INET6;
                memcpy(&((struct sockaddr_in6 *)&a)->sin6_addr, (const uint8_t *)addresses + 16 * i,
                       16);
            } else {
                continue;
            }
            e->ngot = add_addr(e->got, e->ngot, RESOLVER_MAX_ADDRS, &a);
        }
        uint32_t t = ttl > 0 ? (uint32_t)ttl : 0;
        if (count > 0 && t < e->got_ttl)
            e->got_ttl = t;
    }
    if (--e->pending == 0)
        lookup_finished(e);
}

static void on_answer_a(int result, char type, int count, int ttl, void *addresses, void *arg)
{
    on_answer(arg, DNS_IPv4_A, result, type, count, ttl, addresses);
}

static void on_answer_aaaa(int result, char type, int count, int ttl, void *addresses, void *arg)
{
    on_answer(arg, DNS_IPv6_AAAA, result, type, count, ttl, addresses);
}

/*
 * Start a DNS lookup for e (the hosts file said nothing). Returns 0, or -1 when neither
 * query could be sent (e is then failed, with back-off).
 */
static int lookup_start(struct resolver *r, struct resolver_entry *e)
{
    e->pol.in_flight = true;
    e->ngot = 0;
    e->got_ttl = UINT32_MAX;
    e->err4 = e->err6 = DNS_ERR_UNKNOWN;
    e->pending = 2;
    /* A query that cannot even be queued counts as answered (with its error). */
    if (evdns_base_resolve_ipv4(r->dns, e->name, 0, on_answer_a, e) == NULL)
        e->pending--;
    if (evdns_base_resolve_ipv6(r->dns, e->name, 0, on_answer_aaaa, e) == NULL)
        e->pending--;
    if (e->pending == 0) {
        snprintf(e->last_err, sizeof(e->last_err), "cannot send a DNS query");
        resolver_policy_failed(&e->pol, mono_ms(), jitter_rand(&r->rng));
        return -1;
    }
    return 0;
}

int resolver_resolve(struct resolver *r, const char *hostport, struct sockaddr_storage *ss,
                     socklen_t *sl, struct resolver_wait *w, resolver_cb cb, void *arg, char *err,
                     size_t errlen)
{
    char host[NAME_MAX_LEN + 1];
    uint16_t port;
    char why[200];
    /* An IP literal is its own answer: no cache, no file, no packet. */
    if (netaddr_listen(hostport, ss, sl, why, sizeof(why)) == 0)
        return RESOLVER_OK;
    if (netaddr_split_hostport(hostport, host, sizeof(host), &port) != 0) {
        snprintf(err, errlen, "\"%s\" is not HOST:PORT", hostport);
        return RESOLVER_FAILED;
    }
    uint64_t now = mono_ms();
    struct resolver_entry *e = entry_find(r, host);
    if (e == NULL) {
        e = entry_new(r, host);
        if (e == NULL) {
            snprintf(err, errlen, "%s: no room to resolve another name", host);
            return RESOLVER_FAILED;
        }
        hosts_lookup(r, e);
    }
    e->last_used_ms = now;
    switch (resolver_policy_decide(&e->pol, now)) {
    case RESOLVER_USE:
    case RESOLVER_USE_STALE:
        entry_addr(e, port, ss, sl);
        return RESOLVER_OK;
    case RESOLVER_REFUSE:
        snprintf(err, errlen, "%s does not resolve (retrying): %s", host,
                 e->last_err[0] ? e->last_err : "lookup failed");
        return RESOLVER_FAILED;
    case RESOLVER_LOOKUP:
        /* The operator may have added the name to the hosts file since. */
        if (hosts_lookup(r, e)) {
            entry_addr(e, port, ss, sl);
            return RESOLVER_OK;
        }
        if (lookup_start(r, e) != 0) {
            snprintf(err, errlen, "%s: cannot send a DNS query", host);
            return RESOLVER_FAILED;
        }
        if (!e->pol.in_flight) {
            /* evdns answered inside the call (it defers its callbacks; this is a guard) */
            if (!e->pol.have_addr) {
                snprintf(err, errlen, "%s does not resolve: %s", host, e->last_err);
                return RESOLVER_FAILED;
            }
            entry_addr(e, port, ss, sl);
            return RESOLVER_OK;
        }
        break;
    case RESOLVER_JOIN:
        break;
    }
    resolver_cancel(w);
    w->entry = e;
    w->port = port;
    w->cb = cb;
    w->arg = arg;
    w->next = NULL;
    struct resolver_wait **pp = &e->waiters;
    while (*pp)
        pp = &(*pp)->next;
    *pp = w;
    return RESOLVER_PENDING;
}

void resolver_cancel(struct resolver_wait *w)
{
    if (w == NULL || w->entry == NULL)
        return;
    for (struct resolver_wait **pp = &w->entry->waiters; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    w->entry = NULL;
    w->next = NULL;
}

void resolver_failed(struct resolver *r, const char *hostport)
{
    char host[NAME_MAX_LEN + 1];
    uint16_t port;
    if (netaddr_split_hostport(hostport, host, sizeof(host), &port) != 0)
        return;
    struct resolver_entry *e = entry_find(r, host);
    if (e == NULL || !e->pol.have_addr)
        return;
    /* With several addresses, the next connection tries the next one. */
    e->rr++;
    resolver_policy_connect_failed(&e->pol, mono_ms());
}

/* ---- life cycle ----------------------------------------------------------------------- */

struct resolver *resolver_new(struct event_base *base, const struct resolver_options *o, char *why,
                              size_t whylen)
{
    struct resolver *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(why, whylen, "resolver: out of memory");
        return NULL;
    }
    r->base = base;
    r->rng = (o && o->seed) ? o->seed : mono_ns() | 1;
    r->hosts_file = strdup(o && o->hosts_file ? o->hosts_file : "/etc/hosts");
    r->dns = evdns_base_new(base, 0);
    if (r->hosts_file == NULL || r->dns == NULL) {
        snprintf(why, whylen, "resolver: cannot create the DNS resolver");
        resolver_free(r);
        return NULL;
    }
    const char *conf = o && o->resolv_conf ? o->resolv_conf : "/etc/resolv.conf";
    /* nameservers, search, ndots and the timeout/attempts options; not the hosts file */
    int rc = evdns_base_resolv_conf_parse(
        r->dns, DNS_OPTION_NAMESERVERS | DNS_OPTION_SEARCH | DNS_OPTION_MISC, conf);
    if (evdns_base_count_nameservers(r->dns) == 0) {
        /* What the C library does without a nameserver line: ask the local host. */
        if (evdns_base_nameserver_ip_add(r->dns, "127.0.0.1") != 0) {
            snprintf(why, whylen, "resolver: cannot add a nameserver");
            resolver_free(r);
            return NULL;
        }
    }
    /*
     * No DNS 0x20 (letters of the query name in random case, which evdns does by
     * default): podman's aardvark-dns, and other small resolvers in front of
     * containers, match names case-sensitively and answer "no such name" to
     * "sPuRcTlD-1.spurctld". The real container test caught it: replicas never found
     * each other. The C library does not randomise either.
     */
    evdns_base_set_option(r->dns, "randomize-case:", "0");
    if (rc != 0)
        log_event(LOG_WARN, "resolver", "resolver configuration not fully read; using defaults",
                  "file=%s rc=%d nameservers=%d", log_q(conf), rc,
                  evdns_base_count_nameservers(r->dns));
    return r;
}

void resolver_free(struct resolver *r)
{
    if (r == NULL)
        return;
    /* 0: queries still out are dropped without calling back into the entries. */
    if (r->dns)
        evdns_base_free(r->dns, 0);
    while (r->entries) {
        struct resolver_entry *e = r->entries;
        r->entries = e->next;
        for (struct resolver_wait *w = e->waiters; w;) {
            struct resolver_wait *n = w->next;
            w->entry = NULL;
            w->next = NULL;
            w = n;
        }
        free(e);
    }
    free(r->hosts_file);
    free(r);
}
