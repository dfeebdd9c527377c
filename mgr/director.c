/* SPDX-License-Identifier: BSD-3-Clause
 * Director (DESIGN §6, seed 000 §3.2, §4): NFs per flow.
 *
 * A rule with `assign: per-flow` gives each new flow its own NF for every hop
 * of its chain, taken from the service's FIFO idle pool; `round-robin` gives
 * new flows the service's instances in turn. Both keep the flow in a table
 * (rte_hash on the symmetric 5-tuple and the chain, so both directions meet
 * one entry), written only by the rx lcore; tx follows a packet's flow by its
 * index in the packet's metadata, with no lookup.
 *
 * A TCP flow ends when both sides sent FIN, or at a RST, after a short
 * linger for retransmissions; anything else after an idle timeout. Then,
 * once no packet of it is left in its NFs, the entry goes, each per-flow NF
 * runs its state cleaner (libsquall, asked through flow_gen) and returns to
 * its pool. A TCP packet that is no SYN and belongs to no flow is a stray
 * (a retransmission after the end): dropped and counted, never handed to the
 * next flow's NF.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>

#include <arpa/inet.h>

#include <rte_cycles.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_net.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "admit.h"
#include "director.h"
#include "held.h"
#include "mgr.h"

/* The idle sweep covers the whole table about twice a second: idle timeouts
 * are seconds, and each entry looked at is a cache miss. */
#define SWEEPS_PER_S       2u
/* An NF holds at most this many flows at once through handoffs (hand_off):
 * more than two lets a hot NF take a backlog of waiting flows one after
 * another with no wake; a stuck NF holds no more than this. */
#define HANDOFF_MAX        4
/* Ends are handled this often: a pool must cover activations x this. */
#define DIRECTOR_PERIOD_US 500u

/* Either family: an IPv4 address as IPv4-mapped IPv6 (::ffff:a.b.c.d), so
 * that one table and one compare serve both. 48 bytes: a length rte_hash
 * compares with vector instructions; the padding is zeroed. */
struct flow_key {
	uint8_t ip_lo[16], ip_hi[16];
	uint16_t port_lo, port_hi; /* the ports of ip_lo and ip_hi */
	uint16_t chain;
	uint8_t proto;
	uint8_t pad[9];
};
static_assert(sizeof(struct flow_key) == 48, "flow_key: a length rte_hash compares fast");

enum flow_state { FLOW_FREE = 0, FLOW_OPEN, FLOW_LINGER, FLOW_DRAIN };

struct flow {
	struct flow_key key;
	uint8_t state;
	uint8_t fins; /* bit 0: FIN from ip_lo's side, bit 1: from ip_hi's */
	uint8_t tcp;
	uint8_t assign; /* enum sq_assign */
	/* The side of the SYN (of the first datagram), and whether the flow is
	 * established (mgr/admit.h): TCP's handshake done, UDP replied to;
	 * until then it is half-open, and counted against its source prefix
	 * (unestab, in admit_bucket). */
	uint8_t syn_from_lo;
	uint8_t established;
	uint8_t unestab;
	uint16_t admit_bucket;
	struct admit_tcp hs;
	uint16_t chain_gen; /* its chain slot's generation: the slot reused, the flow is gone */
	/* Its first SYN: the half-open timer runs from there (a resent SYN
	 * does not restart it, or a spoofer's would hold the NF for ever). */
	uint64_t syn_tsc;
	uint32_t nf[SQ_MAX_HOPS];
	uint16_t n_hops;
	uint64_t pkts, bytes;
	uint64_t first_tsc, last_tsc;
	uint64_t end_tsc; /* linger until, or when draining began */
	uint64_t drain_tx_round;
	uint32_t nf_priority;
	/* Its first NF went back to the pool at the close (handoff): done with
	 * this flow once the manager took back that many of its packets. */
	bool handed_off;
	/* A shared flow's drain (shared_flow_is_quiet): the hop it waits on,
	 * whether that hop's mark is set, and the flow's packets then. */
	uint8_t drain_hop;
	bool drain_marked;
	uint64_t drain_pkts;
	uint64_t handoff_deq; /* per-flow: see hand_off; shared: the drain's mark */
	/* The key an NF rekeyed it to (sq_rekeyed: a NAT's translated tuple),
	 * as its position in the alias table + 1, 0 = none; and whether the
	 * sides' order differs between the two keys. */
	uint32_t alias;
	bool alias_flip;
};

/* tx -> rx: a per-flow packet left its NF with a new tuple (sq_rekeyed).
 * first_tsc tells a reused flow slot from the flow the packet was of. */
struct rekey {
	struct flow_key key;
	uint64_t first_tsc;
	uint32_t flow;
	bool from_lo; /* the packet's side in key */
};

/* Rekeys queued between the tx role and the director: a burst of new
 * connections' first packets, each translated. A full queue loses the
 * rekey (counted), never the packet. */
#define REKEY_QUEUE 1024

/* The flows an NF was handed off from (hand_off) that may not have ended
 * yet, oldest first; each known by its slot and its first_tsc (a slot is
 * reused once its flow ends). */
struct handoffs {
	uint32_t flow[HANDOFF_MAX];
	uint64_t first_tsc[HANDOFF_MAX];
	uint8_t head, count;
};

/* New flows' packets waiting for an idle NF (pool_fallback: queue), in
 * arrival order, each with the rule that steered it. */
struct waitq {
	struct rte_mbuf **pkts;
	uint16_t *rules;
	uint32_t head, count, cap;
	uint32_t high; /* most packets that ever waited at once */
	uint64_t queued, dropped;
};

/* A service's idle NFs, oldest first; taken from the front (fifo) or the
 * back (lifo), as the service's pool_order says. */
struct pool {
	uint32_t *ids;
	uint32_t head, count, cap; /* cap: the service's reserved ids (max_instances) */
	uint8_t *slot;             /* per instance: enum pool_slot */
	uint32_t started;          /* instances [0, started) were spawned at some point */
	uint32_t spawn_backoff_ms; /* after a failed start: doubles, 0 after a good one */
	uint64_t spawn_retry_tsc;  /* no start before this */
	bool pooled;               /* a per-flow rule uses this service */
	bool lifo;
	uint64_t assigned;   /* flows given an NF of this pool */
	uint64_t empty;      /* new flows that found the pool empty */
	uint64_t backlogged; /* of those: held back by the NF core's backlog */
	uint64_t retired;    /* NFs stopped since the pool shrank below them */
	bool end_beyond;     /* shrunk with end_flows: flows on the NFs beyond end now */
	bool trim;           /* shrunk: retire the idle NFs beyond */
	struct waitq wait;
	/* A scaled service's instances that take new flows (not blocked, live
	 * when listed), rebuilt when the scaler's scale_gen moves: the rx lcore
	 * is its only reader and writer. */
	uint32_t *active;
	uint32_t n_active;
	uint32_t active_gen;
};

/* A pooled instance: never started, started (running, or spawning), or
 * told to stop for good (the pool shrank) and free again once reaped. */
enum pool_slot { SLOT_UNUSED = 0, SLOT_STARTED, SLOT_RETIRED };

struct director {
	struct rte_hash *table;
	struct flow *flows; /* indexed by the hash's key position */
	struct pool pools[SQ_MAX_SERVICES];
	uint32_t *rr_next;  /* per service: round-robin cursor */
	uint32_t *cleaning; /* NF ids asked to clean up, waiting for their ack */
	uint32_t n_cleaning;
	struct handoffs *handoffs; /* per NF */
	uint32_t *spawning;        /* NF ids started to refill a pool, not running yet */
	uint32_t n_spawning;
	/* Flows that closed, in the order they did: with one linger for all,
	 * also the order they end in, so ends cost O(ends), not a sweep. */
	uint32_t *closing;
	uint32_t closing_head, closing_count, closing_cap;
	/* Closed flows past their linger whose NFs still had work: retried
	 * apart, so one slow NF does not hold back the ends queued behind it. */
	uint32_t *draining;
	uint32_t n_draining;
	struct lat_hist setup; /* TSC from a flow's first packet in the director to its NF */
	uint32_t scan_pos;
	uint32_t n_waiting; /* packets in all the fallback queues */
	bool redoing_wait;  /* drain_waiting is steering a packet that waited */
	uint64_t next_poll_tsc;
	uint64_t last_sweep_tsc; /* the idle sweep's last pass (expire_flows) */
	uint64_t linger_tsc, idle_tsc, half_open_tsc, period_tsc;
	struct director_stats st;
	struct admit admit;
	/* Second keys of flows (sq_rekeyed), data: the flow's position; the rx
	 * lcore's alone. rekeys: tx -> rx, struct rekey. */
	struct rte_hash *aliases;
	uint32_t *alias_flow; /* per alias position: its flow's */
	struct rte_ring *rekeys;
	uint32_t n_aliases;
	_Atomic uint64_t rekeys_lost; /* tx: the queue was full */
	/* Live flows per chain slot: a draining chain (mgr/control.c) goes
	 * once it has none. The rx lcore writes; the control thread reads. */
	_Atomic uint32_t chain_flows[SQ_MAX_CHAINS];
	/* Pools for services that become per-flow with the next config, made
	 * by the control thread (mgr_director_prepare), taken at the switch. */
	struct pool *staged[SQ_MAX_SERVICES];
	bool any_end_beyond; /* some pool's end_beyond */
	/* NFs woken and not yet seen running (from mgr->woken_q), unordered,
	 * and how many per core group: an upper bound of the NFs' shared count
	 * that an NF cannot raise (backlog_full). */
	uint32_t *woken;
	uint32_t n_woken;
	bool *woken_listed; /* per NF */
	uint32_t woken_pending[SQ_CORE_GROUPS];
};

/* ---- pools ---- */

static void
pool_push(struct pool *p, uint32_t id)
{
	p->ids[(p->head + p->count) % p->cap] = id;
	p->count++;
}

/* An NF whose flow ended goes back to its pool, unless the pool shrank
 * below it while it served the flow (mgr/control.c): then it stops for
 * good, and its slot is free again once the main lcore reaped it. */
static bool
beyond(const struct mgr *mgr, const struct mgr_nf *nf)
{
	return nf->instance >= __atomic_load_n(&mgr->services[nf->service].n_nfs, __ATOMIC_ACQUIRE);
}

static void
retire_slot(struct mgr *mgr, struct pool *p, struct mgr_nf *nf)
{
	p->slot[nf->instance] = SLOT_RETIRED;
	p->retired++;
	mgr_nfs_retire(mgr, nf);
}

static void
pool_return(struct mgr *mgr, struct pool *p, struct mgr_nf *nf)
{
	if (likely(!beyond(mgr, nf)))
		pool_push(p, nf->id);
	else
		retire_slot(mgr, p, nf);
}

/* The oldest (fifo) or newest (lifo) idle NF that is still alive; a dead
 * one just leaves the pool. */
