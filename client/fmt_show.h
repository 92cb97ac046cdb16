/*
 * fmt_show.h - scontrol show's records: one Key=Value block per job, node or partition,
 * a blank line after each, the keys and forms Slurm prints (scripts parse them).
 *
 * Guarantees: unset values print as Slurm does ((null), Unknown, None, UNLIMITED); times
 * as units.h's scontrol forms; ExitCode=status:signal (a negative exit code is "killed by
 * that signal"); StdOut/StdErr expanded as the job will see them (fmt_expand_path()).
 *
 * Memory: the messages stay the caller's; nothing allocated survives a call.
 */
#ifndef SPUR_FMT_SHOW_H
#define SPUR_FMT_SHOW_H

#include "fmt.h"

#include <stdio.h>

void fmt_show_job(FILE *out, const fmt_job *j, const struct fmt_ctx *ctx);
void fmt_show_node(FILE *out, const fmt_node *n, const struct fmt_ctx *ctx);
void fmt_show_partition(FILE *out, const fmt_partition *p, const struct fmt_ctx *ctx);
/* State= of a node (names_node_state_scontrol() with the node's own allocation). */
const char *fmt_show_node_state(const fmt_node *n);

#endif
