/*
 * replica.c - the composition root of one replica.
 *
 * It builds, in this order: the shell (node.c: storage, core, transport, status), the
 * forwarder, the request path (node_api.c), the controller (controller.c), the leader's
 * job duties (jobctl.c, with its agent connections), accounting (acct.c: the exporter and
 * sacct), the client API listener (api.c,
 * dispatching into node_api) and the metrics listener. It routes the node's two hooks:
 * applied -> node_api_applied, controller_applied, jobctl_applied, then acct_applied
 * (clients are answered before the leader's duties queue new proposals; jobctl and acct
 * also see leadership change there), peer -> controller_peer; node_api's
 * SignalJobRequest handler -> jobctl_signal_job, its AcctQueryRequest handler and
 * RaftStatus accounting fields -> acct_query, acct_fill_status. No module it builds calls back into another's internals; this file
 * is the only one that knows them all.
 *
 * Shutdown is sequenced here as well: the node stops taking part (STOPPING, leadership
 * handed over), waiting requests are failed, and the loop breaks once the hand-over has
 * settled or a bounded wait has passed. Freeing answers every call that still waits while
 * the API server it came through exists, then runs in the reverse order of building, so
 * every borrowed pointer outlives its borrower.
 */
#include "replica.h"

#include "acct.h"
#include "api.h"
#include "controller.h"
#include "forwarder.h"
#include "httpd.h"
#include "jobctl.h"
#include "log.h"
#include "node.h"
#include "node_api.h"
#include "node_metrics.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STOP_LINGER_MS 100 /* after a hand-over, time for forwarded answers to come back */
#define STOP_POLL_MS 10

/* Ownership: the replica owns every module it points to and frees them in reverse. */
struct replica {
    struct event_base *base; /* borrowed */
    const struct cfg *cfg;   /* borrowed */
    struct node *node;
    struct forwarder *fwd;
    struct node_api *reqs;
    struct controller *ctl;
    struct jobctl *jobs;
    struct acct *acct;
    struct api_server *api;
    struct httpd *metrics;
    struct node_metrics metrics_view;
    uint64_t stop_deadline_ms;
    uint64_t stop_moved_ms; /* when leadership had left during a stop */
};

static void on_applied(void *arg, const struct node_applied *a)
{
    struct replica *r = arg;
    if (r->reqs)
        node_api_applied(r->reqs, a);
    if (r->ctl)
        controller_applied(r->ctl, a);
    if (r->jobs)
        jobctl_applied(r->jobs, a);
    if (r->acct)
        acct_applied(r->acct, a);
}

static void on_peer(void *arg, const struct transport_peer_info *info, bool up)
{
    struct replica *r = arg;
    if (r->ctl)
        controller_peer(r->ctl, info, up);
}

int replica_open(struct event_base *base, const struct cfg *cfg, uint32_t node_id,
                 struct statusw *sw, const struct replica_options *o, struct replica **out,
                 char *why, size_t whylen)
{
    struct replica *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(why, whylen, "out of memory");
        return EXIT_OSERR;
    }
    r->base = base;
    r->cfg = cfg;
    struct node_hooks hooks = {.applied = on_applied, .peer = on_peer, .arg = r};
    int code = node_open(base, cfg, node_id, sw, o->keyring, &hooks, &r->node, why, whylen);
    if (code != 0) {
        free(r);
        return code;
    }
    code = EXIT_OSERR;
    r->fwd = forwarder_new(base, cfg->controller.max_frame_bytes, transport_resolver(r->node->tr),
                           o->keyring, cfg->cluster_name);
    if (r->fwd == NULL) {
        snprintf(why, whylen, "out of memory");
        goto fail;
    }
    r->reqs = node_api_new(r->node, r->fwd);
    if (r->reqs != NULL)
        r->ctl = controller_new(r->node, r->reqs, cfg);
    if (r->ctl != NULL)
        r->jobs = jobctl_new(r->node, r->reqs, cfg);
    if (r->jobs != NULL)
        r->acct = acct_new(r->node, r->reqs, cfg);
    if (r->reqs == NULL || r->ctl == NULL || r->jobs == NULL || r->acct == NULL) {
        snprintf(why, whylen, "out of memory");
        goto fail;
    }
    node_api_set_signal_handler(r->reqs, jobctl_signal_job, r->jobs);
    node_api_set_acct_handler(r->reqs, acct_query, acct_fill_status, r->acct);
    struct api_options ao = {
        .listen = cfg->controller.listen,
        .max_frame = cfg->controller.max_frame_bytes,
        .cluster_name = cfg->cluster_name,
        .node_id = node_id,
        .socket_path = cfg->controller.socket,
        .auth = {.admin_users = (const char *const *)cfg->controller.admin_users,
                 .nadmin_users = cfg->controller.nadmin_users,
                 .admin_group = cfg->controller.admin_group,
                 .munge = cfg->auth.munge,
                 .munge_socket = cfg->auth.munge_socket,
                 .token_lifespan_s = cfg->auth.token_lifespan_s,
                 .max_token_lifespan_s = cfg->auth.max_token_lifespan_s,
                 .kr = o->keyring},
    };
    code = api_open(base, &ao, node_api_dispatch, r->reqs, &r->api, why, whylen);
    if (code != 0)
        goto fail;
    code = EXIT_OSERR;
    r->metrics_view = (struct node_metrics){
        .node = r->node, .reqs = r->reqs, .api = r->api, .jobs = r->jobs, .acct = r->acct};
    if (cfg->metrics.enabled) {
        r->metrics = httpd_new(base, cfg->metrics.bind, cfg->metrics.port, node_metrics_handler,
                               &r->metrics_view, why, whylen);
        if (r->metrics == NULL)
            goto fail;
    }
    code = controller_start(r->ctl, why, whylen);
    if (code != 0)
        goto fail;
    *out = r;
    return 0;