static bool
pool_pop(struct mgr *mgr, struct pool *p, uint32_t *id)
{
	while (p->count > 0) {
		if (p->lifo) {
			*id = p->ids[(p->head + p->count - 1) % p->cap];
		} else {
			*id = p->ids[p->head];
			p->head = (p->head + 1) % p->cap;
		}
		p->count--;
		if (!atomic_load_explicit(&mgr->nfs[*id].live, memory_order_relaxed))
			continue;
		if (likely(!beyond(mgr, &mgr->nfs[*id])))
			return true;
		retire_slot(mgr, p, &mgr->nfs[*id]); /* the pool shrank below it */
	}
	return false;
}

/* A pool's arrays, sized for every id the service has reserved (it may
 * grow to max_instances while running). */
static int
pool_alloc(struct pool *p, const struct sq_cfg_service *cs, uint32_t cap, bool pooled)
{
	memset(p, 0, sizeof(*p));
	p->cap = cap;
	p->pooled = pooled;
	p->lifo = cs->pool_order == SQ_POOL_LIFO;
	p->ids = calloc(cap ? cap : 1, sizeof(*p->ids));
	p->slot = calloc(cap ? cap : 1, sizeof(*p->slot));
	p->active = calloc(cap ? cap : 1, sizeof(*p->active));
	p->active_gen = UINT32_MAX; /* built at the first flow */
	if (p->ids == NULL || p->slot == NULL || p->active == NULL)
		return -ENOMEM;
	if (pooled && cs->pool_fallback == SQ_FALLBACK_QUEUE) {
		p->wait.cap = cs->pool_queue_pkts;
		p->wait.pkts = calloc(p->wait.cap, sizeof(*p->wait.pkts));
		p->wait.rules = calloc(p->wait.cap, sizeof(*p->wait.rules));
		if (p->wait.pkts == NULL || p->wait.rules == NULL)
			return -ENOMEM;
	}
	return 0;
}

static void
pool_free(struct pool *p)
{
	free(p->ids);
	free(p->slot);
	free(p->active);
	free(p->wait.pkts);
	free(p->wait.rules);
	memset(p, 0, sizeof(*p));
}

static void publish_pooled(struct mgr *mgr, uint16_t service);

static int
pools_init(struct mgr *mgr, struct director *d)
{
	const struct sq_config *cfg = mgr->cfg;

	for (uint16_t s = 0; s < cfg->n_services; s++) {
		const struct mgr_service *svc = &mgr->services[s];
		bool pooled = sq_config_service_pooled(cfg, s);
		int ret = pool_alloc(&d->pools[s], &cfg->services[s], svc->cap_nfs, pooled);

		if (ret < 0)
			return ret;
		publish_pooled(mgr, s);
		/* Per-flow NFs clean up at their flow's close by themselves. */
		for (uint32_t i = 0; i < svc->cap_nfs; i++)
			mgr->nfs[svc->first_nf + i].ctl->flow_track = pooled;
	}
	return 0;
}

bool
mgr_director_is_pooled(const struct mgr *mgr, uint16_t service)
{
	return mgr->dir != NULL && mgr->dir->pools[service].pooled;
}

/* The pool of @p service changed: say in its mgr_service whether it is one,
 * for the roles below that must not call up into this one (nfs.c, which
 * leaves a dead pooled NF to us). */
static void
publish_pooled(struct mgr *mgr, uint16_t service)
{
	mgr->services[service].pooled = mgr_director_is_pooled(mgr, service);
}

uint32_t
mgr_director_initial_nfs(const struct mgr *mgr, uint16_t service)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[service];

	if (!mgr_director_is_pooled(mgr, service))
		return cs->instances;
	return cs->pool_idle > 0 ? cs->pool_idle : 1;
}

void
mgr_director_nf_ready(struct mgr *mgr, struct mgr_nf *nf)
{
	struct pool *p;

	if (mgr->dir == NULL)
		return;
	p = &mgr->dir->pools[nf->service];
	p->started = RTE_MAX(p->started, (uint32_t)nf->instance + 1);
	if (p->pooled) {
		p->slot[nf->instance] = SLOT_STARTED;
		pool_return(mgr, p, nf); /* (the pool may have shrunk while it started) */
	}
}

/* ---- the table ---- */

/* Second keys are few (a NAT's or a load balancer's flows) and the rx
 * lcore's alone: no concurrency flags. */
static struct rte_hash *
aliases_create(uint32_t max_flows)
{
	struct rte_hash_parameters hp = {
		.name = "sq_flow_aliases",
		.entries = max_flows,
		.key_len = sizeof(struct flow_key),
		.hash_func = rte_hash_crc,
		.socket_id = (int)rte_socket_id(),
	};

	return rte_hash_create(&hp);
}

static struct mgr_nf *tx_flow_nf(struct mgr *mgr, uint32_t flow_id, uint16_t hop);
static void tx_flow_rekey(struct mgr *mgr, struct rte_mbuf *pkt);

int
mgr_director_init(struct mgr *mgr)
{
	struct rte_hash_parameters hp = {
		.name = "sq_flows",
		.entries = mgr->cfg->max_flows,
		.key_len = sizeof(struct flow_key),
		.hash_func = rte_hash_crc,
		.socket_id = (int)rte_socket_id(),
		/* Readers never block; the rx lcore is the only writer. */
		.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF,
	};
	uint64_t hz = rte_get_tsc_hz();
	struct director *d;
	int ret;

	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return -ENOMEM;
	mgr->dir = d;
	mgr->flow_nf = tx_flow_nf;
	mgr->flow_rekey = tx_flow_rekey;
	d->table = rte_hash_create(&hp);
	d->aliases = aliases_create(mgr->cfg->max_flows);
	d->alias_flow = calloc(mgr->cfg->max_flows, sizeof(*d->alias_flow));
	d->rekeys = rte_ring_create_elem("sq_rekeys", sizeof(struct rekey), REKEY_QUEUE,
					 (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	d->flows = rte_zmalloc("sq_flows", sizeof(*d->flows) * mgr->cfg->max_flows, 0);
	d->rr_next = calloc(SQ_MAX_SERVICES, sizeof(*d->rr_next));
	d->cleaning = calloc(mgr->region->max_nfs, sizeof(*d->cleaning));
	d->handoffs = calloc(mgr->region->max_nfs, sizeof(*d->handoffs));
	d->spawning = calloc(mgr->region->max_nfs, sizeof(*d->spawning));
	d->woken = calloc(mgr->region->max_nfs, sizeof(*d->woken));
	d->woken_listed = calloc(mgr->region->max_nfs, sizeof(*d->woken_listed));
	/* (a wake is listed before the next round's look: room for each NF
	 * woken twice over is more than it needs) */
	mgr->woken_q = rte_ring_create("sq_woken", rte_align32pow2(2 * mgr->region->max_nfs + 1),
				       (int)rte_socket_id(), RING_F_SC_DEQ);
	if (d->table == NULL || d->aliases == NULL || d->alias_flow == NULL || d->rekeys == NULL ||
	    d->flows == NULL || d->rr_next == NULL || d->cleaning == NULL || d->handoffs == NULL ||
	    d->spawning == NULL || d->woken == NULL || d->woken_listed == NULL ||
	    mgr->woken_q == NULL)
		return -ENOMEM;
	ret = pools_init(mgr, d);
	if (ret < 0)
		return ret;
	d->linger_tsc = hz / 1000 * mgr->cfg->flow_linger_ms;
	d->idle_tsc = hz / 1000 * mgr->cfg->flow_idle_timeout_ms;
	d->half_open_tsc = hz / 1000 * mgr->cfg->flow_half_open_timeout_ms;
	d->admit.cap = mgr->cfg->flow_unestablished_per_source;
	d->admit.count = calloc(ADMIT_BUCKETS, sizeof(*d->admit.count));
	if (d->admit.count == NULL)
		return -ENOMEM;
	d->period_tsc = hz / 1000000 * DIRECTOR_PERIOD_US;
	d->closing_cap = mgr->cfg->max_flows;
	d->closing = calloc(d->closing_cap, sizeof(*d->closing));
	d->draining = calloc(d->closing_cap, sizeof(*d->draining));
	if (d->closing == NULL || d->draining == NULL)
		return -ENOMEM;
	return 0;
}

void
mgr_director_free(struct mgr *mgr)
{
	struct director *d = mgr->dir;

	if (d == NULL)
		return;
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++) {
		pool_free(&d->pools[s]);
		mgr->services[s].pooled = false;
		if (d->staged[s] != NULL)
			pool_free(d->staged[s]);
		free(d->staged[s]);
	}
	free(d->admit.count);
	rte_hash_free(d->table);
	rte_hash_free(d->aliases);
	free(d->alias_flow);
	rte_ring_free(d->rekeys);
	rte_free(d->flows);
	free(d->rr_next);
	free(d->cleaning);
	free(d->handoffs);
	free(d->spawning);
	free(d->closing);
	free(d->draining);
	free(d->woken);
	free(d->woken_listed);
	rte_ring_free(mgr->woken_q);
	mgr->woken_q = NULL;
	free(d);
	mgr->dir = NULL;
}

/* An IPv4 address (network byte order) as IPv4-mapped IPv6. */
static void
v4_mapped(uint32_t be, uint8_t out[16])
{
	static const uint8_t prefix[12] = {[10] = 0xff, [11] = 0xff};

	memcpy(out, prefix, sizeof(prefix));
	memcpy(out + 12, &be, 4);
}

/* The flow table key from a 5-tuple in network byte order. */
static void
make_key(const uint8_t src[16], const uint8_t dst[16], uint16_t sport, uint16_t dport,
	 uint8_t proto, uint16_t chain, struct flow_key *k, bool *from_lo)
{
	int c = memcmp(src, dst, 16);

	*from_lo = c < 0 || (c == 0 && sport <= dport);
	memset(k, 0, sizeof(*k));
	memcpy(k->ip_lo, *from_lo ? src : dst, 16);
	memcpy(k->ip_hi, *from_lo ? dst : src, 16);
	k->port_lo = *from_lo ? sport : dport;
	k->port_hi = *from_lo ? dport : sport;
	k->chain = chain;
	k->proto = proto;
}

/* "a:p-b:p/proto" for the debug log, either family. */
static const char *
key_str(const struct flow_key *k, char *buf, size_t len)
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
	int af = memcmp(k->ip_lo, mapped, 12) == 0 ? AF_INET : AF_INET6;

	inet_ntop(af, af == AF_INET ? k->ip_lo + 12 : k->ip_lo, a, sizeof(a));
	inet_ntop(af, af == AF_INET ? k->ip_hi + 12 : k->ip_hi, b, sizeof(b));
	snprintf(buf, len, "%s:%u-%s:%u/%u", a, rte_be_to_cpu_16(k->port_lo), b,
		 rte_be_to_cpu_16(k->port_hi), k->proto);
	return buf;
}

/* The protocol after an IPv6 packet's extension headers (the parse found
 * them readable: mgr_parse_pkt), or -1. */
static int
ipv6_final_proto(const struct rte_mbuf *pkt)
{
	const struct rte_ipv6_hdr *ip6 =
		rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv6_hdr *, pkt->l2_len);
	uint32_t off = pkt->l2_len + sizeof(*ip6);
	int frag = 0;

	if ((pkt->packet_type & RTE_PTYPE_L3_MASK) == RTE_PTYPE_L3_IPV6)
		return ip6->proto;
	return rte_net_skip_ip6_ext(ip6->proto, pkt, &off, &frag);
}

