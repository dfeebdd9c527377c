/* SPDX-License-Identifier: BSD-3-Clause
 * The error reply of a telemetry command, shared by every role that
 * registers one (capture, control, msg, scaler, telemetry): a header of its
 * own so that a role answering a command does not call up into
 * mgr/telemetry.c, which sits above them all.
 */
#ifndef SQUALL_MGR_TEL_REPLY_H
#define SQUALL_MGR_TEL_REPLY_H

#include <rte_telemetry.h>

/* A command that exists but cannot do what was asked replies {"error": MSG}:
 * a negative return would reach the client as null, which reads as "no such
 * command". @return 0. */
static inline int
mgr_tel_error(struct rte_tel_data *d, const char *msg)
{
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "error", msg);
	return 0;
}

#endif /* SQUALL_MGR_TEL_REPLY_H */
