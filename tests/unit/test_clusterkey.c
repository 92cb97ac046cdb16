/*
 * test_clusterkey.c - cluster key files and keyrings (common/clusterkey.c).
 *
 * Pinned here: a key file readable or writable by group or others refused with its mode
 * and "chmod 600" in the message, 0600 and 0400 accepted; a missing file, a directory, a
 * key of 31 or 1025 bytes refused, 32 and 1024 accepted; the example Secret's placeholder
 * refused as it is and with a trailing newline; the id is HMAC-SHA-256(key, "spur cluster
 * key id v1") cut to 8 bytes (a known answer from Python's hmac), differs per key
 * and is the same for the same key; a keyring with a next key holds both, the same key
 * twice is one; clusterkey_generate() makes a 0600 file of 32 random bytes (and its
 * directories), never replaces an existing file or follows a planted link (returns 1).
 */
#include "check_run.h"
#include "clusterkey.h"
#include "scratch.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64];
static char tdir[96];

static void setup(void)
{
    scratch_make(tdir, sizeof(tdir), base);
    umask(022);
}

static void teardown(void)
{
    scratch_remove(tdir);
}

/* Write len bytes of pattern (seed + i) to tdir/name with mode; its path into path. */
static void put_key(char *path, size_t plen, const char *name, size_t len, unsigned seed,
                    mode_t mode)
{
    snprintf(path, plen, "%s/%s", tdir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)(seed + i * 7);
        ck_assert_int_eq(write(fd, &b, 1), 1);
    }
    ck_assert_int_eq(fchmod(fd, mode), 0);
    close(fd);
}

static void put_text(char *path, size_t plen, const char *name, const char *text)
{
    snprintf(path, plen, "%s/%s", tdir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

START_TEST(test_mode_refused)
{
    static const mode_t bad[] = {0644, 0604, 0602, 0620, 0660, 0666, 0700 | 0004};
    char path[160], err[512];
    struct clusterkey k;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        put_key(path, sizeof(path), "key", 32, 1, bad[i]);
        ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), -1);
        char want[16];
        snprintf(want, sizeof(want), "%04o", (unsigned)bad[i]);
        ck_assert_msg(strstr(err, want) != NULL, "mode %s not named: %s", want, err);
        ck_assert_ptr_nonnull(strstr(err, "chmod 600"));
        ck_assert_ptr_nonnull(strstr(err, path));
    }
    put_key(path, sizeof(path), "key", 32, 1, 0600);
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), 0);
    put_key(path, sizeof(path), "key", 32, 1, 0400);
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), 0);
    ck_assert_uint_eq(k.len, 32);
    ck_assert_str_eq(k.origin, path);
}
END_TEST

/* A root-owned key may be group-readable (a Kubernetes Secret with an fsGroup); one owned
 * by anyone else may not. */
