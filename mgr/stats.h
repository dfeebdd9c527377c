/* SPDX-License-Identifier: BSD-3-Clause
 * A sink for the stats walker: telemetry and the exit JSON implement it.
 */
#ifndef SQUALL_MGR_STATS_H
#define SQUALL_MGR_STATS_H

#include <stdint.h>

#include "mgr.h"

struct stats_sink {
	void (*begin)(struct stats_sink *s, const char *name); /* open a nested object */
	void (*end)(struct stats_sink *s);
	void (*u64)(struct stats_sink *s, const char *name, uint64_t v);
	void (*str)(struct stats_sink *s, const char *name, const char *v);
};

void mgr_stats_visit_totals(const struct mgr *mgr, struct stats_sink *s);
void mgr_stats_visit_ports(const struct mgr *mgr, struct stats_sink *s);
void mgr_stats_visit_nfs(const struct mgr *mgr, struct stats_sink *s, uint32_t first, uint32_t max);
void mgr_stats_visit_chains(const struct mgr *mgr, struct stats_sink *s);
void mgr_stats_visit_flows(const struct mgr *mgr, struct stats_sink *s);
void mgr_stats_visit_pools(const struct mgr *mgr, struct stats_sink *s);
/* Services with cgroup limits: the limits, the group and the kernel's counts. */
void mgr_stats_visit_cgroups(const struct mgr *mgr, struct stats_sink *s);

/* observe.c: /squall/latency and /squall/rules, for the exporter; telemetry.c
 * registers them under its guard and the control lock. */
struct rte_tel_data;
void mgr_observe_init(const struct mgr *mgr);
int mgr_observe_latency(const char *cmd, const char *params, struct rte_tel_data *d);
int mgr_observe_rules(const char *cmd, const char *params, struct rte_tel_data *d);

#endif
