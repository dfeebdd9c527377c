/* SPDX-License-Identifier: BSD-3-Clause
 * The NF side of Squall: attach, the packet loop in poll and sleep mode,
 * verdicts back to the manager.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_pause.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_tcp.h>

#include <squall/log.h>
#include <squall/squall.h>

#include "region.h"

/* A sleeping NF re-checks the manager this often, so it never outlives it;
 * the manager's own children get SIGTERM when it dies (PR_SET_PDEATHSIG) and
 * check only as a fallback, rarely: every 200 ms, a pool of 1,000 idle NFs
 * cost the NF core ~5,400 context switches a second, taken from the NFs with
 * work (now ~560). Each NF adds a jitter of its own (up to
 * LIVENESS_JITTER_NS, by its id) so that NFs started together do not wake
 * together. */
#define LIVENESS_CHECK_NS  (200 * 1000 * 1000ull)
#define LIVENESS_CHILD_NS  (2000 * 1000 * 1000ull)
#define LIVENESS_JITTER_NS (1000 * 1000 * 1000ull)
/* A polling NF checks its stop flag and the manager every this many empty polls. */
#define POLL_CHECK_EVERY   (1u << 16)
/* A spin's wall time, stretched by the yields to an awake manager on our
 * core, ends at most this many spins after it began (spin_for_pkts). */
#define SPIN_STRETCH_MAX   100

struct sq_nf {
	struct sq_region_hdr *hdr;
	struct sq_nf_ctl *ctl;
	struct rte_ring *rx;
	struct rte_ring *tx;
	/* A direct chain's lane (region.h): packets the previous hop's NF put
	 * here, and the next hop's ring and control block; NULL: none. */
	struct rte_ring *direct_rx;
	struct rte_ring *direct_next;
	struct sq_nf_ctl *next_ctl;
	uint32_t next_core_group;
	/* Read once at attach: the region's copies are writable by any NF. */
	_Atomic uint64_t *tx_ready;
	_Atomic uint64_t *msg_ready;
	uint32_t id;
	uint32_t core_group;
	pid_t mgr_pid; /* -1: not known before the region's copy */
	sq_pkt_handler_fn pkt_fn;
	sq_burst_handler_fn burst_fn;
	void *handler_arg;
	unsigned int prefetch; /* enum sq_prefetch bits */
	bool prefetch_set;     /* by sq_nf_set_prefetch(), not the handler's default */
	sq_state_cleaner_fn cleaner_fn;
	void *cleaner_arg;
	sq_msg_handler_fn msg_fn;
	void *msg_arg;
	/* Our own message counts: the region's copies are writable by any NF. */
	uint32_t msg_in_tail;
	uint32_t msg_out_head;
	bool blocked;             /* the manager sent SQ_MSG_BLOCK (and no RERUN since) */
	uint64_t spin_tsc;        /* the configured spin (spin_us) */
	uint64_t spin_cur_tsc;    /* the spin now: adapts between 0 and spin_tsc */
	struct timespec liveness; /* asleep, check the manager this often */
	int n_counters;
	uint32_t flow_fins; /* per-flow NF: FINs seen in the current flow */
	bool flow_dirty;    /* per-flow NF: handled packets since the last cleanup */
	bool clean_at_end;  /* per-flow NF: not at the close it sees (sq_nf_clean_at_flow_end) */
	volatile sig_atomic_t stop_local;
};

/* For the signal handler: one NF per process. */
static struct sq_nf *the_nf;

static void
on_signal(int sig)
{
	(void)sig;
	if (the_nf != NULL)
		the_nf->stop_local = 1;
}

/* Remove argv[i] and argv[i + 1], as rte_eal_init() removes its own options. */
static void
argv_take(int *argc, char **argv, int i, int n)
{
	memmove(&argv[i], &argv[i + n], (size_t)(*argc - i - n + 1) * sizeof(char *));
	*argc -= n;
}

/* The region: --sq-region PATH, else the fd the manager passed to its child
 * (SQUALL_REGION_FD), else SQUALL_REGION. *region_fd is -1 unless the fd. */
static int
parse_args(int *argc, char **argv, const char **region, int *region_fd, long *id)
{
	const char *id_str = getenv("SQUALL_NF_ID");
	const char *fd_str = getenv("SQUALL_REGION_FD");
	char *end;
	int i;

	*region = getenv("SQUALL_REGION");
	*region_fd = -1;
	if (fd_str != NULL) {
		errno = 0;
		*region_fd = (int)strtol(fd_str, &end, 10);
		if (errno != 0 || *end != '\0' || *region_fd < 0) {
			SQ_LOG(ERR, NF, "bad SQUALL_REGION_FD \"%s\"\n", fd_str);
			return -EINVAL;
		}
		if (*region == NULL)
			*region = "SQUALL_REGION_FD";
		/* Not for this NF's own children: the fd is closed once mapped. */
		unsetenv("SQUALL_REGION_FD");
	}
	for (i = 1; i < *argc;) {
		if (strcmp(argv[i], "--sq-region") == 0 && i + 1 < *argc) {
			*region = argv[i + 1];
			if (*region_fd >= 0)
				close(*region_fd);
			*region_fd = -1;
			argv_take(argc, argv, i, 2);
		} else if (strcmp(argv[i], "--sq-id") == 0 && i + 1 < *argc) {
			id_str = argv[i + 1];
			argv_take(argc, argv, i, 2);
		} else {
			i++;
		}
	}
	if (*region == NULL || id_str == NULL) {
		SQ_LOG(ERR, NF,
		       "no region given: run me from squall-mgr, or pass "
		       "--sq-region PATH --sq-id N\n");
		return -EINVAL;
	}
	errno = 0;
	*id = strtol(id_str, &end, 10);
	if (errno != 0 || *end != '\0' || *id < 0 || *id > INT_MAX) {
		SQ_LOG(ERR, NF, "bad NF id \"%s\"\n", id_str);
		return -EINVAL;
	}
	return 0;
}

