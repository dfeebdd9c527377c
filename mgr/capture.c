/* SPDX-License-Identifier: BSD-3-Clause
 * capture role: copies of the packets at one capture point, written as
 * pcapng (readable by Wireshark, tshark, capinfos) to a path the manager is
 * given, usually a FIFO that squallctl relays to a file or its stdout.
 *
 *   /squall/capture_start,KEY=VALUE,...[,filter=BPF]  start; replies {"id": N, ...}
 *   /squall/capture_stop,ID                            end it (the file is completed)
 *   /squall/captures                                   every capture and its counters
 *
 * Keys: point=port_rx|port_tx|nf_in|nf_out; port=NAME|INDEX (port points);
 * chain=NAME,hop=N (N from 0) or service=NAME or nf=ID (nf points, any one);
 * path=/ABSOLUTE (required; a FIFO or a file, created if missing);
 * count=PKTS, duration_ms=MS, snaplen=BYTES, ring=SLOTS, writer=idle|share;
 * filter= takes the rest of the line (a libpcap expression, so it may hold
 * commas).
 *
 * Why pcapng written by hand and not rte_pcapng: 22.11's rte_pcapng_fdopen
 * writes one interface block per ethdev port, named by the port, and
 * rte_pcapng_copy ties each packet to a port id; a hop of a chain is no
 * port. The format is four small block types (pcapng spec, RFC draft
 * ietf-opsawg-pcapng), so one interface block per capture names the hop.
 *
 * Copies: the roles (rx, tx) copy into a mempool of the manager's own, never
 * the region's pool, so a capture cannot take an mbuf from traffic; a copy
 * goes on the capture's ring, which a control thread drains to the file. A
 * full ring or an empty capture pool loses the copy, counted
 * (drop_ring_full_pkts, drop_pool_empty_pkts), never the packet.
 *
 * Filter: compiled once by libpcap (pcap_compile on a dead DLT_EN10MB
 * handle), converted to eBPF by rte_bpf_convert and rewritten around three
 * faults of DPDK 22.11 (capfilter.c), loaded by rte_bpf_load and run
 * JIT-compiled (rte_bpf_get_jit) per packet, only while a filter is set.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include <rte_bpf.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#include <rte_ring.h>
#include <rte_telemetry.h>

#include "capfilter.h"
#include "capture.h"
#include "ctlprio.h"
#include "lane.h"
#include "mgr.h"
#include "tel_reply.h"

#define CAP_MAX                16   /* captures at once, running or done */
#define CAP_POOL_MBUFS         8191 /* copies in flight, all captures together */
#define CAP_POOL_CACHE         256
#define CAP_RING_DEFAULT       4096
#define CAP_RING_MAX           65536
#define CAP_SNAPLEN_MAX        262144                   /* libpcap's MAXIMUM_SNAPLEN */
#define CAP_CHUNK              64                       /* packets examined per copy step */
#define CAP_BUF_BYTES          (CAP_SNAPLEN_MAX + 4096) /* a whole block always fits */
#define CAP_WRITE_POLL_MS      100
#define CAP_STALL_MS           2000 /* a stopping capture waits this long for a stuck reader */
#define CAP_WRITER_NICE        10
#define CAP_WRITER_BATCH       32     /* copies written between two looks (idle: yields) */
#define CAP_WRITER_SLICE_NS    100000 /* writer=share */
#define CAP_WRITER_IDLE_US     1000u
#define CAP_WRITER_RUN_US      50u /* writer=idle: writes this long, then yields */
#define CAP_WRITER_IDLE_MAX_US 4000u
#define CAP_FILTER_LEN         512
#define CAP_NAME_LEN           96
#define CAP_DESCR_LEN          256

uint32_t mgr_capture_points;

enum cap_state { CAP_FREE, CAP_RUNNING, CAP_ENDING, CAP_DONE };
static const char *const cap_state_names[] = {"free", "running", "ending", "done"};
static const char *const cap_point_names[] = {"port_rx", "port_tx", "nf_in", "nf_out"};

/* Per-copy facts the writer needs, in the capture pool's private area. */
struct cap_priv {
	uint64_t tsc;
	uint32_t orig_len;
	uint32_t idx; /* held copies: the packet's place in the caller's burst */
};

/* Written by one role each (rx or tx): no line shared between them. */
struct cap_counts {
	uint64_t seen_pkts;    /* at the point, selected (chain/hop, nf, ...) */
	uint64_t matched_pkts; /* ... and passed the filter */
	uint64_t copied_pkts;  /* ... and copied onto the ring */
	uint64_t ring_full_pkts;
	uint64_t pool_empty_pkts;
	uint64_t refused_pkts; /* copies discarded: the NF ring or port refused the packet */
	/* What the capture costs the role, TSC: its filter, and its copies
	 * (for the benchmark's account of where a capture's cost goes). */
	uint64_t filter_tsc, copy_tsc;
} __rte_cache_aligned;

struct capture {
	/* Read by the roles; set before live, not changed while live. */
	_Atomic bool live;
	enum mgr_cap_point point;
	uint16_t port;
	int32_t nf_id, service, chain, hop; /* -1: any */
	uint32_t snaplen;
	bool writer_share; /* writer=share (default): the manager core, nice 10 */
	uint64_t (*filter_jit)(void *);
	struct rte_bpf *filter;
	struct rte_ring *ring;
	struct cap_counts counts[2]; /* [0] rx role, [1] tx role */

	/* Control side (telemetry thread, the writer thread). */
	_Atomic uint32_t state;
	_Atomic bool stop_req;
	uint32_t id;
	int fd;
	uint64_t max_pkts, duration_ns;
	uint64_t start_ns, start_tsc, end_ns;
	uint64_t written_pkts, written_bytes, past_count_pkts, lost_at_end_pkts; /* writer */
	char path[SQ_CFG_PATH_LEN];
	char name[CAP_NAME_LEN];
	char descr[CAP_DESCR_LEN];
	char filter_str[CAP_FILTER_LEN];
	char end_reason[96];
	uint8_t *buf;
	size_t buf_len;
};

/* Copies of packets about to go on an NF's rx ring or a port's tx queue wait
 * here, per role, until the caller knows how many the ring or queue took
 * (mgr_capture_taken): a copy is made before the hand-over, since after it
 * the NF may already change the packet, and a capture at that point holds
 * what the NF or port got, not what was refused. */
