/*
 * fmt_sinfo.c - sinfo's table; see fmt_sinfo.h.
 *
 * Grouping: two nodes share a line when every non-aggregate cell of theirs prints the
 * same, so the key of a node is those cells joined; sorting the keys keeps grouping
 * O(n log n) for large clusters.
 */
#include "fmt_sinfo.h"

#include "buf.h"
#include "hostlist.h"
#include "names.h"
#include "strv.h"
#include "units.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define N(x) SPUR__API__NODE_STATE__NODE_##x

static const char *str(const char *s)
{
    return s ? s : "";
}

int fmt_sinfo_state_matches(const char *word, int state)
{
    if (strcasecmp(word, "drain") == 0)
        return state == N(DRAINED) || state == N(DRAINING);
    int named = names_node_state_parse(word);
    if (named < 0)
        return -1;
    return named == state;
}

/*
 * Every letter of Slurm 22.05's sinfo -o (sinfo(1), "-o, --format"), with its header as
 * Slurm prints it; what spur has no notion of (GRES, preemption, priority tiers, sockets
 * and cores, ...) prints what Slurm prints for a cluster that configures none. Letters
 * Slurm's sinfo does not know (i j J k K q Q W x y) are warned of and printed as text, as
 * Slurm does.
 */
static const struct table_def sinfo_fields[] = {
    {'a', "AVAIL", false},
    {'A', "NODES(A/I)", true},
    {'b', "ACTIVE_FEATURES", false},
    {'B', "MAX_CPUS_PER_NODE", false},
    {'c', "CPUS", false},
    {'C', "CPUS(A/I/O/T)", true},
    {'d', "TMP_DISK", false},
    {'D', "NODES", true},
    {'e', "FREE_MEM", false},
    {'E', "REASON", false},
    {'f', "AVAIL_FEATURES", false},
    {'F', "NODES(A/I/O/T)", true},
    {'g', "GROUPS", false},
    {'G', "GRES", false},
    {'h', "OVERSUBSCRIBE", false},
    {'H', "TIMESTAMP", false},
    {'I', "PRIO_JOB_FACTOR", false},
    {'l', "TIMELIMIT", false},
    {'L', "DEFAULTTIME", false},
    {'m', "MEMORY", false},
    {'M', "PREEMPT_MODE", false},
    {'n', "HOSTNAMES", true},
    {'N', "NODELIST", true},
    {'o', "NODE_ADDR", true},
    {'O', "CPU_LOAD", false},
    {'p', "PRIO_TIER", false},
    {'P', "PARTITION", false},
    {'r', "ROOT", false},
    {'R', "PARTITION", false},
    {'s', "JOB_SIZE", false},
    {'S', "ALLOCNODES", false},
    {'t', "STATE", false},
    {'T', "STATE", false},
    {'u', "USER", false},
    {'U', "USER", false},
    {'v', "VERSION", false},
    {'V', "CLUSTER", false},
    {'w', "WEIGHT", false},
    {'X', "SOCKETS", false},
    {'Y', "CORES", false},
    {'z', "S:C:T", false},
    {'Z', "THREADS", false},
};

static void unknown_field(void *arg, char type)
{
    (void)arg;
    fprintf(stderr, "Invalid node format specification: %c\n", type);
}

int fmt_sinfo_spec_parse(const char *format, struct table_spec *spec, char *err, size_t errlen)
{
    return table_spec_parse_lenient(format, sinfo_fields,
                                    sizeof(sinfo_fields) / sizeof(sinfo_fields[0]), unknown_field,
                                    NULL, spec, err, errlen);
}

/* Compare names the way a person sorts them: digit runs by value ("n2" < "n10"). */
static int natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0' && isdigit((unsigned char)a[1]))
                a++;
            while (*b == '0' && isdigit((unsigned char)b[1]))
                b++;
            size_t la = 0, lb = 0;
            while (isdigit((unsigned char)a[la]))
                la++;
            while (isdigit((unsigned char)b[lb]))
                lb++;
            if (la != lb)
                return la < lb ? -1 : 1;
            int c = memcmp(a, b, la);
            if (c != 0)
                return c;
            a += la;
            b += lb;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int node_cmp(const void *pa, const void *pb)
{
    const fmt_node *a = *(fmt_node *const *)pa, *b = *(fmt_node *const *)pb;
    return natural_cmp(str(a->name), str(b->name));
}

