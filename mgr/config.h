/* SPDX-License-Identifier: BSD-3-Clause
 * squall-mgr configuration: the YAML file, parsed into plain structs.
 */
#ifndef SQUALL_MGR_CONFIG_H
#define SQUALL_MGR_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_ether.h>

#define SQ_MAX_PORTS       16
#define SQ_MAX_SERVICES    64
#define SQ_MAX_CHAINS      64
#define SQ_MAX_HOPS        16
#define SQ_MAX_RULES       256
#define SQ_MAX_NF_ARGS     16
#define SQ_CFG_NAME_LEN    32
#define SQ_CFG_PATH_LEN    512
#define SQ_CFG_DEVARGS_LEN 512
#define SQ_CFG_ERR_LEN     1024
#define SQ_MAX_DEVARGS_ALT 4
#define SQ_MAX_ATTACH_UIDS 16
/* The highest SCHED_RR priority an NF may have: the manager's control
 * threads run one above it (ctlprio.h), so no NF can starve them. */
#define SQ_NF_PRIORITY_MAX 98

struct sq_cfg_port {
	char name[SQ_CFG_NAME_LEN];
	/* "net_pcap0,rx_pcap=in.pcap" or a PCI address; alternatives are tried
	 * in order (net_af_xdp, falling back to net_af_packet) */
	char devargs[SQ_MAX_DEVARGS_ALT][SQ_CFG_DEVARGS_LEN];
	uint16_t n_devargs;
	uint16_t rx_desc; /* default 1024 */
	uint16_t tx_desc; /* default 1024 */
	int line;         /* for errors found later (DPDK rejects devargs) */
};

/* When the manager wakes a sleeping NF (DESIGN §5, seed 000 §5.1). */
enum sq_wake_policy {
	SQ_WAKE_MIN = 0,      /* at the first waiting packet */
	SQ_WAKE_FIXED = 1,    /* at thresh_pkts waiting, or the oldest waited timeout */
	SQ_WAKE_ADAPTIVE = 2, /* 1 packet until t_lat_pkts seen; then AIMD on the threshold */
};

struct sq_cfg_wake {
	uint32_t policy;      /* enum sq_wake_policy; default min */
	uint32_t thresh_pkts; /* fixed: default 32; adaptive: the start value */
	uint64_t timeout_ns;  /* default 100 us */
	uint32_t min_pkts;    /* adaptive bounds, default 1 and 64 */
	uint32_t max_pkts;
	uint32_t t_lat_pkts; /* adaptive: below this many packets, wake at 1; default 36 */
};

/* Dynamic scaling (DESIGN §7, seed 003; mgr/scaler.c): the instances of a
 * service that take new flows follow its load, between min and max. */
struct sq_cfg_scale {
	uint32_t min, max;        /* instances that take new flows; max <= max_instances */
	uint32_t high_wm_pct;     /* an instance busier than this (% of its time) is overloaded */
	uint32_t low_wm_pct;      /* the service below this on every instance: one fewer */
	uint32_t interval_ms;     /* a look at the load this often; default 2 */
	uint32_t hold_intervals;  /* looks in a row before acting (no flapping); default 5 */
	uint32_t queue_high_pkts; /* an rx ring this full is overload too; default ring_slots/2 */
	uint32_t drop_memory_ms;  /* a ring's overflow rate is kept this long; 0: not learned */
	bool enabled;             /* the service has a scale: block */
	int line;
};

/* A service's cgroup limits, its NFs together (mgr/cgroup.c); 0: no limit. */
struct sq_cfg_cgroup {
	uint32_t cpu_max_pct;   /* percent of one CPU (cpu.max; v1 cpu.cfs_quota_us) */
	uint32_t cpu_weight;    /* 1..10000, its share when the CPU is contended */
	uint32_t memory_max_mb; /* memory.max (v1 memory.limit_in_bytes) */
	uint32_t pids_max;      /* processes and threads (pids.max) */
};

