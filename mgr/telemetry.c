/* SPDX-License-Identifier: BSD-3-Clause
 * Control: DPDK telemetry commands, so Debian's dpdk-telemetry.py and
 * squallctl read the manager with no protocol of our own.
 *
 *   /squall/stats         totals, drops by cause, mbufs in use
 *   /squall/ports         per-port counters
 *   /squall/nfs[,FIRST]   per-NF state and counters, NFS_PAGE at a time
 *   /squall/chains        per-chain counters
 *   /squall/drop_causes   each drop key with its user-facing description
 *   /squall/flows         flow table counters (per-flow and round-robin rules)
 *   /squall/pools         per service: pool size, started, idle, assigned, empty
 *   /squall/latency_reset clear every chain's latency histogram
 *   /squall/wake,SVC,POLICY[,THRESH[,TIMEOUT_US]]  a service's wake policy, now
 *   /squall/gen[,PORT]    a generator's rate and counters
 *   /squall/gen_rate,PPS[,PORT]  set a generator's rate (0 pauses, max unpaced)
 *
 * A command given bad parameters, or one that cannot act yet, replies
 * {"error": "why"}, as every command does while the manager starts (before
 * its roles exist) and from the start of its teardown; DPDK itself replies
 * null to a command it does not know.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <rte_telemetry.h>

#include "control.h"
#include "mgr.h"
#include "msg.h"
#include "scaler.h"
#include "stats.h"
#include "tel_reply.h"
#include "telemetry_args.h"

/* Telemetry replies are capped at 16 KB, and DPDK drops the entries past
 * it without a word. An NF's entry is up to ~1,020 B with long counter
 * values (measured: 16 busy per-flow NFs made 16,361 B, and the page lost
 * its last entry): 12 leave a quarter spare. Fewer would cost a scrape of
 * 10,000 NFs more round trips (8: twice 16's), which the manager's
 * telemetry thread serves beside the NFs it starts. */
#define NFS_PAGE 12

static struct mgr *tel_mgr;

/* Commands run on telemetry's threads, while the manager starts, runs and
 * stops. Each holds this lock (shared) for its whole run; the manager takes
 * it exclusively to change tel_state, so nothing a command reads is freed
 * under it: before the roles exist and from the start of teardown, commands
 * answer {"error": ...}. */
enum { TEL_STARTING, TEL_RUNNING, TEL_STOPPED };
static pthread_rwlock_t tel_lock = PTHREAD_RWLOCK_INITIALIZER;
static int tel_state = TEL_STARTING;

/* DPDK 22.11 telemetry nests one level: a dict may hold dicts of values. */
struct tel_sink {
	struct stats_sink sink;
	struct rte_tel_data *top;
	struct rte_tel_data *child;
	char child_name[64];
};

static void
tel_begin(struct stats_sink *s, const char *name)
{
	struct tel_sink *t = (struct tel_sink *)s;

	t->child = rte_tel_data_alloc();
	if (t->child == NULL)
		return;
	rte_tel_data_start_dict(t->child);
	snprintf(t->child_name, sizeof(t->child_name), "%s", name);
}

static void
tel_end(struct stats_sink *s)
{
	struct tel_sink *t = (struct tel_sink *)s;

	if (t->child == NULL)
		return;
	if (rte_tel_data_add_dict_container(t->top, t->child_name, t->child, 0) < 0)
		rte_tel_data_free(t->child);
	t->child = NULL;
}

static void
tel_u64(struct stats_sink *s, const char *name, uint64_t v)
{
	struct tel_sink *t = (struct tel_sink *)s;

	rte_tel_data_add_dict_u64(t->child != NULL ? t->child : t->top, name, v);
}

static void
tel_str(struct stats_sink *s, const char *name, const char *v)
{
	struct tel_sink *t = (struct tel_sink *)s;

	rte_tel_data_add_dict_string(t->child != NULL ? t->child : t->top, name, v);
}

static void
tel_sink_init(struct tel_sink *t, struct rte_tel_data *d)
{
	*t = (struct tel_sink){
		.sink = {.begin = tel_begin, .end = tel_end, .u64 = tel_u64, .str = tel_str},
		.top = d,
	};
	rte_tel_data_start_dict(d);
}

/* The generator on PORT (NULL or "": the first). @return its index, or -1
 * with *why set. */
