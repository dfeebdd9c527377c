/* SPDX-License-Identifier: BSD-3-Clause
 * Squall shared region: the layout the manager and every NF agree on.
 *
 * The manager creates the region file, maps it at hdr->base_addr and builds
 * the mbuf pool, the rings and the NF control blocks inside it. An NF maps
 * the same file at the same address, so every pointer into the region (mbufs,
 * rings) is valid in both; pointers into anyone's private memory never are,
 * so the region stores offsets for everything the NF must find.
 */
#ifndef SQUALL_REGION_H
#define SQUALL_REGION_H

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include <rte_common.h>

#define SQ_REGION_MAGIC     0x4c4c415551535153ULL /* "SQSQUALL" */
/** Bump on any change to this file or to struct sq_pkt_meta. */
#define SQ_ABI_VERSION      8u
/** Fixed address, far from the heap, stack and DPDK's own mappings. */
#define SQ_REGION_BASE_ADDR 0x3f0000000000ULL

#define SQ_NAME_LEN     32
#define SQ_NF_BURST_MAX 32
#define SQ_NF_COUNTERS  8 /* NF-defined counters, named by the NF */
/** NFs are grouped by the core they are pinned to (the last group: not pinned). */
#define SQ_CORE_GROUPS  64

/** Manager lifecycle, in the region header. */
/** No NF (direct_next_id of an NF with no next hop in a lane). */
#define SQ_NF_NONE UINT32_MAX

enum sq_mgr_state {
	SQ_MGR_STARTING = 0,
	SQ_MGR_RUNNING = 1,
	SQ_MGR_STOPPING = 2,
};

/** NF state word: the futex word of a sleeping NF (DESIGN §5). */
enum sq_nf_state {
	SQ_NF_FREE = 0,    /* slot unused */
	SQ_NF_SPAWNED = 1, /* manager started a process; not attached yet */
	SQ_NF_AWAKE = 2,   /* attached and running its loop */
	SQ_NF_ASLEEP = 3,  /* futex-waiting on state */
	SQ_NF_WAKING = 4,  /* manager decided to wake it; one FUTEX_WAKE sent */
	SQ_NF_EXITED = 5,  /* NF left its loop cleanly */
	SQ_NF_DEAD = 6,    /* manager saw the process die */
};

/**
 * Message types (seed 003 §IV.B). Each NF has two small rings in its control
 * block: the manager's to the NF (msg_in) and the NF's to the manager
 * (msg_out). Types below SQ_MSG_USER are libsquall's own; an NF's handler
 * sees those after libsquall acted on them.
 */
enum sq_msg_type {
	SQ_MSG_BLOCK = 1,   /* manager -> NF: scaled in; sleep whenever idle, even in poll mode */
	SQ_MSG_RERUN = 2,   /* manager -> NF: scaled out again; run as configured */
	SQ_MSG_STOP = 3,    /* manager -> NF: leave the loop after the current burst */
	SQ_MSG_BLOCKED = 4, /* NF -> manager: took BLOCK */
	SQ_MSG_RUNNING = 5, /* NF -> manager: took RERUN */
	SQ_MSG_USER = 256,  /* the first type an NF or an operator may use */
};

#define SQ_MSG_SLOTS    4 /* per ring: a power of two */
#define SQ_MSG_DATA_LEN 56

/** One message: a whole cache line. */
struct sq_msg {
	uint32_t type; /* enum sq_msg_type, or >= SQ_MSG_USER */
	uint32_t len;  /* bytes of data used */
	uint8_t data[SQ_MSG_DATA_LEN];
};

static_assert(sizeof(struct sq_msg) == RTE_CACHE_LINE_SIZE, "a message is a line");

enum sq_nf_mode {
	SQ_NF_MODE_SLEEP = 0,
	SQ_NF_MODE_POLL = 1,
};

/**
 * One NF's control block. Lines are grouped by writer: the manager writes
 * the first, the NF the others, so no line ping-pongs between cores.
 */