struct sq_cfg_service {
	char name[SQ_CFG_NAME_LEN];
	char exec[SQ_CFG_PATH_LEN];     /* resolved absolute path of the NF binary */
	char *args[SQ_MAX_NF_ARGS + 1]; /* NULL-terminated; strdup'ed */
	uint32_t n_args;
	uint32_t mode;              /* enum sq_nf_mode; default sleep */
	uint32_t instances;         /* default 1 */
	uint32_t ring_slots;        /* rx and tx ring size, power of 2; default 1024 */
	uint32_t burst_max;         /* default 32 */
	uint32_t batch_budget_pkts; /* default 256 */
	uint64_t spin_ns;           /* default 20000 */
	struct sq_cfg_wake wake;
	uint32_t pool_idle;          /* per-flow: idle NFs to keep ready; default: all instances */
	uint32_t pool_fallback;      /* enum sq_pool_fallback; default drop */
	uint32_t pool_queue_pkts;    /* fallback queue: new flows' packets that may wait */
	uint32_t pool_order;         /* enum sq_pool_order; default fifo */
	uint32_t pool_backlog_max;   /* new flows wait while more NFs wait to run; 0: no limit */
	uint32_t priority;           /* SCHED_RR 1..SQ_NF_PRIORITY_MAX; 0 = the normal scheduler */
	int32_t nice;                /* for the normal scheduler, -20..19 */
	uint32_t sched_batch;        /* enum sq_sched_batch; default auto */
	uint32_t max_instances;      /* NF slots reserved: instances may grow to it while running */
	uint32_t restart;            /* enum sq_restart; default always */
	uint32_t restart_backoff_ms; /* first delay before a restart; default 1 */
	uint32_t restart_backoff_max_ms; /* the delay doubles up to this; default 5000 */
	uint32_t restart_limit;    /* restarts of one instance within the window; default 10 */
	uint32_t restart_window_s; /* default 60 */
	uint32_t watchdog_ms; /* a hung NF (packets held, no progress) is killed after; 0 off */
	uint32_t max_outstanding_pkts; /* packets an NF may hold at once; default 2 rings + 64 */
	uint32_t sandbox;              /* enum sq_sandbox; default none */
	uint32_t memory_mb; /* an NF's private memory (RLIMIT_DATA); 0: no limit (default) */
	/* The OUT and TO verdicts its NFs may give (mgr/tx.c): a bit per port
	 * and per service index. Unless the config names them (out_ports,
	 * to_services): every one, none for an isolated service. */
	uint32_t out_ports;
	uint64_t to_services;
	struct sq_cfg_cgroup cgroup;
	struct sq_cfg_scale scale;
	/* Running config only: removed while a draining chain's flows still
	 * use its NFs (mgr/control.c). */
	bool draining;
	int line;
};

/* What an NF of a service may do besides its loop (mgr/sandbox.c). */
enum sq_sandbox {
	SQ_SANDBOX_NONE = 0,   /* manager.nf_user, no capabilities */
	SQ_SANDBOX_STRICT = 1, /* and a uid of its own, a seccomp filter, no children */
	/* strict, and a private region (a copy per hop, mgr/isolate.h) and
	 * namespaces of its own: pid, mount, ipc, net */
	SQ_SANDBOX_ISOLATED = 2,
};

/* When the manager starts a dead NF of a service again. */
enum sq_restart {
	SQ_RESTART_ALWAYS = 0,     /* whatever the exit */
	SQ_RESTART_ON_FAILURE = 1, /* a non-zero exit or a signal */
	SQ_RESTART_NEVER = 2,
};

struct sq_cfg_chain {
	char name[SQ_CFG_NAME_LEN];
	uint16_t services[SQ_MAX_HOPS]; /* indexes into services[] */
	uint16_t n_hops;                /* >= 1; 0: a free slot of a running config */
	uint16_t gen;                   /* running config: the slot's generation (mgr/control.c) */
	/* Running config only: removed or changed while per-flow flows were
	 * in it; they finish on it, then it goes (mgr/control.c). */
	bool draining;
	/* Derived (sq_config_derive): a hop's service scales, so rss rules of
	 * this chain pin each flow to its instances in the flow table. */
	bool pinned;
	/* Each NF hands its NEXT packets straight to the next hop's NF of its
	 * lane (instance i of every hop), not through the manager (mgr/lane.h):
	 * trusted services of one instance count, rss rules only. */
	bool direct;
	/* hop i of the chain runs at its service's nice - i x this (at least
	 * -20): a woken later hop runs before an earlier one takes its next
	 * batch, so packets finish the chain before new ones start it (seed
	 * 000's chain-position-aware priority with the normal scheduler's
	 * weights, so NFs still spin). -1: the default, 2 for a direct chain
	 * on the manager's core, 0 for the others (sq_config_hop_nice_step). */
	int8_t hop_nice_step;
	int direct_line;
	int line;
};

/* How a rule's packets are spread over the instances of each hop's service
 * (DESIGN §6, seed 000 §3.2). */
enum sq_assign {
	SQ_ASSIGN_RSS = 0,         /* symmetric hash of the 5-tuple mod live instances */
	SQ_ASSIGN_PER_FLOW = 1,    /* an idle NF of the pool per flow, returned at its end */
	SQ_ASSIGN_ROUND_ROBIN = 2, /* new flows to instances in turn, then sticky */
	SQ_ASSIGN_SPRAY = 3,       /* each rx burst to the next instance: no flow affinity */
};