#define CAP_HELD_MAX (CAP_MAX * SQ_STAGE_MAX)
struct cap_held {
	struct capture *cap[CAP_HELD_MAX];
	struct rte_mbuf *copy[CAP_HELD_MAX];
};
static struct cap_held cap_held[2];
uint16_t mgr_capture_held[2];

static struct mgr *cap_mgr;
static struct capture caps[CAP_MAX];
static struct rte_mempool *cap_pool;
static uint32_t cap_next_id = 1;
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set once the roles stopped for good: no quiescence to wait for. */
static _Atomic bool cap_roles_stopped;
static double cap_ns_per_tsc;

/* ------------------------------------------------------------------ dataplane */

static inline int
role_index(const struct mgr *mgr, const struct role_ctx *role)
{
	return role == &mgr->rx ? 0 : 1;
}

/* Copy @p n selected packets onto the capture's ring. Single-segment frames
 * (all but jumbo frames from some ports) are copied with one memcpy into a
 * bulk-allocated mbuf: rte_pktmbuf_copy per packet cost twice as much. */
static void
cap_copy(struct capture *c, int r, struct rte_mbuf **pkts, uint16_t *idx, unsigned int n,
	 uint64_t now_tsc, bool hold)
{
	struct cap_counts *cnt = &c->counts[r];
	struct rte_mbuf *copies[CAP_CHUNK];
	unsigned int k = 0, sent, room;
	uint64_t t0 = rte_rdtsc(), t1;

	if (c->filter != NULL) {
		for (unsigned int i = 0; i < n; i++)
			if ((c->filter_jit != NULL ? c->filter_jit(pkts[i])
						   : rte_bpf_exec(c->filter, pkts[i])) != 0) {
				idx[k] = idx[i];
				pkts[k++] = pkts[i];
			}
		n = k;
	}
	t1 = rte_rdtsc();
	cnt->filter_tsc += t1 - t0;
	cnt->matched_pkts += n;
	/* Copies the ring has no room for are not made: a writer that fell
	 * behind costs counted copies, not the copying. (Held copies of the
	 * round count as taken: the estimate errs towards copying.) */
	room = rte_ring_free_count(c->ring);
	if (unlikely(room < n)) {
		cnt->ring_full_pkts += n - room;
		n = room;
	}
	if (n == 0)
		return;
	if (unlikely(rte_pktmbuf_alloc_bulk(cap_pool, copies, n) != 0)) {
		cnt->pool_empty_pkts += n;
		return;
	}
	k = 0;
	for (unsigned int i = 0; i < n; i++) {
		const struct rte_mbuf *m = pkts[i];
		uint32_t len = RTE_MIN(m->pkt_len, c->snaplen);
		struct rte_mbuf *cp = copies[i];
		struct cap_priv *priv;

		if (likely(m->nb_segs == 1 && len <= rte_pktmbuf_tailroom(cp))) {
			rte_memcpy(rte_pktmbuf_mtod(cp, void *), rte_pktmbuf_mtod(m, const void *),
				   len);
			cp->data_len = (uint16_t)len;
			cp->pkt_len = len;
		} else {
			rte_pktmbuf_free(cp);
			cp = rte_pktmbuf_copy(m, cap_pool, 0, len);
			if (cp == NULL) {
				cnt->pool_empty_pkts++;
				continue;
			}
		}
		priv = rte_mbuf_to_priv(cp);
		priv->tsc = now_tsc;
		priv->orig_len = m->pkt_len;
		priv->idx = idx[i];
		copies[k++] = cp;
	}
	cnt->copy_tsc += rte_rdtsc() - t1;
	if (hold) {
		struct cap_held *h = &cap_held[r];

		for (unsigned int i = 0; i < k; i++) {
			h->cap[mgr_capture_held[r]] = c;
			h->copy[mgr_capture_held[r]++] = copies[i];
		}
		return;
	}
	sent = rte_ring_enqueue_burst(c->ring, (void **)copies, k, NULL);
	cnt->copied_pkts += sent;
	if (unlikely(sent < k)) {
		cnt->ring_full_pkts += k - sent;
		rte_pktmbuf_free_bulk(copies + sent, k - sent);
	}
}

/* The hand-over took the first @p taken packets of the burst: their copies
 * go on their captures' rings, the others' are discarded. */
void
mgr_capture_taken(unsigned int r, unsigned int taken)
{
	struct cap_held *h = &cap_held[r];
	unsigned int n = mgr_capture_held[r];

	for (unsigned int i = 0; i < n;) {
		struct capture *c = h->cap[i];
		struct cap_counts *cnt = &c->counts[r];
		struct rte_mbuf *keep[CAP_HELD_MAX];
		unsigned int k = 0, sent;

		for (; i < n && h->cap[i] == c; i++) {
			struct rte_mbuf *cp = h->copy[i];

			if (((struct cap_priv *)rte_mbuf_to_priv(cp))->idx < taken) {
				keep[k++] = cp;
			} else {
				cnt->refused_pkts++;
				rte_pktmbuf_free(cp);
			}
		}
		sent = rte_ring_enqueue_burst(c->ring, (void **)keep, k, NULL);
		cnt->copied_pkts += sent;
		if (unlikely(sent < k)) {
			cnt->ring_full_pkts += k - sent;
			rte_pktmbuf_free_bulk(keep + sent, k - sent);
		}
	}
	mgr_capture_held[r] = 0;
}

static inline bool
cap_wants(const struct capture *c, enum mgr_cap_point point)
{
	return c->point == point && atomic_load_explicit(&c->live, memory_order_acquire);
}

void
mgr_capture_port(struct mgr *mgr, const struct role_ctx *role, enum mgr_cap_point point,
		 uint16_t port_idx, struct rte_mbuf *const *pkts, unsigned int n)
{
	int r = role_index(mgr, role);
	uint64_t now = rte_rdtsc();

	for (unsigned int i = 0; i < CAP_MAX; i++) {
		struct capture *c = &caps[i];

		if (!cap_wants(c, point) || c->port != port_idx)
			continue;
		for (unsigned int off = 0; off < n; off += CAP_CHUNK) {
			struct rte_mbuf *sel[CAP_CHUNK];
			uint16_t idx[CAP_CHUNK];
			unsigned int k = RTE_MIN(n - off, (unsigned int)CAP_CHUNK);

			for (unsigned int j = 0; j < k; j++) {
				sel[j] = pkts[off + j];
				idx[j] = (uint16_t)(off + j);
			}
			c->counts[r].seen_pkts += k;
			cap_copy(c, r, sel, idx, k, now, point == MGR_CAP_PORT_TX);
		}
	}
}

