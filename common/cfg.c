/*
 * cfg.c - strict YAML configuration loader.
 *
 * The schema is a table: one row per accepted key with its type, the field it fills and
 * its range. The loader reads the file into a bounded tree (ytree.c: nesting and node
 * caps, linear time, no cycles through aliases), walks it once, looks every key up by its
 * dotted path, refuses what the table does not know, and records the line each key came
 * from. It does not stop at the first error: it records it, leaves that key at its
 * default, marks it refused and goes on, so that one run names every mistake (up to
 * CFG_MAX_ERRORS). Then the rules between keys run (check_rules), skipping the keys
 * already refused so no error is reported twice.
 *
 * check_rules() is the one place for every rule that start-up enforces, the host-name
 * ones included; cfg_validate() exposes it, and cfg_load_host() runs it as the last step
 * of the load, so spurctld --check-config and the worker's start-up cannot disagree.
 * The walk only descends where the schema has sections (two levels, partitions three),
 * so a hostile file, aliases included, cannot make it expensive.
 */
#include "cfg.h"

#include "buf.h"
#include "log.h"
#include "netaddr.h"
#include "spur_build.h"
#include "ytree.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum ktype { K_MAP, K_STR, K_BOOL, K_U32, K_STRLIST, K_PARTITIONS };
typedef int (*str_check_fn)(const char *v, char *why, size_t whylen);

struct key {
    const char *path;
    enum ktype type;
    size_t off;
    uint32_t min, max;
    str_check_fn check;
    size_t cnt_off; /* K_STRLIST: offset of the size_t element count */
};

static int check_cluster_name(const char *v, char *why, size_t whylen);
static int check_abs_path(const char *v, char *why, size_t whylen);
static int check_log_level(const char *v, char *why, size_t whylen);
static int check_nonempty(const char *v, char *why, size_t whylen);
static int check_opt_hostport(const char *v, char *why, size_t whylen);
static int check_opt_node_name(const char *v, char *why, size_t whylen);
static int check_cgroup_mode(const char *v, char *why, size_t whylen);
static int check_opt_abs_path(const char *v, char *why, size_t whylen);
static int check_munge_mode(const char *v, char *why, size_t whylen);
static int check_user_name(const char *v, char *why, size_t whylen);
static int check_opt_group_name(const char *v, char *why, size_t whylen);

#define CFG_READ_CHUNK 4096 /* cfg_load_host() reads the file in pieces of at least this */

#define OFF(field) offsetof(struct cfg, field)
#define POFF(field) offsetof(struct cfg_partition, field)

static const struct key top_keys[] = {
    {"cluster_name", K_STR, OFF(cluster_name), 0, 0, check_cluster_name},
    {"controller", K_MAP, 0, 0, 0, NULL},
    {"controller.listen", K_STR, OFF(controller.listen), 0, 0, netaddr_check_hostport},
    {"controller.state_dir", K_STR, OFF(controller.state_dir), 0, 0, check_abs_path},
    {"controller.node_id", K_U32, OFF(controller.node_id), 0, CFG_MAX_PEERS, NULL},
    {"controller.peers", K_STRLIST, OFF(controller.peers), 1, CFG_MAX_PEERS,
     netaddr_check_hostport, OFF(controller.npeers)},
    {"controller.hosts", K_STRLIST, OFF(controller.hosts), 1, 16, netaddr_check_hostport,
     OFF(controller.nhosts)},
    {"controller.finished_job_retention_s", K_U32, OFF(controller.finished_job_retention_s), 0,
     365u * 86400u, NULL},
    {"controller.max_frame_bytes", K_U32, OFF(controller.max_frame_bytes), 65536, 64u << 20,
     NULL},
    {"controller.max_script_bytes", K_U32, OFF(controller.max_script_bytes), 1, 4u << 20, NULL},
    {"controller.socket", K_STR, OFF(controller.socket), 0, 0, check_opt_abs_path},
    {"controller.admin_users", K_STRLIST, OFF(controller.admin_users), 0, 64, check_user_name,
     OFF(controller.nadmin_users)},
    {"controller.admin_group", K_STR, OFF(controller.admin_group), 0, 0, check_opt_group_name},
    {"auth", K_MAP, 0, 0, 0, NULL},
    {"auth.key_file", K_STR, OFF(auth.key_file), 0, 0, check_abs_path},
    {"auth.next_key_file", K_STR, OFF(auth.next_key_file), 0, 0, check_opt_abs_path},
    {"auth.munge", K_STR, OFF(auth.munge), 0, 0, check_munge_mode},
    {"auth.munge_socket", K_STR, OFF(auth.munge_socket), 0, 0, check_opt_abs_path},
    {"auth.token_lifespan_s", K_U32, OFF(auth.token_lifespan_s), 1, 365u * 86400u, NULL},
    {"auth.max_token_lifespan_s", K_U32, OFF(auth.max_token_lifespan_s), 1, 365u * 86400u,
     NULL},
    {"raft", K_MAP, 0, 0, 0, NULL},
    {"raft.listen", K_STR, OFF(raft.listen), 0, 0, netaddr_check_hostport},
    {"raft.heartbeat_ms", K_U32, OFF(raft.heartbeat_ms), 10, 10000, NULL},
    {"raft.election_timeout_ms", K_U32, OFF(raft.election_timeout_ms), 50, 60000, NULL},
    {"raft.snapshot_entries", K_U32, OFF(raft.snapshot_entries), 100, 100000000, NULL},
    {"raft.max_uncommitted_bytes", K_U32, OFF(raft.max_uncommitted_bytes), 1024, 0xffffffffu,
     NULL},
    {"raft.fsync", K_BOOL, OFF(raft.fsync), 0, 0, NULL},
    {"health", K_MAP, 0, 0, 0, NULL},
    {"health.enabled", K_BOOL, OFF(health.enabled), 0, 0, NULL},
    {"health.bind", K_STR, OFF(health.bind), 0, 0, netaddr_check_bind},
    {"health.port", K_U32, OFF(health.port), NETADDR_PORT_MIN, NETADDR_PORT_MAX, NULL},
    {"health.max_connections", K_U32, OFF(health.max_connections), 8, 65536, NULL},
    {"health.idle_timeout_ms", K_U32, OFF(health.idle_timeout_ms), 100, 3600000, NULL},
    {"metrics", K_MAP, 0, 0, 0, NULL},
    {"metrics.enabled", K_BOOL, OFF(metrics.enabled), 0, 0, NULL},
    {"metrics.bind", K_STR, OFF(metrics.bind), 0, 0, netaddr_check_bind},
    {"metrics.port", K_U32, OFF(metrics.port), NETADDR_PORT_MIN, NETADDR_PORT_MAX, NULL},
    {"supervisor", K_MAP, 0, 0, 0, NULL},
    {"supervisor.heartbeat_ms", K_U32, OFF(supervisor.heartbeat_ms), 10, 60000, NULL},
    {"supervisor.stall_timeout_ms", K_U32, OFF(supervisor.stall_timeout_ms), 50, 3600000, NULL},
    {"supervisor.kill_timeout_ms", K_U32, OFF(supervisor.kill_timeout_ms), 50, 3600000, NULL},
    {"supervisor.shutdown_grace_ms", K_U32, OFF(supervisor.shutdown_grace_ms), 0, 3600000, NULL},
    {"supervisor.exit_linger_ms", K_U32, OFF(supervisor.exit_linger_ms), 0, 60000, NULL},
    {"agent", K_MAP, 0, 0, 0, NULL},
    {"agent.listen", K_STR, OFF(agent.listen), 0, 0, netaddr_check_hostport},
    {"agent.address", K_STR, OFF(agent.address), 0, 0, check_opt_hostport},
    {"agent.spool_dir", K_STR, OFF(agent.spool_dir), 0, 0, check_abs_path},
    {"agent.node_name", K_STR, OFF(agent.node_name), 0, 0, check_opt_node_name},
    {"agent.cpus", K_U32, OFF(agent.cpus), 0, 1000000, NULL},
    {"agent.mem_mb", K_U32, OFF(agent.mem_mb), 0, 0xffffffffu, NULL},
    {"agent.heartbeat_s", K_U32, OFF(agent.heartbeat_s), 1, 3600, NULL},
    {"agent.node_timeout_s", K_U32, OFF(agent.node_timeout_s), 2, 86400, NULL},
    {"agent.kill_wait_s", K_U32, OFF(agent.kill_wait_s), 0, 3600, NULL},
    {"agent.cgroup", K_STR, OFF(agent.cgroup), 0, 0, check_cgroup_mode},
    {"accounting", K_MAP, 0, 0, 0, NULL},
    {"accounting.database_url", K_STR, OFF(accounting.database_url), 0, 0, NULL},
    {"accounting.password_file", K_STR, OFF(accounting.password_file), 0, 0, check_opt_abs_path},
    {"accounting.batch_size", K_U32, OFF(accounting.batch_size), 1, 10000, NULL},
    {"accounting.retry_max_ms", K_U32, OFF(accounting.retry_max_ms), 100, 600000, NULL},
    {"log", K_MAP, 0, 0, 0, NULL},
    {"log.level", K_STR, OFF(log.level), 0, 0, check_log_level},
    {"partitions", K_PARTITIONS, 0, 0, CFG_MAX_PARTITIONS, NULL},
};
#define NTOP (sizeof(top_keys) / sizeof(top_keys[0]))

