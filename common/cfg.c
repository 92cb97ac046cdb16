/*
 * cfg.c - strict YAML configuration loader (libyaml document API).
 *
 * The schema is a table: one row per accepted key with its type, the field it fills and
 * its range. The loader walks the YAML document once, looks every key up by its dotted
 * path, refuses what the table does not know, and records the line each key came from so
 * that the cross-key checks at the end can still point at a line. Anchors and aliases are
 * resolved by libyaml into shared nodes; the schema has no nesting beyond partitions, so
 * a hostile file cannot make the walk expensive.
 */
#include "cfg.h"

#include "spur_build.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

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

static int check_hostport(const char *v, char *why, size_t whylen);
static int check_bind(const char *v, char *why, size_t whylen);
static int check_cluster_name(const char *v, char *why, size_t whylen);
static int check_abs_path(const char *v, char *why, size_t whylen);
static int check_log_level(const char *v, char *why, size_t whylen);
static int check_nonempty(const char *v, char *why, size_t whylen);

#define OFF(field) offsetof(struct cfg, field)
#define POFF(field) offsetof(struct cfg_partition, field)

static const struct key top_keys[] = {
    {"cluster_name", K_STR, OFF(cluster_name), 0, 0, check_cluster_name},
    {"controller", K_MAP, 0, 0, 0, NULL},
    {"controller.listen", K_STR, OFF(controller.listen), 0, 0, check_hostport},
    {"controller.state_dir", K_STR, OFF(controller.state_dir), 0, 0, check_abs_path},
    {"controller.node_id", K_U32, OFF(controller.node_id), 0, CFG_MAX_PEERS, NULL},
    {"controller.peers", K_STRLIST, OFF(controller.peers), 1, CFG_MAX_PEERS, check_hostport,
     OFF(controller.npeers)},
    {"controller.hosts", K_STRLIST, OFF(controller.hosts), 1, 16, check_hostport,
     OFF(controller.nhosts)},
    {"controller.finished_job_retention_s", K_U32, OFF(controller.finished_job_retention_s), 0,
     365u * 86400u, NULL},
    {"controller.max_frame_bytes", K_U32, OFF(controller.max_frame_bytes), 65536, 64u << 20,
     NULL},
    {"controller.max_script_bytes", K_U32, OFF(controller.max_script_bytes), 1, 4u << 20, NULL},
    {"raft", K_MAP, 0, 0, 0, NULL},
    {"raft.listen", K_STR, OFF(raft.listen), 0, 0, check_hostport},
    {"raft.heartbeat_ms", K_U32, OFF(raft.heartbeat_ms), 10, 10000, NULL},
    {"raft.election_timeout_ms", K_U32, OFF(raft.election_timeout_ms), 50, 60000, NULL},
    {"raft.snapshot_entries", K_U32, OFF(raft.snapshot_entries), 100, 100000000, NULL},
    {"raft.fsync", K_BOOL, OFF(raft.fsync), 0, 0, NULL},
    {"health", K_MAP, 0, 0, 0, NULL},
    {"health.enabled", K_BOOL, OFF(health.enabled), 0, 0, NULL},
    {"health.bind", K_STR, OFF(health.bind), 0, 0, check_bind},
    {"health.port", K_U32, OFF(health.port), 1, 65535, NULL},
    {"health.max_connections", K_U32, OFF(health.max_connections), 8, 65536, NULL},
    {"health.idle_timeout_ms", K_U32, OFF(health.idle_timeout_ms), 100, 3600000, NULL},
    {"metrics", K_MAP, 0, 0, 0, NULL},
    {"metrics.enabled", K_BOOL, OFF(metrics.enabled), 0, 0, NULL},
    {"metrics.bind", K_STR, OFF(metrics.bind), 0, 0, check_bind},
    {"metrics.port", K_U32, OFF(metrics.port), 1, 65535, NULL},
    {"supervisor", K_MAP, 0, 0, 0, NULL},
    {"supervisor.heartbeat_ms", K_U32, OFF(supervisor.heartbeat_ms), 10, 60000, NULL},
    {"supervisor.stall_timeout_ms", K_U32, OFF(supervisor.stall_timeout_ms), 50, 3600000, NULL},
    {"supervisor.kill_timeout_ms", K_U32, OFF(supervisor.kill_timeout_ms), 50, 3600000, NULL},
    {"supervisor.shutdown_grace_ms", K_U32, OFF(supervisor.shutdown_grace_ms), 0, 3600000, NULL},
    {"supervisor.exit_linger_ms", K_U32, OFF(supervisor.exit_linger_ms), 0, 60000, NULL},
    {"accounting", K_MAP, 0, 0, 0, NULL},
    {"accounting.database_url", K_STR, OFF(accounting.database_url), 0, 0, NULL},
    {"log", K_MAP, 0, 0, 0, NULL},
    {"log.level", K_STR, OFF(log.level), 0, 0, check_log_level},
    {"partitions", K_PARTITIONS, 0, 0, 64, NULL},
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
    free(c->source);
    free(c->cluster_name);
    free(c->controller.listen);
    free(c->controller.state_dir);
    strlist_free(c->controller.peers, c->controller.npeers);
    strlist_free(c->controller.hosts, c->controller.nhosts);
    free(c->raft.listen);
    free(c->health.bind);
    free(c->metrics.bind);
    free(c->accounting.database_url);
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
    c->raft.listen = xstrdup("[::]:6821");
    c->raft.heartbeat_ms = 100;
    c->raft.election_timeout_ms = 1000;
    c->raft.snapshot_entries = 10000;
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
    c->accounting.database_url = xstrdup("");
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
        !c->accounting.database_url || !c->log.level || !c->partitions[0].name ||
        !c->partitions[0].nodes)
        return -1;
    return 0;
}

