/*
 * meta.c - the hard state file; see meta.h for the guarantees.
 *
 * ON-DISK FORMAT of state_dir/meta (version 1): exactly 64 bytes, little-endian.
 *
 *     offset size field
 *          0    8 magic "SPURMETA"
 *          8    4 version, 1
 *         12    4 length of the record, 64
 *         16    8 term
 *         24    8 vote (node id; 0 = none)
 *         32   28 reserved, zero
 *         60    4 CRC-32C of bytes 0..59
 *
 * Update: write the 64 bytes to meta.tmp, fdatasync it, rename(meta.tmp, meta), fsync the
 * directory. rename() replaces the name atomically, so a reader sees the old file or the
 * new one, never a mix; the fdatasync before the rename makes sure the name never points
 * at a file whose data did not reach the disk. A meta.tmp found at start-up is what an
 * interrupted update left; its content was never promised to anyone, so it is removed.
 *
 * Why not two checksummed slots in one file (one fdatasync per update instead of two
 * syncs)? With two slots a checksum failure in the newer slot cannot be told apart from a
 * torn write, so recovery would have to fall back to the older slot - and if the failure
 * was decay of a slot whose vote had already been sent, the node could vote twice. With
 * one file, any checksum failure is corruption and stops the node. Hard-state changes
 * happen at elections only, so the second sync is cheap where it matters.
 */
#include "meta.h"

#include "crc32c.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define META_MAGIC   "SPURMETA"
#define META_VERSION 1
#define META_CRC_OFF 60

void meta_encode(const struct meta_state *st, uint8_t out[META_SIZE])
{
    memset(out, 0, META_SIZE);
    memcpy(out, META_MAGIC, 8);
    diskio_put_le32(out + 8, META_VERSION);
    diskio_put_le32(out + 12, META_SIZE);
    diskio_put_le64(out + 16, st->term);
    diskio_put_le64(out + 24, st->vote);
    diskio_put_le32(out + META_CRC_OFF, crc32c_update(0, out, META_CRC_OFF));
}

int meta_decode(const uint8_t *buf, size_t len, struct meta_state *st, const char **why, size_t *at)
{
    *at = 0;
    if (len != META_SIZE) {
        *why = len < META_SIZE ? "file shorter than 64 bytes" : "file longer than 64 bytes";
        *at = len < META_SIZE ? len : META_SIZE;
        return -1;
    }
    if (memcmp(buf, META_MAGIC, 8) != 0) {
        *why = "bad magic (not a spur meta file)";
        return -1;
    }
    if (diskio_get_le32(buf + META_CRC_OFF) != crc32c_update(0, buf, META_CRC_OFF)) {
        *why = "checksum mismatch";
        *at = META_CRC_OFF;
        return -1;
    }
    if (diskio_get_le32(buf + 8) != META_VERSION) {
        *why = "unsupported version";
        *at = 8;
        return -1;
    }
    if (diskio_get_le32(buf + 12) != META_SIZE) {
        *why = "bad record length";
        *at = 12;
        return -1;
    }
    for (size_t i = 32; i < META_CRC_OFF; i++) {
        if (buf[i] != 0) {
            *why = "reserved bytes not zero";
            *at = i;
            return -1;
        }
    }
    st->term = diskio_get_le64(buf + 16);
    st->vote = diskio_get_le64(buf + 24);
    return 0;
}

int meta_load(int dirfd, const char *dirpath, struct meta_state *st, bool *found,
              struct diskio_err *err)
{
    uint8_t buf[META_SIZE + 1];
    const char *why;
    size_t at;
    ssize_t n;
    int fd;

    memset(st, 0, sizeof(*st));
    *found = false;
    if (unlinkat(dirfd, META_TMP_FILE, 0) == 0)
        log_event(LOG_INFO, "storage", "removed an interrupted hard state update",
                  "dir=%s file=%s", log_q(dirpath), META_TMP_FILE);
    else if (errno != ENOENT)
        return diskio_fail_errno(err, errno, "storage: remove %s/%s", dirpath, META_TMP_FILE);

    fd = openat(dirfd, META_FILE, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return DISKIO_OK;
        return diskio_fail_errno(err, errno, "storage: open %s/%s", dirpath, META_FILE);
    }
    n = diskio_pread_full(fd, buf, sizeof(buf), 0);
    if (n < 0) {
        int e = errno;
        close(fd);
        return diskio_fail_errno(err, e, "storage: read %s/%s", dirpath, META_FILE);
    }
    close(fd);
    if (meta_decode(buf, (size_t)n, st, &why, &at) != 0) {
        memset(st, 0, sizeof(*st));
        return diskio_fail(err, DISKIO_ECORRUPT,
                           "storage: corrupt hard state file %s/%s at offset %zu: %s", dirpath,
                           META_FILE, at, why);
    }
    *found = true;
    return DISKIO_OK;
}

int meta_store(int dirfd, const char *dirpath, const struct meta_state *st,
               const struct diskio_sync *sync, struct diskio_err *err)
{
    uint8_t buf[META_SIZE];
    int fd;

    meta_encode(st, buf);
    fd = openat(dirfd, META_TMP_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return diskio_fail_errno(err, errno, "storage: create %s/%s", dirpath, META_TMP_FILE);
    if (diskio_pwrite_full(fd, buf, sizeof(buf), 0) < 0) {
        int e = errno;
        close(fd);
        return diskio_fail_errno(err, e, "storage: write %s/%s", dirpath, META_TMP_FILE);
    }
    if (diskio_sync_fd(sync, fd, true) < 0) {
        int e = errno;
        close(fd);
        return diskio_fail_errno(err, e, "storage: fdatasync %s/%s", dirpath, META_TMP_FILE);
    }
    if (close(fd) < 0)
        return diskio_fail_errno(err, errno, "storage: close %s/%s", dirpath, META_TMP_FILE);
    if (renameat(dirfd, META_TMP_FILE, dirfd, META_FILE) < 0)
        return diskio_fail_errno(err, errno, "storage: rename %s/%s to %s", dirpath, META_TMP_FILE,
                                 META_FILE);
    if (diskio_sync_dir(sync, dirfd) < 0)
        return diskio_fail_errno(err, errno, "storage: fsync directory %s", dirpath);
    return DISKIO_OK;
}
