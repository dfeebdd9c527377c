/* SPDX-License-Identifier: BSD-3-Clause
 * The running configuration as YAML: every key sq_config_load() knows, with the
 * value in force, defaults included, so that loading the text gives the same
 * struct sq_config and emitting that again gives the same bytes (`squallctl get
 * config` prints it; `apply` takes it back). Written with libyaml's emitter, so
 * quoting is libyaml's, not ours: the loader reads every value as text, so a
 * name such as 123 or yes needs no quotes to stay what it is.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include <squall/region.h>

#include "config_emit.h"

struct out {
	yaml_emitter_t em;
	char *buf;
	size_t len, cap;
	bool failed;
};

static int
write_buf(void *data, unsigned char *bytes, size_t n)
{
	struct out *o = data;
	char *grown;
	size_t cap;

	if (o->len + n + 1 > o->cap) {
		cap = o->cap ? o->cap : 4096;
		while (o->len + n + 1 > cap)
			cap *= 2;
		grown = realloc(o->buf, cap);
		if (grown == NULL)
			return 0; /* libyaml: 0 is a write error */
		o->buf = grown;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, bytes, n);
	o->len += n;
	o->buf[o->len] = '\0';
	return 1;
}

static void
emit(struct out *o, yaml_event_t *ev)
{
	if (o->failed) {
		yaml_event_delete(ev);
		return;
	}
	/* yaml_emitter_emit takes the event over, on failure too. */
	if (!yaml_emitter_emit(&o->em, ev))
		o->failed = true;
}

static void
scalar(struct out *o, const char *s)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
					  YAML_ANY_SCALAR_STYLE)) {
		o->failed = true;
		return;
	}
	emit(o, &ev);
}

static void
map_start(struct out *o, bool flow)
{
	yaml_event_t ev;

	yaml_mapping_start_event_initialize(
		&ev, NULL, NULL, 1, flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
	emit(o, &ev);
}

static void
map_end(struct out *o)
{
	yaml_event_t ev;

	yaml_mapping_end_event_initialize(&ev);
	emit(o, &ev);
}

static void
seq_start(struct out *o, bool flow)
{
	yaml_event_t ev;

	yaml_sequence_start_event_initialize(
		&ev, NULL, NULL, 1, flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
	emit(o, &ev);
}

static void
seq_end(struct out *o)
{
	yaml_event_t ev;

	yaml_sequence_end_event_initialize(&ev);
	emit(o, &ev);
}

static void
kv(struct out *o, const char *key, const char *val)
{
	scalar(o, key);
	scalar(o, val);
}

static void
kv_u64(struct out *o, const char *key, uint64_t val)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRIu64, val);
	kv(o, key, s);
}

static void
kv_i64(struct out *o, const char *key, int64_t val)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, val);
	kv(o, key, s);
}

