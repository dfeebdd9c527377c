/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-flowseen, for tests only: records every IPv4 TCP/UDP flow it
 * sees (both directions as one), and at its stop writes them to
 * DIR/flows.<instance>.<pid>, a line each: "A:PORT-B:PORT/PROTO PKTS". A test
 * reads the files of all instances of a service and checks that no flow was
 * seen by two of them (the scaler must never move a live flow).
 *
 *   squall-nf-flowseen --out DIR [--wait-ns NS] [--stall-us US --stall-every-ms MS]
 *
 * --wait-ns NS  wait NS per packet, asleep (nfs/nf_wait.h): an instance of
 *               known capacity, so a test can overload one
 * --stall-us US, --stall-every-ms MS
 *               every MS, stop taking packets for US, asleep in a signal
 *               handler: what a core shared with other tasks does to an NF
 *               (it runs late), mostly outside the packet handler, so its
 *               handler time stays low while its ring overflows
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <squall/region.h>
#include <squall/squall.h>

#include "../../nfs/nf_opt.h"
#include "../../nfs/nf_wait.h"

#define NF_NAME    "squall-nf-flowseen"
#define TABLE_SIZE (1u << 18) /* flows a test may send, with room */
#define MAX_PROBES 64         /* then the flow is not recorded (counted): no slowdown */

struct fkey {
	uint32_t ip_lo, ip_hi;
	uint16_t port_lo, port_hi;
	uint8_t proto;
};

struct fentry {
	struct fkey key;
	uint64_t pkts;
	bool used;
};

struct seen {
	struct fentry *table;
	uint64_t full; /* flows not recorded: the table was full */
	struct nf_wait wait;
};

static struct timespec stall; /* --stall-us */

static void
on_alarm(int sig)
{
	(void)sig;
	nanosleep(&stall, NULL); /* async-signal-safe */
}

/* Every @p every_ms, a stall of @p us (SIGALRM). @return 0, or -1. */
static int
start_stalls(uint64_t us, uint64_t every_ms)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	struct itimerval it = {
		.it_interval = {.tv_sec = (time_t)(every_ms / 1000),
				.tv_usec = (suseconds_t)(every_ms % 1000 * 1000)},
	};

	if (us == 0 || every_ms == 0)
		return 0;
	stall.tv_sec = (time_t)(us / 1000000);
	stall.tv_nsec = (long)(us % 1000000 * 1000);
	it.it_value = it.it_interval;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) < 0 || setitimer(ITIMER_REAL, &it, NULL) < 0) {
		perror(NF_NAME ": stalls");
		return -1;
	}
	return 0;
}

static bool
key_of(struct rte_mbuf *pkt, struct fkey *k)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(pkt, const struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip;
	const struct rte_udp_hdr *l4; /* the ports of TCP and UDP are where UDP's are */
	uint32_t src, dst;
	uint16_t sport, dport;
	size_t ihl;

	if (pkt->data_len < sizeof(*eth) + sizeof(*ip) ||
	    eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return false;
	ip = (const struct rte_ipv4_hdr *)(eth + 1);
	ihl = (size_t)(ip->version_ihl & 0xf) * 4;
	if ((ip->next_proto_id != IPPROTO_TCP && ip->next_proto_id != IPPROTO_UDP) ||
	    pkt->data_len < sizeof(*eth) + ihl + sizeof(*l4))
		return false;
	l4 = (const struct rte_udp_hdr *)((const uint8_t *)ip + ihl);
	src = ip->src_addr;
	dst = ip->dst_addr;
	sport = l4->src_port;
	dport = l4->dst_port;
	memset(k, 0, sizeof(*k));
	k->proto = ip->next_proto_id;
	if (src < dst || (src == dst && sport <= dport)) {
		*k = (struct fkey){src, dst, sport, dport, k->proto};
	} else {
		*k = (struct fkey){dst, src, dport, sport, k->proto};
	}
	return true;
}

/* murmur3's 64-bit finalizer: every key bit moves the low bits the table
 * indexes with */
static uint32_t
mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x;
}

