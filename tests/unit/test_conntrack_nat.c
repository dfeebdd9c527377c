/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-nat's translation (nfs/nat/nat.h): SNAT and DNAT both ways,
 * incrementally updated checksums equal to recomputed ones, port
 * allocation, exhaustion and release at expiry and by the state cleaner,
 * ICMP echo identifiers, ICMP errors translated back for their receiver.
 */
#include <stdio.h>
#include <string.h>

#include <rte_ip.h>

#include "nat.h"

#include "check.h"

#define A(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

/* An Ethernet + IPv4 + TCP/UDP/ICMP frame with valid checksums. */
static uint32_t
frame(uint8_t *f, uint8_t proto, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport,
      uint32_t payload)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	uint32_t l4_len = proto == IPPROTO_TCP ? 20 : 8, i;
	uint8_t *l4 = f + 34;

	memset(f, 0, 14 + 20 + l4_len + payload);
	f[12] = 0x08;
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(20 + l4_len + payload));
	ip->time_to_live = 64;
	ip->next_proto_id = proto;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	for (i = 0; i < payload; i++)
		l4[l4_len + i] = (uint8_t)(i * 7 + 3);
	if (proto == IPPROTO_ICMP) {
		l4[0] = 8; /* echo request; identifier = sport */
		l4[4] = (uint8_t)(sport >> 8), l4[5] = (uint8_t)sport;
		l4[7] = 1;
		*(uint16_t *)(l4 + 2) = (uint16_t)~rte_raw_cksum(l4, 8 + payload);
	} else {
		l4[0] = (uint8_t)(sport >> 8), l4[1] = (uint8_t)sport;
		l4[2] = (uint8_t)(dport >> 8), l4[3] = (uint8_t)dport;
		if (proto == IPPROTO_TCP) {
			l4[12] = 5 << 4;
			l4[13] = CT_TCP_SYN;
			l4[4] = 0xfe; /* a seq with high bits */
			*(uint16_t *)(l4 + 16) = rte_ipv4_udptcp_cksum(ip, l4);
		} else {
			l4[4] = (uint8_t)((8 + payload) >> 8), l4[5] = (uint8_t)(8 + payload);
			*(uint16_t *)(l4 + 6) = rte_ipv4_udptcp_cksum(ip, l4);
		}
	}
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	return 14 + 20 + l4_len + payload;
}

/* The TCP or UDP checksum of the frame as it should be. */
static uint16_t
l4_cksum_recomputed(uint8_t *f)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	uint8_t *c = f + 34 + (ip->next_proto_id == IPPROTO_TCP ? 16 : 6);
	uint16_t old, now;

	memcpy(&old, c, 2);
	memset(c, 0, 2);
	now = rte_ipv4_udptcp_cksum(ip, f + 34);
	memcpy(c, &old, 2);
	return now;
}

/* Set TCP flags after frame() computed the checksum, and fix it. */
static void
set_tcp_flags(uint8_t *f, uint8_t flags)
{
	uint16_t c;

	f[47] = flags;
	c = l4_cksum_recomputed(f);
	memcpy(f + 50, &c, 2);
}

/* Every checksum of the frame verifies. */
static bool
cksums_ok(uint8_t *f, uint32_t len)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	uint8_t *l4 = f + 34;

	if (rte_raw_cksum(ip, 20) != 0xffff)
		return false;
	if (ip->next_proto_id == IPPROTO_ICMP)
		return rte_raw_cksum(l4, len - 34) == 0xffff;
	return l4_cksum_recomputed(f) ==
	       *(uint16_t *)(l4 + (ip->next_proto_id == IPPROTO_TCP ? 16 : 6));
}

static enum nat_result
xlate_zone(struct nat *n, uint8_t *f, uint32_t len, uint16_t zone, uint64_t now, struct ct_pkt *p,
	   struct ct_key *out)
{
	struct ct_hdrs h;
	struct ct_key x;
	enum nat_result r;

	if (ct_parse(f, len, zone, p, &h) != 0)
		return NAT_NOT_OPENING;
	r = nat_translate(n, p, (uint16_t)(zone + 7), now, &x);
	if (out != NULL)
		*out = x;
	if (r == NAT_XLATED || r == NAT_XLATED_NEW)
		nat_rewrite(f, &h, p, &x);
	return r;
}

static enum nat_result
xlate(struct nat *n, uint8_t *f, uint32_t len, uint64_t now, struct ct_pkt *p)
{
	return xlate_zone(n, f, len, 0, now, p, NULL);
}