/* When a per-flow service's idle pool is empty. */
enum sq_pool_fallback {
	SQ_FALLBACK_DROP = 0,  /* drop the new flow's packets, counted as pool_empty */
	SQ_FALLBACK_RSS = 1,   /* share a busy NF, chosen by the flow hash */
	SQ_FALLBACK_QUEUE = 2, /* wait in a bounded queue for an NF to come back */
};

/* Which idle NF a new flow gets. */
/* services[].sched_batch: when the normal scheduler's NFs run SCHED_BATCH. */
enum sq_sched_batch {
	SQ_BATCH_AUTO = 0, /* when whatever wakes them runs on their own core (nfs.c) */
	SQ_BATCH_ON,
	SQ_BATCH_OFF,
};

enum sq_pool_order {
	SQ_POOL_FIFO = 0, /* the one idle longest (seed 000 §4): NFs take turns */
	SQ_POOL_LIFO = 1, /* the one idle shortest: its pages are still in the caches */
};

struct sq_cfg_rule {
	int16_t in_port; /* index into ports[], -1: any */
	bool has_dst_mac;
	/* Running config only: a removed rule of a draining chain. It carries
	 * the flows it had; other packets go on to the next rule. */
	bool draining;
	struct rte_ether_addr dst_mac;
	uint16_t chain;       /* index into chains[] */
	uint16_t out_port;    /* index into ports[] */
	uint32_t assign;      /* enum sq_assign; default rss */
	uint32_t nf_priority; /* SCHED_RR priority of a flow's NFs while it lasts; 0 = keep */
	int line;
};

#define SQ_MAX_GEN_SIZES 64
#define SQ_MAX_GENS      4

/* The manager's own traffic generator (benchmarks): packets enter as if
 * received on a port. */
struct sq_cfg_gen {
	bool enabled;
	uint16_t port;     /* index into ports[] */
	uint64_t rate_pps; /* initial rate; 0 = paused */
	/* frame sizes as RFC 2544 counts them, FCS included (64..1518): the
	 * buffers are 4 bytes shorter, since no port here adds an FCS */
	uint16_t sizes[SQ_MAX_GEN_SIZES];
	uint16_t n_sizes;
	uint32_t flows; /* distinct UDP 5-tuples, cycled */
	uint16_t
		tcp_flow_pkts; /* 0: UDP; K >= 3: short TCP connections of K packets, flows at once */
	bool has_dst_mac;
	/* TCP mode: every slot starts its first connection at once, so they
	 * end and start again together (false), or spread over one
	 * connection's length, so new connections come at an even rate (true) */
	bool tcp_staggered;
	struct rte_ether_addr dst_mac;
	int line;
};

struct sq_config {
	char path[SQ_CFG_PATH_LEN];
	/* manager: */
	char name[SQ_CFG_NAME_LEN]; /* default "squall"; names the region file */
	uint32_t region_mb;         /* default 256 */
	uint32_t mbufs;             /* default 16383 */
	uint32_t mbuf_data_room;    /* default RTE_MBUF_DEFAULT_BUF_SIZE */
	uint32_t stats_interval_ms; /* default 1000; 0 = no periodic line */
	int32_t nf_core;            /* CPU NFs are pinned to; -1: not pinned; default -1 */
	uint32_t rx_burst;          /* default 32 */
	/* chain-position-aware priorities (seed 000 Fig 8): hop i of a chain
	 * runs at SCHED_RR chain_priority + i; 0 = off */
	uint32_t chain_priority;
	uint32_t max_flows;                 /* flow table size; default 65536 */
	uint32_t flow_idle_timeout_ms;      /* UDP and unclean ends; default 10000 */
	uint32_t flow_half_open_timeout_ms; /* since a TCP flow's first SYN; 5000 (mgr/admit.h) */
	/* unestablished flows of one source prefix at once; 0: no cap */
	uint32_t flow_unestablished_per_source;
	uint32_t flow_linger_ms; /* after FIN both ways or RST; default 200 */
	/* adaptive wakes: the wake rate a core of NFs is held to, by stretching
	 * adaptive timeouts; default 50000; 0 = no limit */
	uint32_t core_wakes_per_s;
	/* the manager's sleep when idle (mgr/idle.h): the longest sleep between
	 * two polls, 0 = poll without end (the lowest latency, a whole core);
	 * and how long nothing must move before the first sleep */
	uint32_t idle_sleep_max_us;
	uint32_t idle_after_us;
	/* idle_after_us stretched by the manager's load (mgr/idle.c
	 * idle_after_ns): a gap in heavy traffic is not idleness; default off */
	bool idle_after_load;
	/* with the NFs on the manager's core: the rounds in a row that moved
	 * packets before it gives them the core (mgr/idle.c mgr_idle_yield);
	 * 1 = after every round; default 1 */
	uint32_t core_yield_rounds;
	/* rx does not read a port while a first hop its rules feed has no room
	 * for a burst: the port's descriptors hold them (rx.c); default off */
	bool rx_backpressure;
	bool control_realtime; /* the control threads at SCHED_FIFO (ctlprio.h) */
	/* the nice of the manager's lcores (main.c), added to that of the NFs
	 * on its core (nfs.c): negative, above the other tasks of its
	 * scheduling group there, whose kernel work (the ports' transmits) it
	 * carries; default 0 (docs/config.md: what measured it) */
	int32_t mgr_nice;
	/* NF slots in the region; 0: the services' max_instances + SQ_SPARE_NF_SLOTS */
	uint32_t max_nfs;
	/* the user NFs run as (a name, or a uid); default "squall-nf", made by
	 * scripts/setup.sh; "root" keeps root's uid (and no more) */
	char nf_user[SQ_CFG_NAME_LEN];
	uint32_t nf_uid, nf_gid; /* nf_user's, resolved at load */
	/* uids whose NFs, started by hand, get the region over the attach
	 * socket (mgr/attach.c), besides root and the manager's own */
	uint32_t attach_uids[SQ_MAX_ATTACH_UIDS];
	uint16_t n_attach_uids;

