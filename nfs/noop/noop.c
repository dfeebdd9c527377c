/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-noop: the cheapest NF. Its burst handler does nothing, so every
 * packet keeps the NEXT verdict libsquall sets before the call; what it
 * measures is the framework's own per-packet cost.
 */
#include <getopt.h>
#include <stdio.h>

#include <squall/squall.h>

#include "../nf_opt.h"

#define NF_NAME "squall-nf-noop"

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME "\n"
		   "Pass every packet on to the next hop, touching nothing.\n"
		   "\n" NF_OPT_COMMON_HELP);
}

static void
noop_burst(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg)
{
	RTE_SET_USED(pkts);
	RTE_SET_USED(n_pkts);
	RTE_SET_USED(arg);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
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
	sq_nf_set_burst_handler(nf, noop_burst, NULL);
	sq_nf_set_prefetch(nf, 0); /* it reads no packet */
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
