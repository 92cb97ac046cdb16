/*
 * test_storage_view.c - the loop thread's view of the log (storage_view.c), alone: terms by
 * index over runs, the check of every kind of request (entries, implicit and explicit
 * truncation, installs that keep or drop the log after them, hard state) with the end of
 * the log it predicts, and that a refused request leaves the view as it was.
 */
#include "check_run.h"
#include "storage_int.h"

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A view with base (base, bterm) and entries base+1 .. base+n, term terms[i]. */
static void view_with(struct storage_view *v, uint64_t base, uint64_t bterm, const uint64_t *terms,
                      size_t n)
{
    struct wal_entry e[64];

    ck_assert_uint_le(n, 64);
    memset(e, 0, sizeof(e));
    for (size_t i = 0; i < n; i++) {
        e[i].index = base + 1 + i;
        e[i].term = terms[i];
    }
    ck_assert_int_eq(storage_view_init(v, base, bterm, e, n), 0);
}

/* Entries first .. first+n-1, all in term t, without payloads. */
static struct storage_write entries(struct wal_entry *e, uint64_t first, size_t n, uint64_t t)
{
    struct storage_write w = {.entries = e, .n_entries = n};

    for (size_t i = 0; i < n; i++)
        e[i] = (struct wal_entry){.index = first + i, .term = t};
    return w;
}

/* Plan and apply; returns the plan. */
static struct storage_view_plan submit_ok(struct storage_view *v, const struct storage_write *w)
{
    struct storage_view_plan p;
    struct diskio_err err = {0};
    int rc = storage_view_plan(v, w, 1024, &p, &err);

    ck_assert_msg(rc == DISKIO_OK, "plan refused: %s", err.msg);
    ck_assert_int_eq(storage_view_apply(v, w, &p), 0);
    return p;
}

/* What the plan predicts: keep (installs), the cut, and the end of the log. */
static void check_plan(const struct storage_view_plan *p, bool keep, uint64_t truncate_from,
                       uint64_t last_index, uint64_t last_term)
{
    ck_assert_int_eq(p->keep, keep);
    ck_assert_uint_eq(p->truncate_from, truncate_from);
    ck_assert_uint_eq(p->last_index, last_index);
    ck_assert_uint_eq(p->last_term, last_term);
}

/* The plan is refused with EINVAL, its message contains want, and the view is unchanged. */
static void refused(struct storage_view *v, const struct storage_write *w, const char *want)
{
    struct storage_view before = *v;
    struct storage_term_run runs[64];
    struct storage_view_plan p;
    struct diskio_err err = {0};

    ck_assert_uint_le(v->n_runs, 64);
    memcpy(runs, v->runs, v->n_runs * sizeof(*runs));
    ck_assert_int_eq(storage_view_plan(v, w, 1024, &p, &err), DISKIO_EINVAL);
    ck_assert_msg(strstr(err.msg, want) != NULL, "message \"%s\" lacks \"%s\"", err.msg, want);
    ck_assert_mem_eq(&before, v, sizeof(before));
    ck_assert_mem_eq(runs, v->runs, v->n_runs * sizeof(*runs));
}

START_TEST(test_term_at_over_runs)
{
    const uint64_t terms[] = {2, 2, 3, 3, 3, 5, 7, 7};
    struct storage_view v;

    view_with(&v, 10, 2, terms, 8);
    ck_assert_uint_eq(v.last, 18);
    ck_assert_uint_eq(v.n_runs, 4); /* one run per term */
    ck_assert_uint_eq(storage_view_term_at(&v, 10), 2);
    for (size_t i = 0; i < 8; i++)
        ck_assert_uint_eq(storage_view_term_at(&v, 11 + i), terms[i]);
    ck_assert_uint_eq(storage_view_term_at(&v, 9), 0);
    ck_assert_uint_eq(storage_view_term_at(&v, 19), 0);
    storage_view_free(&v);

    view_with(&v, 0, 0, NULL, 0);
    ck_assert_uint_eq(v.last, 0);
    ck_assert_uint_eq(storage_view_term_at(&v, 0), 0);
    ck_assert_uint_eq(storage_view_term_at(&v, 1), 0);
    storage_view_free(&v);
}
END_TEST

