/*
 * format.h - the text forms of jobs, nodes and partitions: squeue and sinfo tables,
 * scontrol's Key=Value records, --json objects, and the small input grammars the
 * commands share (state names, job id lists, host lists, scontrol update arguments).
 *
 * Guarantees (Slurm's user-visible forms, which scripts parse):
 *   - Job states print as Slurm's codes (PD R CG CD F CA TO NF) and names (PENDING ...
 *     NODE_FAIL); node states as sinfo's (idle alloc mix down drain drng unk, long forms
 *     idle allocated mixed down drained draining unknown) and scontrol's (IDLE,
 *     ALLOCATED, MIXED, DOWN, IDLE+DRAIN, MIXED+DRAIN, UNKNOWN).
 *   - Durations print as squeue does (M:SS, H:MM:SS, D-HH:MM:SS) and scontrol does
 *     (HH:MM:SS, D-HH:MM:SS); timestamps as local ISO 8601 without a zone
 *     (2026-01-31T12:00:00).
 *   - A format string is text with fields "%[.|-][#|WIDTH]X": WIDTH pads (and truncates)
 *     the field, '.' right-justifies, '-' (the default) left-justifies, '#' sizes the
 *     column to its widest value, no width prints the value as it is; "%%" is a '%'.
 *     Headers follow the same width rules. An unknown field letter is an error naming it.
 *   - Node lists print compressed (node[01-04,7]) and any list the commands accept may be
 *     written that way; an expansion is refused past FMT_HOSTLIST_MAX names.
 *   - Nothing here reads the clock, the environment or a socket: "now" and the group name
 *     lookup come in struct fmt_ctx, output goes to the FILE * given, so tests pin every
 *     byte.
 *
 * Memory: functions returning char * or vectors hand ownership to the caller (free();
 * fmt_strv_free() for vectors). struct fmt_spec is released with fmt_spec_free(). The
 * protobuf messages passed in stay the caller's.
 */
#ifndef SPUR_FORMAT_H
#define SPUR_FORMAT_H

#include "json.h"
#include "spur.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef Spur__Api__Job fmt_job;
typedef Spur__Api__Node fmt_node;
typedef Spur__Api__Partition fmt_partition;

#define FMT_HOSTLIST_MAX 65536

/* Slurm's default and --long formats. */
#define FMT_SQUEUE_DEFAULT  "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
#define FMT_SQUEUE_LONG     "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
#define FMT_SINFO_DEFAULT   "%#P %.5a %.10l %.6D %.6t %N"
#define FMT_SINFO_NODE      "%#N %.6D %#P %6t"
#define FMT_SINFO_LONG      "%#P %.5a %.10l %.6D %.11T %N"
#define FMT_SINFO_SUMMARIZE "%#P %.5a %.10l %.16F %N"
#define FMT_SINFO_REASONS   "%20E %19H %N"

struct fmt_ctx {
    uint64_t now_ms; /* wall clock, for elapsed times */
    /* The name of a group, or NULL to print the number. NULL function: numbers. */
    const char *(*group_name)(uint32_t gid, void *arg);
    void *arg;
};

/* ---- states ------------------------------------------------------------------------- */

const char *fmt_job_state_code(int state); /* "PD"; "?" for an unknown value */
const char *fmt_job_state_name(int state); /* "PENDING"; "UNKNOWN" */
/* A job state from its name or code, any case; -1 when it is neither. */
int fmt_job_state_parse(const char *s);
/*
 * A comma list of job states; "all" (alone) sets *all. Fills states[] (up to max, no
 * duplicates). Returns 0, or -1 with err "Invalid job state specified: X".
 */
int fmt_job_states_parse(const char *list, int *states, size_t max, size_t *n, bool *all, char *err,
                         size_t errlen);
/* True for pending, running and completing: what squeue shows by default. */
bool fmt_job_state_active(int state);

const char *fmt_node_state_compact(const fmt_node *n);  /* sinfo %t */
const char *fmt_node_state_long(const fmt_node *n);     /* sinfo %T */
const char *fmt_node_state_scontrol(const fmt_node *n); /* scontrol State= */
/*
 * Does a sinfo -t word match this node state? Words: sinfo's compact and long names,
 * and "drain" matching both drained and draining nodes, any case. -1 for an unknown word.
 */
int fmt_node_state_matches(const char *word, int state);

/* ---- values ------------------------------------------------------------------------- */

/* squeue's elapsed form: M:SS, H:MM:SS, D-HH:MM:SS. */
void fmt_duration(char *buf, size_t len, uint64_t secs);
/* scontrol's: HH:MM:SS, D-HH:MM:SS. */
void fmt_duration_hms(char *buf, size_t len, uint64_t secs);
/* A limit in minutes: 0 prints unlimited (e.g. "UNLIMITED", "infinite"). */
void fmt_limit(char *buf, size_t len, uint32_t minutes, const char *unlimited, bool hms);
/* Local time "YYYY-MM-DDTHH:MM:SS"; 0 prints none. */
void fmt_timestamp(char *buf, size_t len, uint64_t ms, const char *none);
/* Megabytes the way Slurm prints memory: 512M, 4G, 2T (exact multiples), 0. */
void fmt_mem(char *buf, size_t len, uint64_t mb);
/*
 * A stdout/stderr pattern as the job will see it: %j job id, %x job name, %u user, %N
 * first node ("" before it runs), %% a percent sign; a relative path is taken from the
 * job's working directory.
 */
char *fmt_expand_path(const fmt_job *j, const char *pattern);

/* ---- lists -------------------------------------------------------------------------- */

