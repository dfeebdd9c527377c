/* SPDX-License-Identifier: BSD-3-Clause
 * Single edits of a config, done on its YAML: the running config as
 * config_emit writes it, loaded as a libyaml document, a rule, chain or
 * service added, removed, moved or changed by a YAML fragment from the
 * command, and written back as text. The text then goes through the loader
 * like any config, so an edit is checked exactly as a file would be, and the
 * values keep the words the user wrote (no second parser of ranges here).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config_edit.h"

struct buf {
	char *p;
	size_t len, cap;
};

static int
write_buf(void *data, unsigned char *bytes, size_t n)
{
	struct buf *b = data;

	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 8192;
		char *p;

		while (b->len + n + 1 > cap)
			cap *= 2;
		p = realloc(b->p, cap);
		if (p == NULL)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, bytes, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 1;
}

static int
load(const char *text, yaml_document_t *doc)
{
	yaml_parser_t parser;
	int ok;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
	ok = yaml_parser_load(&parser, doc);
	yaml_parser_delete(&parser);
	if (!ok)
		return -EINVAL;
	if (yaml_document_get_root_node(doc) == NULL) {
		yaml_document_delete(doc);
		return -EINVAL;
	}
	return 0;
}

static const char *
scalar(const yaml_node_t *n)
{
	return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value node of @p key in mapping @p map, or 0. */
static int
map_find(yaml_document_t *doc, yaml_node_t *map, const char *key, yaml_node_pair_t **pair)
{
	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return 0;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		const char *k = scalar(yaml_document_get_node(doc, p->key));

		if (k != NULL && strcmp(k, key) == 0) {
			if (pair != NULL)
				*pair = p;
			return p->value;
		}
	}
	return 0;
}

/* Node @p id of @p from, copied into @p to. @return its id there, or 0. */
static int
copy_node(yaml_document_t *to, yaml_document_t *from, int id)
{
	yaml_node_t *n = yaml_document_get_node(from, id);
	int out, k, v;

	if (n == NULL)
		return 0;
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return yaml_document_add_scalar(to, NULL, n->data.scalar.value,
						(int)n->data.scalar.length, n->data.scalar.style);
	case YAML_SEQUENCE_NODE:
		out = yaml_document_add_sequence(to, NULL, n->data.sequence.style);
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     out && i < n->data.sequence.items.top; i++) {
			v = copy_node(to, from, *i);
			if (!v || !yaml_document_append_sequence_item(to, out, v))
				return 0;
			n = yaml_document_get_node(from, id); /* add_* may move nodes */
		}
		return out;
	case YAML_MAPPING_NODE:
		out = yaml_document_add_mapping(to, NULL, n->data.mapping.style);
		for (size_t i = 0;
		     out && i < (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
		     i++) {
			yaml_node_pair_t p = n->data.mapping.pairs.start[i];

			k = copy_node(to, from, p.key);
			v = copy_node(to, from, p.value);
			if (!k || !v || !yaml_document_append_mapping_pair(to, out, k, v))
				return 0;
			n = yaml_document_get_node(from, id);
		}
		return out;
	default: return 0;
	}
}

/* The top-level list @p key (rules, chains, services). */
static yaml_node_t *
top_list(yaml_document_t *doc, const char *key, int *id)
{
	*id = map_find(doc, yaml_document_get_root_node(doc), key, NULL);
	return *id ? yaml_document_get_node(doc, *id) : NULL;
}

