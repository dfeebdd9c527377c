/* SPDX-License-Identifier: BSD-3-Clause
 * Security groups for squall-nf-conntrack, as OpenStack Neutron has them:
 * a group is a set of allow-rules for new connections; a port of the
 * manager bound to groups faces the workloads they protect. A new connection
 * leaving through such a port ("in": ingress to the workloads) must match an
 * "in" rule of one of its groups, one arriving from it ("out": egress) an
 * "out" rule; a connection between two bound ports must pass both. Packets of
 * established connections and related ICMP errors pass without rules, and
 * everything else is dropped. Unbound ports are not filtered.
 *
 * The rules file, one directive per line, # comments:
 *
 *   allow GROUP in|out [proto=tcp|udp|icmp|icmpv6|sctp|any|N] [port=N[-M]]
 *         [remote=PREFIX | remote-group=GROUP] [ethertype=ipv4|ipv6]
 *   member GROUP ADDRESS[/LEN]     the addresses of GROUP, for remote-group=
 *   bind PORT GROUP                PORT (name or index) faces GROUP's workloads
 *
 * port= is the destination port of TCP, UDP and SCTP and the type of ICMP,
 * as in Neutron. remote= is the peer: the source of an "in" connection, the
 * destination of an "out" one. Header-only for tests/unit/test_conntrack.c.
 */
#ifndef SQUALL_NFS_CONNTRACK_SG_H
#define SQUALL_NFS_CONNTRACK_SG_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../firewall/rules.h" /* fw_parse_u16(), fw_parse_range() */
#include "ct.h"

#define SG_MAX_GROUPS  64
#define SG_MAX_RULES   1024
#define SG_MAX_MEMBERS 1024
#define SG_MAX_PORTS   16
#define SG_NAME_LEN    32
#define SG_PROTO_ANY   (-1)

#define SG_IN  0
#define SG_OUT 1

struct sg_prefix {
	uint8_t addr[16], mask[16]; /* IPv4 as ::ffff:a.b.c.d/96+LEN */
};

struct sg_rule {
	uint8_t group;
	uint8_t dir; /* SG_IN or SG_OUT */
	int16_t proto;
	bool has_port, has_remote;
	uint16_t port_lo, port_hi;
	int remote_group;  /* -1: none */
	uint8_t ethertype; /* 0 any, 4, 6 */
	struct sg_prefix remote;
};

struct sg_member {
	uint8_t group;
	struct sg_prefix prefix;
};

struct sg_set {
	char group[SG_MAX_GROUPS][SG_NAME_LEN];
	unsigned int n_groups;
	struct sg_rule rule[SG_MAX_RULES];
	unsigned int n_rules;
	struct sg_member member[SG_MAX_MEMBERS];
	unsigned int n_members;
	char bind_port[SG_MAX_PORTS * 4][SG_NAME_LEN];
	uint8_t bind_group[SG_MAX_PORTS * 4];
	unsigned int n_binds;
	uint64_t port_groups[SG_MAX_PORTS]; /* resolved binds: a bit per group */
};

static inline bool
sg_prefix_match(const struct sg_prefix *p, const uint8_t a[16])
{
	unsigned int i;

	for (i = 0; i < 16; i++)
		if ((a[i] & p->mask[i]) != p->addr[i])
			return false;
	return true;
}

static inline int
sg_parse_prefix(const char *s, size_t len, struct sg_prefix *p)
{
	char buf[INET6_ADDRSTRLEN + 8];
	unsigned long bits;
	bool v6;
	char *slash, *end;
	unsigned int i, plen;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	memset(p, 0, sizeof(*p));
	v6 = strchr(buf, ':') != NULL;
	bits = v6 ? 128 : 32;
	slash = strchr(buf, '/');
	if (slash != NULL) {
		*slash = '\0';
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		bits = strtoul(slash + 1, &end, 10);
		if (*end != '\0' || bits > (v6 ? 128u : 32u))
			return -EINVAL;
	}
	if (v6) {
		if (inet_pton(AF_INET6, buf, p->addr) != 1)
			return -EINVAL;
		plen = (unsigned int)bits;
	} else {
		if (inet_pton(AF_INET, buf, p->addr + 12) != 1)
			return -EINVAL;
		p->addr[10] = p->addr[11] = 0xff;
		plen = 96 + (unsigned int)bits;
	}
	for (i = 0; i < 16; i++) {
		if (plen >= 8)
			p->mask[i] = 0xff;
		else if (plen > 0)
			p->mask[i] = (uint8_t)(0xff << (8 - plen));
		plen = plen >= 8 ? plen - 8 : 0;
		if ((p->addr[i] & ~p->mask[i]) != 0)
			return -EINVAL; /* host bits set */
	}
	return 0;
}

