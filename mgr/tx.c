/* SPDX-License-Identifier: BSD-3-Clause
 * tx role: take packets back from every NF's tx ring and carry out their
 * verdicts: the chain's next NF, a port, another service, or a counted drop.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "capture.h"
#include "guard.h"
#include "held.h"
#include "isolate.h"
#include "lane.h"
#include "mgr.h"
#include "nfring.h"
#include "parse.h"

static inline void
leave_chain(struct mgr *mgr, const struct sq_pkt_meta *meta)
{
	struct mgr_chain *chain = &mgr->chains[meta->chain];

	chain->tx_pkts++;
	lat_add(&chain->lat, mgr->tx_now_tsc - meta->rx_tsc);
	if (meta->nf0_tsc > meta->rx_tsc)
		lat_add(&chain->to_nf, meta->nf0_tsc - meta->rx_tsc);
}

/* NEXT at the last hop leaves the chain by the rule's egress port. */
static void
verdict_next(struct mgr *mgr, struct role_ctx *role, struct rte_mbuf *pkt, struct sq_pkt_meta *meta)
{
	const struct sq_cfg_chain *chain = &mgr->cfg->chains[meta->chain];

	/* An NF that sets its packets' hop back would loop them. */
	if (unlikely(meta->nf_visits >= SQ_MAX_VISITS)) {
		mgr_drop(&role->stats, SQ_DROP_HOP_LIMIT, pkt);
		return;
	}
	meta->hop++;
	if (meta->hop < chain->n_hops) {
		uint16_t service = chain->services[meta->hop];
		struct mgr_nf *nf =
			meta->flow_id != 0 ? mgr->flow_nf(mgr, meta->flow_id, meta->hop) : NULL;

		/* A flow's NF of another service: its slot was reused while
		 * this packet was away (a TO detour); the hop's service decides. */
		if (nf != NULL && nf->service == service)
			mgr_steer_to_nf(mgr, role, nf, pkt);
		else
			mgr_steer_to_service(mgr, role, service, pkt);
		return;
	}
	/* Each hop's libsquall counts itself in nf_visits: a mismatch means a
	 * packet skipped or repeated an NF. Tests assert this stays 0. */
	if (unlikely(meta->nf_visits != chain->n_hops))
		mgr->chains[meta->chain].visits_mismatch++;
	leave_chain(mgr, meta);
	mgr_steer_to_port(mgr, role, meta->out_port, pkt);
}

/* An NF can write every byte of the metadata, and the manager indexes its
 * own tables with these fields: a stray write in an NF must cost that
 * packet (a bad_verdict drop), never the manager. Fields as rx set them. */
static bool
meta_in_range(const struct mgr *mgr, const struct sq_pkt_meta *meta)
{
	const struct sq_config *cfg = mgr->cfg;

	return meta->chain < cfg->n_chains && meta->hop < cfg->chains[meta->chain].n_hops &&
	       meta->out_port < mgr->n_ports && meta->flow_id <= cfg->max_flows &&
	       meta->flags >> SQ_META_CHAIN_GEN_SHIFT == cfg->chains[meta->chain].gen;
}

/* Out of range because its chain was removed or changed (a new generation
 * in its slot) while the packet was in an NF, not because an NF wrote it. */
static bool
chain_changed(const struct mgr *mgr, const struct sq_pkt_meta *meta)
{
	const struct sq_config *cfg = mgr->cfg;

	return meta->chain < SQ_MAX_CHAINS &&
	       (meta->chain >= cfg->n_chains || cfg->chains[meta->chain].n_hops == 0 ||
		meta->flags >> SQ_META_CHAIN_GEN_SHIFT != cfg->chains[meta->chain].gen);
}

static void
carry_out(struct mgr *mgr, struct role_ctx *role, const struct sq_cfg_service *svc,
	  struct rte_mbuf *pkt)
{
	struct sq_pkt_meta *meta = sq_pkt_meta(pkt);
	uint16_t arg = meta->verdict & 0xffff;

