/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-firewall: a 5-tuple packet filter for IPv4 and IPv6. The first
 * rule that matches (rules.h) allows the packet on along its chain or
 * denies it (verdict DROP); a packet no rule matches gets the default
 * action (allow). A frame that is neither IPv4 nor IPv6 (the rules cannot
 * judge it) gets --non-ip (deny), a malformed IP packet is denied.
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
	enum fw_action non_ip; /* for frames that are neither IPv4 nor IPv6 */
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--rule RULE]... [--rules FILE] [--default allow|deny]\n"
		   "       [--non-ip allow|deny]\n"
		   "Filter IPv4 and IPv6 packets on their 5-tuple. The first rule that matches\n"
		   "decides: allow passes the packet on along its chain, deny drops it (verdict\n"
		   "DROP). A packet no rule matches gets the default action; a frame that is\n"
		   "neither IPv4 nor IPv6 (ARP, ...) gets the --non-ip action; a malformed IP\n"
		   "packet (lengths inconsistent, an IPv6 extension header cut off, too short\n"
		   "for its ports) is denied.\n"
		   "Counters: allowed, denied (every packet is in exactly one), no_match (of\n"
		   "those, how many got the default), not_ip, malformed, ipv6 (IPv6 packets\n"
		   "judged by the rules).\n"
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
		   "  --non-ip ACTION   for frames that are neither IPv4 nor IPv6, which no\n"
		   "                    rule can judge (default: deny; allow to pass ARP);\n"
		   "                    --non-ipv4 is its old name\n" NF_OPT_COMMON_HELP);
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

static sq_verdict_t
firewall_pkt(struct rte_mbuf *pkt, void *arg)
{
	struct firewall *fw = arg;
	const struct rte_ipv4_hdr *ip = sq_pkt_ipv4(pkt);
	const struct rte_ipv6_hdr *ip6;
	uint32_t len = rte_pktmbuf_data_len(pkt) - pkt->l2_len;
	enum fw_action action;
	struct fw_key key;

	/* sq_pkt_ipv4/6 look past VLAN tags, where the manager's parse found
	 * the IP header: a tag must not slip a frame past the rules to the
	 * default action. */
	if (likely(ip != NULL)) {
		action = judge(fw, &key, fw_key_from_ipv4(ip, len, &key));
	} else if ((ip6 = sq_pkt_ipv6(pkt)) != NULL) {
		sq_nf_counter_add(fw->nf, fw->ipv6_ctr, 1);
		action = judge(fw, &key, fw_key_from_ipv6(ip6, len, &key));
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
		{"non-ip", required_argument, NULL, 'n'},
		{"non-ipv4", required_argument, NULL, 'n'}, /* its old name */
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct firewall fw = {.rules = {.dflt = FW_ALLOW}, .non_ip = FW_DENY};
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
	SQ_LOG(DEBUG, FIREWALL, "%u rules, default %s, non-ip %s\n", fw.rules.n_rules,
	       fw.rules.dflt == FW_DENY ? "deny" : "allow",
	       fw.non_ip == FW_DENY ? "deny" : "allow");
	sq_nf_set_pkt_handler(nf, firewall_pkt, &fw);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
