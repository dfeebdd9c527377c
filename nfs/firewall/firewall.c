/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-firewall: a 5-tuple packet filter. The first rule that matches
 * (rules.h) allows the packet on along its chain or denies it (verdict
 * DROP); a packet no rule matches gets the default action (allow). A frame
 * that is not IPv4 (the rules cannot judge it) gets --non-ipv4 (deny), a
 * malformed IPv4 packet is denied.
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
	int not_ipv4_ctr;
	int malformed_ctr;
	enum fw_action non_ipv4; /* for frames that are not IPv4 */
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME " [--rule RULE]... [--rules FILE] [--default allow|deny]\n"
		   "       [--non-ipv4 allow|deny]\n"
		   "Filter packets on their 5-tuple. The first rule that matches decides:\n"
		   "allow passes the packet on along its chain, deny drops it (verdict DROP).\n"
		   "An IPv4 packet no rule matches gets the default action; a frame that is\n"
		   "not IPv4 (ARP, IPv6, ...) gets the --non-ipv4 action; a malformed IPv4\n"
		   "packet (lengths inconsistent, too short for its ports) is denied.\n"
		   "Counters: allowed, denied (every packet is in exactly one), no_match (of\n"
		   "those, how many got the default), not_ipv4, malformed.\n"
		   "\n"
		   "  --rule RULE       append RULE: allow|deny, then any of src=PREFIX,\n"
		   "                    dst=PREFIX, proto=tcp|udp|icmp|sctp|N, sport=N[-M],\n"
		   "                    dport=N[-M], separated by commas or blanks, e.g.\n"
		   "                    \"deny,src=10.0.0.0/8,proto=tcp,dport=22\". Rules with\n"
		   "                    ports match only TCP, UDP and SCTP.\n"
		   "  --rules FILE      append the rules in FILE, one per line; blank lines\n"
		   "                    and # comments skipped\n"
		   "  --default ACTION  for IPv4 packets no rule matches (default: allow)\n"
		   "  --non-ipv4 ACTION for frames that are not IPv4, which no rule can\n"
		   "                    judge (default: deny; allow to pass ARP or "
		   "IPv6)\n" NF_OPT_COMMON_HELP);
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

static sq_verdict_t
firewall_pkt(struct rte_mbuf *pkt, void *arg)
{
	struct firewall *fw = arg;
	const struct rte_ipv4_hdr *ip = sq_pkt_ipv4(pkt);
	enum fw_action action;
	struct fw_key key;
	int idx;

	/* sq_pkt_ipv4 looks past VLAN tags: a tag must not slip a frame past
	 * the rules to the default action. */
	if (unlikely(ip == NULL)) {
		sq_nf_counter_add(fw->nf, fw->not_ipv4_ctr, 1);
		action = fw->non_ipv4;
	} else if (unlikely(fw_key_from_ipv4(ip, rte_pktmbuf_data_len(pkt) - pkt->l2_len, &key) <
			    0)) {
		sq_nf_counter_add(fw->nf, fw->malformed_ctr, 1);
		action = FW_DENY;
	} else {
		idx = fw_match(&fw->rules, &key);
		if (idx >= 0) {
			action = fw->rules.rule[idx].action;
		} else {
			sq_nf_counter_add(fw->nf, fw->no_match_ctr, 1);
			action = fw->rules.dflt;
		}
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
		{"non-ipv4", required_argument, NULL, 'n'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct firewall fw = {.rules = {.dflt = FW_ALLOW}, .non_ipv4 = FW_DENY};
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
			if (parse_action("--non-ipv4", optarg, &fw.non_ipv4) < 0)
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
	fw.not_ipv4_ctr = sq_nf_counter_register(nf, "not_ipv4");
	fw.malformed_ctr = sq_nf_counter_register(nf, "malformed");
	SQ_LOG(DEBUG, FIREWALL, "%u rules, default %s, non-ipv4 %s\n", fw.rules.n_rules,
	       fw.rules.dflt == FW_DENY ? "deny" : "allow",
	       fw.non_ipv4 == FW_DENY ? "deny" : "allow");
	sq_nf_set_pkt_handler(nf, firewall_pkt, &fw);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
