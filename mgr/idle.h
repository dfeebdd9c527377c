/* SPDX-License-Identifier: BSD-3-Clause
 * The manager's sleep when it has nothing to do (issue 17; seed 001 §10's
 * adaptive polling, OVS-DPDK's pmd-sleep-max).
 *
 * A busy-polling manager holds a whole core that, on a small host, the NFs'
 * peers (the hosts' TCP stacks, a web server) need. After idle_after_us with
 * nothing moved, the main loop sleeps between rounds:
 *   - nothing held anywhere and every port has an rx interrupt (net_tap, a
 *     NIC): it waits for an interrupt (DPDK rx interrupt mode + epoll), at
 *     most until its next timer;
 *   - nothing held and every port is read from a socket (af_xdp, af_packet:
 *     no rx interrupt in DPDK 22.11): it waits in epoll for a socket to turn
 *     readable, which the kernel marks when a frame waits in its rx ring, at
 *     most until its next timer;
 *   - else a bounded sleep on the region's mgr_wait word, which an NF that
 *     hands packets back rings (lib/nf.c): NFs holding packets end it at
 *     once, ports without interrupts are polled when it times out.
 * The sleep grows with the idle time (a quarter of it, up to sleep_max_us),
 * so a short gap costs a short sleep and a long one the longest.
 *
 * This file sees no manager state: main.c tells it what the round did and
 * what is held (narrow calls into the roles), and it sleeps or not.
 */
#ifndef SQUALL_MGR_IDLE_H
#define SQUALL_MGR_IDLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* What the manager waits for, as main.c sees it this round. */
enum mgr_idle_wait {
	MGR_IDLE_BUSY = 0,  /* keep polling: something is due (generator, queued flows) */
	MGR_IDLE_PORTS = 1, /* nothing held: only the ports can bring work */
	MGR_IDLE_NFS = 2,   /* NFs hold packets: their return rings the doorbell */
};

struct mgr_idle {
	int epfd; /* DPDK epoll of the ports' rx interrupts; -1: none */
	uint16_t port_ids[SQ_MAX_PORTS];
	uint16_t n_ports;
	uint16_t n_intr; /* ports whose rx interrupt is in epfd */
	int sock_epfd;   /* plain epoll of the ports' sockets; -1: none */
	uint16_t n_sock; /* ports whose socket is in sock_epfd */
	/* the region's mgr_wait word, and the tx-ready bitmap looked at after
	 * the word is published (a doorbell rung before it would be missed) */
	_Atomic uint32_t *asleep;
	_Atomic uint64_t *tx_ready;
	size_t n_tx_ready_words;
	uint64_t work_tsc; /* the last round that moved something */
	uint64_t hz;
	/* The load of the last window (LOAD_WINDOW_MS awake): the share of the
	 * manager's awake time spent in rounds that moved packets, per mille.
	 * The idle time before a sleep grows with it (mgr_idle_note). */
	uint64_t round_tsc;    /* the end of the last round (or sleep) */
	uint64_t win_busy_tsc; /* this window: time in rounds that moved packets */
	uint64_t win_tsc;      /* this window: awake time */
	uint32_t load_pm;
	bool round_yielded; /* this round gave the core to NFs (mgr_idle_yield) */
	/* counters: the main lcore writes, telemetry reads (monotonic, torn
	 * reads are harmless on x86-64's 8-byte stores) */
	uint64_t sleeps;
	uint64_t slept_ns;
	uint64_t wakes_by_nf;   /* an NF's doorbell ended the sleep */
	uint64_t wakes_by_intr; /* a port's rx interrupt */
	uint64_t wakes_by_sock; /* a port's socket turned readable */
	uint64_t wakes_by_timer;
	uint64_t intr_errors; /* an rx interrupt could not be armed: fell back to a timed sleep */
	/* NFs pinned to the manager's own core (manager.nf_core): the awake
	 * count of that core's group in the region, which the manager joins
	 * while it runs (so a spinning NF yields to it, lib/nf.c), and its
	 * yields of the core to them; NULL when NFs run elsewhere. core_mgr:
	 * that group's flag, 1 while the manager is awake. */
	_Atomic int32_t *core_awake;
	_Atomic uint32_t *core_mgr;
	uint64_t core_yields;
	/* rounds in a row that moved packets with no yield (core_yield_rounds),
	 * and all such rounds: the yields put off */
	uint32_t rounds_unyielded;
	uint64_t core_yields_deferred;
};

/**
 * Set up: find which ports have an rx interrupt (queue 0, configured with
 * intr_conf.rxq by mgr/ports.c) and add them to an epoll set; the sockets
 * of the others (@p rx_sock_fds, -1: none) to another.
 * @return 0 (a port without one is not an error), -errno if epoll fails.
 */
int mgr_idle_init(struct mgr_idle *idle, const uint16_t *port_ids, const int *rx_sock_fds,
		  uint16_t n_ports, _Atomic uint32_t *asleep, _Atomic uint64_t *tx_ready,
		  size_t n_tx_ready_words);
void mgr_idle_free(struct mgr_idle *idle);

/**
 * End of a main-loop round: note whether it moved packets (or gave the
 * core to NFs holding some), for the load.
 * @return true if nothing moved for idle_after_us (with idle_after_load,
 *   stretched by the load: idle_after_ns) and sleeping is on: worth asking
 *   the roles what is held, then mgr_idle_sleep().
 */
bool mgr_idle_note(struct mgr_idle *idle, const struct sq_config *cfg, unsigned int moved,
		   uint64_t now_tsc);

/** How long nothing must move before a sleep now, in us: idle_after_us, or
 * with idle_after_load that stretched by the load (for telemetry). */
uint64_t mgr_idle_after_us(const struct mgr_idle *idle, const struct sq_config *cfg);

/**
 * Sleep, as long as the idle time so far and the limits allow.
 * @param wait what would end the idleness (enum mgr_idle_wait)
 * @param limit_ns sleep at most this long (the next timer: a wake timeout,
 *   the control period)
 * @return true if it slept
 */
bool mgr_idle_sleep(struct mgr_idle *idle, const struct sq_config *cfg, enum mgr_idle_wait wait,
		    uint64_t now_tsc, uint64_t limit_ns);

/**
 * The manager shares its core with NFs (manager.nf_core is its own): count
 * it among the core's awake tasks from now on. @p awake: the region's
 * awake count of that core's group.
 */
void mgr_idle_share_core(struct mgr_idle *idle, _Atomic int32_t *awake, _Atomic uint32_t *mgr);

/**
 * End of a round on a shared core: if NFs hold packets, give them the core
 * (a sched_yield: they run their bursts now, not when the scheduler's slice
 * of the busy-polling manager ends, and hand back before its next round),
 * unless this round moved packets and fewer than core_yield_rounds such
 * rounds have passed since the last yield.
 * @param moved packets the round moved
 * @return true if it yielded
 */
bool mgr_idle_yield(struct mgr_idle *idle, const struct sq_config *cfg, bool nfs_hold_pkts,
		    unsigned int moved);

#endif /* SQUALL_MGR_IDLE_H */
