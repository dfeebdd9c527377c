/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-lb: an L4 load balancer. A new connection to the virtual
 * address (--vip) gets a backend from a Maglev table (maglev.h) by the hash
 * of its 5-tuple and is DNAT'd to it; the connection's choice is kept in an
 * affinity table (nfs/nat/nat.h's, both directions), so a connection stays
 * on its backend even when the backends change, and replies get the
 * virtual address back. IPv4, TCP and UDP.
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
#include "../nat/nat.h"
#include "../nf_opt.h"
#include "maglev.h"

#define NF_NAME          "squall-nf-lb"
#define SWEEP_SLOTS      16
#define BACKEND_COUNTERS 6 /* conns_b0..conns_b5; SQ_NF_COUNTERS is 8 */

struct lb {
	struct sq_nf *nf;
	struct nat conns; /* the affinity table: no SNAT, DNAT per connection */
	struct maglev maglev;
	uint8_t proto;
	uint32_t vip;
	uint16_t vport;
	unsigned int n_backends;
	uint32_t backend_addr[MAGLEV_MAX_BACKENDS];
	uint16_t backend_port[MAGLEV_MAX_BACKENDS];
	char *backend_name[MAGLEV_MAX_BACKENDS];
	int backend_ctr[BACKEND_COUNTERS];
	int untouched_ctr, dropped_ctr;
	uint64_t tsc_per_ms;
};

static void
usage(FILE *f)
{
	fprintf(f, "Usage: " NF_NAME
		   " --vip tcp|udp:ADDR:PORT --backend ADDR:PORT... [--maglev-size M]\n"
		   "       [--table-size N]\n"
		   "Balance connections to the virtual address over the backends by Maglev\n"
		   "consistent hashing of the 5-tuple, DNAT each to its backend and keep it\n"
		   "there (an affinity table); replies get the virtual address back.\n"
		   "Counters: conns_b0..conns_b5 (new connections of the first six backends),\n"
		   "untouched (passed: not for the VIP, not IPv4), dropped (bad headers, a\n"
		   "full table).\n"
		   "\n"
		   "  --vip PROTO:ADDR:PORT   the virtual service\n"
		   "  --backend ADDR:PORT     a backend (repeatable, up to 64)\n"
		   "  --maglev-size M         Maglev table entries, a prime (default 65537)\n"
		   "  --table-size N          affinity slots, a power of 2 (default 65536; two\n"
		   "                          a connection)\n" NF_OPT_COMMON_HELP);
}

static int
parse_endpoint(const char *s, uint32_t *addr, uint16_t *port)
{
	const char *colon = strrchr(s, ':');
	char buf[INET_ADDRSTRLEN];
	struct in_addr a;
	uint64_t v;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, (size_t)(colon - s));
	buf[colon - s] = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	if (nf_opt_u64(NF_NAME, "vip/backend port", colon + 1, 1, 65535, &v) < 0)
		return -EINVAL;
	*addr = ntohl(a.s_addr);
	*port = (uint16_t)v;
	return 0;
}

static inline sq_verdict_t
lb_one(struct lb *lb, struct rte_mbuf *pkt, uint64_t now_ms, uint64_t *b_ctr, uint64_t *un,
       uint64_t *drop)
{
	uint8_t *frame = rte_pktmbuf_mtod(pkt, uint8_t *);
	struct ct_hdrs h;
	struct ct_key x;
	struct ct_pkt p;
	unsigned int b;
	int ret;

	ret = ct_parse(frame, rte_pktmbuf_data_len(pkt), 0, &p, &h);
	if (unlikely(ret != 0)) {
		if (ret == CT_PARSE_NOT_IP || ret == CT_PARSE_UNTRACKED) {
			(*un)++;
			return SQ_NEXT;
		}
		(*drop)++;
		return SQ_DROP;
	}
	if (h.ipv6) {
		(*un)++;
		return SQ_NEXT;
	}
	ret = nat_find(&lb->conns, &p, now_ms, &x);
	if (ret < 0) {
		if (p.key.proto != lb->proto || nat_v4(p.key.dst) != lb->vip ||
		    p.key.dport != lb->vport) {
			(*un)++;
			return SQ_NEXT;
		}
		b = maglev_pick(&lb->maglev, ct_key_hash(&p.key));
		ret = nat_create(&lb->conns, &p, sq_pkt_meta(pkt)->in_port, true,
				 lb->backend_addr[b], lb->backend_port[b], now_ms, &x);
		if (ret != NAT_XLATED_NEW) {
			(*drop)++;
			return SQ_DROP;
		}
		if (b < BACKEND_COUNTERS)
			b_ctr[b]++;
	} else if (ret != NAT_XLATED) {
		(*un)++;
		return SQ_NEXT;
	}
	nat_rewrite(frame, &h, &p, &x);
	return SQ_NEXT;
}