fail:
    replica_free(r);
    return code;
}

/* ---- shutdown --------------------------------------------------------------------- */

static void on_stop_check(evutil_socket_t fd, short what, void *arg)
{
    struct replica *r = arg;
    struct node *n = r->node;
    (void)fd;
    (void)what;
    /* Nothing to hand over (not leading, or the only voter): stop at once. */
    bool moved = n->raft == NULL || n->role != RAFT_LEADER || !n->stop_transfer;
    uint64_t now = node_now_ms();
    if (moved && r->stop_moved_ms == 0)
        r->stop_moved_ms = now;
    /*
     * After the hand-over, stay a moment (until the new leader is known here, at most
     * STOP_LINGER_MS) so that requests forwarded to it get their answers back through us.
     */
    bool settled = moved && (n->raft == NULL || !n->stop_transfer ||
                             (n->leader != 0 && n->leader != n->id) ||
                             now - r->stop_moved_ms >= STOP_LINGER_MS);
    if (settled && n->raft != NULL && now - r->stop_moved_ms < STOP_LINGER_MS &&
        node_api_waiting(r->reqs) > 0)
        settled = false;
    if (settled || now >= r->stop_deadline_ms) {
        if (!moved)
            log_event(LOG_WARN, "raftd", "leadership not handed over in time; stopping anyway",
                      NULL);
        else if (n->raft)
            log_event(LOG_INFO, "raftd", "stopped", "leader=%u", n->leader);
        event_base_loopbreak(r->base);
        return;
    }
    struct timeval tv = {0, STOP_POLL_MS * 1000};
    event_base_once(r->base, -1, EV_TIMEOUT, on_stop_check, r, &tv);
}

void replica_shutdown(struct replica *r)
{
    if (r->node->stopping)
        return;
    /* What waits is answered now; then STOPPING (no new proposals) and the hand-over. */
    node_api_fail_all(r->reqs, "this replica is shutting down");
    node_begin_stop(r->node);
    uint64_t wait = 2ull * r->cfg->raft.election_timeout_ms;
    if (wait > 3000)
        wait = 3000;
    r->stop_deadline_ms = node_now_ms() + wait;
    on_stop_check(-1, 0, r);
}

void replica_enable_status(struct replica *r)
{
    node_enable_status(r->node);
}

int replica_exit_code(const struct replica *r)
{
    return node_exit_code(r->node);
}

void replica_log_status(const struct replica *r)
{
    const struct node *n = r->node;
    struct raft_status rs;
    memset(&rs, 0, sizeof(rs));
    if (n->raft)
        raft_get_status(n->raft, &rs);
    log_event(LOG_INFO, "raftd", "status",
              "node=%u role=%s term=%llu leader=%u commit=%llu applied=%llu last=%llu "
              "snapshot=%llu waiting=%zu",
              n->id, n->raft ? node_role_name(rs.role) : "none", (unsigned long long)rs.term,
              rs.leader, (unsigned long long)rs.commit, (unsigned long long)n->applied,
              (unsigned long long)rs.last_index, (unsigned long long)n->snapshot_index,
              node_api_waiting(r->reqs));
}

void replica_free(struct replica *r)
{
    if (r == NULL)
        return;
    /*
     * Every waiting call is answered while the API server it came through still exists:
     * api_reply() reads the server's node id and cluster name. So the waiters first (a
     * fatal exit leaves some), then the forwarder, whose free answers the calls it was
     * forwarding; only then the API server, and the rest in reverse order of building.
     */
    if (r->reqs)
        node_api_fail_all(r->reqs, "this replica is shutting down");
    forwarder_free(r->fwd);
    r->fwd = NULL;
    httpd_free(r->metrics);
    /* The leader's duties answer the signal calls they hold while the API server exists. */
    if (r->reqs) {
        node_api_set_signal_handler(r->reqs, NULL, NULL);
        node_api_set_acct_handler(r->reqs, NULL, NULL, NULL);
    }
    /* Accounting answers the sacct calls it holds, too, and closes its connections. */
    acct_free(r->acct);
    r->acct = NULL;
    jobctl_free(r->jobs);
    r->jobs = NULL;
    controller_free(r->ctl);
    r->ctl = NULL;
    node_api_free(r->reqs);
    r->reqs = NULL;
    api_free(r->api);
    node_free(r->node);
    free(r);
}
