/*
 * cmd_sbatch.c - sbatch: submit a batch script.
 *
 * The I/O around sbatch_parse.c: read the script (a file, or standard input when no file
 * is named and it is not a terminal), never more than controller.max_script_bytes + 1
 * bytes of it, gather the working directory, the environment and who is submitting, and
 * send one exactly-once submit request. Every decision about options, directives and
 * defaults is sbatch_parse.c's. Prints "Submitted batch job N" (just N with --parsable,
 * nothing with -Q); exit status 0 on success, 1 on any error.
 */
#include "buf.h"
#include "cli.h"
#include "sbatch_parse.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

static const char help_text[] =
    "Usage: sbatch [OPTIONS] [SCRIPT]\n"
    "  -J, --job-name=NAME      -p, --partition=NAME     -N, --nodes=N\n"
    "  -n, --ntasks=N           -c, --cpus-per-task=N    --mem=SIZE[K|M|G|T]\n"
    "  -t, --time=LIMIT         (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], UNLIMITED)\n"
    "  -o, --output=PATTERN     -e, --error=PATTERN      (default slurm-%j.out)\n"
    "  -D, --chdir=DIR          -H, --hold               --export=ALL|NONE|NAME[=VAL],...\n"
    "  --wrap=COMMAND           --parsable               -Q, --quiet\n"
    "  --requeue                --no-requeue             -A, --account=NAME\n"
    "  -d, --dependency=TYPE:JOBID[:JOBID...][,TYPE:JOBID...] (or ? between: any of),\n"
    "      TYPE after, afterany, afterok, afternotok; or singleton\n"
    "  --kill-on-invalid-dep=yes|no\n"
    "  -V, --version            -h, --help               --usage\n"
    "Options may also be given in the script on \"#SBATCH\" lines before its first "
    "command;\nthose on the command line win.\n";

static const char synopsis[] =
    "Usage: sbatch [-J NAME] [-p PARTITION] [-N N] [-n N] [-c N] [--mem SIZE] [-t TIME]\n"
    "              [-o OUT] [-e ERR] [-D DIR] [-H] [--export LIST] [--parsable] [-Q]\n"
    "              [--requeue | --no-requeue] [-A ACCOUNT] [-d DEPENDENCY]\n"
    "              [--kill-on-invalid-dep yes|no]\n"
    "              [--wrap CMD | SCRIPT]\n";

/*
 * Read at most cap + 1 bytes from fd (so "over the limit" can be told). Returns 0 with a
 * NUL-terminated *buf, or -1 with errno.
 */
static int read_capped(int fd, size_t cap, char **buf, size_t *len)
{
    struct buf b;
    buf_init(&b);
    while (b.len <= cap) {
        if (!buf_reserve(&b, 65536)) {
            buf_free(&b);
            errno = ENOMEM;
            return -1;
        }
        size_t want = b.cap - b.len - 1;
        if (want > cap + 1 - b.len)
            want = cap + 1 - b.len;
        ssize_t r = read(fd, b.p + b.len, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            buf_free(&b);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        buf_commit(&b, (size_t)r);
    }
    *len = b.len;
    *buf = buf_take(&b);
    if (*buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* Read the script named by path (NULL: stdin). Prints the error line and returns -1. */
static int read_script(struct cli *c, const char *path, uint32_t limit, char **buf, size_t *len)
{
    char err[300];
    size_t cap = limit ? limit : (size_t)64 << 20;
    int fd = 0;
    if (path != NULL) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            cli_error(c, "Unable to open file %s: %s", path, strerror(errno));
            return -1;
        }
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
            cli_error(c, "Unable to open file %s: %s", path, strerror(EISDIR));
            close(fd);
            return -1;
        }
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            sbatch_parse_check_size((size_t)st.st_size, true, limit, err, sizeof(err)) != 0) {
            cli_error(c, "%s: %s", path, err);
            close(fd);
            return -1;
        }
    } else if (isatty(0)) {
        cli_error(c, "no batch script: name a script file, use --wrap, or pipe a script to "
                     "standard input");
        return -1;
    }
    int rc = read_capped(fd, cap, buf, len);
    int e = errno;
    if (path != NULL)
        close(fd);
    if (rc != 0) {
        cli_error(c, "Unable to read %s: %s", path ? path : "standard input", strerror(e));
        return -1;
    }
    if (*len > cap) {
        /* Grew while read, or a pipe: only "more than the limit" is known. */
        sbatch_parse_check_size(*len, false, limit, err, sizeof(err));
        cli_error(c, "%s%s%s", path ? path : "", path ? ": " : "", err);
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}

