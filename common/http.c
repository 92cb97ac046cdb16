/*
 * http.c - HTTP/1.x request parsing and response formatting, pure; see http.h.
 */
#include "http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Find the end of the header block: "\r\n\r\n" or "\n\n" (or mixed). Returns its length. */
static size_t header_end(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        size_t j = i + 1;
        if (j < len && buf[j] == '\r')
            j++;
        if (j < len && buf[j] == '\n')
            return j + 1;
    }
    return 0;
}

/* Next line in [p, end): returns its length without the line end, sets *next. */
static size_t line_at(const char *p, const char *end, const char **next)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL) {
        *next = end;
        return (size_t)(end - p);
    }
    *next = nl + 1;
    size_t n = (size_t)(nl - p);
    if (n > 0 && p[n - 1] == '\r')
        n--;
    return n;
}

static bool is_tchar(char c)
{
    /* c != '\0' first: strchr() finds the terminator, which is no token character. */
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool token_in_list(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok);
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (i - s == tl && strncasecmp(v + s, tok, tl) == 0)
            return true;
    }
    return false;
}

enum http_result http_parse_request(const char *buf, size_t len, size_t max_header,
                                    struct http_request *req)
{
    size_t skip = 0;
    /* Leading empty lines are allowed before a request line (RFC 9112 section 2.2). */
    while (skip < len && (buf[skip] == '\r' || buf[skip] == '\n') && skip < 8)
        skip++;
    const char *start = buf + skip;
    size_t avail = len - skip;
    size_t hlen = header_end(start, avail > max_header ? max_header : avail);
    if (hlen == 0) {
        /* The whole buffer counts, skipped empty lines included: a caller whose buffer is
         * max_header bytes long and full could otherwise wait for an end that cannot fit. */
        if (avail >= max_header || len >= max_header)
            return HTTP_TOO_LARGE;
        return HTTP_NEED_MORE;
    }
    const char *end = start + hlen;
    const char *next;
    memset(req, 0, sizeof(*req));

    /* Request line: METHOD SP target SP HTTP/1.x */
    size_t ll = line_at(start, end, &next);
    const char *p = start, *le = start + ll;
    const char *sp1 = memchr(p, ' ', ll);
    if (sp1 == NULL || sp1 == p)
        return HTTP_BAD;
    for (const char *q = p; q < sp1; q++)
        if (!is_tchar(*q))
            return HTTP_BAD;
    size_t mlen = (size_t)(sp1 - p);
    if (mlen == 3 && memcmp(p, "GET", 3) == 0)
        req->method = HTTP_GET;
    else if (mlen == 4 && memcmp(p, "HEAD", 4) == 0)
        req->method = HTTP_HEAD;
    else
        req->method = HTTP_OTHER;
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', (size_t)(le - t));
    if (sp2 == NULL || sp2 == t)
        return HTTP_BAD;
    const char *v = sp2 + 1;
    size_t vlen = (size_t)(le - v);
    int minor;
    if (vlen == 8 && memcmp(v, "HTTP/1.", 7) == 0 && (v[7] == '0' || v[7] == '1'))
        minor = v[7] - '0';
    else if (vlen >= 5 && memcmp(v, "HTTP/", 5) == 0)
        return HTTP_VERSION;
    else
        return HTTP_BAD;
    if (*t != '/' && !(sp2 - t == 1 && *t == '*'))
        return HTTP_BAD;
    size_t plen = 0;
    for (const char *q = t; q < sp2 && *q != '?' && *q != '#'; q++) {
        if ((unsigned char)*q <= ' ' || *q == 0x7f)
            return HTTP_BAD;
        if (plen + 1 < HTTP_PATH_MAX)
            req->path[plen++] = *q;
        else
            req->path_truncated = true;
    }
    req->path[plen] = '\0';
    req->keep_alive = minor == 1;

    /* Header fields. */
    bool conn_close = false, conn_keep = false;
    for (p = next; p < end;) {
        ll = line_at(p, end, &next);
        if (ll == 0)
            break;
        if (*p == ' ' || *p == '\t')
            return HTTP_BAD; /* obsolete line folding */
        const char *colon = memchr(p, ':', ll);
        if (colon == NULL || colon == p)
            return HTTP_BAD;
        for (const char *q = p; q < colon; q++)
            if (!is_tchar(*q))
                return HTTP_BAD;
        size_t nlen = (size_t)(colon - p);
        const char *val = colon + 1;
        const char *vend = p + ll;
        while (val < vend && (*val == ' ' || *val == '\t'))
            val++;
        while (vend > val && (vend[-1] == ' ' || vend[-1] == '\t'))
            vend--;
        size_t vl = (size_t)(vend - val);
        if (nlen == 10 && strncasecmp(p, "connection", 10) == 0) {
            if (token_in_list(val, vl, "close"))
                conn_close = true;
            if (token_in_list(val, vl, "keep-alive"))
                conn_keep = true;
        } else if (nlen == 14 && strncasecmp(p, "content-length", 14) == 0) {
            if (vl == 0)
                return HTTP_BAD;
            for (size_t i = 0; i < vl; i++)
                if (val[i] < '0' || val[i] > '9')
                    return HTTP_BAD;
            for (size_t i = 0; i < vl; i++)
                if (val[i] != '0')
                    req->has_body = true;
        } else if (nlen == 17 && strncasecmp(p, "transfer-encoding", 17) == 0) {
            req->has_body = true;
        }
        p = next;
    }
    if (conn_close)
        req->keep_alive = false;
    else if (conn_keep)
        req->keep_alive = true;
    if (req->has_body)
        req->keep_alive = false;
    req->consumed = skip + hlen;
    return HTTP_REQUEST;
}

