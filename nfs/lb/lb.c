/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-lb: an L4 load balancer. A new connection to the virtual
 * address (--vip) gets a backend from a Maglev table (maglev.h) by the hash
 * of its 5-tuple and is DNAT'd to it; the connection's choice is kept in an
 * affinity table (nfs/nat/nat.h's, both directions), so a connection stays
 * on its backend even when the backends change, and replies get the
 * virtual address back. IPv4, TCP and UDP. Shared (one instance) or one
 * NF per connection (assign: per-flow): a connection's first packet goes
 * back rekeyed (sq_rekeyed), so the backend's replies, addressed from the
 * backend and not the virtual address, reach the same NF.
 *
 * Backends change at run time through the NF's message ring (type 256:
 * "add ADDR:PORT", "remove ADDR:PORT", "reload" from --backends FILE; also
 * SIGHUP), answered by a message of the same type; the Maglev table is
 * built again between bursts, so only the connections Maglev moves go to
 * another backend, and only new ones: a live connection keeps its backend,
 * a removed one included, until it ends. "conns" and "backend N" answer
 * per-backend counts past the six counters an NF has room for.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <signal.h>
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
#include "backends.h"

#define NF_NAME          "squall-nf-lb"
#define SWEEP_SLOTS      16
#define BACKEND_COUNTERS 6 /* conns_b0..conns_b5; SQ_NF_COUNTERS is 8 */
#define MSG_LB           SQ_MSG_USER

struct lb {
	struct sq_nf *nf;
	struct nat conns; /* the affinity table: no SNAT, DNAT per connection */
	struct lb_backends bk;
	uint8_t proto;
	uint32_t vip;
	uint16_t vport;
	const char *backends_path; /* --backends FILE, for "reload" and SIGHUP */
	int backend_ctr[BACKEND_COUNTERS];
	int untouched_ctr, dropped_ctr;
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
		"Usage: " NF_NAME
		" --vip tcp|udp:ADDR:PORT (--backend ADDR:PORT... | --backends FILE)\n"
		"       [--maglev-size M] [--table-size N]\n"
		"Balance connections to the virtual address over the backends by Maglev\n"
		"consistent hashing of the 5-tuple, DNAT each to its backend and keep it\n"
		"there (an affinity table); replies get the virtual address back.\n"
		"Counters: conns_b0..conns_b5 (new connections of backends 0-5, in the order\n"
		"they were added), untouched (passed: not for the VIP, not IPv4), dropped\n"
		"(bad headers, a full table).\n"
		"\n"
		"  --vip PROTO:ADDR:PORT   the virtual service\n"
		"  --backend ADDR:PORT     a backend (repeatable, up to 64)\n"
		"  --backends FILE         backends from FILE, one ADDR:PORT a line (#\n"
		"                          comments); read again on \"reload\" or SIGHUP\n"
		"  --maglev-size M         Maglev table entries, a prime (default 65537)\n"
		"  --table-size N          affinity slots, a power of 2 (default 65536; two\n"
		"                          a connection)\n"
		"\n"
		"Messages (type 256: squallctl msg SERVICE INSTANCE 256 TEXT), each answered\n"
		"by a message of type 256 (squallctl msgs):\n"
		"  add ADDR:PORT      a backend for new connections\n"
		"  remove ADDR:PORT   no new connections for it; its live ones stay\n"
		"  reload             the backends become --backends FILE's (SIGHUP too)\n"
		"  conns [FIRST]      new connections per backend from FIRST on:\n"
		"                     \"conns 0-9/12: 31 30 ...\" (a removed one ends in -)\n"
		"  backend N          \"bN ADDR:PORT live|removed conns=C\"\n" NF_OPT_COMMON_HELP);
}

/* The backends of @p path into @p want (slots taken as needed).
 * @return how many, or -1 after saying why on stderr. */