/* The symmetric key: both directions of a connection give the same one.
 * TCP and UDP over IPv4 or IPv6 (after its extension headers), with the
 * ports in the first segment. */
static bool
flow_key_of(const struct rte_mbuf *pkt, uint16_t chain, struct flow_key *k, uint8_t *tcp_flags,
	    bool *from_lo)
{
	uint32_t l4 = pkt->packet_type & RTE_PTYPE_L4_MASK;
	uint8_t src[16], dst[16];
	const uint16_t *ports;

	if ((l4 != RTE_PTYPE_L4_TCP && l4 != RTE_PTYPE_L4_UDP) ||
	    pkt->data_len < pkt->l2_len + pkt->l3_len + sizeof(struct rte_tcp_hdr) -
				    (l4 == RTE_PTYPE_L4_UDP ? 12 : 0))
		return false;
	if (RTE_ETH_IS_IPV4_HDR(pkt->packet_type)) {
		const struct rte_ipv4_hdr *ip =
			rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv4_hdr *, pkt->l2_len);

		v4_mapped(ip->src_addr, src);
		v4_mapped(ip->dst_addr, dst);
	} else if (RTE_ETH_IS_IPV6_HDR(pkt->packet_type)) {
		const struct rte_ipv6_hdr *ip6 =
			rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv6_hdr *, pkt->l2_len);

		memcpy(src, ip6->src_addr, 16);
		memcpy(dst, ip6->dst_addr, 16);
	} else {
		return false;
	}
	ports = rte_pktmbuf_mtod_offset(pkt, const uint16_t *, pkt->l2_len + pkt->l3_len);
	make_key(src, dst, ports[0], ports[1], l4 == RTE_PTYPE_L4_TCP ? IPPROTO_TCP : IPPROTO_UDP,
		 chain, k, from_lo);
	*tcp_flags = 0;
	if (l4 == RTE_PTYPE_L4_TCP)
		*tcp_flags = rte_pktmbuf_mtod_offset(pkt, const struct rte_tcp_hdr *,
						     pkt->l2_len + pkt->l3_len)
				     ->tcp_flags;
	return true;
}

/* ---- admission (admit.h) ---- */

/* A TCP segment's sequence and acknowledgement numbers and payload bytes,
 * from the headers rx parsed. */
static bool
tcp_segment(const struct rte_mbuf *pkt, uint32_t *seq, uint32_t *ack, uint32_t *len)
{
	const struct rte_tcp_hdr *th;
	int32_t payload;

	if (pkt->data_len < pkt->l2_len + pkt->l3_len + sizeof(*th))
		return false;
	th = rte_pktmbuf_mtod_offset(pkt, const struct rte_tcp_hdr *, pkt->l2_len + pkt->l3_len);
	if (RTE_ETH_IS_IPV4_HDR(pkt->packet_type))
		payload = rte_be_to_cpu_16(rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv4_hdr *,
								   pkt->l2_len)
						   ->total_length) -
			  (int32_t)pkt->l3_len;
	else
		payload = rte_be_to_cpu_16(rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv6_hdr *,
								   pkt->l2_len)
						   ->payload_len) +
			  40 - (int32_t)pkt->l3_len;
	payload -= (th->data_off >> 4) * 4;
	*len = payload > 0 ? (uint32_t)payload : 0;
	*seq = rte_be_to_cpu_32(th->sent_seq);
	*ack = rte_be_to_cpu_32(th->recv_ack);
	return true;
}

/* The flow no longer counts against its source prefix. */
static void
admit_done(struct director *d, struct flow *f)
{
	if (f->unestab) {
		f->unestab = 0;
		admit_release(&d->admit, f->admit_bucket);
	}
}

/* A packet of a flow not yet established (admit.h): a UDP reply, or the
 * handshake's segments. */
static void
handshake(struct director *d, struct flow *f, const struct rte_mbuf *pkt, uint8_t flags,
	  bool from_lo)
{
	uint32_t seq, ack, len;

	if (!f->tcp) {
		if (from_lo != f->syn_from_lo) {
			f->established = 1;
			admit_done(d, f);
		}
		return;
	}
	if (!tcp_segment(pkt, &seq, &ack, &len))
		return;
	if (from_lo != f->syn_from_lo) {
		admit_tcp_responder(&f->hs, flags, seq, len);
	} else if (admit_tcp_initiator_acks(&f->hs, flags, ack)) {
		f->established = 1;
		admit_done(d, f);
	}
}

/* ---- second keys (sq_rekeyed) ---- */

static bool
same_end(const uint8_t a[16], uint16_t pa, const uint8_t b[16], uint16_t pb)
{
	return pa == pb && memcmp(a, b, 16) == 0;
}

/* Whether the sides' order differs between a flow's key and its second:
 * told by the end a NAT left as it was (the server for SNAT, the client
 * for DNAT); with both ends changed, the packet is taken to be from the
 * side that opened the flow. */
static bool
alias_flips(const struct flow *f, const struct rekey *r)
{
	const struct flow_key *o = &f->key, *a = &r->key;

	if (same_end(o->ip_lo, o->port_lo, a->ip_lo, a->port_lo) ||
	    same_end(o->ip_hi, o->port_hi, a->ip_hi, a->port_hi))
		return false;
	if (same_end(o->ip_lo, o->port_lo, a->ip_hi, a->port_hi) ||
	    same_end(o->ip_hi, o->port_hi, a->ip_lo, a->port_lo))
		return true;
	return r->from_lo != f->syn_from_lo;
}

/* A flow's second key. Not one that is already a flow's, first or second:
 * an NF cannot take another flow's packets by rekeying to its tuple. */
static void
add_alias(struct director *d, const struct rekey *r)
{
	struct flow *f = &d->flows[r->flow];
	int pos;

	if ((f->state != FLOW_OPEN && f->state != FLOW_LINGER) || f->first_tsc != r->first_tsc ||
	    f->alias != 0 || memcmp(&r->key, &f->key, sizeof(r->key)) == 0)
		return; /* ended, keyed already (a SYN sent again), or no change */
	if (rte_hash_lookup(d->table, &r->key) >= 0 || rte_hash_lookup(d->aliases, &r->key) >= 0 ||
	    (pos = rte_hash_add_key(d->aliases, &r->key)) < 0) {
		d->st.rekeys_refused++;
		return;
	}
	d->alias_flow[pos] = r->flow;
	f->alias = (uint32_t)pos + 1;
	f->alias_flip = alias_flips(f, r);
	d->n_aliases++;
	d->st.flows_rekeyed++;
}

static void
take_rekeys(struct director *d)
{
	struct rekey r;

	while (rte_ring_sc_dequeue_elem(d->rekeys, &r, sizeof(r)) == 0)
		add_alias(d, &r);
}

static void
drop_alias(struct director *d, struct flow *f)
{
	struct flow_key k;
	void *kp;

	if (rte_hash_get_key_with_position(d->aliases, (int32_t)f->alias - 1, &kp) == 0) {
		memcpy(&k, kp, sizeof(k));
		rte_hash_del_key(d->aliases, &k);
	}
	f->alias = 0;
	d->n_aliases--;
}

/* The flow of @p k, by its own key or its second, and @p from_lo made the
 * packet's side in the flow's own key. Rekeys queued before the packet
 * came are taken first: a reply never outruns its flow's second key. A
 * TCP SYN (@p syn) opens a connection of its own: it never matches a second
 * key, or an NF that rekeyed a flow to a tuple a client will use next
 * (guessing its next source port) would be handed that connection. */
static int
lookup_flow(struct director *d, const struct flow_key *k, uint32_t hash, bool syn, bool *from_lo)
{
	int pos = rte_hash_lookup_with_hash(d->table, k, hash);

	if (pos >= 0 || syn)
		return pos >= 0 ? pos : -ENOENT;
	if (!rte_ring_empty(d->rekeys))
		take_rekeys(d);
	if (d->n_aliases == 0 || (pos = rte_hash_lookup(d->aliases, k)) < 0)
		return -ENOENT;
	pos = (int)d->alias_flow[pos];
	*from_lo ^= d->flows[pos].alias_flip;
	return pos;
}

/* tx (mgr->flow_rekey): a per-flow packet left its NF rekeyed (sq_rekeyed):
 * its flow is to be known by the tuple it carries now too. */
static void
tx_flow_rekey(struct mgr *mgr, struct rte_mbuf *pkt)
{
	struct director *d = mgr->dir;
	const struct sq_pkt_meta *meta = sq_pkt_meta(pkt);
	const struct flow *f = &d->flows[meta->flow_id - 1];
	struct rekey r;
	uint8_t flags;

	/* (read on the tx lcore as tx_flow_nf does: the director
	 * checks again that it is the same flow, still open) */
	if (f->state == FLOW_FREE || f->assign != SQ_ASSIGN_PER_FLOW ||
	    !flow_key_of(pkt, meta->chain, &r.key, &flags, &r.from_lo))
		return;
	r.first_tsc = f->first_tsc;
	r.flow = meta->flow_id - 1;
	if (rte_ring_sp_enqueue_elem(d->rekeys, &r, sizeof(r)) != 0)
		atomic_fetch_add_explicit(&d->rekeys_lost, 1, memory_order_relaxed);
}

/* pool_backlog_max: while that many NFs of the service's core were woken and
 * wait to run, a new flow does not get an idle NF. Without it, a burst that
 * outruns the NF core puts every pooled NF in the run queue; each then runs
 * once per round of them all, with cold caches, slower than the arrivals, so
 * the backlog never drains (measured: 1,500 NFs in flight at 90k flows/s,
 * where 200 cycling ones carry 130k). The held-back flow takes the pool's
 * fallback: dropped as pool_empty, or queued until the backlog drains. */
static void take_woken(struct mgr *mgr, struct director *d);

/* The count is the NFs' own (each lowers it when it runs: exact at once),
 * bounded by the manager's (NFs it woke and has not yet seen run, updated
 * every period): a count an NF rewrote in the region holds back at most
 * what the manager knows to be waiting. */
static bool
backlog_full(struct mgr *mgr, uint16_t service)
{
	uint32_t max = mgr->cfg->services[service].pool_backlog_max;
	const struct mgr_nf *nf = &mgr->nfs[mgr->services[service].first_nf];
	int32_t shared;

	if (max == 0)
		return false;
	take_woken(mgr, mgr->dir);
	shared = atomic_load_explicit(&mgr->region->woken[nf->core_group].n, memory_order_relaxed);
	return RTE_MIN((uint32_t)RTE_MAX(shared, 0), mgr->dir->woken_pending[nf->core_group]) >=
	       max;
}

/* NFs the wakeup role woke since the last look: listed once each. */
static void
take_woken(struct mgr *mgr, struct director *d)
{
	void *ids[64];
	unsigned int n;

	while ((n = rte_ring_sc_dequeue_burst(mgr->woken_q, ids, RTE_DIM(ids), NULL)) > 0) {
		for (unsigned int i = 0; i < n; i++) {
			uint32_t id = (uint32_t)(uintptr_t)ids[i];

			if (id >= mgr->n_nfs || d->woken_listed[id])
				continue;
			d->woken_listed[id] = true;
			d->woken[d->n_woken++] = id;
			d->woken_pending[mgr->nfs[id].core_group]++;
		}
	}
}