static int strp_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A partition's node names, sorted for bsearch (the strings stay the partition's). */
struct part_index {
    char **names;
    size_t n;
};

static int part_index_build(struct part_index *ix, const fmt_partition *p)
{
    ix->n = p->n_nodes;
    ix->names = calloc(ix->n ? ix->n : 1, sizeof(char *));
    if (ix->names == NULL)
        return -1;
    for (size_t i = 0; i < ix->n; i++)
        ix->names[i] = (char *)str(p->nodes[i]);
    qsort(ix->names, ix->n, sizeof(char *), strp_cmp);
    return 0;
}

static bool node_in_partition(const fmt_node *n, const fmt_partition *p,
                              const struct part_index *ix)
{
    const char *name = str(n->name);
    return bsearch(&name, ix->names, ix->n, sizeof(char *), strp_cmp) != NULL ||
           strv_contains(n->partitions, n->n_partitions, p->name);
}

static bool node_other(const fmt_node *n)
{
    return n->state == N(DOWN) || n->state == N(DRAINED) || n->state == N(DRAINING) ||
           n->state == N(UNKNOWN) || n->state == N(STATE_UNSPECIFIED);
}

/* A cell that does not depend on how many nodes share the line. p or n may be NULL. */
static char *sinfo_cell(char type, const fmt_partition *p, const fmt_node *n)
{
    char b[64];
    switch (type) {
    case 'P': {
        if (p == NULL)
            return strdup("n/a");
        struct buf s;
        buf_init(&s);
        buf_puts(&s, str(p->name));
        if (p->is_default)
            buf_puts(&s, "*");
        return buf_take(&s);
    }
    case 'R':
        return strdup(p ? str(p->name) : "n/a");
    case 'a':
        return strdup(p == NULL ? "n/a" : p->up ? "up" : "down");
    case 'l':
        if (p == NULL)
            return strdup("n/a");
        units_limit(b, sizeof(b), p->max_time_min, "infinite", false);
        break;
    case 't':
        return strdup(n ? names_node_state_compact((int)n->state) : "n/a");
    case 'T':
        return strdup(n ? names_node_state_long((int)n->state) : "n/a");
    case 'c':
        snprintf(b, sizeof(b), "%u", n ? n->cpus : 0);
        break;
    case 'm':
        snprintf(b, sizeof(b), "%" PRIu64, n ? n->mem_mb : 0);
        break;
    case 'f':
        return n ? strv_join(n->features, n->n_features, "(null)") : strdup("(null)");
    case 'E':
        return strdup(n && n->reason && n->reason[0] ? n->reason : "none");
    case 'H':
        units_timestamp(b, sizeof(b), n && n->reason && n->reason[0] ? n->reason_time_ms : 0,
                        "Unknown");
        break;
    case 'b': /* no node features plugin: the active features are the available ones */
        return n ? strv_join(n->features, n->n_features, "(null)") : strdup("(null)");
    case 'X': /* no topology configured: Slurm counts each CPU a socket of one core */
        snprintf(b, sizeof(b), "%u", n ? n->cpus : 0);
        break;
    case 'z':
        snprintf(b, sizeof(b), "%u:1:1", n ? n->cpus : 0);
        break;
    case 'Y':
    case 'Z':
    case 'I':
    case 'p':
    case 'w':
        return strdup("1");
    case 'd':
        return strdup("0");
    case 'B':
        return strdup("UNLIMITED");
    case 'e':
    case 'O':
    case 'v':
    case 'V':
        return strdup("N/A");
    case 'g':
    case 'S':
        return strdup("all");
    case 'G':
        return strdup("(null)");
    case 'h':
    case 'r':
        return strdup(type == 'h' ? "NO" : "no");
    case 'L':
        return strdup("n/a");
    case 'M':
        return strdup("OFF");
    case 's':
        return strdup("1-infinite");
    case 'u':
    case 'U': /* who set the node's reason: "alice", "alice(1000)" (Slurm's -R columns) */
        if (n == NULL || n->reason_user == NULL || n->reason_user[0] == '\0')
            return strdup("Unknown");
        if (type == 'u')
            return strdup(n->reason_user);
        snprintf(b, sizeof(b), "%.40s(%u)", n->reason_user, n->reason_uid);
        break;
    default:
        b[0] = '\0';
        break;
    }
    return strdup(b);
}

