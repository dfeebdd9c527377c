/* SPDX-License-Identifier: BSD-3-Clause
 * The manager's traffic generator, for benchmarks on a machine with no NIC
 * and no spare core: UDP packets of a configured size mix over N flows, paced
 * by the TSC, entering the rx path as if received on a port. Its rate changes
 * at run time (/squall/gen_rate) so a rate search needs no restart. It runs
 * on the rx role's lcore and costs that lcore its cycles: benchmarks say so.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include "mgr.h"

#define GEN_BURST    32
#define GEN_RATE_MAX UINT64_MAX

struct gen {
	const struct sq_cfg_gen *cfg;
	_Atomic uint64_t rate_req; /* telemetry writes */
	uint64_t rate_pps;         /* what the pacing uses */
	uint64_t epoch_tsc;        /* pacing restarts here at every rate change */
	uint64_t epoch_sent;
	uint32_t next_size;
	uint32_t next_flow;
	struct rte_ether_addr dst, src;
	/* written by the rx lcore, read by telemetry */
	uint64_t sent_pkts;
	uint64_t sent_bytes;
	uint64_t alloc_fail;
	uint64_t lag_pkts;    /* due by the rate but not sent yet */
	uint64_t missed_pkts; /* held (rx_backpressure) past the port's rx_desc: lost */
	/* TCP mode: per concurrent flow slot, the connection and its next packet */
	uint32_t *slot_conn;
	uint16_t *slot_step;
	uint16_t *slot_wait; /* tcp_start staggered: rounds a slot sits out first */
	uint32_t next_conn;
	uint64_t conns_started;
};

static void stagger(struct gen *g);

static void
gen_init_one(struct mgr *mgr, struct gen *g, const struct sq_cfg_gen *cfg)
{
	g->cfg = cfg;
	g->rate_pps = cfg->rate_pps;
	atomic_store(&g->rate_req, cfg->rate_pps);
	g->epoch_tsc = rte_rdtsc();
	if (cfg->has_dst_mac)
		g->dst = cfg->dst_mac;
	else
		g->dst = (struct rte_ether_addr){{0x02, 0, 0, 0, 0, 0x01}};
	g->src = (struct rte_ether_addr){{0x02, 0, 0, 0, 0, 0xfe}};
	if (cfg->tcp_flow_pkts > 0) {
		g->slot_conn = calloc(cfg->flows, sizeof(*g->slot_conn));
		g->slot_step = calloc(cfg->flows, sizeof(*g->slot_step));
		if (cfg->tcp_staggered) {
			g->slot_wait = calloc(cfg->flows, sizeof(*g->slot_wait));
			stagger(g);
		}
	}
	MGR_LOG(NOTICE, "generator on port %s: %" PRIu64 " pps, %u sizes, %u flows\n",
		mgr->cfg->ports[cfg->port].name, cfg->rate_pps, cfg->n_sizes, cfg->flows);
}

int
mgr_gen_init(struct mgr *mgr)
{
	if (mgr->cfg->n_gens == 0)
		return 0;
	mgr->gens = calloc(mgr->cfg->n_gens, sizeof(*mgr->gens));
	if (mgr->gens == NULL)
		return -ENOMEM;
	mgr->n_gens = mgr->cfg->n_gens;
	for (uint16_t i = 0; i < mgr->cfg->n_gens; i++) {
		gen_init_one(mgr, &mgr->gens[i], &mgr->cfg->gens[i]);
		if (mgr->cfg->gens[i].tcp_flow_pkts > 0 &&
		    (mgr->gens[i].slot_conn == NULL || mgr->gens[i].slot_step == NULL ||
		     (mgr->gens[i].cfg->tcp_staggered && mgr->gens[i].slot_wait == NULL)))
			return -ENOMEM;
	}
	atomic_store_explicit(&mgr->gens_ready, true, memory_order_release);
	return 0;
}

void
mgr_gen_free(struct mgr *mgr)
{
	atomic_store(&mgr->gens_ready, false);
	for (uint16_t i = 0; i < mgr->n_gens; i++) {
		free(mgr->gens[i].slot_conn);
		free(mgr->gens[i].slot_step);
		free(mgr->gens[i].slot_wait);
	}
	free(mgr->gens);
	mgr->gens = NULL;
	mgr->n_gens = 0;
}

int
mgr_gen_find(const struct mgr *mgr, const char *port)
{
	if (port == NULL || *port == '\0')
		return mgr->n_gens > 0 ? 0 : -ENOENT;
	for (uint16_t i = 0; i < mgr->n_gens; i++)
		if (strcmp(mgr->cfg->ports[mgr->gens[i].cfg->port].name, port) == 0)
			return i;
	return -ENOENT;
}

void
mgr_gen_set_rate(struct mgr *mgr, int idx, uint64_t rate_pps)
{
	if (idx >= 0 && idx < mgr->n_gens)
		atomic_store(&mgr->gens[idx].rate_req, rate_pps);
}

