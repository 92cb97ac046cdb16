/*
 * cmd_sinfo.c - sinfo: partitions and nodes, in Slurm's columns.
 *
 * Two reads (partitions, then nodes), each linearizable or marked possibly stale. The
 * partition view prints one line per partition and group of nodes alike under the
 * format (by state with the default format); -N prints one line per node and partition.
 * Filters -p, -n and -t are applied here; with a node filter, partitions left without
 * nodes are not shown.
 */
#include "cli.h"
#include "fmt_json.h"
#include "fmt_sinfo.h"
#include "hostlist.h"
#include "strv.h"
#include "util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char synopsis[] =
    "Usage: sinfo [-N] [-p LIST] [-n HOSTLIST] [-t LIST] [-o FORMAT] [-R] [-s] "
    "[-l] [-h] [--json]\n";

static const char help_text[] =
    "Usage: sinfo [OPTIONS]\n"
    "  -N, --Node             one line per node (and partition)\n"
    "  -p, --partition=LIST   partitions to show     -n, --nodes=HOSTLIST  nodes to show\n"
    "  -t, --states=LIST      node states (idle,alloc,mix,down,drain,drng,unk)\n"
    "  -o, --format=FORMAT    columns, e.g. \"%#P %.5a %.10l %.6D %.6t %N\"\n"
    "  -R, --list-reasons     nodes that are down or drained, with the reason\n"
    "  -s, --summarize        node counts per state (A/I/O/T) per partition\n"
    "  -l, --long             long state names       -h, --noheader\n"
    "      --json             {\"partitions\": [...], \"nodes\": [...]}\n"
    "  -V, --version          --help  --usage\n";

static bool in_list(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return true;
    return false;
}

