/* SPDX-License-Identifier: BSD-3-Clause
 * 5-tuple rules for squall-nf-firewall: source and destination prefix,
 * protocol, source and destination port ranges -> allow or deny, for IPv4
 * and IPv6. The first rule that matches decides; a packet no rule matches
 * gets the default.
 *
 * A rule with an IPv4 prefix (or family=ipv4) matches IPv4 packets only,
 * one with an IPv6 prefix (or family=ipv6) IPv6 packets only, and one with
 * neither matches both: "deny,proto=tcp,dport=22" stops SSH over either.
 * An IPv4-mapped address in an IPv6 header (::ffff:10.0.0.1) is an IPv6
 * packet's address, never matched by an IPv4 rule.
 *
 * A linear scan: the rule sets this NF is for are small (seed 002 uses 10
 * rules), and a scan of 10 rules beats a classifier's setup cost. An IPv4
 * packet reads only a rule's first 32 bytes (its IPv6 prefixes come last,
 * in the rule's second cache line). A big rule set wants rte_acl in an NF
 * with its own EAL.
 *
 * Header-only so tests/unit/test_firewall_rules.c tests the very code the NF
 * runs.
 */
#ifndef SQUALL_NFS_FIREWALL_RULES_H
#define SQUALL_NFS_FIREWALL_RULES_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rte_byteorder.h>
#include <rte_ip.h>

#define FW_MAX_RULES    1024
#define FW_PROTO_ANY    (-1)
/* IPv6 extension headers walked at most; a longer chain is malformed. */
#define FW_MAX_EXT_HDRS 8

enum fw_action {
	FW_ALLOW = 0,
	FW_DENY = 1,
};

/** A rule's address family, and a packet's. */
enum fw_family {
	FW_ANY = 0, /* a rule with no prefix and no family=: both */
	FW_IPV4 = 4,
	FW_IPV6 = 6,
};

/** An IPv6 address or mask as two 64-bit halves, host byte order, the
 * first half the address's first 8 bytes. */
struct fw_ip6 {
	uint64_t hi, lo;
};

struct fw_rule {
	uint32_t src, src_mask; /* IPv4, host byte order; mask 0: any */
	uint32_t dst, dst_mask;
	int16_t proto;             /* FW_PROTO_ANY or 0..255 */
	bool has_sport, has_dport; /* a port range given: only TCP/UDP/SCTP match */
	uint16_t sport_lo, sport_hi;
	uint16_t dport_lo, dport_hi;
	uint8_t family; /* enum fw_family */
	enum fw_action action;
	struct fw_ip6 src6, src6_mask; /* IPv6; mask 0: any */
	struct fw_ip6 dst6, dst6_mask;
};

/** What a rule is matched against. */
struct fw_key {
	uint32_t src, dst; /* IPv4, host byte order */
	uint8_t family;    /* FW_IPV4 or FW_IPV6 */
	uint8_t proto;     /* IPv6: the upper-layer protocol, after extension headers */
	bool has_ports;    /* TCP, UDP or SCTP with its ports in the packet */
	uint16_t sport, dport;
	struct fw_ip6 src6, dst6; /* IPv6 */
};

static inline bool
fw_ip6_in(const struct fw_ip6 *a, const struct fw_ip6 *net, const struct fw_ip6 *mask)
{
	return (a->hi & mask->hi) == net->hi && (a->lo & mask->lo) == net->lo;
}

struct fw_rules {
	struct fw_rule rule[FW_MAX_RULES];
	unsigned int n_rules;
	enum fw_action dflt; /* when no rule matches */
};

