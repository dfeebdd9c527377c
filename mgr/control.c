/* SPDX-License-Identifier: BSD-3-Clause
 * control role: change a running manager's configuration (issue 14).
 *
 * A change is a whole new configuration. The control path (a telemetry
 * thread) loads and checks it with the same loader as at start, works out
 * what differs from the running one, and builds the next running config:
 * services keep their indexes, a chain whose hops are unchanged keeps its
 * slot (and so its counters and its packets in flight), a new or changed
 * chain takes a free slot with a new generation. The rx role takes the next
 * config between two of its rounds, so every packet is steered by the old
 * rule set or the new one, never a mix; the old config is freed once the rx
 * and tx roles have each finished a round that began after the switch (the
 * round counters they already publish are the epoch), so no role can still
 * read it.
 *
 * A packet carries its chain's generation (SQ_META_CHAIN_GEN): when it comes
 * back from an NF and its chain was removed or changed meanwhile, the tx
 * role counts it under "chain changed while in flight" rather than steer it
 * by a definition it never entered.
 *
 * Services are added, resized and removed with their NFs: a new service's
 * NFs start before the switch (from an intermediate config that holds the
 * service and no chain using it), on reserved NF ids (max_instances, or a
 * removed service's ids); instances beyond the old count start before the
 * switch too. After it, instances no longer wanted and removed services are
 * drained (they hand back what they hold), stopped and reaped, and their ids
 * kept for later services. NFs are started on the main lcore
 * (mgr_control_poll): an NF's parent-death signal follows the thread that
 * spawned it.
 *
 * What cannot change at run time (ports, the region, a service's program or
 * mode, per-flow pools) is refused with the field named; nothing changes
 * then.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rte_telemetry.h>

#include "config_edit.h"
#include "config_emit.h"
#include "control.h"
#include "held.h"
#include "mgr.h"
#include "tel_reply.h"

/* How long the control path waits for the roles to take a config and to
 * finish a round after it: they take it within a round, microseconds, but a
 * host this loaded (a soak, hundreds of NFs runnable) starved the manager's
 * lcore past 2 s. Only a wedged manager should reach it. */
#define TAKE_TIMEOUT_MS 10000

/* How long a removed NF may take to hand back what it holds, then to exit
 * once asked; after that it is killed (and what it held reclaimed). */
#define DRAIN_TIMEOUT_MS    2000
#define NF_READY_TIMEOUT_MS 3000
#define STOP_TIMEOUT_MS     3000

/* A chunk of `get config` per telemetry reply: one string of a reply holds
 * less than RTE_TEL_MAX_SINGLE_STRING_LEN (8 KiB), a string in a dict less
 * than RTE_TEL_MAX_STRING_LEN (128 bytes). */
#define CONFIG_CHUNK_BYTES 4096

static struct {
	struct mgr *mgr;
	char nf_path[4096];
	pthread_mutex_t lock;        /* one change at a time; readers of cfg */
	bool cfg_owned;              /* the running cfg was allocated here */
	uint16_t gen[SQ_MAX_CHAINS]; /* last generation given to each chain slot */
	uint16_t next_slot;          /* where the search for a free slot starts */
	uint64_t applies, changes;
	/* NF id ranges of removed services, for services added later */
	struct id_range {
		uint32_t first, cap;
	} free_ids[SQ_MAX_SERVICES];
	unsigned int n_free_ids;
	/* an NF to start on the main lcore (mgr_control_poll), and the result */
	struct mgr_nf *_Atomic spawn_req;
	_Atomic int spawn_ret;
	_Atomic bool spawn_done;
	_Atomic uint64_t ticks; /* main lcore control ticks: a reap begun before has ended */
	char *text;             /* the running config as YAML, for get config */
	size_t text_len;
	pthread_t drainer; /* ends draining chains (mgr_control_drain) */
	bool drainer_running;
	uint64_t drained; /* draining chains gone after their last flow */
} ctl = {.lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP}; /* an edit applies under it */

void
mgr_control_lock(void)
{
	pthread_mutex_lock(&ctl.lock);
}

bool
mgr_control_lock_within(uint32_t ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	return pthread_mutex_timedlock(&ctl.lock, &until) == 0;
}

bool
mgr_control_trylock(void)
{
	return pthread_mutex_trylock(&ctl.lock) == 0;
}

void
mgr_control_unlock(void)
{
	pthread_mutex_unlock(&ctl.lock);
}

/* ---------------------------------------------------------------- the plan */

/* A key added to the config must be placed here: may it change while
 * running (then the plan applies it) or not (then the plan refuses a
 * change)? Otherwise an apply would drop it silently. These sizes trip
 * when a struct grows; config_emit.c must write the new key too. */
static_assert(offsetof(struct sq_config, ports) == 732, "manager key: plan_manager");
static_assert(sizeof(struct sq_cfg_service) == 896, "service key: plan_service");
static_assert(sizeof(struct sq_cfg_scale) == 40, "scale key: plan_service");
static_assert(sizeof(struct sq_cfg_wake) == 32, "wake key: same_wake");
static_assert(sizeof(struct sq_cfg_port) == 2092, "port key: same_port");
static_assert(sizeof(struct sq_cfg_rule) == 28, "rule key: same_rule");
static_assert(sizeof(struct sq_cfg_chain) == 80, "chain key: plan_direct");
static_assert(sizeof(struct sq_cfg_gen) == 168, "generator key: plan_generators");

/* What a change does to a service's NFs (the config alone says nothing of
 * processes). */
enum svc_action { SVC_ADD, SVC_REMOVE, SVC_RESIZE };
struct svc_change {
	enum svc_action action;
	uint16_t service; /* its index in the running config (a new one: its slot) */
	uint32_t from_n, to_n;
};

struct plan {
	char *err;
	size_t err_len;
	unsigned int n_changes;
	char log[2048]; /* what changed, for the NOTICE line */
	size_t log_len;
	struct svc_change svc[SQ_MAX_SERVICES];
	unsigned int n_svc;
	bool end_flows;               /* per-flow flows of what changes end now */
	bool drain[SQ_MAX_CHAINS];    /* running chain slots kept as draining copies */
	bool needed[SQ_MAX_SERVICES]; /* services a draining chain still uses */
};

static int refuse(struct plan *p, const char *path, int line, const char *field, const char *fmt,
		  ...) __rte_format_printf(5, 6);

