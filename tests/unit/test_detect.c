/*
 * test_detect.c - the node's size and address from sample file contents and names: the
 * parsers and the rules that combine them are pure, so every case is a table row.
 */
#include "detect.h"

#include "check_run.h"

#include <check.h>
#include <string.h>

START_TEST(test_meminfo_memtotal_in_mib)
{
    uint64_t mb = 0;
    const char *full = "MemTotal:       16318480 kB\nMemFree:         1234567 kB\n"
                       "MemAvailable:    9876543 kB\n";
    ck_assert_int_eq(detect_parse_meminfo(full, &mb), 0);
    ck_assert_uint_eq(mb, 15936); /* 16318480 / 1024, rounded down */
    const char *later = "MemFree: 1 kB\nMemTotal:\t2048 kB\n";
    ck_assert_int_eq(detect_parse_meminfo(later, &mb), 0);
    ck_assert_uint_eq(mb, 2);
}
END_TEST

START_TEST(test_meminfo_garbage_is_refused)
{
    static const char *const bad[] = {
        "",
        "MemFree: 100 kB\n",
        "MemTotal: kB\n",
        "MemTotal: 100 MB\n",
        "MemTotal: -5 kB\n",
        "MemTotal: 99999999999999999999999 kB\n",
        " MemTotal: 100 kB\n",
        NULL,
    };
    for (size_t i = 0; bad[i]; i++) {
        uint64_t mb = 77;
        ck_assert_msg(detect_parse_meminfo(bad[i], &mb) == -1, "accepted %s", bad[i]);
        ck_assert_uint_eq(mb, 77);
    }
}
END_TEST

START_TEST(test_cgroup_limits_lower_what_the_host_has)
{
    static const struct {
        uint32_t online, limit, want;
    } cpus[] = {{8, 0, 8}, {8, 2, 2}, {2, 8, 2}, {0, 0, 1}, {0, 3, 3}, {1, 1, 1}};
    for (size_t i = 0; i < sizeof(cpus) / sizeof(cpus[0]); i++)
        ck_assert_uint_eq(detect_combine_cpus(cpus[i].online, cpus[i].limit), cpus[i].want);
    static const struct {
        uint64_t phys, limit, want;
    } mem[] = {{16000, 0, 16000}, {16000, 512, 512}, {1000, 4000, 1000}, {0, 0, 1}};
    for (size_t i = 0; i < sizeof(mem) / sizeof(mem[0]); i++)
        ck_assert_uint_eq(detect_combine_mem(mem[i].phys, mem[i].limit), mem[i].want);
}
END_TEST

START_TEST(test_address_from_listen_or_fqdn)
{
    static const struct {
        const char *listen, *fqdn, *want;
    } rows[] = {
        {"10.0.0.5:6818", "node1.example.org", "10.0.0.5:6818"},
        {"[fd00::5]:6818", "node1.example.org", "[fd00::5]:6818"},
        {"[::]:6818", "node1.example.org", "node1.example.org:6818"},
        {"0.0.0.0:7000", "node1", "node1:7000"},
        {"[::]:6818", "fd00::9", "[fd00::9]:6818"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char out[128];
        ck_assert_int_eq(detect_address(rows[i].listen, rows[i].fqdn, out, sizeof(out)), 0);
        ck_assert_str_eq(out, rows[i].want);
    }
    char small[8];
    ck_assert_int_eq(detect_address("[::]:6818", "node1.example.org", small, sizeof(small)), -1);
    ck_assert_int_eq(detect_address("nonsense", "node1", small, sizeof(small)), -1);
    char out[64];
    ck_assert_int_eq(detect_address("[::]:6818", "", out, sizeof(out)), -1);
}
END_TEST

START_TEST(test_short_name_and_node_name_check)
{
    char out[16];
    detect_short_name("node7.cluster.example.org", out, sizeof(out));
    ck_assert_str_eq(out, "node7");
    detect_short_name("plain", out, sizeof(out));
    ck_assert_str_eq(out, "plain");
    detect_short_name("averyveryverylongname.x", out, sizeof(out));
    ck_assert_str_eq(out, "averyveryverylo");

    char why[128];
    ck_assert_int_eq(detect_check_node_name("n1", why, sizeof(why)), 0);
    ck_assert_int_eq(detect_check_node_name("rack-1.node_2", why, sizeof(why)), 0);
    ck_assert_int_eq(detect_check_node_name("", why, sizeof(why)), -1);
    ck_assert_int_eq(detect_check_node_name("bad name", why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "letters"));
    char longname[80];
    memset(longname, 'a', 65);
    longname[65] = '\0';
    ck_assert_int_eq(detect_check_node_name(longname, why, sizeof(why)), -1);
}
END_TEST

START_TEST(test_detect_node_keeps_configured_values)
{
    struct detect_result r;
    char err[256];
    ck_assert_int_eq(
        detect_node("n5", "n5.example:6818", "[::]:6818", 3, 700, 1, 100, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.node_name, "n5");
    ck_assert_str_eq(r.address, "n5.example:6818");
    ck_assert_uint_eq(r.cpus, 3); /* configured: the cgroup does not lower it */
    ck_assert_uint_eq(r.mem_mb, 700);
    /* Detected: never more than the cgroup allows. */
    ck_assert_int_eq(detect_node("n5", "", "127.0.0.1:7001", 0, 0, 1, 100, &r, err, sizeof(err)),
                     0);
    ck_assert_str_eq(r.address, "127.0.0.1:7001");
    ck_assert_uint_eq(r.cpus, 1);
    ck_assert_uint_le(r.mem_mb, 100);
    ck_assert_uint_ge(r.mem_mb, 1);
}
END_TEST

static Suite *detect_suite(void)
{
    Suite *s = suite_create("detect");
    check_case(s, "detect",
               (const TTest *[]){test_meminfo_memtotal_in_mib, test_meminfo_garbage_is_refused,
                                 test_cgroup_limits_lower_what_the_host_has,
                                 test_address_from_listen_or_fqdn,
                                 test_short_name_and_node_name_check,
                                 test_detect_node_keeps_configured_values, NULL});
    return s;
}

int main(void)
{
    return check_run(detect_suite());
}
