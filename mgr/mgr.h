/* SPDX-License-Identifier: BSD-3-Clause
 * squall-mgr: the state every role shares, and each role's entry points.
 */
#ifndef SQUALL_MGR_H
#define SQUALL_MGR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include <squall/pkt.h>
#include <squall/region.h>

#include "config.h"
#include "director.h"
#include "drop.h"
#include "latency.h"
#include "carve.h"
#include "nflog.h"
#include "poolaudit.h"
#include "ready.h"
#include "uids.h"

extern int sq_logtype_mgr;
#define MGR_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, sq_logtype_mgr, "squall-mgr: " fmt, ##__VA_ARGS__)

/* A packet that went through more NF hops than this is looping (TO verdicts). */
#define SQ_MAX_VISITS 64

/* The drop causes (SQ_FOREACH_DROP) and SQ_MAX_FRAME_BYTES: drop.h. */

/* Counters of one role on one lcore: written by that role only. */
struct role_stats {
	uint64_t rx_pkts;
	uint64_t tx_pkts;
	uint64_t drops[SQ_DROP_MAX];
} __rte_cache_aligned;

/* Packets a role has decided to send to one NF. They go as one burst at the
 * end of the role's round (one ring operation and one wake check per NF per
 * round), or, while the NF sleeps below its wake threshold, they stay here
 * across rounds until the threshold or the timeout: then a sleeping NF costs
 * the manager no cross-core traffic at all per packet (DESIGN §5). */
#define SQ_STAGE_MAX 64
struct nf_stage {
	uint16_t n;
	uint16_t n_counted;        /* of n, already counted in held_pkts */
	bool listed;               /* on the role's touched list */
	bool urgent;               /* a FIN or RST is staged: wake at once */
	bool pending;              /* on the role's pending queue (pending_since valid) */
	_Atomic uint64_t enq_pkts; /* sent to this NF by this role, ever (tx role reads) */
	uint64_t ring_full_pkts;   /* dropped by this role: the NF's rx ring was full */
	uint64_t held_pkts;        /* packets kept here below the threshold, ever */
	uint64_t pending_since;    /* TSC the NF began to wait for a wake */
	uint64_t pending_sleeps;   /* the NF's sleep count then: a new sleep restarts the clock */
	struct rte_mbuf *pkts[SQ_STAGE_MAX];
};

/* NFs that wait for a wake by timeout, oldest first; one queue per service,
 * since a service's NFs share a timeout and so expire in the order they
 * started to wait. An entry whose NF was woken meanwhile is recognised as
 * stale when it reaches the head, or dropped when the queue is full (at most
 * one entry per NF is live, and the queue has room for two per NF). */
/* An NF waiting for a wake by timeout, since its first waiting packet. Its
 * deadline is since + the timeout at the time of the scan: the NFs of a
 * service share one timeout, so a queue in push order is in deadline order
 * even when the timeout changes. */
struct pending_entry {
	uint32_t nf_id;
	uint64_t since;
};
struct pending_queue {
	struct pending_entry *e;
	uint32_t cap; /* a power of two, twice the service's NFs (mgr_wakeup_queues_init) */
	uint32_t head, tail;
};

struct port_stage {
	uint16_t n;
	struct rte_mbuf *pkts[SQ_NF_BURST_MAX];
};

/* What one role (rx or tx) owns: its counters, its staging, its touched list. */
struct role_ctx {
	struct role_stats stats;
	struct nf_stage *stages; /* one per NF */
	uint32_t *touched;       /* NF ids given packets this round */
	uint32_t n_touched;
	struct pending_queue *pending; /* one per service */
	uint16_t n_queues;
	uint32_t n_pending; /* entries in all queues, stale ones included */
	struct port_stage ports[SQ_MAX_PORTS];
	/* What the stages' owner (steer.c, mgr_role_init) does with an NF's
	 * held batch when the wakeup role's timer finds it due: give it to the
	 * NF, or drop it (the NF died). Called through here so that the wakeup
	 * role, which steer asks when to give, does not call back up into it. */
	void (*flush_nf)(struct mgr *mgr, struct role_ctx *role, uint32_t nf_id);
	void (*drop_held)(struct mgr *mgr, struct role_ctx *role, uint32_t nf_id,
			  enum sq_drop cause);
};

