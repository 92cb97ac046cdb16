/*
 * fmt_sacct.c - sacct's options, time formats, fields and output (fmt_sacct.h).
 *
 * Reference: Slurm 22.05 sacct(1) (options, defaults, time formats, the field names and
 * the --json envelope of openapi/dbv0.0.38) and the column behaviour of its print_fields
 * output (width sign, '+' on truncation, one space after every column, the dash line).
 * Nothing is copied; the widths are Slurm's documented defaults.
 *
 * Invariants: every cell is written with snprintf into the caller's buffer, so no input
 * (however long a job name) overruns; a job with no start time has no batch row.
 */
#include "fmt_sacct.h"

#include "errmsg.h"
#include "hostlist.h"
#include "job_filter.h"
#include "json.h"
#include "names.h"
#include "spur_build.h"
#include "strv.h"
#include "units.h"

#include <ctype.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define JS(x) SPUR__API__JOB_STATE__JOB_##x

/* ---- fields ---------------------------------------------------------------------------- */

enum {
    F_ACCOUNT,
    F_ALLOCCPUS,
    F_ALLOCNODES,
    F_CLUSTER,
    F_DERIVEDEXITCODE,
    F_ELAPSED,
    F_ELAPSEDRAW,
    F_ELIGIBLE,
    F_END,
    F_EXITCODE,
    F_GID,
    F_GROUP,
    F_JOBID,
    F_JOBIDRAW,
    F_JOBNAME,
    F_NNODES,
    F_NODELIST,
    F_PARTITION,
    F_REASON,
    F_REQCPUS,
    F_REQMEM,
    F_REQNODES,
    F_RESTARTS,
    F_START,
    F_STATE,
    F_SUBMIT,
    F_TIMELIMIT,
    F_TIMELIMITRAW,
    F_UID,
    F_USER,
    F_WORKDIR,
    F_COUNT
};

/* Slurm's names and default widths (negative: left-justified, as Slurm's table has them). */
static const struct {
    const char *name;
    int width;
} fields[F_COUNT] = {
    [F_ACCOUNT] = {"Account", 10},
    [F_ALLOCCPUS] = {"AllocCPUS", 10},
    [F_ALLOCNODES] = {"AllocNodes", 10},
    [F_CLUSTER] = {"Cluster", 10},
    [F_DERIVEDEXITCODE] = {"DerivedExitCode", 15},
    [F_ELAPSED] = {"Elapsed", 10},
    [F_ELAPSEDRAW] = {"ElapsedRaw", 10},
    [F_ELIGIBLE] = {"Eligible", 19},
    [F_END] = {"End", 19},
    [F_EXITCODE] = {"ExitCode", 8},
    [F_GID] = {"GID", 6},
    [F_GROUP] = {"Group", 9},
    [F_JOBID] = {"JobID", -12},
    [F_JOBIDRAW] = {"JobIDRaw", -12},
    [F_JOBNAME] = {"JobName", 10},
    [F_NNODES] = {"NNodes", 8},
    [F_NODELIST] = {"NodeList", -15},
    [F_PARTITION] = {"Partition", 10},
    [F_REASON] = {"Reason", 20},
    [F_REQCPUS] = {"ReqCPUS", 8},
    [F_REQMEM] = {"ReqMem", 10},
    [F_REQNODES] = {"ReqNodes", 8},
    [F_RESTARTS] = {"Restarts", 8},
    [F_START] = {"Start", 19},
    [F_STATE] = {"State", 10},
    [F_SUBMIT] = {"Submit", 19},
    [F_TIMELIMIT] = {"Timelimit", 10},
    [F_TIMELIMITRAW] = {"TimelimitRaw", 12},
    [F_UID] = {"UID", 6},
    [F_USER] = {"User", 9},
    [F_WORKDIR] = {"WorkDir", -15},
};

int sacct_cols_parse(const char *list, struct sacct_cols *cols, char *err, size_t errlen)
{
    cols->v = NULL;
    cols->n = 0;
    char **words;
    size_t nw;
    if (strv_split(list, &words, &nw) != 0)
        return errmsg_set(err, errlen, "out of memory");
    if (nw == 0) {
        strv_free(words, nw);
        return errmsg_set(err, errlen, "Invalid field requested: \"%s\"", list ? list : "");
    }
    cols->v = calloc(nw, sizeof(*cols->v));
    if (cols->v == NULL) {
        strv_free(words, nw);
        return errmsg_set(err, errlen, "out of memory");
    }
    for (size_t i = 0; i < nw; i++) {
        char *w = words[i];
        char *pct = strchr(w, '%');
        int width = 0;
        if (pct != NULL) {
            char *end;
            long v = strtol(pct + 1, &end, 10);
            if (pct[1] == '\0' || *end != '\0' || v == 0 || v > 10000 || v < -10000) {
                errmsg_set(err, errlen, "Invalid field requested: \"%s\"", w);
                goto fail;
            }
            width = (int)v;
            *pct = '\0';
        }
        int f;
        for (f = 0; f < F_COUNT; f++)
            if (strcasecmp(w, fields[f].name) == 0)
                break;
        if (f == F_COUNT) {
            errmsg_set(err, errlen, "Invalid field requested: \"%s\"", w);
            goto fail;
        }
        cols->v[cols->n].field = f;
        cols->v[cols->n].width = width ? width : fields[f].width;
        cols->n++;
    }
    strv_free(words, nw);
    return 0;
fail:
    strv_free(words, nw);
    sacct_cols_free(cols);
    return -1;
}

