/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-nat: SNAT with port allocation (NAPT) and DNAT for IPv4, both
 * directions of each connection, checksums updated incrementally (nat.h),
 * and ICMP errors about a connection translated back for their receiver.
 *
 * Replies must reach the instance that translated the connection: the
 * manager spreads flows by their tuple as received, and a reply's tuple is
 * the translated one, so run one shared instance (instances: 1). With
 * several (assign: rss), give each its own share of the SNAT ports
 * (--ports-per-instance) and expect a reply to find its instance only when
 * the hash agrees. Per flow (assign: per-flow) each NF holds one
 * connection: it returns the connection's first packet rekeyed
 * (sq_rekeyed), so the manager knows the flow by its translated tuple too
 * and brings the replies here; it forgets the connection and gives its
 * port back at the flow's end (its state cleaner). Give each NF of the pool
 * its own ports (--ports-per-instance).
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <squall/log.h>
#include <squall/squall.h>

#include "../conntrack/state_opt.h"
#include "../nf_opt.h"
#include "nat.h"

#define NF_NAME     "squall-nf-nat"
#define SWEEP_SLOTS 16

enum nat_counter {
	C_NEW_CONNS,  /* connections given a translation */
	C_XLATED,     /* packets rewritten */
	C_UNTOUCHED,  /* passed as they are: no rule, or not IPv4 */
	C_NO_PORT,    /* dropped: SNAT ports exhausted */
	C_TABLE_FULL, /* dropped: no room for the connection */
	C_BAD_HDR,    /* dropped: truncated, bad IHL or length, fragment */
	C_ICMP_ERROR, /* ICMP errors about a connection, translated back */
	C_MAX,
};

static const char *const counter_names[C_MAX] = {
	"new_conns",       "translated",   "untouched",   "drop_no_port",
	"drop_table_full", "drop_bad_hdr", "icmp_errors",
};

struct nat_nf {
	struct sq_nf *nf;
	struct nat nat;
	uint16_t port_zone[STATE_OPT_PORTS]; /* --zone-by-port */
	bool return_by_in_port;
	int ctr[C_MAX];
	uint64_t tsc_per_ms;
};

static void
usage(FILE *f)
{
	fprintf(f,
		"Usage: " NF_NAME
		" [--snat PREFIX=ADDR[:LO-HI]] [--dnat PROTO:ADDR:PORT=ADDR:PORT]...\n"
		"       [--ports-per-instance N] [--table-size N] [--zone-by-port PORT=ZONE]...\n"
		"       [--return-by-in-port]\n"
		"Translate IPv4 connections: SNAT rewrites the source of connections opened\n"
		"from PREFIX to ADDR and a port of LO-HI (default 1024-65535; ICMP echo gets an\n"
		"identifier from the same range); DNAT rewrites the destination ADDR:PORT of\n"
		"PROTO (tcp or udp). Replies are translated back. Checksums are updated\n"
		"incrementally (RFC 1624). An ICMP error about a connection (port unreachable,\n"
		"time exceeded, ...) is translated back: its quoted packet as its receiver\n"
		"sent it, to the receiver's own address. Counters: new_conns, translated,\n"
		"untouched (no rule, not IPv4, an ICMP error about no connection: passed as\n"
		"they are), drop_no_port, drop_table_full, drop_bad_hdr, icmp_errors.\n"
		"\n"
		"  --snat PREFIX=ADDR[:LO-HI]   e.g. 10.0.0.0/24=192.0.2.1:20000-29999\n"
		"  --dnat PROTO:ADDR:PORT=ADDR:PORT  e.g. tcp:192.0.2.1:80=10.0.0.5:8080\n"
		"  --zone-by-port PORT=ZONE     packets arriving on PORT (name or index) are in\n"
		"                               ZONE (1-65535): tenants with the same addresses\n"
		"                               get separate mappings (the outside has no zone)\n"
		"  --return-by-in-port          send replies out of the port their connection\n"
		"                               came in on (a tenant edge), not along the chain\n"
		"  --ports-per-instance N       instance i uses the i-th N ports of LO-HI\n"
		"                               (several instances, and a per-flow pool's\n"
		"                               NFs, must not share ports)\n"
		"  --table-size N               entry slots, a power of 2 (default 65536; two\n"
		"                               a connection, up to 3/4 full)\n"
		"Replies must come back to the same instance: run one shared instance, or\n"
		"one NF per flow (assign: per-flow, with --ports-per-instance): the manager\n"
		"brings a connection's replies to its NF by the translated "
		"tuple.\n" NF_OPT_COMMON_HELP);
}

