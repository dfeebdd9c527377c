/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-conntrack's state machine (ct.h), parser (ct_parse.h) and
 * security groups (sg.h), against netfilter's documented behaviour
 * (nf_conntrack_proto_tcp.c's state table and tcp_valid_flags[],
 * nf_conntrack-sysctl.rst's timeouts, ICMP errors as RELATED).
 */
#include <stdio.h>
#include <string.h>

#include "ct.h"
#include "ct_parse.h"
#include "sg.h"

#include "check.h"

#define F_S  CT_TCP_SYN
#define F_SA (CT_TCP_SYN | CT_TCP_ACK)
#define F_A  CT_TCP_ACK
#define F_PA (CT_TCP_PSH | CT_TCP_ACK)
#define F_FA (CT_TCP_FIN | CT_TCP_ACK)
#define F_R  CT_TCP_RST
#define F_RA (CT_TCP_RST | CT_TCP_ACK)

static const uint8_t CLIENT[4] = {10, 77, 0, 1}, SERVER[4] = {10, 77, 0, 2};

static struct ct_key
key4(const uint8_t *src, const uint8_t *dst, uint8_t proto, uint16_t sport, uint16_t dport,
     uint16_t zone)
{
	struct ct_key k;

	memset(&k, 0, sizeof(k));
	ct_addr_v4(k.src, src);
	ct_addr_v4(k.dst, dst);
	k.proto = proto;
	k.sport = sport;
	k.dport = dport;
	k.zone = zone;
	return k;
}

/* A TCP segment of the connection 10.77.0.1:40000 -> 10.77.0.2:80, from the
 * client (CT_ORIG) or the server (CT_REPLY). */
static struct ct_pkt
tcp(int dir, uint8_t flags, uint32_t seq, uint32_t ack, uint16_t win, uint32_t len)
{
	struct ct_pkt p;

	memset(&p, 0, sizeof(p));
	p.key = dir == CT_ORIG ? key4(CLIENT, SERVER, IPPROTO_TCP, 40000, 80, 0)
			       : key4(SERVER, CLIENT, IPPROTO_TCP, 80, 40000, 0);
	p.tcp_flags = flags;
	p.seq = seq;
	p.ack = ack;
	p.win = win;
	p.payload_len = len;
	return p;
}

static struct ct_table tbl;
static uint64_t now = 1000;

/* Track, and commit a NEW untracked packet as the NF does. */
static enum ct_info
feed(struct ct_pkt p)
{
	struct ct_result res;
	enum ct_info info = ct_track(&tbl, &p, now, &res);

	if (info == CT_NEW && res.conn == NULL && ct_commit(&tbl, &p, now, &res) < 0)
		return CT_INVALID;
	return info;
}

static uint8_t
tcp_state(void)
{
	struct ct_pkt p = tcp(CT_ORIG, 0, 0, 0, 0, 0);
	int d;
	struct ct_conn *c = ct_find(&tbl, &p.key, now, &d);

	return c == NULL ? CT_TCP_NONE : c->tcp_state;
}

static void
reset(void)
{
	ct_table_clear(&tbl);
	now = 1000;
}

/* Client ISN 1000, server ISN 5000; both windows 1000 unscaled. */
static void
handshake(void)
{
	reset();
	CHECK(feed(tcp(CT_ORIG, F_S, 1000, 0, 1000, 0)) == CT_NEW);
	CHECK(feed(tcp(CT_REPLY, F_SA, 5000, 1001, 1000, 0)) == CT_ESTABLISHED);
	CHECK(feed(tcp(CT_ORIG, F_A, 1001, 5001, 1000, 0)) == CT_ESTABLISHED);
	CHECK(tcp_state() == CT_TCP_ESTABLISHED);
}

struct tcp_case {
	const char *what;
	int dir;
	uint8_t flags;
	uint32_t seq, ack;
	uint32_t len;
	enum ct_info info;
	uint8_t state; /* after the packet */
};

/* A table of cases, each run after handshake() and the cases before it in
 * its group (a group ends with a NULL what). */
static const struct tcp_case tcp_cases[] = {
	/* Teardown, client closes first: netfilter's sES -FIN-> sFW -ACK-> sCW
	 * -FIN-> sLA -ACK-> sTW. */
	{"data c->s", CT_ORIG, F_PA, 1001, 5001, 100, CT_ESTABLISHED, CT_TCP_ESTABLISHED},
	{"ack s->c", CT_REPLY, F_A, 5001, 1101, 0, CT_ESTABLISHED, CT_TCP_ESTABLISHED},
	{"fin c->s", CT_ORIG, F_FA, 1101, 5001, 0, CT_ESTABLISHED, CT_TCP_FIN_WAIT},
	{"ack of fin", CT_REPLY, F_A, 5001, 1102, 0, CT_ESTABLISHED, CT_TCP_CLOSE_WAIT},
	{"fin s->c", CT_REPLY, F_FA, 5001, 1102, 0, CT_ESTABLISHED, CT_TCP_LAST_ACK},
	{"last ack", CT_ORIG, F_A, 1102, 5002, 0, CT_ESTABLISHED, CT_TCP_TIME_WAIT},
	{"ack again in tw", CT_ORIG, F_A, 1102, 5002, 0, CT_ESTABLISHED, CT_TCP_TIME_WAIT},
	{"syn reopens tw", CT_ORIG, F_S, 90000, 0, 0, CT_NEW, CT_TCP_SYN_SENT},
	{NULL, 0, 0, 0, 0, 0, 0, 0},
	/* Both FINs cross: sFW -FIN(reply)-> sLA. */
	{"fin c->s", CT_ORIG, F_FA, 1001, 5001, 0, CT_ESTABLISHED, CT_TCP_FIN_WAIT},
	{"fin s->c not acking", CT_REPLY, F_FA, 5001, 1001, 0, CT_ESTABLISHED, CT_TCP_LAST_ACK},
	{"ack both", CT_ORIG, F_A, 1002, 5002, 0, CT_ESTABLISHED, CT_TCP_LAST_ACK},
	{"ack c's fin", CT_REPLY, F_A, 5002, 1002, 0, CT_ESTABLISHED, CT_TCP_TIME_WAIT},
	{NULL, 0, 0, 0, 0, 0, 0, 0},
	/* RST in the window closes; then only a SYN. */
	{"rst s->c", CT_REPLY, F_RA, 5001, 1001, 0, CT_ESTABLISHED, CT_TCP_CLOSE},
	{"ack after rst", CT_ORIG, F_A, 1001, 5001, 0, CT_INVALID, CT_TCP_CLOSE},
	{"syn after rst", CT_ORIG, F_S, 7000, 0, 0, CT_NEW, CT_TCP_SYN_SENT},
	{NULL, 0, 0, 0, 0, 0, 0, 0},
	/* Out of window and bad flags: invalid, state kept (netfilter returns
	 * -NF_ACCEPT: the packet is invalid, the connection untouched). */
	{"rst far out of window", CT_REPLY, F_R, 900000, 0, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"data past the window", CT_ORIG, F_PA, 1001 + 5000, 5001, 10, CT_INVALID,
	 CT_TCP_ESTABLISHED},
	{"ack of unsent data", CT_ORIG, F_A, 1001, 9000, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"data far behind", CT_ORIG, F_PA, 1001 - 200000, 5001, 10, CT_INVALID, CT_TCP_ESTABLISHED},
	{"syn+fin", CT_ORIG, CT_TCP_SYN | CT_TCP_FIN, 1001, 0, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"syn+rst", CT_ORIG, CT_TCP_SYN | CT_TCP_RST, 1001, 0, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"fin without ack", CT_ORIG, CT_TCP_FIN, 1001, 0, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"null scan", CT_ORIG, 0, 1001, 0, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"xmas", CT_ORIG, 0x3f, 1001, 5001, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"syn in established", CT_ORIG, F_S, 1001, 0, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"syn/ack in established", CT_REPLY, F_SA, 5000, 1001, 0, CT_INVALID, CT_TCP_ESTABLISHED},
	{"ecn bits ignored", CT_ORIG, F_A | CT_TCP_ECE | CT_TCP_CWR, 1001, 5001, 0, CT_ESTABLISHED,
	 CT_TCP_ESTABLISHED},
	{"data to the window's end", CT_ORIG, F_PA, 1001, 5001, 1000, CT_ESTABLISHED,
	 CT_TCP_ESTABLISHED},
	{NULL, 0, 0, 0, 0, 0, 0, 0},
};

static void
test_tcp_table(void)
{
	const struct tcp_case *c;
	bool fresh = true;
	enum ct_info info;

	for (c = tcp_cases; c < tcp_cases + sizeof(tcp_cases) / sizeof(tcp_cases[0]); c++) {
		if (c->what == NULL) {
			fresh = true;
			continue;
		}
		if (fresh)
			handshake();
		fresh = false;
		info = feed(tcp(c->dir, c->flags, c->seq, c->ack, 1000, c->len));
		if (info != c->info || tcp_state() != c->state) {
			failed++;
			fprintf(stderr, "tcp case \"%s\": info %d state %u, expected %d %u\n",
				c->what, info, tcp_state(), c->info, c->state);
		} else {
			passed++;
		}
	}
}

static void
test_tcp_handshake(void)
{
	reset();
	/* No mid-stream pick-up: only a SYN opens. */
	CHECK(feed(tcp(CT_ORIG, F_A, 1000, 1, 1000, 0)) == CT_INVALID);
	CHECK(feed(tcp(CT_ORIG, F_RA, 1000, 1, 1000, 0)) == CT_INVALID);
	CHECK(feed(tcp(CT_ORIG, F_SA, 1000, 1, 1000, 0)) == CT_INVALID);
	CHECK(tbl.n_used == 0);

	CHECK(feed(tcp(CT_ORIG, F_S, 1000, 0, 1000, 0)) == CT_NEW);
	CHECK(tcp_state() == CT_TCP_SYN_SENT);
	CHECK(feed(tcp(CT_ORIG, F_S, 1000, 0, 1000, 0)) == CT_NEW); /* retransmitted */
	CHECK(feed(tcp(CT_ORIG, F_A, 1001, 5001, 1000, 0)) == CT_INVALID);
	CHECK(feed(tcp(CT_REPLY, F_A, 5001, 1001, 1000, 0)) == CT_INVALID);
	CHECK(feed(tcp(CT_REPLY, F_SA, 5000, 1234, 1000, 0)) == CT_INVALID); /* wrong ack */
	CHECK(tcp_state() == CT_TCP_SYN_SENT);
	CHECK(feed(tcp(CT_REPLY, F_SA, 5000, 1001, 1000, 0)) == CT_ESTABLISHED);
	CHECK(tcp_state() == CT_TCP_SYN_RECV);
	CHECK(feed(tcp(CT_REPLY, F_SA, 5000, 1001, 1000, 0)) == CT_ESTABLISHED); /* again */
	CHECK(feed(tcp(CT_ORIG, F_A, 1001, 4000, 1000, 0)) == CT_INVALID);       /* wrong ack */
	CHECK(tcp_state() == CT_TCP_SYN_RECV);
	CHECK(feed(tcp(CT_ORIG, F_A, 1001, 5001, 1000, 0)) == CT_ESTABLISHED);
	CHECK(tcp_state() == CT_TCP_ESTABLISHED);
	CHECK(tbl.n_used == 1);

	/* Connection refused: RST/ACK of the SYN. */
	reset();
	CHECK(feed(tcp(CT_ORIG, F_S, 1000, 0, 1000, 0)) == CT_NEW);
	CHECK(feed(tcp(CT_REPLY, F_RA, 0, 999, 0, 0)) == CT_INVALID); /* not our SYN */
	CHECK(feed(tcp(CT_REPLY, F_RA, 0, 1001, 0, 0)) == CT_ESTABLISHED);
	CHECK(tcp_state() == CT_TCP_CLOSE);

	/* The tuple reused: a new connection on the closed one's entry (the NF
	 * counts it committed), its retransmission not. */
	{
		struct ct_pkt syn = tcp(CT_ORIG, F_S, 7000, 0, 1000, 0);
		struct ct_result res;

		CHECK(ct_track(&tbl, &syn, now, &res) == CT_NEW && res.conn != NULL &&
		      res.reopened);
		CHECK(ct_track(&tbl, &syn, now, &res) == CT_NEW && res.conn != NULL &&
		      !res.reopened);
		CHECK(tcp_state() == CT_TCP_SYN_SENT && tbl.n_used == 1);
	}
}

static void
test_tcp_window_scale(void)
{
	struct ct_pkt p;

	/* Both offer scale 7: a window field of 100 means 12800 bytes. */
	reset();
	p = tcp(CT_ORIG, F_S, 1000, 0, 65535, 0);
	p.has_wscale = true;
	p.wscale = 7;
	CHECK(feed(p) == CT_NEW);
	p = tcp(CT_REPLY, F_SA, 5000, 1001, 65535, 0);
	p.has_wscale = true;
	p.wscale = 7;
	CHECK(feed(p) == CT_ESTABLISHED);
	CHECK(feed(tcp(CT_ORIG, F_A, 1001, 5001, 100, 0)) == CT_ESTABLISHED);
	CHECK(feed(tcp(CT_REPLY, F_A, 5001, 1001, 100, 0)) == CT_ESTABLISHED);
	/* 12000 bytes from the client fit in the server's 12800. */
	CHECK(feed(tcp(CT_ORIG, F_PA, 1001, 5001, 100, 12000)) == CT_ESTABLISHED);

	/* Only the client offers it: no scaling, 100 means 100. */
	reset();
	p = tcp(CT_ORIG, F_S, 1000, 0, 65535, 0);
	p.has_wscale = true;
	p.wscale = 7;
	CHECK(feed(p) == CT_NEW);
	CHECK(feed(tcp(CT_REPLY, F_SA, 5000, 1001, 1000, 0)) == CT_ESTABLISHED);
	CHECK(feed(tcp(CT_ORIG, F_A, 1001, 5001, 100, 0)) == CT_ESTABLISHED);
	CHECK(feed(tcp(CT_REPLY, F_A, 5001, 1001, 100, 0)) == CT_ESTABLISHED);
	CHECK(feed(tcp(CT_ORIG, F_PA, 1101 + 1000, 5001, 100, 100)) == CT_INVALID);
}

static void
test_tcp_timeouts(void)
{
	struct ct_pkt syn = tcp(CT_ORIG, F_S, 1000, 0, 1000, 0);
	struct ct_result res;

	reset();
	CHECK(feed(syn) == CT_NEW);
	now += 120000 - 1; /* SYN_SENT: 120 s */
	CHECK(tcp_state() == CT_TCP_SYN_SENT);
	now += 1;
	CHECK(tcp_state() == CT_TCP_NONE);
	CHECK(tbl.n_used == 0); /* the lookup deleted it */

	handshake();
	now += 432000000 - 1; /* ESTABLISHED: 5 days */
	CHECK(tcp_state() == CT_TCP_ESTABLISHED);
	CHECK(feed(tcp(CT_REPLY, F_RA, 5001, 1001, 0, 0)) == CT_ESTABLISHED);
	now += 10000; /* CLOSE: 10 s */
	CHECK(tcp_state() == CT_TCP_NONE);

	handshake();
	CHECK(feed(tcp(CT_ORIG, F_FA, 1001, 5001, 1000, 0)) == CT_ESTABLISHED);
	CHECK(feed(tcp(CT_REPLY, F_FA, 5001, 1002, 1000, 0)) == CT_ESTABLISHED);
	CHECK(tcp_state() == CT_TCP_LAST_ACK);
	now += 30000 - 1; /* LAST_ACK: 30 s */
	CHECK(tcp_state() == CT_TCP_LAST_ACK);
	CHECK(feed(tcp(CT_ORIG, F_A, 1002, 5002, 1000, 0)) == CT_ESTABLISHED);
	now += 120000 - 1; /* TIME_WAIT: 120 s */
	CHECK(tcp_state() == CT_TCP_TIME_WAIT);
	now += 1;
	CHECK(ct_track(&tbl, &syn, now, &res) == CT_NEW && res.conn == NULL);
}

static void
test_timeout_set(void)
{
	uint64_t to[CT_TO_MAX];
	struct ct_pkt syn = tcp(CT_ORIG, F_S, 1000, 0, 1000, 0);
	int d;

	memcpy(to, ct_default_timeout_ms, sizeof(to));
	CHECK(ct_timeout_set(to, "established=3600") == 0 && to[CT_TCP_ESTABLISHED] == 3600000);
	CHECK(ct_timeout_set(to, "udp_stream=180") == 0 && to[CT_TO_UDP_STREAM] == 180000);
	CHECK(ct_timeout_set(to, "udp=0") == -EINVAL);
	CHECK(ct_timeout_set(to, "udp=-1") == -EINVAL);
	CHECK(ct_timeout_set(to, "udpx=5") == -EINVAL);
	CHECK(ct_timeout_set(to, "udp") == -EINVAL);
	CHECK(ct_timeout_set(to, "syn_sent=5s") == -EINVAL);
	/* A table's own timeouts apply. */
	reset();
	CHECK(ct_timeout_set(tbl.timeout_ms, "syn_sent=5") == 0);
	CHECK(feed(syn) == CT_NEW);
	now += 5000;
	CHECK(ct_find(&tbl, &syn.key, now, &d) == NULL);
	memcpy(tbl.timeout_ms, ct_default_timeout_ms, sizeof(tbl.timeout_ms));
}

static void
test_udp_icmp(void)
{
	struct ct_pkt q, r;
	struct ct_result res;
	int d;

	reset();
	memset(&q, 0, sizeof(q));
	q.key = key4(CLIENT, SERVER, IPPROTO_UDP, 5353, 53, 0);
	memset(&r, 0, sizeof(r));
	r.key = key4(SERVER, CLIENT, IPPROTO_UDP, 53, 5353, 0);
	CHECK(ct_track(&tbl, &q, now, &res) == CT_NEW && res.conn == NULL);
	CHECK(ct_commit(&tbl, &q, now, &res) == 0);
	CHECK(res.conn->expires_ms == now + 30000); /* unreplied: 30 s */
	CHECK(ct_commit(&tbl, &q, now, &res) == -EEXIST);
	CHECK(ct_track(&tbl, &q, now, &res) == CT_NEW && res.conn != NULL); /* still unreplied */
	CHECK(ct_track(&tbl, &r, now, &res) == CT_ESTABLISHED && res.dir == CT_REPLY);
	CHECK(res.conn->expires_ms == now + 120000); /* replied: 120 s */
	CHECK(ct_track(&tbl, &q, now, &res) == CT_ESTABLISHED && res.dir == CT_ORIG);
	now += 120000;
	CHECK(ct_track(&tbl, &r, now, &res) == CT_NEW && res.conn == NULL); /* expired */

	/* An ICMP error quoting the UDP packet: related while it is tracked. */
	reset();
	CHECK(feed(q) == CT_NEW);
	memset(&r, 0, sizeof(r));
	r.key = key4(SERVER, CLIENT, IPPROTO_ICMP, 0, 0, 0);
	r.icmp_error = true;
	r.icmp_type = 3;
	r.inner = q.key;
	CHECK(ct_track(&tbl, &r, now, &res) == CT_RELATED);
	r.inner.dport = 54;
	CHECK(ct_track(&tbl, &r, now, &res) == CT_INVALID);
	CHECK(ct_commit(&tbl, &r, now, &res) == -EINVAL); /* an error never opens */

	/* Echo: request opens, reply establishes; a lone reply is invalid. */
	reset();
	memset(&q, 0, sizeof(q));
	q.key = key4(CLIENT, SERVER, IPPROTO_ICMP, 77, 77, 0);
	q.icmp_request = true;
	r = q;
	r.key = key4(SERVER, CLIENT, IPPROTO_ICMP, 77, 77, 0);
	r.icmp_request = false;
	r.icmp_reply = true;
	CHECK(feed(r) == CT_INVALID);
	CHECK(feed(q) == CT_NEW);
	CHECK(ct_find(&tbl, &q.key, now, &d)->expires_ms == now + 30000);
	CHECK(feed(r) == CT_ESTABLISHED);
	q.key = key4(SERVER, CLIENT, IPPROTO_ICMP, 77, 77, 0); /* request, wrong way */
	CHECK(feed(q) == CT_INVALID);
}

static void
test_zones(void)
{
	struct ct_pkt a = tcp(CT_ORIG, F_S, 1000, 0, 1000, 0), b;
	struct ct_result res;

	reset();
	a.key.zone = 1;
	b = a;
	b.key.zone = 2;
	CHECK(feed(a) == CT_NEW);
	CHECK(ct_track(&tbl, &b, now, &res) == CT_NEW && res.conn == NULL); /* other zone */
	b = tcp(CT_REPLY, F_SA, 5000, 1001, 1000, 0);
	b.key.zone = 2;
	CHECK(feed(b) == CT_INVALID); /* zone 2's reply does not touch zone 1's conn */
	b.key.zone = 1;
	CHECK(feed(b) == CT_ESTABLISHED);
}

static void
test_table(void)
{
	struct ct_table t;
	struct ct_pkt p;
	struct ct_result res;
	unsigned int i, found = 0, n;
	int d;

	CHECK(ct_table_init(&t, 6) == -EINVAL);
	CHECK(ct_table_init(&t, 64) == 0);
	memset(&p, 0, sizeof(p));
	p.key = key4(CLIENT, SERVER, IPPROTO_UDP, 0, 53, 0);
	for (i = 0; i < 48; i++) {
		p.key.sport = (uint16_t)i;
		CHECK(ct_commit(&t, &p, i < 24 ? 10 : 1000, &res) == 0);
		res.conn->seen_reply = 1; /* (answered: never evicted) */
	}
	p.key.sport = 48;
	CHECK(ct_commit(&t, &p, 10, &res) == -ENOSPC); /* 3/4 of 64 */
	CHECK(t.early_drops == 0);
	/* The first 24 expire at 30010; sweeping deletes them and only them,
	 * shifting the others back so every one is still found. */
	n = 0;
	for (i = 0; i < 16; i++)
		n += ct_sweep(&t, 30010, 8);
	CHECK(n == 24 && t.n_used == 24);
	for (i = 0; i < 48; i++) {
		p.key.sport = (uint16_t)i;
		found += ct_find(&t, &p.key, 30010, &d) != NULL;
	}
	CHECK(found == 24);
	p.key.sport = 48;
	CHECK(ct_commit(&t, &p, 30010, &res) == 0);
	ct_table_clear(&t);
	CHECK(t.n_used == 0 && ct_find(&t, &p.key, 30010, &d) == NULL);
	ct_table_free(&t);
}

/* A full table of unreplied entries (a flood of new tuples) still takes a
 * new connection: an unreplied entry near its slot goes, answered ones
 * stay; a table of answered ones refuses. And each table hashes with a
 * seed of its own. */
static void
test_early_drop(void)
{
	struct ct_table t, u;
	struct ct_pkt p;
	struct ct_result res;
	unsigned int i, answered = 0;
	int d;

	CHECK(ct_table_init(&t, 64) == 0 && ct_table_init(&u, 64) == 0);
	CHECK(t.seed != u.seed); /* (two random 32-bit seeds: equal once in 2^32) */
	memset(&p, 0, sizeof(p));
	p.key = key4(CLIENT, SERVER, IPPROTO_UDP, 0, 53, 0);
	CHECK(ct_key_hash_seeded(&p.key, t.seed) != ct_key_hash_seeded(&p.key, u.seed));
	for (i = 0; i < 48; i++) {
		p.key.sport = (uint16_t)(1000 + i);
		CHECK(ct_commit(&t, &p, 10 + i, &res) == 0);
		if (i % 4 == 0)
			res.conn->seen_reply = 1;
	}
	for (i = 0; i < 24; i++) {
		p.key.sport = (uint16_t)(5000 + i);
		CHECK(ct_commit(&t, &p, 100, &res) == 0);
	}
	CHECK(t.early_drops == 24 && t.n_used == 48);
	for (i = 0; i < 48; i += 4) {
		p.key.sport = (uint16_t)(1000 + i);
		answered += ct_find(&t, &p.key, 100, &d) != NULL;
	}
	CHECK(answered == 12);
	/* all answered: nothing to evict */
	for (i = 0; i <= t.mask; i++)
		t.slot[i].seen_reply = 1;
	p.key.sport = 9999;
	CHECK(ct_commit(&t, &p, 100, &res) == -ENOSPC && t.early_drops == 24);
	ct_table_free(&t);
	ct_table_free(&u);
}

/* Frames for the parser. */
static uint32_t
frame_v4(uint8_t *f, uint8_t proto, uint32_t l4_len)
{
	static const uint8_t eth[14] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00};

	memset(f, 0, 14 + 20 + l4_len);
	memcpy(f, eth, 14);
	f[14] = 0x45;
	f[16] = (uint8_t)((20 + l4_len) >> 8);
	f[17] = (uint8_t)(20 + l4_len);
	f[22] = 64;
	f[23] = proto;
	memcpy(f + 26, CLIENT, 4);
	memcpy(f + 30, SERVER, 4);
	return 14 + 20 + l4_len;
}

