/*
 * cmd_squeue.c - squeue: the jobs in the queue, in Slurm's columns.
 *
 * By default only pending, running and completing jobs show (Slurm's default); -t all,
 * -t with finished states, or -j with job ids show finished jobs while the controller
 * still keeps them. Filters go to the server and are applied again here, so the output
 * is right even from a server that ignores one. The answer is linearizable, or says on
 * stderr that it may be stale when no leader is known (cli_read).
 */
#include "cli.h"
#include "fmt_json.h"
#include "fmt_squeue.h"
#include "job_filter.h"
#include "strv.h"
#include "util.h"

#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_STATES 16

static const char synopsis[] =
    "Usage: squeue [-j LIST] [-u LIST] [-t LIST] [-p LIST] [-n LIST] [-o FORMAT] "
    "[-S SORT] [-l] [-h] [--json] [--me]\n";

static const char help_text[] =
    "Usage: squeue [OPTIONS]\n"
    "  -j, --jobs=LIST        job ids to show (comma list); finished jobs included\n"
    "  -u, --user=LIST        users (names or uids)      --me  your own jobs\n"
    "  -t, --states=LIST      states (PENDING,RUNNING,... or PD,R,...; all)\n"
    "  -p, --partition=LIST   partitions                 -n, --name=LIST  job names\n"
    "  -o, --format=FORMAT    columns, e.g. \"%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R\"\n"
    "  -S, --sort=LIST        sort by fields, e.g. \"P,-i\" (- descending; SQUEUE_SORT)\n"
    "  -l, --long             the long format           -h, --noheader\n"
    "      --json             a JSON array of job objects\n"
    "  -V, --version          --help  --usage\n";

/* Comma list into *v (appending); uids become user names. */
/*
 * The users of -u (names or uids) as names. One this host does not know is warned of and
 * left out, as Slurm's squeue does ("squeue: error: Invalid user: x" and an empty line,
 * exit 0); when every one is unknown, no job matches.
 */
static int add_users(struct cli *c, const char *list, char ***v, size_t *n)
{
    char **words;
    size_t nw;
    if (strv_split(list, &words, &nw) != 0)
        return -1;
    size_t keep = 0;
    for (size_t i = 0; i < nw; i++) {
        char *w = words[i];
        bool uid = w[0] != '\0' && w[strspn(w, "0123456789")] == '\0';
        struct passwd *pw = uid ? getpwuid((uid_t)strtoul(w, NULL, 10)) : getpwnam(w);
        if (pw == NULL) {
            cli_error(c, "Invalid user: %s\n", w);
            free(w);
            continue;
        }
        if (uid) {
            char *name = strdup(pw->pw_name);
            if (name == NULL) {
                for (size_t k = i; k < nw; k++)
                    free(words[k]);
                strv_free(words, keep);
                return -1;
            }
            free(w);
            w = name;
        }
        words[keep++] = w;
    }
    return strv_move_all(v, n, words, keep);
}

static int add_list(const char *list, char ***v, size_t *n)
{
    char **words;
    size_t nw;
    if (strv_split(list, &words, &nw) != 0)
        return -1;
    return strv_move_all(v, n, words, nw);
}

