/*
 * main.c - spurctld: command line, configuration, then the supervisor loop (sup.c).
 *
 * Exit codes follow DESIGN.md section 4: 64 for a bad command line, 78 for a bad
 * configuration (every error named as FILE:LINE: key: reason), 71 when the worker program
 * cannot be found; every other code comes from sup_run().
 *
 * The configuration is loaded with this host's name (cfg_load_host), the same way the
 * worker loads it, so --check-config refuses exactly what start-up would refuse, and a
 * start with such a file stops here, before anything is forked. --hostname makes
 * --check-config judge the file as the replica on another host would.
 *
 * `spurctld keygen FILE` writes a new cluster key by exec'ing the worker with --keygen:
 * the worker is linked with libcrypto, this static program is not and must not be.
 */
#include "cfg.h"
#include "log.h"
#include "sup.h"
#include "util.h"

#include "spur_build.h"

#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: spurctld [OPTIONS]\n"
            "       spurctld keygen FILE [--worker PATH]\n"
            "Run one spurctld replica: supervise the Raft worker (spurctld-raftd) and serve\n"
            "the health probes /healthz, /livez and /readyz. keygen writes a new cluster key\n"
            "(32 random bytes, mode 0600) to FILE, never replacing one, and exits.\n"
            "\n"
            "  -f, --config FILE     configuration file (default %s;\n"
            "                        embedded defaults when that file does not exist)\n"
            "      --state-dir DIR   override controller.state_dir\n"
            "      --worker PATH     worker program (default: next to spurctld in a build\n"
            "                        tree, else %s/spurctld-raftd)\n"
            "      --check-config    validate the configuration, print the effective\n"
            "                        values and exit (0 valid, 78 invalid, every error\n"
            "                        named as FILE:LINE: key: reason)\n"
            "      --hostname NAME   with --check-config: judge the file as the replica\n"
            "                        on host NAME would (default: this host's name)\n"
            "  -V, --version         print the version and exit\n"
            "  -h, --help            print this help and exit\n"
            "\n"
            "Exit status: 0 clean shutdown; 64 usage; 65 corrupt state; 70 the worker died\n"
            "or stalled (restart the replica); 71 OS failure at start; 73 state dir\n"
            "unusable or locked; 78 invalid configuration. See spurctld(8).\n",
            SPUR_DEFAULT_CONFIG, SPUR_LIBEXECDIR);
}

static int executable(const char *p)
{
    return access(p, X_OK) == 0;
}

/*
 * The worker: --worker, else next to this program in a build tree (../raftd/), in the
 * same directory, in ../libexec/ (an installed tree moved away from its prefix, or a
 * DESTDIR staging tree), else the configured libexecdir.
 */
static int find_worker(const char *given, char *out, size_t outlen)
{
    char self[PATH_MAX];
    if (given != NULL) {
        snprintf(out, outlen, "%s", given);
        return executable(out) ? 0 : -1;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *dir = dirname(self);
        snprintf(out, outlen, "%s/../raftd/spurctld-raftd", dir);
        if (executable(out))
            return 0;
        snprintf(out, outlen, "%s/spurctld-raftd", dir);
        if (executable(out))
            return 0;
        snprintf(out, outlen, "%s/../libexec/spurctld-raftd", dir);
        if (executable(out))
            return 0;
    }
    snprintf(out, outlen, "%s/spurctld-raftd", SPUR_LIBEXECDIR);
    return executable(out) ? 0 : -1;
}

/*
 * spurctld keygen FILE [--worker PATH]: exec the worker's --keygen. Returns only on a
 * failure: 64 usage, 71 no worker or exec failed.
 */
