/*
 * sbatch_parse.c - sbatch's option, directive, script and environment rules; contract in
 * sbatch_parse.h.
 *
 * The command line and each #SBATCH line go through the same option parser, so an option
 * means the same thing in both places. Each place fills its own struct sbatch_parse_opts with a
 * bit per field given; sbatch_parse_merge() then lays the command line over the script, which is
 * how "the command line wins" holds whatever order things were written in.
 */
#include "sbatch_parse.h"

#include "errmsg.h"
#include "jobscript.h"
#include "strv.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SBATCH_MAGIC     "#SBATCH"
#define SBATCH_MAGIC_LEN 7
#define SBATCH_MAX_WORDS 256

struct opt {
    const char *name; /* long name without "--" */
    char letter;      /* short letter, 0 for none */
    bool has_arg;
    bool cli_only;  /* refused in a batch script */
    unsigned field; /* the SBATCH_* bit of the field it sets */
};

static const struct opt opts[] = {
    {"job-name", 'J', true, false, SBATCH_NAME},
    {"partition", 'p', true, false, SBATCH_PARTITION},
    {"nodes", 'N', true, false, SBATCH_NODES},
    {"ntasks", 'n', true, false, SBATCH_NTASKS},
    {"cpus-per-task", 'c', true, false, SBATCH_CPUS_PER_TASK},
    {"mem", 0, true, false, SBATCH_MEM},
    {"time", 't', true, false, SBATCH_TIME},
    {"output", 'o', true, false, SBATCH_OUTPUT},
    {"error", 'e', true, false, SBATCH_ERROR},
    {"chdir", 'D', true, false, SBATCH_CHDIR},
    {"workdir", 0, true, false, SBATCH_CHDIR}, /* the name older Slurm releases used */
    {"hold", 'H', false, false, SBATCH_HOLD},
    {"wrap", 0, true, true, SBATCH_WRAP},
    {"export", 0, true, false, SBATCH_EXPORT},
    {"parsable", 0, false, false, SBATCH_PARSABLE},
    {"quiet", 'Q', false, false, SBATCH_QUIET},
    {"help", 'h', false, true, SBATCH_HELP},
    {"usage", 0, false, true, SBATCH_USAGE},
    {"version", 'V', false, true, SBATCH_VERSION},
    {"requeue", 0, false, false, SBATCH_REQUEUE},
    {"no-requeue", 0, false, false, SBATCH_REQUEUE},
    {"account", 'A', true, false, SBATCH_ACCOUNT},
    {"dependency", 'd', true, false, SBATCH_DEPENDENCY},
    {"kill-on-invalid-dep", 0, true, false, SBATCH_KILL_INVALID_DEP},
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

void sbatch_parse_opts_free(struct sbatch_parse_opts *o)
{
    free(o->name);
    free(o->partition);
    free(o->output);
    free(o->error);
    free(o->chdir);
    free(o->wrap);
    free(o->export_spec);
    free(o->account);
    free(o->dependency);
    memset(o, 0, sizeof(*o));
}

void sbatch_parse_job_free(struct sbatch_parse_job *j)
{
    free(j->name);
    free(j->partition);
    free(j->stdout_path);
    free(j->stderr_path);
    free(j->workdir);
    free(j->script);
    free(j->user);
    free(j->account);
    free(j->dependency);
    strv_free(j->env, j->nenv);
    memset(j, 0, sizeof(*j));
}

/* ---- values ------------------------------------------------------------------------ */

/* Decimal digits only, no sign, no blanks; fits in max. */
static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Parse "a[:b[:c]]" (1 to 3 fields of digits) into f[], returning the count or -1. */
static int split_colon_fields(const char *s, uint64_t f[3])
{
    int k = 0;
    const char *p = s;
    for (;;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        char buf[24];
        if (k == 3 || len == 0 || len >= sizeof(buf))
            return -1;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (parse_uint(buf, UINT32_MAX, &f[k]) != 0)
            return -1;
        k++;
        if (colon == NULL)
            return k;
        p = colon + 1;
    }
}

int sbatch_parse_parse_time(const char *s, uint32_t *minutes, char *err, size_t errlen)
{
    if (s == NULL || *s == '\0')
        return errmsg_set(err, errlen, "invalid time limit specification: empty");
    if (strcasecmp(s, "UNLIMITED") == 0 || strcasecmp(s, "INFINITE") == 0) {
        *minutes = 0;
        return 0;
    }
    uint64_t days = 0, h = 0, m = 0, sec = 0, f[3];
    const char *rest = s;
    const char *dash = strchr(s, '-');
    if (dash != NULL) {
        char dbuf[16];
        size_t dl = (size_t)(dash - s);
        if (dl == 0 || dl >= sizeof(dbuf))
            goto bad;
        memcpy(dbuf, s, dl);
        dbuf[dl] = '\0';
        if (parse_uint(dbuf, 100000, &days) != 0)
            goto bad;
        rest = dash + 1;
    }
    int k = split_colon_fields(rest, f);
    if (k < 0)
        goto bad;
    if (dash != NULL) {
        /* D-HH, D-HH:MM, D-HH:MM:SS */
        h = f[0];
        m = k >= 2 ? f[1] : 0;
        sec = k == 3 ? f[2] : 0;
        if ((k >= 2 && m >= 60) || (k == 3 && sec >= 60))
            goto bad;
    } else if (k == 1) {
        m = f[0]; /* minutes */
    } else if (k == 2) {
        m = f[0]; /* MM:SS */
        sec = f[1];
        if (sec >= 60)
            goto bad;
    } else {
        h = f[0]; /* HH:MM:SS */
        m = f[1];
        sec = f[2];
        if (m >= 60 || sec >= 60)
            goto bad;
    }
    uint64_t total = days * 1440 + h * 60 + m + (sec + 59) / 60;
    if (total > UINT32_MAX - 1)
        return errmsg_set(err, errlen, "invalid time limit specification: %s is too long", s);
    *minutes = (uint32_t)total;
    return 0;
bad:
    return errmsg_set(err, errlen,
                      "invalid time limit specification: %s (use minutes, MM:SS, HH:MM:SS, D-HH, "
                      "D-HH:MM, D-HH:MM:SS or UNLIMITED)",
                      s);
}

int sbatch_parse_parse_mem(const char *s, uint64_t *mb, char *err, size_t errlen)
{
    char digits[24];
    size_t n = 0;
    if (s == NULL)
        s = "";
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    uint64_t v;
    if (n == 0 || n >= sizeof(digits))
        goto bad;
    memcpy(digits, s, n);
    digits[n] = '\0';
    if (parse_uint(digits, UINT64_MAX, &v) != 0)
        goto bad;
    const char *suffix = s + n;
    uint64_t out;
    if (suffix[0] == '\0') {
        out = v;
    } else if (suffix[1] != '\0') {
        goto bad;
    } else {
        switch (toupper((unsigned char)suffix[0])) {
        case 'K':
            out = v / 1024 + (v % 1024 != 0);
            break;
        case 'M':
            out = v;
            break;
        case 'G':
            if (v > UINT64_MAX / 1024)
                goto big;
            out = v * 1024;
            break;
        case 'T':
            if (v > UINT64_MAX / (1024 * 1024))
                goto big;
            out = v * 1024 * 1024;
            break;
        default:
            goto bad;
        }
    }
    *mb = out;
    return 0;
big:
    return errmsg_set(err, errlen, "invalid --mem specification: %s is too large", s);
bad:
    return errmsg_set(
        err, errlen,
        "invalid --mem specification: %s (a number of MB, or with a K, M, G or T suffix)", s);
}

static int set_str(char **field, const char *value, const char *what, char *err, size_t errlen)
{
    if (value[0] == '\0')
        return errmsg_set(err, errlen, "option --%s needs a non-empty value", what);
    if (strv_replace(field, value) != 0)
        return errmsg_set(err, errlen, "out of memory");
    return 0;
}

static int set_count(uint32_t *field, const char *value, const char *what, char *err, size_t errlen)
{
    uint64_t v;
    if (parse_uint(value, UINT32_MAX, &v) != 0 || v == 0)
        return errmsg_set(err, errlen,
                          "invalid --%s value '%s': a whole number of at least 1 expected", what,
                          value);
    *field = (uint32_t)v;
    return 0;
}

/*
 * Apply one option with its value (NULL for a flag), and mark its field given (even when
 * the value is refused: the error ends the parse anyway).
 */
static int apply(struct sbatch_parse_opts *o, const struct opt *op, const char *value, char *err,
                 size_t errlen)
{
    int rc = 0;
    switch (op->field) {
    case SBATCH_NAME:
        rc = set_str(&o->name, value, op->name, err, errlen);
        break;
    case SBATCH_PARTITION:
        rc = set_str(&o->partition, value, op->name, err, errlen);
        break;
    case SBATCH_NODES:
        rc = set_count(&o->nodes, value, op->name, err, errlen);
        break;
    case SBATCH_NTASKS:
        rc = set_count(&o->ntasks, value, op->name, err, errlen);
        break;
    case SBATCH_CPUS_PER_TASK:
        rc = set_count(&o->cpus_per_task, value, op->name, err, errlen);
        break;
    case SBATCH_MEM:
        rc = sbatch_parse_parse_mem(value, &o->mem_mb, err, errlen);
        break;
    case SBATCH_TIME:
        rc = sbatch_parse_parse_time(value, &o->time_min, err, errlen);
        break;
    case SBATCH_OUTPUT:
        rc = set_str(&o->output, value, op->name, err, errlen);
        break;
    case SBATCH_ERROR:
        rc = set_str(&o->error, value, op->name, err, errlen);
        break;
    case SBATCH_CHDIR:
        rc = set_str(&o->chdir, value, "chdir", err, errlen);
        break;
    case SBATCH_HOLD:
        o->hold = true;
        break;
    case SBATCH_WRAP:
        rc = set_str(&o->wrap, value, op->name, err, errlen);
        break;
    case SBATCH_EXPORT:
        rc = set_str(&o->export_spec, value, op->name, err, errlen);
        break;
    case SBATCH_PARSABLE:
        o->parsable = true;
        break;
    case SBATCH_QUIET:
        o->quiet = true;
        break;
    case SBATCH_REQUEUE:
        o->requeue = strcmp(op->name, "requeue") == 0;
        break;
    case SBATCH_ACCOUNT:
        rc = set_str(&o->account, value, op->name, err, errlen);
        break;
    case SBATCH_DEPENDENCY:
        rc = set_str(&o->dependency, value, op->name, err, errlen);
        break;
    case SBATCH_KILL_INVALID_DEP:
        if (strcasecmp(value, "yes") == 0) {
            o->kill_invalid = true;
        } else if (strcasecmp(value, "no") == 0) {
            o->kill_invalid = false;
        } else {
            rc = errmsg_set(err, errlen, "Invalid --kill-on-invalid-dep specification");
        }
        break;
    default: /* --help, --usage and --version: the bit is all they set */
        break;
    }
    o->set |= op->field;
    return rc;
}

/* The option named by a long word (without "--" and "=value"): exact, else a unique prefix. */
static const struct opt *find_long(const char *name, size_t len, bool *ambiguous)
{
    const struct opt *found = NULL;
    int matches = 0;
    *ambiguous = false;
    for (size_t i = 0; i < NOPTS; i++) {
        if (strncmp(opts[i].name, name, len) != 0)
            continue;
        if (opts[i].name[len] == '\0')
            return &opts[i];
        /* Two spellings of one option (chdir, workdir) are not an ambiguity. */
        if (found == NULL || found->field != opts[i].field)
            matches++;
        found = &opts[i];
    }
    if (matches > 1) {
        *ambiguous = true;
        return NULL;
    }
    return found;
}

static const struct opt *find_short(char c)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (opts[i].letter == c)
            return &opts[i];
    return NULL;
}