/* SQUALL_MGR_PID, from the manager that spawned us; -1 without. */
static pid_t
mgr_pid_from_env(void)
{
	const char *s = getenv("SQUALL_MGR_PID");
	char *end;
	long pid;

	if (s == NULL)
		return -1;
	errno = 0;
	pid = strtol(s, &end, 10);
	unsetenv("SQUALL_MGR_PID"); /* (not for this NF's own children) */
	return errno == 0 && *end == '\0' && pid >= 0 && pid <= INT_MAX ? (pid_t)pid : -1;
}

static void
log_level_from_env(void)
{
	const char *lvl = getenv("SQUALL_LOG_LEVEL");

	if (lvl == NULL)
		return;
	if (strcmp(lvl, "debug") == 0)
		sq_log_level = RTE_LOG_DEBUG;
	else if (strcmp(lvl, "info") == 0)
		sq_log_level = RTE_LOG_INFO;
	else if (strcmp(lvl, "warning") == 0)
		sq_log_level = RTE_LOG_WARNING;
	else if (strcmp(lvl, "err") == 0)
		sq_log_level = RTE_LOG_ERR;
}

/* A direct chain's NF (mgr/lane.h): its lane's rings, as the manager set
 * them before starting it. */
static int
attach_lane(struct sq_nf *nf)
{
	const struct sq_nf_ctl *ctl = nf->ctl;

	if (ctl->direct_rx_ring_off != 0)
		nf->direct_rx = sq_region_ptr(nf->hdr, ctl->direct_rx_ring_off);
	if (ctl->direct_next_ring_off == 0)
		return 0;
	if (ctl->direct_next_id >= nf->hdr->max_nfs || ctl->direct_next_id == nf->id) {
		SQ_LOG(ERR, NF, "NF slot %u: corrupt control block (next hop %u)\n", nf->id,
		       ctl->direct_next_id);
		return -EPROTO;
	}
	nf->direct_next = sq_region_ptr(nf->hdr, ctl->direct_next_ring_off);
	nf->next_ctl = sq_region_nf_ctl(nf->hdr, ctl->direct_next_id);
	nf->next_core_group =
		nf->next_ctl->core_group < SQ_CORE_GROUPS ? nf->next_ctl->core_group : 0;
	return 0;
}

