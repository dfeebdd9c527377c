/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-conntrack: connection tracking (ct.h) with zones and security
 * groups (sg.h) on top. A packet of an established connection or an ICMP
 * error related to one passes; a packet that opens a connection passes and
 * is committed if the security groups of its ports allow it; everything
 * else is dropped and counted by reason.
 *
 * Shared instances (assign: rss) keep a table of many connections, which
 * time out per state; a per-flow instance keeps one connection's state,
 * which its state cleaner forgets when the manager says the flow ended.
 * The rules file is read again on a message from the manager (type 256,
 * "reload": squallctl msg SERVICE INSTANCE 256 reload), answered by a
 * message saying what came of it, or on SIGHUP; the connections already
 * committed stay.
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <squall/log.h>
#include <squall/squall.h>

#include "../nf_opt.h"
#include "ct.h"
#include "ct_parse.h"
#include "sg.h"
#include "state_opt.h"

#define NF_NAME     "squall-nf-conntrack"
#define SWEEP_SLOTS 16 /* table slots checked for expiry per burst */

enum ct_counter {
	C_COMMITTED,   /* new connections allowed and committed */
	C_ESTABLISHED, /* packets of tracked connections passed */
	C_RELATED,     /* ICMP errors of tracked connections passed */
	C_INVALID,     /* dropped: invalid (no connection, bad flags, out of window) */
	C_NO_RULE,     /* dropped: new, and no security group rule allows it */
	C_TABLE_FULL,  /* dropped: new and allowed, but no room to commit it */
	C_BAD_HDR,     /* dropped: truncated, bad IHL or length, fragment */
	C_UNTRACKED,   /* passed: not IP (ARP...), IPv6 neighbour discovery, MLD */
	C_EARLY_DROP,  /* unreplied entries a full table evicted for a new connection */
	C_MAX,
};

static const char *const counter_names[C_MAX] = {
	"committed",       "established",  "related",   "drop_invalid", "drop_no_rule",
	"drop_table_full", "drop_bad_hdr", "untracked", "early_drop",
};

struct conntrack {
	struct sq_nf *nf;
	struct ct_table table;
	struct sg_set *sg;
	const char *rules_path;
	int ctr[C_MAX];
	uint16_t port_zone[SG_MAX_PORTS]; /* 0: none */
	uint64_t tsc_per_ms;
};

static volatile sig_atomic_t reload_requested;

static void
on_sighup(int sig)
{
	RTE_SET_USED(sig);
	reload_requested = 1;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: " NF_NAME " [--rules FILE] [--zone-by-port PORT=ZONE]... [--table-size N]\n"
		"       [--timeout NAME=SECONDS]...\n"
		"Track connections (TCP, UDP, ICMP, ICMPv6, others generically) over IPv4 and\n"
		"IPv6 as netfilter does: new, established, related (ICMP errors), invalid.\n"
		"Established and related packets pass; a new connection passes and is\n"
		"committed if the security groups of its ports allow it; the rest is dropped.\n"
		"Counters: committed, established, related, drop_invalid, drop_no_rule,\n"
		"drop_table_full, drop_bad_hdr (truncated, bad IHL, fragments), untracked "
		"(passed:\n"
		"not IP, IPv6 neighbour discovery and MLD), early_drop (unreplied entries a\n"
		"full table evicted to commit a new connection: only when none is near\n"
		"its slot is it drop_table_full).\n"
		"\n"
		"  --rules FILE           security groups, one directive a line:\n"
		"                           allow GROUP in|out [proto=P] [port=N[-M]]\n"
		"                                 [remote=PREFIX|remote-group=G] "
		"[ethertype=ipv4|ipv6]\n"
		"                           member GROUP ADDRESS[/LEN]\n"
		"                           bind PORT GROUP   (PORT faces GROUP's workloads)\n"
		"                         A message of type 256, \"reload\" (squallctl msg\n"
		"                         SERVICE INSTANCE 256 reload), or SIGHUP reloads it.\n"
		"                         Unbound ports are not filtered.\n"
		"  --zone-by-port PORT=ZONE\n"
		"                         packets arriving on, or else leaving by, PORT (name\n"
		"                         or index) are tracked in ZONE (1-65535; default 0):\n"
		"                         tenants whose addresses overlap stay apart\n"
		"  --table-size N         connection slots, a power of 2 (default 65536;\n"
		"                         commits stop at 3/4 full)\n"
		"  --timeout NAME=SECONDS  a timeout other than netfilter's default (repeatable):\n"
		"                         syn_sent 120, syn_recv 60, established 432000,\n"
		"                         fin_wait 120, close_wait 60, last_ack 30, time_wait "
		"120,\n"
		"                         close 10, udp 30, udp_stream 120, icmp 30, generic "
		"600\n" NF_OPT_COMMON_HELP);
}

