/*
 * test_netaddr.c - the configuration's address grammar and socket addresses
 * (common/netaddr.c).
 *
 * Pinned here: every form of HOST:PORT the grammar accepts and every one it refuses (port
 * bounds 0/1/65535/65536, IPv6 only in brackets, empty hosts, garbage in or after a host
 * or a port), that a host that does not fit is refused, not cut; the bind settings (all,
 * loopback, IP literals) and what they refuse; the configuration's messages for both,
 * byte for byte (cfg.c reports them as they are); the listen and bind forms as socket
 * addresses, with their messages; the log format; and the two comparisons the rules
 * between keys use (listeners that would collide, two spellings of one host).
 */
#include "check_run.h"
#include "netaddr.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- HOST:PORT ---------------------------------------------------------------------- */

struct hp_case {
    const char *in;
    int rc;
    const char *host;
    uint16_t port;
};

static const struct hp_case hp_cases[] = {
    {"a:1", 0, "a", 1},
    {"localhost:6817", 0, "localhost", 6817},
    {"spurctld-1.spurctld.ns.svc:6821", 0, "spurctld-1.spurctld.ns.svc", 6821},
    {"host_1:65535", 0, "host_1", 65535},
    {"10.0.0.1:80", 0, "10.0.0.1", 80},
    {"[::1]:6817", 0, "::1", 6817},
    {"[::]:6821", 0, "::", 6821},
    {"[fd00::3]:1", 0, "fd00::3", 1},
    {"a:007", 0, "a", 7},
    {"", -1, NULL, 0},
    {"localhost", -1, NULL, 0},  /* no port */
    {"localhost:", -1, NULL, 0}, /* empty port */
    {":6817", -1, NULL, 0},      /* empty host */
    {"::1:6817", -1, NULL, 0},   /* IPv6 without brackets */
    {"::1", -1, NULL, 0},        /* IPv6 without brackets or port */
    {"fe80::1", -1, NULL, 0},
    {"[::1]", -1, NULL, 0}, /* brackets, no port */
    {"[::1]6817", -1, NULL, 0},
    {"[]:6817", -1, NULL, 0},
    {"[::1:6817", -1, NULL, 0},
    {"a:0", -1, NULL, 0}, /* port 0 */
    {"[::1]:0", -1, NULL, 0},
    {"a:65536", -1, NULL, 0},
    {"a:100000", -1, NULL, 0},
    {"a:-1", -1, NULL, 0},
    {"a:+1", -1, NULL, 0},
    {"a:1x", -1, NULL, 0},
    {"a: 1", -1, NULL, 0},
    {"a b:1", -1, NULL, 0}, /* garbage host characters */
    {"a$:1", -1, NULL, 0},
    {"a/b:1", -1, NULL, 0},
    {"h\xc3\xa9:1", -1, NULL, 0},
    {"a:1:2", -1, NULL, 0},
    /* Port bounds, and what may follow the port: nothing. */
    {"a:65535", 0, "a", 65535},
    {"[::1]:65535", 0, "::1", 65535},
    {"a:00001", 0, "a", 1},
    {"a:000000", -1, NULL, 0}, /* six digits, even if it is 0 */
    {"a:123456", -1, NULL, 0},
    {"a:1 ", -1, NULL, 0},
    {"a:1\n", -1, NULL, 0},
    {"[::1]:80x", -1, NULL, 0},
    {"[::1]:80 ", -1, NULL, 0},
    {"[::1]x:80", -1, NULL, 0}, /* garbage between the bracket and the colon */
    {"[::1]:", -1, NULL, 0},
    {"[::1]::80", -1, NULL, 0},
    {"::80", -1, NULL, 0},
    {"a::80", -1, NULL, 0},
    /* Empty hosts, inside brackets or out. */
    {":", -1, NULL, 0},
    {"[]:", -1, NULL, 0},
    {"[", -1, NULL, 0},
};

START_TEST(test_split_hostport)
{
    const struct hp_case *hc = &hp_cases[_i];
    char host[256];
    uint16_t port = 0;
    memset(host, 'X', sizeof(host));
    int rc = netaddr_split_hostport(hc->in, host, sizeof(host), &port);
    ck_assert_msg(rc == hc->rc, "\"%s\": rc %d, want %d", hc->in, rc, hc->rc);
    if (rc == 0) {
        ck_assert_str_eq(host, hc->host);
        ck_assert_uint_eq(port, hc->port);
    }
}
END_TEST

