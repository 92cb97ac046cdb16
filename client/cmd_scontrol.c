/*
 * cmd_scontrol.c - scontrol: cluster administration.
 *
 *   scontrol ping                          ask every controller address whether it is up
 *   scontrol raft status                   this replica's Raft view and the members
 *   scontrol raft transfer [ID]            hand leadership to ID (0/none: most up to date)
 *   scontrol raft add-learner ID ADDRESS   add a non-voting member
 *   scontrol raft promote ID               make a learner a voter
 *   scontrol raft remove ID                remove a member
 *   scontrol show job|node|partition [X]   (jobs, nodes and partitions: scontrol.c)
 *   scontrol hold|release JOBID...         (scontrol.c)
 *   scontrol update NodeName=N State=S [Reason=R]       (scontrol.c)
 *   scontrol create node NodeName=N CPUs=C RealMemory=M [Features=a,b] [NodeAddr=H]
 *   scontrol token [lifespan=SECONDS] [username=NAME]   (scontrol.c)
 * Every form takes --json for machine-readable output.
 */
#include "cli.h"
#include "scontrol.h"
#include "units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fputs("Usage: scontrol [--json] COMMAND\n"
          "  ping                          is each controller address up?\n"
          "  raft status                   Raft role, term, leader, indexes and members\n"
          "  raft transfer [ID]            move leadership (default: most up-to-date voter)\n"
          "  raft add-learner ID ADDRESS   add a non-voting member (ADDRESS is host:port)\n"
          "  raft promote ID               make a learner a voter\n"
          "  raft remove ID                remove a member\n"
          "  show job [ID] | node [NAME] | partition [NAME]\n"
          "  hold JOBID...  release JOBID...\n"
          "  update NodeName=NAMES State=DRAIN|RESUME|DOWN|IDLE [Reason=TEXT]\n"
          "  create node NodeName=NAME CPUs=N RealMemory=MB [Features=A,B] [NodeAddr=HOST]\n"
          "  token [lifespan=SECONDS] [username=NAME]\n"
          "                                print SPUR_JWT=TOKEN (export $(scontrol token))\n"
          "  version\n"
          "Environment: SPUR_CONTROLLER=host:port|unix:/path[,...], SPUR_CLUSTER, "
          "SPUR_CONFIG,\n"
          "  SPUR_TIMEOUT_MS, SPUR_JWT, SPUR_MUNGE_SOCKET.\n",
          out);
}