static void
test_parse(void)
{
	uint8_t f[256];
	struct ct_pkt p;
	struct ct_hdrs h;
	uint32_t len;

	/* A SYN with a window scale option of 7. */
	len = frame_v4(f, IPPROTO_TCP, 24);
	f[34] = 0x9c, f[35] = 0x40; /* 40000 */
	f[37] = 80;
	f[46] = 6 << 4; /* doff 6 */
	f[47] = CT_TCP_SYN;
	f[54] = 3, f[55] = 3, f[56] = 7, f[57] = 0;
	CHECK(ct_parse(f, len, 9, &p, &h) == 0);
	CHECK(p.key.proto == IPPROTO_TCP && p.key.sport == 40000 && p.key.dport == 80);
	CHECK(p.key.zone == 9 && p.has_wscale && p.wscale == 7 && p.payload_len == 0);
	CHECK(h.l3_off == 14 && h.l4_off == 34 && !h.ipv6);
	CHECK(ct_parse(f, 14 + 20 + 19, 0, &p, &h) == CT_PARSE_BAD); /* truncated TCP */
	/* A jumbo frame's first segment: lengths against the frame, headers read
	 * only within the segment (its options ending there are whole). */
	{
		uint16_t tot = (uint16_t)(len - 14 + 4000);

		f[16] = (uint8_t)(tot >> 8), f[17] = (uint8_t)tot;
		CHECK(ct_parse_l3(f, len + 3999, len, 14, false, 0, &p, &h) == CT_PARSE_BAD);
		CHECK(ct_parse_l3(f, len + 4000, len, 14, false, 0, &p, &h) == 0);
		CHECK(p.key.dport == 80 && p.has_wscale && p.payload_len == 4000);
		/* the segment ends inside the TCP header, or inside its options */
		CHECK(ct_parse_l3(f, len + 4000, 14 + 20 + 19, 14, false, 0, &p, &h) ==
		      CT_PARSE_BAD);
		CHECK(ct_parse_l3(f, len + 4000, 14 + 20 + 23, 14, false, 0, &p, &h) ==
		      CT_PARSE_BAD);
		f[16] = (uint8_t)((len - 14) >> 8), f[17] = (uint8_t)(len - 14);
	}
	f[46] = 4 << 4;
	CHECK(ct_parse(f, len, 0, &p, &h) == CT_PARSE_BAD); /* doff 4 */
	f[46] = 15 << 4;
	CHECK(ct_parse(f, len, 0, &p, &h) == CT_PARSE_BAD); /* doff past the end */
	f[46] = 6 << 4;
	f[14] = 0x44;
	CHECK(ct_parse(f, len, 0, &p, &h) == CT_PARSE_BAD); /* IHL 4 */
	f[14] = 0x4f;
	CHECK(ct_parse(f, len, 0, &p, &h) == CT_PARSE_BAD); /* IHL 15 > IP length */
	f[14] = 0x45;
	CHECK(ct_parse(f, len - 1, 0, &p, &h) == CT_PARSE_BAD); /* IP length > frame */
	CHECK(ct_parse(f, 14 + 19, 0, &p, &h) == CT_PARSE_BAD);
	CHECK(ct_parse(f, 10, 0, &p, &h) == CT_PARSE_BAD);
	f[20] = 0x20; /* MF */
	CHECK(ct_parse(f, len, 0, &p, &h) == CT_PARSE_FRAGMENT);
	f[20] = 0x00, f[21] = 0x10; /* offset 16 */
	CHECK(ct_parse(f, len, 0, &p, &h) == CT_PARSE_FRAGMENT);
	f[21] = 0;
	f[12] = 0x08, f[13] = 0x06; /* ARP */
	CHECK(ct_parse(f, len, 0, &p, &h) == CT_PARSE_NOT_IP);

	/* ICMP port unreachable quoting a UDP packet, behind a VLAN tag. */
	len = frame_v4(f + 4, IPPROTO_ICMP, 8 + 20 + 8) + 4;
	memmove(f, f + 4, 12);
	f[12] = 0x81, f[13] = 0x00, f[14] = 0, f[15] = 5, f[16] = 0x08, f[17] = 0x00;
	f[38] = 3, f[39] = 3;
	f[46] = 0x45, f[55] = IPPROTO_UDP;
	memcpy(f + 58, SERVER, 4);
	memcpy(f + 62, CLIENT, 4);
	f[66] = 0, f[67] = 53, f[68] = 0x14, f[69] = 0xe9; /* 53 -> 5353 */
	CHECK(ct_parse(f, len, 0, &p, &h) == 0);
	CHECK(p.icmp_error && p.icmp_type == 3 && p.inner.proto == IPPROTO_UDP);
	CHECK(p.inner.sport == 53 && p.inner.dport == 5353 && h.l3_off == 18);
	CHECK(ct_parse(f, len - 5, 0, &p, &h) == CT_PARSE_BAD); /* quote cut in the ports */

	/* IPv6: hop-by-hop options, then UDP; a fragment header; a loop. */
	memset(f, 0, sizeof(f));
	f[12] = 0x86, f[13] = 0xdd;
	f[14] = 0x60;
	f[19] = 8 + 8; /* payload length */
	f[20] = IPPROTO_HOPOPTS;
	f[22 + 15] = 1, f[38 + 15] = 2;
	f[54] = IPPROTO_UDP, f[55] = 0; /* hbh: 8 bytes */
	f[62] = 0x30, f[63] = 0x39, f[64] = 0, f[65] = 80;
	CHECK(ct_parse(f, 14 + 40 + 16, 0, &p, &h) == 0);
	CHECK(p.key.proto == IPPROTO_UDP && p.key.sport == 12345 && p.key.dport == 80);
	CHECK(h.ipv6 && h.l4_off == 14 + 48);
	CHECK(ct_parse(f, 14 + 40 + 12, 0, &p, &h) == CT_PARSE_BAD); /* IPv6 length > frame */
	f[55] = 2; /* hbh of 24 bytes: past the payload */
	CHECK(ct_parse(f, 14 + 40 + 16, 0, &p, &h) == CT_PARSE_BAD);
	f[55] = 0;
	f[54] = IPPROTO_FRAGMENT;
	CHECK(ct_parse(f, 14 + 40 + 16, 0, &p, &h) == CT_PARSE_FRAGMENT);
	f[54] = IPPROTO_HOPOPTS; /* hop-by-hop after hop-by-hop... past the end */
	CHECK(ct_parse(f, 14 + 40 + 16, 0, &p, &h) == CT_PARSE_BAD);

	/* ICMPv6: a neighbour solicitation is untracked, an echo request opens. */
	f[20] = IPPROTO_ICMPV6;
	f[19] = 8;
	f[54] = 135;
	CHECK(ct_parse(f, 14 + 40 + 8, 0, &p, &h) == CT_PARSE_UNTRACKED);
	f[54] = 128, f[58] = 0x12, f[59] = 0x34;
	CHECK(ct_parse(f, 14 + 40 + 8, 0, &p, &h) == 0);
	CHECK(p.icmp_request && p.key.sport == 0x1234 && ct_can_open(&p));
	f[20] = IPPROTO_ICMP; /* ICMP (v4) in IPv6 */
	CHECK(ct_parse(f, 14 + 40 + 8, 0, &p, &h) == CT_PARSE_BAD);
}

