/*
 * fsm_deps.c - job dependencies: parsing, judging, Slurm's text, the waiters index.
 * See fsm_deps.h.
 */
#include "fsm_deps.h"

#include "fsm_jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    enum fsm_dep_type type;
} dep_types[] = {
    {"after", FSM_DEP_AFTER},
    {"afterany", FSM_DEP_AFTERANY},
    {"afterok", FSM_DEP_AFTEROK},
    {"afternotok", FSM_DEP_AFTERNOTOK},
};

static const char *type_name(uint8_t t)
{
    for (size_t i = 0; i < sizeof(dep_types) / sizeof(dep_types[0]); i++)
        if (dep_types[i].type == t)
            return dep_types[i].name;
    return "unknown";
}

bool fsm_dep_type_valid(uint32_t t)
{
    return t >= FSM_DEP_AFTER && t <= FSM_DEP_AFTERNOTOK;
}

struct fsm_job_deps *fsm_deps_new(uint32_t n)
{
    return calloc(1, sizeof(struct fsm_job_deps) + (size_t)n * sizeof(struct fsm_dep));
}

size_t fsm_deps_bytes(const struct fsm_job_deps *d)
{
    return d != NULL ? sizeof(*d) + (size_t)d->n * sizeof(d->d[0]) : 0;
}

static int parse_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int parse_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* One job id of a type's list: digits only, not 0, no array index, no +time. */
static int parse_id(const char *s, size_t len, uint64_t *id, char *err, size_t errlen)
{
    if (len == 0)
        return parse_fail(err, errlen, "a job id is missing");
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '+')
            return parse_fail(err, errlen, "after:JOBID+TIME (a delay) is not supported");
        if (s[i] == '_')
            return parse_fail(err, errlen, "array task ids (%.*s) are not supported",
                              (int)len > 32 ? 32 : (int)len, s);
        if (s[i] < '0' || s[i] > '9')
            return parse_fail(err, errlen, "\"%.*s\" is not a job id",
                              (int)len > 32 ? 32 : (int)len, s);
    }
    char buf[24];
    if (len >= sizeof(buf))
        return parse_fail(err, errlen, "job id %.24s... is too large", s);
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    unsigned long long v = strtoull(buf, NULL, 10);
    if (errno != 0 || v == 0)
        return parse_fail(err, errlen, "\"%s\" is not a job id", buf);
    *id = v;
    return 0;
}

