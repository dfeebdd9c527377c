/* SPDX-License-Identifier: BSD-3-Clause
 * The manager's sleep when it has nothing to do: see idle.h.
 */
#include <errno.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_epoll.h>
#include <rte_ethdev.h>
#include <rte_log.h>

#include "idle.h"

/* Shorter sleeps cost more than the spin they save (a futex wait and its
 * timer are a few microseconds of this core by themselves). */
#define MIN_SLEEP_NS      2000
/* With rx interrupts on every port the sleep ends at a packet: it is bound
 * only by the caller's next timer, or this. */
#define INTR_SLEEP_MAX_MS 10
/* The timer slack of the main lcore: the default 50 us would stretch every
 * sleep of tens of microseconds to several times its length. */
#define TIMER_SLACK_NS    1000
/* The manager's load is measured over this much of its awake time: long
 * enough to hold many bursts, short enough to follow a change of rate. */
#define LOAD_WINDOW_MS    10

/* Ports without an rx interrupt whose PMD reads a socket: a plain epoll of
 * those sockets (kept apart from DPDK's: rte_epoll_wait takes every event's
 * data for its own). Only when every port has one: a port that has none
 * must be polled, and the timed sleep does. */
static int
add_sockets(struct mgr_idle *idle, const int *rx_sock_fds, const bool *has_intr)
{
	uint16_t n = 0;

	for (uint16_t i = 0; i < idle->n_ports; i++)
		n += !has_intr[i] && rx_sock_fds[i] >= 0;
	if (n == 0 || n != idle->n_ports)
		return 0;
	idle->sock_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (idle->sock_epfd < 0)
		return -errno;
	for (uint16_t i = 0; i < idle->n_ports; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};

		if (epoll_ctl(idle->sock_epfd, EPOLL_CTL_ADD, rx_sock_fds[i], &ev) == 0)
			idle->n_sock++;
	}
	return 0;
}

int
mgr_idle_init(struct mgr_idle *idle, const uint16_t *port_ids, const int *rx_sock_fds,
	      uint16_t n_ports, _Atomic uint32_t *asleep, _Atomic uint64_t *tx_ready,
	      size_t n_tx_ready_words)
{
	bool has_fd[SQ_MAX_PORTS];
	int ethdev_log, ethdev_level;

	*idle = (struct mgr_idle){
		.epfd = -1,
		.sock_epfd = -1,
		.n_ports = n_ports,
		.asleep = asleep,
		.tx_ready = tx_ready,
		.n_tx_ready_words = n_tx_ready_words,
		.hz = rte_get_tsc_hz(),
		.work_tsc = rte_rdtsc(),
	};
	idle->round_tsc = idle->work_tsc;
	prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS);
	/* ethdev logs an error for each port without an interrupt, which is
	 * no error here: quiet while asking. */
	ethdev_log = rte_log_register("lib.ethdev");
	ethdev_level = ethdev_log >= 0 ? rte_log_get_level((uint32_t)ethdev_log) : -1;
	if (ethdev_log >= 0)
		rte_log_set_level((uint32_t)ethdev_log, RTE_LOG_CRIT);
	for (uint16_t i = 0; i < n_ports; i++) {
		idle->port_ids[i] = port_ids[i];
		has_fd[i] = rte_eth_dev_rx_intr_ctl_q_get_fd(port_ids[i], 0) >= 0;
	}
	if (ethdev_log >= 0 && ethdev_level >= 0)
		rte_log_set_level((uint32_t)ethdev_log, (uint32_t)ethdev_level);
	for (uint16_t i = 0; i < n_ports; i++) {
		/* No fd: the PMD has no rx interrupt (af_xdp, af_packet, pcap,
		 * null and ring in DPDK 22.11). */
		if (!has_fd[i])
			continue;
		if (idle->epfd < 0) {
			idle->epfd = epoll_create1(EPOLL_CLOEXEC);
			if (idle->epfd < 0)
				return -errno;
		}
		if (rte_eth_dev_rx_intr_ctl_q(port_ids[i], 0, idle->epfd, RTE_INTR_EVENT_ADD,
					      NULL) == 0)
			idle->n_intr++;
	}
	return add_sockets(idle, rx_sock_fds, has_fd);
}

void
mgr_idle_free(struct mgr_idle *idle)
{
	if (idle->epfd >= 0)
		close(idle->epfd);
	idle->epfd = -1;
	if (idle->sock_epfd >= 0)
		close(idle->sock_epfd);
	idle->sock_epfd = -1;
}

/* (exact to a nanosecond for gaps of up to 70 days at 3 GHz) */
static uint64_t
tsc_to_ns(const struct mgr_idle *idle, uint64_t tsc)
{
	return tsc * 1000 / (idle->hz / 1000000);
}

/* A doorbell rung before our word was published: an NF handed packets back
 * and will not ring again for them. */
static bool
doorbell_rung(const struct mgr_idle *idle)
{
	for (size_t w = 0; w < idle->n_tx_ready_words; w++)
		if (atomic_load_explicit(&idle->tx_ready[w], memory_order_seq_cst) != 0)
			return true;
	return false;
}