/* An option the parser cannot take as written (getopt's words), err set. */
__attribute__((format(printf, 3, 4))) static int usage_error(char *err, size_t errlen,
                                                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return SBATCH_PARSE_USAGE;
}

/*
 * The parser both places share. in_script: every word must be an option, and
 * command-line-only options are refused. Otherwise parsing stops at the first non-option
 * word, whose index goes to *stop.
 */
static int parse_words(struct sbatch_parse_opts *o, int argc, char *const *argv, int start,
                       bool in_script, int *stop, char *err, size_t errlen)
{
    int i = start;
    for (; i < argc; i++) {
        const char *w = argv[i];
        if (strcmp(w, "--") == 0) {
            if (in_script)
                return errmsg_set(err, errlen, "unexpected '--'");
            i++;
            break;
        }
        if (w[0] != '-' || w[1] == '\0') {
            if (in_script)
                return errmsg_set(err, errlen, "unexpected word '%s' (not an option)", w);
            break;
        }
        if (w[1] == '-') {
            const char *name = w + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            bool ambiguous;
            const struct opt *op = find_long(name, len, &ambiguous);
            if (op == NULL && ambiguous)
                return usage_error(err, errlen, "option '%s' is ambiguous", w);
            if (op == NULL)
                return usage_error(err, errlen, "unrecognized option '--%.*s'", (int)len, name);
            if (in_script && op->cli_only)
                return errmsg_set(err, errlen, "option '--%s' is not valid in a batch script",
                                  op->name);
            const char *value = NULL;
            if (op->has_arg) {
                if (eq != NULL) {
                    value = eq + 1;
                } else if (i + 1 < argc) {
                    value = argv[++i];
                } else {
                    return usage_error(err, errlen, "option '--%s' requires an argument", op->name);
                }
            } else if (eq != NULL) {
                return usage_error(err, errlen, "option '--%s' doesn't allow an argument",
                                   op->name);
            }
            if (apply(o, op, value, err, errlen) != 0)
                return SBATCH_PARSE_BAD_VALUE;
            continue;
        }
        /* One or more short options: "-H", "-HQ", "-Jname", "-J name". */
        for (const char *p = w + 1; *p; p++) {
            const struct opt *op = find_short(*p);
            if (op == NULL)
                return usage_error(err, errlen, "invalid option -- '%c'", *p);
            if (in_script && op->cli_only)
                return errmsg_set(err, errlen, "option '-%c' is not valid in a batch script", *p);
            if (!op->has_arg) {
                if (apply(o, op, NULL, err, errlen) != 0)
                    return SBATCH_PARSE_BAD_VALUE;
                continue;
            }
            const char *value;
            if (p[1] != '\0') {
                value = p + 1;
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                return usage_error(err, errlen, "option requires an argument -- '%c'", *p);
            }
            if (apply(o, op, value, err, errlen) != 0)
                return SBATCH_PARSE_BAD_VALUE;
            break;
        }
    }
    if (stop != NULL)
        *stop = i;
    return 0;
}

