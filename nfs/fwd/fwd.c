/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-fwd: pass every packet on, optionally rewriting its Ethernet
 * addresses or sending it straight out of a port.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include <rte_ether.h>
#include <rte_mbuf.h>

#include <squall/squall.h>

#include "../nf_opt.h"

#define NF_NAME "squall-nf-fwd"

struct fwd {
	struct rte_ether_addr dst_mac;
	struct rte_ether_addr src_mac;
	bool set_dst;
	bool set_src;
	sq_verdict_t verdict;
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--dst-mac MAC] [--src-mac MAC] [--out PORT]\n"
		   "Pass every packet on to the next hop of its chain. Packets shorter\n"
		   "than an Ethernet header (14 B) pass unchanged.\n"
		   "\n"
		   "  --dst-mac MAC   rewrite the destination address (XX:XX:XX:XX:XX:XX)\n"
		   "  --src-mac MAC   rewrite the source address\n"
		   "  --out PORT      transmit on port PORT (its index in the config's port\n"
		   "                  list) instead of going to the next hop\n" NF_OPT_COMMON_HELP);
}

static int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* rte_ether_unformat_addr() is in librte_net, which an NF does not link. */
static int
parse_mac(const char *s, struct rte_ether_addr *mac)
{
	int i, hi, lo;

	for (i = 0; i < RTE_ETHER_ADDR_LEN; i++) {
		if (i > 0 && *s++ != ':')
			return -EINVAL;
		hi = hex_digit(s[0]);
		if (hi < 0)
			return -EINVAL;
		lo = hex_digit(s[1]);
		if (lo < 0)
			return -EINVAL;
		mac->addr_bytes[i] = (uint8_t)(hi << 4 | lo);
		s += 2;
	}
	return *s == '\0' ? 0 : -EINVAL;
}

static sq_verdict_t
fwd_pkt(struct rte_mbuf *pkt, void *arg)
{
	const struct fwd *fwd = arg;
	struct rte_ether_hdr *eth;

	if (unlikely(rte_pktmbuf_data_len(pkt) < sizeof(*eth)))
		return fwd->verdict;
	eth = rte_pktmbuf_mtod(pkt, struct rte_ether_hdr *);
	if (fwd->set_dst)
		rte_ether_addr_copy(&fwd->dst_mac, &eth->dst_addr);
	if (fwd->set_src)
		rte_ether_addr_copy(&fwd->src_mac, &eth->src_addr);
	return fwd->verdict;
}

/* Rewriting nothing, fwd reads no packet: the verdict is all it writes.
 * The burst handler with no prefetch spares libsquall's fetch of each
 * packet's header and data lines, and the per-packet call: in a 10-NF
 * chain on one core (chain_length) with 8 forwarders, that raised what the
 * chain carries by a fifth (docs/bench.md). */
static void
fwd_burst(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg)
{
	const struct fwd *fwd = arg;
	uint16_t i;

	if (fwd->verdict == SQ_NEXT)
		return; /* libsquall set NEXT on each before the call */
	for (i = 0; i < n_pkts; i++)
		sq_pkt_set_verdict(pkts[i], fwd->verdict);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"dst-mac", required_argument, NULL, 'd'},
		{"src-mac", required_argument, NULL, 's'},
		{"out", required_argument, NULL, 'o'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	struct fwd fwd = {.verdict = SQ_NEXT};
	bool has_out = false;
	uint64_t port = 0;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
		case 's':
			if (parse_mac(optarg, opt == 'd' ? &fwd.dst_mac : &fwd.src_mac) < 0) {
				fprintf(stderr,
					NF_NAME ": --%s: expected XX:XX:XX:XX:XX:XX, got \"%s\"\n",
					opt == 'd' ? "dst-mac" : "src-mac", optarg);
				return NF_EXIT_USAGE;
			}
			if (opt == 'd')
				fwd.set_dst = true;
			else
				fwd.set_src = true;
			break;
		case 'o':
			if (nf_opt_u64(NF_NAME, "out", optarg, 0, UINT16_MAX, &port) < 0)
				return NF_EXIT_USAGE;
			has_out = true;
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
	if (has_out) {
		/* Only the region knows how many ports there are. */
		if (port >= sq_nf_region(nf)->n_ports) {
			fprintf(stderr, NF_NAME ": --out %" PRIu64 ": the manager has %u ports\n",
				port, sq_nf_region(nf)->n_ports);
			return NF_EXIT_USAGE;
		}
		fwd.verdict = sq_out((uint16_t)port);
	}
	if (fwd.set_dst || fwd.set_src) {
		sq_nf_set_pkt_handler(nf, fwd_pkt, &fwd);
	} else {
		sq_nf_set_burst_handler(nf, fwd_burst, &fwd);
		sq_nf_set_prefetch(nf, 0);
	}
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