static int
find_gen(const char *port, const char **why)
{
	int idx;

	if (tel_mgr->cfg->n_gens > 0 &&
	    !atomic_load_explicit(&tel_mgr->gens_ready, memory_order_acquire)) {
		*why = "the generators are not running (the manager is starting or stopping)";
		return -1;
	}
	idx = mgr_gen_find(tel_mgr, port);
	if (idx < 0)
		*why = tel_mgr->cfg->n_gens == 0 ? "the config has no generator"
						 : "no generator on that port";
	return idx;
}

static int
cmd_stats(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tel_sink t;

	(void)cmd;
	(void)params;
	tel_sink_init(&t, d);
	mgr_stats_visit_totals(tel_mgr, &t.sink);
	return 0;
}

static int
cmd_ports(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tel_sink t;

	(void)cmd;
	(void)params;
	tel_sink_init(&t, d);
	mgr_stats_visit_ports(tel_mgr, &t.sink);
	return 0;
}

static int
cmd_nfs(const char *cmd, const char *params, struct rte_tel_data *d)
{
	uint32_t first = 0;
	struct tel_sink t;

	(void)cmd;
	if (tel_args_nfs(params, &first) < 0)
		return mgr_tel_error(d, "expected /squall/nfs[,FIRST_ID]");
	tel_sink_init(&t, d);
	mgr_stats_visit_nfs(tel_mgr, &t.sink, first, NFS_PAGE);
	/* Paging: "next" is the first id of the next page, when there is one. */
	if ((uint64_t)first + NFS_PAGE < tel_mgr->n_nfs)
		rte_tel_data_add_dict_u64(d, "next", first + NFS_PAGE);
	return 0;
}

static int
cmd_chains(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tel_sink t;

	(void)cmd;
	(void)params;
	tel_sink_init(&t, d);
	mgr_stats_visit_chains(tel_mgr, &t.sink);
	return 0;
}

static int
cmd_cgroups(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tel_sink t;

	(void)cmd;
	(void)params;
	tel_sink_init(&t, d);
	mgr_stats_visit_cgroups(tel_mgr, &t.sink);
	return 0;
}

static int
cmd_latency_reset(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	/* The tx role owns the histograms; it clears them at its next round. */
	atomic_store(&tel_mgr->lat_reset, true);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "status", "reset requested");
	return 0;
}

static int
cmd_gen(const char *cmd, const char *params, struct rte_tel_data *d)
{
	const char *why = NULL;
	int idx = find_gen(params, &why);
	struct gen_stats st;

	(void)cmd;
	if (idx < 0)
		return mgr_tel_error(d, why);
	mgr_gen_stats(tel_mgr, idx, &st);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "rate_pps", st.rate_pps);
	rte_tel_data_add_dict_u64(d, "sent_pkts", st.sent_pkts);
	rte_tel_data_add_dict_u64(d, "sent_bytes", st.sent_bytes);
	rte_tel_data_add_dict_u64(d, "alloc_fail", st.alloc_fail);
	rte_tel_data_add_dict_u64(d, "lag_pkts", st.lag_pkts);
	rte_tel_data_add_dict_u64(d, "missed_pkts", st.missed_pkts);
	rte_tel_data_add_dict_u64(d, "conns_started", st.conns_started);
	return 0;
}

/* "/squall/gen_rate,PPS[,PORT]": PPS packets per second, 0 pauses, "max"
 * unpaced; PORT picks a generator when there are several (default: the first). */
static int
cmd_gen_rate(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static const char usage[] = "expected /squall/gen_rate,PPS[,PORT] (PPS 0..1e9 or max)";
	struct tel_gen_rate_args a;
	const char *why = NULL;
	uint64_t rate;
	int idx;

	(void)cmd;
	if (tel_args_gen_rate(params, &a) < 0)
		return mgr_tel_error(d, usage);
	idx = find_gen(a.port, &why);
	if (idx < 0)
		return mgr_tel_error(d, why);
	rate = a.rate_pps;
	mgr_gen_set_rate(tel_mgr, idx, rate);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "rate_pps", rate);
	return 0;
}

static int
parse_policy(const char *s, uint32_t *policy)
{
	for (uint32_t p = SQ_WAKE_MIN; p <= SQ_WAKE_ADAPTIVE; p++) {
		if (strcmp(s, mgr_wake_policy_name(p)) == 0) {
			*policy = p;
			return 0;
		}
	}
	return -EINVAL;
}

/* "/squall/wake,SERVICE,POLICY[,THRESH_PKTS[,TIMEOUT_US]]": change how a
 * service's NFs are woken, now. Omitted numbers keep their current values. */
