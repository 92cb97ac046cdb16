/*
 * check_run.h - how every Check program builds and runs its suite: check_case() makes a
 * test case from a list of tests, check_run() runs the suite in Check's usual mode (each
 * test forked, so a crash fails one test, not the program) and exits 0 only when every
 * test passed. One place, so no test program can get its exit status wrong.
 */
#ifndef SPUR_CHECK_RUN_H
#define SPUR_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

/*
 * A test case named name holding tests (a NULL-terminated list), added to s. Fixtures,
 * time-outs and loop tests go on the returned case.
 */
static inline TCase *check_case(Suite *s, const char *name, const TTest *const *tests)
{
    TCase *tc = tcase_create(name);
    for (size_t i = 0; tests[i] != NULL; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return tc;
}

static inline int check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
