/*
 * test_log.c - logfmt lines on stderr (common/log.c).
 *
 * log_quote() is checked case by case and, for truncation, over every buffer size. The
 * line format is checked on what actually reaches file descriptor 2: stderr is pointed at
 * a temporary file around each call, and the lines are read back and matched with a
 * regular expression. Level filtering is checked by counting lines.
 */
#include "check_run.h"
#include "log.h"

#include <check.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- log_quote ---------------------------------------------------------------------- */

struct quote_case {
    const char *in;
    const char *out;
};

static const struct quote_case quote_cases[] = {
    {"plain", "plain"},
    {"worker-1.example:6821", "worker-1.example:6821"},
    {"/var/spool/spur", "/var/spool/spur"},
    {"caf\xc3\xa9", "caf\xc3\xa9"}, /* UTF-8 needs no quotes */
    {"", "\"\""},
    {"two words", "\"two words\""},
    {" lead", "\" lead\""},
    {"a=b", "\"a=b\""},
    {"say \"hi\"", "\"say \\\"hi\\\"\""},
    {"back\\slash", "\"back\\\\slash\""},
    {"line\nbreak", "\"line\\nbreak\""},
    {"tab\there", "\"tab?here\""},
    {"cr\rhere", "\"cr?here\""},
    {"bell\x07", "\"bell?\""},
    {"del\x7f", "\"del?\""},
    {"\"", "\"\\\"\""},
};

START_TEST(test_quote_cases)
{
    const struct quote_case *qc = &quote_cases[_i];
    char out[128];
    memset(out, 'X', sizeof(out));
    ck_assert_ptr_eq(log_quote(out, sizeof(out), qc->in), out);
    ck_assert_str_eq(out, qc->out);
}
END_TEST

START_TEST(test_quote_null)
{
    char out[8];
    ck_assert_str_eq(log_quote(out, sizeof(out), NULL), "\"\"");
}
END_TEST

/* Undo the escapes of a quoted value; returns the text between the quotes. */
static void unquote(const char *q, char *out)
{
    size_t n = strlen(q);
    ck_assert_uint_ge(n, 2);
    ck_assert_int_eq(q[0], '"');
    ck_assert_int_eq(q[n - 1], '"');
    size_t o = 0;
    for (size_t i = 1; i < n - 1; i++) {
        if (q[i] == '\\') {
            i++;
            ck_assert_msg(i < n - 1, "escape cut in half: %s", q);
            ck_assert_msg(q[i] == '"' || q[i] == '\\' || q[i] == 'n', "bad escape in %s", q);
            out[o++] = q[i] == 'n' ? '\n' : q[i];
        } else {
            ck_assert_msg(q[i] != '"', "bare quote inside %s", q);
            out[o++] = q[i];
        }
    }
    out[o] = '\0';
}

START_TEST(test_quote_truncation)
{
    /*
     * Every buffer size: always NUL-terminated inside the buffer, a quoted value keeps its
     * closing quote and never ends in half an escape, and what survives is a prefix of the
     * value.
     */
    static const char *const inputs[] = {"a \"quoted\" \\ value\nwith lines", "x=\"\"\"\"\"\"",
                                         "\\\\\\\\\\\\", "no-quotes-needed-here"};
    for (size_t k = 0; k < sizeof(inputs) / sizeof(inputs[0]); k++) {
        for (size_t cap = 1; cap <= 48; cap++) {
            char buf[64], plain[64];
            memset(buf, 'Z', sizeof(buf));
            log_quote(buf, cap, inputs[k]);
            size_t len = strnlen(buf, sizeof(buf));
            ck_assert_msg(len < cap, "cap %zu: length %zu", cap, len);
            for (size_t i = cap; i < sizeof(buf); i++)
                ck_assert_msg(buf[i] == 'Z', "cap %zu: wrote past the buffer", cap);
            if (len == 0)
                continue; /* too small for even "" */
            if (buf[0] == '"') {
                unquote(buf, plain);
            } else {
                memcpy(plain, buf, len + 1);
            }
            ck_assert_msg(strncmp(inputs[k], plain, strlen(plain)) == 0,
                          "cap %zu: \"%s\" is not a prefix of the value", cap, plain);
        }
    }
    /* A zero-length buffer is left alone. */
    char z = 'Z';
    log_quote(&z, 0, "abc");
    ck_assert_int_eq(z, 'Z');
}
END_TEST

