/*
 * test_http.c - the health responder's HTTP/1.x parser and response formatter
 * (supervisor/http.c).
 *
 * Pinned here: methods, targets and query strings; keep-alive defaults of HTTP/1.0 and 1.1
 * and the Connection token lists that change them; bare LF line ends and leading empty
 * lines; NEED_MORE for every proper prefix of a request; the header size limit; malformed
 * request lines and headers (obs-fold, missing colon, non-token characters, NUL bytes);
 * other HTTP versions; requests that announce a body; pipelined requests; long paths;
 * routing; and byte-exact responses.
 */
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
    ck_assert_int_eq(http_route_of(&r), ROUTE_NOT_FOUND);
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
    ck_assert_int_eq(http_route_of(&r), ROUTE_NOT_FOUND);
    ck_assert_uint_eq(r.consumed, strlen(req));

    /* A long query string does not truncate the path. */
    memset(path, 'z', sizeof(path));
    memcpy(path, "/readyz?", 8);
    path[250] = '\0';
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\n\r\n", path);
    ck_assert_int_eq(parse(req, &r), HTTP_REQUEST);
    ck_assert(!r.path_truncated);
    ck_assert_int_eq(http_route_of(&r), ROUTE_READYZ);
}
END_TEST

START_TEST(test_routes)
{
    static const struct {
        const char *path;
        enum http_route route;
    } cases[] = {
        {"/healthz", ROUTE_HEALTHZ},    {"/livez", ROUTE_HEALTHZ},
        {"/readyz", ROUTE_READYZ},      {"/", ROUTE_NOT_FOUND},
        {"/healthz/", ROUTE_NOT_FOUND}, {"/HEALTHZ", ROUTE_NOT_FOUND},
        {"/health", ROUTE_NOT_FOUND},   {"/readyzz", ROUTE_NOT_FOUND},
        {"//readyz", ROUTE_NOT_FOUND},  {"/metrics", ROUTE_NOT_FOUND},
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

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_methods);
    tcase_add_test(tc, test_query_and_fragment);
    tcase_add_test(tc, test_keep_alive_defaults);
    tcase_add_test(tc, test_line_endings);
    tcase_add_test(tc, test_incomplete_every_prefix);
    tcase_add_test(tc, test_too_large);
    tcase_add_loop_test(tc, test_bad_requests, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(tc, test_malformed_versions_refused);
    tcase_add_test(tc, test_nul_bytes);
    tcase_add_test(tc, test_body_announced);
    tcase_add_test(tc, test_pipelined);
    tcase_add_test(tc, test_long_path);
    tcase_add_test(tc, test_routes);
    suite_add_tcase(s, tc);

    tc = tcase_create("format");
    tcase_add_test(tc, test_response_200);
    tcase_add_test(tc, test_response_head);
    tcase_add_test(tc, test_response_405);
    tcase_add_test(tc, test_response_reasons);
    tcase_add_test(tc, test_response_small_buffer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
