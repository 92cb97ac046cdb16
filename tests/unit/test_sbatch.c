/*
 * test_sbatch.c - sbatch's pure rules (client/sbatch_parse.c).
 *
 * Pinned here:
 *   - -t in every Slurm form, seconds rounding up, UNLIMITED/INFINITE, and the malformed
 *     ones refused; --mem with and without K/M/G/T, rounding of kilobytes, overflow.
 *   - The command line: --opt=value, --opt value, -Xvalue, -X value, bundled flags,
 *     unambiguous prefixes, ambiguous and unknown options named in the error, missing
 *     and unexpected arguments, stopping at the script, "--", counts of at least 1.
 *   - #SBATCH lines: read only before the first command; "# SBATCH", indented and
 *     "#SBATCHX" lines are comments; tabs; quotes and backslashes; '#' comments after
 *     options; errors that name the line; options refused in a script; last one wins.
 *   - The command line overrides directives, whatever the order of either.
 *   - Defaults (name, stdout/stderr, workdir, counts), -D relative and absolute.
 *   - Script checks: missing, empty, whitespace only, no "#!" first line, DOS line
 *     breaks, NUL bytes; oversized scripts refused naming size and limit, the exact
 *     limit accepted.
 *   - --wrap: the script it builds, and a script file with it refused.
 *   - --export: ALL, NONE, names, NAME=value, ALL plus overrides, quotes, bad names.
 */
#include "check_run.h"
#include "jobscript.h"
#include "sbatch_parse.h"

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

/* ---- helpers ------------------------------------------------------------------------ */

/* Parse a NULL-terminated list of words as a command line (argv[0] = "sbatch"). */
static int args(struct sbatch_parse_opts *o, int *script_index, ...)
{
    char *argv[64];
    int argc = 0;
    va_list ap;
    argv[argc++] = "sbatch";
    va_start(ap, script_index);
    for (char *w; (w = va_arg(ap, char *)) != NULL;)
        argv[argc++] = w;
    va_end(ap);
    argv[argc] = NULL;
    int si;
    memset(o, 0, sizeof(*o));
    err[0] = '\0';
    int rc = sbatch_parse_parse_args(o, argc, argv, &si, err, sizeof(err));
    if (script_index)
        *script_index = si;
    return rc;
}

static int directives(struct sbatch_parse_opts *o, const char *script)
{
    memset(o, 0, sizeof(*o));
    err[0] = '\0';
    return sbatch_parse_parse_directives(o, script, strlen(script), err, sizeof(err));
}

static char *test_env[] = {"HOME=/home/alice", "PATH=/usr/bin:/bin", "LANG=C",
                           "EMPTY=",           "NOEQUALS",           NULL};

static struct sbatch_parse_context ctx(const char *script_path)
{
    struct sbatch_parse_context c = {
        .cwd = "/home/alice/work",
        .script_path = script_path,
        .environ = test_env,
        .max_script_bytes = 1024,
        .user = "alice",
        .uid = 1000,
        .gid = 100,
    };
    return c;
}

/* Build a job from a command line (words, NULL-terminated) and a script. */
static int build(struct sbatch_parse_job *job, const char *script, const char *path, ...)
{
    char *argv[64];
    int argc = 0;
    va_list ap;
    argv[argc++] = "sbatch";
    va_start(ap, path);
    for (char *w; (w = va_arg(ap, char *)) != NULL;)
        argv[argc++] = w;
    va_end(ap);
    argv[argc] = NULL;
    struct sbatch_parse_opts o = {0};
    int si;
    err[0] = '\0';
    memset(job, 0, sizeof(*job));
    int rc = sbatch_parse_parse_args(&o, argc, argv, &si, err, sizeof(err));
    if (rc == 0) {
        struct sbatch_parse_context c = ctx(path);
        rc = sbatch_parse_build(&o, script, script ? strlen(script) : 0, &c, job, err, sizeof(err));
    }
    sbatch_parse_opts_free(&o);
    return rc;
}

#define ASSERT_ERR_HAS(needle)                                                                     \
    do {                                                                                           \
        if (strstr(err, (needle)) == NULL)                                                         \
            ck_abort_msg("error \"%s\" does not contain \"%s\"", err, (needle));                   \
    } while (0)

/* ---- -t ----------------------------------------------------------------------------- */

static const struct {
    const char *in;
    uint32_t minutes;
} good_times[] = {
    {"10", 10},          {"0", 0},         {"1440", 1440},   {"5:00", 5},      {"5:30", 6},
    {"0:30", 1},         {"0:00", 0},      {"90:00", 90},    {"1:00:00", 60},  {"48:00:00", 2880},
    {"0:00:01", 1},      {"2:30:00", 150}, {"1-0", 1440},    {"2-12", 3600},   {"1-2:30", 1590},
    {"1-2:30:01", 1591}, {"0-0:0:59", 1},  {"UNLIMITED", 0}, {"unlimited", 0}, {"INFINITE", 0},
    {"Infinite", 0},     {"007", 7},
};

