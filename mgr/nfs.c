/* SPDX-License-Identifier: BSD-3-Clause
 * NF lifecycle: control blocks and rings in the region, spawning the NF
 * processes the config declares, noticing their exit, reclaiming every packet
 * a dead NF held or had queued, and stopping them all at shutdown.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_pause.h>
#include <rte_malloc.h>
#include <rte_mempool.h>

#include "cgroup.h"
#include "guard.h"
#include "held.h"
#include "isolate.h"
#include "lane.h"
#include "mgr.h"
#include "msg.h"
#include "nfring.h"
#include "sandbox.h"
#include "spawn.h"

extern char **environ;

#define NF_READY_TIMEOUT_MS 3000
#define NF_STOP_TIMEOUT_MS  5000

static const char *const state_names[] = {
	[SQ_NF_FREE] = "free",     [SQ_NF_SPAWNED] = "spawned", [SQ_NF_AWAKE] = "awake",
	[SQ_NF_ASLEEP] = "asleep", [SQ_NF_WAKING] = "waking",   [SQ_NF_EXITED] = "exited",
	[SQ_NF_DEAD] = "dead",
};

const char *
mgr_nf_state_name(uint32_t state)
{
	return state < RTE_DIM(state_names) ? state_names[state] : "?";
}

enum { SUP_NONE, SUP_WAIT, SUP_STARTING, SUP_FIRST_PKT };

struct supervisor {
	uint32_t *ids; /* NFs in a SUP_ state other than NONE */
	uint32_t n;
};

/* The slot's rings in the shared region, if it has them: a slot made
 * again for an isolated service, or of another size, frees them. */
static void
free_shared_rings(struct mgr *mgr, struct mgr_nf *nf)
{
	if (nf->rx == NULL || nf->iso != NULL)
		return;
	/* (their size from our record: a ring's header is the NF's to write) */
	mgr->nf_rings_bytes -= 2 * (uint64_t)rte_ring_get_memsize(nf->ring_slots);
	mgr_region_free_ring(mgr, nf->rx, nf->ring_slots);
	mgr_region_free_ring(mgr, nf->tx, nf->ring_slots);
	nf->rx = nf->tx = NULL;
	nf->ring_slots = 0;
}

/* The slot's private region, if it has one: unmapped at once when the
 * manager stops (@p now), else kept until then (mgr->iso_retired). */
static void
free_private_region(struct mgr *mgr, struct mgr_nf *nf, bool now)
{
	struct mgr_iso *iso = nf->iso;

	if (iso == NULL)
		return;
	atomic_fetch_and(&mgr->iso_bits[nf->id / 64], ~(1ull << (nf->id % 64)));
	mgr->n_iso--;
	__atomic_store_n(&nf->iso, NULL, __ATOMIC_RELEASE);
	nf->rx = nf->tx = NULL;
	if (!now) {
		iso->retired_next = mgr->iso_retired;
		mgr->iso_retired = iso;
		return;
	}
	mgr_iso_destroy(iso);
	free(iso);
}

/* An isolated slot's private region (isolate.h): made once, again only if
 * the service's geometry changed; each at an address of its own. */
static int
setup_private_region(struct mgr *mgr, struct mgr_nf *nf, const struct sq_cfg_service *cs)
{
	uint32_t n = sq_config_iso_mbufs(cs);
	uint16_t room = (uint16_t)mgr->cfg->mbuf_data_room;
	size_t len = RTE_ALIGN_CEIL(mgr_iso_bytes(cs->ring_slots, n, room), 2u << 20);
	int ret;

	free_shared_rings(mgr, nf);
	if (nf->iso != NULL && nf->iso->ring_slots == cs->ring_slots && nf->iso->n_mbufs == n)
		goto done;
	free_private_region(mgr, nf, false);
	if (mgr->iso_next_addr == 0)
		mgr->iso_next_addr = SQ_ISO_BASE_ADDR;
	if (mgr->iso_next_addr + len > SQ_ISO_BASE_ADDR + SQ_ISO_SPAN)
		return -ENOSPC;
	nf->iso = malloc(sizeof(*nf->iso));
	if (nf->iso == NULL)
		return -ENOMEM;
	ret = mgr_iso_create(nf->iso, mgr->iso_next_addr, cs->ring_slots, n, room, rte_get_tsc_hz(),
			     cs->name);
	if (ret < 0) {
		MGR_LOG(ERR, "%s: cannot make a private region of %zu KiB: %s\n", cs->name,
			len >> 10, strerror(-ret));
		free(nf->iso);
		nf->iso = NULL;
		return ret;
	}
	mgr->iso_next_addr += len;
	atomic_fetch_or(&mgr->iso_bits[nf->id / 64], 1ull << (nf->id % 64));
	mgr->n_iso++;
done:
	nf->rx = nf->iso->rx;
	nf->tx = nf->iso->tx;
	nf->hdr = nf->iso->hdr;
	return 0;
}

/* The slot's rings: in the shared region, or its private one. */
static int
setup_rings(struct mgr *mgr, struct mgr_nf *nf, const struct sq_cfg_service *cs)
{
	char name[RTE_RING_NAMESIZE];
	int ret;

	if (cs->sandbox == SQ_SANDBOX_ISOLATED)
		return setup_private_region(mgr, nf, cs);
	free_private_region(mgr, nf, false);
	nf->hdr = mgr->region;
	/* A slot made again (control role: its last NF is gone and reclaimed)
	 * keeps rings of the right size, by our record, and writes their
	 * headers anew: the last NF may have rewritten them. */
	if (nf->rx != NULL && nf->ring_slots == cs->ring_slots) {
		snprintf(name, sizeof(name), "sq_rx_%u", nf->id);
		rte_ring_init(nf->rx, name, cs->ring_slots, RING_F_SP_ENQ | RING_F_SC_DEQ);
		snprintf(name, sizeof(name), "sq_tx_%u", nf->id);
		rte_ring_init(nf->tx, name, cs->ring_slots, RING_F_SP_ENQ | RING_F_SC_DEQ);
		return 0;
	}
	free_shared_rings(mgr, nf);
	/* rx: the manager's roles produce, one at a time (nfring.h); the NF
	 * consumes. tx: the NF produces; the one tx role that owns it consumes. */
	snprintf(name, sizeof(name), "sq_rx_%u", nf->id);
	ret = mgr_region_alloc_ring(mgr, name, cs->ring_slots, RING_F_SP_ENQ | RING_F_SC_DEQ,
				    &nf->rx);
	if (ret < 0)
		return ret;
	snprintf(name, sizeof(name), "sq_tx_%u", nf->id);
	ret = mgr_region_alloc_ring(mgr, name, cs->ring_slots, RING_F_SP_ENQ | RING_F_SC_DEQ,
				    &nf->tx);
	if (ret < 0) {
		mgr_region_free_ring(mgr, nf->rx, cs->ring_slots);
		nf->rx = NULL;
		return ret;
	}
	nf->ring_slots = cs->ring_slots;
	mgr->nf_rings_bytes += 2 * (uint64_t)rte_ring_get_memsize(cs->ring_slots);
	return 0;
}

static int
init_nf(struct mgr *mgr, struct mgr_nf *nf, uint16_t service, uint16_t instance)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[service];
	struct sq_nf_ctl *ctl;
	int ret;

	atomic_store(&nf->setting_up, true);
	nf->service = service;
	nf->instance = instance;
	snprintf(nf->name, sizeof(nf->name), "%s", cs->name);
	nf->max_outstanding = cs->max_outstanding_pkts;
	ret = setup_rings(mgr, nf, cs);
	if (ret < 0)
		return ret;
	/* (an isolated NF is slot 0 of its private region) */
	ctl = nf->iso != NULL ? nf->iso->ctl : sq_region_nf_ctl(mgr->region, nf->id);
	nf->ctl = ctl;
	nf->retiring = false;
	nf->reaped = false;
	nf->lane_leader = SQ_NF_NONE; /* (mgr_lane_setup links those in lanes) */
	nf->lane_next = SQ_NF_NONE;
	nf->lane_prev = SQ_NF_NONE;
	nf->direct_rx = NULL;

	memset(ctl, 0, sizeof(*ctl));
	ctl->id = nf->iso != NULL ? 0 : nf->id;
	ctl->service_id = service;
	ctl->instance = instance;
	ctl->mode = cs->mode;
	ctl->rx_ring_off = (uintptr_t)nf->rx - (uintptr_t)nf->hdr;
	ctl->tx_ring_off = (uintptr_t)nf->tx - (uintptr_t)nf->hdr;
	ctl->burst_max = cs->burst_max;
	ctl->batch_budget_pkts = cs->batch_budget_pkts;
	ctl->spin_ns = cs->spin_ns;
	nf->core_group = mgr->cfg->nf_core >= 0 && mgr->cfg->nf_core < SQ_CORE_GROUPS - 1
				 ? (uint32_t)mgr->cfg->nf_core
				 : SQ_CORE_GROUPS - 1;
	ctl->core_group = nf->core_group; /* the NF's to read; we index with ours */
	/* (geometry from our own numbers, never from a ring's header) */
	nf->rx_mask = cs->ring_slots - 1;
	nf->tx_mask = cs->ring_slots - 1;
	nf->tx_cons = nf->tx->cons.head;
	nf->rx_prod = nf->rx->prod.head;
	rte_spinlock_init(&nf->rx_lock);
	snprintf(ctl->service, sizeof(ctl->service), "%s", cs->name);
	mgr_wakeup_init_nf(nf, &cs->wake);
	atomic_store(&ctl->state, SQ_NF_FREE);
	ctl->abi_version = SQ_ABI_VERSION;
	atomic_store_explicit(&nf->setting_up, false, memory_order_release);
	return 0;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void