/* ---- value checks ------------------------------------------------------------------- */

int cfg_split_hostport(const char *s, char *host, size_t hostlen, uint16_t *port)
{
    const char *colon;
    size_t hlen;

    if (s == NULL || *s == '\0')
        return -1;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL || rb[1] != ':')
            return -1;
        hlen = (size_t)(rb - s - 1);
        if (hlen == 0 || hlen >= hostlen)
            return -1;
        memcpy(host, s + 1, hlen);
        host[hlen] = '\0';
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL || strchr(s, ':') != colon)
            return -1; /* no port, or a bare IPv6 address without brackets */
        hlen = (size_t)(colon - s);
        if (hlen == 0 || hlen >= hostlen)
            return -1;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        for (size_t i = 0; i < hlen; i++) {
            unsigned char ch = (unsigned char)host[i];
            if (!(isalnum(ch) || ch == '.' || ch == '-' || ch == '_'))
                return -1;
        }
    }
    const char *p = colon + 1;
    if (*p == '\0' || strlen(p) > 5)
        return -1;
    unsigned long v = 0;
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

int cfg_bind_address(const char *bind, char *addr, size_t addrlen)
{
    unsigned char buf[sizeof(struct in6_addr)];
    if (strcmp(bind, "all") == 0) {
        snprintf(addr, addrlen, "::");
        return 0;
    }
    if (strcmp(bind, "loopback") == 0) {
        snprintf(addr, addrlen, "127.0.0.1");
        return 0;
    }
    if (inet_pton(AF_INET, bind, buf) == 1 || inet_pton(AF_INET6, bind, buf) == 1) {
        snprintf(addr, addrlen, "%s", bind);
        return 0;
    }
    return -1;
}

static int check_hostport(const char *v, char *why, size_t whylen)
{
    char host[256];
    uint16_t port;
    if (cfg_split_hostport(v, host, sizeof(host), &port) != 0) {
        snprintf(why, whylen, "\"%s\" is not HOST:PORT (IPv6 as [ADDR]:PORT, port 1-65535)", v);
        return -1;
    }
    return 0;
}

static int check_bind(const char *v, char *why, size_t whylen)
{
    char addr[64];
    if (cfg_bind_address(v, addr, sizeof(addr)) != 0) {
        snprintf(why, whylen, "\"%s\" is not all, loopback or an IP address", v);
        return -1;
    }
    return 0;
}

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

/* ---- the walk ----------------------------------------------------------------------- */