	if (unlikely(!meta_in_range(mgr, meta))) {
		mgr_drop(&role->stats,
			 chain_changed(mgr, meta) ? SQ_DROP_CONFIG_CHANGED : SQ_DROP_BAD_VERDICT,
			 pkt);
		return;
	}
	if (unlikely(meta->verdict & SQ_VERDICT_F_REKEY)) {
		/* (its flow is known by its new tuple before it goes on) */
		meta->verdict &= ~SQ_VERDICT_F_REKEY;
		arg = meta->verdict & 0xffff;
		if (meta->flow_id != 0)
			mgr->flow_rekey(mgr, pkt);
	}
	/* (a port or service that exists, and that the config lets the
	 * NF's service name: out_ports, to_services) */
	switch (meta->verdict >> 16) {
	case SQ_VERDICT_NEXT: verdict_next(mgr, role, pkt, meta); return;
	case SQ_VERDICT_DROP: mgr_drop(&role->stats, SQ_DROP_NF_VERDICT, pkt); return;
	case SQ_VERDICT_OUT:
		if (unlikely(arg >= mgr->n_ports))
			break;
		if (unlikely(!(svc->out_ports >> arg & 1))) {
			mgr_drop(&role->stats, SQ_DROP_VERDICT_DENIED, pkt);
			return;
		}
		leave_chain(mgr, meta);
		mgr_steer_to_port(mgr, role, arg, pkt);
		return;
	case SQ_VERDICT_TO:
		if (unlikely(arg >= mgr->cfg->n_services))
			break;
		if (unlikely(!(svc->to_services >> arg & 1))) {
			mgr_drop(&role->stats, SQ_DROP_VERDICT_DENIED, pkt);
			return;
		}
		if (unlikely(meta->nf_visits >= SQ_MAX_VISITS)) {
			mgr_drop(&role->stats, SQ_DROP_HOP_LIMIT, pkt);
			return;
		}
		mgr_steer_to_service(mgr, role, arg, pkt);
		return;
	default: break;
	}
	mgr_drop(&role->stats, SQ_DROP_BAD_VERDICT, pkt);
}

int
mgr_tx_init(struct mgr *mgr)
{
	uint32_t n = mgr->region->max_nfs ? mgr->region->max_nfs : 1;

	mgr->active = calloc(n, sizeof(*mgr->active));
	mgr->n_tx_ready_words = sq_tx_ready_words(n);
	mgr->tx_ready_seen = calloc(mgr->n_tx_ready_words, sizeof(*mgr->tx_ready_seen));
	mgr->tx_more = calloc(mgr->n_tx_ready_words, sizeof(*mgr->tx_more));
	/* Each NF is in it at most once (the active flag), so it never fills. */
	mgr->activations = rte_ring_create("sq_activations", rte_align32pow2(n + 1),
					   rte_socket_id(), RING_F_SC_DEQ);
	if (mgr->active == NULL || mgr->activations == NULL || mgr->tx_ready_seen == NULL ||
	    mgr->tx_more == NULL) {
		mgr_tx_free(mgr);
		return -ENOMEM;
	}
	return 0;
}

void
mgr_tx_free(struct mgr *mgr)
{
	free(mgr->active);
	mgr->active = NULL;
	free(mgr->tx_ready_seen);
	mgr->tx_ready_seen = NULL;
	free(mgr->tx_more);
	mgr->tx_more = NULL;
	rte_ring_free(mgr->activations);
	mgr->activations = NULL;
}

bool
mgr_tx_nfs_hold_pkts(const struct mgr *mgr)
{
	return mgr->n_active > 0 || rte_ring_count(mgr->activations) > 0;
}

bool
mgr_tx_isolated_hold_pkts(const struct mgr *mgr)
{
	if (mgr->n_iso == 0)
		return false;
	for (uint32_t i = 0; i < mgr->n_active; i++) {
		uint32_t id = mgr->active[i];

		if (atomic_load_explicit(&mgr->iso_bits[id / 64], memory_order_relaxed) &
		    (1ull << (id % 64)))
			return true;
	}
	return false;
}

/* An NF with nothing outstanding leaves the list. Clear the flag first, then
 * look again: an enqueue that raced with us either shows in the second look,
 * or finds the flag clear and hands the NF over through activations. */
static bool
try_deactivate(struct mgr *mgr, struct mgr_nf *nf)
{
	bool expected = false;

	if (mgr_nf_outstanding(mgr, nf) != 0)
		return false;
	atomic_store(&nf->active, false);
	atomic_thread_fence(memory_order_seq_cst);
	if (mgr_nf_outstanding(mgr, nf) == 0)
		return true;
	/* Busy again: keep it, unless the other role already re-queued it. */
	return !atomic_compare_exchange_strong(&nf->active, &expected, true);
}

