/*
 * test_jobenv.c - what a batch job sees (agent/jobenv.c).
 *
 * Pinned: every Slurm variable the monitor sets, with its value from the Launch; Slurm's
 * variables override --export's of the same name while the others keep their order and
 * value; HOME/USER/LOGNAME/SHELL come from passwd only when --export did not set them,
 * PATH is a default only when unset; the optional variables (memory, account, restart
 * count) are absent when there is nothing to say; each name appears once; the node list
 * is Slurm's compressed host list; and the filename patterns (%j %x %u %N %n %% %A %a,
 * zero-padding widths, unknown letters kept, a backslash turning patterns off, the
 * slurm-%j.out default).
 */
#include "check_run.h"
#include "jobenv.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static char *nodes3[] = {"n3", "n1", "n2"};

static Spur__Api__JobSpec spec;
static Spur__Agent__Launch launch;
static const struct jobenv_user alice = {"alice", "/home/alice", "/bin/bash", 1000, 1001};

static void setup(void)
{
    spur__api__job_spec__init(&spec);
    spur__agent__launch__init(&launch);
    spec.name = "myjob";
    spec.partition = "debug";
    spec.ntasks = 6;
    spec.cpus_per_task = 2;
    spec.workdir = "/home/alice/work";
    spec.user = "alice";
    spec.uid = 1000;
    spec.gid = 1001;
    launch.spec = &spec;
    launch.job_id = 42;
    launch.attempt = 1;
    launch.node_list = nodes3;
    launch.n_node_list = 3;
    launch.node_index = 1;
    launch.cpus = 4;
}

/* The value of name in env, NULL when absent; fails the test when it appears twice. */
static const char *env_get(char **env, const char *name)
{
    size_t len = strlen(name);
    const char *found = NULL;
    for (size_t i = 0; env[i] != NULL; i++)
        if (strncmp(env[i], name, len) == 0 && env[i][len] == '=') {
            ck_assert_msg(found == NULL, "%s set twice", name);
            found = env[i] + len + 1;
        }
    return found;
}

static size_t env_index(char **env, const char *entry)
{
    for (size_t i = 0; env[i] != NULL; i++)
        if (strcmp(env[i], entry) == 0)
            return i;
    ck_abort_msg("%s missing", entry);
    return 0;
}

START_TEST(test_slurm_variables)
{
    char **env = jobenv_build(&launch, &alice, "n2", "spur");
    ck_assert_ptr_nonnull(env);
    ck_assert_str_eq(env_get(env, "SLURM_JOB_ID"), "42");
    ck_assert_str_eq(env_get(env, "SLURM_JOBID"), "42");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_NAME"), "myjob");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_NODELIST"), "n[1-3]");
    ck_assert_str_eq(env_get(env, "SLURM_NODELIST"), "n[1-3]");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_NUM_NODES"), "3");
    ck_assert_str_eq(env_get(env, "SLURM_NNODES"), "3");
    ck_assert_str_eq(env_get(env, "SLURM_NTASKS"), "6");
    ck_assert_str_eq(env_get(env, "SLURM_NPROCS"), "6");
    ck_assert_str_eq(env_get(env, "SLURM_CPUS_PER_TASK"), "2");
    ck_assert_str_eq(env_get(env, "SLURM_CPUS_ON_NODE"), "4");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_CPUS_PER_NODE"), "4(x3)");
    ck_assert_str_eq(env_get(env, "SLURM_SUBMIT_DIR"), "/home/alice/work");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_PARTITION"), "debug");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_USER"), "alice");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_UID"), "1000");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_GID"), "1001");
    ck_assert_str_eq(env_get(env, "SLURM_CLUSTER_NAME"), "spur");
    ck_assert_str_eq(env_get(env, "SLURM_NODEID"), "1");
    ck_assert_str_eq(env_get(env, "SLURMD_NODENAME"), "n2");
    ck_assert_str_eq(env_get(env, "ENVIRONMENT"), "BATCH");
    /* Nothing to say: no --mem, no account, first attempt, no submit host known. */
    ck_assert_ptr_null(env_get(env, "SLURM_MEM_PER_NODE"));
    ck_assert_ptr_null(env_get(env, "SLURM_JOB_ACCOUNT"));
    ck_assert_ptr_null(env_get(env, "SLURM_RESTART_COUNT"));
    ck_assert_ptr_null(env_get(env, "SLURM_SUBMIT_HOST"));
    /* --export=NONE: the login variables from passwd, a default PATH. */
    ck_assert_str_eq(env_get(env, "HOME"), "/home/alice");
    ck_assert_str_eq(env_get(env, "USER"), "alice");
    ck_assert_str_eq(env_get(env, "LOGNAME"), "alice");
    ck_assert_str_eq(env_get(env, "SHELL"), "/bin/bash");
    ck_assert_str_eq(env_get(env, "PATH"), JOBENV_DEFAULT_PATH);
    jobenv_free(env);
}
END_TEST