/* Compress names into Slurm's host list form ("a[1-3,5],b"); sorted, duplicates gone. */
char *fmt_hostlist(char *const *names, size_t n);
/*
 * Expand "a[1-3,05-06],b" into names (*out NULL-terminated, *n of them). Returns 0, or -1
 * with err naming the problem.
 */
int fmt_hostlist_expand(const char *expr, char ***out, size_t *n, char *err, size_t errlen);
/* Split "a,b,,c" into non-empty words. Returns 0 or -1 (out of memory). */
int fmt_split_list(const char *list, char ***out, size_t *n);
void fmt_strv_free(char **v, size_t n);
/*
 * Job ids from comma lists ("42", "42,43"); appends to *ids (realloc'd). Returns 0, or -1
 * with err "Invalid job id X" naming the first word that is not a job id.
 */
int fmt_job_ids_parse(const char *list, uint64_t **ids, size_t *n, char *err, size_t errlen);

/* ---- filters and order ---------------------------------------------------------------- */

struct fmt_job_filter {
    const uint64_t *ids;
    size_t nids;
    char **users;
    size_t nusers;
    const int *states; /* none: any state */
    size_t nstates;
    char **partitions;
    size_t npartitions;
    char **names;
    size_t nnames;
};

/* Does the job pass every filter that has entries? */
bool fmt_job_matches(const fmt_job *j, const struct fmt_job_filter *f);
/* squeue's order: partition, then state (pending first), then job id. */
void fmt_sort_jobs(fmt_job **jobs, size_t n);

/* ---- % formats ---------------------------------------------------------------------- */

enum fmt_kind { FMT_JOBS, FMT_SINFO };

struct fmt_field {
    char type;       /* the field letter; 0: literal text */
    char *text;      /* literal text (type 0) */
    int width;       /* -1: none */
    bool right;      /* '.' given */
    bool auto_width; /* '#' given */
};

struct fmt_spec {
    enum fmt_kind kind;
    struct fmt_field *fields;
    size_t n;
};

/* Returns 0, or -1 with err naming the bad field. */
int fmt_spec_parse(const char *format, enum fmt_kind kind, struct fmt_spec *spec, char *err,
                   size_t errlen);
void fmt_spec_free(struct fmt_spec *spec);

/* squeue: a header line (unless !header) and one line per job, in the order given. */
void fmt_squeue(FILE *out, const struct fmt_spec *spec, fmt_job *const *jobs, size_t n, bool header,
                const struct fmt_ctx *ctx);

struct fmt_sinfo_opts {
    bool node_view; /* -N: one line per node and partition */
    bool header;
    bool reasons;    /* -R: only nodes with a reason, grouped by reason */
    bool hide_empty; /* leave out partitions without nodes (a node filter is on) */
};

/*
 * sinfo: in the partition view, one line per partition and group of nodes that print
 * alike (so by state with the default format); a partition without nodes prints one line
 * with NODES 0. Nodes belong to a partition when the partition lists them or they list
 * the partition. Partitions print in the order given; nodes by name.
 */
void fmt_sinfo(FILE *out, const struct fmt_spec *spec, fmt_partition *const *parts, size_t np,
               fmt_node *const *nodes, size_t nn, const struct fmt_sinfo_opts *o,
               const struct fmt_ctx *ctx);

/* ---- scontrol show -------------------------------------------------------------------- */

void fmt_show_job(FILE *out, const fmt_job *j, const struct fmt_ctx *ctx);
void fmt_show_node(FILE *out, const fmt_node *n, const struct fmt_ctx *ctx);
void fmt_show_partition(FILE *out, const fmt_partition *p, const struct fmt_ctx *ctx);

/* ---- JSON ------------------------------------------------------------------------------- */

void fmt_json_job(struct json *j, const fmt_job *job);
void fmt_json_node(struct json *j, const fmt_node *n);
void fmt_json_partition(struct json *j, const fmt_partition *p);

/* ---- scontrol update / create ----------------------------------------------------------- */

struct fmt_node_update {
    char *nodes;  /* the NodeName= value (a host list) */
    char *state;  /* "drain", "resume", "down" or "idle" */
    char *reason; /* NULL when not given */
};

/*
 * Parse "NodeName=X State=S [Reason=R]" words (keys in any case). Refuses an unknown
 * key ("Update of this parameter is not supported: K=V"), an unknown state ("Invalid
 * node state specified: S"), and DRAIN or DOWN without a Reason (Slurm's "You must
 * specify a reason when DOWNING or DRAINING a node. Request denied"). Returns 0 or -1.
 */
int fmt_node_update_parse(int argc, char *const *argv, struct fmt_node_update *u, char *err,
                          size_t errlen);
void fmt_node_update_free(struct fmt_node_update *u);

struct fmt_node_create {
    char *name;
    char *address; /* NodeAddr=, "" when not given */
    uint32_t cpus;
    uint64_t mem_mb;
    char **features; /* NULL-terminated */
    size_t nfeatures;
};

/*
 * Parse "NodeName=X CPUs=N RealMemory=MB [Features=a,b] [NodeAddr=host]" (keys in any
 * case; a leading "node" word is skipped, so both "create node NodeName=..." and Slurm's
 * "create NodeName=..." read the same). NodeName, CPUs (at least 1) and RealMemory are
 * required; RealMemory takes --mem's suffixes. Returns 0 or -1 naming the problem.
 */
int fmt_node_create_parse(int argc, char *const *argv, struct fmt_node_create *n, char *err,
                          size_t errlen);
void fmt_node_create_free(struct fmt_node_create *n);

#endif
