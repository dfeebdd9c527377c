/* SPDX-License-Identifier: BSD-3-Clause
 * rx role: poll every port, parse L2-L4 once, match the rules, and steer each
 * packet to the first NF of its chain.
 */
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_prefetch.h>
#include <rte_tcp.h>

#include "control.h"
#include "capture.h"
#include "director.h"
#include "mgr.h"
#include "parse.h"

#define PREFETCH_AHEAD 4

static bool
is_fin_or_rst(const struct rte_mbuf *pkt)
{
	const struct rte_tcp_hdr *tcp;

	if ((pkt->packet_type & RTE_PTYPE_L4_MASK) != RTE_PTYPE_L4_TCP ||
	    pkt->data_len < pkt->l2_len + pkt->l3_len + sizeof(*tcp))
		return false;
	tcp = rte_pktmbuf_mtod_offset(pkt, const struct rte_tcp_hdr *, pkt->l2_len + pkt->l3_len);
	return (tcp->tcp_flags & (RTE_TCP_FIN_FLAG | RTE_TCP_RST_FLAG)) != 0;
}

/* The first rule that matches. A draining rule (its chain removed or
 * changed while it carried per-flow flows: mgr/control.c) takes only the
 * packets of those flows; the rest go on to the rules after it. */
static const struct sq_cfg_rule *
match_rule(const struct mgr *mgr, const struct sq_config *cfg, uint16_t port_idx,
	   const struct rte_mbuf *pkt)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(pkt, const struct rte_ether_hdr *);

	for (uint16_t i = 0; i < cfg->n_rules; i++) {
		const struct sq_cfg_rule *r = &cfg->rules[i];

		if (r->in_port >= 0 && r->in_port != port_idx)
			continue;
		if (r->has_dst_mac && !rte_is_same_ether_addr(&r->dst_mac, &eth->dst_addr))
			continue;
		if (unlikely(r->draining) && !mgr_director_has_flow(mgr, r, pkt))
			continue;
		return r;
	}
	return NULL;
}

static void
rx_one(struct mgr *mgr, uint16_t port_idx, struct rte_mbuf *pkt, uint64_t now_tsc)
{
	struct role_ctx *role = &mgr->rx;
	const struct sq_cfg_rule *rule;
	struct sq_pkt_meta *meta;
	struct mgr_nf *nf;
	enum sq_drop cause;

	cause = mgr_parse_pkt(pkt);
	if (unlikely(cause != SQ_DROP_MAX)) {
		mgr_drop(&role->stats, cause, pkt);
		return;
	}
	rule = match_rule(mgr, mgr->cfg, port_idx, pkt);
	if (unlikely(rule == NULL)) {
		mgr_drop(&role->stats, SQ_DROP_NO_RULE, pkt);
		return;
	}
	meta = sq_pkt_meta(pkt);
	*meta = (struct sq_pkt_meta){
		.chain = rule->chain,
		.in_port = port_idx,
		.out_port = rule->out_port,
		.flow_hash = pkt->hash.rss,
		.rx_tsc = now_tsc,
		.flags = (uint32_t)mgr->cfg->chains[rule->chain].gen << SQ_META_CHAIN_GEN_SHIFT,
	};
	mgr->chains[rule->chain].rx_pkts++;
	/* spray: the burst's number stands in for the flow hash, so every hop
	 * of the chain sends the burst's packets to one instance, and the next
	 * burst to the next (seed 000 Fig 9's round robin, which reorders TCP). */
	if (rule->assign == SQ_ASSIGN_SPRAY)
		meta->flow_hash = mgr->rx_bursts;
	/* (an rss rule of a chain with a scaled hop pins its flows: director) */
	if ((rule->assign == SQ_ASSIGN_RSS && !mgr->cfg->chains[rule->chain].pinned) ||
	    rule->assign == SQ_ASSIGN_SPRAY)
		nf = mgr_steer_to_service(mgr, role, mgr->cfg->chains[rule->chain].services[0],
					  pkt);
	else
		nf = mgr_director_steer(mgr, role, rule, pkt);
	/* The end of a connection wakes its NF at once (seed 000 §4). */
	if (nf != NULL && unlikely(is_fin_or_rst(pkt)))
		role->stages[nf->id].urgent = true;
}

void
mgr_rx_inject(struct mgr *mgr, uint16_t port_idx, struct rte_mbuf **pkts, uint16_t n)
{
	struct mgr_port *port = &mgr->ports[port_idx];
	uint64_t now_tsc = rte_rdtsc(), bytes = 0;

	MGR_CAPTURE_PORT(mgr, &mgr->rx, MGR_CAP_PORT_RX, port_idx, pkts, n);
	for (uint16_t i = 0; i < n && i < PREFETCH_AHEAD; i++) {
		rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));
		rte_prefetch0(sq_pkt_meta(pkts[i]));
	}
	for (uint16_t i = 0; i < n; i++) {
		if (i + PREFETCH_AHEAD < n) {
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + PREFETCH_AHEAD], void *));
			rte_prefetch0(sq_pkt_meta(pkts[i + PREFETCH_AHEAD]));
		}
		bytes += pkts[i]->pkt_len;
		rx_one(mgr, port_idx, pkts[i], now_tsc);
	}
	mgr->rx_bursts++;
	port->rx_pkts += n;
	port->rx_bytes += bytes;
	mgr->rx.stats.rx_pkts += n;
	mgr->last_pkt_tsc = now_tsc;
}

