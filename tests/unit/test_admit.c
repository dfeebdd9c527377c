/* SPDX-License-Identifier: BSD-3-Clause
 * admit: a TCP flow is established by an initiator's ACK of what the
 * responder sent after its SYN-ACK, never by an ACK sent blind; the
 * unestablished count of a source prefix stops at its cap.
 */
#include <stdio.h>
#include <stdlib.h>

#include "admit.h"

#include "check.h"

#define ACK    RTE_TCP_ACK_FLAG
#define SYNACK (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG)

static void
test_handshake(void)
{
	struct admit_tcp t = {0};

	/* an ACK before any SYN-ACK: blind */
	CHECK(!admit_tcp_initiator_acks(&t, ACK, 1));
	admit_tcp_responder(&t, SYNACK, 1000, 0);
	CHECK(!admit_tcp_initiator_acks(&t, ACK, 1000));    /* not past the SYN */
	CHECK(!admit_tcp_initiator_acks(&t, ACK, 77777));   /* a guess */
	CHECK(!admit_tcp_initiator_acks(&t, SYNACK, 1001)); /* not a plain ACK */
	CHECK(!admit_tcp_initiator_acks(&t, ACK | RTE_TCP_RST_FLAG, 1001));
	CHECK(admit_tcp_initiator_acks(&t, ACK, 1001));
	CHECK(admit_tcp_initiator_acks(&t, ACK | RTE_TCP_PSH_FLAG, 1001)); /* with data */
	/* the responder speaks first (a banner): an ACK of its bytes counts */
	admit_tcp_responder(&t, ACK, 1001, 100);
	CHECK(admit_tcp_initiator_acks(&t, ACK, 1101));
	CHECK(!admit_tcp_initiator_acks(&t, ACK, 1102));
	/* across the wrap of sequence numbers */
	t = (struct admit_tcp){0};
	admit_tcp_responder(&t, SYNACK, UINT32_MAX - 1, 0);
	admit_tcp_responder(&t, ACK, UINT32_MAX, 10);
	CHECK(admit_tcp_initiator_acks(&t, ACK, UINT32_MAX));
	CHECK(admit_tcp_initiator_acks(&t, ACK, 9));
	CHECK(!admit_tcp_initiator_acks(&t, ACK, 10));
	/* an old segment of the responder does not move it back */
	admit_tcp_responder(&t, ACK, UINT32_MAX, 0);
	CHECK(admit_tcp_initiator_acks(&t, ACK, 9));
}

static void
test_cap(void)
{
	struct admit a = {.cap = 3, .count = calloc(ADMIT_BUCKETS, sizeof(uint16_t))};
	const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 66, 1, 7};
	uint8_t same24[16], other24[16];
	uint16_t b;

	memcpy(same24, v4, 16);
	same24[15] = 200;
	memcpy(other24, v4, 16);
	other24[14] = 2;
	b = admit_bucket(v4);
	CHECK(admit_bucket(same24) == b);  /* one /24, one count */
	CHECK(admit_bucket(other24) != b); /* (a crc of 3 bytes: no collision here) */
	for (int i = 0; i < 3; i++) {
		CHECK(admit_room(&a, b));
		admit_hold(&a, b);
	}
	CHECK(!admit_room(&a, b));
	CHECK(admit_room(&a, admit_bucket(other24)));
	admit_release(&a, b);
	CHECK(admit_room(&a, b));
	a.cap = 0; /* no cap */
	for (int i = 0; i < 70000; i++)
		admit_hold(&a, b);
	CHECK(admit_room(&a, b) && a.count[b] == UINT16_MAX);
	free(a.count);
}

int
main(void)
{
	test_handshake();
	test_cap();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