START_TEST(test_time_good)
{
    uint32_t m = 12345;
    int rc = sbatch_parse_parse_time(good_times[_i].in, &m, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", good_times[_i].in, err);
    ck_assert_uint_eq(m, good_times[_i].minutes);
}
END_TEST

static const char *const bad_times[] = {
    "",
    "abc",
    "10m",
    " 10",
    "10 ",
    "1:2:3:4",
    "1-",
    "-1",
    "1-2-3",
    "1:60",
    "1:00:60",
    "1:60:00",
    "1-2:60",
    "1-2:3:60",
    ":30",
    "1::2",
    "1:",
    "+5",
    "1.5",
    "99999999999",
    "1-2:3:4:5",
    "x-1",
    "4294967295:00:00",
};

START_TEST(test_time_bad)
{
    uint32_t m = 777;
    ck_assert_int_eq(sbatch_parse_parse_time(bad_times[_i], &m, err, sizeof(err)), -1);
    ck_assert_uint_eq(m, 777);
    ASSERT_ERR_HAS("invalid time limit");
}
END_TEST

/* ---- --mem -------------------------------------------------------------------------- */

START_TEST(test_mem)
{
    static const struct {
        const char *in;
        uint64_t mb;
    } good[] = {
        {"100", 100},    {"0", 0},
        {"512M", 512},   {"512m", 512},
        {"4G", 4096},    {"4g", 4096},
        {"1T", 1048576}, {"2t", 2097152},
        {"1K", 1},       {"1024K", 1},
        {"1025K", 2},    {"2048k", 2},
        {"0K", 0},       {"18014398509481983G", 18014398509481983ull * 1024},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t mb = 1;
        ck_assert_msg(sbatch_parse_parse_mem(good[i].in, &mb, err, sizeof(err)) == 0, "%s: %s",
                      good[i].in, err);
        ck_assert_uint_eq(mb, good[i].mb);
    }
    static const char *const bad[] = {"",
                                      "G",
                                      "4GB",
                                      "4X",
                                      "-1",
                                      "1.5G",
                                      " 4G",
                                      "4 G",
                                      "M4",
                                      "99999999999999999999",
                                      "18014398509481984G",
                                      "17592186044416T"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t mb = 9;
        ck_assert_msg(sbatch_parse_parse_mem(bad[i], &mb, err, sizeof(err)) == -1, "%s accepted",
                      bad[i]);
        ck_assert_uint_eq(mb, 9);
        ASSERT_ERR_HAS("--mem");
    }
}
END_TEST

/* ---- the command line --------------------------------------------------------------- */

START_TEST(test_option_forms)
{
    struct sbatch_parse_opts o;
    const char *const forms[][3] = {
        {"--job-name=foo", NULL, NULL}, {"--job-name", "foo", NULL}, {"-J", "foo", NULL},
        {"-Jfoo", NULL, NULL},          {"--job=foo", NULL, NULL}, /* a unique prefix */
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        int si;
        ck_assert_int_eq(args(&o, &si, forms[i][0], forms[i][1], forms[i][2], NULL), 0);
        ck_assert(o.set & SBATCH_NAME);
        ck_assert_str_eq(o.name, "foo");
        sbatch_parse_opts_free(&o);
    }
    /* "--opt=" with '=' inside the value keeps the rest. */
    ck_assert_int_eq(args(&o, NULL, "--export=A=b=c", NULL), 0);
    ck_assert_str_eq(o.export_spec, "A=b=c");
    sbatch_parse_opts_free(&o);
    /* A value that looks like an option is still the value. */
    ck_assert_int_eq(args(&o, NULL, "-J", "-N", NULL), 0);
    ck_assert_str_eq(o.name, "-N");
    ck_assert(!(o.set & SBATCH_NODES));
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_every_option)
{
    struct sbatch_parse_opts o;
    int si;
    ck_assert_int_eq(args(&o, &si, "-J", "n", "-p", "gpu", "-N", "2", "-n", "8", "-c", "4", "--mem",
                          "2G", "-t", "1:00:00", "-o", "out.%j", "-e", "err.%j", "-D", "/tmp", "-H",
                          "--export=NONE", "--parsable", "-Q", "job.sh", NULL),
                     0);
    ck_assert_int_eq(si, 25);
    ck_assert_str_eq(o.name, "n");
    ck_assert_str_eq(o.partition, "gpu");
    ck_assert_uint_eq(o.nodes, 2);
    ck_assert_uint_eq(o.ntasks, 8);
    ck_assert_uint_eq(o.cpus_per_task, 4);
    ck_assert_uint_eq(o.mem_mb, 2048);
    ck_assert_uint_eq(o.time_min, 60);
    ck_assert_str_eq(o.output, "out.%j");
    ck_assert_str_eq(o.error, "err.%j");
    ck_assert_str_eq(o.chdir, "/tmp");
    ck_assert(o.hold && o.parsable && o.quiet);
    ck_assert_str_eq(o.export_spec, "NONE");
    sbatch_parse_opts_free(&o);

    /* Long names of the short ones, and --workdir for --chdir. */
    ck_assert_int_eq(args(&o, &si, "--partition=p", "--nodes=3", "--ntasks=5", "--cpus-per-task=2",
                          "--time=7", "--output=o", "--error=e", "--chdir=d", "--hold", "--quiet",
                          NULL),
                     0);
    ck_assert_uint_eq(o.nodes, 3);
    ck_assert_uint_eq(o.ntasks, 5);
    ck_assert_uint_eq(o.cpus_per_task, 2);
    ck_assert_uint_eq(o.time_min, 7);
    ck_assert_str_eq(o.chdir, "d");
    ck_assert_int_eq(si, 11);
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(args(&o, &si, "--workdir=/w", NULL), 0);
    ck_assert_str_eq(o.chdir, "/w");
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_bundled_flags)
{
    struct sbatch_parse_opts o;
    ck_assert_int_eq(args(&o, NULL, "-HQ", NULL), 0);
    ck_assert(o.hold && o.quiet);
    sbatch_parse_opts_free(&o);
    /* A flag, then an option taking the rest of the word as its value. */
    ck_assert_int_eq(args(&o, NULL, "-HJname", NULL), 0);
    ck_assert(o.hold);
    ck_assert_str_eq(o.name, "name");
    sbatch_parse_opts_free(&o);
    /* ... or the next word. */
    ck_assert_int_eq(args(&o, NULL, "-QN", "4", NULL), 0);
    ck_assert(o.quiet);
    ck_assert_uint_eq(o.nodes, 4);
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_bad_options)
{
    static const struct {
        const char *word, *value; /* the words after "sbatch"; value may be NULL */
        const char *msg;          /* a part of the error line */
        int rc;                   /* -2: refused as getopt would (sbatch prints "Try") */
    } t[] = {
        {"--bogus=1", NULL, "unrecognized option '--bogus'", -2},
        {"--accounting=x", NULL, "unrecognized option '--accounting'", -2},
        {"--account", NULL, "'--account' requires an argument", -2},
        {"--no-requeue=1", NULL, "'--no-requeue' doesn't allow an argument", -2},
        {"-X", NULL, "'X'", -2},
        {"-HZ", NULL, "'Z'", -2},
        {"--n=2", NULL, "option '--n=2' is ambiguous", -2}, /* --nodes or --ntasks */
        {"-J", NULL, "option requires an argument -- 'J'", -2},
        {"--time", NULL, "'--time' requires an argument", -2},
        {"--hold=yes", NULL, "'--hold' doesn't allow an argument", -2},
        {"-J", "", "non-empty", SBATCH_PARSE_BAD_VALUE},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct sbatch_parse_opts o;
        ck_assert_int_eq(args(&o, NULL, t[i].word, t[i].value, NULL), t[i].rc);
        ASSERT_ERR_HAS(t[i].msg);
        sbatch_parse_opts_free(&o);
    }
}
END_TEST

START_TEST(test_bad_counts)
{
    static const char *const bad[] = {"0", "-1", "abc", "1x", "", "2-4", "4294967296", " 1"};
    static const char *const opt[] = {"-N", "-n", "-c"};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            struct sbatch_parse_opts o;
            ck_assert_msg(args(&o, NULL, opt[k], bad[i], NULL) == SBATCH_PARSE_BAD_VALUE,
                          "%s '%s' accepted", opt[k], bad[i]);
            ASSERT_ERR_HAS("at least 1");
            sbatch_parse_opts_free(&o);
        }
    }
    struct sbatch_parse_opts o;
    ck_assert_int_eq(args(&o, NULL, "-N", "4294967295", NULL), 0);
    ck_assert_uint_eq(o.nodes, 4294967295u);
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(args(&o, NULL, "-t", "soon", NULL), SBATCH_PARSE_BAD_VALUE);
    ASSERT_ERR_HAS("soon");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(args(&o, NULL, "--mem=lots", NULL), SBATCH_PARSE_BAD_VALUE);
    ASSERT_ERR_HAS("lots");
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_stops_at_script)
{
    struct sbatch_parse_opts o;
    int si;
    /* Words after the script belong to it, options included. */
    ck_assert_int_eq(args(&o, &si, "-N", "2", "job.sh", "-N", "3", NULL), 0);
    ck_assert_int_eq(si, 3);
    ck_assert_uint_eq(o.nodes, 2);
    sbatch_parse_opts_free(&o);
    /* "--" ends the options. */
    ck_assert_int_eq(args(&o, &si, "-H", "--", "-weird-name.sh", NULL), 0);
    ck_assert_int_eq(si, 3);
    sbatch_parse_opts_free(&o);
    /* "-" alone is a word, not an option. */
    ck_assert_int_eq(args(&o, &si, "-", NULL), 0);
    ck_assert_int_eq(si, 1);
    sbatch_parse_opts_free(&o);
    /* No script: the index is argc. */
    ck_assert_int_eq(args(&o, &si, "-H", NULL), 0);
    ck_assert_int_eq(si, 2);
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_help_version)
{
    struct sbatch_parse_opts o;
    ck_assert_int_eq(args(&o, NULL, "--help", NULL), 0);
    ck_assert(o.set & SBATCH_HELP);
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(args(&o, NULL, "-h", NULL), 0);
    ck_assert(o.set & SBATCH_HELP);
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(args(&o, NULL, "-V", NULL), 0);
    ck_assert(o.set & SBATCH_VERSION);
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(args(&o, NULL, "--usage", NULL), 0);
    ck_assert(o.set & SBATCH_USAGE);
    sbatch_parse_opts_free(&o);
}
END_TEST