/* @return a new rule set from @p path, or NULL after saying why. */
static struct sg_set *
load_rules(const char *path)
{
	char line[512];
	unsigned int lineno = 0;
	struct sg_set *s;
	const char *bad;
	int ret = 0;
	FILE *f;

	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	if (path == NULL)
		return s;
	f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, NF_NAME ": --rules %s: %s\n", path, strerror(errno));
		free(s);
		return NULL;
	}
	while (ret == 0 && fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		ret = sg_parse_line(s, line, &bad);
		if (ret == -ENOSPC)
			fprintf(stderr, NF_NAME ": %s:%u: too many groups, rules or members\n",
				path, lineno);
		else if (ret < 0)
			fprintf(stderr, NF_NAME ": %s:%u: bad directive at \"%.*s\" (try --help)\n",
				path, lineno, (int)strcspn(bad, SG_SEPS), bad);
	}
	fclose(f);
	if (ret < 0) {
		free(s);
		return NULL;
	}
	return s;
}

static int
resolve_rules(struct conntrack *ct, struct sg_set *s)
{
	struct sq_region_hdr *r = sq_nf_region(ct->nf);
	unsigned int bad;

	if (sg_resolve_ports(s, (const char(*)[SG_NAME_LEN])r->port_names, r->n_ports, &bad) < 0) {
		SQ_LOG(ERR, CONNTRACK, "%s: bind %s: no such port\n", ct->rules_path,
		       s->bind_port[bad]);
		return -ENOENT;
	}
	return 0;
}

/* Outside the per-packet path: a file read, once per SIGHUP. A rules file
 * that does not parse leaves the old rules in force. */
/* @return the rules now in force, or -1 (the file did not load: the old
 * rules stay). */
static int
reload_rules(struct conntrack *ct)
{
	struct sg_set *s;

	reload_requested = 0;
	s = load_rules(ct->rules_path);
	if (s == NULL || resolve_rules(ct, s) < 0) {
		free(s);
		SQ_LOG(ERR, CONNTRACK, "%s: not reloaded, old rules kept\n", ct->rules_path);
		return -1;
	}
	free(ct->sg);
	ct->sg = s;
	SQ_LOG(NOTICE, CONNTRACK, "%s: reloaded, %u rules\n", ct->rules_path, s->n_rules);
	return (int)s->n_rules;
}

#define MSG_RELOAD SQ_MSG_USER

/* The manager's message ring: "reload" (type 256) reads the rules file
 * again here, in the NF's own loop between bursts (no lock against the
 * packet path), and answers with the same type: "reloaded N rules" or
 * "not reloaded: old rules kept" (squallctl msgs shows it). */
static void
conntrack_msg(struct sq_nf *nf, const struct sq_msg *msg, void *arg)
{
	struct conntrack *ct = arg;
	char reply[SQ_MSG_DATA_LEN];
	int n;

	if (msg->type != MSG_RELOAD || msg->len < 6 || memcmp(msg->data, "reload", 6) != 0)
		return;
	n = reload_rules(ct);
	if (n >= 0)
		snprintf(reply, sizeof(reply), "reloaded %d rules", n);
	else
		snprintf(reply, sizeof(reply), "not reloaded: old rules kept");
	sq_nf_msg_send(nf, MSG_RELOAD, reply, (uint32_t)strlen(reply));
}

static inline uint16_t
zone_of(const struct conntrack *ct, const struct sq_pkt_meta *m)
{
	if (m->in_port < SG_MAX_PORTS && ct->port_zone[m->in_port] != 0)
		return ct->port_zone[m->in_port];
	if (m->out_port < SG_MAX_PORTS)
		return ct->port_zone[m->out_port];
	return 0;
}

static inline sq_verdict_t
conntrack_one(struct conntrack *ct, struct rte_mbuf *pkt, uint64_t now_ms, uint64_t *ctr)
{
	const struct sq_pkt_meta *m = sq_pkt_meta(pkt);
	struct ct_result res;
	uint64_t evicted;
	struct ct_hdrs h;
	struct ct_pkt p;
	int ret;

	ret = ct_parse_pkt(pkt, zone_of(ct, m), &p, &h);
	if (unlikely(ret != 0)) {
		if (ret == CT_PARSE_NOT_IP || ret == CT_PARSE_UNTRACKED) {
			ctr[C_UNTRACKED]++;
			return SQ_NEXT;
		}
		ctr[C_BAD_HDR]++;
		return SQ_DROP;
	}
	switch (ct_track(&ct->table, &p, now_ms, &res)) {
	case CT_ESTABLISHED: ctr[C_ESTABLISHED]++; return SQ_NEXT;
	case CT_RELATED: ctr[C_RELATED]++; return SQ_NEXT;
	case CT_INVALID: ctr[C_INVALID]++; return SQ_DROP;
	case CT_NEW: break;
	}
	/* NEW: a retransmitted SYN of a committed connection is checked again, as
	 * OVS does (the rules may have changed since). */
	if (!sg_allows(ct->sg, m->in_port, m->out_port, &p)) {
		ctr[C_NO_RULE]++;
		return SQ_DROP;
	}
	if (res.conn != NULL) {
		/* a closed connection's tuple reused: a new connection, committed
		 * on the old entry (a client that reuses its ports would otherwise
		 * show far fewer connections than it made) */
		ctr[res.reopened ? C_COMMITTED : C_ESTABLISHED]++;
		return SQ_NEXT;
	}
	evicted = ct->table.early_drops;
	ret = ct_commit(&ct->table, &p, now_ms, &res);
	ctr[C_EARLY_DROP] += ct->table.early_drops - evicted;
	if (unlikely(ret == -ENOSPC)) {
		ctr[C_TABLE_FULL]++;
		return SQ_DROP;
	}
	ctr[C_COMMITTED]++;
	return SQ_NEXT;
}