int
sq_nf_init(int argc, char **argv, struct sq_nf **out)
{
	struct sigaction sa = {.sa_handler = on_signal};
	const char *region_path;
	struct sq_nf *nf;
	int argc_left = argc;
	int region_fd;
	long id;
	int ret;

	log_level_from_env();
	ret = parse_args(&argc_left, argv, &region_path, &region_fd, &id);
	if (ret < 0)
		return ret;
	nf = calloc(1, sizeof(*nf));
	if (nf == NULL)
		return -ENOMEM;
	nf->mgr_pid = mgr_pid_from_env();
	if (region_fd >= 0) {
		/* The mapping holds the region now: the fd is not needed. */
		ret = sq_region_map_fd(region_fd, region_path, &nf->hdr);
		close(region_fd);
	} else {
		ret = sq_region_map(region_path, &nf->hdr, &nf->mgr_pid);
	}
	if (ret < 0)
		goto out_free;
	if ((uint64_t)id >= nf->hdr->max_nfs) {
		SQ_LOG(ERR, NF, "NF id %ld out of range (region holds %u)\n", id, nf->hdr->max_nfs);
		ret = -EINVAL;
		goto out_unmap;
	}
	nf->ctl = sq_region_nf_ctl(nf->hdr, (uint32_t)id);
	if (nf->ctl->abi_version != SQ_ABI_VERSION || nf->ctl->rx_ring_off == 0) {
		SQ_LOG(ERR, NF, "NF slot %ld is not set up by the manager\n", id);
		ret = -EINVAL;
		goto out_unmap;
	}
	if (nf->ctl->core_group >= SQ_CORE_GROUPS ||
	    nf->hdr->tx_ready_off + 2 * sq_tx_ready_words(nf->hdr->max_nfs) * sizeof(uint64_t) >
		    nf->hdr->len_bytes) {
		SQ_LOG(ERR, NF, "NF slot %ld: corrupt control block\n", id);
		ret = -EPROTO;
		goto out_unmap;
	}
	nf->id = (uint32_t)id;
	nf->core_group = nf->ctl->core_group;
	nf->tx_ready = sq_region_tx_ready(nf->hdr);
	nf->msg_ready = sq_region_msg_ready(nf->hdr);
	nf->rx = sq_region_ptr(nf->hdr, nf->ctl->rx_ring_off);
	nf->tx = sq_region_ptr(nf->hdr, nf->ctl->tx_ring_off);
	ret = attach_lane(nf);
	if (ret < 0)
		goto out_unmap;
	/* where the manager set both rings' NF ends before it started us: a
	 * message it sent since (a BLOCK to a restarted instance) is ours */
	nf->msg_in_tail = atomic_load(&nf->ctl->msg_in_tail);
	nf->msg_out_head = atomic_load(&nf->ctl->msg_out_head);
	nf->spin_tsc = nf->ctl->spin_ns * nf->hdr->tsc_hz / 1000000000ull;
	nf->spin_cur_tsc = nf->spin_tsc;
	/* Claim the slot: two processes on one slot would share its rings,
	 * each taking the other's packets (both single-consumer rings). */
	{
		int32_t owner = 0;

		if (!atomic_compare_exchange_strong(&nf->ctl->pid, &owner, (int32_t)getpid())) {
			SQ_LOG(ERR, NF, "NF slot %ld is already attached by pid %d\n", id,
			       (int)owner);
			ret = -EBUSY;
			goto out_unmap;
		}
	}
	/* Spawned by the manager: go when it goes, even if it is SIGKILLed.
	 * Its pid is what the manager said (SQUALL_MGR_PID, 0 in a pid
	 * namespace of our own) or the kernel said of the attach socket, never
	 * the region's copy, which any NF can rewrite; only an NF started by
	 * hand on a region path takes that copy, once. */
	if (nf->mgr_pid < 0)
		nf->mgr_pid = nf->hdr->mgr_pid;
	{
		bool child = nf->mgr_pid <= 0 || getppid() == nf->mgr_pid;
		uint64_t ns = (child ? LIVENESS_CHILD_NS : LIVENESS_CHECK_NS) +
			      (uint64_t)id * 7919 * 1000 * 1000 % LIVENESS_JITTER_NS;

		if (child)
			prctl(PR_SET_PDEATHSIG, SIGTERM);
		nf->liveness = (struct timespec){.tv_sec = (time_t)(ns / 1000000000ull),
						 .tv_nsec = (long)(ns % 1000000000ull)};
	}

	the_nf = nf;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	*out = nf;
	return argc - argc_left;

out_unmap:
	sq_region_unmap(nf->hdr);
out_free:
	free(nf);
	return ret;
}

int
sq_nf_set_pkt_handler(struct sq_nf *nf, sq_pkt_handler_fn fn, void *arg)
{
	if (fn == NULL)
		return -EINVAL;
	nf->pkt_fn = fn;
	nf->burst_fn = NULL;
	nf->handler_arg = arg;
	if (!nf->prefetch_set)
		nf->prefetch = SQ_PREFETCH_MBUF | SQ_PREFETCH_DATA;
	return 0;
}

int
sq_nf_set_burst_handler(struct sq_nf *nf, sq_burst_handler_fn fn, void *arg)
{
	if (fn == NULL)
		return -EINVAL;
	nf->burst_fn = fn;
	nf->pkt_fn = NULL;
	nf->handler_arg = arg;
	if (!nf->prefetch_set)
		nf->prefetch = SQ_PREFETCH_MBUF;
	return 0;
}

int
sq_nf_set_prefetch(struct sq_nf *nf, unsigned int what)
{
	if ((what & ~(unsigned int)(SQ_PREFETCH_MBUF | SQ_PREFETCH_DATA)) != 0)
		return -EINVAL;
	nf->prefetch = what;
	nf->prefetch_set = true;
	return 0;
}

int
sq_nf_clean_at_flow_end(struct sq_nf *nf)
{
	nf->clean_at_end = true;
	return 0;
}

int
sq_nf_set_state_cleaner(struct sq_nf *nf, sq_state_cleaner_fn fn, void *arg)
{
	nf->cleaner_fn = fn;
	nf->cleaner_arg = arg;
	return 0;
}

int
sq_nf_counter_register(struct sq_nf *nf, const char *name)
{
	int idx = nf->n_counters;

	if (idx >= SQ_NF_COUNTERS)
		return -ENOSPC;
	snprintf(nf->ctl->counter_names[idx], SQ_NAME_LEN, "%s", name);
	nf->n_counters++;
	return idx;
}

void
sq_nf_counter_add(struct sq_nf *nf, int idx, uint64_t n)
{
	if (idx >= 0 && idx < SQ_NF_COUNTERS)
		nf->ctl->counters[idx] += n;
}

int
sq_nf_set_msg_handler(struct sq_nf *nf, sq_msg_handler_fn fn, void *arg)
{
	if (fn == NULL)
		return -EINVAL;
	nf->msg_fn = fn;
	nf->msg_arg = arg;
	return 0;
}

bool
sq_nf_blocked(const struct sq_nf *nf)
{
	return nf->blocked;
}

/* Post on msg_out, then set our bit in the msg-ready bitmap (after the
 * head, as for tx-ready: the manager clears the bit before it reads). */