void
mgr_capture_nf(struct mgr *mgr, const struct role_ctx *role, enum mgr_cap_point point,
	       const struct mgr_nf *nf, struct rte_mbuf *const *pkts, unsigned int n)
{
	int r = role_index(mgr, role);
	uint64_t now = rte_rdtsc();

	for (unsigned int i = 0; i < CAP_MAX; i++) {
		struct capture *c = &caps[i];

		if (!cap_wants(c, point) || (c->nf_id >= 0 && (uint32_t)c->nf_id != nf->id) ||
		    (c->service >= 0 && c->service != nf->service))
			continue;
		for (unsigned int off = 0; off < n; off += CAP_CHUNK) {
			struct rte_mbuf *sel[CAP_CHUNK];
			uint16_t idx[CAP_CHUNK];
			unsigned int lim = RTE_MIN(n - off, (unsigned int)CAP_CHUNK), k = 0;

			/* A hop of a chain: the packet's metadata says which. An NF
			 * may have scribbled over it; it is only compared here. */
			for (unsigned int j = 0; j < lim; j++) {
				const struct sq_pkt_meta *meta = sq_pkt_meta(pkts[off + j]);

				if (c->chain < 0 || (meta->chain == (uint32_t)c->chain &&
						     meta->hop == (uint32_t)c->hop)) {
					idx[k] = (uint16_t)(off + j);
					sel[k++] = pkts[off + j];
				}
			}
			c->counts[r].seen_pkts += k;
			if (k > 0)
				cap_copy(c, r, sel, idx, k, now, point == MGR_CAP_NF_IN);
		}
	}
}

/* ------------------------------------------------------------------ pcapng */

#define PCAPNG_SHB 0x0A0D0D0Au
#define PCAPNG_IDB 0x00000001u
#define PCAPNG_EPB 0x00000006u
#define PCAPNG_ISB 0x00000005u

static void
buf_put(struct capture *c, const void *p, size_t len)
{
	if (len == 0) /* an empty option: p may be NULL, which memcpy may not take */
		return;
	memcpy(c->buf + c->buf_len, p, len);
	c->buf_len += len;
}

static void
buf_u32(struct capture *c, uint32_t v)
{
	buf_put(c, &v, sizeof(v));
}

static void
buf_pad(struct capture *c)
{
	static const uint8_t zero[4];

	buf_put(c, zero, (4 - c->buf_len % 4) % 4);
}

static void
opt_put(struct capture *c, uint16_t code, const void *val, uint16_t len)
{
	buf_put(c, &code, 2);
	buf_put(c, &len, 2);
	buf_put(c, val, len);
	buf_pad(c);
}

static void
opt_str(struct capture *c, uint16_t code, const char *s)
{
	size_t len = strlen(s);

	if (len > 0)
		opt_put(c, code, s, (uint16_t)RTE_MIN(len, (size_t)0xfff0));
}

static void
opt_u64(struct capture *c, uint16_t code, uint64_t v)
{
	opt_put(c, code, &v, 8);
}

/* A timestamp as pcapng splits it: high word first. */
static void
opt_ts(struct capture *c, uint16_t code, uint64_t ns)
{
	uint32_t v[2] = {(uint32_t)(ns >> 32), (uint32_t)ns};

	opt_put(c, code, v, 8);
}

static size_t
block_begin(struct capture *c, uint32_t type)
{
	size_t at = c->buf_len;

	buf_u32(c, type);
	buf_u32(c, 0); /* length, filled by block_end */
	return at;
}

static void
block_end(struct capture *c, size_t at)
{
	uint32_t len;

	opt_put(c, 0, NULL, 0); /* opt_endofopt */
	len = (uint32_t)(c->buf_len - at + 4);
	memcpy(c->buf + at + 4, &len, 4);
	buf_u32(c, len);
}

static void
write_headers(struct capture *c)
{
	struct utsname u;
	char os[160], appl[64], comment[CAP_DESCR_LEN + CAP_FILTER_LEN + 32];
	uint16_t link[2] = {1 /* LINKTYPE_ETHERNET */, 0};
	uint8_t tsresol = 9; /* nanoseconds */
	uint16_t major_minor[2] = {1, 0};
	int64_t section_len = -1;
	uint32_t magic = 0x1A2B3C4D;
	size_t at;

	if (uname(&u) == 0)
		snprintf(os, sizeof(os), "%s %s", u.sysname, u.release);
	else
		snprintf(os, sizeof(os), "Linux");
	snprintf(appl, sizeof(appl), "squall-mgr %s", SQ_VERSION);
	snprintf(comment, sizeof(comment), "%s%s%s", c->descr, c->filter_str[0] ? "; filter: " : "",
		 c->filter_str);
	at = block_begin(c, PCAPNG_SHB);
	buf_u32(c, magic);
	buf_put(c, major_minor, 4);
	buf_put(c, &section_len, 8);
	opt_str(c, 1, comment);
	opt_str(c, 3, os);
	opt_str(c, 4, appl);
	block_end(c, at);

	at = block_begin(c, PCAPNG_IDB);
	buf_put(c, link, 4);
	buf_u32(c, c->snaplen);
	opt_str(c, 2, c->name);  /* if_name */
	opt_str(c, 3, c->descr); /* if_description */
	opt_put(c, 9, &tsresol, 1);
	if (c->filter_str[0]) {
		char f[CAP_FILTER_LEN + 1];

		f[0] = 0; /* the filter is a libpcap expression */
		memcpy(f + 1, c->filter_str, strlen(c->filter_str));
		opt_put(c, 11, f, (uint16_t)(strlen(c->filter_str) + 1));
	}
	opt_str(c, 1, comment);
	block_end(c, at);
}

static uint64_t
tsc_to_ns(const struct capture *c, uint64_t tsc)
{
	return c->start_ns + (uint64_t)((double)(tsc - c->start_tsc) * cap_ns_per_tsc);
}

static void
write_epb(struct capture *c, const struct rte_mbuf *m)
{
	const struct cap_priv *priv = rte_mbuf_to_priv((struct rte_mbuf *)(uintptr_t)m);
	uint64_t ts = tsc_to_ns(c, priv->tsc);
	/* epb_flags direction: in for what arrives at the point (port rx, an
	 * NF's rx ring), out for what leaves it. */
	uint32_t flags = (c->point == MGR_CAP_PORT_RX || c->point == MGR_CAP_NF_IN) ? 1 : 2;
	size_t at = block_begin(c, PCAPNG_EPB);

	buf_u32(c, 0); /* interface 0: the capture's only one */
	buf_u32(c, (uint32_t)(ts >> 32));
	buf_u32(c, (uint32_t)ts);
	buf_u32(c, m->pkt_len);
	buf_u32(c, priv->orig_len);
	for (const struct rte_mbuf *s = m; s != NULL; s = s->next)
		buf_put(c, rte_pktmbuf_mtod(s, const void *), s->data_len);
	buf_pad(c);
	opt_put(c, 2, &flags, 4);
	block_end(c, at);
}

