/* SPDX-License-Identifier: BSD-3-Clause
 * libFuzzer target: the manager's rx parse (mgr/parse.c), any bytes as a
 * received frame. Each frame is parsed or dropped with a cause; never a
 * crash or a read past the frame (the mbuf's buffer is a heap block of
 * exactly headroom + frame, so ASan sees any overread). The parse must
 * leave the frame's bytes and the mbuf's data window as they were, and the
 * lengths it records for the NFs must lie within the frame (IPv6's too: an
 * unreadable IPv6 header or extension chain is a drop, ipv6_header).
 *
 * No EAL: the mbuf is laid out by hand around the bytes (one segment, no
 * pool); mgr_parse_pkt() only reads and adjusts it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>

#include "parse.h"

static struct rte_mbuf mb;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                       \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "fuzz_parse: broken: %s\n", #cond); \
			abort();                                            \
		}                                                           \
	} while (0)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum sq_drop cause;
	uint8_t *buf;

	if (size > UINT16_MAX - RTE_PKTMBUF_HEADROOM)
		return 0;
	buf = malloc(RTE_PKTMBUF_HEADROOM + size + 1);
	if (buf == NULL)
		return 0;
	memset(buf, 0xa5, RTE_PKTMBUF_HEADROOM);
	memcpy(buf + RTE_PKTMBUF_HEADROOM, data, size);
	memset(&mb, 0, sizeof(mb));
	mb.buf_addr = buf;
	mb.buf_len = (uint16_t)(RTE_PKTMBUF_HEADROOM + size);
	mb.data_off = RTE_PKTMBUF_HEADROOM;
	mb.data_len = (uint16_t)size;
	mb.pkt_len = (uint32_t)size;
	mb.nb_segs = 1;
	rte_mbuf_refcnt_set(&mb, 1);

	cause = mgr_parse_pkt(&mb);

	REQUIRE(cause <= SQ_DROP_MAX);
	REQUIRE(cause == SQ_DROP_MAX || cause == SQ_DROP_PARSE || cause == SQ_DROP_OVERSIZE ||
		cause == SQ_DROP_IPV6_HEADER);
	REQUIRE(mb.data_off == RTE_PKTMBUF_HEADROOM && mb.data_len == size && mb.pkt_len == size);
	REQUIRE(memcmp(buf + RTE_PKTMBUF_HEADROOM, data, size) == 0);
	if (cause == SQ_DROP_MAX) {
		REQUIRE(mb.l2_len >= 14 && mb.l2_len <= size);
		if (RTE_ETH_IS_IPV4_HDR(mb.packet_type) || RTE_ETH_IS_IPV6_HDR(mb.packet_type))
			REQUIRE((uint32_t)mb.l2_len + mb.l3_len <= size);
	}
	free(buf);
	return 0;
}
