/*
 * cli.c - shared plumbing of the spur commands; see cli.h.
 */
#include "cli.h"

#include "spur_build.h"

#include <getopt.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void cli_error(const struct cli *c, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: error: ", c->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void cli_print_date_line(FILE *out)
{
    time_t now = time(NULL);
    struct tm tm;
    char b[64];
    if (localtime_r(&now, &tm) != NULL && strftime(b, sizeof(b), "%a %b %d %H:%M:%S %Y", &tm) > 0)
        fprintf(out, "%s\n", b);
}

void cli_long_and_format(const struct cli *c)
{
    fprintf(stderr,
            "%s: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please "
            "remove one and retry.\n",
            c->prog);
}

void cli_usage_error(const struct cli *c, const char *msg)
{
    fprintf(stderr, "%s: %s\n", c->prog, msg);
    fprintf(stderr, "Try \"%s --help\" for more information\n", c->prog);
}

void cli_option_error(const struct cli *c, int opt, char **argv)
{
    char msg[300];
    /* A long option's optopt is its value (a letter, often): tell them apart by the word. */
    bool lng = optind > 0 && strncmp(argv[optind - 1], "--", 2) == 0;
    if (opt == ':' && !lng)
        snprintf(msg, sizeof(msg), "option requires an argument -- '%c'", optopt);
    else if (opt == ':')
        snprintf(msg, sizeof(msg), "option '%s' requires an argument", argv[optind - 1]);
    else if (optopt && !lng)
        snprintf(msg, sizeof(msg), "invalid option -- '%c'", optopt);
    else
        snprintf(msg, sizeof(msg), "unrecognized option '%s'", argv[optind - 1]);
    cli_usage_error(c, msg);
}

void cli_print_version(void)
{
    printf("spur %s\n", SPUR_VERSION);
}

void cli_print_about(int opt, const char *help, const char *synopsis)
{
    if (opt == CLI_OPT_HELP)
        fputs(help, stdout);
    else if (opt == CLI_OPT_USAGE)
        fputs(synopsis, stdout);
    else
        cli_print_version();
}

int cli_option_shared(const struct cli *c, int opt, char **argv, const char *help,
                      const char *synopsis)
{
    if (opt == CLI_OPT_HELP || opt == CLI_OPT_USAGE || opt == 'V') {
        cli_print_about(opt, help, synopsis);
        return 0;
    }
    cli_option_error(c, opt, argv);
    return 1;
}