/* Isolated NFs ring the doorbells of their private regions (isolate.h).
 * Their tx doorbell matters only while they hold packets, so it is read
 * for NFs on the active list only (take_tx_ready): one line of a private
 * region each, not one of every isolated NF a round. Messages any of them
 * may send: their doorbells are swept a slice a round, rung again in the
 * shared msg-ready bitmap, which msg.c reads every millisecond. */
#define MSG_SWEEP_PER_ROUND 32

static void
sweep_msg_doorbells(struct mgr *mgr)
{
	uint32_t n = mgr->n_nfs;

	for (uint32_t k = 0; k < n && k < MSG_SWEEP_PER_ROUND * 64; k++) {
		uint32_t id = mgr->iso_sweep++ % n;
		struct mgr_iso *iso;

		if ((atomic_load_explicit(&mgr->iso_bits[id / 64], memory_order_relaxed) &
		     (1ull << (id % 64))) == 0) {
			/* (a word with no isolated NF: skip to the next word) */
			continue;
		}
		iso = __atomic_load_n(&mgr->nfs[id].iso, __ATOMIC_ACQUIRE);
		if (iso != NULL && mgr_iso_take_doorbell(iso->msg_ready))
			atomic_fetch_or_explicit(&mgr->msg_ready[id / 64], 1ull << (id % 64),
						 memory_order_seq_cst);
		if (++mgr->iso_swept % MSG_SWEEP_PER_ROUND == 0)
			break;
	}
}

/* An isolated NF on the active list: its private tx doorbell, rung again
 * in this round's copy of the shared bitmap (as if it had rung that). */
static void
take_iso_doorbell(struct mgr *mgr, uint32_t id)
{
	struct mgr_iso *iso = __atomic_load_n(&mgr->nfs[id].iso, __ATOMIC_ACQUIRE);

	if (iso != NULL && mgr_iso_take_doorbell(iso->tx_ready))
		mgr->tx_ready_seen[id / 64] |= 1ull << (id % 64);
}

/* A copy of the tx-ready bitmap for this round: a few words, read once. */
static void
read_tx_ready(struct mgr *mgr)
{
	_Atomic uint64_t *ready = mgr->tx_ready; /* not the region's offset: NF-writable */

	if (unlikely(mgr->n_iso > 0))
		sweep_msg_doorbells(mgr);

	for (size_t w = 0; w < mgr->n_tx_ready_words; w++)
		mgr->tx_ready_seen[w] = atomic_load_explicit(&ready[w], memory_order_relaxed);
}

/* Had the NF put packets on its tx ring, or did our last drain leave some?
 * Then drain it; its bit, if set, is cleared before the drain (see
 * return_pkts in lib/nf.c for the NF's side). Only NFs on the active list
 * clear theirs: a bit set by an NF whose activation the tx role has not
 * taken yet stays for the round that has it. */
static bool
take_tx_ready(struct mgr *mgr, uint32_t id)
{
	uint64_t bit = 1ull << (id % 64);

	if (unlikely(atomic_load_explicit(&mgr->iso_bits[id / 64], memory_order_relaxed) & bit))
		take_iso_doorbell(mgr, id);
	if ((mgr->tx_ready_seen[id / 64] & bit) == 0)
		return (mgr->tx_more[id / 64] & bit) != 0;
	atomic_fetch_and_explicit(&mgr->tx_ready[id / 64], ~bit, memory_order_seq_cst);
	return true;
}

/* A drain takes one burst a round: a full one means more may wait. The mark
 * is ours, not the region's bit: setting that would pull its line (which
 * the NF writes after every burst) back and forth once more a round. */
static void
mark_more(struct mgr *mgr, uint32_t id, bool more)
{
	uint64_t bit = 1ull << (id % 64);

	if (more)
		mgr->tx_more[id / 64] |= bit;
	else
		mgr->tx_more[id / 64] &= ~bit;
}

static void
take_activations(struct mgr *mgr)
{
	void *ids[64];
	unsigned int n;

	while ((n = rte_ring_sc_dequeue_burst(mgr->activations, ids, RTE_DIM(ids), NULL)) > 0)
		for (unsigned int i = 0; i < n; i++)
			mgr->active[mgr->n_active++] = (uint32_t)(uintptr_t)ids[i];
}

/* What an NF handed back, checked before any use (guard.h): descriptors
 * that are no mbuf it held are ignored and counted; mbufs with impossible
 * lengths are dropped. Compacts @p pkts to the good ones, in order.
 * @return how many are good; *taken: the manager's again (good and dropped). */
/* A packet of a direct chain's lane is its leader's (lane.h): an NF of a
 * lane may hand back what was given to the leader, or to itself. @return
 * the take, and in *owner which of the two it was. */
