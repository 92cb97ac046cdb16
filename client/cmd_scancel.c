/*
 * cmd_scancel.c - scancel: cancel jobs by id, or every job that matches filters.
 *
 * Job ids alone: one exactly-once cancel request per id, so each failure names its job
 * in Slurm's words ("Kill job error on job id 42: Invalid job id specified"). With any
 * filter (-u -t -n -p --me), one cancel_jobs request carries the filters and the ids, and
 * only jobs that match all of them are cancelled. Exit status 1 when any id named on the
 * command line could not be cancelled (a job already finished counts, unless -Q), else 0;
 * filters that match nothing are not an error.
 */
#include "cli.h"
#include "job_filter.h"
#include "names.h"

#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CODE(x)          SPUR__API__CODE__CODE_##x
#define MSG_NOT_FOUND    "Invalid job id specified"
#define MSG_ALREADY_DONE "Job/step already completing or completed"

static const char synopsis[] =
    "Usage: scancel [-u USER] [-t STATE] [-n NAME] [-p PARTITION] [--me] [-Q] "
    "[-v] [JOBID...]\n";

static const char help_text[] =
    "Usage: scancel [OPTIONS] [JOBID...]\n"
    "  -u, --user=NAME        jobs of this user          --me  your own jobs\n"
    "  -t, --state=STATE      PENDING (PD) or RUNNING (R) jobs only\n"
    "  -n, --name=NAME        jobs with this name        -p, --partition=NAME\n"
    "  -Q, --quiet            no error for jobs that already finished\n"
    "  -v, --verbose          say which jobs were cancelled\n"
    "  -V, --version          --help  --usage\n";

static void kill_error(struct cli *c, uint64_t id, const char *why)
{
    cli_error(c, "Kill job error on job id %llu: %s", (unsigned long long)id, why);
}

static bool listed(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static int cancel_by_id(struct cli *c, const uint64_t *ids, size_t n, bool quiet, bool verbose)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        Spur__Api__Request req = SPUR__API__REQUEST__INIT;
        Spur__Api__JobIdRequest jr = SPUR__API__JOB_ID_REQUEST__INIT;
        jr.job_id = ids[i];
        req.op_case = SPUR__API__REQUEST__OP_CANCEL_JOB;
        req.cancel_job = &jr;
        if (verbose)
            fprintf(stderr, "%s: Terminating job %llu\n", c->prog, (unsigned long long)ids[i]);
        spurclient_response *r = cli_call_any(c, &req, true);
        if (r == NULL)
            return 1; /* no replica answers: the others would fail the same way */
        if (r->code == CODE(NOT_FOUND)) {
            kill_error(c, ids[i], MSG_NOT_FOUND);
            failed = 1;
        } else if (r->code == CODE(CONFLICT)) {
            if (!quiet) {
                kill_error(c, ids[i], MSG_ALREADY_DONE);
                failed = 1;
            }
        } else if (r->code != CODE(OK)) {
            kill_error(c, ids[i], r->error && r->error[0] ? r->error : cli_code_name(r->code));
            failed = 1;
        }
        spurclient_response_free(r);
    }
    return failed;
}

int cmd_scancel(struct cli *c, int argc, char **argv)
{
    enum { OPT_ME = 1000 };
    static const struct option lopts[] = {
        {"user", required_argument, NULL, 'u'},      {"state", required_argument, NULL, 't'},
        {"name", required_argument, NULL, 'n'},      {"jobname", required_argument, NULL, 'n'},
        {"partition", required_argument, NULL, 'p'}, {"quiet", no_argument, NULL, 'Q'},
        {"verbose", no_argument, NULL, 'v'},         {"me", no_argument, NULL, OPT_ME},
        {"help", no_argument, NULL, CLI_OPT_HELP},   {"usage", no_argument, NULL, CLI_OPT_USAGE},
        {"version", no_argument, NULL, 'V'},         {NULL, 0, NULL, 0},
    };
    Spur__Api__CancelJobsRequest cj = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    char *users[1] = {NULL}, *names[1] = {NULL}, *parts[1] = {NULL};
    Spur__Api__JobState states[1];
    bool quiet = false, verbose = false, filters = false;
    uint64_t *ids = NULL;
    size_t nids = 0;
    char err[300];
    char me[256];
    int rc = 1;

    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":u:t:n:p:QvV", lopts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            users[0] = optarg;
            cj.n_users = 1;
            filters = true;
            break;
        case OPT_ME: {
            struct passwd *pw = getpwuid(getuid());
            if (pw == NULL) {
                cli_error(c, "cannot tell who you are (uid %u)", (unsigned)getuid());
                goto out;
            }
            snprintf(me, sizeof(me), "%s", pw->pw_name);
            users[0] = me;
            cj.n_users = 1;
            filters = true;
            break;
        }
        case 't': {
            int st = names_job_state_parse(optarg);
            if (st != SPUR__API__JOB_STATE__JOB_PENDING &&
                st != SPUR__API__JOB_STATE__JOB_RUNNING) {
                cli_error(c, "Invalid job state specified: %s", optarg);
                goto out;
            }
            states[0] = (Spur__Api__JobState)st;
            cj.n_states = 1;
            filters = true;
            break;
        }
        case 'n':
            names[0] = optarg;
            cj.n_names = 1;
            filters = true;
            break;
        case 'p':
            parts[0] = optarg;
            cj.n_partitions = 1;
            filters = true;
            break;
        case 'Q':
            quiet = true;
            break;
        case 'v':
            verbose = true;
            break;
        default: /* --help, --usage, --version; or getopt's ':' and '?' */
            rc = cli_option_shared(c, ch, argv, help_text, synopsis);
            goto out;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (job_filter_ids_parse(argv[i], &ids, &nids, err, sizeof(err)) != 0) {
            cli_error(c, "%s", err);
            goto out;
        }
    }
    if (nids == 0 && !filters) {
        cli_error(c, "No job identification provided");
        goto out;
    }
    if (!filters) {
        rc = cancel_by_id(c, ids, nids, quiet, verbose);
        goto out;
    }

    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    cj.n_ids = nids;
    cj.ids = ids;
    cj.users = users;
    cj.names = names;
    cj.partitions = parts;
    cj.states = states;
    req.op_case = SPUR__API__REQUEST__OP_CANCEL_JOBS;
    req.cancel_jobs = &cj;
    spurclient_response *r = cli_call(c, &req, true);
    if (r == NULL)
        goto out;
    rc = 0;
    Spur__Api__CancelJobsResponse *cr = r->cancel_jobs;
    if (cr != NULL) {
        for (size_t i = 0; verbose && i < cr->n_cancelled; i++)
            fprintf(stderr, "%s: Terminating job %llu\n", c->prog,
                    (unsigned long long)cr->cancelled[i]);
        for (size_t i = 0; i < cr->n_not_found; i++) {
            if (listed(ids, nids, cr->not_found[i])) {
                kill_error(c, cr->not_found[i], MSG_NOT_FOUND);
                rc = 1;
            }
        }
        for (size_t i = 0; !quiet && i < cr->n_already_done; i++) {
            if (listed(ids, nids, cr->already_done[i])) {
                kill_error(c, cr->already_done[i], MSG_ALREADY_DONE);
                rc = 1;
            }
        }
    }
    spurclient_response_free(r);
out:
    free(ids);
    return rc;
}