struct loader {
    const char *name;
    yaml_document_t *doc;
    struct cfg *c;
    struct cfg_error *err;
    unsigned top_line[NTOP];            /* 1-based line each top key came from, 0: default */
    unsigned *part_line;                /* per partition: line of its mapping */
};

static int fail(struct loader *L, unsigned line, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct loader *L, unsigned line, const char *key, const char *fmt, ...)
{
    char why[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(L->err->msg, sizeof(L->err->msg), "%s:%u: %s: %s", L->name, line, key, why);
    else
        snprintf(L->err->msg, sizeof(L->err->msg), "%s: %s: %s", L->name, key, why);
    return -1;
}

static unsigned line_of(const yaml_node_t *n)
{
    return (unsigned)n->start_mark.line + 1;
}

static const char *scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static int is_plain(const yaml_node_t *n)
{
    return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int is_null_scalar(const yaml_node_t *n)
{
    const char *v = scalar(n);
    return is_plain(n) && (v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
                           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0);
}

static const char *node_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_SCALAR_NODE:
        return is_null_scalar(n) ? "nothing (null)" : "a scalar";
    default:
        return "nothing";
    }
}

static int parse_string(struct loader *L, const yaml_node_t *v, const char *key,
                        str_check_fn check, char **dst)
{
    char why[256];
    if (v->type != YAML_SCALAR_NODE || is_null_scalar(v))
        return fail(L, line_of(v), key, "expected a string, got %s", node_kind(v));
    if (strlen(scalar(v)) != v->data.scalar.length)
        return fail(L, line_of(v), key, "string holds a NUL byte");
    if (check != NULL && check(scalar(v), why, sizeof(why)) != 0)
        return fail(L, line_of(v), key, "%s", why);
    char *s = strdup(scalar(v));
    if (s == NULL)
        return fail(L, line_of(v), key, "out of memory");
    free(*dst);
    *dst = s;
    return 0;
}

static int parse_bool(struct loader *L, const yaml_node_t *v, const char *key, bool *dst)
{
    if (v->type == YAML_SCALAR_NODE && is_plain(v)) {
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
    if (v->type == YAML_SCALAR_NODE)
        return fail(L, line_of(v), key, "expected true or false, got \"%s\"", scalar(v));
    return fail(L, line_of(v), key, "expected true or false, got %s", node_kind(v));
}

static int parse_u32(struct loader *L, const yaml_node_t *v, const char *key, uint32_t min,
                     uint32_t max, uint32_t *dst)
{
    if (v->type != YAML_SCALAR_NODE || is_null_scalar(v))
        return fail(L, line_of(v), key, "expected an integer, got %s", node_kind(v));
    const char *s = scalar(v);
    if (!is_plain(v))
        return fail(L, line_of(v), key, "expected an integer, got the string \"%s\"", s);
    if (*s == '\0' || strlen(s) > 12)
        return fail(L, line_of(v), key, "\"%s\" is not an integer in range %u..%u", s, min, max);
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

static int parse_strlist(struct loader *L, const yaml_node_t *v, const struct key *k,
                         char ***dst, size_t *dstn)
{
    char why[256];
    char sub[128];
    if (v->type != YAML_SEQUENCE_NODE)
        return fail(L, line_of(v), k->path, "expected a list of strings, got %s", node_kind(v));
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (n < k->min || n > k->max)
        return fail(L, line_of(v), k->path, "needs %u to %u entries, has %zu", k->min, k->max,
                    n);
    char **list = calloc(n ? n : 1, sizeof(char *));
    if (list == NULL)
        return fail(L, line_of(v), k->path, "out of memory");
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *it = yaml_document_get_node(L->doc, v->data.sequence.items.start[i]);
        snprintf(sub, sizeof(sub), "%s[%zu]", k->path, i);
        if (it == NULL || it->type != YAML_SCALAR_NODE || is_null_scalar(it)) {
            strlist_free(list, i);
            return fail(L, it ? line_of(it) : line_of(v), sub, "expected a string, got %s",
                        it ? node_kind(it) : "nothing");
        }
        if (strlen(scalar(it)) != it->data.scalar.length) {
            strlist_free(list, i);
            return fail(L, line_of(it), sub, "string holds a NUL byte");
        }
        if (k->check && k->check(scalar(it), why, sizeof(why)) != 0) {
            strlist_free(list, i);
            return fail(L, line_of(it), sub, "%s", why);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(list[j], scalar(it)) == 0) {
                strlist_free(list, i);
                return fail(L, line_of(it), sub, "\"%s\" is listed twice", scalar(it));
            }
        }
        list[i] = strdup(scalar(it));
        if (list[i] == NULL) {
            strlist_free(list, i);
            return fail(L, line_of(it), sub, "out of memory");
        }
    }
    strlist_free(*dst, *dstn);
    *dst = list;
    *dstn = n;
    return 0;
}