static uint32_t
rd_addr(const uint8_t *f, int off)
{
	return (uint32_t)f[off] << 24 | (uint32_t)f[off + 1] << 16 | (uint32_t)f[off + 2] << 8 |
	       f[off + 3];
}

static uint16_t
rd_port(const uint8_t *f, int off)
{
	return (uint16_t)(f[off] << 8 | f[off + 1]);
}

static void
test_snat_dnat_both_ways(void)
{
	static struct nat n;
	uint8_t f[1600];
	struct ct_pkt p;
	uint32_t len;
	uint16_t port;
	uint8_t protos[2] = {IPPROTO_TCP, IPPROTO_UDP};
	int i;

	memset(&n, 0, sizeof(n));
	n.has_snat = true;
	n.snat = (struct nat_snat){A(10, 0, 0, 0), 0xffffff00, A(192, 0, 2, 1), 20000, 20009};
	n.dnat[0] = (struct nat_dnat){IPPROTO_TCP, A(192, 0, 2, 80), A(10, 1, 0, 5), 80, 8080};
	n.n_dnat = 1;
	CHECK(nat_init(&n, 64) == 0);

	for (i = 0; i < 2; i++) {
		/* SNAT: 10.0.0.7:40000 -> 198.51.100.1:443 leaves as 192.0.2.1:2000x. */
		len = frame(f, protos[i], A(10, 0, 0, 7), A(198, 51, 100, 1), 40000, 443, 1000);
		CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW);
		port = rd_port(f, 34);
		CHECK(rd_addr(f, 26) == A(192, 0, 2, 1) && port >= 20000 && port <= 20009);
		CHECK(rd_addr(f, 30) == A(198, 51, 100, 1) && rd_port(f, 36) == 443);
		CHECK(cksums_ok(f, len));
		/* Again: the same mapping. */
		len = frame(f, protos[i], A(10, 0, 0, 7), A(198, 51, 100, 1), 40000, 443, 3);
		CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED && rd_port(f, 34) == port);
		CHECK(cksums_ok(f, len));
		/* The reply to 192.0.2.1:port goes back to 10.0.0.7:40000. */
		len = frame(f, protos[i], A(198, 51, 100, 1), A(192, 0, 2, 1), 443, port, 1400);
		if (protos[i] == IPPROTO_TCP)
			set_tcp_flags(f, CT_TCP_SYN | CT_TCP_ACK);
		CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED);
		CHECK(rd_addr(f, 30) == A(10, 0, 0, 7) && rd_port(f, 36) == 40000);
		CHECK(rd_addr(f, 26) == A(198, 51, 100, 1) && rd_port(f, 34) == 443);
		CHECK(cksums_ok(f, len));
	}

	/* DNAT and SNAT at once: 10.0.0.9 -> 192.0.2.80:80 becomes
	 * 192.0.2.1:p -> 10.1.0.5:8080; the reply comes back from 192.0.2.80:80. */
	len = frame(f, IPPROTO_TCP, A(10, 0, 0, 9), A(192, 0, 2, 80), 33333, 80, 0);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW);
	port = rd_port(f, 34);
	CHECK(rd_addr(f, 30) == A(10, 1, 0, 5) && rd_port(f, 36) == 8080);
	CHECK(rd_addr(f, 26) == A(192, 0, 2, 1) && cksums_ok(f, len));
	len = frame(f, IPPROTO_TCP, A(10, 1, 0, 5), A(192, 0, 2, 1), 8080, port, 10);
	set_tcp_flags(f, CT_TCP_ACK);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED && cksums_ok(f, len));
	CHECK(rd_addr(f, 26) == A(192, 0, 2, 80) && rd_port(f, 34) == 80);
	CHECK(rd_addr(f, 30) == A(10, 0, 0, 9) && rd_port(f, 36) == 33333);

	/* Not from the SNAT prefix and no DNAT: untouched. A non-SYN of no
	 * connection: untouched too, never a mapping. */
	len = frame(f, IPPROTO_UDP, A(172, 16, 0, 1), A(198, 51, 100, 1), 1, 2, 0);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_UNTOUCHED);
	len = frame(f, IPPROTO_TCP, A(10, 0, 0, 7), A(198, 51, 100, 1), 1, 2, 0);
	set_tcp_flags(f, CT_TCP_ACK);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_NOT_OPENING);

	/* UDP without a checksum keeps none. */
	len = frame(f, IPPROTO_UDP, A(10, 0, 0, 8), A(198, 51, 100, 1), 5, 6, 20);
	f[40] = f[41] = 0;
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW && f[40] == 0 && f[41] == 0);
	nat_free(&n);
}