mgr_nfs_poll_logs(struct mgr *mgr)
{
	mgr_nflog_poll(&mgr->nflog, now_ns());
}

/* @p fd at the kept number @p slot for the NF's start (spawn.c copies the
 * manager's descriptor table only up to the highest it is given), or
 * itself if that fails. */
static int
spawn_fd_slot(int fd, int slot)
{
	return fd >= 0 && slot >= 0 && fd > slot && dup3(fd, slot, O_CLOEXEC) == slot ? slot : fd;
}

/* The slot free again (its copy closed: a pipe's write end must be the
 * NF's alone, or its end is never seen). */
static void
spawn_fd_unslot(const struct mgr *mgr, int slot)
{
	if (slot >= 0)
		dup3(mgr->devnull_fd, slot, O_CLOEXEC);
}

/* What every NF is given besides its region: stdin, a log pipe, a uid. */
static int
open_nf_io(struct mgr *mgr)
{
	struct rlimit fds;
	char err[256];
	int ret;

	/* A descriptor per NF (its log pipe): as many as the system lets us. */
	if (getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur < fds.rlim_max) {
		fds.rlim_cur = fds.rlim_max;
		setrlimit(RLIMIT_NOFILE, &fds);
	}
	mgr->devnull_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < 2; i++)
		mgr->spawn_fds[i] =
			mgr->devnull_fd < 0 ? -1 : fcntl(mgr->devnull_fd, F_DUPFD_CLOEXEC, 0);
	if (mgr->devnull_fd < 0 || mgr->spawn_fds[0] < 0 || mgr->spawn_fds[1] < 0) {
		ret = -errno;
		MGR_LOG(ERR, "cannot open /dev/null: %s\n", strerror(errno));
		return ret;
	}
	ret = mgr_nflog_init(&mgr->nflog, mgr->region->max_nfs ? mgr->region->max_nfs : 1,
			     STDERR_FILENO);
	if (ret < 0) {
		MGR_LOG(ERR, "cannot set up the NFs' logs: %s\n", strerror(-ret));
		return ret;
	}
	/* A manager that is not root cannot give uids: its NFs run as it. */
	mgr->uids = (struct mgr_uids){.index = -1, .lock_fd = -1};
	if (geteuid() != 0)
		return 0;
	ret = mgr_uids_claim(&mgr->uids, MGR_UIDS_LOCK_DIR, err, sizeof(err));
	if (ret < 0) {
		MGR_LOG(ERR, "%s\n", err);
		return ret;
	}
	MGR_LOG(INFO, "NF uids %u to %u (range %d)\n", (unsigned int)mgr->uids.base,
		(unsigned int)mgr->uids.base + mgr->region->max_nfs - 1, mgr->uids.index);
	return 0;
}

int
mgr_nfs_init(struct mgr *mgr)
{
	uint32_t id = 0;
	int ret;

	/* Telemetry reads n_nfs from its own thread: publish it after the array. */
	mgr->nfs = calloc(mgr->region->max_nfs ? mgr->region->max_nfs : 1, sizeof(*mgr->nfs));
	mgr->sup = calloc(1, sizeof(*mgr->sup));
	mgr->iso_bits = calloc(sq_tx_ready_words(mgr->region->max_nfs ? mgr->region->max_nfs : 1),
			       sizeof(*mgr->iso_bits));
	if (mgr->nfs == NULL || mgr->sup == NULL || mgr->iso_bits == NULL)
		return -ENOMEM;
	mgr->sup->ids =
		calloc(mgr->region->max_nfs ? mgr->region->max_nfs : 1, sizeof(*mgr->sup->ids));
	if (mgr->sup->ids == NULL)
		return -ENOMEM;
	ret = open_nf_io(mgr);
	if (ret < 0)
		return ret;
	/* A service's NF ids are contiguous: max_instances of them, so that its
	 * instances can grow while running; those beyond instances wait unstarted. */
	for (uint16_t s = 0; s < mgr->cfg->n_services; s++) {
		mgr->services[s].first_nf = id;
		mgr->services[s].n_nfs = mgr->cfg->services[s].instances;
		mgr->services[s].cap_nfs = mgr->cfg->services[s].max_instances;
		for (uint32_t i = 0; i < mgr->cfg->services[s].max_instances; i++, id++) {
			mgr->nfs[id].id = id;
			ret = init_nf(mgr, &mgr->nfs[id], s, (uint16_t)i);
			if (ret < 0)
				return ret;
			mgr->n_nfs = id + 1;
		}
	}
	ret = mgr_lane_setup(mgr);
	if (ret < 0)
		return ret;
	return mgr_nfs_cgroups_sync(mgr);
}

/* ------------------------------------------------------------ cgroups */

static const struct mgr_cg_root host_cgroups = {"/sys/fs/cgroup", "/proc/self/cgroup"};

/* Headroom per NF in the memory cgroup that memory_mb implies, over
 * memory_mb itself: its page tables, stacks, the files it reads. */
#define MEMORY_MB_SLACK 32u

/* The limits a service's group holds: its own, and with memory_mb a memory
 * limit for all its NFs (unless memory_max_mb sets one), so that what
 * RLIMIT_DATA does not count (shared anonymous memory, a file it maps)
 * counts too. */
static struct sq_cfg_cgroup
limits_of(const struct sq_cfg_service *cs)
{
	struct sq_cfg_cgroup lim = cs->cgroup;

	if (cs->memory_mb != 0 && lim.memory_max_mb == 0)
		lim.memory_max_mb = (uint32_t)RTE_MIN((uint64_t)(cs->memory_mb + MEMORY_MB_SLACK) *
							      RTE_MAX(cs->max_instances, 1u),
						      (uint64_t)1 << 20);
	return lim;
}

static void
log_limits(const struct mgr *mgr, const struct sq_cfg_service *cs, const struct mgr_cgroup *cg)
{
	MGR_LOG(NOTICE,
		"service %s: cgroup v%d %s: cpu_max_pct %u, cpu_weight %u, memory_max_mb %u%s, "
		"pids_max %u (0: no limit)\n",
		cs->name, cg->version,
		cg->dir[MGR_CG_MEMORY][0] ? cg->dir[MGR_CG_MEMORY] : cg->dir[0],
		cg->set.cpu_max_pct, cg->set.cpu_weight, cg->set.memory_max_mb,
		cs->cgroup.memory_max_mb == 0 && cg->set.memory_max_mb != 0 ? " (from memory_mb)"
									    : "",
		cg->set.pids_max);
	(void)mgr;
}

/* A service at an index another had: the other's group is retired, not
 * freed (a restart on the main lcore may be reading it). */
static int
retire_cgroup(struct mgr *mgr, struct mgr_service *svc)
{
	struct mgr_cgroup **r;

	r = realloc(mgr->cg_retired, (mgr->n_cg_retired + 1) * sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	mgr->cg_retired = r;
	r[mgr->n_cg_retired++] = svc->cgroup;
	atomic_store(&svc->cgroup, NULL);
	return 0;
}

static int
sync_cgroup(struct mgr *mgr, uint16_t s)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[s];
	const struct sq_cfg_cgroup lim = limits_of(cs);
	struct mgr_service *svc = &mgr->services[s];
	struct mgr_cgroup *cg = svc->cgroup;
	char err[PATH_MAX + 256];
	int ret;

	if (cg != NULL && strcmp(cg->name, cs->name) != 0) {
		ret = retire_cgroup(mgr, svc);
		if (ret < 0)
			return ret;
		cg = NULL;
	}
	if (cg == NULL) {
		if (!mgr_cgroup_wanted(&lim))
			return 0;
		cg = malloc(sizeof(*cg));
		if (cg == NULL)
			return -ENOMEM;
		ret = mgr_cgroup_open(cg, &host_cgroups, mgr->cfg->name, cs->name, err,
				      sizeof(err));
		if (ret == 0)
			ret = mgr_cgroup_limit(cg, &lim, err, sizeof(err));
		if (ret < 0) {
			mgr_cgroup_close(cg);
			free(cg);
			MGR_LOG(ERR, "service %s: %s\n", cs->name, err);
			return ret;
		}
		log_limits(mgr, cs, cg);
		atomic_store(&svc->cgroup, cg); /* whole before an NF start reads it */
		/* limits given to a service while its NFs run: they move in too */
		for (uint32_t i = 0; i < svc->cap_nfs; i++) {
			const struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

			ret = nf->pid > 0 ? mgr_cgroup_attach(cg, nf->pid) : 0;
			if (ret < 0)
				MGR_LOG(WARNING, "%s#%u: not moved into its cgroup: %s\n", cs->name,
					nf->instance, strerror(-ret));
		}
		return 0;
	}
	if (memcmp(&cg->set, &lim, sizeof(cg->set)) == 0)
		return 0;
	ret = mgr_cgroup_limit(cg, &lim, err, sizeof(err));
	if (ret < 0) {
		MGR_LOG(ERR, "service %s: %s (its NFs keep the limits they had)\n", cs->name, err);
		return ret;
	}
	log_limits(mgr, cs, cg);
	return 0;
}