static size_t
seq_len(const yaml_node_t *seq)
{
	return (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
}

/* Index of the item of @p seq whose "name" is @p name, or -1. */
static long
named_item(yaml_document_t *doc, yaml_node_t *seq, const char *name)
{
	for (size_t i = 0; i < seq_len(seq); i++) {
		yaml_node_t *item = yaml_document_get_node(doc, seq->data.sequence.items.start[i]);
		const char *n =
			scalar(yaml_document_get_node(doc, map_find(doc, item, "name", NULL)));

		if (n != NULL && strcmp(n, name) == 0)
			return (long)i;
	}
	return -1;
}

static void
seq_remove(yaml_node_t *seq, size_t at)
{
	yaml_node_item_t *items = seq->data.sequence.items.start;

	memmove(items + at, items + at + 1, (seq_len(seq) - at - 1) * sizeof(*items));
	seq->data.sequence.items.top--;
}

/* Append @p item, then move it to @p at. */
static int
seq_insert(yaml_document_t *doc, int seq_id, int item, size_t at)
{
	yaml_node_t *seq;
	yaml_node_item_t *items;
	size_t n;

	if (!yaml_document_append_sequence_item(doc, seq_id, item))
		return -ENOMEM;
	seq = yaml_document_get_node(doc, seq_id);
	items = seq->data.sequence.items.start;
	n = seq_len(seq);
	if (at < n - 1) {
		memmove(items + at + 1, items + at, (n - 1 - at) * sizeof(*items));
		items[at] = item;
	}
	return 0;
}

/* Keys of mapping @p src_id (of @p frag) set in mapping @p dst_id: a mapping
 * value into a mapping value key by key (wake), others replaced or added. */
static int
merge(yaml_document_t *doc, int dst_id, yaml_document_t *frag, int src_id)
{
	yaml_node_t *src = yaml_document_get_node(frag, src_id);

	for (size_t i = 0;
	     i < (size_t)(src->data.mapping.pairs.top - src->data.mapping.pairs.start); i++) {
		yaml_node_pair_t p = src->data.mapping.pairs.start[i];
		const char *key = scalar(yaml_document_get_node(frag, p.key));
		yaml_node_pair_t *have = NULL;
		int old, k, v;

		if (key == NULL)
			return -EINVAL;
		old = map_find(doc, yaml_document_get_node(doc, dst_id), key, &have);
		if (old && yaml_document_get_node(doc, old)->type == YAML_MAPPING_NODE &&
		    yaml_document_get_node(frag, p.value)->type == YAML_MAPPING_NODE) {
			if (merge(doc, old, frag, p.value) < 0)
				return -EINVAL;
			src = yaml_document_get_node(frag, src_id);
			continue;
		}
		v = copy_node(doc, frag, p.value);
		if (!v)
			return -ENOMEM;
		if (old) {
			/* find it again: copy_node may have moved the pairs */
			map_find(doc, yaml_document_get_node(doc, dst_id), key, &have);
			have->value = v;
		} else {
			k = copy_node(doc, frag, p.key);
			if (!k || !yaml_document_append_mapping_pair(doc, dst_id, k, v))
				return -ENOMEM;
		}
		src = yaml_document_get_node(frag, src_id);
	}
	return 0;
}

static int
fail(char *err, size_t err_len, int ret, const char *fmt, const char *arg)
{
	snprintf(err, err_len, fmt, arg);
	return ret;
}

static int
apply_edit(yaml_document_t *doc, const struct sq_config_edit *e, char *err, size_t err_len)
{
	static const char *const lists[] = {
		[SQ_EDIT_RULE_ADD] = "rules",          [SQ_EDIT_RULE_REMOVE] = "rules",
		[SQ_EDIT_RULE_MOVE] = "rules",         [SQ_EDIT_CHAIN_ADD] = "chains",
		[SQ_EDIT_CHAIN_REMOVE] = "chains",     [SQ_EDIT_SERVICE_ADD] = "services",
		[SQ_EDIT_SERVICE_REMOVE] = "services", [SQ_EDIT_SERVICE_SET] = "services",
	};
	yaml_document_t frag;
	yaml_node_t *seq, *root;
	int seq_id, item, ret = 0;
	long at;

	seq = top_list(doc, lists[e->op], &seq_id);
	if (seq == NULL || seq->type != YAML_SEQUENCE_NODE)
		return fail(err, err_len, -EINVAL, "the running config has no %s list",
			    lists[e->op]);
	switch (e->op) {
	case SQ_EDIT_RULE_REMOVE:
	case SQ_EDIT_RULE_MOVE:
		if (e->index < 0 || (size_t)e->index >= seq_len(seq) ||
		    (e->op == SQ_EDIT_RULE_MOVE && (e->to < 0 || (size_t)e->to >= seq_len(seq))))
			return fail(err, err_len, -EINVAL, "no such rule position (%s)",
				    seq_len(seq) == 1 ? "there is 1 rule, 0"
						      : "rules count from 0");
		item = seq->data.sequence.items.start[e->index];
		seq_remove(seq, (size_t)e->index);
		if (e->op == SQ_EDIT_RULE_MOVE)
			ret = seq_insert(doc, seq_id, item, (size_t)e->to);
		return ret;
	case SQ_EDIT_CHAIN_REMOVE:
	case SQ_EDIT_SERVICE_REMOVE:
		at = named_item(doc, seq, e->name);
		if (at < 0) {
			snprintf(err, err_len, "no %s named \"%s\"",
				 e->op == SQ_EDIT_CHAIN_REMOVE ? "chain" : "service", e->name);
			return -ENOENT;
		}
		seq_remove(seq, (size_t)at);
		return 0;
	default: break;
	}
	if (load(e->fragment, &frag) < 0)
		return fail(err, err_len, -EINVAL, "%s: not a YAML mapping", e->fragment);
	root = yaml_document_get_root_node(&frag);
	if (root->type != YAML_MAPPING_NODE) {
		yaml_document_delete(&frag);
		return fail(err, err_len, -EINVAL, "%s: not a YAML mapping", e->fragment);
	}
	if (e->op == SQ_EDIT_SERVICE_SET) {
		at = named_item(doc, seq, e->name);
		if (at < 0)
			ret = fail(err, err_len, -ENOENT, "no service named \"%s\"", e->name);
		else
			ret = merge(doc, seq->data.sequence.items.start[at], &frag, 1);
	} else {
		item = copy_node(doc, &frag, 1);
		seq = yaml_document_get_node(doc, seq_id);
		at = e->op == SQ_EDIT_RULE_ADD && e->index >= 0 ? e->index : (long)seq_len(seq);
		if (!item)
			ret = -ENOMEM;
		else if ((size_t)at > seq_len(seq))
			ret = fail(err, err_len, -EINVAL, "rule position past the end%s", "");
		else
			ret = seq_insert(doc, seq_id, item, (size_t)at);
	}
	yaml_document_delete(&frag);
	return ret;
}

int
sq_config_edit_text(const char *text, const struct sq_config_edit *e, char **out, char *err,
		    size_t err_len)
{
	struct buf b = {0};
	yaml_emitter_t em;
	yaml_document_t doc;
	int ret;

	*out = NULL;
	if (load(text, &doc) < 0)
		return fail(err, err_len, -EINVAL, "the running config does not load%s", "");
	ret = apply_edit(&doc, e, err, err_len);
	if (ret < 0) {
		yaml_document_delete(&doc);
		return ret;
	}
	if (!yaml_emitter_initialize(&em)) {
		yaml_document_delete(&doc);
		return -ENOMEM;
	}
	yaml_emitter_set_output(&em, write_buf, &b);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, 100);
	/* dump deletes the document, on failure too */
	if (!yaml_emitter_open(&em) || !yaml_emitter_dump(&em, &doc) || !yaml_emitter_close(&em) ||
	    b.p == NULL) {
		yaml_emitter_delete(&em);
		free(b.p);
		return fail(err, err_len, -ENOMEM, "cannot write the edited config%s", "");
	}
	yaml_emitter_delete(&em);
	*out = b.p;
	return 0;
}
