/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-flaky, for tests only: an NF that passes packets on (NEXT) until
 * it misbehaves as asked, so the manager's supervision can be tested.
 *
 *   squall-nf-flaky [--crash-if FILE] [--hang-after N] [--hoard-after N]
 *                   [--env-out FILE]
 *
 * --crash-if FILE  exit 3 at start, before attaching, while FILE exists (a
 *                  crash loop the test turns on after the first start)
 * --hang-after N   after N packets, stop returning packets and never leave
 *                  the handler (alive, no progress: the watchdog's case)
 * --env-out FILE   write the environment, one variable a line, at start
 * --hoard-after N  after N packets, take every packet from the rx ring and
 *                  keep it, never returning one (what a broken NF that does
 *                  not use the loop could do: max_outstanding_pkts' case)
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_ring.h>

#include <squall/region.h>
#include <squall/squall.h>

#include "../../nfs/nf_opt.h"

#define NF_NAME "squall-nf-flaky"

extern char **environ;

struct flaky {
	uint64_t seen;
	uint64_t hang_after;  /* 0: never */
	uint64_t hoard_after; /* 0: never */
	struct sq_nf *nf;
};

#define HOARD_MAX (1 << 20)

static void
hoard(struct flaky *f)
{
	static void *kept[HOARD_MAX];
	struct sq_nf_ctl *ctl = sq_nf_ctl(f->nf);
	struct rte_ring *rx = sq_region_ptr(sq_nf_region(f->nf), ctl->rx_ring_off);
	unsigned int n_kept = 0;

	for (;;) {
		unsigned int n = rte_ring_sc_dequeue_burst(rx, kept + n_kept,
							   RTE_MIN(32u, HOARD_MAX - n_kept), NULL);

		n_kept += n;
		ctl->rx_pkts += n;
		if (n == 0)
			usleep(100);
	}
}

static void
handle(struct rte_mbuf **pkts, uint16_t n, void *arg)
{
	struct flaky *f = arg;

	for (uint16_t i = 0; i < n; i++)
		sq_pkt_set_verdict(pkts[i], SQ_NEXT);
	f->seen += n;
	if (f->hoard_after != 0 && f->seen >= f->hoard_after)
		hoard(f);
	if (f->hang_after != 0 && f->seen >= f->hang_after)
		for (;;)
			pause();
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"crash-if", required_argument, NULL, 'c'},
		{"hang-after", required_argument, NULL, 'g'},
		{"env-out", required_argument, NULL, 'e'},
		{"hoard-after", required_argument, NULL, 'o'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct flaky f;
	const char *crash_if = NULL, *env_out = NULL;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': crash_if = optarg; break;
		case 'g': f.hang_after = strtoull(optarg, NULL, 10); break;
		case 'e': env_out = optarg; break;
		case 'o': f.hoard_after = strtoull(optarg, NULL, 10); break;
		case 'h':
			printf("Usage: " NF_NAME " [--crash-if FILE] [--hang-after N] "
			       "[--env-out FILE] (tests only)\n");
			return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	if (crash_if != NULL && access(crash_if, F_OK) == 0)
		return 3;
	if (env_out != NULL) {
		FILE *out = fopen(env_out, "w");

		if (out == NULL)
			return NF_EXIT_FAIL;
		for (char **e = environ; *e != NULL; e++)
			fprintf(out, "%s\n", *e);
		fclose(out);
	}
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	f.nf = nf;
	sq_nf_set_burst_handler(nf, handle, &f);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