static void
cap_totals(const struct capture *c, struct cap_counts *t)
{
	memset(t, 0, sizeof(*t));
	for (int r = 0; r < 2; r++) {
		t->seen_pkts += c->counts[r].seen_pkts;
		t->matched_pkts += c->counts[r].matched_pkts;
		t->copied_pkts += c->counts[r].copied_pkts;
		t->ring_full_pkts += c->counts[r].ring_full_pkts;
		t->pool_empty_pkts += c->counts[r].pool_empty_pkts;
		t->refused_pkts += c->counts[r].refused_pkts;
		t->filter_tsc += c->counts[r].filter_tsc;
		t->copy_tsc += c->counts[r].copy_tsc;
	}
}

static void
write_isb(struct capture *c)
{
	struct cap_counts t;
	char comment[160];
	size_t at;

	cap_totals(c, &t);
	snprintf(comment, sizeof(comment),
		 "squall capture %u ended: %s; copies lost: %" PRIu64 " ring full, %" PRIu64
		 " pool empty",
		 c->id, c->end_reason, t.ring_full_pkts, t.pool_empty_pkts);
	at = block_begin(c, PCAPNG_ISB);
	buf_u32(c, 0);
	buf_u32(c, (uint32_t)(c->end_ns >> 32));
	buf_u32(c, (uint32_t)c->end_ns);
	opt_str(c, 1, comment);
	opt_ts(c, 2, c->start_ns);
	opt_ts(c, 3, c->end_ns);
	opt_u64(c, 4, t.seen_pkts);                          /* isb_ifrecv */
	opt_u64(c, 5, t.ring_full_pkts + t.pool_empty_pkts); /* isb_ifdrop */
	opt_u64(c, 6, t.matched_pkts);                       /* isb_filteraccept */
	block_end(c, at);
}

/* Write out the buffer. @return 0, -EPIPE (reader gone, or an error), or
 * -ETIMEDOUT (a stopping capture whose reader stopped reading). */
static int
buf_flush(struct capture *c)
{
	size_t off = 0;
	uint64_t stall_ms = 0;

	while (off < c->buf_len) {
		ssize_t w = write(c->fd, c->buf + off, c->buf_len - off);

		if (w > 0) {
			off += (size_t)w;
			stall_ms = 0;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			c->buf_len = 0;
			return -EPIPE;
		}
		/* The reader is slow: wait for it (the ring fills meanwhile and
		 * copies are dropped, counted), but not forever once stopping. */
		struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};

		poll(&pfd, 1, CAP_WRITE_POLL_MS);
		stall_ms += CAP_WRITE_POLL_MS;
		if ((atomic_load(&c->stop_req) || atomic_load(&cap_roles_stopped)) &&
		    stall_ms >= CAP_STALL_MS) {
			c->buf_len = 0;
			return -ETIMEDOUT;
		}
	}
	c->buf_len = 0;
	return 0;
}

/* ------------------------------------------------------------------ control */

static uint64_t
realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
update_points(void)
{
	uint32_t pts = 0;

	for (unsigned int i = 0; i < CAP_MAX; i++)
		if (atomic_load(&caps[i].live))
			pts |= 1u << caps[i].point;
	__atomic_store_n(&mgr_capture_points, pts, __ATOMIC_SEQ_CST);
}

/* Wait until no role can still be inside a hook that saw the capture live:
 * each role counts its rounds, and a round that ends after we looked began
 * after the capture stopped being live. */
static void
wait_roles_quiet(void)
{
	uint64_t rx0 = atomic_load(&cap_mgr->rx_rounds), tx0 = atomic_load(&cap_mgr->tx_rounds);

	while (!atomic_load(&cap_roles_stopped)) {
		if (atomic_load(&cap_mgr->rx_rounds) > rx0 + 1 &&
		    atomic_load(&cap_mgr->tx_rounds) > tx0 + 1)
			return;
		usleep(100);
	}
}

/* A direct chain's NFs hand packets to each other, past the manager's
 * hooks: while a capture of an NF point of one runs, the hop before it (or
 * the hop itself, for what it returns) hands them to the manager instead
 * (mgr/lane.h). Under cap_lock. */
static void
hold_direct(const struct capture *c, int delta)
{
	if (c->point == MGR_CAP_NF_IN || c->point == MGR_CAP_NF_OUT)
		mgr_lane_hold_direct(cap_mgr, c->service, c->nf_id, c->point == MGR_CAP_NF_IN,
				     delta);
}

static void
end_capture(struct capture *c, const char *reason, bool can_write)
{
	struct rte_mbuf *m[64];
	unsigned int n;
	uint64_t lost = 0;
	int ret = can_write ? 0 : -EPIPE;

	if (c->end_reason[0] == '\0')
		snprintf(c->end_reason, sizeof(c->end_reason), "%s", reason);
	atomic_store(&c->state, CAP_ENDING);
	pthread_mutex_lock(&cap_lock);
	atomic_store(&c->live, false);
	update_points();
	hold_direct(c, -1);
	pthread_mutex_unlock(&cap_lock);
	wait_roles_quiet();
	/* What is still on the ring was copied while live: write it, within
	 * the count; a reader gone or stuck loses it (counted at the end). */
	while ((n = rte_ring_sc_dequeue_burst(c->ring, (void **)m, RTE_DIM(m), NULL)) > 0) {
		for (unsigned int i = 0; i < n; i++) {
			if (ret == 0 && (c->max_pkts == 0 || c->written_pkts < c->max_pkts)) {
				if (c->buf_len + m[i]->pkt_len + 64 > CAP_BUF_BYTES)
					ret = buf_flush(c);
				if (ret == 0) {
					write_epb(c, m[i]);
					c->written_pkts++;
					c->written_bytes += m[i]->pkt_len;
					continue;
				}
			}
			if (ret != 0)
				lost++;
			else
				c->past_count_pkts++;
		}
		rte_pktmbuf_free_bulk(m, n);
	}
	c->end_ns = realtime_ns();
	if (ret == 0) {
		write_isb(c);
		buf_flush(c);
	}
	c->lost_at_end_pkts += lost;
	close(c->fd);
	c->fd = -1;
	rte_ring_free(c->ring);
	c->ring = NULL;
	if (c->filter != NULL)
		rte_bpf_destroy(c->filter);
	c->filter = NULL;
	c->filter_jit = NULL;
	free(c->buf);
	c->buf = NULL;
	MGR_LOG(NOTICE, "capture %u (%s) ended: %s, %" PRIu64 " packets written\n", c->id, c->name,
		c->end_reason, c->written_pkts);
	atomic_store(&c->state, CAP_DONE);
}

