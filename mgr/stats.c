/* SPDX-License-Identifier: BSD-3-Clause
 * stats role: sums the per-role counters, prints the periodic one-line
 * summary, and describes ports, NFs and chains to a sink: DPDK telemetry
 * (telemetry.c) or the JSON file written at exit. One walker, two outputs,
 * so the two can never disagree.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "attach.h"
#include "cgroup.h"
#include "held.h"
#include "idle.h"
#include "isolate.h"
#include "mgr.h"
#include "guard.h"
#include "stats.h"

void
mgr_stats_totals(const struct mgr *mgr, struct mgr_totals *t)
{
	memset(t, 0, sizeof(*t));
	t->rx_pkts = mgr->rx.stats.rx_pkts;
	t->tx_pkts = mgr->rx.stats.tx_pkts + mgr->tx.stats.tx_pkts;
	for (int c = 0; c < SQ_DROP_MAX; c++) {
		t->drops[c] = mgr->rx.stats.drops[c] + mgr->tx.stats.drops[c];
		t->drop_pkts += t->drops[c];
	}
}

unsigned int
mgr_mbufs_in_use(const struct mgr *mgr)
{
	if (mgr->pool_audited)
		return mgr->pool_audit.size - mgr->pool_audit.home;
	return mgr->pool != NULL ? rte_mempool_in_use_count(mgr->pool) : 0;
}

static unsigned int
nfs_live(const struct mgr *mgr)
{
	unsigned int n = 0;

	for (uint32_t i = 0; i < mgr->n_nfs; i++)
		n += atomic_load_explicit(&mgr->nfs[i].live, memory_order_relaxed);
	return n;
}

/* DPDK 22.11 telemetry accepts only [A-Za-z0-9_/] in keys; names may hold
 * '-' or whatever an NF chose, so keys are sanitized and each object also
 * carries its real "name" as a value. */
static void
key_from(char *key, size_t len, const char *name)
{
	size_t i;

	for (i = 0; name[i] != '\0' && i + 1 < len; i++)
		key[i] = isalnum((unsigned char)name[i]) || name[i] == '/' ? name[i] : '_';
	key[i] = '\0';
}

/* The NF core's adaptive wake budget (mgr_wakeup_tune): the busiest group. */
static void
adaptive_budget(const struct mgr *mgr, struct stats_sink *s)
{
	uint64_t rate = 0, floor = 0;

	for (unsigned int g = 0; g < SQ_CORE_GROUPS; g++) {
		rate = RTE_MAX(rate, atomic_load(&mgr->core_wakes[g].rate_per_s));
		floor = RTE_MAX(floor, atomic_load(&mgr->core_wakes[g].floor_tsc));
	}
	s->u64(s, "core_wakes_per_s", mgr->cfg->core_wakes_per_s);
	s->u64(s, "adaptive_wakes_per_s", rate);
	s->u64(s, "adaptive_timeout_floor_us", floor * 1000000 / rte_get_tsc_hz());
}

/* The main lcore's sleeps when idle (idle.h): all zero while it polls. */
static void
idle_counts(const struct mgr *mgr, struct stats_sink *s)
{
	const struct mgr_idle *idle = mgr->idle;

	s->begin(s, "idle");
	s->u64(s, "sleep_max_us", mgr->cfg->idle_sleep_max_us);
	s->u64(s, "after_us", mgr->cfg->idle_after_us);
	s->u64(s, "intr_ports", idle != NULL ? idle->n_intr : 0);
	s->u64(s, "sock_ports", idle != NULL ? idle->n_sock : 0);
	s->u64(s, "sleeps", idle != NULL ? idle->sleeps : 0);
	s->u64(s, "slept_us", idle != NULL ? idle->slept_ns / 1000 : 0);
	s->u64(s, "wakes_by_nf", idle != NULL ? idle->wakes_by_nf : 0);
	s->u64(s, "wakes_by_intr", idle != NULL ? idle->wakes_by_intr : 0);
	s->u64(s, "wakes_by_sock", idle != NULL ? idle->wakes_by_sock : 0);
	s->u64(s, "core_yields", idle != NULL ? idle->core_yields : 0);
	s->u64(s, "core_yields_deferred", idle != NULL ? idle->core_yields_deferred : 0);
	s->u64(s, "load_pm", idle != NULL ? idle->load_pm : 0);
	s->u64(s, "after_now_us",
	       idle != NULL ? mgr_idle_after_us(idle, mgr->cfg) : mgr->cfg->idle_after_us);
	s->u64(s, "wakes_by_timer", idle != NULL ? idle->wakes_by_timer : 0);
	s->u64(s, "intr_errors", idle != NULL ? idle->intr_errors : 0);
	s->end(s);
}