int
mgr_nfs_cgroups_sync(struct mgr *mgr)
{
	int first = 0;

	for (uint16_t s = 0; s < mgr->cfg->n_services; s++) {
		int ret = sync_cgroup(mgr, s);

		if (ret < 0 && first == 0)
			first = ret;
	}
	return first;
}

static void
free_cgroup(struct mgr_cgroup *cg)
{
	if (mgr_cgroup_close(cg) < 0)
		MGR_LOG(WARNING, "cgroup %s: not removed: %s\n", cg->dir[0], strerror(errno));
	free(cg);
}

void
mgr_nfs_cgroups_free(struct mgr *mgr)
{
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++) {
		if (mgr->services[s].cgroup != NULL)
			free_cgroup(mgr->services[s].cgroup);
		mgr->services[s].cgroup = NULL;
	}
	for (uint32_t i = 0; i < mgr->n_cg_retired; i++)
		free_cgroup(mgr->cg_retired[i]);
	free(mgr->cg_retired);
	mgr->cg_retired = NULL;
	mgr->n_cg_retired = 0;
}

/* Hop index of a service: its latest position in any chain. */
static uint32_t
service_hop(const struct sq_config *cfg, uint16_t service)
{
	uint32_t hop = 0;

	for (uint16_t c = 0; c < cfg->n_chains; c++)
		for (uint16_t h = 0; h < cfg->chains[c].n_hops; h++)
			if (cfg->chains[c].services[h] == service)
				hop = RTE_MAX(hop, (uint32_t)h);
	return hop;
}

/* The service's own, or with chain_priority set, base + hop, so later hops
 * win the core and overload drops packets at the chain's entry, before work
 * was spent on them (seed 000 Fig 8). */
uint32_t
mgr_nf_own_priority(const struct mgr *mgr, const struct mgr_nf *nf)
{
	if (mgr->cfg->chain_priority > 0)
		return RTE_MIN(mgr->cfg->chain_priority + service_hop(mgr->cfg, nf->service),
			       (uint32_t)SQ_NF_PRIORITY_MAX);
	return mgr->cfg->services[nf->service].priority;
}

/* On the manager's core, the most a chain's first hops rank below the
 * manager (nice steps). The manager yields the core to its NFs only while
 * they hold packets, between its rounds: much further below, it starves the
 * first hops (a 10-hop chain's first at +18 overflowed its ring, 40,883
 * nf_ring_full in a 5 s iperf3; capped at +4 none, and 2.7-2.9 Gbit/s
 * where the hops above the manager carried 1.9-2.1). */
#define MGR_CORE_HOP_SPAN 4

/* Its service's nice, less its chains' hop_nice_step for each hop it is
 * into them (the most of any chain it is in). On the manager's core
 * (below_mgr) the manager is every chain's last stage, the transmit of what
 * its last hop passes on, so the steps count back from there: the last hop
 * at the service's nice, each earlier one a step after it, none more than
 * MGR_CORE_HOP_SPAN. Counted forward from the first hop, the later hops
 * ranked above the manager, and the NF that had just handed it a burst took
 * the core back from its transmit (tcp_peers' 3-NF chain on core 0: 3.34
 * Gbit/s against 2.94, means of 10 interleaved pairs, all won, 2026-11-27).
 * A 1-NF chain is the same either way; its NF a step below the manager
 * carried less (3.37 against 3.58). */
static int32_t
nice_of(const struct sq_config *cfg, uint16_t service, bool below_mgr)
{
	int32_t less = INT32_MIN;

	for (uint16_t c = 0; c < cfg->n_chains; c++) {
		const struct sq_cfg_chain *ch = &cfg->chains[c];
		int32_t step = sq_config_hop_nice_step(ch, below_mgr);

		for (uint16_t h = 0; h < ch->n_hops; h++) {
			if (ch->services[h] != service)
				continue;
			if (below_mgr)
				less = RTE_MAX(less, -RTE_MIN((ch->n_hops - 1 - h) * step,
							      MGR_CORE_HOP_SPAN));
			else
				less = RTE_MAX(less, h * step);
		}
	}
	if (less == INT32_MIN)
		less = 0;
	return RTE_MAX(-20, RTE_MIN(19, cfg->services[service].nice - less));
}

/* NFs pinned to the CPU of one of the manager's lcores (manager.nf_core):
 * they share its core, and run at manager.nice with it (nice_on_core). */
static bool
on_manager_core(const struct mgr *mgr)
{
	unsigned int lcore;

	if (mgr->cfg->nf_core < 0)
		return false;
	RTE_LCORE_FOREACH(lcore)
	{
		if (rte_lcore_to_cpu_id((int)lcore) == mgr->cfg->nf_core)
			return true;
	}
	return false;
}

/* nice_of, and for NFs that share the manager's core manager.nice on top:
 * the manager's tasks above the host's programs there, and among themselves
 * as their services say (were the manager alone above them, it would take
 * the core from them between its yields, and their rings would overflow). */
static int32_t
nice_on_core(const struct mgr *mgr, uint16_t service)
{
	bool shared = on_manager_core(mgr);
	int32_t nice = nice_of(mgr->cfg, service, shared);

	if (shared)
		nice += mgr->cfg->mgr_nice;
	return RTE_MAX(-20, RTE_MIN(19, nice));
}

/* Is the service a hop after the first in every chain it is in, each a
 * direct chain: fed only by the hop before it, NF to NF? */
static bool
lane_fed_only(const struct sq_config *cfg, uint16_t service)
{
	bool in_a_chain = false;

	for (uint16_t c = 0; c < cfg->n_chains; c++)
		for (uint16_t h = 0; h < cfg->chains[c].n_hops; h++) {
			if (cfg->chains[c].services[h] != service)
				continue;
			if (h == 0 || !cfg->chains[c].direct)
				return false;
			in_a_chain = true;
		}
	return in_a_chain;
}

/* sched_batch auto: only an NF whose wakers run on its own core. Woken from
 * another core, it must take its core at once from whatever runs there (a
 * SCHED_BATCH NF waits for the tick, milliseconds, while its ring fills:
 * the 1-NF chain_length chain, fed by the manager on core 0, lost half its
 * NDR so). Its wakers: the manager's (one) lcore, and for a hop after the
 * first of a direct chain, the hop before it, pinned to the same core. */
static bool
wakers_share_core(const struct mgr *mgr, uint16_t service)
{
	int32_t core = mgr->cfg->nf_core;

	if (core < 0)
		return false;
	if (rte_lcore_count() == 1 && core == rte_lcore_to_cpu_id((int)rte_get_main_lcore()))
		return true;
	return lane_fed_only(mgr->cfg, service);
}

/* SCHED_BATCH (services[].sched_batch) only takes away wakeup preemption:
 * an NF woken by the task running on its core (the previous hop of its
 * chain, handing it a burst; the manager, on a core they share) waits until
 * that one sleeps or yields, instead of taking the core at once and handing
 * it back later only for the waker to go to sleep: one task switch per hop
 * instead of two. 10 NFs of a direct chain on one core at 1.8 Mpps: p50
 * 71-75 us, against 96-103 us under SCHED_OTHER (docs/config.md). */
static bool
wants_batch(const struct mgr *mgr, uint16_t service)
{
	uint32_t mode = mgr->cfg->services[service].sched_batch;

	return mode == SQ_BATCH_ON || (mode == SQ_BATCH_AUTO && wakers_share_core(mgr, service));
}

int
mgr_nf_set_policy(struct mgr *mgr, struct mgr_nf *nf, uint32_t prio)
{
	bool batch = prio == 0 && wants_batch(mgr, nf->service);
	struct sched_param sp = {.sched_priority = (int)RTE_MIN(prio, 99u)};
	int policy = prio > 0 ? SCHED_RR : SCHED_OTHER;

	if (batch)
		policy = SCHED_BATCH;
	if (nf->pid <= 0)
		return -ESRCH;
	if (sched_setscheduler(nf->pid, policy, &sp) < 0)
		return -errno;
	nf->sched_priority = (uint32_t)sp.sched_priority;
	nf->sched_batch = batch;
	atomic_store_explicit(&nf->ctl->realtime, prio > 0, memory_order_relaxed);
	return 0;
}