/* Every period: the listed NFs that have run since (or died) leave the
 * list. An NF that never leaves WAKING keeps only itself counted. */
static void
sweep_woken(struct mgr *mgr, struct director *d)
{
	take_woken(mgr, d);
	for (uint32_t i = 0; i < d->n_woken;) {
		const struct mgr_nf *nf = &mgr->nfs[d->woken[i]];

		if (atomic_load_explicit(&nf->ctl->state, memory_order_relaxed) == SQ_NF_WAKING &&
		    atomic_load_explicit(&nf->live, memory_order_relaxed)) {
			i++;
			continue;
		}
		d->woken_listed[d->woken[i]] = false;
		d->woken_pending[nf->core_group]--;
		d->woken[i] = d->woken[--d->n_woken];
	}
}

/* The first live instance of @service from @from on (started ones only, in
 * turn): round-robin and the rss fallback must not hand a flow to an NF that
 * died, whose ring nobody empties any more. UINT32_MAX if none is live. */
static uint32_t
live_instance(const struct mgr *mgr, uint16_t service, uint32_t from)
{
	const struct mgr_service *svc = &mgr->services[service];
	uint32_t n = RTE_MAX(mgr->dir->pools[service].started, 1u);

	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = svc->first_nf + (from + i) % n;

		if (atomic_load_explicit(&mgr->nfs[id].live, memory_order_relaxed))
			return id;
	}
	return UINT32_MAX;
}

/* A scaled service's instances that take new flows, as the scaler last set
 * them (mgr/scaler.c: blocked ones are left out). */
static void
rebuild_active(const struct mgr *mgr, struct pool *p, uint16_t service, uint32_t gen)
{
	const struct mgr_service *svc = &mgr->services[service];
	uint32_t n = RTE_MIN(__atomic_load_n(&svc->n_nfs, __ATOMIC_ACQUIRE), p->cap);

	p->n_active = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

		if (!atomic_load_explicit(&nf->blocked, memory_order_relaxed))
			p->active[p->n_active++] = nf->id;
	}
	p->active_gen = gen;
}

/* The instance of a scaled service a new rss flow is pinned to: its
 * symmetric hash over the instances that take new flows, so both
 * directions of a connection meet one instance. Which instance a hash
 * gives changes with the set; the flow keeps the one it got (DESIGN §7:
 * only new flows see a scale-out or a scale-in). UINT32_MAX if none. */
static uint32_t
active_instance(const struct mgr *mgr, struct pool *p, uint16_t service, uint32_t hash)
{
	uint32_t gen =
		atomic_load_explicit(&mgr->services[service].scale_gen, memory_order_acquire);

	if (unlikely(gen != p->active_gen))
		rebuild_active(mgr, p, service, gen);
	for (uint32_t i = 0; i < p->n_active; i++) {
		uint32_t id = p->active[(hash + i) % p->n_active];

		if (atomic_load_explicit(&mgr->nfs[id].live, memory_order_relaxed))
			return id;
	}
	/* none takes flows (all dead, or starting): any live one */
	return live_instance(mgr, service, hash);
}

/* A flow that cannot have all its hops gives back the pool NFs it took. */
static void
undo_hops(struct director *d, const struct flow *f, const struct sq_cfg_chain *chain, uint16_t h)
{
	while (h-- > 0)
		if (f->nf[h] < UINT32_MAX / 2)
			pool_push(&d->pools[chain->services[h]], f->nf[h]);
}

/* Give the new flow an NF for each hop. @return SQ_DROP_MAX, or the drop
 * cause; *empty names the service whose pool was empty. */
static int
assign_nfs(struct mgr *mgr, struct director *d, struct flow *f, const struct sq_cfg_rule *rule,
	   uint32_t hash, uint16_t *empty)
{
	const struct sq_cfg_chain *chain = &mgr->cfg->chains[rule->chain];
	uint16_t h;

	f->n_hops = chain->n_hops;
	for (h = 0; h < chain->n_hops; h++) {
		uint16_t s = chain->services[h];
		struct pool *p = &d->pools[s];
		uint32_t id;

		if (rule->assign == SQ_ASSIGN_ROUND_ROBIN || rule->assign == SQ_ASSIGN_RSS) {
			uint32_t key = rule->assign == SQ_ASSIGN_RSS ? hash : d->rr_next[s]++;

			id = mgr->cfg->services[s].scale.enabled ? active_instance(mgr, p, s, key)
								 : live_instance(mgr, s, key);
			if (id == UINT32_MAX)
				goto out_no_nf;
			f->nf[h] = id;
			continue;
		}
		if (!backlog_full(mgr, s) && pool_pop(mgr, p, &id)) {
			p->assigned++;
			f->nf[h] = id;
			continue;
		}
		p->empty++;
		p->backlogged += p->count > 0;
		*empty = s;
		if (mgr->cfg->services[s].pool_fallback != SQ_FALLBACK_RSS)
			goto out_undo;
		/* Share a busy NF: marked so that its end does not release it. */
		id = live_instance(mgr, s, hash);
		if (id == UINT32_MAX)
			goto out_no_nf;
		f->nf[h] = UINT32_MAX - id;
	}
	return SQ_DROP_MAX;

out_no_nf:
	undo_hops(d, f, chain, h);
	return mgr_no_nf_cause(mgr, chain->services[h]);
out_undo:
	undo_hops(d, f, chain, h);
	return SQ_DROP_POOL_EMPTY;
}

static uint32_t
nf_of(const struct flow *f, uint16_t hop)
{
	uint32_t id = f->nf[hop];

	return id > UINT32_MAX / 2 ? UINT32_MAX - id : id;
}

static void
set_nf_priority(struct mgr *mgr, uint32_t id, uint32_t prio)
{
	(void)mgr_nf_set_policy(mgr, &mgr->nfs[id], prio); /* (refused: it stays as it was) */
}

static struct flow *
new_flow(struct mgr *mgr, struct director *d, const struct flow_key *k,
	 const struct sq_cfg_rule *rule, uint32_t hash, bool tcp, int *cause, uint16_t *empty)
{
	struct flow *f;
	int pos;

	pos = rte_hash_add_key_with_hash(d->table, k, hash);
	if (pos < 0) {
		*cause = SQ_DROP_FLOW_TABLE_FULL;
		return NULL;
	}
	f = &d->flows[pos];
	memset(f, 0, sizeof(*f));
	f->key = *k;
	f->tcp = tcp;
	f->assign = (uint8_t)rule->assign;
	*cause = assign_nfs(mgr, d, f, rule, hash, empty);
	if (*cause != SQ_DROP_MAX) {
		/* Nobody saw the entry: its slot is free again at once. */
		pos = rte_hash_del_key_with_hash(d->table, k, hash);
		if (pos >= 0)
			rte_hash_free_key_with_position(d->table, pos);
		return NULL;
	}
	f->state = FLOW_OPEN;
	if (rule->assign != SQ_ASSIGN_PER_FLOW)
		for (uint16_t h = 0; h < f->n_hops; h++)
			atomic_fetch_add_explicit(&mgr->nfs[nf_of(f, h)].flows, 1,
						  memory_order_relaxed);
	f->chain_gen = mgr->cfg->chains[rule->chain].gen;
	atomic_fetch_add_explicit(&d->chain_flows[rule->chain], 1, memory_order_relaxed);
	f->first_tsc = rte_rdtsc();
	f->syn_tsc = f->first_tsc;
	f->nf_priority = rule->nf_priority;
	/* seed 000 Fig 7: a rule may raise the flow's NFs for its lifetime. */
	if (rule->nf_priority > 0 && rule->assign == SQ_ASSIGN_PER_FLOW)
		for (uint16_t h = 0; h < f->n_hops; h++)
			if (f->nf[h] < UINT32_MAX / 2)
				set_nf_priority(mgr, f->nf[h], rule->nf_priority);
	d->st.flows_created++;
	d->st.flows_active++;
	if (rte_log_can_log(sq_logtype_mgr, RTE_LOG_DEBUG)) {
		char ks[128];

		MGR_LOG(DEBUG, "flow %s new at %d nfs %u,%u\n", key_str(k, ks, sizeof(ks)), pos,
			f->nf[0], f->nf[1]);
	}
	return f;
}

/* FIN both ways or RST: the flow lingers for retransmissions, then ends.
 * @return true if this packet closed it. */
static bool
track_tcp(struct director *d, struct flow *f, uint8_t flags, bool from_lo, uint64_t now)
{
	if (flags & RTE_TCP_FIN_FLAG)
		f->fins |= from_lo ? 1 : 2;
	if (f->state == FLOW_OPEN && ((flags & RTE_TCP_RST_FLAG) || f->fins == 3)) {
		f->state = FLOW_LINGER;
		f->end_tsc = now + d->linger_tsc;
		d->st.flows_closed++;
		if (d->closing_count < d->closing_cap) {
			d->closing[(d->closing_head + d->closing_count) % d->closing_cap] =
				(uint32_t)(f - d->flows);
			d->closing_count++;
		}
		/* (If it were full, the idle sweep would still end the flow.) */
		return true;
	}
	return false;
}

/* Handoff: with no linger, nothing of a closed flow may reach its NF after
 * the close, so the flow's first NF can take its next flow at once, queued
 * behind the close in its ring: libsquall cuts the burst there and cleans up
 * in between (SQ_META_FLOW_START). In a lifo pool the next new flow then
 * takes this NF, warm and often still running: no wake, no context switch
 * (an NF woken per flow costs its core 7-13 us here; docs/results
 * switch_cost). The flow's entry stays, its packets now strays, until the
 * manager has taken back from the NF every packet up to the close. An NF
 * holds at most HANDOFF_MAX flows this way (a stuck one too). Not with
 * rx and tx on two lcores (the count of packets held would race), nor for a
 * rule that raises its NFs' priority. */
static bool try_remove(struct mgr *mgr, struct director *d, struct flow *f, uint64_t tx_round);

/* Can the NF take one more flow by handoff? Its oldest handed-off flows
 * that ended (or are done now: the closing queue may not have reached them,
 * held up by another NF's flow) leave its list first. */
static bool
handoff_room(struct mgr *mgr, struct director *d, struct handoffs *ho)
{
	uint64_t tx_round = atomic_load(&mgr->tx_rounds);

	while (ho->count > 0) {
		struct flow *old = &d->flows[ho->flow[ho->head]];
		bool open = old->state != FLOW_FREE && old->handed_off &&
			    old->first_tsc == ho->first_tsc[ho->head];

		if (open && !try_remove(mgr, d, old, tx_round))
			break;
		ho->head = (ho->head + 1) % HANDOFF_MAX;
		ho->count--;
	}
	return ho->count < HANDOFF_MAX;
}

/* Packets given to @p nf so far, sent or staged (the tx lcore adds too). */
static uint64_t
given_pkts(const struct mgr *mgr, const struct mgr_nf *nf)
{
	return atomic_load_explicit(&mgr->rx.stages[nf->id].enq_pkts, memory_order_relaxed) +
	       atomic_load_explicit(&mgr->tx.stages[nf->id].enq_pkts, memory_order_relaxed) +
	       mgr_steer_held(mgr, nf);
}