void
mgr_stats_visit_totals(const struct mgr *mgr, struct stats_sink *s)
{
	struct mgr_totals t;

	mgr_stats_totals(mgr, &t);
	s->u64(s, "rx_pkts", t.rx_pkts);
	s->u64(s, "tx_pkts", t.tx_pkts);
	s->u64(s, "drop_pkts", t.drop_pkts);
	s->u64(s, "mbufs_in_use", mgr_mbufs_in_use(mgr));
	s->u64(s, "mbufs_port_reserved", mgr->mbufs_port_reserved);
	s->u64(s, "mbufs_double_freed", mgr->pool_audited ? mgr->pool_audit.doubled : 0);
	s->u64(s, "mbufs_total", mgr->pool != NULL ? mgr->pool->size : 0);
	s->u64(s, "nfs_live", nfs_live(mgr));
	s->u64(s, "nfs_total", mgr->n_nfs);
	s->u64(s, "tsc_hz", rte_get_tsc_hz()); /* what NFs' handler_cycles count */
	/* NFs started by hand: given the region, or refused (their uid) */
	s->u64(s, "attach_granted", mgr->attach != NULL ? mgr->attach->granted : 0);
	s->u64(s, "attach_refused", mgr->attach != NULL ? mgr->attach->refused : 0);
	/* What the NFs take in the region: their control blocks and rings. */
	s->u64(s, "nf_ctl_bytes", (uint64_t)mgr->n_nfs * sizeof(struct sq_nf_ctl));
	s->u64(s, "nf_rings_bytes", mgr->nf_rings_bytes);
	adaptive_budget(mgr, s);
	idle_counts(mgr, s);
	s->begin(s, "drops");
	for (int c = 0; c < SQ_DROP_MAX; c++)
		s->u64(s, sq_drop_keys[c], t.drops[c]);
	s->end(s);
	/* Shared state an NF rewrote, found (and repaired) by the manager. */
	s->begin(s, "region_corrupt");
	for (int c = 0; c < MGR_CORRUPT_MAX; c++)
		s->u64(s, mgr_corrupt_keys[c], mgr->region_corrupt[c]);
	s->end(s);
	/* mbuf header fields an NF rewrote, restored by the guard at a take */
	s->begin(s, "headers_restored");
	for (int f = 0; f < GUARD_FIELD_MAX; f++)
		s->u64(s, mgr_guard_field_keys[f], mgr_guard.restored[f]);
	s->end(s);
}

void
mgr_stats_visit_ports(const struct mgr *mgr, struct stats_sink *s)
{
	for (uint16_t i = 0; i < mgr->n_ports; i++) {
		const struct mgr_port *p = &mgr->ports[i];
		struct rte_eth_stats eth = {0};

		if (p->closed)
			eth = p->eth_final;
		else
			rte_eth_stats_get(p->port_id, &eth);
		char key[SQ_CFG_NAME_LEN];

		key_from(key, sizeof(key), p->name);
		s->begin(s, key);
		s->str(s, "name", p->name);
		s->u64(s, "id", i);
		s->str(s, "devargs", p->devargs);
		s->u64(s, "rx_pkts", p->rx_pkts);
		s->u64(s, "rx_bytes", p->rx_bytes);
		s->u64(s, "tx_pkts", p->tx_pkts);
		s->u64(s, "tx_bytes", p->tx_bytes);
		s->u64(s, "rx_eth_missed", eth.imissed + mgr_port_kernel_drops(p) + p->gen_missed);
		s->u64(s, "rx_held", p->rx_held);
		s->u64(s, "rx_eth_errors", eth.ierrors);
		s->u64(s, "rx_nombuf", eth.rx_nombuf);
		s->u64(s, "tx_eth_errors", eth.oerrors);
		s->end(s);
	}
}

