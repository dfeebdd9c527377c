/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-badmeta, for tests only: a broken NF. It overwrites one field of
 * every packet's metadata with a value out of range, as a stray write in a
 * buggy NF would, and passes the packet on. The manager indexes its tables
 * with these fields: it must count such packets as dropped, never crash.
 *
 *   squall-nf-badmeta --corrupt chain|hop|flow_id|out_port|hop_back|
 *                               verdict_port|verdict_service|verdict_kind
 *
 * hop_back sets the hop to 0: at the second hop of a chain, every NEXT sends
 * the packet back to this NF, a loop the hop limit must end. The verdict_*
 * ones leave the fields alone and give a verdict that names no port (port
 * 9), no service (service 500), or no kind of verdict at all.
 */
#include <getopt.h>
#include <string.h>

#include <squall/squall.h>

#include "../../nfs/nf_opt.h"

#define NF_NAME "squall-nf-badmeta"

enum corruption {
	C_CHAIN,
	C_HOP,
	C_FLOW_ID,
	C_OUT_PORT,
	C_HOP_BACK,
	C_VERDICT_PORT,
	C_VERDICT_SERVICE,
	C_VERDICT_KIND,
	C_MAX
};

static const char *const names[C_MAX] = {
	"chain",    "hop",          "flow_id",         "out_port",
	"hop_back", "verdict_port", "verdict_service", "verdict_kind",
};

static void
corrupt(struct rte_mbuf **pkts, uint16_t n, void *arg)
{
	const enum corruption *what = arg;

	for (uint16_t i = 0; i < n; i++) {
		struct sq_pkt_meta *m = sq_pkt_meta(pkts[i]);

		switch (*what) {
		case C_CHAIN: m->chain = 5000; break;
		case C_HOP: m->hop = 200; break;
		case C_FLOW_ID: m->flow_id = 0xfffffff0u; break;
		case C_OUT_PORT: m->out_port = 9; break; /* past the ports, within 16 */
		case C_HOP_BACK: m->hop = 0; break;
		case C_VERDICT_PORT: sq_pkt_set_verdict(pkts[i], sq_out(9)); break;
		case C_VERDICT_SERVICE: sq_pkt_set_verdict(pkts[i], sq_to(500)); break;
		case C_VERDICT_KIND: sq_pkt_set_verdict(pkts[i], (sq_verdict_t)0x7f << 16); break;
		default: break;
		}
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"corrupt", required_argument, NULL, 'c'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static enum corruption what = C_MAX;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			for (what = 0; what < C_MAX && strcmp(optarg, names[what]) != 0; what++)
				;
			break;
		case 'h': printf("Usage: " NF_NAME " --corrupt WHAT (tests only)\n"); return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	if (what == C_MAX) {
		fprintf(stderr, NF_NAME ": --corrupt chain|hop|flow_id|out_port|hop_back|"
					"verdict_port|verdict_service|verdict_kind\n");
		return NF_EXIT_USAGE;
	}
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	sq_nf_set_burst_handler(nf, corrupt, &what);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
