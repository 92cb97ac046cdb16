/*
 * fmt_squeue.c - squeue's table; see fmt_squeue.h.
 */
#include "fmt_squeue.h"

#include "buf.h"
#include "hostlist.h"
#include "job_filter.h"
#include "names.h"
#include "units.h"

#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define J(x) SPUR__API__JOB_STATE__JOB_##x

static const char *str(const char *s)
{
    return s ? s : "";
}

/*
 * Every letter of Slurm 22.05's squeue -o (squeue(1), "-o, --format"), with its header as
 * Slurm prints it. The letters of what spur has no notion of yet (QOS, reservations,
 * licences, sockets/cores/threads, ...) print what Slurm prints when it has no value.
 */
static const struct table_def job_fields[] = {
    {'a', "ACCOUNT", false},
    {'A', "JOBID", false},
    {'b', "TRES_PER_NODE", false},
    {'B', "EXEC_HOST", false},
    {'c', "MIN_CPUS", false},
    {'C', "CPUS", false},
    {'d', "MIN_TMP_DISK", false},
    {'D', "NODES", false},
    {'e', "END_TIME", false},
    {'E', "DEPENDENCY", false},
    {'f', "FEATURES", false},
    {'F', "ARRAY_JOB_ID", false},
    {'g', "GROUP", false},
    {'G', "GROUP", false},
    {'h', "OVER_SUBSCRIBE", false},
    {'H', "SOCKETS_PER_NODE", false},
    {'i', "JOBID", false},
    {'I', "CORES_PER_SOCKET", false},
    {'j', "NAME", false},
    {'J', "THREADS_PER_CORE", false},
    {'k', "COMMENT", false},
    {'K', "ARRAY_TASK_ID", false},
    {'l', "TIME_LIMIT", false},
    {'L', "TIME_LEFT", false},
    {'m', "MIN_MEMORY", false},
    {'M', "TIME", false},
    {'n', "REQ_NODES", false},
    {'N', "NODELIST", false},
    {'o', "COMMAND", false},
    {'O', "CONTIGUOUS", false},
    {'p', "PRIORITY", false},
    {'P', "PARTITION", false},
    {'q', "QOS", false},
    {'Q', "PRIORITY", false},
    {'r', "REASON", false},
    {'R', "NODELIST(REASON)", false},
    {'s', "", false},
    {'S', "START_TIME", false},
    {'t', "ST", false},
    {'T', "STATE", false},
    {'u', "USER", false},
    {'U', "UID", false},
    {'v', "RESERVATION", false},
    {'V', "SUBMIT_TIME", false},
    {'w', "WCKEY", false},
    {'W', "LICENSES", false},
    {'x', "EXC_NODES", false},
    {'X', "CORE_SPEC", false},
    {'y', "NICE", false},
    {'Y', "SCHEDNODES", false},
    {'z', "S:C:T", false},
    {'Z', "WORK_DIR", false},
};

/* Slurm's squeue warns of a letter it does not know and prints the field as text. */
static void unknown_field(void *arg, char type)
{
    (void)arg;
    fprintf(stderr, "squeue: error: Invalid job format specification: %c\n", type);
}

int fmt_squeue_spec_parse(const char *format, struct table_spec *spec, char *err, size_t errlen)
{
    return table_spec_parse_lenient(format, job_fields, sizeof(job_fields) / sizeof(job_fields[0]),
                                    unknown_field, NULL, spec, err, errlen);
}

/* The name of group gid, or the number when the system has no name for it. */
static char *group_name(uint32_t gid)
{
    struct group gr, *res = NULL;
    char buf[4096], b[16];
    if (getgrgid_r(gid, &gr, buf, sizeof(buf), &res) == 0 && res != NULL)
        return strdup(res->gr_name);
    snprintf(b, sizeof(b), "%u", gid);
    return strdup(b);
}

