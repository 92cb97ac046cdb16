/*
 * strv.h - vectors of strings, the form the commands' comma lists take ("a,b,,c").
 *
 * Invariants: a vector made here is NULL-terminated and holds n non-NULL strings, so it
 * can be handed to code that walks to the NULL as well as to code that counts.
 *
 * Memory: the vector and each string are malloc'd and the caller's; strv_free() releases
 * both. Strings passed in are only read. strv_replace() is the one-string case: the
 * malloc'd string field a parsed value goes into.
 */
#ifndef SPUR_STRV_H
#define SPUR_STRV_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Append a copy of s[0..len) to *v (n strings, *cap slots; both start at 0 with *v NULL),
 * keeping it NULL-terminated. Returns 0 or -1 (out of memory; *v stays valid).
 */
int strv_push(char ***v, size_t *n, size_t *cap, const char *s, size_t len);
/* Split "a,b,,c" into non-empty words (NULL reads as ""). Returns 0 or -1 (out of memory). */
int strv_split(const char *list, char ***out, size_t *n);
void strv_free(char **v, size_t n);
/*
 * Move the nw strings of words to the end of *v (n of them; realloc'd, kept
 * NULL-terminated) and free the words array itself. Returns 0, or -1 (out of memory)
 * with words and its strings freed and *v as it was.
 */
int strv_move_all(char ***v, size_t *n, char **words, size_t nw);
/*
 * Replace *field (a malloc'd string or NULL) by a copy of value. Returns 0, or -1 (out of
 * memory) with *field as it was.
 */
int strv_replace(char **field, const char *value);
/* Is s (NULL reads as "") one of the n strings of v? */
bool strv_contains(char *const *v, size_t n, const char *s);
/* "a,b,c" (NULL entries as ""), or a copy of none when n is 0; NULL when out of memory. */
char *strv_join(char *const *v, size_t n, const char *none);

#endif
