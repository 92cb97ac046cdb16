/*
 * hostlist.h - Slurm's host list form ("node[01-04,7],login"), both ways.
 *
 * Guarantees:
 *   - Compression sorts the names (prefix, then number), drops duplicates and joins
 *     numbered names of one prefix and one zero-padding into ranges; a name without
 *     leading zeros joins a padded group of its own width (n08, n09, n10 -> n[08-10]).
 *   - Expansion accepts any list the commands accept: comma-separated items, each a name
 *     or a prefix, one bracket of ranges (1-3,05,07-09; a range keeps the padding of its
 *     low end) and a suffix. Empty items are skipped. An expansion past HOSTLIST_MAX
 *     names is refused, so a typo cannot allocate without bound; a name made from a bracket
 *     that comes out over 511 bytes is refused as invalid.
 *   - compress(expand(x)) gives x back for a list in the form compression prints.
 *
 * Memory: returned strings and vectors are malloc'd and the caller's (free(); strv_free()
 * for the vector, which is NULL-terminated). Names passed in are only read.
 */
#ifndef SPUR_HOSTLIST_H
#define SPUR_HOSTLIST_H

#include <stddef.h>

#define HOSTLIST_MAX 65536

/* Compress names into the host list form ("a[1-3,5],b"); NULL when out of memory. */
char *hostlist_compress(char *const *names, size_t n);
/*
 * The same, keeping the order given as Slurm's unsorted hostlist does (scontrol show
 * hostlist): each run of adjacent names of one prefix is compressed on its own, so
 * "n1,n2,n3,m01,m02" is "n[1-3],m[01-02]". NULL when out of memory.
 */
char *hostlist_compress_ordered(char *const *names, size_t n);
/*
 * Expand "a[1-3,05-06],b" into names (*out NULL-terminated, *n of them). Returns 0, or -1
 * with err naming the problem.
 */
int hostlist_expand(const char *expr, char ***out, size_t *n, char *err, size_t errlen);

#endif