int cmd_sinfo(struct cli *c, int argc, char **argv)
{
    enum { OPT_JSON = 1000 };
    static const struct option lopts[] = {
        {"Node", no_argument, NULL, 'N'},
        {"partition", required_argument, NULL, 'p'},
        {"nodes", required_argument, NULL, 'n'},
        {"states", required_argument, NULL, 't'},
        {"format", required_argument, NULL, 'o'},
        {"list-reasons", no_argument, NULL, 'R'},
        {"summarize", no_argument, NULL, 's'},
        {"long", no_argument, NULL, 'l'},
        {"noheader", no_argument, NULL, 'h'},
        {"all", no_argument, NULL, 'a'},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, CLI_OPT_HELP},
        {"usage", no_argument, NULL, CLI_OPT_USAGE},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    struct fmt_sinfo_opts so = {.header = true};
    bool summarize = false, lng = false;
    const char *format = NULL;
    char **pnames = NULL, **nnames = NULL, **swords = NULL;
    size_t npn = 0, nnn = 0, nsw = 0;
    char err[400];
    int rc = 1;
    struct table_spec spec = {0};
    spurclient_response *rp = NULL, *rn = NULL;
    fmt_partition **parts = NULL;
    fmt_node **nodes = NULL;

    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":Np:n:t:o:RslhaV", lopts, NULL)) != -1) {
        switch (ch) {
        case 'N':
            so.node_view = true;
            break;
        case 'p':
            strv_free(pnames, npn);
            pnames = NULL;
            npn = 0;
            if (strv_split(optarg, &pnames, &npn) != 0)
                goto oom;
            break;
        case 'n':
            strv_free(nnames, nnn);
            nnames = NULL;
            nnn = 0;
            if (hostlist_expand(optarg, &nnames, &nnn, err, sizeof(err)) != 0) {
                cli_error(c, "%s", err);
                goto out;
            }
            break;
        case 't':
            strv_free(swords, nsw);
            swords = NULL;
            nsw = 0;
            if (strv_split(optarg, &swords, &nsw) != 0)
                goto oom;
            for (size_t i = 0; i < nsw; i++) {
                if (fmt_sinfo_state_matches(swords[i], SPUR__API__NODE_STATE__NODE_IDLE) < 0) {
                    cli_error(c, "Invalid node state specified: %s", swords[i]);
                    goto out;
                }
            }
            break;
        case 'o':
            format = optarg;
            break;
        case 'R':
            so.reasons = true;
            break;
        case 's':
            summarize = true;
            break;
        case 'l':
            lng = true;
            break;
        case 'h':
            so.header = false;
            break;
        case 'a':
            break; /* every partition is always shown */
        case OPT_JSON:
            c->json = true;
            break;
        default: /* --help, --usage, --version; or getopt's ':' and '?' */
            rc = cli_option_shared(c, ch, argv, help_text, synopsis);
            goto out;
        }
    }
    if (optind < argc) {
        cli_error(c, "unexpected argument '%s'", argv[optind]);
        goto out;
    }
    if (lng && format != NULL) {
        cli_long_and_format(c);
        goto out;
    }
    if (format == NULL && !lng)
        format = getenv("SINFO_FORMAT");
    if (format == NULL || format[0] == '\0') {
        /* Slurm's formats (sinfo(1); the long ones as Slurm 22.05 prints them). */
        if (so.reasons)
            format = lng ? FMT_SINFO_REASONS_LONG : FMT_SINFO_REASONS;
        else if (summarize)
            format = FMT_SINFO_SUMMARIZE;
        else if (so.node_view)
            format = lng ? FMT_SINFO_NODE_LONG : FMT_SINFO_NODE;
        else if (lng)
            format = FMT_SINFO_LONG;
        else
            format = FMT_SINFO_DEFAULT;
    }
    if (!c->json && fmt_sinfo_spec_parse(format, &spec, err, sizeof(err)) != 0) {
        cli_error(c, "%s", err);
        goto out;
    }

    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__GetPartitionsRequest gp = SPUR__API__GET_PARTITIONS_REQUEST__INIT;
    gp.n_names = npn;
    gp.names = pnames;
    req.op_case = SPUR__API__REQUEST__OP_GET_PARTITIONS;
    req.get_partitions = &gp;
    rp = cli_read(c, &req);
    if (rp == NULL)
        goto out;
    Spur__Api__Request req2 = SPUR__API__REQUEST__INIT;
    Spur__Api__GetNodesRequest gn = SPUR__API__GET_NODES_REQUEST__INIT;
    gn.n_names = nnn;
    gn.names = nnames;
    req2.op_case = SPUR__API__REQUEST__OP_GET_NODES;
    req2.get_nodes = &gn;
    rn = cli_read_any(c, &req2);
    if (rn == NULL)
        goto out;
    if (rn->code != SPUR__API__CODE__CODE_OK &&
        !(rn->code == SPUR__API__CODE__CODE_NOT_FOUND && nnn > 0)) {
        cli_response_error(c, rn, NULL);
        goto out;
    }

    size_t np = rp->partitions ? rp->partitions->n_partitions : 0, mp = 0;
    size_t nn = rn->nodes ? rn->nodes->n_nodes : 0, mn = 0;
    parts = calloc(np ? np : 1, sizeof(*parts));
    nodes = calloc(nn ? nn : 1, sizeof(*nodes));
    if (parts == NULL || nodes == NULL)
        goto oom;
    for (size_t i = 0; i < np; i++) {
        fmt_partition *p = rp->partitions->partitions[i];
        if (npn == 0 || in_list(pnames, npn, p->name))
            parts[mp++] = p;
    }
    for (size_t i = 0; i < nn; i++) {
        fmt_node *x = rn->nodes->nodes[i];
        if (nnn > 0 && !in_list(nnames, nnn, x->name))
            continue;
        bool ok = nsw == 0;
        for (size_t k = 0; k < nsw && !ok; k++)
            ok = fmt_sinfo_state_matches(swords[k], x->state) == 1;
        if (ok)
            nodes[mn++] = x;
    }
    so.hide_empty = nnn > 0 || nsw > 0;
    if (c->json) {
        struct json j;
        json_init(&j, stdout);
        json_obj_begin(&j);
        json_key(&j, "partitions");
        fmt_json_partitions(&j, parts, mp);
        json_key(&j, "nodes");
        fmt_json_nodes(&j, nodes, mn);
        json_obj_end(&j);
        json_end(&j);
    } else {
        struct fmt_ctx ctx = {.now_ms = wall_ms()};
        if (lng && so.header)
            cli_print_date_line(stdout);
        fmt_sinfo(stdout, &spec, parts, mp, nodes, mn, &so, &ctx);
    }
    rc = 0;
    goto out;
oom:
    cli_error(c, "out of memory");
out:
    free(parts);
    free(nodes);
    spurclient_response_free(rp);
    spurclient_response_free(rn);
    table_spec_free(&spec);
    strv_free(pnames, npn);
    strv_free(nnames, nnn);
    strv_free(swords, nsw);
    return rc;
}