/* ct_parse_pkt(): the IP header where the manager's parse found it. A
 * frame of three VLAN tags, which ct_parse() alone (two tags) would call
 * "not IP" and an NF would pass untracked, is tracked like any other. */
static void
test_parse_pkt(void)
{
	static uint8_t buf[RTE_PKTMBUF_HEADROOM + 256];
	uint8_t *f = buf + RTE_PKTMBUF_HEADROOM;
	struct rte_mbuf mb;
	struct ct_pkt p;
	struct ct_hdrs h;
	uint32_t len;

	len = frame_v4(f + 12, IPPROTO_TCP, 20) + 12;
	memmove(f, f + 12, 12);
	for (int i = 0; i < 3; i++) {
		f[12 + 4 * i] = 0x81, f[13 + 4 * i] = 0x00;
		f[14 + 4 * i] = 0, f[15 + 4 * i] = (uint8_t)(i + 2);
	}
	f[24] = 0x08, f[25] = 0x00;
	f[46 + 12] = 5 << 4, f[47 + 12] = CT_TCP_SYN;
	f[37 + 12] = 80;
	memset(&mb, 0, sizeof(mb));
	mb.buf_addr = buf;
	mb.data_off = RTE_PKTMBUF_HEADROOM;
	mb.data_len = (uint16_t)len;
	mb.pkt_len = len;
	mb.l2_len = 26; /* the manager's parse: 14 + 3 tags */
	mb.l3_len = 20;
	mb.packet_type = RTE_PTYPE_L2_ETHER_QINQ | RTE_PTYPE_L3_IPV4 | RTE_PTYPE_L4_TCP;
	CHECK(ct_parse(f, len, 0, &p, &h) == CT_PARSE_NOT_IP);
	CHECK(ct_parse_pkt(&mb, 3, &p, &h) == 0);
	CHECK(p.key.proto == IPPROTO_TCP && p.key.dport == 80 && p.key.zone == 3);
	CHECK(h.l3_off == 26 && h.l4_off == 46 && !h.ipv6 && ct_can_open(&p));
	/* The same frame's bytes, parsed as IPv6 by the manager: read as such
	 * (and found malformed), never as the IPv4 its bytes say. */
	mb.packet_type = RTE_PTYPE_L2_ETHER_QINQ | RTE_PTYPE_L3_IPV6;
	CHECK(ct_parse_pkt(&mb, 0, &p, &h) == CT_PARSE_BAD);
	mb.packet_type = RTE_PTYPE_L2_ETHER_ARP;
	CHECK(ct_parse_pkt(&mb, 0, &p, &h) == CT_PARSE_NOT_IP);
}

