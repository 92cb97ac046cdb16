/*
 * cmd_sacct.c - sacct: the accounting records of jobs, finished or not, in Slurm's
 * columns (fmt_sacct.h does the parsing and printing; this file asks and prints).
 *
 * The question is Request.acct_query, a read (write=false) that the leader answers: it
 * merges PostgreSQL's jobs table with the jobs its replicated state still holds (a
 * follower forwards the request). The answer's warning (no database configured, the
 * database unreachable) prints once on stderr as "sacct: warning: <text>", as Slurm warns;
 * the jobs print all the same. Who: without -u or -a only the caller's jobs, except for
 * root, who sees everyone's (Slurm's rule). Filters go to the server and are applied again
 * here, so the output is right even from a server that ignores one.
 *
 * Exit status: 0, or 1 on any error (options, transport, an error answer).
 */
#include "cli.h"
#include "fmt_sacct.h"
#include "strv.h"
#include "util.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char synopsis[] =
    "Usage: sacct [-j LIST] [-u LIST | -a] [-S TIME] [-E TIME] [-s LIST] [-r LIST] "
    "[-A LIST] [--name LIST] [-o FIELDS] [-X] [-n] [-p | -P] [-l | -b] [--json]\n";

static const char help_text[] =
    "Usage: sacct [OPTIONS]\n"
    "  -j, --jobs=LIST         job ids (comma list); the default start time is then unbounded\n"
    "  -u, --user=LIST         users (names or uids)   -a, --allusers  every user's jobs\n"
    "  -S, --starttime=TIME    jobs not ended before TIME (default 00:00 today)\n"
    "  -E, --endtime=TIME      jobs submitted before TIME (default now)\n"
    "      TIME: HH:MM[:SS], MMDD[YY], MM/DD[/YY], YYYY-MM-DD[THH:MM[:SS]], today,\n"
    "            midnight, noon, now[{+|-}N[seconds|minutes|hours|days|weeks]]\n"
    "  -s, --state=LIST        states (PENDING,RUNNING,... or PD,R,CA,CD,F,TO,NF,OOM)\n"
    "  -r, --partition=LIST    partitions     -A, --accounts=LIST  accounts\n"
    "      --name=LIST         job names\n"
    "  -o, --format=FIELDS     fields, e.g. JobID,JobName%30,State (-e lists them)\n"
    "  -X, --allocations       jobs only, not their batch steps\n"
    "  -n, --noheader          -p, --parsable (ends with '|')  -P, --parsable2\n"
    "  -l, --long              -b, --brief     --json  Slurm's JSON document\n"
    "  -e, --helpformat        -h, --help      --usage  -V, --version\n";

/* Turn the uids among o->users into names (a uid with no name stays a number). */
static int resolve_users(struct sacct_opts *o)
{
    for (size_t i = 0; i < o->n_users; i++) {
        char *w = o->users[i];
        if (w[0] == '\0' || w[strspn(w, "0123456789")] != '\0')
            continue;
        struct passwd *pw = getpwuid((uid_t)strtoul(w, NULL, 10));
        if (pw == NULL)
            continue;
        if (strv_replace(&o->users[i], pw->pw_name) != 0)
            return -1;
    }
    return 0;
}

static int by_id(const void *a, const void *b)
{
    const sacct_job *x = *(const sacct_job *const *)a, *y = *(const sacct_job *const *)b;
    return x->job_id < y->job_id ? -1 : x->job_id > y->job_id;
}