static char *job_cell(const fmt_job *j, char type, const struct fmt_ctx *ctx)
{
    static const Spur__Api__JobSpec empty = SPUR__API__JOB_SPEC__INIT;
    const Spur__Api__JobSpec *sp = j->spec ? j->spec : &empty;
    char b[64];
    switch (type) {
    case 'i':
    case 'A':
        snprintf(b, sizeof(b), "%" PRIu64, j->id);
        break;
    case 'j':
        return strdup(str(sp->name));
    case 'u':
        return strdup(str(sp->user));
    case 'U':
        snprintf(b, sizeof(b), "%u", sp->uid);
        break;
    case 't':
        return strdup(names_job_state_code(j->state));
    case 'T':
        return strdup(names_job_state_name(j->state));
    case 'M':
        units_duration(b, sizeof(b), fmt_job_elapsed_s(j, ctx->now_ms));
        break;
    case 'l':
        units_limit(b, sizeof(b), sp->time_limit_min, "UNLIMITED", false);
        break;
    case 'L':
        if (sp->time_limit_min == 0) {
            snprintf(b, sizeof(b), "UNLIMITED");
        } else if (job_filter_state_active(j->state)) {
            uint64_t lim = (uint64_t)sp->time_limit_min * 60;
            uint64_t used = fmt_job_elapsed_s(j, ctx->now_ms);
            units_duration(b, sizeof(b), used < lim ? lim - used : 0);
        } else {
            units_duration(b, sizeof(b), 0);
        }
        break;
    case 'D':
        snprintf(b, sizeof(b), "%u", fmt_job_node_count(j));
        break;
    case 'R': {
        bool failed = j->state == J(FAILED) || j->state == J(NODE_FAIL);
        if (j->state == J(PENDING) || (failed && j->reason && j->reason[0])) {
            struct buf s;
            buf_init(&s);
            buf_puts(&s, "(");
            buf_puts(&s, fmt_job_reason(j));
            buf_puts(&s, ")");
            return buf_take(&s);
        }
        return hostlist_compress(j->node_list, j->n_node_list);
    }
    case 'r':
        return strdup(fmt_job_reason(j));
    case 'P':
        return strdup(str(sp->partition));
    case 'N':
        return hostlist_compress(j->node_list, j->n_node_list);
    case 'C':
        snprintf(b, sizeof(b), "%" PRIu64, fmt_job_cpus(j));
        break;
    case 'c':
        snprintf(b, sizeof(b), "%u", fmt_or1(sp->cpus_per_task));
        break;
    case 'm':
        units_mem(b, sizeof(b), sp->mem_mb);
        break;
    case 'V':
        units_timestamp(b, sizeof(b), j->submit_time_ms, "N/A");
        break;
    case 'S':
        units_timestamp(b, sizeof(b), j->start_time_ms, "N/A");
        break;
    case 'e':
        units_timestamp(b, sizeof(b), j->end_time_ms, "N/A");
        break;
    case 'Z':
        return strdup(str(sp->workdir));
    case 'B':
        if (j->batch_host && j->batch_host[0])
            return strdup(j->batch_host);
        return strdup(j->n_node_list > 0 ? str(j->node_list[0]) : "n/a");
    case 'a':
        return strdup(sp->account && sp->account[0] ? sp->account : "(null)");
    case 'E': /* what it still waits on, as the controller words it */
        return strdup(j->dependency && j->dependency[0] ? j->dependency : "(null)");
    case 'F':
        snprintf(b, sizeof(b), "%" PRIu64, j->id); /* a job of no array is its own */
        break;
    case 'g':
        return group_name(sp->gid);
    case 'G':
        snprintf(b, sizeof(b), "%u", sp->gid);
        break;
    case 'h':
        return strdup("OK"); /* Slurm's word for the default: as the partition allows */
    case 'H':
    case 'I':
    case 'J':
        return strdup("*");
    case 'z':
        return strdup("*:*:*");
    case 'd':
    case 'O':
    case 'y':
        return strdup("0");
    case 'b':
    case 'K':
    case 'X':
    case 'p':
    case 'Q':
        return strdup("N/A"); /* no arrays, priorities or core specialisation yet */
    case 'f':
    case 'k':
    case 'o':
    case 'q':
    case 'v':
    case 'w':
    case 'W':
    case 'Y':
        return strdup("(null)");
    default: /* 'n', 'x', 's': requested and excluded nodes, select data: none */
        b[0] = '\0';
        break;
    }
    return strdup(b);
}

/* ---- -S ------------------------------------------------------------------------------ */

#define SORT_MAX_KEYS 16

struct sort_key {
    char type;
    bool desc;
    bool text; /* compare the cell's text, else its number */
};

struct sort_row {
    fmt_job *job;
    int64_t num[SORT_MAX_KEYS];
    char *text[SORT_MAX_KEYS];
};

struct sort_ctx {
    const struct sort_key *keys;
    size_t nkeys;
};

