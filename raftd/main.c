/*
 * main.c - spurctld-raftd, the worker: command line, configuration, state directory,
 * status frames to the supervisor.
 *
 * Start-up order matters and is part of the contract with the supervisor:
 *   1. PR_SET_PDEATHSIG, so this process never outlives the supervisor, and a check that
 *      the parent is still the supervisor whose pid came in --supervisor-pid (never a
 *      comparison with 1: the supervisor is PID 1 in a container);
 *   2. fd 3 (--status-fd) marked close-on-exec and non-blocking before anything could
 *      fork, so no grandchild can hold the status pipe open;
 *   3. configuration (exit 78 on error), state directory and its lock (exit 73);
 *   4. STARTING frames while the state is recovered (from a helper thread, so a long
 *      replay is never mistaken for a stall), then the event loop; RUNNING once loaded.
 * Failures before RUNNING exit with a code from 64-78; the supervisor passes on those
 * where a restart cannot help (64, 65, 73, 78) and turns the rest into 70.
 */
#include "cfg.h"
#include "log.h"
#include "replica.h"
#include "statedir.h"
#include "status.h"
#include "statusw.h"
#include "util.h"

#include "spur_build.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

struct worker {
    struct cfg cfg;
    struct statedir sd;
    struct statusw sw;
    struct event_base *base;
    struct replica *node;
    struct event *ev_term, *ev_int, *ev_hup, *ev_usr1, *ev_usr2, *ev_pre;
    uint32_t node_id;
    bool debug_toggled;
};

static void send_phase(struct worker *w, enum status_phase phase)
{
    struct worker_status s;
    memset(&s, 0, sizeof(s));
    s.phase = phase;
    s.node_id = w->node_id;
    s.role = STATUS_ROLE_FOLLOWER;
    s.pid = (uint32_t)getpid();
    statusw_send(&w->sw, &s);
}

static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
    struct worker *w = arg;
    (void)what;
    log_event(LOG_INFO, "raftd", "stopping", "signal=%s", signal_name((int)sig));
    if (w->node)
        replica_shutdown(w->node);
    else
        event_base_loopbreak(w->base);
}

/* SIGUSR1: one log line with the node's state. */
static void on_usr1(evutil_socket_t sig, short what, void *arg)
{
    struct worker *w = arg;
    (void)sig;
    (void)what;
    if (w->node)
        replica_log_status(w->node);
}

/* SIGUSR2: toggle debug logging, back to the configured level on the next one. */
static void on_usr2(evutil_socket_t sig, short what, void *arg)
{
    struct worker *w = arg;
    (void)sig;
    (void)what;
    w->debug_toggled = !w->debug_toggled;
    int level = w->debug_toggled ? LOG_DEBUG : log_level_parse(w->cfg.log.level);
    log_setup((enum log_level)level, "spurctld-raftd");
    log_event(LOG_INFO, "raftd", "log level changed by SIGUSR2", "level=%s",
              log_level_name((enum log_level)level));
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    log_event(LOG_INFO, "raftd", "SIGHUP received; configuration reload is not supported, "
              "restart the replica to apply changes", NULL);
}

/* While recovering, keep the supervisor's stall clock fed from a helper thread's view:
 * here recovery runs on the loop thread before the loop starts, so frames are sent by
 * a short timer thread instead. */
struct keepalive {
    struct statusw *sw;
    uint32_t node_id;
    uint32_t interval_ms;
    volatile int stop;
};

