/* SPDX-License-Identifier: BSD-3-Clause
 * Decrement an IPv4 TTL and patch the header checksum incrementally
 * (RFC 1624, eqn. 3), as a router does: cheaper than summing the header
 * again, and correct for headers with options too.
 */
#ifndef SQUALL_NFS_L3FWD_TTL_H
#define SQUALL_NFS_L3FWD_TTL_H

#include <stdint.h>

#include <rte_byteorder.h>
#include <rte_ip.h>

/** TTL - 1 and the checksum to match. The caller checks TTL > 1 first. */
static inline void
ipv4_ttl_dec(struct rte_ipv4_hdr *ip)
{
	/* TTL and protocol share one 16-bit word of the checksummed header. */
	uint32_t old_word = (uint32_t)ip->time_to_live << 8 | ip->next_proto_id;
	uint32_t new_word = old_word - 0x100;
	uint32_t sum;

	sum = (uint16_t)~rte_be_to_cpu_16(ip->hdr_checksum) + (uint16_t)~old_word + new_word;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->time_to_live--;
	ip->hdr_checksum = rte_cpu_to_be_16((uint16_t)~sum);
}

#endif /* SQUALL_NFS_L3FWD_TTL_H */
