/*
 * log.c - logfmt lines to stderr. See log.h for the line format and why one write(2).
 */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level g_min_level = LOG_INFO;
static const char *g_prog;
static char g_node[24]; /* " node=N", or empty before log_set_node() */

/* The scratch buffers behind log_q(): a small ring per thread, see log.h. */
#define LOG_Q_RING 8
#define LOG_Q_SIZE 1536
static _Thread_local char g_qring[LOG_Q_RING][LOG_Q_SIZE];
static _Thread_local unsigned g_qnext;

void log_setup(enum log_level min_level, const char *prog)
{
    g_min_level = min_level;
    g_prog = prog;
}

void log_set_node(unsigned node_id)
{
    if (node_id == 0)
        g_node[0] = '\0';
    else
        snprintf(g_node, sizeof(g_node), " node=%u", node_id);
}

void log_libevent(int severity, const char *msg)
{
    /* libevent's severities, as event2/event.h numbers them (this file does not link it) */
    static const enum log_level levels[] = {LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR};
    enum log_level level = severity >= 0 && severity < (int)(sizeof(levels) / sizeof(levels[0]))
                               ? levels[severity]
                               : LOG_WARN;
    log_event(level, "libevent", msg != NULL ? msg : "", NULL);
}

int log_level_parse(const char *s)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

const char *log_level_name(enum log_level level)
{
    switch (level) {
    case LOG_DEBUG:
        return "debug";
    case LOG_INFO:
        return "info";
    case LOG_WARN:
        return "warn";
    case LOG_ERROR:
        return "error";
    }
    return "info";
}

int log_enabled(enum log_level level)
{
    return level >= g_min_level;
}

static int needs_quotes(const char *s)
{
    if (*s == '\0')
        return 1;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f)
            return 1;
    }
    return 0;
}

static char *quote_into(char *dst, size_t dstlen, const char *s, int force)
{
    size_t o = 0;
    if (dstlen == 0)
        return dst;
    if (s == NULL)
        s = "";
    if (!force && !needs_quotes(s)) {
        snprintf(dst, dstlen, "%s", s);
        return dst;
    }
    /* Reserve room for the closing quote and the NUL. */
    if (dstlen < 3) {
        dst[0] = '\0';
        return dst;
    }
    dst[o++] = '"';
    for (; *s && o + 3 < dstlen; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            dst[o++] = '\\';
            dst[o++] = (char)c;
        } else if (c == '\n') {
            dst[o++] = '\\';
            dst[o++] = 'n';
        } else if (c < ' ' || c == 0x7f) {
            dst[o++] = '?';
        } else {
            dst[o++] = (char)c;
        }
    }
    dst[o++] = '"';
    dst[o] = '\0';
    return dst;
}

char *log_quote(char *dst, size_t dstlen, const char *s)
{
    return quote_into(dst, dstlen, s, 0);
}

const char *log_q(const char *s)
{
    char *dst = g_qring[g_qnext++ % LOG_Q_RING];
    return quote_into(dst, LOG_Q_SIZE, s, 0);
}

/*
 * Copy the caller's formatted pairs into the line, escaping every control character, so
 * that no value a caller forgot to quote can end the line early or start a forged one.
 * Returns the new length.
 */
static size_t append_pairs(char *line, size_t n, size_t cap, const char *pairs)
{
    for (const unsigned char *p = (const unsigned char *)pairs; *p && n + 3 < cap; p++) {
        if (*p == '\n' || *p == '\r') {
            line[n++] = '\\';
            line[n++] = *p == '\n' ? 'n' : 'r';
        } else if (*p < ' ' || *p == 0x7f) {
            line[n++] = '?';
        } else {
            line[n++] = (char)*p;
        }
    }
    return n;
}

void log_eventv(enum log_level level, const char *comp, const char *msg, const char *kvfmt,
                va_list ap)
{
    char line[2048];
    char pairs[2048];
    char qmsg[512];
    struct timespec ts;
    struct tm tm;
    size_t n;
    int saved_errno = errno;

    if (level < g_min_level)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    /* msg is always quoted, so a reader can split on it without guessing. */
    quote_into(qmsg, sizeof(qmsg), msg, 1);
    n = (size_t)snprintf(line, sizeof(line),
                         "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s%s%s%s comp=%s msg=%s",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts.tv_nsec / 1000000L, log_level_name(level),
                         g_prog ? " prog=" : "", g_prog ? g_prog : "", g_node, comp, qmsg);
    if (n < sizeof(line) - 2 && kvfmt != NULL && kvfmt[0] != '\0') {
        line[n++] = ' ';
        if (vsnprintf(pairs, sizeof(pairs), kvfmt, ap) > 0)
            n = append_pairs(line, n, sizeof(line), pairs);
    }
    if (n > sizeof(line) - 2)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    /* One write: a short write to stderr is not worth retrying for a log line. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
    errno = saved_errno;
}

void log_event(enum log_level level, const char *comp, const char *msg, const char *kvfmt, ...)
{
    va_list ap;
    va_start(ap, kvfmt);
    log_eventv(level, comp, msg, kvfmt, ap);
    va_end(ap);
}
