/*
 * scontrol_args.c - scontrol update / create node arguments; see scontrol_args.h.
 */
#include "scontrol_args.h"

#include "errmsg.h"
#include "strv.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void scontrol_args_update_free(struct scontrol_args_update *u)
{
    free(u->nodes);
    free(u->state);
    free(u->reason);
    memset(u, 0, sizeof(*u));
}

int scontrol_args_update_parse(int argc, char *const *argv, struct scontrol_args_update *u,
                               char *err, size_t errlen)
{
    memset(u, 0, sizeof(*u));
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (eq == NULL) {
            errmsg_set(err, errlen, "invalid update argument \"%s\" (expected Key=Value)", a);
            goto fail;
        }
        size_t klen = (size_t)(eq - a);
        const char *v = eq + 1;
        int rc = 0;
        if (klen == 8 && strncasecmp(a, "NodeName", 8) == 0) {
            if (v[0] == '\0') {
                errmsg_set(err, errlen, "NodeName= needs a node name");
                goto fail;
            }
            rc = strv_replace(&u->nodes, v);
        } else if (klen == 5 && strncasecmp(a, "State", 5) == 0) {
            static const char *const states[] = {"drain", "resume", "down", "idle"};
            const char *found = NULL;
            for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++)
                if (strcasecmp(v, states[k]) == 0)
                    found = states[k];
            if (found == NULL) {
                errmsg_set(err, errlen, "Invalid node state specified: %s", v);
                goto fail;
            }
            rc = strv_replace(&u->state, found);
        } else if (klen == 6 && strncasecmp(a, "Reason", 6) == 0) {
            rc = strv_replace(&u->reason, v);
        } else if ((klen == 5 && strncasecmp(a, "JobId", 5) == 0) ||
                   (klen == 13 && strncasecmp(a, "PartitionName", 13) == 0)) {
            errmsg_set(err, errlen,
                       "only nodes can be updated (NodeName=...); use scontrol hold/release or "
                       "scancel for jobs");
            goto fail;
        } else {
            errmsg_set(err, errlen, "Update of this parameter is not supported: %s", a);
            goto fail;
        }
        if (rc != 0) {
            errmsg_set(err, errlen, "out of memory");
            goto fail;
        }
    }
    if (u->nodes == NULL) {
        errmsg_set(err, errlen, "No valid entity in update command: NodeName= is required");
        goto fail;
    }
    if (u->state == NULL) {
        errmsg_set(err, errlen, "State= is required (DRAIN, RESUME, DOWN or IDLE)");
        goto fail;
    }
    if ((strcmp(u->state, "drain") == 0 || strcmp(u->state, "down") == 0) &&
        (u->reason == NULL || u->reason[0] == '\0')) {
        errmsg_set(err, errlen,
                   "You must specify a reason when DOWNING or DRAINING a node. Request denied");
        goto fail;
    }
    return 0;
fail:
    scontrol_args_update_free(u);
    return -1;
}

/* ---- scontrol create node ------------------------------------------------------------ */

void scontrol_args_create_free(struct scontrol_args_create *n)
{
    free(n->name);
    free(n->address);
    strv_free(n->features, n->nfeatures);
    memset(n, 0, sizeof(*n));
}

/* A decimal number with an optional K/M/G/T suffix, in MB (MB without a suffix). */
static int parse_mb(const char *s, uint64_t *mb)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    uint64_t mult = 1;
    if (*end != '\0') {
        if (end[1] != '\0')
            return -1;
        switch (toupper((unsigned char)*end)) {
        case 'K':
            *mb = v / 1024 + (v % 1024 != 0);
            return 0;
        case 'M':
            break;
        case 'G':
            mult = 1024;
            break;
        case 'T':
            mult = 1024 * 1024;
            break;
        default:
            return -1;
        }
    }
    if (v > UINT64_MAX / mult)
        return -1;
    *mb = v * mult;
    return 0;
}

int scontrol_args_create_parse(int argc, char *const *argv, struct scontrol_args_create *n,
                               char *err, size_t errlen)
{
    bool have_cpus = false, have_mem = false;
    memset(n, 0, sizeof(*n));
    int i = 0;
    if (argc > 0 && strcasecmp(argv[0], "node") == 0)
        i++;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (eq == NULL) {
            errmsg_set(err, errlen, "invalid argument \"%s\" (expected Key=Value)", a);
            goto fail;
        }
        size_t klen = (size_t)(eq - a);
        const char *v = eq + 1;
        if (klen == 8 && strncasecmp(a, "NodeName", 8) == 0) {
            if (v[0] == '\0' || strpbrk(v, ",[] \t") != NULL) {
                errmsg_set(err, errlen, "NodeName= needs one node name, not \"%s\"", v);
                goto fail;
            }
            if (strv_replace(&n->name, v) != 0)
                goto oom;
        } else if (klen == 4 && strncasecmp(a, "CPUs", 4) == 0) {
            char *end;
            errno = 0;
            unsigned long c = strtoul(v, &end, 10);
            if (!isdigit((unsigned char)v[0]) || *end || errno || c == 0 || c > UINT32_MAX) {
                errmsg_set(err, errlen, "invalid CPUs=%s (a whole number of at least 1)", v);
                goto fail;
            }
            n->cpus = (uint32_t)c;
            have_cpus = true;
        } else if (klen == 10 && strncasecmp(a, "RealMemory", 10) == 0) {
            if (parse_mb(v, &n->mem_mb) != 0) {
                errmsg_set(err, errlen, "invalid RealMemory=%s (megabytes, or with K, M, G or T)",
                           v);
                goto fail;
            }
            have_mem = true;
        } else if (klen == 8 && strncasecmp(a, "Features", 8) == 0) {
            strv_free(n->features, n->nfeatures);
            n->features = NULL;
            n->nfeatures = 0;
            if (strv_split(v, &n->features, &n->nfeatures) != 0)
                goto oom;
        } else if (klen == 8 && strncasecmp(a, "NodeAddr", 8) == 0) {
            if (strv_replace(&n->address, v) != 0)
                goto oom;
        } else {
            errmsg_set(err, errlen, "Invalid parameter for create node: %s", a);
            goto fail;
        }
    }
    if (n->name == NULL) {
        errmsg_set(err, errlen, "NodeName= is required");
        goto fail;
    }
    if (!have_cpus) {
        errmsg_set(err, errlen, "CPUs= is required");
        goto fail;
    }
    if (!have_mem) {
        errmsg_set(err, errlen, "RealMemory= is required");
        goto fail;
    }
    if (n->address == NULL && strv_replace(&n->address, "") != 0)
        goto oom;
    if (n->features == NULL && (n->features = calloc(1, sizeof(char *))) == NULL)
        goto oom;
    return 0;
oom:
    errmsg_set(err, errlen, "out of memory");
fail:
    scontrol_args_create_free(n);
    return -1;
}
