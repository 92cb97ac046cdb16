/*
 * fmt_json.c - the --json objects of jobs, nodes and partitions; see fmt_json.h.
 */
#include "fmt_json.h"

#include "names.h"

static const char *str(const char *s)
{
    return s ? s : "";
}

static void json_strv(struct json *j, const char *key, char *const *v, size_t n)
{
    json_key(j, key);
    json_arr_begin(j);
    for (size_t i = 0; i < n; i++)
        json_str(j, str(v[i]));
    json_arr_end(j);
}

void fmt_json_job(struct json *j, const fmt_job *job)
{
    static const Spur__Api__JobSpec empty = SPUR__API__JOB_SPEC__INIT;
    const Spur__Api__JobSpec *sp = job->spec ? job->spec : &empty;
    json_obj_begin(j);
    json_ku64(j, "job_id", job->id);
    json_kstr(j, "name", str(sp->name));
    json_kstr(j, "user", str(sp->user));
    json_ku64(j, "uid", sp->uid);
    json_ku64(j, "gid", sp->gid);
    json_kstr(j, "partition", str(sp->partition));
    json_kstr(j, "state", names_job_state_name(job->state));
    json_kstr(j, "state_code", names_job_state_code(job->state));
    json_kstr(j, "reason", fmt_job_reason(job));
    json_kbool(j, "held", job->held);
    json_ku64(j, "nodes", fmt_job_node_count(job));
    json_ku64(j, "ntasks", fmt_or1(sp->ntasks));
    json_ku64(j, "cpus_per_task", fmt_or1(sp->cpus_per_task));
    json_ku64(j, "cpus", fmt_job_cpus(job));
    json_ku64(j, "mem_mb", sp->mem_mb);
    json_ku64(j, "time_limit_min", sp->time_limit_min);
    json_strv(j, "node_list", job->node_list, job->n_node_list);
    json_ku64(j, "submit_time_ms", job->submit_time_ms);
    json_ku64(j, "eligible_time_ms", job->eligible_time_ms);
    json_ku64(j, "start_time_ms", job->start_time_ms);
    json_ku64(j, "end_time_ms", job->end_time_ms);
    json_ki64(j, "exit_code", job->exit_code);
    json_ki64(j, "exit_signal", job->exit_signal);
    json_ku64(j, "attempt", job->attempt);
    json_ku64(j, "restarts", job->restarts);
    json_kstr(j, "batch_host", job->batch_host && job->batch_host[0] ? job->batch_host
                               : job->n_node_list > 0              ? str(job->node_list[0])
                                                                   : "");
    json_kbool(j, "requeue", sp->requeue);
    json_kstr(j, "account", str(sp->account));
    json_kstr(j, "workdir", str(sp->workdir));
    json_kstr(j, "stdout", str(sp->stdout_path));
    json_kstr(j, "stderr", str(sp->stderr_path));
    json_obj_end(j);
}

void fmt_json_node(struct json *j, const fmt_node *n)
{
    json_obj_begin(j);
    json_kstr(j, "name", str(n->name));
    json_kstr(j, "address", str(n->address));
    json_kstr(j, "state", names_node_state_long((int)n->state));
    json_kstr(j, "state_code", names_node_state_compact((int)n->state));
    json_ku64(j, "cpus", n->cpus);
    json_ku64(j, "alloc_cpus", n->alloc_cpus);
    json_ku64(j, "mem_mb", n->mem_mb);
    json_ku64(j, "alloc_mem_mb", n->alloc_mem_mb);
    json_strv(j, "features", n->features, n->n_features);
    json_strv(j, "partitions", n->partitions, n->n_partitions);
    json_kstr(j, "reason", str(n->reason));
    json_ku64(j, "reason_time_ms", n->reason_time_ms);
    json_ku64(j, "last_seen_ms", n->last_seen_ms);
    json_obj_end(j);
}

void fmt_json_partition(struct json *j, const fmt_partition *p)
{
    json_obj_begin(j);
    json_kstr(j, "name", str(p->name));
    json_kbool(j, "default", p->is_default);
    json_kstr(j, "state", p->up ? "UP" : "DOWN");
    json_strv(j, "nodes", p->nodes, p->n_nodes);
    json_kstr(j, "nodes_expr", str(p->nodes_expr));
    json_ku64(j, "max_nodes", p->max_nodes);
    json_ku64(j, "max_time_min", p->max_time_min);
    json_ku64(j, "max_cpus_per_node", p->max_cpus_per_node);
    json_ku64(j, "max_mem_mb_per_node", p->max_mem_mb_per_node);
    json_obj_end(j);
}

void fmt_json_jobs(struct json *j, fmt_job *const *jobs, size_t n)
{
    json_arr_begin(j);
    for (size_t i = 0; i < n; i++)
        fmt_json_job(j, jobs[i]);
    json_arr_end(j);
}

void fmt_json_nodes(struct json *j, fmt_node *const *nodes, size_t n)
{
    json_arr_begin(j);
    for (size_t i = 0; i < n; i++)
        fmt_json_node(j, nodes[i]);
    json_arr_end(j);
}

void fmt_json_partitions(struct json *j, fmt_partition *const *parts, size_t n)
{
    json_arr_begin(j);
    for (size_t i = 0; i < n; i++)
        fmt_json_partition(j, parts[i]);
    json_arr_end(j);
}
