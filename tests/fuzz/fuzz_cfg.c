/*
 * fuzz_cfg.c - cfg_load_buffer() on arbitrary bytes.
 *
 * A refusal must come with at least one message, each naming the file, on one line, the
 * first also in msg. A configuration that loads (judged as host "spurctld-0") must hold
 * only valid values (peers and hosts split as host:port, binds resolve), have a node id
 * for that host, pass cfg_validate() again, and survive cfg_print(): the printed YAML
 * loads again, and prints the same way again.
 */
#define FUZZ_NAME "fuzz_cfg"
#include "fuzz_check.h"

#include "cfg.h"
#include "netaddr.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "fuzz.yaml"
#define HOST "spurctld-0"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *print(const struct cfg *c, size_t *len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    CHECK(f != NULL);
    cfg_print(f, c);
    CHECK(fclose(f) == 0);
    return out;
}

static void check_values(const struct cfg *c)
{
    char host[256], addr[64];
    uint16_t port;
    CHECK(c->controller.npeers >= 1 && c->controller.npeers <= CFG_MAX_PEERS);
    for (size_t i = 0; i < c->controller.npeers; i++)
        CHECK(netaddr_split_hostport(c->controller.peers[i], host, sizeof(host), &port) == 0);
    for (size_t i = 0; i < c->controller.nhosts; i++)
        CHECK(netaddr_split_hostport(c->controller.hosts[i], host, sizeof(host), &port) == 0);
    CHECK(netaddr_split_hostport(c->controller.listen, host, sizeof(host), &port) == 0);
    CHECK(netaddr_split_hostport(c->raft.listen, host, sizeof(host), &port) == 0);
    CHECK(netaddr_bind_address(c->health.bind, addr, sizeof(addr)) == 0);
    CHECK(netaddr_bind_address(c->metrics.bind, addr, sizeof(addr)) == 0);
    CHECK(c->controller.node_id <= c->controller.npeers);
    CHECK(c->supervisor.stall_timeout_ms > c->supervisor.heartbeat_ms);
    CHECK(c->supervisor.kill_timeout_ms >= c->supervisor.stall_timeout_ms);
    CHECK(c->npartitions >= 1);
    size_t ndefault = 0;
    for (size_t i = 0; i < c->npartitions; i++)
        ndefault += c->partitions[i].is_default;
    CHECK(ndefault == 1);
    CHECK(cfg_node_id(c, HOST) >= 1 && cfg_node_id(c, HOST) <= c->controller.npeers);
    CHECK(c->controller.npeers != 2);
    static struct cfg_error again;
    memset(&again, 0, sizeof(again));
    CHECK(cfg_validate(c, HOST, &again) == 0 && again.count == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cfg c, again;
    static struct cfg_error e;
    memset(&e, 0, sizeof(e));
    if (cfg_load_buffer_host(NAME, (const char *)data, size, HOST, &c, &e) != 0) {
        CHECK(e.count >= 1 && e.count <= CFG_MAX_ERRORS);
        CHECK(strcmp(e.msg, e.list[0]) == 0);
        for (size_t i = 0; i < e.count; i++) {
            CHECK(memchr(e.list[i], '\0', sizeof(e.list[i])) != NULL);
            CHECK(strncmp(e.list[i], NAME, strlen(NAME)) == 0);
            CHECK(strchr(e.list[i], '\n') == NULL);
        }
        CHECK(c.cluster_name == NULL && c.partitions == NULL && c.where == NULL);
        return 0;
    }
    check_values(&c);

    size_t len1, len2;
    char *text1 = print(&c, &len1);
    if (cfg_load_buffer_host(NAME, text1, len1, HOST, &again, &e) != 0) {
        fprintf(stderr, "fuzz_cfg: cfg_print output refused: %s\n%s\n", e.msg, text1);
        abort();
    }
    char *text2 = print(&again, &len2);
    if (len1 != len2 || memcmp(text1, text2, len1) != 0) {
        fprintf(stderr, "fuzz_cfg: round trip changed the configuration:\n%s\n---\n%s\n", text1,
                text2);
        abort();
    }
    free(text1);
    free(text2);
    cfg_free(&again);
    cfg_free(&c);
    return 0;
}
