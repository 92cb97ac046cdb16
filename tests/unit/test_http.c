/*
 * test_http.c - the HTTP/1.x parser and response formatter of the health responder and
 * the metrics listener (common/http.c).
 *
 * Pinned here: methods, targets and query strings; keep-alive defaults of HTTP/1.0 and 1.1
 * and the Connection token lists that change them; bare LF line ends and leading empty
 * lines; NEED_MORE for every proper prefix of a request; the header size limit; malformed
 * request lines and headers (obs-fold, missing colon, non-token characters, NUL bytes);
 * other HTTP versions; requests that announce a body; pipelined requests; long paths;
 * routing; and byte-exact responses. http_serve(): every complete request of a pipelined
 * stream answered once, in order, however the bytes are split and however little room the
 * output has; the stop at a partial request, at a closing request and at an error; and
 * that every response fits HTTP_RESPONSE_MAX.
 */
#include "check_run.h"
#include "http.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXH 1024

/* Parse a NUL-terminated request held in an exactly sized heap copy (ASan sees overreads). */
static enum http_result parse_n(const char *s, size_t len, size_t max, struct http_request *r)
{
    char *copy = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, s, len);
    memset(r, 0x5a, sizeof(*r));
    enum http_result res = http_parse_request(copy, len, max, r);
    free(copy);
    return res;
}

static enum http_result parse(const char *s, struct http_request *r)
{
    return parse_n(s, strlen(s), MAXH, r);
}

/* s must parse as one whole request with this method, path and keep-alive. */
static void expect_request(const char *s, enum http_method m, const char *path, bool keep)
{
    struct http_request r;
    enum http_result res = parse(s, &r);
    ck_assert_msg(res == HTTP_REQUEST, "result %d for \"%s\"", res, s);
    ck_assert_int_eq(r.method, m);
    ck_assert_str_eq(r.path, path);
    ck_assert_msg(r.keep_alive == keep, "keep_alive %d for \"%s\"", r.keep_alive, s);
    ck_assert_uint_eq(r.consumed, strlen(s));
    ck_assert(!r.path_truncated);
}

static void expect_result(const char *s, enum http_result want)
{
    struct http_request r;
    enum http_result res = parse(s, &r);
    ck_assert_msg(res == want, "result %d, want %d, for \"%s\"", res, want, s);
}

/* ---- methods, targets, versions ----------------------------------------------------- */

START_TEST(test_methods)
{
    expect_request("GET /healthz HTTP/1.1\r\n\r\n", HTTP_GET, "/healthz", true);
    expect_request("HEAD /readyz HTTP/1.1\r\n\r\n", HTTP_HEAD, "/readyz", true);
    expect_request("POST /readyz HTTP/1.1\r\n\r\n", HTTP_OTHER, "/readyz", true);
    expect_request("DELETE / HTTP/1.1\r\n\r\n", HTTP_OTHER, "/", true);
    expect_request("OPTIONS * HTTP/1.1\r\n\r\n", HTTP_OTHER, "*", true);
    struct http_request r;
    ck_assert_int_eq(parse("OPTIONS * HTTP/1.1\r\n\r\n", &r), HTTP_REQUEST);
    ck_assert_int_eq(http_route_of(&r), HTTP_ROUTE_NOT_FOUND);
    expect_request("X-CUSTOM_1 /x HTTP/1.1\r\n\r\n", HTTP_OTHER, "/x", true);
    /* Methods are case-sensitive. */
    expect_request("get /healthz HTTP/1.1\r\n\r\n", HTTP_OTHER, "/healthz", true);
    expect_request("GETS /healthz HTTP/1.1\r\n\r\n", HTTP_OTHER, "/healthz", true);
    expect_request("HEA /healthz HTTP/1.1\r\n\r\n", HTTP_OTHER, "/healthz", true);
}
END_TEST

START_TEST(test_query_and_fragment)
{
    expect_request("GET /readyz?verbose=1 HTTP/1.1\r\n\r\n", HTTP_GET, "/readyz", true);
    expect_request("GET /readyz? HTTP/1.1\r\n\r\n", HTTP_GET, "/readyz", true);
    expect_request("GET /healthz#top HTTP/1.1\r\n\r\n", HTTP_GET, "/healthz", true);
    expect_request("GET /?a=/readyz HTTP/1.1\r\n\r\n", HTTP_GET, "/", true);
    expect_request("GET /a%2Fb HTTP/1.1\r\n\r\n", HTTP_GET, "/a%2Fb", true);
}
END_TEST

