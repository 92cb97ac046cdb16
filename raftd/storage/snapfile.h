/*
 * snapfile.h - snapshot files in the state directory.
 *
 * Guarantees:
 *   - A file named snap-<index>-<term>.snap is complete: it is written under a temporary
 *     name, fdatasync'ed, renamed into place, and the directory is fsync'ed before
 *     snapfile_commit() returns. A crash leaves at most a *.tmp file, which
 *     snapfile_remove_tmp() deletes at start-up and nothing else ever reads.
 *   - A snapshot is never handed out unchecked: snapfile_verify() reads the whole file and
 *     checks the header checksum, the sizes and the checksum of the configuration and data
 *     bytes; snapfile_read_data() checks the data again as it reads it. Any mismatch is
 *     DISKIO_ECORRUPT naming the file and offset.
 *   - snapfile_retain() keeps the newest `keep` snapshots (by index, then term) and deletes
 *     older ones; files renamed *.corrupt by snapfile_quarantine() are left for the operator
 *     and never counted or read.
 *
 * Threads: a writer object belongs to the thread using it. Several writers may run at once
 * in one directory (their temporary names are unique). snapfile_retain() and commits that
 * race with it must be serialized by the caller (the storage facade holds a mutex).
 */
#ifndef SPUR_SNAPFILE_H
#define SPUR_SNAPFILE_H

#include "diskio.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAPFILE_HEADER_SIZE 64
#define SNAPFILE_NAME_MAX    64
#define SNAPFILE_MAX_CONFIG  (16u << 20) /* refuse larger configuration blobs */

struct snapfile_meta {
    uint64_t index;
    uint64_t term;
    uint64_t data_len;
    uint32_t config_len;
    uint32_t crc; /* CRC-32C of the configuration bytes followed by the data bytes */
};

/* "snap-<index as 16 hex>-<term as 16 hex>.snap" */
void snapfile_name(char out[SNAPFILE_NAME_MAX], uint64_t index, uint64_t term);
/* 0 when name is exactly a snapshot file name (fills index and term), else -1. */
int snapfile_parse_name(const char *name, uint64_t *index, uint64_t *term);

void snapfile_encode_header(const struct snapfile_meta *m, uint8_t out[SNAPFILE_HEADER_SIZE]);
/* 0, or -1 with *why (static) and *at (offset of the bad field) set. */
int snapfile_decode_header(const uint8_t *buf, struct snapfile_meta *m, const char **why,
                           size_t *at);

/* One snapshot file found in the directory. */
struct snapfile_entry {
    uint64_t index;
    uint64_t term;
    char name[SNAPFILE_NAME_MAX];
};

/*
 * The snapshot files of the directory, oldest first. *out is malloc'ed, owned by the
 * caller (free()); NULL when there are none.
 */
int snapfile_list(int dirfd, const char *dirpath, struct snapfile_entry **out, size_t *n,
                  struct diskio_err *err);
/* Delete leftover temporary snapshot files (start-up only: not while a writer runs). */
int snapfile_remove_tmp(int dirfd, const char *dirpath, struct diskio_err *err);
/* Keep the newest `keep` snapshots, delete the rest, fsync the directory if any went. */
int snapfile_retain(int dirfd, const char *dirpath, size_t keep, const struct diskio_sync *sync,
                    struct diskio_err *err);
/* Rename name to name.corrupt (and fsync the directory) so it is never read again. */
int snapfile_quarantine(int dirfd, const char *dirpath, const char *name,
                        const struct diskio_sync *sync, struct diskio_err *err);

/*
 * Check the whole file and return its header in *m. When config is not NULL, *config gets
 * a malloc'ed copy of the configuration bytes (NULL when config_len is 0), owned by the
 * caller. Returns DISKIO_OK, DISKIO_ECORRUPT, DISKIO_EIO or DISKIO_ENOMEM.
 */
int snapfile_verify(int dirfd, const char *dirpath, const char *name, struct snapfile_meta *m,
                    uint8_t **config, struct diskio_err *err);
/*
 * Read the data bytes (exactly len == data_len of the header) into dst, checking the
 * checksum again; DISKIO_ECORRUPT if the file changed or decayed since it was verified.
 */
int snapfile_read_data(int dirfd, const char *dirpath, const char *name, void *dst, uint64_t len,
                       struct diskio_err *err);

/* Streaming writer: create, append data any number of times, then commit or abort. */
struct snapfile_writer;

/*
 * Start a snapshot file for (index, term) with the configuration bytes (copied). dirfd
 * must stay open until commit or abort. sync is copied.
 */
int snapfile_create(int dirfd, const char *dirpath, uint64_t index, uint64_t term,
                    const void *config, uint32_t config_len, const struct diskio_sync *sync,
                    struct snapfile_writer **out, struct diskio_err *err);
int snapfile_append(struct snapfile_writer *w, const void *buf, size_t len, struct diskio_err *err);
/*
 * Finish: header, fdatasync, rename into place, fsync the directory. Frees w whatever the
 * outcome; on failure the temporary file is removed. Returns DISKIO_OK or DISKIO_EIO.
 */
int snapfile_commit(struct snapfile_writer *w, struct diskio_err *err);
/* Drop the temporary file and free w. NULL-safe. */
void snapfile_abort(struct snapfile_writer *w);

#endif
