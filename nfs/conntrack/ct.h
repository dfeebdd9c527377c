/* SPDX-License-Identifier: BSD-3-Clause
 * Connection tracking for squall-nf-conntrack: the state machine and its
 * table, header-only and free of I/O so tests/unit/test_conntrack.c tests
 * the very code the NF runs.
 *
 * The packet states are those of netfilter and OVS ct(): NEW (no reply seen
 * yet), ESTABLISHED (a reply was seen), RELATED (an ICMP error quoting a
 * tracked connection), INVALID. Tracking is split as in OVS: ct_track()
 * looks a packet up and moves an existing connection along; a packet that
 * could start a connection comes back NEW with no entry, and only
 * ct_commit() creates one, so a connection the security groups refuse
 * leaves no state behind.
 *
 * TCP follows netfilter's nf_conntrack_proto_tcp.c: the state names
 * (SYN_SENT, SYN_RECV, ESTABLISHED, FIN_WAIT, CLOSE_WAIT, LAST_ACK,
 * TIME_WAIT, CLOSE), its flag-combination table, its default timeouts, and
 * a simplified tcp_in_window(): sequence and acknowledgement numbers must lie
 * in the window each side advertised (with window scaling). Differences,
 * chosen for a firewall: no mid-stream pick-up (netfilter's tcp_loose=1
 * accepts an ACK of an unknown connection as ESTABLISHED; here, as in OVS,
 * only a SYN opens one), no simultaneous open (SYN_SENT2), no SACK edges.
 *
 * The table is open addressing with linear probing and backward-shift
 * deletion, keyed by the original direction's tuple; a reply is found by
 * looking up its reversed tuple. Expired entries go lazily (a lookup that
 * finds one deletes it) and by ct_sweep(), a bounded scan per burst.
 */
#ifndef SQUALL_NFS_CONNTRACK_CT_H
#define SQUALL_NFS_CONNTRACK_CT_H

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_jhash.h>

enum ct_info {
	CT_NEW = 0,
	CT_ESTABLISHED = 1,
	CT_RELATED = 2,
	CT_INVALID = 3,
};

enum ct_tcp_state {
	CT_TCP_NONE = 0,
	CT_TCP_SYN_SENT,
	CT_TCP_SYN_RECV,
	CT_TCP_ESTABLISHED,
	CT_TCP_FIN_WAIT,
	CT_TCP_CLOSE_WAIT,
	CT_TCP_LAST_ACK,
	CT_TCP_TIME_WAIT,
	CT_TCP_CLOSE,
	CT_TCP_MAX,
};

/* Timeouts other than TCP's, indexed after the TCP states. */
enum ct_timeout {
	CT_TO_UDP = CT_TCP_MAX, /* no reply seen yet */
	CT_TO_UDP_STREAM,       /* a reply was seen */
	CT_TO_ICMP,
	CT_TO_GENERIC,
	CT_TO_MAX,
};

/* netfilter's defaults (Documentation/networking/nf_conntrack-sysctl.rst), in ms. */
static const uint64_t ct_default_timeout_ms[CT_TO_MAX] = {
	[CT_TCP_NONE] = 10000,       [CT_TCP_SYN_SENT] = 120000,
	[CT_TCP_SYN_RECV] = 60000,   [CT_TCP_ESTABLISHED] = 432000000, /* 5 days */
	[CT_TCP_FIN_WAIT] = 120000,  [CT_TCP_CLOSE_WAIT] = 60000,
	[CT_TCP_LAST_ACK] = 30000,   [CT_TCP_TIME_WAIT] = 120000,
	[CT_TCP_CLOSE] = 10000,      [CT_TO_UDP] = 30000,
	[CT_TO_UDP_STREAM] = 120000, [CT_TO_ICMP] = 30000,
	[CT_TO_GENERIC] = 600000,
};

/* The names of --timeout NAME=SECONDS, as netfilter's sysctls say them
 * (nf_conntrack_tcp_timeout_<name>, nf_conntrack_<name>_timeout). */
