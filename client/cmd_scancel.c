/*
 * cmd_scancel.c - scancel: cancel jobs by id, or every job that matches filters.
 *
 * Job ids alone: one exactly-once cancel request per id, so each failure names its job
 * in Slurm's words ("Kill job error on job id 42: Invalid job id specified"). With any
 * filter (-u -t -n -p --me), one cancel_jobs request carries the filters and the ids, and
 * only jobs that match all of them are cancelled; filters that match nothing are not an
 * error.
 *
 * Messages and exit status as Slurm 22.05's scancel gives them (seen with slurm-client of
 * Debian 12): cancelling a job that is unknown or already over is not an error (exit 0;
 * the "Kill job error" line only with -v, never with -Q); a job of another user (DENIED)
 * says "Kill job error on job id 42: Access/permission denied" and exits 210 (Slurm's
 * ESLURM_ACCESS_DENIED, 2002, as an 8-bit status); any other failure exits 1. With several
 * failures the last one's status is the exit status, as with Slurm.
 *
 * -s/--signal SIG (a name with or without "SIG", any case, or a number, as Slurm takes
 * it: KILL, SIGKILL, kill, 9) signals the jobs instead of cancelling them: one
 * SignalJobRequest per job id. There Slurm does call an unknown or finished job an error
 * ("Invalid job id specified", exit 1; -Q silences a finished one), and a pending job
 * "Job can not be altered now, try again later" (exit 228: ESLURM_TRANSITION_STATE_NO_UPDATE,
 * 2020). A signal goes to named jobs only; with filters it is refused (the filters are
 * resolved on the controller for a cancel, and signalling has no such request yet).
 */
#include "cli.h"
#include "job_filter.h"
#include "names.h"

#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CODE(x)          SPUR__API__CODE__CODE_##x
#define MSG_NOT_FOUND    "Invalid job id specified"
#define MSG_ALREADY_DONE "Job/step already completing or completed"
#define MSG_PENDING      "Job can not be altered now, try again later"
#define RC_DENIED        210 /* ESLURM_ACCESS_DENIED (2002) & 0xff, Slurm's exit status */
#define RC_NO_UPDATE     228 /* ESLURM_TRANSITION_STATE_NO_UPDATE (2020) & 0xff */

static const char synopsis[] =
    "Usage: scancel [-u USER] [-t STATE] [-n NAME] [-p PARTITION] [--me] [-s SIGNAL] "
    "[-Q] [-v] [JOBID...]\n";

static const char help_text[] =
    "Usage: scancel [OPTIONS] [JOBID...]\n"
    "  -u, --user=NAME        jobs of this user          --me  your own jobs\n"
    "  -t, --state=STATE      PENDING (PD) or RUNNING (R) jobs only\n"
    "  -n, --name=NAME        jobs with this name        -p, --partition=NAME\n"
    "  -s, --signal=SIGNAL    send SIGNAL (KILL, SIGUSR1, 9, ...) instead of cancelling\n"
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

static const struct {
    const char *name;
    int sig;
} signal_names[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT},     {"ILL", SIGILL},
    {"TRAP", SIGTRAP}, {"ABRT", SIGABRT},   {"BUS", SIGBUS},       {"FPE", SIGFPE},
    {"KILL", SIGKILL}, {"USR1", SIGUSR1},   {"SEGV", SIGSEGV},     {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},   {"TERM", SIGTERM},     {"CHLD", SIGCHLD},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP},   {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU}, {"URG", SIGURG},     {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ},
    {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"VTALRM", SIGVTALRM}, {"SYS", SIGSYS},
};

/* A signal as Slurm's scancel takes it: "KILL", "SIGKILL", "kill" or "9". -1: unknown. */
static int signal_parse(const char *s)
{
    if (s[0] >= '0' && s[0] <= '9') {
        char *end;
        long v = strtol(s, &end, 10);
        return *end == '\0' && v >= 1 && v < NSIG ? (int)v : -1;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof(signal_names) / sizeof(signal_names[0]); i++)
        if (strcasecmp(s, signal_names[i].name) == 0)
            return signal_names[i].sig;
    return -1;
}