static int
msg_post(struct sq_nf *nf, uint32_t type, const void *data, uint32_t len)
{
	struct sq_msg *slot;

	if (nf->msg_out_head - atomic_load_explicit(&nf->ctl->msg_out_tail, memory_order_acquire) >=
	    SQ_MSG_SLOTS) {
		nf->ctl->msgs_unsent++;
		return -ENOBUFS;
	}
	slot = &nf->ctl->msg_out[nf->msg_out_head % SQ_MSG_SLOTS];
	slot->type = type;
	slot->len = len;
	if (len > 0)
		memcpy(slot->data, data, len);
	nf->msg_out_head++;
	atomic_store_explicit(&nf->ctl->msg_out_head, nf->msg_out_head, memory_order_release);
	atomic_fetch_or_explicit(&nf->msg_ready[nf->id / 64], 1ull << (nf->id % 64),
				 memory_order_seq_cst);
	return 0;
}

int
sq_nf_msg_send(struct sq_nf *nf, uint32_t type, const void *data, uint32_t len)
{
	if (type < SQ_MSG_USER || len > SQ_MSG_DATA_LEN || (len > 0 && data == NULL))
		return -EINVAL;
	return msg_post(nf, type, data, len);
}

static bool
msgs_waiting(const struct sq_nf *nf)
{
	return atomic_load_explicit(&nf->ctl->msg_in_head, memory_order_relaxed) != nf->msg_in_tail;
}

/* libsquall's part of a message, before the NF's handler sees it. */
static void
act_on(struct sq_nf *nf, const struct sq_msg *m)
{
	switch (m->type) {
	case SQ_MSG_BLOCK:
		nf->blocked = true;
		msg_post(nf, SQ_MSG_BLOCKED, NULL, 0);
		break;
	case SQ_MSG_RERUN:
		nf->blocked = false;
		msg_post(nf, SQ_MSG_RUNNING, NULL, 0);
		break;
	case SQ_MSG_STOP: nf->stop_local = 1; break;
	default: break;
	}
}

/* Between bursts: take what the manager sent (the manager is trusted; a
 * count beyond a ring is still not read past it). */
static void
take_msgs(struct sq_nf *nf)
{
	uint32_t head = atomic_load_explicit(&nf->ctl->msg_in_head, memory_order_acquire);

	if (head - nf->msg_in_tail > SQ_MSG_SLOTS)
		nf->msg_in_tail = head - SQ_MSG_SLOTS;
	while (nf->msg_in_tail != head) {
		struct sq_msg m = nf->ctl->msg_in[nf->msg_in_tail % SQ_MSG_SLOTS];

		nf->msg_in_tail++;
		atomic_store_explicit(&nf->ctl->msg_in_tail, nf->msg_in_tail, memory_order_release);
		nf->ctl->msgs_taken++;
		m.len = RTE_MIN(m.len, (uint32_t)SQ_MSG_DATA_LEN);
		act_on(nf, &m);
		if (nf->msg_fn != NULL)
			nf->msg_fn(nf, &m, nf->msg_arg);
	}
}

struct sq_nf_ctl *
sq_nf_ctl(struct sq_nf *nf)
{
	return nf->ctl;
}

struct sq_region_hdr *
sq_nf_region(struct sq_nf *nf)
{
	return nf->hdr;
}

void
sq_nf_stop(struct sq_nf *nf)
{
	nf->stop_local = 1;
}

static bool
nf_should_stop(const struct sq_nf *nf)
{
	/* Our own stop word, not the header's mgr_state: a word every NF shares
	 * would let one NF's stray write stop them all (the manager sets every
	 * NF's stop when it stops). */
	return nf->stop_local || atomic_load_explicit(&nf->ctl->stop, memory_order_relaxed);
}

/* Only off the hot path: a manager killed with SIGKILL cannot tell us. A
 * manager pid of 0: we run in a pid namespace of our own (an isolated NF),
 * where its pid means nothing; its end reaches us as our parent-death
 * signal. */
static bool
mgr_is_gone(const struct sq_nf *nf)
{
	return nf->mgr_pid > 0 && kill(nf->mgr_pid, 0) < 0 && errno == ESRCH;
}

/* A per-flow NF's flow ends with FIN both ways or a RST (the manager sees
 * the same packets). A SYN starts the next flow. @return true at the end. */
static bool
flow_closes(struct sq_nf *nf, const struct rte_mbuf *pkt)
{
	const struct rte_tcp_hdr *tcp;

	if ((pkt->packet_type & RTE_PTYPE_L4_MASK) != RTE_PTYPE_L4_TCP ||
	    pkt->data_len < pkt->l2_len + pkt->l3_len + sizeof(*tcp))
		return false;
	tcp = rte_pktmbuf_mtod_offset(pkt, const struct rte_tcp_hdr *, pkt->l2_len + pkt->l3_len);
	if ((tcp->tcp_flags & (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG)) == RTE_TCP_SYN_FLAG)
		nf->flow_fins = 0;
	if (tcp->tcp_flags & RTE_TCP_FIN_FLAG)
		nf->flow_fins++;
	return (tcp->tcp_flags & RTE_TCP_RST_FLAG) || nf->flow_fins == 2;
}

static void
clean_up_flow(struct sq_nf *nf)
{
	if (nf->cleaner_fn != NULL)
		nf->cleaner_fn(nf->cleaner_arg);
	nf->ctl->flows_cleaned++;
	nf->flow_fins = 0;
	nf->flow_dirty = false;
}