void sacct_cols_free(struct sacct_cols *cols)
{
    free(cols->v);
    cols->v = NULL;
    cols->n = 0;
}

void sacct_print_fields(FILE *out)
{
    for (int f = 0; f < F_COUNT; f++)
        fprintf(out, "%-18s%s", fields[f].name, (f % 4 == 3 || f == F_COUNT - 1) ? "\n" : "");
}

/* ---- cells ----------------------------------------------------------------------------- */

/* Slurm's elapsed and limit form: [D-]HH:MM:SS. */
static void hms(char *buf, size_t len, uint64_t secs)
{
    uint64_t d = secs / 86400, h = secs / 3600 % 24, m = secs / 60 % 60, s = secs % 60;
    if (d > 0)
        snprintf(buf, len, "%llu-%02llu:%02llu:%02llu", (unsigned long long)d,
                 (unsigned long long)h, (unsigned long long)m, (unsigned long long)s);
    else
        snprintf(buf, len, "%02llu:%02llu:%02llu", (unsigned long long)h, (unsigned long long)m,
                 (unsigned long long)s);
}

static uint64_t elapsed_s(const sacct_job *j, uint64_t now_ms)
{
    if (j->start_time_ms == 0)
        return 0;
    uint64_t end = j->end_time_ms ? j->end_time_ms : now_ms;
    return end > j->start_time_ms ? (end - j->start_time_ms) / 1000 : 0;
}

static const char *str_or(const char *s, const char *none)
{
    return s != NULL && s[0] != '\0' ? s : none;
}

