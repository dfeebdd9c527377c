/* SPDX-License-Identifier: BSD-3-Clause
 * Steering: the rx and tx roles both hand packets to NF instances and ports.
 * Packets are staged per destination and sent as one burst per round, so a
 * burst costs one ring operation and one wake check per NF it touches.
 */
#include <errno.h>
#include <stdlib.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "capture.h"
#include "guard.h"
#include "held.h"
#include "isolate.h"
#include "nfring.h"
#include "mgr.h"

#define SQ_DROP_KEY(sym, key, str) #key,
#define SQ_DROP_STR(sym, key, str) str,
const char *const sq_drop_keys[SQ_DROP_MAX] = {SQ_FOREACH_DROP(SQ_DROP_KEY)};
const char *const sq_drop_names[SQ_DROP_MAX] = {SQ_FOREACH_DROP(SQ_DROP_STR)};

/* A port that cannot take a burst now: retry this many times, then drop. */
#define PORT_TX_RETRIES 8

/* The role's flush_nf and drop_held (mgr.h, struct role_ctx): reached from
 * outside this file only through it. */
static void steer_flush_nf(struct mgr *mgr, struct role_ctx *role, uint32_t nf_id);
static void steer_drop_held(struct mgr *mgr, struct role_ctx *role, uint32_t nf_id,
			    enum sq_drop cause);

int
mgr_role_init(struct mgr *mgr, struct role_ctx *role)
{
	/* every NF slot and service a running config may come to use */
	size_t n = mgr->region->max_nfs ? mgr->region->max_nfs : 1;

	role->flush_nf = steer_flush_nf;
	role->drop_held = steer_drop_held;
	role->stages = calloc(n, sizeof(*role->stages));
	role->touched = calloc(n, sizeof(*role->touched));
	role->n_queues = SQ_MAX_SERVICES;
	role->pending = calloc(role->n_queues ? role->n_queues : 1, sizeof(*role->pending));
	if (role->stages == NULL || role->touched == NULL || role->pending == NULL ||
	    mgr_wakeup_queues_init(mgr, role) < 0) {
		mgr_role_free(role);
		return -ENOMEM;
	}
	return 0;
}

void
mgr_role_free(struct role_ctx *role)
{
	for (uint16_t q = 0; role->pending != NULL && q < role->n_queues; q++)
		free(role->pending[q].e);
	free(role->stages);
	free(role->touched);
	free(role->pending);
	role->stages = NULL;
	role->touched = NULL;
	role->pending = NULL;
}

void
mgr_drop(struct role_stats *st, enum sq_drop cause, struct rte_mbuf *pkt)
{
	st->drops[cause]++;
	mgr_guard_clear(pkt);
	rte_pktmbuf_free(pkt);
}

/* A full ring's leftovers: one free call for the lot, as an overloaded NF
 * makes this a per-burst event. */
void
mgr_drop_bulk(struct role_stats *st, enum sq_drop cause, struct rte_mbuf **pkts, unsigned int n)
{
	st->drops[cause] += n;
	for (unsigned int i = 0; i < n; i++)
		mgr_guard_clear(pkts[i]);
	rte_pktmbuf_free_bulk(pkts, n);
}

/* Symmetric RSS (DESIGN §7): both directions of a flow pick one instance;
 * an instance that died is skipped, so only its flows move. */
static struct mgr_nf *
pick_instance(struct mgr *mgr, uint16_t service, uint32_t flow_hash)
{
	const struct mgr_service *svc = &mgr->services[service];
	uint32_t start, i;

	if (svc->n_nfs == 0)
		return NULL;
	/* One instance is the common case: skip the division (tens of cycles). */
	if (svc->n_nfs == 1) {
		struct mgr_nf *nf = &mgr->nfs[svc->first_nf];

		return atomic_load_explicit(&nf->live, memory_order_relaxed) ? nf : NULL;
	}
	start = flow_hash % svc->n_nfs;
	for (i = 0; i < svc->n_nfs; i++) {
		struct mgr_nf *nf = &mgr->nfs[svc->first_nf + (start + i) % svc->n_nfs];

		if (likely(atomic_load_explicit(&nf->live, memory_order_relaxed)))
			return nf;
	}
	return NULL;
}