static void
test_ports_exhausted_and_freed(void)
{
	static struct nat n;
	uint8_t f[256];
	struct ct_pkt p;
	uint32_t len;
	uint16_t id;
	int i;

	memset(&n, 0, sizeof(n));
	n.has_snat = true;
	n.snat = (struct nat_snat){A(10, 0, 0, 0), 0xffffff00, A(192, 0, 2, 1), 5000, 5002};
	CHECK(nat_init(&n, 64) == 0);
	for (i = 0; i < 3; i++) {
		len = frame(f, IPPROTO_UDP, A(10, 0, 0, 1), A(8, 8, 8, 8), (uint16_t)(100 + i), 53,
			    0);
		CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW);
	}
	len = frame(f, IPPROTO_UDP, A(10, 0, 0, 1), A(8, 8, 8, 8), 200, 53, 0);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_NO_PORT);
	CHECK(n.n_ports_used[1] == 3);
	/* TCP has ports of its own. */
	len = frame(f, IPPROTO_TCP, A(10, 0, 0, 1), A(8, 8, 8, 8), 200, 53, 0);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW);
	/* ICMP echo: the identifier is translated, the checksum fixed. */
	len = frame(f, IPPROTO_ICMP, A(10, 0, 0, 1), A(8, 8, 8, 8), 4242, 0, 56);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW);
	id = rd_port(f, 38);
	CHECK(id >= 5000 && id <= 5002 && cksums_ok(f, len));
	/* UDP's mappings expire after 120 s (ICMP's after 30): their ports come
	 * back. */
	CHECK(nat_sweep(&n, NAT_TO_UDP_MS, 64) == 4);
	len = frame(f, IPPROTO_UDP, A(10, 0, 0, 1), A(8, 8, 8, 8), 200, 53, 0);
	CHECK(xlate(&n, f, len, NAT_TO_UDP_MS, &p) == NAT_XLATED_NEW);
	CHECK(n.n_used == 2 * 2); /* the TCP and the new UDP mapping */
	CHECK(n.n_ports_used[1] == 1 && n.n_ports_used[2] == 0);
	nat_free(&n);
}

/* Two tenants with the same addresses in zones 1 and 2: two mappings, and
 * each reply goes back to its own zone and in-port. */
static void
test_zones(void)
{
	static struct nat n;
	uint8_t f[256];
	struct ct_pkt p;
	struct ct_key x;
	uint16_t port1, port2;
	uint32_t len;

	memset(&n, 0, sizeof(n));
	n.has_snat = true;
	n.snat = (struct nat_snat){A(10, 0, 0, 0), 0xffffff00, A(192, 0, 2, 1), 7000, 7999};
	CHECK(nat_init(&n, 64) == 0);
	len = frame(f, IPPROTO_UDP, A(10, 0, 0, 1), A(8, 8, 8, 8), 999, 53, 0);
	CHECK(xlate_zone(&n, f, len, 1, 0, &p, &x) == NAT_XLATED_NEW && x.zone == 0);
	port1 = rd_port(f, 34);
	len = frame(f, IPPROTO_UDP, A(10, 0, 0, 1), A(8, 8, 8, 8), 999, 53, 0);
	CHECK(xlate_zone(&n, f, len, 2, 0, &p, &x) == NAT_XLATED_NEW);
	port2 = rd_port(f, 34);
	CHECK(port1 != port2);
	len = frame(f, IPPROTO_UDP, A(8, 8, 8, 8), A(192, 0, 2, 1), 53, port2, 0);
	CHECK(xlate_zone(&n, f, len, 0, 0, &p, &x) == NAT_XLATED && x.zone == 2);
	CHECK(n.last_dir == CT_REPLY && n.last_in_port == 2 + 7);
	CHECK(rd_addr(f, 30) == A(10, 0, 0, 1) && rd_port(f, 36) == 999);
	len = frame(f, IPPROTO_UDP, A(8, 8, 8, 8), A(192, 0, 2, 1), 53, port1, 0);
	CHECK(xlate_zone(&n, f, len, 0, 0, &p, &x) == NAT_XLATED && x.zone == 1);
	CHECK(n.last_in_port == 1 + 7);
	nat_free(&n);
}