/* ---- level names -------------------------------------------------------------------- */

START_TEST(test_levels)
{
    ck_assert_int_eq(log_level_parse("debug"), LOG_DEBUG);
    ck_assert_int_eq(log_level_parse("info"), LOG_INFO);
    ck_assert_int_eq(log_level_parse("warn"), LOG_WARN);
    ck_assert_int_eq(log_level_parse("error"), LOG_ERROR);
    ck_assert_int_eq(log_level_parse("INFO"), -1);
    ck_assert_int_eq(log_level_parse("warning"), -1);
    ck_assert_int_eq(log_level_parse(""), -1);
    ck_assert_str_eq(log_level_name(LOG_DEBUG), "debug");
    ck_assert_str_eq(log_level_name(LOG_INFO), "info");
    ck_assert_str_eq(log_level_name(LOG_WARN), "warn");
    ck_assert_str_eq(log_level_name(LOG_ERROR), "error");

    log_setup(LOG_WARN, NULL);
    ck_assert(!log_enabled(LOG_DEBUG));
    ck_assert(!log_enabled(LOG_INFO));
    ck_assert(log_enabled(LOG_WARN));
    ck_assert(log_enabled(LOG_ERROR));
    log_setup(LOG_DEBUG, NULL);
    ck_assert(log_enabled(LOG_DEBUG));
}
END_TEST

/* ---- what reaches stderr ------------------------------------------------------------ */

struct capture {
    FILE *f;
    int saved;
};

static void capture_start(struct capture *c)
{
    fflush(stderr);
    c->f = tmpfile();
    ck_assert_ptr_nonnull(c->f);
    c->saved = dup(STDERR_FILENO);
    ck_assert_int_ge(c->saved, 0);
    ck_assert_int_eq(dup2(fileno(c->f), STDERR_FILENO), STDERR_FILENO);
}

/* Stop capturing; returns what was written, as a heap string. */
static char *capture_end(struct capture *c)
{
    ck_assert_int_eq(dup2(c->saved, STDERR_FILENO), STDERR_FILENO);
    close(c->saved);
    /* log.c wrote with write(2), behind the FILE's back: find the end afresh. */
    ck_assert_int_ge(fseek(c->f, 0, SEEK_END), 0);
    long n = ftell(c->f);
    ck_assert_int_ge(n, 0);
    rewind(c->f);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, c->f), (size_t)n);
    s[n] = '\0';
    fclose(c->f);
    return s;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void expect_match(const char *text, const char *pattern)
{
    regex_t re;
    ck_assert_int_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    int rc = regexec(&re, text, 0, NULL, 0);
    regfree(&re);
    ck_assert_msg(rc == 0, "\"%s\"\ndoes not match\n%s", text, pattern);
}

#define TS "ts=[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z"

START_TEST(test_line_format)
{
    struct capture c;
    log_setup(LOG_INFO, NULL);
    capture_start(&c);
    log_event(LOG_WARN, "sup", "worker stalled", "ms=%d pid=%d", 3012, 77);
    char *out = capture_end(&c);
    expect_match(out, "^" TS " level=warn comp=sup msg=\"worker stalled\" ms=3012 pid=77\n$");
    free(out);
}
END_TEST

