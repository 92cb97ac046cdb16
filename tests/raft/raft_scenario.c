/*
 * raft_scenario.c - runs hand-written Raft scenarios: commands in, expected trace out.
 *
 *   raft_scenario FILE...            run each file; exit 1 on the first difference
 *   raft_scenario --rewrite FILE...  run and write the actual output back into the file,
 *                                    so a change of behaviour shows up as a diff in git
 *
 * File format (docs/raft-core.md has the full command list):
 *
 *     # a comment, kept as it is
 *     command arg arg key=value
 *     ----
 *     the trace the command produced, one event per line
 *     (a blank line ends the block)
 *
 * A command's output is every trace line the simulated cluster printed while it ran
 * (messages delivered, role and commit changes, writes, reads, ...) followed by what the
 * command itself prints (status, log). Messages wait in a mailbox until a deliver,
 * stabilize or run command; time moves only with tick and run (which delivers at once and
 * leaves the messages out of the trace unless given `verbose`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MAX_ARGS 16

struct args {
    int n;
    char *v[MAX_ARGS];
};

static void split(char *line, struct args *a)
{
    char *save = NULL, *t;

    a->n = 0;
    for (t = strtok_r(line, " \t", &save); t != NULL && a->n < MAX_ARGS;
         t = strtok_r(NULL, " \t", &save))
        a->v[a->n++] = t;
}

/* key=value lookup; returns def when absent. */
static long kv(const struct args *a, const char *key, long def)
{
    size_t kl = strlen(key);
    int i;

    for (i = 1; i < a->n; i++)
        if (strncmp(a->v[i], key, kl) == 0 && a->v[i][kl] == '=')
            return strtol(a->v[i] + kl + 1, NULL, 10);
    return def;
}

static bool flag(const struct args *a, const char *word)
{
    int i;

    for (i = 1; i < a->n; i++)
        if (strcmp(a->v[i], word) == 0)
            return true;
    return false;
}

static long pos(const struct args *a, int i, long def)
{
    return i < a->n ? strtol(a->v[i], NULL, 10) : def;
}

static void run_for(struct sim *s, uint64_t ms)
{
    uint64_t end = sim_now(s) + ms;

    while (sim_now(s) < end) {
        sim_advance(s, 5);
        sim_stabilize(s);
    }
}

/* Run one command; output goes to out. Returns 0, or -1 for an unknown command. */
static int run_command(struct sim **sp, char *line, FILE *out)
{
    struct args a;
    struct sim *s;
    raft_id n;

    split(line, &a);
    if (a.n == 0)
        return 0;
    if (strcmp(a.v[0], "cluster") == 0) {
        struct sim_config cfg = {0};

        cfg.voters = (uint32_t)kv(&a, "voters", 3);
        cfg.spares = (uint32_t)kv(&a, "spares", 0);
        cfg.seed = (uint64_t)kv(&a, "seed", 1);
        cfg.disable_prevote = flag(&a, "prevote=off");
        cfg.disable_check_quorum = flag(&a, "checkquorum=off");
        cfg.max_msg_bytes = (uint32_t)kv(&a, "max-msg-bytes", 0);
        cfg.max_inflight_msgs = (uint32_t)kv(&a, "inflight", 0);
        cfg.trace = out;
        sim_free(*sp);
        *sp = sim_new(&cfg);
        return 0;
    }
    s = *sp;
    if (s == NULL) {
        fprintf(out, "error: no cluster\n");
        return 0;
    }
    sim_set_trace(s, out);
    n = (raft_id)pos(&a, 1, 0);
    if (strcmp(a.v[0], "campaign") == 0) {
        sim_campaign(s, n);
    } else if (strcmp(a.v[0], "deliver") == 0) {
        sim_deliver(s, (raft_id)kv(&a, "from", 0), (raft_id)kv(&a, "to", 0), false);
    } else if (strcmp(a.v[0], "stabilize") == 0) {
        sim_stabilize(s);
    } else if (strcmp(a.v[0], "drop") == 0) {
        sim_drop(s, (raft_id)kv(&a, "from", 0), (raft_id)kv(&a, "to", 0));
    } else if (strcmp(a.v[0], "tick") == 0) {
        sim_advance(s, (uint64_t)pos(&a, 1, 0));
    } else if (strcmp(a.v[0], "run") == 0) {
        sim_trace_messages(s, flag(&a, "verbose"));
        run_for(s, (uint64_t)pos(&a, 1, 0));
        sim_trace_messages(s, true);
    } else if (strcmp(a.v[0], "propose") == 0) {
        sim_propose(s, n, a.n > 2 ? a.v[2] : "x", NULL);
    } else if (strcmp(a.v[0], "read") == 0) {
        sim_read(s, n, (uint64_t)pos(&a, 2, 1));
    } else if (strcmp(a.v[0], "transfer") == 0) {
        sim_transfer(s, n, (raft_id)pos(&a, 2, 0));
    } else if (strcmp(a.v[0], "add-learner") == 0) {
        sim_change(s, n, RAFT_CHANGE_ADD_LEARNER, (raft_id)pos(&a, 2, 0));
    } else if (strcmp(a.v[0], "promote") == 0) {
        sim_change(s, n, RAFT_CHANGE_PROMOTE, (raft_id)pos(&a, 2, 0));
    } else if (strcmp(a.v[0], "remove") == 0) {
        sim_change(s, n, RAFT_CHANGE_REMOVE, (raft_id)pos(&a, 2, 0));
    } else if (strcmp(a.v[0], "snapshot") == 0) {
        sim_snapshot(s, n, (raft_index)kv(&a, "trailing", 0));
    } else if (strcmp(a.v[0], "crash") == 0) {
        sim_crash(s, n);
    } else if (strcmp(a.v[0], "restart") == 0) {
        sim_restart(s, n);
    } else if (strcmp(a.v[0], "isolate") == 0) {
        sim_isolate(s, n);
    } else if (strcmp(a.v[0], "cut") == 0) {
        sim_link(s, n, (raft_id)pos(&a, 2, 0), false);
        if (!flag(&a, "oneway"))
            sim_link(s, (raft_id)pos(&a, 2, 0), n, false);
    } else if (strcmp(a.v[0], "heal") == 0) {
        sim_heal(s);
    } else if (strcmp(a.v[0], "disk") == 0) {
        sim_disk_manual(s, n, flag(&a, "manual"));
    } else if (strcmp(a.v[0], "persist") == 0) {
        sim_persist(s, n);
    } else if (strcmp(a.v[0], "pause") == 0) {
        sim_pause(s, n, true);
    } else if (strcmp(a.v[0], "resume") == 0) {
        sim_pause(s, n, false);
    } else if (strcmp(a.v[0], "status") == 0) {
        sim_print_status(s, out);
    } else if (strcmp(a.v[0], "log") == 0) {
        sim_print_log(s, n, out);
    } else {
        fprintf(out, "error: unknown command %s\n", a.v[0]);
        return -1;
    }
    if (sim_failure(s) != NULL)
        fprintf(out, "FAILURE: %s\n", sim_failure(s));
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long len;

    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)len + 1);
    if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