int fsm_deps_parse(const char *text, struct fsm_job_deps **out, char *err, size_t errlen)
{
    *out = NULL;
    if (text == NULL || text[0] == '\0')
        return 0;
    size_t tlen = strlen(text);
    if (tlen > FSM_DEPS_TEXT_MAX)
        return parse_fail(err, errlen, "the dependency is %zu bytes; the limit is %d", tlen,
                          FSM_DEPS_TEXT_MAX);
    /* As in Slurm: one '?' anywhere makes the whole list "any of". */
    bool query = strchr(text, '?') != NULL;
    /* Count the ids: at most one per ':' and per separator, plus one. */
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ':' || *p == ',' || *p == '?';
    if (cap > FSM_DEPS_MAX + 1)
        cap = FSM_DEPS_MAX + 1;
    struct fsm_job_deps *d = fsm_deps_new((uint32_t)cap);
    if (d == NULL)
        return -2;
    d->any = query;
    const char *p = text;
    int rc = 0;
    while (rc == 0) {
        const char *end = strpbrk(p, ",?");
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        if (len == 0) {
            rc = parse_fail(err, errlen, "an empty item in \"%.64s\"", text);
        } else if (colon == NULL) {
            if (len == 9 && memcmp(p, "singleton", 9) == 0)
                d->singleton = true;
            else
                rc = parse_fail(err, errlen,
                                "\"%.*s\" is not a dependency (TYPE:JOBID or "
                                "singleton)",
                                (int)len > 32 ? 32 : (int)len, p);
        } else {
            size_t tl = (size_t)(colon - p);
            int type = 0;
            for (size_t i = 0; i < sizeof(dep_types) / sizeof(dep_types[0]); i++)
                if (strlen(dep_types[i].name) == tl && memcmp(dep_types[i].name, p, tl) == 0)
                    type = dep_types[i].type;
            if (type == 0) {
                rc = parse_fail(err, errlen,
                                "dependency type \"%.*s\" is not supported (after, afterany, "
                                "afterok, afternotok, singleton)",
                                (int)tl > 32 ? 32 : (int)tl, p);
                break;
            }
            const char *q = colon + 1, *stop = p + len;
            for (;;) {
                const char *c = memchr(q, ':', (size_t)(stop - q));
                size_t il = c != NULL ? (size_t)(c - q) : (size_t)(stop - q);
                uint64_t id = 0;
                if ((rc = parse_id(q, il, &id, err, errlen)) != 0)
                    break;
                bool seen = false; /* Slurm keeps a (type, job) pair once */
                for (uint32_t k = 0; k < d->n && !seen; k++)
                    seen = d->d[k].job_id == id && d->d[k].type == type;
                if (seen) {
                    if (c == NULL)
                        break;
                    q = c + 1;
                    continue;
                }
                if (d->n >= FSM_DEPS_MAX) {
                    rc = parse_fail(err, errlen, "more than %d jobs named", FSM_DEPS_MAX);
                    break;
                }
                d->d[d->n].job_id = id;
                d->d[d->n].type = (uint8_t)type;
                d->d[d->n].state = FSM_DEP_WAIT;
                d->n++;
                if (c == NULL)
                    break;
                q = c + 1;
            }
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    if (rc != 0) {
        free(d);
        return rc;
    }
    fsm_deps_combine(d);
    *out = d;
    return 0;
}

uint8_t fsm_dep_judge(const struct fsm_dep *e, const struct fsm_job *t)
{
    if (e->state != FSM_DEP_WAIT)
        return e->state;
    if (t == NULL)
        return FSM_DEP_MET; /* purged after its retention: Slurm lifts the dependency */
    bool final = fsm_job_state_final(t->state);
    switch (e->type) {
    case FSM_DEP_AFTER:
        return final || t->state != SPUR__API__JOB_STATE__JOB_PENDING ? FSM_DEP_MET : FSM_DEP_WAIT;
    case FSM_DEP_AFTERANY:
        return final ? FSM_DEP_MET : FSM_DEP_WAIT;
    case FSM_DEP_AFTEROK:
        if (!final)
            return FSM_DEP_WAIT;
        return t->state == SPUR__API__JOB_STATE__JOB_COMPLETED ? FSM_DEP_MET : FSM_DEP_FAILED;
    case FSM_DEP_AFTERNOTOK:
        if (!final)
            return FSM_DEP_WAIT;
        return t->state == SPUR__API__JOB_STATE__JOB_COMPLETED ? FSM_DEP_FAILED : FSM_DEP_MET;
    default:
        return FSM_DEP_FAILED;
    }
}

uint8_t fsm_deps_combine(struct fsm_job_deps *d)
{
    uint32_t met = 0, failed = 0;
    for (uint32_t i = 0; i < d->n; i++) {
        met += d->d[i].state == FSM_DEP_MET;
        failed += d->d[i].state == FSM_DEP_FAILED;
    }
    if (d->n == 0)
        d->state = FSM_DEP_MET;
    else if (d->any)
        d->state = met > 0 ? FSM_DEP_MET : failed == d->n ? FSM_DEP_FAILED : FSM_DEP_WAIT;
    else
        d->state = failed > 0 ? FSM_DEP_FAILED : met == d->n ? FSM_DEP_MET : FSM_DEP_WAIT;
    return d->state;
}

size_t fsm_deps_format(const struct fsm_job_deps *d, bool singleton_waits, char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = '\0';
    if (d == NULL)
        return 0;
    char sep = d->any ? '?' : ',';
    for (uint32_t i = 0; i < d->n && w + 1 < n; i++) {
        if (d->d[i].state == FSM_DEP_MET)
            continue;
        int k = snprintf(buf + w, n - w, "%s%s:%" PRIu64 "(%s)", w ? (char[]){sep, 0} : "",
                         type_name(d->d[i].type), d->d[i].job_id,
                         d->d[i].state == FSM_DEP_FAILED ? "failed" : "unfulfilled");
        if (k < 0)
            break;
        w += (size_t)k < n - w ? (size_t)k : n - w - 1;
    }
    if (d->singleton && singleton_waits && w + 1 < n) {
        int k = snprintf(buf + w, n - w, "%ssingleton(unfulfilled)", w ? "," : "");
        if (k > 0)
            w += (size_t)k < n - w ? (size_t)k : n - w - 1;
    }
    return w;
}

/* ---- the index ---------------------------------------------------------------------------- */

void fsm_dep_index_init(struct fsm_dep_index *x)
{
    memset(x, 0, sizeof(*x));
    fsm_map_init(&x->by_target);
}

void fsm_dep_index_free(struct fsm_dep_index *x)
{
    for (size_t i = 0; i < x->by_target.cap; i++)
        if (x->by_target.slots[i].key != 0)
            free(x->by_target.slots[i].val);
    fsm_map_free(&x->by_target);
    free(x->fired);
    fsm_dep_index_init(x);
}

int fsm_dep_index_add(struct fsm_dep_index *x, uint64_t target, uint64_t waiter)
{
    struct fsm_dep_waiters *w = fsm_map_get(&x->by_target, target);
    if (w != NULL && w->n > 0 && w->ids[w->n - 1] == waiter)
        return 0; /* the same job names it twice */
    if (w == NULL || w->n == w->cap) {
        uint32_t cap = w != NULL ? w->cap * 2 : 2;
        struct fsm_dep_waiters *nw = realloc(w, sizeof(*nw) + (size_t)cap * sizeof(nw->ids[0]));
        if (nw == NULL)
            return -1;
        if (w == NULL)
            nw->n = 0;
        nw->cap = cap;
        if (fsm_map_put(&x->by_target, target, nw) != 0) {
            /* The map still holds the old block, or nothing: keep it consistent. */
            if (w == NULL)
                free(nw);
            else
                fsm_map_del(&x->by_target, target), free(nw);
            return -1;
        }
        w = nw;
    }
    w->ids[w->n++] = waiter;
    return 0;
}

struct fsm_dep_waiters *fsm_dep_index_get(struct fsm_dep_index *x, uint64_t target, bool take)
{
    return take ? fsm_map_del(&x->by_target, target) : fsm_map_get(&x->by_target, target);
}

void fsm_dep_index_fire(struct fsm_dep_index *x, uint64_t id)
{
    if (x->by_target.count == 0 || fsm_map_get(&x->by_target, id) == NULL)
        return;
    if (x->nfired == x->cap_fired) {
        size_t cap = x->cap_fired ? x->cap_fired * 2 : 16;
        uint64_t *v = realloc(x->fired, cap * sizeof(*v));
        if (v == NULL) {
            x->lost = true;
            return;
        }
        x->fired = v;
        x->cap_fired = cap;
    }
    x->fired[x->nfired++] = id;
}

size_t fsm_dep_index_bytes(const struct fsm_dep_index *x)
{
    size_t b = fsm_map_bytes(&x->by_target) + x->cap_fired * sizeof(uint64_t);
    for (size_t i = 0; i < x->by_target.cap; i++) {
        const struct fsm_dep_waiters *w = x->by_target.slots[i].val;
        if (x->by_target.slots[i].key != 0 && w != NULL)
            b += sizeof(*w) + (size_t)w->cap * sizeof(w->ids[0]);
    }
    return b;
}
