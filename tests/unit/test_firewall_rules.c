/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-firewall's rules: parsing, first match, the default, and the
 * 5-tuple taken from a packet (options, fragments, truncation), for IPv4
 * and IPv6 (prefixes, families kept apart, extension headers walked).
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

	k.family = FW_IPV4;

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
	/* A jumbo frame's first segment: the ports must be in it. */
	CHECK(fw_key_of_ipv4(ip, 28, 24, &k) == 0 && k.has_ports && k.dport == 53);
	CHECK(fw_key_of_ipv4(ip, 28, 23, &k) == -EINVAL);
	CHECK(fw_key_of_ipv4(ip, 28, 19, &k) == -EINVAL);
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

static struct fw_key
key6(const char *src, const char *dst, uint8_t proto, uint16_t sport, uint16_t dport)
{
	struct fw_key k = {.family = FW_IPV6, .proto = proto, .sport = sport, .dport = dport};
	uint8_t a[16];

	inet_pton(AF_INET6, src, a);
	k.src6 = fw_ip6_of(a);
	inet_pton(AF_INET6, dst, a);
	k.dst6 = fw_ip6_of(a);
	k.has_ports = proto == IPPROTO_TCP || proto == IPPROTO_UDP;
	return k;
}

static void
test_parse_ipv6(void)
{
	struct fw_rule r;
	const char *bad;

	CHECK(fw_parse_rule("deny,src=fd00:1::/32,proto=tcp,dport=22", &r, &bad) == 0);
	CHECK(r.family == FW_IPV6 && r.src6.hi == UINT64_C(0xfd00000100000000) && r.src6.lo == 0);
	CHECK(r.src6_mask.hi == UINT64_C(0xffffffff00000000) && r.src6_mask.lo == 0);
	CHECK(r.dst6_mask.hi == 0 && r.dst6_mask.lo == 0 && r.src_mask == 0);
	CHECK(fw_parse_rule("allow dst=2001:db8::1 proto=icmpv6", &r, &bad) == 0);
	CHECK(r.proto == IPPROTO_ICMPV6 && r.dst6_mask.hi == ~UINT64_C(0) &&
	      r.dst6_mask.lo == ~UINT64_C(0) && r.dst6.lo == 1);
	CHECK(fw_parse_rule("allow,dst=fd00::8000:0:0:0/65", &r, &bad) == 0);
	CHECK(r.dst6_mask.lo == UINT64_C(0x8000000000000000) && r.dst6.lo == r.dst6_mask.lo);
	CHECK(fw_parse_rule("allow,src=::/0", &r, &bad) == 0 && r.family == FW_IPV6);
	CHECK(fw_parse_rule("deny,proto=icmp6,family=ipv6", &r, &bad) == 0);
	CHECK(r.family == FW_IPV6 && r.proto == IPPROTO_ICMPV6);
	CHECK(fw_parse_rule("deny,family=ipv4", &r, &bad) == 0 && r.family == FW_IPV4);
	CHECK(fw_parse_rule("deny,dport=22", &r, &bad) == 0 && r.family == FW_ANY);
	CHECK(fw_parse_rule("deny,src=10.0.0.0/8", &r, &bad) == 0 && r.family == FW_IPV4);

	CHECK(fw_parse_rule("deny,src=fd00::1/64", &r, &bad) == -EINVAL); /* host bits */
	CHECK(fw_parse_rule("deny,src=fd00::/129", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("deny,src=fd00:::/8", &r, &bad) == -EINVAL);
	/* Families that disagree: the rule could match nothing. */
	CHECK(fw_parse_rule("deny,src=10.0.0.0/8,dst=fd00::/8", &r, &bad) == -EINVAL &&
	      strncmp(bad, "dst=", 4) == 0);
	CHECK(fw_parse_rule("deny,family=ipv4,dst=fd00::/8", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("deny,src=fd00::/8,family=ipv4", &r, &bad) == -EINVAL);
	CHECK(fw_parse_rule("deny,family=ipx", &r, &bad) == -EINVAL);
}

static void
test_match_ipv6(void)
{
	static struct fw_rules rules;
	const char *bad;
	struct fw_key k;

	memset(&rules, 0, sizeof(rules));
	CHECK(fw_rules_add(&rules, "allow,src=fd00:1::/32,proto=tcp,dport=22", &bad) == 0);
	CHECK(fw_rules_add(&rules, "deny,proto=tcp,dport=22", &bad) == 0); /* both families */
	CHECK(fw_rules_add(&rules, "deny,src=10.0.0.0/8", &bad) == 0);     /* IPv4 only */
	CHECK(fw_rules_add(&rules, "deny,dst=::ffff:0:0/96", &bad) == 0);  /* IPv6 only */
	CHECK(fw_rules_add(&rules, "deny,family=ipv6,proto=udp,dport=53", &bad) == 0);
	CHECK(fw_rules_add(&rules, "deny,dst=2001:db8::/64,proto=icmpv6", &bad) == 0);

	k = key6("fd00:1:2::5", "2001:db8::1", IPPROTO_TCP, 999, 22);
	CHECK(fw_match(&rules, &k) == 0);
	k = key6("fd00:2::5", "2001:db8::1", IPPROTO_TCP, 999, 22); /* outside /32 */
	CHECK(fw_match(&rules, &k) == 1);
	k = key(0x0a000001, 0x0a000002, IPPROTO_TCP, 999, 22); /* IPv4 SSH: the any rule */
	CHECK(fw_match(&rules, &k) == 1);
	k = key(0x0a000001, 0x0a000002, IPPROTO_UDP, 999, 53);
	CHECK(fw_match(&rules, &k) == 2);
	/* An IPv6 packet whose source looks like 10.0.0.1 mapped: no IPv4 rule. */
	k = key6("::ffff:10.0.0.1", "fd00::1", IPPROTO_UDP, 999, 54);
	CHECK(fw_match(&rules, &k) == -ENOENT);
	k = key6("fd00::1", "::ffff:10.0.0.1", IPPROTO_UDP, 999, 54);
	CHECK(fw_match(&rules, &k) == 3);
	k = key6("fd00::1", "fd00::2", IPPROTO_UDP, 999, 53);
	CHECK(fw_match(&rules, &k) == 4);
	k = key(0x01010101, 0x02020202, IPPROTO_UDP, 999, 53); /* family=ipv6: not IPv4 */
	CHECK(fw_match(&rules, &k) == -ENOENT);
	k = key6("fd00::1", "2001:db8::ffff:1", IPPROTO_ICMPV6, 0, 0);
	CHECK(fw_match(&rules, &k) == 5);
	k = key6("fd00::1", "2001:db8:0:1::1", IPPROTO_ICMPV6, 0, 0); /* the next /64 */
	CHECK(fw_match(&rules, &k) == -ENOENT);
}

/* An IPv6 header at @p b with payload length @p plen and next header @p nh. */
static void
ip6_hdr(uint8_t *b, uint16_t plen, uint8_t nh)
{
	static const uint8_t src[16] = {0xfd, [15] = 1}, dst[16] = {0xfd, [15] = 2};

	memset(b, 0, 40);
	b[0] = 0x60;
	b[4] = (uint8_t)(plen >> 8), b[5] = (uint8_t)plen;
	b[6] = nh;
	b[7] = 64;
	memcpy(b + 8, src, 16);
	memcpy(b + 24, dst, 16);
}

static void
test_key_from_ipv6(void)
{
	uint8_t b[160];
	const struct rte_ipv6_hdr *ip6 = (const struct rte_ipv6_hdr *)b;
	struct fw_key k;

	memset(b, 0, sizeof(b));
	/* UDP straight after the header. */
	ip6_hdr(b, 8, IPPROTO_UDP);
	b[40] = 0x12, b[41] = 0x34, b[42] = 0x00, b[43] = 0x35;
	CHECK(fw_key_from_ipv6(ip6, 48, &k) == 0 && k.family == FW_IPV6);
	CHECK(k.proto == IPPROTO_UDP && k.has_ports && k.sport == 0x1234 && k.dport == 53);
	CHECK(k.src6.hi == UINT64_C(0xfd00000000000000) && k.src6.lo == 1 && k.dst6.lo == 2);
	/* Padding past the payload length is not read; a frame shorter is. */
	CHECK(fw_key_from_ipv6(ip6, 160, &k) == 0 && k.dport == 53);
	CHECK(fw_key_from_ipv6(ip6, 47, &k) == -EINVAL);
	CHECK(fw_key_from_ipv6(ip6, 39, &k) == -EINVAL);
	ip6_hdr(b, 2, IPPROTO_UDP); /* the ports cut off by the payload length */
	CHECK(fw_key_from_ipv6(ip6, 48, &k) == -EINVAL);
	ip6_hdr(b, 0, IPPROTO_ICMPV6); /* no ports needed */
	CHECK(fw_key_from_ipv6(ip6, 48, &k) == 0 && !k.has_ports && k.proto == IPPROTO_ICMPV6);
	b[0] = 0x40; /* version 4 in an IPv6 frame */
	CHECK(fw_key_from_ipv6(ip6, 48, &k) == -EINVAL);

	/* Hop-by-hop (8 B), destination options (16 B), then TCP's ports. */
	ip6_hdr(b, 8 + 16 + 20, IPPROTO_HOPOPTS);
	b[40] = IPPROTO_DSTOPTS, b[41] = 0;
	b[48] = IPPROTO_TCP, b[49] = 1;
	b[64] = 0x00, b[65] = 0x50, b[66] = 0x01, b[67] = 0xbb;
	CHECK(fw_key_from_ipv6(ip6, 40 + 44, &k) == 0 && k.proto == IPPROTO_TCP);
	CHECK(k.has_ports && k.sport == 80 && k.dport == 443);
	CHECK(fw_key_from_ipv6(ip6, 40 + 43, &k) == -EINVAL); /* frame cut */
	b[49] = 9; /* destination options of 80 B: past the payload */
	CHECK(fw_key_from_ipv6(ip6, 40 + 44, &k) == -EINVAL);
	b[49] = 1;
	/* AH (length in 4-byte units minus 2: 12 B here) before UDP. */
	ip6_hdr(b, 12 + 8, IPPROTO_AH);
	b[40] = IPPROTO_UDP, b[41] = 1;
	b[52] = 0x00, b[53] = 0x07, b[54] = 0x00, b[55] = 0x09;
	CHECK(fw_key_from_ipv6(ip6, 40 + 20, &k) == 0 && k.proto == IPPROTO_UDP);
	CHECK(k.sport == 7 && k.dport == 9);

	/* A first fragment carries the ports; a later one has none. */
	ip6_hdr(b, 8 + 8, IPPROTO_FRAGMENT);
	memset(b + 40, 0, 16);
	b[40] = IPPROTO_UDP, b[43] = 1; /* offset 0, M */
	b[48] = 0x00, b[49] = 0x07, b[50] = 0x00, b[51] = 0x35;
	CHECK(fw_key_from_ipv6(ip6, 56, &k) == 0 && k.proto == IPPROTO_UDP && k.has_ports);
	CHECK(k.dport == 53);
	b[42] = 0x01, b[43] = 0x08; /* offset 33 (x 8 bytes) */
	CHECK(fw_key_from_ipv6(ip6, 56, &k) == 0 && k.proto == IPPROTO_UDP && !k.has_ports);
	ip6_hdr(b, 4, IPPROTO_FRAGMENT); /* the fragment header cut */
	CHECK(fw_key_from_ipv6(ip6, 56, &k) == -EINVAL);

	/* No next header: no ports, not malformed. */
	ip6_hdr(b, 0, IPPROTO_NONE);
	CHECK(fw_key_from_ipv6(ip6, 40, &k) == 0 && k.proto == IPPROTO_NONE && !k.has_ports);

	/* Eight extension headers are walked, a ninth is too many. */
	ip6_hdr(b, 8 * 9 + 8, IPPROTO_DSTOPTS);
	memset(b + 40, 0, 8 * 9 + 8);
	for (int i = 0; i < 9; i++)
		b[40 + 8 * i] = IPPROTO_DSTOPTS;
	b[40 + 8 * 7] = IPPROTO_UDP; /* the 8th header says UDP follows */
	CHECK(fw_key_from_ipv6(ip6, 40 + 80, &k) == 0 && k.proto == IPPROTO_UDP);
	b[40 + 8 * 7] = IPPROTO_DSTOPTS;
	b[40 + 8 * 8] = IPPROTO_UDP; /* the 9th does */
	CHECK(fw_key_from_ipv6(ip6, 40 + 80, &k) == -EINVAL);
}

int
main(void)
{
	test_parse();
	test_first_match_and_default();
	test_rule_limit();
	test_key_from_packet();
	test_parse_ipv6();
	test_match_ipv6();
	test_key_from_ipv6();
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
