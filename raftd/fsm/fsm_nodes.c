/*
 * fsm_nodes.c - nodes sorted by name, partitions in configuration order. See fsm_nodes.h.
 */
#include "fsm_nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PB_STR(s) ((s) != NULL ? (s) : "")

void fsm_nodes_init(struct fsm_nodes *ns)
{
    memset(ns, 0, sizeof(*ns));
}

static void strv_free(char **v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void node_free(struct fsm_node *node)
{
    if (node == NULL)
        return;
    free(node->name);
    free(node->address);
    strv_free(node->features, node->nfeatures);
    free(node->reason);
    free(node->reason_user);
    free(node);
}

static void part_clear(struct fsm_part *p)
{
    free(p->name);
    free(p->nodes_expr);
    strv_free(p->nodes, p->nnodes);
    free(p->sorted);
    memset(p, 0, sizeof(*p));
}

static void parts_free(struct fsm_part *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        part_clear(&parts[i]);
    free(parts);
}

void fsm_nodes_free(struct fsm_nodes *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        node_free(ns->v[i]);
    free(ns->v);
    parts_free(ns->parts, ns->nparts);
    fsm_nodes_init(ns);
}

bool fsm_name_ok(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '_';
        if (!ok || n >= max)
            return false;
    }
    return n > 0;
}

bool fsm_text_ok(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        unsigned char c = (unsigned char)s[n];
        if (c < 0x20 || c == 0x7f || n >= max)
            return false;
    }
    return true;
}

/* ---- nodes ------------------------------------------------------------------------------ */