static inline bool
fw_rule_matches(const struct fw_rule *r, const struct fw_key *k)
{
	if (r->family != FW_ANY && r->family != k->family)
		return false;
	if (k->family == FW_IPV4) {
		if ((k->src & r->src_mask) != r->src || (k->dst & r->dst_mask) != r->dst)
			return false;
	} else if (!fw_ip6_in(&k->src6, &r->src6, &r->src6_mask) ||
		   !fw_ip6_in(&k->dst6, &r->dst6, &r->dst6_mask)) {
		return false;
	}
	if (r->proto != FW_PROTO_ANY && r->proto != k->proto)
		return false;
	if (r->has_sport && (!k->has_ports || k->sport < r->sport_lo || k->sport > r->sport_hi))
		return false;
	if (r->has_dport && (!k->has_ports || k->dport < r->dport_lo || k->dport > r->dport_hi))
		return false;
	return true;
}

/** @return the index of the first rule matching @p k, or -ENOENT. */
static inline int
fw_match(const struct fw_rules *rules, const struct fw_key *k)
{
	unsigned int i;

	for (i = 0; i < rules->n_rules; i++)
		if (fw_rule_matches(&rules->rule[i], k))
			return (int)i;
	return -ENOENT;
}

/**
 * The key of the IPv4 packet at @p ip, @p len bytes from the IP header on
 * (what the frame holds; the packet itself ends at its IP total length, and
 * any bytes past it are padding, never read), of which the first @p avail
 * are at @p ip (a jumbo frame's first segment: the headers read must be in
 * it, which the manager sees to, squall/pkt.h). Ports are read from TCP, UDP
 * and SCTP headers of unfragmented packets and first fragments; a later
 * fragment has none (has_ports false), so rules with ports do not match it.
 * @return 0, or -EINVAL if malformed: the IP header truncated or its IHL
 * < 5, a total length shorter than the header or longer than the frame, or
 * a TCP/UDP/SCTP packet (or first fragment) too short for its ports, which
 * would otherwise slip past every rule with ports.
 */