static int
lb_read_backends(struct lb *lb, const char *path, bool *want)
{
	char line[256], where[300];
	unsigned int lineno = 0, n = 0;
	uint32_t addr;
	uint16_t port;
	size_t len;
	char *p;
	int b = 0;
	FILE *f;

	f = fopen(path, "r");
	if (f == NULL) {
		fprintf(stderr, NF_NAME ": --backends %s: %s\n", path, strerror(errno));
		return -1;
	}
	memset(want, 0, MAGLEV_MAX_BACKENDS * sizeof(*want));
	while (b >= 0 && fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		p = line + strspn(line, " \t");
		p[strcspn(p, "#\r\n")] = '\0';
		len = strcspn(p, " \t");
		if (len == 0)
			continue;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		if (lb_endpoint_parse(p, len, &addr, &port) < 0 ||
		    p[len + strspn(p + len, " \t")]) {
			fprintf(stderr, NF_NAME ": %s: expected ADDR:PORT, got \"%s\"\n", where, p);
			b = -1;
		} else if ((b = lb_slot_take(&lb->bk, addr, port)) < 0) {
			fprintf(stderr, NF_NAME ": %s: more than %d backends\n", where,
				MAGLEV_MAX_BACKENDS);
		} else {
			n += !want[b];
			want[b] = true;
		}
	}
	fclose(f);
	return b < 0 ? -1 : (int)n;
}

/* "reload" and SIGHUP: the file's backends become the live set. */
static int
lb_reload(struct lb *lb, char *reply, size_t len)
{
	bool want[MAGLEV_MAX_BACKENDS];
	int n;

	reload_requested = 0;
	if (lb->backends_path == NULL) {
		snprintf(reply, len, "not reloaded: no --backends FILE");
		return -EINVAL;
	}
	n = lb_read_backends(lb, lb->backends_path, want);
	if (n <= 0 || lb_apply(&lb->bk, want) < 0) {
		snprintf(reply, len, "not reloaded: old backends kept");
		SQ_LOG(ERR, LB, "%s: not reloaded, old backends kept\n", lb->backends_path);
		return -EINVAL;
	}
	snprintf(reply, len, "reloaded %d backends", n);
	SQ_LOG(NOTICE, LB, "%s: reloaded, %d backends\n", lb->backends_path, n);
	return 0;
}

static void
lb_add_remove(struct lb *lb, bool add, const char *arg, size_t arg_len, char *reply, size_t len)
{
	bool want[MAGLEV_MAX_BACKENDS];
	const char *verb = add ? "added" : "removed";
	uint32_t addr;
	uint16_t port;
	unsigned int b;
	int slot;

	if (lb_endpoint_parse(arg, arg_len, &addr, &port) < 0) {
		snprintf(reply, len, "not %s: expected ADDR:PORT", verb);
		return;
	}
	slot = add ? lb_slot_take(&lb->bk, addr, port) : lb_slot_of(&lb->bk, addr, port);
	if (slot < 0) {
		snprintf(reply, len, "not %s: %s", verb,
			 slot == -ENOSPC ? "64 backends already" : "no such backend");
		return;
	}
	for (b = 0; b < lb->bk.n_slots; b++)
		want[b] = lb->bk.be[b].live;
	want[slot] = add;
	if (!add && lb->bk.be[slot].live && lb_n_live(&lb->bk) == 1) {
		snprintf(reply, len, "not removed: the last backend");
		return;
	}
	if (lb_apply(&lb->bk, want) < 0) {
		snprintf(reply, len, "not %s: no memory", verb);
		return;
	}
	snprintf(reply, len, "%s b%d %s, %u live", verb, slot, lb->bk.be[slot].name,
		 lb_n_live(&lb->bk));
}