static const struct key part_keys[] = {
    {"name", K_STR, POFF(name), 0, 0, check_nonempty},
    {"nodes", K_STR, POFF(nodes), 0, 0, check_nonempty},
    {"default", K_BOOL, POFF(is_default), 0, 0, NULL},
    {"max_nodes", K_U32, POFF(max_nodes), 0, 1000000, NULL},
    {"max_time_min", K_U32, POFF(max_time_min), 0, 5256000, NULL},
    {"max_cpus_per_node", K_U32, POFF(max_cpus_per_node), 0, 1000000, NULL},
    {"max_mem_mb_per_node", K_U32, POFF(max_mem_mb_per_node), 0, 0xffffffffu, NULL},
    {"up", K_BOOL, POFF(up), 0, 0, NULL},
};
#define NPART (sizeof(part_keys) / sizeof(part_keys[0]))

const char *const *cfg_key_names(void)
{
    static const char *names[NTOP + NPART + 1];
    size_t n = 0;
    if (names[0] == NULL) {
        for (size_t i = 0; i < NTOP; i++)
            if (top_keys[i].type != K_MAP)
                names[n++] = top_keys[i].path;
        static char pbuf[NPART][64];
        for (size_t i = 0; i < NPART; i++) {
            snprintf(pbuf[i], sizeof(pbuf[i]), "partitions.%s", part_keys[i].path);
            names[n++] = pbuf[i];
        }
        names[n] = NULL;
    }
    return names;
}

/* ---- small helpers ------------------------------------------------------------------ */

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void strlist_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void partition_free(struct cfg_partition *p)
{
    free(p->name);
    free(p->nodes);
    memset(p, 0, sizeof(*p));
}

void cfg_free(struct cfg *c)
{
    free(c->where);
    free(c->source);
    free(c->cluster_name);
    free(c->controller.listen);
    free(c->controller.state_dir);
    strlist_free(c->controller.peers, c->controller.npeers);
    strlist_free(c->controller.hosts, c->controller.nhosts);
    free(c->raft.listen);
    free(c->health.bind);
    free(c->metrics.bind);
    free(c->controller.socket);
    strlist_free(c->controller.admin_users, c->controller.nadmin_users);
    free(c->controller.admin_group);
    free(c->auth.key_file);
    free(c->auth.next_key_file);
    free(c->auth.munge);
    free(c->auth.munge_socket);
    free(c->agent.listen);
    free(c->agent.address);
    free(c->agent.spool_dir);
    free(c->agent.node_name);
    free(c->agent.cgroup);
    free(c->accounting.database_url);
    free(c->accounting.password_file);
    free(c->log.level);
    for (size_t i = 0; i < c->npartitions; i++)
        partition_free(&c->partitions[i]);
    free(c->partitions);
    memset(c, 0, sizeof(*c));
}

static char **strlist_of(const char *const *items, size_t n)
{
    char **v = calloc(n ? n : 1, sizeof(char *));
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        v[i] = xstrdup(items[i]);
    return v;
}

static void partition_defaults(struct cfg_partition *p)
{
    memset(p, 0, sizeof(*p));
    p->up = true;
}

int cfg_defaults(struct cfg *c)
{
    static const char *const peers[] = {"127.0.0.1:6821"};
    static const char *const hosts[] = {"localhost:6817"};

    memset(c, 0, sizeof(*c));
    c->source = xstrdup("(embedded defaults)");
    c->cluster_name = xstrdup("spur");
    c->controller.listen = xstrdup("[::]:6817");
    c->controller.state_dir = xstrdup("/var/spool/spur");
    c->controller.node_id = 0;
    c->controller.peers = strlist_of(peers, 1);
    c->controller.npeers = 1;
    c->controller.hosts = strlist_of(hosts, 1);
    c->controller.nhosts = 1;
    c->controller.finished_job_retention_s = 86400;
    c->controller.max_frame_bytes = 4u << 20;
    c->controller.max_script_bytes = 1u << 20;
    c->controller.socket = xstrdup("/run/spurctld/spurctld.sock");
    c->controller.admin_users = NULL;
    c->controller.nadmin_users = 0;
    c->controller.admin_group = xstrdup("");
    c->auth.key_file = xstrdup("/etc/spur/spur.key");
    c->auth.next_key_file = xstrdup("");
    c->auth.munge = xstrdup("auto");
    c->auth.munge_socket = xstrdup("");
    c->auth.token_lifespan_s = 1800;
    c->auth.max_token_lifespan_s = 7u * 86400u;
    c->raft.listen = xstrdup("[::]:6821");
    c->raft.heartbeat_ms = 100;
    c->raft.election_timeout_ms = 1000;
    c->raft.snapshot_entries = 10000;
    c->raft.max_uncommitted_bytes = 64u << 20;
    c->raft.fsync = true;
    c->health.enabled = true;
    c->health.bind = xstrdup("all");
    c->health.port = 6823;
    c->health.max_connections = 1024;
    c->health.idle_timeout_ms = 10000;
    c->metrics.enabled = true;
    c->metrics.bind = xstrdup("loopback");
    c->metrics.port = 6822;
    c->supervisor.heartbeat_ms = 100;
    c->supervisor.stall_timeout_ms = 3000;
    c->supervisor.kill_timeout_ms = 10000;
    c->supervisor.shutdown_grace_ms = 10000;
    c->agent.listen = xstrdup("[::]:6818");
    c->agent.address = xstrdup("");
    c->agent.spool_dir = xstrdup("/var/spool/spur/d");
    c->agent.node_name = xstrdup("");
    c->agent.heartbeat_s = 10;
    c->agent.node_timeout_s = 60;
    c->agent.kill_wait_s = 30;
    c->agent.cgroup = xstrdup("auto");
    c->accounting.database_url = xstrdup("");
    c->accounting.password_file = xstrdup("");
    c->accounting.batch_size = 500;
    c->accounting.retry_max_ms = 30000;
    c->log.level = xstrdup("info");
    c->partitions = calloc(1, sizeof(struct cfg_partition));
    if (c->partitions == NULL)
        return -1;
    partition_defaults(&c->partitions[0]);
    c->partitions[0].name = xstrdup("default");
    c->partitions[0].nodes = xstrdup("ALL");
    c->partitions[0].is_default = true;
    c->npartitions = 1;
    if (!c->source || !c->cluster_name || !c->controller.listen || !c->controller.state_dir ||
        !c->controller.peers || !c->controller.peers[0] || !c->controller.hosts ||
        !c->controller.hosts[0] || !c->raft.listen || !c->health.bind || !c->metrics.bind ||
        !c->agent.listen || !c->agent.address || !c->agent.spool_dir || !c->agent.node_name ||
        !c->agent.cgroup || !c->controller.socket || !c->controller.admin_group ||
        !c->auth.key_file || !c->auth.next_key_file || !c->auth.munge || !c->auth.munge_socket || !c->accounting.database_url || !c->accounting.password_file || !c->log.level || !c->partitions[0].name ||
        !c->partitions[0].nodes)
        return -1;
    return 0;
}

