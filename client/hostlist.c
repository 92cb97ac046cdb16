/*
 * hostlist.c - host list compression and expansion; see hostlist.h.
 */
#include "hostlist.h"

#include "buf.h"
#include "errmsg.h"
#include "strv.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const char *s)
{
    return s ? s : "";
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

char *hostlist_compress_ordered(char *const *names, size_t n)
{
    struct buf b;
    buf_init(&b);
    for (size_t i = 0; i < n;) {
        struct host first, next;
        host_split(&first, str(names[i]));
        size_t end = i + 1;
        while (end < n) {
            host_split(&next, str(names[end]));
            if (!same_prefix(&first, &next))
                break;
            end++;
        }
        char *run = hostlist_compress(names + i, end - i);
        if (run == NULL) {
            buf_free(&b);
            return NULL;
        }
        if (b.len > 0)
            buf_puts(&b, ",");
        buf_puts(&b, run);
        free(run);
        i = end;
    }
    if (b.len == 0) {
        buf_free(&b);
        return strdup("");
    }
    return buf_take(&b);
}

char *hostlist_compress(char *const *names, size_t n)
{
    struct host *h = calloc(n ? n : 1, sizeof(*h));
    struct buf b;
    if (h == NULL)
        return NULL;
    buf_init(&b);
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
        if (b.len > 0)
            buf_puts(&b, ",");
        if (!h[i].numbered) {
            buf_puts(&b, h[i].name);
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
        buf_append(&b, h[i].name, h[i].plen);
        if (distinct == 1) {
            buf_printf(&b, "%0*" PRIu64, h[i].pad, h[i].value);
            i = end;
            continue;
        }
        buf_puts(&b, "[");
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
                buf_puts(&b, ",");
            first = false;
            if (lo == hi)
                buf_printf(&b, "%0*" PRIu64, h[i].pad, lo);
            else
                buf_printf(&b, "%0*" PRIu64 "-%0*" PRIu64, h[i].pad, lo, h[i].pad, hi);
            k = m;
        }
        buf_puts(&b, "]");
        i = end;
    }
    free(h);
    return buf_take(&b);
}

int hostlist_expand(const char *expr, char ***out, size_t *n, char *err, size_t errlen)
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
            if (cnt >= HOSTLIST_MAX)
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
                if (hi - lo >= HOSTLIST_MAX || cnt + (hi - lo) >= HOSTLIST_MAX)
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
    strv_free(v, cnt);
    return errmsg_set(err, errlen, "invalid host list \"%s\"", str(expr));
toomany:
    strv_free(v, cnt);
    return errmsg_set(err, errlen, "host list \"%s\" expands to more than %d names", str(expr),
                      HOSTLIST_MAX);
oom:
    strv_free(v, cnt);
    return errmsg_set(err, errlen, "out of memory");
}
