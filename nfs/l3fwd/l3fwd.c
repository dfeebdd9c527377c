/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-l3fwd: an IPv4 and IPv6 router. Longest-prefix match on the
 * destination address (lpm.h, its own small tables, one per family:
 * rte_lpm and rte_lpm6 need EAL), the TTL (IPv4, the header checksum
 * patched) or hop limit (IPv6, which has no header checksum) decremented,
 * then out of the route's port.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <squall/log.h>
#include <squall/squall.h>

#include "../nf_opt.h"
#include "lpm.h"
#include "ttl.h"

#define NF_NAME "squall-nf-l3fwd"

struct l3fwd {
	struct sq_nf *nf;
	struct lpm lpm;  /* IPv4 routes */
	struct lpm lpm6; /* IPv6 routes */
	int routed_ctr;
	int no_route_ctr;
	int ttl_ctr;
	int not_ip_ctr;
	int link_scope_ctr;
	int ipv6_ctr;
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--route PREFIX/LEN=PORT]... [--routes FILE]\n"
		   "Route IPv4 and IPv6 packets by longest-prefix match on the destination\n"
		   "address: decrement the TTL (IPv4, patching the header checksum) or the hop\n"
		   "limit (IPv6), and send the packet out of the route's port (its index in\n"
		   "the manager's port list), or on along the chain for PORT \"next\".\n"
		   "Dropped (verdict DROP): no route (counter no_route), TTL or hop limit 0\n"
		   "or 1 (ttl_expired). Passed on unchanged: frames that are neither IPv4 nor\n"
		   "IPv6 (not_ip: ARP, ...), and IPv6 that is the link's own business, never\n"
		   "forwarded by a router: neighbour and router discovery (ICMPv6 133-137) and\n"
		   "packets to link-local (fe80::/10) or link-local multicast (ff02::/16)\n"
		   "addresses (link_scope). Counters: routed (both families), ipv6 (of those,\n"
		   "IPv6), no_route, ttl_expired, not_ip, link_scope.\n"
		   "\n"
		   "  --route R       add route R, either family: A.B.C.D/LEN=PORT or\n"
		   "                  X:X::X/LEN=PORT, PORT a number or \"next\"; repeat for\n"
		   "                  more (0.0.0.0/0=PORT and ::/0=PORT are default routes)\n"
		   "  --routes FILE   add the routes in FILE, one per line (PREFIX/LEN PORT\n"
		   "                  or PREFIX/LEN=PORT); blank lines and # comments "
		   "skipped\n" NF_OPT_COMMON_HELP);
}

static int
add_route(struct l3fwd *l3, const char *where, const char *s)
{
	struct lpm_route r;
	int ret;

	if (lpm_parse_route(s, &r) < 0) {
		fprintf(stderr,
			NF_NAME ": %s: expected A.B.C.D/LEN=PORT or X:X::X/LEN=PORT (host bits "
				"zero, PORT a number or \"next\"), got \"%s\"\n",
			where, s);
		return -EINVAL;
	}
	if (r.family == AF_INET)
		ret = lpm_add(&l3->lpm, r.v4, r.depth, r.nh);
	else
		ret = lpm6_add(&l3->lpm6, r.addr, r.depth, r.nh);
	if (ret < 0)
		fprintf(stderr, NF_NAME ": %s: cannot add route \"%s\": %s\n", where, s,
			strerror(-ret));
	return ret;
}

static int
add_routes_file(struct l3fwd *l3, const char *path)
{
	char line[256], where[300];
	unsigned int lineno = 0;
	char *p, *end;
	int ret = 0;
	FILE *f;

	f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, NF_NAME ": --routes %s: %s\n", path, strerror(errno));
		return -errno;
	}
	while (ret == 0 && fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		p = line + strspn(line, " \t");
		end = strchr(p, '#');
		if (end != NULL)
			*end = '\0';
		end = p + strlen(p);
		while (end > p && strchr(" \t\r\n", end[-1]) != NULL)
			*--end = '\0';
		if (*p == '\0')
			continue;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		ret = add_route(l3, where, p);
	}
	fclose(f);
	return ret;
}

/* Link-scoped IPv6 that a router does not forward and a bump in the wire
 * must pass as it is, as ARP for IPv4: neighbour and router discovery
 * (RFC 4861 drops it unless its hop limit is still 255), and anything to a
 * link-local or link-local multicast address. */
static inline bool
ipv6_is_link_scope(const struct rte_mbuf *pkt, const struct rte_ipv6_hdr *ip6)
{
	const uint8_t *d = ip6->dst_addr;
	const uint8_t *l4;

	if ((d[0] == 0xfe && (d[1] & 0xc0) == 0x80) || (d[0] == 0xff && (d[1] & 0x0f) == 0x02))
		return true;
	/* ND messages are ICMPv6 straight after the fixed header (rte_net's
	 * parse gives ICMP no L4 type: read the next header). */
	if (ip6->proto != IPPROTO_ICMPV6 || ip6->payload_len == 0 ||
	    pkt->data_len < pkt->l2_len + sizeof(*ip6) + 1u)
		return false;
	l4 = (const uint8_t *)(ip6 + 1);
	return l4[0] >= 133 && l4[0] <= 137;
}