static const char *const ct_timeout_names[CT_TO_MAX] = {
	[CT_TCP_NONE] = NULL,
	[CT_TCP_SYN_SENT] = "syn_sent",
	[CT_TCP_SYN_RECV] = "syn_recv",
	[CT_TCP_ESTABLISHED] = "established",
	[CT_TCP_FIN_WAIT] = "fin_wait",
	[CT_TCP_CLOSE_WAIT] = "close_wait",
	[CT_TCP_LAST_ACK] = "last_ack",
	[CT_TCP_TIME_WAIT] = "time_wait",
	[CT_TCP_CLOSE] = "close",
	[CT_TO_UDP] = "udp",
	[CT_TO_UDP_STREAM] = "udp_stream",
	[CT_TO_ICMP] = "icmp",
	[CT_TO_GENERIC] = "generic",
};

#define CT_TCP_FIN 0x01
#define CT_TCP_SYN 0x02
#define CT_TCP_RST 0x04
#define CT_TCP_PSH 0x08
#define CT_TCP_ACK 0x10
#define CT_TCP_URG 0x20
#define CT_TCP_ECE 0x40
#define CT_TCP_CWR 0x80

/** A connection's tuple in one direction. IPv4 addresses are v4-mapped
 * (::ffff:a.b.c.d). For ICMP echo, sport = dport = the identifier, so the
 * reversed tuple of a reply is the request's. */
struct ct_key {
	uint8_t src[16];
	uint8_t dst[16];
	uint16_t sport, dport; /* host byte order */
	uint16_t zone;
	uint8_t proto;
	uint8_t pad; /* 0: keys are compared with memcmp() */
};

_Static_assert(sizeof(struct ct_key) == 40, "no padding: keys are hashed and compared whole");

/** What the state machine needs of a packet (ct_parse() in the NF fills it). */
struct ct_pkt {
	struct ct_key key;
	/* TCP */
	uint8_t tcp_flags;
	uint8_t wscale; /* from a SYN's window scale option */
	bool has_wscale;
	uint16_t win; /* the raw window field */
	uint32_t seq, ack;
	uint32_t payload_len;
	/* ICMP / ICMPv6 */
	uint8_t icmp_type;
	bool icmp_request, icmp_reply, icmp_error;
	struct ct_key inner; /* an error's quoted packet, as it was sent */
};

struct ct_dir {
	uint32_t td_end;    /* highest seq + len sent */
	uint32_t td_maxend; /* highest ack + window the other side allowed */
	uint32_t td_maxwin; /* largest window the other side saw from us */
	uint32_t fin_end;   /* seq after our FIN */
	uint8_t wscale;
	uint8_t flags;
};

#define CT_DIR_WSCALE    0x01
#define CT_DIR_FIN       0x02
#define CT_DIR_FIN_ACKED 0x04

#define CT_ORIG  0
#define CT_REPLY 1

struct ct_conn {
	struct ct_key key; /* original direction */
	uint32_t hash;
	uint8_t used;
	uint8_t tcp_state;
	uint8_t seen_reply;
	uint8_t pad;
	uint64_t expires_ms;
	struct ct_dir dir[2];
};

struct ct_table {
	struct ct_conn *slot;
	uint32_t mask;     /* slots - 1 */
	uint32_t n_used;   /* entries */
	uint32_t max_used; /* 3/4 of the slots: beyond, a commit makes room or fails */
	uint32_t sweep_at; /* ct_sweep()'s cursor */
	/* The hash's seed, random per table: with a seed known from the source,
	 * tuples chosen to share a probe run would make every lookup walk it. */
	uint32_t seed;
	uint64_t early_drops; /* unreplied entries a full table's commits evicted */
	uint64_t timeout_ms[CT_TO_MAX];
};

/* Slots from a new key's home a full table's commit looks through for an
 * entry to evict (ct_early_drop). */
#define CT_EARLY_DROP_SCAN 16

/** The outcome of ct_track(). */
struct ct_result {
	enum ct_info info;
	struct ct_conn *conn; /* NULL for an untracked NEW, RELATED and most INVALID */
	int dir;              /* CT_ORIG or CT_REPLY when conn != NULL */
	/* CT_NEW on a closed connection's entry (TIME_WAIT, CLOSE) whose tuple a
	 * new SYN reused: a new connection, not a retransmitted SYN */
	bool reopened;
};

/* ------------------------------------------------------------------ table */