/* An isolated NF's copies (isolate.h): the manager's counts, not the NF's. */
static void
visit_isolated(const struct mgr_nf *nf, struct stats_sink *s)
{
	const struct mgr_iso *iso = nf->iso;

	s->u64(s, "isolated", iso != NULL);
	if (iso == NULL)
		return;
	s->u64(s, "private_kb", iso->len >> 10);
	s->u64(s, "private_mbufs", iso->n_mbufs);
	s->u64(s, "copied_in_pkts", iso->pkts_in);
	s->u64(s, "copied_in_bytes", iso->bytes_in);
	s->u64(s, "copied_out_pkts", iso->pkts_out);
	s->u64(s, "copied_out_bytes", iso->bytes_out);
	s->u64(s, "copies_held", mgr_iso_held(iso));
	s->u64(s, "bad_lengths", iso->bad_lengths);
}

static void
visit_nf(const struct mgr *mgr, const struct mgr_nf *nf, struct stats_sink *s)
{
	const struct sq_nf_ctl *ctl = nf->ctl;
	const char *service = mgr->cfg->services[nf->service].name; /* not ctl's: NF-writable */
	char name[SQ_NAME_LEN + 16], key[SQ_NAME_LEN + 16];

	snprintf(name, sizeof(name), "%s/%u", service, nf->instance);
	key_from(key, sizeof(key), name);
	s->begin(s, key);
	s->str(s, "name", name);
	s->u64(s, "id", nf->id);
	s->str(s, "service", service);
	s->u64(s, "instance", nf->instance);
	s->u64(s, "pid", (uint64_t)nf->pid);
	s->u64(s, "uid", (uint64_t)nf->uid);
	s->u64(s, "log_lines_suppressed", mgr_nflog_suppressed(&mgr->nflog, nf->id));
	s->str(s, "state", mgr_nf_state_name(atomic_load(&ctl->state)));
	s->str(s, "mode", ctl->mode == SQ_NF_MODE_POLL ? "poll" : "sleep");
	s->u64(s, "start_us",
	       nf->ready_tsc > nf->start_tsc
		       ? (nf->ready_tsc - nf->start_tsc) * 1000000 / rte_get_tsc_hz()
		       : 0);
	s->u64(s, "restarts", nf->restarts);
	s->u64(s, "bad_descs", nf->bad_descs);
	s->str(s, "exit_reason", nf->exit_reason);
	s->u64(s, "restart_us", nf->restart_us);
	s->u64(s, "restarts_recovered", nf->restarts_recovered);
	s->u64(s, "watchdog_kills", nf->watchdog_kills);
	s->u64(s, "service_failed", atomic_load(&mgr->services[nf->service].failed));
	s->u64(s, "rx_pkts", ctl->rx_pkts);
	s->u64(s, "tx_pkts", ctl->tx_pkts);
	s->u64(s, "drop_verdicts", ctl->drop_verdicts);
	s->u64(s, "bursts", ctl->bursts);
	s->u64(s, "sleeps", ctl->sleeps);
	s->u64(s, "sleep_cancels", ctl->sleep_cancels);
	s->u64(s, "flows_cleaned", ctl->flows_cleaned);
	s->u64(s, "closes_cleaned", atomic_load(&ctl->closes_cleaned));
	s->u64(s, "wakes", ctl->wakes);
	s->u64(s, "tx_full_spins", ctl->tx_full_spins);
	s->u64(s, "budget_yields", ctl->budget_yields);
	s->u64(s, "spin_yields", ctl->spin_yields);
	s->u64(s, "handler_cycles", ctl->handler_tsc);
	s->u64(s, "rx_ring_count", rte_ring_count(nf->rx));
	s->u64(s, "tx_active", atomic_load(&nf->active));
	s->u64(s, "outstanding", mgr_nf_outstanding(mgr, nf));
	s->u64(s, "held", mgr_steer_held(mgr, nf));
	s->u64(s, "held_pkts", mgr->rx.stages[nf->id].held_pkts + mgr->tx.stages[nf->id].held_pkts);
	s->u64(s, "ring_full_drops",
	       mgr->rx.stages[nf->id].ring_full_pkts + mgr->tx.stages[nf->id].ring_full_pkts);
	s->str(s, "wake_policy", mgr_wake_policy_name(nf->wake.policy));
	s->u64(s, "wake_thresh_pkts", nf->wake.thresh_pkts);
	s->u64(s, "wake_timeout_us", nf->wake.timeout_tsc * 1000000 / rte_get_tsc_hz());
	s->u64(s, "wakes_by_thresh", nf->wake.by_thresh);
	s->u64(s, "wakes_by_timeout", nf->wake.by_timeout);
	s->u64(s, "wakes_by_urgent", nf->wake.by_urgent);
	s->u64(s, "sched_priority", nf->sched_priority);
	s->u64(s, "sched_batch", nf->sched_batch);
	s->u64(s, "realtime", atomic_load_explicit(&ctl->realtime, memory_order_relaxed));
	s->u64(s, "nice_plus_20", (uint64_t)(nf->nice + 20));
	s->u64(s, "tx_ring_count", rte_ring_count(nf->tx));
	s->u64(s, "msgs_taken", ctl->msgs_taken);
	s->u64(s, "msgs_unsent", ctl->msgs_unsent);
	/* a direct chain's lane (lane.h): the NF's own counts, as rx_pkts */
	s->u64(s, "direct", nf->lane_leader != SQ_NF_NONE);
	/* what the manager gave it (the rest of its rx_pkts came from its lane) */
	s->u64(s, "given_pkts",
	       atomic_load_explicit(&mgr->rx.stages[nf->id].enq_pkts, memory_order_relaxed) +
		       atomic_load_explicit(&mgr->tx.stages[nf->id].enq_pkts,
					    memory_order_relaxed));
	s->u64(s, "direct_rx_pkts", ctl->direct_rx_pkts);
	s->u64(s, "direct_tx_pkts", ctl->direct_tx_pkts);
	s->u64(s, "direct_wakes", ctl->direct_wakes);
	s->u64(s, "direct_full_pkts", ctl->direct_full_pkts);
	visit_isolated(nf, s);
	/* NF-defined counters, flat with a prefix: telemetry nests one level only. */
	for (int c = 0; c < SQ_NF_COUNTERS; c++) {
		char cname[SQ_NAME_LEN + 4];

		if (ctl->counter_names[c][0] == '\0')
			continue;
		snprintf(name, sizeof(name), "c_%.*s", SQ_NAME_LEN - 1, ctl->counter_names[c]);
		key_from(cname, sizeof(cname), name);
		s->u64(s, cname, ctl->counters[c]);
	}
	s->end(s);
}