static void
kv_mac(struct out *o, const char *key, const struct rte_ether_addr *mac)
{
	const uint8_t *b = mac->addr_bytes;
	char s[RTE_ETHER_ADDR_FMT_SIZE];

	/* not rte_ether_format_addr: the unit tests link no DPDK library */
	snprintf(s, sizeof(s), "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
	kv(o, key, s);
}

static const char *const wake_words[] = {
	[SQ_WAKE_MIN] = "min", [SQ_WAKE_FIXED] = "fixed", [SQ_WAKE_ADAPTIVE] = "adaptive"};
static const char *const assign_words[] = {
	[SQ_ASSIGN_RSS] = "rss",
	[SQ_ASSIGN_PER_FLOW] = "per-flow",
	[SQ_ASSIGN_ROUND_ROBIN] = "round-robin",
	[SQ_ASSIGN_SPRAY] = "spray",
};
static const char *const fallback_words[] = {
	[SQ_FALLBACK_DROP] = "drop", [SQ_FALLBACK_RSS] = "rss", [SQ_FALLBACK_QUEUE] = "queue"};
static const char *const order_words[] = {[SQ_POOL_FIFO] = "fifo", [SQ_POOL_LIFO] = "lifo"};
static const char *const sched_batch_words[] = {
	[SQ_BATCH_AUTO] = "auto", [SQ_BATCH_ON] = "true", [SQ_BATCH_OFF] = "false"};
static const char *const sandbox_words[] = {[SQ_SANDBOX_NONE] = "none",
					    [SQ_SANDBOX_STRICT] = "strict",
					    [SQ_SANDBOX_ISOLATED] = "isolated"};
static const char *const restart_words[] = {[SQ_RESTART_ALWAYS] = "always",
					    [SQ_RESTART_ON_FAILURE] = "on-failure",
					    [SQ_RESTART_NEVER] = "never"};

/* A word of a table, or "?" for a value the loader cannot have produced. */
static const char *
word(const char *const *words, size_t n, uint32_t v)
{
	return v < n && words[v] != NULL ? words[v] : "?";
}
#define WORD(tab, v) word((tab), sizeof(tab) / sizeof((tab)[0]), (v))

static void
emit_manager(struct out *o, const struct sq_config *cfg)
{
	scalar(o, "manager");
	map_start(o, false);
	kv(o, "name", cfg->name);
	kv_u64(o, "region_mb", cfg->region_mb);
	kv_u64(o, "mbufs", cfg->mbufs);
	kv_u64(o, "mbuf_data_room", cfg->mbuf_data_room);
	kv_u64(o, "stats_interval_ms", cfg->stats_interval_ms);
	kv_i64(o, "nf_core", cfg->nf_core);
	kv_u64(o, "rx_burst", cfg->rx_burst);
	kv_u64(o, "chain_priority", cfg->chain_priority);
	kv_u64(o, "max_flows", cfg->max_flows);
	kv_u64(o, "flow_idle_timeout_ms", cfg->flow_idle_timeout_ms);
	kv_u64(o, "flow_linger_ms", cfg->flow_linger_ms);
	kv_u64(o, "flow_half_open_timeout_ms", cfg->flow_half_open_timeout_ms);
	kv_u64(o, "flow_unestablished_per_source", cfg->flow_unestablished_per_source);
	kv_u64(o, "core_wakes_per_s", cfg->core_wakes_per_s);
	kv_u64(o, "idle_sleep_max_us", cfg->idle_sleep_max_us);
	kv_u64(o, "idle_after_us", cfg->idle_after_us);
	kv(o, "idle_after_load", cfg->idle_after_load ? "true" : "false");
	kv_u64(o, "core_yield_rounds", cfg->core_yield_rounds);
	kv(o, "rx_backpressure", cfg->rx_backpressure ? "true" : "false");
	kv(o, "control_realtime", cfg->control_realtime ? "true" : "false");
	kv_i64(o, "nice", cfg->mgr_nice);
	kv_u64(o, "max_nfs", cfg->max_nfs);
	kv(o, "nf_user", cfg->nf_user);
	scalar(o, "attach_users");
	seq_start(o, true);
	for (uint16_t i = 0; i < cfg->n_attach_uids; i++) {
		char uid[16];

		snprintf(uid, sizeof(uid), "%u", cfg->attach_uids[i]);
		scalar(o, uid);
	}
	seq_end(o);
	map_end(o);
}

static void
emit_ports(struct out *o, const struct sq_config *cfg)
{
	scalar(o, "ports");
	seq_start(o, false);
	for (uint16_t i = 0; i < cfg->n_ports; i++) {
		const struct sq_cfg_port *p = &cfg->ports[i];

		map_start(o, false);
		kv(o, "name", p->name);
		if (p->n_devargs == 1) {
			kv(o, "devargs", p->devargs[0]);
		} else {
			scalar(o, "devargs");
			seq_start(o, false);
			for (uint16_t j = 0; j < p->n_devargs; j++)
				scalar(o, p->devargs[j]);
			seq_end(o);
		}
		kv_u64(o, "rx_desc", p->rx_desc);
		kv_u64(o, "tx_desc", p->tx_desc);
		map_end(o);
	}
	seq_end(o);
}

static void
emit_wake(struct out *o, const struct sq_cfg_wake *w)
{
	scalar(o, "wake");
	map_start(o, true);
	kv(o, "policy", WORD(wake_words, w->policy));
	kv_u64(o, "thresh_pkts", w->thresh_pkts);
	kv_u64(o, "timeout_us", w->timeout_ns / 1000);
	kv_u64(o, "min_pkts", w->min_pkts);
	kv_u64(o, "max_pkts", w->max_pkts);
	kv_u64(o, "t_lat_pkts", w->t_lat_pkts);
	map_end(o);
}

static void
emit_scale(struct out *o, const struct sq_cfg_scale *sc)
{
	scalar(o, "scale");
	map_start(o, true);
	kv_u64(o, "min", sc->min);
	kv_u64(o, "max", sc->max);
	kv_u64(o, "high_wm", sc->high_wm_pct);
	kv_u64(o, "low_wm", sc->low_wm_pct);
	kv_u64(o, "interval_ms", sc->interval_ms);
	kv_u64(o, "hold_intervals", sc->hold_intervals);
	kv_u64(o, "queue_high_pkts", sc->queue_high_pkts);
	kv_u64(o, "drop_memory_ms", sc->drop_memory_ms);
	map_end(o);
}

/* out_ports and to_services, where they are not the mode's default (every
 * one; none for an isolated service): names, so the file reads back. */
static void
emit_grants(struct out *o, const struct sq_config *cfg, const struct sq_cfg_service *s)
{
	bool isolated = s->sandbox == SQ_SANDBOX_ISOLATED;

	if (s->out_ports != (isolated ? 0 : UINT32_MAX)) {
		scalar(o, "out_ports");
		seq_start(o, true);
		for (uint16_t p = 0; p < cfg->n_ports; p++)
			if (s->out_ports >> p & 1)
				scalar(o, cfg->ports[p].name);
		seq_end(o);
	}
	if (s->to_services != (isolated ? 0 : UINT64_MAX)) {
		scalar(o, "to_services");
		seq_start(o, true);
		for (uint16_t i = 0; i < cfg->n_services; i++)
			if ((s->to_services >> i & 1) && cfg->services[i].name[0] != '\0')
				scalar(o, cfg->services[i].name);
		seq_end(o);
	}
}

static void
emit_service(struct out *o, const struct sq_config *cfg, const struct sq_cfg_service *s)
{
	map_start(o, false);
	kv(o, "name", s->name);
	kv(o, "exec", s->exec);
	scalar(o, "args");
	seq_start(o, true);
	for (uint32_t j = 0; j < s->n_args; j++)
		scalar(o, s->args[j]);
	seq_end(o);
	kv(o, "mode", s->mode == SQ_NF_MODE_POLL ? "poll" : "sleep");
	kv_u64(o, "instances", s->instances);
	kv_u64(o, "ring_slots", s->ring_slots);
	kv_u64(o, "burst_max", s->burst_max);
	kv_u64(o, "batch_budget_pkts", s->batch_budget_pkts);
	kv_u64(o, "spin_us", s->spin_ns / 1000);
	emit_wake(o, &s->wake);
	kv_u64(o, "priority", s->priority);
	kv_i64(o, "nice", s->nice);
	kv(o, "sched_batch", WORD(sched_batch_words, s->sched_batch));
	kv_u64(o, "pool_idle", s->pool_idle);
	kv(o, "pool_fallback", WORD(fallback_words, s->pool_fallback));
	kv_u64(o, "pool_queue_pkts", s->pool_queue_pkts);
	kv(o, "pool_order", WORD(order_words, s->pool_order));
	kv_u64(o, "pool_backlog_max", s->pool_backlog_max);
	kv_u64(o, "max_instances", s->max_instances);
	kv(o, "restart", WORD(restart_words, s->restart));
	kv_u64(o, "restart_backoff_ms", s->restart_backoff_ms);
	kv_u64(o, "restart_backoff_max_ms", s->restart_backoff_max_ms);
	kv_u64(o, "restart_limit", s->restart_limit);
	kv_u64(o, "restart_window_s", s->restart_window_s);
	kv_u64(o, "watchdog_ms", s->watchdog_ms);
	kv_u64(o, "max_outstanding_pkts", s->max_outstanding_pkts);
	kv(o, "sandbox", WORD(sandbox_words, s->sandbox));
	kv_u64(o, "memory_mb", s->memory_mb);
	kv_u64(o, "cpu_max_pct", s->cgroup.cpu_max_pct);
	kv_u64(o, "cpu_weight", s->cgroup.cpu_weight);
	kv_u64(o, "memory_max_mb", s->cgroup.memory_max_mb);
	kv_u64(o, "pids_max", s->cgroup.pids_max);
	emit_grants(o, cfg, s);
	if (s->scale.enabled)
		emit_scale(o, &s->scale);
	map_end(o);
}

static void
emit_chains(struct out *o, const struct sq_config *cfg)
{
	scalar(o, "chains");
	seq_start(o, false);
	for (uint16_t i = 0; i < cfg->n_chains; i++) {
		const struct sq_cfg_chain *ch = &cfg->chains[i];

		/* a free slot of a running config, or one whose flows drain: not
		 * the config an apply gives (mgr/control.c) */
		if (ch->n_hops == 0 || ch->draining)
			continue;
		map_start(o, false);
		kv(o, "name", ch->name);
		scalar(o, "services");
		seq_start(o, true);
		for (uint16_t h = 0; h < ch->n_hops; h++)
			scalar(o, cfg->services[ch->services[h]].name);
		seq_end(o);
		if (ch->direct)
			kv(o, "direct", "true");
		if (ch->hop_nice_step >= 0)
			kv_u64(o, "hop_nice_step", (uint64_t)ch->hop_nice_step);
		map_end(o);
	}
	seq_end(o);
}

static void
emit_rules(struct out *o, const struct sq_config *cfg)
{
	scalar(o, "rules");
	seq_start(o, false);
	for (uint16_t i = 0; i < cfg->n_rules; i++) {
		const struct sq_cfg_rule *r = &cfg->rules[i];

		if (r->draining)
			continue;
		map_start(o, true);
		if (r->in_port >= 0)
			kv(o, "in_port", cfg->ports[r->in_port].name);
		if (r->has_dst_mac)
			kv_mac(o, "dst_mac", &r->dst_mac);
		kv(o, "chain", cfg->chains[r->chain].name);
		kv(o, "out_port", cfg->ports[r->out_port].name);
		kv(o, "assign", WORD(assign_words, r->assign));
		kv_u64(o, "nf_priority", r->nf_priority);
		map_end(o);
	}
	seq_end(o);
}

static void
emit_generators(struct out *o, const struct sq_config *cfg)
{
	if (cfg->n_gens == 0)
		return;
	scalar(o, "generator");
	seq_start(o, false);
	for (uint16_t i = 0; i < cfg->n_gens; i++) {
		const struct sq_cfg_gen *g = &cfg->gens[i];

		map_start(o, false);
		kv(o, "port", cfg->ports[g->port].name);
		kv_u64(o, "rate_pps", g->rate_pps);
		scalar(o, "sizes");
		seq_start(o, true);
		for (uint16_t j = 0; j < g->n_sizes; j++) {
			char s[8];

			snprintf(s, sizeof(s), "%u", g->sizes[j]);
			scalar(o, s);
		}
		seq_end(o);
		kv_u64(o, "flows", g->flows);
		if (g->has_dst_mac)
			kv_mac(o, "dst_mac", &g->dst_mac);
		if (g->tcp_flow_pkts != 0)
			kv_u64(o, "tcp_flow_pkts", g->tcp_flow_pkts);
		if (g->tcp_staggered)
			kv(o, "tcp_start", "staggered");
		map_end(o);
	}
	seq_end(o);
}

int
sq_config_emit(const struct sq_config *cfg, char **text, size_t *len)
{
	struct out o = {0};
	yaml_event_t ev;

	*text = NULL;
	if (!yaml_emitter_initialize(&o.em))
		return -ENOMEM;
	yaml_emitter_set_output(&o.em, write_buf, &o);
	yaml_emitter_set_unicode(&o.em, 1);
	yaml_emitter_set_width(&o.em, 100);
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	emit(&o, &ev);
	yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
	emit(&o, &ev);
	map_start(&o, false);
	emit_manager(&o, cfg);
	emit_ports(&o, cfg);
	scalar(&o, "services");
	seq_start(&o, false);
	for (uint16_t i = 0; i < cfg->n_services; i++)
		if (cfg->services[i].name[0] != '\0' && !cfg->services[i].draining) /* removed */
			emit_service(&o, cfg, &cfg->services[i]);
	seq_end(&o);
	emit_chains(&o, cfg);
	emit_rules(&o, cfg);
	emit_generators(&o, cfg);
	map_end(&o);
	yaml_document_end_event_initialize(&ev, 1);
	emit(&o, &ev);
	yaml_stream_end_event_initialize(&ev);
	emit(&o, &ev);
	yaml_emitter_delete(&o.em);
	if (o.failed || o.buf == NULL) {
		free(o.buf);
		return -ENOMEM;
	}
	*text = o.buf;
	if (len != NULL)
		*len = o.len;
	return 0;
}
