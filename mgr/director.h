/* SPDX-License-Identifier: BSD-3-Clause
 * Director: the flow table and the per-service idle pools (director.c).
 */
#ifndef SQUALL_MGR_DIRECTOR_H
#define SQUALL_MGR_DIRECTOR_H

#include <stdbool.h>
#include <stdint.h>

struct mgr;
struct mgr_nf;
struct role_ctx;
struct rte_mbuf;
struct sq_cfg_rule;
struct sq_config;
struct lat_hist;

struct director_stats {
	uint64_t flows_created;
	uint64_t flows_active;
	uint64_t flows_closed;            /* FIN both ways or RST seen */
	uint64_t flows_idle_expired;      /* ended by the idle timeout */
	uint64_t flows_half_open_expired; /* TCP, never ACKed by its SYN side: ended early */
	uint64_t flows_unreplied_expired; /* UDP, no reply and idle: ended early */
	uint64_t flows_refused;           /* new, past flow_unestablished_per_source */
	uint64_t flows_config_ended;      /* a run-time change took their chain or NF away */
	uint64_t flows_ended;             /* entries removed, NFs released */
	uint64_t handoffs;            /* NFs given back at their flow's close (lifo, no linger) */
	uint64_t flows_rekeyed;       /* flows known by a second key (sq_rekeyed: NAT, LB) */
	uint64_t rekeys_refused;      /* the tuple was another flow's, or the table full */
	uint64_t rekeys_lost;         /* the tx -> rx queue was full */
	const struct lat_hist *setup; /* flow setup times, TSC */
};

struct pool_stats {
	bool pooled;
	uint32_t size, started, idle;
	uint64_t assigned, empty;
	uint64_t backlogged;           /* of empty: the NF core's backlog held the flow back */
	uint64_t retired;              /* NFs stopped as the pool shrank below them */
	uint32_t waiting;              /* packets in the fallback queue now */
	uint32_t waiting_max;          /* most of them at once, since the start */
	uint64_t waited, wait_dropped; /* ever queued; dropped: the queue was full */
};

int mgr_director_init(struct mgr *mgr);
void mgr_director_free(struct mgr *mgr);
/* NFs of @p service to start with the manager (the pool's idle target). */
uint32_t mgr_director_initial_nfs(const struct mgr *mgr, uint16_t service);
bool mgr_director_is_pooled(const struct mgr *mgr, uint16_t service);
/* @p nf runs its loop: count it started, and idle if its service is pooled. */
void mgr_director_nf_ready(struct mgr *mgr, struct mgr_nf *nf);
/* rx: steer a packet of a per-flow or round-robin rule. @return its NF or NULL (dropped). */
struct mgr_nf *mgr_director_steer(struct mgr *mgr, struct role_ctx *role,
				  const struct sq_cfg_rule *rule, struct rte_mbuf *pkt);
/* rx lcore, every round: ends, releases, refills (rate-limited inside). */
unsigned int mgr_director_poll(struct mgr *mgr);
void mgr_director_stats(const struct mgr *mgr, struct director_stats *st);
/* Work the next round must do whatever the ports bring: packets queued for
 * an NF, NFs whose clean-up ack it waits for (mgr/idle.h: no sleep then). */
bool mgr_director_busy(const struct mgr *mgr);
/* At shutdown: drop what waits in the fallback queues. */
void mgr_director_drop_waiting(struct mgr *mgr, int cause); /* enum sq_drop */
void mgr_director_pool_stats(const struct mgr *mgr, uint16_t service, struct pool_stats *ps);

/* Run-time changes (mgr/control.c). Control thread, before the switch: a
 * fresh pool for each service @p added[s] in @p next (per-flow or not),
 * taken by the rx lcore at the switch; -ENOMEM and nothing staged. */
int mgr_director_prepare(struct mgr *mgr, const struct sq_config *next, const bool *added);
/* A switch that did not happen: the staged pools go. */
void mgr_director_unprepare(struct mgr *mgr);
/* A per-flow service's n_nfs went down: its idle NFs beyond stop; busy ones
 * when their flow ends, or at once with @p end_flows (the flows end). */
void mgr_director_shrunk(struct mgr *mgr, uint16_t service, bool end_flows);
/* Live flows of a chain slot (any thread; a draining chain goes at 0). */
uint32_t mgr_director_chain_flows(const struct mgr *mgr, uint16_t chain);
/* rx: has @p pkt a live flow in @p rule's chain (a draining rule only
 * carries the flows it had)? */
bool mgr_director_has_flow(const struct mgr *mgr, const struct sq_cfg_rule *rule,
			   const struct rte_mbuf *pkt);

#endif