void
mgr_stats_visit_nfs(const struct mgr *mgr, struct stats_sink *s, uint32_t first, uint32_t max)
{
	uint32_t end = first + max < mgr->n_nfs ? first + max : mgr->n_nfs;

	for (uint32_t i = first; i < end; i++)
		visit_nf(mgr, &mgr->nfs[i], s);
}

static uint64_t
tsc_to_ns(uint64_t tsc)
{
	return (uint64_t)((double)tsc * 1e9 / (double)rte_get_tsc_hz());
}

/* rx-to-tx latency of the packets that left the chain: upper bucket edges. */
static void
visit_latency(const struct lat_hist *h, struct stats_sink *s)
{
	s->u64(s, "lat_count", h->count);
	s->u64(s, "lat_mean_ns", h->count ? tsc_to_ns(h->sum_tsc / h->count) : 0);
	s->u64(s, "lat_p50_ns", tsc_to_ns(lat_quantile_tsc(h, 0.50)));
	s->u64(s, "lat_p99_ns", tsc_to_ns(lat_quantile_tsc(h, 0.99)));
	s->u64(s, "lat_p999_ns", tsc_to_ns(lat_quantile_tsc(h, 0.999)));
}

void
mgr_stats_visit_chains(const struct mgr *mgr, struct stats_sink *s)
{
	for (uint16_t c = 0; c < mgr->cfg->n_chains; c++) {
		const struct sq_cfg_chain *cc = &mgr->cfg->chains[c];
		char hops[SQ_MAX_HOPS * SQ_CFG_NAME_LEN] = "";
		size_t off = 0;

		if (cc->n_hops == 0) /* a free slot of a running config (control.c) */
			continue;
		for (uint16_t h = 0; h < cc->n_hops; h++)
			off += (size_t)snprintf(hops + off, sizeof(hops) - off, "%s%s",
						h ? "," : "",
						mgr->cfg->services[cc->services[h]].name);
		char key[SQ_CFG_NAME_LEN];

		key_from(key, sizeof(key), cc->name);
		s->begin(s, key);
		s->str(s, "name", cc->name);
		s->u64(s, "id", c);
		s->str(s, "hops", hops);
		s->u64(s, "rx_pkts", mgr->chains[c].rx_pkts);
		s->u64(s, "tx_pkts", mgr->chains[c].tx_pkts);
		s->u64(s, "visits_mismatch", mgr->chains[c].visits_mismatch);
		visit_latency(&mgr->chains[c].lat, s);
		s->u64(s, "to_nf_count", mgr->chains[c].to_nf.count);
		s->u64(s, "to_nf_mean_ns",
		       mgr->chains[c].to_nf.count ? tsc_to_ns(mgr->chains[c].to_nf.sum_tsc /
							      mgr->chains[c].to_nf.count)
						  : 0);
		s->u64(s, "to_nf_p50_ns", tsc_to_ns(lat_quantile_tsc(&mgr->chains[c].to_nf, 0.50)));
		s->u64(s, "to_nf_p99_ns", tsc_to_ns(lat_quantile_tsc(&mgr->chains[c].to_nf, 0.99)));
		s->end(s);
	}
}