START_TEST(test_split_hostport_small_buffer)
{
    char host[8];
    uint16_t port;
    /* Seven characters and the NUL fit; eight do not, and nothing is truncated silently. */
    ck_assert_int_eq(netaddr_split_hostport("abcdefg:1", host, sizeof(host), &port), 0);
    ck_assert_str_eq(host, "abcdefg");
    ck_assert_int_eq(netaddr_split_hostport("abcdefgh:1", host, sizeof(host), &port), -1);
    ck_assert_int_eq(netaddr_split_hostport("[1:2:3:4]:1", host, sizeof(host), &port), 0);
    ck_assert_str_eq(host, "1:2:3:4");
    ck_assert_int_eq(netaddr_split_hostport("[1:2:3:45]:1", host, sizeof(host), &port), -1);
    ck_assert_int_eq(netaddr_split_hostport(NULL, host, sizeof(host), &port), -1);
}
END_TEST

START_TEST(test_bind_address)
{
    char addr[64];
    ck_assert_int_eq(netaddr_bind_address("all", addr, sizeof(addr)), 0);
    ck_assert_str_eq(addr, "::");
    ck_assert_int_eq(netaddr_bind_address("loopback", addr, sizeof(addr)), 0);
    ck_assert_str_eq(addr, "127.0.0.1");
    ck_assert_int_eq(netaddr_bind_address("10.1.2.3", addr, sizeof(addr)), 0);
    ck_assert_str_eq(addr, "10.1.2.3");
    ck_assert_int_eq(netaddr_bind_address("0.0.0.0", addr, sizeof(addr)), 0);
    ck_assert_str_eq(addr, "0.0.0.0");
    ck_assert_int_eq(netaddr_bind_address("::1", addr, sizeof(addr)), 0);
    ck_assert_str_eq(addr, "::1");
    ck_assert_int_eq(netaddr_bind_address("fd00::1:2", addr, sizeof(addr)), 0);
    ck_assert_str_eq(addr, "fd00::1:2");
    static const char *const bad[] = {"",       "All",         "localhost", "any",
                                      "1.2.3",  "1.2.3.4.5",   "256.1.1.1", "[::1]",
                                      "::1%lo", "10.0.0.1:80", " 10.0.0.1", "::g"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(netaddr_bind_address(bad[i], addr, sizeof(addr)) == -1, "accepted \"%s\"",
                      bad[i]);
}
END_TEST

START_TEST(test_port_ok)
{
    ck_assert(!netaddr_port_ok(0));
    ck_assert(netaddr_port_ok(1));
    ck_assert(netaddr_port_ok(6817));
    ck_assert(netaddr_port_ok(65535));
    ck_assert(!netaddr_port_ok(65536));
    ck_assert(!netaddr_port_ok(4294967295ul));
    ck_assert_uint_eq(NETADDR_PORT_MIN, 1);
    ck_assert_uint_eq(NETADDR_PORT_MAX, 65535);
}
END_TEST

/* A refused value leaves *port alone: a caller never sees half an answer. */
START_TEST(test_split_refused_leaves_port)
{
    char host[64];
    uint16_t port = 4242;
    ck_assert_int_eq(netaddr_split_hostport("a:65536", host, sizeof(host), &port), -1);
    ck_assert_uint_eq(port, 4242);
    ck_assert_int_eq(netaddr_split_hostport("[::1]:0", host, sizeof(host), &port), -1);
    ck_assert_uint_eq(port, 4242);
}
END_TEST

/* ---- the configuration's messages ---------------------------------------------------- */

START_TEST(test_check_hostport_messages)
{
    char why[256];
    static const char *const good[] = {"a:1", "[::1]:6817", "10.0.0.1:65535", "h.example:80"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        strcpy(why, "untouched");
        ck_assert_msg(netaddr_check_hostport(good[i], why, sizeof(why)) == 0, "%s", good[i]);
        ck_assert_str_eq(why, "untouched");
    }
    static const char *const bad[] = {"localhost", ":1",    "a:0", "a:65536",
                                      "::1:80",    "[::1]", "a:1x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[256];
        snprintf(want, sizeof(want), "\"%s\" is not HOST:PORT (IPv6 as [ADDR]:PORT, port 1-65535)",
                 bad[i]);
        ck_assert_int_eq(netaddr_check_hostport(bad[i], why, sizeof(why)), -1);
        ck_assert_str_eq(why, want);
    }
}
END_TEST

START_TEST(test_check_bind_messages)
{
    char why[256];
    static const char *const good[] = {"all", "loopback", "0.0.0.0", "::", "fd00::1"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(netaddr_check_bind(good[i], why, sizeof(why)) == 0, "%s", good[i]);
    ck_assert_int_eq(netaddr_check_bind("everywhere", why, sizeof(why)), -1);
    ck_assert_str_eq(why, "\"everywhere\" is not all, loopback or an IP address");
    ck_assert_int_eq(netaddr_check_bind("[::1]", why, sizeof(why)), -1);
    ck_assert_str_eq(why, "\"[::1]\" is not all, loopback or an IP address");
    ck_assert_int_eq(netaddr_check_bind("", why, sizeof(why)), -1);
    ck_assert_str_eq(why, "\"\" is not all, loopback or an IP address");
}
END_TEST

/* ---- socket addresses ----------------------------------------------------------------- */

/* ss (sl bytes) must be ip (IPv4 or IPv6 as its family says) and port. */
static void expect_addr(const struct sockaddr_storage *ss, socklen_t sl, int family, const char *ip,
                        uint16_t port)
{
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
    bool v6 = family == AF_INET6;
    char got[INET6_ADDRSTRLEN];
    ck_assert_int_eq(ss->ss_family, family);
    ck_assert_uint_eq(sl, v6 ? sizeof(*s6) : sizeof(*s4));
    ck_assert_ptr_nonnull(inet_ntop(
        family, v6 ? (const void *)&s6->sin6_addr : (const void *)&s4->sin_addr, got, sizeof(got)));
    ck_assert_str_eq(got, ip);
    ck_assert_uint_eq(ntohs(v6 ? s6->sin6_port : s4->sin_port), port);
}

START_TEST(test_listen)
{
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char why[256];
    ck_assert_int_eq(netaddr_listen("127.0.0.1:6817", &ss, &sl, why, sizeof(why)), 0);
    expect_addr(&ss, sl, AF_INET, "127.0.0.1", 6817);
    ck_assert_int_eq(netaddr_listen("[::]:6821", &ss, &sl, why, sizeof(why)), 0);
    expect_addr(&ss, sl, AF_INET6, "::", 6821);
    ck_assert_int_eq(netaddr_listen("[fd00::3]:65535", &ss, &sl, why, sizeof(why)), 0);
    expect_addr(&ss, sl, AF_INET6, "fd00::3", 65535);

    ck_assert_int_eq(netaddr_listen("localhost:6817", &ss, &sl, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "localhost:6817: a listen address needs an IP address, not a name");
    ck_assert_int_eq(netaddr_listen("[foo]:1", &ss, &sl, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "[foo]:1: a listen address needs an IP address, not a name");
    ck_assert_int_eq(netaddr_listen("127.0.0.1:0", &ss, &sl, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "127.0.0.1:0: not HOST:PORT");
    ck_assert_int_eq(netaddr_listen("::1:6817", &ss, &sl, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "::1:6817: not HOST:PORT");
    ck_assert_int_eq(netaddr_listen("", &ss, &sl, why, sizeof(why)), -1);
    ck_assert_str_eq(why, ": not HOST:PORT");
}
END_TEST

START_TEST(test_bind)
{
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char why[256];
    ck_assert_int_eq(netaddr_bind("all", 6823, &ss, &sl, why, sizeof(why)), 0);
    expect_addr(&ss, sl, AF_INET6, "::", 6823);
    ck_assert_int_eq(netaddr_bind("loopback", 1, &ss, &sl, why, sizeof(why)), 0);
    expect_addr(&ss, sl, AF_INET, "127.0.0.1", 1);
    ck_assert_int_eq(netaddr_bind("10.1.2.3", 65535, &ss, &sl, why, sizeof(why)), 0);
    expect_addr(&ss, sl, AF_INET, "10.1.2.3", 65535);
    ck_assert_int_eq(netaddr_bind("::1", 6822, &ss, &sl, why, sizeof(why)), 0);
    expect_addr(&ss, sl, AF_INET6, "::1", 6822);

    ck_assert_int_eq(netaddr_bind("all", 0, &ss, &sl, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "all:0: not all, loopback or an address");
    ck_assert_int_eq(netaddr_bind("all", 65536, &ss, &sl, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "all:65536: not all, loopback or an address");
    ck_assert_int_eq(netaddr_bind("localhost", 80, &ss, &sl, why, sizeof(why)), -1);
    ck_assert_str_eq(why, "localhost:80: not all, loopback or an address");
}
END_TEST

START_TEST(test_format)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    char why[256], out[80];
    ck_assert_int_eq(netaddr_listen("10.0.0.7:6817", &ss, &sl, why, sizeof(why)), 0);
    netaddr_format(&ss, out, sizeof(out));
    ck_assert_str_eq(out, "10.0.0.7:6817");
    ck_assert_int_eq(netaddr_bind("all", 6823, &ss, &sl, why, sizeof(why)), 0);
    netaddr_format(&ss, out, sizeof(out));
    ck_assert_str_eq(out, "[::]:6823");
    ck_assert_int_eq(netaddr_listen("[fd00:0::0001]:1", &ss, &sl, why, sizeof(why)), 0);
    netaddr_format(&ss, out, sizeof(out));
    ck_assert_str_eq(out, "[fd00::1]:1");
}
END_TEST

/* ---- comparisons ---------------------------------------------------------------------- */

/*
 * overlap: could listeners on a and b (one port) collide? Wildcards take every address
 * ("::" IPv4 too), and a name could resolve to anything. same: one host as the peers see
 * it, where a wildcard is only itself and a name never equals an address.
 */
static const struct {
    const char *a, *b;
    bool overlap, same;
} cmp_cases[] = {
    {"::", "10.0.0.1", true, false},
    {"fd00::1", "::", true, false},
    {"0.0.0.0", "127.0.0.1", true, false},
    {"127.0.0.1", "127.0.0.1", true, true},
    {"127.0.0.1", "::ffff:127.0.0.1", true, true},
    {"fd00::1", "fd00:0:0::1", true, true},
    {"localhost", "127.0.0.1", true, false},
    {"10.0.0.1", "db.example", true, false},
    {"Node-1.Example", "node-1.example", true, true},
    {"node-1", "node-2", true, false},
    {"127.0.0.1", "127.0.0.2", false, false},
    {"::1", "127.0.0.1", false, false},
    {"fd00::1", "fd00::2", false, false},
};

START_TEST(test_compare)
{
    const char *a = cmp_cases[_i].a, *b = cmp_cases[_i].b;
    /* Both are symmetric. */
    ck_assert_msg(netaddr_hosts_overlap(a, b) == cmp_cases[_i].overlap, "overlap %s %s", a, b);
    ck_assert_msg(netaddr_hosts_overlap(b, a) == cmp_cases[_i].overlap, "overlap %s %s", b, a);
    ck_assert_msg(netaddr_same_host(a, b) == cmp_cases[_i].same, "same %s %s", a, b);
    ck_assert_msg(netaddr_same_host(b, a) == cmp_cases[_i].same, "same %s %s", b, a);
}
END_TEST

static Suite *netaddr_suite(void)
{
    Suite *s = suite_create("netaddr");
    TCase *tc = check_case(s, "grammar",
                           (const TTest *[]){test_split_hostport_small_buffer,
                                             test_split_refused_leaves_port, test_port_ok,
                                             test_bind_address, NULL});
    tcase_add_loop_test(tc, test_split_hostport, 0, (int)(sizeof(hp_cases) / sizeof(hp_cases[0])));

    check_case(s, "messages",
               (const TTest *[]){test_check_hostport_messages, test_check_bind_messages, NULL});

    check_case(s, "sockets", (const TTest *[]){test_listen, test_bind, test_format, NULL});

    tc = tcase_create("compare");
    tcase_add_loop_test(tc, test_compare, 0, (int)(sizeof(cmp_cases) / sizeof(cmp_cases[0])));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(netaddr_suite());
}
