/* SPDX-License-Identifier: BSD-3-Clause
 * capfilter: a capture's filter, a libpcap expression, made into a program
 * DPDK runs on an mbuf (rte_bpf_exec, or the function rte_bpf_get_jit gives)
 * that accepts what libpcap's own filter accepts, and returns what it returns
 * (the snap length, or 0), on the same frame.
 *
 * No manager state: capture.c and the unit test (tests/unit/test_capfilter.c,
 * which runs both filters side by side) use it alike.
 */
#ifndef SQUALL_MGR_CAPFILTER_H
#define SQUALL_MGR_CAPFILTER_H

#include <stddef.h>
#include <stdint.h>

struct bpf_program;
struct rte_bpf;

/* Compile @p expr as tcpdump does for Ethernet frames (pcap_compile,
 * optimized, on a dead DLT_EN10MB handle of @p snaplen). The caller frees
 * @p prog with pcap_freecode. @return 0, or -1 with the reason in @p err. */
int capfilter_compile(const char *expr, uint32_t snaplen, struct bpf_program *prog, char *err,
		      size_t err_len);

/* @p prog as an rte_bpf that takes a struct rte_mbuf * (the caller
 * destroys it with rte_bpf_destroy). DPDK's rte_malloc must be up (EAL).
 * @return NULL with the reason in @p err. */
struct rte_bpf *capfilter_load(const struct bpf_program *prog, char *err, size_t err_len);

#endif