/* A seed no packet sender can know: the kernel's random bytes (the TSC
 * should getrandom fail, which it does not for 4 bytes once booted). */
static inline uint32_t
ct_random_seed(void)
{
	uint32_t s;

	if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s))
		s = (uint32_t)rte_rdtsc();
	return s;
}

/** @return 0, or -EINVAL (@p slots not a power of 2 >= 4), -ENOMEM. */
static inline int
ct_table_init(struct ct_table *t, uint32_t slots)
{
	if (slots < 4 || (slots & (slots - 1)) != 0)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->slot = calloc(slots, sizeof(*t->slot));
	if (t->slot == NULL)
		return -ENOMEM;
	t->mask = slots - 1;
	t->max_used = slots / 4 * 3;
	t->seed = ct_random_seed();
	memcpy(t->timeout_ms, ct_default_timeout_ms, sizeof(t->timeout_ms));
	return 0;
}

static inline void
ct_table_free(struct ct_table *t)
{
	free(t->slot);
	t->slot = NULL;
}

/**
 * Set one timeout from "NAME=SECONDS" (NAME from ct_timeout_names[],
 * SECONDS 1 to 30 days). Applies to connections from their next packet on.
 * @return 0, or -EINVAL.
 */
static inline int
ct_timeout_set(uint64_t timeout_ms[CT_TO_MAX], const char *s)
{
	const char *eq = strchr(s, '=');
	unsigned long long sec;
	char *end;
	int i;

	if (eq == NULL || eq[1] < '0' || eq[1] > '9')
		return -EINVAL;
	sec = strtoull(eq + 1, &end, 10);
	if (*end != '\0' || sec < 1 || sec > 30ull * 86400)
		return -EINVAL;
	for (i = 0; i < CT_TO_MAX; i++) {
		if (ct_timeout_names[i] != NULL &&
		    strlen(ct_timeout_names[i]) == (size_t)(eq - s) &&
		    strncmp(ct_timeout_names[i], s, (size_t)(eq - s)) == 0) {
			timeout_ms[i] = sec * 1000;
			return 0;
		}
	}
	return -EINVAL;
}

/** Forget every connection (a per-flow NF's state cleaner). */
static inline void
ct_table_clear(struct ct_table *t)
{
	if (t->n_used == 0)
		return;
	memset(t->slot, 0, ((size_t)t->mask + 1) * sizeof(*t->slot));
	t->n_used = 0;
}

/* Hashed as words copied out: reading the key through a uint32_t pointer
 * would break strict aliasing (at -O3 the hash of a key just written field
 * by field read stale values, and replies were not found). */
static inline uint32_t
ct_key_hash_seeded(const struct ct_key *k, uint32_t seed)
{
	uint32_t w[sizeof(*k) / 4];

	memcpy(w, k, sizeof(w));
	return rte_jhash_32b(w, sizeof(w) / 4, seed);
}

/* A hash the same in every process and run (the load balancer's pick of a
 * backend): never a table's, whose seed is random (ct_table, nat). */
static inline uint32_t
ct_key_hash(const struct ct_key *k)
{
	return ct_key_hash_seeded(k, 0x5157a11);
}

static inline void
ct_key_reverse(const struct ct_key *k, struct ct_key *r)
{
	memcpy(r->src, k->dst, 16);
	memcpy(r->dst, k->src, 16);
	r->sport = k->dport;
	r->dport = k->sport;
	r->zone = k->zone;
	r->proto = k->proto;
	r->pad = 0;
}

/* Backward-shift deletion: later entries of the probe run move up, so a
 * lookup never needs tombstones. */
