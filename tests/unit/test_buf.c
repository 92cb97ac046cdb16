/*
 * test_buf.c - the growable buffer (common/buf.c).
 *
 * Pinned: appends and printf grow the buffer past its first allocation and keep it
 * NUL-terminated; reset keeps the memory; an allocation failure is remembered and turns
 * later appends into no-ops; buf_take hands the string over ("" when empty, NULL after a
 * failure) and leaves the buffer empty and reusable; buf_commit takes bytes written in
 * place into the length and refuses more than was reserved; a request whose size would wrap a
 * size_t (or whose doubling would) fails instead of looping or allocating too little.
 */
#include "buf.h"
#include "check_run.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The out-of-memory test asks for an impossible size; under ASan that must fail softly. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

START_TEST(test_append_and_grow)
{
    struct buf b;
    buf_init(&b);
    ck_assert_uint_eq(b.len, 0);
    for (int i = 0; i < 1000; i++)
        buf_append(&b, "ab", 2);
    buf_puts(&b, "!");
    ck_assert_uint_eq(b.len, 2001);
    ck_assert(b.cap > b.len);
    ck_assert_int_eq(b.p[b.len], '\0');
    ck_assert_int_eq(memcmp(b.p, "abab", 4), 0);
    ck_assert_int_eq(b.p[2000], '!');
    ck_assert(!b.oom);
    buf_free(&b);
    ck_assert_ptr_null(b.p);
    ck_assert_uint_eq(b.len, 0);
}
END_TEST

START_TEST(test_printf_long)
{
    struct buf b;
    buf_init(&b);
    buf_printf(&b, "%d-%s", 42, "x");
    ck_assert_str_eq(b.p, "42-x");
    /* Longer than the first reserve: the second vsnprintf pass must complete it. */
    char big[1000];
    memset(big, 'y', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    buf_printf(&b, "[%s]", big);
    ck_assert_uint_eq(b.len, 4 + 2 + 999);
    ck_assert_int_eq(b.p[4], '[');
    ck_assert_int_eq(b.p[b.len - 1], ']');
    ck_assert_uint_eq(strlen(b.p), b.len);
    buf_reset(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_ptr_nonnull(b.p);
    buf_puts(&b, "z");
    ck_assert_str_eq(b.p, "z");
    buf_free(&b);
}
END_TEST

START_TEST(test_take)
{
    struct buf b;
    buf_init(&b);
    char *s = buf_take(&b);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, "");
    free(s);

    buf_puts(&b, "hello ");
    buf_printf(&b, "%u", 7u);
    s = buf_take(&b);
    ck_assert_str_eq(s, "hello 7");
    ck_assert_ptr_null(b.p);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
    /* The buffer is reusable and no longer shares memory with the string taken. */
    buf_puts(&b, "again");
    ck_assert_ptr_ne(b.p, s);
    ck_assert_str_eq(s, "hello 7");
    char *t = buf_take(&b);
    ck_assert_str_eq(t, "again");
    free(s);
    free(t);
}
END_TEST

START_TEST(test_oom_is_sticky)
{
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "kept");
    ck_assert(!buf_reserve(&b, SIZE_MAX / 2));
    ck_assert(b.oom);
    buf_puts(&b, "lost");
    buf_printf(&b, "%d", 1);
    ck_assert_uint_eq(b.len, 4);
    ck_assert(!buf_reserve(&b, 1));
    /* A failed build hands nothing over and leaves the buffer clean. */
    ck_assert_ptr_null(buf_take(&b));
    ck_assert(!b.oom);
    ck_assert_ptr_null(b.p);
    buf_puts(&b, "ok");
    char *s = buf_take(&b);
    ck_assert_str_eq(s, "ok");
    free(s);

    /* A size that does not fit in a size_t is refused, not wrapped around. */
    buf_puts(&b, "x");
    ck_assert(!buf_reserve(&b, SIZE_MAX));
    ck_assert(b.oom);
    buf_free(&b);
}
END_TEST

START_TEST(test_commit_in_place)
{
    struct buf b;
    buf_init(&b);
    buf_puts(&b, "ab");
    ck_assert(buf_reserve(&b, 10));
    size_t room = b.cap - b.len - 1;
    ck_assert(room >= 10);
    memcpy(b.p + b.len, "cdefXXXX", 8);
    buf_commit(&b, 4);
    ck_assert_uint_eq(b.len, 6);
    ck_assert_str_eq(b.p, "abcdef");
    /* More than was reserved is refused, not written past the end. */
    size_t before = b.len;
    buf_commit(&b, b.cap);
    ck_assert_uint_eq(b.len, before);
    ck_assert_str_eq(b.p, "abcdef");
    char *s = buf_take(&b);
    ck_assert_str_eq(s, "abcdef");
    free(s);
    /* Nothing reserved yet: nothing to commit. */
    buf_commit(&b, 1);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_ptr_null(b.p);
}
END_TEST

static Suite *buf_suite(void)
{
    Suite *s = suite_create("buf");
    check_case(s, "buf",
               (const TTest *[]){test_append_and_grow, test_printf_long, test_take,
                                 test_oom_is_sticky, test_commit_in_place, NULL});
    return s;
}

int main(void)
{
    return check_run(buf_suite());
}
