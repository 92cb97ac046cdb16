/*
 * test_strv.c - string vectors (client/strv.c).
 *
 * Pinned: split drops empty words and always gives a NULL-terminated vector (also for an
 * empty or NULL list); push copies exactly len bytes and keeps the NULL; move_all appends
 * and takes the strings over; contains reads a NULL needle as "" and join a NULL entry
 * as "", and join of nothing is the "none" word.
 */
#include "check_run.h"
#include "strv.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_split)
{
    char **v;
    size_t n;
    ck_assert_int_eq(strv_split(",a,,bc,", &v, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(v[0], "a");
    ck_assert_str_eq(v[1], "bc");
    ck_assert_ptr_null(v[2]);
    strv_free(v, n);
    ck_assert_int_eq(strv_split(NULL, &v, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(v[0]);
    strv_free(v, n);
    ck_assert_int_eq(strv_split(",,", &v, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(v[0]);
    strv_free(v, n);
}
END_TEST

START_TEST(test_push_and_move)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(strv_push(&v, &n, &cap, "xyz", 2), 0);
    ck_assert_uint_eq(n, 20);
    ck_assert_str_eq(v[19], "xy");
    ck_assert_ptr_null(v[20]);

    char **words;
    size_t nw;
    ck_assert_int_eq(strv_split("p,q", &words, &nw), 0);
    ck_assert_int_eq(strv_move_all(&v, &n, words, nw), 0);
    ck_assert_uint_eq(n, 22);
    ck_assert_str_eq(v[20], "p");
    ck_assert_str_eq(v[21], "q");
    ck_assert_ptr_null(v[22]);
    ck_assert(strv_contains(v, n, "q"));
    ck_assert(!strv_contains(v, n, "r"));
    ck_assert(!strv_contains(v, n, NULL));
    char *with_empty[] = {"a", ""};
    ck_assert(strv_contains(with_empty, 2, NULL));
    strv_free(v, n);

    /* Into an empty vector; nothing to move still leaves a terminated vector. */
    v = NULL;
    n = 0;
    ck_assert_int_eq(strv_split("", &words, &nw), 0);
    ck_assert_int_eq(strv_move_all(&v, &n, words, nw), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(v[0]);
    strv_free(v, n);
}
END_TEST

START_TEST(test_join)
{
    char *none[] = {NULL};
    char *s = strv_join(none, 0, "(null)");
    ck_assert_str_eq(s, "(null)");
    free(s);
    char *three[] = {"a", NULL, "c"};
    s = strv_join(three, 3, "(null)");
    ck_assert_str_eq(s, "a,,c");
    free(s);
}
END_TEST

START_TEST(test_replace)
{
    char *field = NULL;
    ck_assert_int_eq(strv_replace(&field, "debug"), 0);
    ck_assert_str_eq(field, "debug");
    /* The old string is released and the new one is a copy, not the argument. */
    char value[] = "batch";
    ck_assert_int_eq(strv_replace(&field, value), 0);
    ck_assert_ptr_ne(field, value);
    value[0] = 'x';
    ck_assert_str_eq(field, "batch");
    ck_assert_int_eq(strv_replace(&field, ""), 0);
    ck_assert_str_eq(field, "");
    free(field);
}
END_TEST

static Suite *strv_suite(void)
{
    Suite *s = suite_create("strv");
    check_case(s, "strv",
               (const TTest *[]){test_split, test_push_and_move, test_join, test_replace, NULL});
    return s;
}

int main(void)
{
    return check_run(strv_suite());
}
