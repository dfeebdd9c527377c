/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-drop: drop every packet, or every Nth one and pass the rest.
 * libsquall counts the DROP verdicts (drop_verdicts in the NF's control
 * block); the manager frees the packets.
 */
#include <getopt.h>
#include <stdio.h>

#include <squall/squall.h>

#include "../nf_opt.h"

#define NF_NAME "squall-nf-drop"

struct drop {
	uint64_t every; /* drop packets every, 2 * every, ...; 1: all */
	uint64_t since; /* packets since the last drop */
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--every N]\n"
		   "Drop every packet.\n"
		   "\n"
		   "  --every N       drop only every Nth packet (the Nth, the 2Nth, ...)\n"
		   "                  and pass the others on to the next hop (default "
		   "1)\n" NF_OPT_COMMON_HELP);
}

static sq_verdict_t
drop_pkt(struct rte_mbuf *pkt, void *arg)
{
	struct drop *drop = arg;

	RTE_SET_USED(pkt);
	if (++drop->since < drop->every)
		return SQ_NEXT;
	drop->since = 0;
	return SQ_DROP;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"every", required_argument, NULL, 'e'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct drop drop = {.every = 1};
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'e':
			if (nf_opt_u64(NF_NAME, "every", optarg, 1, UINT64_MAX, &drop.every) < 0)
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
	sq_nf_set_pkt_handler(nf, drop_pkt, &drop);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
