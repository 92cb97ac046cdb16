/*
 * log.h - one logfmt line per event, to stderr.
 *
 * Every line reads
 *
 *     ts=2026-11-30T07:40:01.123Z level=warn comp=sup msg="worker stalled" ms=3012
 *
 * ts is UTC wall time with milliseconds; comp names the program part that speaks; msg is
 * a short sentence, always quoted; the remaining key=value pairs are the caller's, written
 * with a printf format. Values that may hold spaces or quotes must go through
 * log_quote() or be printed with %s inside "\"...\"" by a caller that knows them to be
 * clean. A line is assembled in one buffer and written with one write(2), so lines from
 * several processes sharing stderr never interleave (lines are far below PIPE_BUF).
 *
 * The module keeps two process-wide settings (the level and the program name) because a
 * logger is the one thing every function may reach without a context argument; they are
 * set once in main() before anything logs.
 */
#ifndef SPUR_LOG_H
#define SPUR_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };

/* Set the minimum level printed and the "prog=" tag; prog may be NULL (no tag). */
void log_setup(enum log_level min_level, const char *prog);
/* Parse "debug" / "info" / "warn" / "error"; returns -1 for anything else. */
int log_level_parse(const char *s);
const char *log_level_name(enum log_level level);
int log_enabled(enum log_level level);

/*
 * Log one event. kvfmt (may be NULL) formats extra " key=value" pairs, without the
 * leading space.
 */
void log_event(enum log_level level, const char *comp, const char *msg, const char *kvfmt, ...)
    __attribute__((format(printf, 4, 5)));
void log_eventv(enum log_level level, const char *comp, const char *msg, const char *kvfmt,
                va_list ap) __attribute__((format(printf, 4, 0)));

/*
 * Tag every later line with " node=N" (after prog=), so that the lines of several replicas
 * sharing one journal or terminal can be told apart. 0 removes the tag. Called once the
 * replica's node id is known.
 */
void log_set_node(unsigned node_id);

/*
 * libevent's own messages (evdns among them: "Nameserver 10.0.0.10:53 has failed: ...")
 * as our lines, comp=libevent: the callback to hand event_set_log_callback(). severity is
 * libevent's EVENT_LOG_DEBUG, _MSG, _WARN or _ERR (0 to 3), logged as debug, info, warn and
 * error; anything else as warn. msg comes from outside (a nameserver's address, an error
 * string) and is quoted like any other value.
 */
void log_libevent(int severity, const char *msg);

/*
 * The one quoting function for values that come from outside (cluster, user, job and
 * host names, addresses, error strings from peers and clients): returns s as a logfmt
 * value, quoted and escaped when it needs it, so a quote, '=', space or newline in it can
 * neither break the line nor forge a key. The result lives in a per-thread ring of eight
 * 1536-byte buffers (room for a storage refusal, which names paths and what to do): it is
 * valid until eight more log_q() calls in the same thread, which is enough for one
 * log_event() argument list (use it there, never store it). Longer values are truncated
 * (still closed by a quote).
 *
 *     log_event(LOG_WARN, "api", "refused", "cluster=%s peer=%s", log_q(name), log_q(addr));
 *
 * As a second line of defence, log_event() escapes every control character in the
 * formatted pairs, so even an unquoted value cannot end a line early.
 */
const char *log_q(const char *s);

/*
 * Write s into dst as a logfmt value: bare when it has no space, quote, '=' or control
 * character, otherwise in double quotes with \" \\ \n escapes. Truncates to fit and
 * always NUL-terminates. Returns dst so it can sit inside a log_event() argument list.
 */
char *log_quote(char *dst, size_t dstlen, const char *s);

#endif
