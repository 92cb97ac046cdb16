/*
 * json.h - a minimal streaming JSON writer for the CLI's --json output.
 *
 * The writer tracks nesting and commas; the caller emits keys and values in order.
 * Strings are escaped per RFC 8259 (control characters as \u00XX); bytes that are not
 * valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF) are
 * written as U+FFFD so the output always parses. A container opened deeper than
 * JSON_MAX_DEPTH - 1 levels is written as null and everything inside it is dropped, so
 * even a caller that nests too deep gets a document that parses.
 */
#ifndef SPUR_JSON_H
#define SPUR_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

struct json {
    FILE *out;
    int depth;
    bool first[JSON_MAX_DEPTH]; /* no element written yet at this level */
    bool after_key;
    int skip; /* containers open past the depth limit; their contents are dropped */
};

void json_init(struct json *j, FILE *out);
void json_obj_begin(struct json *j);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j);
void json_arr_end(struct json *j);
void json_key(struct json *j, const char *key);
void json_str(struct json *j, const char *s);
void json_strn(struct json *j, const char *s, size_t n);
void json_u64(struct json *j, uint64_t v);
void json_i64(struct json *j, int64_t v);
void json_bool(struct json *j, bool v);
void json_null(struct json *j);
/* key + value shorthands */
void json_kstr(struct json *j, const char *key, const char *s);
void json_ku64(struct json *j, const char *key, uint64_t v);
void json_ki64(struct json *j, const char *key, int64_t v);
void json_kbool(struct json *j, const char *key, bool v);
/* Finish the document with a newline. */
void json_end(struct json *j);

#endif