/* rx_backpressure (issue 17; NFVnice's backpressure to the port): the
 * services whose instances take a port's packets first, from the rules.
 * Per-flow pools are not looked at (a new flow takes an idle NF, whose
 * ring is empty), so a port with one is never held. */
static void
find_hops(struct mgr *mgr, uint16_t port_idx)
{
	const struct sq_config *cfg = mgr->cfg;
	struct mgr_port *port = &mgr->ports[port_idx];

	port->hops_cfg = cfg;
	port->n_hops = 0;
	port->hops_unknown = false;
	for (uint16_t i = 0; i < cfg->n_rules; i++) {
		const struct sq_cfg_rule *r = &cfg->rules[i];
		uint16_t svc = cfg->chains[r->chain].services[0];
		bool known = false;

		if (r->in_port >= 0 && r->in_port != port_idx)
			continue;
		if (mgr_director_is_pooled(mgr, svc) || port->n_hops == MGR_PORT_HOPS_MAX) {
			port->hops_unknown = true;
			return;
		}
		for (uint8_t h = 0; h < port->n_hops; h++)
			known |= port->hops[h] == svc;
		if (!known)
			port->hops[port->n_hops++] = svc;
	}
}

/* The fewest free slots among the rings of the instances the port feeds
 * first, counting what this round already staged for them. An isolated
 * NF's ring holds copies of its own and is not looked at. */
static uint32_t
hops_room(struct mgr *mgr, const struct mgr_port *port, uint32_t room)
{
	for (uint8_t h = 0; h < port->n_hops && room > 0; h++) {
		const struct mgr_service *svc = &mgr->services[port->hops[h]];

		for (uint32_t i = 0; i < svc->n_nfs; i++) {
			const struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];
			uint32_t used;

			if (nf->iso != NULL ||
			    !atomic_load_explicit(&nf->live, memory_order_relaxed))
				continue;
			used = nf->rx_prod - __atomic_load_n(&nf->rx->cons.tail, __ATOMIC_ACQUIRE);
			/* (a position that makes no sense is the enqueue's to
			 * find and handle: not a reason to hold the port) */
			if (used > nf->rx_mask)
				continue;
			used += mgr->rx.stages[nf->id].n;
			room = RTE_MIN(room, used >= nf->rx_mask ? 0 : nf->rx_mask - used);
		}
	}
	return room;
}

/* How many packets rx may take from the port this round: under
 * rx_backpressure no more than the fullest first hop has room for, so none
 * is dropped there (with several instances, as if all went to that one),
 * 0 holding the port; else no limit (UINT16_MAX). */
static uint16_t
port_room(struct mgr *mgr, uint16_t port_idx)
{
	struct mgr_port *port = &mgr->ports[port_idx];
	uint16_t room = UINT16_MAX;

	/* (kept current while off too: a config freed and another made at its
	 * address would otherwise pass for the one looked at) */
	if (unlikely(port->hops_cfg != mgr->cfg))
		find_hops(mgr, port_idx);
	if (!mgr->cfg->rx_backpressure || port->hops_unknown)
		return room;
	room = (uint16_t)hops_room(mgr, port, room);
	if (room == 0)
		port->rx_held++;
	return room;
}

static unsigned int
rx_port(struct mgr *mgr, uint16_t port_idx, uint16_t room)
{
	struct rte_mbuf *pkts[256];
	uint16_t n;

	n = rte_eth_rx_burst(mgr->ports[port_idx].port_id, 0, pkts,
			     RTE_MIN(room, (uint16_t)mgr->cfg->rx_burst));
	if (n > 0)
		mgr_rx_inject(mgr, port_idx, pkts, n);
	return n;
}

unsigned int
mgr_rx_poll(struct mgr *mgr)
{
	unsigned int moved = 0;
	uint16_t room[SQ_MAX_PORTS];

	/* A new config is taken between two rounds: every packet of a round is
	 * steered by one rule set. */
	if (unlikely(atomic_load_explicit(&mgr->cfg_next, memory_order_relaxed) != NULL))
		mgr_control_take(mgr);
	for (uint16_t p = 0; p < mgr->n_ports; p++)
		room[p] = port_room(mgr, p);
	if (mgr->n_gens > 0)
		moved += mgr_gen_poll(mgr, room, mgr_rx_inject);
	for (uint16_t p = 0; p < mgr->n_ports; p++)
		if (room[p] > 0)
			moved += rx_port(mgr, p, room[p]);
	mgr_steer_flush(mgr, &mgr->rx);
	mgr_wakeup_poll(mgr, &mgr->rx);
	mgr_director_poll(mgr);
	atomic_fetch_add_explicit(&mgr->rx_rounds, 1, memory_order_release);
	return moved;
}