struct sq_nf_ctl {
	/* Written by the manager before the NF starts; read-only after. */
	alignas(RTE_CACHE_LINE_SIZE) uint32_t id;
	uint32_t abi_version;
	uint16_t service_id;
	uint16_t instance;
	uint32_t mode;        /* enum sq_nf_mode */
	uint64_t rx_ring_off; /* from region base */
	uint64_t tx_ring_off;
	uint32_t burst_max;         /* NF dequeue burst, <= SQ_NF_BURST_MAX */
	uint32_t batch_budget_pkts; /* then yield the core (seed 001 §4) */
	uint32_t flow_track;        /* 1: a per-flow NF: clean up at its flow's FIN/RST */
	uint64_t spin_ns;           /* spin on an empty ring before sleeping */
	uint32_t core_group;        /* index into the header's woken[] */
	char service[SQ_NAME_LEN];
	/* A direct chain (DESIGN §3's sender-context forwarding; mgr/lane.h):
	 * this NF's ring of packets handed straight to it by the previous
	 * hop's NF of its lane, and the next hop's, with that NF's id (to wake
	 * it). 0 / SQ_NF_NONE: none. */
	uint64_t direct_rx_ring_off;
	uint64_t direct_next_ring_off;
	uint32_t direct_next_id;
	uint32_t pad0;

	/* Written by the manager at run time. */
	alignas(RTE_CACHE_LINE_SIZE) _Atomic uint32_t stop; /* 1: leave the loop */
	/* Flows ended (per-flow NFs): when it differs from flow_gen_done, the NF
	 * finishes its queue, runs its state cleaner and sets flow_gen_done. */
	_Atomic uint32_t flow_gen;
	uint64_t wakes; /* FUTEX_WAKEs sent */
	/* 1 while the manager has the NF under SCHED_RR (a service priority,
	 * chain_priority or a rule's per-flow priority): it must not spin, as
	 * its sched_yield would reach no lower-priority NF. */
	_Atomic uint32_t realtime;
	/* Messages (enum sq_msg_type): the manager's producer count of msg_in,
	 * and its consumer count of msg_out. Both free-running; a slot is
	 * count % SQ_MSG_SLOTS. On the line the NF reads every loop anyway. */
	_Atomic uint32_t msg_in_head;
	_Atomic uint32_t msg_out_tail;
	/* 1: hand NEXT packets back to the manager, not to direct_next (a
	 * capture at the next hop needs the manager to see them) */
	_Atomic uint32_t direct_off;

	/* The NF's state word: NF writes AWAKE/ASLEEP; manager ASLEEP->WAKING. */
	alignas(RTE_CACHE_LINE_SIZE) _Atomic uint32_t state;
	_Atomic int32_t pid;

	/* Written by the NF only. */
	alignas(RTE_CACHE_LINE_SIZE) uint64_t rx_pkts;
	uint64_t tx_pkts;
	uint64_t drop_verdicts; /* packets the NF handed back as DROP */
	uint64_t bursts;
	uint64_t sleeps;                /* times the NF published ASLEEP */
	uint64_t sleep_cancels;         /* ... and took back itself: packets came first */
	uint64_t handler_tsc;           /* cycles spent in the user's handler */
	uint64_t tx_full_spins;         /* times the tx ring was full (back-pressure) */
	_Atomic uint32_t flow_gen_done; /* the last flow_gen whose end was cleaned up */
	uint32_t pad1;
	uint64_t flows_cleaned; /* state cleaner runs at a flow's end */
	/* Flows the NF saw close (FIN both ways or RST) and cleaned up by itself,
	 * before handing back their last packet: the manager then returns the NF
	 * to its pool without asking (no extra wake per flow). */
	_Atomic uint32_t closes_cleaned;
	uint32_t pad2;
	uint64_t budget_yields; /* sched_yields after batch_budget_pkts in a row */
	uint64_t spin_yields;   /* sched_yields while spinning on an empty ring */
	/* The NF's consumer count of msg_in and producer count of msg_out. The
	 * manager never trusts them: it keeps its own counts (DESIGN §4). */
	_Atomic uint32_t msg_in_tail;
	_Atomic uint32_t msg_out_head;
	uint64_t msgs_taken;       /* manager -> NF messages the NF handled */
	uint64_t msgs_unsent;      /* NF -> manager messages its full ring turned away */
	uint64_t direct_rx_pkts;   /* taken from direct_rx_ring */
	uint64_t direct_tx_pkts;   /* handed straight to the next hop */
	uint64_t direct_wakes;     /* ... which was asleep: woken by us */
	uint64_t direct_full_pkts; /* its ring full: handed to the manager instead */