/* A count the kernel could not give (a controller missing here) is left out. */
static void
u64_known(struct stats_sink *s, const char *name, long long v)
{
	if (v >= 0)
		s->u64(s, name, (uint64_t)v);
}

void
mgr_stats_visit_cgroups(const struct mgr *mgr, struct stats_sink *s)
{
	for (uint16_t i = 0; i < mgr->cfg->n_services; i++) {
		const struct sq_cfg_service *cs = &mgr->cfg->services[i];
		const struct mgr_cgroup *cg = mgr->services[i].cgroup;
		struct mgr_cg_stats st;
		char key[SQ_CFG_NAME_LEN];

		if (cg == NULL || strcmp(cg->name, cs->name) != 0)
			continue;
		mgr_cgroup_stats(cg, &st);
		key_from(key, sizeof(key), cs->name);
		s->begin(s, key);
		s->str(s, "name", cs->name);
		s->u64(s, "version", (uint64_t)cg->version);
		s->str(s, "cpu_dir", cg->dir[MGR_CG_CPU]);
		s->str(s, "memory_dir", cg->dir[MGR_CG_MEMORY]);
		s->str(s, "pids_dir", cg->dir[MGR_CG_PIDS]);
		s->u64(s, "cpu_max_pct", cg->set.cpu_max_pct);
		s->u64(s, "cpu_weight", cg->set.cpu_weight);
		s->u64(s, "memory_max_mb", cg->set.memory_max_mb);
		s->u64(s, "pids_max", cg->set.pids_max);
		u64_known(s, "cpu_throttled", st.cpu_throttled);
		u64_known(s, "cpu_throttled_us", st.cpu_throttled_us);
		u64_known(s, "memory_bytes", st.memory_bytes);
		u64_known(s, "memory_max_hits", st.memory_max_hits);
		u64_known(s, "oom_kills", st.oom_kills);
		u64_known(s, "pids", st.pids);
		u64_known(s, "pids_max_hits", st.pids_max_hits);
		s->end(s);
	}
}

