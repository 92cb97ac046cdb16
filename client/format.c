/*
 * format.c - text forms of jobs, nodes and partitions; contract in format.h.
 *
 * Tables (squeue, sinfo) are built in two steps: every cell of every row is rendered to
 * a string first, then the rows are printed with the widths of the format. '#' columns
 * need the widest value before the first line can be printed, and sinfo needs the cells
 * to decide which nodes share a line, so the cells come first in both.
 */
#include "format.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define J(x) SPUR__API__JOB_STATE__JOB_##x
#define N(x) SPUR__API__NODE_STATE__NODE_##x

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *str(const char *s)
{
    return s ? s : "";
}

/* ---- states ------------------------------------------------------------------------- */

static const struct {
    int state;
    const char *code;
    const char *name;
} job_states[] = {
    {J(PENDING), "PD", "PENDING"},       {J(RUNNING), "R", "RUNNING"},
    {J(COMPLETING), "CG", "COMPLETING"}, {J(COMPLETED), "CD", "COMPLETED"},
    {J(FAILED), "F", "FAILED"},          {J(CANCELLED), "CA", "CANCELLED"},
    {J(TIMEOUT), "TO", "TIMEOUT"},       {J(NODE_FAIL), "NF", "NODE_FAIL"},
};
#define NJOB_STATES (sizeof(job_states) / sizeof(job_states[0]))

const char *fmt_job_state_code(int state)
{
    for (size_t i = 0; i < NJOB_STATES; i++)
        if (job_states[i].state == state)
            return job_states[i].code;
    return "?";
}

const char *fmt_job_state_name(int state)
{
    for (size_t i = 0; i < NJOB_STATES; i++)
        if (job_states[i].state == state)
            return job_states[i].name;
    return "UNKNOWN";
}

int fmt_job_state_parse(const char *s)
{
    for (size_t i = 0; i < NJOB_STATES; i++)
        if (strcasecmp(s, job_states[i].code) == 0 || strcasecmp(s, job_states[i].name) == 0)
            return job_states[i].state;
    if (strcasecmp(s, "CANCELED") == 0)
        return J(CANCELLED);
    return -1;
}

int fmt_job_states_parse(const char *list, int *states, size_t max, size_t *n, bool *all, char *err,
                         size_t errlen)
{
    char **words;
    size_t nw;
    *n = 0;
    *all = false;
    if (fmt_split_list(list, &words, &nw) != 0)
        return fail(err, errlen, "out of memory");
    if (nw == 0) {
        fmt_strv_free(words, nw);
        return fail(err, errlen, "Invalid job state specified: (empty)");
    }
    for (size_t i = 0; i < nw; i++) {
        if (strcasecmp(words[i], "all") == 0) {
            *all = true;
            continue;
        }
        int st = fmt_job_state_parse(words[i]);
        if (st < 0) {
            fail(err, errlen, "Invalid job state specified: %s", words[i]);
            fmt_strv_free(words, nw);
            return -1;
        }
        bool dup = false;
        for (size_t k = 0; k < *n; k++)
            dup |= states[k] == st;
        if (!dup && *n < max)
            states[(*n)++] = st;
    }
    fmt_strv_free(words, nw);
    if (*all)
        *n = 0;
    return 0;
}

bool fmt_job_state_active(int state)
{
    return state == J(PENDING) || state == J(RUNNING) || state == J(COMPLETING);
}

static const struct {
    int state;
    const char *compact;
    const char *lng;
} node_states[] = {
    {N(IDLE), "idle", "idle"},        {N(ALLOCATED), "alloc", "allocated"},
    {N(MIXED), "mix", "mixed"},       {N(DOWN), "down", "down"},
    {N(DRAINED), "drain", "drained"}, {N(DRAINING), "drng", "draining"},
    {N(UNKNOWN), "unk", "unknown"},
};
#define NNODE_STATES (sizeof(node_states) / sizeof(node_states[0]))

const char *fmt_node_state_compact(const fmt_node *n)
{
    for (size_t i = 0; i < NNODE_STATES; i++)
        if (node_states[i].state == (int)n->state)
            return node_states[i].compact;
    return "unk";
}

const char *fmt_node_state_long(const fmt_node *n)
{
    for (size_t i = 0; i < NNODE_STATES; i++)
        if (node_states[i].state == (int)n->state)
            return node_states[i].lng;
    return "unknown";
}

const char *fmt_node_state_scontrol(const fmt_node *n)
{
    switch ((int)n->state) {
    case N(IDLE):
        return "IDLE";
    case N(ALLOCATED):
        return "ALLOCATED";
    case N(MIXED):
        return "MIXED";
    case N(DOWN):
        return "DOWN";
    case N(DRAINED):
        return "IDLE+DRAIN";
    case N(DRAINING):
        return n->cpus > 0 && n->alloc_cpus >= n->cpus ? "ALLOCATED+DRAIN" : "MIXED+DRAIN";
    default:
        return "UNKNOWN";
    }
}

int fmt_node_state_matches(const char *word, int state)
{
    if (strcasecmp(word, "drain") == 0)
        return state == N(DRAINED) || state == N(DRAINING);
    for (size_t i = 0; i < NNODE_STATES; i++)
        if (strcasecmp(word, node_states[i].compact) == 0 ||
            strcasecmp(word, node_states[i].lng) == 0)
            return node_states[i].state == state;
    return -1;
}

/* ---- values ------------------------------------------------------------------------- */