/* A variable of the environment, NULL when unset or empty. */
static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The local socket of the configuration when it is there: "unix:PATH", malloc'd; or NULL. */
static char *local_socket_host(const struct cfg *cfg)
{
    const char *path = cfg->controller.socket;
    struct stat st;
    if (path == NULL || path[0] != '/' || stat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
        return NULL;
    size_t n = strlen(path) + sizeof("unix:");
    char *h = malloc(n);
    if (h != NULL)
        snprintf(h, n, "unix:%s", path);
    return h;
}

int cli_init(struct cli *c, const char *prog)
{
    struct cfg_error err;
    memset(c, 0, sizeof(*c));
    c->prog = prog;
    if (cfg_load(NULL, &c->cfg, &err) != 0) {
        cli_error(c, "invalid configuration: %s", err.msg);
        return 1;
    }
    c->cfg_loaded = true;
    const char *env = getenv("SPUR_CONTROLLER");
    if (env != NULL && env[0] != '\0') {
        c->hosts = spurclient_hosts_parse(env, &c->nhosts);
    } else {
        /* The local socket first: there the kernel says who we are, no credential needed. */
        c->hosts = calloc(c->cfg.controller.nhosts + 2, sizeof(char *));
        char *local = c->hosts ? local_socket_host(&c->cfg) : NULL;
        if (local != NULL)
            c->hosts[c->nhosts++] = local;
        for (size_t i = 0; c->hosts && i < c->cfg.controller.nhosts; i++)
            c->hosts[c->nhosts++] = strdup(c->cfg.controller.hosts[i]);
    }
    if (c->hosts == NULL || c->nhosts == 0) {
        cli_error(c, "no controller address: set SPUR_CONTROLLER or controller.hosts");
        return 1;
    }
    /*
     * The embedded defaults name cluster "spur" only because something must be there; a
     * person who gave no file has not chosen a cluster, so the replica tells us its name.
     */
    const char *env_cluster = getenv("SPUR_CLUSTER");
    if (env_cluster != NULL && env_cluster[0] != '\0') {
        c->cluster_name = env_cluster;
        snprintf(c->cluster_origin, sizeof(c->cluster_origin), "SPUR_CLUSTER");
    } else if (c->cfg.source != NULL && strcmp(c->cfg.source, "(embedded defaults)") != 0) {
        c->cluster_name = c->cfg.cluster_name;
        snprintf(c->cluster_origin, sizeof(c->cluster_origin), "cluster_name in %s", c->cfg.source);
    }
    uint32_t timeout = 10000;
    const char *t = getenv("SPUR_TIMEOUT_MS");
    if (t != NULL && atoi(t) > 0)
        timeout = (uint32_t)atoi(t);
    c->timeout_ms = timeout;
    const char *munge_socket = env_nonempty("SPUR_MUNGE_SOCKET");
    if (munge_socket == NULL)
        munge_socket = c->cfg.auth.munge_socket;
    struct spurclient_options o = {
        .hosts = (const char *const *)c->hosts,
        .nhosts = c->nhosts,
        .cluster_name = c->cluster_name,
        .timeout_ms = timeout,
        .max_frame = c->cfg.controller.max_frame_bytes,
        .token = env_nonempty("SPUR_JWT"),
        .munge = c->cfg.auth.munge == NULL || strcmp(c->cfg.auth.munge, "off") != 0,
        .munge_socket = munge_socket,
        .local_socket = c->cfg.controller.socket,
    };
    c->client = spurclient_new(&o);
    if (c->client == NULL) {
        cli_error(c, "out of memory");
        return 1;
    }
    return 0;
}

void cli_fini(struct cli *c)
{
    spurclient_free(c->client);
    spurclient_hosts_free(c->hosts, c->nhosts);
    if (c->cfg_loaded)
        cfg_free(&c->cfg);
}

const char *cli_code_name(int code)
{
    switch (code) {
    case SPUR__API__CODE__CODE_OK:
        return "ok";
    case SPUR__API__CODE__CODE_INVALID:
        return "invalid request";
    case SPUR__API__CODE__CODE_NOT_FOUND:
        return "not found";
    case SPUR__API__CODE__CODE_UNAVAILABLE:
        return "unavailable";
    case SPUR__API__CODE__CODE_TIMEOUT:
        return "timed out";
    case SPUR__API__CODE__CODE_REFUSED:
        return "refused";
    case SPUR__API__CODE__CODE_INTERNAL:
        return "internal error";
    case SPUR__API__CODE__CODE_CONFLICT:
        return "conflict";
    case SPUR__API__CODE__CODE_TOO_LARGE:
        return "too large";
    case SPUR__API__CODE__CODE_BUSY:
        return "busy";
    case SPUR__API__CODE__CODE_UNAUTHENTICATED:
        return "not authenticated";
    case SPUR__API__CODE__CODE_DENIED:
        return CLI_MSG_DENIED;
    default:
        return "unknown error";
    }
}

bool cli_unauthenticated(const struct cli *c, spurclient_response *r)
{
    if (r == NULL || r->code != SPUR__API__CODE__CODE_UNAUTHENTICATED)
        return false;
    spurclient_response_free(r);
    cli_error(c, "not authenticated");
    if (getenv("SPUR_JWT") != NULL && getenv("SPUR_JWT")[0] != '\0') {
        fprintf(stderr,
                "%s: hint: the token in SPUR_JWT was refused (expired, or of another "
                "cluster); get a new one with: export $(scontrol token)\n",
                c->prog);
    } else {
        const char *sock = c->cfg_loaded ? c->cfg.controller.socket : NULL;
        fprintf(stderr,
                "%s: hint: run it on a controller host (local socket %s), start munged "
                "here, or set SPUR_JWT: export $(scontrol token)\n",
                c->prog, sock && sock[0] ? sock : "controller.socket");
    }
    return true;
}

void cli_response_error(const struct cli *c, const spurclient_response *r, const char *what)
{
    const char *msg = r->error && r->error[0] ? r->error : cli_code_name(r->code);
    if (r->code == SPUR__API__CODE__CODE_DENIED)
        msg = CLI_MSG_DENIED; /* Slurm's words, whatever else the replica said */
    if (r->code == SPUR__API__CODE__CODE_REFUSED && c->cluster_name != NULL &&
        r->cluster_name != NULL && strcmp(r->cluster_name, c->cluster_name) != 0)
        /* Say where the wrong name came from: that is what the person has to change. */
        cli_error(c, "%s%s%s (the cluster name \"%s\" comes from %s)", what ? what : "",
                  what ? ": " : "", msg, c->cluster_name, c->cluster_origin);
    else if (r->code == SPUR__API__CODE__CODE_UNAVAILABLE && r->leader_hint && r->leader_hint[0])
        cli_error(c, "%s%s%s (leader: node %u at %s)", what ? what : "", what ? ": " : "", msg,
                  r->leader_id, r->leader_hint);
    else
        cli_error(c, "%s%s%s", what ? what : "", what ? ": " : "", msg);
}

spurclient_response *cli_call_any(struct cli *c, spurclient_request *req, bool write)
{
    char err[1100];
    spurclient_response *r = NULL;
    if (spurclient_call(c->client, req, write, &r, err, sizeof(err)) != 0) {
        cli_error(c, "%s", err);
        return NULL;
    }
    if (cli_unauthenticated(c, r))
        return NULL;
    return r;
}

spurclient_response *cli_call(struct cli *c, spurclient_request *req, bool write)
{
    spurclient_response *r = cli_call_any(c, req, write);
    if (r != NULL && r->code != SPUR__API__CODE__CODE_OK) {
        cli_response_error(c, r, NULL);
        spurclient_response_free(r);
        return NULL;
    }
    return r;
}

static spurclient_response *read_one(struct cli *c, spurclient_request *req);

/*
 * Job lists come in pages (a replica never answers more than its frame limit): ask for
 * the next page until the answer says there is no more, and hand the caller one response
 * holding every job. Each page is its own read; the list is not one atomic view (like
 * Slurm's squeue), but every job in it was committed when its page was read.
 */
spurclient_response *cli_read_any(struct cli *c, spurclient_request *req)
{
    if (req->op_case == SPUR__API__REQUEST__OP_GET_JOBS && req->get_jobs != NULL &&
        req->get_jobs->max_bytes == 0 && c->cfg_loaded) {
        /* Pages that fit this client's frame limit too (the replica caps them at its own). */
        uint32_t max = c->cfg.controller.max_frame_bytes;
        req->get_jobs->max_bytes = max > 32768 ? max - 16384 : max / 2;
    }
    spurclient_response *first = read_one(c, req);
    if (first == NULL || first->code != SPUR__API__CODE__CODE_OK ||
        req->op_case != SPUR__API__REQUEST__OP_GET_JOBS || first->jobs == NULL ||
        !first->jobs->more)
        return first;
    Spur__Api__JobsResponse *all = first->jobs;
    uint64_t after = all->next_after_id;
    bool more = true;
    while (more) {
        req->get_jobs->after_id = after;
        req->request_id = 0;
        spurclient_response *page = read_one(c, req);
        if (page == NULL || page->code != SPUR__API__CODE__CODE_OK || page->jobs == NULL) {
            spurclient_response_free(first);
            return page;
        }
        Spur__Api__JobsResponse *p = page->jobs;
        if (p->n_jobs > 0) {
            Spur__Api__Job **nv =
                realloc(all->jobs, (all->n_jobs + p->n_jobs) * sizeof(Spur__Api__Job *));
            if (nv == NULL) {
                spurclient_response_free(page);
                spurclient_response_free(first);
                cli_error(c, "out of memory collecting %zu jobs", all->n_jobs);
                return NULL;
            }
            all->jobs = nv;
            /* Move the jobs over; the page then frees an empty list. */
            memcpy(all->jobs + all->n_jobs, p->jobs, p->n_jobs * sizeof(Spur__Api__Job *));
            all->n_jobs += p->n_jobs;
            p->n_jobs = 0;
        }
        more = p->more && p->next_after_id > after;
        after = p->next_after_id;
        if (page->stale)
            first->stale = true;
        spurclient_response_free(page);
    }
    all->more = false;
    return first;
}

static spurclient_response *read_one(struct cli *c, spurclient_request *req)
{
    char err[1100];
    spurclient_response *r = NULL;
    /*
     * Wait for a leader about as long as an election or two takes, not the whole call
     * timeout: with no quorum there will be none, and a possibly stale answer now is
     * worth more to the person at the terminal than an error later.
     */
    uint32_t wait = c->cfg_loaded ? 3 * c->cfg.raft.election_timeout_ms : 3000;
    if (wait == 0 || wait > c->timeout_ms)
        wait = c->timeout_ms;
    uint32_t saved = spurclient_set_timeout(c->client, wait);
    int rc = spurclient_call(c->client, req, false, &r, err, sizeof(err));
    spurclient_set_timeout(c->client, saved);
    if (rc != 0) {
        cli_error(c, "%s", err);
        return NULL;
    }
    if (cli_unauthenticated(c, r))
        return NULL;
    if (r->code == SPUR__API__CODE__CODE_UNAVAILABLE) {
        /* No leader: show what this replica has, and say that it may be behind. */
        spurclient_response_free(r);
        r = NULL;
        req->local_read = true;
        if (spurclient_call(c->client, req, false, &r, err, sizeof(err)) != 0) {
            cli_error(c, "%s", err);
            return NULL;
        }
        if (cli_unauthenticated(c, r))
            return NULL;
    }
    if (r->code == SPUR__API__CODE__CODE_OK && r->stale && !c->stale_warned) {
        c->stale_warned = true;
        fprintf(stderr,
                "%s: warning: no Raft leader is known; showing possibly stale state from "
                "node %u\n",
                c->prog, r->served_by);
    }
    return r;
}

spurclient_response *cli_read(struct cli *c, spurclient_request *req)
{
    spurclient_response *r = cli_read_any(c, req);
    if (r != NULL && r->code != SPUR__API__CODE__CODE_OK) {
        cli_response_error(c, r, NULL);
        spurclient_response_free(r);
        return NULL;
    }
    return r;
}

const char *cli_group_name(uint32_t gid, void *arg)
{
    struct cli_group_cache *g = arg;
    if (g->valid && g->gid == gid)
        return g->name[0] ? g->name : NULL;
    struct group gr, *res = NULL;
    char buf[4096];
    g->gid = gid;
    g->valid = true;
    g->name[0] = '\0';
    if (getgrgid_r((gid_t)gid, &gr, buf, sizeof(buf), &res) == 0 && res != NULL)
        snprintf(g->name, sizeof(g->name), "%s", res->gr_name);
    return g->name[0] ? g->name : NULL;
}