START_TEST(test_keep_alive_defaults)
{
    /* HTTP/1.1 keeps the connection by default, HTTP/1.0 closes it. */
    expect_request("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", HTTP_GET, "/healthz", true);
    expect_request("GET /healthz HTTP/1.0\r\n\r\n", HTTP_GET, "/healthz", false);
    /* Connection: close / keep-alive override, case-insensitively, inside token lists. */
    expect_request("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", HTTP_GET, "/", false);
    expect_request("GET / HTTP/1.1\r\nconnection: CLOSE\r\n\r\n", HTTP_GET, "/", false);
    expect_request("GET / HTTP/1.1\r\nConnection: TE, close\r\n\r\n", HTTP_GET, "/", false);
    expect_request("GET / HTTP/1.1\r\nConnection:close,TE\r\n\r\n", HTTP_GET, "/", false);
    expect_request("GET / HTTP/1.1\r\nConnection: \t close \t\r\n\r\n", HTTP_GET, "/", false);
    expect_request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", HTTP_GET, "/", true);
    expect_request("GET / HTTP/1.0\r\nConnection: Upgrade, Keep-Alive\r\n\r\n", HTTP_GET, "/",
                   true);
    /* Close wins over keep-alive, in either order. */
    expect_request("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", HTTP_GET, "/", false);
    expect_request("GET / HTTP/1.1\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
                   HTTP_GET, "/", false);
    /* A token that merely contains "close" is a different token. */
    expect_request("GET / HTTP/1.1\r\nConnection: closed\r\n\r\n", HTTP_GET, "/", true);
    expect_request("GET / HTTP/1.1\r\nConnection: x-close\r\n\r\n", HTTP_GET, "/", true);
    expect_request("GET / HTTP/1.0\r\nConnection: keep-alive-ish\r\n\r\n", HTTP_GET, "/", false);
    /* The header name must be exactly Connection. */
    expect_request("GET / HTTP/1.1\r\nX-Connection: close\r\n\r\n", HTTP_GET, "/", true);
    expect_request("GET / HTTP/1.1\r\nProxy-Connection: close\r\n\r\n", HTTP_GET, "/", true);
}
END_TEST

START_TEST(test_line_endings)
{
    expect_request("GET /healthz HTTP/1.1\n\n", HTTP_GET, "/healthz", true);
    expect_request("GET /healthz HTTP/1.1\nHost: a\nConnection: close\n\n", HTTP_GET, "/healthz",
                   false);
    expect_request("GET /healthz HTTP/1.1\r\nHost: a\n\r\n", HTTP_GET, "/healthz", true);
    expect_request("GET /healthz HTTP/1.1\nHost: a\r\n\n", HTTP_GET, "/healthz", true);
    /* Leading empty lines before the request line are skipped and counted as consumed. */
    expect_request("\r\nGET /readyz HTTP/1.1\r\n\r\n", HTTP_GET, "/readyz", true);
    expect_request("\n\n\r\nGET /readyz HTTP/1.1\r\n\r\n", HTTP_GET, "/readyz", true);
}
END_TEST

