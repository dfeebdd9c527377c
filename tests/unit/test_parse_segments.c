/* SPDX-License-Identifier: BSD-3-Clause
 * The rx parse of a chained frame (mgr/parse.c): the headers NFs read in the
 * first segment (squall/pkt.h) must be there, or the frame is a parse drop;
 * a jumbo frame split after its headers, as ports split them, parses.
 *
 * No EAL: two mbufs laid out by hand around one frame, cut where a test
 * says.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>

#include "check.h"
#include "parse.h"

#define FRAME_BYTES 9000

static uint8_t frame[FRAME_BYTES];
static uint8_t bufs[2][RTE_PKTMBUF_HEADROOM + FRAME_BYTES];
static struct rte_mbuf segs[2];

/* An IPv4 frame of FRAME_BYTES with L4 protocol @p proto (a TCP header has
 * doff 8: 12 bytes of options). */
static void
make_frame(uint8_t proto)
{
	uint16_t ip_len = FRAME_BYTES - 14;

	memset(frame, 0x5a, sizeof(frame));
	memset(frame, 0, 14 + 20 + 32);
	frame[5] = 1, frame[11] = 2;
	frame[12] = 0x08, frame[13] = 0x00;
	frame[14] = 0x45;
	frame[16] = (uint8_t)(ip_len >> 8), frame[17] = (uint8_t)ip_len;
	frame[22] = 64, frame[23] = proto;
	frame[26] = 10, frame[29] = 1, frame[30] = 10, frame[33] = 2;
	frame[34] = 0x30, frame[37] = 80; /* ports */
	if (proto == IPPROTO_TCP)
		frame[46] = 8 << 4, frame[47] = 0x10; /* doff 8, ACK */
	else
		frame[38] = (uint8_t)((ip_len - 20) >> 8), frame[39] = (uint8_t)(ip_len - 20);
}

/* The frame as a chain whose first segment holds its first @p cut bytes. */
static struct rte_mbuf *
chain(uint32_t cut)
{
	for (int i = 0; i < 2; i++) {
		memset(&segs[i], 0, sizeof(segs[i]));
		segs[i].buf_addr = bufs[i];
		segs[i].buf_len = sizeof(bufs[i]);
		segs[i].data_off = RTE_PKTMBUF_HEADROOM;
		rte_mbuf_refcnt_set(&segs[i], 1);
	}
	memcpy(bufs[0] + RTE_PKTMBUF_HEADROOM, frame, cut);
	memcpy(bufs[1] + RTE_PKTMBUF_HEADROOM, frame + cut, FRAME_BYTES - cut);
	segs[0].data_len = (uint16_t)cut;
	segs[1].data_len = (uint16_t)(FRAME_BYTES - cut);
	segs[0].pkt_len = FRAME_BYTES;
	segs[0].nb_segs = 2;
	segs[0].next = &segs[1];
	return &segs[0];
}

int
main(void)
{
	/* TCP: 14 + 20 + 32 bytes of headers */
	make_frame(IPPROTO_TCP);
	CHECK(mgr_parse_pkt(chain(2048)) == SQ_DROP_MAX); /* as a port splits it */
	CHECK(segs[0].l2_len == 14 && segs[0].l3_len == 20 && segs[0].l4_len == 32);
	CHECK(mgr_parse_pkt(chain(14 + 20 + 32)) == SQ_DROP_MAX);
	CHECK(mgr_parse_pkt(chain(14 + 20 + 31)) == SQ_DROP_PARSE); /* in the options */
	CHECK(mgr_parse_pkt(chain(14 + 20 + 10)) == SQ_DROP_PARSE); /* in the ports */
	CHECK(mgr_parse_pkt(chain(14 + 10)) == SQ_DROP_PARSE);      /* in the IP header */
	/* UDP: 8 bytes of L4 header */
	make_frame(IPPROTO_UDP);
	CHECK(mgr_parse_pkt(chain(14 + 20 + 8)) == SQ_DROP_MAX);
	CHECK(mgr_parse_pkt(chain(14 + 20 + 7)) == SQ_DROP_PARSE);
	/* another protocol: nothing past the IP header to keep */
	make_frame(47); /* GRE */
	CHECK(mgr_parse_pkt(chain(14 + 20)) == SQ_DROP_MAX);
	printf("parse_segments: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
