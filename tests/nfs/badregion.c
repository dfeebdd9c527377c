/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-badregion, for tests only: a hostile NF. It rewrites one piece
 * of shared state the manager used to trust, then forwards packets as usual:
 *
 *   squall-nf-badregion --corrupt tx_ready_off|core_group|service|mgr_state|rx_ring|tx_ring|rx_tail|woken
 *
 * tx_ready_off  the header's offset of the tx-ready bitmap, to 1 TiB away
 * core_group    its ctl's core group, to 2^31 - 1
 * service       its ctl's service name, 32 bytes with no NUL
 * mgr_state     the header's manager state, to STOPPING (every NF read it)
 * rx_ring       its rx ring's mask, size and positions, so that a producer
 *               trusting them writes 2 GiB past the ring
 * tx_ring       at its first burst, its tx ring's producer position, 2^28
 *               entries ahead of the manager's consumer position
 * rx_tail       at its first burst, its rx ring's producer tail, one behind
 *               the head: a multi-producer enqueue would wait for it forever
 * woken         at its first burst, the header's count of its core's NFs
 *               woken and not yet running, to 2^30 (pool_backlog_max holds
 *               new flows back while it is high)
 *
 * Each is done once, at the NF's first burst (every NF is up by then), but
 * rx_ring: before the NF runs its loop, while its rx ring is still empty.
 */
#include <getopt.h>
#include <string.h>

#include <rte_ring.h>

#include <squall/region.h>
#include <squall/squall.h>

#include "../../nfs/nf_opt.h"

#define NF_NAME "squall-nf-badregion"

enum corruption {
	C_TX_READY_OFF,
	C_CORE_GROUP,
	C_SERVICE,
	C_MGR_STATE,
	C_RX_RING,
	C_TX_RING,
	C_RX_TAIL,
	C_WOKEN,
	C_MAX
};

static const char *const names[C_MAX] = {"tx_ready_off", "core_group", "service", "mgr_state",
					 "rx_ring",      "tx_ring",    "rx_tail", "woken"};

struct bad {
	enum corruption what;
	struct sq_nf *nf;
	bool done;
};

static struct rte_ring *
ring_at(struct sq_nf *nf, uint64_t off)
{
	return sq_region_ptr(sq_nf_region(nf), off);
}

static void
corrupt_now(struct bad *b)
{
	struct sq_region_hdr *hdr = sq_nf_region(b->nf);
	struct sq_nf_ctl *ctl = sq_nf_ctl(b->nf);
	struct rte_ring *r;

	switch (b->what) {
	case C_TX_READY_OFF: hdr->tx_ready_off = 1ull << 40; break;
	case C_CORE_GROUP: ctl->core_group = 0x7fffffff; break;
	case C_SERVICE: memset(ctl->service, 'A', sizeof(ctl->service)); break;
	case C_MGR_STATE: atomic_store(&hdr->mgr_state, SQ_MGR_STOPPING); break;
	case C_RX_RING:
		r = ring_at(b->nf, ctl->rx_ring_off);
		r->mask = 0xffffffffu;
		r->size = 0x80000000u;
		r->capacity = 0x7fffffffu;
		r->prod.head = r->prod.tail = r->cons.head = r->cons.tail = 0x10000000u;
		break;
	case C_TX_RING:
		r = ring_at(b->nf, ctl->tx_ring_off);
		r->prod.head = r->prod.tail = r->prod.tail + 0x10000000u;
		break;
	case C_RX_TAIL:
		r = ring_at(b->nf, ctl->rx_ring_off);
		r->prod.tail = r->prod.head - 1;
		break;
	case C_WOKEN: atomic_store(&hdr->woken[ctl->core_group % SQ_CORE_GROUPS].n, 1 << 30); break;

	default: break;
	}
	b->done = true;
}

static void
handle(struct rte_mbuf **pkts, uint16_t n, void *arg)
{
	struct bad *b = arg;

	(void)pkts;
	(void)n;
	if (!b->done)
		corrupt_now(b);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"corrupt", required_argument, NULL, 'c'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct bad b = {.what = C_MAX};
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			for (b.what = 0; b.what < C_MAX && strcmp(optarg, names[b.what]) != 0;
			     b.what++)
				;
			break;
		case 'h': printf("Usage: " NF_NAME " --corrupt WHAT (tests only)\n"); return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	if (b.what == C_MAX) {
		fprintf(stderr, NF_NAME ": --corrupt tx_ready_off|core_group|service|mgr_state|"
					"rx_ring|tx_ring\n");
		return NF_EXIT_USAGE;
	}
	ret = nf_opt_attach(argc, argv, &b.nf);
	if (ret != 0)
		return ret;
	if (b.what == C_RX_RING)
		corrupt_now(&b);
	sq_nf_set_burst_handler(b.nf, handle, &b);
	return sq_nf_run(b.nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