void sacct_cell(char *buf, size_t len, int field, const struct sacct_row *row,
                const struct sacct_ctx *ctx)
{
    const sacct_job *j = row->job;
    bool b = row->batch;
    buf[0] = '\0';
    switch (field) {
    case F_ACCOUNT:
        snprintf(buf, len, "%s", str_or(j->account, ""));
        break;
    case F_ALLOCCPUS:
        snprintf(buf, len, "%u", j->start_time_ms ? j->cpus : 0);
        break;
    case F_ALLOCNODES:
        snprintf(buf, len, "%u", j->start_time_ms ? (b ? 1 : j->nnodes) : 0);
        break;
    case F_CLUSTER:
        snprintf(buf, len, "%s", str_or(ctx->cluster, ""));
        break;
    case F_DERIVEDEXITCODE:
        if (!b)
            snprintf(buf, len, "%d:%d", j->exit_code, j->exit_signal);
        break;
    case F_ELAPSED:
        hms(buf, len, elapsed_s(j, ctx->now_ms));
        break;
    case F_ELAPSEDRAW:
        snprintf(buf, len, "%llu", (unsigned long long)elapsed_s(j, ctx->now_ms));
        break;
    case F_ELIGIBLE:
        units_timestamp(buf, len, j->eligible_time_ms, "Unknown");
        break;
    case F_END:
        units_timestamp(buf, len, j->end_time_ms, "Unknown");
        break;
    case F_EXITCODE:
        snprintf(buf, len, "%d:%d", j->exit_code, j->exit_signal);
        break;
    case F_GID:
        if (!b)
            snprintf(buf, len, "%u", j->gid);
        break;
    case F_GROUP:
        if (!b) {
            const char *g = ctx->group_name ? ctx->group_name(j->gid, ctx->arg) : NULL;
            if (g != NULL)
                snprintf(buf, len, "%s", g);
            else
                snprintf(buf, len, "%u", j->gid);
        }
        break;
    case F_JOBID:
    case F_JOBIDRAW: {
        char id[64];
        if (field == F_JOBID && j->array_job_id != 0)
            snprintf(id, sizeof(id), "%llu_%u", (unsigned long long)j->array_job_id,
                     j->array_task_id);
        else
            snprintf(id, sizeof(id), "%llu", (unsigned long long)j->job_id);
        snprintf(buf, len, "%s%s", id, b ? ".batch" : "");
        break;
    }
    case F_JOBNAME:
        snprintf(buf, len, "%s", b ? "batch" : str_or(j->name, ""));
        break;
    case F_NNODES:
        snprintf(buf, len, "%u", b ? 1 : (j->nnodes ? j->nnodes : 1));
        break;
    case F_NODELIST:
        if (j->n_node_list == 0 || j->start_time_ms == 0) {
            snprintf(buf, len, "%s", "None assigned");
        } else if (b) {
            snprintf(buf, len, "%s", j->node_list[0]);
        } else {
            char *h = hostlist_compress(j->node_list, j->n_node_list);
            snprintf(buf, len, "%s", h ? h : "");
            free(h);
        }
        break;
    case F_PARTITION:
        if (!b)
            snprintf(buf, len, "%s", str_or(j->partition, ""));
        break;
    case F_REASON:
        if (!b)
            snprintf(buf, len, "%s", str_or(j->reason, "None"));
        break;
    case F_REQCPUS:
        snprintf(buf, len, "%u", j->cpus);
        break;
    case F_REQMEM:
        if (!b)
            units_mem(buf, len, j->mem_mb);
        break;
    case F_REQNODES:
        if (!b)
            snprintf(buf, len, "%u", j->nnodes ? j->nnodes : 1);
        break;
    case F_RESTARTS:
        if (!b)
            snprintf(buf, len, "%u", j->restarts);
        break;
    case F_START:
        units_timestamp(buf, len, j->start_time_ms, "Unknown");
        break;
    case F_STATE:
        /* Slurm prints "CANCELLED by <uid>" when it knows by whom; spur does not. */
        snprintf(buf, len, "%s", names_job_state_name(j->state));
        break;
    case F_SUBMIT:
        units_timestamp(buf, len, j->submit_time_ms, "Unknown");
        break;
    case F_TIMELIMIT:
        if (!b) {
            if (j->time_limit_min == 0)
                snprintf(buf, len, "%s", "UNLIMITED");
            else
                hms(buf, len, (uint64_t)j->time_limit_min * 60);
        }
        break;
    case F_TIMELIMITRAW:
        if (!b) {
            if (j->time_limit_min == 0)
                snprintf(buf, len, "%s", "UNLIMITED");
            else
                snprintf(buf, len, "%u", j->time_limit_min);
        }
        break;
    case F_UID:
        if (!b)
            snprintf(buf, len, "%u", j->uid);
        break;
    case F_USER:
        if (!b)
            snprintf(buf, len, "%s", str_or(j->user, ""));
        break;
    case F_WORKDIR:
        if (!b)
            snprintf(buf, len, "%s", str_or(j->workdir, ""));
        break;
    default:
        break;
    }
}

int sacct_rows(const sacct_job *const *jobs, size_t n, bool allocations, struct sacct_row **rows,
               size_t *nrows)
{
    *rows = calloc(n ? 2 * n : 1, sizeof(**rows));
    *nrows = 0;
    if (*rows == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        (*rows)[(*nrows)++] = (struct sacct_row){.job = jobs[i], .batch = false};
        if (!allocations && jobs[i]->start_time_ms != 0)
            (*rows)[(*nrows)++] = (struct sacct_row){.job = jobs[i], .batch = true};
    }
    return 0;
}

/* One table cell: cut to width - 1 bytes and '+' when wider, justified by the sign. */
static void put_cell(FILE *out, const char *s, int width)
{
    int w = width < 0 ? -width : width;
    size_t l = strlen(s);
    char cut[10001];
    if (l > (size_t)w) {
        memcpy(cut, s, (size_t)w - 1);
        cut[w - 1] = '+';
        cut[w] = '\0';
        s = cut;
    }
    if (width > 0)
        fprintf(out, "%*s ", w, s);
    else
        fprintf(out, "%-*s ", w, s);
}

static void put_sep(FILE *out, enum sacct_mode mode, bool last)
{
    if (mode == SACCT_PARSABLE || !last)
        fputc('|', out);
}