/* Fill one field of base (a struct cfg or a struct cfg_partition) from node v. */
static int parse_value(struct loader *L, const yaml_node_t *v, const struct key *k,
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
    case K_STRLIST:
        return parse_strlist(L, v, k, (char ***)field, (size_t *)((char *)base + k->cnt_off));
    default:
        return fail(L, line_of(v), keyname, "internal: unexpected key type");
    }
}

/* Return the key's scalar text, refusing non-scalar keys and duplicates in one mapping. */
static const char *mapping_key(struct loader *L, const yaml_node_t *map, yaml_node_pair_t *pair,
                               const char *prefix)
{
    yaml_node_t *kn = yaml_document_get_node(L->doc, pair->key);
    if (kn == NULL || kn->type != YAML_SCALAR_NODE) {
        fail(L, kn ? line_of(kn) : line_of(map), prefix[0] ? prefix : "(top level)",
             "a key must be a plain string");
        return NULL;
    }
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < pair; q++) {
        yaml_node_t *qn = yaml_document_get_node(L->doc, q->key);
        if (qn && qn->type == YAML_SCALAR_NODE && strcmp(scalar(qn), scalar(kn)) == 0) {
            char full[160];
            snprintf(full, sizeof(full), "%s%s%s", prefix, prefix[0] ? "." : "", scalar(kn));
            fail(L, line_of(kn), full, "duplicate key (first at line %u)", line_of(qn));
            return NULL;
        }
    }
    return scalar(kn);
}