/* A timed sleep any NF returning packets ends (lib/nf.c return_pkts: after
 * its doorbell, a full fence, then our word; we publish the word, a full
 * fence, then read the doorbells: one of us sees the other). */
static void
sleep_on_doorbell(struct mgr_idle *idle, uint64_t sleep_ns)
{
	struct timespec ts = {.tv_sec = sleep_ns / 1000000000, .tv_nsec = sleep_ns % 1000000000};
	long ret;
	int err;

	atomic_store_explicit(idle->asleep, 1, memory_order_seq_cst);
	if (doorbell_rung(idle)) {
		atomic_store_explicit(idle->asleep, 0, memory_order_relaxed);
		return;
	}
	/* Not FUTEX_PRIVATE: the word is in the region NFs map. */
	ret = syscall(SYS_futex, idle->asleep, FUTEX_WAIT, 1, &ts, NULL, 0);
	err = ret < 0 ? errno : 0;
	/* (an NF that cleared it has woken us, or will wake nobody) */
	atomic_store_explicit(idle->asleep, 0, memory_order_relaxed);
	idle->sleeps++;
	if (ret == 0 || err == EAGAIN)
		idle->wakes_by_nf++;
	else
		idle->wakes_by_timer++;
}

static void
intr_set(struct mgr_idle *idle, bool on)
{
	for (uint16_t i = 0; i < idle->n_ports; i++) {
		uint16_t port = idle->port_ids[i];
		int ret = on ? rte_eth_dev_rx_intr_enable(port, 0)
			     : rte_eth_dev_rx_intr_disable(port, 0);

		/* (-ENOTSUP: nothing to arm, the fd is always armed: net_tap's
		 * queue fd, readable while packets wait) */
		if (on && ret < 0 && ret != -ENOTSUP)
			idle->intr_errors++;
	}
}

/* A packet that arrived between the last poll and the arming raises no
 * interrupt on some NICs: look at the queues once more (where the PMD can
 * say; where it cannot, the sleep is bounded by the next timer). */
static bool
rx_waiting(const struct mgr_idle *idle)
{
	for (uint16_t i = 0; i < idle->n_ports; i++)
		if (rte_eth_rx_queue_count(idle->port_ids[i], 0) > 0)
			return true;
	return false;
}

/* Every port has an rx interrupt and nothing is held: wait for a packet. */
static void
sleep_on_intr(struct mgr_idle *idle, uint64_t limit_ns)
{
	struct rte_epoll_event ev[SQ_MAX_PORTS];
	int timeout_ms = INTR_SLEEP_MAX_MS;
	uint64_t errors = idle->intr_errors;
	int n;

	if (limit_ns != 0)
		timeout_ms = (int)RTE_MAX(1u, RTE_MIN(limit_ns / 1000000, (uint64_t)timeout_ms));
	intr_set(idle, true);
	if (idle->intr_errors != errors || rx_waiting(idle)) {
		intr_set(idle, false);
		return;
	}
	n = rte_epoll_wait_interruptible(idle->epfd, ev, RTE_DIM(ev), timeout_ms);
	intr_set(idle, false);
	idle->sleeps++;
	if (n > 0)
		idle->wakes_by_intr++;
	else
		idle->wakes_by_timer++;
}

/* Every port is read from a socket and nothing is held: wait for a frame.
 * epoll is level-triggered: a frame that came since the last poll ends the
 * wait at once. */
static void
sleep_on_sockets(struct mgr_idle *idle, uint64_t limit_ns)
{
	struct epoll_event ev[SQ_MAX_PORTS];
	int timeout_ms = INTR_SLEEP_MAX_MS;
	int n;

	if (limit_ns != 0)
		timeout_ms = (int)RTE_MAX(1u, RTE_MIN(limit_ns / 1000000, (uint64_t)timeout_ms));
	n = epoll_wait(idle->sock_epfd, ev, RTE_DIM(ev), timeout_ms);
	idle->sleeps++;
	if (n > 0)
		idle->wakes_by_sock++;
	else
		idle->wakes_by_timer++;
}

/* Count the round that ended at now_tsc into the load window. */
static void
note_load(struct mgr_idle *idle, bool moved, uint64_t now_tsc)
{
	uint64_t round = now_tsc - idle->round_tsc;

	idle->round_tsc = now_tsc;
	idle->win_tsc += round;
	if (moved)
		idle->win_busy_tsc += round;
	if (idle->win_tsc < idle->hz / 1000 * LOAD_WINDOW_MS)
		return;
	idle->load_pm = (uint32_t)(idle->win_busy_tsc * 1000 / idle->win_tsc);
	idle->win_tsc = 0;
	idle->win_busy_tsc = 0;
}

/* How long nothing must move before a sleep: idle_after_us, or with
 * idle_after_load that stretched by the load, idle_after_us / (1 - load)^2
 * (at most 100x), as a gap in heavy traffic is short and comes back. Under
 * real TCP through a 3-NF chain on the manager's own core (tcp_peers),
 * the manager at a load of 0.5-0.8 met gaps of 0.2-0.6 ms; sleeping in
 * them after 100 us left the core idle, the hosts' tasks woke there, and
 * the chain lost iperf3 throughput to them (see docs/config.md). A
 * trickle (load near 0) still sleeps after idle_after_us. */
