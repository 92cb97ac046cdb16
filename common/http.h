/*
 * http.h - the little HTTP/1.x spurctld speaks, as pure functions.
 *
 * One parser for both HTTP listeners: the supervisor's health responder
 * (supervisor/responder.c, through http_serve()) and the worker's metrics listener
 * (raftd/httpd.c, through http_parse_request() and http_format_head()). It lives in
 * common/ so that the worker links nothing of the supervisor's, and it stays pure (no
 * I/O, no allocation, no libevent) so that the static PID 1 can link it too.
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
 *
 * Pipelining (RFC 9112 section 9.3): a client may send many requests before reading any
 * answer. http_serve() answers every complete request at the front of the buffer, in
 * order, until the output has no room for one more response; the caller sends what it
 * produced and calls it again with the rest. It never answers past a request that ends the
 * connection (an error, Connection: close, a body), so nothing after it is answered.
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

enum http_route { HTTP_ROUTE_HEALTHZ, HTTP_ROUTE_READYZ, HTTP_ROUTE_NOT_FOUND };
enum http_route http_route_of(const struct http_request *req);

/* The reason phrase of a status code this module or its callers answer ("Not Found"). */
const char *http_reason(int code);

/*
 * Format the status line and headers of a response into out, NUL-terminated: content_type
 * and body_len (Content-Length) describe the body the caller sends after them, Connection
 * says keep-alive or close, allow_header adds "Allow: GET, HEAD" (for 405). Returns the
 * length, or 0 if cap is too small.
 */
size_t http_format_head(char *out, size_t cap, int code, const char *content_type, size_t body_len,
                        bool keep_alive, bool allow_header);

/*
 * Format a whole text/plain response into out. body is one word and a newline for the
 * probe routes. head: send headers only (Content-Length still that of the body). Returns
 * the length, or 0 if cap is too small (then nothing past out[cap - 1] was written).
 */
size_t http_format_response(char *out, size_t cap, int code, const char *body, bool head,
                            bool keep_alive, bool allow_header);

/* Room one response of this module needs at most (the longest status line, every header,
 * the longest body); http_serve() answers only while this much is left. */
#define HTTP_RESPONSE_MAX 256

/* The probe answer for a route: status code and a word without its newline ("ok"). */
typedef void (*http_probe_fn)(void *arg, enum http_route route, int *code, const char **word);

struct http_serve_result {
    size_t consumed;   /* bytes at the front of in that were answered: drop them */
    size_t produced;   /* bytes of responses written to out */
    unsigned answered; /* responses written */
    bool close;        /* the connection ends after out is sent; the rest of in is void */
    bool partial;      /* in, after consumed, holds the start of an incomplete request */
};

/*
 * Answer the complete requests at the front of in (in_len bytes; max_header is the header
 * limit, see http_parse_request) into out (out_cap bytes free), in order. Stops at the
 * first incomplete request (partial), when out has less than HTTP_RESPONSE_MAX left (then
 * neither partial nor close is set and in still holds requests to answer), or after a
 * response that closes the connection: 400, 431 and 505 for what cannot be parsed, or a
 * request that asks for the close. probe gives the answer of the probe routes; it is
 * called once per probe request, in request order. Pure: no I/O, no allocation.
 */
void http_serve(const char *in, size_t in_len, size_t max_header, char *out, size_t out_cap,
                http_probe_fn probe, void *arg, struct http_serve_result *res);

#endif