START_TEST(test_incomplete_every_prefix)
{
    static const char probe[] = "GET /healthz HTTP/1.1\r\nHost: localhost:6823\r\n"
                                "User-Agent: kube-probe/1.29\r\nAccept: */*\r\n"
                                "Connection: close\r\n\r\n";
    static const char *const reqs[] = {
        probe,
        "HEAD /readyz?x=1 HTTP/1.0\nConnection: keep-alive\n\n",
        "\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    };
    for (size_t k = 0; k < sizeof(reqs) / sizeof(reqs[0]); k++) {
        size_t n = strlen(reqs[k]);
        for (size_t len = 0; len < n; len++) {
            struct http_request r;
            enum http_result res = parse_n(reqs[k], len, MAXH, &r);
            ck_assert_msg(res == HTTP_NEED_MORE, "request %zu cut at %zu: result %d", k, len, res);
        }
        struct http_request r;
        ck_assert_int_eq(parse_n(reqs[k], n, MAXH, &r), HTTP_REQUEST);
        ck_assert_uint_eq(r.consumed, n);
    }
}
END_TEST

START_TEST(test_too_large)
{
    /* No end of the header block within the limit: refused, however it goes on. */
    char buf[600];
    memcpy(buf, "GET / HTTP/1.1\r\nX-Pad: ", 23);
    memset(buf + 23, 'a', sizeof(buf) - 23);
    struct http_request r;
    ck_assert_int_eq(parse_n(buf, 256, 256, &r), HTTP_TOO_LARGE);
    ck_assert_int_eq(parse_n(buf, sizeof(buf), 256, &r), HTTP_TOO_LARGE);
    /* Below the limit it is just incomplete. */
    ck_assert_int_eq(parse_n(buf, 255, 256, &r), HTTP_NEED_MORE);

    /* A header block that ends exactly at the limit fits; one byte longer does not. */
    char req[256];
    memset(req, 0, sizeof(req));
    memcpy(req, "GET / HTTP/1.1\r\nX-Pad: ", 23);
    memset(req + 23, 'b', 256 - 23 - 4);
    memcpy(req + 256 - 4, "\r\n\r\n", 4);
    ck_assert_int_eq(parse_n(req, 256, 256, &r), HTTP_REQUEST);
    ck_assert_uint_eq(r.consumed, 256);
    ck_assert_int_eq(parse_n(req, 256, 255, &r), HTTP_TOO_LARGE);
}
END_TEST

struct bad_case {
    const char *req;
    enum http_result want;
};

static const struct bad_case bad_cases[] = {
    /* Request lines. */
    {"\r\n", HTTP_NEED_MORE},
    {"GET\r\n\r\n", HTTP_BAD},
    {"GET /\r\n\r\n", HTTP_BAD},
    {" GET / HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET  / HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET / \r\n\r\n", HTTP_BAD},
    {"GET healthz HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET http://x/healthz HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET ** HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"G(T / HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GE\"T / HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET /a\x01z HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET /a\x7fz HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET /\tx HTTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET / http/1.1\r\n\r\n", HTTP_BAD},
    {"GET / FTP/1.1\r\n\r\n", HTTP_BAD},
    {"GET / HTTP\r\n\r\n", HTTP_BAD},
    /* Other versions. */
    {"GET / HTTP/2.0\r\n\r\n", HTTP_VERSION},
    {"GET / HTTP/0.9\r\n\r\n", HTTP_VERSION},
    {"GET / HTTP/1.2\r\n\r\n", HTTP_VERSION},
    /* Header fields. */
    {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nHost: a\r\n\tfolded\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\n: value\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nHo/st: a\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nX\x80y: a\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nContent-Length: \r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nContent-Length: 1a\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", HTTP_BAD},
    {"GET / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", HTTP_BAD},
};

START_TEST(test_bad_requests)
{
    expect_result(bad_cases[_i].req, bad_cases[_i].want);
}
END_TEST

START_TEST(test_malformed_versions_refused)
{
    /* Not a version this parser speaks, whether it answers 400 or 505. */
    static const char *const reqs[] = {"GET / HTTP/1.1x\r\n\r\n", "GET / HTTP/1\r\n\r\n",
                                       "GET / HTTP/3\r\n\r\n", "GET / HTTP/\r\n\r\n",
                                       "GET / HTTP/1.10\r\n\r\n"};
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        struct http_request r;
        enum http_result res = parse(reqs[i], &r);
        ck_assert_msg(res == HTTP_BAD || res == HTTP_VERSION, "result %d for %s", res, reqs[i]);
    }
}
END_TEST

START_TEST(test_nul_bytes)
{
    /* A NUL is no token character, in a method or in a header name. */
    static const char m[] = "G\0T / HTTP/1.1\r\n\r\n";
    static const char h[] = "GET / HTTP/1.1\r\nX\0y: 1\r\n\r\n";
    static const char p[] = "GET /a\0b HTTP/1.1\r\n\r\n";
    struct http_request r;
    ck_assert_int_eq(parse_n(m, sizeof(m) - 1, MAXH, &r), HTTP_BAD);
    ck_assert_int_eq(parse_n(h, sizeof(h) - 1, MAXH, &r), HTTP_BAD);
    ck_assert_int_eq(parse_n(p, sizeof(p) - 1, MAXH, &r), HTTP_BAD);
}
END_TEST

START_TEST(test_body_announced)
{
    struct http_request r;
    ck_assert_int_eq(parse("POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", &r), HTTP_REQUEST);
    ck_assert(r.has_body);
    ck_assert(!r.keep_alive);
    /* consumed covers the header block only; the body is never read. */
    ck_assert_uint_eq(r.consumed, strlen("POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n"));

    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                           "Connection: keep-alive\r\n\r\n",
                           &r),
                     HTTP_REQUEST);
    ck_assert(r.has_body);
    ck_assert(!r.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n", &r),
                     HTTP_REQUEST);
    ck_assert(r.has_body);

    /* Zero, however written, is no body. */
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &r), HTTP_REQUEST);
    ck_assert(!r.has_body);
    ck_assert(r.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\ncontent-length:000 \r\n\r\n", &r), HTTP_REQUEST);
    ck_assert(!r.has_body);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nContent-Length: 010\r\n\r\n", &r), HTTP_REQUEST);
    ck_assert(r.has_body);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", &r),
                     HTTP_REQUEST);
    ck_assert(r.has_body);
}
END_TEST

