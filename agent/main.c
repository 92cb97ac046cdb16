/*
 * main.c - spurd, the node agent: command line, configuration, start-up order, and the
 * loop that reaps job monitors and pushes their reports.
 *
 * Invariants:
 *   - spurd never takes its jobs down with it: each job runs under a monitor in its own
 *     session (monitor.c), so SIGTERM, SIGINT, a crash or kill -9 of spurd leave every job
 *     running; a restarted spurd finds them again in the spool.
 *   - Every report reaches the spool before the leader hears of it, and stays there until
 *     an EndedAck (server.c); a monitor that died without writing one gets one written by
 *     monitor_abandoned(), so no attempt found in the spool is ever left without a report.
 *   - Every exit explains itself in one log line: 0 after SIGTERM/SIGINT, 78 a bad
 *     configuration (or command line, or an unusable cluster key file), 71 an OS failure
 *     at start (spool, cgroups, listen).
 *   - spurd never makes a cluster key: the key (auth.key_file, and auth.next_key_file
 *     during a rotation) is the controller's, copied to this host; a missing file is exit
 *     78 with a line saying how to make and copy one.
 *
 * Start-up order: configuration and overrides; the cluster key(s); what the node is (detect.c; the
 * cgroup limits are read before cgroup_init() may move spurd into a leaf cgroup); cgroups; the
 * spool (which lists the attempts a previous spurd left); the listener (bound now so a
 * bad address fails at once, served only after registration); registration, retried
 * until it succeeds or SIGTERM; then the loop.
 *
 * The loop: SIGCHLD reaps the monitors spurd forked and reads their reports; a 500 ms
 * timer looks after the attempts whose monitors are not spurd's children (found at
 * start): a report that appeared is pushed, a dead monitor without one is abandoned.
 * The same timer registers again when no leader has pinged for 3 x agent.heartbeat_s
 * (one call of at most 2 s: the loop waits for it, which costs nothing while no leader
 * talks to this agent).
 */
#include "cfg.h"
#include "cgroup.h"
#include "clusterkey.h"
#include "detect.h"
#include "log.h"
#include "monitor.h"
#include "netaddr.h"
#include "register.h"
#include "server.h"
#include "spool.h"
#include "util.h"
#include "wire.h"

#include "spur_build.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TICK_MS               500
#define REREGISTER_TIMEOUT_MS 2000

/* Ownership: everything here; freed at the end of main(). */
struct agent {
    struct cfg cfg;
    struct keyring kr; /* the cluster key(s) leaders prove; wiped by agent_free() */
    struct detect_result node;
    struct cgroup_ctx *cg;
    struct monitor_conf mon;
    struct spool spool;
    struct server *srv;
    struct registrar *reg;
    struct register_node rn;
    struct event_base *base;
    struct event *ev_term, *ev_int, *ev_chld, *ev_tick;
    uint64_t last_contact_ms; /* registered, or pinged, or tried to register */
};

static volatile sig_atomic_t stop_requested;

