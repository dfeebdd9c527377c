/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-baddesc, for tests only: an NF that hands the manager back what
 * it must not, as a buggy or hostile NF in shared mode can. Every 4th packet
 * (the 1st, 5th, ...) is misused; the others pass untouched.
 *
 *   squall-nf-baddesc --misuse foreign|misaligned|double|mangle|lengths|loop
 *
 * foreign: a pointer to memory of its own instead of the packet (which it
 * keeps); misaligned: the packet's address plus 64; double: the packet in
 * its own slot and again in the next one (whose packet it keeps); mangle:
 * every header field the manager and the PMDs rely on scribbled over
 * (buf_addr, buf_len, pool, next, nb_segs, refcnt), lengths kept; lengths:
 * data_len past the buffer; loop: a chain's (a jumbo frame's) last segment
 * linked back to its first.
 */
#include <getopt.h>
#include <string.h>

#include <squall/squall.h>

#include "../../nfs/nf_opt.h"

#define NF_NAME "squall-nf-baddesc"

enum misuse { M_FOREIGN, M_MISALIGNED, M_DOUBLE, M_MANGLE, M_LENGTHS, M_LOOP, M_MAX };

static const char *const names[M_MAX] = {"foreign", "misaligned", "double",
					 "mangle",  "lengths",    "loop"};

/* Big enough for the library's write of nf_visits into "its" metadata. */
static uint8_t fake[4096] __rte_cache_aligned;
static uint64_t seen;

static void
mangle(struct rte_mbuf *m)
{
	m->buf_addr = (char *)m->buf_addr + 128;
	m->buf_len = 7;
	m->pool = (struct rte_mempool *)(uintptr_t)0xdead0000;
	m->next = (struct rte_mbuf *)(uintptr_t)0xbeef0000;
	m->nb_segs = 9;
	rte_mbuf_refcnt_set(m, 3);
}

static void
loop(struct rte_mbuf *m)
{
	struct rte_mbuf *s = m;

	while (s->next != NULL)
		s = s->next;
	s->next = m;
}

static void
misuse(struct rte_mbuf **pkts, uint16_t n, void *arg)
{
	const enum misuse *what = arg;

	for (uint16_t i = 0; i < n; i++) {
		if (seen++ % 4 != 0)
			continue;
		switch (*what) {
		case M_FOREIGN: pkts[i] = (struct rte_mbuf *)fake; break;
		case M_MISALIGNED: pkts[i] = (struct rte_mbuf *)((char *)pkts[i] + 64); break;
		case M_DOUBLE:
			if (i + 1 < n) {
				pkts[i + 1] = pkts[i];
				seen++;
				i++;
			}
			break;
		case M_MANGLE: mangle(pkts[i]); break;
		case M_LENGTHS: pkts[i]->data_len = 65000; break;
		case M_LOOP: loop(pkts[i]); break;
		default: break;
		}
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"misuse", required_argument, NULL, 'm'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static enum misuse what = M_MAX;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			for (what = 0; what < M_MAX && strcmp(optarg, names[what]) != 0; what++)
				;
			break;
		case 'h': printf("Usage: " NF_NAME " --misuse WHAT (tests only)\n"); return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	if (what == M_MAX) {
		fprintf(stderr,
			NF_NAME ": --misuse foreign|misaligned|double|mangle|lengths|loop\n");
		return NF_EXIT_USAGE;
	}
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	sq_nf_set_burst_handler(nf, misuse, &what);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