static int keygen(int argc, char **argv)
{
    const char *file = NULL, *worker = NULL;
    bool bad = false;
    for (int i = 2; i < argc && !bad; i++) {
        if (strcmp(argv[i], "--worker") == 0 && i + 1 < argc)
            worker = argv[++i];
        else if (argv[i][0] != '-' && file == NULL)
            file = argv[i];
        else
            bad = true;
    }
    if (bad || file == NULL || file[0] == '\0') {
        fprintf(stderr, "Usage: spurctld keygen FILE [--worker PATH]\n");
        return EXIT_USAGE;
    }
    char worker_path[PATH_MAX];
    if (find_worker(worker, worker_path, sizeof(worker_path)) != 0) {
        fprintf(stderr, "spurctld: keygen: cannot find an executable worker (%s): %s\n",
                worker_path, strerror(errno));
        return EXIT_OSERR;
    }
    char *const wargv[] = {(char *)"spurctld-raftd", (char *)"--keygen", (char *)file, NULL};
    execv(worker_path, wargv);
    fprintf(stderr, "spurctld: keygen: cannot run %s: %s\n", worker_path, strerror(errno));
    return EXIT_OSERR;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'f'},
        {"state-dir", required_argument, NULL, 'S'},
        {"worker", required_argument, NULL, 'W'},
        {"check-config", no_argument, NULL, 'C'},
        {"hostname", required_argument, NULL, 'H'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL, *state_dir = NULL, *worker = NULL, *hostname = NULL;
    int check_only = 0;
    int c;

    if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
        return keygen(argc, argv);
    log_setup(LOG_INFO, "spurctld");
    event_set_log_callback(log_libevent); /* libevent's own messages as our lines */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:Vh", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            config_path = optarg;
            break;
        case 'S':
            state_dir = optarg;
            break;
        case 'W':
            worker = optarg;
            break;
        case 'C':
            check_only = 1;
            break;
        case 'H':
            hostname = optarg;
            break;
        case 'V':
            printf("spurctld %s\n", SPUR_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            fprintf(stderr, "spurctld: option %s needs a value\n", argv[optind - 1]);
            usage(stderr);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "spurctld: unknown option %s\n", argv[optind - 1]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "spurctld: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (state_dir != NULL && state_dir[0] != '/') {
        fprintf(stderr, "spurctld: --state-dir: \"%s\" is not an absolute path\n", state_dir);
        return EXIT_USAGE;
    }

    if (hostname != NULL && (!check_only || hostname[0] == '\0')) {
        fprintf(stderr, "spurctld: --hostname %s\n",
                check_only ? "needs a name" : "only goes with --check-config");
        return EXIT_USAGE;
    }
    char host[256] = "";
    if (hostname == NULL) {
        if (gethostname(host, sizeof(host) - 1) != 0)
            host[0] = '\0'; /* no name: only an explicit node_id or one peer will do */
        hostname = host;
    }

    /* The error list is large (every error, each a full line): keep it off the stack. */
    static struct cfg_error err;
    struct cfg cfg;
    if (cfg_load_host(config_path, hostname, &cfg, &err) != 0) {
        if (check_only)
            cfg_print_errors(stderr, "spurctld: invalid configuration: ", &err);
        else
            cfg_log_errors("cfg", &err);
        return EXIT_CONFIG;
    }
    if (state_dir != NULL) {
        char *dup = strdup(state_dir);
        if (dup == NULL)
            return EXIT_OSERR;
        free(cfg.controller.state_dir);
        cfg.controller.state_dir = dup;
    }
    if (check_only) {
        cfg_print(stdout, &cfg);
        cfg_free(&cfg);
        return 0;
    }
    log_setup((enum log_level)log_level_parse(cfg.log.level), "spurctld");
    /* Every line from here on names the replica (the responder inherits the tag). */
    log_set_node(cfg_node_id(&cfg, hostname));

    char worker_path[PATH_MAX];
    if (find_worker(worker, worker_path, sizeof(worker_path)) != 0) {
        log_event(LOG_ERROR, "sup", "cannot find an executable worker; exiting 71",
                  "path=%s err=\"%s\"", log_q(worker_path), strerror(errno));
        cfg_free(&cfg);
        return EXIT_OSERR;
    }
    log_event(LOG_INFO, "sup", "starting", "version=%s config=%s state_dir=%s",
              SPUR_VERSION, log_q(cfg.source), log_q(cfg.controller.state_dir));

    struct sup_options so = {
        .cfg = &cfg,
        .config_path = config_path,
        .state_dir = state_dir,
        .worker_path = worker_path,
    };
    int code = sup_run(&so);
    cfg_free(&cfg);
    return code;
}
