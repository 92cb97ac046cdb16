/*
 * test_util.c - the shared helpers of common/util.c.
 *
 * Pinned: jitter_rand() is xorshift64* (the values below are the published recurrence
 * worked by hand from the seed), advances its state, repeats for the same seed, and
 * starts a zero state from its fixed constant instead of sticking at zero.
 */
#include "check_run.h"
#include "util.h"

#include <check.h>
#include <stdint.h>

START_TEST(test_jitter_rand_sequence)
{
    static const struct {
        uint64_t seed;
        uint64_t want[3];
        uint64_t state_after;
    } t[] = {
        {1,
         {0x47e4ce4b896cdd1dull, 0xabcfa6a8e079651dull, 0xb9d10d8feb731f57ull},
         0x000d004003202803ull},
        /* zero: the constant 0x9e3779b97f4a7c15 stands in for it */
        {0,
         {0x0d83b3e29a21487aull, 0x54c44c79f1fe9d67ull, 0xa845f342007a0e78ull},
         0x44da53dec8eb16d8ull},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        uint64_t s = t[i].seed;
        for (size_t k = 0; k < 3; k++)
            ck_assert_uint_eq(jitter_rand(&s), t[i].want[k]);
        ck_assert_uint_eq(s, t[i].state_after);
    }
}
END_TEST

START_TEST(test_jitter_rand_repeats_per_seed)
{
    uint64_t a = 0x1234567, b = 0x1234567, c = 0x1234568;
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = jitter_rand(&a);
        ck_assert_uint_eq(x, jitter_rand(&b));
        differ += x != jitter_rand(&c);
        ck_assert_uint_ne(a, 0);
    }
    ck_assert_int_eq(differ, 100);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("util");
    check_case(
        s, "jitter_rand",
        (const TTest *[]){test_jitter_rand_sequence, test_jitter_rand_repeats_per_seed, NULL});
    return check_run(s);
}