int sbatch_parse_parse_args(struct sbatch_parse_opts *o, int argc, char *const *argv,
                            int *script_index, char *err, size_t errlen)
{
    int stop = argc;
    int rc = parse_words(o, argc, argv, 1, false, &stop, err, errlen);
    if (rc != 0)
        return rc;
    if ((o->set & SBATCH_WRAP) && stop < argc)
        return errmsg_set(err, errlen, "script argument not permitted with --wrap option");
    *script_index = stop;
    return 0;
}

/* ---- #SBATCH lines ------------------------------------------------------------------ */

/*
 * Split a directive's text into words the way sh would (quotes and backslashes, no
 * expansion); an unquoted word that starts with '#' ends the line. Words are written into
 * buf (NUL-separated, at least len + 1 bytes).
 */
static int split_words(const char *s, size_t len, char *buf, char **words, int *nwords, char *err,
                       size_t errlen)
{
    size_t i = 0, out = 0;
    int n = 0;
    for (;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i >= len || s[i] == '#')
            break;
        if (n == SBATCH_MAX_WORDS)
            return errmsg_set(err, errlen, "too many words");
        words[n++] = buf + out;
        while (i < len && s[i] != ' ' && s[i] != '\t') {
            char c = s[i];
            if (c == '\'') {
                size_t end = i + 1;
                while (end < len && s[end] != '\'')
                    end++;
                if (end >= len)
                    return errmsg_set(err, errlen, "unterminated quote");
                memcpy(buf + out, s + i + 1, end - i - 1);
                out += end - i - 1;
                i = end + 1;
            } else if (c == '"') {
                i++;
                while (i < len && s[i] != '"') {
                    if (s[i] == '\\' && i + 1 < len && strchr("\"\\$`", s[i + 1]) != NULL)
                        i++;
                    buf[out++] = s[i++];
                }
                if (i >= len)
                    return errmsg_set(err, errlen, "unterminated quote");
                i++;
            } else if (c == '\\' && i + 1 < len) {
                buf[out++] = s[i + 1];
                i += 2;
            } else {
                buf[out++] = c;
                i++;
            }
        }
        buf[out++] = '\0';
    }
    *nwords = n;
    return 0;
}