static inline enum guard_take
take_one(struct mgr *mgr, struct mgr_nf *nf, struct rte_mbuf *pkt, struct mgr_nf **owner)
{
	if (likely(nf->lane_leader == SQ_NF_NONE)) {
		*owner = nf;
		return mgr_guard_take(pkt, nf->id);
	}
	return mgr_lane_take(mgr, nf, pkt, owner);
}

static unsigned int
take_back(struct mgr *mgr, struct mgr_nf *nf, struct rte_mbuf **pkts, unsigned int n,
	  unsigned int *taken_out)
{
	unsigned int good = 0, taken = 0;

	for (unsigned int i = 0; i < n; i++) {
		rte_prefetch0(pkts[i]); /* the header lines take_back restores */
		rte_prefetch0((char *)pkts[i] + RTE_CACHE_LINE_SIZE);
	}
	for (unsigned int i = 0; i < n; i++) {
		struct mgr_nf *owner;

		switch (take_one(mgr, nf, pkts[i], &owner)) {
		case GUARD_OK: pkts[good++] = pkts[i]; break;
		case GUARD_BAD_LENGTHS: mgr_drop(&mgr->tx.stats, SQ_DROP_BAD_MBUF, pkts[i]); break;
		case GUARD_NOT_OURS:
			mgr->region_corrupt[MGR_CORRUPT_DESCRIPTOR]++;
			nf->bad_descs++;
			continue;
		}
		/* (the leader's: it is outstanding until a NF of the lane returns it) */
		if (owner != nf)
			owner->deq_pkts++;
		else
			taken++;
	}
	*taken_out = taken;
	return good;
}

/* What an untrusted NF made of its packets, parsed again, as rx parsed
 * them: the next hop's NF trusts packet_type and the header lengths, which
 * the isolated NF does not give back. The flow hash stays the packet's
 * (rx's: the flow it is steered as). A packet now malformed is dropped
 * under the parse's cause. Compacts @p pkts. @return those left. */
static unsigned int
reparse(struct mgr *mgr, struct rte_mbuf **pkts, unsigned int n)
{
	unsigned int left = 0;

	for (unsigned int i = 0; i < n; i++) {
		uint32_t rss = pkts[i]->hash.rss;
		enum sq_drop cause = mgr_parse_pkt(pkts[i]);

		pkts[i]->hash.rss = rss;
		if (unlikely(cause != SQ_DROP_MAX))
			mgr_drop(&mgr->tx.stats, cause, pkts[i]);
		else
			pkts[left++] = pkts[i];
	}
	return left;
}

/* An isolated NF's burst: the originals, its results copied in
 * (isolate.h). Those with lengths that made no sense are dropped (their
 * data is the original's), forged descriptors counted. @return descriptors
 * dequeued, or -1; *got: the good originals in pkts, taken back. */
static int
drain_isolated(struct mgr *mgr, struct mgr_nf *nf, struct rte_mbuf **pkts, unsigned int *got,
	       unsigned int *taken)
{
	struct rte_mbuf *bad[SQ_NF_BURST_MAX];
	uint64_t forged = nf->iso->forged;
	unsigned int n_bad;
	int ret;

	/* (the free list is the enqueue's too, on the rx lcore if rx runs there) */
	if (mgr->rx_elsewhere)
		rte_spinlock_lock(&nf->rx_lock);
	ret = mgr_iso_dequeue(nf->iso, &nf->tx_cons, pkts, got, bad, &n_bad, SQ_NF_BURST_MAX);
	if (mgr->rx_elsewhere)
		rte_spinlock_unlock(&nf->rx_lock);
	if (ret <= 0)
		return ret;
	if (unlikely(nf->iso->forged != forged)) {
		mgr->region_corrupt[MGR_CORRUPT_DESCRIPTOR] += nf->iso->forged - forged;
		nf->bad_descs += nf->iso->forged - forged;
	}
	for (unsigned int i = 0; i < n_bad; i++) {
		mgr_guard_take(bad[i], nf->id);
		mgr_drop(&mgr->tx.stats, SQ_DROP_BAD_MBUF, bad[i]);
	}
	*got = take_back(mgr, nf, pkts, *got, taken);
	*taken += n_bad;
	*got = reparse(mgr, pkts, *got);
	return ret;
}

