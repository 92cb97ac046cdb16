/*
 * table.h - the table engine of squeue and sinfo: a % format spec, rows of cells, and
 * printing them at the widths the spec asks for. It knows nothing of jobs or nodes: a
 * caller gives it the field letters its kind of table knows (struct table_def) and the
 * text of every cell.
 *
 * Guarantees:
 *   - A format is text with fields "%[.|-][#|WIDTH]X": WIDTH pads and truncates the cell
 *     to that many bytes, never splitting a UTF-8 sequence; '.' right-justifies, '-' (the
 *     default) left-justifies; '#' sizes the column to its widest cell (the header row
 *     included); no width prints the cell as it is; "%%" is a '%'. Text between fields
 *     prints as it is.
 *   - A format is refused with a message naming the problem: empty, a field letter the
 *     caller's definitions lack ("invalid field \"%.8j\" in format ..."; with
 *     table_spec_parse_lenient(), a letter is kept as text and reported), a format ending
 *     inside a field, a width over 10000.
 *   - Tables are built in two steps: every cell of every row is rendered to a string first,
 *     then the rows print. '#' columns need the widest cell before the first line prints,
 *     and sinfo needs the cells to decide which nodes share a line.
 *   - A NULL cell prints as empty text, so a failed strdup costs a cell, not the table.
 *
 * Memory: struct table_spec owns its fields and their literal text (table_spec_free());
 * it borrows the definitions, which must outlive it (callers keep them static). struct
 * table owns every cell stored in its rows (table_free() frees them): a caller puts
 * malloc'd strings into the row table_add_row() returns and gives up ownership.
 */
#ifndef SPUR_TABLE_H
#define SPUR_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A field letter a kind of table knows. */
struct table_def {
    char type;
    const char *header;
    bool aggregate; /* the caller's own mark, kept for it (sinfo: summed over a line's nodes) */
};

struct table_field {
    char type;       /* the field letter; 0: literal text */
    char *text;      /* literal text (type 0) */
    int width;       /* -1: none */
    bool right;      /* '.' given */
    bool auto_width; /* '#' given */
};

struct table_spec {
    const struct table_def *defs; /* borrowed */
    size_t ndefs;
    struct table_field *fields; /* owned */
    size_t n;
};

/* Returns 0, or -1 with err naming the bad field (spec is then empty). */
int table_spec_parse(const char *format, const struct table_def *defs, size_t ndefs,
                     struct table_spec *spec, char *err, size_t errlen);
/*
 * Slurm's way with a field letter (a-z, A-Z) the definitions lack, as squeue and sinfo
 * take it: unknown(arg, letter) is called (they warn) and the field's text ("%.8q") is kept
 * as literal text. Anything else table_spec_parse() refuses is refused here too.
 */
typedef void (*table_unknown_fn)(void *arg, char type);
int table_spec_parse_lenient(const char *format, const struct table_def *defs, size_t ndefs,
                             table_unknown_fn unknown, void *arg, struct table_spec *spec,
                             char *err, size_t errlen);
void table_spec_free(struct table_spec *spec);
/* The definition of field c of the spec; NULL for literal text. */
const struct table_def *table_spec_def(const struct table_spec *spec, size_t c);

/* Rows of cells, one cell per spec field (literal fields keep NULL cells). */
struct table {
    size_t ncols;
    size_t nrows, cap;
    char **cells; /* nrows x ncols, row-major; every non-NULL cell owned */
};

void table_init(struct table *t, const struct table_spec *spec);
/* A new row of ncols NULL cells, to fill with malloc'd strings; NULL when out of memory. */
char **table_add_row(struct table *t);
/* A row of the definitions' headers. Returns 0 or -1 (out of memory). */
int table_add_header(struct table *t, const struct table_spec *spec);
/* Every row, fields at their widths, one line each. */
void table_print(FILE *out, const struct table_spec *spec, const struct table *t);
void table_free(struct table *t);

#endif
