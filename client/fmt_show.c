/*
 * fmt_show.c - scontrol show's job, node and partition records; see fmt_show.h.
 */
#include "fmt_show.h"

#include "hostlist.h"
#include "names.h"
#include "strv.h"
#include "units.h"

#include <inttypes.h>
#include <stdlib.h>

static const char *str(const char *s)
{
    return s ? s : "";
}

const char *fmt_show_node_state(const fmt_node *n)
{
    return names_node_state_scontrol((int)n->state, n->cpus > 0 && n->alloc_cpus >= n->cpus);
}

void fmt_show_job(FILE *out, const fmt_job *j, const struct fmt_ctx *ctx)
{
    static const Spur__Api__JobSpec empty = SPUR__API__JOB_SPEC__INIT;
    const Spur__Api__JobSpec *sp = j->spec ? j->spec : &empty;
    char b1[64], b2[64];
    const char *group = ctx->group_name ? ctx->group_name(sp->gid, ctx->arg) : NULL;

    fprintf(out, "JobId=%" PRIu64 " JobName=%s\n", j->id, str(sp->name));
    if (group != NULL)
        fprintf(out, "   UserId=%s(%u) GroupId=%s(%u)\n", str(sp->user), sp->uid, group, sp->gid);
    else
        fprintf(out, "   UserId=%s(%u) GroupId=%u(%u)\n", str(sp->user), sp->uid, sp->gid, sp->gid);
    fprintf(out, "   Account=%s QOS=(null)\n",
            sp->account && sp->account[0] ? sp->account : "(null)");
    fprintf(out, "   JobState=%s Reason=%s Dependency=%s\n", names_job_state_name(j->state),
            fmt_job_reason(j), j->dependency && j->dependency[0] ? j->dependency : "(null)");
    /*
     * ExitCode=status:signal as Slurm prints it; an older record without exit_signal
     * that holds a negative exit_code is taken as "killed by that signal".
     */
    int code = j->exit_code, sig = j->exit_signal;
    if (sig == 0 && code < 0) {
        sig = -code;
        code = 0;
    }
    fprintf(out, "   Requeue=%d Restarts=%u BatchFlag=1 Reboot=0 ExitCode=%d:%d\n",
            sp->requeue ? 1 : 0, j->restarts, code, sig);
    units_duration_hms(b1, sizeof(b1), fmt_job_elapsed_s(j, ctx->now_ms));
    units_limit(b2, sizeof(b2), sp->time_limit_min, "UNLIMITED", true);
    fprintf(out, "   RunTime=%s TimeLimit=%s TimeMin=N/A\n", b1, b2);
    units_timestamp(b1, sizeof(b1), j->submit_time_ms, "Unknown");
    units_timestamp(b2, sizeof(b2), j->eligible_time_ms ? j->eligible_time_ms : j->submit_time_ms,
                    "Unknown");
    fprintf(out, "   SubmitTime=%s EligibleTime=%s\n", b1, b2);
    units_timestamp(b1, sizeof(b1), j->start_time_ms, "Unknown");
    units_timestamp(b2, sizeof(b2), j->end_time_ms, "Unknown");
    fprintf(out, "   StartTime=%s EndTime=%s Deadline=N/A\n", b1, b2);
    fprintf(out, "   Partition=%s\n", sp->partition && sp->partition[0] ? sp->partition : "(null)");
    char *nl = hostlist_compress(j->node_list, j->n_node_list);
    fprintf(out, "   NodeList=%s\n", nl && nl[0] ? nl : "(null)");
    free(nl);
    if (j->batch_host && j->batch_host[0])
        fprintf(out, "   BatchHost=%s\n", j->batch_host);
    else if (j->n_node_list > 0)
        fprintf(out, "   BatchHost=%s\n", str(j->node_list[0]));
    fprintf(out, "   NumNodes=%u NumCPUs=%" PRIu64 " NumTasks=%u CPUs/Task=%u\n",
            fmt_job_node_count(j), fmt_job_cpus(j), fmt_or1(sp->ntasks),
            fmt_or1(sp->cpus_per_task));
    units_mem(b1, sizeof(b1), sp->mem_mb);
    fprintf(out, "   MinMemoryNode=%s\n", b1);
    fprintf(out, "   WorkDir=%s\n", str(sp->workdir));
    char *so = fmt_expand_path(j, sp->stdout_path && sp->stdout_path[0] ? sp->stdout_path
                                                                        : "slurm-%j.out");
    char *se = fmt_expand_path(j, sp->stderr_path && sp->stderr_path[0] ? sp->stderr_path
                                                                        : str(sp->stdout_path));
    fprintf(out, "   StdErr=%s\n", str(se));
    fprintf(out, "   StdIn=/dev/null\n");
    fprintf(out, "   StdOut=%s\n", str(so));
    free(so);
    free(se);
    fputc('\n', out);
}