void
mgr_stats_visit_flows(const struct mgr *mgr, struct stats_sink *s)
{
	struct director_stats st;

	mgr_director_stats(mgr, &st);
	s->u64(s, "flows_active", st.flows_active);
	s->u64(s, "flows_created", st.flows_created);
	s->u64(s, "flows_closed", st.flows_closed);
	s->u64(s, "flows_idle_expired", st.flows_idle_expired);
	s->u64(s, "flows_half_open_expired", st.flows_half_open_expired);
	s->u64(s, "flows_unreplied_expired", st.flows_unreplied_expired);
	s->u64(s, "flows_refused", st.flows_refused);
	s->u64(s, "flows_config_ended", st.flows_config_ended);
	s->u64(s, "flows_ended", st.flows_ended);
	s->u64(s, "handoffs", st.handoffs);
	s->u64(s, "flows_rekeyed", st.flows_rekeyed);
	s->u64(s, "rekeys_refused", st.rekeys_refused);
	s->u64(s, "rekeys_lost", st.rekeys_lost);
	if (st.setup != NULL) {
		s->u64(s, "setup_count", st.setup->count);
		s->u64(s, "setup_ns_p50", tsc_to_ns(lat_quantile_tsc(st.setup, 0.50)));
		s->u64(s, "setup_ns_p99", tsc_to_ns(lat_quantile_tsc(st.setup, 0.99)));
		s->u64(s, "setup_ns_mean",
		       st.setup->count ? tsc_to_ns(st.setup->sum_tsc / st.setup->count) : 0);
	}
}

void
mgr_stats_visit_pools(const struct mgr *mgr, struct stats_sink *s)
{
	for (uint16_t i = 0; i < mgr->cfg->n_services; i++) {
		const char *name = mgr->cfg->services[i].name;
		struct pool_stats ps;
		char key[SQ_CFG_NAME_LEN];

		if (name[0] == '\0') /* a removed service's slot (control.c) */
			continue;
		mgr_director_pool_stats(mgr, i, &ps);
		key_from(key, sizeof(key), name);
		s->begin(s, key);
		s->str(s, "name", name);
		s->u64(s, "pooled", ps.pooled);
		s->u64(s, "size", ps.size);
		s->u64(s, "started", ps.started);
		s->u64(s, "idle", ps.idle);
		s->u64(s, "assigned", ps.assigned);
		s->u64(s, "empty", ps.empty);
		s->u64(s, "backlogged", ps.backlogged);
		s->u64(s, "retired", ps.retired);
		s->u64(s, "waiting", ps.waiting);
		s->u64(s, "waiting_max", ps.waiting_max);
		s->u64(s, "waited", ps.waited);
		s->u64(s, "wait_dropped", ps.wait_dropped);
		s->end(s);
	}
}

/* ---- JSON file sink ---- */

struct json_sink {
	struct stats_sink sink;
	FILE *f;
	int depth;
	bool first[8];
};

static void
json_key(struct json_sink *j, const char *name)
{
	fprintf(j->f, "%s\n%*s\"%s\": ", j->first[j->depth] ? "" : ",", 2 * j->depth, "", name);
	j->first[j->depth] = false;
}

static void
json_begin(struct stats_sink *s, const char *name)
{
	struct json_sink *j = (struct json_sink *)s;

	json_key(j, name);
	fputc('{', j->f);
	j->first[++j->depth] = true;
}

static void
json_end(struct stats_sink *s)
{
	struct json_sink *j = (struct json_sink *)s;

	j->depth--;
	fprintf(j->f, "\n%*s}", 2 * j->depth, "");
}

static void
json_u64(struct stats_sink *s, const char *name, uint64_t v)
{
	struct json_sink *j = (struct json_sink *)s;

	json_key(j, name);
	fprintf(j->f, "%" PRIu64, v);
}

