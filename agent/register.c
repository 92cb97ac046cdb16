/*
 * register.c - RegisterNode through the client library; contract in register.h.
 */
#include "register.h"

#include "log.h"
#include "spurclient.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REGISTER_TIMEOUT_MS 5000

struct registrar {
    struct spurclient *client; /* owned */
    char **hosts;              /* owned */
    size_t nhosts;
    uint64_t jitter;
};

struct registrar *register_new(const char *env, const char *const *cfg_hosts, size_t ncfg,
                               const char *cluster_name, const struct keyring *kr,
                               uint32_t max_frame, char *err, size_t errlen)
{
    if (kr == NULL || kr->n == 0 || cluster_name == NULL || cluster_name[0] == '\0') {
        /* The handshake proves a key of the named cluster: without either, nothing would. */
        snprintf(err, errlen, "register: %s",
                 kr == NULL || kr->n == 0 ? "no cluster key loaded (auth.key_file)"
                                          : "no cluster_name configured");
        return NULL;
    }
    struct registrar *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "register: out of memory");
        return NULL;
    }
    if (env != NULL && env[0] != '\0') {
        r->hosts = spurclient_hosts_parse(env, &r->nhosts);
    } else {
        r->hosts = calloc(ncfg + 1, sizeof(char *));
        for (size_t i = 0; r->hosts && i < ncfg; i++)
            if ((r->hosts[r->nhosts] = strdup(cfg_hosts[i])) != NULL)
                r->nhosts++;
    }
    if (r->hosts == NULL || r->nhosts == 0) {
        snprintf(err, errlen, "no controller address: set SPUR_CONTROLLER or controller.hosts");
        register_free(r);
        return NULL;
    }
    struct spurclient_options o = {
        .hosts = (const char *const *)r->hosts,
        .nhosts = r->nhosts,
        .cluster_name = cluster_name,
        .timeout_ms = REGISTER_TIMEOUT_MS,
        .max_frame = max_frame,
        .user = "spurd",
        .keyring = kr,
        .role = "agent",
    };
    r->client = spurclient_new(&o);
    if (r->client == NULL) {
        snprintf(err, errlen, "register: out of memory");
        register_free(r);
        return NULL;
    }
    r->jitter = mono_ns() ^ (uint64_t)(uintptr_t)r;
    return r;
}

void register_free(struct registrar *r)
{
    if (r == NULL)
        return;
    if (r->client)
        spurclient_free(r->client);
    if (r->hosts)
        spurclient_hosts_free(r->hosts, r->nhosts);
    free(r);
}

int register_once(struct registrar *r, const struct register_node *n, uint32_t timeout_ms,
                  char *err, size_t errlen)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__RegisterNodeRequest rn = SPUR__API__REGISTER_NODE_REQUEST__INIT;
    rn.name = (char *)n->name;
    rn.address = (char *)n->address;
    rn.cpus = n->cpus;
    rn.mem_mb = n->mem_mb;
    rn.from_agent = true;
    req.op_case = SPUR__API__REQUEST__OP_REGISTER_NODE;
    req.register_node = &rn;
    spurclient_set_timeout(r->client, timeout_ms);
    spurclient_response *resp = NULL;
    if (spurclient_call(r->client, &req, true, &resp, err, errlen) != 0)
        return -1;
    int rc = 0;
    if (resp->code != SPUR__API__CODE__CODE_OK) {
        snprintf(err, errlen, "refused by %s: %s",
                 spurclient_current_host(r->client) ? spurclient_current_host(r->client) : "?",
                 resp->error && resp->error[0] ? resp->error : "(no reason given)");
        rc = -1;
    }
    spurclient_response_free(resp);
    return rc;
}

uint32_t register_backoff_ms(unsigned failures)
{
    uint32_t d = 1000;
    for (unsigned i = 1; i < failures && d < 30000; i++)
        d *= 2;
    return d > 30000 ? 30000 : d;
}

int register_until(struct registrar *r, const struct register_node *n, volatile sig_atomic_t *stop)
{
    for (unsigned failures = 1; !*stop; failures++) {
        char err[512];
        if (register_once(r, n, REGISTER_TIMEOUT_MS, err, sizeof(err)) == 0) {
            log_event(LOG_INFO, "agent", "registered",
                      "node=%s address=%s cpus=%u mem_mb=%" PRIu64 " controller=%s", log_q(n->name),
                      log_q(n->address), n->cpus, n->mem_mb,
                      log_q(spurclient_current_host(r->client)));
            return 0;
        }
        uint32_t delay = register_backoff_ms(failures);
        delay = delay / 2 + (uint32_t)(jitter_rand(&r->jitter) % (delay / 2 + 1));
        log_event(LOG_WARN, "agent", "registration failed; retrying",
                  "attempt=%u retry_ms=%u "
                  "error=%s",
                  failures, delay, log_q(err));
        for (uint32_t waited = 0; waited < delay && !*stop; waited += 100) {
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    return -1;
}
