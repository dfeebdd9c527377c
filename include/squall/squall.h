/* SPDX-License-Identifier: BSD-3-Clause
 * libsquall: the NF side of Squall. An NF maps the manager's shared region,
 * receives bursts of packets on its rx ring, runs a handler, and returns
 * every packet with a verdict on its tx ring. No EAL, no DPDK library.
 *
 * A complete NF:
 *
 *	static sq_verdict_t
 *	handle(struct rte_mbuf *pkt, void *arg)
 *	{
 *		return SQ_NEXT;
 *	}
 *
 *	int
 *	main(int argc, char **argv)
 *	{
 *		struct sq_nf *nf;
 *		if (sq_nf_init(argc, argv, &nf) < 0)
 *			return 1;
 *		sq_nf_set_pkt_handler(nf, handle, NULL);
 *		return sq_nf_run(nf) < 0 ? 1 : 0;
 *	}
 */
#ifndef SQUALL_SQUALL_H
#define SQUALL_SQUALL_H

#include <stdbool.h>
#include <stdint.h>

#include <squall/pkt.h>
#include <squall/region.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sq_nf;

/**
 * Per-packet handler.
 * @return the packet's verdict: SQ_NEXT, SQ_DROP, sq_out(port), sq_to(service).
 */
typedef sq_verdict_t (*sq_pkt_handler_fn)(struct rte_mbuf *pkt, void *arg);

/**
 * Per-burst handler: must set a verdict on each packet with sq_pkt_set_verdict()
 * (packets left alone go to SQ_NEXT).
 */
typedef void (*sq_burst_handler_fn)(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg);

/**
 * Message handler: called between bursts, never during one, for each message
 * the manager sends to this instance (struct sq_msg in squall/region.h): the
 * user's types (>= SQ_MSG_USER) and libsquall's own (SQ_MSG_BLOCK,
 * SQ_MSG_RERUN, SQ_MSG_STOP), which libsquall has acted on before the
 * handler sees them. It may call sq_nf_msg_send() to answer.
 */
typedef void (*sq_msg_handler_fn)(struct sq_nf *nf, const struct sq_msg *msg, void *arg);

/** Called once when the NF stops, to release the NF's state. */
typedef void (*sq_state_cleaner_fn)(void *arg);

/** Set the verdict of a packet from a burst handler. */
static inline void
sq_pkt_set_verdict(struct rte_mbuf *pkt, sq_verdict_t verdict)
{
	sq_pkt_meta(pkt)->verdict = verdict;
}

/**
 * Attach to the manager's region and find this NF's control block.
 * The region and NF id come from the environment the manager sets
 * (SQUALL_REGION, SQUALL_NF_ID) or from the options --sq-region PATH and
 * --sq-id N, which are removed from argv like rte_eal_init() does. A PATH
 * that is the manager's attach socket (/run/squall/squall-NAME.attach) gets
 * the region from the manager if it allows this process's uid.
 *
 * @return the number of argv entries consumed (>= 0), or
 *   -EINVAL: no region or id given, or an id out of range;
 *   -ENOENT: the region file does not exist;
 *   -EACCES: the attach socket refused this uid (manager.attach_users);
 *   -EEXIST: something else is mapped at the region's address;
 *   -EPROTO: the region is not a Squall region or has another ABI version;
 *   -ENOMEM: no memory for the handle;
 *   another -errno from open() or mmap().
 */
int sq_nf_init(int argc, char **argv, struct sq_nf **out);

/** Use @p fn for each packet. @return 0, or -EINVAL if @p fn is NULL. */
int sq_nf_set_pkt_handler(struct sq_nf *nf, sq_pkt_handler_fn fn, void *arg);

/** Use @p fn for each burst instead. @return 0, or -EINVAL if @p fn is NULL. */
int sq_nf_set_burst_handler(struct sq_nf *nf, sq_burst_handler_fn fn, void *arg);

