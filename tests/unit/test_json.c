/*
 * test_json.c - the CLI's streaming JSON writer (client/json.c).
 *
 * Pinned here: commas and nesting of objects and arrays (empty ones too, keys before
 * containers); RFC 8259 string escaping (quote, backslash, named escapes, every other
 * control character and DEL as \u00XX, '/' left alone); valid UTF-8 of every length
 * passed through; invalid UTF-8 (stray continuation bytes, truncated sequences, overlong
 * forms, surrogates, code points past U+10FFFF, bytes that never occur) written as
 * U+FFFD, one per bad byte; embedded NUL bytes; numbers at their extremes; null for a
 * NULL string; and containers nested past JSON_MAX_DEPTH written as null so the document
 * still parses.
 *
 * Every expected output is a literal string, so the tests do not share the writer's view
 * of JSON.
 */
#include "check_run.h"
#include "json.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cap {
    char *buf;
    size_t len;
    FILE *f;
    struct json j;
};

static void cap_open(struct cap *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    ck_assert_ptr_nonnull(c->f);
    json_init(&c->j, c->f);
}

/* Close the stream and return the text (owned by c). */
static const char *cap_text(struct cap *c)
{
    fclose(c->f);
    return c->buf;
}

static void cap_free(struct cap *c)
{
    free(c->buf);
}

/* The JSON text of one string written with json_strn(). */
static char *quoted(const char *s, size_t n)
{
    struct cap c;
    cap_open(&c);
    json_strn(&c.j, s, n);
    cap_text(&c);
    return c.buf;
}

#define ASSERT_QUOTED(in, len, want)                                                               \
    do {                                                                                           \
        char *got_ = quoted((in), (len));                                                          \
        ck_assert_str_eq(got_, (want));                                                            \
        free(got_);                                                                                \
    } while (0)

START_TEST(test_object_and_array_commas)
{
    struct cap c;
    cap_open(&c);
    json_obj_begin(&c.j);
    json_ku64(&c.j, "a", 1);
    json_key(&c.j, "b");
    json_arr_begin(&c.j);
    json_u64(&c.j, 1);
    json_u64(&c.j, 2);
    json_obj_begin(&c.j);
    json_kbool(&c.j, "c", true);
    json_kbool(&c.j, "d", false);
    json_obj_end(&c.j);
    json_arr_end(&c.j);
    json_key(&c.j, "e");
    json_null(&c.j);
    json_kstr(&c.j, "f", "x");
    json_obj_end(&c.j);
    json_end(&c.j);
    ck_assert_str_eq(cap_text(&c), "{\"a\":1,\"b\":[1,2,{\"c\":true,\"d\":false}],\"e\":null,"
                                   "\"f\":\"x\"}\n");
    cap_free(&c);
}
END_TEST

START_TEST(test_empty_containers)
{
    struct cap c;
    cap_open(&c);
    json_arr_begin(&c.j);
    json_arr_begin(&c.j);
    json_arr_end(&c.j);
    json_obj_begin(&c.j);
    json_obj_end(&c.j);
    json_arr_begin(&c.j);
    json_arr_begin(&c.j);
    json_arr_end(&c.j);
    json_arr_end(&c.j);
    json_obj_begin(&c.j);
    json_key(&c.j, "k");
    json_arr_begin(&c.j);
    json_arr_end(&c.j);
    json_key(&c.j, "o");
    json_obj_begin(&c.j);
    json_obj_end(&c.j);
    json_obj_end(&c.j);
    json_arr_end(&c.j);
    ck_assert_str_eq(cap_text(&c), "[[],{},[[]],{\"k\":[],\"o\":{}}]");
    cap_free(&c);
}
END_TEST