static int
parse_v4(const char *s, size_t len, uint32_t *out)
{
	char buf[INET_ADDRSTRLEN];
	struct in_addr a;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	*out = ntohl(a.s_addr);
	return 0;
}

static int
parse_port(const char *s, size_t len, uint16_t *out)
{
	char buf[8];
	uint64_t v;
	char *end;

	if (len == 0 || len >= sizeof(buf) || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	v = strtoull(buf, &end, 10);
	if (*end != '\0' || v > UINT16_MAX)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

/* ADDR:PORT */
static int
parse_endpoint(const char *s, size_t len, uint32_t *addr, uint16_t *port)
{
	const char *colon = memchr(s, ':', len);

	if (colon == NULL || parse_v4(s, (size_t)(colon - s), addr) < 0)
		return -EINVAL;
	return parse_port(colon + 1, len - (size_t)(colon - s) - 1, port);
}

static int
parse_snat(struct nat *n, const char *s)
{
	const char *eq = strchr(s, '='), *slash, *colon, *dash;
	unsigned long bits = 32;
	char *end;

	n->snat.port_lo = 1024;
	n->snat.port_hi = 65535;
	if (eq == NULL)
		return -EINVAL;
	slash = memchr(s, '/', (size_t)(eq - s));
	if (parse_v4(s, (size_t)((slash != NULL ? slash : eq) - s), &n->snat.src) < 0)
		return -EINVAL;
	if (slash != NULL) {
		bits = strtoul(slash + 1, &end, 10);
		if (end != eq || slash[1] < '0' || slash[1] > '9' || bits > 32)
			return -EINVAL;
	}
	n->snat.src_mask = bits == 0 ? 0 : ~(uint32_t)0 << (32 - bits);
	if ((n->snat.src & ~n->snat.src_mask) != 0)
		return -EINVAL;
	colon = strchr(eq + 1, ':');
	if (parse_v4(eq + 1, colon != NULL ? (size_t)(colon - eq - 1) : strlen(eq + 1),
		     &n->snat.to_addr) < 0)
		return -EINVAL;
	if (colon != NULL) {
		dash = strchr(colon + 1, '-');
		if (dash == NULL ||
		    parse_port(colon + 1, (size_t)(dash - colon - 1), &n->snat.port_lo) < 0 ||
		    parse_port(dash + 1, strlen(dash + 1), &n->snat.port_hi) < 0 ||
		    n->snat.port_lo == 0 || n->snat.port_lo > n->snat.port_hi)
			return -EINVAL;
	}
	n->has_snat = true;
	return 0;
}

static int
parse_dnat(struct nat *n, const char *s)
{
	const char *c = strchr(s, ':'), *eq = strchr(s, '=');
	struct nat_dnat *d;

	if (n->n_dnat >= NAT_MAX_DNAT || c == NULL || eq == NULL || eq < c)
		return -EINVAL;
	d = &n->dnat[n->n_dnat];
	if ((size_t)(c - s) == 3 && strncmp(s, "tcp", 3) == 0)
		d->proto = IPPROTO_TCP;
	else if ((size_t)(c - s) == 3 && strncmp(s, "udp", 3) == 0)
		d->proto = IPPROTO_UDP;
	else
		return -EINVAL;
	if (parse_endpoint(c + 1, (size_t)(eq - c - 1), &d->addr, &d->port) < 0 ||
	    parse_endpoint(eq + 1, strlen(eq + 1), &d->to_addr, &d->to_port) < 0)
		return -EINVAL;
	n->n_dnat++;
	return 0;
}

/* Replies go back out of the port their connection came in on, with
 * --return-by-in-port; the rest along the chain. */
static inline sq_verdict_t
nat_next(const struct nat_nf *nn)
{
	if (nn->return_by_in_port && nn->nat.last_dir == CT_REPLY)
		return sq_out(nn->nat.last_in_port);
	return SQ_NEXT;
}

/* An ICMP error: translated back if it quotes a connection of ours, else
 * passed as it is (it is about someone else's traffic). */
static sq_verdict_t
nat_icmp_error(struct nat_nf *nn, uint8_t *frame, const struct ct_hdrs *h, const struct ct_pkt *p,
	       uint64_t now_ms, uint64_t *ctr)
{
	int64_t i = nat_find_related(&nn->nat, p, now_ms);

	if (i < 0) {
		ctr[C_UNTOUCHED]++;
		return SQ_NEXT;
	}
	nat_rewrite_icmp_error(frame, h, &nn->nat.slot[i]);
	ctr[C_ICMP_ERROR]++;
	return nat_next(nn);
}

static inline sq_verdict_t
nat_one(struct nat_nf *nn, struct rte_mbuf *pkt, uint64_t now_ms, uint64_t *ctr)
{
	uint8_t *frame = rte_pktmbuf_mtod(pkt, uint8_t *);
	struct ct_hdrs h;
	struct ct_key x;
	struct ct_pkt p;
	int ret;

	uint16_t in_port = sq_pkt_meta(pkt)->in_port;

	ret = ct_parse_pkt(pkt, in_port < STATE_OPT_PORTS ? nn->port_zone[in_port] : 0, &p, &h);
	if (unlikely(ret != 0)) {
		if (ret == CT_PARSE_NOT_IP || ret == CT_PARSE_UNTRACKED) {
			ctr[C_UNTOUCHED]++;
			return SQ_NEXT;
		}
		ctr[C_BAD_HDR]++;
		return SQ_DROP;
	}
	if (h.ipv6) {
		ctr[C_UNTOUCHED]++;
		return SQ_NEXT;
	}
	if (unlikely(p.icmp_error))
		return nat_icmp_error(nn, frame, &h, &p, now_ms, ctr);
	bool fresh = false;

	switch (nat_translate(&nn->nat, &p, in_port, now_ms, &x)) {
	case NAT_XLATED_NEW:
		ctr[C_NEW_CONNS]++;
		fresh = true;
		break;
	case NAT_XLATED: break;
	case NAT_NO_PORT: ctr[C_NO_PORT]++; return SQ_DROP;
	case NAT_TABLE_FULL: ctr[C_TABLE_FULL]++; return SQ_DROP;
	default: ctr[C_UNTOUCHED]++; return SQ_NEXT;
	}
	if (memcmp(&x, &p.key, sizeof(x)) == 0) {
		ctr[C_UNTOUCHED]++;
		return nat_next(nn);
	}
	nat_rewrite(frame, &h, &p, &x);
	ctr[C_XLATED]++;
	/* A new connection's replies come back to the translated tuple: per
	 * flow, the manager then brings them to this NF too. */
	return fresh ? sq_rekeyed(nat_next(nn)) : nat_next(nn);
}

static void
nat_burst(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg)
{
	struct nat_nf *nn = arg;
	uint64_t ctr[C_MAX] = {0};
	uint64_t now_ms = rte_rdtsc() / nn->tsc_per_ms;
	uint16_t i;
	int c;

	for (i = 0; i < n_pkts; i++)
		sq_pkt_set_verdict(pkts[i], nat_one(nn, pkts[i], now_ms, ctr));
	nat_sweep(&nn->nat, now_ms, SWEEP_SLOTS);
	for (c = 0; c < C_MAX; c++)
		if (ctr[c] != 0)
			sq_nf_counter_add(nn->nf, nn->ctr[c], ctr[c]);
}

/* Per-flow: the flow ended; forget its connection and give its port back.
 * At stop: the same. */
static void
nat_clean(void *arg)
{
	struct nat_nf *nn = arg;

	nat_clear(&nn->nat);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"snat", required_argument, NULL, 's'},
		{"dnat", required_argument, NULL, 'd'},
		{"ports-per-instance", required_argument, NULL, 'p'},
		{"zone-by-port", required_argument, NULL, 'z'},
		{"return-by-in-port", no_argument, NULL, 'r'},
		{"table-size", required_argument, NULL, 't'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct nat_nf nn;
	static struct state_opt_zones zones;
	uint64_t slots = 65536, per_instance = 0, lo;
	struct sq_nf *nf;
	int opt, ret, c;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			if (parse_snat(&nn.nat, optarg) < 0) {
				fprintf(stderr, NF_NAME ": --snat: bad \"%s\" (try --help)\n",
					optarg);
				return NF_EXIT_USAGE;
			}
			break;
		case 'd':
			if (parse_dnat(&nn.nat, optarg) < 0) {
				fprintf(stderr, NF_NAME ": --dnat: bad \"%s\" (try --help)\n",
					optarg);
				return NF_EXIT_USAGE;
			}
			break;
		case 'p':
			if (nf_opt_u64(NF_NAME, "ports-per-instance", optarg, 1, 65535,
				       &per_instance) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'r': nn.return_by_in_port = true; break;
		case 'z':
			if (state_opt_zone_add(NF_NAME, &zones, optarg) != 0)
				return NF_EXIT_USAGE;
			break;
		case 't':
			if (state_opt_table_size(NF_NAME, optarg, &slots) != 0)
				return NF_EXIT_USAGE;
			break;
		case 'h': usage(stdout); return NF_EXIT_OK;
		case 0: /* for sq_nf_init() */ break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	ret = nf_opt_check_done(NF_NAME, argc, argv);
	if (ret != 0)
		return ret;
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	nn.nf = nf;
	if (state_opt_zones_resolve(NF_NAME, &zones, sq_nf_region(nf), nn.port_zone) != 0)
		return NF_EXIT_USAGE;
	if (per_instance != 0 && nn.nat.has_snat) {
		lo = nn.nat.snat.port_lo + per_instance * sq_nf_ctl(nf)->instance;
		if (lo + per_instance - 1 > nn.nat.snat.port_hi) {
			SQ_LOG(ERR, NAT, "instance %u: no ports left in the SNAT range\n",
			       sq_nf_ctl(nf)->instance);
			return NF_EXIT_USAGE;
		}
		nn.nat.snat.port_lo = (uint16_t)lo;
		nn.nat.snat.port_hi = (uint16_t)(lo + per_instance - 1);
	}
	if (nat_init(&nn.nat, (uint32_t)slots) < 0) {
		SQ_LOG(ERR, NAT, "no memory for %" PRIu64 " slots\n", slots);
		return NF_EXIT_FAIL;
	}
	nn.tsc_per_ms = sq_nf_region(nf)->tsc_hz / 1000 ? sq_nf_region(nf)->tsc_hz / 1000 : 1;
	for (c = 0; c < C_MAX; c++)
		nn.ctr[c] = sq_nf_counter_register(nf, counter_names[c]);
	sq_nf_set_burst_handler(nf, nat_burst, &nn);
	sq_nf_set_state_cleaner(nf, nat_clean, &nn);
	/* (the ACK of the second FIN needs the connection too) */
	sq_nf_clean_at_flow_end(nf);
	ret = sq_nf_run(nf);
	nat_free(&nn.nat);
	return ret < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