/* "conns FIRST-LAST/N: c c c": as many counts as fit in one message. */
static void
lb_conns_reply(const struct lb *lb, unsigned long first, char *reply, size_t len)
{
	char counts[SQ_MSG_DATA_LEN];
	size_t used = 0;
	unsigned int b;
	int w;

	for (b = (unsigned int)first; b < lb->bk.n_slots; b++) {
		w = snprintf(counts + used, sizeof(counts) - used, " %" PRIu64 "%s",
			     lb->bk.be[b].conns, lb->bk.be[b].live ? "" : "-");
		/* the head takes up to 14 bytes: "conns 63-63/64:" */
		if (w < 0 || used + (size_t)w + 16 > len)
			break;
		used += (size_t)w;
	}
	counts[used] = '\0';
	if (b == first)
		snprintf(reply, len, "conns %lu-/%u:", first, lb->bk.n_slots);
	else
		snprintf(reply, len, "conns %lu-%u/%u:%s", first, b - 1, lb->bk.n_slots, counts);
}

/* The message ring, between bursts: backends change here, with no lock
 * against the packet path (the NF's one thread runs both). */
static void
lb_msg(struct sq_nf *nf, const struct sq_msg *msg, void *arg)
{
	struct lb *lb = arg;
	char text[SQ_MSG_DATA_LEN + 1], reply[SQ_MSG_DATA_LEN];
	unsigned long n = 0;
	const char *a;
	size_t a_len;
	char *end;

	if (msg->type != MSG_LB || msg->len > SQ_MSG_DATA_LEN)
		return;
	memcpy(text, msg->data, msg->len);
	text[msg->len] = '\0';
	text[strcspn(text, "\r\n")] = '\0';
	a = strchr(text, ' ');
	a = a != NULL ? a + strspn(a, " ") : text + strlen(text);
	a_len = strcspn(a, " ");
	if (strncmp(text, "add ", 4) == 0 || strncmp(text, "remove ", 7) == 0) {
		lb_add_remove(lb, text[0] == 'a', a, a_len, reply, sizeof(reply));
	} else if (strcmp(text, "reload") == 0) {
		lb_reload(lb, reply, sizeof(reply));
	} else if (strncmp(text, "conns", 5) == 0 && (text[5] == '\0' || text[5] == ' ')) {
		if (a_len > 0)
			n = strtoul(a, &end, 10);
		lb_conns_reply(lb, n, reply, sizeof(reply));
	} else if (strncmp(text, "backend ", 8) == 0 && a_len > 0 &&
		   (n = strtoul(a, &end, 10)) < lb->bk.n_slots && end == a + a_len) {
		snprintf(reply, sizeof(reply), "b%lu %s %s conns=%" PRIu64, n, lb->bk.be[n].name,
			 lb->bk.be[n].live ? "live" : "removed", lb->bk.be[n].conns);
	} else {
		snprintf(reply, sizeof(reply), "unknown: add|remove|reload|conns|backend");
	}
	sq_nf_msg_send(nf, MSG_LB, reply, (uint32_t)strlen(reply));
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

	ret = ct_parse_pkt(pkt, 0, &p, &h);
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
		b = lb_pick(&lb->bk, ct_key_hash(&p.key));
		ret = nat_create(&lb->conns, &p, sq_pkt_meta(pkt)->in_port, true, lb->bk.be[b].addr,
				 lb->bk.be[b].port, now_ms, &x);
		if (ret != NAT_XLATED_NEW) {
			(*drop)++;
			return SQ_DROP;
		}
		lb->bk.be[b].conns++;
		if (b < BACKEND_COUNTERS)
			b_ctr[b]++;
		nat_rewrite(frame, &h, &p, &x);
		/* Per flow, the manager brings the backend's replies here too. */
		return sq_rekeyed(SQ_NEXT);
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
	uint64_t now_ms;
	char reply[SQ_MSG_DATA_LEN];
	unsigned int b;
	uint16_t i;

	if (unlikely(reload_requested))
		lb_reload(lb, reply, sizeof(reply));
	now_ms = rte_rdtsc() / lb->tsc_per_ms;
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

/* Per-flow: the flow ended; forget its connection. At stop: the same. */
static void
lb_clean(void *arg)
{
	struct lb *lb = arg;

	nat_clear(&lb->conns);
}

static int
parse_vip(struct lb *lb, const char *s)
{
	if (strncmp(s, "tcp:", 4) == 0)
		lb->proto = IPPROTO_TCP;
	else if (strncmp(s, "udp:", 4) == 0)
		lb->proto = IPPROTO_UDP;
	if (lb->proto == 0 || lb_endpoint_parse(s + 4, strlen(s + 4), &lb->vip, &lb->vport) < 0) {
		fprintf(stderr, NF_NAME ": --vip: expected tcp|udp:ADDR:PORT, got \"%s\"\n", s);
		return -EINVAL;
	}
	return 0;
}

static int
add_backend_opt(struct lb *lb, const char *s)
{
	uint32_t addr;
	uint16_t port;
	int b;

	if (lb_endpoint_parse(s, strlen(s), &addr, &port) < 0 ||
	    (b = lb_slot_take(&lb->bk, addr, port)) < 0) {
		fprintf(stderr, NF_NAME ": --backend: bad or too many: \"%s\"\n", s);
		return -EINVAL;
	}
	lb->bk.be[b].live = true;
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"vip", required_argument, NULL, 'v'},
		{"backend", required_argument, NULL, 'b'},
		{"backends", required_argument, NULL, 'f'},
		{"maglev-size", required_argument, NULL, 'm'},
		{"table-size", required_argument, NULL, 't'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	static struct lb lb;
	bool want[MAGLEV_MAX_BACKENDS];
	uint64_t slots = 65536, m = 65537;
	char name[SQ_NAME_LEN];
	struct sq_nf *nf;
	unsigned int b;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'v':
			if (parse_vip(&lb, optarg) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'b':
			if (add_backend_opt(&lb, optarg) < 0)
				return NF_EXIT_USAGE;
			break;
		case 'f': lb.backends_path = optarg; break;
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
	if (lb.backends_path != NULL) {
		if (lb_read_backends(&lb, lb.backends_path, want) < 0)
			return NF_EXIT_USAGE;
		for (b = 0; b < lb.bk.n_slots; b++)
			lb.bk.be[b].live |= want[b];
	}
	lb.bk.m = (uint32_t)m;
	if (lb.proto == 0 || lb_n_live(&lb.bk) == 0 || lb_n_live(&lb.bk) > m) {
		fprintf(stderr, NF_NAME ": needs --vip and at least one backend (try --help)\n");
		return NF_EXIT_USAGE;
	}
	if (lb_rebuild(&lb.bk) < 0 || nat_init(&lb.conns, (uint32_t)slots) < 0) {
		fprintf(stderr, NF_NAME ": no memory for the tables\n");
		return NF_EXIT_FAIL;
	}
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	lb.nf = nf;
	lb.tsc_per_ms = sq_nf_region(nf)->tsc_hz / 1000 ? sq_nf_region(nf)->tsc_hz / 1000 : 1;
	/* All six, whatever the backends now: more may be added at run time,
	 * and counters are named before the NF runs. */
	for (b = 0; b < BACKEND_COUNTERS; b++) {
		snprintf(name, sizeof(name), "conns_b%u", b);
		lb.backend_ctr[b] = sq_nf_counter_register(nf, name);
	}
	lb.untouched_ctr = sq_nf_counter_register(nf, "untouched");
	lb.dropped_ctr = sq_nf_counter_register(nf, "dropped");
	signal(SIGHUP, on_sighup);
	sq_nf_set_burst_handler(nf, lb_burst, &lb);
	sq_nf_set_state_cleaner(nf, lb_clean, &lb);
	/* (the ACK of the second FIN needs the connection too) */
	sq_nf_clean_at_flow_end(nf);
	sq_nf_set_msg_handler(nf, lb_msg, &lb);
	ret = sq_nf_run(nf);
	nat_free(&lb.conns);
	maglev_free(&lb.bk.maglev);
	return ret < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