int cmd_squeue(struct cli *c, int argc, char **argv)
{
    enum { OPT_JSON = 1000, OPT_ME };
    static const struct option lopts[] = {
        {"jobs", required_argument, NULL, 'j'},
        {"user", required_argument, NULL, 'u'},
        {"users", required_argument, NULL, 'u'},
        {"states", required_argument, NULL, 't'},
        {"partition", required_argument, NULL, 'p'},
        {"name", required_argument, NULL, 'n'},
        {"format", required_argument, NULL, 'o'},
        {"long", no_argument, NULL, 'l'},
        {"noheader", no_argument, NULL, 'h'},
        {"all", no_argument, NULL, 'a'},
        {"json", no_argument, NULL, OPT_JSON},
        {"me", no_argument, NULL, OPT_ME},
        {"help", no_argument, NULL, CLI_OPT_HELP},
        {"usage", no_argument, NULL, CLI_OPT_USAGE},
        {"version", no_argument, NULL, 'V'},
        {"sort", required_argument, NULL, 'S'},
        {NULL, 0, NULL, 0},
    };
    uint64_t *ids = NULL;
    size_t nids = 0;
    char **users = NULL, **parts = NULL, **names = NULL;
    size_t nusers = 0, nparts = 0, nnames = 0;
    bool users_given = false;
    int states[MAX_STATES];
    size_t nstates = 0;
    bool states_given = false, all_states = false, header = true, lng = false;
    const char *format = NULL, *sort = NULL;
    char err[400];
    int rc = 1;
    struct table_spec spec = {0};
    spurclient_response *r = NULL;
    fmt_job **sel = NULL;

    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":j:u:t:p:n:o:S:lhaV", lopts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            if (job_filter_ids_parse(optarg, &ids, &nids, err, sizeof(err)) != 0) {
                cli_error(c, "%s", err);
                goto out;
            }
            break;
        case 'u':
            users_given = true;
            if (add_users(c, optarg, &users, &nusers) != 0)
                goto out;
            break;
        case OPT_ME: {
            struct passwd *pw = getpwuid(getuid());
            if (pw == NULL || add_list(pw->pw_name, &users, &nusers) != 0) {
                cli_error(c, "cannot tell who you are (uid %u)", (unsigned)getuid());
                goto out;
            }
            break;
        }
        case 't': {
            bool all;
            size_t k;
            if (job_filter_states_parse(optarg, states + nstates, MAX_STATES - nstates, &k, &all,
                                        err, sizeof(err)) != 0) {
                cli_error(c, "%s", err);
                goto out;
            }
            nstates += k;
            all_states |= all;
            states_given = true;
            break;
        }
        case 'p':
            if (add_list(optarg, &parts, &nparts) != 0)
                goto oom;
            break;
        case 'n':
            if (add_list(optarg, &names, &nnames) != 0)
                goto oom;
            break;
        case 'o':
            format = optarg;
            break;
        case 'S':
            sort = optarg;
            break;
        case 'l':
            lng = true;
            break;
        case 'h':
            header = false;
            break;
        case 'a':
            break; /* every partition is always shown */
        case OPT_JSON:
            c->json = true;
            break;
        default: /* --help, --usage, --version; or getopt's ':' and '?' */
            rc = cli_option_shared(c, ch, argv, help_text, synopsis);
            goto out;
        }
    }
    if (optind < argc) {
        cli_error(c, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (all_states)
        nstates = 0;
    /* Slurm's default: active jobs, unless jobs are named or states asked for. */
    if (!states_given && nids == 0) {
        states[0] = SPUR__API__JOB_STATE__JOB_PENDING;
        states[1] = SPUR__API__JOB_STATE__JOB_RUNNING;
        states[2] = SPUR__API__JOB_STATE__JOB_COMPLETING;
        states[3] = SPUR__API__JOB_STATE__JOB_CONFIGURING;
        nstates = 4;
    }
    if (lng && format != NULL) {
        cli_long_and_format(c);
        goto out;
    }
    if (format == NULL && !lng)
        format = getenv("SQUEUE_FORMAT");
    if (format == NULL || format[0] == '\0')
        format = lng ? FMT_SQUEUE_LONG : FMT_SQUEUE_DEFAULT;
    if (!c->json && fmt_squeue_spec_parse(format, &spec, err, sizeof(err)) != 0) {
        cli_error(c, "%s", err);
        goto out;
    }

    if (sort == NULL)
        sort = getenv("SQUEUE_SORT");
    if (sort != NULL && sort[0] == '\0')
        sort = NULL;
    /* A bad sort list is refused before anything is asked (Slurm's words, exit 1). */
    if (sort != NULL && fmt_squeue_sort(NULL, 0, sort, NULL, err, sizeof(err)) != 0) {
        cli_error(c, "%s", err);
        goto out;
    }

    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__GetJobsRequest gj = SPUR__API__GET_JOBS_REQUEST__INIT;
    Spur__Api__JobState wire_states[MAX_STATES];
    for (size_t i = 0; i < nstates; i++)
        wire_states[i] = (Spur__Api__JobState)states[i];
    gj.n_ids = nids;
    gj.ids = ids;
    gj.n_users = nusers;
    gj.users = users;
    gj.n_states = nstates;
    gj.states = wire_states;
    gj.n_partitions = nparts;
    gj.partitions = parts;
    gj.n_names = nnames;
    gj.names = names;
    req.op_case = SPUR__API__REQUEST__OP_GET_JOBS;
    req.get_jobs = &gj;
    r = cli_read(c, &req);
    if (r == NULL)
        goto out;

    /* -u naming only users nobody knows: nothing matches (Slurm's squeue lists nothing). */
    size_t n = r->jobs && !(users_given && nusers == 0) ? r->jobs->n_jobs : 0, m = 0;
    sel = calloc(n ? n : 1, sizeof(*sel));
    if (sel == NULL)
        goto oom;
    struct job_filter f = {
        .ids = ids,
        .nids = nids,
        .users = users,
        .nusers = nusers,
        .states = states,
        .nstates = nstates,
        .partitions = parts,
        .npartitions = nparts,
        .names = names,
        .nnames = nnames,
    };
    for (size_t i = 0; i < n; i++)
        if (job_filter_matches(r->jobs->jobs[i], &f))
            sel[m++] = r->jobs->jobs[i];
    job_filter_sort(sel, m);
    struct fmt_ctx sctx = {.now_ms = wall_ms()};
    if (sort != NULL && fmt_squeue_sort(sel, m, sort, &sctx, err, sizeof(err)) != 0) {
        cli_error(c, "%s", err);
        goto out;
    }
    if (nids > 0 && !states_given && m == 0) {
        cli_error(c, "slurm_load_jobs error: Invalid job id specified");
        goto out;
    }
    if (c->json) {
        struct json j;
        json_init(&j, stdout);
        fmt_json_jobs(&j, sel, m);
        json_end(&j);
    } else {
        struct fmt_ctx ctx = {.now_ms = wall_ms()};
        if (lng && header)
            cli_print_date_line(stdout);
        fmt_squeue(stdout, &spec, sel, m, header, &ctx);
    }
    rc = 0;
    goto out;
oom:
    cli_error(c, "out of memory");
out:
    free(sel);
    spurclient_response_free(r);
    table_spec_free(&spec);
    free(ids);
    strv_free(users, nusers);
    strv_free(parts, nparts);
    strv_free(names, nnames);
    return rc;
}
