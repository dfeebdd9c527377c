/* SPDX-License-Identifier: BSD-3-Clause
 * 5-tuple rules for squall-nf-firewall: source and destination prefix,
 * protocol, source and destination port ranges -> allow or deny. The first
 * rule that matches decides; a packet no rule matches gets the default.
 *
 * A linear scan: the rule sets this NF is for are small (seed 002 uses 10
 * rules), and a scan of 10 rules of 28 bytes stays in one or two cache
 * lines per rule and beats a classifier's setup cost. A big rule set wants
 * rte_acl in an NF with its own EAL.
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

#define FW_MAX_RULES 1024
#define FW_PROTO_ANY (-1)

enum fw_action {
	FW_ALLOW = 0,
	FW_DENY = 1,
};

struct fw_rule {
	uint32_t src, src_mask; /* host byte order; mask 0: any */
	uint32_t dst, dst_mask;
	int16_t proto;             /* FW_PROTO_ANY or 0..255 */
	bool has_sport, has_dport; /* a port range given: only TCP/UDP/SCTP match */
	uint16_t sport_lo, sport_hi;
	uint16_t dport_lo, dport_hi;
	enum fw_action action;
};

/** What a rule is matched against. */
struct fw_key {
	uint32_t src, dst; /* host byte order */
	uint8_t proto;
	bool has_ports; /* TCP, UDP or SCTP with its ports in the packet */
	uint16_t sport, dport;
};

struct fw_rules {
	struct fw_rule rule[FW_MAX_RULES];
	unsigned int n_rules;
	enum fw_action dflt; /* when no rule matches */
};

static inline bool
fw_rule_matches(const struct fw_rule *r, const struct fw_key *k)
{
	if ((k->src & r->src_mask) != r->src || (k->dst & r->dst_mask) != r->dst)
		return false;
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
 * any bytes past it are padding, never read). Ports are read from TCP, UDP
 * and SCTP headers of unfragmented packets and first fragments; a later
 * fragment has none (has_ports false), so rules with ports do not match it.
 * @return 0, or -EINVAL if malformed: the IP header truncated or its IHL
 * < 5, a total length shorter than the header or longer than the frame, or
 * a TCP/UDP/SCTP packet (or first fragment) too short for its ports, which
 * would otherwise slip past every rule with ports.
 */
static inline int
fw_key_from_ipv4(const struct rte_ipv4_hdr *ip, uint32_t len, struct fw_key *k)
{
	uint32_t ihl_bytes, total_len;
	const uint8_t *l4;

	if (len < sizeof(*ip))
		return -EINVAL;
	ihl_bytes = (uint32_t)(ip->version_ihl & RTE_IPV4_HDR_IHL_MASK) * 4;
	total_len = rte_be_to_cpu_16(ip->total_length);
	if (ihl_bytes < sizeof(*ip) || ihl_bytes > total_len || total_len > len)
		return -EINVAL;
	k->src = rte_be_to_cpu_32(ip->src_addr);
	k->dst = rte_be_to_cpu_32(ip->dst_addr);
	k->proto = ip->next_proto_id;
	k->has_ports = false;
	k->sport = k->dport = 0;
	if ((rte_be_to_cpu_16(ip->fragment_offset) & RTE_IPV4_HDR_OFFSET_MASK) != 0)
		return 0;
	if (k->proto != IPPROTO_TCP && k->proto != IPPROTO_UDP && k->proto != IPPROTO_SCTP)
		return 0;
	if (total_len < ihl_bytes + 4)
		return -EINVAL;
	/* The ports are the first 4 bytes of all three headers. */
	l4 = (const uint8_t *)ip + ihl_bytes;
	k->sport = (uint16_t)(l4[0] << 8 | l4[1]);
	k->dport = (uint16_t)(l4[2] << 8 | l4[3]);
	k->has_ports = true;
	return 0;
}

static inline int
fw_parse_prefix(const char *s, size_t len, uint32_t *addr, uint32_t *mask)
{
	char buf[INET_ADDRSTRLEN + 4];
	const char *slash;
	unsigned long d = 32;
	struct in_addr in;
	char *end;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	slash = strchr(buf, '/');
	if (slash != NULL) {
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		d = strtoul(slash + 1, &end, 10);
		if (*end != '\0' || d > 32)
			return -EINVAL;
		buf[slash - buf] = '\0';
	}
	if (inet_pton(AF_INET, buf, &in) != 1)
		return -EINVAL;
	*mask = d == 0 ? 0 : ~(uint32_t)0 << (32 - d);
	*addr = ntohl(in.s_addr);
	if ((*addr & ~*mask) != 0)
		return -EINVAL; /* host bits set: "10.0.0.1/8" is a typo more often than a wish */
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
		{"tcp", IPPROTO_TCP},   {"udp", IPPROTO_UDP},  {"icmp", IPPROTO_ICMP},
		{"sctp", IPPROTO_SCTP}, {"any", FW_PROTO_ANY},
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
 * proto=tcp|udp|icmp|sctp|any|N, sport=N|LO-HI, dport=N|LO-HI, separated by
 * commas or blanks: "deny,src=10.0.0.0/8,proto=tcp,dport=22" or
 * "allow dst=192.168.1.0/24 proto=udp dport=1000-1999". A prefix without
 * /LEN is a /32. Trailing newline and # comment ignored.
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
				ret = fw_parse_prefix(val, vlen, &r->src, &r->src_mask);
			else if (klen == 3 && strncmp(w, "dst", 3) == 0)
				ret = fw_parse_prefix(val, vlen, &r->dst, &r->dst_mask);
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