/* Index of the first node whose name is >= name. */
static size_t lower_bound(const struct fsm_nodes *ns, const char *name)
{
    size_t lo = 0, hi = ns->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(ns->v[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct fsm_node *fsm_nodes_find(const struct fsm_nodes *ns, const char *name)
{
    size_t i = lower_bound(ns, name);
    return i < ns->n && strcmp(ns->v[i]->name, name) == 0 ? ns->v[i] : NULL;
}

struct fsm_node *fsm_nodes_add(struct fsm_nodes *ns, const char *name)
{
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 16;
        struct fsm_node **v = realloc(ns->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        ns->v = v;
        ns->cap = cap;
    }
    struct fsm_node *node = calloc(1, sizeof(*node));
    if (node == NULL)
        return NULL;
    node->name = strdup(name);
    node->address = strdup("");
    if (node->name == NULL || node->address == NULL) {
        node_free(node);
        return NULL;
    }
    size_t i = lower_bound(ns, name);
    memmove(&ns->v[i + 1], &ns->v[i], (ns->n - i) * sizeof(*ns->v));
    ns->v[i] = node;
    ns->n++;
    return node;
}

static void remove_at(struct fsm_nodes *ns, size_t i)
{
    node_free(ns->v[i]);
    memmove(&ns->v[i], &ns->v[i + 1], (ns->n - i - 1) * sizeof(*ns->v));
    ns->n--;
}

int fsm_node_state(const struct fsm_node *node)
{
    if (!node->registered)
        return SPUR__API__NODE_STATE__NODE_UNKNOWN;
    if (node->down)
        return SPUR__API__NODE_STATE__NODE_DOWN;
    if (node->drain)
        return node->alloc_cpus > 0 || node->njobs > 0 ? SPUR__API__NODE_STATE__NODE_DRAINING
                                                       : SPUR__API__NODE_STATE__NODE_DRAINED;
    if (node->alloc_cpus == 0 && node->njobs == 0)
        return SPUR__API__NODE_STATE__NODE_IDLE;
    if (node->alloc_cpus >= node->cpus)
        return SPUR__API__NODE_STATE__NODE_ALLOCATED;
    return SPUR__API__NODE_STATE__NODE_MIXED;
}

bool fsm_node_usable(const struct fsm_node *node)
{
    return node->registered && !node->down && !node->drain;
}

int fsm_node_set_reason(struct fsm_node *node, const char *reason, uint64_t time_ms)
{
    return fsm_node_set_reason_by(node, reason, time_ms, "root", 0);
}

int fsm_node_set_reason_by(struct fsm_node *node, const char *reason, uint64_t time_ms,
                           const char *user, uint32_t uid)
{
    char *copy = NULL, *who = NULL;
    if (reason != NULL && reason[0] != '\0') {
        copy = strdup(reason);
        if (copy == NULL)
            return -1;
        if (user != NULL && user[0] != '\0' && (who = strdup(user)) == NULL) {
            free(copy);
            return -1;
        }
    }
    free(node->reason);
    free(node->reason_user);
    node->reason = copy;
    node->reason_time_ms = copy != NULL ? time_ms : 0;
    node->reason_user = who;
    node->reason_uid = who != NULL ? uid : 0;
    return 0;
}

static char **strv_dup(char *const *v, size_t n)
{
    char **out = calloc(n ? n : 1, sizeof(*out));
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i] = strdup(PB_STR(v[i]));
        if (out[i] == NULL) {
            strv_free(out, i);
            return NULL;
        }
    }
    return out;
}

int fsm_node_set_identity(struct fsm_node *node, const char *address, char *const *features,
                          size_t nfeatures)
{
    char *addr = strdup(PB_STR(address));
    char **feat = strv_dup(features, nfeatures);
    if (addr == NULL || feat == NULL) {
        free(addr);
        strv_free(feat, nfeatures);
        return -1;
    }
    free(node->address);
    strv_free(node->features, node->nfeatures);
    node->address = addr;
    node->features = feat;
    node->nfeatures = (uint32_t)nfeatures;
    return 0;
}

/* ---- partitions ------------------------------------------------------------------------- */

struct fsm_part *fsm_nodes_part(const struct fsm_nodes *ns, const char *name)
{
    for (size_t i = 0; i < ns->nparts; i++)
        if (strcmp(ns->parts[i].name, name) == 0)
            return &ns->parts[i];
    return NULL;
}

struct fsm_part *fsm_nodes_default_part(const struct fsm_nodes *ns)
{
    for (size_t i = 0; i < ns->nparts; i++)
        if (ns->parts[i].is_default)
            return &ns->parts[i];
    return NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool fsm_part_has_node(const struct fsm_part *p, const char *name)
{
    if (p->all)
        return true;
    return p->nnodes > 0 && bsearch(&name, p->sorted, p->nnodes, sizeof(char *), cmp_str) != NULL;
}

/* A name listed twice, NULL when none, (const char *)-1 when out of memory. */
static const char *first_repeat(char *const *names, size_t n)
{
    if (n < 2)
        return NULL;
    char **v = malloc(n * sizeof(*v));
    if (v == NULL)
        return (const char *)-1;
    memcpy(v, names, n * sizeof(*v));
    qsort(v, n, sizeof(*v), cmp_str);
    const char *dup = NULL;
    for (size_t i = 1; i < n && dup == NULL; i++)
        if (strcmp(v[i - 1], v[i]) == 0)
            dup = v[i];
    free(v);
    return dup;
}

static bool expr_is_all(const char *expr)
{
    return strcasecmp(PB_STR(expr), "ALL") == 0;
}

int fsm_nodes_check_parts(Spur__Api__Partition *const *parts, size_t n, char *err, size_t errlen)
{
    if (n > FSM_MAX_PARTITIONS) {
        snprintf(err, errlen, "%zu partitions; at most %d are allowed", n, FSM_MAX_PARTITIONS);
        return -1;
    }
    size_t ndefault = 0;
    for (size_t i = 0; i < n; i++) {
        const Spur__Api__Partition *p = parts[i];
        const char *name = PB_STR(p->name);
        if (!fsm_name_ok(name, FSM_NAME_MAX)) {
            snprintf(err, errlen,
                     "partition name \"%.64s\" is not 1 to %d letters, digits, '.', '-' or '_'",
                     name, FSM_NAME_MAX);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(name, PB_STR(parts[j]->name)) == 0) {
                snprintf(err, errlen, "partition \"%s\" is listed twice", name);
                return -1;
            }
        }
        if (p->is_default)
            ndefault++;
        if (!fsm_text_ok(PB_STR(p->nodes_expr), 65536)) {
            snprintf(err, errlen, "partition \"%s\": the node list is not printable text", name);
            return -1;
        }
        if (expr_is_all(p->nodes_expr))
            continue;
        if (p->n_nodes > FSM_MAX_NODES) {
            snprintf(err, errlen, "partition \"%s\" names %zu nodes; at most %d are allowed", name,
                     p->n_nodes, FSM_MAX_NODES);
            return -1;
        }
        for (size_t k = 0; k < p->n_nodes; k++) {
            if (!fsm_name_ok(PB_STR(p->nodes[k]), FSM_NAME_MAX)) {
                snprintf(err, errlen, "partition \"%s\": node name \"%.64s\" is not valid", name,
                         PB_STR(p->nodes[k]));
                return -1;
            }
        }
        const char *dup = first_repeat(p->nodes, p->n_nodes);
        if (dup == (const char *)-1) {
            snprintf(err, errlen, "out of memory checking partition \"%s\"", name);
            return -1;
        }
        if (dup != NULL) {
            snprintf(err, errlen, "partition \"%s\" names node \"%s\" twice", name, dup);
            return -1;
        }
    }
    if (ndefault > 1) {
        snprintf(err, errlen, "%zu partitions are marked default; at most one may be", ndefault);
        return -1;
    }
    return 0;
}

/* Whether the list marks no default, so that its first partition is the default. */
static bool first_is_default(Spur__Api__Partition *const *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (parts[i]->is_default)
            return false;
    return true;
}

static int part_build(struct fsm_part *out, const Spur__Api__Partition *p, bool is_default)
{
    memset(out, 0, sizeof(*out));
    out->name = strdup(PB_STR(p->name));
    out->nodes_expr = strdup(PB_STR(p->nodes_expr));
    out->all = expr_is_all(p->nodes_expr);
    out->is_default = is_default;
    out->up = p->up;
    out->max_nodes = p->max_nodes;
    out->max_time_min = p->max_time_min;
    out->max_cpus_per_node = p->max_cpus_per_node;
    out->max_mem_mb_per_node = p->max_mem_mb_per_node;
    if (out->name == NULL || out->nodes_expr == NULL)
        return -1;
    if (out->all || p->n_nodes == 0)
        return 0;
    /* The configured order, and a sorted view for membership (names are unique). */
    out->nodes = calloc(p->n_nodes, sizeof(char *));
    out->sorted = calloc(p->n_nodes, sizeof(char *));
    if (out->nodes == NULL || out->sorted == NULL)
        return -1;
    for (size_t k = 0; k < p->n_nodes; k++) {
        out->nodes[k] = strdup(p->nodes[k]);
        if (out->nodes[k] == NULL)
            return -1;
        out->sorted[k] = out->nodes[k];
        out->nnodes++;
    }
    qsort(out->sorted, out->nnodes, sizeof(char *), cmp_str);
    return 0;
}

static bool named_by_any(const struct fsm_part *parts, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!parts[i].all && fsm_part_has_node(&parts[i], name))
            return true;
    return false;
}

