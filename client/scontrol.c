/*
 * scontrol.c - scontrol show, hold, release, update and create; contract in scontrol.h.
 *
 * Reads go through cli_read_any() (linearizable, falling back to a possibly stale local
 * answer when no leader is known), writes through cli_call_any() with exactly-once
 * sequencing; each write is one request per job or node, so one failure names exactly
 * the job or node it concerns and the others still happen, as Slurm's scontrol does.
 */
#include "scontrol.h"

#include "fmt_json.h"
#include "fmt_show.h"
#include "hostlist.h"
#include "job_filter.h"
#include "scontrol_args.h"
#include "strv.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CODE(x) SPUR__API__CODE__CODE_##x

/* w names the entity: a prefix of its plural ("part", "jobs"), or its Key= spelling. */
static bool entity_is(const char *w, const char *plural, const char *key)
{
    size_t n = strlen(w);
    return (n > 0 && n <= strlen(plural) && strncasecmp(w, plural, n) == 0) ||
           strcasecmp(w, key) == 0;
}

static int show_jobs(struct cli *c, const char *id_text)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__JobIdRequest one = SPUR__API__JOB_ID_REQUEST__INIT;
    Spur__Api__GetJobsRequest all = SPUR__API__GET_JOBS_REQUEST__INIT;
    uint64_t *ids = NULL;
    size_t nids = 0;

    if (id_text != NULL) {
        char err[200];
        if (job_filter_ids_parse(id_text, &ids, &nids, err, sizeof(err)) != 0 || nids != 1) {
            free(ids);
            cli_error(c, "slurm_load_jobs error: Invalid job id specified");
            return 1;
        }
        one.job_id = ids[0];
        free(ids);
        req.op_case = SPUR__API__REQUEST__OP_GET_JOB;
        req.get_job = &one;
    } else {
        req.op_case = SPUR__API__REQUEST__OP_GET_JOBS;
        req.get_jobs = &all;
    }
    spurclient_response *r = cli_read_any(c, &req);
    if (r == NULL)
        return 1;
    if (r->code == CODE(NOT_FOUND) ||
        (r->code == CODE(OK) && id_text != NULL && (r->jobs == NULL || r->jobs->n_jobs == 0))) {
        cli_error(c, "slurm_load_jobs error: Invalid job id specified");
        spurclient_response_free(r);
        return 1;
    }
    if (r->code != CODE(OK)) {
        cli_response_error(c, r, "slurm_load_jobs error");
        spurclient_response_free(r);
        return 1;
    }
    size_t n = r->jobs ? r->jobs->n_jobs : 0;
    Spur__Api__Job **jobs = r->jobs ? r->jobs->jobs : NULL;
    if (c->json) {
        struct json j;
        json_init(&j, stdout);
        fmt_json_jobs(&j, jobs, n);
        json_end(&j);
    } else if (n == 0) {
        printf("No jobs in the system\n");
    } else {
        struct cli_group_cache gc = {0};
        struct fmt_ctx ctx = {.now_ms = wall_ms(), .group_name = cli_group_name, .arg = &gc};
        for (size_t i = 0; i < n; i++)
            fmt_show_job(stdout, jobs[i], &ctx);
    }
    spurclient_response_free(r);
    return 0;
}