	/* Written by the manager (msg_in) and by the NF (msg_out). */
	alignas(RTE_CACHE_LINE_SIZE) struct sq_msg msg_in[SQ_MSG_SLOTS];
	struct sq_msg msg_out[SQ_MSG_SLOTS];

	alignas(RTE_CACHE_LINE_SIZE) uint64_t counters[SQ_NF_COUNTERS];
	char counter_names[SQ_NF_COUNTERS][SQ_NAME_LEN];
};

static_assert(sizeof(struct sq_nf_ctl) % RTE_CACHE_LINE_SIZE == 0, "whole lines");

/** The first bytes of the region. */
struct sq_region_hdr {
	uint64_t magic;
	uint32_t abi_version;
	uint32_t hdr_size;
	uint64_t base_addr; /* where every process must map it */
	uint64_t len_bytes;
	uint64_t nf_table_off;
	/* A bit per NF (by id), set by the NF after it put packets on its tx
	 * ring, cleared by the manager before it drains them: the manager reads
	 * a few words a round instead of a ring of every NF that holds packets.
	 * The same number of words follows it: the msg-ready bitmap, a bit set
	 * by an NF after it posted a message (sq_region_msg_ready()). */
	uint64_t tx_ready_off;
	uint32_t max_nfs;
	uint32_t nf_ctl_size;
	uint32_t mbuf_priv_size;
	uint32_t n_ports;
	uint64_t tsc_hz;
	int32_t mgr_pid;
	_Atomic uint32_t mgr_state; /* enum sq_mgr_state */
	char name[SQ_NAME_LEN];
	char port_names[16][SQ_NAME_LEN];
	/* Per core group: NFs the manager woke that have not run yet. An NF
	 * spins on its empty ring only while this is 0: spinning while woken
	 * NFs wait for the same core would only delay them. */
	struct {
		alignas(RTE_CACHE_LINE_SIZE) _Atomic int32_t n;
	} woken[SQ_CORE_GROUPS];
	/* Per core group: NFs attached and not asleep (running or runnable). A
	 * spinning NF yields only while another is awake: with none, its yield
	 * would hand the core to whatever else runs there (an application, a
	 * daemon) for a scheduler slice, and it would not be woken back. The
	 * NFs of a group share one core, so the line stays in its cache. */
	struct {
		alignas(RTE_CACHE_LINE_SIZE) _Atomic int32_t n;
		/* 1 while the manager shares this group's core (manager.nf_core)
		 * and is awake, not in its idle sleep: a spinning NF's yields
		 * then hand the core to the manager's work, not to idle time,
		 * and do not use up its spin (lib/nf.c spin_for_pkts). */
		_Atomic uint32_t mgr;
	} awake[SQ_CORE_GROUPS];
	/* The manager's sleep (mgr/idle.h): 1 while its main loop, idle, waits
	 * on this word. An NF that hands packets back and finds it set clears
	 * it and wakes the manager (FUTEX_WAKE). The manager writes it only
	 * around a sleep, so NFs read a line that stays in their cache. */
	struct {
		alignas(RTE_CACHE_LINE_SIZE) _Atomic uint32_t asleep;
	} mgr_wait;
};

static inline struct sq_nf_ctl *
sq_region_nf_ctl(struct sq_region_hdr *hdr, uint32_t id)
{
	return (struct sq_nf_ctl *)((uintptr_t)hdr + hdr->nf_table_off +
				    (uint64_t)id * hdr->nf_ctl_size);
}

/* Words of the tx-ready bitmap for n NFs. */
static inline size_t
sq_tx_ready_words(uint32_t n)
{
	return ((size_t)n + 63) / 64;
}

static inline _Atomic uint64_t *
sq_region_tx_ready(struct sq_region_hdr *hdr)
{
	return (_Atomic uint64_t *)((uintptr_t)hdr + hdr->tx_ready_off);
}

/* The msg-ready bitmap: right after the tx-ready one, as many words. */
static inline _Atomic uint64_t *
sq_region_msg_ready(struct sq_region_hdr *hdr)
{
	return sq_region_tx_ready(hdr) + sq_tx_ready_words(hdr->max_nfs);
}

static inline void *
sq_region_ptr(struct sq_region_hdr *hdr, uint64_t off)
{
	return (void *)((uintptr_t)hdr + off);
}

#endif /* SQUALL_REGION_H */
