/* SPDX-License-Identifier: BSD-3-Clause
 * The causes a packet can be dropped for: a header of its own so that code
 * which needs only them (the rx parse, and a fuzzer linking it alone) does
 * not pull the whole manager state.
 */
#ifndef SQUALL_MGR_DROP_H
#define SQUALL_MGR_DROP_H

/* (SQ_MAX_FRAME_BYTES: the largest frame accepted from a port; beyond it, oversize) */
#include <squall/pkt.h>

/* Every cause a packet can be dropped for, with its user-facing string. */
#define SQ_FOREACH_DROP(_)                                                                  \
	_(PARSE, parse, "malformed header")                                                 \
	_(NO_RULE, no_rule, "no rule matched")                                              \
	_(NO_NF, no_nf, "no live nf for the service")                                       \
	_(NF_RING_FULL, nf_ring_full, "nf rx ring full")                                    \
	_(NF_VERDICT, nf_verdict, "nf returned drop")                                       \
	_(PORT_TX_FULL, port_tx_full, "port tx queue full")                                 \
	_(BAD_VERDICT, bad_verdict, "verdict or metadata out of range")                     \
	_(NF_DIED, nf_died, "queued for an nf that died")                                   \
	_(OVERSIZE, oversize, "frame larger than the port accepts")                         \
	_(HOP_LIMIT, hop_limit, "too many nf hops (loop)")                                  \
	_(SHUTDOWN, shutdown, "in flight at shutdown")                                      \
	_(STRAY, stray, "tcp packet of no flow and no syn")                                 \
	_(POOL_EMPTY, pool_empty, "no idle nf for a new flow")                              \
	_(FLOW_TABLE_FULL, flow_table_full, "flow table full")                              \
	_(FRAGMENT, fragment, "ip fragment to a per-flow service")                          \
	_(IPV6_HEADER, ipv6_header, "ipv6 header or extension chain unreadable")            \
	_(ICMP_NO_FLOW, icmp_no_flow, "icmp error quoting no flow of a per-flow service")   \
	_(CONFIG_CHANGED, config_changed, "chain, rule or service changed while in flight") \
	_(SERVICE_FAILED, service_failed, "service failed (crash loop)")                    \
	_(NF_OVERLOADED, nf_overloaded, "nf holds max_outstanding_pkts")                    \
	_(BAD_MBUF, bad_mbuf, "nf returned an mbuf with impossible lengths")                \
	_(ISOLATED_COPY, isolated_copy, "chained mbuf: no copy to an isolated nf")          \
	_(VERDICT_DENIED, verdict_denied, "out or to verdict the service was not granted")  \
	_(FLOW_ADMISSION, flow_admission, "new flow past its source's unestablished cap")
#define SQ_DROP_ENUM(sym, key, str) SQ_DROP_##sym,
enum sq_drop { SQ_FOREACH_DROP(SQ_DROP_ENUM) SQ_DROP_MAX };
extern const char *const sq_drop_keys[SQ_DROP_MAX];
extern const char *const sq_drop_names[SQ_DROP_MAX];

#endif /* SQUALL_MGR_DROP_H */