/* An isolated NF gets copies into single buffers of its private pool: a
 * chained packet (a jumbo frame) is not copied, and dropped under its own
 * cause. @return the packets left, in order. */
static unsigned int
drop_uncopyable(struct role_ctx *role, struct rte_mbuf **pkts, unsigned int n)
{
	unsigned int kept = 0;

	for (unsigned int i = 0; i < n; i++) {
		if (likely(pkts[i]->nb_segs == 1))
			pkts[kept++] = pkts[i];
		else
			mgr_drop(&role->stats, SQ_DROP_ISOLATED_COPY, pkts[i]);
	}
	return kept;
}

/* Onto the NF's rx ring: the packets themselves, or, for an isolated NF,
 * copies in its private region (isolate.h). */
static int
nf_enqueue(struct mgr_nf *nf, struct rte_mbuf **pkts, unsigned int n, bool *moved)
{
	if (nf->iso != NULL)
		return mgr_iso_enqueue(nf->iso, &nf->rx_prod, pkts, n, moved);
	return mgr_nfring_enqueue(nf->rx, nf->rx_mask, &nf->rx_prod, (void **)pkts, n, moved);
}

static void
steer_flush_nf(struct mgr *mgr, struct role_ctx *role, uint32_t nf_id)
{
	struct nf_stage *stage = &role->stages[nf_id];
	struct mgr_nf *nf = &mgr->nfs[nf_id];
	uint64_t out = mgr_nf_outstanding(mgr, nf);
	unsigned int sent;
	bool moved;
	int ret;

	/* An NF that holds max_outstanding_pkts gets no more: it cannot pin
	 * the pool (a stale read of deq_pkts only errs on the safe side). */
	if (unlikely(out + stage->n > nf->max_outstanding)) {
		unsigned int keep = out >= nf->max_outstanding ? 0 : nf->max_outstanding - out;

		mgr_drop_bulk(&role->stats, SQ_DROP_NF_OVERLOADED, stage->pkts + keep,
			      stage->n - keep);
		stage->n = keep;
	}
	if (unlikely(nf->iso != NULL))
		stage->n = (uint16_t)drop_uncopyable(role, stage->pkts, stage->n);
	/* Copy before the enqueue: once in the ring the NF may change them. */
	MGR_CAPTURE_NF(mgr, role, MGR_CAP_NF_IN, nf, stage->pkts, stage->n);
	/* Given before the enqueue: once in the ring the NF may already hold
	 * them; the manager takes back only what it gave, and a crash reclaim
	 * finds what an NF held by the same record (guard.h). */
	mgr_guard_give(stage->pkts, stage->n, nf_id);
	/* The ring's header is in the region: the enqueue works from our
	 * geometry and position only (nfring.h). */
	if (mgr->rx_elsewhere)
		rte_spinlock_lock(&nf->rx_lock);
	ret = nf_enqueue(nf, stage->pkts, stage->n, &moved);
	if (mgr->rx_elsewhere)
		rte_spinlock_unlock(&nf->rx_lock);
	if (unlikely(moved))
		mgr->region_corrupt[MGR_CORRUPT_RING]++;
	if (unlikely(ret < 0)) {
		/* (what it was given before: the owner scan's, once it is gone) */
		mgr_region_ring_broken(mgr, nf);
		mgr_drop_bulk(&role->stats, SQ_DROP_NF_DIED, stage->pkts, stage->n);
		stage->n = 0;
		stage->n_counted = 0;
		return;
	}
	sent = (unsigned int)ret;
	MGR_CAPTURE_TAKEN(mgr, role, sent);
	if (unlikely(sent < stage->n))
		mgr_drop_bulk(&role->stats, SQ_DROP_NF_RING_FULL, stage->pkts + sent,
			      stage->n - sent);
	stage->ring_full_pkts += stage->n - sent;
	stage->n = 0;
	stage->n_counted = 0;
	if (sent == 0)
		return;
	/* Count before activating: the tx role's outstanding check must see it. */
	atomic_store_explicit(&stage->enq_pkts,
			      atomic_load_explicit(&stage->enq_pkts, memory_order_relaxed) + sent,
			      memory_order_release);
	mgr_tx_activate(mgr, nf);
}