/* SCHED_RR at the NF's own priority, or its normal policy and nice. Without
 * the right to real-time scheduling, nice stands in, with a warning. */
static void
apply_priority(struct mgr *mgr, struct mgr_nf *nf)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[nf->service];
	uint32_t prio = mgr_nf_own_priority(mgr, nf);
	int32_t nice = nice_on_core(mgr, nf->service);
	int ret;

	if (prio > 0) {
		ret = mgr_nf_set_policy(mgr, nf, prio);
		if (ret == 0)
			return;
		nice = -(int32_t)RTE_MIN(19u, prio / 5 + 1);
		MGR_LOG(WARNING, "%s#%u: SCHED_RR %u not allowed (%s); using nice %d\n", cs->name,
			nf->instance, prio, strerror(-ret), nice);
	}
	/* (SCHED_OTHER it has from the manager: no call then, as before) */
	nf->sched_priority = 0;
	nf->sched_batch = false;
	if (wants_batch(mgr, nf->service) && (ret = mgr_nf_set_policy(mgr, nf, 0)) < 0)
		MGR_LOG(WARNING, "%s#%u: cannot set SCHED_BATCH: %s\n", cs->name, nf->instance,
			strerror(-ret));
	/* Also a nice of 0: an NF started by the manager's lcore begins with
	 * that lcore's (manager.nice), which is not the NF's. */
	if (setpriority(PRIO_PROCESS, (id_t)nf->pid, nice) < 0) {
		if (errno != ESRCH) /* (gone already: its exit is reaped and told) */
			MGR_LOG(WARNING, "%s#%u: cannot set nice %d: %s\n", cs->name, nf->instance,
				nice, strerror(errno));
		return;
	}
	nf->nice = nice;
}

void
mgr_nfs_renice(struct mgr *mgr)
{
	for (uint32_t i = 0; i < mgr->n_nfs; i++) {
		struct mgr_nf *nf = &mgr->nfs[i];
		int32_t nice;

		if (nf->pid <= 0 || !atomic_load(&nf->live) || nf->sched_priority != 0)
			continue;
		nice = nice_on_core(mgr, nf->service);
		if (nice != nf->nice && setpriority(PRIO_PROCESS, (id_t)nf->pid, nice) == 0)
			nf->nice = nice;
	}
}

/* An original an isolated NF held a copy of when it died: the manager's
 * again, dropped under the cause. */
struct parked_drop {
	struct mgr *mgr;
	struct mgr_nf *nf;
	enum sq_drop cause;
};

static void
drop_parked(struct rte_mbuf *m, void *arg)
{
	struct parked_drop *d = arg;

	if (mgr_guard_take(m, d->nf->id) != GUARD_NOT_OURS) /* (never: parked, so given) */
		mgr_drop(&d->mgr->tx.stats, d->cause, m);
}

/* An NF's descriptors and its uid's processes and threads: enough for a
 * crypto or regex library's files and a worker thread pool, not for a fork
 * bomb or a descriptor flood. */
#define NF_MAX_FDS   256
#define NF_MAX_TASKS 256

/* Variables an NF keeps from the manager's environment; the rest (and any
 * SQUALL_* of the manager's own caller) is not passed on. */
static const char *const env_keep[] = {
	"PATH=", "LANG=", "LC_ALL=", "TZ=", "HOME=", "LD_LIBRARY_PATH=", "SQUALL_LOG_LEVEL="};

/* The NF's argv: its exec, the config's args. The region and NF id go in the
 * environment, so NF options stay the NF author's own. The environment is
 * minimal, and the manager's SQUALL_* values are the only ones. */
int
mgr_nfs_spawn(struct mgr *mgr, struct mgr_nf *nf)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[nf->service];
	char *argv[SQ_MAX_NF_ARGS + 2];
	char env_region[SQ_CFG_PATH_LEN + 16], env_id[32], env_fd[32], env_pid[32];
	char *envp[RTE_DIM(env_keep) + 5];
	struct mgr_spawn sp = {
		.exec = cs->exec,
		.argv = argv,
		.envp = envp,
		.keep_fd = nf->iso != NULL ? nf->iso->fd : mgr->region_fd,
		.stdin_fd = mgr->devnull_fd,
		.parent = getpid(),
		.max_fds = NF_MAX_FDS,
		.max_tasks = NF_MAX_TASKS,
	};
	char log_name[SQ_NAME_LEN + 16];
	const char *step = "";
	size_t n_env = 0;
	int ret, log_fd;

	for (size_t k = 0; k < RTE_DIM(env_keep); k++) {
		for (char **e = environ; *e != NULL; e++) {
			if (strncmp(*e, env_keep[k], strlen(env_keep[k])) == 0) {
				envp[n_env++] = *e;
				break;
			}
		}
	}
	/* An isolated NF gets its private region and no path to the shared
	 * one: it is slot 0 of its own (the name is for its messages only). */
	if (nf->iso != NULL)
		snprintf(env_region, sizeof(env_region), "SQUALL_REGION=private:%s#%u", cs->name,
			 nf->instance);
	else
		snprintf(env_region, sizeof(env_region), "SQUALL_REGION=%s", mgr->region_path);
	snprintf(env_id, sizeof(env_id), "SQUALL_NF_ID=%u", nf->iso != NULL ? 0 : nf->id);
	envp[n_env++] = env_region;
	envp[n_env++] = env_id;
	/* The region, at the one number past stdio the NF keeps. */
	snprintf(env_fd, sizeof(env_fd), "SQUALL_REGION_FD=%d", MGR_SPAWN_REGION_FD);
	envp[n_env++] = env_fd;
	/* Ours, to learn our end by (0 in the NF's own pid namespace, where
	 * its parent-death signal tells it): not the region's copy, which any
	 * shared NF can rewrite. */
	snprintf(env_pid, sizeof(env_pid), "SQUALL_MGR_PID=%d",
		 cs->sandbox == SQ_SANDBOX_ISOLATED ? 0 : (int)getpid());
	envp[n_env++] = env_pid;
	envp[n_env] = NULL;
	/* No NF runs as root unless the config says so (manager.nf_user: its
	 * group is the NFs'); each its own uid, of this manager's range. */
	sp.set_user = mgr->cfg->nf_uid != 0 && mgr->uids.index >= 0;
	sp.uid = mgr->uids.index >= 0 ? mgr_uids_of(&mgr->uids, nf->id) : geteuid();
	sp.gid = mgr->cfg->nf_gid != 0 ? mgr->cfg->nf_gid : 65534; /* (nogroup, not root's) */
	sp.data_bytes = (uint64_t)cs->memory_mb << 20;
	{
		struct mgr_cgroup *cg = atomic_load(&mgr->services[nf->service].cgroup);

		/* limits asked for and no group to hold them: not started unlimited */
		const struct sq_cfg_cgroup lim = limits_of(cs);

		if (mgr_cgroup_wanted(&lim) && (cg == NULL || strcmp(cg->name, cs->name))) {
			MGR_LOG(ERR,
				"%s#%u: not started: no cgroup for its limits (logged above)\n",
				cs->name, nf->instance);
			atomic_store(&nf->ctl->state, SQ_NF_DEAD);
			return -ENOENT;
		}
		if (cg != NULL && strcmp(cg->name, cs->name) == 0) {
			sp.cgroup_fds = cg->procs_fd;
			sp.n_cgroup_fds = MGR_CG_N;
		}
	}
	/* (with memory_mb, huge pages of its own would go past it) */
	sp.filter = mgr_sandbox_filter(MGR_SANDBOX_BASE, cs->memory_mb != 0);
	if (cs->sandbox == SQ_SANDBOX_STRICT || cs->sandbox == SQ_SANDBOX_ISOLATED) {
		/* (a uid of its own even where nf_user is root: strict is strict) */
		sp.set_user = mgr->uids.index >= 0;
		sp.filter =
			mgr_sandbox_filter(cs->sandbox == SQ_SANDBOX_ISOLATED ? MGR_SANDBOX_ISOLATED
									      : MGR_SANDBOX_STRICT,
					   true);
		sp.no_core = true;
		sp.namespaces = cs->sandbox == SQ_SANDBOX_ISOLATED;
	}

	argv[0] = (char *)(uintptr_t)cs->exec;
	for (uint32_t i = 0; i < cs->n_args; i++)
		argv[i + 1] = cs->args[i];
	argv[cs->n_args + 1] = NULL;

	atomic_store(&nf->ctl->pid, 0); /* the new process claims the slot */
	mgr_msg_nf_starting(mgr, nf);
	if (nf->iso != NULL) {
		/* Its private region as new: what the last process left there
		 * was reclaimed (drop_ring), and it could have written any of it. */
		/* (set after the regions; the manager's names, not the shared
		 * region's, which a shared NF can write) */
		nf->iso->n_ports = RTE_MIN(mgr->n_ports, (uint16_t)RTE_DIM(nf->iso->port_names));
		for (uint16_t p = 0; p < nf->iso->n_ports; p++)
			snprintf(nf->iso->port_names[p], sizeof(nf->iso->port_names[p]), "%s",
				 mgr->ports[p].name);
		mgr_iso_restart(nf->iso, drop_parked,
				&(struct parked_drop){mgr, nf, SQ_DROP_NF_DIED});
		nf->tx_cons = 0;
		nf->rx_prod = 0;
		nf->ring_broken = false;
	} else if (nf->ring_broken) {
		/* The last process of this slot scrambled its rings (its packets
		 * were reclaimed by their tags): start them anew. */
		rte_ring_reset(nf->rx);
		rte_ring_reset(nf->tx);
		nf->tx_cons = 0;
		nf->rx_prod = 0;
		nf->ring_broken = false;
	}
	snprintf(log_name, sizeof(log_name), "%s#%u", cs->name, nf->instance);
	log_fd = mgr_nflog_open(&mgr->nflog, nf->id, log_name);
	if (log_fd < 0) {
		/* (never the manager's own stderr: it may be a terminal) */
		MGR_LOG(WARNING, "%s: no log pipe (%s): its output goes to /dev/null\n", log_name,
			strerror(-log_fd));
		log_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	}
	sp.log_fd = spawn_fd_slot(log_fd, mgr->spawn_fds[0]);
	if (sp.log_fd != log_fd)
		close(log_fd);
	sp.keep_fd = spawn_fd_slot(sp.keep_fd, mgr->spawn_fds[1]);
	nf->uid = sp.set_user ? sp.uid : geteuid();
	atomic_store(&nf->ctl->state, SQ_NF_SPAWNED);
	nf->start_tsc = rte_rdtsc();
	mgr_ready_start(&nf->ready, mgr_ready_now_ns());
	ret = mgr_spawn(&sp, &nf->pid, &step);
	/* (the NF's ends: its log pipe's write end, its region's copy) */
	if (sp.log_fd == mgr->spawn_fds[0])
		spawn_fd_unslot(mgr, sp.log_fd);
	else if (sp.log_fd >= 0)
		close(sp.log_fd);
	if (sp.keep_fd == mgr->spawn_fds[1])
		spawn_fd_unslot(mgr, sp.keep_fd);
	if (ret != 0) {
		atomic_store(&nf->ctl->state, SQ_NF_DEAD);
		MGR_LOG(ERR, "%s#%u: cannot start %s (%s): %s\n", cs->name, nf->instance, cs->exec,
			step, strerror(-ret));
		return ret;
	}
	if (mgr->cfg->nf_core >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(mgr->cfg->nf_core, &set);
		if (sched_setaffinity(nf->pid, sizeof(set), &set) < 0)
			MGR_LOG(WARNING, "%s#%u: cannot pin to core %d: %s\n", cs->name,
				nf->instance, mgr->cfg->nf_core, strerror(errno));
	}
	apply_priority(mgr, nf);
	return 0;
}

