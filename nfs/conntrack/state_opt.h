/* SPDX-License-Identifier: BSD-3-Clause
 * Options the stateful NFs (conntrack, nat, lb) share: --table-size and
 * --zone-by-port PORT=ZONE, parsed before the NF attaches and resolved
 * against the manager's port names after.
 */
#ifndef SQUALL_NFS_CONNTRACK_STATE_OPT_H
#define SQUALL_NFS_CONNTRACK_STATE_OPT_H

#include <stdio.h>
#include <string.h>

#include <squall/squall.h>

#include "../nf_opt.h"

#define STATE_OPT_PORTS 16 /* the region's port_names[] */

struct state_opt_zones {
	char port[STATE_OPT_PORTS][SQ_NAME_LEN];
	uint16_t zone[STATE_OPT_PORTS];
	unsigned int n;
};

/* --table-size N: a power of 2 from 4 to 2^26. @return 0 or NF_EXIT_USAGE. */
static inline int
state_opt_table_size(const char *prog, const char *arg, uint64_t *slots)
{
	if (nf_opt_u64(prog, "table-size", arg, 4, UINT64_C(1) << 26, slots) < 0)
		return NF_EXIT_USAGE;
	if ((*slots & (*slots - 1)) != 0) {
		fprintf(stderr, "%s: --table-size: not a power of 2: %s\n", prog, arg);
		return NF_EXIT_USAGE;
	}
	return 0;
}

/* --zone-by-port PORT=ZONE, ZONE 1-65535. @return 0 or NF_EXIT_USAGE. */
static inline int
state_opt_zone_add(const char *prog, struct state_opt_zones *z, const char *arg)
{
	const char *eq = strchr(arg, '=');
	uint64_t zone;

	if (eq == NULL || eq == arg || (size_t)(eq - arg) >= SQ_NAME_LEN ||
	    z->n >= STATE_OPT_PORTS) {
		fprintf(stderr, "%s: --zone-by-port: expected PORT=ZONE, got \"%s\"\n", prog, arg);
		return NF_EXIT_USAGE;
	}
	if (nf_opt_u64(prog, "zone-by-port", eq + 1, 1, UINT16_MAX, &zone) < 0)
		return NF_EXIT_USAGE;
	memcpy(z->port[z->n], arg, (size_t)(eq - arg));
	z->port[z->n][eq - arg] = '\0';
	z->zone[z->n++] = (uint16_t)zone;
	return 0;
}

/* Each --zone-by-port's PORT, a name of the manager's ports or an index,
 * into @p port_zone (0: no zone). @return 0 or NF_EXIT_USAGE. */
static inline int
state_opt_zones_resolve(const char *prog, const struct state_opt_zones *z,
			const struct sq_region_hdr *r, uint16_t port_zone[STATE_OPT_PORTS])
{
	unsigned int i;
	uint64_t idx;

	for (i = 0; i < z->n; i++) {
		for (idx = 0; idx < r->n_ports; idx++)
			if (strcmp(r->port_names[idx], z->port[i]) == 0)
				break;
		if (idx == r->n_ports &&
		    nf_opt_u64(prog, "zone-by-port", z->port[i], 0, r->n_ports - 1, &idx) < 0)
			return NF_EXIT_USAGE;
		if (idx < STATE_OPT_PORTS)
			port_zone[idx] = z->zone[i];
	}
	return 0;
}

#endif /* SQUALL_NFS_CONNTRACK_STATE_OPT_H */
