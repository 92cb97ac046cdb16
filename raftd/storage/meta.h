/*
 * meta.h - the Raft hard state (current term, vote) in state_dir/meta.
 *
 * Guarantees:
 *   - meta_store() replaces the file atomically: the new bytes go to meta.tmp, which is
 *     fdatasync'ed, renamed over meta, and the directory is fsync'ed, all before it
 *     returns. A crash at any point leaves either the old or the new hard state, whole.
 *     (With sync->fsync false the same steps run without the syncs.)
 *   - meta_load() never returns a hard state whose checksum fails: a damaged meta file is
 *     DISKIO_ECORRUPT naming the file and offset, because silently starting at an older
 *     term or without the recorded vote could let this node vote twice in one term.
 *   - A missing meta file is not an error: it is the state of a node that never voted
 *     (term 0, vote 0), and *found tells the caller so.
 *
 * The encoding functions are pure and the I/O functions work relative to a directory
 * descriptor, so tests can call both directly. One thread at a time may call meta_store()
 * for a directory (the storage writer thread after open).
 */
#ifndef SPUR_META_H
#define SPUR_META_H

#include "diskio.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_FILE     "meta"
#define META_TMP_FILE "meta.tmp"
#define META_SIZE     64

struct meta_state {
    uint64_t term;
    uint64_t vote; /* node id voted for in term; 0: none */
};

/* Encode st into exactly META_SIZE bytes. */
void meta_encode(const struct meta_state *st, uint8_t out[META_SIZE]);
/*
 * Decode and validate len bytes. Returns 0, or -1 with *why (a static string) and *at
 * (the byte offset of the bad field) set.
 */
int meta_decode(const uint8_t *buf, size_t len, struct meta_state *st, const char **why,
                size_t *at);

/*
 * Read dir/meta. dirfd is the open directory, dirpath its name for messages. A leftover
 * meta.tmp (a store interrupted before its rename) is removed. Returns DISKIO_OK (with
 * *found false and st zeroed when there is no meta file), DISKIO_ECORRUPT or DISKIO_EIO.
 */
int meta_load(int dirfd, const char *dirpath, struct meta_state *st, bool *found,
              struct diskio_err *err);

/* Replace dir/meta with st, durably (see above). Returns DISKIO_OK or DISKIO_EIO. */
int meta_store(int dirfd, const char *dirpath, const struct meta_state *st,
               const struct diskio_sync *sync, struct diskio_err *err);

#endif