START_TEST(test_pipelined)
{
    const char *two = "GET /healthz HTTP/1.1\r\n\r\nHEAD /readyz HTTP/1.1\r\nConnection: "
                      "close\r\n\r\nGET /x";
    size_t len = strlen(two);
    struct http_request r;
    ck_assert_int_eq(parse_n(two, len, MAXH, &r), HTTP_REQUEST);
    ck_assert_int_eq(r.method, HTTP_GET);
    ck_assert_str_eq(r.path, "/healthz");
    ck_assert(r.keep_alive);
    size_t off = r.consumed;
    ck_assert_uint_eq(off, strlen("GET /healthz HTTP/1.1\r\n\r\n"));
    ck_assert_int_eq(parse_n(two + off, len - off, MAXH, &r), HTTP_REQUEST);
    ck_assert_int_eq(r.method, HTTP_HEAD);
    ck_assert_str_eq(r.path, "/readyz");
    ck_assert(!r.keep_alive);
    off += r.consumed;
    ck_assert_str_eq(two + off, "GET /x");
    ck_assert_int_eq(parse_n(two + off, len - off, MAXH, &r), HTTP_NEED_MORE);
}
END_TEST

START_TEST(test_long_path)
{
    char req[512];
    char path[300];
    struct http_request r;
    /* HTTP_PATH_MAX - 1 characters fit exactly. */
    memset(path, 'p', sizeof(path));
    path[0] = '/';
    path[HTTP_PATH_MAX - 1] = '\0';
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\n\r\n", path);
    ck_assert_int_eq(parse(req, &r), HTTP_REQUEST);
    ck_assert(!r.path_truncated);
    ck_assert_str_eq(r.path, path);

    /* One more is truncated, flagged, and routes nowhere even if its head is a route. */
    memcpy(path, "/readyz", 7);
    memset(path + 7, 'q', sizeof(path) - 7);
    path[250] = '\0';
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\n\r\n", path);
    ck_assert_int_eq(parse(req, &r), HTTP_REQUEST);
    ck_assert(r.path_truncated);
    ck_assert_uint_eq(strlen(r.path), HTTP_PATH_MAX - 1);
    ck_assert_int_eq(http_route_of(&r), HTTP_ROUTE_NOT_FOUND);
    ck_assert_uint_eq(r.consumed, strlen(req));

    /* A long query string does not truncate the path. */
    memset(path, 'z', sizeof(path));
    memcpy(path, "/readyz?", 8);
    path[250] = '\0';
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\n\r\n", path);
    ck_assert_int_eq(parse(req, &r), HTTP_REQUEST);
    ck_assert(!r.path_truncated);
    ck_assert_int_eq(http_route_of(&r), HTTP_ROUTE_READYZ);
}
END_TEST

START_TEST(test_routes)
{
    static const struct {
        const char *path;
        enum http_route route;
    } cases[] = {
        {"/healthz", HTTP_ROUTE_HEALTHZ},    {"/livez", HTTP_ROUTE_HEALTHZ},
        {"/readyz", HTTP_ROUTE_READYZ},      {"/", HTTP_ROUTE_NOT_FOUND},
        {"/healthz/", HTTP_ROUTE_NOT_FOUND}, {"/HEALTHZ", HTTP_ROUTE_NOT_FOUND},
        {"/health", HTTP_ROUTE_NOT_FOUND},   {"/readyzz", HTTP_ROUTE_NOT_FOUND},
        {"//readyz", HTTP_ROUTE_NOT_FOUND},  {"/metrics", HTTP_ROUTE_NOT_FOUND},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char req[128];
        struct http_request r;
        snprintf(req, sizeof(req), "GET %s?q HTTP/1.1\r\n\r\n", cases[i].path);
        ck_assert_int_eq(parse(req, &r), HTTP_REQUEST);
        ck_assert_msg(http_route_of(&r) == cases[i].route, "%s", cases[i].path);
    }
}
END_TEST

/* ---- responses ---------------------------------------------------------------------- */

START_TEST(test_response_200)
{
    char out[512];
    size_t n = http_format_response(out, sizeof(out), 200, "ok\n", false, true, false);
    const char *want = "HTTP/1.1 200 OK\r\n"
                       "Content-Type: text/plain; charset=utf-8\r\n"
                       "Content-Length: 3\r\n"
                       "Cache-Control: no-store\r\n"
                       "Connection: keep-alive\r\n"
                       "\r\n"
                       "ok\n";
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(out, want);
}
END_TEST

START_TEST(test_response_head)
{
    /* HEAD: the GET headers, Content-Length of the body that is not sent. */
    char out[512];
    size_t n = http_format_response(out, sizeof(out), 503, "stalled\n", true, false, false);
    const char *want = "HTTP/1.1 503 Service Unavailable\r\n"
                       "Content-Type: text/plain; charset=utf-8\r\n"
                       "Content-Length: 8\r\n"
                       "Cache-Control: no-store\r\n"
                       "Connection: close\r\n"
                       "\r\n";
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(out, want);
}
END_TEST

