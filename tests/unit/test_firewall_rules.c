/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-firewall's rules: parsing, first match, the default, and the
 * 5-tuple taken from a packet (options, fragments, truncation).
 */
#include <stdio.h>
#include <string.h>

#include <rte_ip.h>

#include "rules.h"

#include "check.h"

static struct fw_key
key(uint32_t src, uint32_t dst, uint8_t proto, uint16_t sport, uint16_t dport)
{
	struct fw_key k = {.src = src, .dst = dst, .proto = proto, .sport = sport, .dport = dport};

	k.has_ports = proto == IPPROTO_TCP || proto == IPPROTO_UDP;
	return k;
}

static void
test_parse(void)
{
	struct fw_rule r;
	const char *bad;

	CHECK(fw_parse_rule("deny,src=10.0.0.0/8,proto=tcp,dport=22", &r, &bad) == 0);
	CHECK(r.action == FW_DENY && r.src == 0x0a000000 && r.src_mask == 0xff000000);
	CHECK(r.dst_mask == 0 && r.proto == IPPROTO_TCP && !r.has_sport && r.has_dport);
	CHECK(r.dport_lo == 22 && r.dport_hi == 22);
	CHECK(fw_parse_rule("  allow dst=192.168.1.7 proto=UDP sport=1000-1999 # dns\n", &r,
			    &bad) == 0);
	CHECK(r.action == FW_ALLOW && r.dst == 0xc0a80107 && r.dst_mask == 0xffffffff);
	CHECK(r.proto == IPPROTO_UDP && r.has_sport && r.sport_lo == 1000 && r.sport_hi == 1999);
	CHECK(fw_parse_rule("allow", &r, &bad) == 0);
	CHECK(r.proto == FW_PROTO_ANY && r.src_mask == 0 && !r.has_dport);
	CHECK(fw_parse_rule("deny,proto=47", &r, &bad) == 0 && r.proto == 47);

	CHECK(fw_parse_rule("", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("reject", &r, &bad) == -EINVAL && strncmp(bad, "reject", 6) == 0);
	CHECK(fw_parse_rule("deny,src=10.0.0.1/8", &r, &bad) == -EINVAL); /* host bits */
	CHECK(fw_parse_rule("deny,src=10.0.0.0/33", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("deny,dport=2000-1000", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("deny,dport=65536", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("deny,proto=256", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("deny,port=80", &r, &bad) == -EINVAL && strncmp(bad, "port", 4) == 0);
	CHECK(fw_parse_rule("deny,dport", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("deny,dport=", &r, &bad) == -EINVAL);
}

static void
test_first_match_and_default(void)
{
	static struct fw_rules rules;
	const char *bad;
	struct fw_key k;

	memset(&rules, 0, sizeof(rules));
	rules.dflt = FW_ALLOW;
	CHECK(fw_rules_add(&rules, "allow,src=10.1.0.0/16,proto=tcp,dport=22", &bad) == 0);
	CHECK(fw_rules_add(&rules, "deny,proto=tcp,dport=22", &bad) == 0);
	CHECK(fw_rules_add(&rules, "deny,dst=192.168.0.0/16,proto=udp,dport=1000-2000", &bad) == 0);
	CHECK(fw_rules_add(&rules, "deny,src=172.16.0.0/12", &bad) == 0);
	CHECK(rules.n_rules == 4);

	k = key(0x0a010203, 0x01020304, IPPROTO_TCP, 5555, 22); /* rule 0 first */
	CHECK(fw_match(&rules, &k) == 0);
	k = key(0x0a020203, 0x01020304, IPPROTO_TCP, 5555, 22); /* not 10.1/16: rule 1 */
	CHECK(fw_match(&rules, &k) == 1);
	k = key(0x0a020203, 0x01020304, IPPROTO_UDP, 5555, 22); /* udp: no tcp rule */
	CHECK(fw_match(&rules, &k) == -ENOENT);
	k = key(0x01010101, 0xc0a80505, IPPROTO_UDP, 1, 1000);
	CHECK(fw_match(&rules, &k) == 2);
	k.dport = 2000;
	CHECK(fw_match(&rules, &k) == 2);
	k.dport = 2001;
	CHECK(fw_match(&rules, &k) == -ENOENT);
	k.dport = 999;
	CHECK(fw_match(&rules, &k) == -ENOENT);
	k = key(0xac1fffff, 0x01010101, IPPROTO_ICMP, 0, 0); /* 172.31.255.255 in /12 */
	CHECK(fw_match(&rules, &k) == 3);
	k.src = 0xac200000; /* 172.32.0.0: outside */
	CHECK(fw_match(&rules, &k) == -ENOENT);
	/* A rule with ports never matches a packet without them. */
	k = key(0x0a020203, 0x01020304, IPPROTO_TCP, 5555, 22);
	k.has_ports = false;
	CHECK(fw_match(&rules, &k) == -ENOENT);
}

static void
test_rule_limit(void)
{
	static struct fw_rules rules;
	const char *bad;
	int ok = 0;

	memset(&rules, 0, sizeof(rules));
	for (int i = 0; i < FW_MAX_RULES; i++)
		ok += fw_rules_add(&rules, "allow", &bad) == 0;
	CHECK(ok == FW_MAX_RULES);
	CHECK(fw_rules_add(&rules, "allow", &bad) == -ENOSPC);
	CHECK(rules.n_rules == FW_MAX_RULES);
}

static void
test_key_from_packet(void)
{
	uint8_t buf[64];
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)buf;
	struct fw_key k;

	memset(buf, 0, sizeof(buf));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(0x0a000001);
	ip->dst_addr = rte_cpu_to_be_32(0x0a000002);
	ip->total_length = rte_cpu_to_be_16(28);
	buf[20] = 0x12, buf[21] = 0x34, buf[22] = 0x00, buf[23] = 0x35;
	CHECK(fw_key_from_ipv4(ip, 28, &k) == 0);
	CHECK(k.src == 0x0a000001 && k.dst == 0x0a000002 && k.proto == IPPROTO_UDP);
	CHECK(k.has_ports && k.sport == 0x1234 && k.dport == 53);

	/* Padding past the total length is not read: the same key. */
	CHECK(fw_key_from_ipv4(ip, 64, &k) == 0 && k.has_ports && k.dport == 53);
	/* The frame shorter than the total length, or the total length shorter
	 * than the ports (padding holding them would be read before): malformed. */
	CHECK(fw_key_from_ipv4(ip, 22, &k) == -EINVAL);
	ip->total_length = rte_cpu_to_be_16(22);
	CHECK(fw_key_from_ipv4(ip, 28, &k) == -EINVAL);
	ip->total_length = rte_cpu_to_be_16(20);
	CHECK(fw_key_from_ipv4(ip, 28, &k) == -EINVAL);
	/* A total length shorter than the header. */
	ip->total_length = rte_cpu_to_be_16(16);
	CHECK(fw_key_from_ipv4(ip, 28, &k) == -EINVAL);
	ip->total_length = rte_cpu_to_be_16(28);
	/* Truncated IP header, bad IHL. */
	CHECK(fw_key_from_ipv4(ip, 19, &k) == -EINVAL);
	ip->version_ihl = 0x44;
	CHECK(fw_key_from_ipv4(ip, 28, &k) == -EINVAL);

	/* Options: ports after 24 bytes. */
	ip->version_ihl = 0x46;
	buf[24] = 0x00, buf[25] = 0x50, buf[26] = 0x01, buf[27] = 0xbb;
	CHECK(fw_key_from_ipv4(ip, 28, &k) == 0 && k.has_ports);
	CHECK(k.sport == 80 && k.dport == 443);
	CHECK(fw_key_from_ipv4(ip, 23, &k) == -EINVAL); /* options cut off */

	/* A later fragment carries no ports; the first one does. */
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->fragment_offset = rte_cpu_to_be_16(185);
	CHECK(fw_key_from_ipv4(ip, 28, &k) == 0 && !k.has_ports);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG);
	CHECK(fw_key_from_ipv4(ip, 28, &k) == 0 && k.has_ports);

	/* Protocols without ports. */
	ip->fragment_offset = 0;
	ip->next_proto_id = IPPROTO_ICMP;
	CHECK(fw_key_from_ipv4(ip, 28, &k) == 0 && !k.has_ports && k.proto == IPPROTO_ICMP);
	ip->total_length = rte_cpu_to_be_16(20);
	CHECK(fw_key_from_ipv4(ip, 28, &k) == 0 && !k.has_ports && k.proto == IPPROTO_ICMP);
}

int
main(void)
{
	test_parse();
	test_first_match_and_default();
	test_rule_limit();
	test_key_from_packet();
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
