/*
 * table.c - format specs, cells and widths; see table.h.
 */
#include "table.h"

#include "buf.h"
#include "errmsg.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const char *s)
{
    return s ? s : "";
}

void table_spec_free(struct table_spec *spec)
{
    for (size_t i = 0; i < spec->n; i++)
        free(spec->fields[i].text);
    free(spec->fields);
    spec->fields = NULL;
    spec->n = 0;
}

static struct table_field *spec_add(struct table_spec *spec)
{
    struct table_field *nf = realloc(spec->fields, (spec->n + 1) * sizeof(*nf));
    if (nf == NULL)
        return NULL;
    spec->fields = nf;
    struct table_field *f = &nf[spec->n++];
    memset(f, 0, sizeof(*f));
    f->width = -1;
    return f;
}

/* The literal text gathered so far becomes a field of its own. Returns 0 or -1 (oom). */
static int add_text(struct table_spec *spec, struct buf *lit)
{
    if (lit->oom)
        return -1;
    if (lit->len == 0)
        return 0;
    struct table_field *t = spec_add(spec);
    if (t == NULL)
        return -1;
    t->text = buf_take(lit);
    return 0;
}

static const struct table_def *find_def(const struct table_def *defs, size_t ndefs, char type)
{
    for (size_t i = 0; i < ndefs; i++)
        if (defs[i].type == type)
            return &defs[i];
    return NULL;
}

const struct table_def *table_spec_def(const struct table_spec *spec, size_t c)
{
    char type = spec->fields[c].type;
    return type == 0 ? NULL : find_def(spec->defs, spec->ndefs, type);
}

int table_spec_parse(const char *format, const struct table_def *defs, size_t ndefs,
                     struct table_spec *spec, char *err, size_t errlen)
{
    return table_spec_parse_lenient(format, defs, ndefs, NULL, NULL, spec, err, errlen);
}

int table_spec_parse_lenient(const char *format, const struct table_def *defs, size_t ndefs,
                             table_unknown_fn unknown, void *arg, struct table_spec *spec,
                             char *err, size_t errlen)
{
    memset(spec, 0, sizeof(*spec));
    spec->defs = defs;
    spec->ndefs = ndefs;
    struct buf lit;
    buf_init(&lit);
    const char *p = str(format);
    if (*p == '\0')
        return errmsg_set(err, errlen, "empty format");
    while (*p) {
        if (*p != '%') {
            buf_append(&lit, p++, 1);
            continue;
        }
        if (p[1] == '%') {
            buf_puts(&lit, "%");
            p += 2;
            continue;
        }
        const char *start = p++;
        struct table_field f = {.width = -1};
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
                buf_free(&lit);
                table_spec_free(spec);
                return errmsg_set(err, errlen, "field width too large in \"%s\"", format);
            }
            f.width = (int)w;
        }
        if (*p != '\0' && find_def(defs, ndefs, *p) == NULL && unknown != NULL &&
            isalpha((unsigned char)*p)) {
            unknown(arg, *p);
            buf_append(&lit, start, (size_t)(p + 1 - start));
            p++;
            continue;
        }
        if (*p == '\0' || find_def(defs, ndefs, *p) == NULL) {
            int shown = *p ? (int)(p - start + 1) : (int)(p - start);
            buf_free(&lit);
            table_spec_free(spec);
            if (*p == '\0')
                return errmsg_set(err, errlen, "format ends inside the field \"%.*s\"", shown,
                                  start);
            return errmsg_set(err, errlen, "invalid field \"%.*s\" in format \"%s\"", shown, start,
                              format);
        }
        f.type = *p++;
        if (add_text(spec, &lit) != 0)
            goto oom;
        struct table_field *nf = spec_add(spec);
        if (nf == NULL)
            goto oom;
        *nf = f;
    }
    if (add_text(spec, &lit) != 0)
        goto oom;
    return 0;
oom:
    buf_free(&lit);
    table_spec_free(spec);
    return errmsg_set(err, errlen, "out of memory");
}

void table_init(struct table *t, const struct table_spec *spec)
{
    memset(t, 0, sizeof(*t));
    t->ncols = spec->n;
}

char **table_add_row(struct table *t)
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

void table_free(struct table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
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

static void put_cell(FILE *out, const struct table_field *f, int width, const char *s)
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

void table_print(FILE *out, const struct table_spec *spec, const struct table *t)
{
    int *w = calloc(spec->n ? spec->n : 1, sizeof(int));
    if (w == NULL)
        return;
    for (size_t c = 0; c < spec->n; c++) {
        const struct table_field *f = &spec->fields[c];
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
            const struct table_field *f = &spec->fields[c];
            if (f->type == 0)
                fputs(f->text, out);
            else
                put_cell(out, f, w[c], str(t->cells[r * t->ncols + c]));
        }
        fputc('\n', out);
    }
    free(w);
}

int table_add_header(struct table *t, const struct table_spec *spec)
{
    char **row = table_add_row(t);
    if (row == NULL)
        return -1;
    for (size_t c = 0; c < spec->n; c++) {
        const struct table_def *d = table_spec_def(spec, c);
        if (d != NULL)
            row[c] = strdup(d->header);
    }
    return 0;
}