static void on_stop_flag(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* A report found for j: take it from the spool and push it. */
static void report_found(struct agent *a, struct spool_job *j)
{
    if (j->ended == NULL)
        return;
    log_event(LOG_INFO, "agent", "job ended", "job_id=%" PRIu64 " attempt=%u", j->job_id,
              j->attempt);
    server_push_ended(a->srv, j);
}

/*
 * The monitor of j is not (or no longer) spurd's running child: push its report when it
 * wrote one, abandon it when it died without.
 */
static void check_job(struct agent *a, struct spool_job *j)
{
    char err[512];
    if (j->ended != NULL || j->pid != 0 || j->abandon_failed)
        return;
    int rc = spool_read_ended(&a->spool, j, err, sizeof(err));
    if (rc < 0 || j->ended != NULL) {
        if (j->ended)
            report_found(a, j);
        return;
    }
    if (monitor_alive(j->dirfd))
        return;
    /* Dead: it may have renamed its report in just before it exited. */
    j->ended_bad = false;
    if (spool_read_ended(&a->spool, j, err, sizeof(err)) == 1 && j->ended != NULL) {
        report_found(a, j);
        return;
    }
    if (j->launch == NULL) {
        j->abandon_failed = true; /* the spool reported the record; nothing to run it by */
        return;
    }
    log_event(LOG_WARN, "agent", "job monitor died without a report; ending the job",
              "job_id=%" PRIu64 " attempt=%u", j->job_id, j->attempt);
    j->ended_bad = false;
    if (monitor_abandoned(&a->mon, j->dirfd, j->launch, err, sizeof(err)) != 0 ||
        spool_read_ended(&a->spool, j, err, sizeof(err)) != 1 || j->ended == NULL) {
        j->abandon_failed = true;
        log_event(LOG_ERROR, "agent", "cannot end an abandoned job",
                  "job_id=%" PRIu64 " attempt=%u error=%s", j->job_id, j->attempt, log_q(err));
        return;
    }
    report_found(a, j);
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
    struct agent *a = arg;
    (void)sig;
    (void)what;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            break;
        for (struct spool_job *j = a->spool.jobs; j; j = j->next) {
            if (j->pid != pid)
                continue;
            j->pid = 0;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                char how[96];
                describe_wait_status(status, how, sizeof(how));
                log_event(LOG_WARN, "agent", "job monitor failed",
                          "job_id=%" PRIu64 " attempt=%u pid=%ld status=%s", j->job_id, j->attempt,
                          (long)pid, log_q(how));
            }
            check_job(a, j);
            break;
        }
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct agent *a = arg;
    (void)fd;
    (void)what;
    for (struct spool_job *j = a->spool.jobs; j; j = j->next)
        check_job(a, j);

    uint64_t now = mono_ms();
    uint64_t last = server_last_ping_ms(a->srv);
    if (last < a->last_contact_ms)
        last = a->last_contact_ms;
    if (now - last < 3000ull * a->cfg.agent.heartbeat_s)
        return;
    a->last_contact_ms = now;
    char err[512];
    if (register_once(a->reg, &a->rn, REREGISTER_TIMEOUT_MS, err, sizeof(err)) == 0)
        log_event(LOG_INFO, "agent", "no leader pinged; registered again", "silent_s=%u",
                  3 * a->cfg.agent.heartbeat_s);
    else
        log_event(LOG_WARN, "agent", "no leader pinged; registering again failed", "error=%s",
                  log_q(err));
}

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
    struct agent *a = arg;
    (void)what;
    log_event(LOG_INFO, "agent", "stopping; jobs keep running", "signal=%s", signal_name((int)sig));
    event_base_loopbreak(a->base);
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: spurd [OPTIONS]\n"
            "The spur node agent: registers this node, runs its batch jobs, reports them.\n"
            "\n"
            "  -f, --config FILE     configuration file (default %s)\n"
            "  -N, --node-name NAME  override agent.node_name (default the short hostname)\n"
            "      --listen HOST:PORT  override agent.listen\n"
            "      --address HOST:PORT override agent.address (what the leader dials)\n"
            "      --spool DIR       override agent.spool_dir\n"
            "      --cpus N          override agent.cpus (0: detect)\n"
            "      --mem-mb N        override agent.mem_mb (0: detect)\n"
            "      --check-config    validate, print the effective configuration, exit\n"
            "  -V, --version         print the version and exit\n"
            "  -h, --help            print this help and exit\n",
            SPUR_DEFAULT_CONFIG);
}

/* Replace *field with a copy of v. 0, or -1 (out of memory). */
static int set_str(char **field, const char *v)
{
    char *n = strdup(v);
    if (n == NULL)
        return -1;
    free(*field);
    *field = n;
    return 0;
}