bool
mgr_nf_is_ready(const struct mgr_nf *nf)
{
	uint32_t state = atomic_load(&nf->ctl->state);

	return state == SQ_NF_AWAKE || state == SQ_NF_ASLEEP || state == SQ_NF_WAKING;
}

bool
mgr_nf_ready_overdue(const struct mgr *mgr, struct mgr_nf *nf, uint32_t limit_ms, uint32_t level,
		     const char *then)
{
	uint64_t now = mgr_ready_now_ns();
	uint32_t state;
	char what[160];

	if (!mgr_ready_overdue(&nf->ready, nf->pid, now, limit_ms))
		return false;
	mgr_ready_describe(nf->pid, what, sizeof(what));
	state = atomic_load(&nf->ctl->state);
	rte_log(level, sq_logtype_mgr,
		"squall-mgr: %s#%u (pid %d) not ready after %" PRIu64 " ms, %" PRIu64
		" ms of them its own (limit %u ms; the rest it waited for a "
		"CPU): %s, %s%s\n",
		mgr_nf_service_name(mgr, nf), nf->instance, nf->pid,
		(now - nf->ready.start_ns) / 1000000, nf->ready.used_ns / 1000000, limit_ms,
		state == SQ_NF_SPAWNED ? "not attached to the region yet"
				       : "attached, not in its loop",
		what, then);
	return true;
}

/* Wait until the NF runs its loop: then its start time is measured to the
 * microsecond and a broken NF is reported before traffic starts. */
