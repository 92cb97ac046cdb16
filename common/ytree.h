/*
 * ytree.h - one YAML document read into a small tree, in time linear in the input.
 *
 * The configuration loader needs the whole document at once (rules between keys point at
 * lines far apart), which libyaml's document API gives, but at a cost a hostile or
 * mistaken file controls:
 *   - libyaml's scanner, for every token, walks the saved simple-key slot of every open
 *     flow collection (yaml_parser_fetch_more_tokens, yaml_parser_stale_simple_keys), so
 *     "[[[[...]]]]" costs O(depth) per token and O(depth^2) in all: 30,000 levels took
 *     seconds, a 200 kB file of them minutes;
 *   - its document loader looks every anchor and alias up in a flat list, O(anchors^2).
 * This module drives libyaml's event parser itself and stops at the first event past a
 * nesting cap or a node cap, so the scanner never holds more than the cap of open levels
 * (O(cap) per token, O(cap x input) in all), and keeps anchors in a hash table.
 *
 * Guarantees:
 *   - At most limits.max_depth collections nested in one another and limits.max_nodes
 *     nodes (scalars, lists, mappings, aliases; keys included); past either, the load
 *     stops with the line of the node that went over.
 *   - One document: a second one is an error naming the line of its start.
 *   - An alias is a pointer to its anchor's node, never a copy, and may only name a node
 *     that is complete before it: no alias can make a cycle, so any walk terminates, and a
 *     walk that does not descend through aliases more than the schema allows is bounded.
 *   - Nothing is left allocated after an error; after success ytree_free() frees it all.
 *
 * Ownership: struct ytree owns every node, item array and string in it.
 */
#ifndef SPUR_YTREE_H
#define SPUR_YTREE_H

#include <stdbool.h>
#include <stddef.h>

enum ynode_type { YNODE_SCALAR, YNODE_SEQUENCE, YNODE_MAPPING };

struct ynode {
    enum ynode_type type;
    unsigned line;        /* 1-based line where the node starts */
    bool plain;           /* scalar written without quotes, so "100" differs from 100 */
    char *value;          /* scalar: NUL-terminated (a NUL may come before len) */
    size_t len;           /* scalar: bytes in value */
    struct ynode **items; /* sequence: n items; mapping: n pairs, key and value in turn */
    size_t n;
};

struct ytree_limits {
    unsigned max_depth; /* nesting of lists and mappings; the top-level mapping is 1 */
    size_t max_nodes;
};

struct ynode_chunk;

struct ytree {
    struct ynode *root;         /* NULL: no document (empty input, comments only) */
    struct ynode_chunk *chunks; /* every node, in allocation blocks */
    size_t nnodes;
};

struct ytree_error {
    unsigned line;   /* 1-based */
    const char *key; /* "(yaml)" for syntax errors, "(file)" for structure and caps */
    char reason[300];
};

/* Read buf. Returns 0 with *t filled, or -1 with *err set and nothing allocated. */
int ytree_load(const char *buf, size_t len, const struct ytree_limits *limits, struct ytree *t,
               struct ytree_error *err);
void ytree_free(struct ytree *t);

#endif
