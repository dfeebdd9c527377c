/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-cost: burn a fixed number of TSC cycles per packet, for
 * experiments that need an NF of known per-packet cost, and optionally wait
 * a fixed time per packet without the CPU (nf_wait.h: an NF of known
 * capacity per instance). Everything passes on.
 */
#include <getopt.h>
#include <stdio.h>

#include <rte_cycles.h>
#include <rte_pause.h>

#include <squall/squall.h>

#include "../nf_opt.h"
#include "../nf_wait.h"

#define NF_NAME        "squall-nf-cost"
#define CYCLES_DEFAULT 1000
/* About 0.3 s at 3 GHz: a burst of 32 already keeps the NF from its stop
 * flag for ~10 s, which is as far as an experiment should go. */
#define CYCLES_MAX     1000000000ull
#define WAIT_NS_MAX    100000000ull /* 0.1 s a packet */

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--cycles N] [--wait-ns NS]\n"
		   "Spin N TSC cycles on every packet, then pass it on to the next hop.\n"
		   "\n"
		   "  --cycles N      cycles per packet (default " RTE_STR(
			   CYCLES_DEFAULT) ")\n"
					   "  --wait-ns NS    also wait NS per packet, asleep (an "
					   "NF that waits for\n"
					   "                  a device): an instance takes at most "
					   "1e9/NS packets/s\n"
					   "                  and leaves the core to others "
					   "meanwhile (default 0)\n" NF_OPT_COMMON_HELP);
}

struct cost {
	uint64_t cycles;
	struct nf_wait wait;
};

static sq_verdict_t
cost_pkt(struct rte_mbuf *pkt, void *arg)
{
	struct cost *c = arg;
	const uint64_t start_tsc = rte_rdtsc();

	RTE_SET_USED(pkt);
	while (rte_rdtsc() - start_tsc < c->cycles)
		rte_pause();
	nf_wait_pkt(&c->wait);
	return SQ_NEXT;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"cycles", required_argument, NULL, 'c'},
		{"wait-ns", required_argument, NULL, 'w'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct cost c = {.cycles = CYCLES_DEFAULT};
	uint64_t wait_ns = 0;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (nf_opt_u64(NF_NAME, "cycles", optarg, 0, CYCLES_MAX, &c.cycles) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'w':
			if (nf_opt_u64(NF_NAME, "wait-ns", optarg, 0, WAIT_NS_MAX, &wait_ns) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'h': usage(stdout); return NF_EXIT_OK;
		case 0: /* for sq_nf_init() */ break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	ret = nf_opt_check_done(NF_NAME, argc, argv);
	if (ret != 0)
		return ret;

	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	nf_wait_init(&c.wait, wait_ns);
	sq_nf_set_pkt_handler(nf, cost_pkt, &c);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