int sbatch_parse_parse_directives(struct sbatch_parse_opts *o, const char *script, size_t len,
                                  char *err, size_t errlen)
{
    size_t pos = 0;
    unsigned lineno = 0;
    while (pos < len) {
        const char *line = script + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + 1;
        lineno++;

        size_t k = 0;
        while (k < ll && isspace((unsigned char)line[k]))
            k++;
        if (k == ll)
            continue; /* blank */
        if (line[k] != '#')
            break; /* the first command: no directive after it counts */
        if (k != 0 || ll < SBATCH_MAGIC_LEN || memcmp(line, SBATCH_MAGIC, SBATCH_MAGIC_LEN) != 0)
            continue; /* an ordinary comment */
        if (ll > SBATCH_MAGIC_LEN && line[SBATCH_MAGIC_LEN] != ' ' &&
            line[SBATCH_MAGIC_LEN] != '\t')
            continue; /* "#SBATCHX": a comment too */

        const char *text = line + SBATCH_MAGIC_LEN;
        size_t tl = ll - SBATCH_MAGIC_LEN;
        char *buf = malloc(tl + SBATCH_MAX_WORDS + 1);
        char *words[SBATCH_MAX_WORDS + 1];
        int nw = 0;
        char why[400];
        if (buf == NULL)
            return errmsg_set(err, errlen, "out of memory");
        /* argv-style: words[0] is unused by parse_words (it starts at index 1). */
        words[0] = NULL;
        int rc = split_words(text, tl, buf, words + 1, &nw, why, sizeof(why));
        if (rc == 0)
            rc = parse_words(o, nw + 1, words, 1, true, NULL, why, sizeof(why));
        free(buf);
        if (rc != 0) {
            errmsg_set(err, errlen, "batch script line %u: %s", lineno, why);
            return SBATCH_PARSE_USAGE; /* refused as on the command line (sbatch exits 255) */
        }
    }
    return 0;
}