static void
test_csum_fix(void)
{
	/* RFC 1624 section 4's example: a checksum of 0xdd2f, a word 0x5555
	 * changed to 0x3285, gives 0x0000 (not eqn. 2's 0xffff). */
	uint16_t c = rte_cpu_to_be_16(0xdd2f);

	c = nat_csum_fix16(c, rte_cpu_to_be_16(0x5555), rte_cpu_to_be_16(0x3285));
	CHECK(c == 0x0000);
}

/* The ICMP error @p type/@p code from @p src to @p dst quoting the first
 * @p quote bytes of the IPv4 packet in frame @p q (its IP header on).
 * @return the frame's length. */
static uint32_t
icmp_error(uint8_t *f, uint32_t src, uint32_t dst, uint8_t type, uint8_t code, const uint8_t *q,
	   uint32_t quote)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
	uint8_t *icmp = f + 34;

	memset(f, 0, 14 + 20 + 8);
	f[12] = 0x08;
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(20 + 8 + quote));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_ICMP;
	ip->src_addr = rte_cpu_to_be_32(src);
	ip->dst_addr = rte_cpu_to_be_32(dst);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	icmp[0] = type, icmp[1] = code;
	memcpy(icmp + 8, q + 14, quote);
	*(uint16_t *)(icmp + 2) = (uint16_t)~rte_raw_cksum(icmp, 8 + quote);
	return 14 + 20 + 8 + quote;
}

/* Find the connection of an ICMP error and rewrite it, as nat.c does.
 * @return false if the error quotes no connection. */
static bool
xlate_error(struct nat *n, uint8_t *f, uint32_t len)
{
	struct ct_hdrs h;
	struct ct_pkt p;
	int64_t i;

	if (ct_parse(f, len, 0, &p, &h) != 0 || !p.icmp_error)
		return false;
	i = nat_find_related(n, &p, 0);
	if (i < 0)
		return false;
	nat_rewrite_icmp_error(f, &h, &n->slot[i]);
	return true;
}

/* An ICMP error's checksums: the outer IP header, the whole ICMP message,
 * the quoted IP header. */
static bool
error_cksums_ok(const uint8_t *f, uint32_t len)
{
	return rte_raw_cksum(f + 14, 20) == 0xffff && rte_raw_cksum(f + 34, len - 34) == 0xffff &&
	       rte_raw_cksum(f + 42, 20) == 0xffff;
}