/* libevent's messages (evdns's "Nameserver ... has failed") come out as our lines. */
START_TEST(test_libevent_messages)
{
    struct capture c;
    log_setup(LOG_INFO, NULL);
    capture_start(&c);
    log_libevent(0, "debug chatter");                               /* EVENT_LOG_DEBUG */
    log_libevent(1, "Nameserver 10.0.0.10:53 is back up");          /* EVENT_LOG_MSG */
    log_libevent(2, "Nameserver 10.0.0.10:53 has failed: timeout"); /* EVENT_LOG_WARN */
    log_libevent(3, "epoll_wait: \"bad\"\nnext");                   /* EVENT_LOG_ERR */
    log_libevent(7, NULL);
    char *out = capture_end(&c);
    ck_assert_uint_eq(count_lines(out), 4);
    expect_match(out,
                 "^" TS " level=info comp=libevent msg=\"Nameserver 10.0.0.10:53 is back up\"\n" TS
                 " level=warn comp=libevent msg=\"Nameserver 10.0.0.10:53 has failed: "
                 "timeout\"\n" TS " level=error comp=libevent msg=\"epoll_wait: "
                 "\\\\\"bad\\\\\"\\\\nnext\"\n" TS " level=warn comp=libevent msg=\"\"\n$");
    free(out);
}
END_TEST

START_TEST(test_line_prog_and_no_pairs)
{
    struct capture c;
    log_setup(LOG_DEBUG, "spurctld");
    capture_start(&c);
    log_event(LOG_DEBUG, "cfg", "loaded", NULL);
    log_event(LOG_ERROR, "sup", "exiting", NULL);
    log_event(LOG_INFO, "raft", "say \"hi\"\nnow", "term=%u leader=%s", 5u, "none");
    char *out = capture_end(&c);
    ck_assert_uint_eq(count_lines(out), 3);
    expect_match(out, "^" TS " level=debug prog=spurctld comp=cfg msg=\"loaded\"\n" TS
                      " level=error prog=spurctld comp=sup msg=\"exiting\"\n" TS
                      " level=info prog=spurctld comp=raft msg=\"say \\\\\"hi\\\\\"\\\\nnow\" "
                      "term=5 leader=none\n$");
    free(out);
}
END_TEST

START_TEST(test_timestamp_is_now)
{
    struct capture c;
    log_setup(LOG_INFO, NULL);
    time_t before = time(NULL);
    capture_start(&c);
    log_event(LOG_INFO, "t", "now", NULL);
    char *out = capture_end(&c);
    time_t after = time(NULL);
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *rest = strptime(out, "ts=%Y-%m-%dT%H:%M:%S", &tm);
    ck_assert_ptr_nonnull(rest);
    time_t t = timegm(&tm);
    ck_assert_msg(t >= before - 1 && t <= after + 1, "ts %ld not in [%ld, %ld]", (long)t,
                  (long)before, (long)after);
    free(out);
}
END_TEST

START_TEST(test_level_filtering)
{
    static const enum log_level levels[] = {LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR};
    for (int min = LOG_DEBUG; min <= LOG_ERROR; min++) {
        struct capture c;
        log_setup((enum log_level)min, NULL);
        capture_start(&c);
        for (size_t i = 0; i < 4; i++)
            log_event(levels[i], "t", "event", "n=%zu", i);
        char *out = capture_end(&c);
        /* One line per event at or above the minimum, none below it. */
        ck_assert_uint_eq(count_lines(out), (size_t)(4 - min));
        for (int l = LOG_DEBUG; l <= LOG_ERROR; l++) {
            char want[32];
            snprintf(want, sizeof(want), "level=%s ", log_level_name((enum log_level)l));
            ck_assert_msg((strstr(out, want) != NULL) == (l >= min), "min %d, level %d:\n%s", min,
                          l, out);
        }
        free(out);
    }
}
END_TEST

