/*
 * jobenv.c - the job's environment and output file names (jobenv.h has the rules).
 *
 * The environment is built in a vector of "NAME=value" strings where setting a name
 * replaces the entry of that name in place, so spec.env's order is kept and Slurm's
 * variables override without duplicates. The vector is small (tens of entries plus what
 * --export sent): a linear search per set is cheaper than any index.
 */
#include "jobenv.h"

#include "hostlist.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Owns v and every string in it; n entries, NULL-terminated, cap slots. */
struct envv {
    char **v;
    size_t n, cap;
    bool oom;
};

static size_t name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : strlen(entry);
}

static ssize_t envv_find(const struct envv *e, const char *name, size_t len)
{
    for (size_t i = 0; i < e->n; i++)
        if (name_len(e->v[i]) == len && memcmp(e->v[i], name, len) == 0)
            return (ssize_t)i;
    return -1;
}

/* Put the malloc'd entry in (taking it), replacing one of the same name. */
static void envv_put(struct envv *e, char *entry)
{
    if (entry == NULL) {
        e->oom = true;
        return;
    }
    ssize_t at = envv_find(e, entry, name_len(entry));
    if (at >= 0) {
        free(e->v[at]);
        e->v[at] = entry;
        return;
    }
    if (e->n + 1 >= e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **v = realloc(e->v, cap * sizeof(*v));
        if (v == NULL) {
            free(entry);
            e->oom = true;
            return;
        }
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++] = entry;
    e->v[e->n] = NULL;
}

static void envv_set(struct envv *e, const char *name, const char *value)
{
    char *entry;
    if (asprintf(&entry, "%s=%s", name, value) < 0)
        entry = NULL;
    envv_put(e, entry);
}

static void envv_set_u64(struct envv *e, const char *name, uint64_t value)
{
    char num[24];
    snprintf(num, sizeof(num), "%" PRIu64, value);
    envv_set(e, name, num);
}

static void envv_default(struct envv *e, const char *name, const char *value)
{
    if (envv_find(e, name, strlen(name)) < 0)
        envv_set(e, name, value);
}

static const char *str(const char *s)
{
    return s ? s : "";
}

/* "4" on one node, "4(x3)" on three: Slurm's form for a count the same on every node. */
static void set_cpus_per_node(struct envv *e, uint32_t cpus, size_t nnodes)
{
    char v[48];
    if (nnodes > 1)
        snprintf(v, sizeof(v), "%" PRIu32 "(x%zu)", cpus, nnodes);
    else
        snprintf(v, sizeof(v), "%" PRIu32, cpus);
    envv_set(e, "SLURM_JOB_CPUS_PER_NODE", v);
}

char **jobenv_build(const Spur__Agent__Launch *l, const struct jobenv_user *u,
                    const char *node_name, const char *cluster_name)
{
    struct envv e = {0};
    const Spur__Api__JobSpec *s = l->spec;
    if (s != NULL)
        for (size_t i = 0; i < s->n_env; i++)
            if (s->env[i] != NULL && strchr(s->env[i], '=') != NULL)
                envv_put(&e, strdup(s->env[i]));

    char *nodelist = hostlist_compress(l->node_list, l->n_node_list);
    if (nodelist == NULL)
        e.oom = true;
    size_t nnodes = l->n_node_list ? l->n_node_list : 1;
    uint32_t ntasks = s && s->ntasks ? s->ntasks : 1;
    const char *user = s && s->user && s->user[0] ? s->user : u->name;

    envv_set_u64(&e, "SLURM_JOB_ID", l->job_id);
    envv_set_u64(&e, "SLURM_JOBID", l->job_id);
    envv_set(&e, "SLURM_JOB_NAME", str(s ? s->name : NULL));
    envv_set(&e, "SLURM_JOB_NODELIST", str(nodelist));
    envv_set(&e, "SLURM_NODELIST", str(nodelist));
    envv_set_u64(&e, "SLURM_JOB_NUM_NODES", nnodes);
    envv_set_u64(&e, "SLURM_NNODES", nnodes);
    envv_set_u64(&e, "SLURM_NTASKS", ntasks);
    envv_set_u64(&e, "SLURM_NPROCS", ntasks);
    if (s && s->cpus_per_task)
        envv_set_u64(&e, "SLURM_CPUS_PER_TASK", s->cpus_per_task);
    envv_set_u64(&e, "SLURM_CPUS_ON_NODE", l->cpus);
    set_cpus_per_node(&e, l->cpus, nnodes);
    if (s && s->workdir && s->workdir[0])
        envv_set(&e, "SLURM_SUBMIT_DIR", s->workdir);
    envv_set(&e, "SLURM_JOB_PARTITION", str(s ? s->partition : NULL));
    envv_set(&e, "SLURM_JOB_USER", user);
    envv_set_u64(&e, "SLURM_JOB_UID", u->uid);
    envv_set_u64(&e, "SLURM_JOB_GID", u->gid);
    envv_set(&e, "SLURM_CLUSTER_NAME", str(cluster_name));
    envv_set_u64(&e, "SLURM_NODEID", l->node_index);
    if (s && s->mem_mb)
        envv_set_u64(&e, "SLURM_MEM_PER_NODE", s->mem_mb);
    if (s && s->account && s->account[0])
        envv_set(&e, "SLURM_JOB_ACCOUNT", s->account);
    envv_set(&e, "SLURMD_NODENAME", str(node_name));
    /* Each requeue is followed by exactly one new allocation, so the attempts before
     * this one are the restarts; Slurm sets the variable only on a restarted job. */
    if (l->attempt > 1)
        envv_set_u64(&e, "SLURM_RESTART_COUNT", l->attempt - 1);
    envv_set(&e, "ENVIRONMENT", "BATCH");

    envv_default(&e, "HOME", u->home);
    envv_default(&e, "USER", u->name);
    envv_default(&e, "LOGNAME", u->name);
    envv_default(&e, "SHELL", u->shell);
    envv_default(&e, "PATH", JOBENV_DEFAULT_PATH);
    free(nodelist);

    if (e.oom || e.v == NULL) {
        jobenv_free(e.v);
        return NULL;
    }
    return e.v;
}