static void
test_sg(void)
{
	static struct sg_set s;
	static const char names[3][SG_NAME_LEN] = {"client", "server", "admin"};
	const char *bad;
	struct ct_pkt p;
	unsigned int b;

	memset(&s, 0, sizeof(s));
	CHECK(sg_parse_line(&s, "allow web in proto=tcp port=80\n", &bad) == 0);
	CHECK(sg_parse_line(&s, "allow web in proto=icmp port=8 remote=10.77.0.0/24", &bad) == 0);
	CHECK(sg_parse_line(&s, "allow web in proto=tcp port=22 remote-group=admins", &bad) == 0);
	CHECK(sg_parse_line(&s, "allow web out", &bad) == 0);
	CHECK(sg_parse_line(&s, "member admins 10.99.0.0/16 # ops", &bad) == 0);
	CHECK(sg_parse_line(&s, "bind server web", &bad) == 0);
	CHECK(sg_parse_line(&s, "   # a comment", &bad) == 0);
	CHECK(sg_parse_line(&s, "allow web sideways", &bad) == -EINVAL &&
	      strncmp(bad, "sideways", 8) == 0);
	CHECK(sg_parse_line(&s, "allow web in port=80", &bad) == -EINVAL); /* no proto */
	CHECK(sg_parse_line(&s, "allow web in proto=tcp port=90-80", &bad) == -EINVAL);
	CHECK(sg_parse_line(&s, "allow web in remote=10.0.0.1/8", &bad) == -EINVAL);
	CHECK(sg_parse_line(&s, "allow web in remote=10.0.0.0/8 remote-group=x", &bad) == -EINVAL);
	CHECK(sg_parse_line(&s, "deny web in", &bad) == -EINVAL);
	CHECK(sg_parse_line(&s, "bind server", &bad) == -EINVAL);
	CHECK(sg_parse_line(&s, "member admins 10.99.0.0/16 extra", &bad) == -EINVAL);
	CHECK(s.n_rules == 4 && s.n_groups == 3); /* web, admins, x (created by the failed line) */
	CHECK(sg_resolve_ports(&s, names, 3, &b) == 0);
	CHECK(s.port_groups[1] == 1 && s.port_groups[0] == 0);

	/* client (port 0) -> server (port 1): ingress to web. */
	memset(&p, 0, sizeof(p));
	p.key = key4(CLIENT, SERVER, IPPROTO_TCP, 40000, 80, 0);
	CHECK(sg_allows(&s, 0, 1, &p));
	p.key.dport = 22;
	CHECK(!sg_allows(&s, 0, 1, &p));
	p.key.src[13] = 99; /* 10.99.0.1: an admin */
	CHECK(sg_allows(&s, 0, 1, &p));
	p.key = key4(CLIENT, SERVER, IPPROTO_UDP, 40000, 80, 0);
	CHECK(!sg_allows(&s, 0, 1, &p));
	p.key = key4(CLIENT, SERVER, IPPROTO_ICMP, 7, 7, 0);
	p.icmp_type = 8;
	CHECK(sg_allows(&s, 0, 1, &p));
	p.key.src[12] = 11; /* 11.77.0.1: not in remote= */
	CHECK(!sg_allows(&s, 0, 1, &p));
	/* server -> client: egress from web, allowed by "out"; unbound ports pass. */
	p.key = key4(SERVER, CLIENT, IPPROTO_UDP, 1, 2, 0);
	CHECK(sg_allows(&s, 1, 0, &p));
	CHECK(sg_allows(&s, 0, 2, &p));

	memset(&s, 0, sizeof(s));
	CHECK(sg_parse_line(&s, "bind nosuch web", &bad) == 0);
	CHECK(sg_resolve_ports(&s, names, 3, &b) == -ENOENT && b == 0);
	memset(&s, 0, sizeof(s));
	CHECK(sg_parse_line(&s, "bind 2 web", &bad) == 0);
	CHECK(sg_resolve_ports(&s, names, 3, &b) == 0 && s.port_groups[2] == 1);
}

int
main(void)
{
	if (ct_table_init(&tbl, 1024) < 0)
		return 1;
	test_tcp_handshake();
	test_tcp_table();
	test_tcp_window_scale();
	test_tcp_timeouts();
	test_timeout_set();
	test_udp_icmp();
	test_zones();
	test_table();
	test_early_drop();
	test_parse();
	test_parse_pkt();
	test_sg();
	ct_table_free(&tbl);
	printf("%d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
