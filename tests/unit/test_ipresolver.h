/*
 * test_ipresolver.h - a resolver (raftd/resolver.h) for tests that dial IP literals only:
 * it reads a resolv.conf of the test's own, naming a server that is never asked, and no
 * hosts file, so nothing a test does can reach a real nameserver. Shared by the tests of
 * the modules that dial through the resolver (forwarder, agents).
 *
 * Ownership: the caller frees the resolver (resolver_free) and unlinks path.
 */
#ifndef SPUR_TEST_IPRESOLVER_H
#define SPUR_TEST_IPRESOLVER_H

#include "resolver.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* path (at least 32 bytes) gets the resolv.conf's name, to unlink after resolver_free(). */
static inline struct resolver *test_ipresolver_new(struct event_base *base, char *path,
                                                   size_t pathlen)
{
    snprintf(path, pathlen, "/tmp/test_resolv.XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    static const char conf[] = "nameserver 127.0.0.1\n";
    ck_assert_int_eq(write(fd, conf, sizeof(conf) - 1), (ssize_t)(sizeof(conf) - 1));
    close(fd);
    struct resolver_options ro = {.resolv_conf = path, .hosts_file = "/dev/null", .seed = 1};
    char why[256] = "";
    struct resolver *res = resolver_new(base, &ro, why, sizeof(why));
    ck_assert_msg(res != NULL, "resolver_new: %s", why);
    return res;
}

#endif