#define MGR_PORT_HOPS_MAX 8

struct mgr_port {
	char name[SQ_CFG_NAME_LEN];
	uint16_t port_id; /* DPDK's */
	uint16_t max_rx_pkt_len;
	char devargs[SQ_CFG_DEVARGS_LEN]; /* the alternative that probed */
	int rx_sock_fd;     /* the socket its PMD reads (af_xdp, af_packet), or -1 (ports.c) */
	int rx_sock_domain; /* AF_XDP, AF_PACKET; 0: none */
	/* af_packet, af_xdp: the kernel's drops of its rings (mgr_port_kernel_drops) */
	_Atomic uint64_t kernel_drops;
	/* written by rx: */
	uint64_t rx_pkts __rte_cache_aligned;
	uint64_t rx_bytes;
	uint64_t rx_held;    /* rounds not read: a first hop had no room (rx_backpressure) */
	uint64_t gen_missed; /* its generator's, held past rx_desc: in rx_eth_missed */
	/* rx_backpressure: the services whose first hop this port's rules feed,
	 * found again when the config changes (rx.c) */
	const struct sq_config *hops_cfg;
	uint16_t hops[MGR_PORT_HOPS_MAX];
	uint8_t n_hops;
	bool hops_unknown; /* a per-flow pool or too many: never held */
	/* written by tx: */
	uint64_t tx_pkts __rte_cache_aligned;
	uint64_t tx_bytes;
	bool closed;
	struct rte_eth_stats eth_final; /* DPDK's counters, kept at close */
	uint64_t last_rx_pkts;          /* stats role: for rates */
	uint64_t last_tx_pkts;
};

/* A sleeping NF's wake state (DESIGN §5): the manager decides, the NF sleeps.
 * Written by the roles that enqueue and by telemetry (policy changes); a
 * torn update only skews a heuristic. */
struct nf_wake {
	uint32_t policy; /* enum sq_wake_policy */
	uint32_t thresh_pkts;
	uint64_t timeout_tsc;
	uint32_t min_pkts, max_pkts, t_lat_pkts;
	uint64_t by_thresh;  /* wakes sent because the queue reached the threshold */
	uint64_t by_timeout; /* ... because the oldest packet waited too long */
	uint64_t by_urgent;  /* ... because a FIN or RST waited */
};

