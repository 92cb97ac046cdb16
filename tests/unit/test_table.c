/*
 * test_table.c - the table engine alone (client/table.c), with field letters of its own
 * rather than squeue's or sinfo's.
 *
 * Pinned: spec parsing (literals, "%%", '.', '-', '#', widths, the definition each field
 * points at) and its refusals (empty, unknown letter, a format ending inside a field, a
 * width too large, letters of another kind); printing: padding to a width, left and right
 * alignment, truncation that never splits a UTF-8 sequence, '#' sizing to the widest cell
 * including the header, no width printing a cell whole, NULL cells as empty text, literal
 * text between fields, the header row, and an empty table printing nothing.
 */
#include "check_run.h"
#include "table.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static char err[256];

static const struct table_def defs[] = {
    {'a', "ALPHA", false},
    {'b', "B", true},
    {'c', "CHARLIE_LONG", false},
};
#define NDEFS (sizeof(defs) / sizeof(defs[0]))

static void parse_ok(const char *format, struct table_spec *spec)
{
    ck_assert_msg(table_spec_parse(format, defs, NDEFS, spec, err, sizeof(err)) == 0, "%s: %s",
                  format, err);
}

/* Print rows of cells ("" for literal columns is ignored) under format; returns the text. */
static char *render(const char *format, bool header, const char *const *cells, size_t nrows)
{
    struct table_spec spec;
    parse_ok(format, &spec);
    struct table t;
    table_init(&t, &spec);
    if (header)
        ck_assert_int_eq(table_add_header(&t, &spec), 0);
    size_t k = 0;
    for (size_t r = 0; r < nrows; r++) {
        char **row = table_add_row(&t);
        ck_assert_ptr_nonnull(row);
        for (size_t c = 0; c < spec.n; c++) {
            if (spec.fields[c].type == 0)
                continue;
            const char *s = cells[k++];
            row[c] = s ? strdup(s) : NULL;
        }
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    table_print(f, &spec, &t);
    fclose(f);
    table_free(&t);
    ck_assert_uint_eq(t.nrows, 0);
    table_spec_free(&spec);
    return buf;
}

START_TEST(test_parse_fields)
{
    struct table_spec s;
    parse_ok("x%%y%.4a|%-7b%#c%a end", &s);
    ck_assert_uint_eq(s.n, 7);
    ck_assert_int_eq(s.fields[0].type, 0);
    ck_assert_str_eq(s.fields[0].text, "x%y");
    ck_assert_ptr_null(table_spec_def(&s, 0));
    ck_assert_int_eq(s.fields[1].type, 'a');
    ck_assert_int_eq(s.fields[1].width, 4);
    ck_assert(s.fields[1].right);
    ck_assert(!s.fields[1].auto_width);
    ck_assert_ptr_eq(table_spec_def(&s, 1), &defs[0]);
    ck_assert_str_eq(s.fields[2].text, "|");
    ck_assert_int_eq(s.fields[3].type, 'b');
    ck_assert_int_eq(s.fields[3].width, 7);
    ck_assert(!s.fields[3].right);
    ck_assert(table_spec_def(&s, 3)->aggregate);
    ck_assert_int_eq(s.fields[4].type, 'c');
    ck_assert(s.fields[4].auto_width);
    ck_assert_int_eq(s.fields[5].type, 'a');
    ck_assert_int_eq(s.fields[5].width, -1);
    ck_assert_str_eq(s.fields[6].text, " end");
    table_spec_free(&s);
    ck_assert_uint_eq(s.n, 0);
    ck_assert_ptr_null(s.fields);

    parse_ok("%%", &s);
    ck_assert_uint_eq(s.n, 1);
    ck_assert_str_eq(s.fields[0].text, "%");
    table_spec_free(&s);
    parse_ok("%10000a", &s);
    ck_assert_int_eq(s.fields[0].width, 10000);
    table_spec_free(&s);
}
END_TEST

static char unknown_seen[8];

static void note_unknown(void *arg, char type)
{
    size_t *n = arg;
    if (*n < sizeof(unknown_seen) - 1)
        unknown_seen[(*n)++] = type;
}

/* Slurm's way: a letter the definitions lack is reported and kept as text; nothing else. */
START_TEST(test_parse_lenient)
{
    struct table_spec s;
    size_t n = 0;
    memset(unknown_seen, 0, sizeof(unknown_seen));
    ck_assert_int_eq(
        table_spec_parse_lenient("%a %.8z|%Q", defs, NDEFS, note_unknown, &n, &s, err, sizeof(err)),
        0);
    ck_assert_str_eq(unknown_seen, "zQ");
    ck_assert_uint_eq(s.n, 2);
    ck_assert_int_eq(s.fields[0].type, 'a');
    ck_assert_int_eq(s.fields[1].type, 0);
    ck_assert_str_eq(s.fields[1].text, " %.8z|%Q");
    table_spec_free(&s);
    /* What is not a letter is refused as before, and so is a format cut in a field. */
    ck_assert_int_eq(
        table_spec_parse_lenient("%a %!", defs, NDEFS, note_unknown, &n, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "invalid field \"%!\" in format \"%a %!\"");
    ck_assert_int_eq(
        table_spec_parse_lenient("%.5", defs, NDEFS, note_unknown, &n, &s, err, sizeof(err)), -1);
    ck_assert_uint_eq(n, 2);
}
END_TEST

START_TEST(test_parse_errors)
{
    struct table_spec s;
    ck_assert_int_eq(table_spec_parse("", defs, NDEFS, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "empty format");
    ck_assert_int_eq(table_spec_parse(NULL, defs, NDEFS, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "empty format");
    ck_assert_int_eq(table_spec_parse("%a %z", defs, NDEFS, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "invalid field \"%z\" in format \"%a %z\"");
    ck_assert_int_eq(table_spec_parse("lit %.12", defs, NDEFS, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "format ends inside the field \"%.12\"");
    ck_assert_int_eq(table_spec_parse("%", defs, NDEFS, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "format ends inside the field \"%\"");
    ck_assert_int_eq(table_spec_parse("%10001a", defs, NDEFS, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "field width too large in \"%10001a\"");
    ck_assert_int_eq(table_spec_parse("%123456789a", defs, NDEFS, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "field width too large in \"%123456789a\"");
    /* A letter is only valid for the definitions given. */
    ck_assert_int_eq(table_spec_parse("%a", defs + 1, NDEFS - 1, &s, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "invalid field \"%a\" in format \"%a\"");
    /* A refused spec holds nothing. */
    ck_assert_uint_eq(s.n, 0);
    ck_assert_ptr_null(s.fields);
}
END_TEST

START_TEST(test_widths_and_alignment)
{
    const char *cells[] = {"x", "yy", "zzz", "longer-than-four", "q", "w"};
    char *out = render("[%4a][%.4b][%-4c]", false, cells, 2);
    ck_assert_str_eq(out, "[x   ][  yy][zzz ]\n"
                          "[long][   q][w   ]\n");
    free(out);

    /* Width 0 prints nothing of the cell; no width prints it whole. */
    const char *more[] = {"abc", "abc"};
    out = render("<%0a><%b>", false, more, 1);
    ck_assert_str_eq(out, "<><abc>\n");
    free(out);
}
END_TEST

START_TEST(test_utf8_clipping)
{
    /* "h\xc3\xa9llo": cutting at 2 bytes would split the e-acute, so 1 byte is kept. */
    const char *cells[] = {"h\xc3\xa9llo", "h\xc3\xa9llo", "h\xc3\xa9llo"};
    char *out = render("[%2a][%.3b][%4c]", false, cells, 1);
    ck_assert_str_eq(out, "[h ][h\xc3\xa9][h\xc3\xa9l]\n");
    free(out);
}
END_TEST

START_TEST(test_auto_width_and_header)
{
    const char *cells[] = {"1", "bb", "x", "22", "b", "yy", "333", NULL, NULL};
    char *out = render("%#a|%.#b|%c", true, cells, 3);
    /* '#' sizes to the widest cell, the header ALPHA included; c has no width. */
    ck_assert_str_eq(out, "ALPHA| B|CHARLIE_LONG\n"
                          "1    |bb|x\n"
                          "22   | b|yy\n"
                          "333  |  |\n");
    free(out);

    /* Without the header, the widest data cell decides. */
    const char *c2[] = {"1", "22", "333"};
    out = render("%#a|", false, c2, 3);
    ck_assert_str_eq(out, "1  |\n22 |\n333|\n");
    free(out);
}
END_TEST

START_TEST(test_header_and_empty)
{
    char *out = render("%.8a %-3c!", true, NULL, 0);
    /* Headers follow the field's width rules: right-justified, truncated. */
    ck_assert_str_eq(out, "   ALPHA CHA!\n");
    free(out);
    out = render("%a %b", false, NULL, 0);
    ck_assert_str_eq(out, "");
    free(out);
    /* NULL cells print as empty text. */
    const char *nulls[] = {NULL, NULL};
    out = render("(%a)(%3b)", false, nulls, 1);
    ck_assert_str_eq(out, "()(   )\n");
    free(out);
}
END_TEST

static Suite *table_suite(void)
{
    Suite *s = suite_create("table");
    check_case(s, "table",
               (const TTest *[]){test_parse_fields, test_parse_errors, test_parse_lenient,
                                 test_widths_and_alignment, test_utf8_clipping,
                                 test_auto_width_and_header, test_header_and_empty, NULL});
    return s;
}

int main(void)
{
    return check_run(table_suite());
}