unsigned int
mgr_tx_drain_nf(struct mgr *mgr, struct mgr_nf *nf)
{
	struct rte_mbuf *pkts[SQ_NF_BURST_MAX];
	const struct sq_cfg_service *svc;
	unsigned int n, got, taken;
	int ret;

	/* The ring's header is in the region: the dequeue works from our
	 * geometry and position only; a producer position more than a ring's
	 * worth ahead of ours makes the ring unusable (nfring.h). */
	if (unlikely(nf->ring_broken))
		return 0;
	if (nf->iso != NULL)
		ret = drain_isolated(mgr, nf, pkts, &got, &taken);
	else
		ret = mgr_nfring_dequeue(nf->tx, nf->tx_mask, &nf->tx_cons, (void **)pkts,
					 SQ_NF_BURST_MAX);
	if (unlikely(ret < 0)) {
		mgr_region_ring_broken(mgr, nf);
		return 0;
	}
	n = (unsigned int)ret;
	if (n == 0)
		return 0;
	mgr->tx_now_tsc = rte_rdtsc();
	if (nf->iso == NULL)
		got = take_back(mgr, nf, pkts, n, &taken);
	nf->deq_pkts += taken;
	/* The NF just wrote each verdict on its core: fetch all the lines at once
	 * rather than miss on them one by one (the miss was 65% of tx's time). */
	for (unsigned int i = 0; i < got; i++)
		rte_prefetch0(sq_pkt_meta(pkts[i]));
	MGR_CAPTURE_NF(mgr, &mgr->tx, MGR_CAP_NF_OUT, nf, pkts, got);
	svc = &mgr->cfg->services[nf->service];
	for (unsigned int i = 0; i < got; i++)
		carry_out(mgr, &mgr->tx, svc, pkts[i]);
	return n;
}

/* An NF of a lane is on the list while the lane holds what it was given:
 * the hops after it hand those back on their own rings (lane.h). */
static unsigned int
drain_lane(struct mgr *mgr, const struct mgr_nf *from)
{
	unsigned int moved = 0;

	for (uint32_t id = from->lane_next; id != SQ_NF_NONE; id = mgr->nfs[id].lane_next) {
		unsigned int n;

		if (!take_tx_ready(mgr, id))
			continue;
		n = mgr_tx_drain_nf(mgr, &mgr->nfs[id]);
		mark_more(mgr, id, n == SQ_NF_BURST_MAX);
		moved += n;
	}
	return moved;
}

static void
reset_latency(struct mgr *mgr)
{
	for (uint16_t c = 0; c < mgr->cfg->n_chains; c++) {
		memset(&mgr->chains[c].lat, 0, sizeof(mgr->chains[c].lat));
		memset(&mgr->chains[c].to_nf, 0, sizeof(mgr->chains[c].to_nf));
	}
	atomic_store(&mgr->lat_reset, false);
}

unsigned int
mgr_tx_poll(struct mgr *mgr)
{
	unsigned int moved = 0, n;

	if (unlikely(atomic_load_explicit(&mgr->lat_reset, memory_order_relaxed)))
		reset_latency(mgr);
	take_activations(mgr);
	read_tx_ready(mgr);
	for (uint32_t i = 0; i < mgr->n_active;) {
		struct mgr_nf *nf;

		/* Most NFs that hold packets have not run since the last round
		 * (they wait for the NF core): skip them without touching their
		 * rings or their mgr_nf, which are other cache lines each. */
		uint32_t id = mgr->active[i];
		bool ready = take_tx_ready(mgr, id);
		bool leads = mgr->lane_bits != NULL &&
			     (mgr->lane_bits[id / 64] & (1ull << (id % 64))) != 0;

		if (!ready && !leads) {
			i++;
			continue;
		}
		nf = &mgr->nfs[id];
		if (ready) {
			n = mgr_tx_drain_nf(mgr, nf);
			moved += n;
			mark_more(mgr, id, n == SQ_NF_BURST_MAX);
		}
		/* (a lane's packets come back from its other NFs: lane.h) */
		if (leads)
			moved += drain_lane(mgr, nf);
		if (try_deactivate(mgr, nf))
			mgr->active[i] = mgr->active[--mgr->n_active];
		else
			i++;
	}
	mgr_steer_flush(mgr, &mgr->tx);
	mgr_wakeup_poll(mgr, &mgr->tx);
	mgr_wakeup_tune(mgr);
	atomic_fetch_add_explicit(&mgr->tx_rounds, 1, memory_order_release);
	if (moved > 0)
		mgr->last_pkt_tsc = rte_rdtsc();
	return moved;
}