struct mgr_nf {
	uint32_t id;
	uint16_t service;
	uint16_t instance;
	struct sq_nf_ctl *ctl; /* in the region the NF maps */
	struct rte_ring *rx;   /* manager -> NF */
	struct rte_ring *tx;   /* NF -> manager */
	/* The region the NF maps: the shared one, or its private one when its
	 * service is isolated (iso: its copies in and out, isolate.h). */
	struct sq_region_hdr *hdr;
	struct mgr_iso *iso;
	pid_t pid;
	_Atomic bool live;     /* takes packets; cleared when the process dies */
	_Atomic bool active;   /* on the tx role's list: may have packets to return */
	_Atomic bool retiring; /* control role: stopping for good (a service removed or shrunk) */
	_Atomic bool reaped;   /* main lcore: gone and what it held reclaimed; slot reusable */
	/* control role: its slot is being set up (ctl and rings written anew,
	 * a reused id's too); the region check leaves it alone meanwhile */
	_Atomic bool setting_up;
	/* scaler: takes no new flow (scaled in, or not started yet); the
	 * flows it has stay with it until they end (mgr/scaler.c) */
	_Atomic bool blocked;
	_Atomic uint32_t flows; /* director: flows pinned to it (rss, round-robin) */
	/* started by the scaler and not running its loop yet: a death now is
	 * the scaler's to retry (with its backoff), not supervision's */
	bool scale_starting;
	uint64_t deq_pkts;       /* tx role: taken back from the NF (or reclaimed) */
	uint32_t sched_priority; /* SCHED_RR priority applied; 0 = normal scheduler */
	bool sched_batch;        /* under the normal scheduler: SCHED_BATCH applied */
	uint32_t closes_taken;   /* director: NF-side cleanups already accounted */
	int32_t nice;            /* nice applied under the normal scheduler */
	struct nf_wake wake;
	/* The manager's copies of what it also wrote into the NF's ctl (which
	 * the NF can rewrite): used as indexes and names, never read back. */
	uint32_t core_group;
	char name[SQ_NAME_LEN]; /* its service's: kept after the service is removed */
	uint32_t ring_slots;    /* its shared rings' size, our record; 0: none */
	uint32_t rx_mask;       /* the rings' masks, checked before each burst */
	uint32_t tx_mask;
	uint32_t tx_cons; /* where our dequeues of the tx ring are */
	uint32_t rx_prod; /* where our enqueues onto the rx ring are */
	/* rx's producers, one at a time (when rx runs on its own lcore, both
	 * roles steer to NFs): the manager's enqueue is single-producer */
	rte_spinlock_t rx_lock;
	bool ring_broken;         /* its rings made no sense: killed, never drained */
	uint64_t bad_descs;       /* descriptors it handed back that were no mbuf it held */
	uid_t uid;                /* what its process runs as (0: root, by the config) */
	uint64_t start_tsc;       /* spawn time, for start-to-ready */
	struct ready_clock ready; /* the time it had to get ready (ready.h) */
	uint64_t ready_tsc;
	/* Supervision (nfs.c, control lcore; telemetry reads). */
	uint32_t restarts;           /* times started again after it died */
	uint32_t restarts_recovered; /* of those, new instances that took a packet */
	uint32_t sup_state; /* enum in nfs.c: not supervised, waiting, starting, first packet */
	uint32_t window_restarts; /* restarts since window_tsc */
	uint32_t reclaim_cause;   /* enum sq_drop: for the held-packet scan */
	bool reclaim_pending;     /* held packets to find by the owner scan */
	bool gave_up;             /* crash loop: not restarted again */
	bool sup_listed;          /* on the supervisor's list */
	bool wd_killed;           /* the watchdog sent the SIGKILL */
	uint32_t watchdog_kills;  /* times the watchdog killed it */
	uint32_t max_outstanding; /* its service's max_outstanding_pkts */
	uint64_t wd_progress;     /* watchdog: rx + tx packets at its last look */
	uint64_t wd_since_tsc;    /* ... when they last changed */
	uint64_t wd_ticks;        /* its CPU ticks at the watchdog's last /proc look */
	uint64_t window_tsc;
	uint64_t died_tsc;       /* reaped */
	uint64_t restart_at_tsc; /* start again then */
	uint64_t rx_base;        /* ctl->rx_pkts when it died */
	uint64_t restart_us;     /* last: reaped to the first packet of the new instance */
	/* A direct chain's lane (mgr/lane.h): its hop-0 NF, which owns every
	 * packet given to the lane; the next hop's NF; the ring the previous
	 * hop's NF fills. SQ_NF_NONE / NULL: in no lane. */
	uint32_t lane_leader;
	uint32_t lane_next;
	uint32_t lane_prev;
	struct rte_ring *direct_rx;
	uint32_t direct_slots; /* direct_rx's size, our record */
	/* nfs.c: gone, and waiting for the rest of its lane to go too (its
	 * packets are reclaimed, and it is restarted, with the last of them) */
	bool lane_wait;
	bool lane_failure;     /* ... and it failed (for the restart policy) */
	uint32_t direct_holds; /* captures that need its NEXT packets to go by the manager */
	uint32_t lane_cause;   /* enum sq_drop of its reclaim */
	char exit_reason[32];  /* "exit 3", "signal 9 (KILL)", "watchdog"; "" if never died */
};

