/* SPDX-License-Identifier: BSD-3-Clause
 * Direct chains (issue 17; DESIGN §3's open optimization, sender-context
 * forwarding, seed 001 §3; OpenNetVM's NF-to-NF path).
 *
 * In a chain with `direct: true`, each NF hands its NEXT packets straight
 * to the next hop's NF and wakes it when its burst ends (lib/nf.c
 * hand_on): one manager round trip per chain instead of one per hop, and
 * the next hop runs as soon as the previous one is done with the burst.
 * Lane i is instance i of every hop: rss puts a flow on instance i of the
 * first hop, and the lane keeps it. The manager gives packets to the first
 * hop and takes them back from any hop (a DROP, OUT or TO verdict, or the
 * last hop's NEXT), so it still counts every packet out of the chain.
 *
 * What the manager gives up, and why it holds: every packet given to a
 * lane is owned (mgr/guard.h) by the lane's first NF, its leader, and is
 * taken back from any NF of the lane; the leader stays on the tx role's
 * list while the lane holds any. The NFs of a lane trust each other
 * (isolated services are refused), and a lane fails as one: when one of
 * its NFs dies the others are killed, and the lane's packets are
 * reclaimed, and its NFs restarted, once all are gone (mgr/nfs.c). A
 * capture at a hop of a direct chain turns direct hand-over off for that
 * hop's upstream NFs while it runs (direct_off), so the manager sees the
 * packets it copies, and gives them to that hop (which then owns them, and
 * stays on the tx role's list while the hops after it hold them).
 */
#ifndef SQUALL_MGR_LANE_H
#define SQUALL_MGR_LANE_H

#include <stdbool.h>
#include <stdint.h>

#include "guard.h"

struct mgr;
struct mgr_nf;

/* After every NF slot is set up at start: the lanes of each direct chain,
 * their rings in the region and their links in the NFs' control blocks.
 * @return 0, or -ENOMEM. */
int mgr_lane_setup(struct mgr *mgr);
void mgr_lane_free(struct mgr *mgr);

/* The NFs of @p nf's lane, from its leader: @p nf if it is in no lane.
 * @return the leader's id; mgr_lane_next() walks on (SQ_NF_NONE at the end). */
uint32_t mgr_lane_first(const struct mgr *mgr, const struct mgr_nf *nf);
uint32_t mgr_lane_next(const struct mgr *mgr, uint32_t id);

/* Take back @p pkt from @p nf, an NF of a lane: the packets it hands back
 * were given to its lane's leader, to it, or to an NF between them (the
 * manager gives a lane NF packets itself while direct hand-over into it is
 * off). @return the take (mgr/guard.h), *owner the NF it was given to. */
enum guard_take mgr_lane_take(struct mgr *mgr, struct mgr_nf *nf, struct rte_mbuf *pkt,
			      struct mgr_nf **owner);

/* A capture of what @p service's NFs receive (@p into) or return needs
 * the manager to see those packets: the NFs that would hand them over
 * directly (the previous hop's, or these) hand them to the manager while
 * any such capture runs (@p delta +1 at its start, -1 at its end). @p nf_id
 * >= 0: that NF's lane only. No-op outside direct chains. */
void mgr_lane_hold_direct(struct mgr *mgr, int32_t service, int32_t nf_id, bool into, int delta);

#endif /* SQUALL_MGR_LANE_H */
