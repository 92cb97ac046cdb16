/*
 * fmt.c - the job values every printer derives alike; see fmt.h.
 */
#include "fmt.h"

#include "buf.h"

#include <inttypes.h>
#include <string.h>

#define J(x) SPUR__API__JOB_STATE__JOB_##x

static const char *str(const char *s)
{
    return s ? s : "";
}

uint32_t fmt_or1(uint32_t v)
{
    return v ? v : 1;
}

uint64_t fmt_job_elapsed_s(const fmt_job *j, uint64_t now_ms)
{
    if (j->start_time_ms == 0)
        return 0;
    uint64_t end = j->end_time_ms;
    if (end == 0 && (j->state == J(RUNNING) || j->state == J(COMPLETING)))
        end = now_ms;
    return end > j->start_time_ms ? (end - j->start_time_ms) / 1000 : 0;
}

const char *fmt_job_reason(const fmt_job *j)
{
    if (j->reason && j->reason[0])
        return j->reason;
    if (j->held)
        return "JobHeldUser";
    return "None";
}

uint32_t fmt_job_node_count(const fmt_job *j)
{
    if (j->n_node_list > 0)
        return (uint32_t)j->n_node_list;
    return fmt_or1(j->spec ? j->spec->nodes : 0);
}

uint64_t fmt_job_cpus(const fmt_job *j)
{
    const Spur__Api__JobSpec *sp = j->spec;
    return (uint64_t)fmt_or1(sp ? sp->ntasks : 0) * fmt_or1(sp ? sp->cpus_per_task : 0);
}

char *fmt_expand_path(const fmt_job *j, const char *pattern)
{
    struct buf b;
    buf_init(&b);
    const Spur__Api__JobSpec *sp = j->spec;
    const char *p = str(pattern);
    if (p[0] != '/' && sp != NULL && sp->workdir && sp->workdir[0]) {
        buf_puts(&b, sp->workdir);
        if (sp->workdir[strlen(sp->workdir) - 1] != '/')
            buf_puts(&b, "/");
    }
    for (; *p; p++) {
        if (*p != '%' || p[1] == '\0') {
            buf_append(&b, p, 1);
            continue;
        }
        switch (p[1]) {
        case 'j':
            buf_printf(&b, "%" PRIu64, j->id);
            break;
        case 'x':
            buf_puts(&b, sp ? str(sp->name) : "");
            break;
        case 'u':
            buf_puts(&b, sp ? str(sp->user) : "");
            break;
        case 'N':
            buf_puts(&b, j->n_node_list > 0 ? str(j->node_list[0]) : "");
            break;
        case '%':
            buf_puts(&b, "%");
            break;
        default:
            buf_append(&b, p, 2); /* left for the node agent to decide */
            break;
        }
        p++;
    }
    return buf_take(&b);
}