static inline int
fw_key_of_ipv4(const struct rte_ipv4_hdr *ip, uint32_t len, uint32_t avail, struct fw_key *k)
{
	uint32_t ihl_bytes, total_len;
	const uint8_t *l4;

	if (len < sizeof(*ip) || avail < sizeof(*ip))
		return -EINVAL;
	ihl_bytes = (uint32_t)(ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4;
	total_len = rte_be_to_cpu_16(ip->total_length);
	if (ihl_bytes < sizeof(*ip) || ihl_bytes > total_len || total_len > len)
		return -EINVAL;
	k->family = FW_IPV4; /* src6/dst6 are left alone: never read for IPv4 */
	k->src = rte_be_to_cpu_32(ip->src_addr);
	k->dst = rte_be_to_cpu_32(ip->dst_addr);
	k->proto = ip->next_proto_id;
	k->has_ports = false;
	k->sport = k->dport = 0;
	if ((rte_be_to_cpu_16(ip->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK) != 0)
		return 0;
	if (k->proto != IPPROTO_TCP && k->proto != IPPROTO_UDP && k->proto != IPPROTO_SCTP)
		return 0;
	if (total_len < ihl_bytes + 4 || avail < ihl_bytes + 4)
		return -EINVAL;
	/* The ports are the first 4 bytes of all three headers. */
	l4 = (const uint8_t *)ip + ihl_bytes;
	k->sport = (uint16_t)(l4[0] << 8 | l4[1]);
	k->dport = (uint16_t)(l4[2] << 8 | l4[3]);
	k->has_ports = true;
	return 0;
}

/* fw_key_of_ipv4() of a packet in one buffer, all @p len bytes readable. */
static inline int
fw_key_from_ipv4(const struct rte_ipv4_hdr *ip, uint32_t len, struct fw_key *k)
{
	return fw_key_of_ipv4(ip, len, len, k);
}

static inline uint64_t
fw_rd64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static inline struct fw_ip6
fw_ip6_of(const uint8_t a[16])
{
	struct fw_ip6 r = {.hi = fw_rd64(a), .lo = fw_rd64(a + 8)};

	return r;
}

/**
 * The key of the IPv6 packet at @p ip6, @p len bytes from the IPv6 header on
 * (what the frame holds; the packet ends at 40 + its payload length, and
 * bytes past that are padding, never read), of which the first @p avail
 * are at @p ip6 (as for IPv4: a header past them is malformed). The extension headers
 * (hop-by-hop, routing, destination options, AH, fragment: at most
 * FW_MAX_EXT_HDRS) are walked to the upper-layer protocol, which is the
 * key's proto. Ports as for IPv4: from TCP, UDP and SCTP of an unfragmented
 * packet or a first fragment (offset 0); a later fragment has none.
 * @return 0, or -EINVAL if malformed: fewer than 40 bytes, not version 6,
 * a payload length past the frame, an extension header cut off or a chain
 * longer than FW_MAX_EXT_HDRS, or a TCP/UDP/SCTP header too short for its
 * ports.
 */
static inline int
fw_key_of_ipv6(const struct rte_ipv6_hdr *ip6, uint32_t len, uint32_t avail, struct fw_key *k)
{
	const uint8_t *b = (const uint8_t *)ip6;
	uint32_t end, off = sizeof(*ip6), n;
	uint8_t nh;
	int hdrs;

	if (len < sizeof(*ip6) || avail < sizeof(*ip6) || (b[0] >> 4) != 6)
		return -EINVAL;
	nh = ip6->proto;
	end = (uint32_t)sizeof(*ip6) + rte_be_to_cpu_16(ip6->payload_len);
	if (end > len)
		return -EINVAL;
	k->family = FW_IPV6;
	k->src = k->dst = 0;
	k->src6 = fw_ip6_of(ip6->src_addr);
	k->dst6 = fw_ip6_of(ip6->dst_addr);
	k->has_ports = false;
	k->sport = k->dport = 0;
	/* (what follows reads no further than end, which avail bounds) */
	if (end > avail)
		end = avail;
	for (hdrs = 0; hdrs <= FW_MAX_EXT_HDRS; hdrs++) {
		k->proto = nh;
		switch (nh) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
		case IPPROTO_AH:
			if (off + 2 > end)
				return -EINVAL;
			n = nh == IPPROTO_AH ? ((uint32_t)b[off + 1] + 2) * 4
					     : ((uint32_t)b[off + 1] + 1) * 8;
			break;
		case IPPROTO_FRAGMENT:
			if (off + 8 > end)
				return -EINVAL;
			/* A later fragment: the protocol of the whole, no ports. */
			if ((b[off + 2] << 8 | (b[off + 3] & 0xf8)) != 0) {
				k->proto = b[off];
				return 0;
			}
			n = 8;
			break;
		default:
			if (nh != IPPROTO_TCP && nh != IPPROTO_UDP && nh != IPPROTO_SCTP)
				return 0;
			if (off + 4 > end)
				return -EINVAL;
			k->sport = (uint16_t)(b[off] << 8 | b[off + 1]);
			k->dport = (uint16_t)(b[off + 2] << 8 | b[off + 3]);
			k->has_ports = true;
			return 0;
		}
		if (off + n > end)
			return -EINVAL;
		nh = b[off];
		off += n;
	}
	return -EINVAL; /* a chain longer than FW_MAX_EXT_HDRS */
}

/* fw_key_of_ipv6() of a packet in one buffer, all @p len bytes readable. */
static inline int
fw_key_from_ipv6(const struct rte_ipv6_hdr *ip6, uint32_t len, struct fw_key *k)
{
	return fw_key_of_ipv6(ip6, len, len, k);
}

/* The mask of the first @p bits of 64. */
static inline uint64_t
fw_mask64(unsigned long bits)
{
	return bits == 0 ? 0 : bits >= 64 ? ~UINT64_C(0) : ~UINT64_C(0) << (64 - bits);
}

/* "ADDR[/LEN]" of either family into @p r's source (@p dst false) or
 * destination prefix, setting the rule's family; a prefix of the other
 * family than one given before in the rule is an error. */
static inline int
fw_parse_prefix(const char *s, size_t len, struct fw_rule *r, bool dst)
{
	char buf[INET6_ADDRSTRLEN + 5];
	uint8_t a6[16];
	const char *slash;
	unsigned long d;
	struct in_addr in;
	struct fw_ip6 net, mask;
	bool v6;
	char *end;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	v6 = strchr(buf, ':') != NULL;
	d = v6 ? 128 : 32;
	if (r->family != FW_ANY && r->family != (v6 ? FW_IPV6 : FW_IPV4))
		return -EINVAL; /* "src=10.0.0.0/8,dst=fd00::/8" matches nothing */
	slash = strchr(buf, '/');
	if (slash != NULL) {
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		d = strtoul(slash + 1, &end, 10);
		if (*end != '\0' || d > (v6 ? 128u : 32u))
			return -EINVAL;
		buf[slash - buf] = '\0';
	}
	if (!v6) {
		uint32_t m = d == 0 ? 0 : ~(uint32_t)0 << (32 - d);

		if (inet_pton(AF_INET, buf, &in) != 1)
			return -EINVAL;
		/* host bits set: "10.0.0.1/8" is a typo more often than a wish */
		if ((ntohl(in.s_addr) & ~m) != 0)
			return -EINVAL;
		*(dst ? &r->dst : &r->src) = ntohl(in.s_addr);
		*(dst ? &r->dst_mask : &r->src_mask) = m;
		r->family = FW_IPV4;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, a6) != 1)
		return -EINVAL;
	net = fw_ip6_of(a6);
	mask.hi = fw_mask64(d);
	mask.lo = fw_mask64(d > 64 ? d - 64 : 0);
	if ((net.hi & ~mask.hi) != 0 || (net.lo & ~mask.lo) != 0)
		return -EINVAL;
	*(dst ? &r->dst6 : &r->src6) = net;
	*(dst ? &r->dst6_mask : &r->src6_mask) = mask;
	r->family = FW_IPV6;
	return 0;
}