START_TEST(test_response_405)
{
    char out[512];
    size_t n =
        http_format_response(out, sizeof(out), 405, "method not allowed\n", false, true, true);
    const char *want = "HTTP/1.1 405 Method Not Allowed\r\n"
                       "Content-Type: text/plain; charset=utf-8\r\n"
                       "Content-Length: 19\r\n"
                       "Cache-Control: no-store\r\n"
                       "Allow: GET, HEAD\r\n"
                       "Connection: keep-alive\r\n"
                       "\r\n"
                       "method not allowed\n";
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(out, want);
}
END_TEST

START_TEST(test_response_reasons)
{
    static const struct {
        int code;
        const char *line;
    } cases[] = {
        {400, "HTTP/1.1 400 Bad Request\r\n"},
        {404, "HTTP/1.1 404 Not Found\r\n"},
        {408, "HTTP/1.1 408 Request Timeout\r\n"},
        {431, "HTTP/1.1 431 Request Header Fields Too Large\r\n"},
        {505, "HTTP/1.1 505 HTTP Version Not Supported\r\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[512];
        ck_assert_uint_gt(
            http_format_response(out, sizeof(out), cases[i].code, "x\n", false, false, false), 0);
        ck_assert_msg(strncmp(out, cases[i].line, strlen(cases[i].line)) == 0, "%s", out);
    }
}
END_TEST

START_TEST(test_response_small_buffer)
{
    char out[512];
    size_t full = http_format_response(out, sizeof(out), 200, "ok\n", false, true, false);
    ck_assert_uint_gt(full, 0);
    /* Room for the response but not its NUL, or less: 0, never a cut response. */
    for (size_t cap = 0; cap <= full; cap++) {
        char small[512];
        memset(small, 'Z', sizeof(small));
        ck_assert_uint_eq(http_format_response(small, cap, 200, "ok\n", false, true, false), 0);
        for (size_t i = cap; i < sizeof(small); i++)
            ck_assert_msg(small[i] == 'Z', "cap %zu: wrote byte %zu", cap, i);
    }
    ck_assert_uint_eq(http_format_response(out, full + 1, 200, "ok\n", false, true, false), full);
}
END_TEST

/* The metrics listener's head: its own content type, a body it sends itself. */
START_TEST(test_format_head)
{
    char out[512];
    size_t n = http_format_head(out, sizeof(out), 200, "text/plain; version=0.0.4", 12345, true,
                                false);
    const char *want = "HTTP/1.1 200 OK\r\n"
                       "Content-Type: text/plain; version=0.0.4\r\n"
                       "Content-Length: 12345\r\n"
                       "Cache-Control: no-store\r\n"
                       "Connection: keep-alive\r\n"
                       "\r\n";
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(out, want);

    n = http_format_head(out, sizeof(out), 405, "text/plain; charset=utf-8", 0, false, true);
    want = "HTTP/1.1 405 Method Not Allowed\r\n"
           "Content-Type: text/plain; charset=utf-8\r\n"
           "Content-Length: 0\r\n"
           "Cache-Control: no-store\r\n"
           "Allow: GET, HEAD\r\n"
           "Connection: close\r\n"
           "\r\n";
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_str_eq(out, want);

    /* The head and its NUL must fit: one byte short is 0. */
    size_t full = http_format_head(out, sizeof(out), 503, "x", 3, false, false);
    ck_assert_uint_gt(full, 0);
    ck_assert_uint_eq(http_format_head(out, full, 503, "x", 3, false, false), 0);
    ck_assert_uint_eq(http_format_head(out, full + 1, 503, "x", 3, false, false), full);
    ck_assert_str_eq(http_reason(503), "Service Unavailable");
    ck_assert_str_eq(http_reason(418), "Unknown");
}
END_TEST

/* A whole response is exactly its head followed by the body (GET) or the head alone. */
START_TEST(test_response_is_head_and_body)
{
    char resp[512], head[512];
    size_t n = http_format_response(resp, sizeof(resp), 404, "not found\n", false, false, false);
    size_t h = http_format_head(head, sizeof(head), 404, "text/plain; charset=utf-8", 10, false,
                                false);
    ck_assert_uint_gt(h, 0);
    ck_assert_uint_eq(n, h + 10);
    ck_assert_int_eq(memcmp(resp, head, h), 0);
    ck_assert_str_eq(resp + h, "not found\n");
    /* Room for the head but not the body: 0, not a response cut after its head. */
    ck_assert_uint_eq(
        http_format_response(resp, h + 5, 404, "not found\n", false, false, false), 0);
    ck_assert_uint_eq(http_format_response(resp, h + 1, 404, "not found\n", true, false, false),
                      h);
}
END_TEST

/* ---- http_serve: pipelining ---------------------------------------------------------- */

struct probe_log {
    unsigned calls;
    enum http_route routes[512];
};

/* /healthz answers "ok", /readyz "starting" with 503, so the two can be told apart. */
static void fake_probe(void *arg, enum http_route route, int *code, const char **word)
{
    struct probe_log *pl = arg;
    if (pl->calls < sizeof(pl->routes) / sizeof(pl->routes[0]))
        pl->routes[pl->calls] = route;
    pl->calls++;
    *code = route == HTTP_ROUTE_READYZ ? 503 : 200;
    *word = route == HTTP_ROUTE_READYZ ? "starting" : "ok";
}

/* n requests cycling through GET/HEAD and the routes; appended to buf. Returns length. */
static size_t pipeline(char *buf, size_t cap, unsigned n)
{
    static const char *const reqs[] = {
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        "HEAD /readyz HTTP/1.1\r\n\r\n",
        "GET /readyz?probe=1 HTTP/1.1\r\nUser-Agent: t\r\n\r\n",
        "GET /nope HTTP/1.1\r\n\r\n",
        "HEAD /livez HTTP/1.1\n\n",
        "DELETE /healthz HTTP/1.1\r\n\r\n",
        "GET /livez HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    };
    size_t len = 0;
    for (unsigned i = 0; i < n; i++) {
        const char *r = reqs[i % (sizeof(reqs) / sizeof(reqs[0]))];
        size_t l = strlen(r);
        ck_assert_uint_le(len + l, cap);
        memcpy(buf + len, r, l);
        len += l;
    }
    return len;
}

/* What the responder sends for the stream: answer each request on its own, concatenated. */
static size_t reference_answers(const char *in, size_t len, char *out, size_t cap)
{
    size_t off = 0, produced = 0;
    while (off < len) {
        struct http_request req;
        ck_assert_int_eq(http_parse_request(in + off, len - off, MAXH, &req), HTTP_REQUEST);
        off += req.consumed;
        enum http_route route = http_route_of(&req);
        bool head = req.method == HTTP_HEAD;
        size_t n;
        if (route == HTTP_ROUTE_NOT_FOUND)
            n = http_format_response(out + produced, cap - produced, 404, "not found\n", head,
                                     req.keep_alive, false);
        else if (req.method == HTTP_OTHER)
            n = http_format_response(out + produced, cap - produced, 405,
                                     "method not allowed\n", false, req.keep_alive, true);
        else if (route == HTTP_ROUTE_READYZ)
            n = http_format_response(out + produced, cap - produced, 503, "starting\n", head,
                                     req.keep_alive, false);
        else
            n = http_format_response(out + produced, cap - produced, 200, "ok\n", head,
                                     req.keep_alive, false);
        ck_assert_uint_gt(n, 0);
        produced += n;
    }
    return produced;
}

/*
 * Drive http_serve() as the responder does: bytes arrive in chunks of `chunk`, the input
 * buffer holds in_cap, the output out_cap, and the "socket" takes everything produced.
 * Returns the concatenated output.
 */
static size_t drive(const char *stream, size_t len, size_t chunk, size_t in_cap, size_t out_cap,
                    char *sent, size_t sent_cap, unsigned *answered)
{
    char *in = malloc(in_cap);
    char *out = malloc(out_cap);
    ck_assert(in != NULL && out != NULL);
    size_t in_len = 0, fed = 0, nsent = 0;
    struct probe_log pl = {0};
    *answered = 0;
    while (fed < len || in_len > 0) {
        size_t take = len - fed < chunk ? len - fed : chunk;
        if (take > in_cap - in_len)
            take = in_cap - in_len;
        memcpy(in + in_len, stream + fed, take);
        in_len += take;
        fed += take;
        struct http_serve_result res;
        http_serve(in, in_len, in_cap, out, out_cap, fake_probe, &pl, &res);
        ck_assert(!res.close);
        ck_assert_uint_le(res.produced, out_cap);
        ck_assert_uint_le(nsent + res.produced, sent_cap);
        memcpy(sent + nsent, out, res.produced);
        nsent += res.produced;
        *answered += res.answered;
        memmove(in, in + res.consumed, in_len - res.consumed);
        in_len -= res.consumed;
        /* No progress is only allowed while a request is incomplete and bytes are due. */
        if (res.consumed == 0 && res.produced == 0)
            ck_assert_msg(res.partial && fed < len, "stuck with %zu bytes buffered", in_len);
    }
    free(in);
    free(out);
    return nsent;
}

START_TEST(test_serve_pipelined_in_one_buffer)
{
    static char stream[8192], want[65536], out[65536];
    for (unsigned n = 1; n <= 100; n += 9) {
        size_t len = pipeline(stream, sizeof(stream), n);
        size_t wl = reference_answers(stream, len, want, sizeof(want));
        struct probe_log pl = {0};
        struct http_serve_result res;
        http_serve(stream, len, MAXH, out, sizeof(out), fake_probe, &pl, &res);
        ck_assert_uint_eq(res.answered, n);
        ck_assert_uint_eq(res.consumed, len);
        ck_assert(!res.partial && !res.close);
        ck_assert_uint_eq(res.produced, wl);
        ck_assert(memcmp(out, want, wl) == 0);
    }
    /* The probe is asked once per probe request, in request order (GET, HEAD alike). */
    size_t len = pipeline(stream, sizeof(stream), 7);
    struct probe_log pl = {0};
    struct http_serve_result res;
    http_serve(stream, len, MAXH, out, sizeof(out), fake_probe, &pl, &res);
    ck_assert_uint_eq(pl.calls, 5);
    static const enum http_route order[] = {HTTP_ROUTE_HEALTHZ, HTTP_ROUTE_READYZ,
                                            HTTP_ROUTE_READYZ, HTTP_ROUTE_HEALTHZ,
                                            HTTP_ROUTE_HEALTHZ};
    for (unsigned i = 0; i < 5; i++)
        ck_assert_int_eq(pl.routes[i], order[i]);
}
END_TEST

START_TEST(test_serve_small_output_resumes)
{
    /* The responder's own buffer sizes, and the smallest output that still works. */
    static char stream[8192], want[65536], sent[65536];
    size_t len = pipeline(stream, sizeof(stream), 100);
    size_t wl = reference_answers(stream, len, want, sizeof(want));
    static const size_t caps[] = {HTTP_RESPONSE_MAX, HTTP_RESPONSE_MAX + 1, 300, 1024, 4096};
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        unsigned answered;
        size_t n = drive(stream, len, len, sizeof(stream), caps[i], sent, sizeof(sent), &answered);
        ck_assert_uint_eq(answered, 100);
        ck_assert_uint_eq(n, wl);
        ck_assert_msg(memcmp(sent, want, wl) == 0, "out_cap %zu: answers differ", caps[i]);
    }
    /* Less room than one response: nothing is answered, nothing is consumed. */
    char out[HTTP_RESPONSE_MAX - 1];
    struct probe_log pl = {0};
    struct http_serve_result res;
    http_serve(stream, len, MAXH, out, sizeof(out), fake_probe, &pl, &res);
    ck_assert_uint_eq(res.consumed, 0);
    ck_assert_uint_eq(res.produced, 0);
    ck_assert(!res.partial && !res.close);
}
END_TEST

START_TEST(test_serve_every_split)
{
    /* However the stream is cut into reads, the same answers in the same order. */
    static char stream[8192], want[65536], sent[65536];
    size_t len = pipeline(stream, sizeof(stream), 30);
    size_t wl = reference_answers(stream, len, want, sizeof(want));
    for (size_t chunk = 1; chunk <= 80; chunk++) {
        unsigned answered;
        size_t n = drive(stream, len, chunk, 2048, 1024, sent, sizeof(sent), &answered);
        ck_assert_uint_eq(answered, 30);
        ck_assert_uint_eq(n, wl);
        ck_assert_msg(memcmp(sent, want, wl) == 0, "chunk %zu: answers differ", chunk);
    }
    /* An input buffer just large enough for the longest request, as a tight bound. */
    unsigned answered;
    size_t n = drive(stream, len, 13, 64, 1024, sent, sizeof(sent), &answered);
    ck_assert_uint_eq(answered, 30);
    ck_assert(n == wl && memcmp(sent, want, wl) == 0);
}
END_TEST

START_TEST(test_serve_partial_tail)
{
    static char stream[4096];
    char out[8192];
    size_t len = pipeline(stream, sizeof(stream), 10);
    const char *tail = "GET /healthz HTTP/1.1\r\nHost";
    memcpy(stream + len, tail, strlen(tail));
    struct probe_log pl = {0};
    struct http_serve_result res;
    http_serve(stream, len + strlen(tail), MAXH, out, sizeof(out), fake_probe, &pl, &res);
    ck_assert_uint_eq(res.answered, 10);
    ck_assert_uint_eq(res.consumed, len);
    ck_assert(res.partial);
    ck_assert(!res.close);
    /* Only the partial request left: nothing to do yet. */
    http_serve(tail, strlen(tail), MAXH, out, sizeof(out), fake_probe, &pl, &res);
    ck_assert_uint_eq(res.answered, 0);
    ck_assert_uint_eq(res.consumed, 0);
    ck_assert(res.partial);
}
END_TEST

START_TEST(test_serve_stops_at_close_and_errors)
{
    char out[8192];
    struct probe_log pl = {0};
    struct http_serve_result res;

    /* Connection: close ends the stream there: the request after it is not answered. */
    const char *c = "GET /healthz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\nConnection: close\r\n\r\n"
                    "GET /healthz HTTP/1.1\r\n\r\n";
    http_serve(c, strlen(c), MAXH, out, sizeof(out), fake_probe, &pl, &res);
    ck_assert_uint_eq(res.answered, 2);
    ck_assert(res.close);
    ck_assert_uint_eq(pl.calls, 2);
    out[res.produced] = '\0';
    ck_assert_ptr_nonnull(strstr(out, "Connection: close\r\n\r\nstarting\n"));
    ck_assert_ptr_null(strstr(strstr(out, "starting\n"), "HTTP/1.1"));

    /* HTTP/1.0 without keep-alive closes too. */
    const char *v10 = "GET /healthz HTTP/1.0\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n";
    http_serve(v10, strlen(v10), MAXH, out, sizeof(out), fake_probe, &pl, &res);
    ck_assert_uint_eq(res.answered, 1);
    ck_assert(res.close);

    /* A malformed request after good ones: they are answered, then 400 and the close. */
    static const struct {
        const char *bad;
        const char *status;
    } errs[] = {
        {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", "HTTP/1.1 400 "},
        {"GET / HTTP/2.0\r\n\r\n", "HTTP/1.1 505 "},
    };
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        char buf[512];
        int n = snprintf(buf, sizeof(buf), "GET /healthz HTTP/1.1\r\n\r\n%s"
                         "GET /healthz HTTP/1.1\r\n\r\n", errs[i].bad);
        http_serve(buf, (size_t)n, MAXH, out, sizeof(out), fake_probe, &pl, &res);
        ck_assert_uint_eq(res.answered, 2);
        ck_assert(res.close);
        out[res.produced] = '\0';
        const char *second = strstr(out + 1, "HTTP/1.1 ");
        ck_assert_ptr_nonnull(second);
        ck_assert(strncmp(second, errs[i].status, strlen(errs[i].status)) == 0);
        ck_assert_ptr_nonnull(strstr(second, "Connection: close"));
    }

    /* A header block over the limit after a good request: answered, then 431. */
    char big[700];
    int n = snprintf(big, sizeof(big), "GET /livez HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nX: ");
    memset(big + n, 'a', sizeof(big) - (size_t)n);
    http_serve(big, sizeof(big), 256, out, sizeof(out), fake_probe, &pl, &res);
    ck_assert_uint_eq(res.answered, 2);
    ck_assert(res.close);
    out[res.produced] = '\0';
    ck_assert_ptr_nonnull(strstr(out, "HTTP/1.1 431 "));

    /* A body announced: answered, then the close (the body is never read). */
    const char *post = "POST /healthz HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n";
    http_serve(post, strlen(post), MAXH, out, sizeof(out), fake_probe, &pl, &res);
    ck_assert_uint_eq(res.answered, 1);
    ck_assert(res.close);
}
END_TEST

START_TEST(test_serve_full_buffer_without_end_is_too_large)
{
    /* Empty lines first, then no end of the header block: a buffer of max_header bytes
     * can never complete, so it is refused rather than left waiting. */
    char buf[256];
    memset(buf, 'a', sizeof(buf));
    memcpy(buf, "\r\n\r\nGET / HTTP/1.1\r\nX: ", 22);
    struct http_request r;
    ck_assert_int_eq(parse_n(buf, sizeof(buf), sizeof(buf), &r), HTTP_TOO_LARGE);
    ck_assert_int_eq(parse_n(buf, sizeof(buf) - 1, sizeof(buf), &r), HTTP_NEED_MORE);
}
END_TEST

START_TEST(test_every_response_fits_the_bound)
{
    /* The longest status line with the Allow header and the longest body and word. */
    static const int codes[] = {200, 400, 404, 405, 408, 431, 503, 505};
    static const char *const bodies[] = {"http version not supported\n", "method not allowed\n",
                                         "header too large\n", "12345678901234567890\n"};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        for (size_t j = 0; j < sizeof(bodies) / sizeof(bodies[0]); j++) {
            char out[HTTP_RESPONSE_MAX];
            ck_assert_uint_gt(http_format_response(out, sizeof(out), codes[i], bodies[j], false,
                                                   true, true),
                              0);
        }
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = check_case(
        s, "parse",
        (const TTest *[]){test_methods, test_query_and_fragment, test_keep_alive_defaults,
                          test_line_endings, test_incomplete_every_prefix, test_too_large,
                          test_malformed_versions_refused, test_nul_bytes, test_body_announced,
                          test_pipelined, test_long_path, test_routes, NULL});
    tcase_add_loop_test(tc, test_bad_requests, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));

    check_case(s, "format",
               (const TTest *[]){test_response_200, test_response_head, test_response_405,
                                 test_response_reasons, test_response_small_buffer,
                                 test_format_head, test_response_is_head_and_body, NULL});

    check_case(s, "serve",
               (const TTest *[]){test_serve_pipelined_in_one_buffer,
                                 test_serve_small_output_resumes, test_serve_every_split,
                                 test_serve_partial_tail, test_serve_stops_at_close_and_errors,
                                 test_serve_full_buffer_without_end_is_too_large,
                                 test_every_response_fits_the_bound, NULL});
    return s;
}

int main(void)
{
    return check_run(http_suite());
}
