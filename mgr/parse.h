/* SPDX-License-Identifier: BSD-3-Clause
 * The rx parse: L2-L4 once per packet, results kept in the mbuf. It needs
 * DPDK's mbuf and nothing of the manager, so it can be linked alone (tests,
 * fuzzing).
 */
#ifndef SQUALL_MGR_PARSE_H
#define SQUALL_MGR_PARSE_H

#include <rte_mbuf.h>

#include "drop.h"

/* Parse a received frame and keep the result in the mbuf (packet_type,
 * l2/l3/l4 lengths, hash.rss = the symmetric flow hash) for every NF.
 * @return SQ_DROP_MAX if the packet is fine, else the cause to drop it for. */
enum sq_drop mgr_parse_pkt(struct rte_mbuf *pkt);

#endif /* SQUALL_MGR_PARSE_H */
