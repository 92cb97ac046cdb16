/*
 * controller.c - the controller's policy: bootstrap, configuration sync, the log clock.
 *
 * What this module guarantees, and how:
 *
 * 1. A replica never founds a second cluster. With empty state it waits until its peers'
 *    handshakes say what they hold. It founds the cluster (every founding member writes
 *    the identical first configuration entry, from the same peers list) only when a
 *    quorum of the configured peers, itself included, report empty state and none
 *    reports a cluster (controller_boot_decide). A replica whose peers already run a
 *    cluster starts empty without founding and waits for the leader, live but not ready;
 *    if their configuration does not list it, it says so in the log (an operator must
 *    add it with scontrol raft add-learner). The only configured member founds at once.
 *
 * 2. The replicated partitions and settings follow the configuration file. Once per term,
 *    after the leader's no-op is applied (the state machine is then current), the leader
 *    compares the file's partitions and settings with the replicated ones and proposes
 *    what differs. A proposal the core refuses is made again (config_sync_term reset).
 *
 * 3. The log has a clock. The state machine never reads a clock: time enters it only in
 *    commands. On an idle cluster the leader proposes a tick every FSM_TICK_MS so that
 *    time-based work in the state machine (finished-job retention, session expiry) moves.
 *
 * The controller is told of every step through the node's applied hook and of peers
 * through its peer hook (both routed by replica.c); it never steps the core itself.
 */
#include "controller.h"

#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define FSM_TICK_MS 30000 /* the leader's clock into the log when idle */
#define BOOT_WAIT_MIN_MS 500
#define BOOT_POLL_MS 100

struct controller {
    struct node *n;          /* borrowed */
    struct node_api *api;    /* borrowed */
    const struct cfg *cfg;   /* borrowed */
    struct controller_fsm_conf conf; /* owned */

    /* bootstrap (empty state only) */
    struct event *ev_boot;
    uint64_t boot_deadline_ms;
    bool waiting_logged;
    bool peer_empty[CFG_MAX_PEERS + 1];
    bool peer_has_cluster[CFG_MAX_PEERS + 1];
    bool peer_lists_us[CFG_MAX_PEERS + 1];

    /* leader duties */
    raft_term config_sync_term; /* proposed partitions/settings at this term */
    uint64_t last_fsm_tick_ms;
};

/* ---- the configuration as the state machine takes it --------------------------------- */

int controller_fsm_conf(const struct cfg *cfg, struct controller_fsm_conf *out)
{
    memset(out, 0, sizeof(*out));
    out->parts = calloc(cfg->npartitions ? cfg->npartitions : 1, sizeof(*out->parts));
    if (out->parts == NULL)
        return -1;
    out->n = cfg->npartitions;
    for (size_t i = 0; i < cfg->npartitions; i++) {
        const struct cfg_partition *cp = &cfg->partitions[i];
        out->parts[i] = (struct fsm_partition_conf){
            .name = cp->name,
            .nodes = cp->nodes,
            .is_default = cp->is_default,
            .up = cp->up,
            .max_nodes = cp->max_nodes,
            .max_time_min = cp->max_time_min,
            .max_cpus_per_node = cp->max_cpus_per_node,
            .max_mem_mb_per_node = cp->max_mem_mb_per_node,
        };
    }
    out->settings.finished_job_retention_s = cfg->controller.finished_job_retention_s;
    out->settings.max_script_bytes = cfg->controller.max_script_bytes;
    out->settings.accounting =
        cfg->accounting.database_url != NULL && cfg->accounting.database_url[0] != '\0';
    return 0;
}

void controller_fsm_conf_free(struct controller_fsm_conf *c)
{
    free(c->parts);
    c->parts = NULL;
    c->n = 0;
}

/* ---- bootstrap ---------------------------------------------------------------------- */

enum controller_boot controller_boot_decide(size_t npeers, uint32_t self, const bool *has_cluster,
                                            const bool *empty, uint32_t *cluster_peer)
{
    size_t nempty = 1; /* ourselves */
    for (size_t id = 1; id <= npeers; id++) {
        if (id == self)
            continue;
        if (has_cluster[id]) {
            *cluster_peer = (uint32_t)id;
            return CONTROLLER_BOOT_JOIN;
        }
        if (empty[id])
            nempty++;
    }
    return nempty >= npeers / 2 + 1 ? CONTROLLER_BOOT_FOUND : CONTROLLER_BOOT_WAIT;
}

static void try_bootstrap(struct controller *c)
{
    struct node *n = c->n;
    if (n->started)
        return;
    size_t npeers = c->cfg->controller.npeers;
    uint32_t peer = 0;
    switch (controller_boot_decide(npeers, n->id, c->peer_has_cluster, c->peer_empty, &peer)) {
    case CONTROLLER_BOOT_JOIN:
        /*
         * Empty state and a running cluster that lists this node: on a first boot this
         * is the founding member whose peers founded the cluster a moment before its own
         * handshakes went out (a quorum of empty peers is enough to found), so it is no
         * sign of a lost disk. The evidence of a lost disk comes later, from the leader
         * (node.c, lost_log_check).
         */
        if (c->peer_lists_us[peer] && !c->waiting_logged) {
            c->waiting_logged = true;
            log_event(LOG_INFO, "raftd",
                      "peers run a cluster that lists this node; joining it, not founding one",
                      "node_id=%u peer=%u", n->id, peer);
        } else if (!c->waiting_logged) {
            c->waiting_logged = true;
            log_event(LOG_WARN, "raftd",
                      "peers run a cluster whose configuration does not list this node; "
                      "waiting to be added (scontrol raft add-learner)",
                      "node_id=%u peer=%u", n->id, peer);
        }
        node_start(n, false);
        break;
    case CONTROLLER_BOOT_FOUND: {
        size_t empty = 1;
        for (size_t id = 1; id <= npeers; id++)
            if (id != n->id && c->peer_empty[id])
                empty++;
        log_event(LOG_INFO, "raftd", "founding the cluster: a quorum of peers is empty",
                  "empty=%zu peers=%zu", empty, npeers);
        node_start(n, true);
        break;
    }
    case CONTROLLER_BOOT_WAIT:
        break;
    }
    if (n->started && c->ev_boot)
        evtimer_del(c->ev_boot);
}