static int parse_id(struct cli *c, const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || end == s || v > 0xffffffffUL) {
        cli_error(c, "\"%s\" is not a node id", s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* Ping one address with a client of its own (short time-out). Returns the answer or NULL. */
static spurclient_response *ping_one(struct cli *c, const char *host, char *err, size_t errlen)
{
    const char *one[] = {host};
    struct spurclient_options o = {
        .hosts = one, .nhosts = 1, .cluster_name = c->cluster_name, .timeout_ms = 2000};
    struct spurclient *pc = spurclient_new(&o);
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__Ping ping = SPUR__API__PING__INIT;
    req.op_case = SPUR__API__REQUEST__OP_PING;
    req.ping = &ping;
    spurclient_response *r = NULL;
    if (pc == NULL) {
        snprintf(err, errlen, "out of memory");
    } else if (spurclient_call(pc, &req, false, &r, err, errlen) != 0) {
        r = NULL;
    } else if (r->code != SPUR__API__CODE__CODE_OK || r->ping == NULL) {
        snprintf(err, errlen, "%s", r->error && r->error[0] ? r->error : "no ping answer");
        spurclient_response_free(r);
        r = NULL;
    }
    spurclient_free(pc);
    return r;
}

static int cmd_ping(struct cli *c)
{
    int down = 0;
    struct json j;
    if (c->json) {
        json_init(&j, stdout);
        json_arr_begin(&j);
    }
    for (size_t i = 0; i < c->nhosts; i++) {
        char err[300] = "";
        spurclient_response *r = ping_one(c, c->hosts[i], err, sizeof(err));
        if (r == NULL)
            down++;
        if (c->json) {
            json_obj_begin(&j);
            json_kstr(&j, "host", c->hosts[i]);
            json_kbool(&j, "up", r != NULL);
            if (r != NULL) {
                json_ku64(&j, "node_id", r->ping->node_id);
                json_kstr(&j, "role", r->ping->role);
                json_ku64(&j, "term", r->ping->term);
                json_ku64(&j, "leader_id", r->leader_id);
            } else {
                json_kstr(&j, "error", err);
            }
            json_obj_end(&j);
        } else if (r != NULL) {
            printf("spurctld at %s is UP: node %u, %s, term %llu, leader %u\n", c->hosts[i],
                   r->ping->node_id, r->ping->role, (unsigned long long)r->ping->term,
                   r->leader_id);
        } else {
            printf("spurctld at %s is DOWN: %s\n", c->hosts[i], err);
        }
        spurclient_response_free(r);
    }
    if (c->json) {
        json_arr_end(&j);
        json_end(&j);
    }
    return down ? 1 : 0;
}

static int raft_status(struct cli *c)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__RaftStatusRequest rs = SPUR__API__RAFT_STATUS_REQUEST__INIT;
    req.op_case = SPUR__API__REQUEST__OP_RAFT_STATUS;
    req.raft_status = &rs;
    spurclient_response *r = cli_call(c, &req, false);
    if (r == NULL)
        return 1;
    Spur__Api__RaftStatusResponse *s = r->raft_status;
    if (s == NULL) {
        cli_error(c, "the answer carries no status");
        spurclient_response_free(r);
        return 1;
    }
    if (c->json) {
        struct json j;
        json_init(&j, stdout);
        json_obj_begin(&j);
        json_kstr(&j, "cluster_name", s->cluster_name);
        json_ku64(&j, "node_id", s->node_id);
        json_kstr(&j, "role", s->role);
        json_ku64(&j, "term", s->term);
        json_ku64(&j, "leader_id", s->leader_id);
        json_ku64(&j, "commit_index", s->commit_index);
        json_ku64(&j, "applied_index", s->applied_index);
        json_ku64(&j, "last_index", s->last_index);
        json_ku64(&j, "snapshot_index", s->snapshot_index);
        json_kbool(&j, "acct_enabled", s->acct_enabled);
        json_ku64(&j, "acct_outbox_records", s->acct_outbox_records);
        json_ku64(&j, "acct_outbox_oldest_ms", s->acct_outbox_oldest_ms);
        json_kstr(&j, "acct_exporter", s->acct_exporter ? s->acct_exporter : "");
        json_ku64(&j, "acct_exported_seq", s->acct_exported_seq);
        json_key(&j, "members");
        json_arr_begin(&j);
        for (size_t i = 0; i < s->n_members; i++) {
            Spur__Api__RaftMember *m = s->members[i];
            json_obj_begin(&j);
            json_ku64(&j, "id", m->id);
            json_kstr(&j, "address", m->address);
            json_kstr(&j, "api_address", m->api_address);
            json_kbool(&j, "voter", m->voter);
            json_ku64(&j, "match_index", m->match_index);
            json_kbool(&j, "connected", m->connected);
            json_obj_end(&j);
        }
        json_arr_end(&j);
        json_obj_end(&j);
        json_end(&j);
    } else {
        printf("Cluster %s, node %u: %s, term %llu, leader %s%u\n", s->cluster_name, s->node_id,
               s->role, (unsigned long long)s->term, s->leader_id ? "" : "none ", s->leader_id);
        printf("Indexes: commit %llu, applied %llu, last %llu, snapshot %llu\n",
               (unsigned long long)s->commit_index, (unsigned long long)s->applied_index,
               (unsigned long long)s->last_index, (unsigned long long)s->snapshot_index);
        /* Accounting (docs/accounting.md): the replicated outbox and this replica's exporter. */
        char oldest[32] = "None";
        if (s->acct_outbox_oldest_ms != 0)
            units_timestamp(oldest, sizeof(oldest), s->acct_outbox_oldest_ms, "None");
        /* AcctExporter last: its text ("retrying in N ms: why") may hold spaces. */
        printf("Accounting: AcctEnabled=%s AcctOutbox=%llu AcctOldest=%s AcctExportedSeq=%llu "
               "AcctExporter=%s\n",
               s->acct_enabled ? "yes" : "no", (unsigned long long)s->acct_outbox_records, oldest,
               (unsigned long long)s->acct_exported_seq,
               s->acct_exporter && s->acct_exporter[0] ? s->acct_exporter : "off");
        printf("%-4s %-8s %-28s %-24s %10s %s\n", "ID", "ROLE", "ADDRESS", "API", "MATCH", "LINK");
        for (size_t i = 0; i < s->n_members; i++) {
            Spur__Api__RaftMember *m = s->members[i];
            const char *role = m->voter ? "voter" : "learner";
            char match[24] = "-";
            if (s->leader_id == s->node_id)
                snprintf(match, sizeof(match), "%llu", (unsigned long long)m->match_index);
            const char *link = m->id == s->node_id ? "self" : m->connected ? "up" : "down";
            printf("%-4u %-8s %-28s %-24s %10s %s%s\n", m->id, role, m->address,
                   m->api_address && m->api_address[0] ? m->api_address : "-", match, link,
                   m->id == s->leader_id ? " (leader)" : "");
        }
    }
    spurclient_response_free(r);
    return 0;
}

static int raft_change(struct cli *c, int argc, char **argv)
{
    const char *what = argv[0];
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__TransferLeaderRequest tl = SPUR__API__TRANSFER_LEADER_REQUEST__INIT;
    Spur__Api__AddLearnerRequest al = SPUR__API__ADD_LEARNER_REQUEST__INIT;
    Spur__Api__PromoteRequest pr = SPUR__API__PROMOTE_REQUEST__INIT;
    Spur__Api__RemoveRequest rm = SPUR__API__REMOVE_REQUEST__INIT;
    uint32_t id = 0;

    if (strcmp(what, "transfer") == 0) {
        if (argc > 2 || (argc == 2 && parse_id(c, argv[1], &id) != 0))
            return 1;
        tl.target_id = id;
        req.op_case = SPUR__API__REQUEST__OP_TRANSFER_LEADER;
        req.transfer_leader = &tl;
    } else if (strcmp(what, "add-learner") == 0) {
        if (argc != 3) {
            cli_error(c, "usage: scontrol raft add-learner ID HOST:PORT");
            return 1;
        }
        if (parse_id(c, argv[1], &id) != 0)
            return 1;
        al.id = id;
        al.address = argv[2];
        req.op_case = SPUR__API__REQUEST__OP_ADD_LEARNER;
        req.add_learner = &al;
    } else if (strcmp(what, "promote") == 0 || strcmp(what, "remove") == 0) {
        if (argc != 2) {
            cli_error(c, "usage: scontrol raft %s ID", what);
            return 1;
        }
        if (parse_id(c, argv[1], &id) != 0)
            return 1;
        if (what[0] == 'p') {
            pr.id = id;
            req.op_case = SPUR__API__REQUEST__OP_PROMOTE;
            req.promote = &pr;
        } else {
            rm.id = id;
            req.op_case = SPUR__API__REQUEST__OP_REMOVE;
            req.remove = &rm;
        }
    } else {
        cli_error(c,
                  "unknown raft command \"%s\" (status, transfer, add-learner, promote, "
                  "remove)",
                  what);
        return 1;
    }
    spurclient_response *r = cli_call(c, &req, true);
    if (r == NULL)
        return 1;
    if (c->json) {
        struct json j;
        json_init(&j, stdout);
        json_obj_begin(&j);
        json_kstr(&j, "result", "ok");
        json_kstr(&j, "operation", what);
        json_ku64(&j, "leader_id", r->leader_id);
        json_obj_end(&j);
        json_end(&j);
    } else if (!c->quiet) {
        printf("raft %s: done (leader now %u)\n", what, r->leader_id);
    }
    spurclient_response_free(r);
    return 0;
}

int cmd_scontrol(struct cli *c, int argc, char **argv)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            c->json = true;
        } else if (strcmp(argv[i], "-Q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            c->quiet = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "-V") == 0 || strcmp(argv[i], "--version") == 0) {
            cli_print_version();
            return 0;
        } else {
            /* getopt's words and Slurm's "Try" line, as scontrol(1) of Slurm prints them */
            char msg[300];
            if (argv[i][1] == '-' || argv[i][1] == '\0')
                snprintf(msg, sizeof(msg), "unrecognized option '%s'", argv[i]);
            else
                snprintf(msg, sizeof(msg), "invalid option -- '%c'", argv[i][1]);
            cli_usage_error(c, msg);
            return 1;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 1;
    }
    const char *cmd = argv[i];
    int rest = argc - i;
    char **rv = argv + i;
    /* A trailing --json is accepted too, as Slurm accepts options anywhere. */
    for (int k = 1; k < rest; k++) {
        if (strcmp(rv[k], "--json") == 0) {
            c->json = true;
            for (int m = k; m + 1 < rest; m++)
                rv[m] = rv[m + 1];
            rest--;
            k--;
        }
    }
    if (strcmp(cmd, "ping") == 0)
        return cmd_ping(c);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "-V") == 0) {
        cli_print_version();
        return 0;
    }
    if (strcmp(cmd, "raft") == 0) {
        if (rest < 2 || strcmp(rv[1], "status") == 0)
            return raft_status(c);
        return raft_change(c, rest - 1, rv + 1);
    }
    if (strcmp(cmd, "show") == 0)
        return scontrol_show(c, rest - 1, rv + 1);
    if (strcmp(cmd, "hold") == 0 || strcmp(cmd, "release") == 0)
        return scontrol_job_action(c, cmd, rest - 1, rv + 1);
    if (strcmp(cmd, "update") == 0)
        return scontrol_update(c, rest - 1, rv + 1);
    if (strcmp(cmd, "create") == 0)
        return scontrol_create(c, rest - 1, rv + 1);
    if (strcmp(cmd, "token") == 0)
        return scontrol_token(c, rest - 1, rv + 1);
    cli_error(c, "unknown command \"%s\"", cmd);
    usage(stderr);
    return 1;
}