/* ---- #SBATCH ------------------------------------------------------------------------ */

START_TEST(test_directives_basic)
{
    struct sbatch_parse_opts o;
    ck_assert_int_eq(directives(&o, "#!/bin/bash\n"
                                    "#SBATCH -J first\n"
                                    "#SBATCH --partition=debug\n"
                                    "#SBATCH -N 2 --ntasks=4\n"
                                    "#SBATCH\t-t\t10\n"
                                    "#SBATCH --mem 1G\n"
                                    "srun hostname\n"),
                     0);
    ck_assert_str_eq(o.name, "first");
    ck_assert_str_eq(o.partition, "debug");
    ck_assert_uint_eq(o.nodes, 2);
    ck_assert_uint_eq(o.ntasks, 4);
    ck_assert_uint_eq(o.time_min, 10);
    ck_assert_uint_eq(o.mem_mb, 1024);
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_directives_stop_at_first_command)
{
    struct sbatch_parse_opts o;
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n"
                                    "\n"
                                    "# a comment\n"
                                    "   \t\n"
                                    "#SBATCH -J kept\n"
                                    "echo start\n"
                                    "#SBATCH -J ignored\n"
                                    "#SBATCH --bogus-after-command\n"),
                     0);
    ck_assert_str_eq(o.name, "kept");
    sbatch_parse_opts_free(&o);
    /* An indented command counts as a command too. */
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n  true\n#SBATCH -J late\n"), 0);
    ck_assert(!(o.set & SBATCH_NAME));
    sbatch_parse_opts_free(&o);
    /* Without a newline at the end. */
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -J last"), 0);
    ck_assert_str_eq(o.name, "last");
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_directives_that_are_comments)
{
    struct sbatch_parse_opts o;
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n"
                                    "# SBATCH -J spaced\n"
                                    "  #SBATCH -J indented\n"
                                    "#SBATCHX -J glued\n"
                                    "##SBATCH -J doubled\n"
                                    "#sbatch -J lower\n"
                                    "#SBATCH\n"
                                    "#SBATCH   \n"
                                    "#SBATCH --bogus-in-comment-free-line-is-an-error-below\n"),
                     -2);
    /* Everything before the last line was a comment; the last is a real directive. */
    ASSERT_ERR_HAS("line 9");
    ASSERT_ERR_HAS("--bogus-in-comment");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n"
                                    "# SBATCH -J spaced\n"
                                    "  #SBATCH -J indented\n"
                                    "#SBATCHX -J glued\n"
                                    "#SBATCH\n"),
                     0);
    ck_assert_uint_eq(o.set, 0);
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_directives_quotes)
{
    struct sbatch_parse_opts o;
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -J \"my job\"\n"), 0);
    ck_assert_str_eq(o.name, "my job");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH --job-name='a b  c'\n"), 0);
    ck_assert_str_eq(o.name, "a b  c");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH --job-name=x\"y z\"w\n"), 0);
    ck_assert_str_eq(o.name, "xy zw");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -J a\\ b\n"), 0);
    ck_assert_str_eq(o.name, "a b");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -J \"say \\\"hi\\\"\"\n"), 0);
    ck_assert_str_eq(o.name, "say \"hi\"");
    sbatch_parse_opts_free(&o);
    /* No expansion: $HOME stays as written. */
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -o $HOME/out\n"), 0);
    ck_assert_str_eq(o.output, "$HOME/out");
    sbatch_parse_opts_free(&o);
    /* A '#' inside quotes is kept. */
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -J \"a # b\"\n"), 0);
    ck_assert_str_eq(o.name, "a # b");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -J \"open\n"), -2);
    ASSERT_ERR_HAS("line 2");
    ASSERT_ERR_HAS("unterminated quote");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n\n#SBATCH -J 'open\n"), -2);
    ASSERT_ERR_HAS("line 3");
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_directives_trailing_comment)
{
    struct sbatch_parse_opts o;
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -J name # the job's name\n"), 0);
    ck_assert_str_eq(o.name, "name");
    sbatch_parse_opts_free(&o);
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH --time=10 #ten minutes\n"), 0);
    ck_assert_uint_eq(o.time_min, 10);
    sbatch_parse_opts_free(&o);
    /* A '#' inside a word is part of it. */
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -o out#1.txt\n"), 0);
    ck_assert_str_eq(o.output, "out#1.txt");
    sbatch_parse_opts_free(&o);
}
END_TEST