static inline sq_verdict_t
l3fwd_ipv6(struct l3fwd *l3, struct rte_mbuf *pkt, struct rte_ipv6_hdr *ip6)
{
	int nh;

	if (unlikely(ipv6_is_link_scope(pkt, ip6))) {
		sq_nf_counter_add(l3->nf, l3->link_scope_ctr, 1);
		return SQ_NEXT;
	}
	nh = lpm6_lookup(&l3->lpm6, ip6->dst_addr);
	if (unlikely(nh < 0)) {
		sq_nf_counter_add(l3->nf, l3->no_route_ctr, 1);
		return SQ_DROP;
	}
	if (unlikely(ip6->hop_limits <= 1)) {
		sq_nf_counter_add(l3->nf, l3->ttl_ctr, 1);
		return SQ_DROP;
	}
	ip6->hop_limits--; /* IPv6 has no header checksum to patch */
	sq_nf_counter_add(l3->nf, l3->routed_ctr, 1);
	sq_nf_counter_add(l3->nf, l3->ipv6_ctr, 1);
	return nh == LPM_NH_NEXT ? SQ_NEXT : sq_out((uint16_t)nh);
}

static sq_verdict_t
l3fwd_pkt(struct rte_mbuf *pkt, void *arg)
{
	struct l3fwd *l3 = arg;
	struct rte_ipv4_hdr *ip = sq_pkt_ipv4(pkt); /* after any VLAN tags */
	struct rte_ipv6_hdr *ip6;
	int nh;

	if (unlikely(ip == NULL)) {
		ip6 = sq_pkt_ipv6(pkt);
		if (ip6 != NULL)
			return l3fwd_ipv6(l3, pkt, ip6);
		sq_nf_counter_add(l3->nf, l3->not_ip_ctr, 1);
		return SQ_NEXT;
	}
	nh = lpm_lookup(&l3->lpm, rte_be_to_cpu_32(ip->dst_addr));
	if (unlikely(nh < 0)) {
		sq_nf_counter_add(l3->nf, l3->no_route_ctr, 1);
		return SQ_DROP;
	}
	if (unlikely(ip->time_to_live <= 1)) {
		sq_nf_counter_add(l3->nf, l3->ttl_ctr, 1);
		return SQ_DROP;
	}
	ipv4_ttl_dec(ip);
	sq_nf_counter_add(l3->nf, l3->routed_ctr, 1);
	return nh == LPM_NH_NEXT ? SQ_NEXT : sq_out((uint16_t)nh);
}

/* Every route's port must exist: only the region knows how many there are. */
static int
check_ports(const struct lpm *lpm, unsigned int n_ports)
{
	uint32_t node, i, slot, nh;

	for (node = 0; node < lpm->n_nodes; node++) {
		for (i = 0; i < LPM_NODE_SLOTS; i++) {
			slot = lpm->nodes[node][i];
			if (!(slot & LPM_VALID) || (slot & LPM_CHILD))
				continue;
			nh = slot & LPM_VALUE_MASK;
			if (nh != LPM_NH_NEXT && nh >= n_ports) {
				fprintf(stderr,
					NF_NAME
					": a route goes to port %u: the manager has %u ports\n",
					nh, n_ports);
				return -EINVAL;
			}
		}
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"route", required_argument, NULL, 'r'},
		{"routes", required_argument, NULL, 'f'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct l3fwd l3;
	struct sq_nf *nf;
	int opt, ret;

	if (lpm_init(&l3.lpm) < 0 || lpm_init(&l3.lpm6) < 0) {
		fprintf(stderr, NF_NAME ": out of memory\n");
		lpm_free(&l3.lpm);
		return NF_EXIT_FAIL;
	}
	ret = 0;
	while (ret == 0 && (opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			if (add_route(&l3, "--route", optarg) < 0)
				ret = NF_EXIT_USAGE;
			break;
		case 'f':
			if (add_routes_file(&l3, optarg) < 0)
				ret = NF_EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			lpm_free(&l3.lpm);
			lpm_free(&l3.lpm6);
			return NF_EXIT_OK;
		case 0: /* for sq_nf_init() */ break;
		default: ret = nf_opt_usage_error(NF_NAME); break;
		}
	}
	if (ret == 0)
		ret = nf_opt_check_done(NF_NAME, argc, argv);
	if (ret == 0)
		ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		goto out_free;
	if (check_ports(&l3.lpm, sq_nf_region(nf)->n_ports) < 0 ||
	    check_ports(&l3.lpm6, sq_nf_region(nf)->n_ports) < 0) {
		ret = NF_EXIT_USAGE;
		goto out_free;
	}
	if (l3.lpm.n_routes == 0 && l3.lpm6.n_routes == 0)
		SQ_LOG(WARNING, L3FWD, "no routes: every IP packet is dropped (no_route)\n");
	l3.nf = nf;
	l3.routed_ctr = sq_nf_counter_register(nf, "routed");
	l3.no_route_ctr = sq_nf_counter_register(nf, "no_route");
	l3.ttl_ctr = sq_nf_counter_register(nf, "ttl_expired");
	l3.not_ip_ctr = sq_nf_counter_register(nf, "not_ip");
	l3.link_scope_ctr = sq_nf_counter_register(nf, "link_scope");
	l3.ipv6_ctr = sq_nf_counter_register(nf, "ipv6");
	sq_nf_set_pkt_handler(nf, l3fwd_pkt, &l3);
	ret = sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
out_free:
	lpm_free(&l3.lpm);
	lpm_free(&l3.lpm6);
	return ret;
}