struct mgr_service {
	uint32_t first_nf;   /* NFs of a service are contiguous ids */
	uint32_t n_nfs;      /* the instances that take packets: first_nf.. */
	uint32_t cap_nfs;    /* ids reserved: n_nfs may grow to it (control role) */
	_Atomic bool failed; /* crash loop: its packets are dropped as service_failed */
	/* scaler: moves when an instance is blocked or unblocked, so the
	 * director rebuilds the set new flows are spread over */
	_Atomic uint32_t scale_gen;
	/* Its instances are a per-flow pool (the director's, which sets this
	 * with the pool): the director starts and retires them, and one that
	 * dies is not restarted. */
	bool pooled;
	/* its NFs' cgroup when it has limits (nfs.c): made and changed under
	 * the control lock, read by the NFs' starts */
	struct mgr_cgroup *_Atomic cgroup;
};

struct mgr_chain {
	uint64_t rx_pkts;                     /* rx role: entered the chain */
	uint64_t tx_pkts __rte_cache_aligned; /* tx role: left it at its egress */
	uint64_t visits_mismatch; /* left with nf_visits != hops: a hop skipped or doubled */
	struct lat_hist lat;      /* tx role: rx-to-tx time of packets leaving the chain */
	struct lat_hist to_nf;    /* tx role: rx to the first NF's handler (wake latency) */
};

/* The adaptive policy's wake budget, per core group (mgr_wakeup_tune). */
struct core_wakes {
	_Atomic uint64_t wakes;         /* adaptive NFs woken by threshold or timeout */
	_Atomic uint64_t timeout_wakes; /* ... by timeout */
	uint64_t window_wakes;          /* wakes at the window's start */
	uint64_t window_timeout_wakes;
	uint64_t window_start_tsc;
	_Atomic uint64_t floor_tsc;  /* adaptive timeouts are at least this */
	_Atomic uint64_t rate_per_s; /* wakes per second in the last window */
};

/* Region state an NF rewrote, found and repaired by the manager: the key
 * in stats "region_corrupt". */
#define MGR_FOREACH_CORRUPT(X)          \
	X(TX_READY_OFF, "tx_ready_off") \
	X(HEADER, "header")             \
	X(MGR_STATE, "mgr_state")       \
	X(CORE_GROUP, "core_group")     \
	X(SERVICE, "service")           \
	X(STOP, "stop")                 \
	X(RING, "ring")                 \
	X(DESCRIPTOR, "descriptor")
#define MGR_CORRUPT_ENUM(e, k) MGR_CORRUPT_##e,
enum mgr_corrupt { MGR_FOREACH_CORRUPT(MGR_CORRUPT_ENUM) MGR_CORRUPT_MAX };
extern const char *const mgr_corrupt_keys[MGR_CORRUPT_MAX];

struct mgr {
	struct sq_config *cfg;
	struct sq_region_hdr *region;
	char region_path[SQ_CFG_PATH_LEN]; /* a symlink to /proc/<pid>/fd/<region_fd> */
	int region_fd;                     /* open while region_path is set */
	/* NFs' stdin (/dev/null), their stdout and stderr (nflog.h), and their
	 * uids (uids.h: held while the manager runs as root) */
	int devnull_fd;
	/* numbers kept (open on /dev/null) for an NF's log pipe and region
	 * while it starts: low, as spawn.c wants them (spawn_fd_slot) */
	int spawn_fds[2];
	struct mgr_nflog nflog;
	struct mgr_uids uids;
	/* The manager's own copies of header fields an NF can rewrite (region.c
	 * checks the region against them, off the hot path). */
	_Atomic uint64_t *tx_ready;  /* the tx-ready bitmap */
	_Atomic uint64_t *msg_ready; /* the msg-ready bitmap, right after it */
	uint64_t tx_ready_off;
	uint32_t mgr_state;
	/* The header as the manager wrote it, from the start on (hdr_sealed):
	 * its geometry, pid, name and port names, restored where an NF wrote. */
	struct sq_region_hdr hdr_own;
	bool hdr_sealed;
	uint32_t region_check_next;               /* the next NF whose ctl the check reads */
	uint64_t region_corrupt[MGR_CORRUPT_MAX]; /* rewrites found, by field */
	struct rte_mempool *pool;
	/* the region past its header and NF tables: the mbufs' memory and the
	 * NF rings, carved with the records in our memory (carve.h) */
	struct carve carve;
	size_t region_page_bytes;

