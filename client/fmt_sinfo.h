/*
 * fmt_sinfo.h - sinfo's table: the partition and node field letters, Slurm's formats
 * (default, -N, -l, -s, -R), the grouping of nodes that print alike, and sinfo -t's
 * state words.
 *
 * Guarantees (Slurm's forms): in the partition view, one line per partition and group of
 * nodes that print alike (so by state with the default format); a partition without
 * nodes prints one line with NODES 0 unless hide_empty. Nodes belong to a partition when
 * the partition lists them or they list the partition. Partitions print in the order
 * given, nodes in natural name order (n2 before n10). %N %n %o compress their lists as
 * hostlist.h does; %C and %F count allocated/idle/other/total.
 *
 * Memory: the spec is the caller's (table_spec_free()); partitions and nodes stay the
 * caller's; fmt_sinfo() frees what it allocates before it returns.
 */
#ifndef SPUR_FMT_SINFO_H
#define SPUR_FMT_SINFO_H

#include "fmt.h"
#include "table.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define FMT_SINFO_DEFAULT      "%#P %.5a %.10l %.6D %.6t %N"
#define FMT_SINFO_NODE         "%#N %.6D %#P %6t"
#define FMT_SINFO_LONG         "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
#define FMT_SINFO_NODE_LONG    "%#N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
#define FMT_SINFO_SUMMARIZE    "%#P %.5a %.10l %.16F %N"
#define FMT_SINFO_REASONS      "%20E %9u %19H %N"
#define FMT_SINFO_REASONS_LONG "%20E %12U %19H %6t %N"

struct fmt_sinfo_opts {
    bool node_view; /* -N: one line per node and partition */
    bool header;
    bool reasons;    /* -R: only nodes with a reason, grouped by reason */
    bool hide_empty; /* leave out partitions without nodes (a node filter is on) */
};

/* Parse a sinfo -o format. Returns 0, or -1 with err naming the bad field. */
int fmt_sinfo_spec_parse(const char *format, struct table_spec *spec, char *err, size_t errlen);
void fmt_sinfo(FILE *out, const struct table_spec *spec, fmt_partition *const *parts, size_t np,
               fmt_node *const *nodes, size_t nn, const struct fmt_sinfo_opts *o,
               const struct fmt_ctx *ctx);
/*
 * Does a sinfo -t word match this node state? Words: sinfo's compact and long names,
 * and "drain" matching both drained and draining nodes, any case. -1 for an unknown word.
 */
int fmt_sinfo_state_matches(const char *word, int state);

#endif