/* Where the writer runs. writer=share (the default): on the manager's
 * core, at nice 10 in 100 us slices (EEVDF's custom slice, Linux 6.12+): up
 * to a tenth of that core, whose stalls the ports' rx rings absorb
 * (thousands of descriptors), where on the NFs' core, where DPDK puts control
 * threads, each would fill an NF's rx ring (1,024 slots, 100 us at 10 Mpps).
 * writer=idle: SCHED_IDLE on the NFs' core, running only when no NF wants
 * it and yielding after 50 us of writing (an NF's batch-budget yield would
 * otherwise hand it a whole slice): it never costs an NF a packet, but under
 * steady traffic a sleep-mode NF spins between bursts and it gets little, and
 * a busy core can starve it (the capture then ends only by its stop or the
 * manager's). docs/capture.md has the numbers. */
static void
writer_sched(const struct capture *c)
{
	/* (glibc has no struct sched_attr; the kernel's, <linux/sched/types.h>,
	 * clashes with <sched.h>) */
	struct {
		uint32_t size, sched_policy;
		uint64_t sched_flags;
		int32_t sched_nice;
		uint32_t sched_priority;
		uint64_t sched_runtime, sched_deadline, sched_period;
	} attr = {
		.size = sizeof(attr),
		.sched_policy = SCHED_OTHER,
		.sched_nice = CAP_WRITER_NICE,
		.sched_runtime = CAP_WRITER_SLICE_NS,
	};
	struct sched_param sp = {.sched_priority = 0};
	rte_cpuset_t cpus;

	if (!c->writer_share) {
		if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
			MGR_LOG(DEBUG, "capture writer: SCHED_IDLE: %s\n", strerror(errno));
		return;
	}
	/* On the manager's core, not the NFs': a stall there is absorbed by
	 * the ports' rx rings (thousands of descriptors), one of an NF's core
	 * fills an NF's rx ring (1,024 slots, 100 us at 10 Mpps). */
	CPU_ZERO(&cpus);
	CPU_SET(rte_lcore_to_cpu_id((int)rte_get_main_lcore()), &cpus);
	if (pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus) != 0)
		MGR_LOG(DEBUG, "capture writer: affinity: %s\n", strerror(errno));
	if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0 &&
	    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), CAP_WRITER_NICE) < 0)
		MGR_LOG(DEBUG, "capture writer: setpriority: %s\n", strerror(errno));
}

static void *
writer_main(void *arg)
{
	struct capture *c = arg;
	uint64_t deadline = c->duration_ns ? c->start_ns + c->duration_ns : 0;
	struct rte_mbuf *m[CAP_WRITER_BATCH];
	uint32_t idle_us = CAP_WRITER_IDLE_US;
	uint64_t run_max_tsc = rte_get_tsc_hz() / 1000000 * CAP_WRITER_RUN_US,
		 run_tsc = rte_rdtsc();
	const char *reason = NULL;

	/* (started by a command, at its SCHED_FIFO: a writer that keeps up
	 * with a full port must not take the NFs' core from them) */
	mgr_ctlprio_normal_self();
	char why[96];
	int ret;

	writer_sched(c);
	write_headers(c);
	ret = buf_flush(c);
	while (reason == NULL && ret == 0) {
		unsigned int n =
			rte_ring_sc_dequeue_burst(c->ring, (void **)m, CAP_WRITER_BATCH, NULL);

		for (unsigned int i = 0; i < n; i++) {
			if (c->max_pkts != 0 && c->written_pkts >= c->max_pkts) {
				c->past_count_pkts++;
				continue;
			}
			if (c->buf_len + m[i]->pkt_len + 64 > CAP_BUF_BYTES) {
				ret = buf_flush(c);
				if (ret < 0)
					break;
			}
			write_epb(c, m[i]);
			c->written_pkts++;
			c->written_bytes += m[i]->pkt_len;
		}
		if (n > 0)
			rte_pktmbuf_free_bulk(m, n);
		if (ret < 0)
			break;
		/* After a stretch of writing, not after every batch: each yield
		 * of a SCHED_IDLE thread pushes its next turn far back (EEVDF
		 * moves its deadline by a slice at its tiny weight), so a
		 * yield per batch starved a capture for minutes on a busy core. */
		if (n > 0 && !c->writer_share && rte_rdtsc() - run_tsc > run_max_tsc) {
			sched_yield();
			run_tsc = rte_rdtsc();
		}

		if (c->max_pkts != 0 && c->written_pkts >= c->max_pkts)
			reason = "count reached";
		else if (atomic_load(&c->stop_req))
			reason = "stopped";
		else if (atomic_load(&cap_roles_stopped))
			reason = "manager stopping";
		else if (deadline != 0 && realtime_ns() >= deadline)
			reason = "duration reached";
		if (n == 0 || reason != NULL) {
			/* Idle or done: what is buffered goes out now, so a live
			 * reader (tshark -r -) sees packets as they come. */
			ret = buf_flush(c);
			/* An idle writer wakes less and less often (1 ms, doubling
			 * to 4 ms): its wakeups preempt the NFs of this core. Not
			 * longer: a ring of 4096 copies fills in 4 ms at 1 Mpps
			 * once traffic comes back (with 32 ms, copies were lost
			 * at each start of traffic). */
			if (n == 0 && reason == NULL && ret == 0) {
				usleep(idle_us);
				run_tsc = rte_rdtsc();
				idle_us = RTE_MIN(idle_us * 2, CAP_WRITER_IDLE_MAX_US);
			}
		}
		if (n > 0)
			idle_us = CAP_WRITER_IDLE_US;
	}
	if (reason == NULL) {
		snprintf(why, sizeof(why), "%s",
			 ret == -ETIMEDOUT ? "reader stopped reading"
					   : "reader gone (write failed)");
		reason = why;
	}
	end_capture(c, reason, ret == 0);
	return NULL;
}