START_TEST(test_append_and_implicit_truncate)
{
    const uint64_t terms[] = {1, 1, 1, 1, 1};
    struct storage_view v;
    struct wal_entry e[8];
    struct storage_write w;
    struct storage_view_plan p;

    view_with(&v, 0, 0, terms, 5);
    /* Appending after the end cuts nothing. */
    w = entries(e, 6, 3, 2);
    p = submit_ok(&v, &w);
    check_plan(&p, false, 0, 8, 2);
    ck_assert_uint_eq(v.last, 8);
    ck_assert_uint_eq(storage_view_term_at(&v, 6), 2);
    ck_assert_uint_eq(storage_view_term_at(&v, 5), 1);
    /* Entries from inside the log replace the suffix from their first index. */
    w = entries(e, 4, 2, 3);
    p = submit_ok(&v, &w);
    check_plan(&p, false, 4, 5, 3);
    ck_assert_uint_eq(v.last, 5);
    ck_assert_uint_eq(storage_view_term_at(&v, 3), 1);
    ck_assert_uint_eq(storage_view_term_at(&v, 4), 3);
    ck_assert_uint_eq(storage_view_term_at(&v, 6), 0);
    ck_assert_uint_eq(v.n_runs, 2);
    storage_view_free(&v);
}
END_TEST

START_TEST(test_explicit_truncate)
{
    const uint64_t terms[] = {1, 1, 2, 2, 2};
    struct storage_view v;
    struct storage_write w = {0};
    struct storage_view_plan p;

    view_with(&v, 0, 0, terms, 5);
    /* Truncating right after the end is nothing to cut. */
    w.truncate_from = 6;
    p = submit_ok(&v, &w);
    check_plan(&p, false, 0, 5, 2);
    w.truncate_from = 3;
    p = submit_ok(&v, &w);
    check_plan(&p, false, 3, 2, 1);
    ck_assert_uint_eq(v.last, 2);
    ck_assert_uint_eq(v.n_runs, 1);
    w.truncate_from = 4;
    refused(&v, &w, "truncate from 4 outside the log (1..2)");
    storage_view_free(&v);
}
END_TEST

START_TEST(test_refusals_leave_the_view)
{
    const uint64_t terms[] = {2, 2, 3};
    struct storage_view v;
    struct wal_entry e[4];
    struct storage_write w;
    uint8_t byte = 7;

    view_with(&v, 10, 2, terms, 3); /* entries 11..13 */
    w = entries(e, 15, 1, 3);
    refused(&v, &w, "entry 15 does not follow the log (11..13)");
    w = entries(e, 10, 1, 3);
    refused(&v, &w, "entry 10 does not follow the log");
    w = entries(e, 14, 1, 2);
    refused(&v, &w, "entry 14 has term 2, lower than the 3 before it");
    w = entries(e, 14, 3, 3);
    e[2].index = 17;
    refused(&v, &w, "entries not contiguous or term going back at index 17");
    w = entries(e, 14, 2, 4);
    e[1].term = 3;
    refused(&v, &w, "entries not contiguous or term going back at index 15");
    w = entries(e, 14, 1, 3);
    e[0].len = 1025;
    e[0].data = &byte;
    refused(&v, &w, "entry 14 has 1025 bytes, more than the 1024 allowed");
    e[0].len = 1;
    e[0].data = NULL;
    refused(&v, &w, "entry 14 has a length but no data");
    w = (struct storage_write){.n_entries = 1};
    refused(&v, &w, "entries missing");
    storage_view_free(&v);
}
END_TEST

START_TEST(test_hard_state_rules)
{
    struct storage_view v;
    struct storage_write w = {.has_hard_state = true, .term = 3, .vote = 0};

    view_with(&v, 0, 0, NULL, 0);
    submit_ok(&v, &w);
    ck_assert_uint_eq(v.hs_term, 3);
    /* A vote may be cast once in a term (from none to someone), and repeated. */
    w.vote = 2;
    submit_ok(&v, &w);
    ck_assert_uint_eq(v.hs_vote, 2);
    submit_ok(&v, &w);
    w.vote = 4;
    refused(&v, &w, "hard state (term 3, vote 4) would undo (term 3, vote 2)");
    w.vote = 0;
    refused(&v, &w, "would undo");
    w.term = 2;
    w.vote = 2;
    refused(&v, &w, "hard state (term 2, vote 2) would undo (term 3, vote 2)");
    /* A new term frees the vote. */
    w.term = 4;
    w.vote = 5;
    submit_ok(&v, &w);
    ck_assert_uint_eq(v.hs_term, 4);
    ck_assert_uint_eq(v.hs_vote, 5);
    storage_view_free(&v);
}
END_TEST

