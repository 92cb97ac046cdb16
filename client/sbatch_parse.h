/*
 * sbatch_parse.h - everything sbatch decides, without doing any I/O.
 *
 * Guarantees (Slurm's user-visible rules, so existing scripts keep working):
 *   - Options come from two places: the command line and "#SBATCH" lines of the script.
 *     A field given on the command line wins over the same field given in the script,
 *     whatever the order; within one place the last occurrence wins.
 *   - "#SBATCH" lines count only at the top of the script: scanning stops at the first
 *     line that is neither blank nor a comment. A directive must start in column one with
 *     "#SBATCH" followed by white space ("# SBATCH" and "  #SBATCH" are plain comments).
 *     Words on a directive line are split like a shell would split them (single and
 *     double quotes, backslash), and an unquoted word starting with '#' ends the line.
 *   - Option syntax: "--opt=value", "--opt value", "-X value", "-Xvalue", bundled short
 *     flags ("-HQ"), and unambiguous prefixes of long options ("--part=debug").
 *     An unknown option is an error that names it; so is a malformed value.
 *   - -t accepts minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, and UNLIMITED or
 *     INFINITE; seconds round up to the next minute; 0 and UNLIMITED mean "no limit of
 *     the job's own" (the partition's limit applies).
 *   - --mem takes a size with an optional K, M, G or T suffix (MB without one); kilobytes
 *     round up to the next megabyte.
 *   - --export: ALL (the default) sends the whole environment; NONE sends none; a list
 *     "NAME,NAME=value,..." sends only those (a NAME without a value takes its value from
 *     the environment, and is left out when unset); a list that contains ALL sends the
 *     environment with the listed values on top.
 *   - A script must be non-empty, free of NUL bytes and DOS line breaks, start with "#!",
 *     and be no larger than the configured limit; each refusal is one line naming why.
 *   - --requeue / --no-requeue say whether a node failure puts the job back in the queue
 *     (default no, as Slurm's JobRequeue=0); whichever comes last in one place wins.
 *     -A/--account names the account the job is charged to (recorded as given).
 *   - -d/--dependency is passed as written: the controller parses and judges it (one
 *     parser, docs/state-machine.md); --kill-on-invalid-dep takes yes or no.
 *   - --wrap=CMD makes the script "#!/bin/sh\nCMD\n" and cannot be combined with a
 *     script file.
 *
 * Memory: struct sbatch_parse_opts and struct sbatch_parse_job own every string they point to;
 * release them with sbatch_parse_opts_free() and sbatch_parse_job_free(). Error messages are
 * written to a caller buffer, one line without the "sbatch: error: " prefix.
 */
#ifndef SPUR_SBATCH_PARSE_H
#define SPUR_SBATCH_PARSE_H

#include "spur.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which fields of struct sbatch_parse_opts were given. */
enum {
    SBATCH_NAME = 1u << 0,
    SBATCH_PARTITION = 1u << 1,
    SBATCH_NODES = 1u << 2,
    SBATCH_NTASKS = 1u << 3,
    SBATCH_CPUS_PER_TASK = 1u << 4,
    SBATCH_MEM = 1u << 5,
    SBATCH_TIME = 1u << 6,
    SBATCH_OUTPUT = 1u << 7,
    SBATCH_ERROR = 1u << 8,
    SBATCH_CHDIR = 1u << 9,
    SBATCH_HOLD = 1u << 10,
    SBATCH_WRAP = 1u << 11,
    SBATCH_EXPORT = 1u << 12,
    SBATCH_PARSABLE = 1u << 13,
    SBATCH_QUIET = 1u << 14,
    SBATCH_HELP = 1u << 15,
    SBATCH_USAGE = 1u << 16,
    SBATCH_VERSION = 1u << 17,
    SBATCH_REQUEUE = 1u << 18, /* --requeue and --no-requeue: one field, the last wins */
    SBATCH_ACCOUNT = 1u << 19,
    SBATCH_DEPENDENCY = 1u << 20,
    SBATCH_KILL_INVALID_DEP = 1u << 21,
};

/* Options as given in one place (command line or script). */
struct sbatch_parse_opts {
    unsigned set; /* SBATCH_* bits */
    char *name;
    char *partition;
    uint32_t nodes;
    uint32_t ntasks;
    uint32_t cpus_per_task;
    uint64_t mem_mb;
    uint32_t time_min; /* 0: no limit of its own */
    char *output;
    char *error;
    char *chdir;
    bool hold;
    char *wrap;
    char *export_spec;
    bool parsable;
    bool quiet;
    bool requeue;      /* --requeue (true) / --no-requeue (false) */
    char *account;     /* -A */
    char *dependency;  /* -d, as given (the controller parses it) */
    bool kill_invalid; /* --kill-on-invalid-dep=yes */
};

/* What the I/O shell knows about the submitting process. */
struct sbatch_parse_context {
    const char *cwd;           /* absolute; the default working directory */
    const char *script_path;   /* the script file as named, or NULL (stdin or --wrap) */
    char *const *environ;      /* "NAME=value" strings, NULL-terminated; NULL: empty */
    uint32_t max_script_bytes; /* controller.max_script_bytes; 0: no limit */
    const char *user;
    uint32_t uid;
    uint32_t gid;
};