/* A cell summed over the nodes of one line. */
static char *sinfo_aggregate(char type, fmt_node *const *nodes, size_t n)
{
    char b[96];
    switch (type) {
    case 'D':
        snprintf(b, sizeof(b), "%zu", n);
        break;
    case 'N':
    case 'n':
    case 'o': {
        char **names = calloc(n ? n : 1, sizeof(char *));
        if (names == NULL)
            return NULL;
        for (size_t i = 0; i < n; i++) {
            const char *addr = nodes[i]->address;
            names[i] = (char *)(type == 'o' && addr && addr[0] ? addr : str(nodes[i]->name));
        }
        char *s = hostlist_compress(names, n);
        free(names);
        return s;
    }
    case 'C': {
        uint64_t a = 0, idle = 0, o = 0, t = 0;
        for (size_t i = 0; i < n; i++) {
            const fmt_node *x = nodes[i];
            uint64_t alloc = x->alloc_cpus < x->cpus ? x->alloc_cpus : x->cpus;
            a += alloc;
            t += x->cpus;
            if (node_other(x))
                o += x->cpus - alloc;
            else
                idle += x->cpus - alloc;
        }
        snprintf(b, sizeof(b), "%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64, a, idle, o, t);
        break;
    }
    case 'A':
    case 'F': {
        size_t a = 0, idle = 0, o = 0;
        for (size_t i = 0; i < n; i++) {
            int st = nodes[i]->state;
            if (st == N(ALLOCATED) || st == N(MIXED))
                a++;
            else if (st == N(IDLE))
                idle++;
            else
                o++;
        }
        if (type == 'A')
            snprintf(b, sizeof(b), "%zu/%zu", a, idle);
        else
            snprintf(b, sizeof(b), "%zu/%zu/%zu/%zu", a, idle, o, n);
        break;
    }
    default:
        b[0] = '\0';
        break;
    }
    return strdup(b);
}

static bool is_aggregate(const struct table_spec *spec, size_t c)
{
    const struct table_def *d = table_spec_def(spec, c);
    return d != NULL && d->aggregate;
}

/* Add one line for the nodes given (n may be 0) of partition p (may be NULL). */
static int sinfo_line(struct table *t, const struct table_spec *spec, const fmt_partition *p,
                      fmt_node *const *nodes, size_t n)
{
    char **row = table_add_row(t);
    if (row == NULL)
        return -1;
    for (size_t c = 0; c < spec->n; c++) {
        char type = spec->fields[c].type;
        if (type == 0)
            continue;
        row[c] = is_aggregate(spec, c) ? sinfo_aggregate(type, nodes, n)
                                       : sinfo_cell(type, p, n > 0 ? nodes[0] : NULL);
    }
    return 0;
}

/* What makes two nodes print alike on one line: every non-aggregate cell. */
static char *node_key(const struct table_spec *spec, const fmt_partition *p, const fmt_node *n)
{
    struct buf b;
    buf_init(&b);
    for (size_t c = 0; c < spec->n; c++) {
        if (spec->fields[c].type == 0 || is_aggregate(spec, c))
            continue;
        char *cell = sinfo_cell(spec->fields[c].type, p, n);
        buf_puts(&b, str(cell));
        buf_append(&b, "\x1f", 1);
        free(cell);
    }
    return buf_take(&b);
}

struct keyed {
    const char *key;
    size_t idx;
};

static int keyed_cmp(const void *pa, const void *pb)
{
    const struct keyed *a = pa, *b = pb;
    int c = strcmp(a->key, b->key);
    if (c != 0)
        return c;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

struct group {
    size_t first; /* index of the group's first node in the input order */
    size_t start; /* where its run starts in the sorted keys */
    size_t len;
};

static int group_cmp(const void *pa, const void *pb)
{
    const struct group *a = pa, *b = pb;
    return a->first < b->first ? -1 : a->first > b->first;
}

/*
 * Group nodes by key and add one line per group, groups in the order their first node
 * comes, nodes in input order. Sorting keeps this O(n log n) for large clusters.
 */
static int sinfo_groups(struct table *t, const struct table_spec *spec, const fmt_partition *p,
                        fmt_node *const *nodes, size_t n)
{
    struct keyed *kv = calloc(n ? n : 1, sizeof(*kv));
    struct group *g = calloc(n ? n : 1, sizeof(*g));
    fmt_node **members = calloc(n ? n : 1, sizeof(fmt_node *));
    size_t ng = 0, made = 0;
    int rc = -1;
    if (kv == NULL || g == NULL || members == NULL)
        goto out;
    for (; made < n; made++) {
        kv[made].idx = made;
        if ((kv[made].key = node_key(spec, p, nodes[made])) == NULL)
            goto out;
    }
    qsort(kv, n, sizeof(*kv), keyed_cmp);
    for (size_t i = 0; i < n;) {
        size_t end = i + 1;
        while (end < n && strcmp(kv[i].key, kv[end].key) == 0)
            end++;
        g[ng++] = (struct group){.first = kv[i].idx, .start = i, .len = end - i};
        i = end;
    }
    qsort(g, ng, sizeof(*g), group_cmp);
    for (size_t k = 0; k < ng; k++) {
        for (size_t m = 0; m < g[k].len; m++)
            members[m] = nodes[kv[g[k].start + m].idx];
        if (sinfo_line(t, spec, p, members, g[k].len) != 0)
            goto out;
    }
    rc = 0;
out:
    for (size_t i = 0; kv && i < made; i++)
        free((char *)kv[i].key);
    free(kv);
    free(g);
    free(members);
    return rc;
}

void fmt_sinfo(FILE *out, const struct table_spec *spec, fmt_partition *const *parts, size_t np,
               fmt_node *const *nodes, size_t nn, const struct fmt_sinfo_opts *o,
               const struct fmt_ctx *ctx)
{
    (void)ctx;
    struct table t;
    table_init(&t, spec);
    fmt_node **sorted = calloc(nn ? nn : 1, sizeof(fmt_node *));
    fmt_node **sel = calloc(nn ? nn : 1, sizeof(fmt_node *));
    struct part_index *ix = calloc(np ? np : 1, sizeof(*ix));
    if (sorted == NULL || sel == NULL || ix == NULL)
        goto out;
    for (size_t k = 0; k < np; k++)
        if (part_index_build(&ix[k], parts[k]) != 0)
            goto out;
    memcpy(sorted, nodes, nn * sizeof(fmt_node *));
    if (nn > 1)
        qsort(sorted, nn, sizeof(fmt_node *), node_cmp);
    if (o->header && table_add_header(&t, spec) != 0)
        goto out;
    if (o->reasons) {
        size_t m = 0;
        for (size_t i = 0; i < nn; i++)
            if (sorted[i]->reason && sorted[i]->reason[0])
                sel[m++] = sorted[i];
        if (sinfo_groups(&t, spec, NULL, sel, m) != 0)
            goto out;
    } else if (o->node_view) {
        for (size_t i = 0; i < nn; i++) {
            bool any = false;
            for (size_t k = 0; k < np; k++) {
                if (!node_in_partition(sorted[i], parts[k], &ix[k]))
                    continue;
                any = true;
                if (sinfo_line(&t, spec, parts[k], &sorted[i], 1) != 0)
                    goto out;
            }
            if (!any && sinfo_line(&t, spec, NULL, &sorted[i], 1) != 0)
                goto out;
        }
    } else {
        for (size_t k = 0; k < np; k++) {
            size_t m = 0;
            for (size_t i = 0; i < nn; i++)
                if (node_in_partition(sorted[i], parts[k], &ix[k]))
                    sel[m++] = sorted[i];
            if (m == 0) {
                if (!o->hide_empty && sinfo_line(&t, spec, parts[k], sel, 0) != 0)
                    goto out;
                continue;
            }
            if (sinfo_groups(&t, spec, parts[k], sel, m) != 0)
                goto out;
        }
    }
    table_print(out, spec, &t);
out:
    for (size_t k = 0; ix && k < np; k++)
        free(ix[k].names);
    free(ix);
    free(sorted);
    free(sel);
    table_free(&t);
}