static int
cmd_wake(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static const char usage[] = "expected /squall/wake,SERVICE,min|fixed|adaptive[,THRESH_PKTS "
				    "1..65536[,TIMEOUT_US "
				    "1..10000000]]";
	struct tel_wake_args a;
	const char *svc_name;
	struct sq_cfg_wake w;
	int svc;

	(void)cmd;
	if (tel_args_wake(params, &a) < 0)
		return mgr_tel_error(d, usage);
	svc_name = a.service;
	svc = sq_config_service_index(tel_mgr->cfg, svc_name);
	if (svc < 0)
		return mgr_tel_error(d, "no such service");
	w = tel_mgr->cfg->services[svc].wake;
	if (parse_policy(a.policy, &w.policy) < 0)
		return mgr_tel_error(d, usage);
	if (a.has_thresh)
		w.thresh_pkts = a.thresh_pkts;
	if (a.has_timeout)
		w.timeout_ns = a.timeout_ns;
	mgr_wakeup_set_policy(tel_mgr, (uint16_t)svc, &w);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "service", svc_name);
	rte_tel_data_add_dict_string(d, "policy", mgr_wake_policy_name(w.policy));
	rte_tel_data_add_dict_u64(d, "thresh_pkts", w.thresh_pkts);
	rte_tel_data_add_dict_u64(d, "timeout_us", w.timeout_ns / 1000);
	return 0;
}

static int
cmd_flows(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tel_sink t;

	(void)cmd;
	(void)params;
	tel_sink_init(&t, d);
	mgr_stats_visit_flows(tel_mgr, &t.sink);
	return 0;
}

static int
cmd_pools(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct tel_sink t;

	(void)cmd;
	(void)params;
	tel_sink_init(&t, d);
	mgr_stats_visit_pools(tel_mgr, &t.sink);
	return 0;
}

static int
cmd_drop_causes(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	for (int c = 0; c < SQ_DROP_MAX; c++)
		rte_tel_data_add_dict_string(d, sq_drop_keys[c], sq_drop_names[c]);
	return 0;
}

/* How long a read command waits for an apply's control lock. */
#define TEL_LOCK_WAIT_MS 1000

/* The command @p fn, run only while the manager's state is whole, and under
 * the control lock: a config an apply replaces is freed under it, and the
 * commands read the config (names, chains, wake settings). An apply holds
 * the lock while it waits on the data path's lcores, which a starved core
 * can stretch to seconds: a read waits for it at most TEL_LOCK_WAIT_MS, then
 * says so, rather than leave the operator (or a scrape) without an answer. */
#define GUARDED(fn)                                                                           \
	static int fn##_guarded(const char *cmd, const char *params, struct rte_tel_data *d)  \
	{                                                                                     \
		int ret;                                                                      \
                                                                                              \
		pthread_rwlock_rdlock(&tel_lock);                                             \
		if (tel_state == TEL_RUNNING && !mgr_control_lock_within(TEL_LOCK_WAIT_MS)) { \
			ret = mgr_tel_error(d, "busy: an apply is waiting on the data path; " \
					       "try again");                                  \
		} else if (tel_state == TEL_RUNNING) {                                        \
			ret = fn(cmd, params, d);                                             \
			mgr_control_unlock();                                                 \
		} else {                                                                      \
			ret = mgr_tel_error(d, tel_state == TEL_STARTING                      \
						       ? "the manager is starting"            \
						       : "the manager is stopping");          \
		}                                                                             \
		pthread_rwlock_unlock(&tel_lock);                                             \
		return ret;                                                                   \
	}
GUARDED(cmd_stats)
GUARDED(cmd_ports)
GUARDED(cmd_nfs)
GUARDED(cmd_cgroups)
GUARDED(cmd_chains)
GUARDED(cmd_gen)
GUARDED(cmd_gen_rate)
GUARDED(cmd_flows)
GUARDED(cmd_pools)
GUARDED(cmd_wake)
GUARDED(cmd_latency_reset)
GUARDED(mgr_observe_latency)
GUARDED(mgr_observe_rules)
GUARDED(mgr_scaler_tel_scale)
GUARDED(mgr_scaler_tel_events)
GUARDED(mgr_scaler_tel_nfs)
GUARDED(mgr_scaler_tel_set)
GUARDED(mgr_msg_tel_list)
GUARDED(mgr_msg_tel_send)