static void
test_icmp_errors(void)
{
	static struct nat n;
	uint8_t f[1600], sent[1600], err[1600];
	uint32_t len, elen;
	struct ct_pkt p;
	uint16_t port;

	memset(&n, 0, sizeof(n));
	n.has_snat = true;
	n.snat = (struct nat_snat){A(10, 0, 0, 0), 0xffffff00, A(192, 0, 2, 1), 20000, 20009};
	n.dnat[0] = (struct nat_dnat){IPPROTO_TCP, A(192, 0, 2, 80), A(10, 1, 0, 5), 80, 8080};
	n.n_dnat = 1;
	CHECK(nat_init(&n, 64) == 0);

	/* SNAT'd UDP to a closed port: the port unreachable comes back to
	 * 192.0.2.1 quoting 192.0.2.1:p, and must reach 10.0.0.7 quoting the
	 * datagram 10.0.0.7:5353 sent, its UDP checksum too (RFC 792: the IP
	 * header and 8 bytes). */
	len = frame(sent, IPPROTO_UDP, A(10, 0, 0, 7), A(198, 51, 100, 1), 5353, 9999, 100);
	memcpy(f, sent, len);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW);
	port = rd_port(f, 34);
	elen = icmp_error(err, A(198, 51, 100, 1), A(192, 0, 2, 1), 3, 3, f, 28);
	CHECK(error_cksums_ok(err, elen));
	CHECK(xlate_error(&n, err, elen));
	CHECK(rd_addr(err, 30) == A(10, 0, 0, 7) && rd_addr(err, 26) == A(198, 51, 100, 1));
	CHECK(memcmp(err + 42, sent + 14, 28) == 0); /* the datagram as it was sent */
	CHECK(err[34] == 3 && err[35] == 3 && error_cksums_ok(err, elen));
	/* A router on the way says time exceeded, quoting more than 8 bytes:
	 * the outer source stays the router's. */
	elen = icmp_error(err, A(203, 0, 113, 9), A(192, 0, 2, 1), 11, 0, f, 128);
	CHECK(xlate_error(&n, err, elen));
	CHECK(rd_addr(err, 26) == A(203, 0, 113, 9) && rd_addr(err, 30) == A(10, 0, 0, 7));
	CHECK(memcmp(err + 42, sent + 14, 128) == 0 && error_cksums_ok(err, elen));

	/* DNAT'd TCP: the backend 10.1.0.5 refuses (an ICMP admin prohibited
	 * from the backend itself); the client 10.0.0.9 must see it from the
	 * address it connected to, 192.0.2.80, quoting its own SYN, with the
	 * quoted TCP checksum. */
	len = frame(sent, IPPROTO_TCP, A(10, 0, 0, 9), A(192, 0, 2, 80), 33333, 80, 0);
	memcpy(f, sent, len);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW);
	port = rd_port(f, 34);
	CHECK(rd_addr(f, 30) == A(10, 1, 0, 5) && rd_addr(f, 26) == A(192, 0, 2, 1));
	elen = icmp_error(err, A(10, 1, 0, 5), A(192, 0, 2, 1), 3, 13, f, 40);
	CHECK(xlate_error(&n, err, elen));
	CHECK(rd_addr(err, 26) == A(192, 0, 2, 80) && rd_addr(err, 30) == A(10, 0, 0, 9));
	CHECK(memcmp(err + 42, sent + 14, 40) == 0 && error_cksums_ok(err, elen));

	/* A ping through SNAT whose TTL ran out: the identifier goes back. */
	len = frame(sent, IPPROTO_ICMP, A(10, 0, 0, 3), A(198, 51, 100, 1), 777, 0, 16);
	memcpy(f, sent, len);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW && rd_port(f, 38) != 777);
	elen = icmp_error(err, A(203, 0, 113, 9), A(192, 0, 2, 1), 11, 0, f, 28);
	CHECK(xlate_error(&n, err, elen));
	CHECK(rd_addr(err, 30) == A(10, 0, 0, 3) && rd_port(err, 42 + 24) == 777);
	CHECK(memcmp(err + 42, sent + 14, 28) == 0 && error_cksums_ok(err, elen));

	/* An error about a packet this NAT never translated: left alone. */
	len = frame(f, IPPROTO_UDP, A(192, 0, 2, 1), A(198, 51, 100, 1), 20009, 53, 0);
	elen = icmp_error(err, A(198, 51, 100, 1), A(192, 0, 2, 1), 3, 3, f, 28);
	memcpy(sent, err, elen);
	CHECK(!xlate_error(&n, err, elen) && memcmp(err, sent, elen) == 0);
	RTE_SET_USED(port);
	nat_free(&n);
}

/* The per-flow state cleaner: every connection gone and every port free,
 * so the NF's next flow gets a port again from a range of one. */
static void
test_clear(void)
{
	static struct nat n;
	uint8_t f[256];
	struct ct_pkt p;
	uint32_t len;

	memset(&n, 0, sizeof(n));
	n.has_snat = true;
	n.snat = (struct nat_snat){A(10, 0, 0, 0), 0xffffff00, A(192, 0, 2, 1), 6000, 6000};
	CHECK(nat_init(&n, 16) == 0);
	len = frame(f, IPPROTO_TCP, A(10, 0, 0, 1), A(8, 8, 8, 8), 1111, 80, 0);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW && rd_port(f, 34) == 6000);
	len = frame(f, IPPROTO_TCP, A(10, 0, 0, 1), A(8, 8, 8, 8), 2222, 80, 0);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_NO_PORT);
	nat_clear(&n);
	CHECK(n.n_used == 0 && n.n_ports_used[0] == 0);
	/* The old connection is gone: its next packet is no connection's. */
	len = frame(f, IPPROTO_TCP, A(10, 0, 0, 1), A(8, 8, 8, 8), 1111, 80, 0);
	set_tcp_flags(f, CT_TCP_ACK);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_NOT_OPENING);
	len = frame(f, IPPROTO_TCP, A(10, 0, 0, 1), A(8, 8, 8, 8), 2222, 80, 0);
	CHECK(xlate(&n, f, len, 0, &p) == NAT_XLATED_NEW && rd_port(f, 34) == 6000);
	CHECK(n.n_used == 2 && n.n_ports_used[0] == 1);
	nat_free(&n);
}

int
main(void)
{
	test_csum_fix();
	test_icmp_errors();
	test_clear();
	test_snat_dnat_both_ways();
	test_ports_exhausted_and_freed();
	test_zones();
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
