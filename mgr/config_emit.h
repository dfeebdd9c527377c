/* SPDX-License-Identifier: BSD-3-Clause
 * The running configuration as YAML (mgr/config_emit.c).
 */
#ifndef SQUALL_MGR_CONFIG_EMIT_H
#define SQUALL_MGR_CONFIG_EMIT_H

#include <stddef.h>

#include "config.h"

/**
 * Write @p cfg as YAML that sq_config_load() reads back to the same values:
 * every key, defaults included, names for references.
 * @param text set to a malloc'ed, NUL-terminated text; the caller frees it.
 * @param len if not NULL, set to the text's length.
 * @return 0, or -ENOMEM.
 */
int sq_config_emit(const struct sq_config *cfg, char **text, size_t *len);

#endif /* SQUALL_MGR_CONFIG_EMIT_H */
