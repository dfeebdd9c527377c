/* SPDX-License-Identifier: BSD-3-Clause
 * The control plane above every NF. An operator needs telemetry, apply and
 * the exporter's scrape most when an NF misbehaves: NFs that spin (an NF of
 * this manager or of another, a service at SCHED_RR) took the threads that
 * answer them off their core for seconds. So the threads that serve
 * commands (DPDK's telemetry listener, whose per-connection threads inherit
 * its policy, and the manager's own control threads) run SCHED_FIFO at
 * MGR_CTL_PRIORITY, one above the highest priority an NF may have
 * (SQ_NF_PRIORITY_MAX, config.h). They sleep on sockets and locks, so they
 * take a core only to answer. manager.control_realtime false keeps them
 * under the normal scheduler (nice -20 then, where allowed).
 */
#ifndef SQUALL_MGR_CTLPRIO_H
#define SQUALL_MGR_CTLPRIO_H

#include <stdbool.h>
#include <sys/types.h>

/* The control threads' SCHED_FIFO priority: above every NF's. */
#define MGR_CTL_PRIORITY 99

/* Name prefixes of the threads raised: DPDK's telemetry listener (and so
 * its connections') and the manager's control threads ("sq-..."). */
#define MGR_CTL_THREADS                   \
	{                                 \
		"telemetry", "sq-drainer" \
	}

/* Raise the calling thread (@p realtime: SCHED_FIFO MGR_CTL_PRIORITY, else
 * nice -20). @return 0 or -errno (then the thread is as it was). */
int mgr_ctlprio_self(bool realtime);

/* The calling thread back to the normal scheduler at nice 0: for a worker
 * a command starts (a capture's writer), which would inherit the
 * command's SCHED_FIFO and take a core from the NFs for as long as it
 * works. */
void mgr_ctlprio_normal_self(void);

/* Raise every thread of this process whose name starts with one of
 * MGR_CTL_THREADS. @return how many were raised, or -errno of the first
 * that could not be (the rest are tried all the same). */
int mgr_ctlprio_raise_all(bool realtime);

#endif /* SQUALL_MGR_CTLPRIO_H */