int cmd_sacct(struct cli *c, int argc, char **argv)
{
    struct sacct_opts o;
    struct sacct_cols cols = {0};
    char err[512];
    int rc = 1;
    spurclient_response *r = NULL;
    const sacct_job **sel = NULL;
    struct sacct_row *rows = NULL;
    size_t nrows = 0;
    uint64_t now = wall_ms();

    int prc = sacct_parse_args(argc, argv, now, &o, err, sizeof(err));
    if (prc == -2) {
        fprintf(stderr, "%s: %s\n", c->prog, err); /* Slurm's sacct adds no "Try" line */
        return 1;
    }
    if (prc != 0) {
        cli_error(c, "%s", err);
        return 1;
    }
    switch (o.action) {
    case SACCT_HELP:
        fputs(help_text, stdout);
        rc = 0;
        goto out;
    case SACCT_USAGE:
        fputs(synopsis, stdout);
        rc = 0;
        goto out;
    case SACCT_VERSION:
        cli_print_version();
        rc = 0;
        goto out;
    case SACCT_HELPFORMAT:
        sacct_print_fields(stdout);
        rc = 0;
        goto out;
    case SACCT_RUN:
        break;
    }
    if (!o.json && sacct_cols_parse(o.format, &cols, err, sizeof(err)) != 0) {
        cli_error(c, "%s", err);
        goto out;
    }
    if (resolve_users(&o) != 0)
        goto oom;
    if (o.all_users) {
        strv_free(o.users, o.n_users);
        o.users = NULL;
        o.n_users = 0;
    } else if (o.n_users == 0 && getuid() != 0) {
        /* Slurm's default: your own jobs (root: everyone's). */
        struct passwd *pw = getpwuid(getuid());
        if (pw == NULL) {
            cli_error(c, "cannot tell who you are (uid %u)", (unsigned)getuid());
            goto out;
        }
        size_t cap = 0;
        if (strv_push(&o.users, &o.n_users, &cap, pw->pw_name, strlen(pw->pw_name)) != 0)
            goto oom;
    }

    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__AcctQueryRequest q = SPUR__API__ACCT_QUERY_REQUEST__INIT;
    Spur__Api__JobState wire_states[SACCT_MAX_STATES];
    for (size_t i = 0; i < o.n_states; i++)
        wire_states[i] = (Spur__Api__JobState)o.states[i];
    q.n_job_ids = o.n_job_ids;
    q.job_ids = o.job_ids;
    q.n_users = o.n_users;
    q.users = o.users;
    q.n_states = o.n_states;
    q.states = wire_states;
    q.start_ms = o.start_ms;
    q.end_ms = o.end_ms;
    q.n_partitions = o.n_partitions;
    q.partitions = o.partitions;
    q.n_accounts = o.n_accounts;
    q.accounts = o.accounts;
    q.n_names = o.n_names;
    q.names = o.names;
    req.op_case = SPUR__API__REQUEST__OP_ACCT_QUERY;
    req.acct_query = &q;
    r = cli_call(c, &req, false);
    if (r == NULL)
        goto out;
    Spur__Api__AcctQueryResponse *a = r->acct_query;
    if (a == NULL) {
        cli_error(c, "the answer carries no accounting records");
        goto out;
    }
    if (a->warning != NULL && a->warning[0] != '\0')
        fprintf(stderr, "%s: warning: %s\n", c->prog, a->warning);
    if (a->truncated)
        fprintf(stderr,
                "%s: warning: more jobs matched than the controller returns (%zu "
                "shown); narrow the query\n",
                c->prog, a->n_jobs);

    sel = calloc(a->n_jobs ? a->n_jobs : 1, sizeof(*sel));
    if (sel == NULL)
        goto oom;
    size_t m = 0;
    for (size_t i = 0; i < a->n_jobs; i++)
        if (a->jobs[i] != NULL && sacct_job_matches(a->jobs[i], &o))
            sel[m++] = a->jobs[i];
    qsort(sel, m, sizeof(*sel), by_id);

    struct cli_group_cache gc = {0};
    struct sacct_ctx ctx = {
        .now_ms = now, .cluster = c->cluster_name, .group_name = cli_group_name, .arg = &gc};
    if (o.json) {
        sacct_print_json(stdout, sel, m, o.allocations, a->source, a->warning, &ctx);
    } else {
        if (sacct_rows(sel, m, o.allocations, &rows, &nrows) != 0)
            goto oom;
        sacct_print(stdout, &cols, rows, nrows, o.mode, o.header, &ctx);
    }
    if (fflush(stdout) != 0) {
        cli_error(c, "cannot write the output");
        goto out;
    }
    rc = 0;
    goto out;
oom:
    cli_error(c, "out of memory");
out:
    free(rows);
    free(sel);
    spurclient_response_free(r);
    sacct_cols_free(&cols);
    sacct_opts_free(&o);
    return rc;
}