/* ---- merging, environment, script ------------------------------------------------- */

/* The SBATCH_* variables Slurm's sbatch(1) reads ("INPUT ENVIRONMENT VARIABLES") for the
 * options spur has. */
static const struct {
    const char *var, *option;
} env_opts[] = {
    {"SBATCH_ACCOUNT", "account"},     {"SBATCH_JOB_NAME", "job-name"},
    {"SBATCH_PARTITION", "partition"}, {"SBATCH_TIMELIMIT", "time"},
    {"SBATCH_OUTPUT", "output"},       {"SBATCH_ERROR", "error"},
    {"SBATCH_EXPORT", "export"},       {"SBATCH_MEM_PER_NODE", "mem"},
    {"SBATCH_REQUEUE", "requeue"},     {"SBATCH_NO_REQUEUE", "no-requeue"},
};

static const char *env_value(char *const *environ, const char *var)
{
    size_t n = strlen(var);
    for (char *const *e = environ; e != NULL && *e != NULL; e++)
        if (strncmp(*e, var, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* Slurm's rule for a flag's variable: empty, "yes" or a non-zero number sets it. */
static bool env_flag_on(const char *v)
{
    if (v[0] == '\0' || strcasecmp(v, "yes") == 0)
        return true;
    char *end;
    long x = strtol(v, &end, 10);
    return *end == '\0' && end != v && x != 0;
}

int sbatch_parse_env(struct sbatch_parse_opts *o, char *const *environ, char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < sizeof(env_opts) / sizeof(env_opts[0]); i++) {
        const char *v = env_value(environ, env_opts[i].var);
        if (v == NULL)
            continue;
        bool ambiguous;
        const struct opt *op =
            find_long(env_opts[i].option, strlen(env_opts[i].option), &ambiguous);
        if (op == NULL)
            continue; /* cannot happen: the table names options of opts[] */
        if (!op->has_arg && !env_flag_on(v))
            continue;
        char why[400];
        if (apply(o, op, op->has_arg ? v : NULL, why, sizeof(why)) != 0) {
            errmsg_set(err, errlen, "%s: %s", env_opts[i].var, why);
            sbatch_parse_opts_free(o);
            return SBATCH_PARSE_BAD_VALUE;
        }
    }
    return 0;
}

int sbatch_parse_merge(struct sbatch_parse_opts *dst, const struct sbatch_parse_opts *src)
{
    unsigned s = src->set;
    if ((s & SBATCH_NAME) && strv_replace(&dst->name, src->name) != 0)
        return -1;
    if ((s & SBATCH_PARTITION) && strv_replace(&dst->partition, src->partition) != 0)
        return -1;
    if ((s & SBATCH_OUTPUT) && strv_replace(&dst->output, src->output) != 0)
        return -1;
    if ((s & SBATCH_ERROR) && strv_replace(&dst->error, src->error) != 0)
        return -1;
    if ((s & SBATCH_CHDIR) && strv_replace(&dst->chdir, src->chdir) != 0)
        return -1;
    if ((s & SBATCH_WRAP) && strv_replace(&dst->wrap, src->wrap) != 0)
        return -1;
    if ((s & SBATCH_EXPORT) && strv_replace(&dst->export_spec, src->export_spec) != 0)
        return -1;
    if ((s & SBATCH_ACCOUNT) && strv_replace(&dst->account, src->account) != 0)
        return -1;
    if ((s & SBATCH_DEPENDENCY) && strv_replace(&dst->dependency, src->dependency) != 0)
        return -1;
    if (s & SBATCH_KILL_INVALID_DEP)
        dst->kill_invalid = src->kill_invalid;
    if (s & SBATCH_NODES)
        dst->nodes = src->nodes;
    if (s & SBATCH_NTASKS)
        dst->ntasks = src->ntasks;
    if (s & SBATCH_CPUS_PER_TASK)
        dst->cpus_per_task = src->cpus_per_task;
    if (s & SBATCH_MEM)
        dst->mem_mb = src->mem_mb;
    if (s & SBATCH_TIME)
        dst->time_min = src->time_min;
    if (s & SBATCH_HOLD)
        dst->hold = src->hold;
    if (s & SBATCH_PARSABLE)
        dst->parsable = src->parsable;
    if (s & SBATCH_QUIET)
        dst->quiet = src->quiet;
    if (s & SBATCH_REQUEUE)
        dst->requeue = src->requeue;
    dst->set |= s;
    return 0;
}

static bool valid_env_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return true;
}

/* A growing vector of "NAME=value" strings where a later NAME replaces an earlier one. */
struct envvec {
    char **v;
    size_t n, cap;
};

static int env_put(struct envvec *e, const char *name, size_t nlen, const char *value, size_t vlen)
{
    char *s = malloc(nlen + vlen + 2);
    if (s == NULL)
        return -1;
    memcpy(s, name, nlen);
    s[nlen] = '=';
    memcpy(s + nlen + 1, value, vlen);
    s[nlen + vlen + 1] = '\0';
    for (size_t i = 0; i < e->n; i++) {
        if (strncmp(e->v[i], name, nlen) == 0 && e->v[i][nlen] == '=') {
            free(e->v[i]);
            e->v[i] = s;
            return 0;
        }
    }
    if (e->n + 1 >= e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        char **nv = realloc(e->v, cap * sizeof(char *));
        if (nv == NULL) {
            free(s);
            return -1;
        }
        e->v = nv;
        e->cap = cap;
    }
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
    return 0;
}

static const char *env_lookup(char *const *environ, const char *name, size_t nlen)
{
    for (size_t i = 0; environ && environ[i]; i++)
        if (strncmp(environ[i], name, nlen) == 0 && environ[i][nlen] == '=')
            return environ[i] + nlen + 1;
    return NULL;
}

static int env_add_all(struct envvec *e, char *const *environ)
{
    for (size_t i = 0; environ && environ[i]; i++) {
        const char *eq = strchr(environ[i], '=');
        if (eq == NULL || eq == environ[i])
            continue;
        if (env_put(e, environ[i], (size_t)(eq - environ[i]), eq + 1, strlen(eq + 1)) != 0)
            return -1;
    }
    return 0;
}

int sbatch_parse_export_env(const char *spec, char *const *environ, char ***out, size_t *n,
                            char *err, size_t errlen)
{
    struct envvec e = {0};
    char *copy = NULL;
    int rc = -1;

    *out = NULL;
    *n = 0;
    if (spec == NULL || strcasecmp(spec, "ALL") == 0) {
        if (env_add_all(&e, environ) != 0)
            goto oom;
        goto done;
    }
    if (strcasecmp(spec, "NONE") == 0)
        goto done;

    /* Split on commas outside quotes; a list that names ALL starts from everything. */
    copy = strdup(spec);
    if (copy == NULL)
        goto oom;
    char *tokens[1024];
    size_t nt = 0;
    char quote = 0;
    char *start = copy;
    for (char *p = copy;; p++) {
        if (*p == '\0' || (*p == ',' && quote == 0)) {
            if (nt == sizeof(tokens) / sizeof(tokens[0])) {
                errmsg_set(err, errlen, "invalid --export value: too many names");
                goto out;
            }
            bool end = *p == '\0';
            *p = '\0';
            tokens[nt++] = start;
            start = p + 1;
            if (end)
                break;
        } else if (*p == quote) {
            quote = 0;
        } else if (quote == 0 && (*p == '\'' || *p == '"')) {
            quote = *p;
        }
    }
    if (quote != 0) {
        errmsg_set(err, errlen, "invalid --export value: unterminated quote in '%s'", spec);
        goto out;
    }
    for (size_t i = 0; i < nt; i++)
        if (strcasecmp(tokens[i], "ALL") == 0 && env_add_all(&e, environ) != 0)
            goto oom;
    for (size_t i = 0; i < nt; i++) {
        const char *t = tokens[i];
        if (strcasecmp(t, "ALL") == 0 || strcasecmp(t, "NONE") == 0)
            continue;
        if (t[0] == '\0') {
            errmsg_set(err, errlen, "invalid --export value: empty name in '%s'", spec);
            goto out;
        }
        const char *eq = strchr(t, '=');
        size_t nlen = eq ? (size_t)(eq - t) : strlen(t);
        if (!valid_env_name(t, nlen)) {
            errmsg_set(err, errlen, "invalid --export value: '%.*s' is not a variable name",
                       (int)nlen, t);
            goto out;
        }
        if (eq == NULL) {
            const char *v = env_lookup(environ, t, nlen);
            if (v != NULL && env_put(&e, t, nlen, v, strlen(v)) != 0)
                goto oom;
            continue;
        }
        const char *v = eq + 1;
        size_t vlen = strlen(v);
        if (vlen >= 2 && (v[0] == '\'' || v[0] == '"') && v[vlen - 1] == v[0]) {
            v++;
            vlen -= 2;
        }
        if (env_put(&e, t, nlen, v, vlen) != 0)
            goto oom;
    }
done:
    if (e.v == NULL) {
        e.v = calloc(1, sizeof(char *));
        if (e.v == NULL)
            goto oom;
    }
    *out = e.v;
    *n = e.n;
    e.v = NULL;
    rc = 0;
    goto out;
oom:
    errmsg_set(err, errlen, "out of memory");
out:
    free(copy);
    strv_free(e.v, e.n);
    return rc;
}

char *sbatch_parse_wrap_script(const char *cmd)
{
    static const char head[] = "#!/bin/sh\n";
    size_t n = strlen(cmd);
    char *s = malloc(sizeof(head) + n + 1);
    if (s == NULL)
        return NULL;
    memcpy(s, head, sizeof(head) - 1);
    memcpy(s + sizeof(head) - 1, cmd, n);
    s[sizeof(head) - 1 + n] = '\n';
    s[sizeof(head) + n] = '\0';
    return s;
}

int sbatch_parse_check_size(size_t len, bool exact, uint32_t limit, char *err, size_t errlen)
{
    if (limit == 0 || len <= limit)
        return 0;
    if (exact)
        return errmsg_set(err, errlen,
                          "batch script is %zu bytes, over the limit of %u bytes "
                          "(controller.max_script_bytes)",
                          len, limit);
    return errmsg_set(
        err, errlen,
        "batch script is larger than the limit of %u bytes (controller.max_script_bytes)", limit);
}

int sbatch_parse_check_script(const char *script, size_t len, char *err, size_t errlen)
{
    /* The server applies the same rule to every submission (common/jobscript.h); checking
     * here too only saves a round trip and keeps the message when no replica answers. */
    return jobscript_check(script, len, err, errlen);
}

static char *path_join(const char *dir, const char *rel)
{
    size_t dl = strlen(dir), rl = strlen(rel);
    bool slash = dl > 0 && dir[dl - 1] == '/';
    char *s = malloc(dl + rl + 2);
    if (s == NULL)
        return NULL;
    memcpy(s, dir, dl);
    if (!slash)
        s[dl++] = '/';
    memcpy(s + dl, rel, rl + 1);
    return s;
}

static char *base_name(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    return strndup(path + b, n - b);
}

int sbatch_parse_build(const struct sbatch_parse_opts *cli, const char *script, size_t len,
                       const struct sbatch_parse_context *ctx, struct sbatch_parse_job *job,
                       char *err, size_t errlen)
{
    struct sbatch_parse_opts o = {0};
    char *wrapped = NULL;
    int frc = -1; /* what a failure returns */
    memset(job, 0, sizeof(*job));

    if (cli->set & SBATCH_WRAP) {
        if (script != NULL || ctx->script_path != NULL)
            return errmsg_set(err, errlen, "script argument not permitted with --wrap option");
        wrapped = sbatch_parse_wrap_script(cli->wrap);
        if (wrapped == NULL)
            return errmsg_set(err, errlen, "out of memory");
        script = wrapped;
        len = strlen(wrapped);
    } else if (script == NULL) {
        return errmsg_set(err, errlen, "no batch script given");
    }
    if (sbatch_parse_check_size(len, true, ctx->max_script_bytes, err, errlen) != 0 ||
        sbatch_parse_check_script(script, len, err, errlen) != 0)
        goto fail;
    frc = sbatch_parse_parse_directives(&o, script, len, err, errlen);
    if (frc != 0)
        goto fail;
    /* The environment over the script, the command line over both (sbatch(1)). */
    struct sbatch_parse_opts eo;
    frc = sbatch_parse_env(&eo, ctx->environ, err, errlen);
    if (frc != 0)
        goto fail;
    frc = -1;
    int mrc = sbatch_parse_merge(&o, &eo);
    sbatch_parse_opts_free(&eo);
    if (mrc != 0 || sbatch_parse_merge(&o, cli) != 0)
        goto oom;

    if (o.set & SBATCH_NAME)
        job->name = strdup(o.name);
    else if (cli->set & SBATCH_WRAP)
        job->name = strdup("wrap");
    else if (ctx->script_path != NULL)
        job->name = base_name(ctx->script_path);
    else
        job->name = strdup("sbatch");
    job->partition = strdup(o.set & SBATCH_PARTITION ? o.partition : "");
    job->stdout_path = strdup(o.set & SBATCH_OUTPUT ? o.output : "slurm-%j.out");
    job->stderr_path = strdup(o.set & SBATCH_ERROR ? o.error
                              : job->stdout_path   ? job->stdout_path
                                                   : "");
    const char *cwd = ctx->cwd ? ctx->cwd : "/";
    if (!(o.set & SBATCH_CHDIR))
        job->workdir = strdup(cwd);
    else if (o.chdir[0] == '/')
        job->workdir = strdup(o.chdir);
    else
        job->workdir = path_join(cwd, o.chdir);
    job->user = strdup(ctx->user ? ctx->user : "");
    job->account = strdup(o.set & SBATCH_ACCOUNT ? o.account : "");
    job->dependency = strdup(o.set & SBATCH_DEPENDENCY ? o.dependency : "");
    job->kill_invalid = o.kill_invalid;
    job->script = malloc(len + 1);
    if (!job->name || !job->partition || !job->stdout_path || !job->stderr_path || !job->workdir ||
        !job->user || !job->account || !job->dependency || !job->script)
        goto oom;
    memcpy(job->script, script, len);
    job->script[len] = '\0';
    job->script_len = len;

    job->nodes = o.set & SBATCH_NODES ? o.nodes : 1;
    job->ntasks = o.set & SBATCH_NTASKS ? o.ntasks : job->nodes; /* one task per node */
    job->cpus_per_task = o.set & SBATCH_CPUS_PER_TASK ? o.cpus_per_task : 1;
    job->mem_mb = o.set & SBATCH_MEM ? o.mem_mb : 0;
    job->time_min = o.set & SBATCH_TIME ? o.time_min : 0;
    job->hold = o.hold;
    job->requeue = o.set & SBATCH_REQUEUE ? o.requeue : false;
    job->parsable = o.parsable;
    job->quiet = o.quiet;
    job->uid = ctx->uid;
    job->gid = ctx->gid;
    if (sbatch_parse_export_env(o.set & SBATCH_EXPORT ? o.export_spec : NULL, ctx->environ,
                                &job->env, &job->nenv, err, errlen) != 0)
        goto fail;
    sbatch_parse_opts_free(&o);
    free(wrapped);
    return 0;
oom:
    errmsg_set(err, errlen, "out of memory");
fail:
    sbatch_parse_opts_free(&o);
    free(wrapped);
    sbatch_parse_job_free(job);
    return frc;
}

void sbatch_parse_job_to_spec(const struct sbatch_parse_job *job, Spur__Api__JobSpec *spec)
{
    spec->name = job->name;
    spec->partition = job->partition;
    spec->nodes = job->nodes;
    spec->ntasks = job->ntasks;
    spec->cpus_per_task = job->cpus_per_task;
    spec->mem_mb = job->mem_mb;
    spec->time_limit_min = job->time_min;
    spec->stdout_path = job->stdout_path;
    spec->stderr_path = job->stderr_path;
    spec->workdir = job->workdir;
    spec->hold = job->hold;
    spec->requeue = job->requeue;
    spec->account = job->account;
    spec->dependency = job->dependency;
    spec->kill_on_invalid_dep = job->kill_invalid;
    spec->script.data = (uint8_t *)job->script;
    spec->script.len = job->script_len;
    spec->n_env = job->nenv;
    spec->env = job->env;
    spec->user = job->user;
    spec->uid = job->uid;
    spec->gid = job->gid;
}