/* A per-flow NF's burst may end one flow and begin the next: the manager
 * hands an NF its next flow as soon as it saw the last one close (a lifo
 * pool with no linger), so both can share a burst. The handler must see
 * each flow's packets with that flow's state: cut the burst after a closing
 * packet and before another flow's first. A flow that starts while the last
 * one's state is still there (its close never reached us) is cleaned for
 * first. @return the packets of the first segment; *closed if it ends its
 * flow. */
static unsigned int
flow_segment(struct sq_nf *nf, struct rte_mbuf **pkts, unsigned int n, bool *closed)
{
	*closed = false;
	if ((sq_pkt_meta(pkts[0])->flags & SQ_META_FLOW_START) && nf->flow_dirty)
		clean_up_flow(nf);
	for (unsigned int i = 0; i < n; i++) {
		if (i > 0 && (sq_pkt_meta(pkts[i])->flags & SQ_META_FLOW_START))
			return i;
		if (flow_closes(nf, pkts[i]) && !nf->clean_at_end) {
			*closed = true;
			return i + 1;
		}
	}
	return n;
}

/* Packets ahead whose data a per-packet handler's loop prefetches. */
#define DATA_PREFETCH_AHEAD 4u

static void
run_segment(struct sq_nf *nf, struct rte_mbuf **pkts, unsigned int n)
{
	bool data = nf->prefetch & SQ_PREFETCH_DATA;
	unsigned int i;

	if (nf->burst_fn != NULL) {
		for (i = 0; i < n; i++) {
			if (data)
				rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));
			sq_pkt_meta(pkts[i])->verdict = SQ_NEXT;
		}
		nf->burst_fn(pkts, (uint16_t)n, nf->handler_arg);
	} else {
		/* The headers a handler reads were last written on the manager's
		 * core (or the previous hop's): fetch a few packets ahead, as
		 * DPDK's l3fwd does, so each miss overlaps another's handling. */
		for (i = 0; data && i < RTE_MIN(n, DATA_PREFETCH_AHEAD); i++)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void *));
		for (i = 0; i < n; i++) {
			if (data && i + DATA_PREFETCH_AHEAD < n)
				rte_prefetch0(
					rte_pktmbuf_mtod(pkts[i + DATA_PREFETCH_AHEAD], void *));
			sq_pkt_meta(pkts[i])->verdict = nf->pkt_fn(pkts[i], nf->handler_arg);
		}
	}
	for (i = 0; i < n; i++) {
		struct sq_pkt_meta *meta = sq_pkt_meta(pkts[i]);

		meta->nf_visits++;
		if (unlikely(meta->verdict >> 16 == SQ_VERDICT_DROP))
			nf->ctl->drop_verdicts++;
	}
}

static void
run_handler(struct sq_nf *nf, struct rte_mbuf **pkts, unsigned int n)
{
	uint64_t start_tsc = rte_rdtsc();
	unsigned int i;

	/* For the manager's wake-latency histogram: rx to the first NF's handler. */
	for (i = 0; i < n; i++)
		if (sq_pkt_meta(pkts[i])->hop == 0)
			sq_pkt_meta(pkts[i])->nf0_tsc = start_tsc;
	if (!nf->ctl->flow_track) {
		run_segment(nf, pkts, n);
		nf->ctl->handler_tsc += rte_rdtsc() - start_tsc;
		return;
	}
	while (n > 0) {
		bool closed;
		unsigned int k = flow_segment(nf, pkts, n, &closed);

		run_segment(nf, pkts, k);
		nf->flow_dirty = true;
		/* Before the packets go back: once the manager has them all, it
		 * must see the cleanup done (release order: this store, then the
		 * ring's). */
		if (closed) {
			clean_up_flow(nf);
			atomic_fetch_add_explicit(&nf->ctl->closes_cleaned, 1,
						  memory_order_release);
		}
		pkts += k;
		n -= k;
	}
	nf->ctl->handler_tsc += rte_rdtsc() - start_tsc;
}

/* The manager, idle, may sleep on its word until an NF hands packets back
 * (mgr/idle.h). Read after our doorbell (the fetch_or before is a full
 * fence; the manager publishes the word, then reads the doorbells); the one
 * NF that clears it wakes the manager. An isolated NF's header is its
 * private region's, where the word stays 0. */