int
mgr_nfs_wait_ready(struct mgr *mgr, struct mgr_nf *nf)
{
	const struct timespec nap = {.tv_nsec = 20 * 1000};
	int status;

	while (!mgr_nf_is_ready(nf)) {
		if (waitpid(nf->pid, &status, WNOHANG) == nf->pid) {
			MGR_LOG(ERR, "%s#%u (pid %d) exited during start with %s %d\n", nf->name,
				nf->instance, nf->pid, WIFSIGNALED(status) ? "signal" : "status",
				WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			nf->pid = 0;
			atomic_store(&nf->ctl->state, SQ_NF_DEAD);
			return -ECHILD;
		}
		/* (it samples the NF at most every 20 ms: ready.h) */
		if (mgr_nf_ready_overdue(mgr, nf, NF_READY_TIMEOUT_MS, RTE_LOG_ERR, ""))
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
	nf->ready_tsc = rte_rdtsc();
	atomic_store(&nf->live, true);
	(void)mgr;
	return 0;
}

/* A polling NF spins through its whole scheduler slice, so an NF that shares
 * its core waits a slice for its turn: a chain of two poll NFs on one core
 * moved 0.25 Mpps where one moved 6.6 (docs/results, dataplane). Legal, and
 * right for a core of its own, but worth saying at start. */
static void
warn_poll_sharing(const struct mgr *mgr)
{
	uint32_t poll = 0, all = 0;

	for (uint16_t s = 0; s < mgr->cfg->n_services; s++) {
		all += mgr->services[s].n_nfs;
		if (mgr->cfg->services[s].mode == SQ_NF_MODE_POLL)
			poll += mgr->services[s].n_nfs;
	}
	if (mgr->cfg->nf_core >= 0 && poll > 0 && all > 1)
		MGR_LOG(WARNING,
			"%u poll-mode NF(s) share core %d with %u other NF(s): each spins "
			"through its time slice while the others wait; give a poll NF a core "
			"of its own or use mode: sleep\n",
			poll, mgr->cfg->nf_core, all - 1);
}

/* Whom NFs run as, once: root only when asked, and said loudly then. */
static void
say_nf_user(const struct mgr *mgr)
{
	const struct sq_config *cfg = mgr->cfg;

	if (geteuid() != 0 && geteuid() != cfg->nf_uid)
		MGR_LOG(NOTICE, "not root: NFs run as the manager's uid %u, not %s\n",
			(unsigned int)geteuid(), cfg->nf_user);
	else if (cfg->nf_uid == 0)
		MGR_LOG(WARNING,
			"NFs run as root (manager.nf_user %s): an NF's fault can take "
			"the host\n",
			cfg->nf_user);
	else
		MGR_LOG(INFO, "NFs run as %s (uid %u, gid %u), no capabilities\n", cfg->nf_user,
			cfg->nf_uid, cfg->nf_gid);
}

/* Said once, before the first NF starts: what the config's NFs will be. */
void
mgr_nfs_announce(const struct mgr *mgr)
{
	warn_poll_sharing(mgr);
	say_nf_user(mgr);
}

/* What waited in a gone NF's rx ring: from where it had got to, to where
 * the manager had put (nfring.h); a consumer position that makes no sense
 * leaves them all to the owner scan. */
static unsigned int
drop_ring(struct mgr *mgr, struct mgr_nf *nf, enum sq_drop cause)
{
	struct rte_mbuf *const *slots = (struct rte_mbuf *const *)&nf->rx[1];
	uint32_t cons = __atomic_load_n(&nf->rx->cons.tail, __ATOMIC_ACQUIRE);
	uint32_t n = nf->rx_prod - cons;
	unsigned int total = 0;

	/* An isolated NF's ring holds private copies: every original it was
	 * given and did not hand back is parked with the manager. */
	if (nf->iso != NULL) {
		total = mgr_iso_restart(nf->iso, drop_parked,
					&(struct parked_drop){mgr, nf, cause});
		nf->rx_prod = 0;
		nf->tx_cons = 0;
		return total;
	}
	if (n > nf->rx_mask)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rte_mbuf *m = slots[(cons + i) & nf->rx_mask];

		/* The ring's slots are in the region: only what the manager
		 * gave this NF is freed (guard.h). */
		if (mgr_guard_take(m, nf->id) == GUARD_NOT_OURS) {
			mgr->region_corrupt[MGR_CORRUPT_DESCRIPTOR]++;
			nf->bad_descs++;
			continue;
		}
		mgr_drop(&mgr->tx.stats, cause, m);
		total++;
	}
	nf->rx->cons.head = nf->rx->cons.tail = nf->rx_prod;
	return total;
}

/* Every packet of a gone NF, without double frees: first what it handed back
 * (carried out as usual), then what waited in its rx ring; what it had
 * dequeued and was holding is found by the owner tag set at enqueue, in one
 * scan of the pool for every NF that died in the same reap (reclaim_held),
 * and only when some were held. Runs between rounds, when no role has
 * packets for it staged. */
static void
reclaim_nf(struct mgr *mgr, struct mgr_nf *nf, enum sq_drop cause)
{
	unsigned int returned = 0, n, queued;

	while ((n = mgr_tx_drain_nf(mgr, nf)) > 0)
		returned += n;
	mgr_steer_flush(mgr, &mgr->tx);
	/* A broken ring's slots are not to be trusted: the owner scan finds its
	 * packets by their tags all the same. */
	queued = nf->ring_broken && nf->iso == NULL ? 0 : drop_ring(mgr, nf, cause);
	nf->deq_pkts += queued;
	if (mgr_nf_outstanding(mgr, nf) > 0) {
		nf->reclaim_pending = true;
		nf->reclaim_cause = cause;
	}
	if (returned > 0 || queued > 0)
		MGR_LOG(INFO, "%s#%u: %u packets carried out, %u dropped from its ring\n",
			mgr_nf_service_name(mgr, nf), nf->instance, returned, queued);
}

struct held_scan {
	struct mgr *mgr;
	unsigned int found;
};

static void
free_if_held(struct rte_mempool *mp, void *opaque, void *obj, unsigned int idx)
{
	struct held_scan *scan = opaque;
	uint32_t i = mgr_guard_index(obj), owner = i == UINT32_MAX ? 0 : mgr_guard_owner(i);
	struct mgr_nf *nf;

	(void)mp;
	(void)idx;
	/* (the manager's record, not the packet's metadata, which an NF can
	 * rewrite to have another NF's packets freed under it) */
	if ((owner & GUARD_NF_MASK) == 0 || (owner & GUARD_NF_MASK) > scan->mgr->n_nfs)
		return;
	nf = &scan->mgr->nfs[(owner & GUARD_NF_MASK) - 1];
	if (!nf->reclaim_pending)
		return;
	/* Each segment on its own: the links are the NF's to have rewritten. */
	mgr_guard_restore(obj, i);
	if (owner & GUARD_SEG) {
		mgr_guard_clear(obj);
		rte_pktmbuf_free_seg(obj);
		return;
	}
	mgr_drop(&scan->mgr->tx.stats, nf->reclaim_cause, obj);
	nf->deq_pkts++; /* none outstanding after: tx lets it go */
	scan->found++;
}

/* One pass over the pool for every NF marked by reclaim_nf. */
static void
reclaim_held(struct mgr *mgr, uint32_t n_marked)
{
	struct held_scan scan = {.mgr = mgr};

	if (n_marked == 0)
		return;
	rte_mempool_obj_iter(mgr->pool, free_if_held, &scan);
	for (uint32_t i = 0; i < mgr->n_nfs; i++)
		mgr->nfs[i].reclaim_pending = false;
	MGR_LOG(INFO, "%u packets reclaimed from the hands of %u dead NF(s)\n", scan.found,
		n_marked);
}

/* ---- supervision: restarts by the service's policy ---- */

static void
sup_add(struct mgr *mgr, struct mgr_nf *nf, uint32_t state)
{
	if (!nf->sup_listed)
		mgr->sup->ids[mgr->sup->n++] = nf->id;
	nf->sup_listed = true;
	nf->sup_state = state;
	atomic_store(&mgr->sup_busy, true);
}

static void
set_exit_reason(struct mgr_nf *nf, int status)
{
	if (nf->wd_killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
		nf->wd_killed = false;
		snprintf(nf->exit_reason, sizeof(nf->exit_reason), "watchdog");
		return;
	}
	nf->wd_killed = false;
	if (WIFSIGNALED(status)) {
		const char *abbrev = sigabbrev_np(WTERMSIG(status));

		snprintf(nf->exit_reason, sizeof(nf->exit_reason), "signal %d (%s)",
			 WTERMSIG(status), abbrev != NULL ? abbrev : "?");
	} else {
		snprintf(nf->exit_reason, sizeof(nf->exit_reason), "exit %d", WEXITSTATUS(status));
	}
}

/* After a death while running: restart later, or give up (policy, crash
 * loop). Per-flow pool NFs are the director's: it starts new ones. */
static void
schedule_restart(struct mgr *mgr, struct mgr_nf *nf, bool failure)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[nf->service];
	uint64_t hz = rte_get_tsc_hz(), now = rte_rdtsc();
	uint64_t delay_ms;

	if (mgr->services[nf->service].pooled || nf->gave_up)
		return;
	if (cs->restart == SQ_RESTART_NEVER || (cs->restart == SQ_RESTART_ON_FAILURE && !failure)) {
		MGR_LOG(NOTICE, "%s#%u: not restarted (%s; restart: %s)\n", cs->name, nf->instance,
			nf->exit_reason, cs->restart == SQ_RESTART_NEVER ? "never" : "on-failure");
		return;
	}
	if (nf->window_tsc == 0 || now - nf->window_tsc > hz * cs->restart_window_s) {
		nf->window_tsc = now;
		nf->window_restarts = 0;
	}
	if (nf->window_restarts >= cs->restart_limit) {
		nf->gave_up = true;
		atomic_store(&mgr->services[nf->service].failed, true);
		MGR_LOG(ERR,
			"%s#%u: %u restarts within %u s (restart_limit); not restarted again: "
			"service %s failed, its packets are dropped as service_failed\n",
			cs->name, nf->instance, nf->window_restarts, cs->restart_window_s,
			cs->name);
		return;
	}
	/* The first restart in a window at once, then restart_backoff_ms,
	 * doubling up to the cap: a crash loop slows down before it stops. */
	delay_ms = nf->window_restarts == 0 ? 0
					    : (uint64_t)cs->restart_backoff_ms
						      << RTE_MIN(nf->window_restarts - 1, 30u);
	delay_ms = RTE_MIN(delay_ms, (uint64_t)cs->restart_backoff_max_ms);
	nf->window_restarts++;
	nf->restart_at_tsc = now + hz / 1000 * delay_ms;
	MGR_LOG(NOTICE, "%s#%u: restarting in %" PRIu64 " ms (%s; restart %u within %u s)\n",
		cs->name, nf->instance, delay_ms, nf->exit_reason, nf->window_restarts,
		cs->restart_window_s);
	sup_add(mgr, nf, SUP_WAIT);
}

static void
start_again(struct mgr *mgr, struct mgr_nf *nf)
{
	const struct sq_cfg_service *cs = &mgr->cfg->services[nf->service];

	/* A clean state word: the last instance may have died in any state. */
	atomic_store(&nf->ctl->stop, 0);
	atomic_store_explicit(&nf->ctl->realtime, 0, memory_order_relaxed);
	nf->sched_priority = 0;
	nf->nice = 0;
	nf->restarts++;
	if (mgr_nfs_spawn(mgr, nf) < 0) {
		snprintf(nf->exit_reason, sizeof(nf->exit_reason), "spawn failed");
		nf->sup_state = SUP_NONE; /* leaves the list in mgr_nfs_supervise */
		schedule_restart(mgr, nf, true);
		return;
	}
	MGR_LOG(NOTICE, "%s#%u: restarted (pid %d) after %s\n", cs->name, nf->instance, nf->pid,
		nf->exit_reason);
	nf->sup_state = SUP_STARTING;
}

void
mgr_nfs_supervise(struct mgr *mgr)
{
	struct supervisor *sup = mgr->sup;
	uint64_t now = rte_rdtsc(), hz = rte_get_tsc_hz();

	if (sup == NULL)
		return;
	for (uint32_t i = 0; i < sup->n;) {
		struct mgr_nf *nf = &mgr->nfs[sup->ids[i]];

		switch (nf->sup_state) {
		case SUP_WAIT:
			if (now >= nf->restart_at_tsc && !mgr->stop)
				start_again(mgr, nf);
			break;
		case SUP_STARTING:
			if (nf->pid > 0 && mgr_nf_is_ready(nf)) {
				nf->ready_tsc = rte_rdtsc();
				nf->rx_base = nf->ctl->rx_pkts;
				nf->sup_state = SUP_FIRST_PKT;
				atomic_store(&nf->live, true);
			} else if (nf->pid > 0 && !nf->wd_killed &&
				   now - nf->start_tsc > hz / 1000 * NF_READY_TIMEOUT_MS &&
				   mgr_nf_ready_overdue(mgr, nf, NF_READY_TIMEOUT_MS,
							RTE_LOG_WARNING, "; killing it")) {
				kill(nf->pid, SIGKILL);
				nf->wd_killed = true; /* once */
			}
			break;
		case SUP_FIRST_PKT:
			if (nf->ctl->rx_pkts != nf->rx_base) {
				nf->restart_us = (rte_rdtsc() - nf->died_tsc) * 1000000 / hz;
				/* (what to wait on for a restart done: two restarts'
				 * restart_us can be equal to the microsecond) */
				nf->restarts_recovered++;
				nf->sup_state = SUP_NONE;
			}
			break;
		default: break;
		}
		if (nf->sup_state == SUP_NONE) {
			nf->sup_listed = false;
			sup->ids[i] = sup->ids[--sup->n];
			continue;
		}
		i++;
	}
	if (sup->n == 0)
		atomic_store(&mgr->sup_busy, false);
}