static int run_file(const char *path, bool rewrite)
{
    char *text = slurp(path), *p, *rewritten = NULL;
    size_t rlen = 0;
    FILE *rw;
    struct sim *s = NULL;
    int line_no = 0, failures = 0;

    if (text == NULL) {
        fprintf(stderr, "raft_scenario: %s: cannot read\n", path);
        return 1;
    }
    rw = open_memstream(&rewritten, &rlen);
    p = text;
    while (*p != '\0') {
        char *eol = strchr(p, '\n'), *cmd, *expected, *actual = NULL;
        size_t alen = 0, elen;
        int cmd_line;
        FILE *out;

        if (eol == NULL)
            eol = p + strlen(p);
        line_no++;
        if (*p == '#' || p == eol) { /* comment or blank: copy */
            fwrite(p, 1, (size_t)(eol - p), rw);
            fputc('\n', rw);
            p = *eol ? eol + 1 : eol;
            continue;
        }
        cmd = strndup(p, (size_t)(eol - p));
        cmd_line = line_no;
        fprintf(rw, "%s\n----\n", cmd);
        p = *eol ? eol + 1 : eol;
        /* the expected block: after "----" up to a blank line */
        expected = p;
        if (strncmp(p, "----\n", 5) == 0) {
            p += 5;
            line_no++;
            expected = p;
            while (*p != '\0' && *p != '\n') {
                char *e2 = strchr(p, '\n');

                p = e2 ? e2 + 1 : p + strlen(p);
                line_no++;
            }
        }
        elen = (size_t)(p - expected);
        out = open_memstream(&actual, &alen);
        {
            char *c2 = strdup(cmd);

            run_command(&s, c2, out);
            free(c2);
        }
        fclose(out);
        fwrite(actual, 1, alen, rw);
        if (*p == '\n') {
            fputc('\n', rw);
            p++;
            line_no++;
        }
        if (alen != elen || memcmp(actual, expected, alen) != 0) {
            failures++;
            if (!rewrite)
                fprintf(stderr, "%s:%d: %s\n--- expected\n%.*s--- actual\n%s\n", path, cmd_line,
                        cmd, (int)elen, expected, actual);
        }
        free(actual);
        free(cmd);
        if (failures && !rewrite)
            break;
    }
    fclose(rw);
    sim_free(s);
    if (rewrite) {
        FILE *f = fopen(path, "w");

        if (f == NULL || fwrite(rewritten, 1, rlen, f) != rlen) {
            fprintf(stderr, "raft_scenario: %s: cannot write\n", path);
            failures = 1;
        } else {
            failures = 0;
        }
        if (f)
            fclose(f);
    }
    free(rewritten);
    free(text);
    if (failures == 0)
        printf("ok %s\n", path);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    bool rewrite = false;
    int i, rc = 0;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rewrite") == 0) {
            rewrite = true;
            continue;
        }
        rc |= run_file(argv[i], rewrite);
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s [--rewrite] FILE...\n", argv[0]);
        return 64;
    }
    return rc;
}
