/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: squall-nf-firewall's rule parser (nfs/firewall/rules.h).
 * The input is read as a rules file (one rule per line, as --rules reads
 * it); each line parses or fails pointing into itself. Then the same bytes
 * are an IPv4 packet and an IPv6 packet (extension headers walked), each
 * keyed and matched against the rules that parsed: a match is a rule of
 * the packet's family or of both, and ports come only from TCP, UDP, SCTP.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"

static struct fw_rules rules; /* ~40 KiB: not on the stack */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_match(const struct fw_key *key)
{
	int ret = fw_match(&rules, key);

	if (key->family != FW_IPV4 && key->family != FW_IPV6)
		abort();
	if (key->has_ports && key->proto != IPPROTO_TCP && key->proto != IPPROTO_UDP &&
	    key->proto != IPPROTO_SCTP)
		abort();
	if (ret == -ENOENT)
		return;
	if (ret < 0 || (unsigned int)ret >= rules.n_rules)
		abort();
	if (rules.rule[ret].family != FW_ANY && rules.rule[ret].family != key->family)
		abort(); /* an IPv4 rule matched IPv6, or the other way round */
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *bad, *p, *nl;
	struct fw_key key;
	char line[512];
	size_t n;
	int ret;

	memset(&rules, 0, sizeof(rules));
	for (p = (const char *)data; p < (const char *)data + size; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)((const char *)data + size - p));
		if (nl == NULL)
			nl = (const char *)data + size;
		n = (size_t)(nl - p);
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = '\0';
		ret = fw_rules_add(&rules, line, &bad);
		if (ret == -EINVAL && (bad == NULL || bad < line || bad > line + strlen(line)))
			abort(); /* the error must point into the rule */
		if (ret == 0 && (rules.rule[rules.n_rules - 1].sport_lo >
					 rules.rule[rules.n_rules - 1].sport_hi ||
				 rules.rule[rules.n_rules - 1].dport_lo >
					 rules.rule[rules.n_rules - 1].dport_hi))
			abort();
	}
	if (fw_key_from_ipv4((const struct rte_ipv4_hdr *)data, (uint32_t)size, &key) == 0)
		check_match(&key);
	if (fw_key_from_ipv6((const struct rte_ipv6_hdr *)data, (uint32_t)size, &key) == 0)
		check_match(&key);
	return 0;
}