/* ------------------------------------------------------------------ telemetry */

static int
port_index(const char *s)
{
	char *end;
	unsigned long v;

	for (uint16_t p = 0; p < cap_mgr->n_ports; p++)
		if (strcmp(cap_mgr->ports[p].name, s) == 0)
			return p;
	v = strtoul(s, &end, 10);
	if (*s != '\0' && *end == '\0' && v < cap_mgr->n_ports)
		return (int)v;
	return -1;
}

static int
chain_index(const char *s)
{
	for (uint16_t i = 0; i < cap_mgr->cfg->n_chains; i++)
		if (strcmp(cap_mgr->cfg->chains[i].name, s) == 0)
			return i;
	return -1;
}

static bool
parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v > max)
		return false;
	*out = v;
	return true;
}

struct start_args {
	const char *point, *port, *chain, *hop, *service, *nf, *path, *filter;
	uint64_t count, duration_ms, snaplen, ring;
	bool share; /* writer=share */
};

/* KEY=VALUE,...; filter= takes the rest of the line. */
static const char *
parse_start(char *buf, struct start_args *a)
{
	char *p = buf;

	while (p != NULL && *p != '\0') {
		char *key = p, *val, *comma;

		val = strchr(p, '=');
		if (val == NULL)
			return "expected KEY=VALUE";
		*val++ = '\0';
		if (strcmp(key, "filter") == 0) {
			a->filter = val;
			break;
		}
		comma = strchr(val, ',');
		if (comma != NULL)
			*comma++ = '\0';
		p = comma;
		if (strcmp(key, "point") == 0)
			a->point = val;
		else if (strcmp(key, "port") == 0)
			a->port = val;
		else if (strcmp(key, "chain") == 0)
			a->chain = val;
		else if (strcmp(key, "hop") == 0)
			a->hop = val;
		else if (strcmp(key, "service") == 0)
			a->service = val;
		else if (strcmp(key, "nf") == 0)
			a->nf = val;
		else if (strcmp(key, "path") == 0)
			a->path = val;
		else if (strcmp(key, "count") == 0) {
			if (!parse_u64(val, UINT64_MAX, &a->count))
				return "count: expected packets";
		} else if (strcmp(key, "duration_ms") == 0) {
			if (!parse_u64(val, 86400000ull * 365, &a->duration_ms))
				return "duration_ms: expected milliseconds";
		} else if (strcmp(key, "snaplen") == 0) {
			if (!parse_u64(val, CAP_SNAPLEN_MAX, &a->snaplen) || a->snaplen == 0)
				return "snaplen: expected 1..262144";
		} else if (strcmp(key, "writer") == 0) {
			if (strcmp(val, "idle") != 0 && strcmp(val, "share") != 0)
				return "writer: expected idle or share";
			a->share = strcmp(val, "share") == 0;
		} else if (strcmp(key, "ring") == 0) {
			if (!parse_u64(val, CAP_RING_MAX, &a->ring) || a->ring < 2 ||
			    !rte_is_power_of_2((uint32_t)a->ring))
				return "ring: expected a power of 2, 2..65536";
		} else
			return "unknown key (point port chain hop service nf path count "
			       "duration_ms snaplen ring writer filter)";
	}
	return NULL;
}

/* The selection: which packets of the point, and the names for the file. */
static const char *
select_point(struct capture *c, const struct start_args *a)
{
	const struct sq_config *cfg = cap_mgr->cfg;
	const char *name = cfg->name, *dir, *verb;

	c->nf_id = c->service = c->chain = c->hop = -1;
	if (a->point == NULL)
		return "point= is required (port_rx port_tx nf_in nf_out)";
	for (c->point = 0; c->point < MGR_CAP_POINTS; c->point++)
		if (strcmp(a->point, cap_point_names[c->point]) == 0)
			break;
	if (c->point == MGR_CAP_POINTS)
		return "point: expected port_rx, port_tx, nf_in or nf_out";
	if (c->point == MGR_CAP_PORT_RX || c->point == MGR_CAP_PORT_TX) {
		int p;

		if (a->port == NULL || a->chain || a->hop || a->service || a->nf)
			return "a port point takes port= and no chain/hop/service/nf";
		p = port_index(a->port);
		if (p < 0)
			return "no such port";
		c->port = (uint16_t)p;
		snprintf(c->name, sizeof(c->name), "%s:port:%s:%s", name, cap_mgr->ports[p].name,
			 c->point == MGR_CAP_PORT_RX ? "rx" : "tx");
		snprintf(c->descr, sizeof(c->descr), "squall-mgr %s: frames port %s %s", name,
			 cap_mgr->ports[p].name,
			 c->point == MGR_CAP_PORT_RX ? "received" : "was given to send");
		return NULL;
	}
	dir = c->point == MGR_CAP_NF_IN ? "in" : "out";
	verb = c->point == MGR_CAP_NF_IN ? "receive" : "return";

	if (a->port != NULL || (a->chain != NULL) != (a->hop != NULL) ||
	    (a->chain != NULL) + (a->service != NULL) + (a->nf != NULL) != 1)
		return "an nf point takes one of chain=NAME,hop=N or service=NAME or nf=ID";
	if (a->chain != NULL) {
		uint64_t hop;
		int ch = chain_index(a->chain);

		if (ch < 0)
			return "no such chain";
		if (!parse_u64(a->hop, UINT16_MAX, &hop) || hop >= cfg->chains[ch].n_hops)
			return "hop: expected 0 .. the chain's hops - 1";
		c->chain = ch;
		c->hop = (int32_t)hop;
		c->service = cfg->chains[ch].services[hop];
		snprintf(c->name, sizeof(c->name), "%s:chain:%s:hop%d:%s", name, a->chain, c->hop,
			 dir);
		snprintf(c->descr, sizeof(c->descr),
			 "squall-mgr %s: packets the NFs of chain %s hop %d (service %s) %s", name,
			 a->chain, c->hop, cfg->services[c->service].name, verb);
	} else if (a->service != NULL) {
		int s = sq_config_service_index(cfg, a->service);

		if (s < 0)
			return "no such service";
		c->service = s;
		snprintf(c->name, sizeof(c->name), "%s:service:%s:%s", name, a->service, dir);
		snprintf(c->descr, sizeof(c->descr),
			 "squall-mgr %s: packets the NFs of service %s %s", name, a->service, verb);
	} else {
		uint64_t id;
		const struct mgr_nf *nf;

		if (!parse_u64(a->nf, UINT32_MAX, &id) || id >= cap_mgr->n_nfs)
			return "no such nf id";
		nf = &cap_mgr->nfs[id];
		c->nf_id = (int32_t)id;
		snprintf(c->name, sizeof(c->name), "%s:nf:%u:%s#%u:%s", name, nf->id,
			 cfg->services[nf->service].name, nf->instance, dir);
		snprintf(c->descr, sizeof(c->descr), "squall-mgr %s: packets NF %u (%s#%u) %ss",
			 name, nf->id, cfg->services[nf->service].name, nf->instance, verb);
	}
	return NULL;
}