static int parse_partitions(struct loader *L, const yaml_node_t *v, const struct key *k)
{
    char keyname[192];
    if (v->type != YAML_SEQUENCE_NODE)
        return fail(L, line_of(v), "partitions", "expected a list of partitions, got %s",
                    node_kind(v));
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (n < 1 || n > k->max)
        return fail(L, line_of(v), "partitions", "needs 1 to %u partitions, has %zu", k->max, n);
    struct cfg_partition *parts = calloc(n, sizeof(*parts));
    unsigned *lines = calloc(n, sizeof(unsigned));
    if (parts == NULL || lines == NULL) {
        free(parts);
        free(lines);
        return fail(L, line_of(v), "partitions", "out of memory");
    }
    int rc = 0;
    size_t done = 0;
    for (size_t i = 0; i < n && rc == 0; i++, done++) {
        yaml_node_t *pn = yaml_document_get_node(L->doc, v->data.sequence.items.start[i]);
        partition_defaults(&parts[i]);
        snprintf(keyname, sizeof(keyname), "partitions[%zu]", i);
        if (pn == NULL || pn->type != YAML_MAPPING_NODE) {
            rc = fail(L, pn ? line_of(pn) : line_of(v), keyname, "expected a mapping, got %s",
                      pn ? node_kind(pn) : "nothing");
            break;
        }
        lines[i] = line_of(pn);
        for (yaml_node_pair_t *pr = pn->data.mapping.pairs.start;
             pr < pn->data.mapping.pairs.top && rc == 0; pr++) {
            const char *kname = mapping_key(L, pn, pr, keyname);
            if (kname == NULL) {
                rc = -1;
                break;
            }
            yaml_node_t *val = yaml_document_get_node(L->doc, pr->value);
            char full[256];
            snprintf(full, sizeof(full), "%s.%s", keyname, kname);
            const struct key *pk = NULL;
            for (size_t j = 0; j < NPART; j++)
                if (strcmp(part_keys[j].path, kname) == 0)
                    pk = &part_keys[j];
            if (pk == NULL) {
                yaml_node_t *kn = yaml_document_get_node(L->doc, pr->key);
                rc = fail(L, line_of(kn), full, "unknown key");
                break;
            }
            rc = parse_value(L, val, pk, full, &parts[i]);
        }
        if (rc == 0 && (parts[i].name == NULL))
            rc = fail(L, lines[i], keyname, "a partition needs a name");
        if (rc == 0 && parts[i].nodes == NULL)
            parts[i].nodes = strdup("ALL");
    }
    if (rc != 0) {
        for (size_t i = 0; i < n; i++)
            partition_free(&parts[i]);
        free(parts);
        free(lines);
        return -1;
    }
    (void)done;
    for (size_t i = 0; i < L->c->npartitions; i++)
        partition_free(&L->c->partitions[i]);
    free(L->c->partitions);
    free(L->part_line);
    L->c->partitions = parts;
    L->c->npartitions = n;
    L->part_line = lines;
    return 0;
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

static int walk_map(struct loader *L, const yaml_node_t *map, const char *prefix)
{
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        const char *kname = mapping_key(L, map, pr, prefix);
        if (kname == NULL)
            return -1;
        yaml_node_t *kn = yaml_document_get_node(L->doc, pr->key);
        yaml_node_t *val = yaml_document_get_node(L->doc, pr->value);
        char path[160];
        size_t idx = 0;
        snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", kname);
        const struct key *k = find_top(path, &idx);
        if (k == NULL)
            return fail(L, line_of(kn), path, "unknown key");
        if (val == NULL)
            return fail(L, line_of(kn), path, "missing value");
        L->top_line[idx] = line_of(kn);
        int rc;
        if (k->type == K_MAP) {
            if (val->type != YAML_MAPPING_NODE)
                return fail(L, line_of(val), path, "expected a mapping, got %s", node_kind(val));
            rc = walk_map(L, val, path);
        } else if (k->type == K_PARTITIONS) {
            rc = parse_partitions(L, val, k);
        } else {
            rc = parse_value(L, val, k, path, L->c);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

static unsigned top_line(const struct loader *L, const char *path)
{
    size_t idx;
    if (find_top(path, &idx) == NULL)
        return 0;
    return L->top_line[idx];
}

/*
 * Rules that involve more than one key, or a key and the host.
 *
 * A rule between two keys is reported at the first key when the file sets it, else at the
 * second one, which the file must then have set (the defaults satisfy every rule), so the
 * message always names a line the operator wrote.
 */
static int cross_checks(struct loader *L)
{
    struct cfg *c = L->c;
    if (c->supervisor.stall_timeout_ms <= c->supervisor.heartbeat_ms) {
        if (top_line(L, "supervisor.stall_timeout_ms") != 0 ||
            top_line(L, "supervisor.heartbeat_ms") == 0)
            return fail(L, top_line(L, "supervisor.stall_timeout_ms"),
                        "supervisor.stall_timeout_ms",
                        "%u must be greater than supervisor.heartbeat_ms (%u)",
                        c->supervisor.stall_timeout_ms, c->supervisor.heartbeat_ms);
        return fail(L, top_line(L, "supervisor.heartbeat_ms"), "supervisor.heartbeat_ms",
                    "%u must be less than supervisor.stall_timeout_ms (%u)",
                    c->supervisor.heartbeat_ms, c->supervisor.stall_timeout_ms);
    }
    if (c->supervisor.kill_timeout_ms < c->supervisor.stall_timeout_ms) {
        if (top_line(L, "supervisor.kill_timeout_ms") != 0 ||
            top_line(L, "supervisor.stall_timeout_ms") == 0)
            return fail(L, top_line(L, "supervisor.kill_timeout_ms"),
                        "supervisor.kill_timeout_ms",
                        "%u must not be less than supervisor.stall_timeout_ms (%u)",
                        c->supervisor.kill_timeout_ms, c->supervisor.stall_timeout_ms);
        return fail(L, top_line(L, "supervisor.stall_timeout_ms"), "supervisor.stall_timeout_ms",
                    "%u must not be greater than supervisor.kill_timeout_ms (%u)",
                    c->supervisor.stall_timeout_ms, c->supervisor.kill_timeout_ms);
    }
    if (c->raft.election_timeout_ms < 3 * c->raft.heartbeat_ms) {
        if (top_line(L, "raft.election_timeout_ms") != 0 || top_line(L, "raft.heartbeat_ms") == 0)
            return fail(L, top_line(L, "raft.election_timeout_ms"), "raft.election_timeout_ms",
                        "%u must be at least 3 x raft.heartbeat_ms (%u)",
                        c->raft.election_timeout_ms, c->raft.heartbeat_ms);
        return fail(L, top_line(L, "raft.heartbeat_ms"), "raft.heartbeat_ms",
                    "%u must be at most a third of raft.election_timeout_ms (%u)",
                    c->raft.heartbeat_ms, c->raft.election_timeout_ms);
    }
    if (c->controller.node_id > c->controller.npeers)
        return fail(L, top_line(L, "controller.node_id"), "controller.node_id",
                    "%u is beyond the %zu entries of controller.peers", c->controller.node_id,
                    c->controller.npeers);
    if (c->health.enabled && c->metrics.enabled && c->health.port == c->metrics.port) {
        if (top_line(L, "health.port") != 0 || top_line(L, "metrics.port") == 0)
            return fail(L, top_line(L, "health.port"), "health.port",
                        "%u is also metrics.port; the health listener needs its own port",
                        c->health.port);
        return fail(L, top_line(L, "metrics.port"), "metrics.port",
                    "%u is also health.port; the metrics listener needs its own port",
                    c->metrics.port);
    }
    size_t ndefault = 0;
    for (size_t i = 0; i < c->npartitions; i++) {
        char key[64];
        snprintf(key, sizeof(key), "partitions[%zu]", i);
        unsigned line = L->part_line ? L->part_line[i] : 0;
        if (c->partitions[i].is_default)
            ndefault++;
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->partitions[i].name, c->partitions[j].name) == 0)
                return fail(L, line, key, "partition name \"%s\" is used twice",
                            c->partitions[i].name);
        for (const char *p = c->partitions[i].name; *p; p++)
            if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.'))
                return fail(L, line, key, "partition name \"%s\" may hold only letters, digits, "
                            "'.', '-' and '_'", c->partitions[i].name);
    }
    if (ndefault > 1)
        return fail(L, top_line(L, "partitions"), "partitions",
                    "%zu partitions are marked default; at most one may be", ndefault);
    if (ndefault == 0)
        c->partitions[0].is_default = true; /* documented: the first one is the default */
    return 0;
}

static void syntax_error(const char *name, const yaml_parser_t *parser, struct cfg_error *err)
{
    snprintf(err->msg, sizeof(err->msg), "%s:%zu: (yaml): %s%s%s", name,
             parser->problem_mark.line + 1, parser->problem ? parser->problem : "syntax error",
             parser->context ? " " : "", parser->context ? parser->context : "");
}

int cfg_load_buffer(const char *name, const char *buf, size_t len, struct cfg *c,
                    struct cfg_error *err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    struct loader L;
    int rc = 0;

    if (cfg_defaults(c) != 0) {
        snprintf(err->msg, sizeof(err->msg), "%s: out of memory", name);
        cfg_free(c);
        return -1;
    }
    free(c->source);
    c->source = strdup(name);
    memset(&L, 0, sizeof(L));
    L.name = name;
    L.c = c;
    L.err = err;
    L.doc = &doc;

    if (len > CFG_MAX_FILE_BYTES) {
        snprintf(err->msg, sizeof(err->msg), "%s: file is larger than %u bytes", name,
                 CFG_MAX_FILE_BYTES);
        cfg_free(c);
        return -1;
    }
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err->msg, sizeof(err->msg), "%s: cannot initialise the YAML parser", name);
        cfg_free(c);
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &doc)) {
        syntax_error(name, &parser, err);
        yaml_parser_delete(&parser);
        cfg_free(c);
        return -1;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root == NULL) {
        /* An empty file: every key takes its default. */
    } else if (root->type == YAML_SCALAR_NODE && is_null_scalar(root)) {
        /* "---" with nothing under it: the same. */
    } else if (root->type != YAML_MAPPING_NODE) {
        rc = fail(&L, line_of(root), "(top level)", "expected a mapping of keys, got %s",
                  node_kind(root));
    } else {
        rc = walk_map(&L, root, "");
    }
    /*
     * A second document in one file is a mistake worth naming, not ignoring; so is a
     * syntax error after the first document, which the first load never reached.
     */
    if (rc == 0 && root != NULL) {
        yaml_document_t doc2;
        if (!yaml_parser_load(&parser, &doc2)) {
            rc = -1;
            syntax_error(name, &parser, err);
        } else {
            if (yaml_document_get_root_node(&doc2) != NULL)
                rc = fail(&L, (unsigned)doc2.start_mark.line + 1, "(file)",
                          "holds more than one YAML document");
            yaml_document_delete(&doc2);
        }
    }
    if (rc == 0)
        rc = cross_checks(&L);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(L.part_line);
    if (rc != 0)
        cfg_free(c);
    return rc;
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