static void
lb_burst(struct rte_mbuf **pkts, uint16_t n_pkts, void *arg)
{
	struct lb *lb = arg;
	uint64_t b_ctr[BACKEND_COUNTERS] = {0}, un = 0, drop = 0;
	uint64_t now_ms = rte_rdtsc() / lb->tsc_per_ms;
	unsigned int b;
	uint16_t i;

	for (i = 0; i < n_pkts; i++)
		sq_pkt_set_verdict(pkts[i], lb_one(lb, pkts[i], now_ms, b_ctr, &un, &drop));
	nat_sweep(&lb->conns, now_ms, SWEEP_SLOTS);
	for (b = 0; b < BACKEND_COUNTERS; b++)
		if (b_ctr[b] != 0)
			sq_nf_counter_add(lb->nf, lb->backend_ctr[b], b_ctr[b]);
	if (un != 0)
		sq_nf_counter_add(lb->nf, lb->untouched_ctr, un);
	if (drop != 0)
		sq_nf_counter_add(lb->nf, lb->dropped_ctr, drop);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"vip", required_argument, NULL, 'v'},
		{"backend", required_argument, NULL, 'b'},
		{"maglev-size", required_argument, NULL, 'm'},
		{"table-size", required_argument, NULL, 't'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct lb lb;
	uint64_t slots = 65536, m = 65537;
	char name[SQ_NAME_LEN];
	struct sq_nf *nf;
	unsigned int b;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'v':
			if (strncmp(optarg, "tcp:", 4) == 0)
				lb.proto = IPPROTO_TCP;
			else if (strncmp(optarg, "udp:", 4) == 0)
				lb.proto = IPPROTO_UDP;
			if (lb.proto == 0 || parse_endpoint(optarg + 4, &lb.vip, &lb.vport) < 0) {
				fprintf(stderr,
					NF_NAME ": --vip: expected tcp|udp:ADDR:PORT, got \"%s\"\n",
					optarg);
				return NF_EXIT_USAGE;
			}
			break;
		case 'b':
			if (lb.n_backends >= MAGLEV_MAX_BACKENDS ||
			    parse_endpoint(optarg, &lb.backend_addr[lb.n_backends],
					   &lb.backend_port[lb.n_backends]) < 0) {
				fprintf(stderr, NF_NAME ": --backend: bad or too many: \"%s\"\n",
					optarg);
				return NF_EXIT_USAGE;
			}
			lb.backend_name[lb.n_backends++] = optarg;
			break;
		case 'm':
			if (nf_opt_u64(NF_NAME, "maglev-size", optarg, 2, 1u << 24, &m) < 0)
				return NF_EXIT_USAGE;
			if (!maglev_is_prime((uint32_t)m)) {
				fprintf(stderr, NF_NAME ": --maglev-size: not a prime: %s\n",
					optarg);
				return NF_EXIT_USAGE;
			}
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
	if (lb.proto == 0 || lb.n_backends == 0 || lb.n_backends > m) {
		fprintf(stderr, NF_NAME ": needs --vip and at least one --backend (try --help)\n");
		return NF_EXIT_USAGE;
	}
	if (maglev_build(&lb.maglev, (uint32_t)m, (const char *const *)lb.backend_name,
			 lb.n_backends) < 0 ||
	    nat_init(&lb.conns, (uint32_t)slots) < 0) {
		fprintf(stderr, NF_NAME ": no memory for the tables\n");
		return NF_EXIT_FAIL;
	}
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	lb.nf = nf;
	lb.tsc_per_ms = sq_nf_region(nf)->tsc_hz / 1000 ? sq_nf_region(nf)->tsc_hz / 1000 : 1;
	for (b = 0; b < BACKEND_COUNTERS && b < lb.n_backends; b++) {
		snprintf(name, sizeof(name), "conns_b%u", b);
		lb.backend_ctr[b] = sq_nf_counter_register(nf, name);
	}
	lb.untouched_ctr = sq_nf_counter_register(nf, "untouched");
	lb.dropped_ctr = sq_nf_counter_register(nf, "dropped");
	sq_nf_set_burst_handler(nf, lb_burst, &lb);
	ret = sq_nf_run(nf);
	nat_free(&lb.conns);
	maglev_free(&lb.maglev);
	return ret < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