static const char *
load_filter(struct capture *c, const char *expr, char *err, size_t err_len)
{
	struct bpf_program prog;
	struct rte_bpf_jit jit;

	snprintf(c->filter_str, sizeof(c->filter_str), "%s", expr);
	if (capfilter_compile(expr, c->snaplen, &prog, err, err_len) != 0)
		return err;
	c->filter = capfilter_load(&prog, err, err_len);
	pcap_freecode(&prog);
	if (c->filter == NULL)
		return err;
	if (rte_bpf_get_jit(c->filter, &jit) == 0 && jit.func != NULL)
		c->filter_jit = jit.func;
	return NULL;
}

static int
capture_start(const char *params, struct rte_tel_data *d)
{
	static char err[CAP_FILTER_LEN + 64];
	struct start_args a = {.snaplen = CAP_SNAPLEN_MAX, .ring = CAP_RING_DEFAULT, .share = true};
	struct capture *c = NULL;
	char buf[1024], ring_name[RTE_RING_NAMESIZE];
	const char *why;
	pthread_t tid;
	int slot = -1;

	if (params == NULL || snprintf(buf, sizeof(buf), "%s", params) >= (int)sizeof(buf))
		return mgr_tel_error(d, "expected /squall/capture_start,point=...,path=/ABS[,...]");
	why = parse_start(buf, &a);
	if (why != NULL)
		return mgr_tel_error(d, why);
	if (a.path == NULL || a.path[0] != '/')
		return mgr_tel_error(d, "path= is required, absolute (a FIFO or a file)");
	if (cap_mgr == NULL || atomic_load(&cap_roles_stopped))
		return mgr_tel_error(d, "the manager is not running");

	pthread_mutex_lock(&cap_lock);
	/* A slot that is free, else the oldest finished one. */
	for (int i = 0; i < CAP_MAX && slot < 0; i++)
		if (atomic_load(&caps[i].state) == CAP_FREE)
			slot = i;
	for (int i = 0; i < CAP_MAX && slot < 0; i++)
		if (atomic_load(&caps[i].state) == CAP_DONE)
			slot = i;
	for (int i = 0; slot >= 0 && i < CAP_MAX; i++)
		if (atomic_load(&caps[i].state) == CAP_DONE && caps[i].id < caps[slot].id &&
		    atomic_load(&caps[slot].state) == CAP_DONE)
			slot = i;
	if (slot < 0) {
		pthread_mutex_unlock(&cap_lock);
		return mgr_tel_error(d, "too many captures running (16)");
	}
	c = &caps[slot];
	/* Reserve the slot; the roles never look at a slot that is not live. */
	atomic_store(&c->state, CAP_ENDING);
	pthread_mutex_unlock(&cap_lock);

	memset(&c->counts, 0, sizeof(c->counts));
	c->filter = NULL;
	c->filter_jit = NULL;
	c->filter_str[0] = c->end_reason[0] = '\0';
	c->written_pkts = c->written_bytes = c->past_count_pkts = c->lost_at_end_pkts = 0;
	c->snaplen = (uint32_t)a.snaplen;
	c->writer_share = a.share;
	c->max_pkts = a.count;
	c->duration_ns = a.duration_ms * 1000000ull;
	atomic_store(&c->stop_req, false);
	why = select_point(c, &a);
	if (why == NULL && a.filter != NULL && a.filter[0] != '\0')
		why = load_filter(c, a.filter, err, sizeof(err));
	if (why == NULL && cap_pool == NULL) {
		cap_pool = rte_pktmbuf_pool_create(
			"sq_capture", CAP_POOL_MBUFS, CAP_POOL_CACHE, sizeof(struct cap_priv),
			RTE_MBUF_DEFAULT_BUF_SIZE, rte_lcore_to_socket_id(rte_get_main_lcore()));
		if (cap_pool == NULL)
			why = "cannot create the capture pool (memory)";
	}
	if (why == NULL) {
		c->buf = malloc(CAP_BUF_BYTES);
		c->buf_len = 0;
		snprintf(ring_name, sizeof(ring_name), "sq_cap%u", cap_next_id);
		/* Both roles may produce (rx and tx each flush to NFs and ports). */
		c->ring = rte_ring_create(ring_name, (unsigned int)a.ring, SOCKET_ID_ANY,
					  RING_F_SC_DEQ | RING_F_EXACT_SZ);
		if (c->buf == NULL || c->ring == NULL)
			why = "out of memory";
	}
	if (why == NULL) {
		/* Non-blocking open: a FIFO with no reader fails (ENXIO) rather
		 * than hang the telemetry thread. */
		snprintf(c->path, sizeof(c->path), "%s", a.path);
		c->fd = open(a.path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0644);
		if (c->fd < 0) {
			snprintf(err, sizeof(err), "%s: %s%s", a.path, strerror(errno),
				 errno == ENXIO ? " (a FIFO with no reader)" : "");
			why = err;
		}
	}
	if (why != NULL) {
		if (c->filter != NULL)
			rte_bpf_destroy(c->filter);
		c->filter = NULL;
		rte_ring_free(c->ring);
		c->ring = NULL;
		free(c->buf);
		c->buf = NULL;
		atomic_store(&c->state, CAP_FREE);
		return mgr_tel_error(d, why);
	}
	c->id = cap_next_id++;
	c->start_ns = realtime_ns();
	c->start_tsc = rte_rdtsc();
	atomic_store(&c->state, CAP_RUNNING);
	if (rte_ctrl_thread_create(&tid, "sq-capture", NULL, writer_main, c) != 0) {
		close(c->fd);
		rte_ring_free(c->ring);
		c->ring = NULL;
		free(c->buf);
		c->buf = NULL;
		atomic_store(&c->state, CAP_FREE);
		return mgr_tel_error(d, "cannot start the writer thread");
	}
	pthread_detach(tid);
	pthread_mutex_lock(&cap_lock);
	hold_direct(c, 1);
	atomic_store_explicit(&c->live, true, memory_order_release);
	update_points();
	pthread_mutex_unlock(&cap_lock);
	MGR_LOG(NOTICE, "capture %u (%s) to %s%s%s\n", c->id, c->name, c->path,
		c->filter_str[0] ? ", filter " : "", c->filter_str);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "id", c->id);
	rte_tel_data_add_dict_string(d, "name", c->name);
	rte_tel_data_add_dict_string(d, "path", c->path);
	return 0;
}