/* NFs looked at per control period: with thousands, a walk over all of
 * them takes a few periods, well within any watchdog_ms. */
#define WATCHDOG_SLICE 1024

/* The kernel's view of a process: its state letter and CPU ticks. */
static int
proc_stat(pid_t pid, char *state, uint64_t *ticks)
{
	char path[64], buf[512], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command may hold spaces */
	if (p == NULL || sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
				state, &ut, &st) != 3)
		return -EINVAL;
	*ticks = ut + st;
	return 0;
}

/* No progress for watchdog_ms while awake and holding packets: hung, or
 * only kept off its core (a busy core, a higher-priority NF)? Blocked in the
 * kernel (pause, a read, a stop signal) or burning CPU with nothing to show
 * is hung; runnable with next to no CPU is waiting its turn: look again a
 * window later. */
static bool
nf_is_hung(struct mgr_nf *nf, uint32_t wd_ms)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t ticks;
	char state;
	bool hung;

	if (proc_stat(nf->pid, &state, &ticks) < 0)
		return false; /* gone: the reap will tell */
	if (state != 'R') {
		hung = true;
	} else {
		/* Burning at least half the window: a spin with no progress. */
		hung = nf->wd_ticks != 0 &&
		       (ticks - nf->wd_ticks) * 1000 * 2 >= (uint64_t)wd_ms * (uint64_t)hz;
	}
	nf->wd_ticks = ticks;
	return hung;
}

/* An NF that holds packets (in its ring or its hands) and neither took nor
 * returned one for watchdog_ms is hung: SIGKILL; the reap reclaims its
 * packets and the restart policy applies, with exit reason "watchdog". Only
 * an awake NF can hang: a sleeping or woken one waits for the manager or
 * for its core. Reads /proc only for an NF that made no progress. */
void
mgr_nfs_watchdog(struct mgr *mgr)
{
	uint64_t now = rte_rdtsc(), hz = rte_get_tsc_hz();
	uint32_t n = RTE_MIN(mgr->n_nfs, (uint32_t)WATCHDOG_SLICE);

	for (uint32_t k = 0; k < n; k++) {
		struct mgr_nf *nf = &mgr->nfs[mgr->wd_pos];
		uint32_t wd_ms = mgr->cfg->services[nf->service].watchdog_ms;
		uint64_t progress, held;

		mgr->wd_pos = mgr->wd_pos + 1 < mgr->n_nfs ? mgr->wd_pos + 1 : 0;
		if (wd_ms == 0 || nf->pid <= 0 || nf->wd_killed || !atomic_load(&nf->live))
			continue;
		/* Anything the NF's loop counts: a yield or a spin is not a hang. */
		progress = nf->ctl->rx_pkts + nf->ctl->tx_pkts + nf->ctl->sleeps +
			   nf->ctl->spin_yields + nf->ctl->budget_yields + nf->ctl->tx_full_spins;
		/* (a direct chain's packets are its lane leader's, wherever they
		 * wait in the lane: lane.h) */
		held = mgr_nf_outstanding(mgr, &mgr->nfs[mgr_lane_first(mgr, nf)]);
		if (progress != nf->wd_progress || held == 0 ||
		    atomic_load(&nf->ctl->state) != SQ_NF_AWAKE) {
			nf->wd_progress = progress;
			nf->wd_since_tsc = now;
			nf->wd_ticks = 0;
			continue;
		}
		if (now - nf->wd_since_tsc < hz / 1000 * wd_ms)
			continue;
		nf->wd_since_tsc = now;
		if (!nf_is_hung(nf, wd_ms))
			continue;
		MGR_LOG(WARNING,
			"%s#%u (pid %d): no progress for %u ms holding %" PRIu64
			" packets (watchdog_ms); killing it\n",
			mgr_nf_service_name(mgr, nf), nf->instance, nf->pid, wd_ms, held);
		nf->wd_killed = true;
		nf->watchdog_kills++;
		kill(nf->pid, SIGKILL);
	}
}

static struct mgr_nf *
nf_by_pid(struct mgr *mgr, pid_t pid)
{
	for (uint32_t i = 0; i < mgr->n_nfs; i++)
		if (mgr->nfs[i].pid == pid)
			return &mgr->nfs[i];
	return NULL;
}

/* What waited on a gone lane NF's direct ring (lane.h): the previous hop's
 * NF put it there, the lane's leader owns it. */
static unsigned int
drop_direct_ring(struct mgr *mgr, struct mgr_nf *nf, enum sq_drop cause)
{
	uint32_t mask = nf->direct_slots - 1, cons;
	char name[RTE_RING_NAMESIZE];
	struct rte_mbuf *m[32];
	unsigned int total = 0;
	int n;

	if (nf->direct_rx == NULL)
		return 0;
	/* Both of its ends are gone (the lane went as one): the ring is the
	 * manager's again, read with our geometry (nfring.h) from where its
	 * consumer said it was: a lie there costs only its packets, each still
	 * the guard's to take. At most a ring's worth. */
	cons = __atomic_load_n(&nf->direct_rx->cons.tail, __ATOMIC_ACQUIRE);
	while (total <= mask &&
	       (n = mgr_nfring_dequeue(nf->direct_rx, mask, &cons, (void **)m, RTE_DIM(m))) > 0) {
		for (int i = 0; i < n; i++) {
			struct mgr_nf *owner;

			if (mgr_lane_take(mgr, nf, m[i], &owner) == GUARD_NOT_OURS) {
				mgr->region_corrupt[MGR_CORRUPT_DESCRIPTOR]++;
				continue;
			}
			mgr_drop(&mgr->tx.stats, cause, m[i]);
			owner->deq_pkts++;
			total++;
		}
	}
	snprintf(name, sizeof(name), "sq_direct_%u", nf->id);
	rte_ring_init(nf->direct_rx, name, nf->direct_slots, RING_F_SP_ENQ | RING_F_SC_DEQ);
	return total;
}

/* A direct chain's lane fails as one (lane.h): its NFs hold each other's
 * packets, so the rest are killed (at a stop they are leaving already).
 * @return true once none of them runs. */
static bool
lane_down(struct mgr *mgr, const struct mgr_nf *nf, bool kill_rest)
{
	bool down = true;

	for (uint32_t id = mgr_lane_first(mgr, nf); id != SQ_NF_NONE; id = mgr_lane_next(mgr, id)) {
		struct mgr_nf *m = &mgr->nfs[id];

		if (m == nf || m->pid == 0)
			continue;
		down = false;
		if (kill_rest)
			kill(m->pid, SIGKILL);
	}
	return down;
}

/* The last NF of a lane is gone: what the lane's NFs handed back is carried
 * out, what waited on their rings dropped, and what they held is left to
 * the owner scan (with every NF of the lane down, nothing moves under it);
 * then each is restarted by its policy. @return true if the scan must run. */
static bool
lane_reclaim(struct mgr *mgr, const struct mgr_nf *nf, bool may_restart)
{
	uint32_t first = mgr_lane_first(mgr, nf);
	bool held = false;

	for (uint32_t id = first; id != SQ_NF_NONE; id = mgr_lane_next(mgr, id))
		while (mgr_tx_drain_nf(mgr, &mgr->nfs[id]) > 0)
			;
	mgr_steer_flush(mgr, &mgr->tx);
	for (uint32_t id = first; id != SQ_NF_NONE; id = mgr_lane_next(mgr, id)) {
		struct mgr_nf *m = &mgr->nfs[id];

		if (!m->ring_broken)
			m->deq_pkts += drop_ring(mgr, m, m->lane_cause);
		drop_direct_ring(mgr, m, m->lane_cause);
	}
	for (uint32_t id = first; id != SQ_NF_NONE; id = mgr_lane_next(mgr, id)) {
		struct mgr_nf *m = &mgr->nfs[id];

		if (mgr_nf_outstanding(mgr, m) > 0) {
			m->reclaim_pending = true;
			m->reclaim_cause = m->lane_cause;
			held = true;
		}
		if (m->lane_wait && may_restart && !atomic_load(&m->retiring) &&
		    !m->scale_starting) {
			m->sup_state = SUP_NONE;
			schedule_restart(mgr, m, m->lane_failure);
		}
		m->lane_wait = false;
	}
	return held;
}