void jobenv_free(char **env)
{
    if (env == NULL)
        return;
    for (size_t i = 0; env[i] != NULL; i++)
        free(env[i]);
    free(env);
}

/* A growing output string; oom once any append failed. */
struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
};

static void sbuf_add(struct sbuf *b, const char *p, size_t len)
{
    if (b->oom)
        return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + len + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, len);
    b->n += len;
    b->s[b->n] = '\0';
}

/* v in decimal, zero-padded to width (up to 639 from a pattern: wider than any buffer). */
static void sbuf_num(struct sbuf *b, uint64_t v, unsigned width)
{
    char num[24];
    int len = snprintf(num, sizeof(num), "%" PRIu64, v);
    for (unsigned i = (unsigned)len; i < width; i++)
        sbuf_add(b, "0", 1);
    sbuf_add(b, num, (size_t)len);
}

/* A pattern with a backslash: the backslashes go, nothing else is replaced. */
static char *expand_literal(const char *pattern)
{
    struct sbuf b = {0};
    sbuf_add(&b, "", 0);
    for (const char *p = pattern; *p; p++)
        if (*p != '\\')
            sbuf_add(&b, p, 1);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

char *jobenv_expand(const char *pattern, const Spur__Agent__Launch *l, const char *user,
                    const char *node_name)
{
    if (pattern == NULL || pattern[0] == '\0')
        pattern = JOBENV_DEFAULT_OUT;
    if (strchr(pattern, '\\') != NULL)
        return expand_literal(pattern);
    const char *name = l->spec ? str(l->spec->name) : "";
    struct sbuf b = {0};
    sbuf_add(&b, "", 0);
    for (const char *p = pattern; *p;) {
        if (*p != '%') {
            sbuf_add(&b, p, 1);
            p++;
            continue;
        }
        const char *q = p + 1;
        unsigned width = 0;
        while (isdigit((unsigned char)*q) && width < 64)
            width = width * 10 + (unsigned)(*q++ - '0');
        while (isdigit((unsigned char)*q))
            q++;
        switch (*q) {
        case '%':
            sbuf_add(&b, "%", 1);
            break;
        case 'j':
        case 'A':
            sbuf_num(&b, l->job_id, width);
            break;
        case 'a':
            sbuf_num(&b, JOBENV_NO_ARRAY_ID, width);
            break;
        case 'n':
            sbuf_num(&b, l->node_index, width);
            break;
        case 'x':
            sbuf_add(&b, name, strlen(name));
            break;
        case 'u':
            sbuf_add(&b, str(user), strlen(str(user)));
            break;
        case 'N':
            sbuf_add(&b, str(node_name), strlen(str(node_name)));
            break;
        case '\0':
            /* A '%' (and digits) at the end: kept as written. */
            sbuf_add(&b, p, (size_t)(q - p));
            p = q;
            continue;
        default:
            sbuf_add(&b, p, (size_t)(q - p) + 1);
            break;
        }
        p = q + 1;
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
