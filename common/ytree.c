/*
 * ytree.c - libyaml events into a bounded tree; contract and the why in ytree.h.
 *
 * The builder keeps a stack of open collections (at most max_depth), each with the items
 * gathered so far; a scalar or alias, or a collection when it ends, becomes an item of the
 * collection below it, or the root. Anchors are registered when their node is complete
 * (so an alias inside the node it names is undefined, which rules out cycles), in an
 * open-addressing table sized for max_nodes, allocated on the first anchor.
 */
#include "ytree.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define CHUNK_NODES 256

struct ynode_chunk {
    struct ynode_chunk *next;
    size_t used;
    struct ynode nodes[CHUNK_NODES];
};

struct open_coll {
    struct ynode *node;
    struct ynode **items;
    size_t n, cap;
    char *anchor; /* registered when the collection ends */
};

struct anchor_slot {
    char *name;
    struct ynode *node;
};

struct builder {
    const struct ytree_limits *lim;
    struct ytree *t;
    struct ytree_error *err;
    struct open_coll *stack; /* max_depth entries */
    unsigned depth;
    struct anchor_slot *anchors;
    size_t anchor_cap; /* a power of two, twice max_nodes or more; 0 until the first */
};

static int fail(struct builder *b, unsigned line, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct builder *b, unsigned line, const char *key, const char *fmt, ...)
{
    va_list ap;
    b->err->line = line;
    b->err->key = key;
    va_start(ap, fmt);
    vsnprintf(b->err->reason, sizeof(b->err->reason), fmt, ap);
    va_end(ap);
    return -1;
}

static unsigned line_of_mark(yaml_mark_t m)
{
    return m.line + 1 > UINT32_MAX ? UINT32_MAX : (unsigned)(m.line + 1);
}