static void
steer_drop_held(struct mgr *mgr, struct role_ctx *role, uint32_t nf_id, enum sq_drop cause)
{
	struct nf_stage *stage = &role->stages[nf_id];

	(void)mgr;
	for (unsigned int i = 0; i < stage->n; i++)
		mgr_drop(&role->stats, cause, stage->pkts[i]);
	stage->n = 0;
	stage->n_counted = 0;
}

uint32_t
mgr_steer_held(const struct mgr *mgr, const struct mgr_nf *nf)
{
	return mgr->rx.stages[nf->id].n + mgr->tx.stages[nf->id].n;
}

struct mgr_nf *
mgr_steer_to_nf(struct mgr *mgr, struct role_ctx *role, struct mgr_nf *nf, struct rte_mbuf *pkt)
{
	struct nf_stage *stage = &role->stages[nf->id];

	if (!stage->listed) {
		role->touched[role->n_touched++] = nf->id;
		stage->listed = true;
	}
	if (unlikely(stage->n == SQ_STAGE_MAX))
		steer_flush_nf(mgr, role, nf->id); /* stays on the touched list */
	stage->pkts[stage->n++] = pkt;
	return nf;
}

struct mgr_nf *
mgr_steer_to_service(struct mgr *mgr, struct role_ctx *role, uint16_t service, struct rte_mbuf *pkt)
{
	struct mgr_nf *nf = pick_instance(mgr, service, sq_pkt_meta(pkt)->flow_hash);

	if (unlikely(nf == NULL)) {
		mgr_drop(&role->stats, mgr_no_nf_cause(mgr, service), pkt);
		return NULL;
	}
	return mgr_steer_to_nf(mgr, role, nf, pkt);
}

static void
flush_port(struct mgr *mgr, struct role_ctx *role, uint16_t port_idx)
{
	struct port_stage *stage = &role->ports[port_idx];
	struct mgr_port *port = &mgr->ports[port_idx];
	uint16_t sent = 0;
	uint64_t bytes = 0;

	MGR_CAPTURE_PORT(mgr, role, MGR_CAP_PORT_TX, port_idx, stage->pkts, stage->n);
	for (uint16_t i = 0; i < stage->n; i++)
		bytes += stage->pkts[i]->pkt_len;
	for (int tries = 0; sent < stage->n && tries < PORT_TX_RETRIES; tries++)
		sent += rte_eth_tx_burst(port->port_id, 0, stage->pkts + sent, stage->n - sent);
	MGR_CAPTURE_TAKEN(mgr, role, sent);
	for (uint16_t i = sent; i < stage->n; i++) {
		bytes -= stage->pkts[i]->pkt_len;
		mgr_drop(&role->stats, SQ_DROP_PORT_TX_FULL, stage->pkts[i]);
	}
	port->tx_pkts += sent;
	port->tx_bytes += bytes;
	role->stats.tx_pkts += sent;
	stage->n = 0;
}

void
mgr_steer_to_port(struct mgr *mgr, struct role_ctx *role, uint16_t port, struct rte_mbuf *pkt)
{
	struct port_stage *stage = &role->ports[port];

	if (unlikely(stage->n == SQ_NF_BURST_MAX))
		flush_port(mgr, role, port);
	stage->pkts[stage->n++] = pkt;
}

/* End of a round: each NF given packets gets them now, unless it sleeps
 * below its wake threshold, in which case they wait here (mgr_wakeup_hold). */
void
mgr_steer_flush(struct mgr *mgr, struct role_ctx *role)
{
	uint32_t sent = 0;

	for (uint32_t i = 0; i < role->n_touched; i++) {
		uint32_t id = role->touched[i];

		role->stages[id].listed = false;
		if (mgr_wakeup_hold(mgr, role, id))
			continue;
		steer_flush_nf(mgr, role, id);
		role->touched[sent++] = id;
	}
	role->n_touched = sent;
	if (sent > 0)
		mgr_wakeup_check(mgr, role);
	role->n_touched = 0;
	for (uint16_t p = 0; p < mgr->n_ports; p++)
		if (role->ports[p].n > 0)
			flush_port(mgr, role, p);
}
