/*
 * node_metrics.c - the worker's metrics listener (port 6822, loopback by default):
 * Prometheus text on /metrics, and /healthz and /readyz for a check from the host itself.
 *
 * The page is rendered on request from counters the modules keep anyway; nothing here
 * runs on the hot path. The probes that decide restarts and traffic are the health
 * responder's on port 6823; these two are a local convenience and answer from the
 * worker's own view (which is why they say nothing about stalls: a stalled worker does
 * not answer at all).
 */
#include "node_metrics.h"

#include "buf.h"
#include "names.h"
#include "util.h"

#include <string.h>

/* The two comment lines that open every metric family of the Prometheus text format. */
static void family(struct buf *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(struct buf *b, const char *name, const char *help, double v)
{
    family(b, name, "gauge", help);
    buf_printf(b, "%s %.17g\n", name, v);
}

static void counter(struct buf *b, const char *name, const char *help, double v)
{
    family(b, name, "counter", help);
    buf_printf(b, "%s %.17g\n", name, v);
}

/* A counter family with one series per Raft message type, labelled with the type's name. */
static void counter_by_msg_type(struct buf *b, const char *name, const char *help,
                                const uint64_t by_type[RAFT_MSG_TYPE_MAX + 1])
{
    family(b, name, "counter", help);
    for (int t = 1; t <= RAFT_MSG_TYPE_MAX; t++)
        buf_printf(b, "%s{type=\"%s\"} %llu\n", name, raft_msg_type_name(t),
                   (unsigned long long)by_type[t]);
}

/* Accounting: the replicated outbox, and this replica's exporter and sacct answers. */
static void render_acct(const struct node_metrics *m, struct buf *b)
{
    struct fsm_acct_stats fs;
    fsm_acct_get_stats(m->node->fsm, &fs);
    struct acct_stats as;
    acct_get_stats(m->acct, &as);
    uint64_t now = wall_ms();
    gauge(b, "spur_acct_enabled", "1 when job events are recorded (the replicated setting).",
          fs.enabled ? 1.0 : 0.0);
    gauge(b, "spur_acct_outbox_records", "Accounting records in the outbox, not yet exported.",
          (double)fs.records);
    gauge(b, "spur_acct_outbox_bytes", "Packed size of the outbox's records.", (double)fs.bytes);
    gauge(b, "spur_acct_outbox_oldest_age_seconds",
          "Age of the oldest outbox record by the log clock (0: empty).",
          fs.oldest_ms && now > fs.oldest_ms ? (double)(now - fs.oldest_ms) / 1000.0 : 0.0);
    gauge(b, "spur_acct_exported_seq", "The database's high-water mark as the exporter saw it.",
          (double)as.exported_seq);
    counter(b, "spur_acct_exported_records_total", "Outbox records this replica exported.",
            (double)as.exported_records);
    counter(b, "spur_acct_export_batches_total", "Export transactions committed.",
            (double)as.batches);
    family(b, "spur_acct_export_errors_total", "counter",
           "Export failures by kind (each drops the connection and backs off).");
    for (int e = 0; e < ACCT_NERR; e++)
        buf_printf(b, "spur_acct_export_errors_total{reason=\"%s\"} %llu\n",
                   acct_err_name((enum acct_err)e), (unsigned long long)as.errors[e]);
    gauge(b, "spur_acct_last_export_timestamp_seconds",
          "Wall clock of the last export commit (0: never).", (double)as.last_export_ms / 1000.0);
    gauge(b, "spur_acct_database_up",
          "1 when the exporter is connected and the schema checked.", as.database_up ? 1.0 : 0.0);
    counter(b, "spur_acct_queries_total", "sacct queries answered by this replica as leader.",
            (double)as.queries);
    counter(b, "spur_acct_query_errors_total",
            "sacct queries answered from the state because the database failed.",
            (double)as.query_errors);
}

static void render(const struct node_metrics *m, struct buf *b)
{
    const struct node *n = m->node;
    struct node_api_stats qs;
    node_api_get_stats(m->reqs, &qs);
    struct raft_status rs;
    memset(&rs, 0, sizeof(rs));
    if (n->raft)
        raft_get_status(n->raft, &rs);

    gauge(b, "spur_raft_node_id", "This replica's Raft node id.", n->id);
    gauge(b, "spur_raft_term", "Current Raft term.", (double)rs.term);
    family(b, "spur_raft_role", "gauge", "Raft role of this replica (1 for the current one).");
    for (int r = RAFT_FOLLOWER; r <= RAFT_LEARNER; r++) /* the core's order */
        buf_printf(b, "spur_raft_role{role=\"%s\"} %d\n",
                   names_role(node_status_role((uint8_t)r)), n->raft && rs.role == r ? 1 : 0);
    gauge(b, "spur_raft_leader_id", "Node id of the known leader; 0 when none.",
          (double)rs.leader);
    gauge(b, "spur_raft_commit_index", "Highest log index known committed.", (double)rs.commit);
    gauge(b, "spur_raft_applied_index", "Highest log index applied to the state machine.",
          (double)n->applied);
    gauge(b, "spur_raft_last_index", "Last index in the log.", (double)rs.last_index);
    gauge(b, "spur_raft_log_entries", "Entries held in the log after the snapshot.",
          rs.last_index >= rs.first_index && n->raft
              ? (double)(rs.last_index - rs.first_index + 1)
              : 0.0);
    gauge(b, "spur_raft_snapshot_index", "Index of the newest snapshot.",
          (double)rs.snapshot_index);
    gauge(b, "spur_raft_snapshot_age_seconds",
          "Seconds since this replica last saved a snapshot (0: none yet).",
          n->last_snapshot_ms ? (double)(node_now_ms() - n->last_snapshot_ms) / 1000.0 : 0.0);
    counter(b, "spur_raft_elections_total", "Elections this replica started as a candidate.",
            (double)n->elections_started);
    counter(b, "spur_raft_leader_changes_total", "Changes of the leader seen by this replica.",
            (double)n->leader_changes);
    counter(b, "spur_raft_invalid_messages_total", "Malformed messages refused by the core.",
            (double)rs.counters.invalid_msgs);
    counter(b, "spur_raft_stale_messages_total", "Messages of an older term or another node.",
            (double)rs.counters.stale_msgs);
    gauge(b, "spur_raft_caught_up",
          "1 when this replica has applied up to a read index of its current leader (ready).",
          node_is_caught_up(n) ? 1.0 : 0.0);
    gauge(b, "spur_raft_uncommitted_bytes",
          "Leader: bytes proposed in its term and not committed (raft.max_uncommitted_bytes).",
          (double)rs.uncommitted_bytes);
    counter(b, "spur_raft_proposals_refused_total",
            "Proposals refused as busy (uncommitted bytes at the cap, or a transfer running).",
            (double)rs.counters.dropped_proposals);
    counter(b, "spur_raft_lost_log_total",
            "Terms in which the leader held acknowledgements of entries this replica had lost.",
            (double)rs.counters.lost_acked);

    struct storage_metrics sm;
    storage_metrics_get(n->st, &sm);
    counter(b, "spur_raft_log_bytes_written_total", "Bytes written to the log segments.",
            (double)sm.bytes_written);
    counter(b, "spur_raft_log_entries_written_total", "Entries written to the log segments.",
            (double)sm.entries_written);
    gauge(b, "spur_raft_log_segments", "Log segment files on disk.", (double)sm.segments);
    counter(b, "spur_storage_group_commits_total", "Group commits by the log writer.",
            (double)sm.group_commits);
    family(b, "spur_storage_fsync_seconds", "histogram", "Latency of fsync/fdatasync calls.");
    uint64_t cum = 0;
    for (int i = 0; i < STORAGE_FSYNC_BUCKETS - 1; i++) {
        cum += sm.fsync_bucket[i];
        buf_printf(b, "spur_storage_fsync_seconds_bucket{le=\"%.6g\"} %llu\n",
                   (double)storage_fsync_bucket_ns[i] / 1e9, (unsigned long long)cum);
    }
    cum += sm.fsync_bucket[STORAGE_FSYNC_BUCKETS - 1];
    buf_printf(b, "spur_storage_fsync_seconds_bucket{le=\"+Inf\"} %llu\n",
               (unsigned long long)cum);
    buf_printf(b, "spur_storage_fsync_seconds_sum %.9f\nspur_storage_fsync_seconds_count %llu\n",
               (double)sm.fsync_sum_ns / 1e9, (unsigned long long)sm.fsync_count);

    struct transport_stats ts;
    transport_get_stats(n->tr, &ts);
    counter_by_msg_type(b, "spur_raft_messages_sent_total", "Raft messages sent, by type.",
                        ts.sent_by_type);
    counter_by_msg_type(b, "spur_raft_messages_received_total",
                        "Raft messages received, by type.", ts.received_by_type);
    counter(b, "spur_raft_messages_dropped_total",
            "Raft messages dropped (peer unknown, down or backed up).", (double)ts.dropped);
    counter(b, "spur_raft_peer_refused_total",
            "Peer handshakes refused (other cluster, version or id).", (double)ts.refused);
    counter(b, "spur_peer_auth_refused_total",
            "Peer connections closed for the cluster key: no common key, a failed proof, or "
            "a frame whose MAC or sequence number did not verify.",
            (double)ts.auth_refused);
    counter(b, "spur_raft_bad_frames_total", "Undecodable or oversized peer frames.",
            (double)ts.bad_frames);
    family(b, "spur_raft_peer_connected", "gauge",
           "1 when a handshaken connection to the peer is up.");
    const struct raft_config *c = n->raft ? raft_get_config(n->raft) : NULL;
    for (uint32_t i = 0; c && i < c->n; i++)
        if (c->members[i].id != n->id)
            buf_printf(b, "spur_raft_peer_connected{peer=\"%u\"} %d\n", c->members[i].id,
                       transport_peer_connected(n->tr, c->members[i].id) ? 1 : 0);

    struct api_stats as;
    api_get_stats(m->api, &as);
    counter(b, "spur_api_requests_total", "Client API requests received.",
            (double)as.requests);
    counter(b, "spur_api_refused_total", "Requests of another cluster or protocol version.",
            (double)as.refused);
    counter(b, "spur_api_bad_frames_total", "Undecodable or oversized client frames.",
            (double)as.bad_frames);
    gauge(b, "spur_api_connections", "Open client connections.", (double)as.connections);
    family(b, "spur_api_auth_total", "counter",
           "Client API connections authenticated, by method (member: the cluster key).");
    for (int i = 0; i < AUTH_NMETHODS; i++)
        buf_printf(b, "spur_api_auth_total{method=\"%s\"} %llu\n", auth_method_name(i),
                   (unsigned long long)as.auth_ok[i]);
    family(b, "spur_api_auth_failures_total", "counter",
           "Credentials and cluster members refused on the client API, by reason.");
    for (int i = 0; i < AUTH_NFAILS; i++)
        buf_printf(b, "spur_api_auth_failures_total{reason=\"%s\"} %llu\n", auth_fail_name(i),
                   (unsigned long long)as.auth_failures[i]);
    counter(b, "spur_api_forwarded_total", "Writes forwarded to the leader.",
            (double)qs.forwarded);
    counter(b, "spur_api_proposals_total", "Client writes proposed by this replica as leader.",
            (double)qs.proposals);
    counter(b, "spur_api_reads_total", "Reads served (linearizable and local).",
            (double)qs.reads_served);
    counter(b, "spur_api_stale_reads_total", "Local (possibly stale) reads served.",
            (double)qs.stale_reads);
    gauge(b, "spur_api_waiting", "Requests waiting for a commit or a read index.",
          (double)node_api_waiting(m->reqs));

    struct fsm_stats fs;
    fsm_stats(n->fsm, &fs);
    family(b, "spur_jobs", "gauge", "Jobs held in the replicated state, by state.");
    for (int i = 1; i < FSM_JOB_NSTATES; i++)
        buf_printf(b, "spur_jobs{state=\"%s\"} %llu\n", names_job_state_label(i),
                   (unsigned long long)fs.jobs_by_state[i]);
    family(b, "spur_nodes", "gauge", "Nodes in the replicated state, by state.");
    for (int i = 1; i < FSM_NODE_NSTATES; i++)
        buf_printf(b, "spur_nodes{state=\"%s\"} %llu\n", names_node_state_long(i),
                   (unsigned long long)fs.nodes_by_state[i]);
    gauge(b, "spur_sessions", "Client sessions kept for exactly-once writes.",
          (double)fs.sessions);
    counter(b, "spur_fsm_bad_entries_total", "Log entries the state machine could not decode.",
            (double)fs.bad_entries);

    struct jobctl_stats js;
    jobctl_get_stats(m->jobs, &js);
    gauge(b, "spur_leader_in_office",
          "1 while this replica leads and runs the job duties (launch, reconcile, schedule).",
          js.in_office ? 1.0 : 0.0);
    gauge(b, "spur_agents_known", "Nodes whose agents the leader dials.",
          (double)js.agents_known);
    gauge(b, "spur_agents_connected", "Agent connections up.", (double)js.agents_connected);
    counter(b, "spur_job_launches_total", "Launch requests sent to agents.",
            (double)js.launches);
    counter(b, "spur_job_launch_failures_total", "Launches an agent refused (JobLaunchFailed).",
            (double)js.launch_failures);
    counter(b, "spur_job_starts_folded_total",
            "Confirmed launches whose report came within the start hold: no JobsStarted entry.",
            (double)js.starts_folded);
    counter(b, "spur_job_reports_total", "Completion reports received from agents.",
            (double)js.reports);
    counter(b, "spur_jobs_lost_total",
            "Jobs an agent no longer knew (proposed ended as lost, NODE_FAIL).",
            (double)js.lost);
    counter(b, "spur_jobs_orphans_terminated_total",
            "Jobs an agent ran that the state did not place there, terminated.",
            (double)js.terminated);
    counter(b, "spur_nodes_not_responding_total", "Nodes proposed DOWN for not responding.",
            (double)js.not_responding);
    counter(b, "spur_scheduler_passes_total", "Scheduler passes run by this leader.",
            (double)js.sched_passes);
    counter(b, "spur_scheduler_allocations_total", "Jobs placed by the scheduler passes.",
            (double)js.sched_allocations);
    gauge(b, "spur_scheduler_last_pass_seconds", "Duration of the last scheduler pass.",
          (double)js.sched_last_us / 1e6);
    gauge(b, "spur_scheduler_pending_allocations",
          "JobsAllocated entries proposed and not applied yet (0 or 1).",
          (double)js.pending_allocations);
    gauge(b, "spur_jobs_tracked", "Placed job attempts the leader follows.",
          (double)js.tracked_jobs);
    if (m->acct)
        render_acct(m, b);
}

void node_metrics_handler(void *arg, const char *path, struct httpd_reply *reply)
{
    const struct node_metrics *m = arg;
    const struct node *n = m->node;
    if (strcmp(path, "/metrics") == 0) {
        reply->content_type = "text/plain; version=0.0.4; charset=utf-8";
        render(m, &reply->body);
    } else if (strcmp(path, "/healthz") == 0 || strcmp(path, "/livez") == 0) {
        buf_puts(&reply->body, "ok\n");
    } else if (strcmp(path, "/readyz") == 0) {
        /* the same decision as the status frames: a leader it has caught up with */
        const char *word = n->stopping ? "stopping"
                           : n->raft == NULL ? "starting"
                           : !node_is_caught_up(n) ? "noleader"
                                                   : "ok";
        reply->code = strcmp(word, "ok") == 0 ? 200 : 503;
        buf_printf(&reply->body, "%s\n", word);
    } else {
        reply->code = 404;
        buf_puts(&reply->body, "not found\n");
    }
}
