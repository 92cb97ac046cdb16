/*
 * fuzz_check.h - the one assertion of the fuzzers: CHECK(c) aborts when c is false, after
 * a line "FUZZ_NAME: check failed: c (line N)" on stderr. libFuzzer takes the abort for a
 * crash and keeps the input that caused it. Each fuzzer defines FUZZ_NAME (its program
 * name) before it includes this file.
 */
#ifndef SPUR_FUZZ_CHECK_H
#define SPUR_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#ifndef FUZZ_NAME
#error "define FUZZ_NAME (the fuzzer's name) before including fuzz_check.h"
#endif

static inline _Noreturn void fuzz_check_failed(const char *cond, int line)
{
    fprintf(stderr, "%s: check failed: %s (line %d)\n", FUZZ_NAME, cond, line);
    abort();
}

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            fuzz_check_failed(#c, __LINE__);                                                       \
    } while (0)

#endif