static void
wake_mgr_if_asleep(struct sq_nf *nf)
{
	_Atomic uint32_t *word = &nf->hdr->mgr_wait.asleep;

	if (unlikely(atomic_load_explicit(word, memory_order_seq_cst) != 0) &&
	    atomic_exchange_explicit(word, 0, memory_order_relaxed) != 0)
		syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* The next hop of our lane was asleep: wake it as the manager would
 * (ASLEEP -> WAKING by compare-and-swap: one FUTEX_WAKE per sleep, whoever
 * sends it), counted among the NFs woken on its core. Our enqueue came
 * first, then a full fence: the NF publishes ASLEEP, then looks at its rings. */
static void
wake_next(struct sq_nf *nf)
{
	struct sq_nf_ctl *next = nf->next_ctl;
	uint32_t expected = SQ_NF_ASLEEP;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&next->state, memory_order_relaxed) != SQ_NF_ASLEEP ||
	    !atomic_compare_exchange_strong(&next->state, &expected, SQ_NF_WAKING))
		return;
	atomic_fetch_add_explicit(&nf->hdr->woken[nf->next_core_group].n, 1, memory_order_relaxed);
	nf->ctl->direct_wakes++;
	syscall(SYS_futex, &next->state, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* A full ring of the next hop: let it run (it shares our core, most
 * likely) a few times before the rest go the manager's way. */
#define DIRECT_FULL_YIELDS 4

/* A direct chain (mgr/lane.h): NEXT packets go straight onto the next hop's
 * ring, and it is woken when our burst ends (a chain-aware wake: it would
 * get nothing more from us before our next burst). The rest, and what its
 * ring has no room for, go back to the manager. Compacts @p pkts to those.
 * @return how many are left for the manager. */
static unsigned int
hand_on(struct sq_nf *nf, struct rte_mbuf **pkts, unsigned int n)
{
	struct rte_mbuf *next[SQ_NF_BURST_MAX];
	unsigned int n_next = 0, left = 0, sent = 0;

	for (unsigned int i = 0; i < n; i++) {
		struct sq_pkt_meta *meta = sq_pkt_meta(pkts[i]);

		if (meta->verdict >> 16 == SQ_VERDICT_NEXT) {
			meta->hop++; /* what the manager's verdict_next would do */
			next[n_next++] = pkts[i];
		} else {
			pkts[left++] = pkts[i];
		}
	}
	if (n_next == 0)
		return left;
	for (int tries = 0;; tries++) {
		sent += rte_ring_sp_enqueue_burst(nf->direct_next, (void **)(next + sent),
						  n_next - sent, NULL);
		if (sent == n_next || tries == DIRECT_FULL_YIELDS)
			break;
		wake_next(nf);
		sched_yield();
	}
	nf->ctl->direct_tx_pkts += sent;
	if (sent > 0)
		wake_next(nf);
	if (unlikely(sent < n_next)) {
		nf->ctl->direct_full_pkts += n_next - sent;
		/* (the manager takes hop as we set it: it steers them on) */
		for (unsigned int i = sent; i < n_next; i++)
			sq_pkt_meta(next[i])->hop--;
		memcpy(pkts + left, next + sent, (n_next - sent) * sizeof(*pkts));
		left += n_next - sent;
	}
	return left;
}

/* Hand every packet back. The tx ring holds as many slots as the rx ring, and
 * the manager drains it every round, so a full ring means the manager is
 * behind: wait for it rather than drop, since only the manager frees mbufs. */
static void
return_pkts(struct sq_nf *nf, struct rte_mbuf **pkts, unsigned int n)
{
	unsigned int sent = 0;

	for (;;) {
		sent += rte_ring_sp_enqueue_burst(nf->tx, (void **)(pkts + sent), n - sent, NULL);
		if (likely(sent == n))
			break;
		nf->ctl->tx_full_spins++;
		if (atomic_load_explicit(&nf->ctl->stop, memory_order_relaxed) ||
		    ((nf->ctl->tx_full_spins & 0xffff) == 0 && mgr_is_gone(nf)))
			break;
		rte_pause();
	}
	nf->ctl->tx_pkts += sent;
	/* After the enqueue, and a locked instruction (a full fence): the
	 * manager clears our bit before it drains, so either it sees these
	 * packets now or our bit again next round. */
	if (likely(sent > 0)) {
		atomic_fetch_or_explicit(&nf->tx_ready[nf->id / 64], 1ull << (nf->id % 64),
					 memory_order_seq_cst);
		wake_mgr_if_asleep(nf);
	}
}

/* One burst: dequeue, handle, return. @return packets handled. */
static unsigned int
nf_poll_once(struct sq_nf *nf)
{
	struct rte_mbuf *pkts[SQ_NF_BURST_MAX];
	unsigned int n, m;

	n = rte_ring_sc_dequeue_burst(nf->rx, (void **)pkts, nf->ctl->burst_max, NULL);
	if (nf->direct_rx != NULL && n < nf->ctl->burst_max) {
		m = rte_ring_sc_dequeue_burst(nf->direct_rx, (void **)(pkts + n),
					      nf->ctl->burst_max - n, NULL);
		nf->ctl->direct_rx_pkts += m;
		n += m;
	}
	if (n == 0)
		return 0;
	nf->ctl->rx_pkts += n;
	nf->ctl->bursts++;
	/* The manager wrote each mbuf header and metadata on its own core: ask
	 * for all the lines at once rather than miss on them one by one. The
	 * header's second line holds l2_len and l3_len (sq_pkt_ipv4()); a
	 * handler that reads neither line (SQ_PREFETCH_MBUF unset) is spared
	 * both: ten hops on one core share its caches and its time. */
	if (nf->prefetch & SQ_PREFETCH_MBUF) {
		for (unsigned int i = 0; i < n; i++) {
			rte_mbuf_prefetch_part1(pkts[i]);
			rte_mbuf_prefetch_part2(pkts[i]);
		}
	}
	for (unsigned int i = 0; i < n; i++)
		rte_prefetch0(sq_pkt_meta(pkts[i]));
	run_handler(nf, pkts, n);
	m = n;
	if (nf->direct_next != NULL &&
	    !atomic_load_explicit(&nf->ctl->direct_off, memory_order_relaxed))
		m = hand_on(nf, pkts, n);
	if (m > 0)
		return_pkts(nf, pkts, m);
	return n;
}

/* Packets on our ring, or on our lane's (a direct chain's previous hop). */
static bool
has_pkts(const struct sq_nf *nf)
{
	return rte_ring_count(nf->rx) > 0 ||
	       (nf->direct_rx != NULL && rte_ring_count(nf->direct_rx) > 0);
}

static long
futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *timeout)
{
	/* Not FUTEX_PRIVATE: the word is in a MAP_SHARED file the manager maps too. */
	return syscall(SYS_futex, word, FUTEX_WAIT, val, timeout, NULL, 0);
}