/* DPDK telemetry runs one thread per client: starts come one at a time (the
 * capture ids, the ring names and the lazily created pool). */
static int
cmd_capture_start(const char *cmd, const char *params, struct rte_tel_data *d)
{
	static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
	int ret;

	(void)cmd;
	pthread_mutex_lock(&start_lock);
	ret = capture_start(params, d);
	pthread_mutex_unlock(&start_lock);
	return ret;
}

static struct capture *
find_capture(const char *params)
{
	uint64_t id;

	if (params == NULL || !parse_u64(params, UINT32_MAX, &id))
		return NULL;
	for (int i = 0; i < CAP_MAX; i++)
		if (caps[i].id == id && atomic_load(&caps[i].state) != CAP_FREE)
			return &caps[i];
	return NULL;
}

static int
cmd_capture_stop(const char *cmd, const char *params, struct rte_tel_data *d)
{
	struct capture *c = find_capture(params);

	(void)cmd;
	if (c == NULL)
		return mgr_tel_error(d, "expected /squall/capture_stop,ID of a capture");
	atomic_store(&c->stop_req, true);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "id", c->id);
	rte_tel_data_add_dict_string(d, "state", cap_state_names[atomic_load(&c->state)]);
	return 0;
}

static int
cmd_captures(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	for (int i = 0; i < CAP_MAX; i++) {
		struct capture *c = &caps[i];
		uint32_t st = atomic_load(&c->state);
		struct rte_tel_data *e;
		struct cap_counts t;
		char key[16];

		if (st == CAP_FREE || c->id == 0)
			continue;
		e = rte_tel_data_alloc();
		if (e == NULL)
			break;
		cap_totals(c, &t);
		rte_tel_data_start_dict(e);
		rte_tel_data_add_dict_u64(e, "id", c->id);
		rte_tel_data_add_dict_string(e, "state", cap_state_names[st]);
		rte_tel_data_add_dict_string(e, "point", cap_point_names[c->point]);
		rte_tel_data_add_dict_string(e, "name", c->name);
		rte_tel_data_add_dict_string(e, "filter", c->filter_str);
		rte_tel_data_add_dict_string(e, "end_reason", c->end_reason);
		rte_tel_data_add_dict_u64(e, "seen_pkts", t.seen_pkts);
		rte_tel_data_add_dict_u64(e, "matched_pkts", t.matched_pkts);
		rte_tel_data_add_dict_u64(e, "copied_pkts", t.copied_pkts);
		rte_tel_data_add_dict_u64(e, "written_pkts", c->written_pkts);
		rte_tel_data_add_dict_u64(e, "written_bytes", c->written_bytes);
		rte_tel_data_add_dict_u64(e, "dropped_pkts",
					  t.ring_full_pkts + t.pool_empty_pkts +
						  c->lost_at_end_pkts);
		rte_tel_data_add_dict_u64(e, "drop_ring_full_pkts", t.ring_full_pkts);
		rte_tel_data_add_dict_u64(e, "drop_pool_empty_pkts", t.pool_empty_pkts);
		rte_tel_data_add_dict_u64(e, "drop_writer_pkts", c->lost_at_end_pkts);
		rte_tel_data_add_dict_u64(e, "past_count_pkts", c->past_count_pkts);
		rte_tel_data_add_dict_u64(e, "refused_pkts", t.refused_pkts);
		/* the role's time in the filter, and in making copies */
		rte_tel_data_add_dict_u64(e, "filter_ns",
					  (uint64_t)((double)t.filter_tsc * cap_ns_per_tsc));
		rte_tel_data_add_dict_u64(e, "copy_ns",
					  (uint64_t)((double)t.copy_tsc * cap_ns_per_tsc));
		snprintf(key, sizeof(key), "%u", c->id);
		if (rte_tel_data_add_dict_container(d, key, e, 0) < 0)
			rte_tel_data_free(e);
	}
	rte_tel_data_add_dict_u64(d, "pool_mbufs", cap_pool ? cap_pool->size : 0);
	rte_tel_data_add_dict_u64(d, "pool_in_use",
				  cap_pool ? rte_mempool_in_use_count(cap_pool) : 0);
	return 0;
}

int
mgr_capture_init(struct mgr *mgr)
{
	cap_mgr = mgr;
	cap_ns_per_tsc = 1e9 / (double)rte_get_tsc_hz();
	/* Help texts stay under RTE_TEL_MAX_STRING_LEN (128), or DPDK refuses them. */
	if (rte_telemetry_register_cmd(
		    "/squall/capture_start", cmd_capture_start,
		    "Start a capture: point=,port=|chain=,hop=|service=|nf=,"
		    "path=/ABS[,count=,duration_ms=,snaplen=,ring=,writer=][,filter=BPF]") < 0 ||
	    rte_telemetry_register_cmd("/squall/capture_stop", cmd_capture_stop,
				       "End a capture: /squall/capture_stop,ID") < 0 ||
	    rte_telemetry_register_cmd("/squall/captures", cmd_captures,
				       "Every capture with its counters, and the capture pool") < 0)
		return -EINVAL;
	return 0;
}

unsigned int
mgr_capture_free(struct mgr *mgr)
{
	unsigned int in_use = 0;

	(void)mgr;
	if (cap_mgr == NULL)
		return 0;
	atomic_store(&cap_roles_stopped, true);
	/* Each writer sees cap_roles_stopped, writes what it holds and ends;
	 * one whose reader stopped reading gives up after CAP_STALL_MS. */
	for (int i = 0; i < CAP_MAX; i++)
		while (atomic_load(&caps[i].state) == CAP_RUNNING ||
		       atomic_load(&caps[i].state) == CAP_ENDING)
			usleep(1000);
	if (cap_pool != NULL) {
		in_use = rte_mempool_in_use_count(cap_pool);
		if (in_use != 0)
			MGR_LOG(ERR, "%u capture copies not back in the capture pool\n", in_use);
		rte_mempool_free(cap_pool);
		cap_pool = NULL;
	}
	return in_use;
}
