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

struct sup_options {
    const struct cfg *cfg;    /* effective configuration, owned by the caller */
    const char *config_path;  /* -f value to hand the worker, NULL for its default */
    const char *state_dir;    /* --state-dir value to hand the worker, or NULL */
    const char *worker_path;  /* resolved path of spurctld-raftd (or a test worker) */
};

int sup_run(const struct sup_options *opt);

/*
 * 1 when a worker that exited with this code before it ever reported RUNNING should have
 * the code passed through as spurctld's own (a restart would not help: 64, 65, 66, 73, 77,
 * 78); 0 when spurctld should exit 70 so that the replica is restarted.
 */
int sup_startup_code_is_final(int code);

#endif
