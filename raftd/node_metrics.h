/*
 * node_metrics.h - the worker's metrics page: Prometheus text on /metrics, /healthz and
 * /readyz, rendered on request from what the modules count anyway.
 */
#ifndef SPUR_NODE_METRICS_H
#define SPUR_NODE_METRICS_H

#include "acct.h"
#include "api.h"
#include "httpd.h"
#include "jobctl.h"
#include "node.h"
#include "node_api.h"

/* What the page reads; every pointer borrowed from the composition root (replica.c). */
struct node_metrics {
    const struct node *node;
    const struct node_api *reqs;
    const struct api_server *api;
    const struct jobctl *jobs;
    const struct acct *acct; /* NULL: no accounting series */
};

/* The httpd handler (arg: a struct node_metrics). */
void node_metrics_handler(void *arg, const char *path, struct httpd_reply *reply);

#endif