static sq_verdict_t
seen_pkt(struct rte_mbuf *pkt, void *arg)
{
	struct seen *s = arg;
	struct fkey k;
	uint32_t h;

	nf_wait_pkt(&s->wait);
	if (!key_of(pkt, &k))
		return SQ_NEXT;
	h = mix(((uint64_t)k.ip_lo << 32 | k.ip_hi) ^
		mix((uint64_t)k.port_lo << 24 | (uint64_t)k.port_hi << 8 | k.proto));
	for (uint32_t i = 0; i < MAX_PROBES; i++) {
		struct fentry *e = &s->table[(h + i) & (TABLE_SIZE - 1)];

		if (!e->used) {
			e->used = true;
			e->key = k;
		}
		if (memcmp(&e->key, &k, sizeof(k)) == 0) {
			e->pkts++;
			return SQ_NEXT;
		}
	}
	s->full++;
	return SQ_NEXT;
}

static int
write_flows(const struct seen *s, const char *dir, unsigned int instance)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/flows.%u.%d", dir, instance, (int)getpid());
	f = fopen(path, "w");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	for (uint32_t i = 0; i < TABLE_SIZE; i++) {
		const struct fentry *e = &s->table[i];
		char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];

		if (!e->used)
			continue;
		inet_ntop(AF_INET, &e->key.ip_lo, a, sizeof(a));
		inet_ntop(AF_INET, &e->key.ip_hi, b, sizeof(b));
		fprintf(f, "%s:%u-%s:%u/%u %" PRIu64 "\n", a, rte_be_to_cpu_16(e->key.port_lo), b,
			rte_be_to_cpu_16(e->key.port_hi), e->key.proto, e->pkts);
	}
	if (s->full > 0)
		fprintf(f, "# table full: %" PRIu64 " packets of flows not recorded\n", s->full);
	return fclose(f) == 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"out", required_argument, NULL, 'o'},
		{"wait-ns", required_argument, NULL, 'w'},
		{"stall-us", required_argument, NULL, 's'},
		{"stall-every-ms", required_argument, NULL, 'e'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct seen s;
	const char *dir = NULL;
	uint64_t wait_ns = 0, stall_us = 0, stall_every_ms = 0;
	unsigned int instance;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'o': dir = optarg; break;
		case 'w':
			if (nf_opt_u64(NF_NAME, "wait-ns", optarg, 0, 100000000, &wait_ns) < 0)
				return NF_EXIT_USAGE;
			break;
		case 's':
			if (nf_opt_u64(NF_NAME, "stall-us", optarg, 0, 500000, &stall_us) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'e':
			if (nf_opt_u64(NF_NAME, "stall-every-ms", optarg, 0, 60000,
				       &stall_every_ms) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'h':
			printf("Usage: " NF_NAME " --out DIR [--wait-ns NS] [--stall-us US "
			       "--stall-every-ms MS]\n");
			return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	ret = nf_opt_check_done(NF_NAME, argc, argv);
	if (ret != 0)
		return ret;
	if (dir == NULL) {
		fprintf(stderr, NF_NAME ": --out DIR is required\n");
		return NF_EXIT_USAGE;
	}
	s.table = calloc(TABLE_SIZE, sizeof(*s.table));
	if (s.table == NULL)
		return NF_EXIT_FAIL;
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	nf_wait_init(&s.wait, wait_ns);
	if (start_stalls(stall_us, stall_every_ms) < 0)
		return NF_EXIT_FAIL;
	sq_nf_set_pkt_handler(nf, seen_pkt, &s);
	instance = sq_nf_ctl(nf)->instance; /* (sq_nf_run frees nf and unmaps the region) */
	ret = sq_nf_run(nf);
	if (write_flows(&s, dir, instance) < 0 || ret < 0)
		return NF_EXIT_FAIL;
	return NF_EXIT_OK;
}
