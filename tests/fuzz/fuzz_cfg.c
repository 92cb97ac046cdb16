/*
 * fuzz_cfg.c - cfg_load_buffer() on arbitrary bytes.
 *
 * A refusal must come with a message naming the file. A configuration that loads must
 * hold only valid values (peers and hosts split as host:port, binds resolve) and must
 * survive cfg_print(): the printed YAML loads again, and prints the same way again.
 */
#include "cfg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "fuzz_cfg: check failed: %s (line %d)\n", #c, __LINE__);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define NAME "fuzz.yaml"

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
        CHECK(cfg_split_hostport(c->controller.peers[i], host, sizeof(host), &port) == 0);
    for (size_t i = 0; i < c->controller.nhosts; i++)
        CHECK(cfg_split_hostport(c->controller.hosts[i], host, sizeof(host), &port) == 0);
    CHECK(cfg_split_hostport(c->controller.listen, host, sizeof(host), &port) == 0);
    CHECK(cfg_split_hostport(c->raft.listen, host, sizeof(host), &port) == 0);
    CHECK(cfg_bind_address(c->health.bind, addr, sizeof(addr)) == 0);
    CHECK(cfg_bind_address(c->metrics.bind, addr, sizeof(addr)) == 0);
    CHECK(c->controller.node_id <= c->controller.npeers);
    CHECK(c->supervisor.stall_timeout_ms > c->supervisor.heartbeat_ms);
    CHECK(c->supervisor.kill_timeout_ms >= c->supervisor.stall_timeout_ms);
    CHECK(c->npartitions >= 1);
    size_t ndefault = 0;
    for (size_t i = 0; i < c->npartitions; i++)
        ndefault += c->partitions[i].is_default;
    CHECK(ndefault == 1);
    CHECK(cfg_node_id(c, "spurctld-0") <= c->controller.npeers);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cfg c, again;
    struct cfg_error e;
    memset(&e, 0, sizeof(e));
    if (cfg_load_buffer(NAME, (const char *)data, size, &c, &e) != 0) {
        CHECK(memchr(e.msg, '\0', sizeof(e.msg)) != NULL);
        CHECK(strncmp(e.msg, NAME, strlen(NAME)) == 0);
        CHECK(c.cluster_name == NULL && c.partitions == NULL);
        return 0;
    }
    check_values(&c);

    size_t len1, len2;
    char *text1 = print(&c, &len1);
    if (cfg_load_buffer(NAME, text1, len1, &again, &e) != 0) {
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