void sacct_print(FILE *out, const struct sacct_cols *cols, const struct sacct_row *rows, size_t n,
                 enum sacct_mode mode, bool header, const struct sacct_ctx *ctx)
{
    if (header) {
        for (size_t c = 0; c < cols->n; c++) {
            const char *name = fields[cols->v[c].field].name;
            int width = cols->v[c].width, w = width < 0 ? -width : width;
            if (mode == SACCT_TABLE) {
                if (width > 0)
                    fprintf(out, "%*.*s ", w, w, name);
                else
                    fprintf(out, "%-*.*s ", w, w, name);
            } else {
                fputs(name, out);
                put_sep(out, mode, c + 1 == cols->n);
            }
        }
        fputc('\n', out);
        if (mode == SACCT_TABLE) {
            for (size_t c = 0; c < cols->n; c++) {
                int w = cols->v[c].width < 0 ? -cols->v[c].width : cols->v[c].width;
                for (int k = 0; k < w; k++)
                    fputc('-', out);
                fputc(' ', out);
            }
            fputc('\n', out);
        }
    }
    char buf[4096];
    for (size_t r = 0; r < n; r++) {
        for (size_t c = 0; c < cols->n; c++) {
            sacct_cell(buf, sizeof(buf), cols->v[c].field, &rows[r], ctx);
            if (mode == SACCT_TABLE) {
                put_cell(out, buf, cols->v[c].width);
            } else {
                fputs(buf, out);
                put_sep(out, mode, c + 1 == cols->n);
            }
        }
        fputc('\n', out);
    }
}

/* ---- --json ---------------------------------------------------------------------------- */

static const char *signal_name(int sig)
{
    static const char *const n[] = {
        [1] = "SIGHUP",   [2] = "SIGINT",   [3] = "SIGQUIT",  [4] = "SIGILL",
        [5] = "SIGTRAP",  [6] = "SIGABRT",  [7] = "SIGBUS",   [8] = "SIGFPE",
        [9] = "SIGKILL",  [10] = "SIGUSR1", [11] = "SIGSEGV", [12] = "SIGUSR2",
        [13] = "SIGPIPE", [14] = "SIGALRM", [15] = "SIGTERM", [24] = "SIGXCPU",
    };
    if (sig > 0 && (size_t)sig < sizeof(n) / sizeof(n[0]) && n[sig] != NULL)
        return n[sig];
    return "";
}

static void json_exit(struct json *w, const sacct_job *j)
{
    json_key(w, "exit_code");
    json_obj_begin(w);
    json_kstr(w, "status", j->exit_signal ? "SIGNALED" : j->exit_code ? "FAILED" : "SUCCESS");
    json_ki64(w, "return_code", j->exit_code);
    json_key(w, "signal");
    json_obj_begin(w);
    json_ki64(w, "signal_id", j->exit_signal);
    json_kstr(w, "name", signal_name(j->exit_signal));
    json_obj_end(w);
    json_obj_end(w);
}

static void json_times(struct json *w, const sacct_job *j, const struct sacct_ctx *ctx, bool step)
{
    json_key(w, "time");
    json_obj_begin(w);
    json_ku64(w, "elapsed", elapsed_s(j, ctx->now_ms));
    if (!step) {
        json_ku64(w, "eligible", j->eligible_time_ms / 1000);
        json_ku64(w, "submission", j->submit_time_ms / 1000);
        json_ku64(w, "limit", j->time_limit_min);
    }
    json_ku64(w, "start", j->start_time_ms / 1000);
    json_ku64(w, "end", j->end_time_ms / 1000);
    json_obj_end(w);
}

static void json_state(struct json *w, const sacct_job *j)
{
    json_key(w, "state");
    json_obj_begin(w);
    json_kstr(w, "current", names_job_state_name(j->state));
    json_kstr(w, "reason", str_or(j->reason, "None"));
    json_obj_end(w);
}

static void json_one(struct json *w, const sacct_job *j, bool allocations,
                     const struct sacct_ctx *ctx)
{
    char nodes[4096];
    struct sacct_row row = {.job = j, .batch = false};
    sacct_cell(nodes, sizeof(nodes), F_NODELIST, &row, ctx);
    json_obj_begin(w);
    json_kstr(w, "account", str_or(j->account, ""));
    json_ku64(w, "allocation_nodes", j->start_time_ms ? j->nnodes : 0);
    json_key(w, "array");
    json_obj_begin(w);
    json_ku64(w, "job_id", j->array_job_id);
    json_key(w, "task_id");
    if (j->array_job_id != 0)
        json_u64(w, j->array_task_id);
    else
        json_null(w);
    json_obj_end(w);
    json_kstr(w, "cluster", str_or(ctx->cluster, ""));
    json_key(w, "derived_exit_code");
    json_obj_begin(w);
    json_kstr(w, "status", j->exit_signal ? "SIGNALED" : j->exit_code ? "FAILED" : "SUCCESS");
    json_ki64(w, "return_code", j->exit_code);
    json_obj_end(w);
    json_exit(w, j);
    const char *g = ctx->group_name ? ctx->group_name(j->gid, ctx->arg) : NULL;
    char gnum[16];
    snprintf(gnum, sizeof(gnum), "%u", j->gid);
    json_kstr(w, "group", g ? g : gnum);
    json_ku64(w, "job_id", j->job_id);
    json_kstr(w, "name", str_or(j->name, ""));
    json_kstr(w, "nodes", nodes);
    json_kstr(w, "partition", str_or(j->partition, ""));
    json_key(w, "required");
    json_obj_begin(w);
    json_ku64(w, "CPUs", j->cpus);
    json_ku64(w, "memory", j->mem_mb);
    json_obj_end(w);
    json_ku64(w, "restarts", j->restarts);
    json_state(w, j);
    json_key(w, "steps");
    json_arr_begin(w);
    if (!allocations && j->start_time_ms != 0) {
        char id[64];
        snprintf(id, sizeof(id), "%llu.batch", (unsigned long long)j->job_id);
        json_obj_begin(w);
        json_key(w, "step");
        json_obj_begin(w);
        json_ku64(w, "job_id", j->job_id);
        json_kstr(w, "id", id);
        json_kstr(w, "name", "batch");
        json_obj_end(w);
        json_state(w, j);
        json_exit(w, j);
        json_times(w, j, ctx, true);
        json_key(w, "nodes");
        json_obj_begin(w);
        json_ku64(w, "count", 1);
        json_kstr(w, "range", j->n_node_list ? j->node_list[0] : "");
        json_obj_end(w);
        json_obj_end(w);
    }
    json_arr_end(w);
    json_times(w, j, ctx, false);
    json_kstr(w, "user", str_or(j->user, ""));
    json_ku64(w, "uid", j->uid);
    json_kstr(w, "working_directory", str_or(j->workdir, ""));
    json_obj_end(w);
}

