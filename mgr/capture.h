/* SPDX-License-Identifier: BSD-3-Clause
 * Packet capture: copies of the packets at a port (rx, tx) or at an NF hop
 * (what an NF receives, what it returns), written as pcapng by a control
 * thread. The dataplane pays one predictable branch per burst at each
 * capture point while no capture runs (mgr_capture_points == 0).
 */
#ifndef SQUALL_MGR_CAPTURE_H
#define SQUALL_MGR_CAPTURE_H

#include <stdint.h>

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>

struct mgr;
struct mgr_nf;
struct role_ctx;

/* Where a capture takes its copies. */
enum mgr_cap_point {
	MGR_CAP_PORT_RX, /* a port's received frames, before parsing (rx.c) */
	MGR_CAP_PORT_TX, /* frames handed to a port's tx queue (steer.c) */
	MGR_CAP_NF_IN,   /* packets put on an NF's rx ring: what it receives (steer.c) */
	MGR_CAP_NF_OUT,  /* packets taken from an NF's tx ring: what it returns (tx.c) */
	MGR_CAP_POINTS
};

/* Bit (1 << point) set while a capture runs at that point. Manager-private
 * (never in the shared region); written by the control path only. */
extern uint32_t mgr_capture_points;

void mgr_capture_port(struct mgr *mgr, const struct role_ctx *role, enum mgr_cap_point point,
		      uint16_t port_idx, struct rte_mbuf *const *pkts, unsigned int n);
void mgr_capture_nf(struct mgr *mgr, const struct role_ctx *role, enum mgr_cap_point point,
		    const struct mgr_nf *nf, struct rte_mbuf *const *pkts, unsigned int n);

/* Copies held for a hand-over (NF rx ring, port tx queue), per role [rx, tx]. */
extern uint16_t mgr_capture_held[2];
void mgr_capture_taken(unsigned int role_idx, unsigned int taken);

static inline bool
mgr_capture_on(enum mgr_cap_point point)
{
	return unlikely(__atomic_load_n(&mgr_capture_points, __ATOMIC_RELAXED) & (1u << point));
}

/* The hooks: one branch when no capture runs at the point. */
#define MGR_CAPTURE_PORT(mgr, role, point, port_idx, pkts, n)                  \
	do {                                                                   \
		if (mgr_capture_on(point))                                     \
			mgr_capture_port(mgr, role, point, port_idx, pkts, n); \
	} while (0)
#define MGR_CAPTURE_NF(mgr, role, point, nf, pkts, n)                  \
	do {                                                           \
		if (mgr_capture_on(point))                             \
			mgr_capture_nf(mgr, role, point, nf, pkts, n); \
	} while (0)

/* After the hand-over that MGR_CAPTURE_PORT(.., MGR_CAP_PORT_TX, ..) or
 * MGR_CAPTURE_NF(.., MGR_CAP_NF_IN, ..) preceded: the ring or queue took the
 * first @p taken packets. Runs whenever copies are held, capture on or not. */
#define MGR_CAPTURE_TAKEN(mgr, role, taken)                     \
	do {                                                    \
		unsigned int r_ = (role) == &(mgr)->rx ? 0 : 1; \
		if (unlikely(mgr_capture_held[r_] != 0))        \
			mgr_capture_taken(r_, taken);           \
	} while (0)

/* Register the /squall/capture* telemetry commands; call once the ports and
 * NFs exist. Nothing is allocated until the first capture starts. */
int mgr_capture_init(struct mgr *mgr);
/* After the roles have stopped: end every capture (each file is completed),
 * free the capture pool. @return copies not back in the capture pool (0). */
unsigned int mgr_capture_free(struct mgr *mgr);

#endif /* SQUALL_MGR_CAPTURE_H */