START_TEST(test_optional_variables)
{
    spec.mem_mb = 2048;
    spec.account = "proj7";
    launch.attempt = 3;
    launch.n_node_list = 1;
    launch.node_index = 0;
    char **env = jobenv_build(&launch, &alice, "n3", "c1");
    ck_assert_ptr_nonnull(env);
    ck_assert_str_eq(env_get(env, "SLURM_MEM_PER_NODE"), "2048");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_ACCOUNT"), "proj7");
    ck_assert_str_eq(env_get(env, "SLURM_RESTART_COUNT"), "2");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_CPUS_PER_NODE"), "4");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_NUM_NODES"), "1");
    ck_assert_str_eq(env_get(env, "SLURM_JOB_NODELIST"), "n3");
    ck_assert_str_eq(env_get(env, "SLURM_NODEID"), "0");
    jobenv_free(env);
}
END_TEST

START_TEST(test_export_environment)
{
    char *exported[] = {"FOO=bar",  "SLURM_JOB_ID=999", "HOME=/custom", "PATH=/opt/bin",
                        "NOEQUALS", "FOO=baz",          "EMPTY=",       "ZED=last"};
    spec.env = exported;
    spec.n_env = sizeof(exported) / sizeof(exported[0]);
    char **env = jobenv_build(&launch, &alice, "n2", "spur");
    ck_assert_ptr_nonnull(env);
    /* Slurm's own value wins over the exported one. */
    ck_assert_str_eq(env_get(env, "SLURM_JOB_ID"), "42");
    /* The job's own settings are kept: no passwd HOME, no default PATH. */
    ck_assert_str_eq(env_get(env, "HOME"), "/custom");
    ck_assert_str_eq(env_get(env, "PATH"), "/opt/bin");
    ck_assert_str_eq(env_get(env, "USER"), "alice");
    /* A later entry replaces an earlier one in its place; order is kept. */
    ck_assert_str_eq(env_get(env, "FOO"), "baz");
    ck_assert_str_eq(env_get(env, "EMPTY"), "");
    ck_assert_ptr_null(env_get(env, "NOEQUALS"));
    ck_assert_uint_lt(env_index(env, "FOO=baz"), env_index(env, "HOME=/custom"));
    ck_assert_uint_lt(env_index(env, "PATH=/opt/bin"), env_index(env, "ZED=last"));
    jobenv_free(env);
}
END_TEST

START_TEST(test_nodelist_compressed)
{
    char *nodes[] = {"n10", "login", "n2", "n1", "n3", "gpu07", "gpu08"};
    launch.node_list = nodes;
    launch.n_node_list = sizeof(nodes) / sizeof(nodes[0]);
    char **env = jobenv_build(&launch, &alice, "n2", "spur");
    ck_assert_ptr_nonnull(env);
    ck_assert_str_eq(env_get(env, "SLURM_JOB_NODELIST"), "gpu[07-08],login,n[1-3,10]");
    ck_assert_str_eq(env_get(env, "SLURM_NNODES"), "7");
    jobenv_free(env);
}
END_TEST

static void expect_pattern(const char *pattern, const char *want)
{
    char *got = jobenv_expand(pattern, &launch, "alice", "n2");
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(strcmp(got, want) == 0, "%s: got %s, want %s", pattern ? pattern : "(null)", got,
                  want);
    free(got);
}

START_TEST(test_patterns)
{
    expect_pattern(NULL, "slurm-42.out");
    expect_pattern("", "slurm-42.out");
    expect_pattern("out-%j-%x-%u-%N-%n.log", "out-42-myjob-alice-n2-1.log");
    expect_pattern("%A_%a", "42_4294967294");
    expect_pattern("100%%", "100%");
    expect_pattern("%%j", "%j");
    expect_pattern("%5j.%3n", "00042.001");
    expect_pattern("/abs/%q%j", "/abs/%q42");
    expect_pattern("%2q", "%2q");
    expect_pattern("end%", "end%");
    expect_pattern("end%12", "end%12");
    expect_pattern("lit\\%j\\x", "lit%jx");
    expect_pattern("plain.txt", "plain.txt");
}
END_TEST

/*
 * A width past the 47 digits the formatting buffer held was copied from beyond it (found
 * by fuzz_agentmsg): every width pads, up to the 639 the pattern reader takes.
 */
START_TEST(test_pattern_wide_padding)
{
    char want[700];
    memset(want, '0', 58);
    strcpy(want + 58, "42.out");
    expect_pattern("%60j.out", want);
    memset(want, '0', 638);
    strcpy(want + 638, "1");
    expect_pattern("%639n", want);
    expect_pattern("%6399n", want); /* digits past the reader's limit are skipped */
    memset(want, '0', 54);
    strcpy(want + 54, "4294967294");
    expect_pattern("%64a", want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jobenv");
    const TTest *const tests[] = {test_slurm_variables,
                                  test_optional_variables,
                                  test_export_environment,
                                  test_nodelist_compressed,
                                  test_patterns,
                                  test_pattern_wide_padding,
                                  NULL};
    TCase *tc = check_case(s, "jobenv", tests);
    tcase_add_checked_fixture(tc, setup, NULL);
    return check_run(s);
}