	struct mgr_port ports[SQ_MAX_PORTS];
	uint16_t n_ports;
	struct mgr_nf *nfs;
	uint32_t n_nfs;
	struct mgr_service services[SQ_MAX_SERVICES];
	struct mgr_chain chains[SQ_MAX_CHAINS];

	struct role_ctx rx;
	struct role_ctx tx;
	/* tx role: the NFs that hold packets, so a round costs O(busy NFs), not
	 * O(all NFs); other roles hand newly busy NFs over through activations. */
	uint32_t *active;
	uint32_t n_active;
	uint64_t *tx_ready_seen; /* this round's copy of the region's tx-ready bitmap */
	uint64_t *tx_more;       /* ours: NFs whose last drain took a whole burst */
	size_t n_tx_ready_words;
	/* NFs of isolated services (a bit per id, as tx_ready): their doorbells
	 * are in their private regions, forwarded into the shared bitmaps. */
	_Atomic uint64_t *iso_bits;
	uintptr_t iso_next_addr; /* where the next private region goes */
	uint32_t n_iso;          /* slots with a private region */
	/* Private regions of slots made again for another service while
	 * running: a role may still read one this round (the tx role's
	 * doorbell sweep), so they stay mapped until the manager stops. */
	struct mgr_iso *iso_retired;
	/* the attach socket (NFs started by hand), main lcore's; NULL: none */
	struct mgr_attach *attach;
	/* cgroups of services removed while running: an NF start may still
	 * read one; closed (and their directories removed) at the stop */
	struct mgr_cgroup **cg_retired;
	uint32_t n_cg_retired;
	uint32_t iso_sweep; /* tx role: the next NF whose msg doorbell it reads */
	uint32_t iso_swept;
	/* A bit per NF of a direct chain's lane that hands on to a next hop
	 * (lane.h): while it is on the list the tx role looks at the rings of
	 * the hops after it, which may hold what it was given (a capture at a
	 * hop makes the manager give packets to a hop inside the lane) */
	uint64_t *lane_bits;
	struct rte_ring *activations;
	/* wakeup -> director: ids of NFs just woken (the director's own count
	 * of NFs woken and not yet running, which the NFs' shared one, in the
	 * region, cannot raise: director.c backlog_full) */
	struct rte_ring *woken_q;
	struct director *dir; /* flow table and idle pools */
	/* The director's answers to the tx role about a packet's flow (its
	 * tx_flow_nf and tx_flow_rekey), set by mgr_director_init:
	 * asked through here because the director stands above tx, starting
	 * and retiring NFs that drain through it. */
	struct mgr_nf *(*flow_nf)(struct mgr *mgr, uint32_t flow_id, uint16_t hop);
	void (*flow_rekey)(struct mgr *mgr, struct rte_mbuf *pkt);
	_Atomic uint64_t tx_rounds;
	struct gen *gens; /* the generators of the config, if any */
	uint16_t n_gens;
	_Atomic bool gens_ready; /* for telemetry's thread: gens are set up */