/* The number a letter sorts by; *text set for those compared as text. */
static int64_t sort_number(const fmt_job *j, char type, const struct fmt_ctx *ctx, bool *text)
{
    static const Spur__Api__JobSpec empty = SPUR__API__JOB_SPEC__INIT;
    const Spur__Api__JobSpec *sp = j->spec ? j->spec : &empty;
    *text = false;
    switch (type) {
    case 'i':
        return (int64_t)j->id;
    case 'c':
        return fmt_or1(sp->cpus_per_task);
    case 'C':
        return (int64_t)fmt_job_cpus(j);
    case 'D':
        return fmt_job_node_count(j);
    case 'e':
        return (int64_t)j->end_time_ms;
    case 'S':
        return (int64_t)j->start_time_ms;
    case 'V':
        return (int64_t)j->submit_time_ms;
    case 'G':
        return sp->gid;
    case 'U':
        return sp->uid;
    case 'l': /* no limit sorts after every limit */
        return sp->time_limit_min == 0 ? INT64_MAX : sp->time_limit_min;
    case 'L': {
        if (sp->time_limit_min == 0)
            return INT64_MAX;
        int64_t lim = (int64_t)sp->time_limit_min * 60;
        int64_t used = (int64_t)fmt_job_elapsed_s(j, ctx->now_ms);
        return used < lim ? lim - used : 0;
    }
    case 'm':
        return (int64_t)sp->mem_mb;
    case 'M':
        return (int64_t)fmt_job_elapsed_s(j, ctx->now_ms);
    case 't':
    case 'T':
        return j->state; /* the state's order, as Slurm's (pending first) */
    case 'b':
    case 'd':
    case 'h':
    case 'H':
    case 'I':
    case 'J':
    case 'O':
    case 'p':
    case 'Q':
    case 'z':
        return 0; /* the same for every job here */
    default:      /* B f g j n N P u v: text */
        *text = true;
        return 0;
    }
}

static int sort_cmp(const void *pa, const void *pb, void *arg)
{
    const struct sort_row *a = pa, *b = pb;
    const struct sort_ctx *sc = arg;
    for (size_t k = 0; k < sc->nkeys; k++) {
        int c;
        if (sc->keys[k].text)
            c = strcmp(a->text[k] ? a->text[k] : "", b->text[k] ? b->text[k] : "");
        else
            c = a->num[k] < b->num[k] ? -1 : a->num[k] > b->num[k];
        if (c != 0)
            return sc->keys[k].desc ? -c : c;
    }
    return a->job->id < b->job->id ? -1 : a->job->id > b->job->id;
}

int fmt_squeue_sort(fmt_job **jobs, size_t n, const char *keys, const struct fmt_ctx *ctx,
                    char *err, size_t errlen)
{
    static const char sortable[] = "bBcCdDefgGhHiIjJlLmMnNOpPQStTuUvVz";
    struct sort_key k[SORT_MAX_KEYS];
    size_t nk = 0;
    for (const char *p = keys ? keys : ""; *p;) {
        if (*p == ',') {
            p++;
            continue;
        }
        bool desc = false;
        if (*p == '+' || *p == '-')
            desc = *p++ == '-';
        if (*p == '\0' || strchr(sortable, *p) == NULL || (p[1] != ',' && p[1] != '\0')) {
            snprintf(err, errlen, "Invalid sort specification: %c", *p ? *p : '-');
            return -1;
        }
        if (nk == SORT_MAX_KEYS) {
            snprintf(err, errlen, "Invalid sort specification: more than %d fields", SORT_MAX_KEYS);
            return -1;
        }
        k[nk].type = *p;
        k[nk].desc = desc;
        k[nk].text = false;
        nk++;
        p++;
    }
    if (n < 2 || nk == 0)
        return 0;
    struct sort_row *rows = calloc(n, sizeof(*rows));
    if (rows == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        rows[i].job = jobs[i];
        for (size_t q = 0; q < nk; q++) {
            bool text;
            rows[i].num[q] = sort_number(jobs[i], k[q].type, ctx, &text);
            k[q].text = text;
            if (text)
                rows[i].text[q] = job_cell(jobs[i], k[q].type, ctx);
        }
    }
    struct sort_ctx sc = {k, nk};
    qsort_r(rows, n, sizeof(*rows), sort_cmp, &sc);
    for (size_t i = 0; i < n; i++) {
        jobs[i] = rows[i].job;
        for (size_t q = 0; q < nk; q++)
            free(rows[i].text[q]);
    }
    free(rows);
    return 0;
}

void fmt_squeue(FILE *out, const struct table_spec *spec, fmt_job *const *jobs, size_t n,
                bool header, const struct fmt_ctx *ctx)
{
    struct table t;
    table_init(&t, spec);
    if (header && table_add_header(&t, spec) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        char **row = table_add_row(&t);
        if (row == NULL)
            goto out;
        for (size_t c = 0; c < spec->n; c++)
            if (spec->fields[c].type != 0)
                row[c] = job_cell(jobs[i], spec->fields[c].type, ctx);
    }
    table_print(out, spec, &t);
out:
    table_free(&t);
}
