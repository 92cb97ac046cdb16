/*
 * test_crc32c.c - CRC-32C against published check values, chaining, and the hardware path
 * against the table path on every alignment.
 */
#include "check_run.h"
#include "crc32c.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_known_values)
{
    uint8_t buf[32];

    ck_assert_uint_eq(crc32c_update(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(crc32c_update_sw(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(crc32c_update(0, "", 0), 0);
    /* RFC 3720 (iSCSI) appendix B.4 test vectors. */
    memset(buf, 0, sizeof(buf));
    ck_assert_uint_eq(crc32c_update(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof(buf));
    ck_assert_uint_eq(crc32c_update(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    ck_assert_uint_eq(crc32c_update(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    ck_assert_uint_eq(crc32c_update(0, buf, 32), 0x113FDB5Cu);
}
END_TEST

START_TEST(test_chaining)
{
    uint8_t buf[300];
    uint32_t whole;

    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    whole = crc32c_update(0, buf, sizeof(buf));
    for (size_t cut = 0; cut <= sizeof(buf); cut++) {
        uint32_t c = crc32c_update(0, buf, cut);
        ck_assert_uint_eq(crc32c_update(c, buf + cut, sizeof(buf) - cut), whole);
        c = crc32c_update_sw(0, buf, cut);
        ck_assert_uint_eq(crc32c_update_sw(c, buf + cut, sizeof(buf) - cut), whole);
    }
}
END_TEST

START_TEST(test_hw_matches_sw)
{
    uint8_t *buf = malloc(4096 + 16);

    srand(42);
    for (size_t i = 0; i < 4096 + 16; i++)
        buf[i] = (uint8_t)rand();
    for (size_t align = 0; align < 16; align++)
        for (size_t len = 0; len < 1100; len += (len < 70 ? 1 : 37))
            ck_assert_uint_eq(crc32c_update(0x1234, buf + align, len),
                              crc32c_update_sw(0x1234, buf + align, len));
    ck_assert_uint_eq(crc32c_update(0, buf, 4096), crc32c_update_sw(0, buf, 4096));
    free(buf);
}
END_TEST

START_TEST(test_seed_changes_result)
{
    ck_assert_uint_ne(crc32c_update(1, "abc", 3), crc32c_update(2, "abc", 3));
    ck_assert_int_ge(crc32c_hw_available(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("crc32c");
    check_case(s, "crc32c",
               (const TTest *[]){test_known_values, test_chaining, test_hw_matches_sw,
                                 test_seed_changes_result, NULL});
    return check_run(s);
}