/* A new node, counted against the cap. */
static struct ynode *new_node(struct builder *b, enum ynode_type type, unsigned line)
{
    if (b->t->nnodes >= b->lim->max_nodes) {
        fail(b, line, "(file)",
             "holds more than %zu YAML nodes (keys, values, lists, "
             "mappings and aliases)",
             b->lim->max_nodes);
        return NULL;
    }
    struct ynode_chunk *ch = b->t->chunks;
    if (ch == NULL || ch->used == CHUNK_NODES) {
        ch = calloc(1, sizeof(*ch));
        if (ch == NULL) {
            fail(b, line, "(file)", "out of memory");
            return NULL;
        }
        ch->next = b->t->chunks;
        b->t->chunks = ch;
    }
    struct ynode *n = &ch->nodes[ch->used++];
    b->t->nnodes++;
    n->type = type;
    n->line = line;
    return n;
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static struct anchor_slot *anchor_slot(struct builder *b, const char *name)
{
    size_t mask = b->anchor_cap - 1;
    for (size_t i = (size_t)hash_name(name) & mask;; i = (i + 1) & mask)
        if (b->anchors[i].name == NULL || strcmp(b->anchors[i].name, name) == 0)
            return &b->anchors[i];
}

/* Name node; a later anchor of the same name replaces it (YAML 1.2 section 3.2.2.2). */
static int anchor_set(struct builder *b, char *name, struct ynode *node)
{
    if (b->anchor_cap == 0) {
        size_t cap = 16;
        while (cap < 2 * b->lim->max_nodes)
            cap *= 2;
        b->anchors = calloc(cap, sizeof(*b->anchors));
        if (b->anchors == NULL) {
            free(name);
            return fail(b, node->line, "(file)", "out of memory");
        }
        b->anchor_cap = cap;
    }
    /* Anchors never outnumber nodes, so the table is never more than half full. */
    struct anchor_slot *s = anchor_slot(b, name);
    if (s->name != NULL)
        free(name);
    else
        s->name = name;
    s->node = node;
    return 0;
}

static struct ynode *anchor_get(struct builder *b, const char *name)
{
    if (b->anchor_cap == 0)
        return NULL;
    return anchor_slot(b, name)->node;
}

/* Make node an item of the innermost open collection, or the document's root. */
static int add_item(struct builder *b, struct ynode *node)
{
    if (b->depth == 0) {
        b->t->root = node;
        return 0;
    }
    struct open_coll *oc = &b->stack[b->depth - 1];
    if (oc->n == oc->cap) {
        size_t cap = oc->cap ? 2 * oc->cap : 8;
        struct ynode **v = realloc(oc->items, cap * sizeof(*v));
        if (v == NULL)
            return fail(b, node->line, "(file)", "out of memory");
        oc->items = v;
        oc->cap = cap;
    }
    oc->items[oc->n++] = node;
    return 0;
}

static char *dup_anchor(struct builder *b, const yaml_char_t *a, unsigned line, int *rc)
{
    *rc = 0;
    if (a == NULL)
        return NULL;
    char *s = strdup((const char *)a);
    if (s == NULL)
        *rc = fail(b, line, "(file)", "out of memory");
    return s;
}

static int on_scalar(struct builder *b, const yaml_event_t *ev)
{
    unsigned line = line_of_mark(ev->start_mark);
    struct ynode *n = new_node(b, YNODE_SCALAR, line);
    if (n == NULL)
        return -1;
    size_t len = ev->data.scalar.length;
    n->value = malloc(len + 1);
    if (n->value == NULL)
        return fail(b, line, "(file)", "out of memory");
    memcpy(n->value, ev->data.scalar.value, len);
    n->value[len] = '\0';
    n->len = len;
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    int rc;
    char *anchor = dup_anchor(b, ev->data.scalar.anchor, line, &rc);
    if (rc != 0)
        return rc;
    if (anchor != NULL && anchor_set(b, anchor, n) != 0)
        return -1;
    return add_item(b, n);
}

static int on_alias(struct builder *b, const yaml_event_t *ev)
{
    unsigned line = line_of_mark(ev->start_mark);
    const char *name = (const char *)ev->data.alias.anchor;
    /* An alias costs a node too, or a file of aliases would be a free amplifier. */
    if (b->t->nnodes >= b->lim->max_nodes)
        return fail(b, line, "(file)",
                    "holds more than %zu YAML nodes (keys, values, lists, "
                    "mappings and aliases)",
                    b->lim->max_nodes);
    struct ynode *target = anchor_get(b, name);
    if (target == NULL)
        return fail(b, line, "(yaml)",
                    "undefined alias *%.64s: an alias names an anchor set "
                    "earlier, on a node that is complete",
                    name);
    b->t->nnodes++;
    return add_item(b, target);
}

static int on_start(struct builder *b, const yaml_event_t *ev, enum ynode_type type)
{
    unsigned line = line_of_mark(ev->start_mark);
    if (b->depth >= b->lim->max_depth)
        return fail(b, line, "(file)", "lists and mappings nest deeper than %u levels",
                    b->lim->max_depth);
    struct ynode *n = new_node(b, type, line);
    if (n == NULL)
        return -1;
    const yaml_char_t *a =
        type == YNODE_SEQUENCE ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
    int rc;
    char *anchor = dup_anchor(b, a, line, &rc);
    if (rc != 0)
        return rc;
    struct open_coll *oc = &b->stack[b->depth++];
    memset(oc, 0, sizeof(*oc));
    oc->node = n;
    oc->anchor = anchor;
    return 0;
}

static int on_end(struct builder *b)
{
    struct open_coll *oc = &b->stack[--b->depth];
    struct ynode *n = oc->node;
    n->items = oc->items;
    n->n = n->type == YNODE_MAPPING ? oc->n / 2 : oc->n;
    oc->items = NULL;
    char *anchor = oc->anchor;
    oc->anchor = NULL;
    if (anchor != NULL && anchor_set(b, anchor, n) != 0)
        return -1;
    return add_item(b, n);
}

static void free_nodes(struct ytree *t)
{
    while (t->chunks) {
        struct ynode_chunk *ch = t->chunks;
        t->chunks = ch->next;
        for (size_t i = 0; i < ch->used; i++) {
            free(ch->nodes[i].value);
            free(ch->nodes[i].items);
        }
        free(ch);
    }
    t->root = NULL;
    t->nnodes = 0;
}

void ytree_free(struct ytree *t)
{
    free_nodes(t);
}

static void builder_done(struct builder *b)
{
    for (unsigned i = 0; i < b->depth; i++) {
        free(b->stack[i].items);
        free(b->stack[i].anchor);
    }
    free(b->stack);
    for (size_t i = 0; i < b->anchor_cap; i++)
        free(b->anchors[i].name);
    free(b->anchors);
}

static void syntax_error(struct builder *b, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR) {
        fail(b, line_of_mark(p->problem_mark), "(file)", "out of memory");
        return;
    }
    fail(b, line_of_mark(p->problem_mark), "(yaml)", "%s%s%s",
         p->problem ? p->problem : "syntax error", p->context ? " " : "",
         p->context ? p->context : "");
}

int ytree_load(const char *buf, size_t len, const struct ytree_limits *limits, struct ytree *t,
               struct ytree_error *err)
{
    struct builder b = {.lim = limits, .t = t, .err = err};
    yaml_parser_t parser;
    unsigned docs = 0;
    int rc = 0;

    memset(t, 0, sizeof(*t));
    memset(err, 0, sizeof(*err));
    b.stack = calloc(limits->max_depth ? limits->max_depth : 1, sizeof(*b.stack));
    if (b.stack == NULL)
        return fail(&b, 1, "(file)", "out of memory");
    if (!yaml_parser_initialize(&parser)) {
        free(b.stack);
        return fail(&b, 1, "(file)", "cannot initialise the YAML parser");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    for (bool done = false; !done && rc == 0;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            syntax_error(&b, &parser);
            rc = -1;
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                rc = fail(&b, line_of_mark(ev.start_mark), "(file)",
                          "holds more than one YAML document");
            break;
        case YAML_SCALAR_EVENT:
            rc = on_scalar(&b, &ev);
            break;
        case YAML_ALIAS_EVENT:
            rc = on_alias(&b, &ev);
            break;
        case YAML_SEQUENCE_START_EVENT:
            rc = on_start(&b, &ev, YNODE_SEQUENCE);
            break;
        case YAML_MAPPING_START_EVENT:
            rc = on_start(&b, &ev, YNODE_MAPPING);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            rc = on_end(&b);
            break;
        default: /* stream start, document end, nothing to build */
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    builder_done(&b);
    if (rc != 0)
        free_nodes(t);
    return rc;
}