/* The job to submit: every default applied. */
struct sbatch_parse_job {
    char *name;
    char *partition; /* "" : the default partition */
    uint32_t nodes, ntasks, cpus_per_task;
    uint64_t mem_mb;
    uint32_t time_min;
    char *stdout_path;
    char *stderr_path;
    char *workdir;
    bool hold;
    char *script;
    size_t script_len;
    char **env; /* "NAME=value" */
    size_t nenv;
    char *user;
    uint32_t uid, gid;
    bool parsable;
    bool quiet;
    bool requeue;      /* default false: a node failure ends the job NODE_FAIL */
    char *account;     /* "" when not given */
    char *dependency;  /* "" when not given */
    bool kill_invalid; /* default no: a dependency that fails leaves the job pending */
};

void sbatch_parse_opts_free(struct sbatch_parse_opts *o);
void sbatch_parse_job_free(struct sbatch_parse_job *j);

/*
 * What the parsers return besides 0 and -1 (err is set for each): an option they cannot
 * take as written (unknown, ambiguous, a value missing or not allowed: err in getopt's
 * words; on a #SBATCH line, any refused line), and an option whose value is refused.
 * sbatch exits 255 for both, as Slurm's does.
 */
enum { SBATCH_PARSE_USAGE = -2, SBATCH_PARSE_BAD_VALUE = -3 };

/*
 * Parse the command line (argv[0] is the program). Stops at the first word that is not
 * an option (the script) or after "--"; *script_index is its index, or argc when there
 * is none. Returns 0, SBATCH_PARSE_USAGE, SBATCH_PARSE_BAD_VALUE, or -1 (a script
 * argument with --wrap), err set.
 */
int sbatch_parse_parse_args(struct sbatch_parse_opts *o, int argc, char *const *argv,
                            int *script_index, char *err, size_t errlen);

/*
 * Apply the #SBATCH directives at the top of script[0..len). Errors name the line.
 * Returns 0, SBATCH_PARSE_USAGE for a refused line (a bad option, value or quoting),
 * or -1 (out of memory).
 */
int sbatch_parse_parse_directives(struct sbatch_parse_opts *o, const char *script, size_t len,
                                  char *err, size_t errlen);

/* Copy into dst every field src has set (src wins). Returns 0 or -1 (out of memory). */
int sbatch_parse_merge(struct sbatch_parse_opts *dst, const struct sbatch_parse_opts *src);

/* Time limit, see above. Returns 0 or -1. */
int sbatch_parse_parse_time(const char *s, uint32_t *minutes, char *err, size_t errlen);
/* Memory size to MB, see above. Returns 0 or -1. */
int sbatch_parse_parse_mem(const char *s, uint64_t *mb, char *err, size_t errlen);

/*
 * The environment to send for an --export value (NULL: ALL). On success *out is a
 * NULL-terminated vector of "NAME=value" strings with *n entries (free each and the
 * vector). Returns 0 or -1.
 */
int sbatch_parse_export_env(const char *spec, char *const *environ, char ***out, size_t *n,
                            char *err, size_t errlen);

/* "#!/bin/sh\nCMD\n", or NULL when out of memory. */
char *sbatch_parse_wrap_script(const char *cmd);

/*
 * Refuse a script over the limit. exact: len is the real size; otherwise the script is
 * known only to be longer than limit. Returns 0 or -1.
 */
int sbatch_parse_check_size(size_t len, bool exact, uint32_t limit, char *err, size_t errlen);
/*
 * Empty, NUL bytes, DOS line breaks, no "#!" first line: the batch script rule the server
 * applies too (jobscript_check(), common/jobscript.h), with the same messages. 0 or -1.
 */
int sbatch_parse_check_script(const char *script, size_t len, char *err, size_t errlen);

/*
 * The SBATCH_* variables of environ that stand for options spur has, as Slurm's sbatch
 * reads them (sbatch(1), "INPUT ENVIRONMENT VARIABLES"): SBATCH_ACCOUNT, _JOB_NAME,
 * _PARTITION, _TIMELIMIT, _OUTPUT, _ERROR, _EXPORT, _MEM_PER_NODE, and the flags
 * _REQUEUE, _NO_REQUEUE (set by an empty value, "yes" or a non-zero number). Into *o
 * (initialised here). Returns 0, or SBATCH_PARSE_BAD_VALUE with err naming the variable.
 */
int sbatch_parse_env(struct sbatch_parse_opts *o, char *const *environ, char *err, size_t errlen);

/*
 * Build the job: script checks, directives, the SBATCH_* environment of ctx over them,
 * the command line over both, defaults
 * (name from the script file, "sbatch" for stdin, "wrap" for --wrap; stdout
 * "slurm-%j.out"; stderr with stdout; workdir the current directory, a relative -D
 * taken from it), and the environment from --export. script is NULL with --wrap.
 * Returns 0; SBATCH_PARSE_USAGE when a #SBATCH line is refused (err names the line);
 * SBATCH_PARSE_BAD_VALUE for a refused SBATCH_* value; -1 with err set for anything else.
 */
int sbatch_parse_build(const struct sbatch_parse_opts *cli, const char *script, size_t len,
                       const struct sbatch_parse_context *ctx, struct sbatch_parse_job *job,
                       char *err, size_t errlen);

/*
 * Point spec's fields at job's (job must outlive spec; nothing is copied except the env
 * vector pointer).
 */
void sbatch_parse_job_to_spec(const struct sbatch_parse_job *job, Spur__Api__JobSpec *spec);

#endif
