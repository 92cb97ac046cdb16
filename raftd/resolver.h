/*
 * resolver.h - name resolution that never blocks the worker's event loop.
 *
 * Peer addresses (controller.peers) and the leader's client API address (from its
 * handshake) may name hosts: "spurctld-1.spurctld:6821" in a Kubernetes StatefulSet. A
 * blocking getaddrinfo() on the one event loop would hold every heartbeat, client answer
 * and status frame behind a slow DNS server, long enough for the supervisor to declare the
 * replica stalled and kill it. This module answers from a cache or from libevent's
 * asynchronous evdns, and guarantees:
 *
 *   - No call blocks on the network. An IP literal is answered at once and never looked
 *     up; a name listed in the hosts file (/etc/hosts) is answered at once from that local
 *     file; every other name is asked of the nameservers of /etc/resolv.conf (its search
 *     list, ndots, timeout and attempts honoured) with evdns, A and AAAA in parallel.
 *   - At most one lookup per name is in flight; callers that ask while it runs wait for
 *     its answer (resolver_wait), they do not start another.
 *   - Answers are cached: literals and hosts-file entries for good, DNS answers for their
 *     TTL (clamped to RESOLVER_TTL_MIN_MS..RESOLVER_TTL_MAX_MS). A caller whose connection
 *     to the address failed says so (resolver_failed): the name is looked up again on the
 *     next ask, at most once per RESOLVER_REFRESH_MIN_MS, because a restarted pod comes
 *     back with a new IP under the same name.
 *   - A failed lookup is retried with jittered exponential back-off (RESOLVER_BACKOFF_*);
 *     during the back-off an ask fails at once (or gets the last good address, which is
 *     kept when a refresh fails: a DNS outage must not cut a peer whose IP did not change).
 *     Failures and changes are logged once per change of outcome, never per attempt; names
 *     go through log_q().
 *
 * The decisions (fresh or stale, look up or wait or refuse, back-off, TTL, the hosts-file
 * match) are pure functions below, so the unit test drives them without a network.
 *
 * Ownership: the resolver owns its cache and its evdns base. A struct resolver_wait lives
 * in the caller's object; the resolver links it while a lookup runs and unlinks it before
 * calling back; resolver_cancel() unlinks it early, and must be called before the caller
 * frees the object that holds it. resolver_free() drops waiters without calling them.
 */
#ifndef SPUR_RESOLVER_H
#define SPUR_RESOLVER_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define RESOLVER_TTL_MIN_MS     1000u   /* a TTL of 0 still caches for a second */
#define RESOLVER_TTL_MAX_MS     300000u /* re-check a long-lived answer every 5 min */
#define RESOLVER_REFRESH_MIN_MS 1000u   /* connection failures re-resolve at most this often */
#define RESOLVER_BACKOFF_MIN_MS 100u    /* first retry after a failed lookup */
#define RESOLVER_BACKOFF_MAX_MS 5000u
#define RESOLVER_MAX_ADDRS      8
#define RESOLVER_MAX_NAMES      64 /* names announced by peers cannot grow it further */

/* ---- pure parts --------------------------------------------------------------------- */

/* The cache state of one name, without the I/O. */
struct resolver_policy {
    bool have_addr;       /* an answer is held, fresh or not */
    bool stable;          /* it came from the hosts file: never expires */
    bool in_flight;       /* a lookup for the name is running */
    bool failing;         /* the last lookup failed */
    uint64_t answered_ms; /* when the answer held was obtained */
    uint64_t expires_ms;  /* a DNS answer is fresh before this */
    uint64_t retry_ms;    /* after a failure: no new lookup before this */
    uint32_t backoff_ms;  /* the next failure's back-off */
};

enum resolver_action {
    RESOLVER_USE,       /* answer with the cached address */
    RESOLVER_LOOKUP,    /* start a lookup and wait for it */
    RESOLVER_JOIN,      /* a lookup runs: wait for it */
    RESOLVER_USE_STALE, /* in back-off after a failed refresh: the old address */
    RESOLVER_REFUSE,    /* in back-off, nothing to offer: fail at once */
};

enum resolver_action resolver_policy_decide(const struct resolver_policy *p, uint64_t now_ms);
/* A lookup answered; ttl_s is the smallest TTL of the records (ignored when stable). */
void resolver_policy_answered(struct resolver_policy *p, uint64_t now_ms, bool stable,
                              uint32_t ttl_s);
/* A lookup failed; rnd is a random value for the jitter. */
void resolver_policy_failed(struct resolver_policy *p, uint64_t now_ms, uint64_t rnd);
/* A connection to the cached address failed: make the next ask look the name up again. */
void resolver_policy_connect_failed(struct resolver_policy *p, uint64_t now_ms);
/* The cache lifetime of a DNS answer with this TTL, clamped. */
uint32_t resolver_ttl_ms(uint32_t ttl_s);
/* The wait before retry number n+1, given the current back-off b and a random value. */
uint32_t resolver_backoff_delay(uint32_t b, uint64_t rnd);

/*
 * Find name in the text of a hosts file (lines "ADDRESS NAME [ALIAS...]", '#' comments,
 * names compared without case, a trailing '.' on name ignored). Fills up to max addresses
 * (port 0) in file order, without duplicates; returns how many.
 */
size_t resolver_hosts_match(const char *text, const char *name, struct sockaddr_storage *out,
                            size_t max);

/* ---- the resolver ------------------------------------------------------------------- */

struct resolver;
struct resolver_entry;

/* ok: *ss holds the address (port set); otherwise err says why. Both valid in the call. */
typedef void (*resolver_cb)(void *arg, bool ok, const struct sockaddr_storage *ss, socklen_t sl,
                            const char *err);

/* A caller's place in line for a running lookup; zero it before first use. */
struct resolver_wait {
    struct resolver_wait *next;
    struct resolver_entry *entry; /* non-NULL while waiting */
    uint16_t port;
    resolver_cb cb;
    void *arg;
};

struct resolver_options {
    const char *resolv_conf; /* NULL: /etc/resolv.conf */
    const char *hosts_file;  /* NULL: /etc/hosts */
    uint64_t seed;           /* back-off jitter */
};

struct resolver *resolver_new(struct event_base *base, const struct resolver_options *o, char *why,
                              size_t whylen);
void resolver_free(struct resolver *r);

enum resolver_rc { RESOLVER_OK = 0, RESOLVER_PENDING = 1, RESOLVER_FAILED = -1 };

/*
 * Resolve "HOST:PORT" (IPv6 literals in brackets). RESOLVER_OK: ss and sl are set now and
 * cb is not called. RESOLVER_PENDING: w is linked and cb(arg, ...) comes later, from the
 * loop, exactly once unless resolver_cancel(w) comes first. RESOLVER_FAILED: err says why
 * (not HOST:PORT, or the name failed lately and is in back-off).
 */
int resolver_resolve(struct resolver *r, const char *hostport, struct sockaddr_storage *ss,
                     socklen_t *sl, struct resolver_wait *w, resolver_cb cb, void *arg, char *err,
                     size_t errlen);
/* Stop waiting; harmless when w is not waiting. */
void resolver_cancel(struct resolver_wait *w);
/* A connection to what hostport resolved to failed (or reached the wrong peer). */
void resolver_failed(struct resolver *r, const char *hostport);

#endif