static void
conntrack_burst(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg)
{
	struct conntrack *ct = arg;
	uint64_t ctr[C_MAX] = {0};
	uint64_t now_ms;
	uint16_t i;
	int c;

	if (unlikely(reload_requested))
		reload_rules(ct);
	now_ms = rte_rdtsc() / ct->tsc_per_ms;
	for (i = 0; i < n_pkts; i++)
		sq_pkt_set_verdict(pkts[i], conntrack_one(ct, pkts[i], now_ms, ctr));
	ct_sweep(&ct->table, now_ms, SWEEP_SLOTS);
	for (c = 0; c < C_MAX; c++)
		if (ctr[c] != 0)
			sq_nf_counter_add(ct->nf, ct->ctr[c], ctr[c]);
}

/* Per-flow: the flow ended, forget it. At stop: the same, then exit. */
static void
conntrack_clean(void *arg)
{
	struct conntrack *ct = arg;

	ct_table_clear(&ct->table);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"rules", required_argument, NULL, 'f'},
		{"zone-by-port", required_argument, NULL, 'z'},
		{"table-size", required_argument, NULL, 't'},
		{"timeout", required_argument, NULL, 'T'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct conntrack ct;
	static struct state_opt_zones zones;
	static const char *timeouts[64];
	unsigned int n_timeouts = 0, i;
	struct sq_nf *nf;
	uint64_t slots = 65536;
	int opt, ret, c;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'f': ct.rules_path = optarg; break;
		case 'z':
			if (state_opt_zone_add(NF_NAME, &zones, optarg) != 0)
				return NF_EXIT_USAGE;
			break;
		case 't':
			if (state_opt_table_size(NF_NAME, optarg, &slots) != 0)
				return NF_EXIT_USAGE;
			break;
		case 'T':
			if (n_timeouts == RTE_DIM(timeouts) ||
			    ct_timeout_set(ct.table.timeout_ms, optarg) < 0) {
				fprintf(stderr,
					NF_NAME ": --timeout: expected NAME=SECONDS, got \"%s\" "
						"(try --help)\n",
					optarg);
				return NF_EXIT_USAGE;
			}
			timeouts[n_timeouts++] = optarg;
			break;
		case 'h': usage(stdout); return NF_EXIT_OK;
		case 0: /* for sq_nf_init() */ break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	ret = nf_opt_check_done(NF_NAME, argc, argv);
	if (ret != 0)
		return ret;
	/* Parse the rules before attaching: a bad file is a usage error. */
	ct.sg = load_rules(ct.rules_path);
	if (ct.sg == NULL)
		return NF_EXIT_USAGE;
	if (ct_table_init(&ct.table, (uint32_t)slots) < 0) {
		fprintf(stderr, NF_NAME ": no memory for %" PRIu64 " slots\n", slots);
		return NF_EXIT_FAIL;
	}
	for (i = 0; i < n_timeouts; i++) /* checked while parsing */
		ct_timeout_set(ct.table.timeout_ms, timeouts[i]);
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	ct.nf = nf;
	ct.tsc_per_ms = sq_nf_region(nf)->tsc_hz / 1000 ? sq_nf_region(nf)->tsc_hz / 1000 : 1;
	if (resolve_rules(&ct, ct.sg) < 0 ||
	    state_opt_zones_resolve(NF_NAME, &zones, sq_nf_region(nf), ct.port_zone) != 0)
		return NF_EXIT_USAGE;
	for (c = 0; c < C_MAX; c++)
		ct.ctr[c] = sq_nf_counter_register(nf, counter_names[c]);
	signal(SIGHUP, on_sighup);
	SQ_LOG(DEBUG, CONNTRACK, "%u rules, %u groups, %" PRIu64 " slots\n", ct.sg->n_rules,
	       ct.sg->n_groups, slots);
	sq_nf_set_burst_handler(nf, conntrack_burst, &ct);
	sq_nf_set_state_cleaner(nf, conntrack_clean, &ct);
	/* (the ACK of the second FIN needs the connection too) */
	sq_nf_clean_at_flow_end(nf);
	sq_nf_set_msg_handler(nf, conntrack_msg, &ct);
	ret = sq_nf_run(nf);
	ct_table_free(&ct.table);
	free(ct.sg);
	return ret < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
