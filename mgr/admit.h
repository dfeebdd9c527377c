/* SPDX-License-Identifier: BSD-3-Clause
 * admit: what a new flow of a per-flow service must show before it counts
 * as established, and how many unestablished flows one source prefix may
 * hold at once. A spoofed SYN takes an NF of the pool; it must not keep it:
 *
 * - TCP is established when the responder's SYN-ACK was seen and then the
 *   initiator's ACK acknowledges what the responder sent (at least the
 *   SYN-ACK, at most the responder's last byte): an ACK sent blind, without
 *   the responder's sequence number, does not count. Until then the
 *   director ends the flow flow_half_open_timeout_ms after its first SYN
 *   (a resent SYN does not restart the clock).
 * - UDP is established by a datagram from the other side (a reply); an
 *   unreplied flow ends after flow_half_open_timeout_ms without a packet.
 * - At most `cap` flows of one source prefix (IPv4 /24, IPv6 /64: what an
 *   attacker behind source address validation, BCP 38, can spoof) are
 *   unestablished at once; a new one past that is dropped (flow_admission).
 *   Prefixes are counted in ADMIT_BUCKETS hashed buckets.
 *
 * No manager state: the director keeps a struct admit and a struct
 * admit_tcp per flow.
 */
#ifndef SQUALL_MGR_ADMIT_H
#define SQUALL_MGR_ADMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <rte_jhash.h>
#include <rte_tcp.h>

#define ADMIT_BUCKETS 65536u

struct admit {
	uint32_t cap;    /* unestablished flows per source prefix; 0: no cap */
	uint16_t *count; /* ADMIT_BUCKETS: unestablished flows per hashed prefix */
};

/* A TCP flow's handshake as the director sees it. */
struct admit_tcp {
	uint32_t synack_seq; /* the responder's initial sequence number */
	uint32_t resp_next;  /* the next sequence number the responder would send */
	uint8_t synack_seen;
};

/* The bucket of an initiator's address (IPv4 as v4-mapped IPv6). */
static inline uint16_t
admit_bucket(const uint8_t addr[16])
{
	static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	bool v4 = memcmp(addr, v4_mapped, sizeof(v4_mapped)) == 0;

	return (uint16_t)(v4 ? rte_jhash(addr + 12, 3, 0x5a5a) : rte_jhash(addr, 8, 0xa5a5));
}

/* Room for one more unestablished flow of @p bucket? */
static inline bool
admit_room(const struct admit *a, uint16_t bucket)
{
	return a->cap == 0 || a->count[bucket] < a->cap;
}

static inline void
admit_hold(struct admit *a, uint16_t bucket)
{
	if (a->count[bucket] < UINT16_MAX)
		a->count[bucket]++;
}

static inline void
admit_release(struct admit *a, uint16_t bucket)
{
	if (a->count[bucket] > 0)
		a->count[bucket]--;
}

/* Serial number arithmetic (RFC 1982): a at or after b. */
static inline bool
admit_seq_ge(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) >= 0;
}

/* A segment from the responder: its SYN-ACK starts what it sent, each later
 * segment (@p len bytes of payload) adds to it. */
static inline void
admit_tcp_responder(struct admit_tcp *t, uint8_t flags, uint32_t seq, uint32_t len)
{
	uint32_t end = seq + len + ((flags & RTE_TCP_FIN_FLAG) ? 1 : 0);

	if ((flags & (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG)) ==
	    (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG)) {
		t->synack_seen = 1;
		t->synack_seq = seq;
		t->resp_next = seq + 1;
		return;
	}
	if (t->synack_seen && admit_seq_ge(end, t->resp_next) && len + 1 < (1u << 30))
		t->resp_next = end;
}

/* A segment from the initiator: does it complete the handshake? */
static inline bool
admit_tcp_initiator_acks(const struct admit_tcp *t, uint8_t flags, uint32_t ack)
{
	return t->synack_seen &&
	       (flags & (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG | RTE_TCP_RST_FLAG)) ==
		       RTE_TCP_ACK_FLAG &&
	       admit_seq_ge(ack, t->synack_seq + 1) && admit_seq_ge(t->resp_next, ack);
}

#endif /* SQUALL_MGR_ADMIT_H */