void fmt_duration(char *buf, size_t len, uint64_t secs)
{
    uint64_t d = secs / 86400, h = secs / 3600 % 24, m = secs / 60 % 60, s = secs % 60;
    if (d > 0)
        snprintf(buf, len, "%" PRIu64 "-%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, d, h, m, s);
    else if (h > 0)
        snprintf(buf, len, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, h, m, s);
    else
        snprintf(buf, len, "%" PRIu64 ":%02" PRIu64, m, s);
}

void fmt_duration_hms(char *buf, size_t len, uint64_t secs)
{
    uint64_t d = secs / 86400, h = secs / 3600 % 24, m = secs / 60 % 60, s = secs % 60;
    if (d > 0)
        snprintf(buf, len, "%" PRIu64 "-%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, d, h, m, s);
    else
        snprintf(buf, len, "%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, h, m, s);
}

void fmt_limit(char *buf, size_t len, uint32_t minutes, const char *unlimited, bool hms)
{
    if (minutes == 0)
        snprintf(buf, len, "%s", unlimited);
    else if (hms)
        fmt_duration_hms(buf, len, (uint64_t)minutes * 60);
    else
        fmt_duration(buf, len, (uint64_t)minutes * 60);
}

void fmt_timestamp(char *buf, size_t len, uint64_t ms, const char *none)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms == 0 || localtime_r(&t, &tm) == NULL ||
        strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        snprintf(buf, len, "%s", none);
}

void fmt_mem(char *buf, size_t len, uint64_t mb)
{
    if (mb == 0)
        snprintf(buf, len, "0");
    else if (mb % (1024 * 1024) == 0)
        snprintf(buf, len, "%" PRIu64 "T", mb / (1024 * 1024));
    else if (mb % 1024 == 0)
        snprintf(buf, len, "%" PRIu64 "G", mb / 1024);
    else
        snprintf(buf, len, "%" PRIu64 "M", mb);
}

/* A growing string; on allocation failure it stays NULL and every append is a no-op. */
struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
};

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (ns == NULL) {
            free(b->s);
            b->s = NULL;
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        sb_putn(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* The finished string ("" when nothing was appended), or NULL when out of memory. */
static char *sb_take(struct sbuf *b)
{
    if (b->oom)
        return NULL;
    if (b->s == NULL)
        return strdup("");
    return b->s;
}

char *fmt_expand_path(const fmt_job *j, const char *pattern)
{
    struct sbuf b = {0};
    const Spur__Api__JobSpec *sp = j->spec;
    const char *p = str(pattern);
    if (p[0] != '/' && sp != NULL && sp->workdir && sp->workdir[0]) {
        sb_puts(&b, sp->workdir);
        if (sp->workdir[strlen(sp->workdir) - 1] != '/')
            sb_puts(&b, "/");
    }
    for (; *p; p++) {
        if (*p != '%' || p[1] == '\0') {
            sb_putn(&b, p, 1);
            continue;
        }
        switch (p[1]) {
        case 'j':
            sb_printf(&b, "%" PRIu64, j->id);
            break;
        case 'x':
            sb_puts(&b, sp ? str(sp->name) : "");
            break;
        case 'u':
            sb_puts(&b, sp ? str(sp->user) : "");
            break;
        case 'N':
            sb_puts(&b, j->n_node_list > 0 ? str(j->node_list[0]) : "");
            break;
        case '%':
            sb_puts(&b, "%");
            break;
        default:
            sb_putn(&b, p, 2); /* left for the node agent to decide */
            break;
        }
        p++;
    }
    return sb_take(&b);
}

/* ---- lists -------------------------------------------------------------------------- */

void fmt_strv_free(char **v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Append a copy of s[0..n) to a NULL-terminated vector. */
static int strv_push(char ***v, size_t *n, size_t *cap, const char *s, size_t len)
{
    if (*n + 1 >= *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        char **nv = realloc(*v, nc * sizeof(char *));
        if (nv == NULL)
            return -1;
        *v = nv;
        *cap = nc;
    }
    char *copy = strndup(s, len);
    if (copy == NULL)
        return -1;
    (*v)[(*n)++] = copy;
    (*v)[*n] = NULL;
    return 0;
}

int fmt_split_list(const char *list, char ***out, size_t *n)
{
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    const char *p = str(list);
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len > 0 && strv_push(&v, &cnt, &cap, p, len) != 0) {
            fmt_strv_free(v, cnt);
            return -1;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    if (v == NULL && (v = calloc(1, sizeof(char *))) == NULL)
        return -1;
    *out = v;
    *n = cnt;
    return 0;
}

int fmt_job_ids_parse(const char *list, uint64_t **ids, size_t *n, char *err, size_t errlen)
{
    char **words;
    size_t nw;
    if (fmt_split_list(list, &words, &nw) != 0)
        return fail(err, errlen, "out of memory");
    if (nw == 0) {
        fmt_strv_free(words, nw);
        return fail(err, errlen, "Invalid job id %s", str(list)[0] ? list : "(empty)");
    }
    /* Check every word before adding any, so a bad list adds nothing. */
    for (size_t i = 0; i < nw; i++) {
        const char *w = words[i];
        char *end;
        errno = 0;
        unsigned long long v = strtoull(w, &end, 10);
        if (!isdigit((unsigned char)w[0]) || *end != '\0' || errno != 0 || v == 0) {
            fail(err, errlen, "Invalid job id %s", w);
            fmt_strv_free(words, nw);
            return -1;
        }
    }
    uint64_t *nv = realloc(*ids, (*n + nw) * sizeof(uint64_t));
    if (nv == NULL) {
        fmt_strv_free(words, nw);
        return fail(err, errlen, "out of memory");
    }
    *ids = nv;
    for (size_t i = 0; i < nw; i++)
        (*ids)[(*n)++] = strtoull(words[i], NULL, 10);
    fmt_strv_free(words, nw);
    return 0;
}

/* A host name split into prefix and numeric suffix. */
struct host {
    const char *name;
    size_t plen;   /* prefix length */
    bool numbered; /* has a numeric suffix (of at most 18 digits) */
    uint64_t value;
    int pad; /* digits to zero-pad to; 0: none */
};

static void host_split(struct host *h, const char *name)
{
    size_t len = strlen(name), k = len;
    while (k > 0 && isdigit((unsigned char)name[k - 1]))
        k--;
    h->name = name;
    h->numbered = k < len && len - k <= 18;
    h->plen = h->numbered ? k : len;
    h->value = 0;
    h->pad = 0;
    if (h->numbered) {
        for (size_t i = k; i < len; i++)
            h->value = h->value * 10 + (uint64_t)(name[i] - '0');
        if (name[k] == '0' && len - k > 1)
            h->pad = (int)(len - k);
    }
}

static int host_cmp(const void *pa, const void *pb)
{
    const struct host *a = pa, *b = pb;
    size_t m = a->plen < b->plen ? a->plen : b->plen;
    int c = memcmp(a->name, b->name, m);
    if (c != 0)
        return c;
    if (a->plen != b->plen)
        return a->plen < b->plen ? -1 : 1;
    if (a->numbered != b->numbered)
        return a->numbered ? 1 : -1;
    if (!a->numbered)
        return 0;
    if (a->pad != b->pad)
        return a->pad < b->pad ? -1 : 1;
    return a->value < b->value ? -1 : a->value > b->value;
}

static bool same_prefix(const struct host *a, const struct host *b)
{
    return a->plen == b->plen && memcmp(a->name, b->name, a->plen) == 0;
}

char *fmt_hostlist(char *const *names, size_t n)
{
    struct host *h = calloc(n ? n : 1, sizeof(*h));
    struct sbuf b = {0};
    if (h == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        host_split(&h[i], str(names[i]));
    /*
     * A number without leading zeros prints the same at its own width, so "n10" can join
     * the zero-padded "n08", "n09" as "n[08-10]" when a padded group of that width exists
     * under the same prefix.
     */
    qsort(h, n, sizeof(*h), host_cmp);
    for (size_t i = 0; i < n;) {
        size_t end = i + 1;
        while (end < n && same_prefix(&h[i], &h[end]))
            end++;
        bool padded[19] = {false}; /* widths of the zero-padded numbers under this prefix */
        for (size_t k = i; k < end; k++)
            if (h[k].numbered && h[k].pad > 0)
                padded[h[k].pad] = true;
        for (size_t k = i; k < end; k++) {
            int digits = (int)(strlen(h[k].name) - h[k].plen);
            if (h[k].numbered && h[k].pad == 0 && padded[digits])
                h[k].pad = digits;
        }
        i = end;
    }
    qsort(h, n, sizeof(*h), host_cmp);

    size_t i = 0;
    while (i < n) {
        if (b.n > 0)
            sb_puts(&b, ",");
        if (!h[i].numbered) {
            sb_puts(&b, h[i].name);
            size_t k = i + 1;
            while (k < n && host_cmp(&h[i], &h[k]) == 0)
                k++; /* duplicates */
            i = k;
            continue;
        }
        /* A group: same prefix, numbered, same padding. */
        size_t end = i + 1;
        while (end < n && h[end].numbered && same_prefix(&h[i], &h[end]) && h[end].pad == h[i].pad)
            end++;
        size_t distinct = 1;
        for (size_t k = i + 1; k < end; k++)
            distinct += h[k].value != h[k - 1].value;
        sb_putn(&b, h[i].name, h[i].plen);
        if (distinct == 1) {
            sb_printf(&b, "%0*" PRIu64, h[i].pad, h[i].value);
            i = end;
            continue;
        }
        sb_puts(&b, "[");
        size_t k = i;
        bool first = true;
        while (k < end) {
            uint64_t lo = h[k].value, hi = lo;
            size_t m = k + 1;
            while (m < end && (h[m].value == hi || h[m].value == hi + 1)) {
                hi = h[m].value;
                m++;
            }
            if (!first)
                sb_puts(&b, ",");
            first = false;
            if (lo == hi)
                sb_printf(&b, "%0*" PRIu64, h[i].pad, lo);
            else
                sb_printf(&b, "%0*" PRIu64 "-%0*" PRIu64, h[i].pad, lo, h[i].pad, hi);
            k = m;
        }
        sb_puts(&b, "]");
        i = end;
    }
    free(h);
    return sb_take(&b);
}

int fmt_hostlist_expand(const char *expr, char ***out, size_t *n, char *err, size_t errlen)
{
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    const char *p = str(expr);
    char name[512];

    while (*p) {
        /* One item: up to a comma outside brackets. */
        const char *q = p;
        int depth = 0;
        while (*q && (depth > 0 || *q != ',')) {
            if (*q == '[')
                depth++;
            else if (*q == ']')
                depth--;
            q++;
        }
        size_t ilen = (size_t)(q - p);
        const char *lb = memchr(p, '[', ilen);
        if (ilen == 0) {
            /* empty item ("a,,b"): skip */
        } else if (lb == NULL) {
            if (memchr(p, ']', ilen) != NULL)
                goto bad;
            if (cnt >= FMT_HOSTLIST_MAX)
                goto toomany;
            if (strv_push(&v, &cnt, &cap, p, ilen) != 0)
                goto oom;
        } else {
            const char *rb = memchr(lb, ']', ilen - (size_t)(lb - p));
            if (rb == NULL || rb == lb + 1)
                goto bad;
            const char *suffix = rb + 1;
            size_t slen = (size_t)(q - suffix);
            size_t plen = (size_t)(lb - p);
            if (memchr(suffix, '[', slen) != NULL || memchr(suffix, ']', slen) != NULL ||
                memchr(p, ']', plen) != NULL)
                goto bad;
            /* Ranges: "1-3,05,07-09" */
            const char *r = lb + 1;
            while (r < rb) {
                const char *rend = memchr(r, ',', (size_t)(rb - r));
                if (rend == NULL)
                    rend = rb;
                const char *dash = memchr(r, '-', (size_t)(rend - r));
                const char *lo_end = dash ? dash : rend;
                size_t lo_len = (size_t)(lo_end - r);
                uint64_t lo = 0, hi;
                if (lo_len == 0 || lo_len > 18)
                    goto bad;
                for (const char *d = r; d < lo_end; d++) {
                    if (!isdigit((unsigned char)*d))
                        goto bad;
                    lo = lo * 10 + (uint64_t)(*d - '0');
                }
                hi = lo;
                if (dash != NULL) {
                    size_t hl = (size_t)(rend - dash - 1);
                    if (hl == 0 || hl > 18)
                        goto bad;
                    hi = 0;
                    for (const char *d = dash + 1; d < rend; d++) {
                        if (!isdigit((unsigned char)*d))
                            goto bad;
                        hi = hi * 10 + (uint64_t)(*d - '0');
                    }
                    if (hi < lo)
                        goto bad;
                }
                if (hi - lo >= FMT_HOSTLIST_MAX || cnt + (hi - lo) >= FMT_HOSTLIST_MAX)
                    goto toomany;
                for (uint64_t x = lo;; x++) {
                    int len = snprintf(name, sizeof(name), "%.*s%0*" PRIu64 "%.*s", (int)plen, p,
                                       (int)lo_len, x, (int)slen, suffix);
                    if (len < 0 || (size_t)len >= sizeof(name))
                        goto bad;
                    if (strv_push(&v, &cnt, &cap, name, (size_t)len) != 0)
                        goto oom;
                    if (x == hi)
                        break;
                }
                r = rend + (rend < rb);
            }
        }
        p = q + (*q == ',');
    }
    if (v == NULL && (v = calloc(1, sizeof(char *))) == NULL)
        goto oom;
    *out = v;
    *n = cnt;
    return 0;
bad:
    fmt_strv_free(v, cnt);
    return fail(err, errlen, "invalid host list \"%s\"", str(expr));
toomany:
    fmt_strv_free(v, cnt);
    return fail(err, errlen, "host list \"%s\" expands to more than %d names", str(expr),
                FMT_HOSTLIST_MAX);
oom:
    fmt_strv_free(v, cnt);
    return fail(err, errlen, "out of memory");
}

/* ---- filters and order -------------------------------------------------------------- */

static bool in_strv(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], str(s)) == 0)
            return true;
    return false;
}

bool fmt_job_matches(const fmt_job *j, const struct fmt_job_filter *f)
{
    const Spur__Api__JobSpec *sp = j->spec;
    if (f->nids > 0) {
        bool hit = false;
        for (size_t i = 0; i < f->nids; i++)
            hit |= f->ids[i] == j->id;
        if (!hit)
            return false;
    }
    if (f->nstates > 0) {
        bool hit = false;
        for (size_t i = 0; i < f->nstates; i++)
            hit |= f->states[i] == (int)j->state;
        if (!hit)
            return false;
    }
    if (f->nusers > 0 && !in_strv(f->users, f->nusers, sp ? sp->user : ""))
        return false;
    if (f->npartitions > 0 && !in_strv(f->partitions, f->npartitions, sp ? sp->partition : ""))
        return false;
    if (f->nnames > 0 && !in_strv(f->names, f->nnames, sp ? sp->name : ""))
        return false;
    return true;
}

static int job_cmp(const void *pa, const void *pb)
{
    const fmt_job *a = *(fmt_job *const *)pa, *b = *(fmt_job *const *)pb;
    int c = strcmp(a->spec ? str(a->spec->partition) : "", b->spec ? str(b->spec->partition) : "");
    if (c != 0)
        return c;
    if (a->state != b->state)
        return a->state < b->state ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

void fmt_sort_jobs(fmt_job **jobs, size_t n)
{
    if (n > 1)
        qsort(jobs, n, sizeof(*jobs), job_cmp);
}

/* ---- % formats ---------------------------------------------------------------------- */

struct field_def {
    char type;
    const char *header;
    bool aggregate; /* sinfo: summed over the nodes of a line */
};

static const struct field_def job_fields[] = {
    {'i', "JOBID", false},       {'A', "JOBID", false},      {'j', "NAME", false},
    {'u', "USER", false},        {'U', "UID", false},        {'t', "ST", false},
    {'T', "STATE", false},       {'M', "TIME", false},       {'l', "TIME_LIMIT", false},
    {'L', "TIME_LEFT", false},   {'D', "NODES", false},      {'R', "NODELIST(REASON)", false},
    {'r', "REASON", false},      {'P', "PARTITION", false},  {'N', "NODELIST", false},
    {'C', "CPUS", false},        {'c', "MIN_CPUS", false},   {'m', "MIN_MEMORY", false},
    {'V', "SUBMIT_TIME", false}, {'S', "START_TIME", false}, {'e', "END_TIME", false},
    {'Z', "WORK_DIR", false},    {'B', "EXEC_HOST", false},
};

static const struct field_def sinfo_fields[] = {
    {'P', "PARTITION", false},    {'R', "PARTITION", false},      {'a', "AVAIL", false},
    {'l', "TIMELIMIT", false},    {'D', "NODES", true},           {'t', "STATE", false},
    {'T', "STATE", false},        {'N', "NODELIST", true},        {'c', "CPUS", false},
    {'m', "MEMORY", false},       {'f', "AVAIL_FEATURES", false}, {'E', "REASON", false},
    {'C', "CPUS(A/I/O/T)", true}, {'F', "NODES(A/I/O/T)", true},  {'n', "HOSTNAMES", true},
    {'o', "NODE_ADDR", true},     {'H', "TIMESTAMP", false},
};

static const struct field_def *field_def(enum fmt_kind kind, char type)
{
    const struct field_def *defs = kind == FMT_JOBS ? job_fields : sinfo_fields;
    size_t n = kind == FMT_JOBS ? sizeof(job_fields) / sizeof(job_fields[0])
                                : sizeof(sinfo_fields) / sizeof(sinfo_fields[0]);
    for (size_t i = 0; i < n; i++)
        if (defs[i].type == type)
            return &defs[i];
    return NULL;
}

void fmt_spec_free(struct fmt_spec *spec)
{
    for (size_t i = 0; i < spec->n; i++)
        free(spec->fields[i].text);
    free(spec->fields);
    spec->fields = NULL;
    spec->n = 0;
}

static struct fmt_field *spec_add(struct fmt_spec *spec)
{
    struct fmt_field *nf = realloc(spec->fields, (spec->n + 1) * sizeof(*nf));
    if (nf == NULL)
        return NULL;
    spec->fields = nf;
    struct fmt_field *f = &nf[spec->n++];
    memset(f, 0, sizeof(*f));
    f->width = -1;
    return f;
}

int fmt_spec_parse(const char *format, enum fmt_kind kind, struct fmt_spec *spec, char *err,
                   size_t errlen)
{
    memset(spec, 0, sizeof(*spec));
    spec->kind = kind;
    struct sbuf lit = {0};
    const char *p = str(format);
    if (*p == '\0')
        return fail(err, errlen, "empty format");
    while (*p) {
        if (*p != '%') {
            sb_putn(&lit, p++, 1);
            continue;
        }
        if (p[1] == '%') {
            sb_puts(&lit, "%");
            p += 2;
            continue;
        }
        const char *start = p++;
        struct fmt_field f = {.width = -1};
        if (*p == '.') {
            f.right = true;
            p++;
        } else if (*p == '-') {
            p++;
        }
        if (*p == '#') {
            f.auto_width = true;
            p++;
        } else if (isdigit((unsigned char)*p)) {
            long w = 0;
            while (isdigit((unsigned char)*p) && w < 100000)
                w = w * 10 + (*p++ - '0');
            if (isdigit((unsigned char)*p) || w > 10000) {
                free(lit.s);
                fmt_spec_free(spec);
                return fail(err, errlen, "field width too large in \"%s\"", format);
            }
            f.width = (int)w;
        }
        if (*p == '\0' || field_def(kind, *p) == NULL) {
            int shown = *p ? (int)(p - start + 1) : (int)(p - start);
            free(lit.s);
            fmt_spec_free(spec);
            if (*p == '\0')
                return fail(err, errlen, "format ends inside the field \"%.*s\"", shown, start);
            return fail(err, errlen, "invalid field \"%.*s\" in format \"%s\"", shown, start,
                        format);
        }
        f.type = *p++;
        if (lit.oom)
            goto oom;
        if (lit.n > 0) {
            struct fmt_field *t = spec_add(spec);
            if (t == NULL)
                goto oom;
            t->text = lit.s;
            lit = (struct sbuf){0};
        }
        struct fmt_field *nf = spec_add(spec);
        if (nf == NULL)
            goto oom;
        *nf = f;
    }
    if (lit.oom)
        goto oom;
    if (lit.n > 0) {
        struct fmt_field *t = spec_add(spec);
        if (t == NULL)
            goto oom;
        t->text = lit.s;
        lit = (struct sbuf){0};
    }
    return 0;
oom:
    free(lit.s);
    fmt_spec_free(spec);
    return fail(err, errlen, "out of memory");
}

/* ---- tables ------------------------------------------------------------------------- */

/* Rows of cells, one cell per spec field (literal fields keep NULL cells). */
struct table {
    size_t ncols;
    size_t nrows, cap;
    char **cells;
};

static char **table_row(struct table *t)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **nc = realloc(t->cells, cap * t->ncols * sizeof(char *));
        if (nc == NULL)
            return NULL;
        t->cells = nc;
        t->cap = cap;
    }
    char **row = t->cells + t->nrows * t->ncols;
    memset(row, 0, t->ncols * sizeof(char *));
    t->nrows++;
    return row;
}

static void table_free(struct table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
}

/* The byte length of at most max bytes of s that does not split a UTF-8 sequence. */
static size_t clip_len(const char *s, size_t max)
{
    size_t len = strlen(s);
    if (len <= max)
        return len;
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    return max;
}

static void put_cell(FILE *out, const struct fmt_field *f, int width, const char *s)
{
    if (width < 0) {
        fputs(s, out);
        return;
    }
    size_t n = clip_len(s, (size_t)width);
    size_t padn = (size_t)width > n ? (size_t)width - n : 0;
    if (f->right)
        fprintf(out, "%*s", (int)padn, "");
    fwrite(s, 1, n, out);
    if (!f->right)
        fprintf(out, "%*s", (int)padn, "");
}

static void table_print(FILE *out, const struct fmt_spec *spec, const struct table *t)
{
    int *w = calloc(spec->n ? spec->n : 1, sizeof(int));
    if (w == NULL)
        return;
    for (size_t c = 0; c < spec->n; c++) {
        const struct fmt_field *f = &spec->fields[c];
        w[c] = f->width;
        if (f->type == 0 || !f->auto_width)
            continue;
        w[c] = 0;
        for (size_t r = 0; r < t->nrows; r++) {
            const char *s = t->cells[r * t->ncols + c];
            int len = s ? (int)strlen(s) : 0;
            if (len > w[c])
                w[c] = len;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < spec->n; c++) {
            const struct fmt_field *f = &spec->fields[c];
            if (f->type == 0)
                fputs(f->text, out);
            else
                put_cell(out, f, w[c], str(t->cells[r * t->ncols + c]));
        }
        fputc('\n', out);
    }
    free(w);
}

static void header_row(const struct fmt_spec *spec, char **row)
{
    for (size_t c = 0; c < spec->n; c++)
        if (spec->fields[c].type != 0)
            row[c] = strdup(field_def(spec->kind, spec->fields[c].type)->header);
}

/* ---- squeue ------------------------------------------------------------------------- */

static uint32_t or1(uint32_t v)
{
    return v ? v : 1;
}

static uint64_t job_elapsed_s(const fmt_job *j, uint64_t now_ms)
{
    if (j->start_time_ms == 0)
        return 0;
    uint64_t end = j->end_time_ms;
    if (end == 0 && (j->state == J(RUNNING) || j->state == J(COMPLETING)))
        end = now_ms;
    return end > j->start_time_ms ? (end - j->start_time_ms) / 1000 : 0;
}

static const char *job_reason(const fmt_job *j)
{
    if (j->reason && j->reason[0])
        return j->reason;
    if (j->held)
        return "JobHeldUser";
    return "None";
}

static uint32_t job_node_count(const fmt_job *j)
{
    if (j->n_node_list > 0)
        return (uint32_t)j->n_node_list;
    return or1(j->spec ? j->spec->nodes : 0);
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
        return strdup(fmt_job_state_code(j->state));
    case 'T':
        return strdup(fmt_job_state_name(j->state));
    case 'M':
        fmt_duration(b, sizeof(b), job_elapsed_s(j, ctx->now_ms));
        break;
    case 'l':
        fmt_limit(b, sizeof(b), sp->time_limit_min, "UNLIMITED", false);
        break;
    case 'L':
        if (sp->time_limit_min == 0) {
            snprintf(b, sizeof(b), "UNLIMITED");
        } else if (fmt_job_state_active(j->state)) {
            uint64_t lim = (uint64_t)sp->time_limit_min * 60;
            uint64_t used = job_elapsed_s(j, ctx->now_ms);
            fmt_duration(b, sizeof(b), used < lim ? lim - used : 0);
        } else {
            fmt_duration(b, sizeof(b), 0);
        }
        break;
    case 'D':
        snprintf(b, sizeof(b), "%u", job_node_count(j));
        break;
    case 'R': {
        bool failed = j->state == J(FAILED) || j->state == J(NODE_FAIL);
        if (j->state == J(PENDING) || (failed && j->reason && j->reason[0])) {
            struct sbuf s = {0};
            sb_puts(&s, "(");
            sb_puts(&s, job_reason(j));
            sb_puts(&s, ")");
            return sb_take(&s);
        }
        return fmt_hostlist(j->node_list, j->n_node_list);
    }
    case 'r':
        return strdup(job_reason(j));
    case 'P':
        return strdup(str(sp->partition));
    case 'N':
        return fmt_hostlist(j->node_list, j->n_node_list);
    case 'C':
        snprintf(b, sizeof(b), "%" PRIu64, (uint64_t)or1(sp->ntasks) * or1(sp->cpus_per_task));
        break;
    case 'c':
        snprintf(b, sizeof(b), "%u", or1(sp->cpus_per_task));
        break;
    case 'm':
        fmt_mem(b, sizeof(b), sp->mem_mb);
        break;
    case 'V':
        fmt_timestamp(b, sizeof(b), j->submit_time_ms, "N/A");
        break;
    case 'S':
        fmt_timestamp(b, sizeof(b), j->start_time_ms, "N/A");
        break;
    case 'e':
        fmt_timestamp(b, sizeof(b), j->end_time_ms, "N/A");
        break;
    case 'Z':
        return strdup(str(sp->workdir));
    case 'B':
        return strdup(j->n_node_list > 0 ? str(j->node_list[0]) : "n/a");
    default:
        b[0] = '\0';
        break;
    }
    return strdup(b);
}