static void
hand_off(struct mgr *mgr, struct director *d, struct flow *f)
{
	struct mgr_nf *nf;
	uint64_t upto;

	if (d->linger_tsc != 0 || mgr->rx_elsewhere || f->assign != SQ_ASSIGN_PER_FLOW ||
	    f->nf_priority > 0 || f->nf[0] > UINT32_MAX / 2)
		return;
	if (!handoff_room(mgr, d, &d->handoffs[f->nf[0]]))
		return;
	nf = &mgr->nfs[f->nf[0]];
	if (!d->pools[nf->service].lifo || !atomic_load_explicit(&nf->live, memory_order_relaxed))
		return;
	/* Everything given to the NF so far, staged or sent, and the closing
	 * packet about to be staged. */
	upto = given_pkts(mgr, nf) + 1;
	f->handed_off = true;
	f->handoff_deq = upto;
	{
		struct handoffs *ho = &d->handoffs[nf->id];
		uint32_t i = (ho->head + ho->count++) % HANDOFF_MAX;

		ho->flow[i] = (uint32_t)(f - d->flows);
		ho->first_tsc[i] = f->first_tsc;
	}
	pool_push(&d->pools[nf->service], nf->id);
	d->st.handoffs++;
}

/* pool_fallback: queue. The new flow's packet waits for an NF of @p service
 * to come back to the pool; a @p follower waits behind its flow's SYN
 * (wait_behind_syn). New flows may fill only three quarters of the queue:
 * the rest is kept for followers, so that a SYN let in does not see its
 * later packets turned away (its flow would get an NF and never end but
 * by the idle timeout). @return false if it cannot wait (drop it). */
static bool
wait_for_nf(struct mgr *mgr, struct director *d, uint16_t service, const struct sq_cfg_rule *rule,
	    struct rte_mbuf *pkt, bool follower)
{
	struct waitq *q = &d->pools[service].wait;

	if (mgr->cfg->services[service].pool_fallback != SQ_FALLBACK_QUEUE)
		return false;
	if (q->count >= (follower ? q->cap : q->cap - q->cap / 4)) {
		q->dropped += !follower; /* a follower turned away is a stray */
		return false;
	}
	q->pkts[(q->head + q->count) % q->cap] = pkt;
	q->rules[(q->head + q->count) % q->cap] = (uint16_t)(rule - mgr->cfg->rules);
	q->count++;
	q->high = RTE_MAX(q->high, q->count);
	q->queued++;
	d->n_waiting++;
	return true;
}

/* A TCP packet that is not a SYN and has no flow: a stray, unless its
 * flow's SYN waits in a fallback queue for an NF. Then it must wait behind
 * it, in order, or the flow would get its NF and never see its other
 * packets (a sender that does not wait for the SYN-ACK, as the generator's
 * connections do). Rather than look for its SYN, it waits in the first
 * queue of its chain that holds packets; if its SYN was not there, it is a
 * stray when its turn comes (it does not wait twice). @return true if it
 * waits. */
static bool
wait_behind_syn(struct mgr *mgr, struct director *d, const struct sq_cfg_rule *rule,
		struct rte_mbuf *pkt)
{
	const struct sq_cfg_chain *chain = &mgr->cfg->chains[rule->chain];

	if (d->n_waiting == 0 || d->redoing_wait)
		return false;
	for (uint16_t h = 0; h < chain->n_hops; h++)
		if (d->pools[chain->services[h]].wait.count > 0)
			return wait_for_nf(mgr, d, chain->services[h], rule, pkt, true);
	return false;
}

/* Would this waiting packet take an NF from the pool: a new flow's first
 * packet? Not one whose flow got its NF while it waited, nor a TCP packet
 * that is no SYN and has no flow (a stray when steered). */
static bool
needs_nf(const struct director *d, const struct sq_cfg_rule *rule, const struct rte_mbuf *pkt)
{
	struct flow_key k;
	uint8_t flags;
	bool from_lo, syn;

	if (!flow_key_of(pkt, rule->chain, &k, &flags, &from_lo))
		return false;
	syn = k.proto == IPPROTO_TCP &&
	      (flags & (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG)) == RTE_TCP_SYN_FLAG;
	/* (a SYN matches no second key: lookup_flow) */
	if (rte_hash_lookup(d->table, &k) >= 0 ||
	    (!syn && d->n_aliases > 0 && rte_hash_lookup(d->aliases, &k) >= 0))
		return false;
	return k.proto != IPPROTO_TCP || syn;
}

/* Waiting packets go on, oldest first, steered as if they arrived now
 * (their rx time stays: the wait counts in their latency), until the head
 * needs an NF while the pool is empty or the NF core's backlog full. A head
 * whose flow has its NF goes on regardless: had it waited for an idle NF,
 * a later packet of its flow would have passed it. One that must wait
 * again goes back to the queue's end. */
static void
drain_waiting(struct mgr *mgr, struct director *d)
{
	for (uint16_t s = 0; s < mgr->cfg->n_services; s++) {
		struct pool *p = &d->pools[s];
		uint32_t n = p->wait.count;

		while (n-- > 0) {
			struct rte_mbuf *pkt = p->wait.pkts[p->wait.head];
			const struct sq_cfg_rule *rule =
				&mgr->cfg->rules[p->wait.rules[p->wait.head]];

			if ((p->count == 0 || backlog_full(mgr, s)) && needs_nf(d, rule, pkt))
				break;
			p->wait.head = (p->wait.head + 1) % p->wait.cap;
			p->wait.count--;
			d->n_waiting--;
			d->redoing_wait = true;
			mgr_director_steer(mgr, &mgr->rx, rule, pkt);
			d->redoing_wait = false;
		}
	}
}

void
mgr_director_drop_waiting(struct mgr *mgr, int cause)
{
	struct director *d = mgr->dir;

	for (uint16_t s = 0; d != NULL && s < mgr->cfg->n_services; s++) {
		struct waitq *q = &d->pools[s].wait;

		for (; q->count > 0; q->count--, q->head = (q->head + 1) % q->cap)
			mgr_drop(&mgr->rx.stats, (enum sq_drop)cause, q->pkts[q->head]);
	}
	if (d != NULL)
		d->n_waiting = 0;
}

/* An ICMP error (destination unreachable, source quench, redirect, time
 * exceeded, parameter problem) quotes the IP header and the first 8 bytes of
 * the packet it answers: the 5-tuple of its flow. @return 1 and the flow's
 * key if @p pkt is an ICMP error quoting TCP or UDP, 0 if it is another ICMP
 * message, -1 if an error whose quote cannot be read. Reads stay inside the
 * IP total length and the first segment. */
static int
icmp4_error_key(const struct rte_mbuf *pkt, uint16_t chain, struct flow_key *k)
{
	const struct rte_ipv4_hdr *ip =
		rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv4_hdr *, pkt->l2_len);
	uint32_t end = RTE_MIN((uint32_t)pkt->data_len,
			       pkt->l2_len + (uint32_t)rte_be_to_cpu_16(ip->total_length));
	uint32_t off = pkt->l2_len + pkt->l3_len, q_ihl;
	const struct rte_ipv4_hdr *q;
	const uint8_t *icmp;
	const uint16_t *ports;
	uint8_t src[16], dst[16];
	bool from_lo;

	if (end < off + 8)
		return 0;
	icmp = rte_pktmbuf_mtod_offset(pkt, const uint8_t *, off);
	if (icmp[0] != 3 && icmp[0] != 4 && icmp[0] != 5 && icmp[0] != 11 && icmp[0] != 12)
		return 0;
	off += 8;
	if (end < off + sizeof(*q))
		return -1;
	q = rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv4_hdr *, off);
	q_ihl = (q->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4u;
	if ((q->version_ihl >> 4) != 4 || q_ihl < sizeof(*q) || end < off + q_ihl + 4 ||
	    (q->next_proto_id != IPPROTO_TCP && q->next_proto_id != IPPROTO_UDP) ||
	    (rte_be_to_cpu_16(q->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK) != 0)
		return -1;
	ports = rte_pktmbuf_mtod_offset(pkt, const uint16_t *, off + q_ihl);
	v4_mapped(q->src_addr, src);
	v4_mapped(q->dst_addr, dst);
	make_key(src, dst, ports[0], ports[1], q->next_proto_id, chain, k, &from_lo);
	return 1;
}

/* ICMPv6's errors (RFC 4443: destination unreachable, packet too big, time
 * exceeded, parameter problem: types 1-4) quote as much of the packet as
 * fits; a quote whose IPv6 header is followed by TCP or UDP gives the flow.
 * One with extension headers in the quote is not followed (-1: counted as
 * icmp_no_flow). Neighbour discovery and echo are 0: not errors. */
static int
icmp6_error_key(const struct rte_mbuf *pkt, uint16_t chain, struct flow_key *k)
{
	const struct rte_ipv6_hdr *ip6 =
		rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv6_hdr *, pkt->l2_len);
	uint32_t end = RTE_MIN((uint32_t)pkt->data_len,
			       pkt->l2_len + sizeof(*ip6) + rte_be_to_cpu_16(ip6->payload_len));
	uint32_t off = pkt->l2_len + pkt->l3_len;
	const struct rte_ipv6_hdr *q;
	const uint16_t *ports;
	const uint8_t *icmp;
	bool from_lo;

	if (end < off + 8)
		return 0;
	icmp = rte_pktmbuf_mtod_offset(pkt, const uint8_t *, off);
	if (icmp[0] < 1 || icmp[0] > 4)
		return 0;
	off += 8;
	if (end < off + sizeof(*q) + 4)
		return -1;
	q = rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv6_hdr *, off);
	if ((rte_be_to_cpu_32(q->vtc_flow) >> 28) != 6 ||
	    (q->proto != IPPROTO_TCP && q->proto != IPPROTO_UDP))
		return -1;
	ports = rte_pktmbuf_mtod_offset(pkt, const uint16_t *, off + sizeof(*q));
	make_key(q->src_addr, q->dst_addr, ports[0], ports[1], q->proto, chain, k, &from_lo);
	return 1;
}

/* The ICMP (IPv4) or ICMPv6 error key of @p pkt, as icmp4_error_key says;
 * 0 for a packet that is neither. (rte_net_get_ptype classes ICMP as no L4:
 * read the protocol.) */
static int
icmp_error_key(const struct rte_mbuf *pkt, uint16_t chain, struct flow_key *k)
{
	if (RTE_ETH_IS_IPV4_HDR(pkt->packet_type))
		return rte_pktmbuf_mtod_offset(pkt, const struct rte_ipv4_hdr *, pkt->l2_len)
					       ->next_proto_id == IPPROTO_ICMP
			       ? icmp4_error_key(pkt, chain, k)
			       : 0;
	return ipv6_final_proto(pkt) == IPPROTO_ICMPV6 ? icmp6_error_key(pkt, chain, k) : 0;
}