static void
count_awake(struct sq_nf *nf, int32_t delta)
{
	atomic_fetch_add_explicit(&nf->hdr->awake[nf->core_group].n, delta, memory_order_relaxed);
}

/* Other NFs of our core awake: worth a yield while we spin. */
static bool
others_awake(const struct sq_nf *nf)
{
	return atomic_load_explicit(&nf->hdr->awake[nf->core_group].n, memory_order_relaxed) > 1;
}

/* The manager shares our core and is awake: it has work of its own there
 * (polling, transmitting, and on veth ports the hosts' network stacks,
 * which the kernel runs inside its transmit calls). */
static bool
mgr_awake_here(const struct sq_nf *nf)
{
	return atomic_load_explicit(&nf->hdr->awake[nf->core_group].mgr, memory_order_relaxed) != 0;
}

/* NFs the manager woke on our core that have not run yet. */
static bool
others_woken(const struct sq_nf *nf)
{
	return atomic_load_explicit(&nf->hdr->woken[nf->core_group].n, memory_order_relaxed) > 0;
}

/* Spin on an empty ring before sleeping: a cross-core wake costs ~30 us here
 * and a spin handoff ~0.1 us (DESIGN §10), so a short spin saves most wakes.
 * But a spinner must not hold a core that others need: while another task
 * of the core is awake (an NF the manager or a lane woke, one that runs or
 * spins, or the manager itself when the NFs share its core), every turn of
 * the spin is a sched_yield, so the spin costs them a yield, not a slice.
 * Those with work run at once, one after another; a hop of a chain hands
 * its burst on and gets the core back after the hops behind it, still
 * awake, with no futex wake and sleep per hop per burst (10 NFs of a direct
 * chain on one core at 0.5 Mpps: p50 52 us, where sleeping whenever another
 * NF had been woken gave 164 us and lost packets at 1.5 Mpps). Alone on the
 * core it spins without yielding: a yield would hand the core to other
 * programs for a slice, and an awake NF is not woken back.
 * The time a yield gave the awake manager of our core (manager.nf_core its
 * own) is not spin: that core is busy with the manager's work, not idle, so
 * the NF stays awake across it (up to SPIN_STRETCH_MAX spins) rather than
 * sleep and be woken at the next burst. Under real TCP through a 3-NF
 * chain there (tcp_peers), this took the hops from ~6,000 futex sleeps a
 * second each to under 100.
 * The spin's length adapts (adapt_spin): full while packets come back within
 * it, shrinking towards none when they do not, so an NF under a trickle
 * costs CPU in proportion to its packets, not to its wakes. */
static bool
spin_for_pkts(struct sq_nf *nf)
{
	uint64_t start_tsc = rte_rdtsc();
	uint64_t end_tsc = start_tsc + nf->spin_cur_tsc;
	uint64_t cap_tsc = start_tsc + nf->spin_cur_tsc * SPIN_STRETCH_MAX;

	do {
		if (has_pkts(nf))
			return true;
		if (others_awake(nf) || others_woken(nf)) {
			uint64_t yield_tsc = rte_rdtsc();

			sched_yield();
			nf->ctl->spin_yields++;
			if (mgr_awake_here(nf))
				end_tsc = RTE_MIN(end_tsc + (rte_rdtsc() - yield_tsc), cap_tsc);
		} else {
			rte_pause();
		}
	} while (rte_rdtsc() < end_tsc);
	return false;
}

/* After a sleep of slept_tsc: had a full spin covered it, spin fully next
 * time (doubling back up); else halve the spin. */
static void
adapt_spin(struct sq_nf *nf, uint64_t slept_tsc)
{
	if (slept_tsc < nf->spin_tsc)
		nf->spin_cur_tsc =
			RTE_MIN(nf->spin_tsc, RTE_MAX(2 * nf->spin_cur_tsc, nf->spin_tsc / 8));
	else
		nf->spin_cur_tsc /= 2;
}

/* AWAKE again. If the manager woke us, it counted us among the NFs woken
 * on this core that wait to run: we run now. */
static void
woke_up(struct sq_nf *nf)
{
	if (atomic_exchange(&nf->ctl->state, SQ_NF_AWAKE) == SQ_NF_WAKING)
		atomic_fetch_sub_explicit(&nf->hdr->woken[nf->core_group].n, 1,
					  memory_order_relaxed);
}

