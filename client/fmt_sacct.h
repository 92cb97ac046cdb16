/*
 * fmt_sacct.h - sacct's pure half: its options into an AcctQueryRequest and output
 * settings, Slurm's time formats, the field table, and the rows it prints (table,
 * -p/-P and --json). The reference is Slurm 22.05's sacct(1) and its print_fields
 * output; where spur differs, the man page (man/sacct.1) says so.
 *
 * Guarantees:
 *   - Nothing here reads the clock, the environment, the password database or a socket:
 *     "now" comes in as an argument (local time through localtime_r, so TZ pins it), the
 *     group name lookup and the cluster name in struct sacct_ctx, output goes to the FILE *
 *     given. Tests pin every byte.
 *   - Option errors are refused whole with one line in err, in getopt's or Slurm's words
 *     ("Invalid field requested: \"Foo\"", "Invalid time specification: X", "Invalid job
 *     state specified: X", "Invalid job id X"); sacct_parse_args() then returns -1.
 *   - Table cells are Slurm's: a value wider than its column is cut to width - 1 bytes and
 *     ends in '+'; a positive width right-justifies, a negative one left-justifies; every
 *     column is followed by one space; the header is followed by a line of dashes.
 *     -P separates fields with '|'; -p ends every field with '|'.
 *   - Rows: each job once (by job id, as given), and unless -X a job that started is
 *     followed by its "<id>.batch" step (JobName batch, the job's times, state and exit
 *     code), as Slurm prints the batch step.
 *
 * Memory: struct sacct_opts owns its lists (sacct_opts_free()); format points into argv.
 * struct sacct_cols owns its array (sacct_cols_free()). The AcctJob messages printed stay
 * the caller's; rows borrow them.
 */
#ifndef SPUR_FMT_SACCT_H
#define SPUR_FMT_SACCT_H

#include "spur.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef Spur__Api__AcctJob sacct_job;

#define SACCT_MAX_STATES 16

/* Slurm 22.05's default, --brief and (the fields of --long spur has) --long formats. */
#define SACCT_FORMAT_DEFAULT "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
#define SACCT_FORMAT_BRIEF   "JobID,State,ExitCode"
#define SACCT_FORMAT_LONG                                                                          \
    "JobID,JobIDRaw,JobName,Partition,AllocCPUS,Elapsed,State,ExitCode,ReqMem,ReqCPUS,"            \
    "AllocNodes,NNodes,NodeList,Submit,Start,End,Timelimit,User,Account"

enum sacct_action { SACCT_RUN, SACCT_HELP, SACCT_USAGE, SACCT_VERSION, SACCT_HELPFORMAT };
enum sacct_mode { SACCT_TABLE, SACCT_PARSABLE /* -p */, SACCT_PARSABLE2 /* -P */ };

struct sacct_opts {
    enum sacct_action action;
    uint64_t *job_ids;
    size_t n_job_ids;
    char **users; /* as given: names or uids (the command turns uids into names) */
    size_t n_users;
    bool all_users;
    int states[SACCT_MAX_STATES];
    size_t n_states;
    uint64_t start_ms, end_ms; /* after the defaults; 0: unbounded */
    bool start_given, end_given;
    char **partitions, **accounts, **names;
    size_t n_partitions, n_accounts, n_names;
    const char *format; /* -o as given (borrowed), else the -l, -b or default format */
    bool allocations, header, json, longfmt, brief;
    enum sacct_mode mode;
};

/*
 * Parse sacct's command line (argv[0] is the program) at wall time now_ms, and apply
 * Slurm's defaults: -S is 00:00 today, unless -j is given (then unbounded) or -s is (then
 * now); -E is unbounded (now). Returns 0; -2 for an option getopt refuses (err in its
 * words, which sacct prints as Slurm's does: "sacct: invalid option -- 'Z'", no more); -1
 * with err for anything else. Uses getopt_long (resets it).
 */
int sacct_parse_args(int argc, char **argv, uint64_t now_ms, struct sacct_opts *o, char *err,
                     size_t errlen);
void sacct_opts_free(struct sacct_opts *o);

/*
 * One of Slurm's time forms, local time, at wall time now_ms: HH:MM[:SS][AM|PM],
 * MMDD[YY], MM/DD[/YY], MM.DD[.YY] (each with an optional -HH:MM[:SS]),
 * YYYY-MM-DD[THH:MM[:SS]], now[{+|-}N[seconds|minutes|hours|days|weeks]], today,
 * midnight, noon, elevenses, fika, teatime, tomorrow; also a number of seconds since the
 * epoch prefixed by '@'. Returns 0 with *ms, or -1 with err.
 */
int sacct_parse_time(const char *s, uint64_t now_ms, uint64_t *ms, char *err, size_t errlen);

/* The fields: index into the table below. */
struct sacct_col {
    int field;
    int width; /* Slurm's sign: > 0 right-justified, < 0 left-justified */
};
struct sacct_cols {
    struct sacct_col *v;
    size_t n;
};

/*
 * "JobID,JobName%30,state" (names in any case, %N a width, %-N left-justified). Returns
 * 0, or -1 with err "Invalid field requested: \"X\"".
 */
int sacct_cols_parse(const char *list, struct sacct_cols *cols, char *err, size_t errlen);
void sacct_cols_free(struct sacct_cols *cols);
/* The names of every field, as --helpformat prints them (several to a line). */
void sacct_print_fields(FILE *out);

struct sacct_ctx {
    uint64_t now_ms;     /* wall clock, for the elapsed time of running jobs */
    const char *cluster; /* the Cluster field; NULL: "" */
    /* The name of a group, or NULL to print the number. NULL function: numbers. */
    const char *(*group_name)(uint32_t gid, void *arg);
    void *arg;
};

struct sacct_row {
    const sacct_job *job;
    bool batch; /* the job's batch step line */
};

/*
 * The rows of jobs[0..n): each job, then its batch step unless allocations (-X) or it
 * never started. *rows is malloc'd (the caller frees it). Returns 0 or -1 (out of memory).
 */
int sacct_rows(const sacct_job *const *jobs, size_t n, bool allocations, struct sacct_row **rows,
               size_t *nrows);
/* The text of one cell into buf (NUL-terminated, at most len bytes). */
void sacct_cell(char *buf, size_t len, int field, const struct sacct_row *row,
                const struct sacct_ctx *ctx);
/* The header (when header) and every row, in mode. */
void sacct_print(FILE *out, const struct sacct_cols *cols, const struct sacct_row *rows, size_t n,
                 enum sacct_mode mode, bool header, const struct sacct_ctx *ctx);
/*
 * Slurm 22.05's --json: {"meta": {...}, "errors": [], "warnings": [...], "jobs": [...]}
 * with Slurm's keys; times in seconds since the epoch (0: none), time.limit in minutes.
 * warning (NULL or "": none) goes into "warnings"; source into meta.spur.source.
 */
void sacct_print_json(FILE *out, const sacct_job *const *jobs, size_t n, bool allocations,
                      const char *source, const char *warning, const struct sacct_ctx *ctx);

/* Does the job pass every filter of o that has entries (ids, users, states, partitions,
 * accounts, names, the -S/-E window)? users match a name or a uid written as a number. */
bool sacct_job_matches(const sacct_job *j, const struct sacct_opts *o);

#endif