/* -s: one SignalJobRequest per job; errors as Slurm prints them. */
static int signal_by_id(struct cli *c, const uint64_t *ids, size_t n, int sig, bool quiet,
                        bool verbose)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        Spur__Api__Request req = SPUR__API__REQUEST__INIT;
        Spur__Api__SignalJobRequest sj = SPUR__API__SIGNAL_JOB_REQUEST__INIT;
        sj.job_id = ids[i];
        sj.signal = sig;
        req.op_case = SPUR__API__REQUEST__OP_SIGNAL_JOB;
        req.signal_job = &sj;
        if (verbose)
            fprintf(stderr, "%s: Signal %d to job %llu\n", c->prog, sig,
                    (unsigned long long)ids[i]);
        spurclient_response *r = cli_call_any(c, &req, true);
        if (r == NULL)
            return 1;
        if (r->code == CODE(NOT_FOUND)) {
            kill_error(c, ids[i], MSG_NOT_FOUND);
            failed = 1;
        } else if (r->code == CODE(DENIED)) {
            kill_error(c, ids[i], CLI_MSG_DENIED);
            failed = RC_DENIED;
        } else if (r->code == CODE(CONFLICT)) {
            /* Not running: pending, or already over (the controller's line says which). */
            bool pending = r->error != NULL && strstr(r->error, "pending") != NULL;
            if (pending) {
                kill_error(c, ids[i], MSG_PENDING);
                failed = RC_NO_UPDATE;
            } else if (!quiet) {
                kill_error(c, ids[i], MSG_NOT_FOUND); /* Slurm's word for a finished job */
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
        if (r->code == CODE(NOT_FOUND) || r->code == CODE(CONFLICT)) {
            /* Nothing left to cancel: not an error; said with -v (never with -Q). */
            if (verbose && !quiet)
                kill_error(c, ids[i],
                           r->code == CODE(NOT_FOUND) ? MSG_NOT_FOUND : MSG_ALREADY_DONE);
        } else if (r->code == CODE(DENIED)) {
            kill_error(c, ids[i], CLI_MSG_DENIED); /* Slurm: a job of another user */
            failed = RC_DENIED;
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
        {"user", required_argument, NULL, 'u'},
        {"state", required_argument, NULL, 't'},
        {"name", required_argument, NULL, 'n'},
        {"jobname", required_argument, NULL, 'n'},
        {"partition", required_argument, NULL, 'p'},
        {"quiet", no_argument, NULL, 'Q'},
        {"verbose", no_argument, NULL, 'v'},
        {"me", no_argument, NULL, OPT_ME},
        {"signal", required_argument, NULL, 's'},
        {"help", no_argument, NULL, CLI_OPT_HELP},
        {"usage", no_argument, NULL, CLI_OPT_USAGE},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    Spur__Api__CancelJobsRequest cj = SPUR__API__CANCEL_JOBS_REQUEST__INIT;
    char *users[1] = {NULL}, *names[1] = {NULL}, *parts[1] = {NULL};
    Spur__Api__JobState states[1];
    bool quiet = false, verbose = false, filters = false;
    int sig = 0;
    uint64_t *ids = NULL;
    size_t nids = 0;
    char err[300];
    char me[256], uname[256];
    int rc = 1;

    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":u:t:n:p:s:QvV", lopts, NULL)) != -1) {
        switch (ch) {
        case 'u': {
            /* Slurm's scancel refuses a user this host does not know, before anything. */
            bool uid = optarg[0] != '\0' && optarg[strspn(optarg, "0123456789")] == '\0';
            struct passwd *pw = uid ? getpwuid((uid_t)strtoul(optarg, NULL, 10)) : getpwnam(optarg);
            if (pw == NULL) {
                cli_error(c, "Invalid user name: %s", optarg);
                goto out;
            }
            snprintf(uname, sizeof(uname), "%s", pw->pw_name); /* a uid as its name */
            users[0] = uname;
            cj.n_users = 1;
            filters = true;
            break;
        }
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
        case 's':
            sig = signal_parse(optarg);
            if (sig < 0) {
                cli_error(c, "Unknown job signal: %s", optarg);
                goto out;
            }
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
    if (sig != 0 && filters) {
        cli_error(c, "--signal takes job ids only, not filters (-u -t -n -p --me)");
        goto out;
    }
    if (sig != 0) {
        rc = signal_by_id(c, ids, nids, sig, quiet, verbose);
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
    spurclient_response *r = cli_call_any(c, &req, true);
    if (r == NULL)
        goto out;
    if (r->code != CODE(OK)) {
        /* The whole request refused (another user's jobs by filter): Slurm's status too. */
        cli_response_error(c, r, NULL);
        rc = r->code == CODE(DENIED) ? RC_DENIED : 1;
        spurclient_response_free(r);
        goto out;
    }
    rc = 0;
    Spur__Api__CancelJobsResponse *cr = r->cancel_jobs;
    if (cr != NULL) {
        for (size_t i = 0; verbose && i < cr->n_cancelled; i++)
            fprintf(stderr, "%s: Terminating job %llu\n", c->prog,
                    (unsigned long long)cr->cancelled[i]);
        /* Named jobs that are unknown or over: not an error, said with -v (cancel_by_id). */
        for (size_t i = 0; verbose && !quiet && i < cr->n_not_found; i++)
            if (listed(ids, nids, cr->not_found[i]))
                kill_error(c, cr->not_found[i], MSG_NOT_FOUND);
        for (size_t i = 0; verbose && !quiet && i < cr->n_already_done; i++)
            if (listed(ids, nids, cr->already_done[i]))
                kill_error(c, cr->already_done[i], MSG_ALREADY_DONE);
        /* Another user's job: always said, whatever -Q (Slurm does too). */
        for (size_t i = 0; i < cr->n_denied; i++) {
            kill_error(c, cr->denied[i], CLI_MSG_DENIED);
            rc = RC_DENIED;
        }
    }
    spurclient_response_free(r);
out:
    free(ids);
    return rc;
}