int cmd_sbatch(struct cli *c, int argc, char **argv)
{
    struct sbatch_parse_opts opts = {0};
    struct sbatch_parse_job job = {0};
    char err[600];
    char *script = NULL;
    size_t len = 0;
    int si, rc = 1;

    int prc = sbatch_parse_parse_args(&opts, argc, argv, &si, err, sizeof(err));
    if (prc != 0) {
        if (prc == SBATCH_PARSE_USAGE)
            cli_usage_error(c, err);
        else
            cli_error(c, "%s", err);
        if (prc == SBATCH_PARSE_USAGE || prc == SBATCH_PARSE_BAD_VALUE)
            rc = 255; /* Slurm's sbatch exits 255 on an option it refuses */
        goto out;
    }
    if (opts.set & (SBATCH_HELP | SBATCH_USAGE | SBATCH_VERSION)) {
        int about = (opts.set & SBATCH_HELP)    ? CLI_OPT_HELP
                    : (opts.set & SBATCH_USAGE) ? CLI_OPT_USAGE
                                                : 'V';
        cli_print_about(about, help_text, synopsis);
        rc = 0;
        goto out;
    }
    const char *path = si < argc ? argv[si] : NULL;
    if (si + 1 < argc) {
        /* The API has no field for them; refusing beats silently dropping them. */
        cli_error(c, "arguments to the batch script are not supported (\"%s\" after %s)",
                  argv[si + 1], path);
        goto out;
    }
    uint32_t limit = c->cfg.controller.max_script_bytes;
    if (!(opts.set & SBATCH_WRAP) && read_script(c, path, limit, &script, &len) != 0)
        goto out;

    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        cli_error(c, "cannot tell the current directory: %s", strerror(errno));
        goto out;
    }
    struct passwd *pw = getpwuid(getuid());
    char uidbuf[16];
    snprintf(uidbuf, sizeof(uidbuf), "%u", (unsigned)getuid());
    struct sbatch_parse_context ctx = {
        .cwd = cwd,
        .script_path = path,
        .environ = environ,
        .max_script_bytes = limit,
        .user = pw ? pw->pw_name : uidbuf,
        .uid = (uint32_t)getuid(),
        .gid = (uint32_t)getgid(),
    };
    int brc = sbatch_parse_build(&opts, script, len, &ctx, &job, err, sizeof(err));
    if (brc != 0) {
        cli_error(c, "%s", err);
        if (brc == SBATCH_PARSE_USAGE || brc == SBATCH_PARSE_BAD_VALUE)
            rc = 255; /* a #SBATCH line's option refused: Slurm's sbatch exits 255 too */
        goto out;
    }

    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__SubmitJobRequest sj = SPUR__API__SUBMIT_JOB_REQUEST__INIT;
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    sbatch_parse_job_to_spec(&job, &spec);
    sj.spec = &spec;
    req.op_case = SPUR__API__REQUEST__OP_SUBMIT_JOB;
    req.submit_job = &sj;
    req.user = job.user;
    spurclient_response *r = cli_call_any(c, &req, true);
    if (r == NULL)
        goto out;
    if (r->code != SPUR__API__CODE__CODE_OK || r->submit_job == NULL) {
        if (r->code == SPUR__API__CODE__CODE_OK)
            cli_error(c, "Batch job submission failed: the answer carries no job id");
        else
            cli_response_error(c, r, "Batch job submission failed");
        spurclient_response_free(r);
        goto out;
    }
    unsigned long long id = (unsigned long long)r->submit_job->job_id;
    spurclient_response_free(r);
    if (job.parsable)
        printf("%llu\n", id);
    else if (!job.quiet)
        printf("Submitted batch job %llu\n", id);
    rc = 0;
out:
    free(script);
    sbatch_parse_job_free(&job);
    sbatch_parse_opts_free(&opts);
    return rc;
}
