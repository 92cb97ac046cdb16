/*
 * clusterkey.c - cluster key files and keyrings; contract in clusterkey.h.
 *
 * Loading opens the file first and asks the open descriptor (fstat) what it is, so the
 * checks and the read are about the same file even if the path is swapped under us. It
 * follows symbolic links on purpose: a Kubernetes Secret volume presents every key as a
 * link into a "..data" directory. The mode check is the one MUNGE and Slurm make of their
 * keys: a key anyone but its owner may read is no longer a secret, and one others may
 * write could be replaced, so both refuse the file and say how to fix it.
 *
 * The id is an HMAC of a fixed label under the key, never a hash of the key alone, so a
 * printed id gives nothing a dictionary of plain digests could match.
 *
 * Generation writes 32 bytes of RAND_bytes() to a file created with O_CREAT|O_EXCL (never
 * replacing a key: a replaced key would lock the member out of its own cluster) and
 * O_NOFOLLOW (a link planted at the path cannot redirect the write), fsyncs the file and
 * then its directory so the key survives a crash right after `spurctld keygen`.
 */
#include "clusterkey.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLUSTERKEY_ID_LABEL "spur cluster key id v1"

static void copy_str(char *dst, size_t dstlen, const char *src)
{
    snprintf(dst, dstlen, "%s", src != NULL ? src : "");
}

static bool is_placeholder(const uint8_t *b, size_t len)
{
    static const char ph[] = CLUSTERKEY_PLACEHOLDER;
    size_t n = sizeof(ph) - 1;
    if (len < n || memcmp(b, ph, n) != 0)
        return false;
    /* The placeholder as it is, or as an editor or `echo` left it. */
    const uint8_t *rest = b + n;
    size_t rlen = len - n;
    return rlen == 0 || (rlen == 1 && rest[0] == '\n') ||
           (rlen == 2 && rest[0] == '\r' && rest[1] == '\n');
}

/* HMAC-SHA-256(key, label) truncated to the id. Returns 0 or -1. */
static int key_id(const uint8_t *key, size_t len, uint8_t id[CLUSTERKEY_ID_LEN])
{
    uint8_t mac[32];
    size_t maclen = 0;
    static const char label[] = CLUSTERKEY_ID_LABEL;
    if (EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, len, (const unsigned char *)label,
                  sizeof(label) - 1, mac, sizeof(mac), &maclen) == NULL ||
        maclen != sizeof(mac))
        return -1;
    memcpy(id, mac, CLUSTERKEY_ID_LEN);
    return 0;
}

int clusterkey_from_bytes(struct clusterkey *k, const void *bytes, size_t len, const char *origin,
                          char *err, size_t errlen)
{
    const char *o = origin != NULL && origin[0] != '\0' ? origin : "(key)";
    memset(k, 0, sizeof(*k));
    if (len < CLUSTERKEY_MIN_LEN || len > CLUSTERKEY_MAX_LEN) {
        snprintf(err, errlen,
                 "auth: key file %s: holds %zu bytes, a key has %d to %d "
                 "(`spurctld keygen FILE` writes one)",
                 o, len, CLUSTERKEY_MIN_LEN, CLUSTERKEY_MAX_LEN);
        return -1;
    }
    if (is_placeholder(bytes, len)) {
        snprintf(err, errlen,
                 "auth: key file %s: holds the placeholder of the example Secret, which "
                 "everyone can read; put a key of your own there (`spurctld keygen FILE`)",
                 o);
        return -1;
    }
    memcpy(k->bytes, bytes, len);
    k->len = len;
    if (key_id(k->bytes, k->len, k->id) != 0) {
        OPENSSL_cleanse(k, sizeof(*k));
        snprintf(err, errlen, "auth: key file %s: cannot compute the key id: OpenSSL failed", o);
        return -1;
    }
    for (size_t i = 0; i < CLUSTERKEY_ID_LEN; i++)
        snprintf(k->id_hex + 2 * i, 3, "%02x", k->id[i]);
    copy_str(k->origin, sizeof(k->origin), o);
    return 0;
}

int clusterkey_load(struct clusterkey *k, const char *path, char *err, size_t errlen)
{
    memset(k, 0, sizeof(*k));
    if (path == NULL || path[0] == '\0') {
        snprintf(err, errlen, "auth: key file: no path given (auth.key_file)");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "auth: key file %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "auth: key file %s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "auth: key file %s: not a regular file", path);
        close(fd);
        return -1;
    }
    /*
     * Others: never. The group: never writing; reading only when root owns the file,
     * which is what Kubernetes makes of a Secret in a pod with an fsGroup (root:<fsGroup>,
     * 0440, whatever defaultMode says), and what PostgreSQL allows for its key.
     */
    bool group_read_ok = st.st_uid == 0;
    if ((st.st_mode & 007) != 0 || (st.st_mode & 020) != 0 ||
        ((st.st_mode & 040) != 0 && !group_read_ok)) {
        snprintf(err, errlen,
                 "auth: key file %s: mode %04o lets group or others at it; a key must be "
                 "readable by its owner only: chmod 600 %s (a root-owned key may also be "
                 "group-readable, 0640)",
                 path, (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return -1;
    }
    if (st.st_size < CLUSTERKEY_MIN_LEN || st.st_size > CLUSTERKEY_MAX_LEN) {
        snprintf(err, errlen,
                 "auth: key file %s: holds %lld bytes, a key has %d to %d "
                 "(`spurctld keygen FILE` writes one)",
                 path, (long long)st.st_size, CLUSTERKEY_MIN_LEN, CLUSTERKEY_MAX_LEN);
        close(fd);
        return -1;
    }
    /* One byte more than a key may have, so a file that grew since fstat is seen. */
    uint8_t buf[CLUSTERKEY_MAX_LEN + 1];
    size_t got = 0;
    while (got < sizeof(buf)) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "auth: key file %s: cannot read: %s", path, strerror(errno));
            OPENSSL_cleanse(buf, sizeof(buf));
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    int rc = clusterkey_from_bytes(k, buf, got, path, err, errlen);
    OPENSSL_cleanse(buf, sizeof(buf));
    return rc;
}

