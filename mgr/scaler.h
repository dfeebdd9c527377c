/* SPDX-License-Identifier: BSD-3-Clause
 * Scaler (scaler.c): the instances of a service with a scale: policy follow
 * its load. Main lcore; telemetry reads it through the calls below.
 */
#ifndef SQUALL_MGR_SCALER_H
#define SQUALL_MGR_SCALER_H

#include <stdbool.h>
#include <stdint.h>

struct mgr;
struct rte_tel_data;

int mgr_scaler_init(struct mgr *mgr);
void mgr_scaler_free(struct mgr *mgr);
/* Main lcore, every round: a look at each scaled service when its interval
 * is due, and at the instances it started or reran until they run. */
void mgr_scaler_poll(struct mgr *mgr, uint64_t now_tsc);

/* Telemetry (registered by telemetry.c under its guard and the control
 * lock): /squall/scale, /squall/scale_events, /squall/scale_nfs,SERVICE and
 * /squall/scale_set,SERVICE,N|auto. */
int mgr_scaler_tel_scale(const char *cmd, const char *params, struct rte_tel_data *d);
int mgr_scaler_tel_events(const char *cmd, const char *params, struct rte_tel_data *d);
int mgr_scaler_tel_nfs(const char *cmd, const char *params, struct rte_tel_data *d);
int mgr_scaler_tel_set(const char *cmd, const char *params, struct rte_tel_data *d);

#endif