START_TEST(test_install)
{
    const uint64_t terms[] = {1, 1, 2, 2, 2, 3, 3, 3, 3, 3}; /* 1..10 */
    struct storage_view v;
    struct storage_install in = {.index = 7, .term = 3};
    struct storage_write w = {.install = &in};
    struct storage_view_plan p;
    uint8_t cfg = 1;

    /* The log holds the snapshot's (index, term): the entries after it stay. */
    view_with(&v, 0, 0, terms, 10);
    p = submit_ok(&v, &w);
    check_plan(&p, true, 0, 10, 3);
    ck_assert_uint_eq(v.base, 7);
    ck_assert_uint_eq(v.base_term, 3);
    ck_assert_uint_eq(v.last, 10);
    ck_assert_uint_eq(storage_view_term_at(&v, 7), 3);
    ck_assert_uint_eq(storage_view_term_at(&v, 8), 3);
    ck_assert_uint_eq(storage_view_term_at(&v, 6), 0);
    /* Below the new base: refused. */
    in.index = 6;
    refused(&v, &w, "snapshot index 6 is below the log base 7");
    storage_view_free(&v);

    /* Another term at the index: the entries after it go. */
    view_with(&v, 0, 0, terms, 10);
    in.index = 5;
    in.term = 3;
    p = submit_ok(&v, &w);
    check_plan(&p, false, 6, 5, 3);
    ck_assert_uint_eq(v.base, 5);
    ck_assert_uint_eq(v.last, 5);
    ck_assert_uint_eq(v.n_runs, 0);
    storage_view_free(&v);

    /* Beyond the end of the log: the log starts again after the snapshot. */
    view_with(&v, 0, 0, terms, 10);
    in.index = 40;
    in.term = 6;
    p = submit_ok(&v, &w);
    check_plan(&p, false, 0, 40, 6);
    ck_assert_uint_eq(v.last, 40);
    /* And entries follow it. */
    {
        struct wal_entry e[2];
        struct storage_write a = entries(e, 41, 2, 6);
        p = submit_ok(&v, &a);
        ck_assert_uint_eq(p.last_index, 42);
        ck_assert_uint_eq(storage_view_term_at(&v, 41), 6);
    }
    /* Missing or oversized configuration or data. */
    in.index = 50;
    in.config_len = 1;
    in.config = NULL;
    refused(&v, &w, "snapshot configuration or data missing or too large");
    in.config = &cfg;
    in.config_len = SNAPFILE_MAX_CONFIG + 1;
    refused(&v, &w, "too large");
    in.config_len = 0;
    in.data_len = 10;
    refused(&v, &w, "missing");
    in.data_len = 0;
    in.index = 0;
    refused(&v, &w, "snapshot index 0");
    storage_view_free(&v);
}
END_TEST

/* An install and entries in one request: the entries must follow the snapshot. */
START_TEST(test_install_with_entries)
{
    const uint64_t terms[] = {1, 1, 1};
    struct storage_view v;
    struct storage_install in = {.index = 5, .term = 2};
    struct wal_entry e[2];
    struct storage_write w = entries(e, 6, 2, 2);
    struct storage_view_plan p;

    view_with(&v, 0, 0, terms, 3);
    w.install = &in;
    p = submit_ok(&v, &w);
    ck_assert_uint_eq(p.last_index, 7);
    ck_assert_uint_eq(v.base, 5);
    ck_assert_uint_eq(v.last, 7);
    ck_assert_uint_eq(storage_view_term_at(&v, 6), 2);
    in.index = 9;
    w = entries(e, 9, 1, 2);
    w.install = &in;
    refused(&v, &w, "entry 9 does not follow the log (10..9)");
    storage_view_free(&v);
}
END_TEST

static Suite *storage_view_suite(void)
{
    Suite *s = suite_create("storage_view");
    check_case(s, "view",
               (const TTest *[]){test_term_at_over_runs, test_append_and_implicit_truncate,
                                 test_explicit_truncate, test_refusals_leave_the_view,
                                 test_hard_state_rules, test_install, test_install_with_entries,
                                 NULL});

    return s;
}

int main(void)
{
    return check_run(storage_view_suite());
}