bool
mgr_gen_busy(const struct mgr *mgr)
{
	for (uint16_t i = 0; i < mgr->n_gens; i++)
		if (atomic_load_explicit(&mgr->gens[i].rate_req, memory_order_relaxed) != 0)
			return true;
	return false;
}

void
mgr_gen_stats(const struct mgr *mgr, int idx, struct gen_stats *st)
{
	const struct gen *g;

	memset(st, 0, sizeof(*st));
	if (idx < 0 || idx >= mgr->n_gens)
		return;
	g = &mgr->gens[idx];
	st->rate_pps = atomic_load(&((struct gen *)(uintptr_t)g)->rate_req);
	st->sent_pkts = g->sent_pkts;
	st->sent_bytes = g->sent_bytes;
	st->alloc_fail = g->alloc_fail;
	st->lag_pkts = g->lag_pkts;
	st->missed_pkts = g->missed_pkts;
	st->conns_started = g->conns_started;
}

/* Flow i: client 10.1.x.y (x.y from i / 60000), port 1024 + i % 60000, so
 * each flow is its own 5-tuple; server 10.2.0.1 port 9. */
static struct rte_ipv4_hdr *
fill_ipv4(struct gen *g, struct rte_mbuf *m, uint16_t size, uint32_t flow, uint8_t proto,
	  bool reply)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint32_t client = RTE_IPV4(10, 1, (flow / 60000 >> 8) & 0xff, (flow / 60000) & 0xff);
	uint32_t server = RTE_IPV4(10, 2, 0, 1);

	if (proto == IPPROTO_UDP) /* the UDP mode cycles few flows: vary the address */
		client = RTE_IPV4(10, 1, (flow >> 8) & 0xff, flow & 0xff);
	eth->dst_addr = g->dst;
	eth->src_addr = g->src;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	*ip = (struct rte_ipv4_hdr){
		.version_ihl = RTE_IPV4_VHL_DEF,
		.total_length = rte_cpu_to_be_16((uint16_t)(size - sizeof(*eth))),
		.time_to_live = 64,
		.next_proto_id = proto,
		.src_addr = rte_cpu_to_be_32(reply ? server : client),
		.dst_addr = rte_cpu_to_be_32(reply ? client : server),
	};
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	m->data_len = size;
	m->pkt_len = size;
	return ip;
}

/* UDP: flow i of the cycle. The payload is left as the buffer was. */
static void
fill_udp(struct gen *g, struct rte_mbuf *m, uint16_t size, uint32_t flow)
{
	struct rte_ipv4_hdr *ip = fill_ipv4(g, m, size, flow, IPPROTO_UDP, false);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);

	*udp = (struct rte_udp_hdr){
		.src_port = rte_cpu_to_be_16((uint16_t)(1024 + flow % 60000)),
		.dst_port = rte_cpu_to_be_16(9),
		.dgram_len = rte_cpu_to_be_16(
			(uint16_t)(size - sizeof(struct rte_ether_hdr) - sizeof(*ip))),
	};
}

/* TCP: packet `step` of connection `conn`, K packets in all: SYN, K - 3 data
 * segments, the client's FIN, the server's FIN (a short connection as the
 * director sees it: a new flow, then closed both ways). */
static void
fill_tcp(struct gen *g, struct rte_mbuf *m, uint16_t size, uint32_t conn, uint16_t step)
{
	uint16_t k = g->cfg->tcp_flow_pkts;
	bool reply = step == k - 1;
	struct rte_ipv4_hdr *ip;
	struct rte_tcp_hdr *tcp;
	uint16_t cport = (uint16_t)(1024 + conn % 60000);

	if (step == 0 || step >= k - 2)
		size = 60; /* SYN and FIN: no payload */
	ip = fill_ipv4(g, m, size, conn, IPPROTO_TCP, reply);
	tcp = (struct rte_tcp_hdr *)(ip + 1);
	*tcp = (struct rte_tcp_hdr){
		.src_port = rte_cpu_to_be_16(reply ? 9 : cport),
		.dst_port = rte_cpu_to_be_16(reply ? cport : 9),
		.sent_seq = rte_cpu_to_be_32(step),
		.data_off = (sizeof(*tcp) / 4) << 4,
		.tcp_flags = step == 0       ? RTE_TCP_SYN_FLAG
			     : step >= k - 2 ? (RTE_TCP_FIN_FLAG | RTE_TCP_ACK_FLAG)
					     : (RTE_TCP_PSH_FLAG | RTE_TCP_ACK_FLAG),
		.rx_win = rte_cpu_to_be_16(65535),
	};
}

/* tcp_start: staggered. Slot i sits out i x K / flows rounds before its
 * first connection: the slots then end and start connections at different
 * times, and new connections come at an even rate, flows / K a round, as
 * from independent clients, not in a wave of all slots every K rounds. */
static void
stagger(struct gen *g)
{
	if (g->slot_wait == NULL)
		return;
	for (uint32_t i = 0; i < g->cfg->flows; i++)
		g->slot_wait[i] = (uint16_t)((uint64_t)i * g->cfg->tcp_flow_pkts / g->cfg->flows);
}