static int show_nodes(struct cli *c, const char *names_text)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__GetNodesRequest gn = SPUR__API__GET_NODES_REQUEST__INIT;
    char **names = NULL;
    size_t nnames = 0;
    char err[300];
    int rc = 0;

    if (names_text != NULL && hostlist_expand(names_text, &names, &nnames, err, sizeof(err))) {
        cli_error(c, "%s", err);
        return 1;
    }
    gn.n_names = nnames;
    gn.names = names;
    req.op_case = SPUR__API__REQUEST__OP_GET_NODES;
    req.get_nodes = &gn;
    spurclient_response *r = cli_read_any(c, &req);
    if (r == NULL) {
        strv_free(names, nnames);
        return 1;
    }
    if (r->code != CODE(OK) && !(r->code == CODE(NOT_FOUND) && nnames > 0)) {
        cli_response_error(c, r, "slurm_load_node error");
        goto fail;
    }
    size_t n = r->nodes ? r->nodes->n_nodes : 0;
    Spur__Api__Node **nodes = r->nodes ? r->nodes->nodes : NULL;
    /* Keep the ones asked for (a server may answer with more), and name the missing. */
    Spur__Api__Node **sel = calloc(n ? n : 1, sizeof(*sel));
    size_t m = 0;
    if (sel == NULL) {
        cli_error(c, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        bool wanted = nnames == 0;
        for (size_t k = 0; k < nnames && !wanted; k++)
            wanted = strcmp(names[k], nodes[i]->name) == 0;
        if (wanted)
            sel[m++] = nodes[i];
    }
    for (size_t k = 0; k < nnames; k++) {
        bool found = false;
        for (size_t i = 0; i < m && !found; i++)
            found = strcmp(names[k], sel[i]->name) == 0;
        if (!found) {
            cli_error(c, "Node %s not found", names[k]);
            rc = 1;
        }
    }
    if (c->json) {
        struct json j;
        json_init(&j, stdout);
        fmt_json_nodes(&j, sel, m);
        json_end(&j);
    } else if (m == 0 && nnames == 0) {
        printf("No nodes in the system\n");
    } else {
        struct fmt_ctx ctx = {.now_ms = wall_ms()};
        for (size_t i = 0; i < m; i++)
            fmt_show_node(stdout, sel[i], &ctx);
    }
    free(sel);
    spurclient_response_free(r);
    strv_free(names, nnames);
    return rc;
fail:
    spurclient_response_free(r);
    strv_free(names, nnames);
    return 1;
}

static int show_partitions(struct cli *c, const char *name)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__GetPartitionsRequest gp = SPUR__API__GET_PARTITIONS_REQUEST__INIT;
    char *one[1] = {(char *)name};
    if (name != NULL) {
        gp.n_names = 1;
        gp.names = one;
    }
    req.op_case = SPUR__API__REQUEST__OP_GET_PARTITIONS;
    req.get_partitions = &gp;
    spurclient_response *r = cli_read_any(c, &req);
    if (r == NULL)
        return 1;
    if (r->code != CODE(OK) && !(r->code == CODE(NOT_FOUND) && name != NULL)) {
        cli_response_error(c, r, "slurm_load_partitions error");
        spurclient_response_free(r);
        return 1;
    }
    size_t n = r->partitions ? r->partitions->n_partitions : 0;
    Spur__Api__Partition **parts = r->partitions ? r->partitions->partitions : NULL;
    size_t shown = 0;
    struct json j;
    if (c->json) {
        json_init(&j, stdout);
        json_arr_begin(&j);
    }
    struct fmt_ctx ctx = {.now_ms = wall_ms()};
    for (size_t i = 0; i < n; i++) {
        if (name != NULL && strcmp(parts[i]->name, name) != 0)
            continue;
        shown++;
        if (c->json)
            fmt_json_partition(&j, parts[i]);
        else
            fmt_show_partition(stdout, parts[i], &ctx);
    }
    if (c->json) {
        json_arr_end(&j);
        json_end(&j);
    }
    spurclient_response_free(r);
    if (name != NULL && shown == 0) {
        cli_error(c, "Partition %s not found", name);
        return 1;
    }
    if (!c->json && shown == 0)
        printf("No partitions in the system\n");
    return 0;
}

/*
 * The host list of show hostnames/hostlist: the argument (a list, or the absolute path of
 * a file of names separated by commas or new lines, as Slurm's), else SLURM_JOB_NODELIST.
 * NULL (said) when there is none or it cannot be read.
 */