static bool same_key(const struct clusterkey *a, const struct clusterkey *b)
{
    return a->len == b->len && CRYPTO_memcmp(a->bytes, b->bytes, a->len) == 0;
}

int keyring_add(struct keyring *kr, const struct clusterkey *k)
{
    for (size_t i = 0; i < kr->n; i++)
        if (same_key(&kr->keys[i], k))
            return 0; /* one key, however many files hold it */
    if (kr->n >= CLUSTERKEY_MAX_KEYS)
        return -1;
    kr->keys[kr->n++] = *k;
    return 0;
}

int keyring_load(struct keyring *kr, const char *path, const char *next_path, char *err,
                 size_t errlen)
{
    memset(kr, 0, sizeof(*kr));
    struct clusterkey k;
    if (clusterkey_load(&k, path, err, errlen) != 0)
        return -1;
    keyring_add(kr, &k);
    if (next_path != NULL && next_path[0] != '\0') {
        if (clusterkey_load(&k, next_path, err, errlen) != 0) {
            OPENSSL_cleanse(&k, sizeof(k));
            keyring_wipe(kr);
            return -1;
        }
        keyring_add(kr, &k);
    }
    OPENSSL_cleanse(&k, sizeof(k));
    return 0;
}

const struct clusterkey *keyring_find(const struct keyring *kr, const uint8_t id[CLUSTERKEY_ID_LEN])
{
    for (size_t i = 0; i < kr->n; i++)
        if (memcmp(kr->keys[i].id, id, CLUSTERKEY_ID_LEN) == 0)
            return &kr->keys[i];
    return NULL;
}

void keyring_wipe(struct keyring *kr)
{
    OPENSSL_cleanse(kr, sizeof(*kr));
}

void keyring_ids(const struct keyring *kr, char *out, size_t outlen)
{
    if (outlen == 0)
        return;
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < kr->n; i++) {
        int w = snprintf(out + used, outlen - used, "%s%s", i > 0 ? "," : "", kr->keys[i].id_hex);
        if (w < 0 || (size_t)w >= outlen - used)
            return;
        used += (size_t)w;
    }
    if (kr->n == 0)
        snprintf(out, outlen, "none");
}

/* fsync a directory; returns 0 or -1 (errno set). */
static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int clusterkey_generate(const char *path, char *err, size_t errlen)
{
    if (path == NULL || path[0] == '\0') {
        snprintf(err, errlen, "auth: keygen: no file given");
        return -1;
    }
    char dir[4096];
    size_t plen = strlen(path);
    if (plen >= sizeof(dir)) {
        snprintf(err, errlen, "auth: keygen %s: path too long", path);
        return -1;
    }
    memcpy(dir, path, plen + 1);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (slash != NULL && slash != dir && mkdir_parents(dir, 0755) != 0) {
        snprintf(err, errlen, "auth: keygen %s: cannot make directory %s: %s", path, dir,
                 strerror(errno));
        return -1;
    }

    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            return 1;
        snprintf(err, errlen, "auth: keygen %s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    uint8_t key[CLUSTERKEY_GEN_LEN];
    const char *what = NULL;
    int e = 0;
    /* The umask may only have narrowed 0600; make the mode exactly that. */
    if (fchmod(fd, 0600) != 0) {
        what = "cannot set mode 0600";
        e = errno;
    } else if (RAND_bytes(key, sizeof(key)) != 1) {
        what = "no random bytes from OpenSSL";
    } else if (write_all(fd, key, sizeof(key)) != 0) {
        what = "cannot write";
        e = errno;
    } else if (fsync(fd) != 0) {
        what = "cannot fsync";
        e = errno;
    }
    OPENSSL_cleanse(key, sizeof(key));
    if (close(fd) != 0 && what == NULL) {
        what = "cannot close";
        e = errno;
    }
    if (what == NULL && fsync_dir(dir) != 0) {
        what = "cannot fsync its directory";
        e = errno;
    }
    if (what != NULL) {
        unlink(path);
        snprintf(err, errlen, "auth: keygen %s: %s%s%s", path, what, e != 0 ? ": " : "",
                 e != 0 ? strerror(e) : "");
        return -1;
    }
    return 0;
}