START_TEST(test_group_read_root_only)
{
    char path[160], err[512];
    struct clusterkey k;
    if (geteuid() != 0)
        return; /* chown to root and away from it needs root */
    static const mode_t ok[] = {0640, 0440};
    for (size_t i = 0; i < 2; i++) {
        put_key(path, sizeof(path), "gkey", 32, 2, ok[i]);
        ck_assert_int_eq(chown(path, 0, 0), 0);
        ck_assert_msg(clusterkey_load(&k, path, err, sizeof(err)) == 0, "%s", err);
    }
    put_key(path, sizeof(path), "gkey", 32, 2, 0640);
    ck_assert_int_eq(chown(path, 65534, 65534), 0);
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "0640"));
    put_key(path, sizeof(path), "gkey", 32, 2, 0660);
    ck_assert_int_eq(chown(path, 0, 0), 0);
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_missing_and_not_regular)
{
    char path[160], err[512];
    struct clusterkey k;
    snprintf(path, sizeof(path), "%s/none", tdir);
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "No such file"));
    ck_assert_ptr_nonnull(strstr(err, path));
    snprintf(path, sizeof(path), "%s/dir", tdir);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
    ck_assert_int_eq(clusterkey_load(&k, "", err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_symlink_followed)
{
    /* A Kubernetes Secret volume presents keys as links: they must load. */
    char path[160], link[160], err[512];
    struct clusterkey k;
    put_key(path, sizeof(path), "real", 40, 3, 0400);
    snprintf(link, sizeof(link), "%s/link", tdir);
    ck_assert_int_eq(symlink(path, link), 0);
    ck_assert_int_eq(clusterkey_load(&k, link, err, sizeof(err)), 0);
    ck_assert_uint_eq(k.len, 40);
}
END_TEST

START_TEST(test_sizes)
{
    static const struct {
        size_t len;
        int rc;
    } cases[] = {{0, -1}, {1, -1}, {31, -1}, {32, 0}, {33, 0}, {1024, 0}, {1025, -1}, {4096, -1}};
    char path[160], err[512];
    struct clusterkey k;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        put_key(path, sizeof(path), "key", cases[i].len, 9, 0600);
        int rc = clusterkey_load(&k, path, err, sizeof(err));
        ck_assert_msg(rc == cases[i].rc, "%zu bytes: rc %d (%s)", cases[i].len, rc, err);
        if (rc == 0) {
            ck_assert_uint_eq(k.len, cases[i].len);
        } else {
            char want[32];
            snprintf(want, sizeof(want), "holds %zu bytes", cases[i].len);
            ck_assert_msg(strstr(err, want) != NULL, "%s", err);
        }
    }
    uint8_t big[CLUSTERKEY_MAX_LEN + 1] = {1};
    ck_assert_int_eq(clusterkey_from_bytes(&k, big, sizeof(big), "x", err, sizeof(err)), -1);
    ck_assert_int_eq(clusterkey_from_bytes(&k, big, 31, "x", err, sizeof(err)), -1);
    ck_assert_int_eq(clusterkey_from_bytes(&k, big, 32, "x", err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_placeholder_refused)
{
    char path[160], err[512];
    struct clusterkey k;
    put_text(path, sizeof(path), "ph", CLUSTERKEY_PLACEHOLDER);
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "placeholder"));
    put_text(path, sizeof(path), "ph", CLUSTERKEY_PLACEHOLDER "\n");
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "placeholder"));
    put_text(path, sizeof(path), "ph", CLUSTERKEY_PLACEHOLDER "\r\n");
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), -1);
    /* Only the placeholder: a key that merely starts with it is some operator's key. */
    put_text(path, sizeof(path), "ph", CLUSTERKEY_PLACEHOLDER "-and-more");
    ck_assert_int_eq(clusterkey_load(&k, path, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_id)
{
    uint8_t a[32], b[32];
    for (int i = 0; i < 32; i++) {
        a[i] = (uint8_t)i;
        b[i] = (uint8_t)i;
    }
    b[31] ^= 1;
    char err[256];
    struct clusterkey ka, ka2, kb;
    ck_assert_int_eq(clusterkey_from_bytes(&ka, a, 32, "a", err, sizeof(err)), 0);
    ck_assert_int_eq(clusterkey_from_bytes(&ka2, a, 32, "a2", err, sizeof(err)), 0);
    ck_assert_int_eq(clusterkey_from_bytes(&kb, b, 32, "b", err, sizeof(err)), 0);
    ck_assert_mem_eq(ka.id, ka2.id, CLUSTERKEY_ID_LEN);
    ck_assert_mem_ne(ka.id, kb.id, CLUSTERKEY_ID_LEN);
    ck_assert_str_ne(ka.id_hex, kb.id_hex);

    /*
     * The id of the key 00 01 .. 1f: HMAC-SHA-256(key, "spur cluster key id v1")[0..8), as
     * Python's hmac module computes it (not a plain SHA-256 of the key: 630dcd2966c43366).
     */
    ck_assert_str_eq(ka.id_hex, "6580e84d3ec7f7df");
    ck_assert_uint_eq(ka.id[0], 0x65);
    ck_assert_uint_eq(ka.id[7], 0xdf);
    ck_assert_uint_eq(strlen(ka.id_hex), 16);
}
END_TEST

START_TEST(test_keyring_next)
{
    char cur[160], next[160], same[160], err[512];
    struct keyring kr;
    put_key(cur, sizeof(cur), "cur", 32, 1, 0600);
    put_key(next, sizeof(next), "next", 32, 2, 0600);
    put_key(same, sizeof(same), "same", 32, 1, 0600); /* the bytes of cur */

    ck_assert_int_eq(keyring_load(&kr, cur, NULL, err, sizeof(err)), 0);
    ck_assert_uint_eq(kr.n, 1);
    ck_assert_int_eq(keyring_load(&kr, cur, "", err, sizeof(err)), 0);
    ck_assert_uint_eq(kr.n, 1);

    ck_assert_int_eq(keyring_load(&kr, cur, next, err, sizeof(err)), 0);
    ck_assert_uint_eq(kr.n, 2);
    ck_assert_str_eq(kr.keys[0].origin, cur);
    ck_assert_str_eq(kr.keys[1].origin, next);
    ck_assert_ptr_eq(keyring_find(&kr, kr.keys[1].id), &kr.keys[1]);
    ck_assert_ptr_eq(keyring_find(&kr, kr.keys[0].id), &kr.keys[0]);
    uint8_t other[CLUSTERKEY_ID_LEN] = {0};
    ck_assert_ptr_null(keyring_find(&kr, other));
    char ids[64], want[64];
    keyring_ids(&kr, ids, sizeof(ids));
    snprintf(want, sizeof(want), "%s,%s", kr.keys[0].id_hex, kr.keys[1].id_hex);
    ck_assert_str_eq(ids, want);

    /* The same key in two files (or one file twice) is one key. */
    ck_assert_int_eq(keyring_load(&kr, cur, same, err, sizeof(err)), 0);
    ck_assert_uint_eq(kr.n, 1);
    ck_assert_int_eq(keyring_load(&kr, cur, cur, err, sizeof(err)), 0);
    ck_assert_uint_eq(kr.n, 1);

    /* A bad next key fails the whole load, naming that file. */
    char bad[160];
    put_key(bad, sizeof(bad), "bad", 32, 5, 0644);
    ck_assert_int_eq(keyring_load(&kr, cur, bad, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, bad));
    ck_assert_uint_eq(kr.n, 0);

    /* A full ring refuses a third key; the wipe leaves nothing. */
    ck_assert_int_eq(keyring_load(&kr, cur, next, err, sizeof(err)), 0);
    struct clusterkey k3;
    uint8_t b3[40];
    memset(b3, 0x5a, sizeof(b3));
    ck_assert_int_eq(clusterkey_from_bytes(&k3, b3, sizeof(b3), "k3", err, sizeof(err)), 0);
    ck_assert_int_eq(keyring_add(&kr, &k3), -1);
    ck_assert_int_eq(keyring_add(&kr, &kr.keys[0]), 0); /* already there */
    ck_assert_uint_eq(kr.n, 2);
    keyring_wipe(&kr);
    ck_assert_uint_eq(kr.n, 0);
    static const uint8_t zero[CLUSTERKEY_MAX_LEN];
    ck_assert_mem_eq(kr.keys[0].bytes, zero, sizeof(zero));
}
END_TEST

START_TEST(test_generate)
{
    char path[192], err[512];
    snprintf(path, sizeof(path), "%s/etc/spur/spur.key", tdir);
    ck_assert_int_eq(clusterkey_generate(path, err, sizeof(err)), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    ck_assert_int_eq(st.st_size, CLUSTERKEY_GEN_LEN);
    char dir[192];
    snprintf(dir, sizeof(dir), "%s/etc/spur", tdir);
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0755);

    struct clusterkey k1, k2;
    ck_assert_int_eq(clusterkey_load(&k1, path, err, sizeof(err)), 0);
    /* Never replaced: a second run says "exists" and leaves the key alone. */
    ck_assert_int_eq(clusterkey_generate(path, err, sizeof(err)), 1);
    ck_assert_int_eq(clusterkey_load(&k2, path, err, sizeof(err)), 0);
    ck_assert_mem_eq(k1.bytes, k2.bytes, k1.len);

    /* Two generated keys differ (random bytes, not a constant). */
    char other[192];
    snprintf(other, sizeof(other), "%s/etc/spur/other.key", tdir);
    ck_assert_int_eq(clusterkey_generate(other, err, sizeof(err)), 0);
    ck_assert_int_eq(clusterkey_load(&k2, other, err, sizeof(err)), 0);
    ck_assert_mem_ne(k1.bytes, k2.bytes, k1.len);
    ck_assert_str_ne(k1.id_hex, k2.id_hex);

    /* The umask cannot loosen nor tighten the mode. */
    umask(0);
    snprintf(other, sizeof(other), "%s/u0.key", tdir);
    ck_assert_int_eq(clusterkey_generate(other, err, sizeof(err)), 0);
    ck_assert_int_eq(stat(other, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    umask(0277);
    snprintf(other, sizeof(other), "%s/u277.key", tdir);
    ck_assert_int_eq(clusterkey_generate(other, err, sizeof(err)), 0);
    ck_assert_int_eq(stat(other, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    umask(022);
}
END_TEST

START_TEST(test_generate_no_follow)
{
    /* A link planted at the path (even a dangling one) is not followed. */
    char path[160], target[160], err[512];
    snprintf(target, sizeof(target), "%s/target", tdir);
    snprintf(path, sizeof(path), "%s/key", tdir);
    ck_assert_int_eq(symlink(target, path), 0);
    ck_assert_int_eq(clusterkey_generate(path, err, sizeof(err)), 1);
    ck_assert_int_eq(access(target, F_OK), -1);

    /* An unwritable place is an error that names the file. */
    snprintf(path, sizeof(path), "%s/notadir", tdir);
    put_text(target, sizeof(target), "notadir", "x");
    snprintf(path, sizeof(path), "%s/notadir/key", tdir);
    ck_assert_int_eq(clusterkey_generate(path, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, path));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("clusterkey");
    TCase *tc = check_case(s, "clusterkey",
                           (const TTest *[]){test_mode_refused, test_group_read_root_only,
                                             test_missing_and_not_regular,
                                             test_symlink_followed, test_sizes,
                                             test_placeholder_refused, test_id, test_keyring_next,
                                             test_generate, test_generate_no_follow, NULL});
    tcase_add_checked_fixture(tc, setup, teardown);
    return scratch_run(s, base, sizeof(base), "clusterkey");
}
