/* SPDX-License-Identifier: BSD-3-Clause
 * squall-nf-baddesc, for tests only: an NF that hands the manager back what
 * it must not, as a buggy or hostile NF in shared mode can. Every 4th packet
 * (the 1st, 5th, ...) is misused; the others pass untouched.
 *
 *   squall-nf-baddesc --misuse foreign|stolen|misaligned|double|mangle|loop|
 *                              data_off|data_len|pkt_len|nb_segs|next|pool|
 *                              refcnt|buf_addr
 *
 * foreign: a pointer to memory of its own instead of the packet (which it
 * keeps); stolen: a real mbuf of the pool that it was never given (one
 * 1000 objects on from the packet, found by its header) instead of the
 * packet (which it keeps); misaligned: the packet's address plus 64;
 * double: the packet in its own slot and again in the next one (whose
 * packet it keeps); mangle: every header field the manager and the PMDs
 * rely on scribbled over (buf_addr, buf_len, pool, next, nb_segs, refcnt),
 * lengths kept; loop: a chain's (a jumbo frame's) last segment linked back
 * to its first. Each field name: that one field alone made wrong (data_off
 * past the buffer, data_len past it, pkt_len not the data's, the others as
 * mangle does).
 */
#include <getopt.h>
#include <string.h>

#include <squall/squall.h>

#include "../../nfs/nf_opt.h"

#define NF_NAME "squall-nf-baddesc"

enum misuse {
	M_FOREIGN,
	M_STOLEN,
	M_MISALIGNED,
	M_DOUBLE,
	M_MANGLE,
	M_LOOP,
	M_DATA_OFF,
	M_DATA_LEN,
	M_PKT_LEN,
	M_NB_SEGS,
	M_NEXT,
	M_POOL,
	M_REFCNT,
	M_BUF_ADDR,
	M_MAX
};

static const char *const names[M_MAX] = {
	"foreign",  "stolen",  "misaligned", "double", "mangle", "loop",   "data_off",
	"data_len", "pkt_len", "nb_segs",    "next",   "pool",   "refcnt", "buf_addr",
};
#define USAGE                                                                                      \
	"--misuse foreign|stolen|misaligned|double|mangle|loop|data_off|data_len|pkt_len|nb_segs|" \
	"next|pool|refcnt|buf_addr"

/* Big enough for the library's write of nf_visits into "its" metadata. */
static uint8_t fake[4096] __rte_cache_aligned;
static uint64_t seen;
static enum misuse misused;

static void
mangle(struct rte_mbuf *m)
{
	m->buf_addr = (char *)m->buf_addr + 128;
	m->buf_len = 7;
	m->pool = (struct rte_mempool *)(uintptr_t)0xdead0000;
	m->next = (struct rte_mbuf *)(uintptr_t)0xbeef0000;
	m->nb_segs = 9;
	rte_mbuf_refcnt_set(m, 3);
}

/* Whether @p p looks like an mbuf of @p m's pool: its buffer right after
 * its header and private area, as the pool made every one. */
static bool
same_pool(const struct rte_mbuf *m, const struct rte_mbuf *p)
{
	uintptr_t priv = (uintptr_t)m->buf_addr - (uintptr_t)(m + 1);

	return p->pool == m->pool && (uintptr_t)p->buf_addr == (uintptr_t)(p + 1) + priv &&
	       p->buf_len == m->buf_len;
}

/* A real mbuf of the pool this NF was never given: 1000 objects on from @p m
 * (or back, near the region's end), where a 64-packet test has not
 * allocated. NULL if the layout is not the one expected. */