static void *keepalive_thread(void *arg)
{
    struct keepalive *k = arg;
    while (!k->stop) {
        struct timespec ts = {k->interval_ms / 1000, (long)(k->interval_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (k->stop)
            break;
        struct worker_status s;
        memset(&s, 0, sizeof(s));
        s.phase = STATUS_PHASE_STARTING;
        s.node_id = k->node_id;
        s.pid = (uint32_t)getpid();
        statusw_send(k->sw, &s);
    }
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: spurctld-raftd [OPTIONS]\n"
            "The spurctld Raft worker. Normally started by spurctld; runs by hand for\n"
            "debugging.\n"
            "\n"
            "  -f, --config FILE     configuration file (default %s)\n"
            "      --state-dir DIR   override controller.state_dir\n"
            "      --status-fd N     write status frames to descriptor N (set by spurctld)\n"
            "      --supervisor-pid P  the supervisor's pid (set by spurctld): exit at once\n"
            "                        if the parent is already another process\n"
            "  -V, --version         print the version and exit\n"
            "  -h, --help            print this help and exit\n",
            SPUR_DEFAULT_CONFIG);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'f'},
        {"state-dir", required_argument, NULL, 'S'},
        {"status-fd", required_argument, NULL, 'F'},
        {"supervisor-pid", required_argument, NULL, 'P'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL, *state_dir = NULL;
    int status_fd = -1;
    long sup_pid = 0;
    int c;
    struct worker w;
    char why[1024]; /* a storage refusal names a path, the reason and what to do */

    memset(&w, 0, sizeof(w));
    log_setup(LOG_INFO, "spurctld-raftd");
    event_set_log_callback(log_libevent); /* evdns's messages as our lines, not raw stderr */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:Vh", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            config_path = optarg;
            break;
        case 'S':
            state_dir = optarg;
            break;
        case 'F': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end != '\0' || v < 0 || v > 1024) {
                fprintf(stderr, "spurctld-raftd: --status-fd: \"%s\" is not a descriptor\n",
                        optarg);
                return EXIT_USAGE;
            }
            status_fd = (int)v;
            break;
        }
        case 'P': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end != '\0' || v <= 0 || v > INT_MAX) {
                fprintf(stderr, "spurctld-raftd: --supervisor-pid: \"%s\" is not a pid\n",
                        optarg);
                return EXIT_USAGE;
            }
            sup_pid = v;
            break;
        }
        case 'V':
            printf("spurctld-raftd %s\n", SPUR_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "spurctld-raftd: bad option %s\n", argv[optind - 1]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "spurctld-raftd: unexpected argument \"%s\"\n", argv[optind]);
        return EXIT_USAGE;
    }

    /*
     * 1 and 2: never outlive the supervisor; never leak the status pipe. PDEATHSIG only
     * covers a death after the prctl, so compare the parent with the pid the supervisor
     * passed: a different parent means it died first (we were reparented). Comparing with
     * 1 would be wrong, since the supervisor is PID 1 in a container.
     */
    if (status_fd >= 0)
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (sup_pid > 0 && (long)getppid() != sup_pid) {
        log_event(LOG_ERROR, "raftd", "supervisor already gone at start; exiting 70",
                  "supervisor_pid=%ld parent_pid=%ld", sup_pid, (long)getppid());
        return EXIT_SOFTWARE;
    }
    if (statusw_attach(&w.sw, status_fd) != 0) {
        log_event(LOG_ERROR, "raftd", "status descriptor is not open", "fd=%d", status_fd);
        return EXIT_USAGE;
    }
    signal(SIGPIPE, SIG_IGN);

    /*
     * 3: configuration and state. cfg_load_host() applies every rule, those that need the
     * host name included (the same call spurctld --check-config makes), so a file it
     * accepts has a node id for this host.
     */
    static struct cfg_error err; /* every error, each a full line: off the stack */
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    if (cfg_load_host(config_path, host, &w.cfg, &err) != 0) {
        cfg_log_errors("raftd", &err);
        return EXIT_CONFIG;
    }
    log_setup((enum log_level)log_level_parse(w.cfg.log.level), "spurctld-raftd");
    if (state_dir != NULL) {
        free(w.cfg.controller.state_dir);
        w.cfg.controller.state_dir = strdup(state_dir);
    }
    w.node_id = cfg_node_id(&w.cfg, host);
    log_set_node(w.node_id); /* every later line names the replica */

    w.base = event_base_new();
    if (w.base == NULL) {
        log_event(LOG_ERROR, "raftd", "cannot create the event loop; exiting 71", NULL);
        cfg_free(&w.cfg);
        return EXIT_OSERR;
    }
    send_phase(&w, STATUS_PHASE_STARTING);

    int rc = statedir_open(&w.sd, w.cfg.controller.state_dir, why, sizeof(why));
    if (rc != 0) {
        log_event(LOG_ERROR, "raftd", "state directory unusable; exiting", "exit=%d error=%s",
                  rc, log_q(why));
        event_base_free(w.base);
        cfg_free(&w.cfg);
        return rc;
    }

    /*
     * Recovery (reading the log, restoring the snapshot) runs before the loop; a helper
     * thread sends STARTING frames meanwhile so that a long replay is not a stall. The
     * status writer is only touched by that thread until it is joined.
     */
    struct keepalive ka = {.sw = &w.sw, .node_id = w.node_id,
                           .interval_ms = w.cfg.supervisor.heartbeat_ms};
    pthread_t kat;
    bool ka_running = pthread_create(&kat, NULL, keepalive_thread, &ka) == 0;
    rc = replica_open(w.base, &w.cfg, w.node_id, &w.sw, &(struct replica_options){0}, &w.node, why,
                      sizeof(why));
    if (ka_running) {
        ka.stop = 1;
        pthread_join(kat, NULL);
    }
    if (rc != 0) {
        log_event(LOG_ERROR, "raftd", "cannot start the replica; exiting", "exit=%d error=%s",
                  rc, log_q(why));
        statedir_close(&w.sd);
        event_base_free(w.base);
        cfg_free(&w.cfg);
        return rc;
    }

    w.ev_term = evsignal_new(w.base, SIGTERM, on_stop_signal, &w);
    w.ev_int = evsignal_new(w.base, SIGINT, on_stop_signal, &w);
    w.ev_hup = evsignal_new(w.base, SIGHUP, on_hup, &w);
    w.ev_usr1 = evsignal_new(w.base, SIGUSR1, on_usr1, &w);
    w.ev_usr2 = evsignal_new(w.base, SIGUSR2, on_usr2, &w);
    if (!w.ev_term || !w.ev_int || !w.ev_hup || !w.ev_usr1 || !w.ev_usr2) {
        log_event(LOG_ERROR, "raftd", "cannot create events; exiting 71", NULL);
        return EXIT_OSERR;
    }
    evsignal_add(w.ev_term, NULL);
    evsignal_add(w.ev_int, NULL);
    evsignal_add(w.ev_hup, NULL);
    evsignal_add(w.ev_usr1, NULL);
    evsignal_add(w.ev_usr2, NULL);

    replica_enable_status(w.node);
    log_event(LOG_INFO, "raftd", "running", "node_id=%u state_dir=%s peers=%zu", w.node_id,
              log_q(w.cfg.controller.state_dir), w.cfg.controller.npeers);

    event_base_dispatch(w.base);

    int code = replica_exit_code(w.node);
    replica_free(w.node);
    event_free(w.ev_term);
    event_free(w.ev_int);
    event_free(w.ev_hup);
    event_free(w.ev_usr1);
    event_free(w.ev_usr2);
    event_base_free(w.base);
    statedir_close(&w.sd);
    cfg_free(&w.cfg);
    log_event(code ? LOG_ERROR : LOG_INFO, "raftd", "exiting", "exit=%d", code);
    return code;
}
