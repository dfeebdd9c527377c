/* SPDX-License-Identifier: BSD-3-Clause
 * The parameters of telemetry commands, parsed with no manager: pure
 * functions of the params string, so tests/fuzz/fuzz_telemetry.c feeds them
 * any bytes. mgr/telemetry.c calls them and acts on the result.
 */
#ifndef SQUALL_MGR_TELEMETRY_ARGS_H
#define SQUALL_MGR_TELEMETRY_ARGS_H

#include <stdbool.h>
#include <stdint.h>

/* "/squall/gen_rate,PPS[,PORT]" */
struct tel_gen_rate_args {
	char buf[64];
	const char *port;  /* into buf; NULL: the first generator */
	uint64_t rate_pps; /* 0..1e9, or UINT64_MAX for "max" */
};

/* "/squall/wake,SERVICE,POLICY[,THRESH_PKTS[,TIMEOUT_US]]" */
struct tel_wake_args {
	char buf[128];
	const char *service; /* into buf */
	const char *policy;  /* into buf; a name, checked by the caller */
	bool has_thresh;
	bool has_timeout;
	uint32_t thresh_pkts; /* 1..65536 */
	uint64_t timeout_ns;  /* 1 us..10 s */
};

/** "/squall/nfs[,FIRST]": NULL or "" is 0. @return 0 or -EINVAL. */
int tel_args_nfs(const char *params, uint32_t *first);

/** @return 0 or -EINVAL (no PPS, a bad number, too long). */
int tel_args_gen_rate(const char *params, struct tel_gen_rate_args *a);

/** @return 0 or -EINVAL (no service or policy, a bad number, too long). */
int tel_args_wake(const char *params, struct tel_wake_args *a);

#endif /* SQUALL_MGR_TELEMETRY_ARGS_H */
