/*
 * http.h - the little HTTP/1.x the health responder speaks, as pure functions.
 *
 * The parser looks at the bytes a connection has buffered and says: not complete yet,
 * one request (method, path, whether the connection may stay open, bytes it occupies), or
 * malformed. It allocates nothing and copies at most HTTP_PATH_MAX bytes of the path, so
 * it is safe on anything a client sends; the fuzzer in tests/fuzz drives it directly.
 *
 * Supported: origin-form targets ("/readyz?x" routes as "/readyz"), HTTP/1.0 and 1.1,
 * Connection: close / keep-alive, CRLF or bare LF line ends, leading empty lines.
 * A request announcing a body (Content-Length > 0 or Transfer-Encoding) is answered and
 * the connection then closed, since probes never send one and we do not read bodies.
 */
#ifndef SPUR_HTTP_H
#define SPUR_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_PATH_MAX 64

enum http_method { HTTP_GET, HTTP_HEAD, HTTP_OTHER };

enum http_result {
    HTTP_NEED_MORE = 0,
    HTTP_REQUEST = 1,   /* *req filled */
    HTTP_BAD = -1,      /* 400 then close */
    HTTP_TOO_LARGE = -2, /* 431 then close: headers exceed the limit */
    HTTP_VERSION = -3,  /* 505 then close */
};

struct http_request {
    enum http_method method;
    char path[HTTP_PATH_MAX]; /* NUL-terminated; truncated paths are flagged */
    bool path_truncated;
    bool keep_alive;
    bool has_body;
    size_t consumed; /* bytes of the buffer this request occupied */
};

enum http_result http_parse_request(const char *buf, size_t len, size_t max_header,
                                    struct http_request *req);

enum http_route { ROUTE_HEALTHZ, ROUTE_READYZ, ROUTE_NOT_FOUND };
enum http_route http_route_of(const struct http_request *req);

/*
 * Format a whole response into out. body is one word and a newline for the probe routes.
 * head: send headers only (Content-Length still that of the body). Returns the length, or
 * 0 if cap is too small.
 */
size_t http_format_response(char *out, size_t cap, int code, const char *body, bool head,
                            bool keep_alive, bool allow_header);

#endif