START_TEST(test_directives_errors)
{
    static const struct {
        const char *script;
        const char *msg, *msg2; /* parts of the error line; msg2 may be NULL */
    } t[] = {
        {"#!/bin/sh\n#SBATCH -J ok\n#SBATCH --frobnicate\n", "batch script line 3",
         "unrecognized option '--frobnicate'"},
        {"#!/bin/sh\n#SBATCH -N two\n", "line 2", "two"},
        {"#!/bin/sh\n#SBATCH stray\n", "'stray'", NULL},
        {"#!/bin/sh\n#SBATCH --wrap=ls\n", "not valid in a batch script", NULL},
        {"#!/bin/sh\n#SBATCH --help\n", "not valid in a batch script", NULL},
        {"#!/bin/sh\n#SBATCH -V\n", "'-V'", NULL},
        {"#!/bin/sh\n#SBATCH -J\n", "requires an argument", NULL},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct sbatch_parse_opts o;
        /* a refused line: -2, and sbatch exits 255 as Slurm's does */
        ck_assert_int_eq(directives(&o, t[i].script), -2);
        ASSERT_ERR_HAS(t[i].msg);
        if (t[i].msg2 != NULL)
            ASSERT_ERR_HAS(t[i].msg2);
        sbatch_parse_opts_free(&o);
    }
}
END_TEST

START_TEST(test_directives_last_wins)
{
    struct sbatch_parse_opts o;
    ck_assert_int_eq(directives(&o, "#!/bin/sh\n#SBATCH -J a\n#SBATCH -J b -t 5 --time=6\n"), 0);
    ck_assert_str_eq(o.name, "b");
    ck_assert_uint_eq(o.time_min, 6);
    sbatch_parse_opts_free(&o);
}
END_TEST

/* ---- building the job ------------------------------------------------------------------ */

static const char *script_with_directives = "#!/bin/sh\n"
                                            "#SBATCH -J from_script\n"
                                            "#SBATCH -N 2\n"
                                            "#SBATCH -t 10\n"
                                            "#SBATCH -p script_part\n"
                                            "#SBATCH -o script.out\n"
                                            "#SBATCH --export=NONE\n"
                                            "hostname\n";

