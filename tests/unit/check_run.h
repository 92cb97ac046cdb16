/*
 * check_run.h - the end of every Check program's main(): run the suite in Check's usual
 * mode (each test forked, so a crash fails one test, not the program) and exit 0 only
 * when every test passed. One place, so no test program can get its exit status wrong.
 */
#ifndef SPUR_CHECK_RUN_H
#define SPUR_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