static uint64_t
idle_after_ns(const struct mgr_idle *idle, const struct sq_config *cfg)
{
	uint64_t free_pm;

	if (!cfg->idle_after_load)
		return (uint64_t)cfg->idle_after_us * 1000;
	free_pm = RTE_MAX(1000u - RTE_MIN(idle->load_pm, 1000u), 100u);
	return (uint64_t)cfg->idle_after_us * 1000 * 1000 * 1000 / (free_pm * free_pm);
}

uint64_t
mgr_idle_after_us(const struct mgr_idle *idle, const struct sq_config *cfg)
{
	return idle_after_ns(idle, cfg) / 1000;
}

bool
mgr_idle_note(struct mgr_idle *idle, const struct sq_config *cfg, unsigned int moved,
	      uint64_t now_tsc)
{
	/* a round that gave the core to NFs holding packets was busy too */
	note_load(idle, moved > 0 || idle->round_yielded, now_tsc);
	idle->round_yielded = false;
	if (moved > 0 || cfg->idle_sleep_max_us == 0) {
		idle->work_tsc = now_tsc;
		return false;
	}
	return tsc_to_ns(idle, now_tsc - idle->work_tsc) >= idle_after_ns(idle, cfg);
}

bool
mgr_idle_sleep(struct mgr_idle *idle, const struct sq_config *cfg, enum mgr_idle_wait wait,
	       uint64_t now_tsc, uint64_t limit_ns)
{
	uint64_t sleep_ns, start_tsc, bound_ns = limit_ns;
	void (*how)(struct mgr_idle *, uint64_t);

	if (wait == MGR_IDLE_BUSY) {
		idle->work_tsc = now_tsc;
		return false;
	}
	/* A quarter of the time idle so far: a pause in traffic costs a short
	 * sleep, a quiet hour the longest. */
	sleep_ns = RTE_MIN(tsc_to_ns(idle, now_tsc - idle->work_tsc) / 4,
			   (uint64_t)cfg->idle_sleep_max_us * 1000);
	sleep_ns = RTE_MIN(sleep_ns, limit_ns);
	if (wait == MGR_IDLE_PORTS && idle->n_intr > 0 && idle->n_intr == idle->n_ports &&
	    idle->intr_errors == 0)
		how = sleep_on_intr;
	else if (wait == MGR_IDLE_PORTS && idle->n_sock > 0 && idle->n_sock == idle->n_ports)
		how = sleep_on_sockets;
	else if (sleep_ns >= MIN_SLEEP_NS) {
		how = sleep_on_doorbell;
		bound_ns = sleep_ns;
	} else
		return false;
	/* Asleep, the manager is not among its core's awake tasks: an NF
	 * spinning there has nobody to yield to. */
	if (idle->core_awake != NULL) {
		atomic_fetch_sub_explicit(idle->core_awake, 1, memory_order_relaxed);
		atomic_store_explicit(idle->core_mgr, 0, memory_order_relaxed);
	}
	start_tsc = rte_rdtsc();
	how(idle, bound_ns);
	/* the load is of the awake time: the sleep is not a round */
	idle->round_tsc = rte_rdtsc();
	idle->slept_ns += tsc_to_ns(idle, idle->round_tsc - start_tsc);
	if (idle->core_awake != NULL) {
		atomic_store_explicit(idle->core_mgr, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(idle->core_awake, 1, memory_order_relaxed);
	}
	return true;
}

void
mgr_idle_share_core(struct mgr_idle *idle, _Atomic int32_t *awake, _Atomic uint32_t *mgr)
{
	idle->core_awake = awake;
	idle->core_mgr = mgr;
	atomic_store_explicit(mgr, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(awake, 1, memory_order_relaxed);
}

/* Why a yield may wait a few rounds: on veth most of a round is its
 * transmit, inside which the kernel runs the receiving host's TCP; the
 * packets that arrive meanwhile are in the ports by the next round's rx.
 * Yielding after every round gives the NFs each such batch alone, one
 * hand-over of the core per hop for each; a round more takes them along
 * with the last (and a round that moves nothing ends the wait at once, so
 * a lone packet waits no longer). Through a 3-NF chain under iperf3,
 * core_yield_rounds 4 cut core 0's switches by 41% and carried 1.14x
 * (tcp_peers against squall-chain3-yield1; docs/config.md). */
bool
mgr_idle_yield(struct mgr_idle *idle, const struct sq_config *cfg, bool nfs_hold_pkts,
	       unsigned int moved)
{
	if (idle->core_awake == NULL || !nfs_hold_pkts) {
		idle->rounds_unyielded = 0;
		return false;
	}
	if (moved > 0 && ++idle->rounds_unyielded < cfg->core_yield_rounds) {
		idle->core_yields_deferred++;
		return false;
	}
	idle->rounds_unyielded = 0;
	sched_yield();
	idle->core_yields++;
	idle->round_yielded = true;
	return true;
}