START_TEST(test_cli_overrides_directives)
{
    struct sbatch_parse_job j;
    ck_assert_int_eq(build(&j, script_with_directives, "/x/job.sh", "-J", "from_cli", "-t",
                           "UNLIMITED", "--export=LANG", NULL),
                     0);
    ck_assert_str_eq(j.name, "from_cli");
    ck_assert_uint_eq(j.time_min, 0);
    ck_assert_uint_eq(j.nodes, 2);
    ck_assert_str_eq(j.partition, "script_part");
    ck_assert_str_eq(j.stdout_path, "script.out");
    ck_assert_str_eq(j.stderr_path, "script.out");
    ck_assert_uint_eq(j.nenv, 1);
    ck_assert_str_eq(j.env[0], "LANG=C");
    sbatch_parse_job_free(&j);

    /* The script's values apply when the command line says nothing. */
    ck_assert_int_eq(build(&j, script_with_directives, "/x/job.sh", NULL), 0);
    ck_assert_str_eq(j.name, "from_script");
    ck_assert_uint_eq(j.time_min, 10);
    ck_assert_uint_eq(j.nenv, 0);
    sbatch_parse_job_free(&j);

    /* Command-line flags also win: -N on the command line over the script's. */
    ck_assert_int_eq(build(&j, script_with_directives, "/x/job.sh", "-N", "5", "-p", "cli", NULL),
                     0);
    ck_assert_uint_eq(j.nodes, 5);
    ck_assert_uint_eq(j.ntasks, 5);
    ck_assert_str_eq(j.partition, "cli");
    sbatch_parse_job_free(&j);
}
END_TEST

START_TEST(test_defaults)
{
    struct sbatch_parse_job j;
    ck_assert_int_eq(build(&j, "#!/bin/sh\nhostname\n", "scripts/run.sh", NULL), 0);
    ck_assert_str_eq(j.name, "run.sh");
    ck_assert_str_eq(j.partition, "");
    ck_assert_str_eq(j.stdout_path, "slurm-%j.out");
    ck_assert_str_eq(j.stderr_path, "slurm-%j.out");
    ck_assert_str_eq(j.workdir, "/home/alice/work");
    ck_assert_uint_eq(j.nodes, 1);
    ck_assert_uint_eq(j.ntasks, 1);
    ck_assert_uint_eq(j.cpus_per_task, 1);
    ck_assert_uint_eq(j.mem_mb, 0);
    ck_assert_uint_eq(j.time_min, 0);
    ck_assert(!j.hold && !j.parsable && !j.quiet);
    ck_assert_str_eq(j.user, "alice");
    ck_assert_uint_eq(j.uid, 1000);
    ck_assert_uint_eq(j.gid, 100);
    ck_assert_str_eq(j.script, "#!/bin/sh\nhostname\n");
    ck_assert_uint_eq(j.script_len, 19);
    /* --export defaults to ALL: every NAME=value entry of the environment, in order. */
    ck_assert_uint_eq(j.nenv, 4);
    ck_assert_str_eq(j.env[0], "HOME=/home/alice");
    ck_assert_str_eq(j.env[3], "EMPTY=");
    ck_assert_ptr_null(j.env[4]);
    sbatch_parse_job_free(&j);

    /* From standard input the name is "sbatch". */
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", NULL, NULL), 0);
    ck_assert_str_eq(j.name, "sbatch");
    sbatch_parse_job_free(&j);

    /* -o alone sends stderr there too; -e alone leaves stdout at the default. */
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "-o", "o.txt", NULL), 0);
    ck_assert_str_eq(j.stdout_path, "o.txt");
    ck_assert_str_eq(j.stderr_path, "o.txt");
    sbatch_parse_job_free(&j);
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "-e", "e.txt", NULL), 0);
    ck_assert_str_eq(j.stdout_path, "slurm-%j.out");
    ck_assert_str_eq(j.stderr_path, "e.txt");
    sbatch_parse_job_free(&j);

    /* -D: relative to the current directory, or absolute. */
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "-D", "sub/dir", NULL), 0);
    ck_assert_str_eq(j.workdir, "/home/alice/work/sub/dir");
    sbatch_parse_job_free(&j);
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "--chdir=/scratch", NULL), 0);
    ck_assert_str_eq(j.workdir, "/scratch");
    sbatch_parse_job_free(&j);

    /* -n given: not derived from -N. */
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "-N", "2", "-n", "7", NULL), 0);
    ck_assert_uint_eq(j.ntasks, 7);
    sbatch_parse_job_free(&j);
}
END_TEST

START_TEST(test_job_to_spec)
{
    struct sbatch_parse_job j;
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "-H", "--mem=3G", "-c", "2", NULL), 0);
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    sbatch_parse_job_to_spec(&j, &spec);
    ck_assert_str_eq(spec.name, "a.sh");
    ck_assert(spec.hold);
    ck_assert_uint_eq(spec.mem_mb, 3072);
    ck_assert_uint_eq(spec.cpus_per_task, 2);
    ck_assert_uint_eq(spec.script.len, j.script_len);
    ck_assert_mem_eq(spec.script.data, "#!/bin/sh\ntrue\n", spec.script.len);
    ck_assert_uint_eq(spec.n_env, j.nenv);
    ck_assert_uint_eq(spec.uid, 1000);
    ck_assert_str_eq(spec.workdir, "/home/alice/work");
    sbatch_parse_job_free(&j);
}
END_TEST

/*
 * --requeue / --no-requeue and -A/--account: on the command line and in #SBATCH lines,
 * the last of the two requeue flags wins within one place, the command line over the
 * script, and both reach the JobSpec. Without them: no requeue, no account.
 */