static char *hosts_text(struct cli *c, const char *arg)
{
    if (arg == NULL || arg[0] == '\0')
        arg = getenv("SLURM_JOB_NODELIST");
    if (arg == NULL || arg[0] == '\0') {
        cli_error(c, "host list is empty");
        return NULL;
    }
    if (arg[0] != '/')
        return strdup(arg);
    FILE *f = fopen(arg, "r");
    if (f == NULL) {
        cli_error(c, "%s: %s", arg, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t cap = 0, len = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF && len < (1u << 20)) {
        if (len + 2 > cap) {
            size_t ncap = cap ? cap * 2 : 256;
            char *p = realloc(text, ncap);
            if (p == NULL) {
                free(text);
                fclose(f);
                cli_error(c, "out of memory");
                return NULL;
            }
            text = p;
            cap = ncap;
        }
        text[len++] = ch == '\n' || ch == '\r' ? ',' : (char)ch;
    }
    fclose(f);
    if (text == NULL)
        return strdup("");
    text[len] = '\0';
    return text;
}

/* show hostnames: one name a line; show hostlist[sorted]: the compressed form. */
static int show_hosts(struct cli *c, const char *entity, const char *arg)
{
    char *text = hosts_text(c, arg);
    if (text == NULL)
        return 0; /* Slurm's scontrol says "host list is empty" and exits 0 */
    char **names = NULL;
    size_t n = 0;
    char err[256];
    int rc = hostlist_expand(text, &names, &n, err, sizeof(err));
    free(text);
    if (rc != 0) {
        cli_error(c, "%s", err);
        return 1;
    }
    if (strcasecmp(entity, "hostnames") == 0) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", names[i]);
    } else {
        char *s = strcasecmp(entity, "hostlistsorted") == 0 ? hostlist_compress(names, n)
                                                            : hostlist_compress_ordered(names, n);
        if (s == NULL) {
            strv_free(names, n);
            cli_error(c, "out of memory");
            return 1;
        }
        printf("%s\n", s);
        free(s);
    }
    strv_free(names, n);
    return 0;
}

int scontrol_show(struct cli *c, int argc, char **argv)
{
    if (argc < 1) {
        cli_error(c, "show what? (job [ID], node [NAME] or partition [NAME])");
        return 1;
    }
    /* "show job 42" and "show job=42" / "show JobId=42" read the same. */
    char *what = argv[0];
    const char *arg = argc > 1 ? argv[1] : NULL;
    char *eq = strchr(what, '=');
    char entity[32];
    if (eq != NULL) {
        snprintf(entity, sizeof(entity), "%.*s", (int)(eq - what), what);
        arg = eq + 1;
    } else {
        snprintf(entity, sizeof(entity), "%s", what);
    }
    if (argc > 2 || (eq != NULL && argc > 1)) {
        cli_error(c, "too many arguments to show: %s", argv[argc - 1]);
        return 1;
    }
    if (entity_is(entity, "jobs", "jobid"))
        return show_jobs(c, arg);
    if (entity_is(entity, "nodes", "nodename"))
        return show_nodes(c, arg);
    if (entity_is(entity, "partitions", "partitionname"))
        return show_partitions(c, arg);
    if (strcasecmp(entity, "hostnames") == 0 || strcasecmp(entity, "hostlist") == 0 ||
        strcasecmp(entity, "hostlistsorted") == 0)
        return show_hosts(c, entity, arg);
    cli_error(c,
              "invalid entity \"%s\" for show (job, node, partition, hostnames, hostlist "
              "or hostlistsorted)",
              entity);
    return 1;
}