/* family=ipv4|ipv6 */
static inline int
fw_parse_family(const char *s, size_t len, struct fw_rule *r)
{
	uint8_t f;

	if (len == 4 && strncasecmp(s, "ipv4", 4) == 0)
		f = FW_IPV4;
	else if (len == 4 && strncasecmp(s, "ipv6", 4) == 0)
		f = FW_IPV6;
	else
		return -EINVAL;
	if (r->family != FW_ANY && r->family != f)
		return -EINVAL;
	r->family = f;
	return 0;
}

static inline int
fw_parse_u16(const char *s, size_t len, uint16_t *out)
{
	unsigned long v = 0;
	size_t i;

	if (len == 0 || len > 5)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > UINT16_MAX)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

/* "N" or "LO-HI" */
static inline int
fw_parse_range(const char *s, size_t len, uint16_t *lo, uint16_t *hi)
{
	const char *dash = memchr(s, '-', len);

	if (dash == NULL) {
		if (fw_parse_u16(s, len, lo) < 0)
			return -EINVAL;
		*hi = *lo;
		return 0;
	}
	if (fw_parse_u16(s, (size_t)(dash - s), lo) < 0 ||
	    fw_parse_u16(dash + 1, len - (size_t)(dash - s) - 1, hi) < 0 || *lo > *hi)
		return -EINVAL;
	return 0;
}

static inline int
fw_parse_proto(const char *s, size_t len, int16_t *proto)
{
	static const struct {
		const char *name;
		int16_t proto;
	} names[] = {
		{"tcp", IPPROTO_TCP},       {"udp", IPPROTO_UDP},      {"icmp", IPPROTO_ICMP},
		{"icmpv6", IPPROTO_ICMPV6}, {"icmp6", IPPROTO_ICMPV6}, {"sctp", IPPROTO_SCTP},
		{"any", FW_PROTO_ANY},
	};
	uint16_t v;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strlen(names[i].name) == len && strncasecmp(s, names[i].name, len) == 0) {
			*proto = names[i].proto;
			return 0;
		}
	}
	if (fw_parse_u16(s, len, &v) < 0 || v > 255)
		return -EINVAL;
	*proto = (int16_t)v;
	return 0;
}