/* Sleep until the manager wakes us (DESIGN §5). Every ASLEEP we publish ends
 * in exactly one of: our own CAS back to AWAKE (a cancel, counted), or the
 * manager's CAS to WAKING followed by its one FUTEX_WAKE. So sleeps == wakes
 * + cancels (+ 1 while asleep), which the tests check. */
static void
nf_sleep(struct sq_nf *nf)
{
	uint32_t expected = SQ_NF_ASLEEP;

	/* Publish ASLEEP before the last emptiness check: a packet enqueued between
	 * the check and the store would otherwise wait with nobody to wake us. The
	 * manager does the mirror image: enqueue, full fence, read state. */
	atomic_store_explicit(&nf->ctl->state, SQ_NF_ASLEEP, memory_order_seq_cst);
	nf->ctl->sleeps++;
	if (has_pkts(nf) || nf_should_stop(nf) || msgs_waiting(nf)) {
		/* If the CAS fails the manager already chose to wake us; its one
		 * FUTEX_WAKE finds no waiter, which is harmless. */
		if (atomic_compare_exchange_strong(&nf->ctl->state, &expected, SQ_NF_AWAKE))
			nf->ctl->sleep_cancels++;
		else
			woke_up(nf); /* the manager's wake came first */
		return;
	}
	count_awake(nf, -1);
	while (atomic_load(&nf->ctl->state) == SQ_NF_ASLEEP) {
		if (futex_wait(&nf->ctl->state, SQ_NF_ASLEEP, &nf->liveness) < 0 &&
		    errno == ETIMEDOUT && mgr_is_gone(nf))
			nf->stop_local = 1;
		if (nf_should_stop(nf))
			break;
	}
	count_awake(nf, 1);
	woke_up(nf);
}

/* The manager ended this NF's flow: everything of it is handled (our queue
 * is empty), so clean the state up and say so; the manager then returns the
 * NF to its service's idle pool for the next flow. */
static void
end_flow_if_asked(struct sq_nf *nf)
{
	uint32_t gen = atomic_load_explicit(&nf->ctl->flow_gen, memory_order_acquire);

	if (gen == atomic_load_explicit(&nf->ctl->flow_gen_done, memory_order_relaxed))
		return;
	clean_up_flow(nf);
	atomic_store_explicit(&nf->ctl->flow_gen_done, gen, memory_order_release);
}

static void
nf_loop(struct sq_nf *nf)
{
	bool poll_mode = nf->ctl->mode == SQ_NF_MODE_POLL;
	uint32_t budget = nf->ctl->batch_budget_pkts;
	uint32_t done_pkts = 0;
	uint32_t empty_polls = 0;
	uint64_t sleep_tsc;

	while (!nf_should_stop(nf)) {
		unsigned int n;

		if (unlikely(msgs_waiting(nf))) {
			take_msgs(nf);
			continue;
		}
		n = nf_poll_once(nf);

		if (n > 0) {
			/* Share the core: after a batch budget let other NFs run. The
			 * count runs until the NF gives the core up, not until its ring
			 * is empty once: an NF whose spin keeps catching packets would
			 * otherwise never reach its budget. */
			done_pkts += n;
			if (budget != 0 && done_pkts >= budget && !poll_mode) {
				done_pkts = 0;
				nf->ctl->budget_yields++;
				sched_yield();
			}
			continue;
		}
		/* A blocked instance sleeps whenever it is idle, even in poll
		 * mode: the flows it still has wake it like a sleeping NF's. */
		if (poll_mode && !nf->blocked) {
			end_flow_if_asked(nf);
			rte_pause();
			if (++empty_polls % POLL_CHECK_EVERY == 0 && mgr_is_gone(nf))
				nf->stop_local = 1;
			continue;
		}
		end_flow_if_asked(nf);
		/* A real-time NF does not spin: its sched_yield gives the core
		 * only to NFs of its own priority, so a spin would keep every
		 * lower one (the earlier hops, under chain_priority) off it. */
		if (!nf->blocked &&
		    !atomic_load_explicit(&nf->ctl->realtime, memory_order_relaxed) &&
		    spin_for_pkts(nf))
			continue;
		done_pkts = 0;
		sleep_tsc = rte_rdtsc();
		nf_sleep(nf);
		adapt_spin(nf, rte_rdtsc() - sleep_tsc);
	}
}

int
sq_nf_run(struct sq_nf *nf)
{
	if (nf->pkt_fn == NULL && nf->burst_fn == NULL) {
		SQ_LOG(ERR, NF, "sq_nf_run: no handler set\n");
		return -EINVAL;
	}
	atomic_store(&nf->ctl->state, SQ_NF_AWAKE);
	count_awake(nf, 1);
	SQ_LOG(INFO, NF, "%s#%u attached (pid %d)\n", nf->ctl->service, nf->ctl->instance,
	       getpid());
	nf_loop(nf);
	count_awake(nf, -1);
	if (nf->cleaner_fn != NULL)
		nf->cleaner_fn(nf->cleaner_arg);
	atomic_store(&nf->ctl->state, SQ_NF_EXITED);
	sq_region_unmap(nf->hdr);
	the_nf = NULL;
	free(nf);
	return 0;
}
