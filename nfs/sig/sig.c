/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-sig: the signature NF of seed 004. Each instance hashes the first
 * 64 bytes of every packet (FNV-1a, 32 bit) and keeps counters that let a test
 * prove each packet crossed each NF exactly once, unchanged:
 *
 *   sig_pkts      packets seen
 *   sig_sum       sum of the signatures (uint64, wraps); a test computes the
 *                 same sum over its input pcap
 *   sig_mismatch  the packet's bytes changed since the first sig hop stored
 *                 its signature in the packet metadata
 *   sig_revisit   this instance had already seen the packet: bit (NF id % 64)
 *                 of meta->user[0] was set
 *   sig_flow_mixed  (a per-flow NF) a packet of another flow than the one the
 *                 NF's state holds, with no state cleanup in between
 *
 * Everything passes on (NEXT). Uses meta->sig and meta->user[0], so it relies
 * on the manager zeroing both at rx, and on no other NF in the chain using
 * user[0].
 */
#include <getopt.h>
#include <stdio.h>

#include <rte_common.h>
#include <rte_mbuf.h>

#include <squall/squall.h>

#include "../nf_opt.h"

#define NF_NAME            "squall-nf-sig"
#define SIG_BYTES          64
#define FNV1A_OFFSET_BASIS 2166136261u
#define FNV1A_PRIME        16777619u

struct sig {
	struct sq_nf *nf;
	uint64_t seen_bit; /* this instance's bit in meta->user[0] */
	int pkts_idx;
	int sum_idx;
	int mismatch_idx;
	int revisit_idx;
	int mixed_idx;
	bool per_flow; /* the manager gives this NF one flow at a time */
	bool flow_set; /* per-flow state: the flow's hash, until cleaned up */
	uint32_t flow_hash;
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME "\n"
		   "Hash the first 64 B of each packet (FNV-1a 32) and count, in NF counters:\n"
		   "sig_pkts, sig_sum (sum of the hashes), sig_mismatch (packet changed since\n"
		   "the first sig hop), sig_revisit (packet seen twice by this instance),\n"
		   "sig_flow_mixed (per-flow NF: another flow's packet before a cleanup).\n"
		   "Every packet passes on to the next hop.\n"
		   "\n" NF_OPT_COMMON_HELP);
}

static inline uint32_t
fnv1a32(const uint8_t *data, uint32_t len)
{
	uint32_t hash = FNV1A_OFFSET_BASIS;
	uint32_t i;

	for (i = 0; i < len; i++) {
		hash ^= data[i];
		hash *= FNV1A_PRIME;
	}
	return hash;
}

/* A burst handler so the four counters are written once per burst. */
static void
sig_burst(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg)
{
	struct sig *sig = arg;
	uint64_t sum = 0, mismatch = 0, revisit = 0, mixed = 0;
	uint16_t i;

	for (i = 0; i < n_pkts; i++) {
		struct sq_pkt_meta *meta = sq_pkt_meta(pkts[i]);
		uint32_t len = RTE_MIN(rte_pktmbuf_data_len(pkts[i]), SIG_BYTES);
		uint32_t hash = fnv1a32(rte_pktmbuf_mtod(pkts[i], const uint8_t *), len);

		sum += hash;
		if (meta->sig == 0)
			meta->sig = hash;
		else if (meta->sig != hash)
			mismatch++;
		if (meta->user[0] & sig->seen_bit)
			revisit++;
		else
			meta->user[0] |= sig->seen_bit;
		if (sig->per_flow && sig->flow_set && meta->flow_hash != sig->flow_hash)
			mixed++;
		sig->flow_set = true;
		sig->flow_hash = meta->flow_hash;
	}
	sq_nf_counter_add(sig->nf, sig->pkts_idx, n_pkts);
	sq_nf_counter_add(sig->nf, sig->sum_idx, sum);
	if (mismatch != 0)
		sq_nf_counter_add(sig->nf, sig->mismatch_idx, mismatch);
	if (revisit != 0)
		sq_nf_counter_add(sig->nf, sig->revisit_idx, revisit);
	if (mixed != 0)
		sq_nf_counter_add(sig->nf, sig->mixed_idx, mixed);
}

/* A per-flow NF's flow ended: its state goes. */
static void
sig_clean(void *arg)
{
	struct sig *sig = arg;

	sig->flow_set = false;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct sig sig;
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
	sig.nf = nf;
	sig.seen_bit = UINT64_C(1) << (sq_nf_ctl(nf)->id % 64);
	/* Tests look these up by name; the order is part of the interface too. */
	sig.pkts_idx = sq_nf_counter_register(nf, "sig_pkts");
	sig.sum_idx = sq_nf_counter_register(nf, "sig_sum");
	sig.mismatch_idx = sq_nf_counter_register(nf, "sig_mismatch");
	sig.revisit_idx = sq_nf_counter_register(nf, "sig_revisit");
	sig.mixed_idx = sq_nf_counter_register(nf, "sig_flow_mixed");
	sig.per_flow = sq_nf_ctl(nf)->flow_track != 0;

	sq_nf_set_burst_handler(nf, sig_burst, &sig);
	sq_nf_set_state_cleaner(nf, sig_clean, &sig);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