/** Which of a packet's cache lines libsquall fetches ahead of the handler
 * (sq_nf_set_prefetch()). */
enum sq_prefetch {
	/** The mbuf's two header lines: data_off and data_len (what
	 * rte_pktmbuf_mtod() reads), packet_type, l2_len and l3_len (what
	 * sq_pkt_ipv4() and sq_pkt_ipv6() read). */
	SQ_PREFETCH_MBUF = 1u << 0,
	/** The frame's first 64 bytes: Ethernet, IP and most L4 headers. */
	SQ_PREFETCH_DATA = 1u << 1,
};

/**
 * Tell libsquall which lines of each packet the handler reads, so that a
 * burst's misses on them overlap instead of coming one by one (the
 * manager wrote them on its own core). A per-packet handler gets
 * SQ_PREFETCH_MBUF | SQ_PREFETCH_DATA unless told otherwise, a burst
 * handler SQ_PREFETCH_MBUF; 0 suits a handler that only sets verdicts: in a
 * long chain on one core, each hop that fetches lines it never reads slows
 * every other hop's turn. Call before or after setting the handler.
 * @return 0, or -EINVAL for a bit outside enum sq_prefetch.
 */
int sq_nf_set_prefetch(struct sq_nf *nf, unsigned int what);

/** Run @p fn when the NF stops. @return 0. */
int sq_nf_set_state_cleaner(struct sq_nf *nf, sq_state_cleaner_fn fn, void *arg);

/**
 * Per flow (assign: per-flow), run the state cleaner when the manager ends
 * the flow (after `flow_linger_ms`, or at the next flow's first packet),
 * not at the second FIN or the RST this NF sees: for state the flow's last
 * packets still need (a NAT translates the ACK of the second FIN too). The
 * NF then goes back to its pool a round trip later. @return 0.
 */
int sq_nf_clean_at_flow_end(struct sq_nf *nf);

/** Use @p fn for messages from the manager. @return 0, or -EINVAL if @p fn is NULL. */
int sq_nf_set_msg_handler(struct sq_nf *nf, sq_msg_handler_fn fn, void *arg);

/**
 * Send a message to the manager (squallctl msgs shows it).
 * @return 0; -EINVAL: @p type below SQ_MSG_USER or @p len above
 *   SQ_MSG_DATA_LEN; -ENOBUFS: SQ_MSG_SLOTS messages wait for the manager
 *   already (it takes them every millisecond): try again later.
 */
int sq_nf_msg_send(struct sq_nf *nf, uint32_t type, const void *data, uint32_t len);

/** true while the manager has this instance blocked (scaled in). */
bool sq_nf_blocked(const struct sq_nf *nf);

/**
 * Name one of the NF's SQ_NF_COUNTERS counters; the manager shows it in its
 * telemetry. @return the counter's index, or -ENOSPC when all are taken.
 */
int sq_nf_counter_register(struct sq_nf *nf, const char *name);

/** Add @p n to counter @p idx (from sq_nf_counter_register()). */
void sq_nf_counter_add(struct sq_nf *nf, int idx, uint64_t n);

/** This NF's control block, for its id, service and counters. */
struct sq_nf_ctl *sq_nf_ctl(struct sq_nf *nf);

/** The region header, for port names and the TSC rate. */
struct sq_region_hdr *sq_nf_region(struct sq_nf *nf);

/**
 * Run the packet loop (poll or sleep, as the manager configured) until the
 * manager asks the NF to stop, the manager dies, or sq_nf_stop() is called.
 * Runs the state cleaner and unmaps the region before it returns.
 * @return 0, or -EINVAL if no handler was set.
 */
int sq_nf_run(struct sq_nf *nf);

/** Make sq_nf_run() return after the current burst (async-signal-safe). */
void sq_nf_stop(struct sq_nf *nf);

#ifdef __cplusplus
}
#endif

#endif /* SQUALL_SQUALL_H */
