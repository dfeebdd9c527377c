/* SPDX-License-Identifier: BSD-3-Clause
 * The floor under any 1-NF chain fed by a port: what a manager that does
 * nothing but move packets gets through. The parent receives bursts from
 * net_null0, puts them on a ring to a forked no-op process on another core,
 * takes them back from a second ring and sends them to net_null1: no parse,
 * no rule, no counters, no wake. squall-mgr does all of this and more per
 * packet, so its 1-NF chain cannot pass this figure. Prints
 * "mpps <packets sent per second / 1e6> lost <packets the child never
 * returned>".
 *
 *   chain_floor [SECONDS] [MGR_CORE] [NF_CORE] [TOUCH]
 *
 * TOUCH=1 makes the no-op do what libsquall and squall-nf-fwd do at least:
 * read data_len in the mbuf's first line and write a verdict word in the
 * metadata line after it, which the parent reads back.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include "bench_util.h"

#define BURST      32
#define RING_SLOTS 1024 /* squall-mgr's default ring_slots */
#define MBUFS      16383
#define POOL_CACHE 256
#define META_BYTES 64 /* struct sq_pkt_meta, after the mbuf */
#define VERDICT    8  /* its verdict's offset */

struct shared {
	_Atomic int stop;
	_Atomic uint64_t returned;
};

static void
noop_nf(struct rte_ring *rx, struct rte_ring *tx, struct shared *sh, bool touch)
{
	struct rte_mbuf *pkts[BURST];
	uint64_t returned = 0;

	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		unsigned int n = rte_ring_sc_dequeue_burst(rx, (void **)pkts, BURST, NULL);
		unsigned int sent = 0;

		for (unsigned int i = 0; touch && i < n; i++) {
			char *meta = (char *)pkts[i] + sizeof(struct rte_mbuf);

			*(volatile uint32_t *)(meta + VERDICT) = pkts[i]->data_len;
		}
		while (sent < n && !atomic_load_explicit(&sh->stop, memory_order_relaxed))
			sent += rte_ring_sp_enqueue_burst(tx, (void **)(pkts + sent), n - sent,
							  NULL);
		returned += sent;
		if (n == 0)
			rte_pause();
	}
	atomic_store(&sh->returned, returned);
}

static int
port_start(uint16_t port, struct rte_mempool *pool)
{
	struct rte_eth_conf conf = {0};

	if (rte_eth_dev_configure(port, 1, 1, &conf) < 0 ||
	    rte_eth_rx_queue_setup(port, 0, 1024, rte_socket_id(), NULL, pool) < 0 ||
	    rte_eth_tx_queue_setup(port, 0, 1024, rte_socket_id(), NULL) < 0)
		return -1;
	return rte_eth_dev_start(port);
}

/* Receive only what the ring can take: a real NIC drops the rest for free,
 * and the floor must be the best a manager could do. */
static unsigned int
rx_to_ring(struct rte_ring *rx)
{
	struct rte_mbuf *pkts[BURST];
	unsigned int n, sent;

	if (rte_ring_free_count(rx) < BURST)
		return 0;
	n = rte_eth_rx_burst(0, 0, pkts, BURST);
	sent = rte_ring_enqueue_burst(rx, (void **)pkts, n, NULL);
	rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	return sent;
}

static unsigned int
ring_to_tx(struct rte_ring *tx, bool touch)
{
	struct rte_mbuf *pkts[BURST];
	unsigned int n, sent = 0;

	n = rte_ring_sc_dequeue_burst(tx, (void **)pkts, BURST, NULL);
	for (unsigned int i = 0; touch && i < n; i++)
		(void)*(volatile uint32_t *)((char *)pkts[i] + sizeof(struct rte_mbuf) + VERDICT);
	while (sent < n)
		sent += rte_eth_tx_burst(1, 0, pkts + sent, (uint16_t)(n - sent));
	return n;
}

int
main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	int mgr_core = argc > 2 ? atoi(argv[2]) : 0;
	int nf_core = argc > 3 ? atoi(argv[3]) : 1;
	bool touch = argc > 4 && atoi(argv[4]) != 0;
	char lcores[16];
	char *eal[] = {argv[0],
		       "-l",
		       lcores,
		       "--in-memory",
		       "--no-pci",
		       "--vdev",
		       "net_null0,size=64,copy=0",
		       "--vdev",
		       "net_null1,no-rx=1",
		       "--log-level=error"};
	struct rte_mempool *pool;
	struct rte_ring *rx, *tx;
	struct shared *sh;
	uint64_t sent = 0;
	double start;
	pid_t pid;

	snprintf(lcores, sizeof(lcores), "%d", mgr_core);
	if (rte_eal_init((int)RTE_DIM(eal), eal) < 0) {
		fprintf(stderr, "chain_floor: EAL init failed (hugepages?)\n");
		return 1;
	}
	/* Hugepage memory is mapped shared, so the forked child sees the same
	 * pool, rings and flags: the region's arrangement, without libsquall. */
	pool = rte_pktmbuf_pool_create("floor", MBUFS, POOL_CACHE, META_BYTES,
				       RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
	rx = rte_ring_create("floor_rx", RING_SLOTS, rte_socket_id(), RING_F_SC_DEQ);
	tx = rte_ring_create("floor_tx", RING_SLOTS, rte_socket_id(),
			     RING_F_SP_ENQ | RING_F_SC_DEQ);
	sh = rte_zmalloc("floor_sh", sizeof(*sh), RTE_CACHE_LINE_SIZE);
	if (pool == NULL || rx == NULL || tx == NULL || sh == NULL || port_start(0, pool) < 0 ||
	    port_start(1, pool) < 0) {
		fprintf(stderr, "chain_floor: set-up failed\n");
		return 1;
	}
	pid = fork();
	if (pid == 0) {
		pin(nf_core);
		noop_nf(rx, tx, sh, touch);
		_exit(0);
	}
	start = now_s();
	for (uint64_t round = 0;; round++) {
		rx_to_ring(rx);
		sent += ring_to_tx(tx, touch);
		if ((round & 1023) == 0 && now_s() - start > secs)
			break;
	}
	secs = now_s() - start;
	atomic_store(&sh->stop, 1);
	waitpid(pid, NULL, 0);
	/* The child counted every packet it handed back: a figure it never saw
	 * (memory not shared after all) shows here instead of a fake rate. */
	printf("mpps %.3f lost %lld\n", (double)sent / secs / 1e6,
	       (long long)(atomic_load(&sh->returned) - sent - rte_ring_count(tx)));
	rte_eal_cleanup();
	return 0;
}