int cfg_load(const char *path, struct cfg *c, struct cfg_error *err)
{
    int explicit_path = path != NULL;
    const char *p = explicit_path ? path : cfg_default_path();
    FILE *f = fopen(p, "rb");
    if (f == NULL) {
        if (errno == ENOENT && !explicit_path && config_from_env() == NULL) {
            if (cfg_defaults(c) != 0) {
                snprintf(err->msg, sizeof(err->msg), "(embedded defaults): out of memory");
                cfg_free(c);
                return -1;
            }
            return 0;
        }
        snprintf(err->msg, sizeof(err->msg), "%s: cannot open: %s", p, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        fclose(f);
        snprintf(err->msg, sizeof(err->msg), "%s: out of memory", p);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            if (cap > CFG_MAX_FILE_BYTES) {
                free(buf);
                fclose(f);
                snprintf(err->msg, sizeof(err->msg), "%s: file is larger than %u bytes", p,
                         CFG_MAX_FILE_BYTES);
                return -1;
            }
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                snprintf(err->msg, sizeof(err->msg), "%s: out of memory", p);
                return -1;
            }
            buf = nb;
            cap *= 2;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0)
            break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        snprintf(err->msg, sizeof(err->msg), "%s: cannot read: %s", p, strerror(e));
        return -1;
    }
    fclose(f);
    int rc = cfg_load_buffer(p, buf, len, c, err);
    free(buf);
    return rc;
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
    fputs("raft:\n  listen: ", out);
    print_str(out, c->raft.listen);
    fprintf(out,
            "\n  heartbeat_ms: %u\n  election_timeout_ms: %u\n  snapshot_entries: %u\n"
            "  fsync: %s\n",
            c->raft.heartbeat_ms, c->raft.election_timeout_ms, c->raft.snapshot_entries,
            B(c->raft.fsync));
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
    fputs("accounting:\n  database_url: ", out);
    print_str(out, c->accounting.database_url);
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
    char host[256];
    char shortname[256];
    uint16_t port;

    if (c->controller.node_id != 0)
        return c->controller.node_id;
    if (hostname != NULL && hostname[0] != '\0') {
        snprintf(shortname, sizeof(shortname), "%s", hostname);
        char *dot = strchr(shortname, '.');
        if (dot)
            *dot = '\0';
        for (size_t i = 0; i < c->controller.npeers; i++) {
            if (cfg_split_hostport(c->controller.peers[i], host, sizeof(host), &port) != 0)
                continue;
            if (strcasecmp(host, hostname) == 0)
                return (uint32_t)i + 1;
        }
        for (size_t i = 0; i < c->controller.npeers; i++) {
            if (cfg_split_hostport(c->controller.peers[i], host, sizeof(host), &port) != 0)
                continue;
            char *hdot = strchr(host, '.');
            if (hdot)
                *hdot = '\0';
            if (strcasecmp(host, shortname) == 0)
                return (uint32_t)i + 1;
        }
    }
    if (c->controller.npeers == 1)
        return 1;
    return 0;
}