	volatile bool stop;
	uint32_t rx_bursts; /* rx lcore: bursts received, for assign: spray */
	uint64_t last_pkt_tsc;
	uint64_t tx_now_tsc;        /* tx role: the time of the burst being carried out */
	_Atomic bool lat_reset;     /* telemetry asks; the tx role clears the histograms */
	_Atomic uint64_t rx_rounds; /* quiescence for reclaim when rx runs elsewhere */
	bool rx_elsewhere;
	const char *nf_path;
	bool quiet;
	/* mbufs the ports keep for themselves (af_xdp's fill ring), measured
	 * after they start and before any traffic; never returned by 22.11's af_xdp. */
	unsigned int mbufs_port_reserved;
	/* the pool's audit at exit (poolaudit.h); audited: counts are its */
	struct pool_audit pool_audit;
	bool pool_audited;
	uint64_t nf_rings_bytes; /* region memory of every NF's rx and tx ring */
	struct core_wakes core_wakes[SQ_CORE_GROUPS];
	uint64_t next_tune_tsc; /* tx role: mgr_wakeup_tune's next look */
	/* control role: a config waiting for the rx role to take it, and how
	 * many it took (mgr/control.c). */
	_Atomic(struct sq_config *) cfg_next;
	_Atomic uint64_t cfg_swaps;
	struct supervisor *sup; /* nfs.c: NFs waiting to be restarted */
	_Atomic bool sup_busy;  /* the supervisor has work: poll it every round */
	struct scaler *scaler;  /* scaler.c: services that follow their load */
	struct msgs *msgs;      /* msg.c: the manager's end of the NFs' message rings */
	struct mgr_idle *idle;  /* idle.h: the main lcore's sleep; NULL: rx elsewhere */
	uint32_t wd_pos;        /* the watchdog's place in its walk over the NFs */
};

/* The cause of a packet for @p service that found no live NF. */
static inline enum sq_drop
mgr_no_nf_cause(const struct mgr *mgr, uint16_t service)
{
	return atomic_load_explicit(&mgr->services[service].failed, memory_order_relaxed)
		       ? SQ_DROP_SERVICE_FAILED
		       : SQ_DROP_NO_NF;
}

/* An NF's service name for logs: the manager's copy, never the NF-writable
 * one in its control block (and still there once the service is removed). */
static inline const char *
mgr_nf_service_name(const struct mgr *mgr, const struct mgr_nf *nf)
{
	(void)mgr;
	return nf->name;
}

/* region.c */
int mgr_region_create(struct mgr *mgr, const char *dir);
void mgr_region_destroy(struct mgr *mgr);
/** Publish the manager's state to the NFs (and keep our own copy). */
void mgr_region_set_state(struct mgr *mgr, enum sq_mgr_state state);
/** Off the hot path: repair header and ctl fields an NF rewrote, counting each. */
void mgr_region_check(struct mgr *mgr);
/** An NF whose rings' positions make no sense: count it, kill it (once). */
void mgr_region_ring_broken(struct mgr *mgr, struct mgr_nf *nf);
int mgr_region_alloc_ring(struct mgr *mgr, const char *name, uint32_t slots, unsigned int flags,
			  struct rte_ring **out);
/* Give back a ring of mgr_region_alloc_ring()'s, of @p slots as asked. */
void mgr_region_free_ring(struct mgr *mgr, struct rte_ring *r, uint32_t slots);

/* ports.c */
int mgr_ports_init(struct mgr *mgr, char *err, size_t err_len);
int mgr_ports_eal_args(const struct sq_config *cfg, char **args, int n, int max);
void mgr_ports_close(struct mgr *mgr);
/* af_packet's kernel ring drops so far (0 for other PMDs): part of rx_eth_missed. */
uint64_t mgr_port_kernel_drops(const struct mgr_port *p);

/* rx.c */
unsigned int mgr_rx_poll(struct mgr *mgr);
/* Packets that arrived on a port (from its queue or the generator). */
void mgr_rx_inject(struct mgr *mgr, uint16_t port_idx, struct rte_mbuf **pkts, uint16_t n);

/* gen.c: the generator, polled by the rx role, which hands it the sink its
 * packets go to (mgr_rx_inject: as if they came from the port; passed in, so
 * the generator does not call up into the role that polls it) */
struct gen;
typedef void mgr_gen_sink_fn(struct mgr *mgr, uint16_t port_idx, struct rte_mbuf **pkts,
			     uint16_t n);
int mgr_gen_init(struct mgr *mgr);
void mgr_gen_free(struct mgr *mgr);
/* One round of every generator. @p room[port]: how many packets rx takes
 * from the port this round (rx_backpressure; UINT16_MAX: no limit); the
 * generator keeps the rest of what is due, up to the port's rx_desc, as a
 * port's descriptors would, and counts what is past them as missed. */