static int
refuse(struct plan *p, const char *path, int line, const char *field, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(p->err, p->err_len, "%s:%d: %s: ", path, line, field);
	if (n >= 0 && (size_t)n < p->err_len) {
		va_start(ap, fmt);
		vsnprintf(p->err + n, p->err_len - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static void note(struct plan *p, const char *fmt, ...) __rte_format_printf(2, 3);

static void
note(struct plan *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	p->n_changes++;
	if (p->log_len + 2 >= sizeof(p->log))
		return;
	if (p->log_len > 0)
		p->log[p->log_len++] = ';', p->log[p->log_len++] = ' ';
	va_start(ap, fmt);
	n = vsnprintf(p->log + p->log_len, sizeof(p->log) - p->log_len, fmt, ap);
	va_end(ap);
	if (n > 0)
		p->log_len = RTE_MIN(p->log_len + (size_t)n, sizeof(p->log) - 1);
}

static bool
same_args(const struct sq_cfg_service *a, const struct sq_cfg_service *b)
{
	if (a->n_args != b->n_args)
		return false;
	for (uint32_t i = 0; i < a->n_args; i++)
		if (strcmp(a->args[i], b->args[i]) != 0)
			return false;
	return true;
}

static bool
same_port(const struct sq_cfg_port *a, const struct sq_cfg_port *b)
{
	if (strcmp(a->name, b->name) != 0 || a->n_devargs != b->n_devargs ||
	    a->rx_desc != b->rx_desc || a->tx_desc != b->tx_desc)
		return false;
	for (uint16_t i = 0; i < a->n_devargs; i++)
		if (strcmp(a->devargs[i], b->devargs[i]) != 0)
			return false;
	return true;
}

/* Manager keys: those read live may change; the rest size or place things
 * made at start. */
static int
plan_manager(struct plan *p, const struct sq_config *cur, const struct sq_config *n,
	     struct sq_config *next)
{
#define FIXED(field)                                                                        \
	do {                                                                                \
		if (cur->field != n->field)                                                 \
			return refuse(p, n->path, 1, "manager." #field,                     \
				      "cannot change while running (now %lld, asked %lld)", \
				      (long long)cur->field, (long long)n->field);          \
	} while (0)
	if (strcmp(cur->name, n->name) != 0)
		return refuse(p, n->path, 1, "manager.name",
			      "cannot change while running (now \"%s\")", cur->name);
	if (strcmp(cur->nf_user, n->nf_user) != 0)
		return refuse(p, n->path, 1, "manager.nf_user",
			      "cannot change while running (now \"%s\")", cur->nf_user);
	FIXED(region_mb);
	FIXED(mbufs);
	FIXED(mbuf_data_room);
	FIXED(nf_core);
	FIXED(rx_burst);
	FIXED(chain_priority);
	FIXED(max_flows);
	FIXED(max_nfs); /* the region's NF slots, made at start */
	FIXED(flow_idle_timeout_ms);
	FIXED(flow_linger_ms);
	FIXED(flow_half_open_timeout_ms);
	FIXED(flow_unestablished_per_source);
	FIXED(n_attach_uids);
	FIXED(control_realtime);
	if (memcmp(cur->attach_uids, n->attach_uids, sizeof(cur->attach_uids)) != 0)
		return refuse(p, n->path, 1, "manager.attach_users", "cannot change while running");
#undef FIXED
	if (cur->stats_interval_ms != n->stats_interval_ms)
		note(p, "manager.stats_interval_ms %u -> %u", cur->stats_interval_ms,
		     n->stats_interval_ms);
	if (cur->core_wakes_per_s != n->core_wakes_per_s)
		note(p, "manager.core_wakes_per_s %u -> %u", cur->core_wakes_per_s,
		     n->core_wakes_per_s);
	if (cur->idle_sleep_max_us != n->idle_sleep_max_us ||
	    cur->idle_after_us != n->idle_after_us)
		note(p, "manager.idle_sleep_max_us %u -> %u, idle_after_us %u -> %u",
		     cur->idle_sleep_max_us, n->idle_sleep_max_us, cur->idle_after_us,
		     n->idle_after_us);
	next->stats_interval_ms = n->stats_interval_ms;
	next->core_wakes_per_s = n->core_wakes_per_s;
	next->idle_sleep_max_us = n->idle_sleep_max_us;
	next->idle_after_us = n->idle_after_us;
	if (cur->idle_after_load != n->idle_after_load)
		note(p, "manager.idle_after_load %s -> %s", cur->idle_after_load ? "true" : "false",
		     n->idle_after_load ? "true" : "false");
	next->idle_after_load = n->idle_after_load;
	if (cur->core_yield_rounds != n->core_yield_rounds)
		note(p, "manager.core_yield_rounds %u -> %u", cur->core_yield_rounds,
		     n->core_yield_rounds);
	next->core_yield_rounds = n->core_yield_rounds;
	if (cur->rx_backpressure != n->rx_backpressure)
		note(p, "manager.rx_backpressure %s -> %s", cur->rx_backpressure ? "true" : "false",
		     n->rx_backpressure ? "true" : "false");
	next->rx_backpressure = n->rx_backpressure;
	if (cur->mgr_nice != n->mgr_nice)
		note(p, "manager.nice %d -> %d", cur->mgr_nice, n->mgr_nice);
	next->mgr_nice = n->mgr_nice;
	return 0;
}

static int
plan_ports(struct plan *p, const struct sq_config *cur, const struct sq_config *n)
{
	if (cur->n_ports != n->n_ports)
		return refuse(p, n->path, 1, "ports",
			      "ports cannot be added or removed while running (%u now, %u asked)",
			      cur->n_ports, n->n_ports);
	for (uint16_t i = 0; i < n->n_ports; i++)
		if (!same_port(&cur->ports[i], &n->ports[i]))
			return refuse(p, n->path, n->ports[i].line, "ports",
				      "port \"%s\" cannot change while running", n->ports[i].name);
	return 0;
}

static bool
same_wake(const struct sq_cfg_wake *a, const struct sq_cfg_wake *b)
{
	return a->policy == b->policy && a->thresh_pkts == b->thresh_pkts &&
	       a->timeout_ns == b->timeout_ns && a->min_pkts == b->min_pkts &&
	       a->max_pkts == b->max_pkts && a->t_lat_pkts == b->t_lat_pkts;
}

/* A service keeps its index (NF ids, pools and counters hang off it). Keys
 * read live may change; those its NFs were started with may not, yet. */
static int
plan_service(struct plan *p, const struct sq_cfg_service *c, const struct sq_cfg_service *s,
	     const char *path, struct sq_cfg_service *out)
{
#define FIXED(cond, key)                                                                       \
	do {                                                                                   \
		if (!(cond))                                                                   \
			return refuse(p, path, s->line, key,                                   \
				      "service \"%s\": cannot change while running", s->name); \
	} while (0)
	FIXED(strcmp(c->exec, s->exec) == 0, "exec");
	FIXED(same_args(c, s), "args");
	FIXED(c->mode == s->mode, "mode");
	FIXED(c->max_instances == s->max_instances, "max_instances");
	FIXED(c->ring_slots == s->ring_slots, "ring_slots");
	FIXED(c->spin_ns == s->spin_ns, "spin_us");
	FIXED(c->priority == s->priority, "priority");
	FIXED(c->nice == s->nice, "nice");
	FIXED(c->sched_batch == s->sched_batch, "sched_batch");
	FIXED(c->pool_fallback == s->pool_fallback, "pool_fallback");
	FIXED(c->pool_queue_pkts == s->pool_queue_pkts, "pool_queue_pkts");
	FIXED(c->pool_order == s->pool_order, "pool_order");
	FIXED(c->sandbox == s->sandbox, "sandbox");
	FIXED(c->memory_mb == s->memory_mb, "memory_mb");
	/* with or without, its chains' rss flows are pinned or hashed */
	FIXED(c->scale.enabled == s->scale.enabled, "scale");
#undef FIXED
	if (memcmp(&c->scale, &s->scale, offsetof(struct sq_cfg_scale, enabled)) != 0)
		note(p, "service %s: scale %u..%u", s->name, s->scale.min, s->scale.max);
	/* read at each look (mgr/scaler.c); max within max_instances (loader) */
	out->scale = s->scale;
	if (c->instances != s->instances)
		note(p, "service %s: instances %u -> %u", s->name, c->instances, s->instances);
	if (!same_wake(&c->wake, &s->wake))
		note(p, "service %s: wake", s->name);
	if (c->burst_max != s->burst_max)
		note(p, "service %s: burst_max %u -> %u", s->name, c->burst_max, s->burst_max);
	if (c->batch_budget_pkts != s->batch_budget_pkts)
		note(p, "service %s: batch_budget_pkts %u -> %u", s->name, c->batch_budget_pkts,
		     s->batch_budget_pkts);
	if (c->pool_idle != s->pool_idle)
		note(p, "service %s: pool_idle %u -> %u", s->name, c->pool_idle, s->pool_idle);
	if (c->pool_backlog_max != s->pool_backlog_max)
		note(p, "service %s: pool_backlog_max %u -> %u", s->name, c->pool_backlog_max,
		     s->pool_backlog_max);
	if (c->restart != s->restart || c->restart_backoff_ms != s->restart_backoff_ms ||
	    c->restart_backoff_max_ms != s->restart_backoff_max_ms ||
	    c->restart_limit != s->restart_limit || c->restart_window_s != s->restart_window_s)
		note(p, "service %s: restart policy", s->name);
	if (c->watchdog_ms != s->watchdog_ms)
		note(p, "service %s: watchdog_ms %u -> %u", s->name, c->watchdog_ms,
		     s->watchdog_ms);
	/* read at each death and each watchdog look (mgr/nfs.c) */
	out->restart = s->restart;
	out->restart_backoff_ms = s->restart_backoff_ms;
	out->restart_backoff_max_ms = s->restart_backoff_max_ms;
	out->restart_limit = s->restart_limit;
	out->restart_window_s = s->restart_window_s;
	out->watchdog_ms = s->watchdog_ms;
	if (c->max_outstanding_pkts != s->max_outstanding_pkts)
		note(p, "service %s: max_outstanding_pkts %u -> %u", s->name,
		     c->max_outstanding_pkts, s->max_outstanding_pkts);
	out->max_outstanding_pkts = s->max_outstanding_pkts;
	/* written to the service's cgroup after the switch (mgr_nfs_cgroups_sync) */
	if (memcmp(&c->cgroup, &s->cgroup, sizeof(c->cgroup)) != 0)
		note(p, "service %s: cgroup limits", s->name);
	out->cgroup = s->cgroup;
	out->instances = s->instances;
	out->wake = s->wake;
	out->burst_max = s->burst_max;
	out->batch_budget_pkts = s->batch_budget_pkts;
	out->pool_idle = s->pool_idle;
	out->pool_backlog_max = s->pool_backlog_max;
	/* read at each verdict (mgr/tx.c); to_services by the running
	 * indexes (remap_to_services) */
	if (c->out_ports != s->out_ports || c->to_services != s->to_services)
		note(p, "service %s: out_ports, to_services", s->name);
	out->out_ports = s->out_ports;
	return 0;
}

static bool
is_hole(const struct sq_cfg_service *s)
{
	return s->name[0] == '\0';
}

/* A slot for a service added while running: a hole no NF still drains, or
 * a new index. */
static int
free_service_slot(const struct mgr *mgr, const struct sq_config *next, const bool *taken)
{
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++) {
		if (taken[s] || (s < next->n_services && !is_hole(&next->services[s])))
			continue;
		if (mgr->services[s].cap_nfs != 0) /* still draining */
			continue;
		return s;
	}
	return -1;
}

static int
copy_service(struct sq_cfg_service *dst, const struct sq_cfg_service *src)
{
	*dst = *src;
	memset(dst->args, 0, sizeof(dst->args));
	for (uint32_t a = 0; a < src->n_args; a++) {
		dst->args[a] = strdup(src->args[a]);
		if (dst->args[a] == NULL)
			return -ENOMEM;
	}
	return 0;
}

static void
clear_service(struct sq_cfg_service *s)
{
	for (uint32_t a = 0; a < s->n_args; a++)
		free(s->args[a]);
	memset(s, 0, sizeof(*s));
}

static void
add_svc_change(struct plan *p, enum svc_action action, uint16_t service, uint32_t from_n,
	       uint32_t to_n)
{
	p->svc[p->n_svc++] = (struct svc_change){action, service, from_n, to_n};
}

/* Services by name: one that stays keeps its index; a new one takes a free
 * slot; a removed one leaves a hole its NFs drain from. svc_map: n's index
 * -> the running index. */
static int
plan_services(struct plan *p, const struct mgr *mgr, const struct sq_config *cur,
	      const struct sq_config *n, struct sq_config *next, int16_t *svc_map)
{
	bool taken[SQ_MAX_SERVICES] = {false};

	for (uint16_t i = 0; i < n->n_services; i++) {
		int idx = sq_config_service_index(cur, n->services[i].name);

		svc_map[i] = (int16_t)idx;
		if (idx >= 0)
			taken[idx] = true;
	}
	for (uint16_t s = 0; s < cur->n_services; s++) {
		if (is_hole(&cur->services[s]) || taken[s])
			continue;
		if (p->needed[s]) { /* its NFs finish a draining chain's flows */
			if (!cur->services[s].draining)
				note(p, "service %s draining", cur->services[s].name);
			next->services[s].draining = true;
			continue;
		}
		note(p, "service %s removed", cur->services[s].name);
		add_svc_change(p, SVC_REMOVE, s, mgr->services[s].n_nfs, 0);
		clear_service(&next->services[s]);
	}
	for (uint16_t i = 0; i < n->n_services; i++) {
		const struct sq_cfg_service *s = &n->services[i];
		int slot = svc_map[i], ret;

		if (slot >= 0) {
			ret = plan_service(p, &cur->services[slot], s, n->path,
					   &next->services[slot]);
			if (ret < 0)
				return ret;
			/* a scaled service's count is the scaler's: instances
			 * is where it started */
			if (cur->services[slot].instances != s->instances && !s->scale.enabled)
				add_svc_change(p, SVC_RESIZE, (uint16_t)slot,
					       cur->services[slot].instances, s->instances);
			continue;
		}
		slot = free_service_slot(mgr, next, taken);
		if (slot < 0)
			return refuse(p, n->path, s->line, "services",
				      "no free service slot for \"%s\" (%d in use or draining)",
				      s->name, SQ_MAX_SERVICES);
		taken[slot] = true;
		svc_map[i] = (int16_t)slot;
		if (copy_service(&next->services[slot], s) < 0)
			return refuse(p, n->path, s->line, "services", "out of memory");
		next->n_services = (uint16_t)RTE_MAX(next->n_services, slot + 1);
		note(p, "service %s added (%u instances)", s->name, s->instances);
		add_svc_change(p, SVC_ADD, (uint16_t)slot, 0, s->instances);
	}
	return 0;
}

/* The TO verdicts a service may give name services by n's indexes: the
 * running ones, as the chains' hops. */
static void
remap_to_services(const struct sq_config *n, struct sq_config *next, const int16_t *svc_map)
{
	for (uint16_t i = 0; i < n->n_services; i++) {
		uint64_t from = n->services[i].to_services, to = 0;

		if (svc_map[i] < 0)
			continue;
		if (from == UINT64_MAX) {
			to = UINT64_MAX;
		} else {
			for (uint16_t j = 0; j < n->n_services; j++)
				if ((from >> j & 1) && svc_map[j] >= 0)
					to |= UINT64_C(1) << svc_map[j];
		}
		next->services[svc_map[i]].to_services = to;
	}
}

static bool
same_hops(const struct sq_cfg_chain *c, const struct sq_cfg_chain *s, const int16_t *svc_map)
{
	if (c->n_hops != s->n_hops)
		return false;
	for (uint16_t h = 0; h < s->n_hops; h++)
		if (c->services[h] != svc_map[s->services[h]])
			return false;
	return true;
}

static int
free_slot(const bool *taken)
{
	for (uint16_t i = 0; i < SQ_MAX_CHAINS; i++) {
		uint16_t slot = (uint16_t)((ctl.next_slot + i) % SQ_MAX_CHAINS);

		if (!taken[slot]) {
			ctl.next_slot = (uint16_t)(slot + 1);
			return slot;
		}
	}
	return -1;
}

/* Chains by slot: an unchanged chain keeps its slot; a new or changed one
 * takes a slot no chain of either config uses, taken in turn so a slot just
 * freed is the last to be used again. */
static int
plan_chains(struct plan *p, const struct sq_config *cur, const struct sq_config *n,
	    const int16_t *svc_map, struct sq_config *next, int16_t *chain_map)
{
	bool taken[SQ_MAX_CHAINS] = {false};
	uint16_t top = 0;

	for (uint16_t s = 0; s < cur->n_chains; s++)
		taken[s] = cur->chains[s].n_hops > 0;
	for (uint16_t i = 0; i < n->n_chains; i++) {
		int slot = sq_config_chain_index(cur, n->chains[i].name);

		if (slot >= 0 && !same_hops(&cur->chains[slot], &n->chains[i], svc_map))
			slot = -1;
		if (slot >= 0 && cur->chains[slot].hop_nice_step != n->chains[i].hop_nice_step)
			return refuse(p, n->path, n->chains[i].line, "chains",
				      "chain \"%s\": hop_nice_step cannot change while running "
				      "(the NFs' nice is set at their start)",
				      n->chains[i].name);
		chain_map[i] = (int16_t)slot;
	}
	memset(next->chains, 0, sizeof(next->chains));
	for (uint16_t i = 0; i < n->n_chains; i++) {
		int slot = chain_map[i];
		struct sq_cfg_chain *out;

		if (slot < 0) {
			slot = free_slot(taken);
			if (slot < 0)
				return refuse(p, n->path, n->chains[i].line, "chains",
					      "no free chain slot: %d chains in use or draining",
					      SQ_MAX_CHAINS);
			taken[slot] = true;
			chain_map[i] = (int16_t)slot;
			ctl.gen[slot]++;
			note(p, "chain %s %s (slot %d)", n->chains[i].name,
			     sq_config_chain_index(cur, n->chains[i].name) >= 0 ? "changed"
										: "added",
			     slot);
		}
		out = &next->chains[slot];
		*out = n->chains[i];
		for (uint16_t h = 0; h < out->n_hops; h++)
			out->services[h] = (uint16_t)svc_map[n->chains[i].services[h]];
		out->gen = ctl.gen[slot];
		top = RTE_MAX(top, (uint16_t)(slot + 1));
	}
	for (uint16_t s = 0; s < cur->n_chains; s++) {
		if (p->drain[s]) {
			next->chains[s] = cur->chains[s];
			next->chains[s].draining = true;
			top = RTE_MAX(top, (uint16_t)(s + 1));
			if (!cur->chains[s].draining)
				note(p, "chain %s draining (slot %u, %u flows)",
				     cur->chains[s].name, s, mgr_director_chain_flows(ctl.mgr, s));
		} else if (cur->chains[s].draining) {
			note(p, "chain %s drained (slot %u)", cur->chains[s].name, s);
		} else if (cur->chains[s].n_hops > 0 &&
			   sq_config_chain_index(n, cur->chains[s].name) < 0) {
			note(p, "chain %s removed", cur->chains[s].name);
		}
	}
	next->n_chains = top;
	return 0;
}

static bool
same_rule(const struct sq_cfg_rule *a, const struct sq_cfg_rule *b)
{
	return a->in_port == b->in_port && a->has_dst_mac == b->has_dst_mac &&
	       (!a->has_dst_mac || rte_is_same_ether_addr(&a->dst_mac, &b->dst_mac)) &&
	       a->chain == b->chain && a->out_port == b->out_port && a->assign == b->assign &&
	       a->nf_priority == b->nf_priority;
}

/* The rules of draining chains come first: a packet of a flow they carry
 * stays on its old path; any other packet goes on to the rules after them
 * (mgr/rx.c). Then n's rules. */
static int
plan_rules(struct plan *p, const struct sq_config *cur, const struct sq_config *n,
	   const int16_t *chain_map, struct sq_config *next)
{
	uint16_t n_drain = 0, cur_live = 0, k;
	bool changed;

	for (uint16_t i = 0; i < cur->n_rules; i++) {
		cur_live += !cur->rules[i].draining;
		if (cur->rules[i].assign != SQ_ASSIGN_PER_FLOW || !p->drain[cur->rules[i].chain])
			continue;
		if (n_drain + n->n_rules >= SQ_MAX_RULES)
			return refuse(
				p, n->path, 1, "rules",
				"%u rules and %u of chains still draining exceed %d: wait for "
				"their flows to end, or apply with end_flows",
				n->n_rules, n_drain + 1, SQ_MAX_RULES);
		next->rules[n_drain] = cur->rules[i];
		next->rules[n_drain++].draining = true;
	}
	changed = cur_live != n->n_rules;
	for (k = 0; k < cur->n_rules && cur->rules[k].draining; k++)
		;
	for (uint16_t i = 0; i < n->n_rules; i++, k++) {
		struct sq_cfg_rule *r = &next->rules[n_drain + i];

		*r = n->rules[i];
		r->chain = (uint16_t)chain_map[n->rules[i].chain];
		changed = changed || k >= cur->n_rules || !same_rule(&cur->rules[k], r);
	}
	next->n_rules = (uint16_t)(n_drain + n->n_rules);
	if (changed)
		note(p, "rules: %u -> %u", cur_live, n->n_rules);
	return 0;
}

/* A running chain slot that a per-flow rule uses, or used (draining). */
static bool
chain_per_flow(const struct sq_config *cfg, uint16_t slot)
{
	for (uint16_t r = 0; r < cfg->n_rules; r++)
		if (cfg->rules[r].chain == slot && cfg->rules[r].assign == SQ_ASSIGN_PER_FLOW)
			return true;
	return false;
}

/* n has the running chain @p slot as it is: same name, same services. */
static bool
chain_kept(const struct sq_config *cur, const struct sq_config *n, uint16_t slot)
{
	const struct sq_cfg_chain *c = &cur->chains[slot];
	int i = c->draining ? -1 : sq_config_chain_index(n, c->name);

	if (i < 0 || n->chains[i].n_hops != c->n_hops)
		return false;
	for (uint16_t h = 0; h < c->n_hops; h++)
		if (strcmp(cur->services[c->services[h]].name,
			   n->services[n->chains[i].services[h]].name) != 0)
			return false;
	return true;
}

/* A per-flow chain removed or changed while flows are in it stays, as a
 * draining copy in its slot with its rules and services, until its last
 * flow ends (mgr_control_drain): a flow keeps its NFs for its whole life.
 * With end_flows it goes now and its flows end (director: config_ended). */
static void
plan_draining(struct plan *p, const struct sq_config *cur, const struct sq_config *n)
{
	for (uint16_t s = 0; s < cur->n_chains; s++) {
		const struct sq_cfg_chain *c = &cur->chains[s];

		p->drain[s] = !p->end_flows && c->n_hops > 0 && chain_per_flow(cur, s) &&
			      !chain_kept(cur, n, s) && mgr_director_chain_flows(ctl.mgr, s) > 0;
		for (uint16_t h = 0; p->drain[s] && h < c->n_hops; h++)
			p->needed[c->services[h]] = true;
	}
}

static int
plan_generators(struct plan *p, const struct sq_config *cur, const struct sq_config *n)
{
	if (cur->n_gens != n->n_gens ||
	    memcmp(cur->gens, n->gens, sizeof(cur->gens[0]) * cur->n_gens) != 0) {
		bool same = cur->n_gens == n->n_gens;

		/* lines may differ: compare all but them */
		for (uint16_t i = 0; same && i < n->n_gens; i++) {
			struct sq_cfg_gen a = cur->gens[i], b = n->gens[i];

			a.line = b.line = 0;
			same = memcmp(&a, &b, sizeof(a)) == 0;
		}
		if (!same)
			return refuse(p, n->path, n->n_gens ? n->gens[0].line : 1, "generator",
				      "cannot change while running (use /squall/gen_rate)");
	}
	return 0;
}

/* A service that stays keeps how its instances run: a pool of per-flow
 * NFs (each with a flow's state) or instances shared by hash. A new service
 * may be either; a pool may grow and shrink. */
static int
check_pooled(struct plan *p, const char *path, const struct sq_config *cur,
	     const struct sq_config *next, uint16_t s)
{
	bool in_cur = s < cur->n_services && !is_hole(&cur->services[s]);
	bool in_next = s < next->n_services && !is_hole(&next->services[s]);
	bool was, is;

	if (!in_cur || !in_next)
		return 0;
	was = sq_config_service_pooled(cur, s);
	is = sq_config_service_pooled(next, s);
	if (was != is)
		return refuse(p, path, next->services[s].line, "rules",
			      "service \"%s\" would %s per-flow rules: its instances cannot change "
			      "between a per-flow pool and shared ones while running (add a new "
			      "service instead)",
			      next->services[s].name, was ? "lose its" : "gain");
	return 0;
}

/* The same direct chain in both: name, services by name and instances. */
static bool
same_direct(const struct sq_config *a, const struct sq_cfg_chain *ca, const struct sq_config *b,
	    const struct sq_cfg_chain *cb)
{
	if (ca->n_hops != cb->n_hops || ca->direct != cb->direct)
		return false;
	for (uint16_t h = 0; h < ca->n_hops; h++) {
		const struct sq_cfg_service *sa = &a->services[ca->services[h]];
		const struct sq_cfg_service *sb = &b->services[cb->services[h]];

		if (strcmp(sa->name, sb->name) != 0 || sa->instances != sb->instances)
			return false;
	}
	return true;
}

/* Direct chains are made with the manager (their lanes' rings and links,
 * mgr/lane.h) and stay as they are while it runs. */
static int
plan_direct(struct plan *p, const struct sq_config *cur, const struct sq_config *n)
{
	for (uint16_t i = 0; i < n->n_chains; i++) {
		const struct sq_cfg_chain *nc = &n->chains[i];
		int slot = sq_config_chain_index(cur, nc->name);
		bool was = slot >= 0 && cur->chains[slot].direct;

		if ((nc->direct || was) &&
		    (slot < 0 || !same_direct(cur, &cur->chains[slot], n, nc)))
			return refuse(p, n->path, nc->line, "chains",
				      "chain \"%s\" is direct (or was): a direct chain, its "
				      "services and their instances cannot change while running",
				      nc->name);
	}
	for (uint16_t s = 0; s < cur->n_chains; s++)
		if (cur->chains[s].direct && cur->chains[s].n_hops > 0 &&
		    sq_config_chain_index(n, cur->chains[s].name) < 0)
			return refuse(p, n->path, 1, "chains",
				      "chain \"%s\" is direct: it cannot be removed while running",
				      cur->chains[s].name);
	return 0;
}

/* next = cur with n's changes, or an error naming n's file, line and field. */
static int
plan_config(struct plan *p, const struct mgr *mgr, const struct sq_config *cur,
	    const struct sq_config *n, struct sq_config *next)
{
	int16_t svc_map[SQ_MAX_SERVICES], chain_map[SQ_MAX_CHAINS];
	uint16_t saved_slot = ctl.next_slot;
	uint16_t saved_gen[SQ_MAX_CHAINS];
	int ret;

	memcpy(saved_gen, ctl.gen, sizeof(saved_gen));
	plan_draining(p, cur, n);
	ret = plan_direct(p, cur, n);
	if (ret == 0)
		ret = plan_manager(p, cur, n, next);
	if (ret == 0)
		ret = plan_ports(p, cur, n);
	if (ret == 0)
		ret = plan_services(p, mgr, cur, n, next, svc_map);
	if (ret == 0)
		remap_to_services(n, next, svc_map);
	if (ret == 0)
		ret = plan_chains(p, cur, n, svc_map, next, chain_map);
	if (ret == 0)
		ret = plan_rules(p, cur, n, chain_map, next);
	if (ret == 0)
		ret = plan_generators(p, cur, n);
	for (uint16_t s = 0; ret == 0 && s < RTE_MAX(cur->n_services, next->n_services); s++)
		ret = check_pooled(p, n->path, cur, next, s);
	if (ret == 0)
		sq_config_derive(next);
	if (ret < 0) { /* nothing changes: not even the slot bookkeeping */
		ctl.next_slot = saved_slot;
		memcpy(ctl.gen, saved_gen, sizeof(saved_gen));
	}
	return ret;
}

/* A deep copy: the args are the next config's own. */
static int
copy_config(struct sq_config *dst, const struct sq_config *src)
{
	*dst = *src;
	for (uint16_t s = 0; s < SQ_MAX_SERVICES; s++) {
		for (uint32_t a = 0; a < SQ_MAX_NF_ARGS + 1; a++)
			dst->services[s].args[a] = NULL;
		for (uint32_t a = 0; a < src->services[s].n_args; a++) {
			dst->services[s].args[a] = strdup(src->services[s].args[a]);
			if (dst->services[s].args[a] == NULL) {
				sq_config_free(dst);
				return -ENOMEM;
			}
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- the switch */

/* rx role, between two rounds: take the next config, if one waits. */
void
mgr_control_take(struct mgr *mgr)
{
	struct sq_config *next;

	next = atomic_exchange_explicit(&mgr->cfg_next, NULL, memory_order_acq_rel);
	if (next == NULL)
		return;
	mgr_director_rules_changed(mgr, mgr->cfg, next);
	__atomic_store_n(&mgr->cfg, next, __ATOMIC_RELEASE);
	atomic_fetch_add_explicit(&mgr->cfg_swaps, 1, memory_order_release);
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Hand @p next to the rx role and wait until no role can read the old
 * config. @return 0, or -ETIMEDOUT (then nothing changed). */
static int
switch_to(struct mgr *mgr, struct sq_config *next)
{
	uint64_t swaps = atomic_load(&mgr->cfg_swaps), deadline = now_ms() + TAKE_TIMEOUT_MS;
	struct sq_config *old = mgr->cfg, *expect = next;
	uint64_t rx0, tx0;

	atomic_store_explicit(&mgr->cfg_next, next, memory_order_release);
	while (atomic_load(&mgr->cfg_swaps) == swaps) {
		if ((now_ms() > deadline || mgr->stop) &&
		    atomic_compare_exchange_strong(&mgr->cfg_next, &expect, NULL))
			return -ETIMEDOUT;
		expect = next;
		usleep(50);
	}
	/* A round that starts after the switch reads the new config only. */
	rx0 = atomic_load(&mgr->rx_rounds);
	tx0 = atomic_load(&mgr->tx_rounds);
	while ((atomic_load(&mgr->rx_rounds) < rx0 + 2 || atomic_load(&mgr->tx_rounds) < tx0 + 2) &&
	       now_ms() < deadline + TAKE_TIMEOUT_MS && !mgr->stop)
		usleep(50);
	if (ctl.cfg_owned) {
		sq_config_free(old);
		free(old);
	}
	ctl.cfg_owned = true;
	/* before an NF of it starts: groups of added services, changed limits */
	mgr_nfs_cgroups_sync(mgr);
	return 0;
}

/* Effects outside the config struct, once the roles run on it. */
static void
after_switch(struct mgr *mgr, const struct sq_config *before)
{
	const struct sq_config *cfg = mgr->cfg;

	for (uint16_t s = 0; s < cfg->n_services; s++) {
		const struct sq_cfg_service *cs = &cfg->services[s];
		const struct mgr_service *svc = &mgr->services[s];

		if (!same_wake(&before->services[s].wake, &cs->wake))
			mgr_wakeup_set_policy(mgr, s, &cs->wake);
		for (uint32_t i = 0; i < svc->n_nfs; i++) {
			struct sq_nf_ctl *nctl = mgr->nfs[svc->first_nf + i].ctl;

			/* the NF reads both at every burst; steer the cap */
			nctl->burst_max = cs->burst_max;
			nctl->batch_budget_pkts = cs->batch_budget_pkts;
			mgr->nfs[svc->first_nf + i].max_outstanding = cs->max_outstanding_pkts;
		}
	}
}

/* ---------------------------------------------------------------- NFs */

static uint64_t now_ms(void);

/* Contiguous NF ids for a new service: a removed service's range it fits
 * in, else the ids never used. */
static int
take_ids(struct mgr *mgr, uint32_t cap, uint32_t *first)
{
	for (unsigned int i = 0; i < ctl.n_free_ids; i++) {
		if (ctl.free_ids[i].cap < cap)
			continue;
		*first = ctl.free_ids[i].first;
		ctl.free_ids[i].first += cap;
		ctl.free_ids[i].cap -= cap;
		if (ctl.free_ids[i].cap == 0)
			ctl.free_ids[i] = ctl.free_ids[--ctl.n_free_ids];
		return 0;
	}
	if ((uint64_t)mgr->n_nfs + cap > mgr->region->max_nfs)
		return -ENOSPC;
	*first = mgr->n_nfs;
	return 0;
}

static void
give_ids(uint32_t first, uint32_t cap)
{
	if (cap == 0 || ctl.n_free_ids == RTE_DIM(ctl.free_ids))
		return; /* a range lost to reuse, not to the manager */
	ctl.free_ids[ctl.n_free_ids++] = (struct id_range){first, cap};
}

void
mgr_control_poll(struct mgr *mgr)
{
	struct mgr_nf *nf = atomic_load_explicit(&ctl.spawn_req, memory_order_acquire);

	atomic_fetch_add_explicit(&ctl.ticks, 1, memory_order_release);
	if (nf == NULL)
		return;
	atomic_store(&ctl.spawn_ret, mgr_nfs_spawn(mgr, nf));
	atomic_store(&ctl.spawn_req, NULL);
	atomic_store_explicit(&ctl.spawn_done, true, memory_order_release);
}

/* Start @p nf on the main lcore and wait until it runs its loop. */
static int
start_nf(struct mgr *mgr, struct mgr_nf *nf)
{
	uint64_t deadline = now_ms() + TAKE_TIMEOUT_MS;
	struct mgr_nf *expect = nf;
	int ret;

	atomic_store(&ctl.spawn_done, false);
	atomic_store_explicit(&ctl.spawn_req, nf, memory_order_release);
	while (!atomic_load_explicit(&ctl.spawn_done, memory_order_acquire)) {
		if (mgr->stop || (now_ms() > deadline &&
				  atomic_compare_exchange_strong(&ctl.spawn_req, &expect, NULL)))
			return -ETIMEDOUT;
		usleep(50);
	}
	ret = atomic_load(&ctl.spawn_ret);
	if (ret < 0)
		return ret;
	while (!mgr_nf_is_ready(nf)) {
		/* died during start: the main lcore reaped it */
		if (__atomic_load_n(&nf->pid, __ATOMIC_ACQUIRE) <= 0)
			return -ECHILD;
		/* (it samples the NF at most every 20 ms: ready.h) */
		if (mgr->stop ||
		    mgr_nf_ready_overdue(mgr, nf, NF_READY_TIMEOUT_MS, RTE_LOG_ERR, ""))
			return -ETIMEDOUT;
		usleep(20);
	}
	nf->ready_tsc = rte_rdtsc();
	atomic_store(&nf->live, true);
	mgr_director_nf_ready(mgr, nf);
	return 0;
}

/* Start instances [from, to) of a service whose slots are set up. */
static int
start_instances(struct mgr *mgr, uint16_t s, uint32_t from, uint32_t to, char *err, size_t err_len)
{
	struct mgr_service *svc = &mgr->services[s];

	for (uint32_t i = from; i < to; i++) {
		struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];
		int ret = mgr_nfs_setup(mgr, nf->id, s, (uint16_t)i);

		if (ret == 0)
			ret = start_nf(mgr, nf);
		if (ret < 0) {
			snprintf(err, err_len, "service %s: instance %u did not start: %s",
				 mgr_nf_service_name(mgr, nf), i, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* Until the roles hold no earlier view of the services' instances. */
static void
wait_rounds(struct mgr *mgr)
{
	uint64_t rx0 = atomic_load(&mgr->rx_rounds), tx0 = atomic_load(&mgr->tx_rounds);
	uint64_t deadline = now_ms() + TAKE_TIMEOUT_MS;

	while ((atomic_load(&mgr->rx_rounds) < rx0 + 2 || atomic_load(&mgr->tx_rounds) < tx0 + 2) &&
	       now_ms() < deadline && !mgr->stop)
		usleep(50);
}

/* The main lcore clears an NF's pid in its reap, then reclaims what the NF
 * held (a pool scan for all NFs of that reap): its slot may be made again
 * only after the reap ended, two control ticks later (mgr_control_poll runs
 * after mgr_nfs_poll in the main loop). */
static void
wait_reaped(struct mgr *mgr)
{
	uint64_t t0 = atomic_load(&ctl.ticks), deadline = now_ms() + TAKE_TIMEOUT_MS;

	while (atomic_load(&ctl.ticks) < t0 + 2 && now_ms() < deadline && !mgr->stop)
		usleep(200);
}

/* NFs [from, to) of a service take no more packets (n_nfs is below them
 * and the roles have seen it): let them hand back what they hold, stop
 * them, and wait until the main lcore has reaped them. */
static void
retire_instances(struct mgr *mgr, uint16_t s, uint32_t from, uint32_t to)
{
	struct mgr_service *svc = &mgr->services[s];
	uint64_t deadline = now_ms() + DRAIN_TIMEOUT_MS;
	bool busy = true;

	while (busy && now_ms() < deadline && !mgr->stop) {
		busy = false;
		for (uint32_t i = from; i < to; i++) {
			const struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];

			busy = busy || (nf->pid > 0 && (mgr_nf_outstanding(mgr, nf) != 0 ||
							mgr_steer_held(mgr, nf) != 0));
		}
		if (busy)
			usleep(200);
	}
	for (uint32_t i = from; i < to; i++)
		mgr_nfs_retire(mgr, &mgr->nfs[svc->first_nf + i]);
	deadline = now_ms() + STOP_TIMEOUT_MS;
	for (uint32_t i = from; i < to; i++) {
		struct mgr_nf *nf = &mgr->nfs[svc->first_nf + i];
		pid_t pid;

		while ((pid = __atomic_load_n(&nf->pid, __ATOMIC_ACQUIRE)) > 0 && !mgr->stop) {
			if (now_ms() > deadline) {
				MGR_LOG(WARNING, "%s#%u (pid %d) did not stop; killing it\n",
					mgr_nf_service_name(mgr, nf), nf->instance, pid);
				kill(pid, SIGKILL);
				deadline = now_ms() + STOP_TIMEOUT_MS;
			}
			usleep(500);
		}
	}
	wait_reaped(mgr);
}

/* Before the switch: the NFs of added services and added instances run
 * (nothing sends them packets until the new rules do, or n_nfs says). */
static int
grow_services(struct mgr *mgr, const struct plan *p, const struct sq_config *next, char *err,
	      size_t err_len)
{
	for (unsigned int i = 0; i < p->n_svc; i++) {
		const struct svc_change *c = &p->svc[i];
		const struct sq_cfg_service *cs = &next->services[c->service];
		struct mgr_service *svc = &mgr->services[c->service];
		uint32_t first;
		int ret;

		if (c->action == SVC_REMOVE || c->to_n <= c->from_n)
			continue;
		if (c->action == SVC_ADD) {
			if (take_ids(mgr, cs->max_instances, &first) < 0) {
				snprintf(err, err_len,
					 "service %s: no room for %u more NFs (manager.max_nfs %u)",
					 cs->name, cs->max_instances, mgr->region->max_nfs);
				return -ENOSPC;
			}
			svc->first_nf = first;
			svc->cap_nfs = cs->max_instances;
			svc->n_nfs = 0;
			atomic_store(&svc->failed, false); /* a removed service's slot */
			/* every slot, as at start: the loops over NF ids see no
			 * slot without its control block and rings */
			for (uint32_t k = 0; k < svc->cap_nfs; k++) {
				ret = mgr_nfs_setup(mgr, first + k, c->service, (uint16_t)k);
				if (ret < 0) {
					snprintf(err, err_len, "service %s: %s", cs->name,
						 strerror(-ret));
					return ret;
				}
			}
		}
		/* A pool starts its idle target; the director starts the rest
		 * as flows come (up to n_nfs). A pool that grows: only n_nfs. */
		if (sq_config_service_pooled(next, c->service)) {
			uint32_t n = c->action == SVC_ADD
					     ? RTE_MIN(RTE_MAX(cs->pool_idle, 1u), c->to_n)
					     : 0;

			ret = start_instances(mgr, c->service, 0, n, err, err_len);
		} else {
			ret = start_instances(mgr, c->service, c->from_n, c->to_n, err, err_len);
		}
		if (ret < 0)
			return ret;
		__atomic_store_n(&svc->n_nfs, c->to_n, __ATOMIC_RELEASE);
	}
	return 0;
}

/* After the switch: instances removed and services gone stop. */
static void
shrink_services(struct mgr *mgr, const struct plan *p)
{
	bool any = false;

	for (unsigned int i = 0; i < p->n_svc; i++)
		if (p->svc[i].to_n < p->svc[i].from_n) {
			__atomic_store_n(&mgr->services[p->svc[i].service].n_nfs, p->svc[i].to_n,
					 __ATOMIC_RELEASE);
			any = true;
		}
	if (!any)
		return;
	wait_rounds(mgr);
	for (unsigned int i = 0; i < p->n_svc; i++) {
		const struct svc_change *c = &p->svc[i];
		struct mgr_service *svc = &mgr->services[c->service];

		if (c->to_n >= c->from_n)
			continue;
		if (c->action == SVC_RESIZE && sq_config_service_pooled(mgr->cfg, c->service)) {
			/* its NFs beyond serve flows: they stop as those end */
			mgr_director_shrunk(mgr, c->service, p->end_flows);
			continue;
		}
		retire_instances(mgr, c->service, c->to_n, c->from_n);
		if (c->action == SVC_REMOVE) {
			give_ids(svc->first_nf, svc->cap_nfs);
			svc->first_nf = 0;
			svc->cap_nfs = 0;
		}
	}
}

/* Undo grow_services after a failure: what started stops again. */
static void
ungrow_services(struct mgr *mgr, const struct plan *p)
{
	for (unsigned int i = 0; i < p->n_svc; i++) {
		const struct svc_change *c = &p->svc[i];

		if (c->action != SVC_REMOVE && c->to_n > c->from_n)
			__atomic_store_n(&mgr->services[c->service].n_nfs, c->from_n,
					 __ATOMIC_RELEASE);
	}
	wait_rounds(mgr);
	for (unsigned int i = 0; i < p->n_svc; i++) {
		const struct svc_change *c = &p->svc[i];
		struct mgr_service *svc = &mgr->services[c->service];

		if (c->action == SVC_REMOVE || c->to_n <= c->from_n || svc->cap_nfs == 0)
			continue;
		retire_instances(mgr, c->service, c->from_n, c->to_n);
		if (c->action == SVC_ADD) {
			give_ids(svc->first_nf, svc->cap_nfs);
			svc->first_nf = 0;
			svc->cap_nfs = 0;
		}
	}
}

/* A config that is the running one plus @p next's added services, which no
 * chain uses yet: their NFs are set up and started from it. */
static struct sq_config *
with_added_services(const struct mgr *mgr, const struct plan *p, const struct sq_config *next)
{
	struct sq_config *mid = calloc(1, sizeof(*mid));

	if (mid == NULL || copy_config(mid, mgr->cfg) < 0) {
		free(mid);
		return NULL;
	}
	for (unsigned int i = 0; i < p->n_svc; i++) {
		uint16_t s = p->svc[i].service;

		if (p->svc[i].action != SVC_ADD)
			continue;
		clear_service(&mid->services[s]);
		if (copy_service(&mid->services[s], &next->services[s]) < 0) {
			sq_config_free(mid);
			free(mid);
			return NULL;
		}
		mid->n_services = (uint16_t)RTE_MAX(mid->n_services, s + 1);
	}
	return mid;
}

/* Before the switch to @p next: the NFs it adds run. Services added go into
 * the running config first (with no chain using them: nothing changes for
 * packets), since NFs are made and started from the running config. */
static int
start_new_nfs(struct mgr *mgr, const struct plan *p, const struct sq_config *next, char *err,
	      size_t err_len)
{
	bool adds = false, grows = false;
	struct sq_config *mid;
	int ret;

	for (unsigned int i = 0; i < p->n_svc; i++) {
		adds = adds || p->svc[i].action == SVC_ADD;
		grows = grows || p->svc[i].to_n > p->svc[i].from_n;
	}
	if (!grows)
		return 0;
	if (adds) {
		mid = with_added_services(mgr, p, next);
		if (mid == NULL) {
			snprintf(err, err_len, "out of memory");
			return -ENOMEM;
		}
		ret = switch_to(mgr, mid);
		if (ret < 0) {
			sq_config_free(mid);
			free(mid);
			snprintf(err, err_len, "the manager did not take the config within %d ms",
				 TAKE_TIMEOUT_MS);
			return ret;
		}
	}
	ret = grow_services(mgr, p, next, err, err_len);
	if (ret < 0)
		ungrow_services(mgr, p);
	return ret;
}

static void refresh_text(struct mgr *mgr);
static void drainer_start(struct mgr *mgr);

/* Start what @p next adds, switch the roles to it, stop what it removes.
 * @return 0, or < 0 with p->err set and nothing changed. */
static int
switch_planned(struct mgr *mgr, struct plan *p, struct sq_config *next)
{
	struct sq_config before = *mgr->cfg; /* scalars only: after_switch compares wakes */
	bool added[SQ_MAX_SERVICES] = {false};
	int ret;

	for (unsigned int i = 0; i < p->n_svc; i++)
		added[p->svc[i].service] = p->svc[i].action == SVC_ADD;
	ret = start_new_nfs(mgr, p, next, p->err, p->err_len);
	if (ret < 0)
		return ret;
	ret = mgr_director_prepare(mgr, next, added);
	if (ret < 0) {
		snprintf(p->err, p->err_len, "out of memory for the new pools");
		ungrow_services(mgr, p);
		return ret;
	}
	ret = switch_to(mgr, next);
	if (ret < 0) {
		mgr_director_unprepare(mgr);
		ungrow_services(mgr, p);
		snprintf(p->err, p->err_len, "the manager did not take the config within %d ms",
			 TAKE_TIMEOUT_MS);
		return ret;
	}
	shrink_services(mgr, p);
	after_switch(mgr, &before);
	refresh_text(mgr);
	ctl.applies++;
	ctl.changes += p->n_changes;
	return 0;
}

static void
refresh_text(struct mgr *mgr)
{
	char *text;
	size_t len;

	if (sq_config_emit(mgr->cfg, &text, &len) < 0)
		return;
	free(ctl.text);
	ctl.text = text;
	ctl.text_len = len;
}

int
mgr_control_apply(struct mgr *mgr, const char *path, unsigned int flags, char *err, size_t err_len,
		  unsigned int *n_changes)
{
	bool check_only = (flags & MGR_APPLY_CHECK) != 0;
	struct sq_config *n = NULL, *next = NULL;
	struct plan p = {
		.err = err, .err_len = err_len, .end_flows = (flags & MGR_APPLY_END_FLOWS) != 0};
	int ret;

	*n_changes = 0;
	n = calloc(1, sizeof(*n));
	next = calloc(1, sizeof(*next));
	if (n == NULL || next == NULL) {
		ret = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto out_free;
	}
	ret = sq_config_load(path, ctl.nf_path, n, err, err_len);
	if (ret < 0)
		goto out_free;
	mgr_control_lock();
	ret = copy_config(next, mgr->cfg);
	if (ret == 0)
		ret = plan_config(&p, mgr, mgr->cfg, n, next);
	if (ret < 0 || p.n_changes == 0 || check_only) {
		if (ret == 0 && p.n_changes > 0)
			MGR_LOG(INFO, "apply %s (check only): %s\n", path, p.log);
		mgr_control_unlock();
		*n_changes = p.n_changes;
		sq_config_free(next);
		goto out_free;
	}
	ret = switch_planned(mgr, &p, next);
	if (ret < 0) {
		mgr_control_unlock();
		sq_config_free(next);
		goto out_free;
	}
	next = NULL;
	*n_changes = p.n_changes;
	MGR_LOG(NOTICE, "applied %s: %s\n", path, p.log);
	drainer_start(mgr);
	mgr_control_unlock();
out_free:
	if (n != NULL)
		sq_config_free(n);
	free(n);
	free(next);
	return ret;
}

/* ---------------------------------------------------------------- draining */

/* How often the drainer looks for draining chains with no flow left. */
#define DRAIN_POLL_MS 20

static bool
chain_used(const struct sq_config *cfg, uint16_t service)
{
	for (uint16_t c = 0; c < cfg->n_chains; c++)
		for (uint16_t h = 0; h < cfg->chains[c].n_hops; h++)
			if (cfg->chains[c].services[h] == service)
				return true;
	return false;
}

/* Under the control lock: the draining chains whose last flow ended go,
 * with their rules and the services that only they still used; the rest
 * of the running config stays as it is. */
static void
drain_step(struct mgr *mgr)
{
	const struct sq_config *cur = mgr->cfg;
	char err[SQ_CFG_ERR_LEN] = "";
	struct plan p = {.err = err, .err_len = sizeof(err)};
	struct sq_config *next;
	uint16_t kept = 0, top = 0;

	for (uint16_t s = 0; s < cur->n_chains; s++)
		p.drain[s] = cur->chains[s].draining && mgr_director_chain_flows(mgr, s) == 0;
	if (memchr(p.drain, true, sizeof(p.drain)) == NULL)
		return;
	next = calloc(1, sizeof(*next));
	if (next == NULL || copy_config(next, cur) < 0) {
		free(next);
		return;
	}
	for (uint16_t s = 0; s < cur->n_chains; s++) {
		if (p.drain[s]) {
			note(&p, "chain %s drained (slot %u)", cur->chains[s].name, s);
			memset(&next->chains[s], 0, sizeof(next->chains[s]));
		} else if (next->chains[s].n_hops > 0) {
			top = (uint16_t)(s + 1);
		}
	}
	next->n_chains = top;
	for (uint16_t r = 0; r < cur->n_rules; r++)
		if (!(cur->rules[r].draining && p.drain[cur->rules[r].chain]))
			next->rules[kept++] = cur->rules[r];
	next->n_rules = kept;
	for (uint16_t s = 0; s < cur->n_services; s++) {
		if (!cur->services[s].draining || chain_used(next, s))
			continue;
		note(&p, "service %s removed (drained)", cur->services[s].name);
		add_svc_change(&p, SVC_REMOVE, s, mgr->services[s].n_nfs, 0);
		clear_service(&next->services[s]);
	}
	if (switch_planned(mgr, &p, next) < 0) {
		MGR_LOG(WARNING, "draining chains: %s (tried again)\n", err);
		sq_config_free(next);
		free(next);
		return;
	}
	ctl.drained++;
	MGR_LOG(NOTICE, "drained: %s\n", p.log);
}

static bool
any_draining(const struct sq_config *cfg)
{
	for (uint16_t s = 0; s < cfg->n_chains; s++)
		if (cfg->chains[s].draining)
			return true;
	return false;
}

/* A thread of its own: a draining chain ends when its flows do, which no
 * command waits for. It holds the control lock only while it changes. */
static void *
drainer(void *arg)
{
	struct mgr *mgr = arg;

	while (!mgr->stop) {
		usleep(DRAIN_POLL_MS * 1000);
		mgr_control_lock();
		if (!mgr->stop && mgr->mgr_state == SQ_MGR_RUNNING && any_draining(mgr->cfg))
			drain_step(mgr);
		mgr_control_unlock();
	}
	return NULL;
}

/* Under the control lock, after a change: a draining chain needs the drainer. */
static void
drainer_start(struct mgr *mgr)
{
	if (ctl.drainer_running || !any_draining(mgr->cfg))
		return;
	if (pthread_create(&ctl.drainer, NULL, drainer, mgr) != 0) {
		MGR_LOG(WARNING, "no drainer thread: draining chains stay until an apply with "
				 "end_flows\n");
		return;
	}
	pthread_setname_np(ctl.drainer, "sq-drainer");
	ctl.drainer_running = true;
}

/* ---------------------------------------------------------------- telemetry */

/* A text longer than a dict's strings may be (127 bytes), as an array of
 * pieces the client joins: config errors name a whole path. */
static void
add_long_string(struct rte_tel_data *d, const char *key, const char *text)
{
	struct rte_tel_data *arr = rte_tel_data_alloc();
	char piece[RTE_TEL_MAX_STRING_LEN];
	size_t len = strlen(text);

	if (arr == NULL) {
		rte_tel_data_add_dict_string(d, key, text);
		return;
	}
	rte_tel_data_start_array(arr, RTE_TEL_STRING_VAL);
	for (size_t off = 0; off < len; off += sizeof(piece) - 1) {
		snprintf(piece, sizeof(piece), "%s", text + off);
		rte_tel_data_add_array_string(arr, piece);
	}
	rte_tel_data_add_dict_container(d, key, arr, 0);
}

/* Apply a config given as text: the loader reads it from a memfd. Its
 * errors then name /proc/self/fd/N:LINE, a file the user never saw: they
 * are given without it. */
static int
apply_text(struct mgr *mgr, const char *text, bool check, char *err, size_t err_len,
	   unsigned int *n_changes)
{
	size_t len = strlen(text), done = 0;
	char path[64];
	int fd, ret;

	fd = memfd_create("squall-edit", MFD_CLOEXEC);
	if (fd < 0) {
		snprintf(err, err_len, "memfd_create: %s", strerror(errno));
		return -errno;
	}
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			close(fd);
			snprintf(err, err_len, "memfd: %s", strerror(-ret));
			return ret;
		}
		done += (size_t)n;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ret = mgr_control_apply(mgr, path, check ? MGR_APPLY_CHECK : 0, err, err_len, n_changes);
	close(fd);
	if (ret < 0 && strncmp(err, path, strlen(path)) == 0) {
		const char *rest = strchr(err + strlen(path) + 1, ':'); /* past the line */

		if (rest != NULL && rest[1] == ' ')
			memmove(err, rest + 2, strlen(rest + 2) + 1);
	}
	return ret;
}

static int
reply(struct rte_tel_data *d, int ret, const char *err, unsigned int n_changes, bool check)
{
	rte_tel_data_start_dict(d);
	if (ret < 0) {
		add_long_string(d, "error", err[0] ? err : strerror(-ret));
		rte_tel_data_add_dict_int(d, "exit", ret == -EINVAL || ret == -ENOENT ? 2 : 1);
		return 0;
	}
	rte_tel_data_add_dict_u64(d, "changes", n_changes);
	rte_tel_data_add_dict_int(d, "applied", !check && n_changes > 0);
	return 0;
}

static bool
running(void)
{
	return ctl.mgr != NULL && ctl.mgr->region != NULL && ctl.mgr->mgr_state == SQ_MGR_RUNNING &&
	       !ctl.mgr->stop;
}

static bool
parse_long(const char *s, char **end, long *v)
{
	*v = strtol(s, end, 10);
	return *end != s && *v >= 0;
}

/* The parameters of an edit command into @p e; @p buf holds the copy the
 * pointers point into. @return false for a malformed one. */
static bool
edit_params(enum sq_edit_op op, const char *params, char *buf, size_t len, struct sq_config_edit *e)
{
	char *end, *comma;

	if (params == NULL || snprintf(buf, len, "%s", params) >= (int)len || buf[0] == '\0')
		return false;
	*e = (struct sq_config_edit){.op = op, .index = -1, .to = -1};
	switch (op) {
	case SQ_EDIT_RULE_ADD:
		e->fragment = buf;
		if (buf[0] >= '0' && buf[0] <= '9') {
			if (!parse_long(buf, &end, &e->index) || *end != ',')
				return false;
			e->fragment = end + 1;
		}
		return true;
	case SQ_EDIT_RULE_REMOVE: return parse_long(buf, &end, &e->index) && *end == '\0';
	case SQ_EDIT_RULE_MOVE:
		return parse_long(buf, &end, &e->index) && *end == ',' &&
		       parse_long(end + 1, &end, &e->to) && *end == '\0';
	case SQ_EDIT_CHAIN_ADD:
	case SQ_EDIT_SERVICE_ADD: e->fragment = buf; return true;
	case SQ_EDIT_CHAIN_REMOVE:
	case SQ_EDIT_SERVICE_REMOVE: e->name = buf; return true;
	case SQ_EDIT_SERVICE_SET:
		comma = strchr(buf, ',');
		if (comma == NULL)
			return false;
		*comma = '\0';
		e->name = buf;
		e->fragment = comma + 1;
		return true;
	}
	return false;
}

static const char *const edit_usage[] = {
	[SQ_EDIT_RULE_ADD] =
		"expected /squall/rule_add,[AT,]{in_port: P, chain: C, out_port: P, ...}",
	[SQ_EDIT_RULE_REMOVE] = "expected /squall/rule_remove,INDEX",
	[SQ_EDIT_RULE_MOVE] = "expected /squall/rule_move,FROM,TO",
	[SQ_EDIT_CHAIN_ADD] = "expected /squall/chain_add,{name: N, services: [S, ...]}",
	[SQ_EDIT_CHAIN_REMOVE] = "expected /squall/chain_remove,NAME",
	[SQ_EDIT_SERVICE_ADD] = "expected /squall/service_add,{name: N, exec: E, ...}",
	[SQ_EDIT_SERVICE_REMOVE] = "expected /squall/service_remove,NAME",
	[SQ_EDIT_SERVICE_SET] = "expected /squall/service_set,NAME,{KEY: VALUE, ...}",
};

/* One edit of the running config, applied as a whole config is. */
static int
cmd_edit(enum sq_edit_op op, const char *params, struct rte_tel_data *d)
{
	char buf[1024], err[SQ_CFG_ERR_LEN] = "", *text = NULL;
	unsigned int n_changes = 0;
	struct sq_config_edit e;
	int ret;

	if (!running())
		return mgr_tel_error(d, "the manager is starting or stopping");
	if (!edit_params(op, params, buf, sizeof(buf), &e))
		return mgr_tel_error(d, edit_usage[op]);
	mgr_control_lock();
	if (ctl.text == NULL)
		refresh_text(ctl.mgr);
	ret = ctl.text == NULL ? -ENOMEM
			       : sq_config_edit_text(ctl.text, &e, &text, err, sizeof(err));
	if (ret == 0)
		ret = apply_text(ctl.mgr, text, false, err, sizeof(err), &n_changes);
	mgr_control_unlock();
	free(text);
	return reply(d, ret, err, n_changes, false);
}

#define EDIT_CMD(fn, op)                                                           \
	static int fn(const char *cmd, const char *params, struct rte_tel_data *d) \
	{                                                                          \
		(void)cmd;                                                         \
		return cmd_edit(op, params, d);                                    \
	}
EDIT_CMD(cmd_rule_add, SQ_EDIT_RULE_ADD)
EDIT_CMD(cmd_rule_remove, SQ_EDIT_RULE_REMOVE)
EDIT_CMD(cmd_rule_move, SQ_EDIT_RULE_MOVE)
EDIT_CMD(cmd_chain_add, SQ_EDIT_CHAIN_ADD)
EDIT_CMD(cmd_chain_remove, SQ_EDIT_CHAIN_REMOVE)
EDIT_CMD(cmd_service_add, SQ_EDIT_SERVICE_ADD)
EDIT_CMD(cmd_service_remove, SQ_EDIT_SERVICE_REMOVE)
EDIT_CMD(cmd_service_set, SQ_EDIT_SERVICE_SET)

/* "/squall/apply,PATH[,check]": the manager reads PATH itself (a telemetry
 * command is one line of at most 1 KiB; a config is longer). */
static int
cmd_apply(const char *cmd, const char *params, struct rte_tel_data *d)
{
	char path[SQ_CFG_PATH_LEN], err[SQ_CFG_ERR_LEN] = "";
	unsigned int n_changes = 0, flags = 0;
	char *comma;
	int ret;

	(void)cmd;
	if (!running())
		return mgr_tel_error(d, "the manager is starting or stopping");
	if (params == NULL || params[0] == '\0' ||
	    snprintf(path, sizeof(path), "%s", params) >= (int)sizeof(path))
		return mgr_tel_error(d,
				     "expected /squall/apply,PATH[,check][,end_flows] (an absolute "
				     "path)");
	/* flags after the path, in any order */
	while ((comma = strrchr(path, ',')) != NULL) {
		if (strcmp(comma, ",check") == 0)
			flags |= MGR_APPLY_CHECK;
		else if (strcmp(comma, ",end_flows") == 0)
			flags |= MGR_APPLY_END_FLOWS;
		else
			break;
		*comma = '\0';
	}
	ret = mgr_control_apply(ctl.mgr, path, flags, err, sizeof(err), &n_changes);
	return reply(d, ret, err, n_changes, (flags & MGR_APPLY_CHECK) != 0);
}

/* "/squall/config[,OFFSET]": the running config as YAML from OFFSET, at
 * most CONFIG_CHUNK_BYTES; an empty string past the end. */
static int
cmd_config(const char *cmd, const char *params, struct rte_tel_data *d)
{
	char chunk[CONFIG_CHUNK_BYTES + 1];
	unsigned long off = 0;
	size_t n;

	(void)cmd;
	if (params != NULL && params[0] != '\0') {
		char *end;

		off = strtoul(params, &end, 10);
		if (*end != '\0')
			return mgr_tel_error(d, "expected /squall/config[,OFFSET]");
	}
	mgr_control_lock();
	if (ctl.text == NULL && ctl.mgr != NULL && ctl.mgr->cfg != NULL)
		refresh_text(ctl.mgr);
	if (ctl.text == NULL) {
		mgr_control_unlock();
		return mgr_tel_error(d, "out of memory");
	}
	off = RTE_MIN(off, ctl.text_len);
	n = RTE_MIN(ctl.text_len - off, (size_t)CONFIG_CHUNK_BYTES);
	memcpy(chunk, ctl.text + off, n);
	chunk[n] = '\0';
	rte_tel_data_string(d, chunk);
	mgr_control_unlock();
	return 0;
}

static int
cmd_control(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "applies", ctl.applies);
	rte_tel_data_add_dict_u64(d, "changes", ctl.changes);
	rte_tel_data_add_dict_u64(d, "config_swaps",
				  ctl.mgr ? atomic_load(&ctl.mgr->cfg_swaps) : 0);
	rte_tel_data_add_dict_u64(d, "drained_chains", ctl.drained);
	mgr_control_lock();
	if (ctl.mgr != NULL && ctl.mgr->cfg != NULL) {
		const struct sq_config *cfg = ctl.mgr->cfg;
		struct rte_tel_data *dr = rte_tel_data_alloc();

		if (dr != NULL) {
			rte_tel_data_start_dict(dr);
			/* chain name: its flows left (telemetry keys take no
			 * ':', so no slot; a name changed twice while its
			 * first copy drains is listed twice) */
			for (uint16_t s = 0; s < cfg->n_chains; s++)
				if (cfg->chains[s].draining)
					rte_tel_data_add_dict_u64(
						dr, cfg->chains[s].name,
						mgr_director_chain_flows(ctl.mgr, s));
			rte_tel_data_add_dict_container(d, "draining", dr, 0);
		}
	}
	mgr_control_unlock();
	return 0;
}

static const struct {
	const char *name;
	telemetry_cb fn;
	const char *help;
} edits[] = {
	{"/squall/rule_add", cmd_rule_add, "Add a rule. Params: [AT,]{in_port: P, chain: C, ...}"},
	{"/squall/rule_remove", cmd_rule_remove, "Remove the rule at INDEX. Params: INDEX"},
	{"/squall/rule_move", cmd_rule_move, "Move a rule. Params: FROM,TO"},
	{"/squall/chain_add", cmd_chain_add, "Add a chain. Params: {name: N, services: [S, ...]}"},
	{"/squall/chain_remove", cmd_chain_remove, "Remove a chain. Params: NAME"},
	{"/squall/service_add", cmd_service_add, "Add a service. Params: {name: N, exec: E, ...}"},
	{"/squall/service_remove", cmd_service_remove, "Remove a service. Params: NAME"},
	{"/squall/service_set", cmd_service_set,
	 "Change a service. Params: NAME,{KEY: VALUE, ...}"},
};

int
mgr_control_init(struct mgr *mgr, const char *nf_path)
{
	pthread_mutexattr_t attr;

	/* Priority inheritance: a telemetry thread (SCHED_FIFO, ctlprio.h)
	 * that waits for the lock lends its priority to the holder, the main
	 * lcore most often, which an NF spinning on its core at SCHED_RR would
	 * otherwise keep from releasing it for most of a second. */
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	if (pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT) == 0)
		pthread_mutex_init(&ctl.lock, &attr);
	pthread_mutexattr_destroy(&attr);
	ctl.mgr = mgr;
	snprintf(ctl.nf_path, sizeof(ctl.nf_path), "%s", nf_path != NULL ? nf_path : "");
	if (rte_telemetry_register_cmd("/squall/apply", cmd_apply,
				       "Apply a config file to the running manager. Params: "
				       "PATH[,check][,end_flows]") < 0 ||
	    rte_telemetry_register_cmd("/squall/config", cmd_config,
				       "The running config as YAML, 4 KiB at a time. Params: "
				       "[OFFSET]") < 0 ||
	    rte_telemetry_register_cmd("/squall/control", cmd_control,
				       "Counts of applied changes") < 0)
		return -EINVAL;
	for (size_t i = 0; i < RTE_DIM(edits); i++)
		if (rte_telemetry_register_cmd(edits[i].name, edits[i].fn, edits[i].help) < 0)
			return -EINVAL;
	return 0;
}

void
mgr_control_free(struct mgr *mgr, struct sq_config *first)
{
	struct sq_config *cur;

	if (ctl.drainer_running) { /* it ends within DRAIN_POLL_MS of mgr->stop */
		pthread_join(ctl.drainer, NULL);
		ctl.drainer_running = false;
	}
	mgr_control_lock();
	free(ctl.text);
	ctl.text = NULL;
	cur = mgr->cfg;
	/* a telemetry command may still come: it finds the first config */
	__atomic_store_n(&mgr->cfg, first, __ATOMIC_RELEASE);
	if (ctl.cfg_owned && cur != first) {
		sq_config_free(cur);
		free(cur);
	}
	ctl.cfg_owned = false;
	mgr_control_unlock();
}