void fmt_squeue(FILE *out, const struct fmt_spec *spec, fmt_job *const *jobs, size_t n, bool header,
                const struct fmt_ctx *ctx)
{
    struct table t = {.ncols = spec->n};
    if (header) {
        char **row = table_row(&t);
        if (row == NULL)
            goto out;
        header_row(spec, row);
    }
    for (size_t i = 0; i < n; i++) {
        char **row = table_row(&t);
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

/* ---- sinfo -------------------------------------------------------------------------- */

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
           in_strv(n->partitions, n->n_partitions, p->name);
}

static bool node_other(const fmt_node *n)
{
    return n->state == N(DOWN) || n->state == N(DRAINED) || n->state == N(DRAINING) ||
           n->state == N(UNKNOWN) || n->state == N(STATE_UNSPECIFIED);
}

static char *join_words(char *const *v, size_t n, const char *none)
{
    if (n == 0)
        return strdup(none);
    struct sbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            sb_puts(&b, ",");
        sb_puts(&b, str(v[i]));
    }
    return sb_take(&b);
}

/* A cell that does not depend on how many nodes share the line. p or n may be NULL. */
static char *sinfo_cell(char type, const fmt_partition *p, const fmt_node *n)
{
    char b[64];
    switch (type) {
    case 'P': {
        if (p == NULL)
            return strdup("n/a");
        struct sbuf s = {0};
        sb_puts(&s, str(p->name));
        if (p->is_default)
            sb_puts(&s, "*");
        return sb_take(&s);
    }
    case 'R':
        return strdup(p ? str(p->name) : "n/a");
    case 'a':
        return strdup(p == NULL ? "n/a" : p->up ? "up" : "down");
    case 'l':
        if (p == NULL)
            return strdup("n/a");
        fmt_limit(b, sizeof(b), p->max_time_min, "infinite", false);
        break;
    case 't':
        return strdup(n ? fmt_node_state_compact(n) : "n/a");
    case 'T':
        return strdup(n ? fmt_node_state_long(n) : "n/a");
    case 'c':
        snprintf(b, sizeof(b), "%u", n ? n->cpus : 0);
        break;
    case 'm':
        snprintf(b, sizeof(b), "%" PRIu64, n ? n->mem_mb : 0);
        break;
    case 'f':
        return n ? join_words(n->features, n->n_features, "(null)") : strdup("(null)");
    case 'E':
        return strdup(n && n->reason && n->reason[0] ? n->reason : "none");
    case 'H':
        fmt_timestamp(b, sizeof(b), n && n->reason && n->reason[0] ? n->reason_time_ms : 0,
                      "Unknown");
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
        char *s = fmt_hostlist(names, n);
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
        snprintf(b, sizeof(b), "%zu/%zu/%zu/%zu", a, idle, o, n);
        break;
    }
    default:
        b[0] = '\0';
        break;
    }
    return strdup(b);
}