void sacct_print_json(FILE *out, const sacct_job *const *jobs, size_t n, bool allocations,
                      const char *source, const char *warning, const struct sacct_ctx *ctx)
{
    struct json w;
    json_init(&w, out);
    json_obj_begin(&w);
    json_key(&w, "meta");
    json_obj_begin(&w);
    json_key(&w, "plugin");
    json_obj_begin(&w);
    json_kstr(&w, "type", "openapi/dbv0.0.38");
    json_kstr(&w, "name", "Slurm OpenAPI DB v0.0.38");
    json_obj_end(&w);
    json_key(&w, "Slurm");
    json_obj_begin(&w);
    json_key(&w, "version");
    json_obj_begin(&w);
    json_ku64(&w, "major", 22);
    json_ku64(&w, "micro", 0);
    json_ku64(&w, "minor", 5);
    json_obj_end(&w);
    json_kstr(&w, "release", "22.05.0");
    json_obj_end(&w);
    json_key(&w, "spur");
    json_obj_begin(&w);
    json_kstr(&w, "version", SPUR_VERSION);
    json_kstr(&w, "source", str_or(source, ""));
    json_obj_end(&w);
    json_obj_end(&w);
    json_key(&w, "errors");
    json_arr_begin(&w);
    json_arr_end(&w);
    json_key(&w, "warnings");
    json_arr_begin(&w);
    if (warning != NULL && warning[0] != '\0') {
        json_obj_begin(&w);
        json_kstr(&w, "description", warning);
        json_kstr(&w, "source", "sacct");
        json_obj_end(&w);
    }
    json_arr_end(&w);
    json_key(&w, "jobs");
    json_arr_begin(&w);
    for (size_t i = 0; i < n; i++)
        json_one(&w, jobs[i], allocations, ctx);
    json_arr_end(&w);
    json_obj_end(&w);
    json_end(&w);
}

/* ---- filters --------------------------------------------------------------------------- */

bool sacct_job_matches(const sacct_job *j, const struct sacct_opts *o)
{
    if (o->n_job_ids > 0) {
        bool hit = false;
        for (size_t i = 0; i < o->n_job_ids && !hit; i++)
            hit = o->job_ids[i] == j->job_id ||
                  (j->array_job_id != 0 && o->job_ids[i] == j->array_job_id);
        if (!hit)
            return false;
    }
    if (o->n_users > 0 && !o->all_users) {
        char uid[16];
        snprintf(uid, sizeof(uid), "%u", j->uid);
        if (!strv_contains(o->users, o->n_users, j->user) &&
            !strv_contains(o->users, o->n_users, uid))
            return false;
    }
    if (o->n_states > 0) {
        bool hit = false;
        for (size_t i = 0; i < o->n_states && !hit; i++)
            hit = o->states[i] == (int)j->state;
        if (!hit)
            return false;
    }
    if (o->n_partitions > 0 && !strv_contains(o->partitions, o->n_partitions, j->partition))
        return false;
    if (o->n_accounts > 0 && !strv_contains(o->accounts, o->n_accounts, j->account))
        return false;
    if (o->n_names > 0 && !strv_contains(o->names, o->n_names, j->name))
        return false;
    if (o->start_ms != 0 && j->end_time_ms != 0 && j->end_time_ms < o->start_ms)
        return false;
    if (o->end_ms != 0 && j->submit_time_ms > o->end_ms)
        return false;
    return true;
}

