/*
 * strv.c - string vectors; see strv.h.
 */
#include "strv.h"

#include "buf.h"

#include <stdlib.h>
#include <string.h>

static const char *str(const char *s)
{
    return s ? s : "";
}

void strv_free(char **v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int strv_push(char ***v, size_t *n, size_t *cap, const char *s, size_t len)
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

int strv_split(const char *list, char ***out, size_t *n)
{
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    const char *p = str(list);
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len > 0 && strv_push(&v, &cnt, &cap, p, len) != 0) {
            strv_free(v, cnt);
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

int strv_move_all(char ***v, size_t *n, char **words, size_t nw)
{
    char **nv = realloc(*v, (*n + nw + 1) * sizeof(char *));
    if (nv == NULL) {
        strv_free(words, nw);
        return -1;
    }
    memcpy(nv + *n, words, nw * sizeof(char *));
    *n += nw;
    nv[*n] = NULL;
    *v = nv;
    free(words);
    return 0;
}

bool strv_contains(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], str(s)) == 0)
            return true;
    return false;
}

char *strv_join(char *const *v, size_t n, const char *none)
{
    if (n == 0)
        return strdup(none);
    struct buf b;
    buf_init(&b);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            buf_puts(&b, ",");
        buf_puts(&b, str(v[i]));
    }
    return buf_take(&b);
}

int strv_replace(char **field, const char *value)
{
    char *copy = strdup(value);
    if (copy == NULL)
        return -1;
    free(*field);
    *field = copy;
    return 0;
}