static bool is_aggregate(const struct fmt_spec *spec, size_t c)
{
    const struct field_def *d = field_def(spec->kind, spec->fields[c].type);
    return d != NULL && d->aggregate;
}

/* Add one line for the nodes given (n may be 0) of partition p (may be NULL). */
static int sinfo_line(struct table *t, const struct fmt_spec *spec, const fmt_partition *p,
                      fmt_node *const *nodes, size_t n)
{
    char **row = table_row(t);
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
static char *node_key(const struct fmt_spec *spec, const fmt_partition *p, const fmt_node *n)
{
    struct sbuf b = {0};
    for (size_t c = 0; c < spec->n; c++) {
        if (spec->fields[c].type == 0 || is_aggregate(spec, c))
            continue;
        char *cell = sinfo_cell(spec->fields[c].type, p, n);
        sb_puts(&b, str(cell));
        sb_putn(&b, "\x1f", 1);
        free(cell);
    }
    return sb_take(&b);
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
static int sinfo_groups(struct table *t, const struct fmt_spec *spec, const fmt_partition *p,
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

void fmt_sinfo(FILE *out, const struct fmt_spec *spec, fmt_partition *const *parts, size_t np,
               fmt_node *const *nodes, size_t nn, const struct fmt_sinfo_opts *o,
               const struct fmt_ctx *ctx)
{
    (void)ctx;
    struct table t = {.ncols = spec->n};
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
    if (o->header) {
        char **row = table_row(&t);
        if (row == NULL)
            goto out;
        header_row(spec, row);
    }
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

/* ---- scontrol show -------------------------------------------------------------------- */

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
    fprintf(out, "   JobState=%s Reason=%s Dependency=(null)\n", fmt_job_state_name(j->state),
            job_reason(j));
    /* ExitCode=status:signal; a negative exit_code is taken as "killed by that signal". */
    if (j->exit_code >= 0)
        fprintf(out, "   BatchFlag=1 ExitCode=%d:0\n", j->exit_code);
    else
        fprintf(out, "   BatchFlag=1 ExitCode=0:%lld\n", -(long long)j->exit_code);
    fmt_duration_hms(b1, sizeof(b1), job_elapsed_s(j, ctx->now_ms));
    fmt_limit(b2, sizeof(b2), sp->time_limit_min, "UNLIMITED", true);
    fprintf(out, "   RunTime=%s TimeLimit=%s TimeMin=N/A\n", b1, b2);
    fmt_timestamp(b1, sizeof(b1), j->submit_time_ms, "Unknown");
    fmt_timestamp(b2, sizeof(b2), j->eligible_time_ms ? j->eligible_time_ms : j->submit_time_ms,
                  "Unknown");
    fprintf(out, "   SubmitTime=%s EligibleTime=%s\n", b1, b2);
    fmt_timestamp(b1, sizeof(b1), j->start_time_ms, "Unknown");
    fmt_timestamp(b2, sizeof(b2), j->end_time_ms, "Unknown");
    fprintf(out, "   StartTime=%s EndTime=%s Deadline=N/A\n", b1, b2);
    fprintf(out, "   Partition=%s\n", sp->partition && sp->partition[0] ? sp->partition : "(null)");
    char *nl = fmt_hostlist(j->node_list, j->n_node_list);
    fprintf(out, "   NodeList=%s\n", nl && nl[0] ? nl : "(null)");
    free(nl);
    if (j->n_node_list > 0)
        fprintf(out, "   BatchHost=%s\n", str(j->node_list[0]));
    fprintf(out, "   NumNodes=%u NumCPUs=%" PRIu64 " NumTasks=%u CPUs/Task=%u\n", job_node_count(j),
            (uint64_t)or1(sp->ntasks) * or1(sp->cpus_per_task), or1(sp->ntasks),
            or1(sp->cpus_per_task));
    fmt_mem(b1, sizeof(b1), sp->mem_mb);
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
    char *feat = join_words(n->features, n->n_features, "(null)");
    char *parts = join_words(n->partitions, n->n_partitions, "(null)");
    fprintf(out, "NodeName=%s\n", str(n->name));
    fprintf(out, "   CPUAlloc=%u CPUTot=%u\n", n->alloc_cpus, n->cpus);
    fprintf(out, "   AvailableFeatures=%s\n", str(feat));
    fprintf(out, "   ActiveFeatures=%s\n", str(feat));
    fprintf(out, "   NodeAddr=%s NodeHostName=%s\n",
            n->address && n->address[0] ? n->address : str(n->name), str(n->name));
    fprintf(out, "   RealMemory=%" PRIu64 " AllocMem=%" PRIu64 "\n", n->mem_mb, n->alloc_mem_mb);
    fprintf(out, "   State=%s\n", fmt_node_state_scontrol(n));
    fprintf(out, "   Partitions=%s\n", str(parts));
    fmt_timestamp(b, sizeof(b), n->last_seen_ms, "None");
    fprintf(out, "   LastSeenTime=%s\n", b);
    if (n->reason && n->reason[0]) {
        fmt_timestamp(b, sizeof(b), n->reason_time_ms, "");
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
    fmt_limit(b2, sizeof(b2), p->max_time_min, "UNLIMITED", true);
    limit_u64(b3, sizeof(b3), p->max_cpus_per_node);
    limit_u64(b4, sizeof(b4), p->max_mem_mb_per_node);
    char *nodes = fmt_hostlist(p->nodes, p->n_nodes);
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

/* ---- JSON --------------------------------------------------------------------------- */

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
    json_kstr(j, "state", fmt_job_state_name(job->state));
    json_kstr(j, "state_code", fmt_job_state_code(job->state));
    json_kstr(j, "reason", job_reason(job));
    json_kbool(j, "held", job->held);
    json_ku64(j, "nodes", job_node_count(job));
    json_ku64(j, "ntasks", or1(sp->ntasks));
    json_ku64(j, "cpus_per_task", or1(sp->cpus_per_task));
    json_ku64(j, "cpus", (uint64_t)or1(sp->ntasks) * or1(sp->cpus_per_task));
    json_ku64(j, "mem_mb", sp->mem_mb);
    json_ku64(j, "time_limit_min", sp->time_limit_min);
    json_strv(j, "node_list", job->node_list, job->n_node_list);
    json_ku64(j, "submit_time_ms", job->submit_time_ms);
    json_ku64(j, "eligible_time_ms", job->eligible_time_ms);
    json_ku64(j, "start_time_ms", job->start_time_ms);
    json_ku64(j, "end_time_ms", job->end_time_ms);
    json_ki64(j, "exit_code", job->exit_code);
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
    json_kstr(j, "state", fmt_node_state_long(n));
    json_kstr(j, "state_code", fmt_node_state_compact(n));
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

/* ---- scontrol update ---------------------------------------------------------------- */

void fmt_node_update_free(struct fmt_node_update *u)
{
    free(u->nodes);
    free(u->state);
    free(u->reason);
    memset(u, 0, sizeof(*u));
}

static int kv_set(char **field, const char *value)
{
    char *copy = strdup(value);
    if (copy == NULL)
        return -1;
    free(*field);
    *field = copy;
    return 0;
}

int fmt_node_update_parse(int argc, char *const *argv, struct fmt_node_update *u, char *err,
                          size_t errlen)
{
    memset(u, 0, sizeof(*u));
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (eq == NULL) {
            fail(err, errlen, "invalid update argument \"%s\" (expected Key=Value)", a);
            goto fail;
        }
        size_t klen = (size_t)(eq - a);
        const char *v = eq + 1;
        int rc = 0;
        if (klen == 8 && strncasecmp(a, "NodeName", 8) == 0) {
            if (v[0] == '\0') {
                fail(err, errlen, "NodeName= needs a node name");
                goto fail;
            }
            rc = kv_set(&u->nodes, v);
        } else if (klen == 5 && strncasecmp(a, "State", 5) == 0) {
            static const char *const states[] = {"drain", "resume", "down", "idle"};
            const char *found = NULL;
            for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++)
                if (strcasecmp(v, states[k]) == 0)
                    found = states[k];
            if (found == NULL) {
                fail(err, errlen, "Invalid node state specified: %s", v);
                goto fail;
            }
            rc = kv_set(&u->state, found);
        } else if (klen == 6 && strncasecmp(a, "Reason", 6) == 0) {
            rc = kv_set(&u->reason, v);
        } else if ((klen == 5 && strncasecmp(a, "JobId", 5) == 0) ||
                   (klen == 13 && strncasecmp(a, "PartitionName", 13) == 0)) {
            fail(err, errlen,
                 "only nodes can be updated (NodeName=...); use scontrol hold/release or "
                 "scancel for jobs");
            goto fail;
        } else {
            fail(err, errlen, "Update of this parameter is not supported: %s", a);
            goto fail;
        }
        if (rc != 0) {
            fail(err, errlen, "out of memory");
            goto fail;
        }
    }
    if (u->nodes == NULL) {
        fail(err, errlen, "No valid entity in update command: NodeName= is required");
        goto fail;
    }
    if (u->state == NULL) {
        fail(err, errlen, "State= is required (DRAIN, RESUME, DOWN or IDLE)");
        goto fail;
    }
    if ((strcmp(u->state, "drain") == 0 || strcmp(u->state, "down") == 0) &&
        (u->reason == NULL || u->reason[0] == '\0')) {
        fail(err, errlen,
             "You must specify a reason when DOWNING or DRAINING a node. Request denied");
        goto fail;
    }
    return 0;
fail:
    fmt_node_update_free(u);
    return -1;
}

/* ---- scontrol create node ------------------------------------------------------------ */

void fmt_node_create_free(struct fmt_node_create *n)
{
    free(n->name);
    free(n->address);
    fmt_strv_free(n->features, n->nfeatures);
    memset(n, 0, sizeof(*n));
}

/* A decimal number with an optional K/M/G/T suffix, in MB (MB without a suffix). */
static int parse_mb(const char *s, uint64_t *mb)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    uint64_t mult = 1;
    if (*end != '\0') {
        if (end[1] != '\0')
            return -1;
        switch (toupper((unsigned char)*end)) {
        case 'K':
            *mb = v / 1024 + (v % 1024 != 0);
            return 0;
        case 'M':
            break;
        case 'G':
            mult = 1024;
            break;
        case 'T':
            mult = 1024 * 1024;
            break;
        default:
            return -1;
        }
    }
    if (v > UINT64_MAX / mult)
        return -1;
    *mb = v * mult;
    return 0;
}

int fmt_node_create_parse(int argc, char *const *argv, struct fmt_node_create *n, char *err,
                          size_t errlen)
{
    bool have_cpus = false, have_mem = false;
    memset(n, 0, sizeof(*n));
    int i = 0;
    if (argc > 0 && strcasecmp(argv[0], "node") == 0)
        i++;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (eq == NULL) {
            fail(err, errlen, "invalid argument \"%s\" (expected Key=Value)", a);
            goto fail;
        }
        size_t klen = (size_t)(eq - a);
        const char *v = eq + 1;
        if (klen == 8 && strncasecmp(a, "NodeName", 8) == 0) {
            if (v[0] == '\0' || strpbrk(v, ",[] \t") != NULL) {
                fail(err, errlen, "NodeName= needs one node name, not \"%s\"", v);
                goto fail;
            }
            if (kv_set(&n->name, v) != 0)
                goto oom;
        } else if (klen == 4 && strncasecmp(a, "CPUs", 4) == 0) {
            char *end;
            errno = 0;
            unsigned long c = strtoul(v, &end, 10);
            if (!isdigit((unsigned char)v[0]) || *end || errno || c == 0 || c > UINT32_MAX) {
                fail(err, errlen, "invalid CPUs=%s (a whole number of at least 1)", v);
                goto fail;
            }
            n->cpus = (uint32_t)c;
            have_cpus = true;
        } else if (klen == 10 && strncasecmp(a, "RealMemory", 10) == 0) {
            if (parse_mb(v, &n->mem_mb) != 0) {
                fail(err, errlen, "invalid RealMemory=%s (megabytes, or with K, M, G or T)", v);
                goto fail;
            }
            have_mem = true;
        } else if (klen == 8 && strncasecmp(a, "Features", 8) == 0) {
            fmt_strv_free(n->features, n->nfeatures);
            n->features = NULL;
            n->nfeatures = 0;
            if (fmt_split_list(v, &n->features, &n->nfeatures) != 0)
                goto oom;
        } else if (klen == 8 && strncasecmp(a, "NodeAddr", 8) == 0) {
            if (kv_set(&n->address, v) != 0)
                goto oom;
        } else {
            fail(err, errlen, "Invalid parameter for create node: %s", a);
            goto fail;
        }
    }
    if (n->name == NULL) {
        fail(err, errlen, "NodeName= is required");
        goto fail;
    }
    if (!have_cpus) {
        fail(err, errlen, "CPUs= is required");
        goto fail;
    }
    if (!have_mem) {
        fail(err, errlen, "RealMemory= is required");
        goto fail;
    }
    if (n->address == NULL && kv_set(&n->address, "") != 0)
        goto oom;
    if (n->features == NULL && (n->features = calloc(1, sizeof(char *))) == NULL)
        goto oom;
    return 0;
oom:
    fail(err, errlen, "out of memory");
fail:
    fmt_node_create_free(n);
    return -1;
}