	struct sq_cfg_port ports[SQ_MAX_PORTS];
	uint16_t n_ports;
	struct sq_cfg_service services[SQ_MAX_SERVICES];
	uint16_t n_services;
	struct sq_cfg_chain chains[SQ_MAX_CHAINS];
	uint16_t n_chains;
	struct sq_cfg_rule rules[SQ_MAX_RULES];
	uint16_t n_rules;
	struct sq_cfg_gen gens[SQ_MAX_GENS]; /* generator: one mapping or a list */
	uint16_t n_gens;
};

/**
 * Parse and check a config file.
 * @param nf_path colon-separated directories searched for a service's exec
 *   when it has no '/', before $PATH (may be NULL).
 * @param err filled with "file:line: field: what is wrong" on failure.
 * @return 0, -EINVAL for a bad config (err says why), -ENOENT if the file
 *   cannot be read, -ENOMEM.
 */
int sq_config_load(const char *path, const char *nf_path, struct sq_config *cfg, char *err,
		   size_t err_len);

/** Free what sq_config_load() allocated (the NF args). */
void sq_config_free(struct sq_config *cfg);

/* NF slots kept free for services added while running, unless max_nfs says. */
#define SQ_SPARE_NF_SLOTS 64

/** Fill in what is derived from the keys (sq_cfg_chain.pinned); the
 * loader calls it, and the control role for each running config it makes. */
void sq_config_derive(struct sq_config *cfg);

/** NF slots the services reserve (the sum of their max_instances). */
uint64_t sq_config_nfs_reserved(const struct sq_config *cfg);
/** NF slots the region is made with (max_nfs, or the reserve and spares). */
/* The mbufs of an isolated NF's private pool (mgr/isolate.h). */
uint32_t sq_config_iso_mbufs(const struct sq_cfg_service *svc);
uint32_t sq_config_max_nfs(const struct sq_config *cfg);

/** Index of the port/service/chain named @p name, or -1. */
int sq_config_port_index(const struct sq_config *cfg, const char *name);
int sq_config_service_index(const struct sq_config *cfg, const char *name);
int sq_config_chain_index(const struct sq_config *cfg, const char *name);
/* A chain's hop_nice_step, its default resolved: 2 for a direct chain whose
 * NFs share the manager's core (@p on_mgr_core), 0 for the others. Off the
 * manager's core the hops, all awake under load, take the core in turns of
 * sched_yield, and unequal weights break the turns up (docs/config.md). */
static inline int
sq_config_hop_nice_step(const struct sq_cfg_chain *ch, bool on_mgr_core)
{
	return ch->hop_nice_step >= 0 ? ch->hop_nice_step : ch->direct && on_mgr_core ? 2 : 0;
}

/* Is @p service in a chain a per-flow rule uses (its instances a pool)? */
bool sq_config_service_pooled(const struct sq_config *cfg, uint16_t service);

#endif /* SQUALL_MGR_CONFIG_H */