/* ---- value checks ------------------------------------------------------------------- */

static int check_cluster_name(const char *v, char *why, size_t whylen)
{
    size_t n = strlen(v);
    if (n == 0 || n > 63) {
        snprintf(why, whylen, "must be 1 to 63 characters");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (!(isalnum(ch) || ch == '.' || ch == '-' || ch == '_')) {
            snprintf(why, whylen, "may hold only letters, digits, '.', '-' and '_'");
            return -1;
        }
    }
    return 0;
}

static int check_abs_path(const char *v, char *why, size_t whylen)
{
    if (v[0] != '/') {
        snprintf(why, whylen, "\"%s\" is not an absolute path", v);
        return -1;
    }
    if (strlen(v) > PATH_MAX - 64) {
        snprintf(why, whylen, "path too long");
        return -1;
    }
    return 0;
}

static int check_log_level(const char *v, char *why, size_t whylen)
{
    if (strcmp(v, "debug") && strcmp(v, "info") && strcmp(v, "warn") && strcmp(v, "error")) {
        snprintf(why, whylen, "\"%s\" is not one of debug, info, warn, error", v);
        return -1;
    }
    return 0;
}

static int check_nonempty(const char *v, char *why, size_t whylen)
{
    if (v[0] == '\0') {
        snprintf(why, whylen, "must not be empty");
        return -1;
    }
    return 0;
}

/* agent.address: empty (derived by spurd) or host:port. */
static int check_opt_hostport(const char *v, char *why, size_t whylen)
{
    return v[0] == '\0' ? 0 : netaddr_check_hostport(v, why, whylen);
}