int fsm_nodes_set_parts(struct fsm_nodes *ns, Spur__Api__Partition *const *parts, size_t n)
{
    struct fsm_part *np = calloc(n ? n : 1, sizeof(*np));
    if (np == NULL)
        return -1;
    bool first_default = first_is_default(parts, n);
    for (size_t i = 0; i < n; i++) {
        if (part_build(&np[i], parts[i], parts[i]->is_default || (first_default && i == 0))) {
            parts_free(np, i + 1);
            return -1;
        }
    }
    /* Placeholders for named nodes that do not exist yet. */
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < np[i].nnodes; k++) {
            if (fsm_nodes_find(ns, np[i].nodes[k]) == NULL &&
                fsm_nodes_add(ns, np[i].nodes[k]) == NULL) {
                parts_free(np, n);
                return -1;
            }
        }
    }
    parts_free(ns->parts, ns->nparts);
    ns->parts = np;
    ns->nparts = n;
    /* Placeholders nothing names any more go (they never ran anything). */
    for (size_t i = ns->n; i-- > 0;)
        if (!ns->v[i]->registered && !named_by_any(np, n, ns->v[i]->name))
            remove_at(ns, i);
    return 0;
}

bool fsm_nodes_parts_equal(const struct fsm_nodes *ns, Spur__Api__Partition *const *parts, size_t n)
{
    if (n != ns->nparts)
        return false;
    bool first_default = first_is_default(parts, n);
    for (size_t i = 0; i < n; i++) {
        const Spur__Api__Partition *p = parts[i];
        const struct fsm_part *q = &ns->parts[i];
        bool is_default = p->is_default || (first_default && i == 0);
        if (strcmp(PB_STR(p->name), q->name) != 0 || is_default != q->is_default ||
            p->up != q->up || p->max_nodes != q->max_nodes || p->max_time_min != q->max_time_min ||
            p->max_cpus_per_node != q->max_cpus_per_node ||
            p->max_mem_mb_per_node != q->max_mem_mb_per_node ||
            strcmp(PB_STR(p->nodes_expr), q->nodes_expr) != 0)
            return false;
        if (q->all)
            continue;
        if (p->n_nodes != q->nnodes)
            return false;
        for (size_t k = 0; k < q->nnodes; k++)
            if (strcmp(PB_STR(p->nodes[k]), q->nodes[k]) != 0)
                return false;
    }
    return true;
}

void fsm_part_fill(const struct fsm_part *p, Spur__Api__Partition *out)
{
    spur__api__partition__init(out);
    out->name = p->name;
    out->nodes_expr = p->nodes_expr;
    out->n_nodes = p->nnodes;
    out->nodes = p->nodes;
    out->is_default = p->is_default;
    out->up = p->up;
    out->max_nodes = p->max_nodes;
    out->max_time_min = p->max_time_min;
    out->max_cpus_per_node = p->max_cpus_per_node;
    out->max_mem_mb_per_node = p->max_mem_mb_per_node;
}
