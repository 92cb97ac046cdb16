/*
 * scratch.h - scratch directories for the tests that touch the disk: a base directory
 * under /tmp made before the program's suite runs and removed after it (so a failed test,
 * whose teardown Check skips in its forked child, leaves nothing behind), and a fresh
 * directory per test inside it.
 */
#ifndef SPUR_SCRATCH_H
#define SPUR_SCRATCH_H

#include "check_run.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static inline int scratch_remove_entry(const char *path, const struct stat *sb, int flag,
                                       struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Remove the tree at path, children first; symbolic links are removed, not followed. */
static inline void scratch_remove(const char *path)
{
    nftw(path, scratch_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Make a fresh directory below base; its path goes to dir. Fails the test if it cannot. */
static inline void scratch_make(char *dir, size_t len, const char *base)
{
    snprintf(dir, len, "%s/t-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Run s with base made as /tmp/spur-test-NAME-XXXXXX, then remove base and all below it. */
static inline int scratch_run(Suite *s, char *base, size_t len, const char *name)
{
    snprintf(base, len, "/tmp/spur-test-%s-XXXXXX", name);
    if (mkdtemp(base) == NULL) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    int rc = check_run(s);
    scratch_remove(base);
    return rc;
}

#endif