START_TEST(test_requeue_account)
{
    struct sbatch_parse_job j;
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", NULL), 0);
    ck_assert(!j.requeue);
    ck_assert_str_eq(j.account, "");
    sbatch_parse_job_free(&j);

    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "--requeue", "-A", "physics", NULL), 0);
    ck_assert(j.requeue);
    ck_assert_str_eq(j.account, "physics");
    sbatch_parse_job_to_spec(&j, &spec);
    ck_assert(spec.requeue);
    ck_assert_str_eq(spec.account, "physics");
    sbatch_parse_job_free(&j);

    /* Last wins on one command line; --account=, -Aname and a unique prefix work too. */
    ck_assert_int_eq(
        build(&j, "#!/bin/sh\ntrue\n", "a.sh", "--requeue", "--no-requeue", "--account=chem", NULL),
        0);
    ck_assert(!j.requeue);
    ck_assert_str_eq(j.account, "chem");
    sbatch_parse_job_free(&j);
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "--no-req", "--requeue", "-Abio", NULL),
                     0);
    ck_assert(j.requeue);
    ck_assert_str_eq(j.account, "bio");
    sbatch_parse_job_free(&j);

    /* From the script, and the command line over it. */
    static const char script[] = "#!/bin/sh\n#SBATCH --requeue\n#SBATCH -A from_script\ntrue\n";
    ck_assert_int_eq(build(&j, script, "a.sh", NULL), 0);
    ck_assert(j.requeue);
    ck_assert_str_eq(j.account, "from_script");
    sbatch_parse_job_free(&j);
    ck_assert_int_eq(build(&j, script, "a.sh", "--no-requeue", "--account", "cli", NULL), 0);
    ck_assert(!j.requeue);
    ck_assert_str_eq(j.account, "cli");
    sbatch_parse_job_free(&j);

    /* Refusals name the option. */
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "--requeue=yes", NULL), -2);
    ASSERT_ERR_HAS("'--requeue' doesn't allow an argument");
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "--account=", NULL),
                     SBATCH_PARSE_BAD_VALUE);
    ASSERT_ERR_HAS("option --account needs a non-empty value");
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "-A", NULL), -2);
    ASSERT_ERR_HAS("option requires an argument -- 'A'");
}
END_TEST

/*
 * -d/--dependency and --kill-on-invalid-dep: passed as written (the controller parses the
 * dependency), from the command line or #SBATCH lines, the command line winning; the
 * kill flag takes yes or no in Slurm's words.
 */
START_TEST(test_dependency)
{
    struct sbatch_parse_job j;
    Spur__Api__JobSpec spec = SPUR__API__JOB_SPEC__INIT;
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", NULL), 0);
    ck_assert_str_eq(j.dependency, "");
    ck_assert(!j.kill_invalid);
    sbatch_parse_job_free(&j);

    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "-d", "afterok:5:6?singleton",
                           "--kill-on-invalid-dep=yes", NULL),
                     0);
    ck_assert_str_eq(j.dependency, "afterok:5:6?singleton");
    ck_assert(j.kill_invalid);
    sbatch_parse_job_to_spec(&j, &spec);
    ck_assert_str_eq(spec.dependency, "afterok:5:6?singleton");
    ck_assert(spec.kill_on_invalid_dep);
    sbatch_parse_job_free(&j);

    static const char script[] =
        "#!/bin/sh\n#SBATCH --dependency=afterany:3\n#SBATCH --kill-on-invalid-dep=YES\ntrue\n";
    ck_assert_int_eq(build(&j, script, "a.sh", NULL), 0);
    ck_assert_str_eq(j.dependency, "afterany:3");
    ck_assert(j.kill_invalid);
    sbatch_parse_job_free(&j);
    ck_assert_int_eq(
        build(&j, script, "a.sh", "--dependency", "after:4", "--kill-on-invalid-dep", "no", NULL),
        0);
    ck_assert_str_eq(j.dependency, "after:4");
    ck_assert(!j.kill_invalid);
    sbatch_parse_job_free(&j);

    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "--kill-on-invalid-dep=maybe", NULL),
                     SBATCH_PARSE_BAD_VALUE);
    ASSERT_ERR_HAS("Invalid --kill-on-invalid-dep specification");
    ck_assert_int_eq(build(&j, "#!/bin/sh\ntrue\n", "a.sh", "-d", NULL), -2);
    ASSERT_ERR_HAS("option requires an argument -- 'd'");
}
END_TEST

/* ---- scripts -------------------------------------------------------------------------- */

START_TEST(test_script_checks)
{
    struct sbatch_parse_job j;
    ck_assert_int_eq(build(&j, NULL, NULL, NULL), -1);
    ASSERT_ERR_HAS("no batch script");
    ck_assert_int_eq(build(&j, "", "a.sh", NULL), -1);
    ASSERT_ERR_HAS("Batch script is empty!");
    ck_assert_int_eq(build(&j, " \n\t\n", "a.sh", NULL), -1);
    ASSERT_ERR_HAS("only whitespace");
    ck_assert_int_eq(build(&j, "echo hello\n", "a.sh", NULL), -1);
    ASSERT_ERR_HAS("This does not look like a batch script");
    ASSERT_ERR_HAS("#!");
    ck_assert_int_eq(build(&j, "\n#!/bin/sh\necho\n", "a.sh", NULL), -1);
    ASSERT_ERR_HAS("This does not look like a batch script");
    ck_assert_int_eq(build(&j, "#SBATCH -J x\necho\n", "a.sh", NULL), -1);
    ASSERT_ERR_HAS("This does not look like a batch script");
    ck_assert_int_eq(build(&j, "#!/bin/sh\r\necho\r\n", "a.sh", NULL), -1);
    ASSERT_ERR_HAS("DOS line breaks");
    /* A lone \r is not a DOS line break. */
    ck_assert_int_eq(build(&j, "#!/bin/sh\necho a\rb\n", "a.sh", NULL), 0);
    sbatch_parse_job_free(&j);

    /* NUL bytes: built by hand, as strlen would stop at them. */
    static const char with_nul[] = "#!/bin/sh\necho\0x\n";
    ck_assert_int_eq(sbatch_parse_check_script(with_nul, sizeof(with_nul) - 1, err, sizeof(err)),
                     -1);
    ASSERT_ERR_HAS("NUL");
    ASSERT_ERR_HAS("byte 14");
    ck_assert_int_eq(sbatch_parse_check_script("#!", 2, err, sizeof(err)), 0);

    /*
     * One rule: sbatch's check is the server's (common/jobscript.h), word for word, so a
     * script refused here is refused with the same line by a replica, and the reverse.
     */
    static const char *const scripts[] = {"", "  \n", "echo hi\n", "#!/bin/sh\r\n", "#!/bin/sh\n"};
    for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++) {
        char server[512] = "", client[512] = "";
        int want = jobscript_check(scripts[i], strlen(scripts[i]), server, sizeof(server));
        ck_assert_int_eq(
            sbatch_parse_check_script(scripts[i], strlen(scripts[i]), client, sizeof(client)),
            want);
        ck_assert_str_eq(client, server);
    }
}
END_TEST

