/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-cost: burn a fixed number of TSC cycles per packet, for
 * experiments that need an NF of known per-packet cost. Everything passes on.
 */
#include <getopt.h>
#include <stdio.h>

#include <rte_cycles.h>
#include <rte_pause.h>

#include <squall/squall.h>

#include "../nf_opt.h"

#define NF_NAME        "squall-nf-cost"
#define CYCLES_DEFAULT 1000
/* About 0.3 s at 3 GHz: a burst of 32 already keeps the NF from its stop
 * flag for ~10 s, which is as far as an experiment should go. */
#define CYCLES_MAX     1000000000ull

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--cycles N]\n"
		   "Spin N TSC cycles on every packet, then pass it on to the next hop.\n"
		   "\n"
		   "  --cycles N      cycles per packet (default " RTE_STR(
			   CYCLES_DEFAULT) ")\n" NF_OPT_COMMON_HELP);
}

static sq_verdict_t
cost_pkt(struct rte_mbuf *pkt, void *arg)
{
	const uint64_t cycles = *(const uint64_t *)arg;
	const uint64_t start_tsc = rte_rdtsc();

	RTE_SET_USED(pkt);
	while (rte_rdtsc() - start_tsc < cycles)
		rte_pause();
	return SQ_NEXT;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"cycles", required_argument, NULL, 'c'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static uint64_t cycles = CYCLES_DEFAULT;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (nf_opt_u64(NF_NAME, "cycles", optarg, 0, CYCLES_MAX, &cycles) < 0)
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
	sq_nf_set_pkt_handler(nf, cost_pkt, &cycles);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