/* A packet that is no TCP/UDP flow of either family. ARP and the like: any
 * instance of the service will do. Not so in a per-flow service, where every
 * instance is some flow's: there an ICMP error goes to the flow it quotes,
 * and what no flow can be found for is dropped, counted, not given to
 * another flow's NF:
 * - IP fragments (IPv4, or IPv6's fragment header): only the first carries
 *   the ports. Fragments keyed on (src, dst, proto, id) would reach one NF,
 *   but not the flow's own unless the manager tracked each datagram from its
 *   first fragment, which may come last or never; so they are dropped
 *   (fragment). TCP sets DF (IPv6 routers never fragment); a per-flow UDP
 *   service needs fragments reassembled before it.
 * - ICMP and ICMPv6 errors quoting no flow of the chain (icmp_no_flow).
 *   Other ICMP (echo) and IPv6 neighbour discovery keep the address hash. */
static struct mgr_nf *
steer_not_a_flow(struct mgr *mgr, struct director *d, struct role_ctx *role,
		 const struct sq_cfg_rule *rule, struct rte_mbuf *pkt, uint16_t service)
{
	uint32_t ptype = pkt->packet_type, l4 = ptype & RTE_PTYPE_L4_MASK;
	struct flow_key k;
	bool from_lo = false;
	struct flow *f;
	int pos;

	if (rule->assign != SQ_ASSIGN_PER_FLOW ||
	    (!RTE_ETH_IS_IPV4_HDR(ptype) && !RTE_ETH_IS_IPV6_HDR(ptype)))
		return mgr_steer_to_service(mgr, role, service, pkt);
	if (l4 == RTE_PTYPE_L4_FRAG) {
		mgr_drop(&role->stats, SQ_DROP_FRAGMENT, pkt);
		return NULL;
	}
	switch (icmp_error_key(pkt, rule->chain, &k)) {
	case 0: return mgr_steer_to_service(mgr, role, service, pkt);
	case 1: break;
	default: mgr_drop(&role->stats, SQ_DROP_ICMP_NO_FLOW, pkt); return NULL;
	}
	pos = lookup_flow(d, &k, rte_hash_hash(d->table, &k), false, &from_lo);
	f = pos >= 0 ? &d->flows[pos] : NULL;
	if (f == NULL || (f->state != FLOW_OPEN && f->state != FLOW_LINGER) || f->handed_off ||
	    !atomic_load_explicit(&mgr->nfs[nf_of(f, 0)].live, memory_order_relaxed)) {
		mgr_drop(&role->stats, SQ_DROP_ICMP_NO_FLOW, pkt);
		return NULL;
	}
	f->pkts++;
	f->bytes += pkt->pkt_len;
	sq_pkt_meta(pkt)->flow_id = (uint32_t)pos + 1;
	return mgr_steer_to_nf(mgr, role, &mgr->nfs[nf_of(f, 0)], pkt);
}

struct mgr_nf *
mgr_director_steer(struct mgr *mgr, struct role_ctx *role, const struct sq_cfg_rule *rule,
		   struct rte_mbuf *pkt)
{
	struct director *d = mgr->dir;
	struct sq_pkt_meta *meta = sq_pkt_meta(pkt);
	uint16_t service = mgr->cfg->chains[rule->chain].services[0];
	struct flow_key k;
	uint8_t flags;
	bool from_lo;
	struct flow *f;
	uint32_t hash;
	uint16_t empty = 0, bucket;
	bool half_open, syn;
	int pos, cause;

	uint64_t t0 = rte_rdtsc();

	if (!flow_key_of(pkt, rule->chain, &k, &flags, &from_lo))
		return steer_not_a_flow(mgr, d, role, rule, pkt, service);
	hash = rte_hash_hash(d->table, &k);
	syn = k.proto == IPPROTO_TCP &&
	      (flags & (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG)) == RTE_TCP_SYN_FLAG;
	pos = lookup_flow(d, &k, hash, syn, &from_lo);
	if (pos >= 0) {
		f = &d->flows[pos];
	} else {

		/* (a pinned rss flow takes any first packet: a connection
		 * older than its entry keeps going) */
		if (k.proto == IPPROTO_TCP && !syn && rule->assign != SQ_ASSIGN_RSS) {
			if (!wait_behind_syn(mgr, d, rule, pkt))
				mgr_drop(&role->stats, SQ_DROP_STRAY, pkt);
			return NULL;
		}
		half_open = syn || k.proto != IPPROTO_TCP;
		bucket = admit_bucket(from_lo ? k.ip_lo : k.ip_hi);
		if (half_open && !admit_room(&d->admit, bucket)) {
			d->st.flows_refused++;
			mgr_drop(&role->stats, SQ_DROP_FLOW_ADMISSION, pkt);
			return NULL;
		}
		f = new_flow(mgr, d, &k, rule, hash, k.proto == IPPROTO_TCP, &cause, &empty);
		if (f == NULL) {
			if (cause != SQ_DROP_POOL_EMPTY ||
			    !wait_for_nf(mgr, d, empty, rule, pkt, false))
				mgr_drop(&role->stats, cause, pkt);
			return NULL;
		}
		pos = (int)(f - d->flows);
		f->syn_from_lo = from_lo;
		f->established = !half_open;
		if (half_open) {
			f->unestab = 1;
			f->admit_bucket = bucket;
			admit_hold(&d->admit, bucket);
		}
		f->pkts++;
		f->bytes += pkt->pkt_len;
		f->last_tsc = meta->rx_tsc;
		if (f->tcp && track_tcp(d, f, flags, from_lo, meta->rx_tsc))
			hand_off(mgr, d, f);
		meta->flow_id = (uint32_t)pos + 1;
		if (f->assign == SQ_ASSIGN_PER_FLOW)
			meta->flags |= SQ_META_FLOW_START;
		mgr_steer_to_nf(mgr, role, &mgr->nfs[nf_of(f, 0)], pkt);
		/* Flow setup: miss, table insert, an NF per hop, staged (seed 000 §6.2). */
		lat_add(&d->setup, rte_rdtsc() - t0);
		return &mgr->nfs[nf_of(f, 0)];
	}
	if (unlikely(f->handed_off)) {
		/* After the close: its NF serves another flow now. */
		mgr_drop(&role->stats, SQ_DROP_STRAY, pkt);
		return NULL;
	}
	f->pkts++;
	f->bytes += pkt->pkt_len;
	f->last_tsc = meta->rx_tsc;
	/* The responder's SYN-ACK, then an ACK that acknowledges it, or a
	 * reply: established (a spoofer sees neither; see expire_flows). */
	if (unlikely(!f->established))
		handshake(d, f, pkt, flags, from_lo);
	if (f->tcp && track_tcp(d, f, flags, from_lo, meta->rx_tsc))
		hand_off(mgr, d, f);
	meta->flow_id = (uint32_t)pos + 1;
	if (unlikely(!atomic_load_explicit(&mgr->nfs[nf_of(f, 0)].live, memory_order_relaxed))) {
		/* Its NF died: the flow's state died with it. */
		mgr_drop(&role->stats, mgr_no_nf_cause(mgr, mgr->nfs[nf_of(f, 0)].service), pkt);
		return NULL;
	}
	return mgr_steer_to_nf(mgr, role, &mgr->nfs[nf_of(f, 0)], pkt);
}

/* tx (mgr->flow_nf): the NF of a packet's flow at @p hop, or NULL if the
 * flow has none. */
static struct mgr_nf *
tx_flow_nf(struct mgr *mgr, uint32_t flow_id, uint16_t hop)
{
	const struct flow *f = &mgr->dir->flows[flow_id - 1];

	if (f->state == FLOW_FREE || hop >= f->n_hops ||
	    !atomic_load_explicit(&mgr->nfs[nf_of(f, hop)].live, memory_order_relaxed))
		return NULL; /* tx falls back to a live instance of the hop's service */
	return &mgr->nfs[nf_of(f, hop)];
}

/* ---- ends ---- */

static bool
nf_is_quiet(const struct mgr *mgr, const struct mgr_nf *nf)
{
	return mgr_nf_outstanding(mgr, nf) == 0 && mgr_steer_held(mgr, nf) == 0;
}

static bool nf_is_quiet(const struct mgr *mgr, const struct mgr_nf *nf);

/* A flow on shared instances (rss, round-robin), ended: its NFs serve other
 * flows and may never be quiet under load, so its own packets are waited
 * for hop by hop. Once hops before h are done, the flow's packets are at h
 * or beyond: mark what h was given until now and wait until h took back as
 * many (or holds nothing), then the next hop. A packet of the flow meanwhile
 * starts the walk again. The entry may then go without a later packet of
 * the flow finding another flow's NF in its slot (tx follows flow_id). */
static bool
shared_flow_is_quiet(const struct mgr *mgr, struct flow *f)
{
	if (f->drain_pkts != f->pkts) {
		f->drain_pkts = f->pkts;
		f->drain_hop = 0;
		f->drain_marked = false;
	}
	while (f->drain_hop < f->n_hops) {
		const struct mgr_nf *nf = &mgr->nfs[nf_of(f, f->drain_hop)];

		if (!f->drain_marked) {
			f->handoff_deq = given_pkts(mgr, nf);
			f->drain_marked = true;
		}
		if (nf->deq_pkts < f->handoff_deq && !nf_is_quiet(mgr, nf))
			return false;
		f->drain_hop++;
		f->drain_marked = false;
	}
	return true;
}

/* Nothing of the flow is left in its NFs. A handed-off first NF may hold
 * the next flow's packets already: done with this one once its packets up
 * to the close came back (or it holds nothing: a packet of this flow was
 * dropped on the way, so the count is never reached). */
static bool
flow_is_quiet(const struct mgr *mgr, struct flow *f)
{
	if (f->assign != SQ_ASSIGN_PER_FLOW)
		return shared_flow_is_quiet(mgr, f);
	for (uint16_t h = 0; h < f->n_hops; h++) {
		const struct mgr_nf *nf = &mgr->nfs[nf_of(f, h)];

		if (h == 0 && f->handed_off && nf->deq_pkts >= f->handoff_deq)
			continue;
		if (!nf_is_quiet(mgr, nf))
			return false;
	}
	return true;
}