unsigned int mgr_gen_poll(struct mgr *mgr, const uint16_t *room, mgr_gen_sink_fn *sink);
/* Index of the generator on port @p port (NULL or "": the first), or -ENOENT. */
int mgr_gen_find(const struct mgr *mgr, const char *port);
void mgr_gen_set_rate(struct mgr *mgr, int idx, uint64_t rate_pps);
/* A generator sends (not paused): the rx role has work every round. */
bool mgr_gen_busy(const struct mgr *mgr);
struct gen_stats {
	uint64_t rate_pps, sent_pkts, sent_bytes, alloc_fail, lag_pkts, missed_pkts, conns_started;
};
void mgr_gen_stats(const struct mgr *mgr, int idx, struct gen_stats *st);

/* tx.c */
unsigned int mgr_tx_poll(struct mgr *mgr);
unsigned int mgr_tx_drain_nf(struct mgr *mgr, struct mgr_nf *nf);
int mgr_tx_init(struct mgr *mgr);
void mgr_tx_free(struct mgr *mgr);
/* (mgr_tx_activate, mgr_nf_outstanding: held.h) */
/* Some NF holds packets (the tx role's list, or NFs about to join it). */
bool mgr_tx_nfs_hold_pkts(const struct mgr *mgr);
/* ... an isolated one among them (its doorbell is in its private region,
 * where the manager's sleep cannot be rung: mgr/idle.h) */
bool mgr_tx_isolated_hold_pkts(const struct mgr *mgr);

/* steer.c: moving packets to NFs and ports, shared by rx and tx */
int mgr_role_init(struct mgr *mgr, struct role_ctx *role);
void mgr_role_free(struct role_ctx *role);
/* @return the NF chosen, or NULL if the packet was dropped (no live NF). */
struct mgr_nf *mgr_steer_to_service(struct mgr *mgr, struct role_ctx *role, uint16_t service,
				    struct rte_mbuf *pkt);
/* Stage @p pkt for @p nf. @return @p nf. */
struct mgr_nf *mgr_steer_to_nf(struct mgr *mgr, struct role_ctx *role, struct mgr_nf *nf,
			       struct rte_mbuf *pkt);
void mgr_steer_to_port(struct mgr *mgr, struct role_ctx *role, uint16_t port, struct rte_mbuf *pkt);
void mgr_steer_flush(struct mgr *mgr, struct role_ctx *role);
/* (giving or dropping one NF's held batch: the role's flush_nf, drop_held) */
uint32_t mgr_steer_held(const struct mgr *mgr, const struct mgr_nf *nf);
void mgr_drop(struct role_stats *st, enum sq_drop cause, struct rte_mbuf *pkt);
void mgr_drop_bulk(struct role_stats *st, enum sq_drop cause, struct rte_mbuf **pkts,
		   unsigned int n);

/* wakeup.c */
void mgr_wakeup_init_nf(struct mgr_nf *nf, const struct sq_cfg_wake *cfg);
int mgr_wakeup_set_policy(struct mgr *mgr, uint16_t service, const struct sq_cfg_wake *cfg);
int mgr_wakeup_queues_init(struct mgr *mgr, struct role_ctx *role);
bool mgr_wakeup_hold(struct mgr *mgr, struct role_ctx *role, uint32_t nf_id);
void mgr_wakeup_check(struct mgr *mgr, struct role_ctx *role);
void mgr_wakeup_drop_all_held(struct mgr *mgr, struct role_ctx *role, enum sq_drop cause);
unsigned int mgr_wakeup_poll(struct mgr *mgr, struct role_ctx *role);
void mgr_wakeup_force(struct mgr *mgr, struct mgr_nf *nf);
/* Nanoseconds to the earliest wake timeout of @p role's waiting NFs (0: it
 * is due), or UINT64_MAX if none waits. */
uint64_t mgr_wakeup_next_ns(const struct mgr *mgr, const struct role_ctx *role, uint64_t now_tsc);
/* tx role, every round: hold each core's adaptive wakes to core_wakes_per_s. */
void mgr_wakeup_tune(struct mgr *mgr);
const char *mgr_wake_policy_name(uint32_t policy);