void controller_peer(struct controller *c, const struct transport_peer_info *info, bool up)
{
    if (info->id == 0 || info->id > CFG_MAX_PEERS)
        return;
    if (up) {
        c->peer_has_cluster[info->id] = info->has_cluster;
        c->peer_empty[info->id] = !info->has_cluster;
        c->peer_lists_us[info->id] = info->lists_us;
    }
    if (!c->n->started)
        try_bootstrap(c);
}

static void on_boot_timer(evutil_socket_t fd, short what, void *arg)
{
    struct controller *c = arg;
    (void)fd;
    (void)what;
    if (c->n->started)
        return;
    try_bootstrap(c);
    if (!c->n->started && !c->waiting_logged && node_now_ms() >= c->boot_deadline_ms) {
        c->waiting_logged = true;
        log_event(LOG_WARN, "raftd",
                  "empty state and no quorum of peers reachable yet; waiting before founding "
                  "a cluster",
                  "peers=%zu", c->cfg->controller.npeers);
    }
    if (!c->n->started) {
        struct timeval tv = {0, BOOT_POLL_MS * 1000};
        evtimer_add(c->ev_boot, &tv);
    }
}

int controller_start(struct controller *c, char *why, size_t whylen)
{
    if (c->n->started)
        return 0;
    if (c->cfg->controller.npeers == 1) {
        /* The only member: nobody else could run a cluster with this configuration. */
        int code = node_start(c->n, true);
        if (code != 0)
            snprintf(why, whylen, "cannot bootstrap the Raft state");
        return code;
    }
    c->boot_deadline_ms =
        node_now_ms() + BOOT_WAIT_MIN_MS + 2ull * c->cfg->raft.election_timeout_ms;
    struct timeval tv = {0, BOOT_POLL_MS * 1000};
    evtimer_add(c->ev_boot, &tv);
    return 0;
}

/* ---- leader duties -------------------------------------------------------------------- */

/* The core refused one of our proposals (no longer leader, busy): sync again later. */
static void sync_refused(void *arg)
{
    struct controller *c = arg;
    c->config_sync_term = 0;
}

/* Leader housekeeping: the configuration's partitions and settings, the log clock. */
void controller_applied(struct controller *c, const struct node_applied *a)
{
    struct node *n = c->n;
    (void)a;
    if (n->role != RAFT_LEADER || n->stopping)
        return;
    /* Only once this term's no-op is applied: then the state machine is current. */
    if (n->applied < n->leader_noop_index)
        return;
    uint64_t now_wall = wall_ms();
    if (c->config_sync_term != n->term) {
        c->config_sync_term = n->term;
        uint8_t *data = NULL;
        size_t len = 0;
        char err[256];
        if (fsm_partitions_differ(n->fsm, c->conf.parts, c->conf.n)) {
            if (fsm_encode_set_partitions(c->conf.parts, c->conf.n, now_wall, &data, &len, err,
                                          sizeof(err)) == FSM_OK) {
                log_event(LOG_INFO, "raftd", "proposing the configuration's partitions", NULL);
                node_api_propose_internal(c->api, data, len, sync_refused, c);
            } else {
                log_event(LOG_ERROR, "raftd", "configuration partitions refused", "err=%s",
                          log_q(err));
            }
        }
        if (fsm_settings_differ(n->fsm, &c->conf.settings) &&
            fsm_encode_set_settings(&c->conf.settings, now_wall, &data, &len) == FSM_OK) {
            log_event(LOG_INFO, "raftd", "proposing the configuration's settings", NULL);
            node_api_propose_internal(c->api, data, len, sync_refused, c);
        }
        c->last_fsm_tick_ms = node_now_ms();
    }
    if (node_now_ms() - c->last_fsm_tick_ms >= FSM_TICK_MS) {
        uint8_t *data = NULL;
        size_t len = 0;
        c->last_fsm_tick_ms = node_now_ms();
        if (fsm_encode_tick(now_wall, &data, &len) == FSM_OK)
            node_api_propose_internal(c->api, data, len, sync_refused, c);
    }
}

/* ---- life ------------------------------------------------------------------------------ */

struct controller *controller_new(struct node *n, struct node_api *api, const struct cfg *cfg)
{
    struct controller *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->n = n;
    c->api = api;
    c->cfg = cfg;
    c->ev_boot = evtimer_new(n->base, on_boot_timer, c);
    if (c->ev_boot == NULL || controller_fsm_conf(cfg, &c->conf) != 0) {
        controller_free(c);
        return NULL;
    }
    return c;
}

void controller_free(struct controller *c)
{
    if (c == NULL)
        return;
    if (c->ev_boot)
        event_free(c->ev_boot);
    controller_fsm_conf_free(&c->conf);
    free(c);
}