static inline int
sg_group_id(struct sg_set *s, const char *name, size_t len, bool create)
{
	unsigned int i;

	if (len == 0 || len >= SG_NAME_LEN)
		return -EINVAL;
	for (i = 0; i < s->n_groups; i++)
		if (strlen(s->group[i]) == len && strncmp(s->group[i], name, len) == 0)
			return (int)i;
	if (!create)
		return -ENOENT;
	if (s->n_groups >= SG_MAX_GROUPS)
		return -ENOSPC;
	memcpy(s->group[s->n_groups], name, len);
	s->group[s->n_groups][len] = '\0';
	return (int)s->n_groups++;
}

static inline int
sg_parse_proto(const char *s, size_t len, int16_t *proto)
{
	static const struct {
		const char *name;
		int16_t proto;
	} names[] = {
		{"tcp", IPPROTO_TCP},       {"udp", IPPROTO_UDP},   {"icmp", IPPROTO_ICMP},
		{"icmpv6", IPPROTO_ICMPV6}, {"sctp", IPPROTO_SCTP}, {"any", SG_PROTO_ANY},
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

#define SG_SEPS " \t\r\n"

/* The next word of *pp: @return its length (0 at the end or a comment). */
static inline size_t
sg_word(const char **pp, const char **w)
{
	const char *p = *pp + strspn(*pp, SG_SEPS);
	size_t n;

	if (*p == '#' || *p == '\0') {
		*w = p;
		*pp = p;
		return 0;
	}
	n = strcspn(p, SG_SEPS);
	*w = p;
	*pp = p + n;
	return n;
}

static inline int
sg_parse_allow(struct sg_set *s, const char *p, const char **bad)
{
	struct sg_rule r;
	const char *w, *eq, *val;
	size_t n, klen, vlen;
	int ret;

	memset(&r, 0, sizeof(r));
	r.proto = SG_PROTO_ANY;
	r.remote_group = -1;
	n = sg_word(&p, &w);
	*bad = w;
	ret = sg_group_id(s, w, n, true);
	if (ret < 0)
		return ret;
	r.group = (uint8_t)ret;
	n = sg_word(&p, &w);
	*bad = w;
	if (n == 2 && strncmp(w, "in", 2) == 0)
		r.dir = SG_IN;
	else if (n == 3 && strncmp(w, "out", 3) == 0)
		r.dir = SG_OUT;
	else
		return -EINVAL;
	while ((n = sg_word(&p, &w)) > 0) {
		*bad = w;
		eq = memchr(w, '=', n);
		if (eq == NULL)
			return -EINVAL;
		klen = (size_t)(eq - w);
		val = eq + 1;
		vlen = n - klen - 1;
		if (klen == 5 && strncmp(w, "proto", 5) == 0) {
			ret = sg_parse_proto(val, vlen, &r.proto);
		} else if (klen == 4 && strncmp(w, "port", 4) == 0) {
			r.has_port = true;
			ret = fw_parse_range(val, vlen, &r.port_lo, &r.port_hi);
		} else if (klen == 6 && strncmp(w, "remote", 6) == 0) {
			ret = sg_parse_prefix(val, vlen, &r.remote);
			r.has_remote = true;
		} else if (klen == 12 && strncmp(w, "remote-group", 12) == 0) {
			ret = sg_group_id(s, val, vlen, true);
			r.remote_group = ret;
		} else if (klen == 9 && strncmp(w, "ethertype", 9) == 0) {
			ret = 0;
			if (vlen == 4 && strncasecmp(val, "ipv4", 4) == 0)
				r.ethertype = 4;
			else if (vlen == 4 && strncasecmp(val, "ipv6", 4) == 0)
				r.ethertype = 6;
			else
				ret = -EINVAL;
		} else {
			ret = -EINVAL;
		}
		if (ret < 0)
			return ret == -ENOSPC ? -ENOSPC : -EINVAL;
	}
	if (r.has_remote && r.remote_group >= 0)
		return -EINVAL; /* one or the other, as in Neutron */
	if (r.has_port && r.proto != IPPROTO_TCP && r.proto != IPPROTO_UDP &&
	    r.proto != IPPROTO_SCTP && r.proto != IPPROTO_ICMP && r.proto != IPPROTO_ICMPV6)
		return -EINVAL; /* a port needs a protocol that has one */
	if (s->n_rules >= SG_MAX_RULES)
		return -ENOSPC;
	s->rule[s->n_rules++] = r;
	return 0;
}

/**
 * Parse one line of a rules file into @p s.
 * @return 0, -EINVAL with @p bad at the offending word, -ENOSPC.
 */
static inline int
sg_parse_line(struct sg_set *s, const char *line, const char **bad)
{
	const char *p = line, *w, *w2;
	size_t n, n2;
	int ret;

	n = sg_word(&p, &w);
	*bad = w;
	if (n == 0)
		return 0;
	if (n == 5 && strncmp(w, "allow", 5) == 0)
		return sg_parse_allow(s, p, bad);
	if (n == 6 && strncmp(w, "member", 6) == 0) {
		if (s->n_members >= SG_MAX_MEMBERS)
			return -ENOSPC;
		n = sg_word(&p, &w);
		*bad = w;
		ret = sg_group_id(s, w, n, true);
		if (ret < 0)
			return ret;
		s->member[s->n_members].group = (uint8_t)ret;
		n = sg_word(&p, &w);
		*bad = w;
		if (sg_parse_prefix(w, n, &s->member[s->n_members].prefix) < 0)
			return -EINVAL;
		s->n_members++;
	} else if (n == 4 && strncmp(w, "bind", 4) == 0) {
		if (s->n_binds >= SG_MAX_PORTS * 4)
			return -ENOSPC;
		n = sg_word(&p, &w);
		*bad = w;
		if (n == 0 || n >= SG_NAME_LEN)
			return -EINVAL;
		n2 = sg_word(&p, &w2);
		*bad = w2;
		ret = sg_group_id(s, w2, n2, true);
		if (ret < 0)
			return ret;
		memcpy(s->bind_port[s->n_binds], w, n);
		s->bind_port[s->n_binds][n] = '\0';
		s->bind_group[s->n_binds++] = (uint8_t)ret;
	} else {
		return -EINVAL;
	}
	n = sg_word(&p, &w);
	*bad = w;
	return n == 0 ? 0 : -EINVAL;
}

/**
 * Resolve the binds' port names against the manager's port names (or
 * indexes). @return 0, or -ENOENT with *bad_bind the index of the first
 * bind naming no port.
 */
static inline int
sg_resolve_ports(struct sg_set *s, const char (*names)[SG_NAME_LEN], unsigned int n_ports,
		 unsigned int *bad_bind)
{
	unsigned int b, i;
	uint16_t idx;

	memset(s->port_groups, 0, sizeof(s->port_groups));
	for (b = 0; b < s->n_binds; b++) {
		for (i = 0; i < n_ports && i < SG_MAX_PORTS; i++)
			if (strcmp(names[i], s->bind_port[b]) == 0)
				break;
		if (i == n_ports || i == SG_MAX_PORTS) {
			if (fw_parse_u16(s->bind_port[b], strlen(s->bind_port[b]), &idx) < 0 ||
			    idx >= n_ports || idx >= SG_MAX_PORTS) {
				*bad_bind = b;
				return -ENOENT;
			}
			i = idx;
		}
		s->port_groups[i] |= UINT64_C(1) << s->bind_group[b];
	}
	return 0;
}

static inline bool
sg_in_group(const struct sg_set *s, int group, const uint8_t addr[16])
{
	unsigned int i;

	for (i = 0; i < s->n_members; i++)
		if (s->member[i].group == group && sg_prefix_match(&s->member[i].prefix, addr))
			return true;
	return false;
}

static inline bool
sg_is_v4(const uint8_t a[16])
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(a, mapped, 12) == 0;
}

/* Does some rule of @p groups in direction @p dir allow @p p? */
static inline bool
sg_groups_allow(const struct sg_set *s, uint64_t groups, uint8_t dir, const struct ct_pkt *p)
{
	const uint8_t *remote = dir == SG_IN ? p->key.src : p->key.dst;
	uint16_t port = ct_is_icmp(p->key.proto) ? p->icmp_type : p->key.dport;
	const struct sg_rule *r;
	unsigned int i;

	for (i = 0; i < s->n_rules; i++) {
		r = &s->rule[i];
		if (!(groups & (UINT64_C(1) << r->group)) || r->dir != dir)
			continue;
		if (r->proto != SG_PROTO_ANY && r->proto != p->key.proto)
			continue;
		if (r->has_port && (port < r->port_lo || port > r->port_hi))
			continue;
		if (r->ethertype != 0 && (r->ethertype == 4) != sg_is_v4(remote))
			continue;
		if (r->has_remote && !sg_prefix_match(&r->remote, remote))
			continue;
		if (r->remote_group >= 0 && !sg_in_group(s, r->remote_group, remote))
			continue;
		return true;
	}
	return false;
}

/**
 * May the new connection of @p p, which came in on port @p in_port and
 * leaves by @p out_port, be committed?
 */
static inline bool
sg_allows(const struct sg_set *s, uint16_t in_port, uint16_t out_port, const struct ct_pkt *p)
{
	uint64_t g;

	if (in_port < SG_MAX_PORTS) {
		g = s->port_groups[in_port];
		if (g != 0 && !sg_groups_allow(s, g, SG_OUT, p))
			return false;
	}
	if (out_port < SG_MAX_PORTS) {
		g = s->port_groups[out_port];
		if (g != 0 && !sg_groups_allow(s, g, SG_IN, p))
			return false;
	}
	return true;
}

#endif /* SQUALL_NFS_CONNTRACK_SG_H */
