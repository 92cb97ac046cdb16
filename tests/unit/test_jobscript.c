/*
 * test_jobscript.c - the batch script rule (common/jobscript.c).
 *
 * Pinned here: each part of the rule with the exact message the server and sbatch print
 * (Slurm's words where Slurm has them), the order of the checks (an empty script is
 * "empty", not "no #!"), what passes (the shortest "#!", a lone \r, a script of any
 * size), and that a small or zero-sized error buffer is never overrun.
 */
#include "check_run.h"
#include "jobscript.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define NO_SHEBANG                                                                                 \
    "This does not look like a batch script. The first line must start with #! followed by "       \
    "the path to an interpreter. For instance: #!/bin/sh"

struct refusal {
    const char *script;
    size_t len; /* 0: strlen */
    const char *msg;
};

static const struct refusal refusals[] = {
    {"", 0, "Batch script is empty!"},
    {" \n\t\v\f\r\n", 0, "Batch script contains only whitespace!"},
    {"echo hello\n", 0, NO_SHEBANG},
    {"\n#!/bin/sh\necho\n", 0, NO_SHEBANG}, /* #! must be the very first two bytes */
    {" #!/bin/sh\necho\n", 0, NO_SHEBANG},
    {"#SBATCH -J x\necho\n", 0, NO_SHEBANG},
    {"#", 0, NO_SHEBANG},
    {"!#/bin/sh\n", 0, NO_SHEBANG},
    {"#!/bin/sh\r\necho\r\n", 0,
     "Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n)"},
    {"#!/bin/sh\necho\r\n", 0,
     "Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n)"},
    {"#!/bin/sh\necho\0x\n", 17, "Batch script contains a NUL character at byte 14"},
    {"\0#!/bin/sh\n", 11, "Batch script contains a NUL character at byte 0"},
};

START_TEST(test_refused)
{
    const struct refusal *r = &refusals[_i];
    size_t len = r->len ? r->len : strlen(r->script);
    char err[512];
    memset(err, 'x', sizeof(err));
    ck_assert_int_eq(jobscript_check(r->script, len, err, sizeof(err)), -1);
    ck_assert_str_eq(err, r->msg);
    ck_assert_ptr_null(strchr(err, '\n'));
}
END_TEST

START_TEST(test_accepted)
{
    static const char *ok[] = {
        "#!",
        "#!/bin/sh\n",
        "#!/bin/sh\necho a\rb\n", /* a lone \r is not a DOS line break */
        "#!/usr/bin/env python3\nprint('hi')\n",
        "#!/bin/sh\r", /* \r at the very end: no \r\n */
    };
    char err[256] = "untouched";
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ck_assert_msg(jobscript_check(ok[i], strlen(ok[i]), err, sizeof(err)) == 0,
                      "script %zu refused: %s", i, err);
    }
    ck_assert_str_eq(err, "untouched"); /* an accepted script writes no message */

    /* Size is not this rule's business (the replicated limit is the state machine's). */
    size_t big = 4u << 20;
    char *s = malloc(big);
    ck_assert_ptr_nonnull(s);
    memset(s, 'x', big);
    memcpy(s, "#!/bin/sh\n", 10);
    ck_assert_int_eq(jobscript_check(s, big, err, sizeof(err)), 0);
    free(s);
}
END_TEST

START_TEST(test_null_and_small_buffers)
{
    char err[8];
    ck_assert_int_eq(jobscript_check(NULL, 0, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "Batch s"); /* truncated, still terminated */
    ck_assert_int_eq(jobscript_check(NULL, 5, err, sizeof(err)), -1);
    ck_assert_int_eq(jobscript_check("echo\n", 5, err, sizeof(err)), -1);
    ck_assert_uint_eq(strlen(err), sizeof(err) - 1);
    ck_assert_int_eq(jobscript_check("#!\0", 3, err, sizeof(err)), -1);
    ck_assert_uint_eq(strlen(err), sizeof(err) - 1);
    /* errlen 0: nothing is written at all. */
    char canary = 'c';
    ck_assert_int_eq(jobscript_check("", 0, &canary, 0), -1);
    ck_assert_int_eq(jobscript_check("\0", 1, &canary, 0), -1);
    ck_assert_int_eq(canary, 'c');
    ck_assert_int_eq(jobscript_check("#!/bin/sh\n", 10, NULL, 0), 0);
}
END_TEST

static Suite *jobscript_suite(void)
{
    Suite *s = suite_create("jobscript");
    TCase *tc =
        check_case(s, "rule", (const TTest *[]){test_accepted, test_null_and_small_buffers, NULL});
    tcase_add_loop_test(tc, test_refused, 0, (int)(sizeof(refusals) / sizeof(refusals[0])));
    return s;
}

int main(void)
{
    return check_run(jobscript_suite());
}