/* One job's hold or release; prints the error line and returns 1 on failure. */
static int job_action_one(struct cli *c, bool hold, uint64_t id, struct json *j)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__JobIdRequest jr = SPUR__API__JOB_ID_REQUEST__INIT;
    jr.job_id = id;
    if (hold) {
        req.op_case = SPUR__API__REQUEST__OP_HOLD_JOB;
        req.hold_job = &jr;
    } else {
        req.op_case = SPUR__API__REQUEST__OP_RELEASE_JOB;
        req.release_job = &jr;
    }
    spurclient_response *r = cli_call_any(c, &req, true);
    if (r == NULL)
        return 1;
    const char *why = NULL;
    if (r->code == CODE(NOT_FOUND))
        why = "Invalid job id specified";
    else if (r->code == CODE(DENIED))
        why = CLI_MSG_DENIED; /* Slurm: "Access/permission denied for job 42" */
    else if (r->code == CODE(CONFLICT))
        why = "Job is no longer pending execution"; /* Slurm's words; r->error repeats the id */
    else if (r->code != CODE(OK))
        why = r->error && r->error[0] ? r->error : cli_code_name(r->code);
    if (why != NULL)
        cli_error(c, "%s for job %llu", why, (unsigned long long)id);
    if (j != NULL) {
        json_obj_begin(j);
        json_ku64(j, "job_id", id);
        json_kbool(j, "ok", why == NULL);
        json_kstr(j, "error", why ? why : "");
        json_obj_end(j);
    }
    spurclient_response_free(r);
    return why != NULL;
}

int scontrol_job_action(struct cli *c, const char *action, int argc, char **argv)
{
    bool hold = strcmp(action, "hold") == 0;
    uint64_t *ids = NULL;
    size_t nids = 0;
    char err[200];
    if (argc < 1) {
        cli_error(c, "%s needs a job id", action);
        return 1;
    }
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        if (strncasecmp(w, "jobid=", 6) == 0)
            w += 6;
        if (job_filter_ids_parse(w, &ids, &nids, err, sizeof(err)) != 0) {
            cli_error(c, "%s", err);
            free(ids);
            return 1;
        }
    }
    int failed = 0;
    struct json j;
    if (c->json) {
        json_init(&j, stdout);
        json_arr_begin(&j);
    }
    for (size_t i = 0; i < nids; i++)
        failed |= job_action_one(c, hold, ids[i], c->json ? &j : NULL);
    if (c->json) {
        json_arr_end(&j);
        json_end(&j);
    }
    free(ids);
    return failed ? 1 : 0;
}

static int create_node(struct cli *c, int argc, char **argv)
{
    struct scontrol_args_create nc;
    char err[300];
    if (scontrol_args_create_parse(argc, argv, &nc, err, sizeof(err)) != 0) {
        cli_error(c, "%s", err);
        return 1;
    }
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__RegisterNodeRequest rn = SPUR__API__REGISTER_NODE_REQUEST__INIT;
    rn.name = nc.name;
    rn.address = nc.address;
    rn.cpus = nc.cpus;
    rn.mem_mb = nc.mem_mb;
    rn.n_features = nc.nfeatures;
    rn.features = nc.features;
    req.op_case = SPUR__API__REQUEST__OP_REGISTER_NODE;
    req.register_node = &rn;
    spurclient_response *r = cli_call_any(c, &req, true);
    int rc = 1;
    if (r != NULL && r->code != CODE(OK)) {
        cli_response_error(c, r, "Error creating node");
    } else if (r != NULL) {
        rc = 0;
        if (c->json) {
            struct json j;
            json_init(&j, stdout);
            json_obj_begin(&j);
            json_kstr(&j, "created", nc.name);
            json_obj_end(&j);
            json_end(&j);
        }
    }
    spurclient_response_free(r);
    scontrol_args_create_free(&nc);
    return rc;
}

int scontrol_create(struct cli *c, int argc, char **argv)
{
    if (argc < 1) {
        cli_error(c, "create what? (node NodeName=NAME CPUs=N RealMemory=MB ...)");
        return 1;
    }
    if (strcasecmp(argv[0], "node") == 0 || strncasecmp(argv[0], "nodename=", 9) == 0)
        return create_node(c, argc, argv);
    cli_error(c, "invalid entity \"%s\" for create (only node)", argv[0]);
    return 1;
}

