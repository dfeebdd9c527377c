/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-firewall: a 5-tuple packet filter for IPv4 and IPv6. The first
 * rule that matches (rules.h) allows the packet on along its chain or
 * denies it (verdict DROP); a packet no rule matches gets the default
 * action (allow). ARP and IPv6 neighbour discovery, without which two hosts
 * behind the firewall never reach each other, get --neighbour (allow); any
 * other frame that is neither IPv4 nor IPv6 (the rules cannot judge it) gets
 * --non-ip (deny); a malformed IP packet is denied. A jumbo frame is judged
 * as any other: its headers are in its first segment (squall/pkt.h).
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
#include "rules.h"

#define NF_NAME "squall-nf-firewall"

struct firewall {
	struct sq_nf *nf;
	struct fw_rules rules;
	int allowed_ctr;
	int denied_ctr;
	int no_match_ctr;
	int not_ip_ctr;
	int malformed_ctr;
	int ipv6_ctr;
	int neighbour_ctr;
	enum fw_action non_ip;    /* for frames that are neither IPv4 nor IPv6 */
	enum fw_action neighbour; /* for ARP and IPv6 neighbour discovery */
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--rule RULE]... [--rules FILE] [--default allow|deny]\n"
		   "       [--neighbour allow|deny] [--non-ip allow|deny]\n"
		   "Filter IPv4 and IPv6 packets on their 5-tuple. The first rule that matches\n"
		   "decides: allow passes the packet on along its chain, deny drops it (verdict\n"
		   "DROP). A packet no rule matches gets the default action. ARP and IPv6\n"
		   "neighbour discovery (ICMPv6 133-137) get the --neighbour action, before any\n"
		   "rule; any other frame that is neither IPv4 nor IPv6 (LLDP, ...) gets the\n"
		   "--non-ip action; a malformed IP packet (lengths inconsistent, an IPv6\n"
		   "extension header cut off, too short for its ports) is denied.\n"
		   "Counters: allowed, denied (every packet is in exactly one), no_match (of\n"
		   "those, how many got the default), neighbour (ARP and neighbour discovery),\n"
		   "not_ip (other frames), malformed, ipv6 (IPv6 packets judged by the rules).\n"
		   "\n"
		   "  --rule RULE       append RULE: allow|deny, then any of src=PREFIX,\n"
		   "                    dst=PREFIX, proto=tcp|udp|icmp|icmpv6|icmp6|sctp|any|N,\n"
		   "                    sport=N[-M], dport=N[-M], family=ipv4|ipv6, separated\n"
		   "                    by commas or blanks, e.g. \"deny,src=10.0.0.0/8,proto=\n"
		   "                    tcp,dport=22\" or \"allow,dst=fd00::/64,proto=udp\".\n"
		   "                    A PREFIX is IPv4 or IPv6; a rule with an IPv4 prefix\n"
		   "                    (or family=ipv4) matches IPv4 only, with an IPv6 one\n"
		   "                    IPv6 only, with none both. IPv6 is matched on its\n"
		   "                    upper-layer protocol, after its extension headers.\n"
		   "                    Rules with ports match only TCP, UDP and SCTP.\n"
		   "  --rules FILE      append the rules in FILE, one per line; blank lines\n"
		   "                    and # comments skipped\n"
		   "  --default ACTION  for IP packets no rule matches (default: allow)\n"
		   "  --neighbour ACTION\n"
		   "                    for ARP and IPv6 neighbour discovery (default: allow:\n"
		   "                    hosts on either side cannot reach each other without)\n"
		   "  --non-ip ACTION   for other frames that are neither IPv4 nor IPv6, which\n"
		   "                    no rule can judge (default: deny); --non-ipv4 is its\n"
		   "                    old name\n" NF_OPT_COMMON_HELP);
}

static int
add_rule(struct firewall *fw, const char *where, const char *s)
{
	const char *bad;
	int ret = fw_rules_add(&fw->rules, s, &bad);

	if (ret == -ENOSPC)
		fprintf(stderr, NF_NAME ": %s: more than %u rules\n", where, FW_MAX_RULES);
	else if (ret < 0)
		fprintf(stderr, NF_NAME ": %s: bad rule \"%s\" at \"%.*s\" (try --help)\n", where,
			s, (int)strcspn(bad, ", \t\r\n"), bad);
	return ret;
}

static int
add_rules_file(struct firewall *fw, const char *path)
{
	char line[512], where[300];
	unsigned int lineno = 0;
	const char *p;
	int ret = 0;
	FILE *f;

	f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, NF_NAME ": --rules %s: %s\n", path, strerror(errno));
		return -errno;
	}
	while (ret == 0 && fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		p = line + strspn(line, " \t");
		if (*p == '\0' || *p == '#')
			continue;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		ret = add_rule(fw, where, p);
	}
	fclose(f);
	return ret;
}

static int
parse_action(const char *opt, const char *s, enum fw_action *action)
{
	if (strcmp(s, "allow") == 0) {
		*action = FW_ALLOW;
	} else if (strcmp(s, "deny") == 0) {
		*action = FW_DENY;
	} else {
		fprintf(stderr, NF_NAME ": %s: expected allow or deny, got \"%s\"\n", opt, s);
		return -EINVAL;
	}
	return 0;
}