/* @return true if it holds packets the owner scan must find. */
static bool
nf_gone(struct mgr *mgr, struct mgr_nf *nf, int status)
{
	bool clean = atomic_load(&nf->ctl->state) == SQ_NF_EXITED;
	bool stopping = mgr->mgr_state == SQ_MGR_STOPPING;
	bool retiring = atomic_load(&nf->retiring);
	bool failure = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	atomic_store(&nf->live, false);
	nf->died_tsc = rte_rdtsc();
	/* rx on another lcore may have picked this NF in the round under way;
	 * two finished rounds later nothing of it is staged or in flight. */
	if (mgr->rx_elsewhere && !mgr->stop) {
		uint64_t seen = atomic_load(&mgr->rx_rounds);

		while (atomic_load(&mgr->rx_rounds) < seen + 2 && !mgr->stop)
			rte_pause();
	}
	set_exit_reason(nf, status);
	/* Expected at shutdown: INFO; otherwise the user should know: WARNING. */
	rte_log((stopping || retiring) && clean ? RTE_LOG_INFO : RTE_LOG_WARNING, sq_logtype_mgr,
		"squall-mgr: %s#%u (pid %d) %s %d\n", nf->name, nf->instance, nf->pid,
		WIFSIGNALED(status) ? "killed by signal" : "exited with",
		WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	nf->pid = 0;
	/* Woken but never ran: it no longer waits for its core. Died awake:
	 * it no longer counts among the awake (a clean exit uncounted itself). */
	if (atomic_load(&nf->ctl->state) == SQ_NF_WAKING)
		atomic_fetch_sub(&nf->hdr->woken[nf->core_group].n, 1);
	else if (!clean && atomic_load(&nf->ctl->state) == SQ_NF_AWAKE)
		atomic_fetch_sub(&mgr->region->awake[nf->core_group].n, 1);
	if (!clean)
		atomic_store(&nf->ctl->state, SQ_NF_DEAD);
	if (nf->lane_leader != SQ_NF_NONE) {
		nf->lane_wait = true;
		nf->lane_failure = failure;
		nf->lane_cause = stopping   ? SQ_DROP_SHUTDOWN
				 : retiring ? SQ_DROP_CONFIG_CHANGED
					    : SQ_DROP_NF_DIED;
		if (!lane_down(mgr, nf, !stopping && !mgr->stop))
			return false;
		return lane_reclaim(mgr, nf, !stopping && !mgr->stop && !retiring);
	}
	reclaim_nf(mgr, nf,
		   stopping   ? SQ_DROP_SHUTDOWN
		   : retiring ? SQ_DROP_CONFIG_CHANGED
			      : SQ_DROP_NF_DIED);
	/* a retired NF (control role: its service removed or shrunk) stays down */
	if (!stopping && !mgr->stop && !retiring && !nf->scale_starting) {
		nf->sup_state = SUP_NONE; /* it may have died before its first packet */
		schedule_restart(mgr, nf, failure);
	}
	return nf->reclaim_pending;
}

/* Their packets are reclaimed: a slot a pool retired may be made again
 * (mgr/director.c). */
static void
mark_reaped(struct mgr_nf **nfs, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		atomic_store_explicit(&nfs[i]->reaped, true, memory_order_release);
}

unsigned int
mgr_nfs_poll(struct mgr *mgr)
{
	unsigned int reaped = 0;
	uint32_t marked = 0;
	struct mgr_nf *gone[64];
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct mgr_nf *nf = nf_by_pid(mgr, pid);

		/* What the NFs wrote before they went, said before they are
		 * reported gone: an NF's last line ("why I die") would else come
		 * a control period after its death. */
		if (reaped == 0)
			mgr_nflog_poll(&mgr->nflog, now_ns());
		if (nf != NULL) {
			marked += nf_gone(mgr, nf, status);
			gone[reaped % RTE_DIM(gone)] = nf;
			reaped++;
			if (reaped % RTE_DIM(gone) == 0) {
				reclaim_held(mgr, marked);
				marked = 0;
				mark_reaped(gone, RTE_DIM(gone));
			}
		}
	}
	/* Before any of them starts again under the same owner tag. */
	reclaim_held(mgr, marked);
	mark_reaped(gone, reaped % RTE_DIM(gone));
	return reaped;
}

static unsigned int
count_running(const struct mgr *mgr)
{
	unsigned int n = 0;

	for (uint32_t i = 0; i < mgr->n_nfs; i++)
		n += mgr->nfs[i].pid > 0;
	return n;
}

void
mgr_nfs_stop_all(struct mgr *mgr)
{
	const struct timespec nap = {.tv_nsec = 200 * 1000};
	uint64_t deadline = rte_rdtsc() + rte_get_tsc_hz() / 1000 * NF_STOP_TIMEOUT_MS;

	mgr_region_set_state(mgr, SQ_MGR_STOPPING);
	for (uint32_t i = 0; i < mgr->n_nfs; i++) {
		atomic_store(&mgr->nfs[i].ctl->stop, 1);
		mgr_wakeup_force(mgr, &mgr->nfs[i]);
	}
	/* Keep carrying out what NFs hand back while they finish. */
	while (count_running(mgr) > 0 && rte_rdtsc() < deadline) {
		mgr_tx_poll(mgr);
		mgr_nfs_poll(mgr);
		nanosleep(&nap, NULL);
	}
	for (uint32_t i = 0; i < mgr->n_nfs; i++) {
		if (mgr->nfs[i].pid > 0) {
			MGR_LOG(WARNING, "%s#%u (pid %d) did not stop in %d ms; killing it\n",
				mgr->cfg->services[mgr->nfs[i].service].name, mgr->nfs[i].instance,
				mgr->nfs[i].pid, NF_STOP_TIMEOUT_MS);
			kill(mgr->nfs[i].pid, SIGKILL);
		}
	}
	while (count_running(mgr) > 0) {
		mgr_nfs_poll(mgr);
		nanosleep(&nap, NULL);
	}
	/* NFs that never ran (a failed start) can still have packets queued. */
	{
		uint32_t marked = 0;

		for (uint32_t i = 0; i < mgr->n_nfs; i++) {
			reclaim_nf(mgr, &mgr->nfs[i], SQ_DROP_SHUTDOWN);
			marked += mgr->nfs[i].reclaim_pending;
		}
		reclaim_held(mgr, marked);
	}
}

void
mgr_nfs_free(struct mgr *mgr)
{
	mgr_nfs_cgroups_free(mgr);
	if (mgr->nflog.slots != NULL) {
		mgr_nflog_drain(&mgr->nflog, now_ns());
		mgr_nflog_free(&mgr->nflog);
	}
	if (mgr->devnull_fd > 0) {
		close(mgr->devnull_fd);
		close(mgr->spawn_fds[0]);
		close(mgr->spawn_fds[1]);
	}
	mgr->devnull_fd = -1;
	mgr_uids_release(&mgr->uids);
	for (uint32_t i = 0; i < mgr->n_nfs; i++) {
		free_private_region(mgr, &mgr->nfs[i], true);
		free_shared_rings(mgr, &mgr->nfs[i]);
		mgr_region_free_ring(mgr, mgr->nfs[i].direct_rx, mgr->nfs[i].direct_slots);
		mgr->nfs[i].direct_rx = NULL;
	}
	mgr_lane_free(mgr);
	while (mgr->iso_retired != NULL) {
		struct mgr_iso *iso = mgr->iso_retired;

		mgr->iso_retired = iso->retired_next;
		mgr_iso_destroy(iso);
		free(iso);
	}
	free(mgr->nfs);
	free((void *)mgr->iso_bits);
	mgr->iso_bits = NULL;
	mgr->nfs = NULL;
	mgr->n_nfs = 0;
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++)
		mgr->services[s].n_nfs = 0;
	if (mgr->sup != NULL)
		free(mgr->sup->ids);
	free(mgr->sup);
	mgr->sup = NULL;
}

/* ---- the control role's: NFs of services added, resized or removed while
 * running (mgr/control.c). The main lcore still reaps and reclaims them. */

int
mgr_nfs_setup(struct mgr *mgr, uint32_t id, uint16_t service, uint16_t instance)
{
	struct mgr_nf *nf = &mgr->nfs[id];
	int ret;

	if (id >= mgr->region->max_nfs)
		return -ENOSPC;
	nf->id = id;
	/* what supervision knew of the slot's last NF is not this one's */
	nf->gave_up = false;
	nf->window_tsc = 0;
	nf->window_restarts = 0;
	nf->restarts = 0;
	nf->restarts_recovered = 0;
	nf->wd_killed = false;
	nf->exit_reason[0] = '\0';
	ret = init_nf(mgr, nf, service, instance);
	if (ret < 0)
		return ret;
	/* the reaper and the stats look at ids below n_nfs */
	if (id >= mgr->n_nfs)
		__atomic_store_n(&mgr->n_nfs, id + 1, __ATOMIC_RELEASE);
	return 0;
}

void
mgr_nfs_retire(struct mgr *mgr, struct mgr_nf *nf)
{
	atomic_store(&nf->retiring, true);
	if (nf->pid <= 0)
		return;
	/* A STOP message, or the stop word where its ring refuses one (full,
	 * or an NF that lies about it): either ends the loop after the burst. */
	if (mgr_msg_send(mgr, nf, SQ_MSG_STOP, NULL, 0) < 0)
		atomic_store(&nf->ctl->stop, 1);
	mgr_wakeup_force(mgr, nf);
}