/* ---- time formats ---------------------------------------------------------------------- */

/* Digits at *p, exactly n of them (n > 0) or 1..2 when n is 0; -1 when not there. */
static int digits(const char **p, int n)
{
    const char *s = *p;
    int v = 0, k = 0;
    int max = n ? n : 2;
    while (k < max && isdigit((unsigned char)s[k])) {
        v = v * 10 + (s[k] - '0');
        k++;
    }
    if (k == 0 || (n && k != n))
        return -1;
    *p = s + k;
    return v;
}

/* HH:MM[:SS] at *p into tm; 0 or -1. */
static int clock_part(const char **p, struct tm *tm)
{
    int h = digits(p, 0);
    if (h < 0 || **p != ':')
        return -1;
    (*p)++;
    int m = digits(p, 2), s = 0;
    if (m < 0)
        return -1;
    if (**p == ':') {
        (*p)++;
        s = digits(p, 2);
        if (s < 0)
            return -1;
    }
    if (h > 23 || m > 59 || s > 60)
        return -1;
    tm->tm_hour = h;
    tm->tm_min = m;
    tm->tm_sec = s;
    return 0;
}

static int bad_time(const char *s, char *err, size_t errlen)
{
    return errmsg_set(err, errlen, "Invalid time specification: %s", s);
}

static int finish(struct tm *tm, uint64_t *ms)
{
    tm->tm_isdst = -1;
    time_t t = mktime(tm);
    if (t == (time_t)-1 || t < 0)
        return -1;
    *ms = (uint64_t)t * 1000;
    return 0;
}

int sacct_parse_time(const char *s, uint64_t now_ms, uint64_t *ms, char *err, size_t errlen)
{
    if (s == NULL || s[0] == '\0')
        return bad_time("", err, errlen);
    time_t now = (time_t)(now_ms / 1000);
    struct tm tm;
    if (localtime_r(&now, &tm) == NULL)
        return bad_time(s, err, errlen);
    tm.tm_sec = tm.tm_min = tm.tm_hour = 0;

    if (strncasecmp(s, "now", 3) == 0) {
        const char *p = s + 3;
        int64_t delta = 0;
        if (*p == '+' || *p == '-') {
            int sign = *p == '-' ? -1 : 1;
            p++;
            if (!isdigit((unsigned char)*p))
                return bad_time(s, err, errlen);
            char *end;
            unsigned long long n = strtoull(p, &end, 10);
            p = end;
            int64_t unit = 1;
            if (*p != '\0') {
                static const struct {
                    const char *w;
                    int64_t secs;
                } units[] = {{"seconds", 1},
                             {"minutes", 60},
                             {"hours", 3600},
                             {"days", 86400},
                             {"weeks", 604800}};
                size_t k, l = strlen(p);
                for (k = 0; k < sizeof(units) / sizeof(units[0]); k++)
                    if (l <= strlen(units[k].w) && strncasecmp(p, units[k].w, l) == 0)
                        break;
                if (k == sizeof(units) / sizeof(units[0]))
                    return bad_time(s, err, errlen);
                unit = units[k].secs;
            }
            if (n > (unsigned long long)(INT64_MAX / 1000 / unit))
                return bad_time(s, err, errlen);
            delta = sign * (int64_t)n * unit;
        } else if (*p != '\0') {
            return bad_time(s, err, errlen);
        }
        int64_t t = (int64_t)(now_ms / 1000) + delta;
        if (t < 0)
            return bad_time(s, err, errlen);
        *ms = (uint64_t)t * 1000;
        return 0;
    }
    static const struct {
        const char *w;
        int hour;
        int days;
    } words[] = {{"today", 0, 0}, {"midnight", 0, 0}, {"noon", 12, 0},   {"elevenses", 11, 0},
                 {"fika", 15, 0}, {"teatime", 16, 0}, {"tomorrow", 0, 1}};
    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
        if (strcasecmp(s, words[k].w) == 0) {
            tm.tm_hour = words[k].hour;
            tm.tm_mday += words[k].days;
            return finish(&tm, ms) == 0 ? 0 : bad_time(s, err, errlen);
        }
    if (s[0] == '@') {
        char *end;
        unsigned long long v = strtoull(s + 1, &end, 10);
        if (s[1] == '\0' || *end != '\0' || v > UINT64_MAX / 1000 / 2)
            return bad_time(s, err, errlen);
        *ms = v * 1000;
        return 0;
    }

    const char *p = s;
    /* YYYY-MM-DD[THH:MM[:SS]] */
    if (strlen(s) >= 10 && isdigit((unsigned char)s[0]) && s[4] == '-') {
        int y = digits(&p, 4);
        if (y < 0 || *p++ != '-')
            return bad_time(s, err, errlen);
        int mo = digits(&p, 2);
        if (mo < 1 || mo > 12 || *p++ != '-')
            return bad_time(s, err, errlen);
        int d = digits(&p, 2);
        if (d < 1 || d > 31)
            return bad_time(s, err, errlen);
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        if (*p == 'T' || *p == 't') {
            p++;
            if (clock_part(&p, &tm) != 0)
                return bad_time(s, err, errlen);
        }
        if (*p != '\0' || finish(&tm, ms) != 0)
            return bad_time(s, err, errlen);
        return 0;
    }
    /* HH:MM[:SS][AM|PM]: today. */
    if (strchr(s, ':') != NULL && strchr(s, '/') == NULL && strchr(s, '-') == NULL &&
        strchr(s, '.') == NULL) {
        if (clock_part(&p, &tm) != 0)
            return bad_time(s, err, errlen);
        if (strcasecmp(p, "am") == 0 || strcasecmp(p, "pm") == 0) {
            if (tm.tm_hour < 1 || tm.tm_hour > 12)
                return bad_time(s, err, errlen);
            tm.tm_hour = tm.tm_hour % 12 + (tolower((unsigned char)p[0]) == 'p' ? 12 : 0);
            p += 2;
        }
        if (*p != '\0' || finish(&tm, ms) != 0)
            return bad_time(s, err, errlen);
        return 0;
    }
    /* MMDD[YY], MM/DD[/YY], MM.DD[.YY], each with an optional -HH:MM[:SS]. */
    int mo, d, y = -1;
    if (isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) &&
        isdigit((unsigned char)s[2])) {
        mo = digits(&p, 2);
        d = digits(&p, 2);
        if (d < 0)
            return bad_time(s, err, errlen);
        if (isdigit((unsigned char)*p)) {
            y = digits(&p, 2);
            if (y < 0)
                return bad_time(s, err, errlen);
        }
    } else {
        mo = digits(&p, 0);
        char sep = *p;
        if (mo < 0 || (sep != '/' && sep != '.'))
            return bad_time(s, err, errlen);
        p++;
        d = digits(&p, 0);
        if (d < 0)
            return bad_time(s, err, errlen);
        if (*p == sep) {
            p++;
            y = digits(&p, 2);
            if (y < 0)
                return bad_time(s, err, errlen);
        }
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31)
        return bad_time(s, err, errlen);
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    if (y >= 0)
        tm.tm_year = 100 + y;
    if (*p == '-') {
        p++;
        if (clock_part(&p, &tm) != 0)
            return bad_time(s, err, errlen);
    }
    if (*p != '\0')
        return bad_time(s, err, errlen);
    struct tm keep = tm;
    if (finish(&tm, ms) != 0)
        return bad_time(s, err, errlen);
    /* No year given: the last such date, not a future one (sacct asks about the past). */
    if (y < 0 && *ms > now_ms) {
        keep.tm_year--;
        if (finish(&keep, ms) != 0)
            return bad_time(s, err, errlen);
    }
    return 0;
}