/* The rules' verdict on an IP packet, or FW_DENY for a malformed one. */
static inline enum fw_action
judge(struct firewall *fw, const struct fw_key *key, int key_ret)
{
	int idx;

	if (unlikely(key_ret < 0)) {
		sq_nf_counter_add(fw->nf, fw->malformed_ctr, 1);
		return FW_DENY;
	}
	idx = fw_match(&fw->rules, key);
	if (idx >= 0)
		return fw->rules.rule[idx].action;
	sq_nf_counter_add(fw->nf, fw->no_match_ctr, 1);
	return fw->rules.dflt;
}

/* IPv6 neighbour discovery (router solicitation and advertisement,
 * neighbour solicitation and advertisement, redirect: ICMPv6 133-137) right
 * after the fixed header, as RFC 4861 sends it. */
static inline bool
is_nd(const struct rte_ipv6_hdr *ip6, uint32_t avail)
{
	const uint8_t *icmp6 = (const uint8_t *)(ip6 + 1);

	return ip6->proto == IPPROTO_ICMPV6 && rte_be_to_cpu_16(ip6->payload_len) >= 4 &&
	       avail >= sizeof(*ip6) + 4 && icmp6[0] >= 133 && icmp6[0] <= 137;
}

/* ARP: the EtherType after the tags the manager walked (l2_len ends with it). */
static inline bool
is_arp(struct rte_mbuf *pkt)
{
	return pkt->l2_len >= sizeof(struct rte_ether_hdr) && pkt->l2_len <= pkt->data_len &&
	       *rte_pktmbuf_mtod_offset(pkt, const rte_be16_t *, pkt->l2_len - 2) ==
		       RTE_BE16(RTE_ETHER_TYPE_ARP);
}

static sq_verdict_t
firewall_pkt(struct rte_mbuf *pkt, void *arg)
{
	struct firewall *fw = arg;
	const struct rte_ipv4_hdr *ip = sq_pkt_ipv4(pkt);
	const struct rte_ipv6_hdr *ip6;
	/* the frame from the IP header on, and the part of it in the first
	 * segment (all of it but in a jumbo frame) */
	uint32_t len = rte_pktmbuf_pkt_len(pkt) - pkt->l2_len;
	uint32_t avail = rte_pktmbuf_data_len(pkt) - pkt->l2_len;
	enum fw_action action;
	struct fw_key key;

	/* sq_pkt_ipv4/6 look past VLAN tags, where the manager's parse found
	 * the IP header: a tag must not slip a frame past the rules to the
	 * default action. */
	if (likely(ip != NULL)) {
		action = judge(fw, &key, fw_key_of_ipv4(ip, len, avail, &key));
	} else if ((ip6 = sq_pkt_ipv6(pkt)) != NULL) {
		if (is_nd(ip6, avail)) {
			sq_nf_counter_add(fw->nf, fw->neighbour_ctr, 1);
			action = fw->neighbour;
		} else {
			sq_nf_counter_add(fw->nf, fw->ipv6_ctr, 1);
			action = judge(fw, &key, fw_key_of_ipv6(ip6, len, avail, &key));
		}
	} else if (is_arp(pkt)) {
		sq_nf_counter_add(fw->nf, fw->neighbour_ctr, 1);
		action = fw->neighbour;
	} else {
		sq_nf_counter_add(fw->nf, fw->not_ip_ctr, 1);
		action = fw->non_ip;
	}
	if (action == FW_DENY) {
		sq_nf_counter_add(fw->nf, fw->denied_ctr, 1);
		return SQ_DROP;
	}
	sq_nf_counter_add(fw->nf, fw->allowed_ctr, 1);
	return SQ_NEXT;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"rule", required_argument, NULL, 'r'},
		{"rules", required_argument, NULL, 'f'},
		{"default", required_argument, NULL, 'd'},
		{"neighbour", required_argument, NULL, 'N'},
		{"non-ip", required_argument, NULL, 'n'},
		{"non-ipv4", required_argument, NULL, 'n'}, /* its old name */
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct firewall fw = {
		.rules = {.dflt = FW_ALLOW}, .non_ip = FW_DENY, .neighbour = FW_ALLOW};
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'r':
			if (add_rule(&fw, "--rule", optarg) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'f':
			if (add_rules_file(&fw, optarg) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'd':
			if (parse_action("--default", optarg, &fw.rules.dflt) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'n':
			if (parse_action("--non-ip", optarg, &fw.non_ip) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'N':
			if (parse_action("--neighbour", optarg, &fw.neighbour) < 0)
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
	fw.nf = nf;
	fw.allowed_ctr = sq_nf_counter_register(nf, "allowed");
	fw.denied_ctr = sq_nf_counter_register(nf, "denied");
	fw.no_match_ctr = sq_nf_counter_register(nf, "no_match");
	fw.not_ip_ctr = sq_nf_counter_register(nf, "not_ip");
	fw.malformed_ctr = sq_nf_counter_register(nf, "malformed");
	fw.ipv6_ctr = sq_nf_counter_register(nf, "ipv6");
	fw.neighbour_ctr = sq_nf_counter_register(nf, "neighbour");
	SQ_LOG(DEBUG, FIREWALL, "%u rules, default %s, neighbour %s, non-ip %s\n", fw.rules.n_rules,
	       fw.rules.dflt == FW_DENY ? "deny" : "allow",
	       fw.neighbour == FW_DENY ? "deny" : "allow", fw.non_ip == FW_DENY ? "deny" : "allow");
	sq_nf_set_pkt_handler(nf, firewall_pkt, &fw);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