/* agent.node_name: empty (the short hostname) or a node name as partitions name them. */
static int check_opt_node_name(const char *v, char *why, size_t whylen)
{
    size_t n = strlen(v);
    if (n > 64) {
        snprintf(why, whylen, "is %zu bytes; a node name has at most 64", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (!isalnum(ch) && ch != '.' && ch != '-' && ch != '_') {
            snprintf(why, whylen, "may hold only letters, digits, '.', '-' and '_'");
            return -1;
        }
    }
    return 0;
}

static int check_cgroup_mode(const char *v, char *why, size_t whylen)
{
    if (strcmp(v, "auto") == 0 || strcmp(v, "v2") == 0 || strcmp(v, "none") == 0)
        return 0;
    snprintf(why, whylen, "must be auto, v2 or none");
    return -1;
}

/* controller.socket, auth.next_key_file, auth.munge_socket: empty (none) or an absolute path. */
static int check_opt_abs_path(const char *v, char *why, size_t whylen)
{
    if (v[0] == '\0')
        return 0;
    if (check_abs_path(v, why, whylen) != 0)
        return -1;
    if (strlen(v) > 100) { /* a Unix socket's sun_path holds 108 bytes */
        snprintf(why, whylen, "path longer than 100 bytes");
        return -1;
    }
    return 0;
}

static int check_munge_mode(const char *v, char *why, size_t whylen)
{
    if (strcmp(v, "auto") == 0 || strcmp(v, "on") == 0 || strcmp(v, "off") == 0)
        return 0;
    snprintf(why, whylen, "must be auto, on or off");
    return -1;
}

/* A login name as useradd(8) accepts it: letters, digits, '.', '_', '-', not first '-'. */
static int check_user_name(const char *v, char *why, size_t whylen)
{
    size_t n = strlen(v);
    if (n == 0 || n > 32 || v[0] == '-') {
        snprintf(why, whylen, "\"%.40s\" is not a user name", v);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (!isalnum(ch) && ch != '.' && ch != '_' && ch != '-' && !(ch == '$' && i == n - 1)) {
            snprintf(why, whylen, "\"%.40s\" is not a user name", v);
            return -1;
        }
    }
    return 0;
}

static int check_opt_group_name(const char *v, char *why, size_t whylen)
{
    if (v[0] == '\0')
        return 0;
    if (check_user_name(v, why, whylen) != 0) {
        snprintf(why, whylen, "\"%.40s\" is not a group name", v);
        return -1;
    }
    return 0;
}

/* ---- errors ------------------------------------------------------------------------- */

/*
 * Where each key came from, for messages about rules between keys. Owned by the struct
 * cfg it describes (cfg_free() releases it); NULL for the embedded defaults.
 */
struct cfg_where {
    unsigned top_line[NTOP];          /* 1-based line of each key the file set; 0: default */
    bool top_bad[NTOP];               /* the key's value was refused; rules skip it */
    unsigned peer_line[CFG_MAX_PEERS];/* line of each controller.peers entry */
    unsigned part_line[CFG_MAX_PARTITIONS]; /* line of each partition's mapping */
    bool part_bad[CFG_MAX_PARTITIONS];
};

static void add_error(struct cfg_error *err, const char *name, unsigned line, const char *key,
                      const char *why)
{
    if (err->count >= CFG_MAX_ERRORS) {
        err->more = true;
        return;
    }
    char *m = err->list[err->count];
    if (key == NULL) /* about the file as a whole, which could not be read: no line */
        snprintf(m, CFG_ERR_MAX, "%s: %s", name, why);
    else if (line > 0)
        snprintf(m, CFG_ERR_MAX, "%s:%u: %s: %s", name, line, key, why);
    else
        snprintf(m, CFG_ERR_MAX, "%s: %s: %s", name, key, why);
    /* One line per error: a value from the file may hold a line break or a control byte. */
    for (char *q = m; *q; q++)
        if ((unsigned char)*q < ' ' || *q == 0x7f)
            *q = '?';
    if (err->count == 0)
        memcpy(err->msg, m, CFG_ERR_MAX);
    err->count++;
}

void cfg_print_errors(FILE *out, const char *prefix, const struct cfg_error *err)
{
    for (size_t i = 0; i < err->count; i++)
        fprintf(out, "%s%s\n", prefix, err->list[i]);
    if (err->more)
        fprintf(out, "%sand more errors, not looked for after the first %d\n", prefix,
                CFG_MAX_ERRORS);
}

void cfg_log_errors(const char *comp, const struct cfg_error *err)
{
    char q[2 * CFG_ERR_MAX + 8];
    for (size_t i = 0; i < err->count; i++)
        log_event(LOG_ERROR, comp, "configuration error", "error=%s",
                  log_quote(q, sizeof(q), err->list[i]));
    log_event(LOG_ERROR, comp, "invalid configuration; exiting 78", "errors=%zu%s error=%s",
              err->count, err->more ? "+" : "", log_quote(q, sizeof(q), err->msg));
}

static void add_errorv(struct cfg_error *err, const char *name, unsigned line, const char *key,
                       const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

/* add_error() with the reason formatted: what fail(), rule_error() and file_error() share. */
static void add_errorv(struct cfg_error *err, const char *name, unsigned line, const char *key,
                       const char *fmt, va_list ap)
{
    char why[400];
    vsnprintf(why, sizeof(why), fmt, ap);
    add_error(err, name, line, key, why);
}

static void add_errorf(struct cfg_error *err, const char *name, unsigned line, const char *key,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void add_errorf(struct cfg_error *err, const char *name, unsigned line, const char *key,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_errorv(err, name, line, key, fmt, ap);
    va_end(ap);
}

/* ---- the walk ----------------------------------------------------------------------- */

/*
 * The walk records an error and goes on with the next key, list entry or partition, so
 * one run reports every unknown key, wrong type and bad value (up to CFG_MAX_ERRORS). A
 * refused value leaves the key at its default and marks it bad, so that the rules between
 * keys, which run next, do not report a second, derived error about it.
 */
struct loader {
    const char *name;
    struct cfg *c;
    struct cfg_error *err;
    struct cfg_where *w;
};

static int fail(struct loader *L, unsigned line, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct loader *L, unsigned line, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_errorv(L->err, L->name, line, key, fmt, ap);
    va_end(ap);
    return -1;
}

/* Enough errors: stop looking for more. */
static bool saturated(const struct loader *L)
{
    return L->err->more;
}

static unsigned line_of(const struct ynode *n)
{
    return n->line;
}

static const char *scalar(const struct ynode *n)
{
    return n->value;
}

static int is_plain(const struct ynode *n)
{
    return n->plain;
}

static int is_null_scalar(const struct ynode *n)
{
    const char *v = scalar(n);
    return is_plain(n) && (v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
                           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0);
}

static const char *node_kind(const struct ynode *n)
{
    switch (n->type) {
    case YNODE_MAPPING:
        return "a mapping";
    case YNODE_SEQUENCE:
        return "a list";
    case YNODE_SCALAR:
        return is_null_scalar(n) ? "nothing (null)" : "a scalar";
    }
    return "nothing";
}

/*
 * v as the string value of key (a K_STR key or one entry of a K_STRLIST): a scalar, not
 * null, without a NUL byte, that check (when not NULL) accepts. NULL, recorded, if not.
 */
static const char *string_value(struct loader *L, const struct ynode *v, const char *key,
                                str_check_fn check)
{
    char why[256];
    if (v->type != YNODE_SCALAR || is_null_scalar(v)) {
        fail(L, line_of(v), key, "expected a string, got %s", node_kind(v));
        return NULL;
    }
    if (strlen(scalar(v)) != v->len) {
        fail(L, line_of(v), key, "string holds a NUL byte");
        return NULL;
    }
    if (check != NULL && check(scalar(v), why, sizeof(why)) != 0) {
        fail(L, line_of(v), key, "%s", why);
        return NULL;
    }
    return scalar(v);
}

static int parse_string(struct loader *L, const struct ynode *v, const char *key,
                        str_check_fn check, char **dst)
{
    const char *sv = string_value(L, v, key, check);
    if (sv == NULL)
        return -1;
    char *s = strdup(sv);
    if (s == NULL)
        return fail(L, line_of(v), key, "out of memory");
    free(*dst);
    *dst = s;
    return 0;
}

static int parse_bool(struct loader *L, const struct ynode *v, const char *key, bool *dst)
{
    if (v->type == YNODE_SCALAR && is_plain(v)) {
        const char *s = scalar(v);
        if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0) {
            *dst = true;
            return 0;
        }
        if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0) {
            *dst = false;
            return 0;
        }
    }
    if (v->type == YNODE_SCALAR)
        return fail(L, line_of(v), key, "expected true or false, got \"%.64s\"", scalar(v));
    return fail(L, line_of(v), key, "expected true or false, got %s", node_kind(v));
}

static int parse_u32(struct loader *L, const struct ynode *v, const char *key, uint32_t min,
                     uint32_t max, uint32_t *dst)
{
    if (v->type != YNODE_SCALAR || is_null_scalar(v))
        return fail(L, line_of(v), key, "expected an integer, got %s", node_kind(v));
    const char *s = scalar(v);
    if (!is_plain(v))
        return fail(L, line_of(v), key, "expected an integer, got the string \"%.64s\"", s);
    if (*s == '\0' || strlen(s) > 12)
        return fail(L, line_of(v), key, "\"%.64s\" is not an integer in range %u..%u", s, min,
                    max);
    uint64_t x = 0;
    /* Plain decimal digits only: no sign, no "_", no leading zero (YAML 1.1 reads 010 as 8). */
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return fail(L, line_of(v), key, "\"%s\" is not a non-negative integer", s);
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (s[0] == '0' && s[1] != '\0')
        return fail(L, line_of(v), key, "\"%s\": write integers without leading zeros", s);
    if (x < min || x > max)
        return fail(L, line_of(v), key, "%s is out of range %u..%u", s, min, max);
    *dst = (uint32_t)x;
    return 0;
}

/* lines: when not NULL, receives the line of each entry (at most k->max). */
static int parse_strlist(struct loader *L, const struct ynode *v, const struct key *k,
                         char ***dst, size_t *dstn, unsigned *lines)
{
    char sub[128];
    if (v->type != YNODE_SEQUENCE)
        return fail(L, line_of(v), k->path, "expected a list of strings, got %s", node_kind(v));
    size_t n = v->n;
    if (n < k->min || n > k->max)
        return fail(L, line_of(v), k->path, "needs %u to %u entries, has %zu", k->min, k->max,
                    n);
    char **list = calloc(n ? n : 1, sizeof(char *));
    if (list == NULL)
        return fail(L, line_of(v), k->path, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !saturated(L); i++) {
        const struct ynode *it = v->items[i];
        snprintf(sub, sizeof(sub), "%s[%zu]", k->path, i);
        if (lines != NULL)
            lines[i] = line_of(it);
        const char *sv = string_value(L, it, sub, k->check);
        if (sv == NULL) {
            rc = -1;
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            if (list[j] != NULL && strcmp(list[j], sv) == 0) {
                rc = fail(L, line_of(it), sub, "\"%s\" is listed twice", sv);
                break;
            }
        }
        list[i] = strdup(sv);
        if (list[i] == NULL)
            rc = fail(L, line_of(it), sub, "out of memory");
    }
    if (rc != 0 || saturated(L)) {
        strlist_free(list, n);
        return -1;
    }
    strlist_free(*dst, *dstn);
    *dst = list;
    *dstn = n;
    return 0;
}

/* Fill one field of base (a struct cfg or a struct cfg_partition) from node v. */
static int parse_value(struct loader *L, const struct ynode *v, const struct key *k,
                       const char *keyname, void *base)
{
    char *field = (char *)base + k->off;
    switch (k->type) {
    case K_STR:
        return parse_string(L, v, keyname, k->check, (char **)field);
    case K_BOOL:
        return parse_bool(L, v, keyname, (bool *)field);
    case K_U32:
        return parse_u32(L, v, keyname, k->min, k->max, (uint32_t *)field);
    case K_STRLIST: {
        unsigned *lines = (void *)field == (void *)&L->c->controller.peers ? L->w->peer_line
                                                                           : NULL;
        return parse_strlist(L, v, k, (char ***)field, (size_t *)((char *)base + k->cnt_off),
                             lines);
    }
    default:
        return fail(L, line_of(v), keyname, "internal: unexpected key type");
    }
}

/*
 * The key's text, or NULL (recorded) for a key that is no plain string or that the
 * mapping already holds. Compares with the keys before it only, and the walk stops after
 * CFG_MAX_ERRORS errors, so a mapping of many keys costs at most (known keys + errors)^2.
 */
static const char *mapping_key(struct loader *L, const struct ynode *map, size_t pair,
                               const char *prefix)
{
    const struct ynode *kn = map->items[2 * pair];
    if (kn->type != YNODE_SCALAR) {
        fail(L, line_of(kn), prefix[0] ? prefix : "(top level)", "a key must be a plain string");
        return NULL;
    }
    for (size_t q = 0; q < pair; q++) {
        const struct ynode *qn = map->items[2 * q];
        if (qn->type == YNODE_SCALAR && strcmp(scalar(qn), scalar(kn)) == 0) {
            char full[160];
            snprintf(full, sizeof(full), "%s%s%.100s", prefix, prefix[0] ? "." : "", scalar(kn));
            fail(L, line_of(kn), full, "duplicate key (first at line %u)", line_of(qn));
            return NULL;
        }
    }
    return scalar(kn);
}

/* One partition's mapping into *p. Returns 0, or -1 when any of it was refused. */
static int parse_partition(struct loader *L, const struct ynode *pn, const char *keyname,
                           struct cfg_partition *p)
{
    int rc = 0;
    if (pn->type != YNODE_MAPPING)
        return fail(L, line_of(pn), keyname, "expected a mapping, got %s", node_kind(pn));
    for (size_t i = 0; i < pn->n && !saturated(L); i++) {
        const char *kname = mapping_key(L, pn, i, keyname);
        if (kname == NULL) {
            rc = -1;
            continue;
        }
        const struct ynode *kn = pn->items[2 * i], *val = pn->items[2 * i + 1];
        char full[256];
        snprintf(full, sizeof(full), "%s.%.100s", keyname, kname);
        const struct key *pk = NULL;
        for (size_t j = 0; j < NPART; j++)
            if (strcmp(part_keys[j].path, kname) == 0)
                pk = &part_keys[j];
        if (pk == NULL) {
            rc = fail(L, line_of(kn), full, "unknown key");
            continue;
        }
        if (parse_value(L, val, pk, full, p) != 0)
            rc = -1;
    }
    if (p->name == NULL && rc == 0)
        rc = fail(L, line_of(pn), keyname, "a partition needs a name");
    if (p->nodes == NULL) {
        p->nodes = strdup("ALL");
        if (p->nodes == NULL)
            rc = fail(L, line_of(pn), keyname, "out of memory");
    }
    return rc;
}

/*
 * The partitions list. Every partition is parsed, errors or not, and the list replaces
 * the default one when it is a list of the right length, so that the rules between
 * partitions (unique names, one default) still see the good ones; part_bad marks the rest.
 */
static int parse_partitions(struct loader *L, const struct ynode *v, const struct key *k)
{
    char keyname[64];
    if (v->type != YNODE_SEQUENCE)
        return fail(L, line_of(v), "partitions", "expected a list of partitions, got %s",
                    node_kind(v));
    size_t n = v->n;
    if (n < 1 || n > k->max)
        return fail(L, line_of(v), "partitions", "needs 1 to %u partitions, has %zu", k->max, n);
    struct cfg_partition *parts = calloc(n, sizeof(*parts));
    if (parts == NULL)
        return fail(L, line_of(v), "partitions", "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ynode *pn = v->items[i];
        partition_defaults(&parts[i]);
        L->w->part_line[i] = line_of(pn);
        snprintf(keyname, sizeof(keyname), "partitions[%zu]", i);
        if (saturated(L) || parse_partition(L, pn, keyname, &parts[i]) != 0) {
            L->w->part_bad[i] = true;
            rc = -1;
        }
    }
    for (size_t i = 0; i < L->c->npartitions; i++)
        partition_free(&L->c->partitions[i]);
    free(L->c->partitions);
    L->c->partitions = parts;
    L->c->npartitions = n;
    return rc;
}

static const struct key *find_top(const char *path, size_t *idx)
{
    for (size_t i = 0; i < NTOP; i++) {
        if (strcmp(top_keys[i].path, path) == 0) {
            *idx = i;
            return &top_keys[i];
        }
    }
    return NULL;
}

static void walk_map(struct loader *L, const struct ynode *map, const char *prefix)
{
    for (size_t i = 0; i < map->n && !saturated(L); i++) {
        const char *kname = mapping_key(L, map, i, prefix);
        if (kname == NULL)
            continue;
        const struct ynode *kn = map->items[2 * i], *val = map->items[2 * i + 1];
        char path[160];
        size_t idx = 0;
        snprintf(path, sizeof(path), "%s%s%.100s", prefix, prefix[0] ? "." : "", kname);
        const struct key *k = find_top(path, &idx);
        if (k == NULL) {
            fail(L, line_of(kn), path, "unknown key");
            continue;
        }
        L->w->top_line[idx] = line_of(kn);
        int rc;
        if (k->type == K_MAP) {
            if (val->type != YNODE_MAPPING) {
                rc = fail(L, line_of(val), path, "expected a mapping, got %s", node_kind(val));
            } else {
                walk_map(L, val, path);
                rc = 0;
            }
        } else if (k->type == K_PARTITIONS) {
            rc = parse_partitions(L, val, k);
        } else {
            rc = parse_value(L, val, k, path, L->c);
        }
        if (rc != 0)
            L->w->top_bad[idx] = true;
    }
}

/* ---- rules across keys -------------------------------------------------------------- */

struct rules {
    const struct cfg *c;
    const struct cfg_where *w;
    const char *name;
    struct cfg_error *err;
};

static unsigned line_at(const struct rules *R, const char *path)
{
    size_t idx;
    if (R->w == NULL || find_top(path, &idx) == NULL)
        return 0;
    return R->w->top_line[idx];
}

static bool is_set(const struct rules *R, const char *path)
{
    return line_at(R, path) != 0;
}

/* Does a rule about path hold off, since the value there was refused already? */
static bool refused(const struct rules *R, const char *path)
{
    size_t idx;
    return R->w != NULL && find_top(path, &idx) != NULL && R->w->top_bad[idx];
}

static void rule_error(const struct rules *R, unsigned line, const char *key, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

static void rule_error(const struct rules *R, unsigned line, const char *key, const char *fmt,
                       ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_errorv(R->err, R->name, line, key, fmt, ap);
    va_end(ap);
}

/*
 * A rule between keys a and b is reported at a when the file sets a or leaves b out, else
 * at b, which the file must then have set (the defaults keep every rule): the message
 * always names a line the operator wrote.
 */
static bool report_at_first(const struct rules *R, const char *a, const char *b)
{
    return is_set(R, a) || !is_set(R, b);
}

/*
 * A rule between keys a and b, whose values va and vb break it when broken is true:
 * reported at a as "VA <at_a> b (VB)", or at b as "VB <at_b> a (VA)" (report_at_first()),
 * and not at all when either value was refused already.
 */
static void rule_pair(const struct rules *R, const char *a, uint32_t va, const char *b,
                      uint32_t vb, bool broken, const char *at_a, const char *at_b)
{
    if (!broken || refused(R, a) || refused(R, b))
        return;
    if (report_at_first(R, a, b))
        rule_error(R, line_at(R, a), a, "%u %s %s (%u)", va, at_a, b, vb);
    else
        rule_error(R, line_at(R, b), b, "%u %s %s (%u)", vb, at_b, a, va);
}

static void rules_timing(const struct rules *R)
{
    const struct cfg *c = R->c;
    uint32_t sup_hb = c->supervisor.heartbeat_ms, stall = c->supervisor.stall_timeout_ms;
    uint32_t kill = c->supervisor.kill_timeout_ms;
    uint32_t election = c->raft.election_timeout_ms, raft_hb = c->raft.heartbeat_ms;
    rule_pair(R, "supervisor.stall_timeout_ms", stall, "supervisor.heartbeat_ms", sup_hb,
              stall <= sup_hb, "must be greater than", "must be less than");
    rule_pair(R, "supervisor.kill_timeout_ms", kill, "supervisor.stall_timeout_ms", stall,
              kill < stall, "must not be less than", "must not be greater than");
    rule_pair(R, "raft.election_timeout_ms", election, "raft.heartbeat_ms", raft_hb,
              election < 3 * raft_hb, "must be at least 3 x", "must be at most a third of");
}

/* This replica's listeners, in the order rules name them. */
struct listener {
    const char *key;   /* the key that sets the port */
    const char *what;  /* how a message names the port */
    char host[256];
    uint16_t port;
};

/* A listener of a "HOST:PORT" key (controller.listen, raft.listen) unless it was refused. */
static void add_listen(const struct rules *R, struct listener *out, size_t *n, const char *key,
                       const char *hostport, const char *what)
{
    struct listener *l = &out[*n];
    if (refused(R, key) ||
        netaddr_split_hostport(hostport, l->host, sizeof(l->host), &l->port) != 0)
        return;
    l->key = key;
    l->what = what;
    (*n)++;
}

/*
 * A listener of a bind and a port key (health.*, metrics.*) when it is enabled and none of
 * its three keys was refused; messages name it by its port key.
 */
static void add_bound(const struct rules *R, struct listener *out, size_t *n, bool enabled,
                      const char *bind, uint32_t port, const char *enabled_key,
                      const char *bind_key, const char *port_key)
{
    struct listener *l = &out[*n];
    if (!enabled || refused(R, enabled_key) || refused(R, port_key) || refused(R, bind_key) ||
        netaddr_bind_address(bind, l->host, sizeof(l->host)) != 0)
        return;
    l->port = (uint16_t)port;
    l->key = port_key;
    l->what = port_key;
    (*n)++;
}

static size_t listeners_of(const struct rules *R, struct listener *out)
{
    const struct cfg *c = R->c;
    size_t n = 0;
    add_listen(R, out, &n, "controller.listen", c->controller.listen,
               "the port of controller.listen");
    add_listen(R, out, &n, "raft.listen", c->raft.listen, "the port of raft.listen");
    add_bound(R, out, &n, c->health.enabled, c->health.bind, c->health.port, "health.enabled",
              "health.bind", "health.port");
    add_bound(R, out, &n, c->metrics.enabled, c->metrics.bind, c->metrics.port,
              "metrics.enabled", "metrics.bind", "metrics.port");
    return n;
}

/* Two listeners of this replica on one port and overlapping addresses cannot both bind. */
static void rules_listeners(const struct rules *R, const struct listener *l, size_t nl)
{
    for (size_t i = 0; i < nl; i++)
        for (size_t j = i + 1; j < nl; j++) {
            if (l[i].port != l[j].port || !netaddr_hosts_overlap(l[i].host, l[j].host))
                continue;
            const struct listener *at = &l[i], *other = &l[j];
            if (!report_at_first(R, l[i].key, l[j].key)) {
                at = &l[j];
                other = &l[i];
            }
            rule_error(R, line_at(R, at->key), at->key,
                       "port %u is also %s; each listener needs its own port", at->port,
                       other->what);
        }
}

static unsigned peer_line(const struct rules *R, size_t i)
{
    if (R->w != NULL && R->w->peer_line[i] != 0)
        return R->w->peer_line[i];
    return line_at(R, "controller.peers");
}

/* The peers list on its own: its size, and no replica listed twice under two spellings. */
static void rules_peers(const struct rules *R)
{
    const struct cfg *c = R->c;
    if (c->controller.npeers == 2)
        rule_error(R, line_at(R, "controller.peers"), "controller.peers",
                   "2 peers make a cluster that stops when either replica fails (a majority "
                   "of 2 is 2); list 1, 3 or 5");
    for (size_t j = 1; j < c->controller.npeers; j++)
        for (size_t i = 0; i < j; i++) {
            char hi[256], hj[256];
            uint16_t pi, pj;
            if (netaddr_split_hostport(c->controller.peers[i], hi, sizeof(hi), &pi) != 0 ||
                netaddr_split_hostport(c->controller.peers[j], hj, sizeof(hj), &pj) != 0)
                continue;
            if (pi == pj && netaddr_same_host(hi, hj)) {
                char key[48];
                snprintf(key, sizeof(key), "controller.peers[%zu]", j);
                rule_error(R, peer_line(R, j), key,
                           "\"%s\" is the same replica as controller.peers[%zu] (\"%s\")",
                           c->controller.peers[j], i, c->controller.peers[i]);
                break;
            }
        }
}

/*
 * How the id comes from the host name (controller.node_id 0): *match is the index of the
 * peer; *second, for an ambiguous name, the index of another peer it matches.
 */
enum derive { DERIVE_SET, DERIVE_SINGLE, DERIVE_FOUND, DERIVE_NONE, DERIVE_AMBIGUOUS };

static enum derive derive_id(const struct cfg *c, const char *hostname, size_t *match,
                             size_t *second)
{
    char host[256], shortname[256];
    uint16_t port;

    if (c->controller.node_id != 0) {
        *match = c->controller.node_id - 1;
        return DERIVE_SET;
    }
    if (hostname != NULL && hostname[0] != '\0') {
        snprintf(shortname, sizeof(shortname), "%s", hostname);
        char *dot = strchr(shortname, '.');
        if (dot)
            *dot = '\0';
        /* Exact names first; only when none matches, the first DNS label. */
        for (int pass = 0; pass < 2; pass++) {
            size_t found = 0, first = 0;
            for (size_t i = 0; i < c->controller.npeers; i++) {
                if (netaddr_split_hostport(c->controller.peers[i], host, sizeof(host), &port) != 0)
                    continue;
                if (pass == 1) {
                    char *hdot = strchr(host, '.');
                    if (hdot)
                        *hdot = '\0';
                }
                if (strcasecmp(host, pass == 0 ? hostname : shortname) != 0)
                    continue;
                if (found++ == 0) {
                    first = i;
                } else {
                    *match = first;
                    *second = i;
                    return DERIVE_AMBIGUOUS;
                }
            }
            if (found == 1) {
                *match = first;
                return DERIVE_FOUND;
            }
        }
    }
    if (c->controller.npeers == 1) {
        *match = 0;
        return DERIVE_SINGLE;
    }
    return DERIVE_NONE;
}

/*
 * Rules that need this replica's own entry in controller.peers: it must be known (from
 * controller.node_id, a single peer, or the host name), and the peers on this replica's
 * host must not point at a port one of its other listeners holds.
 */
static void rules_self(const struct rules *R, const char *hostname, const struct listener *l,
                       size_t nl)
{
    const struct cfg *c = R->c;
    if (refused(R, "controller.peers") || refused(R, "controller.node_id") ||
        c->controller.node_id > c->controller.npeers)
        return;
    size_t self = 0, other = 0;
    enum derive d = derive_id(c, hostname, &self, &other);
    const char *idkey = "controller.node_id";
    unsigned idline = is_set(R, idkey) ? line_at(R, idkey) : line_at(R, "controller.peers");
    if (d == DERIVE_NONE) {
        if (hostname != NULL)
            rule_error(R, idline, idkey,
                       "0 takes the id from the host name, and host \"%.64s\" is none of the "
                       "%zu controller.peers; set controller.node_id or list this host",
                       hostname, c->controller.npeers);
        return;
    }
    if (d == DERIVE_AMBIGUOUS) {
        rule_error(R, idline, idkey,
                   "0 takes the id from the host name, and host \"%.64s\" matches both "
                   "controller.peers[%zu] and [%zu]; set controller.node_id",
                   hostname, self, other);
        return;
    }
    char shost[256];
    uint16_t sport;
    if (netaddr_split_hostport(c->controller.peers[self], shost, sizeof(shost), &sport) != 0)
        return;
    const struct listener *raft = NULL;
    for (size_t k = 0; k < nl; k++)
        if (strcmp(l[k].key, "raft.listen") == 0)
            raft = &l[k];
    for (size_t i = 0; i < c->controller.npeers; i++) {
        char h[256], key[48];
        uint16_t p;
        if (netaddr_split_hostport(c->controller.peers[i], h, sizeof(h), &p) != 0 ||
            !netaddr_same_host(h, shost) || (i != self && p == sport))
            continue; /* elsewhere, or this replica listed twice (rules_peers says so) */
        snprintf(key, sizeof(key), "controller.peers[%zu]", i);
        for (size_t k = 0; k < nl; k++) {
            if (l[k].port != p)
                continue;
            if (i == self && &l[k] == raft)
                continue; /* this replica's own Raft address: as it should be */
            if (i == self && raft != NULL && raft->port == p)
                continue; /* raft.listen shares the port with l[k]: rules_listeners says so */
            if (i == self)
                rule_error(R, peer_line(R, i), key,
                           "\"%s\" is this replica (node %zu), but port %u is %s here, not "
                           "the Raft listener's; peers would reach the wrong service",
                           c->controller.peers[i], self + 1, p, l[k].what);
            else
                rule_error(R, peer_line(R, i), key,
                           "\"%s\" is on this replica's host (like controller.peers[%zu], node "
                           "%zu), and port %u is %s here; two replicas on one host need "
                           "different ports",
                           c->controller.peers[i], self, self + 1, p, l[k].what);
            break;
        }
    }
}

static void rules_partitions(const struct rules *R)
{
    const struct cfg *c = R->c;
    if (refused(R, "partitions"))
        return;
    size_t ndefault = 0;
    for (size_t i = 0; i < c->npartitions; i++) {
        const struct cfg_partition *p = &c->partitions[i];
        if ((R->w != NULL && i < CFG_MAX_PARTITIONS && R->w->part_bad[i]) || p->name == NULL)
            continue;
        char key[64];
        snprintf(key, sizeof(key), "partitions[%zu]", i);
        unsigned line =
            R->w != NULL && i < CFG_MAX_PARTITIONS ? R->w->part_line[i] : 0;
        if (p->is_default)
            ndefault++;
        for (size_t j = 0; j < i; j++)
            if (c->partitions[j].name != NULL && strcmp(p->name, c->partitions[j].name) == 0) {
                rule_error(R, line, key, "partition name \"%s\" is used twice", p->name);
                break;
            }
        for (const char *q = p->name; *q; q++)
            if (!(isalnum((unsigned char)*q) || *q == '_' || *q == '-' || *q == '.')) {
                rule_error(R, line, key,
                           "partition name \"%s\" may hold only letters, digits, '.', '-' and "
                           "'_'",
                           p->name);
                break;
            }
    }
    if (ndefault > 1)
        rule_error(R, line_at(R, "partitions"), "partitions",
                   "%zu partitions are marked default; at most one may be", ndefault);
}

static void check_rules(const struct cfg *c, const struct cfg_where *w, const char *hostname,
                        struct cfg_error *err)
{
    struct rules R = {.c = c, .w = w, .name = c->source ? c->source : "(config)", .err = err};
    struct listener l[4];
    rules_timing(&R);
    if (!refused(&R, "controller.node_id") && !refused(&R, "controller.peers") &&
        c->controller.node_id > c->controller.npeers)
        rule_error(&R, line_at(&R, "controller.node_id"), "controller.node_id",
                   "%u is beyond the %zu entries of controller.peers", c->controller.node_id,
                   c->controller.npeers);
    size_t nl = listeners_of(&R, l);
    rules_listeners(&R, l, nl);
    if (!refused(&R, "controller.peers")) {
        rules_peers(&R);
        rules_self(&R, hostname, l, nl);
    }
    rules_partitions(&R);
}

int cfg_validate(const struct cfg *c, const char *hostname, struct cfg_error *err)
{
    size_t before = err->count;
    bool more_before = err->more;
    check_rules(c, c->where, hostname, err);
    return err->count > before || err->more != more_before ? -1 : 0;
}

/* ---- loading ------------------------------------------------------------------------ */

static int load_buffer(const char *name, const char *buf, size_t len, const char *hostname,
                       struct cfg *c, struct cfg_error *err)
{
    struct ytree tree;
    struct ytree_error yerr;
    static const struct ytree_limits limits = {.max_depth = CFG_MAX_DEPTH,
                                               .max_nodes = CFG_MAX_NODES};

    memset(err, 0, sizeof(*err));
    if (cfg_defaults(c) != 0) {
        add_error(err, name, 0, NULL, "out of memory");
        cfg_free(c);
        return -1;
    }
    free(c->source);
    c->source = strdup(name);
    c->where = calloc(1, sizeof(*c->where));
    if (c->source == NULL || c->where == NULL) {
        add_error(err, name, 0, NULL, "out of memory");
        cfg_free(c);
        return -1;
    }
    if (len > CFG_MAX_FILE_BYTES) {
        /* Line 1: the file as a whole is at fault, and the message keeps its form. */
        add_errorf(err, name, 1, "(file)", "file is larger than %u bytes (1 MiB)",
                   CFG_MAX_FILE_BYTES);
        cfg_free(c);
        return -1;
    }
    /* A structure error (syntax, a cap, a second document) leaves no tree to walk. */
    if (ytree_load(buf, len, &limits, &tree, &yerr) != 0) {
        add_error(err, name, yerr.line, yerr.key, yerr.reason);
        cfg_free(c);
        return -1;
    }
    struct loader L = {.name = name, .c = c, .err = err, .w = c->where};
    const struct ynode *root = tree.root;
    if (root == NULL || (root->type == YNODE_SCALAR && is_null_scalar(root))) {
        /* An empty file, or "---" with nothing under it: every key takes its default. */
    } else if (root->type != YNODE_MAPPING) {
        fail(&L, line_of(root), "(top level)", "expected a mapping of keys, got %s",
             node_kind(root));
    } else {
        walk_map(&L, root, "");
    }
    ytree_free(&tree);
    if (!err->more)
        check_rules(c, c->where, hostname, err);
    if (err->count > 0) {
        cfg_free(c);
        return -1;
    }
    size_t ndefault = 0;
    for (size_t i = 0; i < c->npartitions; i++)
        ndefault += c->partitions[i].is_default;
    if (ndefault == 0)
        c->partitions[0].is_default = true; /* documented: the first one is the default */
    return 0;
}

int cfg_load_buffer(const char *name, const char *buf, size_t len, struct cfg *c,
                    struct cfg_error *err)
{
    return load_buffer(name, buf, len, NULL, c, err);
}

int cfg_load_buffer_host(const char *name, const char *buf, size_t len, const char *hostname,
                         struct cfg *c, struct cfg_error *err)
{
    return load_buffer(name, buf, len, hostname, c, err);
}

/* SPUR_CONFIG when it names a file; set but empty counts as unset. */
static const char *config_from_env(void)
{
    const char *env = getenv("SPUR_CONFIG");
    return env != NULL && env[0] != '\0' ? env : NULL;
}

const char *cfg_default_path(void)
{
    const char *env = config_from_env();
    return env != NULL ? env : SPUR_DEFAULT_CONFIG;
}

/* A file-level error, before any line could be read. */
static int file_error(struct cfg_error *err, const char *path, unsigned line, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));

static int file_error(struct cfg_error *err, const char *path, unsigned line, const char *fmt,
                      ...)
{
    va_list ap;
    memset(err, 0, sizeof(*err));
    va_start(ap, fmt);
    add_errorv(err, path, line, line > 0 ? "(file)" : NULL, fmt, ap);
    va_end(ap);
    return -1;
}

int cfg_load_host(const char *path, const char *hostname, struct cfg *c, struct cfg_error *err)
{
    int explicit_path = path != NULL;
    const char *p = explicit_path ? path : cfg_default_path();
    FILE *f = fopen(p, "rb");
    if (f == NULL) {
        if (errno == ENOENT && !explicit_path && config_from_env() == NULL) {
            memset(err, 0, sizeof(*err));
            if (cfg_defaults(c) != 0) {
                add_error(err, "(embedded defaults)", 0, NULL, "out of memory");
                cfg_free(c);
                return -1;
            }
            /* The defaults keep every rule but the host's; those hold too (one peer). */
            if (cfg_validate(c, hostname, err) != 0) {
                cfg_free(c);
                return -1;
            }
            return 0;
        }
        return file_error(err, p, 0, "cannot open: %s", strerror(errno));
    }
    /* Read it whole, at most one chunk past the cap: enough to know it is too large. */
    struct buf b;
    buf_init(&b);
    for (;;) {
        if (b.len > CFG_MAX_FILE_BYTES) {
            buf_free(&b);
            fclose(f);
            return file_error(err, p, 1, "file is larger than %u bytes (1 MiB)",
                              CFG_MAX_FILE_BYTES);
        }
        if (!buf_reserve(&b, CFG_READ_CHUNK)) {
            buf_free(&b);
            fclose(f);
            return file_error(err, p, 0, "out of memory");
        }
        /* buf_reserve() keeps a byte for the NUL: read into the rest. */
        size_t k = fread(b.p + b.len, 1, b.cap - b.len - 1, f);
        b.len += k;
        if (k == 0)
            break;
    }
    if (ferror(f)) {
        int e = errno;
        buf_free(&b);
        fclose(f);
        return file_error(err, p, 0, "cannot read: %s", strerror(e));
    }
    fclose(f);
    int rc = load_buffer(p, b.p, b.len, hostname, c, err);
    buf_free(&b);
    return rc;
}

int cfg_load(const char *path, struct cfg *c, struct cfg_error *err)
{
    return cfg_load_host(path, NULL, c, err);
}

/* ---- printing ----------------------------------------------------------------------- */

/* Decode the UTF-8 sequence at s into *cp; returns its length, or 0 when it is malformed. */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp)
{
    size_t n;
    uint32_t v;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if ((s[0] & 0xe0) == 0xc0) {
        n = 2;
        v = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        n = 3;
        v = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        n = 4;
        v = s[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    *cp = v;
    return n;
}

/*
 * May cp appear as itself inside a double-quoted YAML scalar? Not when it is outside YAML's
 * printable set (C0 and C1 controls, DEL, surrogates, U+FFFE/U+FFFF: the reader refuses the
 * file), nor when it is a line break (NEL, LS, PS: folding would turn it into a space) or a
 * byte order mark. Those are written as escapes, so cfg_print() output always loads back to
 * the same strings.
 */
static bool yaml_raw_ok(uint32_t cp)
{
    if (cp == 0x2028 || cp == 0x2029 || cp == 0xfeff)
        return false;
    return (cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xd7ff) ||
           (cp >= 0xe000 && cp <= 0xfffd) || (cp >= 0x10000 && cp <= 0x10ffff);
}

static void print_str(FILE *out, const char *s)
{
    fputc('"', out);
    while (*s) {
        uint32_t cp;
        size_t n = utf8_decode((const unsigned char *)s, &cp);
        if (n == 0) {
            /* Not UTF-8. The loader never stores such bytes: libyaml refuses them. */
            fprintf(out, "\\x%02x", (unsigned char)*s);
            s++;
            continue;
        }
        if (cp == '"' || cp == '\\')
            fprintf(out, "\\%c", (int)cp);
        else if (yaml_raw_ok(cp))
            fwrite(s, 1, n, out);
        else if (cp <= 0xff)
            fprintf(out, "\\x%02x", (unsigned)cp);
        else if (cp <= 0xffff)
            fprintf(out, "\\u%04x", (unsigned)cp);
        else
            fprintf(out, "\\U%08x", (unsigned)cp);
        s += n;
    }
    fputc('"', out);
}

static void print_list(FILE *out, char *const *v, size_t n)
{
    fputc('[', out);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputs(", ", out);
        print_str(out, v[i]);
    }
    fputc(']', out);
}

#define B(x) ((x) ? "true" : "false")

void cfg_print(FILE *out, const struct cfg *c)
{
    fprintf(out, "# effective configuration, from %s\n", c->source ? c->source : "?");
    fputs("cluster_name: ", out);
    print_str(out, c->cluster_name);
    fputs("\ncontroller:\n  listen: ", out);
    print_str(out, c->controller.listen);
    fputs("\n  state_dir: ", out);
    print_str(out, c->controller.state_dir);
    fprintf(out, "\n  node_id: %u\n  peers: ", c->controller.node_id);
    print_list(out, c->controller.peers, c->controller.npeers);
    fputs("\n  hosts: ", out);
    print_list(out, c->controller.hosts, c->controller.nhosts);
    fprintf(out,
            "\n  finished_job_retention_s: %u\n  max_frame_bytes: %u\n  max_script_bytes: %u\n",
            c->controller.finished_job_retention_s, c->controller.max_frame_bytes,
            c->controller.max_script_bytes);
    fputs("  socket: ", out);
    print_str(out, c->controller.socket);
    fputs("\n  admin_users: ", out);
    print_list(out, c->controller.admin_users, c->controller.nadmin_users);
    fputs("\n  admin_group: ", out);
    print_str(out, c->controller.admin_group);
    fputs("\nauth:\n  key_file: ", out);
    print_str(out, c->auth.key_file);
    fputs("\n  next_key_file: ", out);
    print_str(out, c->auth.next_key_file);
    fputs("\n  munge: ", out);
    print_str(out, c->auth.munge);
    fputs("\n  munge_socket: ", out);
    print_str(out, c->auth.munge_socket);
    fprintf(out, "\n  token_lifespan_s: %u\n  max_token_lifespan_s: %u\n",
            c->auth.token_lifespan_s, c->auth.max_token_lifespan_s);
    fputs("raft:\n  listen: ", out);
    print_str(out, c->raft.listen);
    fprintf(out,
            "\n  heartbeat_ms: %u\n  election_timeout_ms: %u\n  snapshot_entries: %u\n"
            "  max_uncommitted_bytes: %u\n  fsync: %s\n",
            c->raft.heartbeat_ms, c->raft.election_timeout_ms, c->raft.snapshot_entries,
            c->raft.max_uncommitted_bytes, B(c->raft.fsync));
    fprintf(out, "health:\n  enabled: %s\n  bind: ", B(c->health.enabled));
    print_str(out, c->health.bind);
    fprintf(out, "\n  port: %u\n  max_connections: %u\n  idle_timeout_ms: %u\n", c->health.port,
            c->health.max_connections, c->health.idle_timeout_ms);
    fprintf(out, "metrics:\n  enabled: %s\n  bind: ", B(c->metrics.enabled));
    print_str(out, c->metrics.bind);
    fprintf(out, "\n  port: %u\n", c->metrics.port);
    fprintf(out,
            "supervisor:\n  heartbeat_ms: %u\n  stall_timeout_ms: %u\n  kill_timeout_ms: %u\n"
            "  shutdown_grace_ms: %u\n  exit_linger_ms: %u\n",
            c->supervisor.heartbeat_ms, c->supervisor.stall_timeout_ms,
            c->supervisor.kill_timeout_ms, c->supervisor.shutdown_grace_ms,
            c->supervisor.exit_linger_ms);
    fputs("agent:\n  listen: ", out);
    print_str(out, c->agent.listen);
    fputs("\n  address: ", out);
    print_str(out, c->agent.address);
    fputs("\n  spool_dir: ", out);
    print_str(out, c->agent.spool_dir);
    fputs("\n  node_name: ", out);
    print_str(out, c->agent.node_name);
    fprintf(out,
            "\n  cpus: %u\n  mem_mb: %u\n  heartbeat_s: %u\n  node_timeout_s: %u\n"
            "  kill_wait_s: %u\n  cgroup: ",
            c->agent.cpus, c->agent.mem_mb, c->agent.heartbeat_s, c->agent.node_timeout_s,
            c->agent.kill_wait_s);
    print_str(out, c->agent.cgroup);
    fputs("\naccounting:\n  database_url: ", out);
    print_str(out, c->accounting.database_url);
    fputs("\n  password_file: ", out);
    print_str(out, c->accounting.password_file);
    fprintf(out, "\n  batch_size: %u\n  retry_max_ms: %u", c->accounting.batch_size,
            c->accounting.retry_max_ms);
    fputs("\nlog:\n  level: ", out);
    print_str(out, c->log.level);
    fputs("\npartitions:\n", out);
    for (size_t i = 0; i < c->npartitions; i++) {
        const struct cfg_partition *p = &c->partitions[i];
        fputs("  - name: ", out);
        print_str(out, p->name);
        fputs("\n    nodes: ", out);
        print_str(out, p->nodes);
        fprintf(out,
                "\n    default: %s\n    max_nodes: %u\n    max_time_min: %u\n"
                "    max_cpus_per_node: %u\n    max_mem_mb_per_node: %u\n    up: %s\n",
                B(p->is_default), p->max_nodes, p->max_time_min, p->max_cpus_per_node,
                p->max_mem_mb_per_node, B(p->up));
    }
}

/* ---- node identity ------------------------------------------------------------------ */

uint32_t cfg_node_id(const struct cfg *c, const char *hostname)
{
    size_t match = 0, second = 0;
    switch (derive_id(c, hostname, &match, &second)) {
    case DERIVE_SET:
    case DERIVE_SINGLE:
    case DERIVE_FOUND:
        return (uint32_t)match + 1;
    case DERIVE_NONE:
    case DERIVE_AMBIGUOUS:
        break;
    }
    return 0;
}