int scontrol_update(struct cli *c, int argc, char **argv)
{
    struct scontrol_args_update u;
    char err[300];
    char **names = NULL;
    size_t nnames = 0;
    if (argc < 1) {
        cli_error(c, "update needs NodeName=NAME State=DRAIN|RESUME|DOWN|IDLE [Reason=TEXT]");
        return 1;
    }
    if (scontrol_args_update_parse(argc, argv, &u, err, sizeof(err)) != 0 ||
        hostlist_expand(u.nodes, &names, &nnames, err, sizeof(err)) != 0) {
        cli_error(c, "%s", err);
        scontrol_args_update_free(&u);
        return 1;
    }
    int failed = 0;
    for (size_t i = 0; i < nnames; i++) {
        Spur__Api__Request req = SPUR__API__REQUEST__INIT;
        Spur__Api__UpdateNodeRequest un = SPUR__API__UPDATE_NODE_REQUEST__INIT;
        un.name = names[i];
        un.state = u.state;
        un.reason = u.reason ? u.reason : "";
        req.op_case = SPUR__API__REQUEST__OP_UPDATE_NODE;
        req.update_node = &un;
        spurclient_response *r = cli_call_any(c, &req, true);
        if (r == NULL) {
            failed = 1;
            break; /* no replica answers: the rest would fail the same way */
        }
        if (r->code == CODE(NOT_FOUND)) {
            cli_error(c, "slurm_update error: Invalid node name specified: %s", names[i]);
            failed = 1;
        } else if (r->code == CODE(DENIED)) {
            /* Slurm's slurm_perror("slurm_update error"); the other nodes would say the same. */
            cli_error(c, "slurm_update error: %s", CLI_MSG_DENIED);
            spurclient_response_free(r);
            failed = 1;
            break;
        } else if (r->code != CODE(OK)) {
            char what[300];
            snprintf(what, sizeof(what), "slurm_update error on node %s", names[i]);
            cli_response_error(c, r, what);
            failed = 1;
        }
        spurclient_response_free(r);
    }
    strv_free(names, nnames);
    scontrol_args_update_free(&u);
    return failed;
}

/* lifespan=SECONDS: 1 to 2^32-1. Returns 0, or -1. */
static int parse_lifespan(const char *v, uint32_t *out)
{
    char *end;
    if (v[0] < '0' || v[0] > '9')
        return -1;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || n == 0 || n > UINT32_MAX)
        return -1;
    *out = (uint32_t)n;
    return 0;
}

int scontrol_token(struct cli *c, int argc, char **argv)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__TokenRequest tr = SPUR__API__TOKEN_REQUEST__INIT;
    for (int i = 0; i < argc; i++) {
        if (strncasecmp(argv[i], "lifespan=", 9) == 0) {
            if (parse_lifespan(argv[i] + 9, &tr.lifespan_s) != 0) {
                cli_error(c, "Invalid lifespan: `%s` (seconds, 1 or more)", argv[i] + 9);
                return 1;
            }
        } else if (strncasecmp(argv[i], "username=", 9) == 0 && argv[i][9] != '\0') {
            tr.username = argv[i] + 9;
        } else {
            cli_error(c, "Invalid option: `%s`", argv[i]); /* Slurm's words */
            return 1;
        }
    }
    req.op_case = SPUR__API__REQUEST__OP_TOKEN;
    req.token = &tr;
    spurclient_response *r = cli_call(c, &req, false);
    if (r == NULL)
        return 1;
    if (r->result_case != SPUR__API__RESPONSE__RESULT_TOKEN || r->token == NULL ||
        r->token->token == NULL || r->token->token[0] == '\0') {
        cli_error(c, "Error fetching token: the answer carries none");
        spurclient_response_free(r);
        return 1;
    }
    if (c->json) {
        struct json j;
        json_init(&j, stdout);
        json_obj_begin(&j);
        json_kstr(&j, "token", r->token->token);
        json_kstr(&j, "user", r->token->user ? r->token->user : "");
        json_ku64(&j, "expires", r->token->expires_s);
        json_obj_end(&j);
        json_end(&j);
    } else {
        printf("SPUR_JWT=%s\n", r->token->token);
    }
    spurclient_response_free(r);
    return 0;
}
