/*
 * fsm_sess.c - sessions in a map by client id and a list by last use. See fsm_sess.h.
 */
#include "fsm_sess.h"

#include <stdlib.h>

void fsm_sess_init(struct fsm_sessions *s)
{
    fsm_map_init(&s->by_client);
    s->oldest = s->newest = NULL;
    s->count = 0;
    s->bytes = 0;
}

void fsm_sess_free(struct fsm_sessions *s)
{
    struct fsm_sess *x = s->oldest;
    while (x != NULL) {
        struct fsm_sess *next = x->next;
        free(x->resp);
        free(x);
        x = next;
    }
    fsm_map_free(&s->by_client);
    fsm_sess_init(s);
}

struct fsm_sess *fsm_sess_find(const struct fsm_sessions *s, uint64_t client_id)
{
    return fsm_map_get(&s->by_client, client_id);
}

static void unlink_sess(struct fsm_sessions *s, struct fsm_sess *x)
{
    if (x->prev != NULL)
        x->prev->next = x->next;
    else
        s->oldest = x->next;
    if (x->next != NULL)
        x->next->prev = x->prev;
    else
        s->newest = x->prev;
    x->prev = x->next = NULL;
}

static void append_sess(struct fsm_sessions *s, struct fsm_sess *x)
{
    x->next = NULL;
    x->prev = s->newest;
    if (s->newest != NULL)
        s->newest->next = x;
    else
        s->oldest = x;
    s->newest = x;
}

void fsm_sess_touch(struct fsm_sessions *s, struct fsm_sess *sess, uint64_t index, uint64_t time_ms)
{
    unlink_sess(s, sess);
    sess->last_index = index;
    sess->last_ms = time_ms;
    append_sess(s, sess);
}

int fsm_sess_record(struct fsm_sessions *s, uint64_t client_id, uint64_t seq, uint64_t index,
                    uint64_t time_ms, uint8_t *resp, size_t resp_len)
{
    struct fsm_sess *x = fsm_sess_find(s, client_id);
    if (x == NULL) {
        x = calloc(1, sizeof(*x));
        if (x == NULL)
            return -1;
        x->client_id = client_id;
        if (fsm_map_put(&s->by_client, client_id, x) != 0) {
            free(x);
            return -1;
        }
        s->count++;
        append_sess(s, x);
    }
    s->bytes -= x->resp_len;
    free(x->resp);
    x->resp = resp;
    x->resp_len = resp_len;
    x->last_seq = seq;
    s->bytes += resp_len;
    fsm_sess_touch(s, x, index, time_ms);
    return 0;
}

static void drop_oldest(struct fsm_sessions *s)
{
    struct fsm_sess *x = s->oldest;
    unlink_sess(s, x);
    fsm_map_del(&s->by_client, x->client_id);
    s->count--;
    s->bytes -= x->resp_len;
    free(x->resp);
    free(x);
}

size_t fsm_sess_expire(struct fsm_sessions *s, uint64_t now_ms, uint64_t ttl_ms, size_t max)
{
    size_t n = 0;
    while (s->oldest != NULL &&
           (s->oldest->last_ms < now_ms && now_ms - s->oldest->last_ms > ttl_ms)) {
        drop_oldest(s);
        n++;
    }
    while (s->count > max) {
        drop_oldest(s);
        n++;
    }
    return n;
}
