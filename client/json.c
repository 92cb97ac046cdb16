/*
 * json.c - streaming JSON writer; see json.h.
 */
#include "json.h"

#include <string.h>

void json_init(struct json *j, FILE *out)
{
    memset(j, 0, sizeof(*j));
    j->out = out;
    j->first[0] = true;
}

static void sep(struct json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth])
        fputc(',', j->out);
    j->first[j->depth] = false;
}

static void open_level(struct json *j, char c)
{
    if (j->skip > 0) {
        j->skip++;
        return;
    }
    sep(j);
    if (j->depth + 1 >= JSON_MAX_DEPTH) {
        fputs("null", j->out);
        j->skip = 1;
        return;
    }
    fputc(c, j->out);
    j->depth++;
    j->first[j->depth] = true;
}

static void close_level(struct json *j, char c)
{
    if (j->skip > 0) {
        j->skip--;
        return;
    }
    fputc(c, j->out);
    if (j->depth > 0)
        j->depth--;
}

void json_obj_begin(struct json *j)
{
    open_level(j, '{');
}

void json_obj_end(struct json *j)
{
    close_level(j, '}');
}

void json_arr_begin(struct json *j)
{
    open_level(j, '[');
}

void json_arr_end(struct json *j)
{
    close_level(j, ']');
}

/*
 * Length of the valid UTF-8 sequence at s (1-4), or 0 when invalid. The second byte's
 * range is narrower after E0 (no overlong 3-byte forms), ED (no UTF-16 surrogates), F0
 * (no overlong 4-byte forms) and F4 (nothing past U+10FFFF), per RFC 3629's table.
 */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xbf;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (len > n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

void json_strn(struct json *j, const char *s, size_t n)
{
    if (j->skip > 0)
        return;
    const unsigned char *p = (const unsigned char *)s;
    sep(j);
    fputc('"', j->out);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            fputc('\\', j->out);
            fputc(c, j->out);
            i++;
        } else if (c == '\n') {
            fputs("\\n", j->out);
            i++;
        } else if (c == '\t') {
            fputs("\\t", j->out);
            i++;
        } else if (c == '\r') {
            fputs("\\r", j->out);
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(j->out, "\\u%04x", c);
            i++;
        } else {
            size_t k = utf8_len(p + i, n - i);
            if (k == 0) {
                fputs("\\ufffd", j->out);
                i++;
            } else {
                fwrite(p + i, 1, k, j->out);
                i += k;
            }
        }
    }
    fputc('"', j->out);
}

void json_str(struct json *j, const char *s)
{
    if (s == NULL) {
        json_null(j);
        return;
    }
    json_strn(j, s, strlen(s));
}

void json_key(struct json *j, const char *key)
{
    if (j->skip > 0)
        return;
    json_str(j, key);
    fputc(':', j->out);
    j->after_key = true;
}

void json_u64(struct json *j, uint64_t v)
{
    if (j->skip > 0)
        return;
    sep(j);
    fprintf(j->out, "%llu", (unsigned long long)v);
}

void json_i64(struct json *j, int64_t v)
{
    if (j->skip > 0)
        return;
    sep(j);
    fprintf(j->out, "%lld", (long long)v);
}

void json_bool(struct json *j, bool v)
{
    if (j->skip > 0)
        return;
    sep(j);
    fputs(v ? "true" : "false", j->out);
}

void json_null(struct json *j)
{
    if (j->skip > 0)
        return;
    sep(j);
    fputs("null", j->out);
}

void json_kstr(struct json *j, const char *key, const char *s)
{
    json_key(j, key);
    json_str(j, s);
}

void json_ku64(struct json *j, const char *key, uint64_t v)
{
    json_key(j, key);
    json_u64(j, v);
}

void json_ki64(struct json *j, const char *key, int64_t v)
{
    json_key(j, key);
    json_i64(j, v);
}

void json_kbool(struct json *j, const char *key, bool v)
{
    json_key(j, key);
    json_bool(j, v);
}

void json_end(struct json *j)
{
    fputc('\n', j->out);
}
