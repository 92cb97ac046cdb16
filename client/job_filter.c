/*
 * job_filter.c - job id and state lists, the job filter and squeue's order; see
 * job_filter.h.
 */
#include "job_filter.h"

#include "errmsg.h"
#include "names.h"
#include "strv.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define J(x) SPUR__API__JOB_STATE__JOB_##x

static const char *str(const char *s)
{
    return s ? s : "";
}

/*
 * The words of a comma list: 0 with *words to strv_free(), 1 when it has none (nothing
 * to free; the caller names the refusal), -1 with err set when out of memory.
 */
static int split_words(const char *list, char ***words, size_t *nw, char *err, size_t errlen)
{
    if (strv_split(list, words, nw) != 0)
        return errmsg_set(err, errlen, "out of memory");
    if (*nw == 0) {
        strv_free(*words, *nw);
        return 1;
    }
    return 0;
}

int job_filter_states_parse(const char *list, int *states, size_t max, size_t *n, bool *all,
                            char *err, size_t errlen)
{
    char **words;
    size_t nw;
    *n = 0;
    *all = false;
    int rc = split_words(list, &words, &nw, err, errlen);
    if (rc != 0)
        return rc < 0 ? -1 : errmsg_set(err, errlen, "Invalid job state specified: (empty)");
    for (size_t i = 0; i < nw; i++) {
        if (strcasecmp(words[i], "all") == 0) {
            *all = true;
            continue;
        }
        int st = names_job_state_parse(words[i]);
        if (st < 0) {
            errmsg_set(err, errlen, "Invalid job state specified: %s", words[i]);
            strv_free(words, nw);
            return -1;
        }
        bool dup = false;
        for (size_t k = 0; k < *n; k++)
            dup |= states[k] == st;
        if (!dup && *n < max)
            states[(*n)++] = st;
    }
    strv_free(words, nw);
    if (*all)
        *n = 0;
    return 0;
}

bool job_filter_state_active(int state)
{
    return state == J(PENDING) || state == J(CONFIGURING) || state == J(RUNNING) ||
           state == J(COMPLETING);
}

int job_filter_ids_parse(const char *list, uint64_t **ids, size_t *n, char *err, size_t errlen)
{
    char **words;
    size_t nw;
    int rc = split_words(list, &words, &nw, err, errlen);
    if (rc != 0)
        return rc < 0
                   ? -1
                   : errmsg_set(err, errlen, "Invalid job id %s", str(list)[0] ? list : "(empty)");
    /* Check every word before adding any, so a bad list adds nothing. */
    for (size_t i = 0; i < nw; i++) {
        const char *w = words[i];
        char *end;
        errno = 0;
        unsigned long long v = strtoull(w, &end, 10);
        if (!isdigit((unsigned char)w[0]) || *end != '\0' || errno != 0 || v == 0) {
            errmsg_set(err, errlen, "Invalid job id %s", w);
            strv_free(words, nw);
            return -1;
        }
    }
    uint64_t *nv = realloc(*ids, (*n + nw) * sizeof(uint64_t));
    if (nv == NULL) {
        strv_free(words, nw);
        return errmsg_set(err, errlen, "out of memory");
    }
    *ids = nv;
    for (size_t i = 0; i < nw; i++)
        (*ids)[(*n)++] = strtoull(words[i], NULL, 10);
    strv_free(words, nw);
    return 0;
}

bool job_filter_matches(const fmt_job *j, const struct job_filter *f)
{
    const Spur__Api__JobSpec *sp = j->spec;
    if (f->nids > 0) {
        bool hit = false;
        for (size_t i = 0; i < f->nids; i++)
            hit |= f->ids[i] == j->id;
        if (!hit)
            return false;
    }
    if (f->nstates > 0) {
        bool hit = false;
        for (size_t i = 0; i < f->nstates; i++)
            hit |= f->states[i] == (int)j->state;
        if (!hit)
            return false;
    }
    if (f->nusers > 0 && !strv_contains(f->users, f->nusers, sp ? sp->user : ""))
        return false;
    if (f->npartitions > 0 &&
        !strv_contains(f->partitions, f->npartitions, sp ? sp->partition : ""))
        return false;
    if (f->nnames > 0 && !strv_contains(f->names, f->nnames, sp ? sp->name : ""))
        return false;
    return true;
}

/* The state's place in squeue's order: a configuring job sorts with the running ones. */
static int state_rank(int state)
{
    return state == J(CONFIGURING) ? J(RUNNING) : state;
}

static int job_cmp(const void *pa, const void *pb)
{
    const fmt_job *a = *(fmt_job *const *)pa, *b = *(fmt_job *const *)pb;
    int c = strcmp(a->spec ? str(a->spec->partition) : "", b->spec ? str(b->spec->partition) : "");
    if (c != 0)
        return c;
    int ra = state_rank((int)a->state), rb = state_rank((int)b->state);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

void job_filter_sort(fmt_job **jobs, size_t n)
{
    if (n > 1)
        qsort(jobs, n, sizeof(*jobs), job_cmp);
}