START_TEST(test_oversized_script)
{
    /* The context's limit is 1024 bytes. */
    char big[2048];
    memcpy(big, "#!/bin/sh\n", 10);
    memset(big + 10, 'x', sizeof(big) - 11);
    big[sizeof(big) - 1] = '\0';
    struct sbatch_parse_job j;
    ck_assert_int_eq(build(&j, big, "big.sh", NULL), -1);
    ASSERT_ERR_HAS("2047 bytes");
    ASSERT_ERR_HAS("limit of 1024 bytes");
    ASSERT_ERR_HAS("controller.max_script_bytes");
    ck_assert_ptr_null(strchr(err, '\n'));

    /* Exactly at the limit is accepted, one over is not. */
    big[1024] = '\0';
    ck_assert_int_eq(build(&j, big, "big.sh", NULL), 0);
    sbatch_parse_job_free(&j);
    big[1024] = 'x';
    big[1025] = '\0';
    ck_assert_int_eq(build(&j, big, "big.sh", NULL), -1);
    ASSERT_ERR_HAS("1025 bytes");

    /* A --wrap command counts the same way. */
    char cmd[1100];
    memset(cmd, 'y', sizeof(cmd) - 1);
    cmd[sizeof(cmd) - 1] = '\0';
    ck_assert_int_eq(build(&j, NULL, NULL, "--wrap", cmd, NULL), -1);
    ASSERT_ERR_HAS("limit of 1024 bytes");

    /* A stream known only to be longer than the limit. */
    ck_assert_int_eq(sbatch_parse_check_size(1025, false, 1024, err, sizeof(err)), -1);
    ASSERT_ERR_HAS("larger than the limit of 1024 bytes");
    ck_assert_int_eq(sbatch_parse_check_size(1024, true, 1024, err, sizeof(err)), 0);
    ck_assert_int_eq(sbatch_parse_check_size((size_t)1 << 40, true, 0, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_wrap)
{
    char *s = sbatch_parse_wrap_script("echo hi; sleep 1");
    ck_assert_str_eq(s, "#!/bin/sh\necho hi; sleep 1\n");
    free(s);

    struct sbatch_parse_job j;
    ck_assert_int_eq(build(&j, NULL, NULL, "--wrap=hostname", "-J", "w", NULL), 0);
    ck_assert_str_eq(j.script, "#!/bin/sh\nhostname\n");
    ck_assert_str_eq(j.name, "w");
    sbatch_parse_job_free(&j);
    ck_assert_int_eq(build(&j, NULL, NULL, "--wrap", "hostname", NULL), 0);
    ck_assert_str_eq(j.name, "wrap");
    sbatch_parse_job_free(&j);

    /* A script file with --wrap is refused on the command line ... */
    struct sbatch_parse_opts o;
    ck_assert_int_eq(args(&o, NULL, "--wrap=ls", "job.sh", NULL), -1);
    ASSERT_ERR_HAS("script argument not permitted with --wrap option");
    sbatch_parse_opts_free(&o);
    /* ... and by sbatch_parse_build when handed both. */
    ck_assert_int_eq(build(&j, "#!/bin/sh\n", "job.sh", "--wrap=ls", NULL), -1);
    ASSERT_ERR_HAS("not permitted with --wrap");
}
END_TEST

/* ---- --export --------------------------------------------------------------------------- */

static void assert_env(const char *spec, const char *const *want, size_t nwant)
{
    char **env;
    size_t n;
    ck_assert_msg(sbatch_parse_export_env(spec, test_env, &env, &n, err, sizeof(err)) == 0,
                  "%s: %s", spec ? spec : "(null)", err);
    ck_assert_uint_eq(n, nwant);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(env[i], want[i]);
    ck_assert_ptr_null(env[n]);
    for (size_t i = 0; i < n; i++)
        free(env[i]);
    free(env);
}

START_TEST(test_export)
{
    const char *all[] = {"HOME=/home/alice", "PATH=/usr/bin:/bin", "LANG=C", "EMPTY="};
    assert_env(NULL, all, 4);
    assert_env("ALL", all, 4);
    assert_env("all", all, 4);
    assert_env("NONE", NULL, 0);
    const char *named[] = {"LANG=C", "FOO=bar"};
    assert_env("LANG,FOO=bar", named, 2);
    /* Unset names are left out. */
    const char *unset[] = {"HOME=/home/alice"};
    assert_env("NOT_SET,HOME", unset, 1);
    /* ALL plus overrides: replaced in place, new ones appended. */
    const char *over[] = {"HOME=/home/alice", "PATH=/opt/bin", "LANG=C", "EMPTY=", "NEW=1"};
    assert_env("ALL,PATH=/opt/bin,NEW=1", over, 5);
    assert_env("PATH=/opt/bin,ALL,NEW=1", over, 5);
    /* A later value of the same name wins. */
    const char *twice[] = {"A=2"};
    assert_env("A=1,A=2", twice, 1);
    /* Quotes protect commas and are removed. */
    const char *quoted[] = {"LIST=a,b", "Q=x y"};
    assert_env("LIST='a,b',Q=\"x y\"", quoted, 2);
    /* Empty value. */
    const char *empty[] = {"E="};
    assert_env("E=", empty, 1);
    /* NONE in a list just means "not everything". */
    const char *none_list[] = {"X=1"};
    assert_env("NONE,X=1", none_list, 1);

    static const char *const bad[] = {"1BAD", "A-B=1", "A,,B", "=x", ",", "A='x", "B=\"y"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char **env = (char **)1;
        size_t n = 99;
        ck_assert_msg(sbatch_parse_export_env(bad[i], test_env, &env, &n, err, sizeof(err)) == -1,
                      "%s accepted", bad[i]);
        ck_assert_ptr_null(env);
        ck_assert_uint_eq(n, 0);
        ASSERT_ERR_HAS("--export");
    }
    /* An empty environment. */
    char **env;
    size_t n;
    ck_assert_int_eq(sbatch_parse_export_env("ALL", NULL, &env, &n, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(env[0]);
    free(env);
}
END_TEST

/* Build with a given environment (the SBATCH_* variables are read from it). */
static int build_env(struct sbatch_parse_job *job, char **env, const char *script, const char *word)
{
    char *argv[] = {"sbatch", (char *)word, NULL};
    struct sbatch_parse_opts o = {0};
    int si;
    err[0] = '\0';
    memset(job, 0, sizeof(*job));
    int rc = sbatch_parse_parse_args(&o, word ? 2 : 1, argv, &si, err, sizeof(err));
    if (rc == 0) {
        struct sbatch_parse_context c = ctx("e.sh");
        c.environ = env;
        rc = sbatch_parse_build(&o, script, strlen(script), &c, job, err, sizeof(err));
    }
    sbatch_parse_opts_free(&o);
    return rc;
}

/* sbatch(1) INPUT ENVIRONMENT VARIABLES: over the script, under the command line. */
START_TEST(test_sbatch_environment)
{
    static const char script[] = "#!/bin/sh\n#SBATCH -J fromscript -p batch -t 5\ntrue\n";
    char *env[] = {"SBATCH_JOB_NAME=fromenv", "SBATCH_TIMELIMIT=1:00:00",
                   "SBATCH_ACCOUNT=physics",  "SBATCH_OUTPUT=env-%j.out",
                   "SBATCH_MEM_PER_NODE=2G",  "SBATCH_REQUEUE=",
                   "SBATCH_PARTITIONX=no",    NULL};
    struct sbatch_parse_job j;
    ck_assert_int_eq(build_env(&j, env, script, NULL), 0);
    ck_assert_str_eq(j.name, "fromenv");
    ck_assert_str_eq(j.partition, "batch"); /* not in the environment: the script's */
    ck_assert_uint_eq(j.time_min, 60);
    ck_assert_str_eq(j.account, "physics");
    ck_assert_str_eq(j.stdout_path, "env-%j.out");
    ck_assert_uint_eq(j.mem_mb, 2048);
    ck_assert(j.requeue); /* an empty value sets a flag */
    sbatch_parse_job_free(&j);
    ck_assert_int_eq(build_env(&j, env, script, "--job-name=cli"), 0);
    ck_assert_str_eq(j.name, "cli"); /* the command line wins */
    sbatch_parse_job_free(&j);

    /* A flag's variable set to anything but empty, yes or a non-zero number: not set. */
    char *off[] = {"SBATCH_REQUEUE=no", NULL};
    ck_assert_int_eq(build_env(&j, off, script, NULL), 0);
    ck_assert(!j.requeue);
    sbatch_parse_job_free(&j);
    char *on[] = {"SBATCH_REQUEUE=2", "SBATCH_NO_REQUEUE=0", NULL};
    ck_assert_int_eq(build_env(&j, on, script, NULL), 0);
    ck_assert(j.requeue);
    sbatch_parse_job_free(&j);

    /* A refused value names its variable; sbatch exits 255 for it. */
    char *bad[] = {"SBATCH_TIMELIMIT=soon", NULL};
    ck_assert_int_eq(build_env(&j, bad, script, NULL), SBATCH_PARSE_BAD_VALUE);
    ASSERT_ERR_HAS("SBATCH_TIMELIMIT: ");
    ASSERT_ERR_HAS("soon");
}
END_TEST

static Suite *sbatch_suite(void)
{
    Suite *s = suite_create("sbatch");
    TCase *values = check_case(s, "values", (const TTest *[]){test_mem, NULL});
    tcase_add_loop_test(values, test_time_good, 0,
                        (int)(sizeof(good_times) / sizeof(good_times[0])));
    tcase_add_loop_test(values, test_time_bad, 0, (int)(sizeof(bad_times) / sizeof(bad_times[0])));

    check_case(s, "command line",
               (const TTest *[]){test_option_forms, test_every_option, test_bundled_flags,
                                 test_bad_options, test_bad_counts, test_stops_at_script,
                                 test_help_version, NULL});

    check_case(s, "directives",
               (const TTest *[]){test_directives_basic, test_directives_stop_at_first_command,
                                 test_directives_that_are_comments, test_directives_quotes,
                                 test_directives_trailing_comment, test_directives_errors,
                                 test_directives_last_wins, NULL});

    check_case(s, "job",
               (const TTest *[]){test_cli_overrides_directives, test_defaults, test_job_to_spec,
                                 test_requeue_account, test_dependency, test_script_checks,
                                 test_oversized_script, test_wrap, test_export,
                                 test_sbatch_environment, NULL});
    return s;
}

int main(void)
{
    return check_run(sbatch_suite());
}