static void
tel_set_state(int state)
{
	pthread_rwlock_wrlock(&tel_lock);
	tel_state = state;
	pthread_rwlock_unlock(&tel_lock);
}

void
mgr_telemetry_ready(struct mgr *mgr)
{
	(void)mgr;
	tel_set_state(TEL_RUNNING);
}

void
mgr_telemetry_stop(struct mgr *mgr)
{
	(void)mgr;
	tel_set_state(TEL_STOPPED);
}

int
mgr_telemetry_init(struct mgr *mgr)
{
	tel_mgr = mgr;
	mgr_observe_init(mgr);
	if (rte_telemetry_register_cmd("/squall/latency", mgr_observe_latency_guarded,
				       "A chain's latency histogram buckets. Parameters: "
				       "CHAIN[,to_nf][,FIRST_BUCKET]") < 0 ||
	    rte_telemetry_register_cmd("/squall/rules", mgr_observe_rules_guarded,
				       "The rules. Parameter: first rule index") < 0 ||
	    rte_telemetry_register_cmd("/squall/stats", cmd_stats_guarded,
				       "Totals, drops by cause, mbufs in use. No parameters") < 0 ||
	    rte_telemetry_register_cmd("/squall/ports", cmd_ports_guarded,
				       "Per-port counters. No parameters") < 0 ||
	    rte_telemetry_register_cmd("/squall/nfs", cmd_nfs_guarded,
				       "Per-NF state and counters. Parameter: first NF id; "
				       "\"next\" gives the next page") < 0 ||
	    rte_telemetry_register_cmd("/squall/cgroups", cmd_cgroups_guarded,
				       "Services' cgroup limits and the kernel's counts of them. "
				       "No parameters") < 0 ||
	    rte_telemetry_register_cmd("/squall/chains", cmd_chains_guarded,
				       "Per-chain counters. No parameters") < 0 ||
	    rte_telemetry_register_cmd("/squall/drop_causes", cmd_drop_causes,
				       "What each drop counter means. No parameters") < 0 ||
	    rte_telemetry_register_cmd(
		    "/squall/gen", cmd_gen_guarded,
		    "Generator rate and counters. Parameter: PORT (default: the first)") < 0 ||
	    rte_telemetry_register_cmd("/squall/gen_rate", cmd_gen_rate_guarded,
				       "Set a generator's rate. Parameters: PPS|0|max[,PORT]") <
		    0 ||
	    rte_telemetry_register_cmd("/squall/flows", cmd_flows_guarded,
				       "Flow table counters. No parameters") < 0 ||
	    rte_telemetry_register_cmd("/squall/pools", cmd_pools_guarded,
				       "Per-service idle pools. No parameters") < 0 ||
	    rte_telemetry_register_cmd("/squall/wake", cmd_wake_guarded,
				       "Set a service's wake policy. Parameters: SERVICE,"
				       "min|fixed|adaptive[,THRESH_PKTS[,TIMEOUT_US]]") < 0 ||
	    rte_telemetry_register_cmd("/squall/latency_reset", cmd_latency_reset_guarded,
				       "Clear the per-chain latency histograms. No parameters") <
		    0 ||
	    rte_telemetry_register_cmd("/squall/scale", mgr_scaler_tel_scale_guarded,
				       "Scaled services: instances running, blocked, starting; "
				       "load; decisions. No parameters") < 0 ||
	    rte_telemetry_register_cmd("/squall/scale_events", mgr_scaler_tel_events_guarded,
				       "The scaler's last decisions. Parameter: SEQ (those "
				       "after it)") < 0 ||
	    rte_telemetry_register_cmd("/squall/scale_nfs", mgr_scaler_tel_nfs_guarded,
				       "A scaled service's instances. Parameter: SERVICE") < 0 ||
	    rte_telemetry_register_cmd("/squall/scale_set", mgr_scaler_tel_set_guarded,
				       "Run N instances of a scaled service, or let its load "
				       "decide. Parameters: SERVICE,N|auto") < 0 ||
	    rte_telemetry_register_cmd("/squall/msgs", mgr_msg_tel_list_guarded,
				       "Messages between the manager and NFs: counts, the "
				       "last ones. Parameter: SEQ (those after it)") < 0 ||
	    rte_telemetry_register_cmd("/squall/msg_send", mgr_msg_tel_send_guarded,
				       "A user message to one instance. Parameters: "
				       "SERVICE,INSTANCE,TYPE[,HEX]") < 0)
		return -EEXIST;
	return 0;
}
