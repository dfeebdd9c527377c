/* SPDX-License-Identifier: BSD-3-Clause
 * Direct chains' lanes: see lane.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <rte_ring.h>

#include "lane.h"
#include "mgr.h"

/* NF @p nf of hop @p hop hands to @p next of hop + 1: the ring next takes
 * them from, in the region like its rx ring, of the same size. */
static int
link_hop(struct mgr *mgr, struct mgr_nf *nf, struct mgr_nf *next, uint32_t ring_slots)
{
	char name[RTE_RING_NAMESIZE];
	int ret;

	snprintf(name, sizeof(name), "sq_direct_%u", next->id);
	/* (the previous hop's NF produces, this one consumes: one each) */
	ret = mgr_region_alloc_ring(mgr, name, ring_slots, RING_F_SP_ENQ | RING_F_SC_DEQ,
				    &next->direct_rx);
	if (ret < 0)
		return ret;
	next->direct_slots = ring_slots;
	mgr->nf_rings_bytes += rte_ring_get_memsize(ring_slots);
	next->ctl->direct_rx_ring_off = (uintptr_t)next->direct_rx - (uintptr_t)mgr->region;
	nf->ctl->direct_next_ring_off = next->ctl->direct_rx_ring_off;
	nf->ctl->direct_next_id = next->id;
	nf->lane_next = next->id;
	mgr->lane_bits[nf->id / 64] |= 1ull << (nf->id % 64);
	next->lane_prev = nf->id;
	next->lane_leader = nf->lane_leader;
	return 0;
}

static int
setup_chain(struct mgr *mgr, const struct sq_cfg_chain *ch)
{
	const struct sq_config *cfg = mgr->cfg;
	uint32_t lanes = mgr->services[ch->services[0]].n_nfs;

	for (uint32_t i = 0; i < lanes; i++) {
		struct mgr_nf *leader = &mgr->nfs[mgr->services[ch->services[0]].first_nf + i];
		uint32_t held = leader->max_outstanding;

		leader->lane_leader = leader->id;
		for (uint16_t h = 1; h < ch->n_hops; h++) {
			const struct mgr_service *prev = &mgr->services[ch->services[h - 1]];
			const struct mgr_service *svc = &mgr->services[ch->services[h]];
			struct mgr_nf *next = &mgr->nfs[svc->first_nf + i];
			int ret;

			ret = link_hop(mgr, &mgr->nfs[prev->first_nf + i], next,
				       cfg->services[ch->services[h]].ring_slots);
			if (ret < 0)
				return ret;
			held += next->max_outstanding;
		}
		/* Its packets may be anywhere in the lane: as many as all its
		 * NFs may hold (the limit that keeps an NF from pinning the pool). */
		leader->max_outstanding = held;
	}
	return 0;
}

int
mgr_lane_setup(struct mgr *mgr)
{
	bool any = false;

	for (uint16_t c = 0; c < mgr->cfg->n_chains; c++)
		any = any || mgr->cfg->chains[c].direct;
	if (!any)
		return 0;
	mgr->lane_bits = calloc(sq_tx_ready_words(mgr->region->max_nfs), sizeof(*mgr->lane_bits));
	if (mgr->lane_bits == NULL)
		return -ENOMEM;
	for (uint16_t c = 0; c < mgr->cfg->n_chains; c++) {
		const struct sq_cfg_chain *ch = &mgr->cfg->chains[c];
		int ret;

		if (!ch->direct || ch->n_hops < 2)
			continue;
		ret = setup_chain(mgr, ch);
		if (ret < 0)
			return ret;
		MGR_LOG(NOTICE, "chain %s: direct, %u lanes of %u NFs\n", ch->name,
			mgr->services[ch->services[0]].n_nfs, ch->n_hops);
	}
	return 0;
}

void
mgr_lane_free(struct mgr *mgr)
{
	free(mgr->lane_bits);
	mgr->lane_bits = NULL;
}

uint32_t
mgr_lane_first(const struct mgr *mgr, const struct mgr_nf *nf)
{
	(void)mgr;
	return nf->lane_leader != SQ_NF_NONE ? nf->lane_leader : nf->id;
}

uint32_t
mgr_lane_next(const struct mgr *mgr, uint32_t id)
{
	return mgr->nfs[id].lane_next;
}

enum guard_take
mgr_lane_take(struct mgr *mgr, struct mgr_nf *nf, struct rte_mbuf *pkt, struct mgr_nf **owner)
{
	enum guard_take t;

	/* the leader's, most often; then its own; then those between */
	*owner = &mgr->nfs[nf->lane_leader];
	t = mgr_guard_take(pkt, nf->lane_leader);
	if (t != GUARD_NOT_OURS || nf->lane_leader == nf->id)
		return t;
	for (uint32_t id = nf->id; id != nf->lane_leader; id = mgr->nfs[id].lane_prev) {
		*owner = &mgr->nfs[id];
		t = mgr_guard_take(pkt, id);
		if (t != GUARD_NOT_OURS)
			return t;
	}
	*owner = nf;
	return GUARD_NOT_OURS;
}

/* The direct chain and hop of @p service, if it is in one. */
static const struct sq_cfg_chain *
direct_hop(const struct mgr *mgr, uint16_t service, uint16_t *hop)
{
	for (uint16_t c = 0; c < mgr->cfg->n_chains; c++) {
		const struct sq_cfg_chain *ch = &mgr->cfg->chains[c];

		for (uint16_t h = 0; ch->direct && h < ch->n_hops; h++)
			if (ch->services[h] == service) {
				*hop = h;
				return ch;
			}
	}
	return NULL;
}

static void
hold_nf(struct mgr_nf *nf, int delta)
{
	nf->direct_holds = (uint32_t)((int)nf->direct_holds + delta);
	atomic_store_explicit(&nf->ctl->direct_off, nf->direct_holds > 0, memory_order_release);
}

void
mgr_lane_hold_direct(struct mgr *mgr, int32_t service, int32_t nf_id, bool into, int delta)
{
	const struct sq_cfg_chain *ch;
	const struct mgr_service *svc;
	uint16_t hop;

	if (nf_id >= 0)
		service = mgr->nfs[nf_id].service;
	if (service < 0 || (ch = direct_hop(mgr, (uint16_t)service, &hop)) == NULL)
		return;
	/* what hop receives comes from hop - 1; what it returns goes to hop + 1 */
	if (into ? hop == 0 : hop + 1 == ch->n_hops)
		return;
	svc = &mgr->services[ch->services[into ? hop - 1 : hop]];
	for (uint32_t i = 0; i < svc->n_nfs; i++)
		if (nf_id < 0 || mgr->nfs[nf_id].instance == i)
			hold_nf(&mgr->nfs[svc->first_nf + i], delta);
}
