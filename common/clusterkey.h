/*
 * clusterkey.h - the cluster key: the shared secret that replicas, agents and supervisors
 * of one cluster prove to each other (chan.h) and that signs tokens (token.h).
 *
 * A key file holds the key's bytes as they are (like Slurm's slurm.key or MUNGE's
 * munge.key): 32 to 1024 bytes, any content; `spurctld keygen FILE` writes 32 random ones.
 * Guarantees:
 *   - A key file is refused, with a message naming the file, when it is missing, not a
 *     regular file, readable or writable by others, writable by its group, readable by
 *     its group while owned by anyone but root (the mode says who may read it: 0600 or
 *     0400; 0640 or 0440 when owned by root, as PostgreSQL allows for a root-owned
 *     ssl_key_file, which is how a Kubernetes Secret with a pod fsGroup arrives:
 *     root:<fsGroup> 0440), shorter than CLUSTERKEY_MIN_LEN or longer than
 *     CLUSTERKEY_MAX_LEN, or when it holds the placeholder text of the example Kubernetes
 *     Secret (examples/k8s), which everyone can read.
 *   - A key is named by its id: the first CLUSTERKEY_ID_LEN bytes of
 *     HMAC-SHA-256(key, "spur cluster key id v1"), printed as 16 hex digits. The id says
 *     which key a peer holds without saying anything about the key.
 *   - A keyring holds the current key and, during a rotation, the next one (auth.key_file,
 *     auth.next_key_file). keys[0] is the current key; peers use the first key of the
 *     initiator's list that the responder also holds (chan.h), so a rolling rotation
 *     never leaves two members without a common key (docs/deployment/key-rotation.md).
 *   - clusterkey_generate() creates the file with O_EXCL and mode 0600 (never replacing
 *     one), from RAND_bytes(), fsyncs it and its directory; the directory is made (0755)
 *     when missing.
 *   - Key bytes are wiped (OPENSSL_cleanse) by keyring_wipe().
 *
 * Ownership: a keyring is a plain value (no heap); the caller owns it and wipes it.
 */
#ifndef SPUR_CLUSTERKEY_H
#define SPUR_CLUSTERKEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLUSTERKEY_MIN_LEN 32
#define CLUSTERKEY_MAX_LEN 1024
#define CLUSTERKEY_ID_LEN 8
#define CLUSTERKEY_GEN_LEN 32
#define CLUSTERKEY_MAX_KEYS 2
/* The text of the placeholder in examples/k8s/cluster-key.yaml; refused as a key. */
#define CLUSTERKEY_PLACEHOLDER "REPLACE-ME-with-32-random-bytes-see-docs-security"

struct clusterkey {
    uint8_t bytes[CLUSTERKEY_MAX_LEN];
    size_t len;
    uint8_t id[CLUSTERKEY_ID_LEN];
    char id_hex[2 * CLUSTERKEY_ID_LEN + 1];
    char origin[256]; /* the file it came from, for messages */
};

struct keyring {
    struct clusterkey keys[CLUSTERKEY_MAX_KEYS]; /* keys[0]: current */
    size_t n;
};

/* Fill k from bytes (checks the length and the placeholder). Returns 0, or -1 with err. */
int clusterkey_from_bytes(struct clusterkey *k, const void *bytes, size_t len,
                          const char *origin, char *err, size_t errlen);
/* Read and check one key file. Returns 0, or -1 with err ("auth: key file X: why"). */
int clusterkey_load(struct clusterkey *k, const char *path, char *err, size_t errlen);
/*
 * Load the current key and, when next_path is neither NULL nor "", the next one. Two
 * files holding the same key are one key. Returns 0, or -1 with err.
 */
int keyring_load(struct keyring *kr, const char *path, const char *next_path, char *err,
                 size_t errlen);
/* Add a key already made (tests). Returns 0, or -1 when the ring is full. */
int keyring_add(struct keyring *kr, const struct clusterkey *k);
/* The key of this id, or NULL. */
const struct clusterkey *keyring_find(const struct keyring *kr,
                                      const uint8_t id[CLUSTERKEY_ID_LEN]);
void keyring_wipe(struct keyring *kr);

/*
 * Write a new random key to path. Returns 0; 1 when the file already exists (nothing
 * written); -1 with err on any other failure (a partial file is removed).
 */
int clusterkey_generate(const char *path, char *err, size_t errlen);

/* id_hex of each key, "a1b2..." or "a1b2...,c3d4..." for messages. */
void keyring_ids(const struct keyring *kr, char *out, size_t outlen);

#endif
