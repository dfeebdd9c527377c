/* SPDX-License-Identifier: BSD-3-Clause
 * Single edits of a config's YAML (mgr/config_edit.c).
 */
#ifndef SQUALL_MGR_CONFIG_EDIT_H
#define SQUALL_MGR_CONFIG_EDIT_H

#include <stddef.h>

enum sq_edit_op {
	SQ_EDIT_RULE_ADD,       /* fragment: a rule; index: its position, -1 the end */
	SQ_EDIT_RULE_REMOVE,    /* index */
	SQ_EDIT_RULE_MOVE,      /* index to to */
	SQ_EDIT_CHAIN_ADD,      /* fragment: a chain */
	SQ_EDIT_CHAIN_REMOVE,   /* name */
	SQ_EDIT_SERVICE_ADD,    /* fragment: a service */
	SQ_EDIT_SERVICE_REMOVE, /* name */
	SQ_EDIT_SERVICE_SET,    /* name; fragment: the keys to set (wake merged key by key) */
};

struct sq_config_edit {
	enum sq_edit_op op;
	const char *name;
	const char *fragment; /* a YAML mapping, e.g. {chain: web, out_port: b} */
	long index, to;
};

/**
 * Apply @p e to the config @p text (YAML, as sq_config_emit writes it).
 * @param out set to the edited text (malloc'ed) on success.
 * @param err why not, on failure (no file or line: the caller's command).
 * @return 0, -EINVAL (a bad fragment or position), -ENOENT (no such name),
 *   -ENOMEM.
 */
int sq_config_edit_text(const char *text, const struct sq_config_edit *e, char **out, char *err,
			size_t err_len);

#endif /* SQUALL_MGR_CONFIG_EDIT_H */