START_TEST(test_escapes)
{
    ASSERT_QUOTED("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
    ASSERT_QUOTED("\n\t\r", 3, "\"\\n\\t\\r\"");
    ASSERT_QUOTED("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"");
    ASSERT_QUOTED("\b\f", 2, "\"\\u0008\\u000c\"");
    ASSERT_QUOTED("a/b", 3, "\"a/b\"");
    ASSERT_QUOTED("", 0, "\"\"");
    /* An embedded NUL is data, not the end of the string. */
    ASSERT_QUOTED("a\0b", 3, "\"a\\u0000b\"");
}
END_TEST

START_TEST(test_every_control_character)
{
    for (int ch = 0; ch < 0x20; ch++) {
        char in[1] = {(char)ch};
        char want[16];
        if (ch == '\n')
            strcpy(want, "\"\\n\"");
        else if (ch == '\t')
            strcpy(want, "\"\\t\"");
        else if (ch == '\r')
            strcpy(want, "\"\\r\"");
        else
            snprintf(want, sizeof(want), "\"\\u%04x\"", ch);
        ASSERT_QUOTED(in, 1, want);
    }
}
END_TEST

START_TEST(test_valid_utf8)
{
    ASSERT_QUOTED("\xc3\xa9", 2, "\"\xc3\xa9\"");                 /* é U+00E9 */
    ASSERT_QUOTED("\xc2\x80", 2, "\"\xc2\x80\"");                 /* U+0080, smallest 2-byte */
    ASSERT_QUOTED("\xe2\x82\xac", 3, "\"\xe2\x82\xac\"");         /* € U+20AC */
    ASSERT_QUOTED("\xe0\xa0\x80", 3, "\"\xe0\xa0\x80\"");         /* U+0800 */
    ASSERT_QUOTED("\xed\x9f\xbf", 3, "\"\xed\x9f\xbf\"");         /* U+D7FF, below surrogates */
    ASSERT_QUOTED("\xee\x80\x80", 3, "\"\xee\x80\x80\"");         /* U+E000 */
    ASSERT_QUOTED("\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\""); /* U+1F600 */
    ASSERT_QUOTED("\xf4\x8f\xbf\xbf", 4, "\"\xf4\x8f\xbf\xbf\""); /* U+10FFFF */
}
END_TEST

static const struct {
    const char *in;
    size_t len;
    const char *want;
} bad_utf8[] = {
    {"\x80", 1, "\"\\ufffd\""}, /* stray continuation */
    {"a\xbf"
     "b",
     3, "\"a\\ufffdb\""},                                        /* stray continuation inside */
    {"\xc3", 1, "\"\\ufffd\""},                                  /* truncated at the end */
    {"\xc3(", 2, "\"\\ufffd(\""},                                /* lead then ASCII */
    {"\xc0\xaf", 2, "\"\\ufffd\\ufffd\""},                       /* overlong '/' */
    {"\xc1\xbf", 2, "\"\\ufffd\\ufffd\""},                       /* overlong */
    {"\xe0\x80\xaf", 3, "\"\\ufffd\\ufffd\\ufffd\""},            /* overlong 3-byte */
    {"\xe0\x9f\xbf", 3, "\"\\ufffd\\ufffd\\ufffd\""},            /* overlong 3-byte, top */
    {"\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""},            /* surrogate U+D800 */
    {"\xed\xbf\xbf", 3, "\"\\ufffd\\ufffd\\ufffd\""},            /* surrogate U+DFFF */
    {"\xe2\x82", 2, "\"\\ufffd\\ufffd\""},                       /* truncated 3-byte */
    {"\xf0\x80\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* overlong 4-byte */
    {"\xf0\x8f\xbf\xbf", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* overlong 4-byte, top */
    {"\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* U+110000 */
    {"\xf5\x80\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* lead never valid */
    {"\xff", 1, "\"\\ufffd\""},
    {"\xfe", 1, "\"\\ufffd\""},
    {"\xf0\x9f\x98", 3, "\"\\ufffd\\ufffd\\ufffd\""}, /* truncated 4-byte */
    {"\xe2(\xac", 3, "\"\\ufffd(\\ufffd\""},          /* broken in the middle */
};

START_TEST(test_invalid_utf8)
{
    ASSERT_QUOTED(bad_utf8[_i].in, bad_utf8[_i].len, bad_utf8[_i].want);
}
END_TEST

START_TEST(test_numbers_and_null)
{
    struct cap c;
    cap_open(&c);
    json_arr_begin(&c.j);
    json_u64(&c.j, 0);
    json_u64(&c.j, UINT64_MAX);
    json_i64(&c.j, INT64_MIN);
    json_i64(&c.j, -1);
    json_str(&c.j, NULL);
    json_bool(&c.j, false);
    json_arr_end(&c.j);
    ck_assert_str_eq(cap_text(&c), "[0,18446744073709551615,-9223372036854775808,-1,null,false]");
    cap_free(&c);
}
END_TEST

START_TEST(test_keys_are_escaped)
{
    struct cap c;
    cap_open(&c);
    json_obj_begin(&c.j);
    json_ki64(&c.j, "a\"b", -5);
    json_kstr(&c.j, "\n", "\xff");
    json_obj_end(&c.j);
    ck_assert_str_eq(cap_text(&c), "{\"a\\\"b\":-5,\"\\n\":\"\\ufffd\"}");
    cap_free(&c);
}
END_TEST

START_TEST(test_nesting_at_the_limit)
{
    /* JSON_MAX_DEPTH - 1 nested arrays are written as they are. */
    struct cap c;
    cap_open(&c);
    for (int i = 0; i < JSON_MAX_DEPTH - 1; i++)
        json_arr_begin(&c.j);
    json_u64(&c.j, 7);
    for (int i = 0; i < JSON_MAX_DEPTH - 1; i++)
        json_arr_end(&c.j);
    char want[256] = "";
    for (int i = 0; i < JSON_MAX_DEPTH - 1; i++)
        strcat(want, "[");
    strcat(want, "7");
    for (int i = 0; i < JSON_MAX_DEPTH - 1; i++)
        strcat(want, "]");
    ck_assert_str_eq(cap_text(&c), want);
    cap_free(&c);
}
END_TEST

START_TEST(test_nesting_past_the_limit)
{
    /*
     * [ {"deep": <too deep>, "after": 1}, 2 ] with the too-deep part many levels past the
     * limit: it becomes null, and the levels outside it keep their commas.
     */
    struct cap c;
    cap_open(&c);
    int outer = JSON_MAX_DEPTH - 2; /* arrays around the object */
    for (int i = 0; i < outer; i++)
        json_arr_begin(&c.j);
    json_obj_begin(&c.j); /* depth JSON_MAX_DEPTH - 1: the deepest allowed */
    json_key(&c.j, "deep");
    for (int i = 0; i < 10; i++) {
        json_arr_begin(&c.j);
        json_u64(&c.j, (uint64_t)i);
        json_kstr(&c.j, "x", "y");
    }
    for (int i = 0; i < 10; i++)
        json_arr_end(&c.j);
    json_ku64(&c.j, "after", 1);
    json_obj_end(&c.j);
    json_u64(&c.j, 2);
    for (int i = 0; i < outer; i++)
        json_arr_end(&c.j);
    char want[512] = "";
    for (int i = 0; i < outer; i++)
        strcat(want, "[");
    strcat(want, "{\"deep\":null,\"after\":1},2");
    for (int i = 0; i < outer; i++)
        strcat(want, "]");
    ck_assert_str_eq(cap_text(&c), want);
    cap_free(&c);
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc =
        check_case(s, "writer",
                   (const TTest *[]){test_object_and_array_commas, test_empty_containers,
                                     test_escapes, test_every_control_character, test_valid_utf8,
                                     test_numbers_and_null, test_keys_are_escaped,
                                     test_nesting_at_the_limit, test_nesting_past_the_limit, NULL});
    tcase_add_loop_test(tc, test_invalid_utf8, 0, (int)(sizeof(bad_utf8) / sizeof(bad_utf8[0])));
    return s;
}

int main(void)
{
    return check_run(json_suite());
}