START_TEST(test_long_line)
{
    /* A huge value still gives one line, ending in a newline, within the line buffer. */
    char big[5000];
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    struct capture c;
    log_setup(LOG_INFO, NULL);
    capture_start(&c);
    log_event(LOG_INFO, "t", "big", "v=%s", big);
    char msg[2000];
    memset(msg, 'm', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    log_event(LOG_INFO, "t", msg, "k=1");
    char *out = capture_end(&c);
    ck_assert_uint_eq(count_lines(out), 2);
    char *nl = strchr(out, '\n');
    ck_assert_uint_le((size_t)(nl - out), 2047);
    expect_match(out, "^" TS " level=info comp=t msg=\"big\" v=v+\n");
    /* The long msg is cut but stays one quoted value. */
    expect_match(nl + 1, "^" TS " level=info comp=t msg=\"m+\" k=1\n$");
    free(out);
}
END_TEST

START_TEST(test_q_ring_and_forgery)
{
    /* log_q() results stay valid for a whole argument list of up to eight values. */
    const char *a = log_q("plain"), *b = log_q("two words"), *c = log_q("x\" level=error");
    ck_assert_str_eq(a, "plain");
    ck_assert_str_eq(b, "\"two words\"");
    ck_assert_str_eq(c, "\"x\\\" level=error\"");
    ck_assert_str_eq(log_q(NULL), "\"\"");
    char big[3000];
    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    big[10] = ' ';
    const char *t = log_q(big);
    ck_assert_uint_lt(strlen(t), 1536);
    ck_assert_uint_gt(strlen(t), 1024); /* a long reason is kept, not cut at a few lines */
    ck_assert_int_eq(t[0], '"');
    ck_assert_int_eq(t[strlen(t) - 1], '"');

    /* A hostile name through log_q() is one value; the line parses to the expected keys. */
    struct capture cap;
    log_setup(LOG_INFO, NULL);
    capture_start(&cap);
    log_event(LOG_INFO, "api", "refused", "cluster=%s user=%s",
              log_q("evil\" level=error msg=\"forged\nts=1"), log_q("bob"));
    char *out = capture_end(&cap);
    ck_assert_uint_eq(count_lines(out), 1);
    expect_match(out, "^" TS " level=info comp=api msg=\"refused\" "
                      "cluster=\"evil\\\\\" level=error msg=\\\\\"forged\\\\nts=1\" user=bob\n$");
    free(out);
}
END_TEST

START_TEST(test_unquoted_control_chars_cannot_break_lines)
{
    /* Defence in depth: a caller that forgot log_q() still cannot end the line early. */
    struct capture cap;
    log_setup(LOG_INFO, NULL);
    capture_start(&cap);
    log_event(LOG_INFO, "t", "raw", "name=%s", "a\nts=2026 level=error\r\tb");
    char *out = capture_end(&cap);
    ck_assert_uint_eq(count_lines(out), 1);
    expect_match(out, "^" TS " level=info comp=t msg=\"raw\" name=a\\\\nts=2026 "
                      "level=error\\\\r\\?b\n$");
    free(out);
}
END_TEST

START_TEST(test_node_tag)
{
    struct capture cap;
    log_setup(LOG_INFO, "spurctld-raftd");
    log_set_node(3);
    capture_start(&cap);
    log_event(LOG_INFO, "raftd", "running", "k=1");
    log_set_node(0);
    log_event(LOG_INFO, "raftd", "untagged", NULL);
    char *out = capture_end(&cap);
    expect_match(out, "^" TS " level=info prog=spurctld-raftd node=3 comp=raftd "
                      "msg=\"running\" k=1\n" TS
                      " level=info prog=spurctld-raftd comp=raftd msg=\"untagged\"\n$");
    free(out);
}
END_TEST

START_TEST(test_errno_preserved)
{
    struct capture c;
    log_setup(LOG_INFO, NULL);
    capture_start(&c);
    errno = EPIPE;
    log_event(LOG_INFO, "t", "x", NULL);
    ck_assert_int_eq(errno, EPIPE);
    errno = ENOENT;
    log_event(LOG_DEBUG, "t", "filtered", NULL);
    ck_assert_int_eq(errno, ENOENT);
    free(capture_end(&c));
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = check_case(
        s, "quote", (const TTest *[]){test_quote_null, test_quote_truncation, test_levels, NULL});
    tcase_add_loop_test(tc, test_quote_cases, 0,
                        (int)(sizeof(quote_cases) / sizeof(quote_cases[0])));

    check_case(s, "lines",
               (const TTest *[]){test_line_format, test_libevent_messages,
                                 test_line_prog_and_no_pairs, test_timestamp_is_now,
                                 test_level_filtering, test_long_line, test_q_ring_and_forgery,
                                 test_unquoted_control_chars_cannot_break_lines, test_node_tag,
                                 test_errno_preserved, NULL});
    return s;
}

int main(void)
{
    return check_run(log_suite());
}