enum http_route http_route_of(const struct http_request *req)
{
    if (req->path_truncated)
        return HTTP_ROUTE_NOT_FOUND;
    if (strcmp(req->path, "/healthz") == 0 || strcmp(req->path, "/livez") == 0)
        return HTTP_ROUTE_HEALTHZ;
    if (strcmp(req->path, "/readyz") == 0)
        return HTTP_ROUTE_READYZ;
    return HTTP_ROUTE_NOT_FOUND;
}

const char *http_reason(int code)
{
    switch (code) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

size_t http_format_head(char *out, size_t cap, int code, const char *content_type, size_t body_len,
                        bool keep_alive, bool allow_header)
{
    int n =
        snprintf(out, cap,
                 "HTTP/1.1 %d %s\r\n"
                 "Content-Type: %s\r\n"
                 "Content-Length: %zu\r\n"
                 "Cache-Control: no-store\r\n"
                 "%s"
                 "Connection: %s\r\n"
                 "\r\n",
                 code, http_reason(code), content_type, body_len,
                 allow_header ? "Allow: GET, HEAD\r\n" : "", keep_alive ? "keep-alive" : "close");
    if (n < 0 || (size_t)n >= cap)
        return 0;
    return (size_t)n;
}

size_t http_format_response(char *out, size_t cap, int code, const char *body, bool head,
                            bool keep_alive, bool allow_header)
{
    size_t blen = strlen(body);
    size_t n = http_format_head(out, cap, code, "text/plain; charset=utf-8", blen, keep_alive,
                                allow_header);
    if (n == 0)
        return 0;
    if (head)
        return n;
    if (blen >= cap - n)
        return 0; /* the body and its NUL do not fit */
    memcpy(out + n, body, blen + 1);
    return n + blen;
}

/* One response into out[*produced..cap); false when it did not fit (never a cut one). */
static bool put_response(char *out, size_t cap, struct http_serve_result *res, int code,
                         const char *body, bool head, bool keep_alive, bool allow)
{
    size_t n = http_format_response(out + res->produced, cap - res->produced, code, body, head,
                                    keep_alive, allow);
    if (n == 0)
        return false;
    res->produced += n;
    res->answered++;
    return true;
}

void http_serve(const char *in, size_t in_len, size_t max_header, char *out, size_t out_cap,
                http_probe_fn probe, void *arg, struct http_serve_result *res)
{
    memset(res, 0, sizeof(*res));
    while (res->consumed < in_len) {
        if (out_cap - res->produced < HTTP_RESPONSE_MAX)
            return; /* the caller sends what is there, then calls again */
        struct http_request req;
        enum http_result pr =
            http_parse_request(in + res->consumed, in_len - res->consumed, max_header, &req);
        const char *err_body = NULL;
        int err_code = 0;
        switch (pr) {
        case HTTP_NEED_MORE:
            res->partial = true;
            return;
        case HTTP_TOO_LARGE:
            err_code = 431;
            err_body = "header too large\n";
            break;
        case HTTP_VERSION:
            err_code = 505;
            err_body = "http version not supported\n";
            break;
        case HTTP_BAD:
            err_code = 400;
            err_body = "bad request\n";
            break;
        case HTTP_REQUEST:
            break;
        }
        if (err_code != 0) {
            /* Where the bad request ends is unknown: answer it and end the connection. */
            put_response(out, out_cap, res, err_code, err_body, false, false, false);
            res->close = true;
            return;
        }
        res->consumed += req.consumed;
        enum http_route route = http_route_of(&req);
        bool head = req.method == HTTP_HEAD;
        bool ok;
        if (route == HTTP_ROUTE_NOT_FOUND) {
            ok = put_response(out, out_cap, res, 404, "not found\n", head, req.keep_alive, false);
        } else if (req.method == HTTP_OTHER) {
            ok = put_response(out, out_cap, res, 405, "method not allowed\n", false,
                              req.keep_alive, true);
        } else {
            int code = 503;
            const char *word = "dead";
            char body[24];
            probe(arg, route, &code, &word);
            snprintf(body, sizeof(body), "%.20s\n", word);
            ok = put_response(out, out_cap, res, code, body, head, req.keep_alive, false);
        }
        if (!ok || !req.keep_alive) {
            /* !ok cannot happen (HTTP_RESPONSE_MAX covers every response): close rather
             * than answer the next request out of turn. */
            res->close = true;
            return;
        }
    }
}
