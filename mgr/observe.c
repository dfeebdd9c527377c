/* SPDX-License-Identifier: BSD-3-Clause
 * Telemetry for the exporter (squallctl serve): what a dashboard needs that
 * the counters commands do not carry.
 *
 *   /squall/latency,CHAIN[,to_nf][,FIRST]  a chain's raw histogram buckets
 *   /squall/rules[,FIRST]                  the rules: in port, MAC, chain, out port
 *
 * Read-only, from the telemetry thread, like stats.c: a histogram is read
 * while the tx role adds to it, so its buckets may be a packet apart from
 * its count; the reader sums the buckets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_telemetry.h>

#include "mgr.h"
#include "stats.h"

/* 512 u64s print as at most ~10.7 KB of JSON: under the 16 KB reply cap. */
#define LAT_PAGE   RTE_TEL_MAX_ARRAY_ENTRIES
#define RULES_PAGE 64

static const struct mgr *obs_mgr;

static int
obs_error(struct rte_tel_data *d, const char *msg)
{
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "error", msg);
	return 0;
}

static int
chain_index(const char *s)
{
	char *end;
	unsigned long v;

	for (uint16_t c = 0; c < obs_mgr->cfg->n_chains; c++)
		if (strcmp(obs_mgr->cfg->chains[c].name, s) == 0)
			return c;
	v = strtoul(s, &end, 10);
	if (*s != '\0' && *end == '\0' && v < obs_mgr->cfg->n_chains)
		return (int)v;
	return -1;
}

/* "/squall/latency,CHAIN[,to_nf][,FIRST]": the buckets of CHAIN's rx-to-tx
 * (or rx-to-first-NF) histogram from the first non-empty one (or FIRST) on,
 * as "counts" starting at bucket "first"; bucket b spans TSC values up to
 * and excluding edge(b) (latency.h), "next" is the first bucket of the next
 * page when one holds more. */
int
mgr_observe_latency(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static const char usage[] = "expected /squall/latency,CHAIN[,to_nf][,FIRST_BUCKET]";
	char buf[128], *save = NULL, *tok;
	const struct lat_hist *h;
	struct rte_tel_data *arr;
	unsigned int first = LAT_BUCKETS, last = 0, end;
	bool first_given = false;
	int c;

	(void)cmd;
	if (params == NULL || snprintf(buf, sizeof(buf), "%s", params) >= (int)sizeof(buf))
		return obs_error(d, usage);
	tok = strtok_r(buf, ",", &save);
	if (tok == NULL)
		return obs_error(d, usage);
	c = chain_index(tok);
	if (c < 0)
		return obs_error(d, "no such chain");
	h = &obs_mgr->chains[c].lat;
	while ((tok = strtok_r(NULL, ",", &save)) != NULL) {
		char *e;
		unsigned long v;

		if (strcmp(tok, "to_nf") == 0) {
			h = &obs_mgr->chains[c].to_nf;
			continue;
		}
		v = strtoul(tok, &e, 10);
		if (*e != '\0' || v >= LAT_BUCKETS)
			return obs_error(d, usage);
		first = (unsigned int)v;
		first_given = true;
	}
	for (unsigned int b = 0; b < LAT_BUCKETS; b++) {
		if (h->buckets[b] == 0)
			continue;
		if (!first_given && b < first)
			first = b;
		last = b;
	}
	if (first == LAT_BUCKETS)
		first = 0;
	end = RTE_MIN(last + 1, first + LAT_PAGE);
	if (end < first)
		end = first;
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "chain", obs_mgr->cfg->chains[c].name);
	rte_tel_data_add_dict_u64(d, "tsc_hz", rte_get_tsc_hz());
	rte_tel_data_add_dict_u64(d, "count", h->count);
	rte_tel_data_add_dict_u64(d, "sum_tsc", h->sum_tsc);
	rte_tel_data_add_dict_u64(d, "sub_bits", LAT_SUB_BITS);
	rte_tel_data_add_dict_u64(d, "first", first);
	arr = rte_tel_data_alloc();
	if (arr == NULL)
		return obs_error(d, "out of memory");
	rte_tel_data_start_array(arr, RTE_TEL_U64_VAL);
	for (unsigned int b = first; b < end; b++)
		rte_tel_data_add_array_u64(arr, h->buckets[b]);
	if (rte_tel_data_add_dict_container(d, "counts", arr, 0) < 0)
		rte_tel_data_free(arr);
	if (end <= last)
		rte_tel_data_add_dict_u64(d, "next", end);
	return 0;
}

static const char *const assign_names[] = {
	[SQ_ASSIGN_RSS] = "rss",
	[SQ_ASSIGN_PER_FLOW] = "per-flow",
	[SQ_ASSIGN_ROUND_ROBIN] = "round-robin",
	[SQ_ASSIGN_SPRAY] = "spray",
};

/* "/squall/rules[,FIRST]": RULES_PAGE rules from FIRST, keyed "r<index>". */
int
mgr_observe_rules(const char *cmd, const char *params, struct rte_tel_data *d)
{
	const struct sq_config *cfg = obs_mgr->cfg;
	unsigned long first = 0;

	(void)cmd;
	if (params != NULL && *params != '\0') {
		char *e;

		first = strtoul(params, &e, 10);
		if (*e != '\0')
			return obs_error(d, "expected /squall/rules[,FIRST]");
	}
	rte_tel_data_start_dict(d);
	for (unsigned long i = first; i < cfg->n_rules && i < first + RULES_PAGE; i++) {
		const struct sq_cfg_rule *r = &cfg->rules[i];
		struct rte_tel_data *e = rte_tel_data_alloc();
		char key[16], mac[RTE_ETHER_ADDR_FMT_SIZE] = "";

		if (e == NULL)
			return obs_error(d, "out of memory");
		rte_tel_data_start_dict(e);
		rte_tel_data_add_dict_u64(e, "id", i);
		rte_tel_data_add_dict_string(e, "in_port",
					     r->in_port < 0 ? "" : cfg->ports[r->in_port].name);
		if (r->has_dst_mac)
			rte_ether_format_addr(mac, sizeof(mac), &r->dst_mac);
		rte_tel_data_add_dict_string(e, "dst_mac", mac);
		rte_tel_data_add_dict_string(e, "chain", cfg->chains[r->chain].name);
		rte_tel_data_add_dict_string(e, "out_port", cfg->ports[r->out_port].name);
		/* carries the flows of a chain removed or changed, nothing new */
		rte_tel_data_add_dict_int(e, "draining", r->draining);
		rte_tel_data_add_dict_string(e, "assign",
					     r->assign < RTE_DIM(assign_names) &&
							     assign_names[r->assign] != NULL
						     ? assign_names[r->assign]
						     : "?");
		snprintf(key, sizeof(key), "r%lu", i);
		if (rte_tel_data_add_dict_container(d, key, e, 0) < 0)
			rte_tel_data_free(e);
	}
	if (first + RULES_PAGE < cfg->n_rules)
		rte_tel_data_add_dict_u64(d, "next", first + RULES_PAGE);
	return 0;
}

void
mgr_observe_init(const struct mgr *mgr)
{
	obs_mgr = mgr;
}