static int parse_u32(const char *opt, const char *v, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || n > max) {
        fprintf(stderr, "spurd: %s: \"%s\" is not a number from 0 to %u\n", opt, v, max);
        return -1;
    }
    *out = (uint32_t)n;
    return 0;
}

/* The command line's overrides of the agent: keys; the strings point into argv. */
struct overrides {
    const char *node_name, *listen, *address, *spool;
    bool cpus_set, mem_set;
    uint32_t cpus, mem_mb;
};

/* Apply the options over the file's agent: keys. 0, or -1 with the message printed. */
static int apply_overrides(struct cfg *c, const struct overrides *o)
{
    char why[256];
    if (o->listen && netaddr_check_hostport(o->listen, why, sizeof(why)) != 0) {
        fprintf(stderr, "spurd: --listen: %s\n", why);
        return -1;
    }
    if (o->address && o->address[0] && netaddr_check_hostport(o->address, why, sizeof(why))) {
        fprintf(stderr, "spurd: --address: %s\n", why);
        return -1;
    }
    if (o->node_name && detect_check_node_name(o->node_name, why, sizeof(why)) != 0) {
        fprintf(stderr, "spurd: --node-name: \"%s\" %s\n", o->node_name, why);
        return -1;
    }
    if (o->spool && o->spool[0] != '/') {
        fprintf(stderr, "spurd: --spool: \"%s\" is not an absolute path\n", o->spool);
        return -1;
    }
    if ((o->listen && set_str(&c->agent.listen, o->listen)) ||
        (o->address && set_str(&c->agent.address, o->address)) ||
        (o->node_name && set_str(&c->agent.node_name, o->node_name)) ||
        (o->spool && set_str(&c->agent.spool_dir, o->spool))) {
        fprintf(stderr, "spurd: out of memory\n");
        return -1;
    }
    if (o->cpus_set)
        c->agent.cpus = o->cpus;
    if (o->mem_set)
        c->agent.mem_mb = o->mem_mb;
    return 0;
}

/*
 * The cluster key(s) of auth.key_file and auth.next_key_file into kr. Returns 0, or -1
 * with why: the file is missing (with how to make and copy one), or unusable.
 */
static int load_keys(const struct cfg *cfg, struct keyring *kr, char *why, size_t whylen)
{
    const char *path = cfg->auth.key_file;
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT) {
        snprintf(why, whylen,
                 "auth: cluster key file %s is missing; make one with \"spurctld keygen %s\" "
                 "and copy it (mode 0600) to every replica and agent host",
                 path, path);
        return -1;
    }
    if (keyring_load(kr, path, cfg->auth.next_key_file, why, whylen) != 0)
        return -1;
    char ids[2 * (2 * CLUSTERKEY_ID_LEN + 1) + 1];
    keyring_ids(kr, ids, sizeof(ids));
    log_event(LOG_INFO, "agent", "cluster key loaded", "file=%s key_ids=%s", log_q(path), ids);
    return 0;
}

static void agent_free(struct agent *a)
{
    server_free(a->srv);
    register_free(a->reg);
    if (a->spool.path != NULL) /* opened */
        spool_close(&a->spool);
    if (a->ev_term)
        event_free(a->ev_term);
    if (a->ev_int)
        event_free(a->ev_int);
    if (a->ev_chld)
        event_free(a->ev_chld);
    if (a->ev_tick)
        event_free(a->ev_tick);
    if (a->base)
        event_base_free(a->base);
    if (a->cg)
        cgroup_free(a->cg);
    keyring_wipe(&a->kr);
    cfg_free(&a->cfg);
}