void fmt_show_node(FILE *out, const fmt_node *n, const struct fmt_ctx *ctx)
{
    (void)ctx;
    char b[64];
    char *feat = strv_join(n->features, n->n_features, "(null)");
    char *parts = strv_join(n->partitions, n->n_partitions, "(null)");
    fprintf(out, "NodeName=%s\n", str(n->name));
    fprintf(out, "   CPUAlloc=%u CPUTot=%u\n", n->alloc_cpus, n->cpus);
    fprintf(out, "   AvailableFeatures=%s\n", str(feat));
    fprintf(out, "   ActiveFeatures=%s\n", str(feat));
    fprintf(out, "   NodeAddr=%s NodeHostName=%s\n",
            n->address && n->address[0] ? n->address : str(n->name), str(n->name));
    fprintf(out, "   RealMemory=%" PRIu64 " AllocMem=%" PRIu64 "\n", n->mem_mb, n->alloc_mem_mb);
    fprintf(out, "   State=%s\n", fmt_show_node_state(n));
    fprintf(out, "   Partitions=%s\n", str(parts));
    units_timestamp(b, sizeof(b), n->last_seen_ms, "None");
    fprintf(out, "   LastSeenTime=%s\n", b);
    if (n->reason && n->reason[0]) {
        units_timestamp(b, sizeof(b), n->reason_time_ms, "");
        if (b[0])
            fprintf(out, "   Reason=%s [%s]\n", n->reason, b);
        else
            fprintf(out, "   Reason=%s\n", n->reason);
    }
    fputc('\n', out);
    free(feat);
    free(parts);
}

static void limit_u64(char *buf, size_t len, uint64_t v)
{
    if (v == 0)
        snprintf(buf, len, "UNLIMITED");
    else
        snprintf(buf, len, "%" PRIu64, v);
}

void fmt_show_partition(FILE *out, const fmt_partition *p, const struct fmt_ctx *ctx)
{
    (void)ctx;
    char b1[32], b2[32], b3[32], b4[32];
    limit_u64(b1, sizeof(b1), p->max_nodes);
    units_limit(b2, sizeof(b2), p->max_time_min, "UNLIMITED", true);
    limit_u64(b3, sizeof(b3), p->max_cpus_per_node);
    limit_u64(b4, sizeof(b4), p->max_mem_mb_per_node);
    char *nodes = hostlist_compress(p->nodes, p->n_nodes);
    const char *shown = nodes && nodes[0]                   ? nodes
                        : p->nodes_expr && p->nodes_expr[0] ? p->nodes_expr
                                                            : "(null)";
    fprintf(out, "PartitionName=%s\n", str(p->name));
    fprintf(out, "   Default=%s\n", p->is_default ? "YES" : "NO");
    fprintf(out, "   MaxNodes=%s MaxTime=%s MaxCPUsPerNode=%s MaxMemPerNode=%s\n", b1, b2, b3, b4);
    fprintf(out, "   Nodes=%s\n", shown);
    fprintf(out, "   State=%s TotalNodes=%zu\n", p->up ? "UP" : "DOWN", p->n_nodes);
    fputc('\n', out);
    free(nodes);
}