/* Strings here are names and devargs; escape what JSON requires anyway. */
static void
json_str(struct stats_sink *s, const char *name, const char *v)
{
	struct json_sink *j = (struct json_sink *)s;

	json_key(j, name);
	fputc('"', j->f);
	for (; *v != '\0'; v++) {
		if (*v == '"' || *v == '\\')
			fprintf(j->f, "\\%c", *v);
		else if ((unsigned char)*v < 0x20)
			fprintf(j->f, "\\u%04x", *v);
		else
			fputc(*v, j->f);
	}
	fputc('"', j->f);
}

int
mgr_stats_write_json(struct mgr *mgr, const char *path)
{
	struct json_sink j = {
		.sink = {.begin = json_begin, .end = json_end, .u64 = json_u64, .str = json_str},
		.first = {true},
	};
	char tmp[PATH_MAX];
	int fd, ret = 0;

	/* Into a new file of our own (O_EXCL: never a symlink or a hard link
	 * someone planted), then renamed over path: rename replaces a symlink
	 * at path instead of writing where it points. */
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0644) < 0 || (j.f = fdopen(fd, "w")) == NULL) {
		ret = -errno;
		close(fd);
		unlink(tmp);
		return ret;
	}
	fputc('{', j.f);
	json_begin(&j.sink, "stats");
	mgr_stats_visit_totals(mgr, &j.sink);
	json_end(&j.sink);
	json_begin(&j.sink, "ports");
	mgr_stats_visit_ports(mgr, &j.sink);
	json_end(&j.sink);
	json_begin(&j.sink, "nfs");
	mgr_stats_visit_nfs(mgr, &j.sink, 0, mgr->n_nfs);
	json_end(&j.sink);
	json_begin(&j.sink, "chains");
	mgr_stats_visit_chains(mgr, &j.sink);
	json_end(&j.sink);
	json_begin(&j.sink, "flows");
	mgr_stats_visit_flows(mgr, &j.sink);
	json_end(&j.sink);
	json_begin(&j.sink, "pools");
	mgr_stats_visit_pools(mgr, &j.sink);
	json_end(&j.sink);
	fputs("\n}\n", j.f);
	if (fclose(j.f) != 0)
		ret = -errno;
	if (ret == 0 && rename(tmp, path) < 0)
		ret = -errno;
	if (ret < 0)
		unlink(tmp);
	return ret;
}

/* ---- the periodic line ---- */

static void
print_line(struct mgr *mgr, double secs)
{
	struct mgr_totals t;
	char ports[256] = "";
	size_t off = 0;

	mgr_stats_totals(mgr, &t);
	for (uint16_t i = 0; i < mgr->n_ports && off < sizeof(ports); i++) {
		struct mgr_port *p = &mgr->ports[i];

		off += (size_t)snprintf(ports + off, sizeof(ports) - off,
					" | %s rx %.0f tx %.0f pps", p->name,
					(double)(p->rx_pkts - p->last_rx_pkts) / secs,
					(double)(p->tx_pkts - p->last_tx_pkts) / secs);
		p->last_rx_pkts = p->rx_pkts;
		p->last_tx_pkts = p->tx_pkts;
	}
	printf("squall: rx %" PRIu64 " tx %" PRIu64 " drop %" PRIu64 " | nfs %u/%u | mbufs %u%s\n",
	       t.rx_pkts, t.tx_pkts, t.drop_pkts, nfs_live(mgr), mgr->n_nfs, mgr_mbufs_in_use(mgr),
	       ports);
	fflush(stdout);
}

unsigned int
mgr_stats_poll(struct mgr *mgr)
{
	static uint64_t last_tsc;
	uint64_t now = rte_rdtsc();
	uint64_t interval_tsc = rte_get_tsc_hz() / 1000 * mgr->cfg->stats_interval_ms;

	mgr_region_check(mgr);
	if (mgr->cfg->stats_interval_ms == 0 || mgr->quiet)
		return 0;
	if (last_tsc == 0) {
		last_tsc = now;
		return 0;
	}
	if (now - last_tsc < interval_tsc)
		return 0;
	print_line(mgr, (double)(now - last_tsc) / (double)rte_get_tsc_hz());
	last_tsc = now;
	return 1;
}