static struct rte_mbuf *
stolen(struct sq_nf *nf, struct rte_mbuf *m)
{
	const struct sq_region_hdr *hdr = sq_nf_region(nf);
	uintptr_t lo = hdr->base_addr, hi = hdr->base_addr + hdr->len_bytes, stride = 0;

	/* the next object: the stride of the pool's objects */
	for (uintptr_t a = (uintptr_t)m + 64; a + sizeof(*m) < hi && a < (uintptr_t)m + 8192;
	     a += 64)
		if (same_pool(m, (struct rte_mbuf *)a)) {
			stride = a - (uintptr_t)m;
			break;
		}
	if (stride == 0)
		return NULL;
	for (long k = 1000; k >= -1000; k -= 2000) {
		uintptr_t a = (uintptr_t)m + (uintptr_t)(k * (long)stride);

		if (a >= lo && a + sizeof(*m) < hi && same_pool(m, (struct rte_mbuf *)a))
			return (struct rte_mbuf *)a;
	}
	return NULL;
}

/* stolen(), said once on stderr: a test checks it was a pool mbuf. */
static struct rte_mbuf *
steal(struct sq_nf *nf, struct rte_mbuf *m)
{
	static bool said;
	struct rte_mbuf *p = stolen(nf, m);

	if (!said) {
		said = true;
		fprintf(stderr, NF_NAME ": stolen: %s\n", p != NULL ? "a pool mbuf" : "none found");
	}
	return p;
}

static void
loop(struct rte_mbuf *m)
{
	struct rte_mbuf *s = m;

	while (s->next != NULL)
		s = s->next;
	s->next = m;
}

static void
misuse(struct rte_mbuf **pkts, uint16_t n, void *arg)
{
	struct sq_nf *nf = arg;
	const enum misuse *what = &misused;

	for (uint16_t i = 0; i < n; i++) {
		if (seen++ % 4 != 0)
			continue;
		switch (*what) {
		case M_FOREIGN: pkts[i] = (struct rte_mbuf *)fake; break;
		case M_STOLEN: pkts[i] = steal(nf, pkts[i]); break;
		case M_MISALIGNED: pkts[i] = (struct rte_mbuf *)((char *)pkts[i] + 64); break;
		case M_DOUBLE:
			if (i + 1 < n) {
				pkts[i + 1] = pkts[i];
				seen++;
				i++;
			}
			break;
		case M_MANGLE: mangle(pkts[i]); break;
		case M_LOOP: loop(pkts[i]); break;
		case M_DATA_OFF: pkts[i]->data_off = pkts[i]->buf_len + 1; break;
		case M_DATA_LEN: pkts[i]->data_len = 65000; break;
		case M_PKT_LEN: pkts[i]->pkt_len += 100; break;
		case M_NB_SEGS: pkts[i]->nb_segs = 9; break;
		case M_NEXT: pkts[i]->next = (struct rte_mbuf *)(uintptr_t)0xbeef0000; break;
		case M_POOL: pkts[i]->pool = (struct rte_mempool *)(uintptr_t)0xdead0000; break;
		case M_REFCNT: rte_mbuf_refcnt_set(pkts[i], 3); break;
		case M_BUF_ADDR: pkts[i]->buf_addr = (char *)pkts[i]->buf_addr + 128; break;
		default: break;
		}
	}
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"misuse", required_argument, NULL, 'm'},
		NF_OPT_COMMON_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	enum misuse what = M_MAX;
	struct sq_nf *nf;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, NF_OPT_SHORT, longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			for (what = 0; what < M_MAX && strcmp(optarg, names[what]) != 0; what++)
				;
			break;
		case 'h': printf("Usage: " NF_NAME " --misuse WHAT (tests only)\n"); return 0;
		case 0: break;
		default: return nf_opt_usage_error(NF_NAME);
		}
	}
	if (what == M_MAX) {
		fprintf(stderr, NF_NAME ": " USAGE "\n");
		return NF_EXIT_USAGE;
	}
	ret = nf_opt_attach(argc, argv, &nf);
	if (ret != 0)
		return ret;
	misused = what;
	sq_nf_set_burst_handler(nf, misuse, nf);
	return sq_nf_run(nf) < 0 ? NF_EXIT_FAIL : NF_EXIT_OK;
}
