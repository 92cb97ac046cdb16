/*
 * fsm_events.c - the leader's to-do list recorded at apply time. See fsm_events.h.
 */
#include "fsm_events.h"

#include "fsm_jobs.h"
#include "fsm_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fsm_evrec_free(struct fsm_evrec *ev)
{
    bool on = ev->on;
    free(ev->launch);
    free(ev->kill);
    free(ev->reported);
    memset(ev, 0, sizeof(*ev));
    ev->on = on;
}

/* Make room for one more element of size sz in *v (n used, *cap allocated). */
static int grow(void **v, size_t n, size_t *cap, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *nv = realloc(*v, ncap * sz);
    if (nv == NULL)
        return -1;
    *v = nv;
    *cap = ncap;
    return 0;
}

static int push_ref(struct fsm_job_ref **v, size_t *n, size_t *cap, const struct fsm_job *job)
{
    if (grow((void **)v, *n, cap, sizeof(**v)) != 0)
        return -1;
    (*v)[(*n)++] = (struct fsm_job_ref){.job_id = job->id, .attempt = job->attempt};
    return 0;
}

int fsm_ev_launch(struct fsm_evrec *ev, const struct fsm_job *job)
{
    if (!ev->on)
        return 0;
    return push_ref(&ev->launch, &ev->nlaunch, &ev->caplaunch, job);
}

int fsm_ev_kill(struct fsm_evrec *ev, const struct fsm_job *job)
{
    if (!ev->on)
        return 0;
    return push_ref(&ev->kill, &ev->nkill, &ev->capkill, job);
}

int fsm_ev_reported(struct fsm_evrec *ev, uint64_t job_id, uint32_t attempt, const char *node)
{
    if (!ev->on)
        return 0;
    if (grow((void **)&ev->reported, ev->nreported, &ev->capreported, sizeof(*ev->reported)) != 0)
        return -1;
    struct fsm_report_ref *r = &ev->reported[ev->nreported++];
    memset(r, 0, sizeof(*r));
    r->job_id = job_id;
    r->attempt = attempt;
    snprintf(r->node, sizeof(r->node), "%s", node != NULL ? node : "");
    return 0;
}

void fsm_ev_alloc_entry(struct fsm_evrec *ev)
{
    if (ev->on)
        ev->alloc_entries++;
}

void fsm_ev_schedule(struct fsm_evrec *ev)
{
    if (ev->on)
        ev->schedule = true;
}

void fsm_ev_nodes(struct fsm_evrec *ev)
{
    if (ev->on)
        ev->nodes = true;
}

/* ---- the public face (fsm.h) ------------------------------------------------------------- */

void fsm_events_enable(struct fsm *f, bool on)
{
    fsm_evrec_free(&f->ev);
    f->ev.on = on;
}

int fsm_events_take(struct fsm *f, struct fsm_events *out)
{
    struct fsm_evrec *ev = &f->ev;
    memset(out, 0, sizeof(*out));
    out->launch = ev->launch;
    out->nlaunch = ev->nlaunch;
    out->kill = ev->kill;
    out->nkill = ev->nkill;
    out->reported = ev->reported;
    out->nreported = ev->nreported;
    out->alloc_entries = ev->alloc_entries;
    out->schedule = ev->schedule;
    out->nodes = ev->nodes;
    bool on = ev->on;
    memset(ev, 0, sizeof(*ev));
    ev->on = on;
    return FSM_OK;
}

void fsm_events_free(struct fsm_events *ev)
{
    if (ev == NULL)
        return;
    free(ev->launch);
    free(ev->kill);
    free(ev->reported);
    memset(ev, 0, sizeof(*ev));
}