/* The flow's NFs hold nothing of it: drop the entry, let its NFs clean up. */
static void
remove_flow(struct mgr *mgr, struct director *d, struct flow *f)
{
	int32_t pos;

	for (uint16_t h = 0; h < f->n_hops; h++) {
		struct mgr_nf *nf;

		if (f->assign != SQ_ASSIGN_PER_FLOW)
			atomic_fetch_sub_explicit(&mgr->nfs[nf_of(f, h)].flows, 1,
						  memory_order_relaxed);
		if (f->assign != SQ_ASSIGN_PER_FLOW || f->nf[h] > UINT32_MAX / 2)
			continue;
		nf = &mgr->nfs[f->nf[h]];
		if (h == 0 && f->handed_off) {
			/* In its pool already. A close it cleaned up is accounted
			 * now; one it never saw is cleaned at its next flow's start. */
			if (atomic_load_explicit(&nf->ctl->closes_cleaned, memory_order_acquire) !=
			    nf->closes_taken)
				nf->closes_taken++;
			continue;
		}
		if (f->nf_priority > 0) /* back to its own (chain_priority too) */
			set_nf_priority(mgr, nf->id, mgr_nf_own_priority(mgr, nf));
		/* The NF saw the close and cleaned up already: straight back. */
		if (atomic_load_explicit(&nf->ctl->closes_cleaned, memory_order_acquire) !=
		    nf->closes_taken) {
			nf->closes_taken++;
			pool_return(mgr, &d->pools[nf->service], nf);
			continue;
		}
		atomic_fetch_add_explicit(&nf->ctl->flow_gen, 1, memory_order_release);
		mgr_wakeup_force(mgr, nf);
		d->cleaning[d->n_cleaning++] = nf->id;
	}
	if (rte_log_can_log(sq_logtype_mgr, RTE_LOG_DEBUG)) {
		char ks[128];

		MGR_LOG(DEBUG, "flow %s removed (state %u, fins %u, %" PRIu64 " pkts)\n",
			key_str(&f->key, ks, sizeof(ks)), f->state, f->fins, f->pkts);
	}
	/* With lock-free readers the hash keeps a deleted key's slot until told:
	 * the rx lcore is its only reader, and tx has passed two rounds since the
	 * flow went quiet (try_remove), so the slot is free to reuse now. */
	pos = rte_hash_del_key(d->table, &f->key);
	if (pos >= 0)
		rte_hash_free_key_with_position(d->table, pos);
	if (f->alias != 0)
		drop_alias(d, f);
	admit_done(d, f);
	f->state = FLOW_FREE;
	d->st.flows_ended++;
	d->st.flows_active--;
	atomic_fetch_sub_explicit(&d->chain_flows[f->key.chain], 1, memory_order_relaxed);
}

/* A draining flow goes once its NFs are quiet, and two tx rounds more, so a
 * tx lcore that read the entry for a packet is done with it. @return true
 * if it went. */
static bool
try_remove(struct mgr *mgr, struct director *d, struct flow *f, uint64_t tx_round)
{
	if (!flow_is_quiet(mgr, f)) {
		f->drain_tx_round = 0;
		return false;
	}
	if (!mgr->rx_elsewhere || (f->drain_tx_round != 0 && tx_round >= f->drain_tx_round)) {
		remove_flow(mgr, d, f);
		return true;
	}
	if (f->drain_tx_round == 0)
		f->drain_tx_round = tx_round + 2;
	return false;
}

/* Closed flows in closing order: end those whose linger is over and whose
 * NFs are done. One whose NFs still work on it stops the walk, or, with
 * @p park, waits on the draining list so the ones behind it go on. */
static void
end_closing(struct mgr *mgr, struct director *d, uint64_t now, uint64_t tx_round, bool park)
{
	while (d->closing_count > 0) {
		uint32_t idx = d->closing[d->closing_head];
		struct flow *f = &d->flows[idx];

		if (f->state == FLOW_LINGER) {
			if (now <= f->end_tsc)
				return;
			f->state = FLOW_DRAIN;
		}
		if (f->state == FLOW_DRAIN && !try_remove(mgr, d, f, tx_round)) {
			/* (Full only with stale entries of reused slots: wait in
			 * order then, as before the list existed.) */
			if (!park || d->n_draining == d->closing_cap)
				return;
			d->draining[d->n_draining++] = idx;
		}
		d->closing_head = (d->closing_head + 1) % d->closing_cap;
		d->closing_count--;
	}
}

/* Every period: the draining list, then the closing queue, parking what is
 * not done yet. */
static void
end_closed_flows(struct mgr *mgr, struct director *d, uint64_t now, uint64_t tx_round)
{
	for (uint32_t i = 0; i < d->n_draining;) {
		struct flow *f = &d->flows[d->draining[i]];

		/* (A flow the idle sweep ended already is not draining any more.) */
		if (f->state != FLOW_DRAIN || try_remove(mgr, d, f, tx_round))
			d->draining[i] = d->draining[--d->n_draining];
		else
			i++;
	}
	end_closing(mgr, d, now, tx_round, true);
}

/* Every round, not only every period: the flows at the head of the closing
 * queue whose linger is over and whose NFs are done end at once, so their
 * NFs are back in the pool within microseconds of the flow's last packet,
 * warm, often still running (spinning, spin_us): with pool_order lifo the
 * next new flow takes such an NF and costs no wake and no context switch.
 * A head that is not done yet is left to the periodic pass. */
static void
end_done_flows(struct mgr *mgr, struct director *d, uint64_t now)
{
	end_closing(mgr, d, now, atomic_load(&mgr->tx_rounds), false);
}

/* A run-time change took the flow's path away: its chain was removed or
 * changed and does not drain (squallctl apply --end-flows, or no rule can
 * reach the flow any more), or a per-flow pool shrank below one of its NFs
 * with --end-flows. Its packets are strays from now on. */
static bool
config_ended(const struct mgr *mgr, const struct director *d, const struct flow *f)
{
	const struct sq_cfg_chain *ch = &mgr->cfg->chains[f->key.chain];

	if (ch->n_hops == 0 || ch->gen != f->chain_gen)
		return true;
	for (uint16_t h = 0; d->any_end_beyond && h < f->n_hops; h++) {
		const struct mgr_nf *nf = &mgr->nfs[nf_of(f, h)];

		if (d->pools[nf->service].end_beyond && beyond(mgr, nf))
			return true;
	}
	return false;
}

/* Is @p then more than @p age before @p now? Not if it is after: a flow the
 * waiting queue let in during this round (drain_waiting) has its times
 * from after the round's @p now, and the plain difference wrapped to
 * "ages ago" and ended every such flow as half-open at once. */
static inline bool
older_than(uint64_t now, uint64_t then, uint64_t age)
{
	return now > then && now - then > age;
}

/* A flow the sweep ended whose NFs still hold its packets: it waits on the
 * draining list, retried every period, like a closed one. Left to the
 * sweep alone it would stay forever once both its FINs passed (the sweep
 * leaves those to the closing queue, which never had it). */
static void
end_or_park(struct mgr *mgr, struct director *d, struct flow *f, uint64_t tx_round)
{
	if (!try_remove(mgr, d, f, tx_round) && d->n_draining < d->closing_cap)
		d->draining[d->n_draining++] = (uint32_t)(f - d->flows);
}

static void
expire_flows(struct mgr *mgr, struct director *d, uint64_t now)
{
	uint64_t tx_round = atomic_load(&mgr->tx_rounds);
	/* The share of the table that the time since the last pass is of a
	 * sweep's: periods are not every DIRECTOR_PERIOD_US when the manager
	 * sleeps (up to its control period, waiting on a port's interrupt or
	 * socket), and a sweep paced by passes then took seconds per pass. */
	uint64_t since = RTE_MIN(d->last_sweep_tsc != 0 ? now - d->last_sweep_tsc : d->period_tsc,
				 rte_get_tsc_hz()); /* (a second: the whole table, no overflow) */
	uint64_t share = (uint64_t)mgr->cfg->max_flows * since * SWEEPS_PER_S / rte_get_tsc_hz();
	uint32_t n = (uint32_t)RTE_MIN((uint64_t)mgr->cfg->max_flows, RTE_MAX(64u, share));

	d->last_sweep_tsc = now;

	end_closed_flows(mgr, d, now, tx_round);
	for (uint32_t i = 0; i < n; i++) {
		struct flow *f = &d->flows[d->scan_pos];

		d->scan_pos = (d->scan_pos + 1) % mgr->cfg->max_flows;
		if (f->state == FLOW_OPEN && config_ended(mgr, d, f)) {
			f->state = FLOW_DRAIN;
			d->st.flows_config_ended++;
		} else if (f->state == FLOW_OPEN && older_than(now, f->last_tsc, d->idle_tsc)) {
			f->state = FLOW_DRAIN;
			d->st.flows_idle_expired++;
			if (rte_log_can_log(sq_logtype_mgr, RTE_LOG_DEBUG)) {
				char ks[128];

				MGR_LOG(DEBUG, "flow %s idle after %" PRIu64 " pkts (fins %u)\n",
					key_str(&f->key, ks, sizeof(ks)), f->pkts, f->fins);
			}
		} else if (f->state == FLOW_OPEN && f->tcp && !f->established &&
			   older_than(now, f->syn_tsc, d->half_open_tsc)) {
			/* A SYN flood must not hold the pool's NFs for the idle
			 * timeout: a handshake not done in flow_half_open_timeout_ms
			 * ends the flow. */
			f->state = FLOW_DRAIN;
			d->st.flows_half_open_expired++;
			admit_done(d, f);
		} else if (f->state == FLOW_OPEN && !f->tcp && !f->established &&
			   f->assign == SQ_ASSIGN_PER_FLOW &&
			   older_than(now, f->last_tsc, d->half_open_tsc)) {
			/* Nor a UDP flood: unreplied, its flows end after the
			 * half-open timeout without a packet. */
			f->state = FLOW_DRAIN;
			d->st.flows_unreplied_expired++;
			admit_done(d, f);
		} else {
			/* Open, lingering, or draining: the draining list or the
			 * closing queue has a draining one, but the sweep tries it
			 * too (a full list), save a closed one (in closing order). */
			if (f->state == FLOW_DRAIN && f->fins != 3)
				try_remove(mgr, d, f, tx_round);
			continue;
		}
		end_or_park(mgr, d, f, tx_round);
	}
}

/* NFs that acknowledged their cleanup go back to their pool. */
static void
collect_cleaned(struct mgr *mgr, struct director *d)
{
	for (uint32_t i = 0; i < d->n_cleaning;) {
		struct mgr_nf *nf = &mgr->nfs[d->cleaning[i]];
		bool dead = !atomic_load(&nf->live);

		if (!dead &&
		    atomic_load(&nf->ctl->flow_gen_done) != atomic_load(&nf->ctl->flow_gen)) {
			i++;
			continue;
		}
		if (!dead)
			pool_return(mgr, &d->pools[nf->service], nf);
		d->cleaning[i] = d->cleaning[--d->n_cleaning];
	}
}

static uint32_t
spawning_of(const struct mgr *mgr, const struct director *d, uint16_t service)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < d->n_spawning; i++)
		n += mgr->nfs[d->spawning[i]].service == service;
	return n;
}

/* A start that failed (spawn error, or the NF died before it ran its loop):
 * the pool waits restart_backoff_ms, doubling up to restart_backoff_max_ms,
 * before it tries again, instead of every director period. */
static void
spawn_failed(struct mgr *mgr, struct pool *p, uint16_t service, uint64_t now)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[service];

	p->spawn_backoff_ms = p->spawn_backoff_ms == 0 ? RTE_MAX(cs->restart_backoff_ms, 1u)
						       : RTE_MIN(p->spawn_backoff_ms * 2,
								 cs->restart_backoff_max_ms);
	p->spawn_retry_tsc = now + rte_get_tsc_hz() / 1000 * p->spawn_backoff_ms;
	MGR_LOG(WARNING, "%s: pool NF did not start; next try in %u ms\n", cs->name,
		p->spawn_backoff_ms);
}

/* An instance below the service's count that no process holds: one never
 * started, or one the pool retired (it shrank) that the main lcore has
 * reaped and reclaimed, made again. NULL if there is none. */
