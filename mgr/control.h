/* SPDX-License-Identifier: BSD-3-Clause
 * control role: run-time changes of the configuration (mgr/control.c).
 */
#ifndef SQUALL_MGR_CONTROL_H
#define SQUALL_MGR_CONTROL_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct mgr;

/** Register the control commands (/squall/apply, /squall/config); before EAL
 * init, as the other telemetry commands. @p nf_path is searched for NF
 * programs as at start. @return 0 or -EINVAL. */
int mgr_control_init(struct mgr *mgr, const char *nf_path);

struct sq_config;
/** Free what applies allocated, at exit, after the roles stopped; the
 * manager's config is @p first (the one it started with) again. */
void mgr_control_free(struct mgr *mgr, struct sq_config *first);

/**
 * Load @p path, check it against the running config and, unless
 * MGR_APPLY_CHECK in @p flags, switch the roles to it. Nothing changes on an error.
 * @param err "file:line: field: why" on failure.
 * @param n_changes set to the number of changes found (0: same config).
 * @return 0; -EINVAL a bad config or a change not possible while running;
 *   -ENOENT the file cannot be read; -ETIMEDOUT the roles did not take it;
 *   -ENOMEM.
 */
int mgr_control_apply(struct mgr *mgr, const char *path, unsigned int flags, char *err,
		      size_t err_len, unsigned int *n_changes);
/* mgr_control_apply flags */
#define MGR_APPLY_CHECK     1u /* check only: nothing changes */
#define MGR_APPLY_END_FLOWS 2u /* per-flow flows of what changes end now, not drain */

/** Main lcore, at its control tick: start an NF the control path asks for.
 * NFs are started from the main lcore only: an NF's PR_SET_PDEATHSIG fires
 * when the thread that started it ends, and a telemetry thread ends with
 * its client's connection. */
void mgr_control_poll(struct mgr *mgr);

/** rx role, between rounds: take a config the control path left. */
void mgr_control_take(struct mgr *mgr);

/** Held by a change; readers of the config outside the roles take it too. */
void mgr_control_lock(void);
void mgr_control_unlock(void);
/* The main lcore's: it must never wait for the control thread. */
bool mgr_control_trylock(void);
/* A reader's that must answer: waits at most @p ms. @return held. */
bool mgr_control_lock_within(uint32_t ms);

#endif /* SQUALL_MGR_CONTROL_H */
