/* my_nf: drop IPv4 packets whose TTL is below --min-ttl N, pass the rest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ether.h>
#include <rte_ip.h>

#include <squall/squall.h>

static struct sq_nf *nf;
static int low_ttl_ctr;
static unsigned long min_ttl = 1;

static sq_verdict_t
handle(struct rte_mbuf *pkt, void *arg)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(pkt, struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eth + 1);

	RTE_SET_USED(arg);
	if (rte_pktmbuf_data_len(pkt) < sizeof(*eth) + sizeof(*ip) ||
	    eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) || ip->time_to_live >= min_ttl)
		return SQ_NEXT;
	sq_nf_counter_add(nf, low_ttl_ctr, 1);
	return SQ_DROP; /* squall-mgr frees it; never rte_pktmbuf_free() in an NF */
}

int
main(int argc, char **argv)
{
	int ret = sq_nf_init(argc, argv, &nf); /* takes --sq-region/--sq-id out of argv */
	char *end = NULL;

	if (ret < 0)
		return ret == -EINVAL ? 2 : 1;
	argc -= ret;
	if (argc == 3 && strcmp(argv[1], "--min-ttl") == 0)
		min_ttl = strtoul(argv[2], &end, 10);
	if (argc != 1 && (end == NULL || *end != '\0' || end == argv[2] || min_ttl > 255)) {
		fprintf(stderr, "usage: my_nf [--min-ttl 0-255]\n");
		return 2;
	}
	low_ttl_ctr = sq_nf_counter_register(nf, "low_ttl");
	sq_nf_set_pkt_handler(nf, handle, NULL);
	return sq_nf_run(nf) < 0 ? 1 : 0;
}