static struct mgr_nf *
free_slot_nf(struct mgr *mgr, struct pool *p, uint16_t s)
{
	const struct mgr_service *svc = &mgr->services[s];
	uint32_t n = __atomic_load_n(&svc->n_nfs, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < n && i < p->cap; i++) {
		struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

		if (p->slot[i] == SLOT_UNUSED)
			return nf;
		if (p->slot[i] == SLOT_RETIRED &&
		    atomic_load_explicit(&nf->reaped, memory_order_acquire) &&
		    mgr_nfs_setup(mgr, nf->id, s, (uint16_t)i) == 0) {
			nf->ctl->flow_track = 1;
			return nf;
		}
	}
	return NULL;
}

/* Keep each pool at its idle target by starting NFs ahead of demand; they
 * join the pool once they run their loop (checked here, never waited for). */
static void
refill_pools(struct mgr *mgr, struct director *d, uint64_t now)
{
	for (uint32_t i = 0; i < d->n_spawning;) {
		struct mgr_nf *nf = &mgr->nfs[d->spawning[i]];

		if (mgr_nf_is_ready(nf)) {
			nf->ready_tsc = rte_rdtsc();
			atomic_store(&nf->live, true);
			mgr_director_nf_ready(mgr, nf);
			d->pools[nf->service].spawn_backoff_ms = 0;
		} else if (nf->pid > 0) {
			i++;
			continue;
		} else {
			spawn_failed(mgr, &d->pools[nf->service], nf->service, now);
			d->pools[nf->service].slot[nf->instance] = SLOT_UNUSED; /* tried again */
		}
		d->spawning[i] = d->spawning[--d->n_spawning];
	}
	for (uint16_t s = 0; s < mgr->cfg->n_services; s++) {
		struct pool *p = &d->pools[s];
		uint32_t want = mgr->cfg->services[s].pool_idle, spawning;

		struct mgr_nf *nf;

		if (!p->pooled || p->count >= want || now < p->spawn_retry_tsc)
			continue;
		spawning = spawning_of(mgr, d, s);
		if (p->count + spawning >= want)
			continue;
		nf = free_slot_nf(mgr, p, s);
		if (nf == NULL)
			continue; /* every instance the service may have runs */
		if (mgr_nfs_spawn(mgr, nf) == 0) {
			p->slot[nf->instance] = SLOT_STARTED;
			d->spawning[d->n_spawning++] = nf->id;
		} else {
			spawn_failed(mgr, p, s, now);
			p->slot[nf->instance] = SLOT_UNUSED; /* set up: tried again */
		}
	}
}

static void trim_pools(struct mgr *mgr, struct director *d);

unsigned int
mgr_director_poll(struct mgr *mgr)
{
	struct director *d = mgr->dir;
	uint64_t now;

	if (d == NULL)
		return 0;
	/* Every round: an NF back in its pool takes the oldest waiting flow. */
	now = rte_rdtsc();
	if (d->closing_count > 0)
		end_done_flows(mgr, d, now);
	if (unlikely(d->n_waiting > 0))
		drain_waiting(mgr, d);
	if (now < d->next_poll_tsc)
		return 0;
	d->next_poll_tsc = now + d->period_tsc;
	take_rekeys(d);
	sweep_woken(mgr, d);
	expire_flows(mgr, d, now);
	collect_cleaned(mgr, d);
	trim_pools(mgr, d);
	refill_pools(mgr, d, now);
	return 1;
}

bool
mgr_director_busy(const struct mgr *mgr)
{
	const struct director *d = mgr->dir;

	return d != NULL && (d->n_waiting > 0 || d->n_cleaning > 0);
}

void
mgr_director_stats(const struct mgr *mgr, struct director_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (mgr->dir == NULL)
		return;
	*st = mgr->dir->st;
	st->rekeys_lost = atomic_load_explicit(&mgr->dir->rekeys_lost, memory_order_relaxed);
	st->setup = &mgr->dir->setup;
}

void
mgr_director_pool_stats(const struct mgr *mgr, uint16_t service, struct pool_stats *ps)
{
	const struct pool *p;

	memset(ps, 0, sizeof(*ps));
	if (mgr->dir == NULL)
		return;
	p = &mgr->dir->pools[service];
	ps->pooled = p->pooled;
	ps->idle = p->count;
	ps->started = p->started;
	ps->size = __atomic_load_n(&mgr->services[service].n_nfs, __ATOMIC_ACQUIRE);
	ps->assigned = p->assigned;
	ps->empty = p->empty;
	ps->backlogged = p->backlogged;
	ps->retired = p->retired;
	ps->waiting = p->wait.count;
	ps->waiting_max = p->wait.high;
	ps->waited = p->wait.queued;
	ps->wait_dropped = p->wait.dropped;
}

/* ---- run-time changes (mgr/control.c) ---- */

int
mgr_director_prepare(struct mgr *mgr, const struct sq_config *next, const bool *added)
{
	struct director *d = mgr->dir;

	for (uint16_t s = 0; d != NULL && s < next->n_services; s++) {
		const struct mgr_service *svc = &mgr->services[s];
		bool pooled = sq_config_service_pooled(next, s);
		struct pool *p;

		if (!added[s])
			continue;
		p = calloc(1, sizeof(*p));
		if (p == NULL || pool_alloc(p, &next->services[s], svc->cap_nfs, pooled) < 0) {
			if (p != NULL)
				pool_free(p);
			free(p);
			mgr_director_unprepare(mgr);
			return -ENOMEM;
		}
		d->staged[s] = p;
		for (uint32_t i = 0; i < svc->cap_nfs; i++)
			mgr->nfs[svc->first_nf + i].ctl->flow_track = pooled;
	}
	return 0;
}

void
mgr_director_unprepare(struct mgr *mgr)
{
	for (uint16_t s = 0; mgr->dir != NULL && s < SQ_MAX_SERVICES; s++) {
		if (mgr->dir->staged[s] != NULL)
			pool_free(mgr->dir->staged[s]);
		free(mgr->dir->staged[s]);
		mgr->dir->staged[s] = NULL;
	}
}

/* rx lcore, at the switch: an added service's new pool replaces what its
 * slot had (a removed service's); its NFs that run already are idle. */
static void
install_staged(struct mgr *mgr, struct director *d)
{
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++) {
		struct pool *p = &d->pools[s];
		const struct mgr_service *svc = &mgr->services[s];

		if (d->staged[s] == NULL)
			continue;
		pool_free(p);
		*p = *d->staged[s];
		free(d->staged[s]);
		d->staged[s] = NULL;
		publish_pooled(mgr, s);
		for (uint32_t i = 0; i < svc->n_nfs && i < p->cap; i++) {
			struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

			if (!atomic_load_explicit(&nf->live, memory_order_acquire))
				continue;
			p->started = i + 1;
			if (p->pooled) {
				p->slot[i] = SLOT_STARTED;
				pool_push(p, nf->id);
			}
		}
	}
}

void
mgr_director_shrunk(struct mgr *mgr, uint16_t service, bool end_flows)
{
	struct director *d = mgr->dir;

	if (d == NULL)
		return;
	__atomic_store_n(&d->pools[service].end_beyond, end_flows, __ATOMIC_RELEASE);
	__atomic_store_n(&d->pools[service].trim, true, __ATOMIC_RELEASE);
	if (end_flows)
		__atomic_store_n(&d->any_end_beyond, true, __ATOMIC_RELEASE);
}

/* Idle NFs of a pool that shrank below them stop now (busy ones when their
 * flow ends: pool_return). */
static void
trim_pools(struct mgr *mgr, struct director *d)
{
	for (uint16_t s = 0; s < mgr->cfg->n_services; s++) {
		struct pool *p = &d->pools[s];
		uint32_t kept = 0;

		if (!__atomic_exchange_n(&p->trim, false, __ATOMIC_ACQ_REL))
			continue;
		for (uint32_t i = 0; i < p->count; i++) {
			uint32_t id = p->ids[(p->head + i) % p->cap];

			if (beyond(mgr, &mgr->nfs[id]))
				retire_slot(mgr, p, &mgr->nfs[id]);
			else
				p->ids[(p->head + kept++) % p->cap] = id;
		}
		p->count = kept;
	}
}

uint32_t
mgr_director_chain_flows(const struct mgr *mgr, uint16_t chain)
{
	return mgr->dir == NULL
		       ? 0
		       : atomic_load_explicit(&mgr->dir->chain_flows[chain], memory_order_relaxed);
}

bool
mgr_director_has_flow(const struct mgr *mgr, const struct sq_cfg_rule *rule,
		      const struct rte_mbuf *pkt)
{
	struct flow_key k;
	uint8_t flags;
	bool from_lo;
	int pos;

	if (mgr->dir == NULL || !flow_key_of(pkt, rule->chain, &k, &flags, &from_lo))
		return false;
	pos = rte_hash_lookup(mgr->dir->table, &k);
	return pos >= 0 && mgr->dir->flows[pos].state != FLOW_FREE;
}

/* A rule the new config has too, by what it matches and where it sends. */
static int
same_rule_index(const struct sq_config *cfg, const struct sq_cfg_rule *r)
{
	for (uint16_t i = 0; i < cfg->n_rules; i++) {
		const struct sq_cfg_rule *n = &cfg->rules[i];

		if (!n->draining && n->in_port == r->in_port && n->has_dst_mac == r->has_dst_mac &&
		    (!r->has_dst_mac || rte_is_same_ether_addr(&n->dst_mac, &r->dst_mac)) &&
		    n->chain == r->chain && n->out_port == r->out_port && n->assign == r->assign &&
		    n->nf_priority == r->nf_priority)
			return i;
	}
	return -1;
}

/* Packets waiting for an idle NF name their rule by its index: give them the
 * index of the same rule in the new config, or drop them (counted) when
 * their rule is gone. Runs on the rx lcore, between rounds. */
void
mgr_director_rules_changed(struct mgr *mgr, const struct sq_config *old,
			   const struct sq_config *next)
{
	struct director *d = mgr->dir;

	if (d == NULL)
		return;
	for (uint16_t s = 0; s < old->n_services; s++) {
		struct waitq *q = &d->pools[s].wait;
		uint32_t kept = 0, n = q->count;

		for (uint32_t i = 0; i < n; i++) {
			uint32_t from = (q->head + i) % q->cap, to = (q->head + kept) % q->cap;
			int r = same_rule_index(next, &old->rules[q->rules[from]]);

			if (r < 0) {
				mgr_drop(&mgr->rx.stats, SQ_DROP_CONFIG_CHANGED, q->pkts[from]);
				d->n_waiting--;
				continue;
			}
			q->pkts[to] = q->pkts[from];
			q->rules[to] = (uint16_t)r;
			kept++;
		}
		q->count = kept;
	}
	/* A removed service's pool takes no NF back (control stops them). */
	for (uint16_t s = 0; s < old->n_services; s++)
		if (s >= next->n_services || next->services[s].name[0] == '\0')
			d->pools[s].pooled = false;
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++)
		publish_pooled(mgr, s);
	install_staged(mgr, d);
}
