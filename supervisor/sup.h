/*
 * sup.h - the supervisor: one event loop that owns the worker's life (DESIGN.md section 7).
 *
 * sup_run() starts the worker and the health responder and returns only when the replica
 * must end, with the process exit code. Everything it guarantees is described at the top
 * of sup.c.
 */
#ifndef SPUR_SUP_H
#define SPUR_SUP_H

#include "cfg.h"

#include <stdint.h>

struct sup_options {
    const struct cfg *cfg;    /* effective configuration, owned by the caller */
    const char *config_path;  /* -f value to hand the worker, NULL for its default */
    const char *state_dir;    /* --state-dir value to hand the worker, or NULL */
    const char *worker_path;  /* resolved path of spurctld-raftd (or a test worker) */
};

int sup_run(const struct sup_options *opt);

/*
 * 1 when a worker that exited with this code before it ever reported RUNNING should have
 * the code passed through as spurctld's own (a restart would not help: 64, 65, 73, 78);
 * 0 when spurctld should exit 70 so that the replica is restarted.
 */
int sup_startup_code_is_final(int code);

/*
 * The stall clock, as a pure function (all times CLOCK_MONOTONIC ns). last_frame_ns is when
 * the last status frame arrived (the worker's start before one), last_run_ns the last time
 * the supervisor itself ran (its previous tick, or a frame read), now_ns the current tick.
 * When the supervisor has not run for more than pause_ns, it was frozen itself (the whole
 * replica stopped, a VM freeze) and cannot know that the worker was not: the pause is
 * excused. Returns the time from which the worker's silence counts: last_frame_ns, or
 * last_frame_ns moved forward by the whole pause, whose length goes to *paused_ns (0 when
 * there was none). A worker is thus killed only for silence the supervisor saw while it ran.
 */
uint64_t sup_silence_origin(uint64_t last_frame_ns, uint64_t last_run_ns, uint64_t now_ns,
                            uint64_t pause_ns, uint64_t *paused_ns);

#endif