static inline void
ct_slot_delete(struct ct_table *t, uint32_t i)
{
	uint32_t j = i, home;

	for (;;) {
		t->slot[i].used = 0;
		for (;;) {
			j = (j + 1) & t->mask;
			if (!t->slot[j].used)
				goto out;
			home = t->slot[j].hash & t->mask;
			/* Stays if its home lies cyclically in (i, j]. */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		t->slot[i] = t->slot[j];
		i = j;
	}
out:
	t->n_used--;
}

static inline bool
ct_is_expired(const struct ct_conn *c, uint64_t now_ms)
{
	return now_ms >= c->expires_ms;
}

/* @return the slot of @p k, or -1. An expired entry is deleted, not returned. */
static inline int64_t
ct_lookup_key(struct ct_table *t, const struct ct_key *k, uint32_t hash, uint64_t now_ms)
{
	uint32_t i = hash & t->mask;

	while (t->slot[i].used) {
		if (t->slot[i].hash == hash && memcmp(&t->slot[i].key, k, sizeof(*k)) == 0) {
			if (ct_is_expired(&t->slot[i], now_ms)) {
				ct_slot_delete(t, i);
				return -1;
			}
			return i;
		}
		i = (i + 1) & t->mask;
	}
	return -1;
}

/** The live connection @p k belongs to, in either direction, or NULL. */
static inline struct ct_conn *
ct_find(struct ct_table *t, const struct ct_key *k, uint64_t now_ms, int *dir)
{
	struct ct_key r;
	int64_t i;

	i = ct_lookup_key(t, k, ct_key_hash_seeded(k, t->seed), now_ms);
	if (i >= 0) {
		*dir = CT_ORIG;
		return &t->slot[i];
	}
	ct_key_reverse(k, &r);
	i = ct_lookup_key(t, &r, ct_key_hash_seeded(&r, t->seed), now_ms);
	if (i >= 0) {
		*dir = CT_REPLY;
		return &t->slot[i];
	}
	return NULL;
}

/** Delete up to @p n_slots' worth of expired entries; bounded work per call.
 * @return the entries deleted. */
static inline unsigned int
ct_sweep(struct ct_table *t, uint64_t now_ms, unsigned int n_slots)
{
	unsigned int deleted = 0;
	uint32_t i;

	while (n_slots-- > 0 && t->n_used > 0) {
		i = t->sweep_at & t->mask;
		if (t->slot[i].used && ct_is_expired(&t->slot[i], now_ms)) {
			ct_slot_delete(t, i); /* may move another entry into i: look again */
			deleted++;
			continue;
		}
		t->sweep_at = (i + 1) & t->mask;
	}
	return deleted;
}

/* ------------------------------------------------------------------ TCP */

static inline bool
ct_seq_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline bool
ct_seq_after(uint32_t a, uint32_t b)
{
	return ct_seq_before(b, a);
}

/* netfilter's tcp_valid_flags[]: with ECE and CWR masked, the only
 * combinations a conforming stack sends. SYN+FIN, SYN+RST, FIN without ACK
 * and no flags at all are invalid. */
static inline bool
ct_tcp_flags_valid(uint8_t flags)
{
	switch (flags & ~(CT_TCP_ECE | CT_TCP_CWR)) {
	case CT_TCP_SYN:
	case CT_TCP_SYN | CT_TCP_URG:
	case CT_TCP_SYN | CT_TCP_ACK:
	case CT_TCP_RST:
	case CT_TCP_RST | CT_TCP_ACK:
	case CT_TCP_RST | CT_TCP_ACK | CT_TCP_PSH:
	case CT_TCP_FIN | CT_TCP_ACK:
	case CT_TCP_FIN | CT_TCP_ACK | CT_TCP_URG:
	case CT_TCP_ACK:
	case CT_TCP_ACK | CT_TCP_URG:
	case CT_TCP_FIN | CT_TCP_ACK | CT_TCP_PSH:
	case CT_TCP_FIN | CT_TCP_ACK | CT_TCP_PSH | CT_TCP_URG:
	case CT_TCP_ACK | CT_TCP_PSH:
	case CT_TCP_ACK | CT_TCP_PSH | CT_TCP_URG: return true;
	default: return false;
	}
}

static inline uint32_t
ct_tcp_end(const struct ct_pkt *p)
{
	return p->seq + p->payload_len + ((p->tcp_flags & CT_TCP_SYN) ? 1 : 0) +
	       ((p->tcp_flags & CT_TCP_FIN) ? 1 : 0);
}

/* The side's first SYN (or SYN/ACK) sets up its half of the window state. */
static inline void
ct_tcp_dir_init(struct ct_dir *d, const struct ct_pkt *p)
{
	memset(d, 0, sizeof(*d));
	d->td_end = d->td_maxend = ct_tcp_end(p);
	d->td_maxwin = p->win == 0 ? 1 : p->win;
	if (p->has_wscale) {
		d->flags |= CT_DIR_WSCALE;
		d->wscale = p->wscale > 14 ? 14 : p->wscale;
	}
}

/* A simplified tcp_in_window() of netfilter: the segment must start at or
 * below what the receiver allowed (td_maxend), end no more than a window
 * below what the sender already sent, and acknowledge nothing the receiver
 * has not sent nor more than a window behind. Updates the window state of an
 * acceptable segment. @return whether it is acceptable. */
static inline bool
ct_tcp_in_window(struct ct_conn *c, int d, const struct ct_pkt *p)
{
	struct ct_dir *snd = &c->dir[d], *rcv = &c->dir[!d];
	uint32_t seq = p->seq, end = ct_tcp_end(p), ack, win, maxack;

	win = (p->tcp_flags & CT_TCP_SYN) ? p->win : (uint32_t)p->win << snd->wscale;
	ack = (p->tcp_flags & CT_TCP_ACK) ? p->ack : rcv->td_end;
	if (seq == end && !(p->tcp_flags & CT_TCP_RST))
		seq = end = snd->td_end; /* a pure ACK: only its ack number is checked */
	maxack = snd->td_maxwin > 66000 ? snd->td_maxwin : 66000;
	if (!(!ct_seq_after(seq, snd->td_maxend) &&
	      !ct_seq_before(end, snd->td_end - rcv->td_maxwin) &&
	      !ct_seq_after(ack, rcv->td_end) && !ct_seq_before(ack, rcv->td_end - maxack)))
		return false;
	if (snd->td_maxwin < win)
		snd->td_maxwin = win;
	if (ct_seq_after(end, snd->td_end))
		snd->td_end = end;
	if ((p->tcp_flags & CT_TCP_ACK) && ct_seq_after(ack + win, rcv->td_maxend))
		rcv->td_maxend = ack + (win == 0 ? 1 : win);
	return true;
}

static inline uint8_t
ct_tcp_close_state(const struct ct_conn *c)
{
	unsigned int fins = 0, acked = 0, d;

	for (d = 0; d < 2; d++) {
		fins += (c->dir[d].flags & CT_DIR_FIN) != 0;
		acked += (c->dir[d].flags & CT_DIR_FIN_ACKED) != 0;
	}
	if (fins == 0)
		return CT_TCP_ESTABLISHED;
	if (fins == 1)
		return acked == 1 ? CT_TCP_CLOSE_WAIT : CT_TCP_FIN_WAIT;
	return acked == 2 ? CT_TCP_TIME_WAIT : CT_TCP_LAST_ACK;
}

/* A SYN opens a connection: the original direction's half is set up. */
static inline void
ct_tcp_open(struct ct_conn *c, const struct ct_pkt *p)
{
	memset(c->dir, 0, sizeof(c->dir));
	ct_tcp_dir_init(&c->dir[CT_ORIG], p);
	c->tcp_state = CT_TCP_SYN_SENT;
	c->seen_reply = 0;
}

/* Move a tracked TCP connection along. @return the packet's state. */
static inline enum ct_info
ct_tcp_update(struct ct_conn *c, int d, const struct ct_pkt *p)
{
	uint8_t f = p->tcp_flags;
	struct ct_dir *rcv = &c->dir[!d];

	if (!ct_tcp_flags_valid(f))
		return CT_INVALID;
	if (f & CT_TCP_SYN) {
		if (!(f & CT_TCP_ACK)) {
			if (d == CT_ORIG && c->tcp_state == CT_TCP_SYN_SENT)
				return CT_NEW; /* a retransmitted SYN */
			if (d == CT_ORIG &&
			    (c->tcp_state == CT_TCP_TIME_WAIT || c->tcp_state == CT_TCP_CLOSE)) {
				ct_tcp_open(c, p); /* the tuple reused: a new connection */
				return CT_NEW;
			}
			return CT_INVALID; /* netfilter ignores it: -NF_ACCEPT, invalid */
		}
		/* SYN/ACK: only the reply to our SYN, acknowledging it. */
		if (d != CT_REPLY ||
		    (c->tcp_state != CT_TCP_SYN_SENT && c->tcp_state != CT_TCP_SYN_RECV) ||
		    p->ack != c->dir[CT_ORIG].td_end)
			return CT_INVALID;
		if (c->tcp_state == CT_TCP_SYN_SENT) {
			ct_tcp_dir_init(&c->dir[CT_REPLY], p);
			/* RFC 7323: scaling only if both sides offered it. */
			if (!(c->dir[CT_ORIG].flags & c->dir[CT_REPLY].flags & CT_DIR_WSCALE))
				c->dir[CT_ORIG].wscale = c->dir[CT_REPLY].wscale = 0;
			c->dir[CT_ORIG].td_maxend = p->ack + (p->win == 0 ? 1 : p->win);
			c->tcp_state = CT_TCP_SYN_RECV;
			c->seen_reply = 1;
		}
		return CT_ESTABLISHED;
	}
	if (c->tcp_state == CT_TCP_SYN_SENT) {
		/* Nothing but a SYN/ACK or a RST acknowledging our SYN comes before
		 * the handshake's second step. */
		if (d == CT_REPLY && (f & CT_TCP_RST) && (f & CT_TCP_ACK) &&
		    p->ack == c->dir[CT_ORIG].td_end) {
			c->tcp_state = CT_TCP_CLOSE;
			return CT_ESTABLISHED;
		}
		return CT_INVALID;
	}
	if (!ct_tcp_in_window(c, d, p))
		return CT_INVALID;
	if (f & CT_TCP_RST) {
		c->tcp_state = CT_TCP_CLOSE;
		return CT_ESTABLISHED;
	}
	if (c->tcp_state == CT_TCP_CLOSE)
		return CT_INVALID; /* after a RST, only a new SYN */
	if (c->tcp_state == CT_TCP_SYN_RECV) {
		/* The third step: the originator acknowledges the SYN/ACK. */
		if (d != CT_ORIG || p->ack != c->dir[CT_REPLY].td_end)
			return CT_INVALID;
	}
	if (f & CT_TCP_FIN) {
		c->dir[d].flags |= CT_DIR_FIN;
		c->dir[d].fin_end = ct_tcp_end(p);
	}
	if ((f & CT_TCP_ACK) && (rcv->flags & CT_DIR_FIN) && !ct_seq_before(p->ack, rcv->fin_end))
		rcv->flags |= CT_DIR_FIN_ACKED;
	c->tcp_state = ct_tcp_close_state(c);
	return CT_ESTABLISHED;
}

/* ------------------------------------------------------------------ tracking */

static inline uint64_t
ct_timeout_of(const struct ct_table *t, const struct ct_conn *c)
{
	switch (c->key.proto) {
	case IPPROTO_TCP: return t->timeout_ms[c->tcp_state];
	case IPPROTO_UDP: return t->timeout_ms[c->seen_reply ? CT_TO_UDP_STREAM : CT_TO_UDP];
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: return t->timeout_ms[CT_TO_ICMP];
	default: return t->timeout_ms[CT_TO_GENERIC];
	}
}

/** Could @p p start a connection: a SYN (no ACK), UDP, an ICMP echo request,
 * another protocol; not an ICMP reply or error, nor a TCP segment of another
 * kind (no mid-stream pick-up). */
static inline bool
ct_can_open(const struct ct_pkt *p)
{
	switch (p->key.proto) {
	case IPPROTO_TCP:
		return ct_tcp_flags_valid(p->tcp_flags) &&
		       (p->tcp_flags & (CT_TCP_SYN | CT_TCP_ACK | CT_TCP_RST)) == CT_TCP_SYN;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: return p->icmp_request;
	default: return true;
	}
}

/**
 * Track @p p at time @p now_ms: find its connection and move it along, or
 * say what the packet would be. res->conn is the connection when there is
 * one. An untracked packet that can open a connection is CT_NEW with
 * res->conn NULL: ct_commit() it if it is allowed.
 * @return res->info.
 */
static inline enum ct_info
ct_track(struct ct_table *t, const struct ct_pkt *p, uint64_t now_ms, struct ct_result *res)
{
	struct ct_conn *c;
	int d;

	res->conn = NULL;
	res->dir = CT_ORIG;
	res->reopened = false;
	if (p->icmp_error) {
		/* RELATED if it quotes a packet of a live connection, either way. */
		res->info = ct_find(t, &p->inner, now_ms, &d) != NULL ? CT_RELATED : CT_INVALID;
		return res->info;
	}
	c = ct_find(t, &p->key, now_ms, &d);
	if (c == NULL) {
		res->info = ct_can_open(p) ? CT_NEW : CT_INVALID;
		return res->info;
	}
	res->conn = c;
	res->dir = d;
	switch (p->key.proto) {
	case IPPROTO_TCP: {
		uint8_t was = c->tcp_state;

		res->info = ct_tcp_update(c, d, p);
		res->reopened =
			res->info == CT_NEW && (was == CT_TCP_TIME_WAIT || was == CT_TCP_CLOSE);
		break;
	}
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if ((d == CT_ORIG && !p->icmp_request) || (d == CT_REPLY && !p->icmp_reply)) {
			res->info = CT_INVALID;
			return res->info;
		}
		/* fall through */
	default:
		if (d == CT_REPLY)
			c->seen_reply = 1;
		res->info = c->seen_reply ? CT_ESTABLISHED : CT_NEW;
		break;
	}
	if (res->info != CT_INVALID)
		c->expires_ms = now_ms + ct_timeout_of(t, c);
	return res->info;
}

/* A full table makes room for a new connection as netfilter's early drop
 * does: among the entries in the CT_EARLY_DROP_SCAN slots from the new
 * key's home (3/4 full: a dozen), an
 * expired entry, else the unreplied one (no packet seen back: a half-open
 * TCP connection, a UDP flow no one answered) closest to its end. An
 * established connection is never evicted, so a flood of new tuples cannot
 * push out the connections that were answered. @return room was made. */
static inline bool
ct_early_drop(struct ct_table *t, uint32_t hash, uint64_t now_ms)
{
	uint32_t i = hash & t->mask, victim = UINT32_MAX;

	for (uint32_t n = 0; n < CT_EARLY_DROP_SCAN; n++, i = (i + 1) & t->mask) {
		const struct ct_conn *c = &t->slot[i];

		if (!c->used)
			continue;
		if (ct_is_expired(c, now_ms)) {
			victim = i;
			break;
		}
		if (!c->seen_reply &&
		    (victim == UINT32_MAX || c->expires_ms < t->slot[victim].expires_ms))
			victim = i;
	}
	if (victim == UINT32_MAX)
		return false;
	ct_slot_delete(t, victim);
	t->early_drops++;
	return true;
}

/**
 * Create the connection of a CT_NEW packet that ct_track() found untracked.
 * @return 0 with res->conn set, -EEXIST if it is tracked already (res->conn
 *   set), -EINVAL if @p p cannot open a connection, -ENOSPC if the table is
 *   full and no unreplied entry near the new one's slot could go
 *   (ct_early_drop).
 */
static inline int
ct_commit(struct ct_table *t, const struct ct_pkt *p, uint64_t now_ms, struct ct_result *res)
{
	uint32_t hash, i;
	struct ct_conn *c;
	int d;

	c = ct_find(t, &p->key, now_ms, &d);
	if (c != NULL) {
		res->conn = c;
		res->dir = d;
		return -EEXIST;
	}
	if (!ct_can_open(p))
		return -EINVAL;
	hash = ct_key_hash_seeded(&p->key, t->seed);
	if (t->n_used >= t->max_used && !ct_early_drop(t, hash, now_ms))
		return -ENOSPC;
	i = hash & t->mask;
	while (t->slot[i].used)
		i = (i + 1) & t->mask;
	c = &t->slot[i];
	memset(c, 0, sizeof(*c));
	c->key = p->key;
	c->hash = hash;
	c->used = 1;
	if (p->key.proto == IPPROTO_TCP)
		ct_tcp_open(c, p);
	c->expires_ms = now_ms + ct_timeout_of(t, c);
	t->n_used++;
	res->conn = c;
	res->dir = CT_ORIG;
	res->info = CT_NEW;
	res->reopened = false;
	return 0;
}

#endif /* SQUALL_NFS_CONNTRACK_CT_H */