/**
 * Parse one rule: an action, then any of src=PREFIX, dst=PREFIX,
 * proto=tcp|udp|icmp|icmpv6|sctp|any|N, sport=N|LO-HI, dport=N|LO-HI,
 * family=ipv4|ipv6, separated by commas or blanks:
 * "deny,src=10.0.0.0/8,proto=tcp,dport=22",
 * "allow dst=192.168.1.0/24 proto=udp dport=1000-1999" or
 * "allow,src=fd00:1::/32,proto=tcp,dport=443". A prefix is IPv4 or IPv6
 * (it has a colon); without /LEN it is one address (/32, /128). The
 * prefixes and family= of a rule must agree on the family. Trailing
 * newline and # comment ignored.
 * @return 0, or -EINVAL with @p bad pointing at the offending word.
 */
static inline int
fw_parse_rule(const char *s, struct fw_rule *r, const char **bad)
{
	static const char seps[] = ", \t\r\n";
	const char *w = s + strspn(s, seps), *eq, *val;
	size_t n, klen, vlen;
	bool has_action = false;
	int ret;

	memset(r, 0, sizeof(*r));
	r->proto = FW_PROTO_ANY;
	*bad = w;
	while (*w != '\0' && *w != '#') {
		n = strcspn(w, seps);
		*bad = w;
		if (!has_action) {
			if (n == 5 && strncasecmp(w, "allow", 5) == 0)
				r->action = FW_ALLOW;
			else if (n == 4 && strncasecmp(w, "deny", 4) == 0)
				r->action = FW_DENY;
			else
				return -EINVAL;
			has_action = true;
		} else {
			eq = memchr(w, '=', n);
			if (eq == NULL)
				return -EINVAL;
			klen = (size_t)(eq - w);
			val = eq + 1;
			vlen = n - klen - 1;
			if (klen == 3 && strncmp(w, "src", 3) == 0)
				ret = fw_parse_prefix(val, vlen, r, false);
			else if (klen == 3 && strncmp(w, "dst", 3) == 0)
				ret = fw_parse_prefix(val, vlen, r, true);
			else if (klen == 6 && strncmp(w, "family", 6) == 0)
				ret = fw_parse_family(val, vlen, r);
			else if (klen == 5 && strncmp(w, "proto", 5) == 0)
				ret = fw_parse_proto(val, vlen, &r->proto);
			else if (klen == 5 && strncmp(w, "sport", 5) == 0)
				ret = fw_parse_range(val, vlen, &r->sport_lo, &r->sport_hi);
			else if (klen == 5 && strncmp(w, "dport", 5) == 0)
				ret = fw_parse_range(val, vlen, &r->dport_lo, &r->dport_hi);
			else
				ret = -EINVAL;
			if (ret < 0)
				return -EINVAL;
			if (w[0] == 's' && w[1] == 'p')
				r->has_sport = true;
			else if (w[0] == 'd' && w[1] == 'p')
				r->has_dport = true;
		}
		w += n;
		w += strspn(w, seps);
	}
	if (!has_action)
		return -EINVAL;
	*bad = NULL;
	return 0;
}

/**
 * Parse and append a rule.
 * @return 0, -EINVAL (see fw_parse_rule()), or -ENOSPC past FW_MAX_RULES.
 */
static inline int
fw_rules_add(struct fw_rules *rules, const char *s, const char **bad)
{
	struct fw_rule r;

	*bad = NULL;
	if (rules->n_rules >= FW_MAX_RULES)
		return -ENOSPC;
	if (fw_parse_rule(s, &r, bad) < 0)
		return -EINVAL;
	rules->rule[rules->n_rules++] = r;
	return 0;
}

#endif /* SQUALL_NFS_FIREWALL_RULES_H */