/* ---- options --------------------------------------------------------------------------- */

static int add_list(const char *list, char ***v, size_t *n)
{
    char **words;
    size_t nw;
    if (strv_split(list, &words, &nw) != 0)
        return -1;
    return strv_move_all(v, n, words, nw);
}

void sacct_opts_free(struct sacct_opts *o)
{
    free(o->job_ids);
    strv_free(o->users, o->n_users);
    strv_free(o->partitions, o->n_partitions);
    strv_free(o->accounts, o->n_accounts);
    strv_free(o->names, o->n_names);
    memset(o, 0, sizeof(*o));
}

int sacct_parse_args(int argc, char **argv, uint64_t now_ms, struct sacct_opts *o, char *err,
                     size_t errlen)
{
    enum { OPT_JSON = 1000, OPT_NAME, OPT_HELP, OPT_USAGE };
    static const struct option lopts[] = {
        {"jobs", required_argument, NULL, 'j'},
        {"user", required_argument, NULL, 'u'},
        {"uid", required_argument, NULL, 'u'},
        {"allusers", no_argument, NULL, 'a'},
        {"starttime", required_argument, NULL, 'S'},
        {"endtime", required_argument, NULL, 'E'},
        {"state", required_argument, NULL, 's'},
        {"format", required_argument, NULL, 'o'},
        {"allocations", no_argument, NULL, 'X'},
        {"noheader", no_argument, NULL, 'n'},
        {"parsable2", no_argument, NULL, 'P'},
        {"parsable", no_argument, NULL, 'p'},
        {"long", no_argument, NULL, 'l'},
        {"brief", no_argument, NULL, 'b'},
        {"json", no_argument, NULL, OPT_JSON},
        {"partition", required_argument, NULL, 'r'},
        {"accounts", required_argument, NULL, 'A'},
        {"name", required_argument, NULL, OPT_NAME},
        {"helpformat", no_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {"usage", no_argument, NULL, OPT_USAGE},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->header = true;
    o->mode = SACCT_TABLE;
    const char *start = NULL, *end = NULL;
    bool usage = false; /* an option getopt refused: -2 */

    opterr = 0;
    optind = 0; /* glibc: a full re-initialisation, so tests may parse many command lines */
    int ch;
    while ((ch = getopt_long(argc, argv, ":j:u:aS:E:s:o:XnPplbr:A:ehV", lopts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            if (job_filter_ids_parse(optarg, &o->job_ids, &o->n_job_ids, err, errlen) != 0)
                goto fail;
            break;
        case 'u':
            if (add_list(optarg, &o->users, &o->n_users) != 0)
                goto oom;
            break;
        case 'a':
            o->all_users = true;
            break;
        case 'S':
            start = optarg;
            break;
        case 'E':
            end = optarg;
            break;
        case 's': {
            bool all = false;
            size_t k = 0;
            if (job_filter_states_parse(optarg, o->states + o->n_states,
                                        SACCT_MAX_STATES - o->n_states, &k, &all, err, errlen) != 0)
                goto fail;
            if (all) {
                errmsg_set(err, errlen, "Invalid job state specified: %s", optarg);
                goto fail;
            }
            o->n_states += k;
            break;
        }
        case 'o':
            o->format = optarg;
            break;
        case 'X':
            o->allocations = true;
            break;
        case 'n':
            o->header = false;
            break;
        case 'P':
            o->mode = SACCT_PARSABLE2;
            break;
        case 'p':
            o->mode = SACCT_PARSABLE;
            break;
        case 'l':
            o->longfmt = true;
            break;
        case 'b':
            o->brief = true;
            break;
        case OPT_JSON:
            o->json = true;
            break;
        case 'r':
            if (add_list(optarg, &o->partitions, &o->n_partitions) != 0)
                goto oom;
            break;
        case 'A':
            if (add_list(optarg, &o->accounts, &o->n_accounts) != 0)
                goto oom;
            break;
        case OPT_NAME:
            if (add_list(optarg, &o->names, &o->n_names) != 0)
                goto oom;
            break;
        case 'e':
            o->action = SACCT_HELPFORMAT;
            return 0;
        case 'h':
            o->action = SACCT_HELP;
            return 0;
        case OPT_USAGE:
            o->action = SACCT_USAGE;
            return 0;
        case 'V':
            o->action = SACCT_VERSION;
            return 0;
        case ':':
            if (optopt && strncmp(argv[optind - 1], "--", 2) != 0)
                errmsg_set(err, errlen, "option requires an argument -- '%c'", optopt);
            else
                errmsg_set(err, errlen, "option '%s' requires an argument", argv[optind - 1]);
            usage = true;
            goto fail;
        default:
            if (optopt)
                errmsg_set(err, errlen, "invalid option -- '%c'", optopt);
            else
                errmsg_set(err, errlen, "unrecognized option '%s'", argv[optind - 1]);
            usage = true;
            goto fail;
        }
    }
    if (optind < argc) {
        errmsg_set(err, errlen, "unexpected argument '%s'", argv[optind]);
        goto fail;
    }
    if (start != NULL) {
        if (sacct_parse_time(start, now_ms, &o->start_ms, err, errlen) != 0)
            goto fail;
        o->start_given = true;
    } else if (o->n_job_ids > 0) {
        o->start_ms = 0; /* -j: the jobs named, whenever they ran */
    } else if (o->n_states > 0) {
        o->start_ms = now_ms; /* -s without -S: "now" (jobs in those states now) */
    } else if (sacct_parse_time("midnight", now_ms, &o->start_ms, err, errlen) != 0) {
        goto fail;
    }
    if (end != NULL) {
        if (sacct_parse_time(end, now_ms, &o->end_ms, err, errlen) != 0)
            goto fail;
        o->end_given = true;
        if (o->start_ms != 0 && o->end_ms < o->start_ms) {
            errmsg_set(err, errlen, "Start time (%s) requested is after end time (%s).",
                       start ? start : "default", end);
            goto fail;
        }
    }
    if (o->format == NULL)
        o->format = o->brief     ? SACCT_FORMAT_BRIEF
                    : o->longfmt ? SACCT_FORMAT_LONG
                                 : SACCT_FORMAT_DEFAULT;
    return 0;
oom:
    errmsg_set(err, errlen, "out of memory");
fail:
    sacct_opts_free(o);
    return usage ? -2 : -1;
}
