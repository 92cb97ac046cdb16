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

void log_setup(enum log_level min_level, const char *prog)
{
    g_min_level = min_level;
    g_prog = prog;
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

void log_eventv(enum log_level level, const char *comp, const char *msg, const char *kvfmt,
                va_list ap)
{
    char line[2048];
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
                         "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s%s%s comp=%s msg=%s",
                         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                         tm.tm_sec, ts.tv_nsec / 1000000L, log_level_name(level),
                         g_prog ? " prog=" : "", g_prog ? g_prog : "", comp, qmsg);
    if (n < sizeof(line) - 2 && kvfmt != NULL && kvfmt[0] != '\0') {
        line[n++] = ' ';
        int k = vsnprintf(line + n, sizeof(line) - n, kvfmt, ap);
        if (k > 0)
            n += (size_t)k;
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