static void
fill_next(struct gen *g, struct rte_mbuf *m, uint16_t size)
{
	uint32_t slot;

	/* (slot 0 never waits: this ends) */
	while (g->slot_wait != NULL && g->slot_wait[g->next_flow] > 0) {
		g->slot_wait[g->next_flow]--;
		if (++g->next_flow == g->cfg->flows)
			g->next_flow = 0;
	}
	slot = g->next_flow;

	if (g->cfg->tcp_flow_pkts == 0) {
		fill_udp(g, m, size, slot);
		return;
	}
	if (g->slot_step[slot] == 0) {
		g->slot_conn[slot] = g->next_conn++;
		g->conns_started++;
	}
	fill_tcp(g, m, size, g->slot_conn[slot], g->slot_step[slot]);
	if (++g->slot_step[slot] == g->cfg->tcp_flow_pkts)
		g->slot_step[slot] = 0;
}

/* How many packets the pacing allows now: rate x time since the epoch, less
 * what was sent since; at most one burst, so a late poll does not flood. */
static unsigned int
pkts_due(struct gen *g, uint64_t now_tsc)
{
	uint64_t want = atomic_load_explicit(&g->rate_req, memory_order_relaxed);
	uint64_t due;

	if (want != g->rate_pps) {
		/* Resumed after a pause: the connections it cut short ended (idle)
		 * meanwhile, so their tails would be strays. Start new ones. */
		if (g->rate_pps == 0 && g->slot_step != NULL) {
			memset(g->slot_step, 0, g->cfg->flows * sizeof(*g->slot_step));
			stagger(g);
		}
		g->rate_pps = want;
		g->epoch_tsc = now_tsc;
		g->epoch_sent = g->sent_pkts;
	}
	if (g->rate_pps == 0)
		return 0;
	if (g->rate_pps == GEN_RATE_MAX)
		return GEN_BURST;
	due = (uint64_t)((double)(now_tsc - g->epoch_tsc) * (double)g->rate_pps /
			 (double)rte_get_tsc_hz());
	due -= RTE_MIN(due, g->sent_pkts - g->epoch_sent);
	/* More than a burst due: the lcore cannot keep the rate. Say how far
	 * behind, so a rate search sees an offered load it did not get. */
	g->lag_pkts = due > GEN_BURST ? due - GEN_BURST : 0;
	return (unsigned int)RTE_MIN(due, (uint64_t)GEN_BURST);
}

/* rx_backpressure let rx take only @p room of the @p n packets due now
 * (0: it holds the port). The rest waits, as it would in a port's rx
 * descriptors, and what they could not hold is missed, as a NIC counts it
 * (the port's rx_eth_missed: never received, so in no drop count).
 * Offered all the same: counted sent, so a rate search that adds
 * missed_pkts to the drops sees the loss. @return how many to send now. */
static unsigned int
hold_due(struct mgr *mgr, struct gen *g, unsigned int n, unsigned int room)
{
	uint64_t desc = mgr->cfg->ports[g->cfg->port].rx_desc;
	uint64_t left = n - room + g->lag_pkts;

	if (g->rate_pps != GEN_RATE_MAX && left > desc) {
		g->sent_pkts += left - desc;
		g->missed_pkts += left - desc;
		mgr->ports[g->cfg->port].gen_missed += left - desc;
		g->lag_pkts = desc; /* what waits */
	}
	return room;
}

static unsigned int
gen_poll_one(struct mgr *mgr, struct gen *g, unsigned int room, mgr_gen_sink_fn *sink)
{
	struct rte_mbuf *pkts[GEN_BURST];
	unsigned int n = pkts_due(g, rte_rdtsc());
	uint64_t bytes = 0;

	if (unlikely(n > room))
		n = hold_due(mgr, g, n, room);
	if (n == 0)
		return 0;
	if (rte_pktmbuf_alloc_bulk(mgr->pool, pkts, n) != 0) {
		g->alloc_fail++;
		return 0;
	}
	for (unsigned int i = 0; i < n; i++) {
		/* RFC 2544 sizes count the FCS, which no port here appends. */
		uint16_t size = (uint16_t)(g->cfg->sizes[g->next_size] - RTE_ETHER_CRC_LEN);

		fill_next(g, pkts[i], size);
		bytes += size;
		if (++g->next_size == g->cfg->n_sizes)
			g->next_size = 0;
		if (++g->next_flow == g->cfg->flows)
			g->next_flow = 0;
	}
	g->sent_pkts += n;
	g->sent_bytes += bytes;
	sink(mgr, g->cfg->port, pkts, (uint16_t)n);
	return n;
}

unsigned int
mgr_gen_poll(struct mgr *mgr, const uint16_t *room, mgr_gen_sink_fn *sink)
{
	unsigned int n = 0;

	for (uint16_t i = 0; i < mgr->n_gens; i++)
		n += gen_poll_one(mgr, &mgr->gens[i], room[mgr->gens[i].cfg->port], sink);
	return n;
}