/* Log why, free everything, return code: the one way spurd exits after start-up began. */
static int fail(struct agent *a, int code, const char *msg, const char *why)
{
    log_event(LOG_ERROR, "agent", msg, "exit=%d error=%s", code, log_q(why));
    agent_free(a);
    return code;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'f'},
        {"node-name", required_argument, NULL, 'N'},
        {"listen", required_argument, NULL, 'L'},
        {"address", required_argument, NULL, 'A'},
        {"spool", required_argument, NULL, 'S'},
        {"cpus", required_argument, NULL, 'C'},
        {"mem-mb", required_argument, NULL, 'M'},
        {"check-config", no_argument, NULL, 'K'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL;
    struct overrides ov = {0};
    bool check_only = false;
    int c;
    static struct agent a; /* large (the configuration's errors, the detect result) */
    static struct cfg_error cerr;
    char why[1024];

    log_setup(LOG_INFO, "spurd");
    event_set_log_callback(log_libevent);
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:N:Vh", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            config_path = optarg;
            break;
        case 'N':
            ov.node_name = optarg;
            break;
        case 'L':
            ov.listen = optarg;
            break;
        case 'A':
            ov.address = optarg;
            break;
        case 'S':
            ov.spool = optarg;
            break;
        case 'C':
            if (parse_u32("--cpus", optarg, 1000000, &ov.cpus) != 0)
                return EXIT_CONFIG;
            ov.cpus_set = true;
            break;
        case 'M':
            if (parse_u32("--mem-mb", optarg, UINT32_MAX, &ov.mem_mb) != 0)
                return EXIT_CONFIG;
            ov.mem_set = true;
            break;
        case 'K':
            check_only = true;
            break;
        case 'V':
            printf("spurd %s\n", SPUR_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "spurd: bad option %s\n", argv[optind - 1]);
            usage(stderr);
            return EXIT_CONFIG;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "spurd: unexpected argument \"%s\"\n", argv[optind]);
        return EXIT_CONFIG;
    }

    if (cfg_load(config_path, &a.cfg, &cerr) != 0) {
        if (check_only)
            cfg_print_errors(stderr, "spurd: ", &cerr);
        cfg_log_errors("agent", &cerr);
        return EXIT_CONFIG;
    }
    if (apply_overrides(&a.cfg, &ov) != 0) {
        cfg_free(&a.cfg);
        return EXIT_CONFIG;
    }
    if (check_only) {
        cfg_print(stdout, &a.cfg);
        cfg_free(&a.cfg);
        return 0;
    }
    log_setup((enum log_level)log_level_parse(a.cfg.log.level), "spurd");
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_flag; /* until the loop's signal events take over */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if (load_keys(&a.cfg, &a.kr, why, sizeof(why)) != 0)
        return fail(&a, EXIT_CONFIG, "cluster key unusable; exiting 78", why);

    /* What this node is; the cgroup limits before cgroup_init() may move us. */
    uint32_t cg_cpus = 0;
    uint64_t cg_mem = 0;
    cgroup_detect_cpus_mem(&cg_cpus, &cg_mem);
    if (detect_node(a.cfg.agent.node_name, a.cfg.agent.address, a.cfg.agent.listen,
                    a.cfg.agent.cpus, a.cfg.agent.mem_mb, cg_cpus, cg_mem, &a.node, why,
                    sizeof(why)) != 0)
        return fail(&a, EXIT_CONFIG, "cannot tell what this node is; exiting 78", why);
    if (detect_check_node_name(a.node.node_name, why, sizeof(why)) != 0) {
        char msg[400];
        snprintf(msg, sizeof(msg), "node name \"%.64s\" %.200s (set agent.node_name or -N)",
                 a.node.node_name, why);
        return fail(&a, EXIT_CONFIG, "bad node name; exiting 78", msg);
    }
    if (cgroup_init(a.cfg.agent.cgroup, a.node.node_name, &a.cg, why, sizeof(why)) != 0)
        return fail(&a, EXIT_OSERR, "cannot confine jobs in cgroups; exiting 71", why);
    a.mon.node_name = a.node.node_name;
    a.mon.cluster_name = a.cfg.cluster_name;
    a.mon.cg = a.cg;

    if (spool_open(&a.spool, a.cfg.agent.spool_dir, why, sizeof(why)) != 0)
        return fail(&a, EXIT_OSERR, "spool unusable; exiting 71", why);

    a.base = event_base_new();
    if (a.base == NULL)
        return fail(&a, EXIT_OSERR, "cannot create the event loop; exiting 71", "libevent");
    struct server_conf sc = {
        .listen = a.cfg.agent.listen,
        .cluster_name = a.cfg.cluster_name,
        .node_name = a.node.node_name,
        .cpus = a.node.cpus,
        .mem_mb = a.node.mem_mb,
        .max_frame = a.cfg.controller.max_frame_bytes ? a.cfg.controller.max_frame_bytes
                                                      : SPUR_DEFAULT_MAX_FRAME,
        .spool = &a.spool,
        .mon = &a.mon,
        .keyring = &a.kr,
    };
    a.srv = server_new(a.base, &sc, why, sizeof(why));
    if (a.srv == NULL)
        return fail(&a, EXIT_OSERR, "cannot listen; exiting 71", why);

    a.reg =
        register_new(getenv("SPUR_CONTROLLER"), (const char *const *)a.cfg.controller.hosts,
                     a.cfg.controller.nhosts, a.cfg.cluster_name, &a.kr,
                     sc.max_frame, why, sizeof(why));
    if (a.reg == NULL)
        return fail(&a, EXIT_CONFIG, "cannot register; exiting 78", why);
    a.rn = (struct register_node){.name = a.node.node_name,
                                  .address = a.node.address,
                                  .cpus = a.node.cpus,
                                  .mem_mb = a.node.mem_mb};
    log_event(LOG_INFO, "agent", "starting",
              "node=%s address=%s listen=%s cpus=%u mem_mb=%" PRIu64
              " spool=%s attempts=%zu term=%" PRIu64 " cgroups=%s",
              log_q(a.node.node_name), log_q(a.node.address), log_q(a.cfg.agent.listen),
              a.node.cpus, a.node.mem_mb, log_q(a.cfg.agent.spool_dir), a.spool.njobs, a.spool.term,
              a.cg && a.cg->v2          ? "v2"
              : a.cg && a.cg->v1_memory ? "v1-memory"
                                        : "none");
    if (register_until(a.reg, &a.rn, &stop_requested) != 0) {
        log_event(LOG_INFO, "agent", "stopped before registering; exiting 0", NULL);
        agent_free(&a);
        return 0;
    }
    a.last_contact_ms = mono_ms();

    a.ev_term = evsignal_new(a.base, SIGTERM, on_stop, &a);
    a.ev_int = evsignal_new(a.base, SIGINT, on_stop, &a);
    a.ev_chld = evsignal_new(a.base, SIGCHLD, on_sigchld, &a);
    a.ev_tick = event_new(a.base, -1, EV_PERSIST, on_tick, &a);
    struct timeval tick = {0, TICK_MS * 1000};
    if (!a.ev_term || !a.ev_int || !a.ev_chld || !a.ev_tick || evsignal_add(a.ev_term, NULL) ||
        evsignal_add(a.ev_int, NULL) || evsignal_add(a.ev_chld, NULL) ||
        event_add(a.ev_tick, &tick))
        return fail(&a, EXIT_OSERR, "cannot create events; exiting 71", "libevent");
    if (stop_requested) {
        log_event(LOG_INFO, "agent", "stopping; jobs keep running", "signal=SIGTERM");
    } else {
        on_sigchld(-1, 0, &a); /* a monitor may have ended before the SIGCHLD event existed */
        log_event(LOG_INFO, "agent", "serving", "listen=%s", log_q(a.cfg.agent.listen));
        event_base_dispatch(a.base);
    }
    if (a.cg)
        cgroup_remove_node(a.cg); /* only the empty job parents: running jobs keep theirs */
    agent_free(&a);
    log_event(LOG_INFO, "agent", "exiting", "exit=0");
    return 0;
}