/* nfs.c */
int mgr_nfs_init(struct mgr *mgr);
/* Each service's cgroup as its config says: made for a service with limits,
 * its limits written when they changed. Under the control lock. @return 0,
 * or the first error (logged; that service's NFs then do not start). */
int mgr_nfs_cgroups_sync(struct mgr *mgr);
/* After the last NF has gone: every cgroup closed and removed. */
void mgr_nfs_cgroups_free(struct mgr *mgr);
/* At start, before the first NF: warnings and notes on the config's NFs. */
void mgr_nfs_announce(const struct mgr *mgr);
/* Until @p nf (just spawned) runs its loop, it exits, or a timeout passes:
 * 0, and it is live; -ECHILD or -ETIMEDOUT (logged). */
int mgr_nfs_wait_ready(struct mgr *mgr, struct mgr_nf *nf);
unsigned int mgr_nfs_poll(struct mgr *mgr);
/* What NFs wrote to stdout and stderr, said (nflog.h). */
void mgr_nfs_poll_logs(struct mgr *mgr);
void mgr_nfs_stop_all(struct mgr *mgr);
void mgr_nfs_free(struct mgr *mgr);
/* Restarts due now, NFs that became ready; every round while mgr->sup_busy. */
void mgr_nfs_supervise(struct mgr *mgr);
/* Control period: kill NFs that hold packets and make no progress. */
void mgr_nfs_watchdog(struct mgr *mgr);
/* manager.nice changed: the live NFs on its core follow (nfs.c nice_on_core). */
void mgr_nfs_renice(struct mgr *mgr);
int mgr_nfs_spawn(struct mgr *mgr, struct mgr_nf *nf);
/* The SCHED_RR priority the NF has by its config (service priority, or
 * chain_priority + hop); 0: the normal scheduler. */
uint32_t mgr_nf_own_priority(const struct mgr *mgr, const struct mgr_nf *nf);
/* SCHED_RR at @p prio, or with 0 its service's normal policy (SCHED_BATCH
 * or SCHED_OTHER). @return 0, or -errno (the NF's policy unchanged). */
int mgr_nf_set_policy(struct mgr *mgr, struct mgr_nf *nf, uint32_t prio);
bool mgr_nf_is_ready(const struct mgr_nf *nf);
/* NF @p nf (spawned, not ready) is past the readiness limit @p limit_ms of
 * time it could use (ready.h): then it is logged at @p level with what it
 * is doing and @p then ("; killing it"). */
bool mgr_nf_ready_overdue(const struct mgr *mgr, struct mgr_nf *nf, uint32_t limit_ms,
			  uint32_t level, const char *then);
/* control role: make NF slot @p id anew for a service's instance (rings kept
 * when their size fits), or retire an NF (it stops after handing back what
 * it holds; the main lcore reaps it). */
int mgr_nfs_setup(struct mgr *mgr, uint32_t id, uint16_t service, uint16_t instance);
void mgr_nfs_retire(struct mgr *mgr, struct mgr_nf *nf);
const char *mgr_nf_state_name(uint32_t state);

/* stats.c */
struct mgr_totals {
	uint64_t rx_pkts, tx_pkts, drop_pkts;
	uint64_t drops[SQ_DROP_MAX];
};
void mgr_stats_totals(const struct mgr *mgr, struct mgr_totals *t);
unsigned int mgr_stats_poll(struct mgr *mgr);
int mgr_stats_write_json(struct mgr *mgr, const char *path);
unsigned int mgr_mbufs_in_use(const struct mgr *mgr);

/* director.c: the rules changed (control role, on the rx lcore) */
void mgr_director_rules_changed(struct mgr *mgr, const struct sq_config *old,
				const struct sq_config *next);

/* telemetry.c */
int mgr_telemetry_init(struct mgr *mgr);
/* Once the roles exist: commands answer from here (before: an error). */
void mgr_telemetry_ready(struct mgr *mgr);
/* Before teardown frees what commands read: from here they answer an error. */
void mgr_telemetry_stop(struct mgr *mgr);

#endif /* SQUALL_MGR_H */
