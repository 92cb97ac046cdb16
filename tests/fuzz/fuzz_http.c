/*
 * fuzz_http.c - http_parse_request() on arbitrary buffers.
 *
 * Byte 0 picks the header size limit; the rest is what a client sent. Every request found
 * must lie inside the buffer (consumed <= len, and progress), carry a NUL-terminated path,
 * parse the same from exactly its own bytes, and format into a response. Pipelined
 * requests are taken out one after another until the parser wants more or refuses.
 * http_serve() on the same bytes, with an output buffer of a size byte 0 also picks and
 * resumed as the responder does, must answer exactly those requests (up to one that ends
 * the connection, plus the error response for a refused one), within its buffers.
 */
#define FUZZ_NAME "fuzz_http"
#include "fuzz_check.h"

#include "http.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void probe(void *arg, enum http_route route, int *code, const char **word)
{
    (void)arg;
    *code = route == HTTP_ROUTE_READYZ ? 503 : 200;
    *word = route == HTTP_ROUTE_READYZ ? "noleader" : "ok";
}

static void check_request(const struct http_request *r, const char *buf, size_t len,
                          size_t max_header)
{
    CHECK(r->consumed > 0 && r->consumed <= len);
    CHECK(memchr(r->path, '\0', sizeof(r->path)) != NULL);
    CHECK(r->method == HTTP_GET || r->method == HTTP_HEAD || r->method == HTTP_OTHER);
    CHECK(!(r->has_body && r->keep_alive));
    enum http_route route = http_route_of(r);
    CHECK(route == HTTP_ROUTE_HEALTHZ || route == HTTP_ROUTE_READYZ ||
          route == HTTP_ROUTE_NOT_FOUND);
    if (r->path_truncated)
        CHECK(route == HTTP_ROUTE_NOT_FOUND && strlen(r->path) == HTTP_PATH_MAX - 1);

    /* The request must not depend on the bytes after it. */
    struct http_request alone;
    char *copy = malloc(r->consumed);
    CHECK(copy != NULL);
    memcpy(copy, buf, r->consumed);
    CHECK(http_parse_request(copy, r->consumed, max_header, &alone) == HTTP_REQUEST);
    free(copy);
    CHECK(alone.consumed == r->consumed && alone.method == r->method &&
          alone.keep_alive == r->keep_alive && alone.has_body == r->has_body &&
          alone.path_truncated == r->path_truncated && strcmp(alone.path, r->path) == 0);

    char out[512];
    int code = route == HTTP_ROUTE_NOT_FOUND ? 404 : 200;
    size_t n = http_format_response(out, sizeof(out), code, "ok\n", r->method == HTTP_HEAD,
                                    r->keep_alive, r->method == HTTP_OTHER);
    CHECK(n > 0 && n < sizeof(out));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t max_header = 16 + (size_t)data[0] * 8;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    size_t off = 0;

    unsigned expect = 0;
    bool ended = false, complete = true;
    for (int n = 0; n < 1000; n++) {
        struct http_request r;
        enum http_result res = http_parse_request(buf + off, len - off, max_header, &r);
        if (res != HTTP_REQUEST) {
            CHECK(res == HTTP_NEED_MORE || res == HTTP_BAD || res == HTTP_TOO_LARGE ||
                  res == HTTP_VERSION);
            if (res == HTTP_TOO_LARGE)
                CHECK(len - off >= max_header);
            if (!ended && res != HTTP_NEED_MORE)
                expect++; /* its 400, 431 or 505 */
            break;
        }
        check_request(&r, buf + off, len - off, max_header);
        off += r.consumed;
        if (!ended) {
            expect++;
            ended = !r.keep_alive;
        }
        if (n == 999)
            complete = false;
    }
    if (!complete)
        return 0;

    /* http_serve, resumed with an emptied output each time, as the responder does. */
    size_t cap = HTTP_RESPONSE_MAX + (size_t)data[0] * 4;
    char *out = malloc(cap);
    CHECK(out != NULL);
    size_t done = 0;
    unsigned answered = 0;
    for (;;) {
        struct http_serve_result res;
        http_serve(buf + done, len - done, max_header, out, cap, probe, NULL, &res);
        CHECK(res.consumed <= len - done && res.produced <= cap);
        done += res.consumed;
        answered += res.answered;
        if (res.close || res.partial || done == len)
            break;
        CHECK(res.answered > 0); /* room for one response: it must progress */
    }
    free(out);
    CHECK(answered == expect);
    return 0;
}
